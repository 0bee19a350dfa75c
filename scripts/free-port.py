#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Prints a free TCP port on 127.0.0.1 below the ephemeral range (32768 up, where the outgoing
connections of tests running beside this one take theirs), so that a server can get the same
port again after a restart. `free-port.py [N]`: the first of N consecutive free ports. The search
starts at a random place, so that tests started together, and two calls of one test before the
first port is bound, look in different places."""
import random
import socket
import sys

n = int(sys.argv[1]) if len(sys.argv) > 1 else 1
base = random.SystemRandom().randrange(20000, 32000 - n)
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
