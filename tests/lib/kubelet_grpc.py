# SPDX-License-Identifier: Apache-2.0
"""The kubelet's gRPC side for the Python tests, on a real gRPC implementation (Debian's
python3-grpcio): the one stand-in kubelet the device plugin, kubelet-sim, exporter and gRPC
interop tests share.

  import kubelet_grpc as kg    (after sys.path.insert(0, <source>/tests/lib))

- kg.check(cond, what) prints "ok"/"FAIL" and records failures in kg.FAILS;
- kg.stubs(proto, ...) generates the Python stubs of the project's .proto files (proto/) with
  grpc_tools.protoc into a temporary folder (which also proves Debian's protoc accepts them) and
  returns (api_pb2, api_pb2_grpc) per file;
- kg.Registration serves the kubelet's Registration service on a unix socket, kg.Watch reads a
  plugin's ListAndWatch stream, kg.PodResources serves PodResourcesLister.List from a JSON file;
- kg.DevicePlugin runs `gpuop device-plugin` with a clean environment (kg.plugin_env).

Importing it exits 77 (skipped) when grpcio or grpc_tools are not installed: the peer is truly
absent. Running it (`kubelet_grpc.py podresources SOCKET PODS_JSON`) serves PodResources until
SIGTERM, for the shell tests.
"""
import atexit
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent import futures

try:
    import grpc
    from grpc_tools import protoc
except ImportError as exc:  # the peer is truly absent
    print(f"SKIP: python3-grpcio / python3-grpc-tools not installed: {exc}")
    sys.exit(77)

SRC = os.environ.get("GPUOP_SOURCE_ROOT") or os.path.join(os.path.dirname(__file__), "..", "..")
PROTO_DIR = os.path.join(SRC, "proto")
DEVICEPLUGIN = "deviceplugin/v1beta1/api.proto"
PODRESOURCES = "podresources/v1/api.proto"
FAILS = []

# What the device plugin reads from its environment: cleared, so that a test's own flags decide.
PLUGIN_ENV = ("KUBELET_SOCKET", "CONFIG_FILE", "MIG_STRATEGY", "DEVICE_LIST_STRATEGY",
              "DEVICE_ID_STRATEGY", "PASS_DEVICE_SPECS", "DP_DISABLE_HEALTHCHECKS",
              "DP_ENABLE_HEALTHCHECKS", "CDI_ROOT")


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        FAILS.append(what)
    return cond


def scratch(prefix):
    """A scratch folder under $TMPDIR, removed when the test exits (kept with GPUOP_TEST_KEEP=1)."""
    d = tempfile.mkdtemp(prefix=prefix)
    if not os.environ.get("GPUOP_TEST_KEEP"):
        atexit.register(shutil.rmtree, d, True)
    return d


def stubs(*protos, outdir=None):
    """(api_pb2, api_pb2_grpc) for each .proto path under proto/, in order."""
    outdir = outdir or scratch("grpc-stubs-")
    os.makedirs(outdir, exist_ok=True)
    for p in protos:
        rc = protoc.main(["grpc_tools.protoc", f"-I{PROTO_DIR}", f"--python_out={outdir}",
                          f"--grpc_python_out={outdir}", p])
        if rc != 0:
            print(f"FAIL protoc rejected {p} (rc={rc})")
            sys.exit(1)
    if outdir not in sys.path:
        sys.path.insert(0, outdir)
    out = []
    for p in protos:
        mod = os.path.dirname(p).replace("/", ".")
        pb2 = __import__(f"{mod}.api_pb2", fromlist=["api_pb2"])
        pb2_grpc = __import__(f"{mod}.api_pb2_grpc", fromlist=["api_pb2_grpc"])
        out.append((pb2, pb2_grpc))
    return out


def plugin_env(lib, fleet, state, **extra):
    """The environment of `gpuop device-plugin` on the simulated fleet FLEET (NVML library LIB,
    the fleet's state in the folder STATE, made here)."""
    env = {k: v for k, v in os.environ.items() if k not in PLUGIN_ENV}
    env.update({"GPUOP_NVML_LIBRARY": lib, "GPUOP_SIM_FLEET": fleet, "GPUOP_SIM_STATE": state})
    env.update(extra)
    os.makedirs(state, exist_ok=True)
    return env


class DevicePlugin:
    """`gpuop device-plugin ARGS` with its output in LOGPATH (appended with append=True)."""

    def __init__(self, gpuop, env, args, logpath, append=False):
        self.logpath = logpath
        self.log = open(logpath, "a" if append else "w")
        self.proc = subprocess.Popen([gpuop, "device-plugin", *args], env=env,
                                     stdout=self.log, stderr=subprocess.STDOUT)

    def stop(self, sig=signal.SIGTERM):
        """Signals the plugin (SIGKILL after 10 s) and returns its exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        self.log.close()
        return rc

    def output(self):
        with open(self.logpath) as f:
            return f.read()


class Registration:
    """The kubelet's Registration service on the unix socket SOCK; each registration goes to
    the queue `registrations` as (monotonic time, RegisterRequest)."""

    def __init__(self, pb, pb_grpc, sock):
        self.pb, self.sock = pb, sock
        self.registrations = queue.Queue()
        outer = self

        class Servicer(pb_grpc.RegistrationServicer):
            def Register(self, request, context):
                outer.registrations.put((time.monotonic(), request))
                return pb.Empty()

        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        pb_grpc.add_RegistrationServicer_to_server(Servicer(), self.server)
        self.server.add_insecure_port(f"unix://{sock}")
        self.server.start()

    def stop(self):
        self.server.stop(0).wait()

    def wait_registrations(self, n, timeout):
        got = []
        end = time.monotonic() + timeout
        while len(got) < n:
            left = end - time.monotonic()
            if left <= 0:
                break
            try:
                got.append(self.registrations.get(timeout=left))
            except queue.Empty:
                break
        return got


class Watch:
    """A plugin's ListAndWatch stream, read on a thread: next() gives (monotonic time, devices)."""

    def __init__(self, stub, pb):
        self.updates = queue.Queue()
        self.call = stub.ListAndWatch(pb.Empty())
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        try:
            for resp in self.call:
                self.updates.put((time.monotonic(), list(resp.devices)))
        except grpc.RpcError:
            pass

    def next(self, timeout):
        try:
            return self.updates.get(timeout=timeout)
        except queue.Empty:
            return None, None

    def cancel(self):
        self.call.cancel()


class PodResources:
    """PodResourcesLister.List on the unix socket SOCK, answered from PODS_JSON, re-read on
    every call: [{"name", "namespace", "containers": [{"name", "devices": [{"resource_name",
    "device_ids": [...]}]}]}]. Each call appends a line to SOCK.calls."""

    def __init__(self, sock, pods_json):
        pb, pb_grpc = stubs(PODRESOURCES)[0]

        class Lister(pb_grpc.PodResourcesListerServicer):
            def List(self, request, context):
                with open(sock + ".calls", "a") as f:
                    f.write("List\n")
                with open(pods_json) as f:
                    pods = json.load(f)
                resp = pb.ListPodResourcesResponse()
                for p in pods:
                    pr = resp.pod_resources.add(name=p["name"], namespace=p["namespace"])
                    for c in p.get("containers", []):
                        cr = pr.containers.add(name=c["name"])
                        for d in c.get("devices", []):
                            cr.devices.add(resource_name=d["resource_name"],
                                           device_ids=d["device_ids"])
                return resp

        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        pb_grpc.add_PodResourcesListerServicer_to_server(Lister(), self.server)
        self.server.add_insecure_port("unix:" + sock)
        self.server.start()

    def stop(self):
        self.server.stop(0).wait()


def serve_podresources(sock, pods_json):
    """Serves PodResources until SIGTERM or SIGINT; prints "ready" once it listens."""
    server = PodResources(sock, pods_json)
    print("ready", flush=True)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *a: done.set())
    signal.signal(signal.SIGINT, lambda *a: done.set())
    done.wait()
    server.stop()
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "podresources":
        sys.exit(serve_podresources(sys.argv[2], sys.argv[3]))
    print("usage: kubelet_grpc.py podresources SOCKET PODS_JSON", file=sys.stderr)
    sys.exit(2)
