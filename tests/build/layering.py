#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Module layering, checked on what the build declares.

Reads <builddir>/compile_commands.json: for every product target, the module folders on its
include path are the modules it depends on (its own <name>_dep declarations, resolved by Meson).
Prints the module graph and fails (exit 1) on a cycle, on a module that sees a module of its own
layer or above (docs/DEVELOPING.md, "Layers"), on a target outside a module that sees that
module's internal/ folder without being one of its white-box tests (tests/), and on a product
target other than the NVML binding and the simulated driver that sees nvml-abi.h.

Usage: layering.py BUILDDIR [--dot]
"""
import json
import os
import re
import sys

# Lower number = lower layer. A module may depend only on modules of a lower layer.
LAYERS = {
    'util': 0,
    'kobj': 1, 'prom': 1, 'yamlcfg': 1,
    # cdi reads specs with yamlcfg, nodestate uses kobj (layer 1): both sit just above them
    'kube': 2, 'http': 2, 'grpc': 2, 'nvml': 2, 'cuda': 2, 'nodestate': 2, 'cdi': 2,
    'svc': 3,
    # the capacity-and-quota view: over kobj and nodestate, under the operator
    'capacity': 3,
    'dpconfig': 4, 'rtconfig': 4, 'migparted': 4, 'nodeops': 4, 'nvcdi': 4,
    'upgrade': 4,  # the driver upgrade planner (pure), below the operator that runs it
    'operator': 5, 'gfd': 5, 'deviceplugin': 5, 'exporter': 5, 'inventory': 5,
    'validator': 5, 'drivermgr': 5, 'discovery': 5, 'migmgr': 5, 'nodestatus': 5, 'toolkit': 5, 'runtime': 5,
    'status': 5, 'doctor': 5,
    'sim/nvml': 5, 'sim/kubesim': 5, 'sim/kubelet': 5,
    'cmd': 6, 'sim/images': 6, 'sim/cuda': 6,
}
FOLDERS = {
    'src/util': 'util', 'src/kobj': 'kobj', 'src/prom': 'prom', 'src/yamlcfg': 'yamlcfg',
    'src/kube': 'kube', 'src/http': 'http', 'src/grpc': 'grpc', 'src/nvml': 'nvml',
    'src/svc': 'svc', 'src/node/dpconfig': 'dpconfig', 'src/operator': 'operator',
    'src/node/gfd': 'gfd', 'src/node/deviceplugin': 'deviceplugin',
    'src/node/exporter': 'exporter', 'sim/nvml': 'sim/nvml', 'sim/kubesim': 'sim/kubesim',
    'sim/kubelet': 'sim/kubelet', 'sim/images': 'sim/images',
    'src/cmd': 'cmd',
    'src/nodestate': 'nodestate', 'src/capacity': 'capacity', 'src/cdi': 'cdi', 'src/cuda': 'cuda',
    'src/node/rtconfig': 'rtconfig', 'src/node/validator': 'validator',
    'src/node/drivermgr': 'drivermgr', 'src/node/discovery': 'discovery', 'src/node/nodestatus': 'nodestatus',
    'src/node/toolkit': 'toolkit', 'src/node/runtime': 'runtime', 'sim/cuda': 'sim/cuda',
    'src/status': 'status', 'src/node/doctor': 'doctor',
    'src/node/migparted': 'migparted', 'src/node/nodeops': 'nodeops',
    'src/node/migmgr': 'migmgr', 'src/node/nvcdi': 'nvcdi',
    'src/upgrade': 'upgrade',
}
# src/nvml/abi (nvml-abi.h, NVML's C ABI): the binding and the simulated driver only.
NVML_ABI_USERS = ('nvml', 'sim/nvml')
# Targets that live in a module's folder but are a module of their own in the layering.
TARGET_MODULE = {'gpuop-inventory': 'inventory'}


def folder_module(path):
    """The module a source-tree path belongs to, and whether it is under internal/."""
    best = None
    for folder, mod in FOLDERS.items():
        if path == folder or path.startswith(folder + '/'):
            if best is None or len(folder) > len(best[0]):
                best = (folder, mod)
    if best is None:
        return None, False
    rest = path[len(best[0]):].strip('/')
    return best[1], rest == 'internal' or rest.startswith('internal/')


def relpath_in(cwd, path, src, build):
    """path (relative to cwd) as a source-tree path; a build-dir path maps to its source twin
    (build/src/cmd/components.c is src/cmd's)."""
    full = os.path.realpath(os.path.join(cwd, path))
    build = os.path.realpath(build)
    if full == build or full.startswith(build + os.sep):
        return os.path.relpath(full, build)
    return os.path.relpath(full, src)


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    build = sys.argv[1]
    src = os.path.realpath(os.environ.get('GPUOP_SOURCE_ROOT', os.path.join(build, '..')))
    with open(os.path.join(build, 'compile_commands.json'), encoding='utf-8') as f:
        commands = json.load(f)

    graph = {}      # module -> set of modules it sees
    problems = []
    whitebox = set()
    for c in commands:
        out = c['output']
        m = re.match(r'(.*?)/?([^/]+)\.p/', out)
        tdir, tfile = (m.group(1), m.group(2)) if m else ('', out)
        tname = re.sub(r'\.(a|so(\.\d+)*)$', '', re.sub(r'^lib', '', tfile))
        srcfile = relpath_in(c['directory'], c['file'], src, c['directory'])
        is_test = tdir.startswith('tests/') or tdir.startswith('bench/')
        mod, _ = folder_module(srcfile if not is_test else tdir)
        mod = TARGET_MODULE.get(tname, mod)
        incs = set()
        for inc in re.findall(r'(?:^|\s)-I(\S+)', c['command']):
            p = relpath_in(c['directory'], inc, src, c['directory'])
            imod, internal = folder_module(p)
            if imod is None:
                continue
            if p == 'src/nvml/abi' and not is_test and mod not in NVML_ABI_USERS:
                problems.append('%s (%s): sees nvml-abi.h; agents use gpu.h' % (tname, mod))
            incs.add((imod, internal))
        for imod, internal in incs:
            if internal and imod != mod:
                if is_test:
                    whitebox.add('%s (%s internal/)' % (tname, imod))
                else:
                    problems.append('%s: sees %s internal/' % (tname, imod))
        if mod is None and not is_test and srcfile.split('/')[0] in ('src', 'sim'):
            problems.append('%s: %s is in no module of the layer table (FOLDERS, LAYERS)'
                            % (tname, srcfile))
        if is_test or mod is None:
            continue
        deps = graph.setdefault(mod, set())
        for imod, _ in incs:
            if imod != mod:
                deps.add(imod)

    for mod, deps in graph.items():
        for d in sorted(deps):
            if d not in LAYERS or mod not in LAYERS:
                problems.append('%s -> %s: module not in the layer table' % (mod, d))
            elif LAYERS[d] >= LAYERS[mod]:
                problems.append('%s (layer %d) -> %s (layer %d): not a lower layer'
                                % (mod, LAYERS[mod], d, LAYERS[d]))

    # Cycles (a strict layering has none, but say so from the graph itself).
    state = {}

    def visit(n, stack):
        state[n] = 1
        for d in sorted(graph.get(n, ())):
            if state.get(d) == 1:
                problems.append('cycle: ' + ' -> '.join(stack[stack.index(d):] + [d]))
            elif d not in state:
                visit(d, stack + [d])
        state[n] = 2

    for n in sorted(graph):
        if n not in state:
            visit(n, [n])

    if '--dot' in sys.argv:
        print('digraph modules {')
        for mod in sorted(graph, key=lambda x: (LAYERS.get(x, 9), x)):
            for d in sorted(graph[mod]):
                print('  "%s" -> "%s";' % (mod, d))
        print('}')
    else:
        for mod in sorted(graph, key=lambda x: (LAYERS.get(x, 9), x)):
            print('%-13s (layer %s) -> %s' % (mod, LAYERS.get(mod, '?'),
                                              ' '.join(sorted(graph[mod])) or '-'))
        print("white-box tests (a module's internal/ folder): "
              + (', '.join(sorted(whitebox)) or '-'))
    for p in problems:
        print('layering: ' + p, file=sys.stderr)
    if problems:
        return 1
    print('layering: ok, %d modules, no cycle, every edge goes down' % len(graph))
    return 0


if __name__ == '__main__':
    sys.exit(main())
