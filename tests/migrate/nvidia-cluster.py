#!/usr/bin/python3
"""A cluster as NVIDIA's GPU Operator v24.9.2 leaves it, from tests/adopt/fixtures (the facts of
../shared/reference/nvidia-operator-v24.9.2), for the migrate tests to create.

nvidia-cluster.py nodes FIXTURE            the fixture's Nodes (kubesim --load)
nvidia-cluster.py values FIXTURE           Helm values of tests/migrate/nvidia-chart: the
                                           reference ClusterPolicy's spec
nvidia-cluster.py chart-values FIXTURE     the same policy under NVIDIA's chart keys (what
                                           `helm get values` gives of NVIDIA's release), for
                                           gpuop's chart
nvidia-cluster.py objects FIXTURE UID [--standins] [--driver-version V] [--only-ds]
                  [--update-strategy S [--max-unavailable M]]
    What NVIDIA's operator made (DaemonSets, ServiceAccounts, RBAC, ConfigMaps, Services, the
    RuntimeClass, its Lease), each owned by the ClusterPolicy of uid UID, as the fixture has them.
    With --update-strategy, the DaemonSets' update strategy as NVIDIA's operator applies the
    policy's spec.daemonsets.updateStrategy (and rollingUpdate.maxUnavailable): OnDelete on every
    operand DaemonSet, or RollingUpdate with that maxUnavailable; the driver's DaemonSet is always
    OnDelete (../shared/reference/notes/operator.md, "DaemonSet readiness").
    The DaemonSets get containers: with --standins those kubelet-sim runs as NVIDIA's operands
    (sim/images: the driver container, NVIDIA's device plugin played by gpuop's own, and a
    stand-in that waits for SIGTERM for the others), else a placeholder image (kubesim runs no
    containers).
"""
import copy
import sys

import yaml

NS = "gpu-operator"


def load(path):
    return yaml.safe_load(open(path))


def nodes(f):
    out = []
    for n in f["nodes"]:
        m = n["metadata"]
        out.append({"apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": m["name"], "labels": m["labels"], "annotations": m.get("annotations", {})},
                    "status": {"capacity": {"cpu": "64", "memory": "256Gi", "pods": "110"},
                               "allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110"},
                               "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}})
    return out


def containers(ds, standins, driver_version):
    app = ds["metadata"]["name"]
    if not standins:
        return [{"name": "main", "image": "nvcr.io/nvidia/placeholder:" + app}]
    if app == "nvidia-driver-daemonset":
        return [{"name": "nvidia-driver-ctr",
                 "image": f"nvcr.io/nvidia/driver:{driver_version}-ubuntu22.04",
                 "command": ["nvidia-driver"], "args": ["init"],
                 "env": [{"name": "SIM_DRIVER_BUILD_SECONDS", "value": "1"}],
                 "securityContext": {"privileged": True},
                 "startupProbe": {"exec": {"command": ["sh", "-c", "nvidia-smi && touch /run/nvidia/validations/.driver-ctr-ready"]},
                                  "initialDelaySeconds": 1, "periodSeconds": 1, "failureThreshold": 120},
                 "volumeMounts": [{"name": "run-nvidia", "mountPath": "/run/nvidia"},
                                  {"name": "run-nvidia-validations", "mountPath": "/run/nvidia/validations"}]}]
    if app == "nvidia-device-plugin-daemonset":
        # NVIDIA's plugin, played by gpuop's implementation of the same API. The simulated
        # nodes' runtime handler honours volume mounts only (gpuop's), as NVIDIA's toolkit does
        # with accept-nvidia-visible-devices-as-volume-mounts.
        return [{"name": "nvidia-device-plugin", "image": "nvcr.io/nvidia/k8s-device-plugin:v0.17.0",
                 "command": ["nvidia-device-plugin"], "args": ["device-plugin"],
                 "env": [{"name": "DEVICE_LIST_STRATEGY", "value": "volume-mounts"},
                         {"name": "MIG_STRATEGY", "value": "single"}],
                 "volumeMounts": [{"name": "device-plugin", "mountPath": "/var/lib/kubelet/device-plugins"}]}]
    return [{"name": app.replace("nvidia-", "").replace("-daemonset", "") + "-ctr",
             "image": "nvcr.io/nvidia/cloud-native/gpu-operator-validator:v24.9.2",
             "command": ["nvidia-operand"], "args": [app]}]


def volumes(ds, standins):
    vols = copy.deepcopy(ds["spec"]["template"]["spec"].get("volumes", []))
    if standins:
        vols += [{"name": "run-nvidia", "hostPath": {"path": "/run/nvidia", "type": "DirectoryOrCreate"}},
                 {"name": "run-nvidia-validations",
                  "hostPath": {"path": "/run/nvidia/validations", "type": "DirectoryOrCreate"}},
                 {"name": "device-plugin", "hostPath": {"path": "/var/lib/kubelet/device-plugins"}}]
    return vols


def update_strategy(ds, strategy, max_unavailable):
    """The strategy NVIDIA's operator gives a DaemonSet for the policy's daemonsets settings."""
    if strategy is None:
        return ds["spec"]["updateStrategy"]
    if strategy == "OnDelete" or ds["metadata"]["name"].startswith("nvidia-driver-daemonset"):
        return {"type": "OnDelete"}
    mu = max_unavailable or "1"
    # the policy's string, parsed as NVIDIA's operator does (intstr.Parse): "1" is a count
    return {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": int(mu) if mu.isdigit() else mu}}


def objects(f, uid, standins, driver_version, only_ds, strategy=None, max_unavailable=None):
    out = []
    for o in f["objects"]:
        o = copy.deepcopy(o)
        kind = o["kind"]
        if only_ds and kind != "DaemonSet":
            continue
        m = o["metadata"]
        api = {"DaemonSet": "apps/v1", "Role": "rbac.authorization.k8s.io/v1",
               "RoleBinding": "rbac.authorization.k8s.io/v1", "ClusterRole": "rbac.authorization.k8s.io/v1",
               "ClusterRoleBinding": "rbac.authorization.k8s.io/v1", "RuntimeClass": "node.k8s.io/v1",
               "Lease": "coordination.k8s.io/v1"}.get(kind, "v1")
        for r in m.get("ownerReferences", []):
            r.update({"apiVersion": "nvidia.com/v1", "uid": uid, "blockOwnerDeletion": True})
        x = {"apiVersion": api, "kind": kind, "metadata": m}
        if kind == "DaemonSet":
            t = o["spec"]["template"]
            spec = {"serviceAccountName": t["spec"].get("serviceAccountName", "default"),
                    "nodeSelector": t["spec"].get("nodeSelector", {}),
                    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                    "containers": containers(o, standins, driver_version),
                    "volumes": volumes(o, standins)}
            if standins:
                spec["hostPID"] = True  # the workloads' processes are checked in the host's PID namespace
            x["spec"] = {"selector": o["spec"]["selector"],
                         "updateStrategy": update_strategy(o, strategy, max_unavailable),
                         "template": {"metadata": t["metadata"], "spec": spec}}
        elif kind in ("RoleBinding", "ClusterRoleBinding"):
            x["roleRef"] = {"apiGroup": "rbac.authorization.k8s.io", **o["roleRef"]}
            x["subjects"] = o["subjects"]
        elif kind in ("Role", "ClusterRole"):
            x["rules"] = [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]
        elif kind == "ConfigMap":
            x["data"] = {"entrypoint.sh": "# NVIDIA's operand entrypoint (stand-in)\n"}
        elif kind == "Service":
            port = 8080 if m["name"] == "gpu-operator" else 9400
            x["spec"] = {"selector": {"app": m["name"]}, "ports": [{"name": "metrics", "port": port}]}
        elif kind == "RuntimeClass":
            x["handler"] = "nvidia"
        elif kind == "Lease":
            x["spec"] = {"holderIdentity": "gpu-operator-7d9f_2b1d", "leaseDurationSeconds": 15}
        out.append(x)
    return out


def main():
    mode, f = sys.argv[1], load(sys.argv[2])
    if mode == "nodes":
        docs = nodes(f)
    elif mode == "values":
        print(yaml.safe_dump({"clusterPolicy": f["policy"]["spec"]}))
        return 0
    elif mode == "chart-values":
        spec = copy.deepcopy(f["policy"]["spec"])
        spec["operator"] = {k: v for k, v in spec.get("operator", {}).items() if k == "runtimeClass"}
        print(yaml.safe_dump(spec))
        return 0
    else:
        args = sys.argv[4:]
        dv = args[args.index("--driver-version") + 1] if "--driver-version" in args else "550.144.03"
        st = args[args.index("--update-strategy") + 1] if "--update-strategy" in args else None
        mu = args[args.index("--max-unavailable") + 1] if "--max-unavailable" in args else None
        if st not in (None, "OnDelete", "RollingUpdate"):
            sys.exit(f"--update-strategy {st}: RollingUpdate or OnDelete")
        docs = objects(f, sys.argv[3], "--standins" in args, dv, "--only-ds" in args, st, mu)
    print(yaml.safe_dump_all(docs, explicit_start=True, sort_keys=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
