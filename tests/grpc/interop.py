#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""gRPC interop between gpuop's src/edge/grpc and a real gRPC implementation (Debian's python3-grpcio).

Python stubs are generated at test time from the project's .proto files with grpc_tools.protoc
(which also proves Debian's protoc accepts them).

  interop.py c-server BIN   python grpcio client  -> C server (grpc-test-server)
  interop.py c-client BIN   C client (grpc-test-client) -> python grpcio server
  interop.py protoc         only generate the stubs (Debian protoc accepts the .proto files)

Exit 77 (skipped) only when grpcio / grpc_tools are not installed.
"""
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.environ.get("GPUOP_SOURCE_ROOT") or
                                os.path.join(os.path.dirname(__file__), "..", ".."), "tests", "lib"))
import kubelet_grpc as kg  # noqa: E402  (exits 77 when grpcio is not installed)
from kubelet_grpc import FAILS, check, grpc  # noqa: E402


def code_of(fn):
    try:
        fn()
        return grpc.StatusCode.OK, ""
    except grpc.RpcError as e:
        return e.code(), e.details()


# ---- python client -> C server -----------------------------------------------------------------

def run_c_server(binary, tmp, dp, dp_grpc):
    sock = os.path.join(tmp, "plugin.sock")
    srv = subprocess.Popen([binary, sock], stdout=subprocess.PIPE, text=True)
    try:
        line = srv.stdout.readline()
        check(line.strip() == "READY", "C server started")
        mode = os.stat(sock).st_mode & 0o777
        check(mode == 0o600, f"socket mode is 0600 (got {oct(mode)})")
        ch = grpc.insecure_channel("unix://" + sock)
        stub = dp_grpc.DevicePluginStub(ch)
        reg = dp_grpc.RegistrationStub(ch)

        def stats():
            raw = ch.unary_unary("/gpuop.test.Control/Stats")(b"", timeout=5)
            return dict(kv.split("=") for kv in raw.decode().split())

        o = stub.GetDevicePluginOptions(dp.Empty(), timeout=5)
        check(o.get_preferred_allocation_available and not o.pre_start_required,
              "unary GetDevicePluginOptions")
        reg.Register(dp.RegisterRequest(version="v1beta1", endpoint="nvidia-gpu.sock",
                                        resource_name="nvidia.com/gpu",
                                        options=dp.DevicePluginOptions(
                                            get_preferred_allocation_available=True)), timeout=5)
        check(stats()["registered"] == "1", "unary Registration.Register")
        c, d = code_of(lambda: reg.Register(dp.RegisterRequest(version="v1alpha"), timeout=5))
        check(c == grpc.StatusCode.INVALID_ARGUMENT and d == 'unsupported version "v1alpha"',
              f"handler error status and message ({c}, {d!r})")

        r = stub.Allocate(dp.AllocateRequest(container_requests=[
            dp.ContainerAllocateRequest(devices_ids=["GPU-0a1b", "GPU-1c2d"]),
            dp.ContainerAllocateRequest(devices_ids=["GPU-3a4b"])]), timeout=5)
        envs = [dict(cr.envs) for cr in r.container_responses]
        check(envs == [{"NVIDIA_VISIBLE_DEVICES": "GPU-0a1b,GPU-1c2d"},
                       {"NVIDIA_VISIBLE_DEVICES": "GPU-3a4b"}], f"unary Allocate ({envs})")
        c, d = code_of(lambda: stub.Allocate(dp.AllocateRequest(), timeout=5))
        check(c == grpc.StatusCode.INVALID_ARGUMENT and d == "no container requests: 100% empty",
              f"grpc-message percent-encoding round trip ({d!r})")
        p = stub.GetPreferredAllocation(dp.PreferredAllocationRequest(container_requests=[
            dp.ContainerPreferredAllocationRequest(available_deviceIDs=["a", "b", "c"],
                                                   allocation_size=2)]), timeout=5)
        check(list(p.container_responses[0].deviceIDs) == ["a", "b"], "unary GetPreferredAllocation")
        stub.PreStartContainer(dp.PreStartContainerRequest(devices_ids=["a"]), timeout=5)
        check(True, "unary PreStartContainer")

        # Streaming: the first list at once, then lists pushed by the server's pusher thread.
        it = stub.ListAndWatch(dp.Empty(), timeout=10)
        first = next(it)
        check([d.ID for d in first.devices] == ["GPU-0a1b", "GPU-1c2d", "GPU-2e3f", "GPU-3a4b"]
              and all(d.health == "Healthy" for d in first.devices)
              and first.devices[0].topology.nodes[0].ID == 1, "ListAndWatch first list")
        t0 = time.monotonic()
        later = [next(it) for _ in range(3)]
        healths = {tuple(d.health for d in m.devices) for m in later}
        check(len(healths) >= 2 and time.monotonic() - t0 < 2,
              "ListAndWatch: later lists pushed from another thread")
        # Client disconnect is noticed by the server (close callback, CANCELLED).
        it.cancel()
        ok = False
        for _ in range(50):
            s = stats()
            if s["cancelled"] == "1":
                ok = True
                break
            time.sleep(0.02)
        check(ok, f"server noticed the client cancel ({stats()})")

        # Deadline: the stream ends with DEADLINE_EXCEEDED, and the server ends it too.
        it = stub.ListAndWatch(dp.Empty(), timeout=0.3)
        c, _ = code_of(lambda: [m for m in it])
        check(c == grpc.StatusCode.DEADLINE_EXCEEDED, f"stream deadline exceeded ({c})")
        ok = False
        for _ in range(50):
            s = stats()
            if int(s["closed"]) >= 2:
                ok = True
                break
            time.sleep(0.02)
        check(ok, f"server closed the expired stream ({stats()})")

        c, _ = code_of(lambda: ch.unary_unary("/v1beta1.DevicePlugin/NoSuchMethod")(b"", timeout=5))
        check(c == grpc.StatusCode.UNIMPLEMENTED, f"unknown method -> UNIMPLEMENTED ({c})")
        c, _ = code_of(lambda: ch.unary_unary("/no.Such/Service")(b"", timeout=5))
        check(c == grpc.StatusCode.UNIMPLEMENTED, f"unknown service -> UNIMPLEMENTED ({c})")
        many = ["GPU-%060d" % i for i in range(2000)]  # ~130 KB, above the 64 KiB limit
        c, d = code_of(lambda: stub.Allocate(dp.AllocateRequest(container_requests=[
            dp.ContainerAllocateRequest(devices_ids=many)]), timeout=5))
        check(c == grpc.StatusCode.RESOURCE_EXHAUSTED, f"oversized request -> RESOURCE_EXHAUSTED ({c}: {d})")
        c, d = code_of(lambda: ch.unary_unary("/gpuop.test.Control/Big")(b"", timeout=5))
        check(c == grpc.StatusCode.RESOURCE_EXHAUSTED, f"oversized reply -> RESOURCE_EXHAUSTED ({c}: {d})")
        c, d = code_of(lambda: ch.unary_unary("/gpuop.test.Control/Silent")(b"", timeout=5))
        check(c == grpc.StatusCode.INTERNAL, f"handler without reply -> INTERNAL ({c}: {d})")
        c, d = code_of(lambda: stub.Allocate(dp.AllocateRequest(container_requests=[
            dp.ContainerAllocateRequest(devices_ids=["x" * 200])]), timeout=5,
            compression=grpc.Compression.Gzip))
        check(c in (grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.INTERNAL),
              f"compressed request -> UNIMPLEMENTED ({c}: {d})")
        c, d = code_of(lambda: ch.unary_unary("/v1beta1.DevicePlugin/Allocate")(b"\xff\xff", timeout=5))
        check(c == grpc.StatusCode.INTERNAL, f"unparsable request -> INTERNAL ({c}: {d})")
        c, d = code_of(lambda: stub.GetDevicePluginOptions(dp.Empty(), timeout=5,
                                                           metadata=(("x-big", "a" * 20000),)))
        check(c in (grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.INTERNAL),
              f"headers above 16 KiB refused ({c}: {d})")
        # Still healthy after all that.
        o = stub.GetDevicePluginOptions(dp.Empty(), timeout=5)
        check(o.get_preferred_allocation_available, "server still serves after bad requests")

        # Many streams at once on one connection, and a second connection.
        ch2 = grpc.insecure_channel("unix://" + sock)
        its = [dp_grpc.DevicePluginStub(ch2).ListAndWatch(dp.Empty(), timeout=10) for _ in range(8)]
        check(all(len(next(i).devices) == 4 for i in its), "8 concurrent streams on a 2nd connection")

        # Server shutdown is noticed by the client on an open stream.
        it = stub.ListAndWatch(dp.Empty(), timeout=10)
        next(it)
        ch.unary_unary("/gpuop.test.Control/Shutdown")(b"", timeout=5)
        t0 = time.monotonic()
        c, d = code_of(lambda: [m for m in it])
        check(c == grpc.StatusCode.UNAVAILABLE and time.monotonic() - t0 < 3,
              f"server shutdown -> UNAVAILABLE on the open stream ({c}: {d})")
        rc = srv.wait(timeout=10)
        check(rc == 0, f"C server exited cleanly (rc={rc})")
        check(not os.path.exists(sock), "socket removed at shutdown")
        for i in its:
            i.cancel()
        ch2.close()
        ch.close()
    finally:
        if srv.poll() is None:
            srv.kill()
            srv.wait()


# ---- C client -> python server -----------------------------------------------------------------

def run_c_client(binary, tmp, dp, dp_grpc, pr, pr_grpc):
    from concurrent import futures

    registered = []

    class Kubelet(dp_grpc.RegistrationServicer):
        def Register(self, request, context):
            registered.append((request.version, request.endpoint, request.resource_name,
                               request.options.get_preferred_allocation_available))
            return dp.Empty()

    class Plugin(dp_grpc.DevicePluginServicer):
        def GetDevicePluginOptions(self, request, context):
            return dp.DevicePluginOptions(pre_start_required=False,
                                          get_preferred_allocation_available=True)

        def ListAndWatch(self, request, context):
            for gen in range(3):
                yield dp.ListAndWatchResponse(devices=[
                    dp.Device(ID=f"GPU-{i}", health="Unhealthy" if gen and i == gen else "Healthy",
                              topology=dp.TopologyInfo(nodes=[dp.NUMANode(ID=i % 2)]))
                    for i in range(4)])
                time.sleep(0.05)
            # then hold the stream open until the client's deadline or cancel
            while context.is_active():
                time.sleep(0.02)

        def Allocate(self, request, context):
            if not request.container_requests:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, "empty request: 100% \u00e9chec\nline2")
            return dp.AllocateResponse(container_responses=[
                dp.ContainerAllocateResponse(envs={"NVIDIA_VISIBLE_DEVICES": ",".join(c.devices_ids)})
                for c in request.container_requests])

        def GetPreferredAllocation(self, request, context):
            time.sleep(2)  # slower than the client's deadline
            return dp.PreferredAllocationResponse()

        def PreStartContainer(self, request, context):
            return dp.PreStartContainerResponse(b"x" * 0) if False else dp.PreStartContainerResponse()

    class Lister(pr_grpc.PodResourcesListerServicer):
        def List(self, request, context):
            return pr.ListPodResourcesResponse(pod_resources=[
                pr.PodResources(name="train-0", namespace="ml", containers=[
                    pr.ContainerResources(name="main", devices=[
                        pr.ContainerDevices(resource_name="nvidia.com/gpu",
                                            device_ids=["GPU-0", "GPU-1"])])]),
                pr.PodResources(name="infer-1", namespace="default", containers=[
                    pr.ContainerResources(name="srv", devices=[
                        pr.ContainerDevices(resource_name="nvidia.com/gpu",
                                            device_ids=["GPU-2::3"])]),
                    pr.ContainerResources(name="sidecar")])])

        def GetAllocatableResources(self, request, context):
            return pr.AllocatableResourcesResponse(devices=[
                pr.ContainerDevices(resource_name="nvidia.com/gpu", device_ids=["GPU-0"])])

        def Get(self, request, context):
            context.abort(grpc.StatusCode.NOT_FOUND, f"pod {request.pod_namespace}/{request.pod_name} not found")

    def big(request, context):
        return b"\0" * (5 << 20)

    sock = os.path.join(tmp, "kubelet.sock")
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16),
                         options=[("grpc.max_send_message_length", 8 << 20)])
    dp_grpc.add_RegistrationServicer_to_server(Kubelet(), server)
    dp_grpc.add_DevicePluginServicer_to_server(Plugin(), server)
    pr_grpc.add_PodResourcesListerServicer_to_server(Lister(), server)
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(
        "gpuop.test.Control", {"Big": grpc.unary_unary_rpc_method_handler(big)})])
    server.add_insecure_port("unix://" + sock)
    server.start()
    try:
        r = subprocess.run([binary, sock], timeout=60)
        check(r.returncode == 0, f"C client against grpcio server (rc={r.returncode})")
        check(registered == [("v1beta1", "nvidia-gpu.sock", "nvidia.com/gpu", True)],
              f"grpcio server saw the registration ({registered})")
        # Shutdown noticed by the C client: run it in the mode that waits on a stream while the
        # python server stops.
        p = subprocess.Popen([binary, sock, "wait-shutdown"], stdout=subprocess.PIPE, text=True)
        line = p.stdout.readline()
        check(line.strip() == "STREAMING", "C client streaming before shutdown")
        server.stop(grace=None)
        rc = p.wait(timeout=10)
        check(rc == 0, f"C client noticed the server shutdown (rc={rc})")
    finally:
        server.stop(grace=None)


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    with tempfile.TemporaryDirectory(prefix="gpuop-grpc-") as tmp:
        (dp, dp_grpc), (pr, pr_grpc) = kg.stubs(kg.DEVICEPLUGIN, kg.PODRESOURCES,
                                                outdir=os.path.join(tmp, "stubs"))
        check(True, "Debian protoc (grpc_tools) accepts the .proto files")
        if sys.argv[1] == "c-server":
            run_c_server(sys.argv[2], tmp, dp, dp_grpc)
        elif sys.argv[1] == "c-client":
            run_c_client(sys.argv[2], tmp, dp, dp_grpc, pr, pr_grpc)
        elif sys.argv[1] == "protoc":
            # Field numbers as the kubelet's, spot-checked through the generated descriptors.
            f = dp.ContainerAllocateResponse.DESCRIPTOR.fields_by_name
            check(f["cdi_devices"].number == 5 and f["annotations"].number == 4, "dp numbers")
            f = pr.ClaimResource.DESCRIPTOR.fields_by_name
            check(f["share_id"].number == 5 and f["share_id"].containing_oneof is not None,
                  "share_id keeps explicit presence")
            check(pr.DynamicResource.DESCRIPTOR.fields_by_name["claim_name"].number == 2,
                  "DynamicResource field 1 reserved")
        else:
            print(__doc__)
            return 2
    if FAILS:
        print(f"{len(FAILS)} check(s) failed: {FAILS}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
