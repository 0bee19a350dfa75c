#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""gpuop status and the operator against a hostile API server: every list is answered with valid,
huge JSON, and neither grows past its stated bound; each fails or reports with an error naming
the limit (docs/kube-client.md).

Modes of the server (plain HTTP on 127.0.0.1), each answering every list, whatever the resource:
  bloat    one 64 MiB list, ignoring `limit`, of small values (1.3 GiB decoded: jansson spends 32
           bytes on the two of "0,"): refused before decoding (kube_options.max_decoded)
  big      one 64 MiB list, ignoring `limit`, of node objects (about 5 times that decoded):
           refused before decoding
  endless  pages of `limit` node objects (500: 3.6 MB, 18 MiB decoded), each with a continue
           token to another, forever: the items kept stop at the budget (status: its lists'
           256 MiB; the operator: kube_options.max_cached, 512 MiB)
Watches are held open with nothing in them; anything else is a 404 Status.

The bounds, peak RSS (VmHWM; getrusage's ru_maxrss):
  gpuop status    512 MiB: its lists' budget (256 MiB) + one page being read (64 MiB on the
                  wire) and decoded (128 MiB), and the process itself
  gpuop operator  832 MiB: what the client's informers keep (max_cached, 512 MiB) + what its
                  calls hold at once (max_in_flight, 256 MiB) + the process (64 MiB)
Without the bounds, status took 952 MB on the bloat list and more on the others.
Under a sanitizer build (libasan linked) the figures are printed, not held to the bounds: ASan's
allocator and quarantine change what a byte of heap costs.

Usage: hostile.py [MODE...] (default: all three). Needs GPUOP_BUILD_ROOT.
       hostile.py --serve MODE: the server alone; prints its port.
The server runs as a process of its own: a child's peak RSS (ru_maxrss) counts what it held
before it executed gpuop, a copy of its parent's pages, so the parent that measures stays small.
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

MiB = 1 << 20
STATUS_BOUND = 512 * MiB
OPERATOR_BOUND = 832 * MiB
# The operator's window: it ends early once its informers' refusals have settled (see
# refusals_settled), so the cap only matters on a slow machine; it stays under the 60 s the
# operator gives its informers to sync.
OPERATOR_SECONDS = 40
SETTLE_SECONDS = 3
STOP_SECONDS = 30
BODY = 64 * MiB


def node(name):
    """A node as a large cluster holds it: NFD labels, conditions, images (about 7 KB)."""
    return {
        "metadata": {"name": name, "resourceVersion": "12345",
                     "uid": "0b7c7f0e-5d8e-4a1e-9b1a-0c0e2a8c1e11",
                     "labels": {"feature.node.kubernetes.io/label-%d" % k: "true"
                                for k in range(40)},
                     "annotations": {"a": "x" * 200}},
        "spec": {"taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}],
                 "podCIDR": "10.0.0.0/24"},
        "status": {
            "allocatable": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8"},
            "capacity": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8"},
            "conditions": [{"type": t, "status": "False",
                            "lastHeartbeatTime": "2026-01-01T00:00:00Z",
                            "reason": "KubeletHasSufficientMemory",
                            "message": "kubelet has sufficient memory available"}
                           for t in ("MemoryPressure", "DiskPressure", "PIDPressure", "Ready")],
            "images": [{"names": ["registry.example.com/some/image-%d@sha256:%s" % (k, "ab" * 32),
                                  "registry.example.com/some/image-%d:v1.2.3" % k],
                        "sizeBytes": 123456789} for k in range(20)],
            "nodeInfo": {"kernelVersion": "6.1.0", "osImage": "Ubuntu 22.04",
                         "containerRuntimeVersion": "containerd://1.7",
                         "kubeletVersion": "v1.31.0"}}}


def list_of(items_json, cont=None):
    meta = {"resourceVersion": "1"}
    if cont:
        meta["continue"] = cont
    head = json.dumps({"kind": "List", "apiVersion": "v1", "metadata": meta})[:-1]
    return (head + ',"items":[' + items_json + "]}").encode()


def fill(make, size):
    """Items from make(i) joined until the list is about size bytes."""
    parts, n, i = [], 0, 0
    while n < size - 4096:
        s = make(i)
        parts.append(s)
        n += len(s) + 1
        i += 1
    return ",".join(parts)


def build(mode):
    if mode == "bloat":
        zeros = ",".join(["0"] * 1000)
        return list_of(fill(lambda i: '{"metadata":{"name":"b%d","resourceVersion":"1"},'
                                      '"v":[%s]}' % (i, zeros), BODY))
    if mode == "big":
        return list_of(fill(lambda i: json.dumps(node("big-%d" % i)), BODY))
    # endless: a page template, its names and continue token set per page
    return ",".join(json.dumps(node("p@@P@@-%d" % i)) for i in range(500))


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def send(self, code, data):
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        try:
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def not_found(self):
        self.send(404, json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                   "reason": "NotFound", "code": 404,
                                   "message": "the hostile server has nothing else"}).encode())

    def do_GET(self):
        u = urlsplit(self.path)
        parts = [p for p in u.path.split("/") if p]
        if parts[:2] == ["api", "v1"]:
            rest = parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 3:
            rest = parts[3:]
        else:
            return self.not_found()
        if len(rest) == 3 and rest[0] == "namespaces":
            rest = rest[2:]
        if len(rest) != 1:
            return self.not_found()  # one object, a subresource: nothing
        q = parse_qs(u.query)
        if q.get("watch") == ["true"]:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            time.sleep(30)
            return
        srv = self.server
        if srv.mode != "endless":
            return self.send(200, srv.body)
        page = int(q.get("continue", ["0"])[0] or 0)
        items = srv.body.replace("@@P@@", str(page))
        self.send(200, list_of(items, str(page + 1)))

    def do_POST(self):
        self.not_found()

    do_PUT = do_PATCH = do_DELETE = do_POST


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            return  # a client that stops reading a body over its limits
        super().handle_error(request, client_address)


def sanitized(gpuop):
    out = subprocess.run(["ldd", gpuop], capture_output=True, text=True).stdout
    return "libasan" in out or "libubsan" in out


def vm_hwm(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def run_status(gpuop, kubeconfig, tmp):
    err = open(os.path.join(tmp, "status.err"), "w+")
    p = subprocess.Popen([gpuop, "status", "--kubeconfig", kubeconfig],
                         stdout=subprocess.DEVNULL, stderr=err)
    scale = int(os.environ.get("GPUOP_TEST_TIME_SCALE", "1") or 1)
    end = time.monotonic() + 120 * scale
    peak = 0
    while True:  # reaped by wait4 alone (Popen.poll would lose its ru_maxrss)
        peak = max(peak, vm_hwm(p.pid))
        r = os.wait4(p.pid, os.WNOHANG)
        if r[0] == p.pid:
            p.returncode = os.waitstatus_to_exitcode(r[1])
            peak = max(peak, r[2].ru_maxrss * 1024)
            break
        if time.monotonic() >= end:
            p.kill()  # reaped at the next turn: -9, a failure
        time.sleep(0.05)
    err.seek(0)
    return p.returncode, peak, err.read()


def refusals(log_path, limit):
    """{resource: how many of its informer's lists were refused naming limit} from the log."""
    counts = {}
    with open(log_path, errors="replace") as f:
        for line in f:
            if "informer list failed" in line and limit in line:
                for word in line.split():
                    if word.startswith("resource="):
                        counts[word[9:]] = counts.get(word[9:], 0) + 1
    return counts


def refusals_settled(counts, last_new, now, settle):
    """The window has shown what it is for: informers were refused naming the limit, and no
    further informer has been refused for settle seconds (the operator starts its informers
    together, and they are refused within a few seconds of each other, the most lists and pages
    in flight at once). Waiting longer only repeats the same refusals further apart (each
    informer's backoff doubles up to 30 s)."""
    return bool(counts) and now - last_new >= settle


def run_operator(gpuop, kubeconfig, tmp, limit):
    """Runs the operator until its informers' refusals naming limit have settled
    (refusals_settled) or OPERATOR_SECONDS (scaled, under the 60 s it gives its informers to
    sync) have passed, then SIGTERM. Returns (its exit code when it ended by itself, else None;
    the exit code; the peak RSS; the log; the seconds it ran before SIGTERM)."""
    log_path = os.path.join(tmp, "operator.log")
    log = open(log_path, "w+")
    p = subprocess.Popen([gpuop, "operator", "--kubeconfig", kubeconfig,
                          "--namespace", "gpu-operator", "--metrics-listen", "",
                          "--identity", "hostile"], stdout=log, stderr=subprocess.STDOUT)
    scale = int(os.environ.get("GPUOP_TEST_TIME_SCALE", "1") or 1)
    start = time.monotonic()
    end = start + min(OPERATOR_SECONDS * scale, 50)
    peak, early, rc, signalled, ran = 0, None, None, False, None
    seen, last_new = 0, start
    while rc is None:  # reaped by wait4 alone (Popen.poll would lose its ru_maxrss)
        peak = max(peak, vm_hwm(p.pid))
        r = os.wait4(p.pid, os.WNOHANG)
        if r[0] == p.pid:
            rc = os.waitstatus_to_exitcode(r[1])
            peak = max(peak, r[2].ru_maxrss * 1024)
            if not signalled:
                early = rc
            break
        now = time.monotonic()
        settled = False
        if not signalled:
            counts = refusals(log_path, limit)
            if len(counts) > seen:
                seen, last_new = len(counts), now
            settled = refusals_settled(counts, last_new, now, SETTLE_SECONDS * scale)
        if not signalled and (settled or now >= end):
            p.send_signal(signal.SIGTERM)
            signalled, ran = True, now - start
            # its exit code is checked here, its shutdown's speed by operator-stop: the stores
            # it frees and the pages in flight take long on a loaded machine
            end = now + STOP_SECONDS * scale
        elif signalled and time.monotonic() >= end:
            p.kill()  # (reaped at the next turn; the test fails on its code)
        time.sleep(0.25)
    p.returncode = rc
    log.seek(0)
    return early, rc, peak, log.read(), ran


# What each mode's errors name.
STATUS_ERRORS = {
    "bloat": "list nodes: the response would take about",
    "big": "list nodes: the response would take about",
    "endless": "list nodes: the items take more than",
}
OPERATOR_ERRORS = {
    "bloat": "kube_options.max_decoded",
    "big": "kube_options.max_decoded",
    "endless": "kube_options.max_cached",
}


def serve(mode):
    srv = Server(("127.0.0.1", 0), Handler)
    srv.mode = mode
    srv.body = build(mode)
    print(srv.server_address[1], flush=True)
    srv.serve_forever()


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--serve":
        serve(sys.argv[2])
        return 0
    build_root = os.environ.get("GPUOP_BUILD_ROOT")
    if not build_root:
        print("GPUOP_BUILD_ROOT is not set: skipped")
        return 77
    gpuop = os.path.join(build_root, "gpuop")
    strict = not sanitized(gpuop)
    modes = sys.argv[1:] or ["bloat", "big", "endless"]
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for mode in modes:
            srv = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--serve", mode],
                                   stdout=subprocess.PIPE, text=True)
            try:
                one(gpuop, mode, srv, tmp, strict, failures)
            finally:
                srv.terminate()
                srv.wait()
    if not strict:
        print("(a sanitizer build: peaks printed, not held to the bounds)")
    for f in failures:
        print("FAIL: " + f)
    if failures:
        return 1
    print("PASS")
    return 0


def one(gpuop, mode, srv, tmp, strict, failures):
    """status, then the operator, against the server of one mode."""
    port = int(srv.stdout.readline())
    kubeconfig = os.path.join(tmp, "kubeconfig")
    with open(kubeconfig, "w") as f:
        f.write("apiVersion: v1\nkind: Config\ncurrent-context: h\n"
                "contexts: [{name: h, context: {cluster: h, user: h}}]\n"
                "clusters: [{name: h, cluster: {server: 'http://127.0.0.1:%d'}}]\n"
                "users: [{name: h, user: {token: t}}]\n" % port)

    rc, rss, err = run_status(gpuop, kubeconfig, tmp)
    print("%-8s status:   exit %d, peak RSS %5.0f MiB (bound %d MiB): %s"
          % (mode, rc, rss / MiB, STATUS_BOUND // MiB, err.strip()[-300:]))
    if rc != 1:
        failures.append("%s: status exited %d, not 1" % (mode, rc))
    if STATUS_ERRORS[mode] not in err:
        failures.append("%s: status's error does not say %r" % (mode, STATUS_ERRORS[mode]))
    if strict and rss > STATUS_BOUND:
        failures.append("%s: status peaked at %.0f MiB" % (mode, rss / MiB))

    early, rc, rss, log, ran = run_operator(gpuop, kubeconfig, tmp, OPERATOR_ERRORS[mode])
    lines = [l for l in log.splitlines() if OPERATOR_ERRORS[mode] in l]
    print("%-8s operator: exit %d, peak RSS %5.0f MiB (bound %d MiB), %d errors naming %s, "
          "%s"
          % (mode, rc, rss / MiB, OPERATOR_BOUND // MiB, len(lines),
             OPERATOR_ERRORS[mode],
             "ended by itself" if ran is None else "SIGTERM after %.1f s" % ran))
    if lines:
        print("         e.g. " + lines[0][:300])
    if early is not None and not (early == 1 and "did not sync" in log):
        failures.append("%s: the operator exited early (%d): %s"
                        % (mode, early, log[-500:]))
    elif early is None and rc != 0:
        failures.append("%s: the operator exited %d after SIGTERM" % (mode, rc))
    if not lines:
        failures.append("%s: no operator error names %s: %s"
                        % (mode, OPERATOR_ERRORS[mode], log[-1000:]))
    if strict and rss > OPERATOR_BOUND:
        failures.append("%s: the operator peaked at %.0f MiB" % (mode, rss / MiB))


if __name__ == "__main__":
    sys.exit(main())
