#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Interop test: `gpuop device-plugin` against a kubelet stand-in built on a real gRPC
implementation (Debian's python3-grpcio), on the simulated fleets.

  kubelet_standin.py GPUOP LIBNVML FLEET SCENARIO

SCENARIO: none | single | mixed | timeslicing | recovery | resetclear | strategies | badconfig |
reloadstress | preferredload. The stand-in serves Registration on
a temporary kubelet.sock, accepts the registrations, streams ListAndWatch, calls
GetDevicePluginOptions, GetPreferredAllocation and Allocate, injects an XID with
`gpuop-sim inject xid` and expects the device Unhealthy in under a second, then deletes and
re-creates kubelet.sock (removing the plugin sockets, as a restarting kubelet does) and expects
new registrations in under a second. Stubs are generated at test time with grpc_tools.protoc
from proto/deviceplugin/v1beta1/api.proto.

Exit 77 (skipped) only when grpcio / grpc_tools are not installed.
"""
import os
import re
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.environ.get("GPUOP_SOURCE_ROOT") or
                                os.path.join(os.path.dirname(__file__), "..", ".."), "tests", "lib"))
import kubelet_grpc as kg  # noqa: E402  (exits 77 when grpcio is not installed)
from kubelet_grpc import FAILS, check, grpc  # noqa: E402


def sim(gpuop, env, *args):
    r = subprocess.run([gpuop + "-sim", *args], env=env, capture_output=True, text=True, timeout=20)
    if r.returncode != 0:
        print(f"gpuop-sim {' '.join(args)}: rc={r.returncode} {r.stderr.strip()}")
    return r.returncode


def base_id(dev_id):
    return dev_id.split("::")[0]


def fleet_layout(gpuop, env):
    """[(gpu uuid, mig enabled, [(ci profile, MIG uuid)])] in NVML order, from `gpuop-sim show`."""
    r = subprocess.run([gpuop + "-sim", "show"], env=env, capture_output=True, text=True,
                       timeout=20)
    gpus = []
    for line in r.stdout.splitlines():
        f = line.split()
        if len(f) >= 3 and f[0] == "GPU" and f[1].isdigit():
            gpus.append([next(x for x in f if x.startswith("GPU-")), False, []])
        elif gpus and line.strip().startswith("MIG enabled"):
            gpus[-1][1] = True
        elif gpus and len(f) == 4 and f[0] == "CI" and f[3].startswith("MIG-"):
            gpus[-1][2].append((f[2], f[3]))
    return gpus


def gpu_device_ids(layout, gpu, scenario):
    """The advertised base IDs that belong to GPU `gpu` under the scenario's strategy."""
    uuid, mig, migs = layout[gpu]
    if scenario in ("single", "mixed") and mig:
        return {m for _, m in migs}
    return {uuid}


def mixed_resources(layout):
    """NVIDIA's mixed-strategy resource names: nvidia.com/gpu for whole GPUs, one
    nvidia.com/mig-<profile> per exposed profile (C == G; '+' becomes '.')."""
    names = set()
    for _, mig, migs in layout:
        if not mig:
            names.add("nvidia.com/gpu")
        for prof, _ in migs:
            if not re.match(r"^[0-9]+c\.", prof):
                names.add("nvidia.com/mig-" + prof.replace("+", "."))
    return names


def expected(scenario):
    """Resources (name -> socket) a scenario must register, by fleet shape."""
    if scenario == "mixed":
        return None  # several nvidia.com/mig-* resources; checked by prefix
    if scenario == "timeslicing":
        return {"nvidia.com/gpu.shared": "nvidia-gpu.shared.sock"}
    return {"nvidia.com/gpu": "nvidia-gpu.sock"}


def run(gpuop, lib, fleet, scenario):
    pb, pb_grpc = kg.stubs(kg.DEVICEPLUGIN)[0]
    tmp = kg.scratch("dp-interop-")
    dpdir = os.path.join(tmp, "device-plugins")
    os.makedirs(dpdir)
    ksock = os.path.join(dpdir, "kubelet.sock")
    env = kg.plugin_env(lib, fleet, os.path.join(tmp, "state"), DP_HEALTH_RECOVERY_PERIOD="0")
    args = ["--kubelet-socket", ksock]
    cfg = os.path.join(tmp, "config.yaml")

    if scenario == "badconfig":
        with open(cfg, "w") as f:
            f.write("version: v1\nflags:\n  migStrategy: sideways\n")
        p = kg.DevicePlugin(gpuop, env, args + ["--config-file", cfg], os.path.join(tmp, "plugin.log"))
        rc = p.proc.wait(timeout=20)
        out = p.output()
        p.log.close()
        check(rc != 0, f"a bad config ends the start with an error (rc={rc})")
        check("migStrategy" in out, "the error names the field: " + out.strip().splitlines()[-1]
              if out.strip() else "no output")
        # No NVML: failOnInitError (default true) ends the start; false keeps running.
        env2 = dict(env, GPUOP_NVML_LIBRARY=os.path.join(tmp, "no-libnvidia-ml.so.1"))
        p = kg.DevicePlugin(gpuop, env2, args, os.path.join(tmp, "plugin2.log"))
        rc = p.proc.wait(timeout=20)
        p.log.close()
        check(rc != 0 and "NVML" in p.output(), f"no NVML, failOnInitError: exit {rc}")
        p = kg.DevicePlugin(gpuop, env2, args + ["--fail-on-init-error=false"],
                   os.path.join(tmp, "plugin3.log"))
        time.sleep(1.0)
        check(p.proc.poll() is None, "no NVML, --fail-on-init-error=false: keeps running")
        rc = p.stop()
        check(rc == 0 and "No devices found" in p.output(),
              f"... serving no devices, exits 0 on SIGTERM (rc={rc})")
        return

    if scenario == "strategies":
        run_strategies(gpuop, env, args, pb, pb_grpc, ksock, dpdir, tmp)
        return
    if scenario == "recovery":
        run_recovery(gpuop, env, args, pb, pb_grpc, ksock, dpdir, tmp)
        return
    if scenario == "resetclear":
        run_reset_clear(gpuop, env, args, pb, pb_grpc, ksock, dpdir, tmp)
        return
    if scenario == "preferredload":
        run_preferred_load(gpuop, env, args, pb, pb_grpc, ksock, dpdir, tmp)
        return
    if scenario == "reloadstress":
        run_reload_stress(gpuop, env, args, pb, pb_grpc, ksock, dpdir, tmp)
        return
    if scenario == "single":
        args += ["--mig-strategy", "single"]
    elif scenario == "mixed":
        env["MIG_STRATEGY"] = "mixed"  # through the environment
    elif scenario == "timeslicing":
        with open(cfg, "w") as f:
            f.write("version: v1\nsharing:\n  timeSlicing:\n    renameByDefault: true\n"
                    "    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n")
        args += ["--config-file", cfg]
    elif scenario != "none":
        print(f"unknown scenario {scenario}")
        sys.exit(2)

    kubelet = kg.Registration(pb, pb_grpc, ksock)
    plugin = kg.DevicePlugin(gpuop, env, args, os.path.join(tmp, "plugin.log"))
    watches = []
    try:
        regs = kubelet.wait_registrations(1, 15)
        if not check(len(regs) == 1, "the plugin registers with the kubelet"):
            return
        # Several resources register back to back; collect the rest.
        time.sleep(0.3)
        while not kubelet.registrations.empty():
            regs.append(kubelet.registrations.get())
        reqs = {r.resource_name: r for _, r in regs}
        layout = fleet_layout(gpuop, env)
        if not check(len(layout) >= 2, f"gpuop-sim show lists the fleet ({len(layout)} GPUs)"):
            return
        want = expected(scenario)
        if want is not None:
            check(set(reqs) == set(want), f"resources {sorted(reqs)} == {sorted(want)}")
        else:
            wantm = mixed_resources(layout)
            check(any(n.startswith("nvidia.com/mig-") for n in wantm) and set(reqs) == wantm,
                  f"mixed advertises {sorted(reqs)} == {sorted(wantm)}")
        for name, r in reqs.items():
            check(r.version == "v1beta1", f"{name}: version v1beta1")
            check(r.options.get_preferred_allocation_available,
                  f"{name}: get_preferred_allocation_available")
            sock = name.split("/", 1)[1]
            check(r.endpoint == f"nvidia-{sock}.sock", f"{name}: endpoint {r.endpoint}")
            check(os.path.exists(os.path.join(dpdir, r.endpoint)), f"{name}: socket exists")

        stubs, lists = {}, {}
        for name, r in reqs.items():
            ch = grpc.insecure_channel(f"unix://{os.path.join(dpdir, r.endpoint)}")
            stub = pb_grpc.DevicePluginStub(ch)
            stubs[name] = stub
            opts = stub.GetDevicePluginOptions(pb.Empty(), timeout=5)
            check(opts.get_preferred_allocation_available and not opts.pre_start_required,
                  f"{name}: GetDevicePluginOptions")
            w = kg.Watch(stub, pb)
            watches.append((name, w))
            t, devs = w.next(5)
            if not check(devs is not None and len(devs) > 0, f"{name}: ListAndWatch sends a list"):
                return
            lists[name] = devs
            check(all(d.health == "Healthy" for d in devs), f"{name}: all Healthy at start")
            check(all(len(d.ID) <= 63 for d in devs), f"{name}: IDs fit 63 characters")
            if scenario == "mixed" and name.startswith("nvidia.com/mig-"):
                check(all(d.ID.startswith("MIG-") for d in devs), f"{name}: MIG UUIDs")
            elif scenario == "single":
                check(all(d.ID.startswith("MIG-") for d in devs), f"{name}: MIG UUIDs (single)")
            elif scenario == "timeslicing":
                check(all("::" in d.ID for d in devs), f"{name}: replica IDs <uuid>::<n>")
                bases = {base_id(d.ID) for d in devs}
                check(len(devs) == 4 * len(bases), f"{name}: 4 replicas per GPU "
                      f"({len(devs)} devices, {len(bases)} GPUs)")
            else:
                check(all(d.ID.startswith("GPU-") for d in devs), f"{name}: GPU UUIDs")
            check(all(len(d.topology.nodes) == 1 for d in devs) or
                  all(len(d.topology.nodes) == 0 for d in devs),
                  f"{name}: topology is one NUMA node per device (or unknown for all)")

        # Preferred allocation and Allocate on the first resource.
        name = sorted(reqs)[0]
        stub, devs = stubs[name], lists[name]
        ids = [d.ID for d in devs]
        size = 2 if len(ids) >= 2 else 1
        req = pb.PreferredAllocationRequest(container_requests=[
            pb.ContainerPreferredAllocationRequest(available_deviceIDs=ids,
                                                   must_include_deviceIDs=[ids[-1]],
                                                   allocation_size=size)])
        t0 = time.monotonic()
        resp = stub.GetPreferredAllocation(req, timeout=5)
        got = list(resp.container_responses[0].deviceIDs)
        check(len(got) == size and ids[-1] in got and set(got) <= set(ids),
              f"{name}: GetPreferredAllocation size {size} with must-include -> {got} "
              f"({(time.monotonic() - t0) * 1000:.1f} ms)")
        if scenario == "none" and os.path.basename(fleet) == "h100-4.yaml":
            # GPU 3's NVLink partner is GPU 2 (6 links: 100*6 + 10 beats 10 for the others)
            check(sorted(got) == sorted([ids[3], ids[2]]),
                  "topology-aware: GPU 3 is paired with its NVLink peer GPU 2")
        if scenario == "none" and os.path.basename(fleet) == "dgx1-v100.yaml":
            # Hybrid cube-mesh with PCIe switch pairs (50), host bridge in a socket (30), SYS
            # across (10), +100 per NVLink. Pair splits scoring 920: {0,3}{1,2}{4,7}{5,6}
            # (230 each) and {0,4}{1,5}{2,3}{6,7} (210+210+250+250); the first found, in
            # go-gpuallocator's order, is the one whose first set is {0,3}: GPU 7 gets GPU 4.
            check(sorted(got) == sorted([ids[7], ids[4]]),
                  "topology-aware on DGX-1: GPU 7 is paired with GPU 4")
        if scenario == "timeslicing":
            check(len({base_id(i) for i in got}) == size,
                  f"{name}: replicas spread over distinct GPUs (distributed)")

        take = got
        if scenario == "timeslicing":
            take = [ids[0], ids[1]]  # two replicas of the same GPU
        a = stub.Allocate(pb.AllocateRequest(container_requests=[
            pb.ContainerAllocateRequest(devices_ids=take)]), timeout=5)
        # The default list strategy, volume-mounts: the variable points at one /dev/null mount
        # per GPU (each GPU once, however many of its replicas were taken).
        envs = dict(a.container_responses[0].envs)
        visible = envs.get("NVIDIA_VISIBLE_DEVICES", "")
        want_vis = []
        for i in take:
            if base_id(i) not in want_vis:
                want_vis.append(base_id(i))
        mounts = [(m.container_path, m.host_path) for m in a.container_responses[0].mounts]
        want_mounts = [("/var/run/nvidia-container-devices/" + v, "/dev/null") for v in want_vis]
        check(visible == "/var/run/nvidia-container-devices" and mounts == want_mounts,
              f"{name}: Allocate NVIDIA_VISIBLE_DEVICES={visible}, mounts {mounts} "
              f"(want the volume-mount list of {','.join(want_vis)})")

        try:
            stub.Allocate(pb.AllocateRequest(container_requests=[
                pb.ContainerAllocateRequest(devices_ids=["GPU-not-there"])]), timeout=5)
            check(False, "Allocate of an unknown device fails")
        except grpc.RpcError as e:
            check(e.code() == grpc.StatusCode.UNKNOWN and "unknown device" in e.details(),
                  f"Allocate of an unknown device fails: {e.code()} {e.details()}")

        # Health: an application XID (13) changes nothing; XID 79 on GPU 0 turns the devices of
        # GPU 0 Unhealthy fast (in whichever resource holds them).
        def poll_all(deadline):
            """(time, resource, devices) of the first update with an Unhealthy device."""
            while time.monotonic() < deadline:
                for rname, wt in watches:
                    t, dv = wt.next(0.02)
                    if dv is not None and any(d.health == "Unhealthy" for d in dv):
                        return t, rname, dv
            return None

        check(sim(gpuop, env, "inject", "xid", "--gpu", "0", "--code", "13") == 0,
              "gpuop-sim inject xid --gpu 0 --code 13")
        check(poll_all(time.monotonic() + 0.7) is None,
              "XID 13 (application error) leaves the devices Healthy")
        t0 = time.monotonic()
        check(sim(gpuop, env, "inject", "xid", "--gpu", "0", "--code", "79") == 0,
              "gpuop-sim inject xid --gpu 0 --code 79")
        hit = poll_all(t0 + 3)
        unhealthy_res = None
        if check(hit is not None, "an update marks devices Unhealthy after XID 79"):
            t, unhealthy_res, dv = hit
            bad = [d.ID for d in dv if d.health == "Unhealthy"]
            # Exactly the devices of GPU 0 turn Unhealthy, in every resource that holds them,
            # within the second (mixed: GPU 0's MIG devices are in several resources).
            want_bad = gpu_device_ids(layout, 0, scenario)
            latest = {unhealthy_res: dv}
            while time.monotonic() < t0 + 1.0:
                got_bad = {base_id(d.ID) for v in latest.values() for d in v
                           if d.health == "Unhealthy"}
                if got_bad >= want_bad:
                    break
                for rname, wt in watches:
                    tt, dv2 = wt.next(0.01)
                    if dv2 is not None:
                        latest[rname] = dv2
            got_bad = {base_id(d.ID) for v in latest.values() for d in v
                       if d.health == "Unhealthy"}
            check(got_bad == want_bad and time.monotonic() - t0 < 1.2,
                  f"XID 79 on GPU 0: exactly GPU 0's devices Unhealthy within a second "
                  f"({sorted(got_bad)} == {sorted(want_bad)})")
            check(t - t0 < 1.0, f"{unhealthy_res}: {len(bad)} device(s) Unhealthy within a "
                  f"second ({(t - t0) * 1000:.0f} ms)")
            if scenario == "timeslicing":
                check(len(bad) == 4 and len({base_id(i) for i in bad}) == 1,
                      "the 4 replicas of GPU 0 follow their GPU")
            if scenario == "single":
                # An XID naming one GPU instance marks only that MIG device.
                t1 = time.monotonic()
                sim(gpuop, env, "inject", "xid", "--gpu", "1", "--code", "79", "--gi", "2",
                    "--ci", "0")
                more = None
                while time.monotonic() - t1 < 2 and more is None:
                    tt, dv = dict(watches)[unhealthy_res].next(2)
                    if dv is None:
                        break
                    nb = [d.ID for d in dv if d.health == "Unhealthy"]
                    if len(nb) > len(bad):
                        more = nb
                check(more is not None and len(more) == len(bad) + 1,
                      f"an XID on GPU 1 / GI 2 marks exactly one more MIG device "
                      f"({len(more) if more else 0} Unhealthy of {len(dv) if dv else 0})")
            try:
                stubs[unhealthy_res].Allocate(pb.AllocateRequest(container_requests=[
                    pb.ContainerAllocateRequest(devices_ids=[bad[0]])]), timeout=5)
                check(False, "Allocate of an Unhealthy device fails")
            except grpc.RpcError as e:
                check("Unhealthy" in e.details(), f"Allocate of an Unhealthy device fails: "
                      f"{e.details()}")

        # Kubelet restart: a new kubelet removes the plugin sockets and re-creates kubelet.sock.
        for _, w2 in watches:
            w2.cancel()
        watches = []
        kubelet.stop()
        for f in os.listdir(dpdir):
            os.unlink(os.path.join(dpdir, f))
        t0 = time.monotonic()
        kubelet = kg.Registration(pb, pb_grpc, ksock)
        regs2 = kubelet.wait_registrations(len(reqs), 5)
        # A plugin that saw the sockets go before kubelet.sock came back may register twice
        # (as with a real kubelet); take every registration of the next moments.
        time.sleep(0.3)
        while not kubelet.registrations.empty():
            regs2.append(kubelet.registrations.get())
        names2 = {r.resource_name for _, r in regs2}
        if check(names2 == set(reqs), f"re-registered {sorted(names2)} after kubelet restart"):
            first = {}
            for t, r in regs2:
                first.setdefault(r.resource_name, t)
            last = max(first.values()) - t0
            check(last < 1.0, f"re-registration within a second ({last * 1000:.0f} ms, "
                  f"{len(regs2)} registration(s))")
            rname = unhealthy_res or name
            ep = reqs[rname].endpoint
            ch = grpc.insecure_channel(f"unix://{os.path.join(dpdir, ep)}")
            o = pb_grpc.DevicePluginStub(ch).GetDevicePluginOptions(pb.Empty(), timeout=5)
            check(o.get_preferred_allocation_available, "the new socket serves")
            if unhealthy_res:
                w3 = kg.Watch(pb_grpc.DevicePluginStub(ch), pb)
                t, devs3 = w3.next(5)
                check(devs3 is not None and any(d.health == "Unhealthy" for d in devs3),
                      "health state is kept across the re-registration")
                w3.cancel()

        if scenario == "none":
            # Only the plugin's socket disappears: the plugin serves and registers again.
            time.sleep(0.2)
            while not kubelet.registrations.empty():
                kubelet.registrations.get()
            t0 = time.monotonic()
            os.unlink(os.path.join(dpdir, "nvidia-gpu.sock"))
            regs4 = kubelet.wait_registrations(1, 5)
            check(len(regs4) == 1 and regs4[0][0] - t0 < 1.0 and
                  os.path.exists(os.path.join(dpdir, "nvidia-gpu.sock")),
                  "plugin socket removed: served and registered again within a second")
            # Only kubelet.sock is re-created (the plugin sockets stay): nothing but the
            # inotify watch on kubelet.sock can make the plugin register again.
            kubelet.stop()
            if os.path.exists(ksock):
                os.unlink(ksock)
            time.sleep(1.5)  # no registration attempt is pending: the last one succeeded
            t0 = time.monotonic()
            kubelet = kg.Registration(pb, pb_grpc, ksock)
            regs5 = kubelet.wait_registrations(1, 3)
            check(len(regs5) == 1 and regs5[0][0] - t0 < 1.0 and
                  regs5[0][1].resource_name == "nvidia.com/gpu",
                  f"kubelet.sock re-created alone: registered again within a second "
                  f"({(regs5[0][0] - t0) * 1000 if regs5 else -1:.0f} ms)")
        if scenario == "timeslicing":
            # SIGHUP with a good new config: the new resource is served and registered.
            with open(cfg, "w") as f:
                f.write("version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
                        "    - name: nvidia.com/gpu\n      replicas: 2\n")
            t0 = time.monotonic()
            plugin.proc.send_signal(signal.SIGHUP)
            regs3 = kubelet.wait_registrations(1, 5)
            check(len(regs3) == 1 and regs3[0][1].resource_name == "nvidia.com/gpu" and
                  regs3[0][0] - t0 < 1.0,
                  "SIGHUP with a new config: nvidia.com/gpu (not renamed) registered in < 1 s")
            ch = grpc.insecure_channel(f"unix://{os.path.join(dpdir, 'nvidia-gpu.sock')}")
            w4 = kg.Watch(pb_grpc.DevicePluginStub(ch), pb)
            t, devs4 = w4.next(5)
            check(devs4 is not None and len(devs4) == 2 * len({base_id(d.ID) for d in devs4}),
                  "SIGHUP with a new config: 2 replicas per GPU")
            w4.cancel()
            check(not os.path.exists(os.path.join(dpdir, "nvidia-gpu.shared.sock")),
                  "SIGHUP with a new config: the old resource's socket is gone")
            # SIGHUP with a broken config: an error, the last good config keeps serving.
            with open(cfg, "w") as f:
                f.write("version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
                        "    - name: nvidia.com/gpu\n      replicas: 1\n")
            plugin.proc.send_signal(signal.SIGHUP)
            time.sleep(0.5)
            check(plugin.proc.poll() is None, "SIGHUP with a bad config: still running")
            ch = grpc.insecure_channel(f"unix://{os.path.join(dpdir, 'nvidia-gpu.sock')}")
            o = pb_grpc.DevicePluginStub(ch).GetDevicePluginOptions(pb.Empty(), timeout=5)
            check(o.get_preferred_allocation_available, "SIGHUP with a bad config: still serving")
            check("keeping the last good config" in plugin.output(),
                  "SIGHUP with a bad config: a clear error is logged")
    finally:
        for _, w in watches:
            w.cancel()
        rc = plugin.stop()
        check(rc == 0, f"SIGTERM: exit 0 (rc={rc})")
        left = [f for f in os.listdir(dpdir) if f.startswith("nvidia-")]
        check(not left, f"SIGTERM: plugin sockets removed ({left})")
        kubelet.stop()
        if FAILS or sys.exc_info()[0] is not None:
            print("---- plugin log ----")
            print(plugin.output()[-6000:])


def run_strategies(gpuop, env, args, pb, pb_grpc, ksock, dpdir, tmp):
    """Allocate over the wire with every deviceListStrategy, index IDs and device specs."""
    devroot = os.path.join(tmp, "host")
    os.makedirs(os.path.join(devroot, "dev"))
    for n in ["nvidiactl", "nvidia-uvm", "nvidia0", "nvidia1", "nvidia2", "nvidia3"]:
        open(os.path.join(devroot, "dev", n), "w").close()  # nvidia-uvm-tools absent
    env["DEVICE_ID_STRATEGY"] = "index"
    args = args + ["--device-list-strategy", "envvar,cdi-cri,cdi-annotations",
                   "--pass-device-specs", "--dev-root", devroot]
    kubelet = kg.Registration(pb, pb_grpc, ksock)
    plugin = kg.DevicePlugin(gpuop, env, args, os.path.join(tmp, "plugin.log"))
    try:
        regs = kubelet.wait_registrations(1, 15)
        if not check(len(regs) == 1, "the plugin registers"):
            return
        stub = pb_grpc.DevicePluginStub(
            grpc.insecure_channel(f"unix://{os.path.join(dpdir, regs[0][1].endpoint)}"))
        w = kg.Watch(stub, pb)
        t, devs = w.next(5)
        w.cancel()
        if not check(devs is not None and len(devs) == 4, "4 GPUs listed"):
            return
        a = stub.Allocate(pb.AllocateRequest(container_requests=[
            pb.ContainerAllocateRequest(devices_ids=[devs[2].ID, devs[0].ID]),
            pb.ContainerAllocateRequest(devices_ids=[devs[3].ID])]), timeout=5)
        c0, c1 = a.container_responses
        check(dict(c0.envs).get("NVIDIA_VISIBLE_DEVICES") == "2,0",
              f"index IDs in the env: {dict(c0.envs)}")
        check([d.name for d in c0.cdi_devices] == ["k8s.device-plugin.nvidia.com/gpu=2",
                                                   "k8s.device-plugin.nvidia.com/gpu=0"],
              f"cdi_devices: {[d.name for d in c0.cdi_devices]}")
        ann = dict(c0.annotations)
        check(len(ann) == 1 and list(ann)[0].startswith("cdi.k8s.io/nvidia-device-plugin_") and
              list(ann.values())[0] == "k8s.device-plugin.nvidia.com/gpu=2,"
              "k8s.device-plugin.nvidia.com/gpu=0", f"CDI annotation: {ann}")
        check(list(dict(c1.annotations)) != list(ann), "each container has its own annotation key")
        specs = [(d.container_path, d.host_path, d.permissions) for d in c0.devices]
        want = [(p, devroot + p, "rw") for p in
                ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia2", "/dev/nvidia0"]]
        check(specs == want, f"device specs (present ones only): {specs}")
        check(dict(c1.envs).get("NVIDIA_VISIBLE_DEVICES") == "3", "second container: GPU 3")
        rc = plugin.stop()
        check(rc == 0, f"SIGTERM: exit 0 (rc={rc})")

        # volume-mounts (with uuid IDs): the env names the mount root, one /dev/null mount per
        # device under it, no CDI, no device specs.
        env.pop("DEVICE_ID_STRATEGY", None)
        plugin = kg.DevicePlugin(gpuop, env, ["--kubelet-socket", ksock, "--device-list-strategy",
                                     "volume-mounts"], os.path.join(tmp, "plugin-vm.log"))
        regs = kubelet.wait_registrations(1, 15)
        if not check(len(regs) == 1, "volume-mounts: the plugin registers"):
            return
        stub = pb_grpc.DevicePluginStub(
            grpc.insecure_channel(f"unix://{os.path.join(dpdir, regs[0][1].endpoint)}"))
        w = kg.Watch(stub, pb)
        t, devs = w.next(5)
        w.cancel()
        if not check(devs is not None and len(devs) == 4, "volume-mounts: 4 GPUs listed"):
            return
        a = stub.Allocate(pb.AllocateRequest(container_requests=[
            pb.ContainerAllocateRequest(devices_ids=[devs[1].ID, devs[3].ID])]), timeout=5)
        c = a.container_responses[0]
        check(dict(c.envs) == {"NVIDIA_VISIBLE_DEVICES": "/var/run/nvidia-container-devices"},
              f"volume-mounts: env {dict(c.envs)}")
        mounts = [(m.container_path, m.host_path, m.read_only) for m in c.mounts]
        check(mounts == [(f"/var/run/nvidia-container-devices/{devs[1].ID}", "/dev/null", False),
                         (f"/var/run/nvidia-container-devices/{devs[3].ID}", "/dev/null", False)],
              f"volume-mounts: mounts {mounts}")
        check(not c.cdi_devices and not c.annotations and not c.devices,
              "volume-mounts: no CDI devices, annotations or device specs")
        rc = plugin.stop()
        check(rc == 0, f"volume-mounts: SIGTERM: exit 0 (rc={rc})")

        # --socket-suffix: a second plugin's socket beside another's (the operator's takeover
        # runs one while NVIDIA's plugin still serves nvidia-gpu.sock); a bad word is refused.
        bad = kg.DevicePlugin(gpuop, env, ["--kubelet-socket", ksock, "--socket-suffix", "Bad/x"],
                              os.path.join(tmp, "plugin-badsfx.log"))
        rc = bad.proc.wait(timeout=20)
        bad.log.close()
        check(rc == 2 and "socket-suffix" in bad.output(),
              f"--socket-suffix Bad/x refused (rc={rc}): {bad.output().strip()[-200:]}")
        plugin = kg.DevicePlugin(gpuop, env, ["--kubelet-socket", ksock, "--socket-suffix",
                                              "takeover"], os.path.join(tmp, "plugin-sfx.log"))
        regs = kubelet.wait_registrations(1, 15)
        if not check(len(regs) == 1, "--socket-suffix: the plugin registers"):
            return
        check(regs[0][1].endpoint == "nvidia-gpu-takeover.sock",
              f"--socket-suffix: endpoint {regs[0][1].endpoint}")
        check(os.path.exists(os.path.join(dpdir, "nvidia-gpu-takeover.sock")),
              "--socket-suffix: its socket exists")
        stub = pb_grpc.DevicePluginStub(
            grpc.insecure_channel(f"unix://{os.path.join(dpdir, regs[0][1].endpoint)}"))
        w = kg.Watch(stub, pb)
        t, devs = w.next(5)
        w.cancel()
        check(devs is not None and len(devs) == 4, "--socket-suffix: 4 GPUs listed")
    finally:
        rc = plugin.stop()
        check(rc == 0, f"SIGTERM: exit 0 (rc={rc})")
        kubelet.stop()
        if FAILS:
            print("---- plugin log ----")
            print(plugin.output()[-6000:])


def run_recovery(gpuop, env, args, pb, pb_grpc, ksock, dpdir, tmp):
    """DP_DISABLE_HEALTHCHECKS adds ignored XIDs; a device recovers after the quiet period
    (DP_HEALTH_RECOVERY_PERIOD); a lost GPU stays Unhealthy."""
    env["DP_HEALTH_RECOVERY_PERIOD"] = "1s"
    env["DP_DISABLE_HEALTHCHECKS"] = " 48 , bogus"
    # No kubelet yet: registration fails and is retried; the process stays up; once
    # kubelet.sock appears the plugin registers within a second.
    plugin = kg.DevicePlugin(gpuop, env, args, os.path.join(tmp, "plugin.log"))
    kubelet = None
    w = None
    try:
        time.sleep(1.0)
        check(plugin.proc.poll() is None, "no kubelet yet: the plugin keeps running")
        t0 = time.monotonic()
        kubelet = kg.Registration(pb, pb_grpc, ksock)
        regs = kubelet.wait_registrations(1, 15)
        if not check(len(regs) == 1, "the plugin registers once kubelet.sock appears"):
            return
        check(regs[0][0] - t0 < 1.0, f"... within a second ({(regs[0][0] - t0) * 1000:.0f} ms)")
        ch = grpc.insecure_channel(f"unix://{os.path.join(dpdir, regs[0][1].endpoint)}")
        w = kg.Watch(pb_grpc.DevicePluginStub(ch), pb)
        t, devs = w.next(5)
        if not check(devs is not None and len(devs) >= 2, "ListAndWatch sends the list"):
            return
        gpu0, gpu1 = devs[0].ID, devs[1].ID

        def health_after(deadline, want):
            """The first update within the deadline satisfying want(health by ID)."""
            while time.monotonic() < deadline:
                t, dv = w.next(max(0.01, deadline - time.monotonic()))
                if dv is None:
                    return None
                h = {d.ID: d.health for d in dv}
                if want(h):
                    return t, h
            return None

        check(sim(gpuop, env, "inject", "xid", "--gpu", "0", "--code", "48") == 0,
              "gpuop-sim inject xid --gpu 0 --code 48")
        check(health_after(time.monotonic() + 0.7, lambda h: "Unhealthy" in h.values()) is None,
              "XID 48 listed in DP_DISABLE_HEALTHCHECKS is ignored")
        t0 = time.monotonic()
        sim(gpuop, env, "inject", "xid", "--gpu", "0", "--code", "94")
        hit = health_after(t0 + 2, lambda h: h[gpu0] == "Unhealthy")
        check(hit is not None and hit[0] - t0 < 1.0, "XID 94 marks GPU 0 Unhealthy in < 1 s")
        hit = health_after(t0 + 4, lambda h: h[gpu0] == "Healthy")
        check(hit is not None and 0.9 < hit[0] - t0 < 3.0,
              f"GPU 0 Healthy again after the 1 s quiet period "
              f"({(hit[0] - t0) if hit else -1:.2f} s)")
        gpu2 = devs[2].ID
        t2 = time.monotonic()
        check(sim(gpuop, env, "inject", "ecc", "--gpu", "2", "--dbe", "0", "--sbe", "5") == 0,
              "gpuop-sim inject ecc --gpu 2 --dbe 0 --sbe 5")
        check(health_after(t2 + 0.7, lambda h: h[gpu2] == "Unhealthy") is None,
              "single-bit ECC errors leave GPU 2 Healthy")
        t2 = time.monotonic()
        check(sim(gpuop, env, "inject", "ecc", "--gpu", "2", "--dbe", "1") == 0,
              "gpuop-sim inject ecc --gpu 2 --dbe 1")
        hit = health_after(t2 + 2, lambda h: h[gpu2] == "Unhealthy")
        check(hit is not None and hit[0] - t2 < 1.0,
              "a double-bit ECC error marks GPU 2 Unhealthy in < 1 s")
        t1 = time.monotonic()
        sim(gpuop, env, "inject", "lost", "--gpu", "1")
        hit = health_after(t1 + 4, lambda h: h[gpu1] == "Unhealthy")
        check(hit is not None, "a lost GPU turns Unhealthy")
        hit = health_after(time.monotonic() + 3, lambda h: h[gpu1] == "Healthy")
        check(hit is None, "a lost GPU does not recover")
        # ... and the stream was alive all along (no update at all would also give None).
        gpu3 = devs[3].ID
        t3 = time.monotonic()
        sim(gpuop, env, "inject", "xid", "--gpu", "3", "--code", "79")
        hit = health_after(t3 + 2, lambda h: h[gpu3] == "Unhealthy")
        check(hit is not None and hit[1][gpu1] == "Unhealthy",
              "the stream is alive: XID 79 on GPU 3 arrives while GPU 1 stays Unhealthy")
        check("GPU is lost" in plugin.output(), "the lost GPU is logged as lost")
    finally:
        if w:
            w.cancel()
        rc = plugin.stop()
        check(rc == 0, f"SIGTERM: exit 0 (rc={rc})")
        if kubelet:
            kubelet.stop()
        if FAILS:
            print("---- plugin log ----")
            print(plugin.output()[-6000:])


def run_reset_clear(gpuop, env, args, pb, pb_grpc, ksock, dpdir, tmp):
    """A GPU held back for an uncorrectable ECC error comes back as soon as a GPU reset clears
    it (NVML's volatile count at 0, the remapping done), long before the quiet period (10 min
    here); without the reset it stays Unhealthy; an XID that left no count in NVML waits for
    the quiet period even after a reset."""
    env["DP_HEALTH_RECOVERY_PERIOD"] = "10m"
    kubelet = kg.Registration(pb, pb_grpc, ksock)  # first: its socket appearing restarts a plugin
    plugin = kg.DevicePlugin(gpuop, env, args, os.path.join(tmp, "plugin.log"))
    w = None
    try:
        regs = kubelet.wait_registrations(1, 15)
        if not check(len(regs) == 1, "the plugin registers"):
            return
        ch = grpc.insecure_channel(f"unix://{os.path.join(dpdir, regs[0][1].endpoint)}")
        w = kg.Watch(pb_grpc.DevicePluginStub(ch), pb)
        t, devs = w.next(5)
        if not check(devs is not None and len(devs) >= 2, "ListAndWatch sends the list"):
            return
        gpu0, gpu2 = devs[0].ID, devs[2].ID

        def health_after(deadline, want):
            while time.monotonic() < deadline:
                t, dv = w.next(max(0.01, deadline - time.monotonic()))
                if dv is None:
                    return None
                h = {d.ID: d.health for d in dv}
                if want(h):
                    return t, h
            return None

        t0 = time.monotonic()
        check(sim(gpuop, env, "inject", "ecc", "--gpu", "2", "--dbe", "1") == 0,
              "gpuop-sim inject ecc --gpu 2 --dbe 1")
        hit = health_after(t0 + 2, lambda h: h[gpu2] == "Unhealthy")
        check(hit is not None and hit[0] - t0 < 1.0, "the ECC error marks GPU 2 Unhealthy in < 1 s")
        sim(gpuop, env, "inject", "xid", "--gpu", "0", "--code", "94")
        hit = health_after(time.monotonic() + 2, lambda h: h[gpu0] == "Unhealthy")
        check(hit is not None, "XID 94 marks GPU 0 Unhealthy")
        hit = health_after(time.monotonic() + 2.5, lambda h: h[gpu2] == "Healthy")
        check(hit is None, "without a reset GPU 2 stays Unhealthy")
        t1 = time.monotonic()
        check(sim(gpuop, env, "gpu-reset", "--gpu", "2") == 0, "gpuop-sim gpu-reset --gpu 2")
        hit = health_after(t1 + 5, lambda h: h[gpu2] == "Healthy")
        check(hit is not None and hit[0] - t1 < 3.0,
              f"GPU 2 advertised Healthy again after its reset "
              f"({(hit[0] - t1) if hit else -1:.2f} s; the quiet period is 10 min)")
        check(hit is not None and hit[1][gpu0] == "Unhealthy", "... GPU 0 (the XID) still Unhealthy")
        check(sim(gpuop, env, "gpu-reset", "--gpu", "0") == 0, "gpuop-sim gpu-reset --gpu 0")
        hit = health_after(time.monotonic() + 2.5, lambda h: h[gpu0] == "Healthy")
        check(hit is None, "an XID NVML kept no count of waits for the quiet period after a reset")
        check("NVML shows the GPU reset and healthy" in plugin.output(), "the early recovery is logged")
    finally:
        if w:
            w.cancel()
        rc = plugin.stop()
        check(rc == 0, f"SIGTERM: exit 0 (rc={rc})")
        kubelet.stop()
        if FAILS:
            print("---- plugin log ----")
            print(plugin.output()[-6000:])


def run_reload_stress(gpuop, env, args, pb, pb_grpc, ksock, dpdir, tmp):
    """Reloads (SIGHUP) and kubelet-driven restarts while the health thread broadcasts: XIDs
    and a short recovery period make it send new lists all the time, and every restart
    replaces the servers the broadcast walks. Under ASan a broadcast that reads the replaced
    server table is a heap-use-after-free; the plugin must survive and keep serving."""
    env["DP_HEALTH_RECOVERY_PERIOD"] = "150ms"
    cfg = os.path.join(tmp, "config.yaml")
    with open(cfg, "w") as f:
        f.write("version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
                "    - name: nvidia.com/gpu\n      replicas: 2\n")
    kubelet = kg.Registration(pb, pb_grpc, ksock)
    plugin = kg.DevicePlugin(gpuop, env, args + ["--config-file", cfg], os.path.join(tmp, "plugin.log"))
    watches = []
    try:
        if not check(len(kubelet.wait_registrations(1, 15)) == 1, "the plugin registers"):
            return
        sockp = os.path.join(dpdir, "nvidia-gpu.sock")
        stop = threading.Event()

        def watcher():
            # Keeps ListAndWatch streams open across the restarts, as the kubelet does.
            while not stop.is_set():
                try:
                    ch = grpc.insecure_channel(f"unix://{sockp}")
                    w = kg.Watch(pb_grpc.DevicePluginStub(ch), pb)
                    watches.append(w)
                    w.thread.join(timeout=2)
                except Exception:  # socket between restarts
                    time.sleep(0.01)

        wt = threading.Thread(target=watcher, daemon=True)
        wt.start()
        injector_rc = []

        def injector():
            gpu = 0
            while not stop.is_set():
                injector_rc.append(sim(gpuop, env, "inject", "xid", "--gpu", str(gpu % 4),
                                       "--code", "79"))
                gpu += 1

        it = threading.Thread(target=injector, daemon=True)
        it.start()
        end = time.monotonic() + 4
        n = 0
        while time.monotonic() < end and plugin.proc.poll() is None:
            plugin.proc.send_signal(signal.SIGHUP)
            n += 1
            time.sleep(0.02)
            if n % 5 == 0 and os.path.exists(sockp):
                os.unlink(sockp)  # a restart through inotify too
            time.sleep(0.02)
        stop.set()
        it.join(timeout=30)
        check(len(injector_rc) > 5 and all(rc == 0 for rc in injector_rc),
              f"{len(injector_rc)} XIDs injected during the reloads")
        check(plugin.proc.poll() is None, f"{n} reloads and restarts under health updates: "
              f"still running")
        time.sleep(0.5)
        ch = grpc.insecure_channel(f"unix://{sockp}")
        w = kg.Watch(pb_grpc.DevicePluginStub(ch), pb)
        watches.append(w)
        t, devs = w.next(5)
        check(devs is not None and len(devs) == 8, "... and serving the list afterwards")
        out = plugin.output()
        check(not any(w in out for w in ("AddressSanitizer", "ThreadSanitizer",
                                         "runtime error")), "no sanitizer report")
    finally:
        for w in watches:
            w.cancel()
        rc = plugin.stop()
        check(rc == 0, f"SIGTERM: exit 0 (rc={rc})")
        kubelet.stop()
        if FAILS:
            print("---- plugin log ----")
            print(plugin.output()[-6000:])


def run_preferred_load(gpuop, env, args, pb, pb_grpc, ksock, dpdir, tmp):
    """A hostile GetPreferredAllocation (256 containers, each a best-effort search: 16 GPUs in two
    NVLink domains, size 5) does not hold up health updates: one server thread runs the
    handlers and writes the ListAndWatch updates, so the search budget is per request, not per
    container (and the exact search takes microseconds for alike GPUs). Sent back to back while an XID arrives, the GPU still turns Unhealthy in under a
    second, and each request is answered with a full preferred set per container."""
    kubelet = kg.Registration(pb, pb_grpc, ksock)
    plugin = kg.DevicePlugin(gpuop, env, args, os.path.join(tmp, "plugin.log"))
    w = None
    stop = threading.Event()
    try:
        regs = kubelet.wait_registrations(1, 15)
        if not check(len(regs) == 1, "the plugin registers"):
            return
        target = f"unix://{os.path.join(dpdir, regs[0][1].endpoint)}"
        stub = pb_grpc.DevicePluginStub(grpc.insecure_channel(target))
        w = kg.Watch(stub, pb)
        t, devs = w.next(5)
        if not check(devs is not None and len(devs) == 16, "16 GPUs listed"):
            return
        ids = [d.ID for d in devs]
        req = pb.PreferredAllocationRequest(container_requests=[
            pb.ContainerPreferredAllocationRequest(available_deviceIDs=ids, allocation_size=5)
            for _ in range(256)])
        done, sizes, first_start = [], set(), []

        def load():
            st = pb_grpc.DevicePluginStub(grpc.insecure_channel(target))
            while not stop.is_set():
                first_start.append(time.monotonic())
                try:
                    resp = st.GetPreferredAllocation(req, timeout=60)
                    sizes.update(len(c.deviceIDs) for c in resp.container_responses)
                    done.append(time.monotonic())
                except grpc.RpcError as e:
                    print(f"load request failed: {e.code()} {e.details()}")
                    return

        th = threading.Thread(target=load, daemon=True)
        th.start()
        time.sleep(0.3)
        t0 = time.monotonic()
        check(sim(gpuop, env, "inject", "xid", "--gpu", "5", "--code", "79") == 0,
              "gpuop-sim inject xid --gpu 5 --code 79")
        got = None
        while time.monotonic() < t0 + 5 and got is None:
            tt, dv = w.next(0.05)
            if dv is not None and {d.ID: d.health for d in dv}[ids[5]] == "Unhealthy":
                got = tt - t0
        time.sleep(0.3)
        stop.set()
        th.join(timeout=60)
        check(len(first_start) > 0 and first_start[0] < t0 and len(done) >= 1,
              f"hostile requests ran during the XID ({len(done)} answered)")
        check(sizes == {5}, f"every container got 5 preferred devices ({sorted(sizes)})")
        check(got is not None and got < 1.0,
              f"XID during hostile GetPreferredAllocation load: Unhealthy in "
              f"{got if got is not None else -1:.2f} s")
    finally:
        stop.set()
        if w:
            w.cancel()
        rc = plugin.stop()
        check(rc == 0, f"SIGTERM: exit 0 (rc={rc})")
        kubelet.stop()
        if FAILS:
            print("---- plugin log ----")
            print(plugin.output()[-6000:])


def main():
    if len(sys.argv) != 5:
        print(__doc__)
        sys.exit(2)
    gpuop, lib, fleet, scenario = sys.argv[1:]
    for p in (gpuop, lib, fleet):
        if not os.path.exists(p):
            print(f"FAIL missing {p}")
            sys.exit(1)
    try:
        run(gpuop, lib, fleet, scenario)
    except grpc.RpcError as e:
        check(False, f"unexpected gRPC error: {e.code()} {e.details()}")
    if FAILS:
        print(f"{len(FAILS)} check(s) failed")
        sys.exit(1)
    print("all checks passed")


if __name__ == "__main__":
    main()
