/* SPDX-License-Identifier: Apache-2.0 */
/* `gpuop migrate`'s writes and waits (apply.c): the shell's I/O beyond migrate-main.c. */
#ifndef GPUOP_MIGRATE_SHELL_H
#define GPUOP_MIGRATE_SHELL_H

#include "kube.h"
#include "migrate.h"
#include "svc.h"

/* One planned write as its request; "done already" (mig_request.done_code) is success. */
int mig_do_write(struct kube_client *kc, const struct mig_write *w, struct err *e);
/* Until DaemonSet ds_name has rolled out, or m->timeout_ms. */
int mig_wait_rollout(struct svc *s, struct kube_client *kc, const struct mig_options *m,
                     const char *ds_name, struct err *e);
/* Until n surge device plugin pods are Ready, then ADOPT_SURGE_SETTLE_MS more. */
int mig_wait_surge(struct svc *s, struct kube_client *kc, const struct mig_options *m, size_t n,
                   struct err *e);
/* --to nvidia --roll: reads the pods, DaemonSets, nodes and the ClusterPolicy, plans a step
 * (mig_roll_plan), makes its writes, until the roll is done or m->timeout_ms. */
int mig_roll_run(struct svc *s, struct kube_client *kc, const struct mig_options *m, struct err *e);

#endif
