#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""make check's runner: every selected test of a build, the tests registered is_parallel: false
(the end-to-end tests and others that must not share the machine with another of their kind)
one at a time beside the others, instead of each alone with the machine otherwise idle.

meson test runs a non-parallel test with nothing else beside it; those tests are mostly waits
(a rollout, a pod's readiness delay, a lease), so about half of a 2-CPU run had one CPU idle.
They use their own ports, addresses, bridges and subnets (tests/kubelet/, docs/DEVELOPING.md),
so several meson test runs share the build: one with the parallel tests (meson's default number
of processes, or GPUOP_CHECK_PROCESSES), and GPUOP_CHECK_SERIAL_CHAINS (default 2) chains of the
non-parallel tests, each running its tests one at a time. The chains are balanced by the tests' expected durations
(their priority: a long test registers its typical seconds; longest first, each to the chain
with the least so far), so two of the longest never queue behind each other.
Each test runs once, as before; their results are merged into meson-logs/testlog.json (what
.ci/run counts), the summary says how many of the selected tests ran.

Usage: check.py BUILD [--suite S]... [--no-suite S]... [-- MESON-TEST-ARGS...]
Exit status: 0 when both runs passed, else 1 (2 for bad usage or no test selected).
"""
import json
import os
import subprocess
import sys
import threading

MESON = os.environ.get("MESON") or "meson"


def usage(msg):
    print("check.py: %s\nusage: check.py BUILD [--suite S]... [--no-suite S]... "
          "[-- MESON-TEST-ARGS...]" % msg, file=sys.stderr)
    sys.exit(2)


def parse(argv):
    if not argv:
        usage("no build directory")
    build, suites, no_suites, rest = argv[0], [], [], []
    i = 1
    while i < len(argv):
        a = argv[i]
        if a == "--":
            rest = argv[i + 1:]
            break
        if a in ("--suite", "--no-suite") and i + 1 < len(argv):
            (suites if a == "--suite" else no_suites).append(argv[i + 1])
            i += 2
            continue
        usage("unknown argument %r" % a)
    return build, suites, no_suites, rest


def suite_names(test):
    """A test's suites without the project's prefix ("gpuop:e2e" -> "e2e")."""
    return {s.split(":")[-1] for s in test["suite"]}


def select(tests, suites, no_suites):
    """(parallel names, non-parallel names) of the tests in any of suites (all when none) and in
    none of no_suites, in registration order."""
    par, serial = [], []
    for t in tests:
        s = suite_names(t)
        if suites and not s & set(suites):
            continue
        if s & set(no_suites):
            continue
        (par if t["is_parallel"] else serial).append(t)
    return [t["name"] for t in par], serial


def weight(t):
    """A test's expected seconds: its priority, which a long test's registration sets to its
    typical duration (meson test starts higher priorities first), else a tenth of its timeout."""
    return t.get("priority") or (t.get("timeout") or 30) / 10


def chains(serial, n):
    """The non-parallel tests in n chains, balanced by expected duration: longest first, each to
    the chain with the least total so far; registration order kept within a chain."""
    out = [[] for _ in range(max(1, n))]
    load = [0] * len(out)
    order = {t["name"]: i for i, t in enumerate(serial)}
    for t in sorted(serial, key=lambda t: (-weight(t), order[t["name"]])):
        i = load.index(min(load))
        out[i].append(t["name"])
        load[i] += weight(t)
    return [sorted(c, key=order.get) for c in out if c]


def forward(stream, prefix):
    for line in stream:
        sys.stdout.write(prefix + line)
        sys.stdout.flush()


def results(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [line for line in f if line.strip()]


def main():
    build, suites, no_suites, rest = parse(sys.argv[1:])
    out = subprocess.run([MESON, "introspect", build, "--tests"], capture_output=True,
                         text=True)
    if out.returncode != 0:
        usage("meson introspect %s: %s" % (build, out.stderr.strip()))
    par, serial = select(json.loads(out.stdout), suites, no_suites)
    if not par and not serial:
        usage("no test selected")
    # One build before both runs: two meson test runs must not rebuild the tree at once.
    if subprocess.run(["ninja", "-C", build]).returncode != 0:
        print("check.py: the build failed")
        return 1
    logs = os.path.join(build, "meson-logs")
    runs = []
    try:
        n_chains = int(os.environ.get("GPUOP_CHECK_SERIAL_CHAINS") or 2)
    except ValueError:
        usage("GPUOP_CHECK_SERIAL_CHAINS: not a number")
    # The parallel run's processes: meson's default (one per CPU) unless GPUOP_CHECK_PROCESSES
    # says otherwise (make check-asan: 3, its tests mostly wait on the servers they start).
    procs = os.environ.get("GPUOP_CHECK_PROCESSES") or None
    if procs is not None and not procs.isdigit():
        usage("GPUOP_CHECK_PROCESSES: not a number")
    plan = [("testlog-parallel", par, procs, "")]
    for i, names in enumerate(chains(serial, n_chains)):
        plan.append(("testlog-serial%d" % (i + 1), names, "1", "serial%d| " % (i + 1)))
    # An empty name list would make meson test run every test: each run only when it has some.
    for base, names, procs, prefix in plan:
        if not names:
            continue
        cmd = [MESON, "test", "-C", build, "--no-rebuild", "--logbase", base] + rest
        if procs:
            cmd += ["--num-processes", procs]
        if os.path.exists(os.path.join(logs, base + ".json")):
            os.unlink(os.path.join(logs, base + ".json"))
        p = subprocess.Popen(cmd + names, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True)
        th = threading.Thread(target=forward, args=(p.stdout, prefix))
        th.start()
        runs.append((base, p, th))
    rc = 0
    merged = []
    for base, p, th in runs:
        th.join()
        if p.wait() != 0:
            rc = 1
        merged += results(os.path.join(logs, base + ".json"))
    with open(os.path.join(logs, "testlog.json"), "w") as f:
        f.writelines(merged)
    selected = len(par) + len(serial)
    print("check.py: %d of %d selected tests ran (%d beside each other, %d one at a time in "
          "%d chains beside them); results in %s" % (len(merged), selected, len(par), len(serial),
                                                     len(plan) - 1,
                                                     os.path.join(logs, "testlog.json")))
    if len(merged) != selected:
        print("check.py: %d selected tests have no result" % (selected - len(merged)))
        rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
