/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The takeover of what NVIDIA's GPU Operator left (src/lib/adopt's plan, executed): the I/O shell
 * the reconcile calls around its writes. It reads the namespace's and the cluster's objects and
 * the operand pods, plans with adopt_plan() and carries the plan out; it decides nothing.
 *
 *   op_adopt_prepare()  before the plan's writes: DaemonSets whose selector differs are deleted
 *                       with their pods orphaned (and left out of this pass's writes, as is any
 *                       DaemonSet being deleted); while NVIDIA's operand pods remain, gpuop's
 *                       operand DaemonSets but the driver's are written OnDelete, so that only
 *                       the takeover replaces pods, node by node
 *   op_adopt_finish()   after them: the pods of the nodes whose turn it is deleted (once their
 *                       DaemonSet is gpuop's), the device plugin surged, NVIDIA-only objects
 *                       removed once safe, each with an Event; the ClusterPolicy's Takeover
 *                       condition
 *
 * A scan starts with a look at the namespace's DaemonSets and at NVIDIA's and the surge pods
 * (three lists); once that finds nothing of NVIDIA's, no more scans are made (until a restart).
 * A scan with nothing to do now waits ADOPT_IDLE_MS before the next. Reconcile thread only.
 */
#ifndef GPUOP_OPERATOR_ADOPT_CTL_H
#define GPUOP_OPERATOR_ADOPT_CTL_H

#include <jansson.h>
#include <stdbool.h>

#include "adopt.h"
#include "op-controller.h"

#define ADOPT_IDLE_MS        30000
#define ADOPT_CONDITION_TYPE "Takeover"

struct op_adopt_pass {
    bool scanned;  /* this pass planned (else the stored condition is kept) */
    bool finished; /* this pass found nothing of NVIDIA's left (the last scan) */
    struct adopt_plan plan;
    json_t *pods; /* the namespace's pods, as listed */
};

int op_adopt_prepare(struct controller *c, const json_t *cp, struct op_plan *plan,
                     struct op_adopt_pass *ret, struct err *e);
/* status: the ClusterPolicy status about to be written (its Takeover condition is put there). */
int op_adopt_finish(struct controller *c, const json_t *cp, struct op_plan *plan,
                    struct op_adopt_pass *pass, json_t *status, struct err *e);
void op_adopt_pass_done(struct op_adopt_pass *p);

#endif
