#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Every component's shell stays thin: no src/components/*/*-main.c passes LIMIT lines. A shell
reads the world, calls its core and executes; decisions past that belong in the component's pure
core, with table tests (docs/DEVELOPING.md, "The shape").

PENDING names a shell being cut down by a change not merged yet: it is reported, not failed, and
the line goes once the change is in.

    shell-size.py SRC_ROOT               check SRC_ROOT/src/components
    shell-size.py --self-test SRC_ROOT   plant a long shell, expect it to fail
"""
import glob
import os
import sys

LIMIT = 300
PENDING = set()


def shells(root):
    """{relative path: text} of every component's shell."""
    out = {}
    for path in sorted(glob.glob(os.path.join(root, "src", "components", "*", "*-main.c"))):
        rel = os.path.relpath(path, root).replace(os.sep, "/")
        with open(path, encoding="utf-8", errors="replace") as fh:
            out[rel] = fh.read()
    return out


def check(files, pending=PENDING):
    """(problems, notes) for {path: text}."""
    problems, notes = [], []
    for rel, text in sorted(files.items()):
        n = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
        if n <= LIMIT:
            if rel in pending:
                notes.append("%s: %d lines, within %d: take it out of PENDING" % (rel, n, LIMIT))
            continue
        msg = "%s: %d lines, more than %d: move its decisions into the core" % (rel, n, LIMIT)
        (notes if rel in pending else problems).append(msg)
    return problems, notes


def self_test(root):
    failures = []
    files = shells(root)
    if not files:
        return ["no shell found under %s/src/components" % root]
    problems, _ = check(files)
    if problems:
        failures.append("the tree itself fails: %s" % problems)
    long_text = "int x;\n" * (LIMIT + 1)
    edge_text = "int x;\n" * LIMIT
    plants = [
        # a new component's long shell
        ({"src/components/planted/planted-main.c": long_text}, True),
        # an existing shell grown past the limit
        ({next(iter(files)): long_text}, True),
        # the last line without its newline still counts
        ({"src/components/planted/planted-main.c": long_text.rstrip("\n")}, True),
        # exactly the limit passes
        ({"src/components/planted/planted-main.c": edge_text}, False),
    ]
    for plant, should_fail in plants:
        tree = dict(files)
        tree.update(plant)
        got, _ = check(tree, pending=set())
        got = [p for p in got if any(p.startswith(k + ":") for k in plant)]
        if bool(got) != should_fail:
            failures.append("planted %s: %s" % (list(plant), "passed" if should_fail else got))
    # a pending shell is reported, not failed
    got, notes = check({"src/components/p/p-main.c": long_text}, pending={"src/components/p/p-main.c"})
    if got or not notes:
        failures.append("a pending shell: problems %s, notes %s" % (got, notes))
    return failures


def main(argv):
    if len(argv) == 3 and argv[1] == "--self-test":
        failures = self_test(argv[2])
        for f in failures:
            print("shell-size self-test:", f)
        if failures:
            return 1
        print("shell-size self-test: a long shell, planted, fails; the tree passes")
        return 0
    if len(argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    problems, notes = check(shells(argv[1]))
    for n in notes:
        print("note:", n)
    for p in problems:
        print(p)
    if problems:
        return 1
    print("shell-size: every component's shell is within %d lines" % LIMIT)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
