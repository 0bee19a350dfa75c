/* SPDX-License-Identifier: Apache-2.0 */
/* What the upgrade planner's files share (upg-plan.c: the pass; upg-report.c: what it reports). */
#ifndef GPUOP_UPG_INTERNAL_H
#define GPUOP_UPG_INTERNAL_H

#include "upgrade.h"

/* Appends node -> text to a list of notes. */
void upg_notes_add(struct upg_notes *n, const char *node, const char *text);
void upg_notes_done(struct upg_notes *n);

/* The phase of a pool from its report (upgrade.h, enum upg_phase). */
enum upg_phase upg_report_phase(const struct upg_pool_report *r);
/* Sets r->phase, and r->status and r->write for the DriverUpgradePool `obj` (NULL: the default
 * pool, no status) at `now` (RFC 3339). */
void upg_report_pool(struct upg_pool_report *r, const json_t *obj, const char *now);
/* The DriverUpgrade condition from the plan's pools (or its freeze), with autoUpgrade as the
 * policy says. */
void upg_report_condition(struct upg_plan *p, bool auto_upgrade);

#endif
