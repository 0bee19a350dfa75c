#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A runtime's effective configuration, as plain sorted JSON, for test-rtconfig-admin.sh.

  containerd DUMP [--installed BIN]   `containerd config dump`'s TOML (read with tomllib)
  docker FILE [--installed BIN]       daemon.json (absent: {})
  crio ROOT [--installed BIN]         CRI-O's merge, as CRI-O does it: ROOT/etc/crio/crio.conf,
                                      then every visible regular file of crio.conf.d in name
                                      order, table by table (CRI-O is not packaged in Debian 12;
                                      tomllib reads the files, links resolved by the caller's
                                      chroot)

With --installed the handler gpuop adds must be in force (running BIN, CDI on where the runtime
knows it) and is then taken out, so the result is comparable with the administrator's own
configuration; without it, it must not be there. Zero values (containerd prints a runtime left to
its defaults with every option at its zero value) and empty tables are dropped.
"""
import json
import os
import sys
import tomllib


def fail(msg):
    sys.exit(f"effective: {msg}")


def strip(v):
    if isinstance(v, dict):
        out = {}
        for k, x in v.items():
            x = strip(x)
            if x not in (None, {}, [], "", 0, False):
                out[k] = x
        return out
    if isinstance(v, list):
        return [strip(x) for x in v]
    return v


def merge(into, add):
    for k, v in add.items():
        if isinstance(v, dict) and isinstance(into.get(k), dict):
            merge(into[k], v)
        else:
            into[k] = v


def get(d, *path):
    for k in path:
        d = d.get(k) if isinstance(d, dict) else None
    return d


def containerd(path, binary):
    with open(path, "rb") as f:
        d = tomllib.load(f)
    d.pop("imports", None)
    plugins = d.get("plugins", {})
    name = next((p for p in ("io.containerd.grpc.v1.cri", "cri", "io.containerd.cri.v1.runtime")
                 if p in plugins), None)
    if name is None:
        fail(f"{path}: no CRI plugin section")
    cri = plugins[name]
    runtimes = get(cri, "containerd", "runtimes") or {}
    if binary:
        got = get(runtimes, "nvidia", "options", "BinaryName")
        if got != binary:
            fail(f"{path}: the nvidia runtime runs {got!r}, want {binary!r}")
        if "runc" not in runtimes:
            fail(f"{path}: runc is gone")
        if "enable_cdi" in cri and cri["enable_cdi"] is not True:
            fail(f"{path}: enable_cdi is {cri['enable_cdi']!r}")
        del runtimes["nvidia"]
    elif "nvidia" in runtimes:
        fail(f"{path}: the nvidia runtime is still there")
    cri.pop("enable_cdi", None)
    cri.pop("cdi_spec_dirs", None)
    return d


def docker(path, binary):
    d = {}
    if os.path.exists(path):
        with open(path) as f:
            d = json.load(f)
    if binary:
        if get(d, "runtimes", "nvidia") != {"path": binary, "args": []}:
            fail(f"{path}: runtimes.nvidia is {get(d, 'runtimes', 'nvidia')!r}")
        if get(d, "features", "cdi") is not True:
            fail(f"{path}: features.cdi is not true")
        del d["runtimes"]["nvidia"]
        del d["features"]["cdi"]
    elif get(d, "runtimes", "nvidia") is not None or get(d, "features", "cdi") is not None:
        fail(f"{path}: gpuop's members are still there")
    return d


def crio(root, binary):
    d = {}
    files = [os.path.join(root, "etc/crio/crio.conf")]
    ddir = os.path.join(root, "etc/crio/crio.conf.d")
    if os.path.isdir(ddir):
        files += [os.path.join(ddir, n) for n in sorted(os.listdir(ddir))
                  if not n.startswith(".") and os.path.isfile(os.path.join(ddir, n))]
    for p in files:
        if os.path.exists(p):
            with open(p, "rb") as f:
                merge(d, tomllib.load(f))
    runtimes = get(d, "crio", "runtime", "runtimes") or {}
    if binary:
        nv = runtimes.get("nvidia") or {}
        if nv.get("runtime_path") != binary or nv.get("runtime_type") != "oci":
            fail(f"the nvidia runtime is {nv!r}")
        base = runtimes.get("runc") or runtimes.get("crun") or {}
        for k, v in base.items():
            if k != "runtime_path" and nv.get(k) != v:
                fail(f"the nvidia runtime's {k} is {nv.get(k)!r}, the runtime it clones has {v!r}")
        del runtimes["nvidia"]
    elif "nvidia" in runtimes:
        fail("the nvidia runtime is still there")
    return d


def main():
    args = sys.argv[1:]
    binary = None
    if "--installed" in args:
        i = args.index("--installed")
        binary = args[i + 1]
        del args[i:i + 2]
    kind, path = args
    d = {"containerd": containerd, "docker": docker, "crio": crio}[kind](path, binary)
    print(json.dumps(strip(d), sort_keys=True, indent=1))


main()
