/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The driver upgrade controller: the I/O shell around the pure planner (src/lib/upgrade). It reads
 * the controller's node informer and keeps its own informers (pods, PodDisruptionBudgets, the
 * driver DaemonSet's ControllerRevisions, DriverUpgradePools, NVIDIADrivers, the
 * compatibility-matrix ConfigMap), plans once per reconcile of the active ClusterPolicy and
 * executes the plan: node patches, evictions, driver pod deletions, GPUDriverUpgrade Events, each
 * pool's status. It decides nothing (the planner decides which Events repeat, each pool's phase
 * and status and the DriverUpgrade condition); all state lives in the cluster (labels and
 * annotations), so a restarted operator resumes where the last one stopped. Threads:
 * op_upgrade_plan() and the steps after it from the reconcile thread only; op_upgrade_metrics()
 * from any.
 */
#ifndef GPUOP_OPERATOR_UPGRADE_CTL_H
#define GPUOP_OPERATOR_UPGRADE_CTL_H

#include <jansson.h>
#include <stdint.h>

#include "kube.h"
#include "prom.h"
#include "util.h"

struct op_upgrade_hooks {
    int (*may_write)(void *u, struct err *e); /* -ECANCELED when the lease is lost */
    void (*wrote)(void *u);                   /* counts one API write */
    void (*dirty)(void *u);                   /* an informer saw a change */
    void *u;
};

struct op_upgrade;
/* nodes: the controller's node informer (borrowed; it must outlive u), whose projection adds
 * upg_project_node's fields (upgrade.h). */
int op_upgrade_new(struct kube_client *kc, const char *ns, struct kube_informer *nodes,
                   const struct op_upgrade_hooks *h, struct op_upgrade **ret, struct err *e);
void op_upgrade_free(struct op_upgrade *u);
/* 0 once every informer listed, -ETIMEDOUT after timeout_ms. */
int op_upgrade_wait_synced(struct op_upgrade *u, uint64_t timeout_ms);

/*
 * One upgrade pass for the active, valid ClusterPolicy `cp`, in steps the reconcile interleaves
 * with its own writes (operator.h, enum op_write_phase):
 *   op_upgrade_plan(): the pass planned from the informers and `owned` (the objects gpuop owns,
 *     the driver and validator DaemonSets among them); no write. `driver_nodes`: the nodes the
 *     driver DaemonSet targets once the operator's node patches are written (op_plan's).
 *   op_upgrade_node_wishes(): the pass's wish for each node, which the reconcile merges into the
 *     node's one patch (op_node_merge); op_upgrade_node_written() says how that patch fared.
 *   op_upgrade_condition(): the DriverUpgrade condition into `status` (the ClusterPolicy status
 *     the reconcile is about to write).
 *   op_upgrade_bookkeeping(): the evictions and driver pod deletions of the nodes whose patch
 *     went through, each pool's status; after the ClusterPolicy's status.
 *   op_upgrade_events(): the pass's Events (those of nodes not patched held back), queued for
 *     the operator's recorder (op_event_queue_add).
 * Fail only when the lease is lost (-ECANCELED); other failures are logged and retried.
 */
int op_upgrade_plan(struct op_upgrade *u, const json_t *cp, const json_t *owned,
                    const json_t *driver_nodes, uint64_t now_ms, struct err *e);
/* node -> its wish (a merge patch with the resourceVersion it was planned from), borrowed until
 * the next op_upgrade_plan(); NULL: none. A node whose patch went through
 * (op_upgrade_node_written) leaves the map, and its wish is let go of (a caller that
 * needs it longer holds a reference). */
const json_t *op_upgrade_node_wishes(struct op_upgrade *u);
/* rc: the patch's result (0, KUBE_ECONFLICT, ...); base_rv: its precondition; rv: the version
 * the server returned for it; patch: what was written (kept, as upg_writes_record keeps it). */
void op_upgrade_node_written(struct op_upgrade *u, const char *node, int rc, const char *base_rv,
                             const char *rv, const json_t *patch);
void op_upgrade_condition(struct op_upgrade *u, const json_t *cp, json_t *status, uint64_t now_ms);
int op_upgrade_bookkeeping(struct op_upgrade *u, struct err *e);
void op_upgrade_events(struct op_upgrade *u, const json_t *cp, json_t *queue);
/* The pools whose driver rollout holds (the remediation pass's rem_plan_holds, upg_input.holds)
 * from the next pass on; borrowed: they must live until replaced. Reconcile thread only. */
struct upg_hold;
void op_upgrade_set_holds(struct op_upgrade *u, const struct upg_hold *holds, size_t n);
/* Milliseconds until the planner wants another pass (0: only on events). */
uint64_t op_upgrade_requeue_ms(struct op_upgrade *u);
/* NVIDIA's gpu_operator_nodes_upgrades_* and gpu_operator_auto_upgrade_enabled, per pool too. */
void op_upgrade_metrics(struct op_upgrade *u, struct prom_writer *w);

#endif
