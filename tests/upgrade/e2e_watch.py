#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The upgrade end-to-end test's witness (tests/upgrade/kubelet-e2e.sh).

  e2e_watch.py watch OUT.jsonl      follows `kubectl get nodes -w` and appends every change of
                                    every node (state label, cordon, readiness, GPUs) to OUT
  e2e_watch.py limits OUT.jsonl MAX_UNAVAILABLE POOL=FLOOR...
                                    replays the changes in order and checks the limits on every
                                    state the cluster went through: never more than
                                    MAX_UNAVAILABLE nodes cordoned or NotReady, never fewer than
                                    FLOOR allocatable GPUs on the Ready, schedulable nodes of POOL
  e2e_watch.py states EVENTS.json SINCE_RV NODE...
                                    prints each node's sequence of upgrade states from the
                                    GPUDriverUpgrade Events after resourceVersion SINCE_RV
                                    (ordered by resourceVersion)

The watch sees every write the API server serves; the limits are checked on each, not on
samples. A pass may move a node through several states in one write, so the full sequence of
states comes from the Events, which name each one.
"""
import json
import subprocess
import sys
import time

STATE = "nvidia.com/gpu-driver-upgrade-state"
POOL = "gpuop.test/pool"


def node_view(o):
    meta, st = o.get("metadata", {}), o.get("status", {})
    ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                for c in st.get("conditions", []))
    lab = meta.get("labels", {})
    return {
        "t": round(time.time(), 3),
        "rv": int(meta.get("resourceVersion", "0")),
        "node": meta.get("name"),
        "pool": lab.get(POOL),
        "state": lab.get(STATE, ""),
        "unsched": bool(o.get("spec", {}).get("unschedulable")),
        "ready": ready,
        "alloc": int(st.get("allocatable", {}).get("nvidia.com/gpu", "0")),
        "cap": int(st.get("capacity", {}).get("nvidia.com/gpu", "0")),
    }


def watch(out_path, kubectl):
    last = {}
    while True:
        p = subprocess.Popen(kubectl + ["get", "nodes", "-w", "-o", "json"], stdout=subprocess.PIPE,
                             text=True)
        dec, buf = json.JSONDecoder(), ""
        with open(out_path, "a") as out:
            for line in p.stdout:
                buf += line
                while True:
                    s = buf.lstrip()
                    if not s:
                        buf = ""
                        break
                    try:
                        obj, end = dec.raw_decode(s)
                    except json.JSONDecodeError:
                        break
                    buf = s[end:]
                    v = node_view(obj)
                    key = {k: v[k] for k in v if k not in ("t", "rv")}
                    if last.get(v["node"]) != key:
                        last[v["node"]] = key
                        out.write(json.dumps(v) + "\n")
                        out.flush()
        p.wait()
        time.sleep(0.2)  # the watch ended (kubesim closes long watches): watch again


def limits(path, max_unavail, floors):
    cur, worst_down, worst_pool = {}, (0, None), {}
    n = 0
    for line in open(path):
        v = json.loads(line)
        n += 1
        cur[v["node"]] = v
        down = sorted(k for k, x in cur.items() if x["unsched"] or not x["ready"])
        if len(down) > worst_down[0]:
            worst_down = (len(down), down)
        if len(down) > max_unavail:
            print(f"FAIL: {len(down)} nodes down at once (maxUnavailable {max_unavail}): {down}")
            return 1
        for pool, floor in floors.items():
            gpus = sum(x["alloc"] for x in cur.values()
                       if x["pool"] == pool and x["ready"] and not x["unsched"])
            worst_pool[pool] = min(worst_pool.get(pool, gpus), gpus)
            # the floor holds once the pool first had it (while the stack comes up it has not)
            if worst_pool.get(pool + "/reached") is None and gpus >= floor:
                worst_pool[pool + "/reached"] = True
                worst_pool[pool] = gpus
            if worst_pool.get(pool + "/reached") and gpus < floor:
                print(f"FAIL: pool {pool} at {gpus} ready GPUs, below its floor {floor}: " +
                      str({k: x for k, x in cur.items() if x["pool"] == pool}))
                return 1
    print(f"ok: {n} node changes replayed: at most {worst_down[0]} nodes down at once "
          f"({', '.join(worst_down[1] or [])}; maxUnavailable {max_unavail}); " +
          "; ".join(f"pool {p}: never below {worst_pool.get(p)} ready GPUs (floor {f})"
                    for p, f in floors.items()))
    return 0


def states(path, since, nodes):
    evs = [e for e in json.load(open(path))["items"]
           if int(e["metadata"]["resourceVersion"]) > since]
    evs.sort(key=lambda e: int(e["metadata"]["resourceVersion"]))
    seq = {n: [] for n in nodes}
    for e in evs:
        if e.get("reason") != "GPUDriverUpgrade":
            continue
        n = e.get("involvedObject", {}).get("name")
        msg = e.get("message", "")
        if n in seq and "node state label to [" in msg:
            seq[n].append(msg.split("[", 1)[1].split("]", 1)[0])
    for n in nodes:
        print(n + " " + " ".join(seq[n]))
    return 0


def main():
    cmd = sys.argv[1]
    if cmd == "watch":
        return watch(sys.argv[2], sys.argv[3:])
    if cmd == "limits":
        floors = dict((a.split("=")[0], int(a.split("=")[1])) for a in sys.argv[4:])
        return limits(sys.argv[2], int(sys.argv[3]), floors)
    if cmd == "states":
        return states(sys.argv[2], int(sys.argv[3]), sys.argv[4:])
    print("usage: see the module's docstring", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
