#!/bin/bash
# ResourceQuota through the real kubectl: `kubectl create quota` on GPUs and MIG slices, a pod
# over the quota refused with the API server's message, `kubectl describe quota` showing hard
# and used, and a finished pod releasing its GPUs.
set -u
. "${GPUOP_SOURCE_ROOT:?}/tests/lib/test-lib.sh"
need_tools
k() { "$KUBECTL" --kubeconfig "$KUBECONFIG" --cache-dir "$T/cache" --request-timeout=10s "$@"; }
start_kubesim --nodes 2

k create namespace team-a >/dev/null || fail "create namespace"
k create quota gpu -n team-a --hard=requests.nvidia.com/gpu=2,requests.nvidia.com/mig-1g.10gb=1,pods=5 \
    >/dev/null || fail "create quota"
pod() { # name gpus
    cat <<Y
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: team-a}
spec:
  containers:
  - name: cuda
    image: cuda-sample:12
    resources: {limits: {$2}}
Y
}
pod train-0 '"nvidia.com/gpu": 2' | k apply -f - >/dev/null || fail "a pod within the quota"
out=$(pod train-1 '"nvidia.com/gpu": 1' | k apply -f - 2>&1) && fail "a pod over the quota: $out"
want='pods "train-1" is forbidden: exceeded quota: gpu, requested: requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=2, limited: requests.nvidia.com/gpu=2'
case $out in *"Error from server (Forbidden)"*"$want"*) ;; *) fail "refusal: $out" ;; esac
out=$(pod mig-0 '"nvidia.com/mig-1g.10gb": 2' | k apply -f - 2>&1) && fail "MIG over the quota"
case $out in *"exceeded quota: gpu, requested: requests.nvidia.com/mig-1g.10gb=2, used: requests.nvidia.com/mig-1g.10gb=0, limited: requests.nvidia.com/mig-1g.10gb=1"*) ;;
    *) fail "MIG refusal: $out" ;; esac

# describe: hard and used, as on a real cluster
used_of() { k describe quota gpu -n team-a | awk -v r="$1" '$1 == r {print $2 "/" $3}'; }
gpus_used() { [ "$(used_of requests.nvidia.com/gpu)" = "$1" ]; }
d=$(k describe quota gpu -n team-a) || fail "describe quota"
echo "$d" | grep -q '^Name: *gpu$' || fail "describe: $d"
echo "$d" | grep -q '^Resource *Used *Hard$' || fail "describe header: $d"
[ "$(used_of requests.nvidia.com/gpu)" = 2/2 ] || fail "describe gpu: $d"
[ "$(used_of requests.nvidia.com/mig-1g.10gb)" = 0/1 ] || fail "describe mig: $d"
[ "$(used_of pods)" = 1/5 ] || fail "describe pods: $d"
k get quota -n team-a gpu >/dev/null || fail "get quota"

# the pod finishes: its GPUs go back within a reconcile, and the next pod fits
k patch pod train-0 -n team-a --subresource=status --type=merge \
    -p '{"status":{"phase":"Succeeded"}}' >/dev/null || fail "finish train-0"
poll 5 gpus_used 0/2 || fail "finished pod kept its GPUs: $(used_of requests.nvidia.com/gpu)"
pod train-1 '"nvidia.com/gpu": 2' | k apply -f - >/dev/null || fail "the released GPUs"
[ "$(used_of requests.nvidia.com/gpu)" = 2/2 ] || fail "after train-1"
k delete pod train-1 -n team-a --grace-period=0 --force >/dev/null 2>&1
poll 5 gpus_used 0/2 || fail "deleted pod kept its GPUs"
stop_kubesim
echo "kubesim quota: ok"
