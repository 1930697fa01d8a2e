#!/usr/bin/env bash
# Provision the Python venv for the reference-SDK interop peer (tests/peers/): a2a-sdk 1.3.0
# and its pins (requirements.txt) in ${CARGO_TARGET_DIR:-<repo>/target}/peers-venv. Prints
# only the venv's python path on stdout (see tests/provision-venv.sh).
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec "$here/../provision-venv.sh" peers "$here/requirements.txt" \
  'a2a.server.routes, a2a.types.a2a_pb2_grpc, grpc, uvicorn, a2a.client'
