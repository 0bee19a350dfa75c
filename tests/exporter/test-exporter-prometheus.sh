#!/bin/bash
# A real Prometheus server (Debian's prometheus package) scrapes `gpuop exporter` on the
# simulated DGX H100; its HTTP API must return DCGM_FI_DEV_GPU_TEMP for all 8 GPUs with
# dcgm-exporter's labels. Prometheus 2.x asks for OpenMetrics first, so this also checks that
# format against a real parser.
# $1: build/gpuop  $2: simulated libnvidia-ml.so.1  $3: sim/fleets/dgx-h100.yaml
set -u
gpuop=$1
. "$(dirname "$0")/lib.sh"
[ -x /usr/bin/prometheus ] || skip "prometheus not installed (Debian package prometheus)"
[ -f "$2" ] || skip "simulated libnvidia-ml not built: $2"
[ -f "$3" ] || fail "fleet missing: $3"
export GPUOP_NVML_LIBRARY=$2 GPUOP_SIM_FLEET=$3

GPUOP_NVML_LIBRARY=$2 "$gpuop" inventory --json --no-topology >"$T/inv.json" 2>"$T/inv.err" ||
    fail "gpuop inventory: $(cat "$T/inv.err")"
NODE_NAME=dgx-7 start_exporter -c 200ms

pport=$(free_port)
cat >"$T/prometheus.yml" <<YML
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: gpuop-exporter
    static_configs:
      - targets: ['127.0.0.1:$port']
YML
/usr/bin/prometheus --config.file="$T/prometheus.yml" --storage.tsdb.path="$T/data" \
    --web.listen-address="127.0.0.1:$pport" --log.level=warn >"$T/prom.log" 2>&1 &
prom_pid=$!
pids+=("$prom_pid")

api() { curl -sf --max-time 5 "http://127.0.0.1:$pport/api/v1/query" --data-urlencode "query=$1"; }
have8() { api 'count(DCGM_FI_DEV_GPU_TEMP)' 2>/dev/null | /usr/bin/python3 2>/dev/null -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; sys.exit(0 if r and r[0]["value"][1]=="8" else 1)'; }
poll -p "$prom_pid" 30 have8 || fail "Prometheus has no 8 DCGM_FI_DEV_GPU_TEMP series: $(api 'up'; tail -5 "$T/prom.log")"

api 'DCGM_FI_DEV_GPU_TEMP' >"$T/temp.json" || fail "query"
api 'up{job="gpuop-exporter"}' >"$T/up.json" || fail "query up"
/usr/bin/python3 - "$T/temp.json" "$T/inv.json" "$T/up.json" <<'PY' || fail "labels check failed"
import json, sys
res = json.load(open(sys.argv[1]))["data"]["result"]
inv = json.load(open(sys.argv[2]))
up = json.load(open(sys.argv[3]))["data"]["result"]
assert up and up[0]["value"][1] == "1", up
assert len(res) == 8, len(res)
by_gpu = {r["metric"]["gpu"]: r for r in res}
assert sorted(by_gpu) == [str(i) for i in range(8)], sorted(by_gpu)
want = {"__name__", "gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname",
        "DCGM_FI_DRIVER_VERSION", "instance", "job"}
for g in inv["gpus"]:
    i = str(g["index"])
    m = by_gpu[i]["metric"]
    assert set(m) == want, (i, sorted(m))
    assert m["UUID"] == g["uuid"], (m["UUID"], g["uuid"])
    assert m["device"] == "nvidia" + i, m
    assert m["modelName"] == g["name"] and "H100" in m["modelName"], m
    assert m["pci_bus_id"].lower() == g["bus_id"].lower(), (m, g["bus_id"])
    assert m["Hostname"] == "dgx-7", m
    assert m["DCGM_FI_DRIVER_VERSION"] == inv["driver_version"], m
    v = float(by_gpu[i]["value"][1])
    assert 10 <= v <= 110, v
print("ok: 8 GPUs with dcgm-exporter labels")
PY
# The exporter's own metrics went through too.
api 'gpuop_exporter_scrapes_total' | grep -q '"result":\[{' || fail "gpuop_exporter_scrapes_total missing"
api 'gpuop_exporter_collections_total' | grep -q '"result":\[{' || fail "gpuop_exporter_collections_total missing"
stop_exporter
echo PASS
