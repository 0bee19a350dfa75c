#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A tiny HTTP proxy for the client's proxy support: CONNECT tunnels (https targets) and
absolute-form requests (http targets, forwarded on a fresh connection each).

Usage: connectproxy.py LOG
Prints the port it listens on (127.0.0.1) as the first line of stdout; appends each request line
it gets to LOG.
"""
import socket
import sys
import threading
from urllib.parse import urlsplit

LOG = open(sys.argv[1], "a", buffering=1)


def pipe(a, b):
    try:
        while True:
            d = a.recv(65536)
            if not d:
                break
            b.sendall(d)
    except OSError:
        pass
    for s in (a, b):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def read_head(c):
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = c.recv(1)
        if not d:
            return None
        buf += d
    return buf


def handle(c):
    while True:
        head = read_head(c)
        if head is None:
            c.close()
            return
        line = head.split(b"\r\n", 1)[0].decode()
        LOG.write(line + "\n")
        method, target, _ = line.split(" ", 2)
        if method == "CONNECT":
            host, port = target.rsplit(":", 1)
            up = socket.create_connection((host.strip("[]"), int(port)))
            c.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            threading.Thread(target=pipe, args=(up, c), daemon=True).start()
            pipe(c, up)
            return
        u = urlsplit(target)
        length = 0
        for h in head.split(b"\r\n")[1:]:
            if h.lower().startswith(b"content-length:"):
                length = int(h.split(b":", 1)[1])
        body = b""
        while len(body) < length:
            body += c.recv(length - len(body))
        path = u.path + ("?" + u.query if u.query else "")
        rest = head.split(b"\r\n", 1)[1]
        up = socket.create_connection((u.hostname, u.port or 80))
        up.sendall(f"{method} {path} HTTP/1.1\r\n".encode() + rest.replace(
            b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n", 1) + body)
        resp = b""
        while True:
            d = up.recv(65536)
            if not d:
                break
            resp += d
        up.close()
        # the answer as the upstream gave it, but this connection ends after it
        h, _, b = resp.partition(b"\r\n\r\n")
        h = b"\r\n".join(x for x in h.split(b"\r\n") if not x.lower().startswith(b"connection:"))
        c.sendall(h + b"\r\nConnection: close\r\n\r\n" + b)
        c.close()
        return


def main():
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 0))
    s.listen(64)
    print(s.getsockname()[1], flush=True)
    while True:
        c, _ = s.accept()
        threading.Thread(target=handle, args=(c,), daemon=True).start()


main()
