/* SPDX-License-Identifier: Apache-2.0 */
/*
 * capacity: GPUs advertised against GPUs promised. A pure function of the cluster's Nodes, Pods
 * and ResourceQuotas (jansson values, borrowed) and the pool definitions, giving, for each GPU
 * resource (nvidia.com/gpu, nvidia.com/mig-<profile>, nvidia.com/gpu.shared, ...):
 *
 *   physical     what the GPUs provide: the node status exporter's gpuop.dev/gpu-count
 *                annotation (expected per resource), else the nvidia.com/gpu.count label (for
 *                nvidia.com/gpu), else the node's status.capacity
 *   advertised   status.allocatable of the nodes that can take GPU pods: Ready, not cordoned,
 *                and with healthy GPUs (no gpu-count mismatch, allocatable not below capacity
 *                for a GPU resource); the other nodes are listed as excluded, with the reason
 *   requested    what non-finished pods scheduled on those nodes request
 *   quota        the namespaces' requests.<resource> quotas (several quotas in a namespace:
 *                the smallest), and their ratio to advertised (the over-commit ratio)
 *
 * per pool (a node-label selector; by default one pool per distinct nvidia.com/gpu.product) and
 * in total; and per namespace its quota, its use (the quota's status.used, and what its pods
 * request) and the pools its GPU pods can land on (their nodeSelector and required node
 * affinity against each pool's nodes; a namespace without GPU pods can land wherever its
 * resource is offered). A quota whose namespace can land in one pool only is pinned to that
 * pool; a pool whose pinned quotas pass its advertised capacity times the over-commit threshold
 * is short. Namespaces with GPU pods and no quota on any GPU resource are flagged.
 *
 * A node whose GPUs are published through Dynamic Resource Allocation (NVIDIA's DRA driver,
 * gpu.nvidia.com) advertises them in ResourceSlices instead of status.allocatable; with the
 * optional slices, claims and classes the view counts them in the same names: a device of type
 * "gpu" is nvidia.com/gpu, one of type "mig" nvidia.com/mig-<its profile attribute> (the
 * device plugin's mixed-strategy names); vfio devices are not counted. On-demand MIG devices
 * (partitionable: they consume a GPU's shared counters) count, per GPU and profile, as many as
 * the counters let exist at once. The gpu-count annotation's mismatch (NVML against the device
 * plugin's allocatable) does not exclude a node whose GPUs only DRA publishes. A node with both the
 * device plugin and DRA (a pool moving) advertises each resource once: the larger of the two
 * counts. Requested adds the devices of allocated ResourceClaims reserved for a non-finished pod
 * (or any other consumer), once per claim however many pods share it; the claim Kubernetes makes
 * for a pod's extended resource served by DRA is not counted (the pod's request is). Quotas on
 * <class>.deviceclass.resource.k8s.io/devices and requests.deviceclass.resource.kubernetes.io/
 * <class> count for the resource of the class: its extendedResourceName when a GPU resource,
 * else nvidia.com/gpu for NVIDIA's class gpu.nvidia.com; other classes (mig.nvidia.com, whose
 * devices are of several profiles) are not mapped.
 *
 * Layer: above kobj and nodestate, below the operator and `gpuop status` (which draws the JSON
 * form as text). No I/O. Thread-compatible.
 */
#ifndef GPUOP_CAPACITY_H
#define GPUOP_CAPACITY_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

#define CAP_POOL_NAME_MAX 64
#define CAP_POOLS_MAX     64  /* pool definitions */
#define CAP_DEFAULT_RATIO 1.0 /* quotas may promise up to what is advertised */

/* A pool: nodes whose labels match every key=value of match_labels. */
struct cap_pool_def {
    char name[CAP_POOL_NAME_MAX];
    json_t *match_labels; /* object of key -> string (owned) */
};
/* "NAME:key=value[,key=value...]" (the operator's --gpu-pool): the name a DNS label, the keys
 * qualified names, the values label values; -EINVAL naming the part that is wrong. */
int cap_pool_def_parse(const char *spec, struct cap_pool_def *ret, struct err *e);
void cap_pool_def_clear(struct cap_pool_def *p);

/* The view's settings as flags give them (the operator's and `gpuop status`'s --gpu-pool and
 * --gpu-quota-overcommit-ratio): pools[n] parsed into ret_pools (CAP_POOLS_MAX entries; names
 * unique), ratio (NULL: keep *ret_ratio) a number above 0. -EINVAL naming the flag and the
 * value; the pools parsed so far are in *ret_n either way (clear them). */
int cap_settings_parse(const char *const *pools, size_t n, const char *ratio,
                       struct cap_pool_def *ret_pools, size_t *ret_n, double *ret_ratio,
                       struct err *e);

struct cap_input {
    const json_t *nodes;  /* Node objects (array): labels, the gpu-count annotation,
                             spec.unschedulable, status.capacity/allocatable/conditions */
    const json_t *pods;   /* Pod objects (array): namespace, spec (nodeName, nodeSelector,
                             affinity, containers' and initContainers' resources), status.phase */
    const json_t *quotas; /* ResourceQuota objects (array): spec.hard, status.used */
    /* DRA (each NULL when resource.k8s.io is not served): */
    const json_t *slices;  /* ResourceSlice objects: spec.driver, nodeName, pool.name,
                              sharedCounters, devices (name, attributes type and profile,
                              consumesCounters) */
    const json_t *claims;  /* ResourceClaim objects: namespace, name, the extended-resource
                              annotation, status.allocation.devices.results, status.reservedFor */
    const json_t *classes; /* DeviceClass objects: name, spec.extendedResourceName */
    const struct cap_pool_def *pools; /* NULL or n_pools == 0: one pool per GPU product */
    size_t n_pools;
    double overcommit_ratio; /* threshold of "over" and "short"; 0: CAP_DEFAULT_RATIO */
};

struct cap_amounts {
    int64_t physical, advertised, requested;
    int64_t quota; /* totals: every namespace's; a pool: the quotas that can land there */
};

struct cap_resource {
    char *name; /* "nvidia.com/gpu" */
    struct cap_amounts total;
    double ratio; /* quota / advertised; INFINITY when quota > 0 and nothing is advertised */
    bool over;    /* ratio > the threshold */
};

struct cap_pool_resource {
    const char *name; /* the resource (borrowed from the view's resources) */
    struct cap_amounts a;
    int64_t pinned;   /* quotas of namespaces that can land only in this pool */
    char **pinned_ns; /* their names, sorted (n_pinned_ns) */
    size_t n_pinned_ns;
    bool short_; /* pinned > threshold * advertised */
};

struct cap_pool {
    char *name;
    char *selector; /* "nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3" */
    size_t n_nodes, n_excluded;
    char **excluded; /* "node: reason", sorted (n_excluded) */
    struct cap_pool_resource *res;
    size_t n_res; /* one per view resource, in the view's order */
};

struct cap_ns_resource {
    const char *name;  /* borrowed from the view's resources */
    int64_t hard;      /* -1: no quota on it */
    int64_t used;      /* the quota's status.used; -1: no quota */
    int64_t requested; /* what its non-finished pods request */
};

struct cap_namespace {
    char *name;
    struct cap_ns_resource *res; /* resources it has a quota on or pods requesting */
    size_t n_res;
    char **pools; /* where its GPU pods can land, sorted */
    size_t n_pools;
    size_t gpu_pods; /* non-finished pods requesting a GPU resource */
    bool no_quota;   /* GPU pods and no quota on any GPU resource */
};

struct cap_view {
    double threshold;
    struct cap_resource *resources; /* sorted by name */
    size_t n_resources;
    struct cap_pool *pools; /* sorted by name */
    size_t n_pools;
    struct cap_namespace *namespaces; /* sorted by name; only those with GPU quota or pods */
    size_t n_namespaces;
};

/* Computes the view; fails only on input that is not arrays of objects (-EINVAL). Objects
 * that do not parse (a bad quantity, a bad annotation) are read as far as they go. */
int cap_view_compute(const struct cap_input *in, struct cap_view **ret, struct err *e);
void cap_view_free(struct cap_view *v);
DEFINE_CLEANUP_FUNC(struct cap_view, cap_view_free)

/* The view as a JSON object ({"threshold","resources","pools","namespaces"}); a new reference. */
json_t *cap_view_to_json(const struct cap_view *v);

/* A GPU resource name: nvidia.com/... as the device plugin advertises them. */
bool cap_gpu_resource(const char *name);
/* What every GPU resource name starts with. */
#define CAP_GPU_PREFIX "nvidia.com/"

/* NVIDIA's DRA driver, whose slices and claims the view reads; the annotation Kubernetes puts
 * on the claim it makes for a pod's extended resources served by DRA. */
#define CAP_DRA_DRIVER         "gpu.nvidia.com"
#define CAP_DRA_EXTENDED_ANNOT "resource.kubernetes.io/extended-resource-claim"

#endif
