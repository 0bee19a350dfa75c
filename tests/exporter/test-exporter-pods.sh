#!/bin/bash
# Pod attribution against a kubelet PodResources v1 stand-in on python3-grpcio: whole GPUs by
# UUID, shared GPUs by "<uuid>::n" replica IDs, MIG devices by MIG UUID (to parent + GPU
# instance), NVIDIA_RESOURCE_NAMES, non-GPU resources ignored; scrapes make no kubelet call; the
# map is refreshed on the collection clock; an unreachable kubelet is not fatal.
# $1: build/gpuop  $2: simulated libnvidia-ml.so.1  $3: sim/fleets (dgx-h100.yaml for whole GPUs,
# the first *mig*.yaml for MIG)
set -u
gpuop=$1
. "$(dirname "$0")/lib.sh"
[ -f "$2" ] || skip "simulated libnvidia-ml not built: $2"
whole_fleet=$3/dgx-h100.yaml
mig_fleet=$(ls "$3"/*mig*.yaml 2>/dev/null | head -1)
[ -f "$whole_fleet" ] && [ -n "$mig_fleet" ] || fail "fleets missing in $3"
/usr/bin/python3 -c 'import grpc, grpc_tools' 2>/dev/null || skip "python3-grpcio / python3-grpc-tools missing"
export GPUOP_NVML_LIBRARY=$2
sock=$T/kubelet.sock

start_standin() {
    bg standin /usr/bin/python3 "$S/tests/lib/kubelet_grpc.py" podresources "$sock" "$T/pods.json"
    standin_pid=$LAST
    wait_for -p "$standin_pid" 10 "the PodResources stand-in" grep -q ready "$T/standin.log"
}

# gen.py INVENTORY MODE: writes pods.json and expect.txt (lines "<uuid> <gi or -> pod ns ctr").
cat >"$T/gen.py" <<'PY'
import json, sys
inv = json.load(open(sys.argv[1])); mode = sys.argv[2]; out = sys.argv[3]
pods, expect = [], []
def pod(name, ns, ctr, res, ids):
    pods.append({"name": name, "namespace": ns, "containers": [{"name": ctr, "devices": [
        {"resource_name": res, "device_ids": ids}]}]})
whole = [g for g in inv["gpus"] if not g["mig"]["enabled"]]
migs = [(g, m) for g in inv["gpus"] if g["mig"]["enabled"] for m in g["mig"]["devices"]]
if mode == "whole":
    assert len(whole) >= 4, "need 4 whole GPUs"
    pod("train", "ml", "main", "nvidia.com/gpu", [whole[0]["uuid"]])
    expect.append((whole[0]["uuid"], "-", "train", "ml", "main"))
    # time-sliced replicas of one GPU held by two pods
    pod("share-a", "ml", "a", "nvidia.com/gpu", [whole[1]["uuid"] + "::0", whole[1]["uuid"] + "::3"])
    pod("share-b", "ml", "b", "nvidia.com/gpu", [whole[1]["uuid"] + "::1"])
    expect += [(whole[1]["uuid"], "-", "share-a", "ml", "a"), (whole[1]["uuid"], "-", "share-b", "ml", "b")]
    pod("custom", "ops", "c", "example.com/gpu", [whole[2]["uuid"]])  # in NVIDIA_RESOURCE_NAMES
    expect.append((whole[2]["uuid"], "-", "custom", "ops", "c"))
    pod("ignored", "ops", "x", "example.com/fpga", [whole[3]["uuid"]])  # not a GPU resource
else:
    assert len(migs) >= 2, "need 2 MIG devices"
    for k, (g, m) in enumerate(migs[:2]):
        pod("mig-%d" % k, "mig", "w", "nvidia.com/mig-" + m["profile"], [m["uuid"]])
        expect.append((g["uuid"], str(m["gi_id"]), "mig-%d" % k, "mig", "w"))
json.dump(pods, open(out + "/pods.json", "w"))
with open(out + "/expect.txt", "w") as f:
    for e in expect: f.write(" ".join(e) + "\n")
PY

# check.py METRICS EXPECT INVENTORY: every expected (gpu, gi) series carries exactly the expected
# pods, every other series has empty pod labels, labels come in dcgm-exporter's order.
cat >"$T/check.py" <<'PY'
import json, re, sys
metrics, expect, inv = open(sys.argv[1]).read(), open(sys.argv[2]).read().split("\n"), json.load(open(sys.argv[3]))
want = {}
for line in filter(None, expect):
    uuid, gi, p, ns, c = line.split()
    want.setdefault((uuid, gi), set()).add((p, ns, c))
got = {}
for line in metrics.splitlines():
    if not line.startswith("DCGM_FI_DEV_GPU_TEMP{"): continue
    labels = re.findall(r'([A-Za-z_]+)="([^"]*)"', line)
    names = [k for k, _ in labels]
    assert names[-3:] == ["pod", "namespace", "container"], names
    d = dict(labels)
    key = (d["UUID"], d.get("GPU_I_ID", "-"))
    if d["pod"]:
        got.setdefault(key, set()).add((d["pod"], d["namespace"], d["container"]))
    else:
        assert key not in want, ("expected pods missing on", key, line)
assert got == want, (got, want)
print("ok:", sum(len(v) for v in want.values()), "attributions")
PY

inv() { GPUOP_SIM_FLEET=$1 "$gpuop" inventory --json --no-topology >"$T/inv.json" 2>"$T/inv.err" || fail "inventory: $(cat "$T/inv.err")"; }

# 1. whole GPUs and replicas; long interval: scrapes must not call the kubelet.
export GPUOP_SIM_FLEET=$whole_fleet
inv "$whole_fleet"
/usr/bin/python3 "$T/gen.py" "$T/inv.json" whole "$T" || fail "gen"
start_standin
NVIDIA_RESOURCE_NAMES=example.com/gpu start_exporter -k --pod-resources-socket "$sock" -c 1h
scrape -o "$T/m" || fail "scrape"
/usr/bin/python3 "$T/check.py" "$T/m" "$T/expect.txt" "$T/inv.json" || fail "whole-GPU attribution"
for _ in $(seq 1 20); do scrape -o /dev/null || fail "scrape"; done
# Every kubelet call is a collection's: the one at start, and on a GPU with profiling fields the
# one a second later (exp_collector_thread) whenever the scrapes above ran, never one per
# scrape. Polled: the stand-in counts a call before its collection's snapshot is served.
collections() { scrape | sed -n 's/^gpuop_exporter_collections_total \([0-9]*\)$/\1/p'; }
calls_are_collections() { [ "$(wc -l <"$sock.calls")" = "$(collections)" ]; }
poll 5 calls_are_collections ||
    fail "scrapes called the kubelet: $(wc -l <"$sock.calls") calls, $(collections) collections"
[ "$(collections)" -le 2 ] || fail "$(collections) collections at a 1h interval (scrapes collect?)"
grep -q '^gpuop_exporter_pod_resources_up 1$' "$T/m" || fail "pod_resources_up"
stop_exporter

# 2. MIG devices; the map follows the kubelet on the collection clock.
export GPUOP_SIM_FLEET=$mig_fleet
inv "$mig_fleet"
/usr/bin/python3 "$T/gen.py" "$T/inv.json" mig "$T" || fail "gen mig"
start_exporter -k --pod-resources-socket "$sock" -c 100ms
# At a 100 ms interval each PodResources call has a 250 ms budget: a stand-in slowed by a loaded
# machine can miss one collection (attribution empty, by design), so wait for the next ones.
ok=0
for _ in $(seq 1 50); do
    scrape -o "$T/m" || fail "scrape"
    if /usr/bin/python3 "$T/check.py" "$T/m" "$T/expect.txt" "$T/inv.json" >"$T/check.out" 2>&1; then ok=1; break; fi
    sleep 0.1
done
[ $ok = 1 ] || fail "MIG attribution: $(tail -3 "$T/check.out")"
echo '[]' >"$T/pods.json"
: >"$T/expect.txt"
ok=0
for _ in $(seq 1 50); do
    scrape -o "$T/m" || fail "scrape"
    if /usr/bin/python3 "$T/check.py" "$T/m" "$T/expect.txt" "$T/inv.json" >/dev/null 2>&1; then ok=1; break; fi
    sleep 0.1
done
[ $ok = 1 ] || fail "pod map not refreshed after the pods went away"

# 3. the kubelet goes away: logged once, series keep coming, pod labels empty, not fatal.
kill "$standin_pid"
wait_exit "$standin_pid" 10
poll 10 sh -c "curl -sf http://127.0.0.1:$port/metrics | grep -q '^gpuop_exporter_pod_resources_up 0$'" ||
    fail "pod_resources_up did not drop"
sleep 0.5
kill -0 "$exporter_pid" || fail "exporter died without the kubelet"
# Logged once per outage, not per collection: a stand-in slowed by a loaded machine may have
# missed a collection earlier (part 2), logged as an outage and its recovery; the last outage,
# this one, is logged once while every collection since has failed.
outages=$(grep -c 'PodResources unavailable' "$T/exporter.log")
recoveries=$(grep -c 'PodResources reachable again' "$T/exporter.log")
[ "$outages" = $((recoveries + 1)) ] ||
    fail "not logged once per outage: $outages outages and $recoveries recoveries logged"
scrape | grep -q '^DCGM_FI_DEV_GPU_TEMP{' || fail "no GPU series without the kubelet"
stop_exporter
echo PASS
