"""Validates an Argo Workflow document against the Argo Workflows JSON schema, strictly.

Usage: validate_argo.py SCHEMA.json WORKFLOW.yaml
Every definition that lists `properties` gets `additionalProperties: false` (as the
tools README says a strict check does), so an unknown key fails. Prints `ok` or the
problems; exit 0 when valid, 1 when not, 77 when a Python package is missing.
"""
import json
import sys

try:
    import jsonschema
    import yaml
except ImportError as e:  # pragma: no cover
    print(f"skip: {e}")
    sys.exit(77)

schema = json.load(open(sys.argv[1]))
for d in schema.get("definitions", {}).values():
    if "properties" in d and "additionalProperties" not in d:
        d["additionalProperties"] = False
root = dict(schema)
root["$ref"] = "#/definitions/io.argoproj.workflow.v1alpha1.Workflow"
docs = [d for d in yaml.safe_load_all(open(sys.argv[2])) if d]
problems = []
for doc in docs:
    for err in jsonschema.Draft7Validator(root).iter_errors(doc):
        problems.append(f"{'/'.join(map(str, err.path))}: {err.message[:300]}")
if not docs:
    problems.append("no documents")
print("\n".join(problems) if problems else "ok")
sys.exit(1 if problems else 0)
