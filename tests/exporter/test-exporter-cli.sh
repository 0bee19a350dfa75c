#!/bin/bash
# `gpuop exporter` flags, environment, bad input, and serving, on the minimal libnvidia-ml
# (two GPUs; no events): every bad input is one clear line and a documented exit code.
# $1: build/gpuop  $2: the minimal libnvidia-ml (tests/nvml/fake-nvml-min.c)
set -u
gpuop=$1
export GPUOP_NVML_LIBRARY=$2
. "$(dirname "$0")/lib.sh"
unset DCGM_EXPORTER_LISTEN DCGM_EXPORTER_COLLECTORS DCGM_EXPORTER_INTERVAL DCGM_EXPORTER_KUBERNETES
unset NODE_NAME NVIDIA_RESOURCE_NAMES DCGM_POD_RESOURCES_KUBELET_SOCKET

# --help documents every flag and variable.
"$gpuop" exporter --help >"$T/help" 2>&1 || fail "--help exit $?"
for w in --listen --collectors --collect-interval --kubernetes --pod-resources-socket \
    --lowercase-hostname --no-hostname --once --format --xid-count-window-size DCGM_EXPORTER_LISTEN \
    DCGM_EXPORTER_XID_COUNT_WINDOW_SIZE --clock-events-count-window-size \
    DCGM_EXPORTER_CLOCK_EVENTS_COUNT_WINDOW_SIZE \
    DCGM_EXPORTER_COLLECTORS DCGM_EXPORTER_INTERVAL DCGM_EXPORTER_KUBERNETES \
    DCGM_POD_RESOURCES_KUBELET_SOCKET NODE_NAME NVIDIA_RESOURCE_NAMES GPUOP_NVML_LIBRARY \
    ':9400' 30s /var/lib/kubelet/pod-resources/kubelet.sock /metrics /health; do
    grep -q -- "$w" "$T/help" || fail "--help does not mention $w"
done

# expect_error EXIT_CODE SUBSTRING CMD...: one line on stderr holding SUBSTRING.
expect_error() {
    want_rc=$1 want=$2
    shift 2
    "$@" >"$T/out" 2>"$T/err"
    rc=$?
    [ $rc = "$want_rc" ] || fail "$*: exit $rc, want $want_rc: $(cat "$T/err")"
    grep -v ' warn  exporter field not supported' "$T/err" >"$T/err1"
    [ "$(wc -l <"$T/err1")" = 1 ] || fail "$*: want one error line, got: $(cat "$T/err1")"
    grep -qF -- "$want" "$T/err1" || fail "$*: error lacks \"$want\": $(cat "$T/err1")"
}
expect_error 2 '--collect-interval "soon"' "$gpuop" exporter --once -c soon
expect_error 2 '--collect-interval "0"' "$gpuop" exporter --once -c 0
expect_error 2 'DCGM_EXPORTER_INTERVAL="1s"' env DCGM_EXPORTER_INTERVAL=1s "$gpuop" exporter --once
expect_error 2 'DCGM_EXPORTER_KUBERNETES="maybe"' env DCGM_EXPORTER_KUBERNETES=maybe "$gpuop" exporter --once
expect_error 2 '--xid-count-window-size "5m"' "$gpuop" exporter --once --xid-count-window-size 5m
expect_error 2 '--clock-events-count-window-size "-1"' "$gpuop" exporter --once --clock-events-count-window-size -1
expect_error 2 'DCGM_EXPORTER_CLOCK_EVENTS_COUNT_WINDOW_SIZE="x"' env DCGM_EXPORTER_CLOCK_EVENTS_COUNT_WINDOW_SIZE=x "$gpuop" exporter --once
expect_error 2 '--format "xml"' "$gpuop" exporter --once --format xml
expect_error 2 'unexpected argument "extra"' "$gpuop" exporter --once extra
expect_error 2 '/nonexistent.csv' "$gpuop" exporter --once -f /nonexistent.csv
printf '# ok\nDCGM_FI_DEV_GPU_TEMP, gauge, t\nDCGM_FI_DEV_POWER_USAGE gauge\n' >"$T/bad.csv"
expect_error 2 "$T/bad.csv:3: expected" "$gpuop" exporter --once -f "$T/bad.csv"
printf 'DCGM_FI_DEV_GPU_TEMPERATURE, gauge, t\n' >"$T/unknown.csv"
expect_error 2 'unknown field "DCGM_FI_DEV_GPU_TEMPERATURE"; known fields: DCGM_FI_DEV_SM_CLOCK' \
    "$gpuop" exporter --once -f "$T/unknown.csv"
# The whole list, to the last known field.
for f in DCGM_FI_DEV_GPU_TEMP DCGM_EXP_CLOCK_EVENTS_COUNT DCGM_FI_DRIVER_VERSION \
    DCGM_FI_PROF_DRAM_ACTIVE DCGM_FI_DEV_VBIOS_VERSION; do
    grep -Eq "known fields:.* $f(,|\$)" "$T/err1" || fail "known fields lack $f: $(cat "$T/err1")"
done
expect_error 2 "$T/unknown.csv:1" env DCGM_EXPORTER_COLLECTORS="$T/unknown.csv" "$gpuop" exporter --once
mkfifo "$T/fifo.csv"
expect_error 2 "\"$T/fifo.csv\": not a regular file (a FIFO)" "$gpuop" exporter --once -f "$T/fifo.csv"
expect_error 1 'listen address "nonsense"' "$gpuop" exporter -a nonsense
expect_error 1 'libnvidia-ml' env GPUOP_NVML_LIBRARY=/nonexistent/libnvidia-ml.so.1 "$gpuop" exporter --once

# The default set: the unsupported fields are named once at start and never exported.
NODE_NAME=node-7 "$gpuop" exporter --once >"$T/m" 2>"$T/err" || fail "--once exit $?"
for f in DCGM_FI_PROF_GR_ENGINE_ACTIVE DCGM_FI_PROF_PIPE_TENSOR_ACTIVE DCGM_FI_PROF_DRAM_ACTIVE \
    DCGM_FI_PROF_PCIE_TX_BYTES DCGM_FI_PROF_PCIE_RX_BYTES DCGM_FI_DEV_VGPU_LICENSE_STATUS; do
    [ "$(grep -c "not supported.*field=$f " "$T/err")" = 1 ] || fail "$f not logged once: $(cat "$T/err")"
    ! grep -q "$f" "$T/m" || fail "$f exported"
done
# This library has no GPU Performance Monitoring: the profiling fields' reason names the driver.
grep -q 'field=DCGM_FI_PROF_DRAM_ACTIVE reason="gpu 0-1: the driver (418.40.04) offers no GPU Performance Monitoring' "$T/err" ||
    fail "profiling fields' reason: $(grep PROF_DRAM "$T/err")"
grep -q '^DCGM_FI_DEV_XID_ERRORS{gpu="1",UUID="GPU-00000000-0000-0000-0000-000000000001",pci_bus_id="",device="nvidia1",modelName="Tesla V100-SXM2-16GB",Hostname="node-7",DCGM_FI_DRIVER_VERSION="418.40.04"} 0$' "$T/m" ||
    fail "labels: $(grep XID_ERRORS "$T/m")"
grep -q '^gpuop_exporter_gpus 2$' "$T/m" || fail "gpu count"
# No pod labels without --kubernetes; lower-case host label and no host label on request.
! grep -q 'pod=' "$T/m" || fail "pod labels without --kubernetes"
NODE_NAME=node-7 "$gpuop" exporter --once --lowercase-hostname 2>/dev/null | grep -q 'hostname="node-7",DCGM_FI_DRIVER_VERSION' ||
    fail "--lowercase-hostname"
"$gpuop" exporter --once -n 2>/dev/null | grep -qi 'hostname=' && fail "-n kept a host label"
"$gpuop" exporter --once --format openmetrics 2>/dev/null | tail -1 | grep -qx '# EOF' ||
    fail "--format openmetrics lacks # EOF"

# Serving: env listen address is overridden by the flag; short interval; unreachable kubelet.
printf 'DCGM_FI_DEV_XID_ERRORS, gauge, x\nDCGM_FI_DRIVER_VERSION, label, d\n' >"$T/c.csv"
DCGM_EXPORTER_LISTEN=bogus DCGM_EXPORTER_COLLECTORS="$T/c.csv" DCGM_EXPORTER_KUBERNETES=true \
    DCGM_EXPORTER_INTERVAL=50 start_exporter --pod-resources-socket "$T/missing.sock"
curl -sf "http://127.0.0.1:$port/health" | grep -qx OK || fail "/health"
[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/nope")" = 404 ] || fail "404"
[ "$(curl -s -o /dev/null -w '%{http_code}' -X POST "http://127.0.0.1:$port/metrics")" = 405 ] || fail "405"
scrape -D "$T/h" -o "$T/m1" || fail "scrape"
grep -qi '^Content-Type: text/plain; version=0.0.4; charset=utf-8' "$T/h" || fail "content type: $(cat "$T/h")"
grep -q 'pod="",namespace="",container=""} 0$' "$T/m1" || fail "empty pod labels: $(grep XID "$T/m1")"
grep -q '^gpuop_exporter_pod_resources_up 0$' "$T/m1" || fail "pod_resources_up"
scrape -H 'Accept: application/openmetrics-text;version=1.0.0,text/plain;q=0.5' -D "$T/h" -o "$T/m2" || fail "OM scrape"
grep -qi '^Content-Type: application/openmetrics-text; version=1.0.0; charset=utf-8' "$T/h" || fail "OM content type"
tail -1 "$T/m2" | grep -qx '# EOF' || fail "OM # EOF"
grep -q '^gpuop_exporter_scrapes_total 2$' "$T/m2" || fail "scrape count: $(grep scrapes "$T/m2")"
c1=$(metric_value gpuop_exporter_errors_total podresources "$T/m1")
sleep 0.4
scrape -o "$T/m3" || fail "scrape 3"
c3=$(metric_value gpuop_exporter_errors_total podresources "$T/m3")
[ "$c3" -gt "$c1" ] || fail "kubelet not retried each collection: $c1 -> $c3"
n1=$(awk '/^gpuop_exporter_collections_total/ {print $2}' "$T/m1")
n3=$(awk '/^gpuop_exporter_collections_total/ {print $2}' "$T/m3")
[ "$n3" -ge $((n1 + 3)) ] || fail "collections did not advance at 50ms: $n1 -> $n3"
[ "$(grep -c 'PodResources unavailable' "$T/exporter.log")" = 1 ] ||
    fail "unreachable kubelet not logged exactly once: $(cat "$T/exporter.log")"
# Concurrent scrapers while snapshots are swapped every 50 ms (under ASan in CI this checks the
# snapshot reference counting): every answer is a 200.
if command -v wrk >/dev/null; then
    wrk -t2 -c16 -d1s "http://127.0.0.1:$port/metrics" >"$T/wrk" 2>&1 || fail "wrk: $(cat "$T/wrk")"
    grep -q 'requests in' "$T/wrk" || fail "wrk: $(cat "$T/wrk")"
    ! grep -q -e 'Non-2xx' -e 'Socket errors' "$T/wrk" || fail "errors under load: $(cat "$T/wrk")"
fi
kill -0 "$exporter_pid" || fail "exporter died under load"
# No gpuop process maps libcurl and its dependency tree (OpenSSL, Kerberos, LDAP, SSH: ~3 MiB
# resident): src/edge/kube speaks HTTP itself over the GnuTLS libmicrohttpd maps anyway.
! grep -q -e 'libcurl' -e 'libcrypto' -e 'libkrb5' "/proc/$exporter_pid/maps" ||
    fail "the exporter maps libcurl or its dependencies: $(grep -o -e 'libcurl.*' -e 'libcrypto.*' -e 'libkrb5.*' "/proc/$exporter_pid/maps" | sort -u)"
stop_exporter
echo PASS
