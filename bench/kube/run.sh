#!/usr/bin/env bash
# Kubernetes client at scale: kubesim with NODES GPU nodes (default 5000, bench/kube/
# node-template.yaml: a node as GFD labels it, ~50 labels, images, conditions) and a node
# informer. Measures time to sync, informer heap per node (full objects and a projection of the
# fields a controller needs), and watch events per second (live while 8 writers patch labels,
# and one watch replaying the backlog). Prints a Markdown section for bench/RESULTS.md.
# BUILD=build by default.
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${BUILD:-build}
# The pinned kubectl (scripts/tools.sh), first on PATH.
./scripts/tools.sh "$B/tools"
BUILD=$B . scripts/tools-env.sh
N=${NODES:-5000}
P=${PATCHES:-20000}
for f in "$B/kubesim" "$B/src/edge/kube/libgpuop-kube.a" "$B/src/base/yamlcfg/libgpuop-yaml.a" \
         "$B/src/base/util/libgpuop-util.a"; do
    [ -e "$f" ] || { echo "missing $f (make build first)" >&2; exit 1; }
done
T=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; rm -rf "$T"' EXIT

cc -O2 -std=c17 -D_GNU_SOURCE -DGPUOP_VERSION='"bench"' -Isrc/edge/kube -Isrc/edge/kube/internal -Isrc/base/kobj -Isrc/base/util \
    -Isrc/base/yamlcfg bench/kube/bench-informer.c "$B/src/edge/kube/libgpuop-kube.a" \
    "$B/src/base/kobj/libgpuop-kobj.a" "$B/src/base/yamlcfg/libgpuop-yaml.a" "$B/src/base/util/libgpuop-util.a" -ljansson -lgnutls -lyaml -lm -lpthread -o "$T/bench-informer"

"$B/kubesim" --nodes "$N" --node-template bench/kube/node-template.yaml \
    --kubeconfig-out "$T/kc" --log-level warn >"$T/kubesim.log" 2>&1 &
pid=$!
for _ in $(seq 600); do [ -s "$T/kc" ] && break; sleep 0.1; done
[ -s "$T/kc" ] || { echo "kubesim did not start: $(cat "$T/kubesim.log")" >&2; exit 1; }

full_size=$(KUBECONFIG=$T/kc kubectl get node gpu-node-00000 -o json | wc -c)
"$T/bench-informer" "$T/kc" "$N" "$P" >"$T/out"
get() { sed -n "s/^$1=//p" "$T/out"; }
server=$(grep -m1 'server:' "$T/kc" | awk '{print $2}')
watches=$(curl -s "$server/metrics" | awk '/^kubesim_requests_total\{verb="watch",resource="nodes"/ {s+=$2} END {print s+0}')
lists=$(curl -s "$server/metrics" | awk '/^kubesim_requests_total\{verb="list",resource="nodes"/ {s+=$2} END {print s+0}')

cpu=$(awk -F: '/model name/ {print $2; exit}' /proc/cpuinfo | sed 's/^ *//')
cat <<MD

## Kubernetes client: node informer against kubesim ($(date -u +%Y-%m-%d))
Machine: $(nproc) CPUs ($cpu), $(free -g | awk '/Mem:/ {print $2}') GiB RAM; kubesim and the
client on the same machine, plain HTTP on loopback. \`NODES=$N PATCHES=$P bench/kube/run.sh\`.
A node object is $full_size bytes of JSON (bench/kube/node-template.yaml).

| Measure | Full objects | Projection | Projection, 2 label keys indexed |
|---|---|---|---|
| Time to sync $N nodes (paginated list, 500 per page) | $(get full_sync_s) s | $(get proj_sync_s) s | $(get lean_sync_s) s |
| Client CPU per node during the sync (parse, project, index) | $(get full_cpu_us) µs | $(get proj_cpu_us) µs | $(get lean_cpu_us) µs |
| Informer heap per node (store + label index) | $(get full_bytes_per_node) B | $(get proj_bytes_per_node) B | $(get lean_bytes_per_node) B |

Projection kept: identity, labels, spec.unschedulable, spec.taints, status.allocatable and three
nodeInfo fields; the first two index every label (key=value), the last only
nvidia.com/gpu.present and nvidia.com/gpu.deploy.driver (\`index_label_keys\`). Process RSS: $(get rss_before_kib) KiB before, $(get rss_after_full_kib) KiB
after the full sync.

| Watch events per second | |
|---|---|
| Live: $(get patches) label patches by 8 writers ($(get write_s) s), informer applies all | $(get live_eps) events/s ($(get live_events) events in $(get live_s) s) |
| Replay: one watch from the resourceVersion before the patches | $(get replay_eps) events/s ($(get replay_events) events in $(get replay_s) s) |
| Client CPU per replayed event (8 KB node JSON: parse + callback) | $(get replay_cpu_us_per_event) µs |

API calls for nodes seen by kubesim: $lists lists (pages), $watches watch requests (at most one
per informer, none for an informer freed before its watch began, plus the replay watch).
The live figure runs on the projected informer, every label indexed.
MD
