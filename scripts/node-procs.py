#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The processes of a kubelet-sim node's containers and the machine their programs are built for.

    scripts/node-procs.py NODE_ROOT [--image SUBSTRING] [--json]

kubelet-sim gives every process of a node's pods GPUOP_SIM_ROOT=<node root> (sim/kubelet/README.md)
and no PID namespace, so they are found on this machine's /proc. For each: the pid, the program
the kernel runs (/proc/PID/exe: qemu-aarch64-static for an arm64 node's program under qemu-user),
the program it runs (an ELF file among its command line's paths: the cross tree's gpuop or
sim-image under qemu; /proc/PID/exe itself otherwise) and that program's ELF machine (x86-64,
aarch64), the pod (its HOSTNAME) and the image. --image keeps only processes whose GPUOP_SIM_IMAGE
contains SUBSTRING. One line per process ("PID MACHINE PROGRAM EXE POD IMAGE"), or a JSON list; exit 0 (none found is an empty list). Read-only; needs root to read other
users' /proc entries.
"""
import json
import os
import sys

MACHINES = {0x3E: "x86-64", 0xB7: "aarch64"}


def elf_machine(path):
    """The ELF machine of a file, or None when it is not an ELF file."""
    try:
        with open(path, "rb") as f:
            head = f.read(20)
    except OSError:
        return None
    if len(head) < 20 or head[:4] != b"\x7fELF":
        return None
    order = "little" if head[5] == 1 else "big"
    m = int.from_bytes(head[18:20], order)
    return MACHINES.get(m, "machine %d" % m)


def env_of(pid):
    with open("/proc/%s/environ" % pid, "rb") as f:
        out = {}
        for kv in f.read().split(b"\0"):
            k, _, v = kv.partition(b"=")
            if k:
                out[k.decode(errors="replace")] = v.decode(errors="replace")
        return out


def procs(root, image=None):
    found = []
    for pid in sorted((p for p in os.listdir("/proc") if p.isdigit()), key=int):
        try:
            env = env_of(pid)
            if os.path.realpath(env.get("GPUOP_SIM_ROOT", "/nonexistent")) != root:
                continue
            if image and image not in env.get("GPUOP_SIM_IMAGE", ""):
                continue
            exe = os.readlink("/proc/%s/exe" % pid)
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                args = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
        except OSError:
            continue  # gone meanwhile, or not ours to read
        exe_machine = elf_machine("/proc/%s/exe" % pid)
        program, machine = exe, exe_machine
        # under qemu-user the program is an argument of the emulator: the first ELF file named
        if os.path.basename(exe).startswith("qemu-"):
            for a in args[1:]:
                m = elf_machine(a) if a.startswith("/") else None
                if m:
                    program, machine = a, m
                    break
        found.append({"pid": int(pid), "exe": exe, "exeMachine": exe_machine,
                      "program": program, "machine": machine,
                      "image": env.get("GPUOP_SIM_IMAGE", ""), "pod": env.get("HOSTNAME", "")})
    return found


def main(argv):
    args = argv[1:]
    as_json = "--json" in args
    args = [a for a in args if a != "--json"]
    image = None
    if "--image" in args:
        i = args.index("--image")
        if i + 1 >= len(args):
            print("node-procs.py: --image needs a value", file=sys.stderr)
            return 2
        image = args[i + 1]
        del args[i:i + 2]
    if len(args) != 1:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    found = procs(os.path.realpath(args[0]), image)
    if as_json:
        print(json.dumps(found))
    else:
        for p in found:
            print("%d %s %s %s %s %s" % (p["pid"], p["machine"], p["program"], p["exe"], p["pod"] or "-",
                                         p["image"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
