#!/usr/bin/env python3
"""Sums a heaptrack flame-graph stack file (heaptrack_print -F, cost type peak or leaked) by
what holds the memory in the operator: each informer's store, the list pages being decoded, the
reconcile's planners. Prints a Markdown table: part, MiB, share."""
import sys

# (part, frame markers): the first part with a marker anywhere in the stack wins, so the more
# specific ones come first.
PARTS = [
    ("node informer store (project_node)", ["project_node"]),
    ("upgrade pod informer store (driver, validator pods)", ["upgrade-ctl.c", "project_pod"]),
    ("quota pod informer store (GPU pods)", ["gpuquota-watch.c"]),
    ("other informer stores (owned objects, policies, ...)", ["apply_upsert", "apply_item", "seen_add", "apply_page"]),
    # a list page: its body as read, then one item decoded at a time (kube_list_page_each); a
    # watch event decoded; an unprojected store keeps what the decode allocated, counted here
    ("list pages and watch events being read and decoded (all informers)", ["kube_json_parse", "kube_list_page_each", "kube_list_page_held", "kube_watch", "decode_body"]),
    ("other informer work", ["on_event", "kube-informer.c"]),
    ("reconcile: world read, op_plan", ["read_world", "op_plan", "op_gpuquota_observe"]),
    ("reconcile: upgrade pass (upg_plan, its inputs)", ["op_upgrade_plan", "upg_plan"]),
    ("reconcile: executing writes", ["op_reconcile", "reconcile.c", "upgrade-exec.c"]),
    ("API client (connections, TLS, buffers)", ["kube-http.c", "kube-conn.c", "kube-h1.c", "gnutls"]),
]

def main():
    totals = {}
    total = 0
    for line in open(sys.argv[1], errors="replace"):
        line = line.rstrip("\n")
        if not line:
            continue
        stack, _, cost = line.rpartition(" ")
        try:
            cost = int(cost)
        except ValueError:
            continue
        total += cost
        part = "other"
        for name, marks in PARTS:
            if any(m in stack for m in marks):
                part = name
                break
        totals[part] = totals.get(part, 0) + cost
    print("| part | MiB | share |")
    print("|---|---|---|")
    for part, cost in sorted(totals.items(), key=lambda kv: -kv[1]):
        print("| %s | %.1f | %.0f%% |" % (part, cost / 1048576, 100.0 * cost / max(total, 1)))
    print("| total heap | %.1f | |" % (total / 1048576))

if __name__ == "__main__":
    main()
