/* SPDX-License-Identifier: Apache-2.0 */
/* The operator's GPU quota watch (gpuquota-watch.c): Pod and ResourceQuota informers (and
 * DRA's, where served), the
 * capacity view of each reconcile (src/lib/capacity), kept for /metrics. The controller owns one;
 * its informers join the controller's (synced, freed) like the others. */
#ifndef GPUOP_OP_GPUQUOTA_H
#define GPUOP_OP_GPUQUOTA_H

#include <pthread.h>

#include "capacity.h"
#include "kube.h"
#include "prom.h"

struct op_gpuquota {
    struct kube_informer *pods, *quotas;
    /* DRA's ResourceSlices, ResourceClaims and DeviceClasses: started by the first observe
     * that finds resource.k8s.io/v1 served (NULL before; on the reconcile thread alone) */
    struct kube_informer *slices, *claims, *classes;
    struct kube_client *kc;
    struct kube_informer_handlers mark;
    struct cap_pool_def pools[CAP_POOLS_MAX];
    size_t n_pools;
    double ratio; /* 0: CAP_DEFAULT_RATIO */
    pthread_mutex_t lock;
    struct cap_view *view; /* the last reconcile's (NULL before the first), under lock */
};

/* Parses the operator's --gpu-pool values and --gpu-quota-overcommit-ratio ("1.0"; NULL: the
 * default) into q (zeroed by the caller); -EINVAL names the bad value. */
int op_gpuquota_configure(struct op_gpuquota *q, const char *const *pools, size_t n_pools,
                          const char *ratio, struct err *e);
/* Starts the Pod and ResourceQuota informers (every namespace; pods projected to what the
 * view reads, so a pod without GPU requests costs a name and a phase). */
int op_gpuquota_start(struct op_gpuquota *q, struct kube_client *kc,
                      const struct kube_informer_handlers *mark, struct err *e);
/* The view of nodes (the node informer's projection) and the informers' pods and quotas, and
 * with dra_served (resource.k8s.io/v1 listed) the DRA informers' objects, those informers
 * started the first time; kept for /metrics. Returns its findings for op_snapshot.findings (a
 * new array). */
json_t *op_gpuquota_observe(struct op_gpuquota *q, const json_t *nodes, bool dra_served,
                            struct err *e);
/* The gpuop_gpu_* families of the last view (nothing before the first reconcile). */
void op_gpuquota_write_metrics(struct op_gpuquota *q, struct prom_writer *w);
/* Frees the view and the pool definitions (the informers are freed by the caller). */
void op_gpuquota_clear(struct op_gpuquota *q);
/* The node fields the view reads, for the node informer's projection (heartbeats change none):
 * status.allocatable, status.capacity, spec.unschedulable, the Ready condition's status. */
void op_gpuquota_project_node(json_t *obj, json_t *projected);

#endif
