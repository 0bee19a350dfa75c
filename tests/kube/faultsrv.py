#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A scripted HTTP stand-in for the Kubernetes API, for the faults a faithful simulator must not
produce: 5xx bursts, 429 with Retry-After, truncated or oversized bodies, watch streams split at
awkward places, 410 in the middle of a stream.

Usage: faultsrv.py SCRIPT.json LOG.jsonl
Prints the port it listens on (127.0.0.1) as the first line of stdout.

SCRIPT: {"rules": [{"method": "GET", "path": "/api/v1/nodes/n1", "query_has": "continue=x",
                    "responses": [RESP, ...]}, ...]}
The first rule whose method, path and query_has match answers; its responses are used in turn,
the last one repeats. RESP: {"code": 200, "body": <JSON or string>, "headers": {...},
"raw": "bytes as a string" (sent as is, without a Content-Length: a truncated body),
"stream": ["line", ...] (chunked; each element is one chunk), "chunk_delay": 0.05,
"hold": seconds to keep the stream open at the end}.
Every request is appended to LOG as one JSON line: method, path, query, headers, body, and the
client certificate's common name when TLS is on.
With FAULTSRV_TLS_CERT/FAULTSRV_TLS_KEY set it serves HTTPS; with FAULTSRV_TLS_CLIENT_CA also set
it requires a client certificate signed by that CA.
"""
import json
import os
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

SCRIPT = json.load(open(sys.argv[1]))
LOG = open(sys.argv[2], "a", buffering=1)
LOCK = threading.Lock()
COUNTS = {}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def handle_any(self):
        u = urlsplit(self.path)
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n).decode("utf-8", "replace") if n else ""
        cn = None
        if hasattr(self.connection, "getpeercert"):
            cert = self.connection.getpeercert() or {}
            for rdn in cert.get("subject", ()):
                for k, v in rdn:
                    if k == "commonName":
                        cn = v
        with LOCK:
            LOG.write(json.dumps({"method": self.command, "path": u.path, "query": u.query,
                                  "headers": {k.lower(): v for k, v in self.headers.items()},
                                  "body": body, "client_cn": cn}) + "\n")
            rule_i = None
            for i, r in enumerate(SCRIPT["rules"]):
                if r.get("method", self.command) != self.command:
                    continue
                if r["path"] != u.path:
                    continue
                if "query_has" in r and r["query_has"] not in u.query:
                    continue
                if "query_lacks" in r and r["query_lacks"] in u.query:
                    continue
                rule_i = i
                break
            if rule_i is None:
                resp = {"code": 404, "body": {"kind": "Status", "apiVersion": "v1",
                                              "status": "Failure", "reason": "NotFound",
                                              "code": 404, "message": "no rule for " + u.path}}
            else:
                seq = SCRIPT["rules"][rule_i]["responses"]
                k = COUNTS.get(rule_i, 0)
                COUNTS[rule_i] = k + 1
                resp = seq[min(k, len(seq) - 1)]
        self.answer(resp)

    def answer(self, resp):
        code = resp.get("code", 200)
        self.send_response(code)
        for k, v in resp.get("headers", {}).items():
            self.send_header(k, v)
        if "stream" in resp:
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            try:
                for chunk in resp["stream"]:
                    data = chunk.encode()
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                    self.wfile.flush()
                    time.sleep(resp.get("chunk_delay", 0.01))
                time.sleep(resp.get("hold", 0))
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass
            return
        if "raw" in resp:
            self.send_header("Content-Type", "application/json")
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(resp["raw"].encode())
            self.wfile.flush()
            self.close_connection = True
            return
        body = resp.get("body", "")
        if not isinstance(body, str):
            body = json.dumps(body)
        if "repeat" in resp:
            body = body * resp["repeat"]
        data = body.encode()
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = handle_any


class Server(ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        # a client that stops reading a body it will not take (over its limits) is no error
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            return
        super().handle_error(request, client_address)


def main():
    srv = Server(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    cert, key = os.environ.get("FAULTSRV_TLS_CERT"), os.environ.get("FAULTSRV_TLS_KEY")
    if cert and key:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        client_ca = os.environ.get("FAULTSRV_TLS_CLIENT_CA")
        if client_ca:
            ctx.verify_mode = ssl.CERT_REQUIRED
            ctx.load_verify_locations(client_ca)
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    print(srv.server_address[1], flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
