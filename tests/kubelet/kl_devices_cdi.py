#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Every CDI name gpuop's device plugin hands out resolves against the node's CDI specs.

  kl_devices_cdi.py PROBE GPUOP LIBNVML FLEETS_DIR

For each case (UUIDs on an H100 node, MIG devices under the mixed strategy on an A100 node, index
IDs), `gpuop device-plugin` runs with a cdi-cri device-list strategy and its CDI root inside a
temporary node root; kubelet-sim's device manager (PROBE) allocates, and every name in the
response is resolved by kubelet-sim's CDI resolver (sim/kubelet/cdi.c), as containerd would: an
unknown name fails; a MIG device brings its two capability nodes (/dev/nvidia-caps, from the
driver's mig-minors or its layout where the plugin does not see that file). Exit 77 only when python3-grpcio is missing (tests/lib/kubelet_grpc.py needs it).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kl_devices_plugin import FAILS, Probe, check, kg  # noqa: E402


def run_case(probe_exe, gpuop, lib, fleet, name, extra_env, resource, total, count, caps=0):
    tmp = kg.scratch(f"kl-cdi-{name}-")
    root = os.path.join(tmp, "root")
    dpdir = os.path.join(root, "var/lib/kubelet/device-plugins")
    os.makedirs(dpdir)
    env = kg.plugin_env(lib, fleet, os.path.join(tmp, "state"), DEVICE_LIST_STRATEGY="cdi-cri",
                        CDI_ROOT=os.path.join(root, "var/run/cdi"), **extra_env)
    probe = Probe(probe_exe, root, os.path.join(tmp, "probe.log"))
    plugin = kg.DevicePlugin(gpuop, env, ["--kubelet-socket", os.path.join(dpdir, "kubelet.sock")],
                             os.path.join(tmp, "plugin.log"), append=True)
    try:
        w = probe.cmd(f"wait {resource} {total} 10000")
        if not check(w.get("ok"), f"{name}: {resource} reaches {total} allocatable"):
            return
        a = probe.cmd(f'alloc uid-1 default pod-1 main {{"{resource}": {count}}}')
        names = a.get("cdi", [])
        check(a.get("ok") and len(names) == count,
              f"{name}: Allocate names {count} CDI devices ({names})")
        spec = os.path.join(root, "var/run/cdi/k8s.device-plugin.nvidia.com-gpu.json")
        check(os.path.exists(spec), f"{name}: the plugin wrote {os.path.basename(spec)}")
        r = probe.cmd("cdi " + " ".join(names))
        check(r.get("ok") and len(r.get("device_nodes", [])) >= count,
              f"{name}: every name resolves against the node's CDI specs "
              f"({r.get('error') or len(r.get('device_nodes', []))} device nodes)")
        # a MIG device needs its GPU instance's and compute instance's capability nodes
        got_caps = sorted({str(n) for n in r.get("device_nodes", []) if "nvidia-caps/" in str(n)})
        check(len(got_caps) == caps * count,
              f"{name}: {caps * count} MIG capability nodes among the resolved device nodes "
              f"({got_caps})")
        bad = probe.cmd("cdi k8s.device-plugin.nvidia.com/gpu=GPU-not-a-device")
        check(not bad.get("ok") and "unresolvable CDI devices" in bad.get("error", ""),
              f"{name}: an unknown name fails as containerd fails it")
    finally:
        plugin.stop()
        probe.quit()


def main(probe_exe, gpuop, lib, fleets):
    run_case(probe_exe, gpuop, lib, os.path.join(fleets, "dgx-h100.yaml"), "uuid", {},
             "nvidia.com/gpu", 8, 8)
    run_case(probe_exe, gpuop, lib, os.path.join(fleets, "dgx-h100.yaml"), "index",
             {"DEVICE_ID_STRATEGY": "index"}, "nvidia.com/gpu", 8, 8)
    run_case(probe_exe, gpuop, lib, os.path.join(fleets, "dgx-a100-80gb-mig.yaml"), "mig-mixed",
             {"MIG_STRATEGY": "mixed"}, "nvidia.com/mig-1g.10gb", 18, 4, caps=2)
    print(f"{len(FAILS)} failed" if FAILS else "all ok")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
