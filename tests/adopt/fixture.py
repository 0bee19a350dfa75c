#!/usr/bin/python3
"""The takeover planner's fixture, written from the facts of NVIDIA's operator v24.9.2
(../shared/reference/nvidia-operator-v24.9.2: what its chart and operator left in a cluster).

fixture.py write REFDIR OUT   condense the reference into OUT (what the planner reads: kinds,
                              names, labels, controller ownerReferences, selectors, template
                              labels, node selectors, ServiceAccounts, ConfigMap volumes, RBAC subjects and
                              roleRefs, node labels, the ClusterPolicy's spec)
fixture.py check REFDIR FILE  fail when FILE is not what `write` makes from REFDIR

The fixture is committed (tests/adopt/fixtures/nvidia-v24.9.2.yaml) so a clone without
../shared runs the planner's tests; `check` (test adopt-fixture-crosscheck) keeps it honest.
Pod names get the node's name for the reference's random suffix; pods are Running and Ready, as
the reference run left them.
"""
import os
import sys

import yaml

FILES = ["daemonsets", "serviceaccounts", "roles", "rolebindings", "clusterroles",
         "clusterrolebindings", "configmaps", "services", "runtimeclasses", "leases"]


def meta(o):
    m = o["metadata"]
    out = {"name": m["name"]}
    if m.get("namespace"):
        out["namespace"] = m["namespace"]
    if m.get("labels"):
        out["labels"] = m["labels"]
    refs = [{"kind": r["kind"], "name": r["name"], "controller": r.get("controller", False),
             "uid": "cluster-policy-uid"} for r in m.get("ownerReferences", [])]
    if refs:
        out["ownerReferences"] = refs
    return out


def podspec(t):
    out = {}
    if t.get("nodeSelector"):
        out["nodeSelector"] = t["nodeSelector"]
    if t.get("serviceAccountName"):
        out["serviceAccountName"] = t["serviceAccountName"]
    vols = [{"name": v["name"], "configMap": {"name": v["configMap"]["name"]}}
            for v in t.get("volumes", []) if "configMap" in v]
    if vols:
        out["volumes"] = vols
    return out


def condense(ref):
    load = lambda f: yaml.safe_load(open(os.path.join(ref, "cluster", f + ".yaml")))
    objs = []
    for f in FILES:
        d = load(f)
        for o in (d["items"] if "items" in d else [d]):
            x = {"kind": o["kind"], "metadata": meta(o)}
            if o["kind"] == "DaemonSet":
                x["spec"] = {"selector": o["spec"]["selector"],
                             "updateStrategy": {"type": o["spec"]["updateStrategy"]["type"]},
                             "template": {"metadata": {"labels": o["spec"]["template"]["metadata"]["labels"]},
                                          "spec": podspec(o["spec"]["template"]["spec"])}}
            if o["kind"] in ("RoleBinding", "ClusterRoleBinding"):
                x["roleRef"] = {"kind": o["roleRef"]["kind"], "name": o["roleRef"]["name"]}
                x["subjects"] = [{k: s[k] for k in ("kind", "name", "namespace") if k in s}
                                 for s in o.get("subjects", [])]
            objs.append(x)
    ds = {o["metadata"]["name"]: o for o in load("daemonsets")["items"]}
    pods = []
    for p in load("pods")["items"]:
        owner = p["metadata"]["ownerReferences"][0]["name"]
        node = p["spec"]["nodeName"]
        labels = {k: v for k, v in p["metadata"]["labels"].items()
                  if k not in ("controller-revision-hash", "pod-template-generation")}
        pods.append({"kind": "Pod",
                     "metadata": {"name": f"{owner}-{node}", "namespace": p["metadata"]["namespace"],
                                  "labels": labels,
                                  "ownerReferences": [{"kind": "DaemonSet", "name": owner, "controller": True,
                                                       "uid": owner + "-uid"}]},
                     "spec": {"nodeName": node, **{k: v for k, v in podspec(ds[owner]["spec"]["template"]["spec"]).items()
                                                   if k != "nodeSelector"}},
                     "status": {"phase": p["status"]["phase"],
                                "conditions": [{"type": "Ready", "status": "True"}]}})
    pods.sort(key=lambda p: p["metadata"]["name"])
    nodes = [{"kind": "Node", "metadata": {"name": n["metadata"]["name"], "labels": n["metadata"]["labels"],
                                           "annotations": n["metadata"].get("annotations", {})}}
             for n in load("nodes")["items"]]
    cp = load("clusterpolicy")["items"][0]
    policy = {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy",
              "metadata": {"name": cp["metadata"]["name"], "uid": "cluster-policy-uid",
                           "labels": cp["metadata"].get("labels", {})},
              "spec": cp["spec"]}
    return {"policy": policy, "objects": objs, "pods": pods, "nodes": nodes}


HEADER = """# What NVIDIA's GPU Operator v24.9.2 left in a simulated cluster, condensed to what gpuop's
# takeover planner reads. Written by tests/adopt/fixture.py from the facts in
# ../shared/reference/nvidia-operator-v24.9.2/ (its README lists them); test
# adopt-fixture-crosscheck checks it still agrees. Pod names carry their node in place of the
# reference's random suffix; uids are placeholders the planner only compares.
"""


def main():
    mode, ref = sys.argv[1], sys.argv[2]
    text = HEADER + yaml.safe_dump(condense(ref), sort_keys=True, width=100)
    if mode == "write":
        open(sys.argv[3], "w").write(text)
        return 0
    have = open(sys.argv[3]).read()
    if have != text:
        print(f"FAIL {sys.argv[3]} differs from what {ref} gives: run tests/adopt/fixture.py write")
        return 1
    print(f"{sys.argv[3]}: agrees with {ref}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
