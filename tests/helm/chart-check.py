#!/usr/bin/python3
"""Checks on `helm template` output of deploy/helm/gpuop (tests/helm/test-helm-chart.sh).

chart-check.py split RENDERED PREFIX VERSION CASE [IMAGE]
    Writes PREFIX.builtin.json (the built-in kinds, for kubernetes-models),
    PREFIX.clusterpolicy.yaml and PREFIX.rules.yaml (the PrometheusRule's groups) and checks what
    every install must hold (image and --operand-image IMAGE, default gpuop:VERSION, leader
    election, the RBAC of deploy/rbac/operator.yaml with no wildcard, the hooks) and what the
    values file CASE asks for.
chart-check.py prune CLUSTERPOLICY CRD
    Fails on any field of the ClusterPolicy its CRD's structural schema lacks (an API server
    would prune it silently) or whose type the schema refuses.
"""
import json
import os
import sys

import yaml

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
bad = []


def check(cond, msg):
    if not cond:
        bad.append(msg)


def find(objs, kind, name=None):
    for o in objs:
        if o["kind"] == kind and (name is None or o["metadata"]["name"] == name):
            return o
    return None


def split(rendered, prefix, version, case, image=None):
    objs = [d for d in yaml.safe_load_all(open(rendered)) if d]
    builtin = [o for o in objs if o["kind"] not in ("ClusterPolicy", "PrometheusRule", "NVIDIADriver", "GPUCluster")]
    json.dump(builtin, open(prefix + ".builtin.json", "w"))
    cp = find(objs, "ClusterPolicy")
    if cp:
        yaml.safe_dump(cp, open(prefix + ".clusterpolicy.yaml", "w"))
    pr = find(objs, "PrometheusRule")
    if pr:
        yaml.safe_dump(pr["spec"], open(prefix + ".rules.yaml", "w"))
    nvd = find(objs, "NVIDIADriver")
    if nvd:
        yaml.safe_dump(nvd, open(prefix + ".nvidiadriver.yaml", "w"))
    gc = find(objs, "GPUCluster")
    if gc:
        yaml.safe_dump(gc, open(prefix + ".gpucluster.yaml", "w"))
    check(not (cp and gc), "both a ClusterPolicy and a GPUCluster rendered")

    image = image or f"gpuop:{version}"
    dep = find(objs, "Deployment", "gpu-operator")
    check(dep is not None, "no Deployment gpu-operator")
    if dep:
        ctr = dep["spec"]["template"]["spec"]["containers"][0]
        check(ctr["image"] == image, f"operator image {ctr['image']}, want {image}")
        check(f"--operand-image={image}" in ctr["args"], f"--operand-image is not {image}: {ctr['args']}")
        check("--leader-elect=true" in ctr["args"], "leader election is not on")
        check("--namespace=gpu-operator" in ctr["args"], "--namespace is not the release's")
        sc = dep["spec"]["template"]["spec"]["securityContext"]
        check(sc.get("runAsNonRoot") is True and sc.get("runAsUser") == 65532, "operator not non-root")
        sa = dep["spec"]["template"]["spec"]["serviceAccountName"]
        check(find(objs, "ServiceAccount", sa) is not None, f"no ServiceAccount {sa}")
    # RBAC: the rules of the one source, deploy/rbac/operator.yaml, unchanged; no wildcard.
    src = [d for d in yaml.safe_load_all(open(os.path.join(SRC, "deploy/rbac/operator.yaml"))) if d]
    for s in src:
        o = find(objs, s["kind"], s["metadata"]["name"])
        check(o is not None, f"{s['kind']} {s['metadata']['name']} of deploy/rbac/operator.yaml not rendered")
        if o and "rules" in s:
            check(o["rules"] == s["rules"], f"{s['kind']} {s['metadata']['name']}: rules differ from deploy/rbac/operator.yaml")
        if o and "roleRef" in s:
            check(o["roleRef"] == s["roleRef"], f"{s['kind']} {s['metadata']['name']}: roleRef differs")
    # Hooks: the CRD upgrade (pre-upgrade, operator.upgradeCRD: true by default) applies the
    # chart's own crds/, carried byte for byte; the uninstall hook (pre-delete) runs always.
    def hook(kind, name):
        o = find(objs, kind, name)
        return o, (o or {}).get("metadata", {}).get("annotations", {}).get("helm.sh/hook")
    up, when = hook("Job", "gpuop-upgrade-crd")
    check(up is not None and when == "pre-upgrade", "no pre-upgrade Job gpuop-upgrade-crd")
    crd_dir = os.path.join(SRC, "deploy/helm/gpuop/crds")
    crd_files = sorted(f for f in os.listdir(crd_dir) if f.endswith(".yaml"))
    if up:
        c = up["spec"]["template"]["spec"]["containers"][0]
        check(c["image"] == image and c["args"] == ["operator", "apply-crds", "--dir=/crds"],
              f"CRD upgrade Job: {c['image']} {c['args']}")
        cm, _ = hook("ConfigMap", "gpuop-upgrade-crd")
        check(cm is not None and sorted(cm["data"]) == crd_files, "CRD upgrade ConfigMap: not the chart's crds/")
        for f in crd_files if cm else []:
            check(cm["data"].get(f) == open(os.path.join(crd_dir, f)).read(), f"CRD upgrade ConfigMap: {f} differs")
    un, when = hook("Job", "gpuop-uninstall")
    check(un is not None and when == "pre-delete", "no pre-delete Job gpuop-uninstall")
    if un:
        args = un["spec"]["template"]["spec"]["containers"][0]["args"]
        check(args[:2] == ["operator", "uninstall"] and "--namespace=gpu-operator" in args and
              "--release=gpuop" in args, f"uninstall Job args {args}")
        names = sorted(yaml.safe_load(open(os.path.join(crd_dir, f)))["metadata"]["name"] for f in crd_files)
        deletes = sorted(a.split("=", 1)[1] for a in args if a.startswith("--delete-crd="))
        check(deletes == (names if case == "cleanup-crd" else []), f"uninstall deletes CRDs {deletes}")
    for o in objs:
        for r in o.get("rules", []) if o["kind"] in ("Role", "ClusterRole") else []:
            for f in ("apiGroups", "resources", "verbs"):
                check("*" not in r.get(f, []), f"{o['kind']} {o['metadata']['name']}: wildcard in {f}")

    # Clusters without NFD: gpuop's node discovery, non-root, reading nodes and patching them only.
    disc = find(objs, "DaemonSet", "gpuop-node-discovery")
    if case in ("nfd-off",):
        check(disc is None, "node discovery deployed with nfd.enabled=false")
    else:
        check(disc is not None, "no node discovery DaemonSet (nfd.enabled, no NFD in the cluster)")
    if disc:
        pod = disc["spec"]["template"]["spec"]
        check(pod["containers"][0]["image"] == image, "node discovery image")
        check(pod["containers"][0]["args"][0] == "node-discovery", "node discovery args")
        check(pod["securityContext"].get("runAsNonRoot") is True, "node discovery runs as root")
        check(pod["nodeSelector"] == {"kubernetes.io/os": "linux"}, "node discovery off Linux nodes")
        role = find(objs, "ClusterRole", "gpuop-node-discovery")
        check(role and role["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]}],
              "node discovery's ClusterRole is not nodes get/patch")
    spec = cp["spec"] if cp else {}
    cms = {o["metadata"]["name"]: o for o in objs if o["kind"] == "ConfigMap"}
    if case == "driver-disabled":
        check(spec["driver"]["enabled"] is False, "driver.enabled is not false")
    elif case == "mig-mixed-custom":
        check(spec["mig"]["strategy"] == "mixed", "mig.strategy is not mixed")
        check(spec["migManager"]["config"] == {"name": "custom-mig-parted-config", "default": "all-disabled"},
              f"migManager.config {spec['migManager'].get('config')}")
        cm = cms.get("custom-mig-parted-config")
        check(cm is not None, "no ConfigMap custom-mig-parted-config")
        if cm:
            layouts = yaml.safe_load(cm["data"]["config.yaml"])["mig-configs"]
            check("all-balanced" in layouts, "the custom layout is not in the ConfigMap")
    elif case == "time-slicing":
        check(spec["devicePlugin"]["config"] == {"name": "time-slicing-config", "default": "any"},
              f"devicePlugin.config {spec['devicePlugin'].get('config')}")
        cm = cms.get("time-slicing-config")
        check(cm is not None, "no ConfigMap time-slicing-config")
        if cm:
            ts = yaml.safe_load(cm["data"]["any"])["sharing"]["timeSlicing"]["resources"][0]
            check(ts["replicas"] == 4, "time-slicing replicas are not 4")
    elif case == "cdi-off":
        check(spec["cdi"]["enabled"] is False, "cdi.enabled is not false")
    elif case == "monitoring-on":
        check(pr is not None, "no PrometheusRule")
        if pr:
            src_rules = yaml.safe_load(open(os.path.join(SRC, "deploy/monitoring/gpuop-alerts.yaml")))
            check(pr["spec"] == src_rules, "PrometheusRule differs from deploy/monitoring/gpuop-alerts.yaml")
            check(pr["metadata"]["labels"].get("release") == "kube-prometheus-stack", "rule labels")
        cm = cms.get("gpuop-fleet-dashboard")
        check(cm is not None and json.loads(cm["data"]["gpuop-fleet-dashboard.json"])["uid"] == "gpuop-fleet",
              "no dashboard ConfigMap")
        check(dep and dep["spec"]["replicas"] == 2, "operator replicas are not 2")
        check(dep and "--log-format=json" in dep["spec"]["template"]["spec"]["containers"][0]["args"], "no json logs")
    elif case == "nvidia-defaults":
        check(spec["driver"]["repository"] == "nvcr.io/nvidia", "NVIDIA's driver repository not passed")
        check("podDeletion" in spec["driver"].get("upgradePolicy", {}), "gpuPodDeletion not mapped to podDeletion")
    if case == "nvidiadriver-crd":
        check(spec["driver"].get("useNvidiaDriverCRD") is True, "useNvidiaDriverCRD is not true")
        check(nvd is not None and nvd["metadata"]["name"] == "default", "no default NVIDIADriver")
        if nvd:
            ns = nvd["spec"]
            check(ns.get("default") is True and ns.get("driverType") == "gpu", f"NVIDIADriver spec {ns}")
            check(ns.get("version") and ns.get("repository") == "nvcr.io/nvidia" and ns.get("image") == "driver",
                  f"the NVIDIADriver does not carry the values' driver image and version: {ns}")
            check("nodeSelector" not in ns, "a default NVIDIADriver with a nodeSelector (the operator refuses it)")
        check(set(spec["driver"]) <= {"enabled", "useNvidiaDriverCRD", "upgradePolicy"},
              f"the ClusterPolicy keeps driver settings the NVIDIADriver owns: {sorted(spec['driver'])}")
    elif case == "gpucluster":
        # a GPUCluster's driver is the NVIDIADrivers' (NVIDIA's chart requires the CRD with it)
        check(nvd is not None and nvd["metadata"]["name"] == "default",
              "no default NVIDIADriver beside the GPUCluster")
    else:
        check(nvd is None, "an NVIDIADriver without driver.nvidiaDriverCRD.enabled")
    if case != "monitoring-on":
        check(pr is None, "a PrometheusRule without monitoring.prometheusRule.enabled")
    for b in bad:
        print(f"FAIL {case}: {b}")
    return 1 if bad else 0


def prune(path, crd_path):
    cp = yaml.safe_load(open(path))
    crd = yaml.safe_load(open(crd_path))
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    types = {"object": dict, "array": list, "string": str, "boolean": bool, "integer": int,
             "number": (int, float)}

    def walk(v, s, at):
        if s.get("x-kubernetes-int-or-string"):
            check(isinstance(v, (int, str)), f"{at}: {v!r} is not an int or a string")
            return
        t = s.get("type")
        if t and not (t == "integer" and isinstance(v, bool)):
            check(isinstance(v, types[t]) and not (t in ("integer", "number") and isinstance(v, bool)),
                  f"{at}: {v!r} is not of type {t}")
        if "enum" in s:
            check(v in s["enum"], f"{at}: {v!r} not one of {s['enum']}")
        if isinstance(v, dict):
            if s.get("x-kubernetes-preserve-unknown-fields"):
                return
            props = s.get("properties")
            extra = s.get("additionalProperties")
            for k, x in v.items():
                if props and k in props:
                    walk(x, props[k], f"{at}.{k}")
                elif isinstance(extra, dict):
                    walk(x, extra, f"{at}.{k}")
                else:
                    check(False, f"{at}.{k}: not in the CRD (an API server prunes it)")
        elif isinstance(v, list) and "items" in s:
            for i, x in enumerate(v):
                walk(x, s["items"], f"{at}[{i}]")

    walk(cp["spec"], schema, "spec")
    for b in bad:
        print(f"FAIL {os.path.basename(path)}: {b}")
    return 1 if bad else 0


if __name__ == "__main__":
    if sys.argv[1] == "split":
        sys.exit(split(*sys.argv[2:7]))
    sys.exit(prune(*sys.argv[2:4]))
