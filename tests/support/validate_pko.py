"""Validates Pulumi Kubernetes Operator Stack documents against the real CRD.

Usage: validate_pko.py CRD.yaml STACKS.yaml
Checks every document against the CRD's openAPIV3Schema (jsonschema) and the CRD's
x-kubernetes-validations rule on the name (at most 42 characters), and that names are
unique. Prints `ok` or the problems; exit 0 when all pass, 1 when not, 77 when the
Python packages it needs are missing (the caller skips).
"""
import sys

try:
    import jsonschema
    import yaml
except ImportError as e:  # pragma: no cover
    print(f"skip: {e}")
    sys.exit(77)

crd = yaml.safe_load(open(sys.argv[1]))
version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1")
schema = version["schema"]["openAPIV3Schema"]
problems = []
names = set()
docs = [d for d in yaml.safe_load_all(open(sys.argv[2])) if d]
for doc in docs:
    name = doc.get("metadata", {}).get("name", "")
    for err in jsonschema.Draft7Validator(schema).iter_errors(doc):
        problems.append(f"{name}: {'/'.join(map(str, err.path))}: {err.message}")
    if len(name) > 42:
        problems.append(f"{name}: Stack name must be no more than 42 characters in length.")
    if name in names:
        problems.append(f"{name}: duplicate name")
    names.add(name)
    if doc.get("apiVersion") != "pulumi.com/v1" or doc.get("kind") != "Stack":
        problems.append(f"{name}: not a pulumi.com/v1 Stack")
if not docs:
    problems.append("no documents")
print("\n".join(problems) if problems else f"ok ({len(docs)} Stacks)")
sys.exit(1 if problems else 0)
