#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Writes the seed corpus of fuzz-grpc-server: prior-knowledge HTTP/2 gRPC requests built by hand
(HPACK literal headers, no Huffman), valid and broken. Byte 0 of each file is the chunk size the
target feeds at a time (0 = all at once). Re-run to regenerate: make-corpus.py corpus/"""
import os
import struct
import sys

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def frame(ftype, flags, sid, payload):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + struct.pack(">I", sid) + payload


def lit(name, value):
    name, value = name.encode(), value.encode()
    return b"\x00" + bytes([len(name)]) + name + bytes([len(value)]) + value


def headers(path, extra=(), method="POST", ct="application/grpc"):
    h = lit(":method", method) + lit(":scheme", "http") + lit(":path", path) + \
        lit(":authority", "localhost") + lit("content-type", ct) + lit("te", "trailers")
    for k, v in extra:
        h += lit(k, v)
    return h


def msg(body, flag=0):
    return bytes([flag]) + struct.pack(">I", len(body)) + body


def request(sid, path, body, extra=(), end=True, **kw):
    return frame(1, 0x4, sid, headers(path, extra, **kw)) + frame(0, 0x1 if end else 0, sid, msg(body))


SETTINGS = frame(4, 0, 0, b"")
ALLOC = bytes.fromhex("0a0a0a084750552d30303030")  # AllocateRequest{container_requests{devices_ids:"GPU-0000"}}

seeds = {
    "echo-valid.bin": b"\0" + PREFACE + SETTINGS + request(1, "/t.S/Echo", b"hello"),
    "echo-split.bin": b"\x05" + PREFACE + SETTINGS + request(1, "/t.S/Echo", b"hello"),
    "echo-error.bin": b"\0" + PREFACE + SETTINGS + request(1, "/t.S/Echo", b"Error%\n"),
    "allocate-valid.bin": b"\0" + PREFACE + SETTINGS + request(1, "/v1beta1.DevicePlugin/Allocate", ALLOC,
                                                                extra=[("grpc-timeout", "5S")]),
    "watch-then-cancel.bin": b"\0" + PREFACE + SETTINGS
    + request(1, "/v1beta1.DevicePlugin/ListAndWatch", b"")
    + frame(3, 0, 1, struct.pack(">I", 8)),  # RST_STREAM CANCEL
    "watch-deadline.bin": b"\0" + PREFACE + SETTINGS
    + request(1, "/v1beta1.DevicePlugin/ListAndWatch", b"", extra=[("grpc-timeout", "1n")]),
    "once-two-streams.bin": b"\0" + PREFACE + SETTINGS + request(1, "/t.S/Once", b"x")
    + request(3, "/t.S/Echo", b"y") + frame(7, 0, 0, struct.pack(">II", 3, 0)),  # GOAWAY
    "compressed.bin": b"\0" + PREFACE + SETTINGS
    + frame(1, 0x4, 1, headers("/t.S/Echo", [("grpc-encoding", "gzip")])) + frame(0, 1, 1, msg(b"zz", 1)),
    "oversized.bin": b"\0" + PREFACE + SETTINGS + frame(1, 0x4, 1, headers("/t.S/Echo"))
    + frame(0, 0, 1, b"\0\x7f\xff\xff\xff"),
    "unknown-method.bin": b"\0" + PREFACE + SETTINGS + request(1, "/no.Such/Method", b""),
    "bad-content-type.bin": b"\0" + PREFACE + SETTINGS + request(1, "/t.S/Echo", b"", ct="text/plain"),
    "get-method.bin": b"\0" + PREFACE + SETTINGS + request(1, "/t.S/Echo", b"", method="GET"),
    "two-messages.bin": b"\0" + PREFACE + SETTINGS + frame(1, 0x4, 1, headers("/t.S/Echo"))
    + frame(0, 1, 1, msg(b"a") + msg(b"b")),
    "truncated-message.bin": b"\0" + PREFACE + SETTINGS + frame(1, 0x4, 1, headers("/t.S/Echo"))
    + frame(0, 1, 1, msg(b"abcdef")[:7]),
    "no-preface.bin": b"\0GET / HTTP/1.1\r\nHost: x\r\n\r\n",
    "bad-frame.bin": b"\0" + PREFACE + b"\xff\xff\xff\x00\x00\x00\x00\x00\x01",
}

out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "corpus")
os.makedirs(out, exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)
print(f"wrote {len(seeds)} seeds to {out}")
