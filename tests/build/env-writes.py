#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""No product code changes process-wide state a running thread may be reading: the environment
(setenv, putenv, unsetenv, clearenv) and the C library's time zone (tzset, which reads TZ). One
thread calling setenv while another calls getenv, localtime or mktime is a data race; gpuop's
components run threads (informers, signal readers, HTTP servers) from their start.

A call is allowed only in a file named in ALLOWED, and only where its own line or the comment
right above it carries `env-write-before-threads: <why>`: the place says it runs before any
thread starts, and why that holds. Comments and string literals are not code.

    env-writes.py SRC_ROOT               check SRC_ROOT/src
    env-writes.py --self-test SRC_ROOT   plant calls in files as read, expect each to fail
"""
import os
import re
import sys

CALLS = ("setenv", "putenv", "unsetenv", "clearenv", "tzset")
CALL_RE = re.compile(r"(?<![A-Za-z0-9_])(" + "|".join(CALLS) + r")\s*\(")
MARKER = "env-write-before-threads:"
# The dispatcher's main(): it reads the global flags before it hands over to a component, so
# before any thread of the process exists.
ALLOWED = {"src/cmd/main.c"}


TOKEN_RE = re.compile(r"//[^\n]*|/\*.*?(?:\*/|$)|\"(?:\\.|[^\"\\\n])*\"?|'(?:\\.|[^'\\\n])*'?", re.S)


def strip_code(text):
    """The text with comments and string/char literals blanked (line breaks kept)."""
    return TOKEN_RE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def marked(lines, idx):
    """Does line idx (0-based), or the comment right above it, carry the marker with a reason?"""
    k = idx
    while k >= 0 and idx - k <= 4:
        m = lines[k].split(MARKER, 1)
        if len(m) == 2 and len(m[1].strip(" */\t")) >= 10:
            return True
        k -= 1
        if k >= 0 and not lines[k].lstrip().startswith(("/*", "*", "//")):
            break
    return False


def check_file(rel, text):
    """Problems in one file: ["path:line: call(...)..."]."""
    problems = []
    if not CALL_RE.search(text):
        return problems
    code_lines = strip_code(text).split("\n")
    raw_lines = text.split("\n")
    for idx, line in enumerate(code_lines):
        for m in CALL_RE.finditer(line):
            if rel in ALLOWED and marked(raw_lines, idx):
                continue
            why = (
                "not marked `%s <why>`" % MARKER
                if rel in ALLOWED
                else "product code that may run after threads start"
            )
            problems.append("%s:%d: %s() %s" % (rel, idx + 1, m.group(1), why))
    return problems


def check_tree(root, plant=None):
    """Problems under root/src; plant: (path, text) appended to that file as it is read."""
    problems = []
    src = os.path.join(root, "src")
    for d, _, files in os.walk(src):
        for f in sorted(files):
            if not f.endswith((".c", ".h", ".cc", ".cpp")):
                continue
            path = os.path.join(d, f)
            rel = os.path.relpath(path, root).replace(os.sep, "/")
            with open(path, encoding="utf-8", errors="replace") as fh:
                text = fh.read()
            if plant and plant[0] == rel:
                text += "\n" + plant[1]
            problems += check_file(rel, text)
    return problems


def self_test(root):
    failures = []
    if check_tree(root):
        failures.append("the tree itself does not pass")
    plants = [
        ("src/lib/upgrade/upg-tz.c", 'void planted(void) { setenv("TZ", "UTC", 1); }\n', True),
        ("src/lib/upgrade/upg-tz.c", "void planted(void) { tzset(); }\n", True),
        ("src/components/operator/controller.c", 'void planted(void) { putenv((char *)"A=b"); }\n', True),
        ("src/base/util/util.c", 'void planted(void) { unsetenv ("TZ"); }\n', True),
        # a marker outside the allowed files allows nothing
        ("src/lib/upgrade/upg-tz.c",
         '/* env-write-before-threads: runs first, trust me */\nvoid p(void) { setenv("A", "b", 1); }\n', True),
        # in the allowed file, a call without the marker (or with no reason) fails
        ("src/cmd/main.c", 'void planted(void) { setenv("A", "b", 1); }\n', True),
        ("src/cmd/main.c", '/* env-write-before-threads: */\nvoid p(void) { setenv("A", "b", 1); }\n', True),
        # words in comments and strings, and other names, are not calls
        ("src/lib/upgrade/upg-tz.c",
         '/* never setenv("TZ") here */\nstatic const char *s = "tzset()";\nint my_setenv(int x);\n', False),
    ]
    for rel, text, should_fail in plants:
        if not os.path.exists(os.path.join(root, rel)):
            failures.append("no %s to plant in" % rel)
            continue
        got = check_tree(root, (rel, text))
        if bool(got) != should_fail:
            failures.append(
                "planted in %s: %r: %s"
                % (rel, text.strip(), "passed" if should_fail else "failed: %s" % got)
            )
    return failures


def main(argv):
    if len(argv) == 3 and argv[1] == "--self-test":
        failures = self_test(argv[2])
        for f in failures:
            print("self-test: " + f)
        print("self-test: %s" % ("FAIL" if failures else "ok"))
        return 1 if failures else 0
    if len(argv) != 2:
        print(__doc__)
        return 2
    problems = check_tree(argv[1])
    for p in problems:
        print(p)
    if problems:
        print("env-writes: %d call(s) change process-wide state a thread may be reading" % len(problems))
        return 1
    print("env-writes: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
