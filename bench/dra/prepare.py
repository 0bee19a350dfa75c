#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The DRA plugin's NodePrepareResources / NodeUnprepareResources latency, as the kubelet calls
them (one claim a call, back to back, over the plugin's unix socket, python3-grpcio).

  prepare.py SOCKET CLAIMS_JSON

CLAIMS_JSON: [{"uid":..., "namespace":..., "name":...}, ...]. Prints three lines
"<phase> p50_ms p99_ms max_ms n": prepare (first time: plan, checkpoint write), again (the
checkpoint's answer) and unprepare (checkpoint write).
"""
import json
import os
import sys
import tempfile
import time

import grpc
from grpc_tools import protoc

SRC = os.environ.get("GPUOP_SOURCE_ROOT") or os.path.join(os.path.dirname(__file__), "..", "..")


def main():
    sock, claims_path = sys.argv[1:3]
    out = tempfile.mkdtemp()
    rc = protoc.main(["grpc_tools.protoc", f"-I{os.path.join(SRC, 'proto')}",
                      f"--python_out={out}", f"--grpc_python_out={out}", "dra/v1/api.proto"])
    if rc != 0:
        sys.exit(f"protoc: {rc}")
    sys.path.insert(0, out)
    from dra.v1 import api_pb2 as pb, api_pb2_grpc as pbg
    claims = json.load(open(claims_path))
    stub = pbg.DRAPluginStub(grpc.insecure_channel(f"unix://{sock}"))

    def one(call, c):
        req = call[1](claims=[pb.Claim(namespace=c["namespace"], uid=c["uid"], name=c["name"])])
        t = time.perf_counter()
        resp = call[0](req, timeout=10)
        ms = (time.perf_counter() - t) * 1000
        err = resp.claims[c["uid"]].error
        if err:
            sys.exit(f"{c['name']}: {err}")
        return ms

    prep = (stub.NodePrepareResources, pb.NodePrepareResourcesRequest)
    unprep = (stub.NodeUnprepareResources, pb.NodeUnprepareResourcesRequest)
    for phase, call in (("prepare", prep), ("again", prep), ("unprepare", unprep)):
        lat = sorted(one(call, c) for c in claims)
        n = len(lat)
        print(f"{phase} {lat[n // 2]:.3f} {lat[min(n - 1, (n * 99) // 100)]:.3f} {lat[-1]:.3f} {n}")


main()
