#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Cross-build test: the other-architecture gpuop (run under qemu-user) and the native one give
the same answers on every sample fleet (sim/fleets), each with the simulated NVML of its own
build:

  - feature discovery's labels (`feature-discovery --oneshot --no-timestamp`, MIG strategy mixed);
  - the exporter's page (`exporter --once`, the simulated clock frozen);
  - the device plugin's answers to a kubelet stand-in (python3-grpcio, tests/lib/kubelet_grpc.py):
    the registrations, each resource's ListAndWatch list, GetPreferredAllocation and Allocate of
    its first devices.

  test-same-answers.py NATIVE_GPUOP NATIVE_LIBNVML CROSS_GPUOP CROSS_LIBNVML FLEET...

The cross programs run through $MESON_EXE_WRAPPER (meson sets it from the cross file's
exe_wrapper). Exit 77 when the native build is missing or grpcio is not installed.
"""
import concurrent.futures
import difflib
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.environ.get("GPUOP_SOURCE_ROOT") or os.path.join(os.path.dirname(__file__), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))

SIM_CLOCK = "1780000000"  # any fixed time: telemetry is a function of seed and time
# Time under qemu-user is several times the native time: a generous bound per program.
TIMEOUT = 120
FAILS = []
STUBS = None  # the device plugin API's (pb, pb_grpc), made once by main


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        FAILS.append(what)
    return cond


def environ(lib, fleet, work):
    """A fresh simulated node: its own state folder and an empty sysfs (GPUOP_SYSFS_ROOT), so the
    answers depend on the fleet only, not on this machine's PCI devices."""
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(os.path.join(work, "state"))
    os.makedirs(os.path.join(work, "sysfs"))
    with open(os.path.join(work, "machine"), "w") as f:
        f.write("NVIDIA DGX (simulated)\n")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GFD_", "DP_", "DCGM_", "NVIDIA_")) and
           k not in ("MIG_STRATEGY", "CONFIG_FILE", "KUBELET_SOCKET", "DEVICE_LIST_STRATEGY",
                     "DEVICE_ID_STRATEGY", "PASS_DEVICE_SPECS", "CDI_ROOT")}
    env.update({"GPUOP_NVML_LIBRARY": lib, "GPUOP_SIM_FLEET": fleet,
                "GPUOP_SIM_STATE": os.path.join(work, "state"),
                "GPUOP_SYSFS_ROOT": os.path.join(work, "sysfs"), "GPUOP_SIM_CLOCK": SIM_CLOCK})
    return env


def run_cmd(cmd, env, what):
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    if r.returncode != 0:
        return f"{what}: exit {r.returncode}: {r.stderr.strip()[-400:]}\n"
    return r.stdout


def labels(gpuop, lib, fleet, work):
    env = environ(lib, fleet, work)
    out = run_cmd(gpuop + ["feature-discovery", "--oneshot", "--no-timestamp", "--output", "-",
                           "--mig-strategy", "mixed", "--machine-type-file",
                           os.path.join(work, "machine")], env, "feature-discovery")
    return "".join(sorted(out.splitlines(keepends=True)))


# The exporter's metrics about itself that measure this run's wall clock, not the GPUs: left out.
OWN_CLOCK = ("gpuop_exporter_last_collection_timestamp_seconds ",
             "gpuop_exporter_collection_duration_seconds ")


def page(gpuop, lib, fleet, work):
    env = environ(lib, fleet, work)
    out = run_cmd(gpuop + ["exporter", "--once"], env, "exporter --once")
    return "".join(line for line in out.splitlines(keepends=True) if not line.startswith(OWN_CLOCK))


def plugin_answers(gpuop, lib, fleet, work):
    """The device plugin's answers as text: registrations, devices, preferred and allocations."""
    import kubelet_grpc as kg  # imported by main first (it exits 77 without grpcio)
    from google.protobuf import text_format

    pb, pb_grpc = STUBS
    env = environ(lib, fleet, work)
    env["MIG_STRATEGY"] = "mixed"
    dpdir = os.path.join(work, "device-plugins")
    os.makedirs(dpdir)
    ksock = os.path.join(dpdir, "kubelet.sock")
    kubelet = kg.Registration(pb, pb_grpc, ksock)
    log = open(os.path.join(work, "plugin.log"), "w")
    proc = subprocess.Popen(gpuop + ["device-plugin", "--kubelet-socket", ksock], env=env,
                            stdout=log, stderr=subprocess.STDOUT)
    out = []
    try:
        regs = kubelet.wait_registrations(1, TIMEOUT)
        if not regs:
            return "no registration\n"
        # Several resources register back to back; let the rest arrive.
        end = time.monotonic() + 3
        while time.monotonic() < end:
            regs += kubelet.wait_registrations(1, 0.5)
        for r in sorted((r for _, r in regs), key=lambda r: r.resource_name):
            out.append("register " + text_format.MessageToString(r, as_one_line=True))
            ch = kg.grpc.insecure_channel(f"unix://{os.path.join(dpdir, r.endpoint)}")
            stub = pb_grpc.DevicePluginStub(ch)
            w = kg.Watch(stub, pb)
            _, devs = w.next(TIMEOUT)
            w.cancel()
            if devs is None:
                out.append(f"{r.resource_name}: no ListAndWatch answer")
                continue
            for d in sorted(devs, key=lambda d: d.ID):
                out.append("device " + text_format.MessageToString(d, as_one_line=True))
            ids = sorted(d.ID for d in devs)
            want = min(2, len(ids))
            pref = stub.GetPreferredAllocation(pb.PreferredAllocationRequest(container_requests=[
                pb.ContainerPreferredAllocationRequest(available_deviceIDs=ids,
                                                       allocation_size=want)]), timeout=TIMEOUT)
            out.append("preferred " + text_format.MessageToString(pref, as_one_line=True))
            got = list(pref.container_responses[0].deviceIDs) if pref.container_responses else []
            alloc = stub.Allocate(pb.AllocateRequest(container_requests=[
                pb.ContainerAllocateRequest(devices_ids=got or ids[:1])]), timeout=TIMEOUT)
            out.append("allocate " + text_format.MessageToString(alloc, as_one_line=True))
            ch.close()
    finally:
        kubelet.stop()
        if proc.poll() is None:
            proc.terminate()
        try:
            proc.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
    return "\n".join(out) + "\n"


def compare(what, native, cross):
    if native == cross:
        # An answer that is an error on both sides is not an agreement worth a pass.
        return check(native.strip() != "" and ": exit " not in native,
                     f"{what}: same answer ({len(native.splitlines())} lines)")
    check(False, f"{what}: the answers differ")
    sys.stdout.writelines(difflib.unified_diff(native.splitlines(True), cross.splitlines(True),
                                               "native", "cross", n=1))
    return False


def main():
    if len(sys.argv) < 6:
        print(__doc__)
        return 2
    # meson passes the built programs relative to the build folder: absolute, for dlopen
    ngpuop, nlib, xgpuop, xlib = (os.path.abspath(a) for a in sys.argv[1:5])
    fleets = sys.argv[5:]
    if not (os.access(ngpuop, os.X_OK) and os.path.isfile(nlib)):
        print(f"SKIP the native build ({ngpuop}, {nlib}) is not built: `make build` first")
        return 77
    wrapper = shlex.split(os.environ.get("MESON_EXE_WRAPPER", ""))
    import kubelet_grpc as kg  # exits 77 without grpcio

    tmp = tempfile.mkdtemp(prefix="same-answers-")

    def answers(fleet):
        """(what, native answer, cross answer) of one fleet: both runs in the fleet's own folder,
        the same for both, so that no path in an answer differs by the run."""
        name = os.path.splitext(os.path.basename(fleet))[0]
        work = os.path.join(tmp, name, "node")
        out = []
        for what, fn in (("labels", labels), ("exporter page", page),
                         ("device plugin", plugin_answers)):
            native = fn([ngpuop], nlib, fleet, work)
            cross = fn(wrapper + [xgpuop], xlib, fleet, work)
            out.append((f"{name}: {what}", native, cross))
        return out

    try:
        global STUBS
        STUBS = kg.stubs(kg.DEVICEPLUGIN, outdir=os.path.join(tmp, "stubs"))[0]
        # The fleets at once: most of a device plugin's run is the wait for its registrations.
        with concurrent.futures.ThreadPoolExecutor(max_workers=len(fleets)) as pool:
            for fleet_answers in pool.map(answers, fleets):
                for what, native, cross in fleet_answers:
                    compare(what, native, cross)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{len(FAILS)} failed")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
