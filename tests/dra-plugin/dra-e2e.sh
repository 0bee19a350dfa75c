#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# `gpuop dra-plugin` end to end on a simulated DGX H100 node (kubesim, kubelet-sim, every pod a
# process): the simulated driver container loads the driver; the plugin publishes the node's
# ResourceSlice (eight gpu-N, owned by the Node), writes its CDI spec and registers through the
# plugin watcher;
#  - a pod whose claim asks for "an H100 with at least 80 GB" gets exactly the allocated GPU
#    (its /dev holds that GPU's node alone) and the CUDA sample passes on it; the claim is
#    unprepared when the pod ends;
#  - a pod asking `nvidia.com/gpu: 1` is served through the DeviceClass's extendedResourceName;
#  - a claim two pods share through MPS: its control daemon started from the driver root with
#    the claim's GPU and limits, both containers with the pipe folder and the limits, the daemon
#    started again after a plugin restart that took it, stopped and its folder gone on unprepare;
#  - a claim two pods share with time-slicing (Long): the GPU's compute time slice set while it
#    is prepared (nvidia-smi compute-policy -l), the default back after;
#  - the plugin restarted between prepare and unprepare reads its checkpoint and unprepares the
#    claim when the pod ends.
# Needs root (namespaces, mknod); skips (77) saying so otherwise.
set -uo pipefail
. "${GPUOP_SOURCE_ROOT:?}/tests/kubelet/lib.sh"
N=dra-h100-1
R=$T/roots/$N
CKPT=$R/var/lib/kubelet/plugins/gpu.nvidia.com/checkpoint.json
{ sim_cluster; sim_node $N "$S/sim/fleets/dgx-h100.yaml" "$R"; } >"$T/cluster.yaml"
start_kubesim --api-ip 198.18.255.36 --tls
start_kubelet_sim "$T/cluster.yaml" 1 --bridge kldrae0 --subnet 198.18.236.0/24

# the driver, as its container loads it (device nodes under /run/nvidia/driver)
cat >"$T/driver.yaml" <<EOF
$(sim_driver_ds default 570.86.15)
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.nvidia.com}
spec:
  selectors:
  - cel: {expression: "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"}
  extendedResourceName: nvidia.com/gpu
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: h100-80g, namespace: default}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: gpu.nvidia.com
          selectors:
          - cel: {expression: "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3' && device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('80G')) >= 0"}
EOF
k apply -f "$T/driver.yaml" >/dev/null || fail "apply the driver, the DeviceClass and the claim template"
wait_for 60 "the driver loaded" test -e "$R/sys/module/nvidia/version"
wait_for 30 "the driver's device nodes" test -e "$R/run/nvidia/driver/dev/nvidia7"

# the plugin, as its DaemonSet's pod runs it: the host (the node's root) under --host-root
plugin() {
    GPUOP_NVML_LIBRARY=$B/libnvidia-ml.so.1 GPUOP_SIM_FLEET=$S/sim/fleets/dgx-h100.yaml \
        GPUOP_SIM_STATE=$R/var/lib/gpuop-sim/nvml GPUOP_SIM_ROOT=$R \
        "$B/gpuop" dra-plugin --node-name $N --kubeconfig "$KUBECONFIG" --host-root "$R" \
        --driver-root /run/nvidia/driver --resync 1s --health-recovery-period 4s >>"$T/dra-plugin.log" 2>&1 &
    PLUGIN_PID=$!
    pids+=("$PLUGIN_PID")
}
log_file "$T/dra-plugin.log"
plugin
wait_for -p "$PLUGIN_PID" 30 "the plugin registered" grep -q "registered with the kubelet" "$T/dra-plugin.log"
slice=$N-gpu.nvidia.com-0
wait_for 20 "the slice" sh -c "$K get resourceslice $slice >/dev/null 2>&1"
devs=$(k get resourceslice $slice -o jsonpath='{range .spec.devices[*]}{.name} {end}')
[ "$devs" = "gpu-0 gpu-1 gpu-2 gpu-3 gpu-4 gpu-5 gpu-6 gpu-7 " ] || fail "the slice's devices: $devs"
owner=$(k get resourceslice $slice -o jsonpath='{.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].uid}')
[ "$owner" = "Node/$(k get node $N -o jsonpath='{.metadata.uid}')" ] || fail "the slice's owner: $owner"
spec=$R/var/run/cdi/k8s.gpu.nvidia.com-device.yaml
wait_for 20 "the plugin's CDI spec" test -s "$spec"
grep -q '^kind: k8s.gpu.nvidia.com/device$' "$spec" || fail "the spec's kind: $(head -3 "$spec")"
echo "ok: the plugin registered, published 8 GPUs owned by the Node, wrote its CDI spec"

# health: an XID the policy counts withdraws the GPU from the slice until the recovery period
# passes quietly; an application's XID (13) does not
sim() {
    GPUOP_SIM_FLEET=$S/sim/fleets/dgx-h100.yaml GPUOP_SIM_STATE=$R/var/lib/gpuop-sim/nvml \
        "$B/gpuop-sim" "$@" >/dev/null || fail "gpuop-sim $*"
}
devices() { k get resourceslice $slice -o jsonpath='{range .spec.devices[*]}{.name} {end}'; }
is_devices() { [ "$(devices)" = "$1" ]; }
sim inject xid --gpu 2 --code 13
wait_for 10 "the XID 13 seen" grep -q "GPU event ignored by the health policy gpu=2 xid=13" "$T/dra-plugin.log"
sim inject xid --gpu 3 --code 79
wait_for 10 "gpu-3 withdrawn" is_devices "gpu-0 gpu-1 gpu-2 gpu-4 gpu-5 gpu-6 gpu-7 "
wait_for 20 "gpu-3 back after the recovery period" is_devices "$devs"
echo "ok: XID 79 withdrew gpu-3 from the slice until the recovery period passed; XID 13 did not"

pod() { # name claim|extended [seconds]
    local claims='' resources='limits: {nvidia.com/gpu: 1}'
    if [ "$2" = claim ]; then
        claims='resourceClaims: [{name: gpu, resourceClaimTemplateName: h100-80g}]'
        resources='claims: [{name: gpu}]'
    fi
    cat >"$T/pod-$1.yaml" <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: default}
spec:
  restartPolicy: Never
  $claims
  containers:
  - name: cuda
    image: nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0
    env: [{name: SIM_WORKLOAD_SECONDS, value: "${3:-0}"}]
    command: [sh, -c, 'cd /dev && ls | grep "^nvidia[0-9]" | sort; cuda-sample']
    resources: {$resources}
EOF
    k apply -f "$T/pod-$1.yaml" >/dev/null
}
phase() { k get pod "$1" -o jsonpath='{.status.phase}'; }
# more claims unprepared than $n_unprep
more_unprepared() { [ "$(grep -c 'claim unprepared' "$T/dra-plugin.log")" -gt "$n_unprep" ]; }
is_phase() { [ "$(phase "$1")" = "$2" ]; }
# the device the claim of pod $1 got
allocated() {
    local c
    c=$(k get pod "$1" -o jsonpath='{.status.resourceClaimStatuses[0].resourceClaimName}')
    k get resourceclaim "$c" -o jsonpath='{.status.allocation.devices.results[0].device}'
}

pod train claim 2 || fail "pod train"
wait_for 30 "train runs" is_phase train Running
dev=$(allocated train)
case $dev in gpu-[0-7]) ;; *) fail "train's claim got \"$dev\"" ;; esac
wait_for 30 "train completes" is_phase train Succeeded
log=$(k logs train) || fail "logs of train"
grep -q "Test PASSED" <<<"$log" || fail "train's CUDA sample: $log"
[ "$(grep '^nvidia[0-9]' <<<"$log")" = "nvidia${dev#gpu-}" ] || fail "train's /dev for $dev: $log"
wait_for 20 "train's claim unprepared" grep -q "claim unprepared" "$T/dra-plugin.log"
echo "ok: a claim for an H100 with at least 80 GB: $dev alone in the container, the CUDA sample passed, unprepared"

pod legacy extended || fail "pod legacy"
wait_for 30 "legacy completes" is_phase legacy Succeeded
log=$(k logs legacy) || fail "logs of legacy"
grep -q "Test PASSED" <<<"$log" || fail "legacy's CUDA sample: $log"
[ "$(grep -c '^nvidia[0-9]' <<<"$log")" = 1 ] || fail "legacy's /dev: $log"
echo "ok: nvidia.com/gpu: 1 served by DRA through the DeviceClass's extended resource"

# a claim two pods share through MPS: the plugin starts the claim's control daemon from the
# driver root (the simulated nvidia-cuda-mps-control) with the claim's GPU alone and tells it the
# limits; both containers get the pipe folder and the limits; a restart of the plugin with the
# daemon gone starts it again; unprepared, the daemon quits and its folder goes
cat >"$T/mps.yaml" <<EOF
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: shared-mps, namespace: default}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.nvidia.com}
    config:
    - opaque:
        driver: gpu.nvidia.com
        parameters:
          apiVersion: resource.nvidia.com/v1beta1
          kind: GpuConfig
          sharing: {strategy: MPS, mpsConfig: {defaultActiveThreadPercentage: 50, defaultPinnedDeviceMemoryLimit: 1Gi}}
EOF
for p in mps-a mps-b; do
    cat >>"$T/mps.yaml" <<EOF
---
apiVersion: v1
kind: Pod
metadata: {name: $p, namespace: default}
spec:
  restartPolicy: Never
  resourceClaims: [{name: gpu, resourceClaimName: shared-mps}]
  containers:
  - name: cuda
    image: nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0
    env: [{name: SIM_WORKLOAD_SECONDS, value: "8"}]
    command: [sh, -c, 'echo "pipe=\$CUDA_MPS_PIPE_DIRECTORY pct=\$CUDA_MPS_ACTIVE_THREAD_PERCENTAGE limit=\$CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"; ls "\$CUDA_MPS_PIPE_DIRECTORY"; cuda-sample']
    resources: {claims: [{name: gpu}]}
EOF
done
n_unprep=$(grep -c "claim unprepared" "$T/dra-plugin.log")
k apply -f "$T/mps.yaml" >/dev/null || fail "apply the MPS claim and its pods"
wait_for 30 "mps-a runs" is_phase mps-a Running
wait_for 30 "mps-b runs" is_phase mps-b Running
muid=$(k get resourceclaim shared-mps -o jsonpath='{.metadata.uid}')
dev=$(k get resourceclaim shared-mps -o jsonpath='{.status.allocation.devices.results[0].device}')
uuid=$(k get resourceslice $slice -o jsonpath="{.spec.devices[?(@.name==\"$dev\")].attributes.uuid.string}")
mdir=$R/var/lib/kubelet/plugins/gpu.nvidia.com/mps/$muid
clog=$mdir/log/control.log
[ -s "$clog" ] || fail "no control daemon log in $mdir: $(ls -R "$mdir" 2>&1)"
grep -q "startup CUDA_VISIBLE_DEVICES=$uuid$" "$clog" || fail "the daemon's devices (want $uuid): $(cat "$clog")"
grep -q "command set_default_active_thread_percentage 50$" "$clog" || fail "the daemon's thread percentage: $(cat "$clog")"
grep -q "command set_default_device_pinned_mem_limit 0 1024M$" "$clog" || fail "the daemon's memory limit: $(cat "$clog")"
[ "$(grep -c startup "$clog")" = 1 ] || fail "the daemon started more than once for one claim: $(cat "$clog")"
for p in mps-a mps-b; do
    wait_for 20 "$p's environment" sh -c "$K logs $p 2>/dev/null | grep -q pipe="
    log=$(k logs $p) || fail "logs of $p"
    grep -q "^pipe=/tmp/nvidia-mps pct=50 limit=0=1024M$" <<<"$log" || fail "$p's MPS environment: $log"
    grep -qx "control" <<<"$log" || fail "$p does not see the daemon's pipe folder: $log"
done
# a restart with the daemon gone (a plugin container's restart takes its daemons along)
kill "$PLUGIN_PID"
wait_exit "$PLUGIN_PID" 10
[ "$RC" = 0 ] || fail "the plugin exited $RC on SIGTERM"
kill "$(cat "$mdir/pipe/nvidia-cuda-mps-control.pid")" || fail "no daemon to stop"
plugin
wait_for -p "$PLUGIN_PID" 20 "the daemon started again after the restart" sh -c "[ \$(grep -c startup '$clog') = 2 ]"
wait_for 10 "the limits told again" sh -c "[ \$(grep -c 'command set_default_active_thread_percentage 50' '$clog') = 2 ]"
wait_for 30 "mps-a completes" is_phase mps-a Succeeded
wait_for 30 "mps-b completes" is_phase mps-b Succeeded
k logs mps-a | grep -q "Test PASSED" || fail "mps-a's CUDA sample: $(k logs mps-a)"
k delete pod mps-a mps-b --grace-period=0 >/dev/null 2>&1
wait_for 20 "the MPS claim unprepared" more_unprepared
grep -q "MPS control daemon stopped claim=default/shared-mps" "$T/dra-plugin.log" || fail "the daemon was not stopped"
[ ! -e "$mdir" ] || fail "the claim's MPS folder stayed: $(ls -R "$mdir")"
echo "ok: a claim two pods share through MPS: its daemon on $dev alone with its limits, both containers with the pipe folder and limits, started again after a restart, stopped on unprepare"

# a claim two pods share with time-slicing (Long): the GPU's compute time slice set with the
# driver's nvidia-smi while they run, the default back once the claim is unprepared
smi() {
    GPUOP_NVML_LIBRARY=$B/libnvidia-ml.so.1 GPUOP_SIM_FLEET=$S/sim/fleets/dgx-h100.yaml \
        GPUOP_SIM_STATE=$R/var/lib/gpuop-sim/nvml GPUOP_SIM_ROOT=$R "$B/sim-image-bin/nvidia-smi" "$@"
}
cat >"$T/ts.yaml" <<EOF
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: shared-ts, namespace: default}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.nvidia.com}
    config:
    - opaque:
        driver: gpu.nvidia.com
        parameters:
          apiVersion: resource.nvidia.com/v1beta1
          kind: GpuConfig
          sharing: {strategy: TimeSlicing, timeSlicingConfig: {interval: Long}}
EOF
for p in ts-a ts-b; do
    cat >>"$T/ts.yaml" <<EOF
---
apiVersion: v1
kind: Pod
metadata: {name: $p, namespace: default}
spec:
  restartPolicy: Never
  resourceClaims: [{name: gpu, resourceClaimName: shared-ts}]
  containers:
  - name: cuda
    image: nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0
    env: [{name: SIM_WORKLOAD_SECONDS, value: "3"}]
    resources: {claims: [{name: gpu}]}
EOF
done
n_unprep=$(grep -c "claim unprepared" "$T/dra-plugin.log")
k apply -f "$T/ts.yaml" >/dev/null || fail "apply the time-sliced claim and its pods"
wait_for 30 "ts-a runs" is_phase ts-a Running
wait_for 30 "ts-b runs" is_phase ts-b Running
dev=$(k get resourceclaim shared-ts -o jsonpath='{.status.allocation.devices.results[0].device}')
uuid=$(k get resourceslice $slice -o jsonpath="{.spec.devices[?(@.name==\"$dev\")].attributes.uuid.string}")
[ -n "$uuid" ] || fail "the UUID of $dev"
policy=$(smi compute-policy -l -i "$uuid") || fail "nvidia-smi compute-policy -l: $policy"
grep -q "($uuid): timeslice LONG$" <<<"$policy" || fail "$dev's time slice while shared: $policy"
others=$(smi compute-policy -l | grep -vc "timeslice DEFAULT$")
[ "$others" = 1 ] || fail "GPUs other than $dev with a time slice set: $(smi compute-policy -l)"
grep -q "time slice set claim=default/shared-ts gpu=$uuid interval=Long" "$T/dra-plugin.log" ||
    fail "the plugin's log does not say it set the time slice"
wait_for 30 "ts-a completes" is_phase ts-a Succeeded
wait_for 30 "ts-b completes" is_phase ts-b Succeeded
k delete pod ts-a ts-b --grace-period=0 >/dev/null 2>&1
wait_for 20 "the shared claim unprepared" more_unprepared
policy=$(smi compute-policy -l -i "$uuid")
grep -q "($uuid): timeslice DEFAULT$" <<<"$policy" || fail "$dev's time slice after unprepare: $policy"
echo "ok: a claim two pods share with time-slicing: $dev at the Long time slice while prepared, the default back after"

# a restart between prepare and unprepare: the checkpoint carries the claim over
pod hold claim 6 || fail "pod hold"
wait_for 30 "hold runs" is_phase hold Running
claims() { python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["claims"]))' "$CKPT"; }
[ "$(claims)" = 1 ] || fail "hold's claim is not in the checkpoint: $(cat "$CKPT")"
kill "$PLUGIN_PID"
wait_exit "$PLUGIN_PID" 10
[ "$RC" = 0 ] || fail "the plugin exited $RC on SIGTERM"
n_unprep=$(grep -c "claim unprepared" "$T/dra-plugin.log")
plugin
wait_for -p "$PLUGIN_PID" 20 "the restarted plugin read its checkpoint" grep -q "checkpoint read.*claims=1" "$T/dra-plugin.log"
wait_for 30 "hold completes" is_phase hold Succeeded
wait_for 20 "hold's claim unprepared after the restart" more_unprepared
[ "$(claims)" = 0 ] || fail "the checkpoint keeps a claim: $(cat "$CKPT")"
echo "ok: a restart between prepare and unprepare: the checkpoint read back, the claim unprepared"

kill "$PLUGIN_PID"
wait_exit "$PLUGIN_PID" 10
[ "$RC" = 0 ] || fail "the plugin exited $RC on SIGTERM"
[ ! -e "$R/var/lib/kubelet/plugins_registry/gpu.nvidia.com-reg.sock" ] || fail "the registration socket stayed"
stop_kubelet_sim
echo "ok"
