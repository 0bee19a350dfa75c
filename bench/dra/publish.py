#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The DRA plugin's ResourceSlice publication latency: from the plugin's start to its slices
being served by the API server with every device of the node, RUNS times (the slices deleted
before each start).

  publish.py KUBECONFIG DEVICES RUNS -- PLUGIN-COMMAND...

DEVICES: how many devices the node's slices must hold in all. The API is polled every 5 ms over
the kubeconfig's TLS client certificate (no kubectl in the loop). Prints "publish p50_ms p99_ms
max_ms n", then "devices N" (the device names, one per line, on stderr).
"""
import base64
import json
import os
import signal
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request

import yaml


def client(kubeconfig, tmp):
    cfg = yaml.safe_load(open(kubeconfig))
    cluster = cfg["clusters"][0]["cluster"]
    user = cfg["users"][0]["user"]
    ctx = ssl.create_default_context()
    if "certificate-authority-data" in cluster:
        ctx.load_verify_locations(cadata=base64.b64decode(
            cluster["certificate-authority-data"]).decode())
    elif "certificate-authority" in cluster:
        ctx.load_verify_locations(cafile=cluster["certificate-authority"])
    if "client-certificate-data" in user:
        paths = []
        for k in ("client-certificate-data", "client-key-data"):
            p = os.path.join(tmp, k)
            with open(p, "wb") as f:
                f.write(base64.b64decode(user[k]))
            paths.append(p)
        ctx.load_cert_chain(*paths)
    headers = {"Authorization": "Bearer " + user["token"]} if "token" in user else {}
    return cluster["server"], ctx, headers


def call(server, ctx, headers, method, path):
    req = urllib.request.Request(server + path, method=method, headers=headers)
    with urllib.request.urlopen(req, context=ctx, timeout=10) as r:
        return json.load(r)


def main():
    kubeconfig, devices, runs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    cmd = sys.argv[sys.argv.index("--") + 1:]
    path = "/apis/resource.k8s.io/v1/resourceslices"
    with tempfile.TemporaryDirectory() as tmp:
        server, ctx, headers = client(kubeconfig, tmp)
        lat, names = [], []
        for _ in range(runs):
            for s in call(server, ctx, headers, "GET", path)["items"]:
                call(server, ctx, headers, "DELETE", path + "/" + s["metadata"]["name"])
            t0 = time.perf_counter()
            p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                while True:
                    items = call(server, ctx, headers, "GET", path)["items"]
                    names = [d["name"] for s in items for d in s["spec"].get("devices", [])]
                    if len(names) >= devices:
                        break
                    if p.poll() is not None:
                        sys.exit(f"the plugin exited {p.returncode} before publishing")
                    if time.perf_counter() - t0 > 30:
                        sys.exit(f"30 s and {len(names)} of {devices} devices published")
                    time.sleep(0.005)
                lat.append((time.perf_counter() - t0) * 1000)
            finally:
                p.send_signal(signal.SIGTERM)
                p.wait(timeout=20)
        lat.sort()
        n = len(lat)
        print(f"publish {lat[n // 2]:.1f} {lat[min(n - 1, (n * 99) // 100)]:.1f} {lat[-1]:.1f} {n}")
        print(f"devices {len(names)}")
        print("\n".join(sorted(names)), file=sys.stderr)


main()
