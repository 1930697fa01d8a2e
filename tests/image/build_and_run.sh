#!/usr/bin/env bash
# Builds deploy/Dockerfile as it is and runs the image it makes, on a machine with no
# Docker engine and no reach to image registries (tests/image.rs runs this).
#
# - Bases: two local images made with debootstrap from the configured Debian mirror and
#   `podman import`ed: a builder (Debian with Debian's own rustc and cargo, gcc) and a
#   runtime (minbase Debian with ca-certificates), passed to the Dockerfile as its
#   BUILDER_IMAGE and RUNTIME_IMAGE. They are cached between runs under a name that
#   carries a stamp of their recipe, and rebuilt only when missing.
# - Build: `podman build --isolation chroot` (no daemon, no user namespaces needed). Its
#   layer cache keeps the Dockerfile's dependency layer; its cache mounts keep cargo's
#   registry downloads. Both live in this script's own container storage.
# - Run: `buildah run --isolation chroot` (`podman run` fails here on cgroups) starts
#   `a2a-gateway --demo` inside the built image, sends it SendMessage "hello", and checks
#   the user it runs as and that it wrote nothing to the root filesystem.
#
# Prints `image-test: <phase> <seconds> s` timings and `image-test: result KEY=VALUE`
# lines, which tests/image.rs asserts, then `image-test: PASS`; or `image-test: FAIL
# <why>` and exits 1.
#
# Environment:
#   A2A_IMAGE_TEST_DIR      state: container storage, caches, lock (default
#                           /var/tmp/a2a-gateway-image-test; kept between runs)
#   A2A_IMAGE_TEST_SUITE    Debian suite of both bases (default trixie)
#   A2A_IMAGE_TEST_MIRROR   Debian mirror (default: the first in the machine's apt sources)
#   A2A_IMAGE_TEST_REBUILD  1: rebuild the bases even when cached (e.g. for Debian updates)
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
state=${A2A_IMAGE_TEST_DIR:-/var/tmp/a2a-gateway-image-test}
suite=${A2A_IMAGE_TEST_SUITE:-trixie}
image=localhost/a2a-gateway-test/gateway:test

say() { echo "image-test: $*"; }
fail() {
  say "FAIL $*"
  exit 1
}
result() { say "result $1=$2"; }

# The machine's first Debian mirror, from deb822 sources or a one-line sources.list.
default_mirror() {
  local uri
  uri=$(grep -hs -m1 '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}' | head -n1)
  if [[ -z $uri ]]; then
    uri=$(grep -hs -m1 '^deb ' /etc/apt/sources.list | awk '{print $2}' | head -n1)
  fi
  echo "${uri:-http://deb.debian.org/debian}"
}
mirror=${A2A_IMAGE_TEST_MIRROR:-$(default_mirror)}

missing=()
for tool in podman buildah debootstrap flock tar sha256sum; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if ((${#missing[@]})); then
  fail "missing tools: ${missing[*]} (run scripts/test, or as root: apt-get install -y podman buildah debootstrap)"
fi
if [[ $(id -u) != 0 ]]; then
  fail "needs root: debootstrap and chroot isolation do (CI and the developers' machines run as root)"
fi

mkdir -p "$state/tmp"
# One run at a time per machine: the bases, the storage and the cache mounts are shared.
exec 9>"$state/lock"
flock 9

# A private container storage and configuration: what this script builds, caches and
# prunes touches no other image on the machine.
cat >"$state/storage.conf" <<EOF
[storage]
driver = "overlay"
graphroot = "$state/storage"
runroot = "$state/run"
EOF
# default_ulimits = []: the packaged default sets RLIMIT_NOFILE values that this
# machine's sandbox refuses, which fails every RUN step.
cat >"$state/containers.conf" <<EOF
[containers]
default_ulimits = []

[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
EOF
export CONTAINERS_STORAGE_CONF=$state/storage.conf
export CONTAINERS_CONF=$state/containers.conf
# No registry is reachable: never try one.
export REGISTRIES_CONFIG_PATH=$state/registries.conf
echo 'unqualified-search-registries = []' >"$state/registries.conf"

rust_version=$(sed -n 's/^rust-version = "\(.*\)"/\1/p' "$repo/Cargo.toml")
crate_version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$repo/Cargo.toml" | head -n1)
commit=$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)
[[ -n $rust_version ]] || fail "no rust-version in Cargo.toml"

# ---------------------------------------------------------------------------- bases
# This machine reaches crates.io through a TLS-inspecting egress whose CA the host
# trusts from /usr/local/share/ca-certificates: the builder base trusts what the host
# trusts, or cargo cannot download anything.
local_cas=(/usr/local/share/ca-certificates/*.crt)
[[ -e ${local_cas[0]} ]] || local_cas=()
ca_stamp=$( ((${#local_cas[@]})) && cat "${local_cas[@]}" | sha256sum | cut -c1-12 || echo none)

builder_packages=ca-certificates,gcc,libc6-dev
runtime_packages=ca-certificates
# Bump when the recipes below change.
recipe=2
stamp() { printf '%s\n' "$recipe" "$suite" "$mirror" "$@" | sha256sum | cut -c1-12; }
builder_base=localhost/a2a-gateway-test/builder-base:$suite-$(stamp "$builder_packages" "$rust_version" "$ca_stamp")
runtime_base=localhost/a2a-gateway-test/runtime-base:$suite-$(stamp "$runtime_packages")

# debootstrap a minbase root into a scratch directory, let $2 finish it in a chroot,
# import it as image $1, and drop other stamps of the same base.
make_base() {
  local name=$1 finish=$2 packages=$3 root
  root=$(mktemp -d "$state/tmp/rootfs.XXXXXX")
  # shellcheck disable=SC2064 # $root now, not at exit
  trap "rm -rf '$root'" EXIT
  say "making $name: debootstrap $suite from $mirror"
  if ! debootstrap --variant=minbase --include="$packages" "$suite" "$root" "$mirror" \
    >"$state/debootstrap.log" 2>&1; then
    tail -n 20 "$state/debootstrap.log"
    rm -rf "$root"
    fail "debootstrap $suite from $mirror failed (log: $state/debootstrap.log)"
  fi
  "$finish" "$root"
  chroot "$root" apt-get clean
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin
  tar --numeric-owner -C "$root" -c . | podman import -q --change "LABEL org.a2a-gateway.test.rustc=$base_rustc" - "$name" >/dev/null
  rm -rf "$root"
  trap - EXIT
  local repo_name=${name%:*} old
  for old in $(podman images --format '{{.Repository}}:{{.Tag}}' "$repo_name"); do
    [[ $old == "$name" ]] || podman rmi -f "$old" >/dev/null
  done
}

# version_ge A B: Debian version A >= B (epochs and +dfsg suffixes compare as dpkg does).
version_ge() { dpkg --compare-versions "$1" ge "$2"; }

# Debian's rustc and cargo from the suite if it meets rust-version, else from its
# backports (trixie has 1.85, the locked dependencies need 1.89).
finish_builder() {
  local root=$1 from candidate
  if ((${#local_cas[@]})); then
    cp "${local_cas[@]}" "$root/usr/local/share/ca-certificates/"
    chroot "$root" update-ca-certificates >/dev/null 2>&1
  fi
  echo "deb $mirror $suite-backports main" >"$root/etc/apt/sources.list.d/backports.list"
  chroot "$root" apt-get update -qq >/dev/null 2>&1
  from=$suite
  candidate=$(chroot "$root" apt-cache madison rustc | awk -v s="$suite/main" '$0 ~ " "s" " {print $3; exit}')
  if [[ -z $candidate ]] || ! version_ge "$candidate" "$rust_version"; then
    say "rustc in $suite is ${candidate:-absent} < rust-version $rust_version: taking $suite-backports"
    from=$suite-backports
  fi
  if ! chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    --no-install-recommends -t "$from" rustc cargo >"$state/apt.log" 2>&1; then
    tail -n 20 "$state/apt.log"
    fail "apt-get install rustc cargo from $from failed in the builder base"
  fi
  base_rustc=$(chroot "$root" rustc --version | awk '{print $2}')
  say "builder base: rustc $base_rustc from $from"
}
finish_runtime() { base_rustc=none; }

started=$(date +%s)
phase=$started
base_state=()
if [[ ${A2A_IMAGE_TEST_REBUILD:-} == 1 ]] || ! podman image exists "$builder_base"; then
  make_base "$builder_base" finish_builder "$builder_packages"
  base_state+=("builder made")
else
  base_state+=("builder cached")
fi
if [[ ${A2A_IMAGE_TEST_REBUILD:-} == 1 ]] || ! podman image exists "$runtime_base"; then
  make_base "$runtime_base" finish_runtime "$runtime_packages"
  base_state+=("runtime made")
else
  base_state+=("runtime cached")
fi
say "bases $(($(date +%s) - phase)) s (${base_state[*]}: $builder_base, $runtime_base)"

# ---------------------------------------------------------------------------- build
phase=$(date +%s)
# The builder stage first, under a tag of its own: that keeps its layers (the dependency
# layer above all) from the prune below, which would otherwise take every layer of a
# stage that the final image does not descend from. The second build then takes the
# builder stage from the layer cache.
builder_image=localhost/a2a-gateway-test/builder:test
build() {
  # buildah keeps RUN --mount=type=cache directories under TMPDIR: keep them with the
  # rest (set for this command only: the chroots above must not inherit a host path).
  if ! TMPDIR=$state/tmp podman build --isolation chroot --pull=never --layers \
    -f "$repo/deploy/Dockerfile" \
    --build-arg BUILDER_IMAGE="$builder_base" \
    --build-arg RUNTIME_IMAGE="$runtime_base" \
    --build-arg VERSION="$crate_version" \
    --build-arg COMMIT="$commit" \
    "$@" "$repo" >>"$state/build.log" 2>&1; then
    tail -n 40 "$state/build.log"
    fail "podman build of deploy/Dockerfile failed (log: $state/build.log)"
  fi
}
: >"$state/build.log"
build --target builder -t "$builder_image"
build -t "$image"
# Keep the storage from growing run after run: drop the layers of earlier builds that
# neither tag descends from any more (old source layers, old images).
podman image prune -f >/dev/null
say "build $(($(date +%s) - phase)) s ($(grep -c 'Using cache' "$state/build.log" || true) steps from the layer cache)"
result rustc "$(podman image inspect --format '{{index .Labels "org.a2a-gateway.test.rustc"}}' "$builder_base")"

# ---------------------------------------------------------------------------- run
phase=$(date +%s)
inspect() { podman image inspect --format "$1" "$image"; }
result user "$(inspect '{{.Config.User}}')"
result entrypoint "$(inspect '{{json .Config.Entrypoint}}')"
result listen_env "$(inspect '{{range .Config.Env}}{{println .}}{{end}}' | sed -n 's/^A2A_GATEWAY_LISTEN=//p')"
result exposed "$(inspect '{{range $p, $_ := .Config.ExposedPorts}}{{$p}} {{end}}' | xargs)"
result licenses "$(inspect '{{index .Labels "org.opencontainers.image.licenses"}}')"
result version_label "$(inspect '{{index .Labels "org.opencontainers.image.version"}}')"
result size_mb "$(($(inspect '{{.Size}}') / 1000000))"

ctr=$(buildah from --pull-never --name "a2a-gateway-test-$$" "$image")
cleanup() {
  buildah umount "$ctr" >/dev/null 2>&1 || true
  buildah rm "$ctr" >/dev/null 2>&1 || true
}
trap cleanup EXIT

# What a run changes in the container's root whatever it runs: buildah lays mount points
# (for /etc/hosts and the like) on the first run, and on every run creates and removes
# a file in /run, which changes /run's time. A control run of `--version` (which writes
# nothing) tells those paths, so that the comparison below sees what the gateway writes.
# A file the gateway wrote is still seen, in /run too: only directories' times are lost.
mnt=$(buildah mount "$ctr")
version=$(buildah run --isolation chroot "$ctr" -- /usr/local/bin/a2a-gateway --version)
[ "$version" = "a2a-gateway $crate_version (commit $commit)" ] \
  || fail "--version in the image says '$version', not version $crate_version and commit $commit"
touch "$state/tmp/before-control"
sleep 1
buildah run --isolation chroot "$ctr" -- /usr/local/bin/a2a-gateway --version >/dev/null
changed_by_any_run=$(cd "$mnt" && find . -xdev -newer "$state/tmp/before-control" -type d | sort)
touch "$state/tmp/before-run"
sleep 1

# Inside the image, as the image's user: the gateway on a free loopback port (chroot
# isolation shares the host's network), one JSON-RPC call over bash's /dev/tcp (the
# runtime base has bash but no curl; the gateway itself needs no shell), then SIGTERM.
# The gateway's stdout comes back through a coprocess: a file or fifo would be a write
# to the root filesystem, which is what is being checked.
inner=$(
  cat <<'INNER'
set -u
echo "uid=$(id -u)"
if [ -w / ]; then echo "root_writable=yes"; else echo "root_writable=no"; fi
coproc GW { exec /usr/local/bin/a2a-gateway --demo --listen 127.0.0.1:0 2>/dev/null; }
port=
while IFS= read -r -t 30 line <&"${GW[0]}"; do
  case $line in
    "a2a-gateway demo: JSON-RPC at http://127.0.0.1:"*)
      port=${line#*http://127.0.0.1:}
      port=${port%%/*}
      break ;;
  esac
done
if [ -z "$port" ]; then echo "error=the gateway printed no demo line in 30 s"; exit 1; fi
echo "gateway_uid=$(awk '/^Uid:/ {print $2}' /proc/"$GW_PID"/status)"
body='{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"hello"}]}}}'
exec 3<>/dev/tcp/127.0.0.1/"$port"
printf 'POST /a2a/jsonrpc HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nA2A-Version: 1.0\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s' "${#body}" "$body" >&3
response=$(timeout 10 cat <&3 | tr -d '\r')
echo "status=$(printf '%s\n' "$response" | head -n1)"
echo "reply=$(printf '%s\n' "$response" | sed '1,/^$/d' | tr -d '\n')"
kill -TERM "$GW_PID"
wait "$GW_PID"
echo "exit=$?"
INNER
)
if ! out=$(timeout 120 buildah run --isolation chroot "$ctr" -- /bin/bash -c "$inner" 2>&1); then
  printf '%s\n' "$out"
  fail "the run inside the image failed"
fi
while IFS= read -r line; do
  [[ $line == *=* ]] && result "${line%%=*}" "${line#*=}"
done <<<"$out"

# Everything in the root filesystem changed since the first run: nothing, if the gateway
# can run on a read-only root (buildah has no read-only run to prove it directly).
written=$(cd "$mnt" && find . -xdev -newer "$state/tmp/before-run" | sort |
  comm -23 - <(printf '%s\n' "$changed_by_any_run") | xargs)
result written "${written:-none}"
result changed_by_any_run "$(xargs <<<"$changed_by_any_run")"
say "run $(($(date +%s) - phase)) s"
say "total $(($(date +%s) - started)) s"
say PASS
