# Provisioning helpers shared by scripts/test and scripts/demo (sourced, not run).
#
# Everything comes from the package registries only: Debian/Ubuntu packages with apt-get,
# Node from the npm registry, Python packages from PyPI (tests/*/provision.sh), cargo-fuzz
# from crates.io. Each step prints what it installs and how long it took; a step with
# nothing to do prints nothing and takes milliseconds.

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
target=${CARGO_TARGET_DIR:-$repo/target}
# The name in the messages: scripts/test or scripts/demo.
me=scripts/$(basename "$0")

say() { echo "$me: $*" >&2; }
die() {
  say "error: $*"
  exit 1
}

# `timed LABEL COMMAND...`: runs COMMAND, then prints how long it took under LABEL.
timed() {
  local label=$1 started=$SECONDS
  shift
  "$@" || die "$label failed"
  say "$label took $((SECONDS - started)) s"
}

# Missing Debian packages gathered by the checks, installed at once by install_packages.
packages=()
needs() { packages+=("$@"); }

# A C compiler and the C library's headers: `ring` and `mimalloc` build C code.
check_c_toolchain() {
  if ! printf 'int main(void){return 0;}\n' | cc -x c - -o /dev/null >/dev/null 2>&1; then
    needs gcc libc6-dev
  fi
  # cargo, pip and npm download over TLS.
  [[ -e /etc/ssl/certs/ca-certificates.crt ]] || needs ca-certificates
}

# apt-get install of what the checks found missing; as root, or the exact command to run.
install_packages() {
  ((${#packages[@]})) || return 0
  local wanted="${packages[*]}"
  if ! command -v apt-get >/dev/null 2>&1; then
    die "missing: $wanted (as Debian packages; this is not Debian or Ubuntu: install their equivalents)"
  fi
  if [[ $(id -u) != 0 ]]; then
    die "missing Debian packages; run: sudo apt-get install -y $wanted   (then run $0 again)"
  fi
  say "installing Debian packages: $wanted"
  local started=$SECONDS log
  log=$(mktemp)
  # The package lists of a fresh machine are empty or old; refresh them once. dpkg's
  # hundreds of progress lines go to the log, shown only when something fails.
  if ! { DEBIAN_FRONTEND=noninteractive apt-get update -q \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${packages[@]}"; } >"$log" 2>&1; then
    tail -n 30 "$log" >&2
    rm -f "$log"
    die "apt-get install -y $wanted failed (its last lines are above)"
  fi
  rm -f "$log"
  say "installing Debian packages took $((SECONDS - started)) s"
  packages=()
}
