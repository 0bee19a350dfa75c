#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# `gpuop dra-plugin --partitionable-devices` end to end on a simulated DGX A100 80GB node
# (kubesim, kubelet-sim, every pod a process). GPU 4 is laid out as one 3g.40gb (mig-parted),
# so its free placements are published as MIG devices made on demand, within its counters;
#  - a pod on GPU 4's existing 3g.40gb runs a job throughout;
#  - a pod whose claim asks a 1g.10gb on GPU 4 gets a slice the plugin makes at prepare (NVML
#    lists it, the CDI spec names it, the container sees it and the CUDA sample passes), and
#    destroys at unprepare, while the 3g.40gb's pod keeps running, never restarted;
#  - a creation NVML fails fails the prepare; the kubelet's next prepare makes the slice;
#  - the plugin stopped after a slice was made and restarted before the pod ends reads its
#    checkpoint, makes nothing twice, and destroys the slice when the pod ends.
# Needs root (namespaces, mknod); skips (77) saying so otherwise.
set -uo pipefail
. "${GPUOP_SOURCE_ROOT:?}/tests/kubelet/lib.sh"
N=dra-a100-1
R=$T/roots/$N
FLEET=$S/sim/fleets/dgx-a100-80gb-mig.yaml
CKPT=$R/var/lib/kubelet/plugins/gpu.nvidia.com/checkpoint.json
{ sim_cluster; sim_node $N "$FLEET" "$R"; } >"$T/cluster.yaml"
start_kubesim --api-ip 198.18.255.37 --tls
start_kubelet_sim "$T/cluster.yaml" 1 --bridge kldram0 --subnet 198.18.237.0/24

cat >"$T/driver.yaml" <<EOF
$(sim_driver_ds default 550.90.07)
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: mig.nvidia.com}
spec:
  selectors:
  - cel: {expression: "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'"}
EOF
k apply -f "$T/driver.yaml" >/dev/null || fail "apply the driver and the DeviceClass"
wait_for 60 "the driver loaded" test -e "$R/sys/module/nvidia/version"
wait_for 30 "the driver's device nodes" test -e "$R/run/nvidia/driver/dev/nvidia7"

simenv() {
    GPUOP_NVML_LIBRARY=$B/libnvidia-ml.so.1 GPUOP_SIM_FLEET=$FLEET \
        GPUOP_SIM_STATE=$R/var/lib/gpuop-sim/nvml GPUOP_SIM_ROOT=$R "$@"
}
# GPU 4: one 3g.40gb (mig-parted keeps the one at placement 4), slices 0-3 free
cat >"$T/layout.yaml" <<EOF
version: v1
mig-configs:
  dra:
  - devices: [4]
    mig-enabled: true
    mig-devices: {"3g.40gb": 1}
EOF
simenv "$B/gpuop" mig-parted apply -f "$T/layout.yaml" -c dra >>"$T/mig-parted.log" 2>&1 ||
    fail "mig-parted apply: $(cat "$T/mig-parted.log")"
# GPU 4's MIG devices as "<profile>@<placement start>", in NVML's order
gpu4() {
    simenv "$B/gpuop" inventory --json 2>/dev/null | python3 -c '
import json, sys
g = [g for g in json.load(sys.stdin)["gpus"] if g["index"] == 4][0]
print(" ".join(sorted("%s@%d" % (m["profile"], m["placement"]["start"]) for m in g["mig"].get("devices", []))))'
}
layout=$(gpu4)
[ "$layout" = "3g.40gb@4" ] || fail "GPU 4's layout: $layout"

plugin() {
    GPUOP_NVML_LIBRARY=$B/libnvidia-ml.so.1 GPUOP_SIM_FLEET=$FLEET \
        GPUOP_SIM_STATE=$R/var/lib/gpuop-sim/nvml GPUOP_SIM_ROOT=$R \
        "$B/gpuop" dra-plugin --node-name $N --kubeconfig "$KUBECONFIG" --host-root "$R" \
            --driver-root /run/nvidia/driver --resync 1s --partitionable-devices \
            >>"$T/dra-plugin.log" 2>&1 &
    PLUGIN_PID=$!
    pids+=("$PLUGIN_PID")
}
log_file "$T/dra-plugin.log"
plugin
wait_for -p "$PLUGIN_PID" 30 "the plugin registered" grep -q "registered with the kubelet" "$T/dra-plugin.log"
devices() {
    k get resourceslices -o jsonpath='{range .items[*]}{range .spec.devices[*]}{.name} {end}{end}' | tr ' ' '\n' | grep '^gpu-4-' | sort | tr '\n' ' '
}
has_device() { devices | grep -qw -- "$1"; }
wait_for 20 "GPU 4's free placements published" has_device gpu-4-mig-1g10gb-19-0
for d in gpu-4-mig-3g40gb-9-4 gpu-4-mig-1g10gb-19-1 gpu-4-mig-1g10gb-19-3 gpu-4-mig-3g40gb-9-0 gpu-4-mig-2g20gb-14-0 gpu-4-mig-2g20gb-14-2; do
    has_device $d || fail "$d is not published: $(devices)"
done
has_device gpu-4-mig-1g10gb-19-4 && fail "a placement inside the existing 3g.40gb is published: $(devices)"
p3g=$(k get resourceslices -o json | python3 -c '
import json, sys
for s in json.load(sys.stdin)["items"]:
    for d in s["spec"].get("devices", []):
        if d["name"] == "gpu-4-mig-3g40gb-9-4":
            print(d["attributes"]["uuid"]["string"])')
parent=$(k get resourceslices -o json | python3 -c '
import json, sys
for s in json.load(sys.stdin)["items"]:
    for d in s["spec"].get("devices", []):
        if d["name"] == "gpu-4-mig-3g40gb-9-4":
            print(d["attributes"]["parentUUID"]["string"])')
[ -n "$p3g" ] && [ -n "$parent" ] || fail "GPU 4's 3g.40gb has no UUID in the slice"
echo "ok: GPU 4's free placements published beside its 3g.40gb ($p3g)"

pod() { # name cel seconds
    cat >"$T/pod-$1.yaml" <<EOF
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: $1, namespace: default}
spec:
  spec:
    devices:
      requests:
      - name: mig
        exactly:
          deviceClassName: mig.nvidia.com
          selectors:
          - cel: {expression: "$2"}
---
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: default}
spec:
  restartPolicy: Never
  resourceClaims: [{name: mig, resourceClaimTemplateName: $1}]
  containers:
  - name: cuda
    image: nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0
    env: [{name: SIM_WORKLOAD_SECONDS, value: "$3"}]
    command: [sh, -c, 'cuda-sample']
    resources: {claims: [{name: mig}]}
EOF
    k apply -f "$T/pod-$1.yaml" >/dev/null
}
phase() { k get pod "$1" -o jsonpath='{.status.phase}'; }
is_phase() { [ "$(phase "$1")" = "$2" ]; }
started() { k get pod "$1" -o jsonpath='{.status.containerStatuses[0].restartCount}/{.status.containerStatuses[0].state.running.startedAt}'; }
allocated() {
    local c
    c=$(k get pod "$1" -o jsonpath='{.status.resourceClaimStatuses[0].resourceClaimName}')
    k get resourceclaim "$c" -o jsonpath='{.status.allocation.devices.results[0].device}'
}

# a slice made on demand has no uuid yet: has() keeps the selector defined on every device
pod keeper "has(device.attributes['gpu.nvidia.com'].uuid) && device.attributes['gpu.nvidia.com'].uuid == '$p3g'" 60 || fail "pod keeper"
wait_for 30 "keeper runs" is_phase keeper Running
[ "$(allocated keeper)" = gpu-4-mig-3g40gb-9-4 ] || fail "keeper got $(allocated keeper)"
keeper_start=$(started keeper)

one_g="device.attributes['gpu.nvidia.com'].profile == '1g.10gb' && device.attributes['gpu.nvidia.com'].parentUUID == '$parent'"
pod burst "$one_g" 3 || fail "pod burst"
wait_for 30 "burst runs" is_phase burst Running
dev=$(allocated burst)
case $dev in gpu-4-mig-1g10gb-19-[0-3]) ;; *) fail "burst's claim got \"$dev\"" ;; esac
start=${dev##*-}
grep -q "MIG slice made.*device=$dev gpu=4" "$T/dra-plugin.log" || fail "no slice made for $dev"
layout=$(gpu4)
[ "$layout" = "1g.10gb@$start 3g.40gb@4" ] || fail "GPU 4 while burst runs: $layout"
muuid=$(simenv "$B/gpuop" inventory --json | python3 -c '
import json, sys
g = [g for g in json.load(sys.stdin)["gpus"] if g["index"] == 4][0]
print([m["uuid"] for m in g["mig"]["devices"] if m["profile"] == "1g.10gb"][0])')
grep -q "$muuid" "$R/var/run/cdi/k8s.gpu.nvidia.com-device.yaml" || fail "the CDI spec does not name $muuid"
wait_for 30 "burst completes" is_phase burst Succeeded
log=$(k logs burst) || fail "logs of burst"
grep -q "Test PASSED" <<<"$log" || fail "burst's CUDA sample: $log"
is_gone() { [ "$(gpu4)" = "3g.40gb@4" ]; }
wait_for 20 "burst's slice destroyed" is_gone
grep -q "MIG slice destroyed.*device=$dev gpu=4" "$T/dra-plugin.log" || fail "no slice destroyed for $dev"
is_phase keeper Running || fail "keeper is $(phase keeper)"
[ "$(started keeper)" = "$keeper_start" ] || fail "keeper restarted: $(started keeper), was $keeper_start"
echo "ok: a 1g.10gb made on demand at placement $start for burst (CUDA sample passed), destroyed when it ended; keeper ran on"

# a creation NVML fails: the prepare fails saying so, the claim stays started in the checkpoint,
# and the kubelet's next prepare makes the slice
simenv "$B/gpuop-sim" inject mig-fail --gpu 4 >/dev/null || fail "gpuop-sim inject mig-fail"
pod retry "$one_g" 1 || fail "pod retry"
wait_for 30 "retry's first prepare failed" grep -q "claim not prepared claim=default/retry-mig-" "$T/dra-plugin.log"
wait_for 40 "retry completes" is_phase retry Succeeded
grep -q "MIG slice made.*claim=default/retry-mig-" "$T/dra-plugin.log" || fail "no slice made for retry"
wait_for 20 "retry's slice destroyed" is_gone
echo "ok: a MIG creation NVML failed was made on the kubelet's next prepare, and destroyed"

# a restart after the slice was made: the checkpoint holds it, nothing is made twice
pod hold "$one_g" 8 || fail "pod hold"
wait_for 30 "hold runs" is_phase hold Running
dev=$(allocated hold)
made=$(grep -c "MIG slice made" "$T/dra-plugin.log")
kill "$PLUGIN_PID"
wait_exit "$PLUGIN_PID" 10
[ "$RC" = 0 ] || fail "the plugin exited $RC on SIGTERM"
# keeper's claim, and hold's with the slice it made
python3 -c '
import json, sys
c = json.load(open(sys.argv[1]))["claims"]
assert len(c) == 2, c
d = [c for c in c if c["name"].startswith("hold-")][0]["devices"][0]
assert d["created"] and d["device"] == sys.argv[2], d' "$CKPT" "$dev" ||
    fail "hold's claim is not in the checkpoint: $(cat "$CKPT")"
plugin
wait_for -p "$PLUGIN_PID" 20 "the restarted plugin read its checkpoint" grep -q "checkpoint read.*claims=2" "$T/dra-plugin.log"
wait_for 30 "hold completes" is_phase hold Succeeded
wait_for 20 "hold's slice destroyed after the restart" is_gone
[ "$(grep -c "MIG slice made" "$T/dra-plugin.log")" = "$made" ] || fail "a slice was made again after the restart"
python3 -c 'import json,sys; c=json.load(open(sys.argv[1]))["claims"]; assert len(c)==1, c' "$CKPT" ||
    fail "the checkpoint keeps hold's claim: $(cat "$CKPT")"
is_phase keeper Running || fail "keeper is $(phase keeper)"
[ "$(started keeper)" = "$keeper_start" ] || fail "keeper restarted"
echo "ok: a restart between prepare and unprepare: $dev made once, destroyed after the restart"

kill "$PLUGIN_PID"
wait_exit "$PLUGIN_PID" 10
[ "$RC" = 0 ] || fail "the plugin exited $RC on SIGTERM"
stop_kubelet_sim
echo "ok"
