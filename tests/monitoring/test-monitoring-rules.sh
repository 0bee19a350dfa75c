#!/usr/bin/env bash
# deploy/monitoring/ checked with the tools that consume it: promtool check rules and promtool
# test rules (a unit test per alert: it fires on the bad series and not on the good one); every
# alert has its test; the Grafana dashboard's queries parse as PromQL (promtool, as recording
# rules) and name only metrics gpuop exports: the exporter's from its own tables ($1, the
# exp-served program of tests/exporter: the fields its catalogue reads, not those it names
# unsupported, and its own families), the operator's and the node status exporter's from their
# sources. Every alert of both rule files has a runbook_url, docs/<page>.md#<anchor>, whose
# anchor is a heading of that page (as GitHub makes anchors of headings). The alerts'
# gpuop_remediation_* metrics are the operator's (from its sources).
set -euo pipefail
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
command -v promtool >/dev/null || skip "promtool absent (Debian package prometheus)"
M=$S/deploy/monitoring

promtool check rules "$M/gpuop-alerts.yaml" "$M/gpuop-quota-rules.yaml"
(cd "$M/tests" && promtool test rules gpuop-alerts-test.yaml)

SERVED=${1:?usage: test-monitoring-rules.sh EXP-SERVED}
"$SERVED" >"$T/exporter-served" || { echo "FAIL: $SERVED"; exit 1; }
python3 - "$M" "$S/src" "$T" <<'PY'
import json, os, re, sys, yaml
mon, src, tmp = sys.argv[1:4]
rules = yaml.safe_load(open(f"{mon}/gpuop-alerts.yaml"))
alerts = [r["alert"] for g in rules["groups"] for r in g["rules"] if "alert" in r]
tests = yaml.safe_load(open(f"{mon}/tests/gpuop-alerts-test.yaml"))["tests"]
bad = 0
for a in alerts:
    fires = [t for t in tests for c in t.get("alert_rule_test", [])
             if c["alertname"] == a and c.get("exp_alerts")]
    if not fires:
        print(f"FAIL alert {a}: no unit test where it fires"); bad += 1
        continue
    # The good series: some input series of that test must not be among the expected alerts.
    t = fires[0]
    if len(t["input_series"]) < 2:
        print(f"FAIL alert {a}: its test has no good series beside the bad one"); bad += 1
print(f"{len(alerts)} alerts, each with a unit test")

# Runbooks: each alert's runbook_url names a heading of a page under docs/.
def slug(h):
    h = re.sub(r"[^\w\- ]", "", h.strip().lower())
    return h.replace(" ", "-")
root = os.path.dirname(os.path.dirname(mon))
nbook = 0
for f in ("gpuop-alerts.yaml", "gpuop-quota-rules.yaml"):
    for g in yaml.safe_load(open(f"{mon}/{f}"))["groups"]:
        for r in g["rules"]:
            if "alert" not in r:
                continue
            url = r.get("annotations", {}).get("runbook_url", "")
            m = re.fullmatch(r"docs/([\w.-]+\.md)#([\w-]+)", url)
            if not m:
                print(f"FAIL alert {r['alert']}: runbook_url {url!r} is not docs/PAGE.md#ANCHOR"); bad += 1
                continue
            page = os.path.join(root, "docs", m.group(1))
            heads = [slug(l.lstrip("#")) for l in open(page) if re.match(r"#{1,6} ", l)] \
                if os.path.exists(page) else []
            if m.group(2) not in heads:
                print(f"FAIL alert {r['alert']}: {url} is no heading of docs/{m.group(1)}"); bad += 1
            nbook += 1
print(f"{nbook} runbook_urls, each a heading under docs/")

# The dashboard: its queries, made concrete, parse as PromQL; each metric is one gpuop exports.
d = json.load(open(f"{mon}/gpuop-fleet-dashboard.json"))
exprs = [t["expr"] for p in d["panels"] for t in p.get("targets", [])]
exprs += [v["definition"] for v in d["templating"]["list"] if v.get("definition")]
group = {"groups": [{"name": "dashboard", "rules": [
    {"record": f"dashboard:q{i}", "expr": e.replace("$node", ".*").replace("$namespace", ".*")}
    for i, e in enumerate(exprs) if not e.startswith("label_values(")]}]}
yaml.safe_dump(group, open(f"{tmp}/dashboard-rules.yaml", "w"))
# The exporter's names from its tables; the operator's and the node status exporter's
# (gpu_operator_*, gpuop_node_*) from their code.
exported = set(open(f"{tmp}/exporter-served").read().split())
for sub in ("operator", "node-status-exporter"):
    for root, _, files in os.walk(os.path.join(src, "components", sub)):
        for f in files:
            if f.endswith((".c", ".h")):
                exported |= set(re.findall(r'"((?:gpuop_node|gpu_operator)_[A-Za-z0-9_]+)"',
                                           open(os.path.join(root, f), errors="replace").read()))
# The alerts on the remediation: their gpuop_remediation_* metrics are the operator's.
op_names = set()
for root_, _, files in os.walk(os.path.join(src, "components", "operator")):
    for f in files:
        if f.endswith((".c", ".h")):
            op_names |= set(re.findall(r'"(gpuop_remediation_[A-Za-z0-9_]+)"',
                                       open(os.path.join(root_, f), errors="replace").read()))
for g in rules["groups"]:
    for r in g["rules"]:
        for name in re.findall(r"\bgpuop_remediation_[A-Za-z0-9_]+", r.get("expr", "")):
            if name not in op_names:
                print(f"FAIL alert {r.get('alert')}: {name} is not a metric the operator exports"); bad += 1
for e in exprs:
    for name in re.findall(r"\b((?:DCGM_(?:FI|EXP)|gpuop|gpu_operator)_[A-Za-z0-9_]+)", e):
        if name not in exported:
            print(f"FAIL dashboard: {name} is not a metric gpuop exports"); bad += 1
print(f"dashboard: {len(d['panels'])} panels, {len(exprs)} queries")
sys.exit(1 if bad else 0)
PY
promtool check rules "$T/dashboard-rules.yaml"
echo "PASS monitoring rules and dashboard"
