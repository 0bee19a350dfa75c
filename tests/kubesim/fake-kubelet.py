#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A kubelet's /containerLogs endpoint for kubesim's log proxy test: fixed logs per pod and
container, the kubelet's 400 for a missing previous container, a followed log that ticks until
the reader goes away (then writes DIR/follow-closed). Writes its port to DIR/port and each
request's path to DIR/requests."""
import http.server
import os
import sys
import time
import urllib.parse

DIR = sys.argv[1]
LOGS = {
    ("default", "one", "c"): "2026-01-01T00:00:00Z line1\n2026-01-01T00:00:01Z line2\n",
    ("default", "two", "a"): "2026-01-01T00:00:00Z from a\n",
    ("default", "two", "b"): "2026-01-01T00:00:00Z from b\n",
}


class Kubelet(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def reply(self, code, text):
        body = text.encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        with open(os.path.join(DIR, "requests"), "a") as f:
            f.write(self.path + "\n")
        u = urllib.parse.urlsplit(self.path)
        q = urllib.parse.parse_qs(u.query)
        parts = u.path.split("/")
        if len(parts) != 5 or parts[1] != "containerLogs":
            return self.reply(404, "404 page not found\n")
        ns, pod, ctr = parts[2], parts[3], parts[4]
        if (ns, pod, ctr) not in LOGS:
            return self.reply(404, 'pod "%s/%s" container "%s" not found' % (ns, pod, ctr))
        if q.get("previous") == ["true"]:
            return self.reply(
                400, 'previous terminated container "%s" in pod "%s" not found' % (ctr, pod))
        lines = LOGS[(ns, pod, ctr)].splitlines(keepends=True)
        if "timestamps" not in q:
            lines = [l.split(" ", 1)[1] for l in lines]
        if "tailLines" in q:
            lines = lines[-int(q["tailLines"][0]):]
        if q.get("follow") != ["true"]:
            return self.reply(200, "".join(lines))
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.end_headers()
        try:
            self.wfile.write("".join(lines).encode())
            self.wfile.flush()
            for i in range(600):
                time.sleep(0.1)
                self.wfile.write(b"tick %d\n" % i)
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            open(os.path.join(DIR, "follow-closed"), "w").close()


srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Kubelet)
with open(os.path.join(DIR, "port.tmp"), "w") as f:
    f.write(str(srv.server_address[1]))
os.rename(os.path.join(DIR, "port.tmp"), os.path.join(DIR, "port"))
srv.serve_forever()
