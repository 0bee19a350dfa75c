#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Prints a free TCP port on 127.0.0.1 below the ephemeral range (32768 up, where the outgoing
connections of tests running beside this one take theirs): for a server that must get the same
port again after a restart. `free-port.py [N]`: the first of N consecutive free ports. The start
of the search depends on the parent's pid, so tests started together look in different places."""
import os
import socket
import sys

n = int(sys.argv[1]) if len(sys.argv) > 1 else 1
base = 20000 + os.getppid() * 7 % 12000
for p in list(range(base, 32000 - n)) + list(range(20000, base)):
    socks = []
    try:
        for i in range(n):
            s = socket.socket()
            socks.append(s)
            s.bind(("127.0.0.1", p + i))
        print(p)
        sys.exit(0)
    except OSError:
        continue
    finally:
        for s in socks:
            s.close()
sys.exit("free-port.py: no free port between 20000 and 32000")
