#!/usr/bin/env python3
"""A TCP proxy in front of an API server that misbehaves on demand, for shutdown tests.

faultproxy.py PORT_FILE MODE_FILE UPSTREAM_HOST UPSTREAM_PORT

Listens on a free loopback port (written to PORT_FILE) and forwards to the upstream. MODE_FILE
holds the mode, read continually:
  pass       forward both ways
  blackhole  accept connections and never answer (what arrives is read and dropped)
  slow       forward, but hold each answer for 3 s first
  refuse     close the listening socket (new connections are refused) and reset open ones
"""
import os
import select
import socket
import struct
import sys
import threading
import time

port_file, mode_file, up_host, up_port = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])


def mode():
    try:
        with open(mode_file) as f:
            return f.read().strip() or "pass"
    except OSError:
        return "pass"


def reset(s):
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    s.close()


def pump(src, dst, answers, pair):
    try:
        while True:
            m = mode()
            if m == "refuse":
                break
            r, _, _ = select.select([src], [], [], 0.1)
            if not r:
                continue
            data = src.recv(65536)
            if not data:
                break
            m = mode()
            if m == "blackhole":
                continue
            if m == "slow" and answers:
                time.sleep(3)
            dst.sendall(data)
    except Exception:
        pass
    for s in pair:
        reset(s)


def serve_conn(client):
    if mode() == "blackhole":
        # never answered; read and dropped until the client gives up
        pump(client, None, False, [client])
        return
    try:
        up = socket.create_connection((up_host, up_port))
    except OSError:
        reset(client)
        return
    pair = [client, up]
    threading.Thread(target=pump, args=(client, up, False, pair), daemon=True).start()
    threading.Thread(target=pump, args=(up, client, True, pair), daemon=True).start()


lsock = socket.socket()
lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
lsock.bind(("127.0.0.1", 0))
lsock.listen(128)
tmp = port_file + ".tmp"
with open(tmp, "w") as f:
    f.write(str(lsock.getsockname()[1]))
os.rename(tmp, port_file)
while True:
    if mode() == "refuse":
        lsock.close()
        while True:
            time.sleep(1)
    r, _, _ = select.select([lsock], [], [], 0.1)
    if r:
        c, _ = lsock.accept()
        threading.Thread(target=serve_conn, args=(c,), daemon=True).start()
