#!/usr/bin/env python3
"""Validates JSON documents against a JSON Schema (draft 2020-12).

Usage: validate_schema.py SCHEMA FILE
  FILE holds one JSON document, or one per line when it is named *.jsonl.
Prints `ok` and exits 0, or each error and exits 1; exits 77 when the jsonschema
module is missing.
"""
import json
import sys

try:
    import jsonschema
except ImportError as e:  # noqa: F841
    print("skip: the python module jsonschema is not installed")
    sys.exit(77)


def main():
    schema_path, data_path = sys.argv[1], sys.argv[2]
    lines = data_path.endswith(".jsonl")
    with open(schema_path) as f:
        schema = json.load(f)
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    with open(data_path) as f:
        text = f.read()
    docs = [json.loads(l) for l in text.splitlines() if l.strip()] if lines else [json.loads(text)]
    bad = 0
    for n, doc in enumerate(docs, 1):
        for err in validator.iter_errors(doc):
            bad += 1
            where = "/".join(str(p) for p in err.absolute_path)
            print(f"document {n}, at /{where}: {err.message}")
    if bad:
        sys.exit(1)
    print(f"ok ({len(docs)} document(s))")


main()
