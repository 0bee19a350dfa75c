#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The upgrade end-to-end test's witness (tests/upgrade/kubelet-e2e.sh).

  e2e_watch.py watch OUT.jsonl      follows `kubectl get nodes -w` and appends every change of
                                    every node (state label, cordon, readiness, GPUs) to OUT
  e2e_watch.py pods OUT.jsonl NAMESPACE
                                    follows `kubectl get pods -w` in NAMESPACE and appends every
                                    change of every pod (created, Ready, deleting, DELETED) to OUT
  e2e_watch.py reloads NODES.jsonl PODS.jsonl SINCE_RV NODE...
                                    checks each node's driver reload after resourceVersion
                                    SINCE_RV, in the order the API server served the changes (see
                                    reloads())
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


def pod_view(ev):
    o = ev.get("object", {})
    meta, st = o.get("metadata", {}), o.get("status", {})
    ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                for c in st.get("conditions", []))
    return {
        "t": round(time.time(), 3),
        "rv": int(meta.get("resourceVersion", "0")),
        "pod": meta.get("name"),
        "node": o.get("spec", {}).get("nodeName"),
        "app": meta.get("labels", {}).get("app"),
        "deleted": ev.get("type") == "DELETED",
        "deleting": bool(meta.get("deletionTimestamp")),
        "phase": st.get("phase"),
        "ready": ready,
    }


def watch(out_path, kubectl, what=("nodes",), view=node_view, key_of=lambda v: v["node"]):
    last = {}
    while True:
        p = subprocess.Popen(kubectl + ["get"] + list(what) + ["-w", "-o", "json"],
                             stdout=subprocess.PIPE, text=True)
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
                    v = view(obj)
                    key = {k: v[k] for k in v if k not in ("t", "rv")}
                    if last.get(key_of(v)) != key:
                        last[key_of(v)] = key
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


DRIVER_APP = "nvidia-driver-daemonset"
PLUGIN_APP = "nvidia-device-plugin-daemonset"


def reloads(nodes_path, pods_path, since, nodes):
    """Each node's driver reload after resourceVersion since, in the API server's order (one
    resourceVersion counter orders the nodes' and the pods' changes):
      1. the driver pod the node ran at since is DELETED;
      2. after it, the node's GPUs are withdrawn: the device plugin pod it ran at since is
         DELETED (the new driver pod's driver manager paused it so the module could go) or the
         node's allocatable nvidia.com/gpu goes to 0, whichever comes first; the plugin pod's
         deletion must come after 1 either way;
      3. then a new driver pod on the node is Ready;
      4. then allocatable nvidia.com/gpu is back at the node's capacity, advertised by a new
         device plugin pod (created after the old one's deletion, Ready, still there at 5);
      5. then the node is upgrade-done and schedulable.
    The validator may pass after 4 or before it: nothing is asked of it here."""
    recs = [json.loads(l) for l in open(nodes_path)] + [json.loads(l) for l in open(pods_path)]
    recs.sort(key=lambda v: v["rv"])
    bad = 0
    for n in nodes:
        mine = [v for v in recs if v.get("node") == n]
        before = [v for v in mine if v["rv"] <= since]

        def live_at_since(app):
            pods = {}
            for v in before:
                if "pod" in v and v["app"] == app:
                    pods[v["pod"]] = v
            alive = [p for p, v in pods.items() if not v["deleted"]]
            return alive[0] if len(alive) == 1 else None

        old_drv, old_dp = live_at_since(DRIVER_APP), live_at_since(PLUGIN_APP)
        cap = max([v["cap"] for v in before if "cap" in v] or [0])
        after = [v for v in mine if v["rv"] > since]

        def first(pred, rv_min, what):
            for v in after:
                if v["rv"] > rv_min and pred(v):
                    return v
            raise LookupError(what)

        try:
            if not old_drv or not old_dp or not cap:
                raise LookupError(f"a driver pod ({old_drv}), a device plugin pod ({old_dp}) "
                                  f"and GPUs ({cap}) at resourceVersion {since}")
            a = first(lambda v: v.get("pod") == old_drv and v["deleted"], since,
                      f"old driver pod {old_drv} DELETED")
            dp_gone = first(lambda v: v.get("pod") == old_dp and v["deleted"], since,
                            f"old device plugin pod {old_dp} DELETED")
            if dp_gone["rv"] < a["rv"]:
                raise LookupError(f"old device plugin pod {old_dp} DELETED (rv {dp_gone['rv']}) "
                                  f"after the old driver pod (rv {a['rv']}); it went before")
            zero = next((v for v in after if v["rv"] > a["rv"] and v.get("alloc") == 0), None)
            b = min([dp_gone] + ([zero] if zero else []), key=lambda v: v["rv"])
            c = first(lambda v: v.get("app") == DRIVER_APP and v["pod"] != old_drv and
                      v["ready"] and not v["deleted"], b["rv"], "a new driver pod Ready")
            # the first time the GPUs are back after the withdrawal: after c, not before
            d = first(lambda v: "alloc" in v and v["alloc"] == cap, b["rv"],
                      f"allocatable nvidia.com/gpu back at {cap}")
            if d["rv"] < c["rv"]:
                raise LookupError(f"GPUs advertised again (rv {d['rv']}) before the new driver "
                                  f"pod {c['pod']} was Ready (rv {c['rv']})")
            # the new device plugin pod that advertises them: the first one Ready (a pod the
            # DaemonSet made again while the driver manager was still pausing the node's
            # operands may go again before it starts; the one that counts is the one that runs)
            dp_ready = first(lambda v: v.get("app") == PLUGIN_APP and v["pod"] != old_dp and
                             v["ready"] and not v["deleted"], dp_gone["rv"],
                             "a new device plugin pod Ready")
            new_dp = first(lambda v: v.get("pod") == dp_ready["pod"], dp_gone["rv"],
                           "a new device plugin pod")
            if new_dp["rv"] > d["rv"]:
                raise LookupError(f"GPUs advertised again (rv {d['rv']}) before the new device "
                                  f"plugin pod {new_dp['pod']} existed (rv {new_dp['rv']})")
            e = first(lambda v: v.get("state") == "upgrade-done" and not v["unsched"], d["rv"],
                      "upgrade-done and uncordoned after the GPUs came back")
            # Ready (the kubelet may report it just before or after the registration: found
            # above), and not gone before the node was done
            if any(v.get("pod") == new_dp["pod"] and (v["deleted"] or v["deleting"])
                   for v in after if v["rv"] <= e["rv"]):
                raise LookupError(f"the new device plugin pod {new_dp['pod']} went before the "
                                  "node was upgrade-done")
        except LookupError as err:
            print(f"FAIL: {n}: {err}; its changes after {since}:")
            for v in after:
                print("   ", json.dumps({k: x for k, x in v.items() if k != "t"}))
            bad += 1
            continue
        how = (f"plugin pod {old_dp} deleted" if b is dp_gone else
               f"allocatable 0, then plugin pod {old_dp} deleted")
        print(f"ok: {n}: driver pod {old_drv} deleted; GPUs withdrawn ({how}); new driver pod "
              f"{c['pod']} Ready; {cap} GPUs advertised again (plugin pod {new_dp['pod']}); "
              f"upgrade-done and uncordoned (rv {a['rv']} < {b['rv']} < {c['rv']} < {d['rv']} "
              f"< {e['rv']})")
    return 1 if bad else 0


def main():
    cmd = sys.argv[1]
    if cmd == "watch":
        return watch(sys.argv[2], sys.argv[3:])
    if cmd == "pods":
        return watch(sys.argv[2], sys.argv[4:],
                     ("pods", "-n", sys.argv[3], "--output-watch-events"), pod_view,
                     lambda v: v["pod"])
    if cmd == "reloads":
        return reloads(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5:])
    if cmd == "limits":
        floors = dict((a.split("=")[0], int(a.split("=")[1])) for a in sys.argv[4:])
        return limits(sys.argv[2], int(sys.argv[3]), floors)
    if cmd == "states":
        return states(sys.argv[2], int(sys.argv[3]), sys.argv[4:])
    print("usage: see the module's docstring", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
