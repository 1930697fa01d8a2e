"""Validates Kubernetes manifests offline against the API's JSON schemas (kubernetes-validate).

    python validate.py --versions 1.30,1.37 FILE...

Each FILE holds one or more YAML documents (the output of `kubectl kustomize`, or a manifest).
Prints one JSON object to stdout, for tests/it/manifests.rs to judge:

    {"schema_versions": [every Kubernetes version the package has schemas for],
     "documents": [{"file": FILE, "document": <the document as JSON>,
                    "results": {"1.30": "ok" | "invalid: <where>: <why>" | "no-schema"}}]}

Validation is strict: a field the schema does not know is an error, so a misspelt or misplaced
key fails instead of being ignored by the API server. "no-schema" is a kind the package has no
schema for (custom resources such as ServiceMonitor or HTTPRoute); this script does not decide
whether that is acceptable, the test does. Exits non-zero only when it cannot do its job.
"""

import argparse
import json
import sys

import kubernetes_validate
import yaml
from kubernetes_validate import utils


def check(document, version):
    try:
        kubernetes_validate.validate(document, version, strict=True)
        return "ok"
    except kubernetes_validate.SchemaNotFoundError:
        return "no-schema"
    except kubernetes_validate.ValidationError as e:
        where = ".".join(str(p) for p in e.path) or "(document)"
        return f"invalid: {where}: {e.message}"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--versions", required=True, help="comma-separated, e.g. 1.30,1.37")
    parser.add_argument("files", nargs="+")
    args = parser.parse_args()
    versions = args.versions.split(",")
    known = utils.all_versions()
    for version in versions:
        # The package silently falls back to the nearest older schema set; a version it
        # does not have must be an error, not a quiet substitution.
        if not any(utils.major_minor(k) == version for k in known):
            sys.exit(f"validate.py: no schemas for Kubernetes {version} in kubernetes-validate")
    have = sorted({utils.major_minor(k) for k in known}, key=lambda v: tuple(map(int, v.split("."))))
    out = {"schema_versions": have, "documents": []}
    for name in args.files:
        with open(name, encoding="utf-8") as f:
            for document in yaml.safe_load_all(f):
                if document is None:
                    continue
                results = {v: check(document, v) for v in versions}
                out["documents"].append({"file": name, "document": document, "results": results})
    json.dump(out, sys.stdout, default=str)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
