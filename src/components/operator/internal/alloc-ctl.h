/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The GPU allocation per pool, the operator's shell (alloc-ctl.c) around the pure planner
 * (src/lib/upgrade, upg_alloc_plan): a DriverUpgradePool's nodes moved between the device plugin
 * and DRA one by one. It reads what the driver upgrade controller's informers hold (the nodes,
 * the operand pods, the PodDisruptionBudgets, the pools, the NVIDIADrivers) and the GPU view's
 * ResourceSlices, lists the pods of the nodes it empties, plans once per reconcile of the active
 * ClusterPolicy and executes the plan: node patches (with the node's resourceVersion as their
 * precondition, recorded in the upgrade controller's node writes), evictions, the ResourceSlices
 * of nodes leaving DRA, each pool's status.gpuAllocation. It decides nothing; every step lives on
 * the nodes, so a restarted operator resumes. Reconcile thread only.
 */
#ifndef GPUOP_OPERATOR_ALLOC_CTL_H
#define GPUOP_OPERATOR_ALLOC_CTL_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "util.h"

struct controller;

/* Is the DRA stack wanted under a ClusterPolicy (upg_alloc_dra_wanted over the informers'
 * nodes and pools)? Until the pools are listed: as it is (the kubelet plugin's DaemonSet among
 * `owned`), so a starting operator never prunes it. */
bool op_alloc_dra_wanted(struct controller *c, const json_t *nodes, const json_t *owned);
/* One pass for the active, valid ClusterPolicy `cp` (NULL: nothing). Fails only when the lease
 * is lost (-ECANCELED); other failures are logged and retried. */
int op_alloc_reconcile(struct controller *c, const json_t *cp, uint64_t now_ms, struct err *e);
/* Milliseconds until the planner wants another pass (0: only on events). */
uint64_t op_alloc_requeue_ms(struct controller *c);

#endif
