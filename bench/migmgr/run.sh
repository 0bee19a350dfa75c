#!/usr/bin/env bash
# MIG benchmark on the simulated DGX H100 (8 GPUs, sim/fleets/dgx-h100.yaml):
#  - `gpuop mig-parted apply -c all-balanced` wall time (NVIDIA's default ConfigMap), from MIG
#    disabled (mode change + 32 instances) and from all-1g.10gb (56 instances destroyed, 32
#    created); ROUNDS runs each, median and max;
#  - `gpuop mig-manager` memory after it applied all-balanced then all-1g.10gb on that node
#    against kubesim (plain HTTP, and again over TLS as a real API server speaks), target
#    < 8 MiB: VmRSS and VmHWM; PSS (shared pages divided among the processes mapping them) and
#    the private part (/proc/PID/smaps_rollup), which a second process of the same image would
#    not share; the largest mappings (/proc/PID/smaps).
# Prints a Markdown section for bench/RESULTS.md. BUILD=build default.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
ROUNDS=${ROUNDS:-10}
gpuop=$PWD/$BUILD/gpuop
for f in "$gpuop" "$BUILD/libnvidia-ml.so.1" "$BUILD/kubesim"; do
    [ -e "$f" ] || { echo "missing $f (make build first)" >&2; exit 1; }
done
. scripts/tools-env.sh || { echo "$TOOLS_MISSING" >&2; exit 1; }
tmp=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill $p 2>/dev/null || true; done; rm -rf "$tmp"' EXIT
export GPUOP_NVML_LIBRARY=$PWD/$BUILD/libnvidia-ml.so.1 GPUOP_SIM_FLEET=$PWD/sim/fleets/dgx-h100.yaml
export GPUOP_SIM_STATE=$tmp/state
mkdir -p "$GPUOP_SIM_STATE"
cfg=$tmp/config.yaml
awk '/^  config.yaml: \|/ {on = 1; next} on { sub(/^    /, ""); print }' \
    tests/migparted/default-mig-parted-config.yaml >"$cfg"

ms() { date +%s%N; }
timed_apply() { # FROM: prints the ms of apply all-balanced after apply FROM
    "$gpuop" --log-level error mig-parted apply -f "$cfg" -c "$1"
    local t0 t1
    t0=$(ms)
    "$gpuop" --log-level error mig-parted apply -f "$cfg" -c all-balanced
    t1=$(ms)
    "$gpuop" mig-parted assert -f "$cfg" -c all-balanced 2>/dev/null || { echo "assert failed" >&2; exit 1; }
    echo $(((t1 - t0) / 1000)) # microseconds
}
stats() { # values (us): "median / max" in ms
    sort -n | awk '{v[NR] = $1} END {printf "%.1f / %.1f ms", v[int((NR + 1) / 2)] / 1000, v[NR] / 1000}'
}
from_disabled=$(for _ in $(seq "$ROUNDS"); do timed_apply all-disabled; done | stats)
from_1g=$(for _ in $(seq "$ROUNDS"); do timed_apply all-1g.10gb; done | stats)

# mig-manager memory against kubesim: measure [KUBESIM_FLAGS...] runs kubesim (a fresh one), the
# mig-manager through both changes, reads its memory into the variables below, and stops both.
mib() { echo "$(($1 / 1024)).$((($1 % 1024) * 10 / 1024))"; }
ms_mm=0 rss=0 hwm=0 anon=0 file=0 pss=0 priv=0 threads=0 top='' nlibs=0
measure() {
    local ks mm t0 t1 want
    rm -f "$tmp/kubeconfig"
    "$BUILD/kubesim" "$@" --load sim/clusters/demo.yaml --kubeconfig-out "$tmp/kubeconfig" \
        >"$tmp/kubesim.log" 2>&1 &
    ks=$!
    pids+=($ks)
    for _ in $(seq 100); do [ -s "$tmp/kubeconfig" ] && break; sleep 0.1; done
    export KUBECONFIG=$tmp/kubeconfig
    K="kubectl --request-timeout=10s"
    N=dgx-h100-1
    for _ in $(seq 50); do $K get node $N >/dev/null 2>&1 && break; sleep 0.2; done
    "$gpuop" --log-level error mig-parted apply -f "$cfg" -c all-disabled
    mkdir -p "$tmp/host"
    NODE_NAME=$N CONFIG_FILE=$cfg HOST_ROOT=$tmp/host MIG_MANAGER_INTERVAL=200ms "$gpuop" --log-level warn mig-manager \
        >"$tmp/mm.log" 2>&1 &
    mm=$!
    pids+=($mm)
    state() { $K get node $N -o go-template='{{with index .metadata.labels "nvidia.com/mig.config.state"}}{{.}}{{end}}'; }
    applied() { $K get node $N -o go-template='{{with index .metadata.annotations "gpuop.dev/mig-manager.applied"}}{{.}}{{end}}'; }
    t0=$(ms)
    for want in all-balanced all-1g.10gb; do
        $K label node $N --overwrite nvidia.com/mig.config=$want >/dev/null
        for _ in $(seq 300); do [ "$(applied)" = $want ] && [ "$(state)" = success ] && break; sleep 0.1; done
        [ "$(state)" = success ] || { echo "mig-manager did not apply $want: $(cat "$tmp/mm.log")" >&2; exit 1; }
    done
    t1=$(ms)
    ms_mm=$(((t1 - t0) / 1000000))
    rss=$(awk '/^VmRSS/ {print $2}' /proc/$mm/status)
    hwm=$(awk '/^VmHWM/ {print $2}' /proc/$mm/status)
    anon=$(awk '/^RssAnon/ {print $2}' /proc/$mm/status)
    file=$(awk '/^RssFile/ {print $2}' /proc/$mm/status)
    pss=$(awk '/^Pss:/ {print $2}' /proc/$mm/smaps_rollup)
    priv=$(awk '/^Private_(Clean|Dirty):/ {s += $2} END {print s}' /proc/$mm/smaps_rollup)
    threads=$(awk '/^Threads/ {print $2}' /proc/$mm/status)
    # RSS per mapped file (or [heap], [stack], [anon]), the largest first
    top=$(awk '/^[0-9a-f]+-[0-9a-f]+ / {name = NF >= 6 ? $6 : "[anon]"; sub(/.*\//, "", name)}
               /^Rss:/ {rss[name] += $2} END {for (n in rss) print rss[n], n}' /proc/$mm/smaps |
          sort -rn | head -n 8 | awk '{printf "%s%s %.1f", (NR > 1 ? ", " : ""), $2, $1 / 1024}')
    nlibs=$(awk '/^[0-9a-f]+-[0-9a-f]+ / && $6 ~ /\.so/ {print $6}' /proc/$mm/smaps | sort -u | wc -l)
    kill $mm $ks
    wait $mm $ks 2>/dev/null || true
}
# over TLS first (what a node's API server speaks), then plain HTTP (the figures of earlier runs)
measure --tls
tls_rss=$rss tls_hwm=$hwm tls_anon=$anon tls_top=$top
measure

cpu=$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')
echo "## MIG: mig-parted apply and mig-manager ($(date -u +%F), $(nproc) CPUs, $cpu, $(uname -r))"
echo
echo "Simulated DGX H100 (8 GPUs), NVIDIA's default ConfigMap, $ROUNDS runs each."
echo
echo "| measure | result | target |"
echo "|---|---|---|"
echo "| \`mig-parted apply -c all-balanced\` from MIG disabled (8 mode changes, 32 instances), median / max | $from_disabled | |"
echo "| \`mig-parted apply -c all-balanced\` from all-1g.10gb (56 destroyed, 32 created), median / max | $from_1g | |"
echo "| mig-manager: label to success for all-balanced then all-1g.10gb (kubesim, 200 ms polls) | $ms_mm ms | |"
echo "| mig-manager RSS / peak after both changes | $(mib $rss) / $(mib $hwm) MiB | < 8 MiB |"
echo "| of which anonymous (heap, stacks, libraries' data) / file-backed (the binary, $nlibs shared libraries) | $(mib $anon) / $(mib $file) MiB | |"
echo "| PSS / private (not shared with another process) | $(mib $pss) / $(mib $priv) MiB | |"
echo "| threads | $threads | |"
echo "| largest mappings, RSS MiB | $top | |"
echo "| over TLS (kubesim --tls, the kubeconfig's CA and token): RSS / peak; anonymous | $(mib $tls_rss) / $(mib $tls_hwm) MiB; $(mib $tls_anon) MiB | < 8 MiB |"
echo "| over TLS: largest mappings, RSS MiB | $tls_top | |"
echo
echo "Rerun: \`ninja -C build && BUILD=build bench/migmgr/run.sh\` (\`ROUNDS=N\`)."
