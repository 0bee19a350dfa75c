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
 * op_upgrade_reconcile() from the reconcile thread only; op_upgrade_metrics() from any.
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
 * One upgrade pass for the active, valid ClusterPolicy `cp` (NULL: none; nothing is done), with
 * the objects gpuop owns (`owned`, the driver and validator DaemonSets among them). Adds the
 * DriverUpgrade condition to `status` (the ClusterPolicy status the reconcile is about to
 * write). Fails only when the lease is lost (-ECANCELED); other failures are logged and retried.
 */
int op_upgrade_reconcile(struct op_upgrade *u, const json_t *cp, const json_t *owned,
                         json_t *status, uint64_t now_ms, struct err *e);
/* The pools whose driver rollout holds (the remediation pass's rem_plan_holds, upg_input.holds)
 * from the next pass on; borrowed: they must live until replaced. Reconcile thread only. */
struct upg_hold;
void op_upgrade_set_holds(struct op_upgrade *u, const struct upg_hold *holds, size_t n);
/* Milliseconds until the planner wants another pass (0: only on events). */
uint64_t op_upgrade_requeue_ms(struct op_upgrade *u);
/* NVIDIA's gpu_operator_nodes_upgrades_* and gpu_operator_auto_upgrade_enabled, per pool too. */
void op_upgrade_metrics(struct op_upgrade *u, struct prom_writer *w);

#endif
