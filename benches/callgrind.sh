#!/usr/bin/env bash
# Instructions per call of the gateway, counted: the release gateway under
# `valgrind --tool=callgrind` in front of the overhead bench's backend (`--role-backend`), one
# keep-alive HTTP/1.1 client sending sequential 200 B SendMessage calls (or GetTask). Counting
# starts after the warm-up and ends after the last call, so start-up is not in the figures.
# Instruction counts repeat from run to run and do not depend on the machine's load, which the
# benchmark's CPU figures do (benches/README.md, "The machine").
#
#   benches/callgrind.sh [--calls N] [--warmup N] [--get-task] [--gateway BIN] [-- FLAG...]
#
# Flags after `--` go to the gateway (e.g. `-- --access-log false`). Prints the instructions
# per call of the whole gateway process and by owner: the crates the gateway keeps for
# HTTP, HTTP/2 and the runtime, its own code with its JSON and protobuf crates, and the
# helpers all of them share. The callgrind file stays for `callgrind_annotate`.
# Needs valgrind and python3.
set -euo pipefail

calls=1000
warmup=300
kind=send
gateway=""
while [ $# -gt 0 ]; do
    case "$1" in
        --calls) calls="$2"; shift 2 ;;
        --warmup) warmup="$2"; shift 2 ;;
        --get-task) kind=get; shift ;;
        --gateway) gateway="$2"; shift 2 ;;
        --) shift; break ;;
        *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
done
for tool in valgrind callgrind_control callgrind_annotate python3; do
    command -v "$tool" >/dev/null || { echo "$tool is needed" >&2; exit 2; }
done

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
# The bench binary (for its backend role) and the release gateway, built as `cargo bench` does.
bench="$(cargo bench --bench overhead --no-run 2>&1 | sed -n 's/.*(\(target\/release\/deps\/overhead-[0-9a-f]*\)).*/\1/p' | tail -1)"
[ -x "$bench" ] || { echo "could not build the overhead bench" >&2; exit 1; }
gateway="${gateway:-$root/target/release/a2a-gateway}"

work="$(mktemp -d)"
out="$root/target/callgrind.$kind.out"
backend_pid=""
gateway_pid=""
cleanup() {
    if [ -n "$gateway_pid" ]; then kill "$gateway_pid" 2>/dev/null || true; fi
    if [ -n "$backend_pid" ]; then kill "$backend_pid" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

# The backend role lives while its stdin is open, and says where it listens.
coproc BACKEND { exec "$bench" --role-backend; }
backend_pid=$BACKEND_PID
read -r line <&"${BACKEND[0]}"
backend="${line#LISTEN }"

port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$out" \
    "$gateway" --listen "127.0.0.1:$port" --backend "http://$backend" --workers 1 "$@" \
    >/dev/null 2>"$work/gateway.log" &
gateway_pid=$!

# The client: warm-up, then a mark file says "counting" and it waits for "go".
cat >"$work/client.py" <<'EOF'
import http.client, sys, time
port, warmup, calls, kind, mark = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
# The bench's bodies (benches/overhead.rs, `Kind::json`): 200 B SendMessage, or GetTask.
if kind == "send":
    body = ('{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m-1",'
            '"role":"ROLE_USER","parts":[{"text":"%s"}]}}}' % ("x" * 76)).encode()
else:
    body = b'{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"task-1"}}'
deadline = time.time() + 120
while True:
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        conn.connect()
        break
    except OSError:
        if time.time() > deadline:
            sys.exit("the gateway did not listen")
        time.sleep(0.2)
def call():
    conn.request("POST", "/a2a/jsonrpc", body, {"content-type": "application/json", "a2a-version": "1.0"})
    reply = conn.getresponse()
    data = reply.read()
    if reply.status != 200 or b'"result"' not in data:
        sys.exit("unexpected reply: %d %r" % (reply.status, data[:300]))
for _ in range(warmup):
    call()
open(mark, "w").write("warm")
while open(mark).read() != "go":
    time.sleep(0.05)
for _ in range(calls):
    call()
EOF
python3 "$work/client.py" "$port" "$warmup" "$calls" "$kind" "$work/mark" &
client_pid=$!
while [ "$(cat "$work/mark" 2>/dev/null)" != "warm" ]; do
    kill -0 "$client_pid" 2>/dev/null || { cat "$work/gateway.log" >&2; exit 1; }
    sleep 0.2
done
callgrind_control -i on "$gateway_pid" >/dev/null 2>&1
echo -n go >"$work/mark"
wait "$client_pid"
callgrind_control -d "$gateway_pid" >/dev/null 2>&1
# The dump is the counted part; the file written at exit holds what came after it.
dump="$(ls -t "$out".* | head -1)"

python3 - "$dump" "$calls" <<'EOF'
import collections, re, subprocess, sys
dump, calls = sys.argv[1], int(sys.argv[2])
text = subprocess.run(["callgrind_annotate", "--auto=no", "--threshold=100", dump],
                      capture_output=True, text=True, check=True).stdout
# Owners by the function's first path segment (with fat LTO, library code inlined into the
# gateway's functions counts as the gateway's).
kept = {"h2", "http", "hyper", "hyper_util", "httparse", "tokio", "tokio_util", "bytes", "tower",
        "tower_http", "mio", "futures_util", "futures_core", "slab", "http_body_util", "axum",
        "axum_core", "tracing", "tracing_core", "tracing_subscriber", "tracing_appender",
        "hashbrown", "indexmap", "fnv", "uuid", "atomic_waker", "crossbeam_channel"}
own = {"a2a_gateway", "sonic_rs", "sonic_simd", "prost", "serde", "serde_core", "serde_json",
       "memchr", "itoa", "ryu", "pbjson", "base64"}
by_owner, by_crate, total = collections.Counter(), collections.Counter(), 0
for line in text.splitlines():
    m = re.match(r"^\s*([\d,]+) \([ \d.%]+\)\s+(\S.*)$", line)
    if not m or "PROGRAM TOTALS" in line:
        continue
    ir = int(m.group(1).replace(",", ""))
    where = m.group(2)
    function = re.sub(r"\s*\[.*\]$", "", where.split(":", 1)[-1])
    function = re.sub(r"^(<|&|\*|mut |dyn )+", "", function)
    first = re.split(r"::|<| ", function)[0]
    if "memcpy" in where or "memmove" in where or "memset" in where:
        crate = "memcpy"
    elif "mimalloc" in where or first.startswith(("mi_", "_mi_")):
        crate = "allocator"
    else:
        crate = first
    owner = "kept crates" if crate in kept else "own + JSON/protobuf" if crate in own else "shared"
    by_owner[owner] += ir
    by_crate[crate] += ir
    total += ir
print(f"instructions per call: {total / calls:,.0f} ({calls} calls)")
for owner, ir in by_owner.most_common():
    print(f"  {owner:22} {ir / calls:8,.0f}")
print("largest:")
for crate, ir in by_crate.most_common(10):
    print(f"  {crate:22} {ir / calls:8,.0f}")
print(f"callgrind file: {dump}")
EOF
