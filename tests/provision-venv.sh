#!/usr/bin/env bash
# Provision a pinned Python venv for the tests (tests/peers/provision.sh, tests/k8s/provision.sh).
#
#   tests/provision-venv.sh NAME REQUIREMENTS IMPORTS
#
# The venv lives at ${CARGO_TARGET_DIR:-<repo>/target}/NAME-venv and holds the packages of
# REQUIREMENTS; IMPORTS (a Python import list) must import after installing. A stamp file
# records the hash of REQUIREMENTS (and the interpreter version), so a second run is a no-op
# that takes milliseconds. Concurrent runs are serialized with flock when available.
#
# On success the ONLY line printed to stdout is the venv's python path. Progress goes to
# stderr. On failure it prints one line
#   provision.sh: error: <what is missing>
# to stderr and exits non-zero.
set -euo pipefail

[ $# -eq 3 ] || { echo "provision-venv.sh: usage: NAME REQUIREMENTS IMPORTS" >&2; exit 2; }
name="$1"
req="$2"
imports="$3"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
target="${CARGO_TARGET_DIR:-$repo/target}"
venv="$target/$name-venv"
stamp="$venv/.provisioned"

die() { echo "provision.sh: error: $*" >&2; exit 1; }
log() { echo "provision.sh: $*" >&2; }

[ -f "$req" ] || die "missing $req"
command -v python3 >/dev/null 2>&1 \
  || die "python3 not found on PATH: run scripts/test, or as root: apt-get install -y python3 python3-venv"
python3 -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' \
  || die "python3 >= 3.10 required, found $(python3 -V 2>&1)"

hash_of() { python3 -c 'import hashlib,sys; print(hashlib.sha256(open(sys.argv[1],"rb").read()).hexdigest())' "$1"; }
want="$(hash_of "$req") $(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')"

is_ready() { [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; }

if is_ready; then
  echo "$venv/bin/python"
  exit 0
fi

mkdir -p "$target" || die "cannot create $target"
lockfile="$target/$name-venv.lock"
if command -v flock >/dev/null 2>&1; then
  exec 9>"$lockfile"
  flock 9
  # Another process may have finished the job while we waited.
  if is_ready; then
    echo "$venv/bin/python"
    exit 0
  fi
fi

# Installing system packages is scripts/test's job, never a test's: say what to run.
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 \
  || die "python3 has no venv/ensurepip module: run scripts/test, or as root: apt-get install -y python3-venv"

log "creating venv at $venv"
rm -rf "$venv"
python3 -m venv "$venv" >&2 || die "'python3 -m venv $venv' failed"
log "installing $(grep -c '==' "$req") pinned packages of ${req#"$repo"/}"
"$venv/bin/python" -m pip install --disable-pip-version-check --no-input -q -r "$req" >&2 \
  || die "'pip install -r ${req#"$repo"/}' failed (is PyPI reachable?)"
"$venv/bin/python" -c "import $imports" \
  || die "venv at $venv cannot import $imports after install"
echo "$want" > "$stamp"
log "venv ready"
echo "$venv/bin/python"
