"""Misbehaving agents for tests/it/agent_faults.rs, one behaviour per process.

Usage: python3 scripted_agent.py MODE [--port P] [--cert PEM --key PEM]
Listens on 127.0.0.1:P (0 = a free port), prints `READY port=N` on stdout once listening,
then serves every connection with MODE until killed. Standard library only.

Modes (what each connection gets):
  silent            accepted, then not a byte read or written
  never-replies     an HTTP/1.1 request is read, then nothing is sent
  h2-never-replies  HTTP/2: SETTINGS exchanged and PINGs answered, requests read, never a
                    response
  h2-502            HTTP/2 as a proxy in front of a dead agent answers: every request gets
                    `:status 502` with an HTML body and no gRPC status
  html-502          once a request head (or the HTTP/2 preface, which holds a blank line)
                    is in, an nginx-style `502 Bad Gateway` HTML page over HTTP/1.1
  banner            an SSH server's version banner, then silence
  tls               a TLS server (--cert/--key) where a cleartext client is expected
  truncated-json    unary: 200 application/json whose JSON stops half-way; stream: one good
                    event, then an event whose JSON stops half-way, then the end
  cut-body          unary: Content-Length 400 and 60 bytes, then the connection closes;
                    stream: one good event in a chunk, then a chunk cut short and a close
  wrong-type        unary: 200 text/html (a web page); stream: 200 application/json (a
                    unary reply where an event stream was asked for)
  endless           unary: 200 application/json whose chunked body never ends; stream:
                    200 text/event-stream, one `data:` line that never ends
  redirect-loop     307 to the very URL that was asked for

A request asks for a stream when its Accept header names text/event-stream.
"""

import argparse
import socket
import ssl
import sys
import threading

HTML_502 = (b'<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n'
            b'<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n'
            b'</body>\r\n</html>\r\n')
WEB_PAGE = b'<!DOCTYPE html><html><body><h1>It works!</h1></body></html>\n'
TASK = b'{"task":{"id":"t-1","contextId":"c-1","status":{"state":"TASK_STATE_WORKING"}}}'
SSH_BANNER = b'SSH-2.0-OpenSSH_9.6p1 Debian-3\r\n'
# HTTP/2 (RFC 9113): frame types and flags used below.
DATA, HEADERS, SETTINGS, PING = 0, 1, 4, 6
ACK = END_STREAM = 1
END_HEADERS = 4
# HPACK (RFC 7541): literals without indexing of static-table names 8 (:status) and 31
# (content-type).
PROXY_502 = b'\x08\x03502' + b'\x0f\x10\x09text/html'


def read_head(conn: socket.socket) -> tuple[bytes, bytes] | None:
    """Reads up to the first blank line: (head, bytes after it), or None at EOF."""
    buf = b''
    while b'\r\n\r\n' not in buf:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        buf += chunk
    head, _, rest = buf.partition(b'\r\n\r\n')
    return head, rest


def read_request(conn: socket.socket) -> tuple[bytes, bool] | None:
    """One HTTP/1.1 request with its Content-Length body: (request line, wants a stream)."""
    got = read_head(conn)
    if got is None:
        return None
    head, body = got
    lines = head.split(b'\r\n')
    length, stream = 0, False
    for line in lines[1:]:
        name, _, value = line.partition(b':')
        name = name.strip().lower()
        if name == b'content-length':
            length = int(value.strip())
        elif name == b'accept':
            stream = b'text/event-stream' in value.lower()
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        body += chunk
    return lines[0], stream


def head(status: str, content_type: str, length: int | None = None, extra: str = '') -> bytes:
    """A response head that closes the connection; no length means a chunked body."""
    framing = f'Content-Length: {length}' if length is not None else 'Transfer-Encoding: chunked'
    return (f'HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n{framing}\r\n'
            f'{extra}Connection: close\r\n\r\n').encode()


def chunk(data: bytes) -> bytes:
    return b'%x\r\n%s\r\n' % (len(data), data)


def whole(status: str, content_type: str, body: bytes, extra: str = '') -> bytes:
    return head(status, content_type, len(body), extra) + body


def drain(conn: socket.socket) -> None:
    """Reads (and drops) everything until the peer closes."""
    while conn.recv(65536):
        pass


def frame(kind: int, flags: int, payload: bytes = b'', stream: int = 0) -> bytes:
    head = len(payload).to_bytes(3, 'big') + bytes([kind, flags]) + stream.to_bytes(4, 'big')
    return head + payload


def h2_server(conn: socket.socket, reply_502: bool) -> None:
    """HTTP/2 that keeps the connection healthy; requests get nothing, or a proxy's 502."""
    preface = b''
    while len(preface) < 24:
        more = conn.recv(24 - len(preface))
        if not more:
            return
        preface += more
    conn.sendall(frame(SETTINGS, 0))
    while True:
        header = b''
        while len(header) < 9:
            more = conn.recv(9 - len(header))
            if not more:
                return
            header += more
        length, kind, flags = int.from_bytes(header[:3], 'big'), header[3], header[4]
        payload = b''
        while len(payload) < length:
            more = conn.recv(length - len(payload))
            if not more:
                return
            payload += more
        stream = int.from_bytes(header[5:9], 'big') & 0x7FFFFFFF
        if kind == HEADERS and reply_502:
            conn.sendall(frame(HEADERS, END_HEADERS, PROXY_502, stream)
                         + frame(DATA, END_STREAM, HTML_502, stream))
        elif kind == SETTINGS and not flags & ACK:
            conn.sendall(frame(SETTINGS, ACK))
        elif kind == PING and not flags & ACK:
            conn.sendall(frame(PING, ACK, payload))


def answer(mode: str, conn: socket.socket, port: int) -> None:
    """One HTTP/1.1 request answered as `mode` says."""
    request = read_request(conn)
    if request is None:
        return
    line, stream = request
    if mode == 'never-replies':
        drain(conn)
    elif mode == 'truncated-json' and not stream:
        conn.sendall(whole('200 OK', 'application/json', TASK[:40]))
    elif mode == 'truncated-json':
        events = b'data: ' + TASK + b'\n\n' + b'data: ' + TASK[:40] + b'\n\n'
        conn.sendall(whole('200 OK', 'text/event-stream', events))
    elif mode == 'cut-body' and not stream:
        conn.sendall(head('200 OK', 'application/json', 400) + TASK[:60])
    elif mode == 'cut-body':
        event = chunk(b'data: ' + TASK + b'\n\n')
        conn.sendall(head('200 OK', 'text/event-stream') + event + b'100\r\ndata: {"st')
    elif mode == 'wrong-type' and not stream:
        conn.sendall(whole('200 OK', 'text/html; charset=utf-8', WEB_PAGE))
    elif mode == 'wrong-type':
        conn.sendall(whole('200 OK', 'application/json', TASK))
    elif mode == 'endless':
        content_type, start = (('text/event-stream', b'data: ') if stream
                               else ('application/json', b'{"task":{"id":"'))
        conn.sendall(head('200 OK', content_type) + chunk(start))
        filler = chunk(b'x' * 65536)
        while True:  # until the gateway gives up and closes (BrokenPipe ends the thread)
            conn.sendall(filler)
    elif mode == 'redirect-loop':
        target = line.split(b' ')[1].decode()
        location = f'Location: http://127.0.0.1:{port}{target}\r\n'
        conn.sendall(whole('307 Temporary Redirect', 'text/html', b'', location))


def serve(mode: str, conn: socket.socket, port: int, tls: ssl.SSLContext | None) -> None:
    try:
        if mode == 'silent':
            threading.Event().wait()
        elif mode in ('h2-never-replies', 'h2-502'):
            h2_server(conn, reply_502=mode == 'h2-502')
        elif mode == 'html-502':
            if read_head(conn) is not None:
                conn.sendall(whole('502 Bad Gateway', 'text/html', HTML_502))
        elif mode == 'banner':
            conn.sendall(SSH_BANNER)
            drain(conn)
        elif mode == 'tls':
            with tls.wrap_socket(conn, server_side=True) as secure:
                drain(secure)
        else:
            answer(mode, conn, port)
    except (OSError, ssl.SSLError):
        pass  # the gateway gave up on the connection: that is what is being tested
    finally:
        conn.close()


def main() -> None:
    modes = ['silent', 'never-replies', 'h2-never-replies', 'h2-502', 'html-502', 'banner', 'tls',
             'truncated-json', 'cut-body', 'wrong-type', 'endless', 'redirect-loop']
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('mode', choices=modes)
    parser.add_argument('--port', type=int, default=0)
    parser.add_argument('--cert')
    parser.add_argument('--key')
    args = parser.parse_args()
    tls = None
    if args.mode == 'tls':
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(args.cert, args.key)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(('127.0.0.1', args.port))
    listener.listen(64)
    port = listener.getsockname()[1]
    print(f'READY port={port}', flush=True)
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=serve, args=(args.mode, conn, port, tls), daemon=True).start()


if __name__ == '__main__':
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(0)
