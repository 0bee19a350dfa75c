#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A kubelet PodResources v1 stand-in on python3-grpcio, for the exporter's pod-attribution test.

usage: podresources-standin.py SOCKET PROTO_ROOT PODS_JSON

Generates the Python stubs from PROTO_ROOT/podresources/v1/api.proto with grpc_tools.protoc into
a temporary directory, serves List on the unix socket SOCKET, and answers from PODS_JSON, re-read
on every call: [{"name":..., "namespace":..., "containers": [{"name":..., "devices":
[{"resource_name":..., "device_ids": [...]}]}]}]. Each List call appends a line to SOCKET.calls.
"""
import json
import os
import signal
import sys
import tempfile
import threading
from concurrent import futures


def main():
    sock, proto_root, pods_json = sys.argv[1:4]
    out = tempfile.mkdtemp(prefix="podres-stubs-")
    from grpc_tools import protoc
    rc = protoc.main(["protoc", "-I" + proto_root, "--python_out=" + out,
                      "--grpc_python_out=" + out, "podresources/v1/api.proto"])
    if rc != 0:
        print("protoc failed", file=sys.stderr)
        return 1
    sys.path.insert(0, out)
    import grpc
    from podresources.v1 import api_pb2, api_pb2_grpc

    class Lister(api_pb2_grpc.PodResourcesListerServicer):
        def List(self, request, context):
            with open(sock + ".calls", "a") as f:
                f.write("List\n")
            with open(pods_json) as f:
                pods = json.load(f)
            resp = api_pb2.ListPodResourcesResponse()
            for p in pods:
                pr = resp.pod_resources.add(name=p["name"], namespace=p["namespace"])
                for c in p.get("containers", []):
                    cr = pr.containers.add(name=c["name"])
                    for d in c.get("devices", []):
                        cr.devices.add(resource_name=d["resource_name"],
                                       device_ids=d["device_ids"])
            return resp

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    api_pb2_grpc.add_PodResourcesListerServicer_to_server(Lister(), server)
    server.add_insecure_port("unix:" + sock)
    server.start()
    print("ready", flush=True)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *a: done.set())
    signal.signal(signal.SIGINT, lambda *a: done.set())
    done.wait()
    server.stop(0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
