#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `gpuop driver-manager remediate`, the executor of the operator's remediation requests, against
# kubesim and the simulated NVML (its nvidia-smi resets a GPU in the simulated fleet's state):
#  - a reset of a GPU with an uncorrectable ECC error: answered done, the error cleared;
#  - a reset of a GPU a process runs on: refused, the reason in request-failed, the GPU untouched;
#  - an unknown action and a GPU of another node: refused with the reason;
#  - killed (SIGKILL) after the reset and before its answer, then restarted (twice): answered
#    exactly once (one Event);
#  - a driver reload: the node marked and its driver pod evicted, then the next driver pod's
#    executor answers once the driver is ready;
#  - bad input: exit 2.
# It runs as the driver DaemonSet's ServiceAccount under the RBAC deploy/operands/driver.yaml
# ships (kubesim enforces it: its own node get/patch, evictions, Events).
set -euo pipefail
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
need_tools
need_built "$B/kubesim" "$B/libnvidia-ml.so.1" "$B/sim-image-bin/nvidia-smi" "$B/gpuop-sim"

start_kubesim --load "$S/sim/clusters/demo.yaml"
N=dgx-h100-1
NS=gpu-operator
V=550.127.05
ROOT=$T/root
DROOT=$ROOT/run/nvidia/driver
export GPUOP_NVML_LIBRARY=$B/libnvidia-ml.so.1 GPUOP_SIM_FLEET=$S/sim/fleets/dgx-h100.yaml
export GPUOP_SIM_STATE=$T/state PATH=$B/sim-image-bin:$PATH
mkdir -p "$GPUOP_SIM_STATE"

# the containerized driver loaded and ready; its root holds its own NVML and nvidia-smi (links to
# the simulated ones), which the executor must use: its own environment has neither (below)
mkdir -p "$DROOT/usr/lib/x86_64-linux-gnu" "$DROOT/usr/bin" "$ROOT/run/nvidia/validations" \
    "$ROOT/sys/module/nvidia"
echo $V >"$ROOT/sys/module/nvidia/version"
ln -s "$B/libnvidia-ml.so.1" "$DROOT/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.$V"
ln -s "libnvidia-ml.so.$V" "$DROOT/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"
ln -s "$B/sim-image-bin/nvidia-smi" "$DROOT/usr/bin/nvidia-smi"
: >"$ROOT/run/nvidia/validations/.driver-ctr-ready"

python3 - "$S/deploy/operands/driver.yaml" >"$T/driver-rbac.yaml" <<'PY'
import sys
docs = open(sys.argv[1]).read().replace("${NAMESPACE}", "gpu-operator").split("\n---\n")
print("\n---\n".join(d for d in docs if "kind: DaemonSet" not in d))
PY
$K apply -f "$T/driver-rbac.yaml" >/dev/null
sa_kubeconfig "$T/dm.kubeconfig" $NS nvidia-driver

mapfile -t UUIDS < <(nvidia-smi -L | sed -n 's/.*(UUID: \(GPU-[^)]*\)).*/\1/p')
[ ${#UUIDS[@]} -eq 8 ] || fail "nvidia-smi -L: ${#UUIDS[@]} GPUs: ${UUIDS[*]}"

ann() { $K get node $N -o "go-template={{index .metadata.annotations \"$1\"}}"; }
has_ann() { [ "$(ann "$1")" = "$2" ]; }
no_ann() { case "$(ann "$1")" in "" | "<no value>") return 0 ;; esac; return 1; }
failed_for() { ann remediation.gpuop.dev/request-failed | grep -q "^$1 "; }
request() { $K annotate node $N --overwrite "remediation.gpuop.dev/request=$1" >/dev/null; }
dbe_vol() { "$B/gpuop-sim" show | awk -v g="GPU $1 " 'index($0, g) == 1 {on = 1; next}
    /^GPU / {on = 0} on && /ECC errors/ {sub(/.*double-bit [0-9]+ \(volatile /, ""); sub(/\).*/, ""); print; exit}'; }
events_for() { # REASON ID: how many Events of REASON name request ID
    $K get events -n $NS -o json | python3 -c '
import json, sys
items = json.load(sys.stdin)["items"]
print(sum(e.get("count", 1) for e in items
          if e["reason"] == sys.argv[1] and ("request %s " % sys.argv[2]) in e["message"] + " "))' "$1" "$2"
}

POD=nvidia-driver-daemonset-a
executor() { # NAME [ENV=...]: the executor in the background, as driver pod $POD
    local name=$1
    shift
    bg "$name" env -u GPUOP_NVML_LIBRARY PATH=/usr/sbin:/usr/bin:/sbin:/bin \
        POD_NAMESPACE=$NS POD_NAME=$POD "$@" "$B/gpuop" driver-manager remediate \
        --node-name $N --kubeconfig "$T/dm.kubeconfig" --host-root "$ROOT" \
        --driver-install-dir "$DROOT" --validations-dir "$ROOT/run/nvidia/validations" --poll 200ms
}
stop_executor() {
    kill -TERM "$EX"
    wait_exit "$EX" 10
    [ "$RC" -eq 0 ] || fail "the executor exited $RC on SIGTERM"
}

# ---- bad input ------------------------------------------------------------------------------
RC=0
"$B/gpuop" driver-manager remediate --node-name $N --remediation-actions reset-gpu,reboot-node \
    >"$T/bad.log" 2>&1 || RC=$?
[ $RC -eq 2 ] || fail "bad --remediation-actions: exit $RC, want 2"
grep -q 'reboot-node.*not an action the driver manager takes' "$T/bad.log" || fail "bad: $(cat "$T/bad.log")"

executor ex1
EX=$LAST
wait_log "$T/ex1.log" "executing remediation requests"

# ---- a reset: done, the error cleared ---------------------------------------------------------
"$B/gpuop-sim" inject ecc --gpu 0 --dbe 1 >/dev/null
[ "$(dbe_vol 0)" -gt 0 ] || fail "the injected ECC error does not show: $("$B/gpuop-sim" show)"
request "reset-gpu 101 ${UUIDS[0]}"
wait_for -p "$EX" 10 "request 101 answered done" has_ann remediation.gpuop.dev/request-done 101
[ "$(dbe_vol 0)" = 0 ] || fail "GPU 0's volatile DBE count after the reset: $(dbe_vol 0)"
grep -q "resetting GPU.*gpu=${UUIDS[0]}" "$T/ex1.log" || fail "no reset logged"
# the driver root's nvidia-smi (the executor's PATH has none, its environment no NVML library)
grep -q "resetting GPU.*gpu=${UUIDS[0]}.* smi=$DROOT/usr/bin/nvidia-smi from=\"driver root\"" "$T/ex1.log" ||
    fail "the reset did not use the driver root's nvidia-smi: $(grep -m1 'resetting GPU' "$T/ex1.log")"
echo "reset done: ${UUIDS[0]}"

# ---- a GPU a process runs on: refused, untouched -------------------------------------------
"$B/gpuop-sim" inject ecc --gpu 1 --dbe 1 >/dev/null
bg cuda env NVIDIA_VISIBLE_DEVICES="${UUIDS[1]}" SIM_WORKLOAD_SECONDS=300 "$B/sim-image-bin/cuda-sample"
CUDA=$LAST
wait_log "$T/cuda.log" "CUDA kernel launch"
request "reset-gpu 102 ${UUIDS[1]}"
wait_for -p "$EX" 10 "request 102 refused" failed_for 102
failed=$(ann remediation.gpuop.dev/request-failed)
[ "$failed" = "102 GPU ${UUIDS[1]} has 1 process running on it: a reset needs none" ] ||
    fail "request-failed: \"$failed\""
[ "$(dbe_vol 1)" -gt 0 ] || fail "GPU 1 was reset with a process on it"
kill "$CUDA"
wait_exit "$CUDA" 10
echo "refused: $failed"

# ---- an unknown action, another node's GPU --------------------------------------------------
request "wipe-disk 103"
wait_for -p "$EX" 10 "request 103 refused" failed_for 103
case "$(ann remediation.gpuop.dev/request-failed)" in
"103 wipe-disk: not an action the driver manager takes"*) ;;
*) fail "unknown action: \"$(ann remediation.gpuop.dev/request-failed)\"" ;;
esac
request "reset-gpu 104 GPU-not-here"
wait_for -p "$EX" 10 "request 104 refused" has_ann remediation.gpuop.dev/request-failed \
    "104 GPU GPU-not-here is not on node $N"
stop_executor

# ---- killed between the reset and its answer: answered exactly once ---------------------------
"$B/gpuop-sim" inject ecc --gpu 2 --dbe 1 >/dev/null
request "reset-gpu 105 ${UUIDS[2]}"
executor ex-killed GPUOP_DRIVER_MANAGER_KILL_AFTER=executed
wait_exit "$LAST" 20
[ "$RC" -eq 137 ] || fail "the executor killed by the hook exited $RC"
[ "$(dbe_vol 2)" = 0 ] || fail "the killed executor had not reset GPU 2"
[ "$(ann remediation.gpuop.dev/request-done)" = 101 ] || fail "answered before the kill"
executor ex2
EX=$LAST
wait_for -p "$EX" 10 "request 105 answered after the restart" has_ann remediation.gpuop.dev/request-done 105
stop_executor
executor ex3
EX=$LAST
wait_log "$T/ex3.log" "executing remediation requests"
# a check that nothing happens: ten of its rounds with the answered request
sleep 2
stop_executor
[ "$(events_for GPURemediationRequestDone 105)" = 1 ] ||
    fail "request 105 answered $(events_for GPURemediationRequestDone 105) times"
grep -q "resetting GPU" "$T/ex3.log" && fail "the answered request was carried out again"
echo "killed and restarted: answered once"

# ---- a driver reload: this pod evicted, the next one answers --------------------------------
$K apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: $POD, namespace: $NS}
spec:
  nodeName: $N
  terminationGracePeriodSeconds: 0
  containers: [{name: c, image: nvcr.io/nvidia/driver:$V}]
YAML
executor ex4
EX=$LAST
request "reload-driver 106"
wait_for -p "$EX" 10 "the reload mark" has_ann gpuop.dev/driver-manager-reload "106 $POD"
gone() { ! $K get pod -n $NS $POD -o name >/dev/null 2>&1 ||
    [ -n "$($K get pod -n $NS $POD -o 'go-template={{.metadata.deletionTimestamp}}')" ]; }
wait_for -p "$EX" 10 "driver pod $POD evicted" gone
# a check that nothing happens: the evicted pod's executor does not answer
sleep 1
[ -z "$(ann remediation.gpuop.dev/request-done | grep 106)" ] || fail "answered before the new driver pod"
stop_executor
POD=nvidia-driver-daemonset-b
executor ex5
EX=$LAST
wait_for -p "$EX" 10 "request 106 answered by the next pod" has_ann remediation.gpuop.dev/request-done 106
wait_for -p "$EX" 10 "the reload mark removed" no_ann gpuop.dev/driver-manager-reload
stop_executor
echo "driver reload: done"
echo "PASS"
