#!/usr/bin/env python3
"""Regenerates the seed corpus of the fuzz targets from the project's own test traffic.

The wire tests spell out what they send and what their mock agents answer: JSON-RPC
request bodies, SSE bodies, HTTP+JSON error bodies and agent cards, as string literals
and `json!` values in tests/**/*.rs, plus the PEM keys of tests/fixtures/card-signing. This
script takes them out, sorts them per target and writes them to fuzz/corpus/<target>/
as `h-<sha1>` files (status details are built from the error table's reasons and the
details the tests send). Files named `regression-*` (inputs that once crashed a target)
and the corpus of `jsonrpc_model` (found by libFuzzer) are kept as they are.

Usage: python3 fuzz/harvest.py   (stdlib only; run from anywhere)
"""

import base64
import hashlib
import json
import re
import struct
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "fuzz" / "corpus"
HARVESTED = ["jsonrpc", "sse", "error_body", "status_details", "card", "signing"]
# Tens of files per target, none large: the corpus stays a few hundred KiB.
MAX_FILES = 40
MAX_SIZE = 16 * 1024


def unescape(body, raw):
    """A Rust string literal's content as bytes."""
    if raw:
        return body.encode()
    out = bytearray()
    i = 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out += c.encode()
            i += 1
            continue
        n = body[i + 1]
        i += 2
        if n == "\n":  # line continuation: skip the next line's indentation
            while i < len(body) and body[i] in " \t\n":
                i += 1
        elif n == "x":
            out.append(int(body[i:i + 2], 16))
            i += 2
        elif n == "u":
            end = body.index("}", i)
            out += chr(int(body[i + 1:end], 16)).encode("utf-8", "surrogatepass")
            i = end + 1
        else:
            out += {"n": b"\n", "r": b"\r", "t": b"\t", "0": b"\0"}.get(n, n.encode())
    return bytes(out)


def literals(source):
    """Every string literal of a Rust source, unescaped, format strings filled in."""
    found = []

    def raw(m):
        found.append((m.group(2), True))
        return '""'

    source = re.sub(r'b?r(#+)"(.*?)"\1', raw, source, flags=re.S)
    source = re.sub(r"'\\?\"'", "' '", source)  # char literals of a quote
    for m in re.finditer(r'b?"((?:[^"\\]|\\.)*)"', source, flags=re.S):
        found.append((m.group(1), False))
    out = []
    for body, is_raw in found:
        try:
            text = unescape(body, is_raw)
        except (ValueError, IndexError):
            continue
        if b"{{" in text or b"}}" in text:
            text = text.replace(b"{{", b"\x01").replace(b"}}", b"\x02")
            text = re.sub(rb"\{[A-Za-z0-9_:?.]*\}", b"1", text)
            text = text.replace(b"\x01", b"{").replace(b"\x02", b"}")
        out.append(text)
    return out


def json_macros(source):
    """The `json!(...)` values of a Rust source that are plain JSON (no Rust expressions)."""
    out = []
    for m in re.finditer(r"json!\(", source):
        depth, i = 1, m.end()
        while i < len(source) and depth:
            depth += {"(": 1, ")": -1}.get(source[i], 0)
            i += 1
        inner = re.sub(r",(\s*[}\]])", r"\1", source[m.end():i - 1])
        try:
            out.append(json.loads(inner))
        except ValueError:
            pass
    return out


def is_request(value):
    if isinstance(value, list):
        return bool(value) and all(is_request(v) for v in value)
    return isinstance(value, dict) and ("jsonrpc" in value or "method" in value)


def is_card(value):
    keys = {"supportedInterfaces", "skills", "capabilities", "defaultInputModes"}
    return isinstance(value, dict) and "name" in value and bool(keys & value.keys())


def parsed(text):
    try:
        return json.loads(text)
    except ValueError:
        return None


def varint(n):
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(number, payload):
    """A length-delimited protobuf field."""
    if isinstance(payload, str):
        payload = payload.encode()
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def status(code, message, details):
    """A serialized google.rpc.Status with `details` as (type name, message bytes)."""
    out = varint(1 << 3) + varint(code) + field(2, message)
    for name, value in details:
        out += field(3, field(1, "type.googleapis.com/google.rpc." + name) + field(2, value))
    return out


def status_seeds(sources):
    """Statuses like the test agents send: ErrorInfo with the table's reasons, and the
    other details the tests use."""
    table = (ROOT / "src" / "protocol" / "error.rs").read_text()
    reasons = sorted(set(re.findall(r'Some\("([A-Z_]+)"\)', table)))
    domains = ["a2a-protocol.org", "a2a-gateway", "example.com"]
    seeds = []
    for i, reason in enumerate(reasons):
        metadata = field(3, field(1, "taskId") + field(2, "t-1"))
        info = field(1, reason) + field(2, domains[i % len(domains)]) + metadata
        seeds.append(status(5 + i % 5, "m", [("ErrorInfo", info)]))
    violation = field(1, "message.parts") + field(2, "required")
    seeds.append(status(3, "bad", [("BadRequest", field(1, violation))]))
    seeds.append(status(14, "retry", [("RetryInfo", field(1, varint(8) + varint(3)))]))
    seeds.append(status(13, "debug", [("DebugInfo", field(1, "frame") + field(2, "detail"))]))
    seeds.append(status(2, "", [("LocalizedMessage", field(1, "fr") + field(2, "tâche"))]))
    seeds.append(status(8, "quota", [("QuotaFailure", field(1, field(1, "s") + field(2, "d")))]))
    seeds.append(status(5, "other", [("Unknown", b"\x01\x02")]))
    # Reasons the tests send that the table may not hold.
    for reason in sorted(set(re.findall(r'with_error_info\(\s*"([A-Z_]+)"', sources)))[:8]:
        info = field(1, reason) + field(2, "a2a-protocol.org")
        seeds.append(status(9, reason.lower(), [("ErrorInfo", info)]))
    return seeds


def write(target, seeds):
    folder = CORPUS / target
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("h-*"):
        old.unlink()
    unique = {}
    for seed in seeds:
        if len(seed) <= MAX_SIZE:
            unique.setdefault(hashlib.sha1(seed).hexdigest()[:16], seed)
    chosen = sorted(unique.items(), key=lambda kv: (len(kv[1]), kv[0]))
    if len(chosen) > MAX_FILES:  # spread over the sizes
        step = len(chosen) / MAX_FILES
        chosen = [chosen[int(i * step)] for i in range(MAX_FILES)]
    for name, seed in chosen:
        (folder / f"h-{name}").write_bytes(seed)
    print(f"{target}: {len(chosen)} seeds")


def main():
    sources = {p: p.read_text() for p in sorted((ROOT / "tests").rglob("*.rs"))}
    texts = [t for s in sources.values() for t in literals(s)]
    values = [v for s in sources.values() for v in json_macros(s)]
    values += [v for v in (parsed(t) for t in texts) if v is not None]
    seeds = {t: [] for t in HARVESTED}

    for text in texts:
        if b'"jsonrpc"' in text or b'"method"' in text:
            seeds["jsonrpc"].append(text)
        if b"data:" in text or b"event:" in text:
            seeds["sse"].append(text)
    for value in values:
        text = json.dumps(value, ensure_ascii=False).encode()
        if is_request(value):
            seeds["jsonrpc"].append(text)
        if isinstance(value, dict) and isinstance(value.get("error"), dict):
            # The error body as an agent sends it, and as the data of an SSE error event.
            for status_pick in (3, 8 + 0, 16 + 6):
                seeds["error_body"].append(bytes([status_pick]) + text)
            seeds["sse"].append(b"event: error\ndata: " + text + b"\n\n")
        if isinstance(value, dict) and ("task" in value or "statusUpdate" in value
                                         or "artifactUpdate" in value or "message" in value):
            seeds["sse"].append(b"data: " + text + b"\n\n")
        if is_card(value):
            # strip / resign / preserve with a public URL; trusted forwarded headers.
            for knobs, host in ((0x00, b"gateway.example"), (0x01, b"gw.example:8443"),
                                (0x22, b"gateway.example"), (0x4C, b"for=1.2.3.4;proto=https;host=gw.example")):
                seeds["card"].append(bytes([knobs]) + host + b"\n" + text)
            seeds["signing"].append(text)
    for pem in sorted((ROOT / "tests" / "fixtures" / "card-signing").glob("*.pem")):
        seeds["signing"].append(pem.read_bytes())
    seeds["status_details"] = status_seeds("".join(sources.values()))
    for target in HARVESTED:
        write(target, seeds[target])


if __name__ == "__main__":
    main()
