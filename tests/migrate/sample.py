#!/usr/bin/python3
"""Samples a takeover as it happens, every INTERVAL seconds until STOPFILE appears, then writes a
summary (JSON) to OUT and prints it. What it watches:

- per GPU node, the operand pods being replaced (the driver's aside): with --direction there
  (the default) NVIDIA's (managed-by gpu-operator), replaced by gpuop's; with --direction back
  gpuop's (managed-by gpuop), replaced by NVIDIA's. A node is in flight from the first one gone
  (there: or a surge device plugin pod there; back: the surge plugins of --apply stand on every
  node from the start) until none is left, no surge pod either, and the replacing operand pods
  there are all Ready. The largest number of nodes in flight at once is max_in_flight;
- the driver pods (NVIDIA's, then whoever's): a pod deleted or gone is a driver restart;
- with --roots: each GPU node's simulated driver loaded (<root>/<node>/sys/module/nvidia/version)
  at every sample;
- with --alloc: each GPU node's allocatable nvidia.com/gpu, which must not drop below its first
  value;
- with --workloads NS: the pods there (GPU workloads): none may go, change uid, restart or leave
  Running.

sample.py --kubectl K --ns NS --out OUT --stop STOPFILE [--roots DIR] [--alloc]
          [--workloads NS] [--interval S] [--direction there|back]
"""
import argparse
import json
import os
import subprocess
import sys
import time


def kget(kubectl, *args):
    out = subprocess.run([kubectl, "--request-timeout=10s", "get", *args, "-o", "json"],
                         capture_output=True, text=True, timeout=30)
    if out.returncode != 0:
        return None
    return json.loads(out.stdout)


def ready(p):
    if p.get("status", {}).get("phase") != "Running" or p["metadata"].get("deletionTimestamp"):
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in p.get("status", {}).get("conditions", []))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kubectl", required=True)
    ap.add_argument("--ns", default="gpu-operator")
    ap.add_argument("--out", required=True)
    ap.add_argument("--stop", required=True)
    ap.add_argument("--roots")
    ap.add_argument("--alloc", action="store_true")
    ap.add_argument("--workloads")
    ap.add_argument("--interval", type=float, default=0.25)
    ap.add_argument("--direction", choices=("there", "back"), default="there")
    a = ap.parse_args()

    s = {"samples": 0, "max_in_flight": 0, "in_flight_seen": [], "driver_restarts": [],
         "driver_unloaded": [], "alloc_drops": [], "workload_problems": [], "errors": 0}
    first_nv, drivers, alloc0, workloads, done_nodes, deleted = None, {}, {}, {}, set(), set()
    while not os.path.exists(a.stop):
        t = time.time()
        nodes = kget(a.kubectl, "nodes")
        pods = kget(a.kubectl, "-n", a.ns, "pods")
        wl = kget(a.kubectl, "-n", a.workloads, "pods") if a.workloads else {"items": []}
        if nodes is None or pods is None or wl is None:
            s["errors"] += 1
            time.sleep(a.interval)
            continue
        s["samples"] += 1
        gpu = sorted(n["metadata"]["name"] for n in nodes["items"]
                     if n["metadata"].get("labels", {}).get("nvidia.com/gpu.present") == "true")
        nv, going, surge, ours, ours_ready = {}, {}, {}, {}, {}
        for p in pods["items"]:
            node = p["spec"].get("nodeName")
            lab = p["metadata"].get("labels", {})
            app = lab.get("app", "")
            if node is None:
                continue
            if app == "nvidia-driver-daemonset":
                uid = p["metadata"]["uid"]
                if p["metadata"].get("deletionTimestamp"):
                    deleted.add(f"{node}: driver pod {p['metadata']['name']} deleted")
                drivers.setdefault(node, set()).add(uid)
                continue
            if app == "gpuop-device-plugin-takeover":
                surge[node] = True
                continue
            old_mgr, new_mgr = ("gpu-operator", "gpuop") if a.direction == "there" else ("gpuop", "gpu-operator")
            if lab.get("app.kubernetes.io/managed-by") == old_mgr:
                if p["metadata"].get("deletionTimestamp"):
                    going[node] = going.get(node, 0) + 1
                else:
                    nv[node] = nv.get(node, 0) + 1
            elif lab.get("app.kubernetes.io/managed-by") == new_mgr:
                ours[node] = ours.get(node, 0) + 1
                ours_ready[node] = ours_ready.get(node, 0) + ready(p)
        if first_nv is None:
            first_nv = dict(nv)
        in_flight = []
        for n in gpu:
            touched = nv.get(n, 0) < first_nv.get(n, 0) or going.get(n) or (surge.get(n) and a.direction == "there")
            done = (nv.get(n, 0) == 0 and not going.get(n) and not surge.get(n)
                    and ours.get(n, 0) > 0 and ours.get(n) == ours_ready.get(n))
            if done:
                done_nodes.add(n)
            if touched and not done:
                in_flight.append(n)
        if len(in_flight) > s["max_in_flight"]:
            s["max_in_flight"] = len(in_flight)
            s["in_flight_seen"] = in_flight
        if a.roots:
            for n in gpu:
                if not os.path.exists(os.path.join(a.roots, n, "sys/module/nvidia/version")):
                    if n not in s["driver_unloaded"]:
                        s["driver_unloaded"].append(n)
        if a.alloc:
            for node in nodes["items"]:
                n = node["metadata"]["name"]
                if n not in gpu:
                    continue
                v = int(node.get("status", {}).get("allocatable", {}).get("nvidia.com/gpu", "0"))
                if n not in alloc0:
                    alloc0[n] = v
                elif v < alloc0[n]:
                    s["alloc_drops"].append(f"{n}: {v} < {alloc0[n]} at {time.strftime('%H:%M:%S')}")
        for p in wl["items"]:
            name, uid = p["metadata"]["name"], p["metadata"]["uid"]
            rc = sum(c.get("restartCount", 0) for c in p.get("status", {}).get("containerStatuses", []))
            phase = p.get("status", {}).get("phase")
            prev = workloads.get(name)
            if prev is None:
                workloads[name] = (uid, rc)
            elif prev[0] != uid:
                s["workload_problems"].append(f"{name}: a new pod (uid {uid})")
                workloads[name] = (uid, rc)
            elif rc > prev[1]:
                s["workload_problems"].append(f"{name}: restarted ({rc})")
                workloads[name] = (uid, rc)
            if phase != "Running" or p["metadata"].get("deletionTimestamp"):
                s["workload_problems"].append(f"{name}: {phase}{' deleting' if p['metadata'].get('deletionTimestamp') else ''}")
        for name in list(workloads):
            if name not in {p["metadata"]["name"] for p in wl["items"]}:
                s["workload_problems"].append(f"{name}: gone")
                del workloads[name]
        time.sleep(max(0.0, a.interval - (time.time() - t)))
    # the driver pods of each node: the first one seen must stay
    s["driver_restarts"] = sorted(deleted) + [f"{n}: {len(u)} driver pods seen" for n, u in
                                              sorted(drivers.items()) if len(u) > 1]
    s["nodes_done"] = sorted(done_nodes)
    s["workloads_watched"] = len(workloads)
    s["alloc_first"] = alloc0
    s["workload_problems"] = sorted(set(s["workload_problems"]))
    json.dump(s, open(a.out, "w"), indent=1)
    print(json.dumps(s))
    return 0


if __name__ == "__main__":
    sys.exit(main())
