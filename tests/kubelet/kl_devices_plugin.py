#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""kubelet-sim's device manager (sim/kubelet/devices.c) against gpuop's real device plugin.

  kl_devices_plugin.py PROBE GPUOP LIBNVML FLEET

PROBE is build/tests/kubelet/kl-devices-probe (the device manager of one node, driven on stdin).
In a temporary node root: `gpuop device-plugin` registers, 8 GPUs turn allocatable, an
allocation of 2 carries the volume-mount list of 2 UUIDs, a second pod gets at most 6, a
release frees, PodResources v1 (grpcio client) lists the pod, a restart of the device manager
keeps the allocation from its checkpoint and the plugin re-registers, an injected XID lowers
allocatable by one within 2 s, and a killed plugin leaves its devices unhealthy until it comes
back. Exit 77 only when python3-grpcio / grpc_tools are missing.
"""
import base64
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.join(os.environ.get("GPUOP_SOURCE_ROOT") or
                                os.path.join(os.path.dirname(__file__), "..", ".."), "tests", "lib"))
import kubelet_grpc as kg  # noqa: E402  (exits 77 when grpcio is not installed)
from kubelet_grpc import FAILS, check, grpc  # noqa: E402

RES = "nvidia.com/gpu"


class Probe:
    def __init__(self, exe, root, log):
        self.log = open(log, "w")
        self.p = subprocess.Popen([exe, root], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=self.log, text=True, bufsize=1)
        self.started = json.loads(self.p.stdout.readline() or "{}")

    def cmd(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        out = self.p.stdout.readline()
        if not out:
            raise RuntimeError(f"probe died on {line!r}")
        return json.loads(out)

    def quit(self):
        try:
            self.p.stdin.write("quit\n")
            self.p.stdin.flush()
        except BrokenPipeError:
            pass
        rc = self.p.wait(timeout=20)
        self.log.close()
        return rc


def plugin_start(gpuop, env, ksock, tmp):
    """`gpuop device-plugin` registering at ksock, its output appended to tmp/plugin.log."""
    return kg.DevicePlugin(gpuop, env, ["--kubelet-socket", ksock],
                           os.path.join(tmp, "plugin.log"), append=True)


ROOT = "/var/run/nvidia-container-devices"


def visible(alloc):
    """The GPUs of an allocation: the plugin's default volume-mount list (the variable pointing
    at /dev/null mounts under ROOT), else the variable's own list."""
    for kv in alloc.get("envs", []):
        if kv == "NVIDIA_VISIBLE_DEVICES=" + ROOT:
            return [m["target"][len(ROOT) + 1:] for m in alloc.get("mounts", [])
                    if m["source"] == "/dev/null" and m["target"].startswith(ROOT + "/")]
        if kv.startswith("NVIDIA_VISIBLE_DEVICES="):
            return [x for x in kv.split("=", 1)[1].split(",") if x]
    return []


def exporter_attributes(gpuop, env, prsock, tmp, ids):
    """Runs `gpuop exporter -k` against the PodResources socket; True when every GPU in ids
    carries pod="pod-a" in its series (and no other GPU does)."""
    err = open(os.path.join(tmp, "exporter.err"), "w+")
    p = subprocess.Popen([gpuop, "exporter", "-a", "127.0.0.1:0", "-k", "-c", "100ms",
                          "--pod-resources-socket", prsock], env=env,
                         stdout=subprocess.DEVNULL, stderr=err)
    try:
        port = None
        for _ in range(200):
            err.seek(0)
            m = re.search(r" serving .*port=(\d+)", err.read())
            if m:
                port = m.group(1)
                break
            if p.poll() is not None:
                break
            time.sleep(0.05)
        if not port:
            err.seek(0)
            print("exporter did not start: " + err.read()[-2000:])
            return False
        for _ in range(50):
            try:
                body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics",
                                              timeout=5).read().decode()
            except OSError:
                body = ""
            held = set()
            for line in body.splitlines():
                if line.startswith("DCGM_FI_DEV_GPU_TEMP{") and 'pod="pod-a"' in line:
                    held |= {u for u in ids if f'UUID="{u}"' in line}
            if held == set(ids):
                return True
            time.sleep(0.1)
        print("exporter series: " + "\n".join(l for l in body.splitlines()
                                              if l.startswith("DCGM_FI_DEV_GPU_TEMP{")))
        return False
    finally:
        p.terminate()
        p.wait(timeout=10)
        err.close()


def main(probe_exe, gpuop, lib, fleet):
    pb, pb_grpc = kg.stubs(kg.PODRESOURCES)[0]
    tmp = kg.scratch("kl-devices-")
    root = os.path.join(tmp, "root")
    os.makedirs(root)
    dpdir = os.path.join(root, "var/lib/kubelet/device-plugins")
    ksock = os.path.join(dpdir, "kubelet.sock")
    prsock = os.path.join(root, "var/lib/kubelet/pod-resources/kubelet.sock")
    env = kg.plugin_env(lib, fleet, os.path.join(tmp, "state"), DP_HEALTH_RECOVERY_PERIOD="0")
    # A stale plugin socket from "before": the device manager removes it at start.
    os.makedirs(dpdir)
    import socket
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(os.path.join(dpdir, "old-plugin.sock"))
    stale.close()

    probe = Probe(probe_exe, root, os.path.join(tmp, "probe.log"))
    check(probe.started.get("started"), "the device manager starts")
    check(os.path.exists(ksock) and os.path.exists(prsock), "both sockets exist")
    check(not os.path.exists(os.path.join(dpdir, "old-plugin.sock")),
          "a stale socket in device-plugins/ is removed at start")
    plugin = plugin_start(gpuop, env, ksock, tmp)
    try:
        w = probe.cmd(f"wait {RES} 8 10000")
        check(w["ok"] and w["resources"][RES]["capacity"] == 8,
              f"the plugin registers: 8 allocatable ({w['resources']})")

        a = probe.cmd('alloc uid-a default pod-a main {"nvidia.com/gpu": 2}')
        ids_a = visible(a)
        check(a["ok"] and len(ids_a) == 2 and all(x.startswith("GPU-") for x in ids_a),
              f"2 GPUs by volume mounts: {','.join(ids_a)}")
        b = probe.cmd('alloc uid-b default pod-b main {"nvidia.com/gpu": 7}')
        check(not b["ok"] and b["code"] == -28 and "Requested: 7, Available: 6" in b["error"],
              f"a second pod cannot get 7: {b.get('error')}")
        b = probe.cmd('alloc uid-b default pod-b main {"nvidia.com/gpu": 6}')
        ids_b = visible(b)
        check(b["ok"] and len(ids_b) == 6 and not set(ids_b) & set(ids_a),
              "a second pod gets the other 6")
        c = probe.cmd('alloc uid-c default pod-c main {"nvidia.com/gpu": 1}')
        check(not c["ok"] and c["code"] == -28, "none left for a third")
        probe.cmd("release uid-b")
        c = probe.cmd('alloc uid-c default pod-c main {"nvidia.com/gpu": 1}')
        check(c["ok"] and len(visible(c)) == 1, "a release frees the devices")
        probe.cmd("release uid-c")
        again = probe.cmd('alloc uid-a default pod-a main {"nvidia.com/gpu": 2}')
        check(again["ok"] and visible(again) == ids_a, "allocate is idempotent per container")
        other = probe.cmd('alloc uid-d default pod-d main {"example.com/foo": 1, "cpu": 2}')
        check(other["ok"] and not other["envs"], "resources no plugin serves are ignored")

        with grpc.insecure_channel(f"unix://{prsock}") as ch:
            stub = pb_grpc.PodResourcesListerStub(ch)
            lst = stub.List(pb.ListPodResourcesRequest(), timeout=5)
            pods = {(p.namespace, p.name): p for p in lst.pod_resources}
            pa = pods.get(("default", "pod-a"))
            got = sorted(i for c in pa.containers for d in c.devices for i in d.device_ids) \
                if pa else []
            check(pa is not None and pa.containers[0].name == "main" and
                  pa.containers[0].devices[0].resource_name == RES and got == sorted(ids_a),
                  f"PodResources List shows pod-a with its 2 GPUs ({len(pods)} pods)")
            g = stub.Get(pb.GetPodResourcesRequest(pod_name="pod-a", pod_namespace="default"),
                         timeout=5)
            check(g.pod_resources.name == "pod-a", "PodResources Get pod-a")
            try:
                stub.Get(pb.GetPodResourcesRequest(pod_name="nope", pod_namespace="default"),
                         timeout=5)
                check(False, "Get of an unknown pod fails")
            except grpc.RpcError as err:
                check("not found" in (err.details() or ""), f"Get nope: {err.details()}")
            al = stub.GetAllocatableResources(pb.AllocatableResourcesRequest(), timeout=5)
            n = sum(len(d.device_ids) for d in al.devices if d.resource_name == RES)
            check(n == 8, f"GetAllocatableResources lists 8 GPUs (got {n})")

        check(exporter_attributes(gpuop, env, prsock, tmp, ids_a),
              "gpuop exporter's PodResources client attributes pod-a's GPUs")

        with open(os.path.join(dpdir, "kubelet_internal_checkpoint")) as f:
            ck = json.load(f)
        ents = ck["Data"]["PodDeviceEntries"]
        check(len(ents) == 1 and ents[0]["PodUID"] == "uid-a" and
              sorted(sum(ents[0]["DeviceIDs"].values(), [])) == sorted(ids_a) and
              base64.b64decode(ents[0]["AllocResp"]) and isinstance(ck["Checksum"], int) and
              len(ck["Data"]["RegisteredDevices"][RES]) == 8,
              "the checkpoint holds pod-a's entry, its response and the registered devices")

        # A restarted device manager: the checkpoint keeps pod-a's GPUs; the plugin re-registers.
        t0 = time.monotonic()
        check(probe.cmd("restart")["ok"], "the device manager restarts")
        w = probe.cmd(f"wait {RES} 8 10000")
        check(w["ok"], f"the plugin re-registers after the restart "
                       f"({time.monotonic() - t0:.2f}s)")
        c = probe.cmd('alloc uid-c default pod-c main {"nvidia.com/gpu": 7}')
        check(not c["ok"] and "Available: 6" in c.get("error", ""),
              "after the restart pod-a's 2 GPUs are still held")
        again = probe.cmd('alloc uid-a default pod-a main {"nvidia.com/gpu": 2}')
        check(again["ok"] and visible(again) == ids_a, "pod-a keeps the same GPUs")
        with grpc.insecure_channel(f"unix://{prsock}") as ch:
            lst = pb_grpc.PodResourcesListerStub(ch).List(pb.ListPodResourcesRequest(),
                                                          timeout=5)
            check([p.name for p in lst.pod_resources] == ["pod-a"],
                  "PodResources lists pod-a after the restart")

        # An XID on one GPU: allocatable 7 within 2 s.
        r = subprocess.run([gpuop + "-sim", "inject", "xid", "--gpu", "5", "--code", "79"],
                           env=env, capture_output=True, text=True, timeout=20)
        check(r.returncode == 0, f"gpuop-sim inject xid: {r.stderr.strip()}")
        w = probe.cmd(f"wait {RES} 7 2000")
        check(w["ok"] and w["resources"][RES]["capacity"] == 8,
              f"an XID lowers allocatable by one in {w['ms']} ms ({w['resources']})")

        # Retain: pods gone meanwhile lose their devices.
        probe.cmd('retain ["uid-x"]')
        c = probe.cmd('alloc uid-c default pod-c main {"nvidia.com/gpu": 7}')
        check(c["ok"], "retain frees the devices of pods no longer live")
        probe.cmd("release uid-c")

        # A killed plugin: its devices are unhealthy (capacity kept) until it registers again.
        plugin.stop(signal.SIGKILL)
        w = probe.cmd(f"wait {RES} 0 3000")
        check(w["ok"] and w["resources"][RES]["capacity"] == 8,
              f"a killed plugin: allocatable 0, capacity 8 ({w['resources']})")
        a = probe.cmd('alloc uid-e default pod-e main {"nvidia.com/gpu": 1}')
        check(not a["ok"] and a["code"] == -11, f"no plugin: -EAGAIN ({a.get('error')})")
        plugin = plugin_start(gpuop, env, ksock, tmp)
        w = probe.cmd(f"wait {RES} 8 10000")
        check(w["ok"], f"a restarted plugin registers again ({w['resources']})")
    finally:
        plugin.stop()
        rc = probe.quit()
    check(rc == 0, f"the probe exits 0 (rc={rc})")
    check(not os.path.exists(ksock) and not os.path.exists(prsock),
          "kl_devices_free removes its sockets")
    if FAILS:
        for name in ("probe.log", "plugin.log"):
            with open(os.path.join(tmp, name)) as f:
                print(f"--- {name}\n" + f.read()[-6000:])
        print(f"{len(FAILS)} check(s) failed")
        return 1
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 5:
        print(__doc__)
        sys.exit(2)
    sys.exit(main(*sys.argv[1:]))
