/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The GPU remediation controller: the I/O shell around the pure planner (src/lib/remediation,
 * rem_plan). It reads what the driver upgrade controller's informers already hold (the nodes,
 * the operand pods, the PodDisruptionBudgets, the DriverUpgradePools), lists the pods of the
 * nodes it drains, plans once per reconcile of the active ClusterPolicy and executes the plan:
 * node patches (state label, annotations, cordon, taint; one function, write_node), evictions
 * through the Eviction API, validator pod deletions, Events, the breakers' annotations (the
 * ClusterPolicy's after its status: op_remediation_write_policy). It
 * decides nothing; all state lives in the cluster, so a restarted operator resumes each node
 * where it was. Its holds (the pools whose driver rollout must pause) go to the upgrade pass that
 * follows it. Threads: op_remediation_reconcile() from the reconcile thread only;
 * op_remediation_metrics() from any.
 */
#ifndef GPUOP_OPERATOR_REMEDIATION_CTL_H
#define GPUOP_OPERATOR_REMEDIATION_CTL_H

#include <jansson.h>
#include <stdint.h>

#include "kube.h"
#include "prom.h"
#include "upgrade-ctl.h"
#include "util.h"

struct op_remediation;
/* upg: the driver upgrade controller whose informers and node-write record it shares (borrowed;
 * it must outlive r); h: the same hooks (lease check, write count). */
int op_remediation_new(struct kube_client *kc, const char *ns, struct op_upgrade *upg,
                       const struct op_upgrade_hooks *h, struct op_remediation **ret,
                       struct err *e);
void op_remediation_free(struct op_remediation *r);

/*
 * One remediation pass for the active, valid ClusterPolicy `cp` (NULL: none, nothing done), with
 * the objects gpuop owns (`owned`: is the validator deployed). Adds the GPURemediation condition
 * to `status` and hands the upgrade controller its holds (op_upgrade_set_holds). Fails only when
 * the lease is lost (-ECANCELED); other failures are logged and retried.
 */
int op_remediation_reconcile(struct op_remediation *r, const json_t *cp, const json_t *owned,
                             json_t *status, uint64_t now_ms, struct err *e);
/* The pass's breaker states for the ClusterPolicy (its annotations), written once the
 * reconcile has written the ClusterPolicy's status (before, they would change its
 * resourceVersion under that write). Fails only when the lease is lost. */
int op_remediation_write_policy(struct op_remediation *r, const json_t *cp, struct err *e);
/* Milliseconds until the planner wants another pass (0: only on events). */
uint64_t op_remediation_requeue_ms(struct op_remediation *r);
/* gpuop_remediation_*: nodes per state, breakers open, quarantines and recoveries and their
 * times. */
void op_remediation_metrics(struct op_remediation *r, struct prom_writer *w);

#endif
