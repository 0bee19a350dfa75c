/* SPDX-License-Identifier: Apache-2.0 */
/* The driver upgrade controller's shell (upgrade-ctl.h), shared by its files: upgrade-ctl.c (the
 * informers, one pass: the planner's inputs read, its plan executed), upgrade-exec.c (the plan's
 * writes) and upgrade-metrics.c (what /metrics says of the passes). */
#ifndef GPUOP_OPERATOR_UPGRADE_CTL_INTERNAL_H
#define GPUOP_OPERATOR_UPGRADE_CTL_INTERNAL_H

#include <pthread.h>

#include "upgrade-ctl.h"
#include "upgrade.h"

#define UPG_COMPONENT "operator"

enum { INF_NODES, INF_PODS, INF_PDBS, INF_REVISIONS, INF_POOLS, INF_NVDS, INF_CONFIGMAP, N_INF };

/* A pool's counts, for gpuop_driver_upgrade_pool_nodes. */
struct pool_counts {
    char *name;
    int in_progress, done, failed, pending;
};

struct op_upgrade {
    struct kube_client *kc;
    const char *ns;
    struct op_upgrade_hooks h;
    struct kube_informer *inf[N_INF];
    /* what operand pods have alike, held once (upg_pod_compact; the pod informer's thread) */
    json_t *pod_intern;
    size_t pod_intern_pruned;
    struct upg_event_log *posted; /* the Events posted lately (reconcile thread) */
    /* the nodes as gpuop's last patches left them, until the informer shows those patches
     * (upgrade.h, read-your-writes; reconcile thread) */
    struct upg_writes *writes;
    struct upg_matrix *builtin;
    struct upg_matrix *override;
    char *override_rv; /* the ConfigMap's resourceVersion the override was parsed from */
    char *override_err;
    uint64_t requeue_ms;
    /* the pass under way (op_upgrade_plan to the next; reconcile thread) */
    struct upg_plan *pass; /* NULL: none (no policy, or an informer not listed yet) */
    /* node -> its patch (moved here from pass, whose patches are NULL) while the patch has not
     * gone through: a node and its patch leave once it has (neither a second map of every node
     * written nor their patches held to the end of the pass: 10,000 at a fresh install) */
    json_t *pass_wishes;
    int64_t pass_now_s;
    uint64_t last_unsynced_log_ms;
    /* the pools whose rollout holds, from the remediation pass (op_upgrade_set_holds; borrowed) */
    const struct upg_hold *holds;
    size_t n_holds;

    pthread_mutex_t lock; /* the metrics below */
    bool have_counts, auto_upgrade;
    struct upg_counts counts;
    struct pool_counts *pools;
    size_t n_pools;
    uint64_t plan_us_last, plan_us_max, passes; /* the planner's own time, per pass */
    uint64_t plan_cpu_us_last, plan_cpu_us_max; /* and the CPU time it used */
    uint64_t conflicts;                         /* node patches refused: the node had changed */
    size_t unseen_writes;                       /* node writes the informer does not show yet */
};

/* Lists every pod on each node named in `want` (an object keyed by node name; the first
 * MAX_LISTED_NODES), projected as the pod informer's, appended to `pods` (the operand pods the
 * informer holds left out). Returns the nodes listed (an object keyed by name). */
json_t *op_upgrade_list_node_pods(struct op_upgrade *u, const json_t *want, json_t *pods);

/* ---- upgrade-exec.c ----------------------------------------------------------------------- */

/* The plan's writes after the node patches (upgrade-ctl.h's steps): a node with a wish whose
 * patch did not go through (still in u->pass_wishes: refused, or not written yet) keeps its
 * evictions, deletions and Events for the next pass, planned again from what the node is
 * then. */

/* ---- upgrade-metrics.c -------------------------------------------------------------------- */

/* One pass's figures kept for /metrics (its plan, whether autoUpgrade is on, its time). */
void op_upgrade_record(struct op_upgrade *u, const struct upg_plan *plan, bool auto_up,
                       uint64_t plan_us, uint64_t plan_cpu_us);
void op_upgrade_pool_counts_free(struct pool_counts *pc, size_t n);

#endif
