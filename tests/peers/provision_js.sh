#!/usr/bin/env bash
# Provision the A2A JS SDK peer (tests/peers/js/): `npm ci` of the committed
# package-lock.json into ${CARGO_TARGET_DIR:-<repo>/target}/peers-node.
#
#   tests/peers/provision_js.sh         # install if needed; print the runner path
#   node "$(tests/peers/provision_js.sh)" BASE_URL [--tenant T]
#
# A stamp records the sha256 of package-lock.json and the node version, so a second
# run skips npm (milliseconds). Concurrent runs are serialised with flock.
# Node resolves an ES module's imports from the module's own directory, so the
# scripts (tests/peers/js/*.mjs) are copied beside node_modules on every run
# (atomically: a running script is never seen half-written).
#
# On success the ONLY line printed to stdout is the runner path,
#   <target>/peers-node/client_from_card.mjs
# Progress goes to stderr. On failure one line `provision_js.sh: error: <what>` on
# stderr, exit 1.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
src="$here/js"
target="${CARGO_TARGET_DIR:-$repo/target}"
dir="$target/peers-node"
stamp="$dir/.provisioned"

die() { echo "provision_js.sh: error: $*" >&2; exit 1; }
log() { echo "provision_js.sh: $*" >&2; }

[ -f "$src/package-lock.json" ] || die "missing $src/package-lock.json"
# Installing Node is scripts/test's job, never a test's: say what to run.
get="run scripts/test (it provides Node 20 in target/tools/bin and runs the tests with that first on PATH)"
command -v node >/dev/null 2>&1 || die "node (>= 20) not found on PATH: $get"
command -v npm >/dev/null 2>&1 || die "npm not found on PATH: $get, or as root: apt-get install -y npm"
node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)' \
  || die "Node >= 20 required, found $(node --version) at $(command -v node): $get"

want="$(sha256sum "$src/package-lock.json" | cut -d' ' -f1) node-$(node --version)"
is_ready() { [ -d "$dir/node_modules/@a2a-js/sdk" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; }

mkdir -p "$dir" || die "cannot create $dir"
exec 9>"$target/peers-node.lock"
if command -v flock >/dev/null 2>&1; then
  flock 9
fi

if ! is_ready; then
  log "npm ci into $dir ($(grep -m1 -o '"@a2a-js/sdk": "[^"]*"' "$src/package.json"))"
  rm -rf "$dir/node_modules" "$stamp"
  cp "$src/package.json" "$src/package-lock.json" "$dir/"
  (cd "$dir" && timeout 600 npm ci --no-audit --no-fund --loglevel=error >&2) \
    || die "'npm ci' in $dir failed (is the npm registry reachable?)"
  (cd "$dir" && node --input-type=module -e "import '@a2a-js/sdk/client'; import '@a2a-js/sdk/client/grpc'") >&2 \
    || die "@a2a-js/sdk/client or its gRPC transport (@grpc/grpc-js, @bufbuild/protobuf) cannot be imported after npm ci"
  echo "$want" > "$stamp"
  log "ready"
fi

for script in "$src"/*.mjs; do
  cp "$script" "$dir/.$(basename "$script").tmp.$$"
  mv -f "$dir/.$(basename "$script").tmp.$$" "$dir/$(basename "$script")"
done
echo "$dir/client_from_card.mjs"
