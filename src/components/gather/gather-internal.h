/* SPDX-License-Identifier: Apache-2.0 */
/* gather's shell, shared by its files: one run (gather-main.c), the API reads into the bundle
 * (gather-collect.c), the doctor's pods (gather-doctor.c). What to collect and how it is named is
 * the core's (gather.h). */
#ifndef GPUOP_GATHER_INTERNAL_H
#define GPUOP_GATHER_INTERNAL_H

#include "gather.h"
#include "svc.h"

#define GATHER_COMPONENT "gather"

struct gather_run {
    struct svc *s;
    const struct gather_options *g;
    struct kube_client *kc;  /* with the stop token */
    struct kube_client *kc2; /* without: the doctor pods' removal */
    struct gather_bundle *b;
    uint64_t now_ms;
    bool down, have_nodes;
    char down_why[768];
    json_t *nodes, *policies, *drivers, *pods, *deployments; /* items, never NULL */
};

/* An API call's failure: said in the index; one that says the API server cannot be used at all
 * (gather_api_down) makes every later call a "not read" (gather_run_skipped). */
void gather_run_failed(struct gather_run *r, const char *what, const struct err *ee, bool optional);
/* Whether `what` is not read (the API server down, or a stop): said in the index. */
bool gather_run_skipped(struct gather_run *r, const char *what);
/* Adds bytes, an object as YAML (redacted; a Secret refused) or text (redacted) to the bundle;
 * what passes its bound is left out and said. A failure of the bundle itself ends the run. */
int gather_run_add(struct gather_run *r, const char *path, const void *data, size_t len,
                   const char *what, size_t redactions, struct err *e);
int gather_run_add_yaml(struct gather_run *r, const char *path, const json_t *obj, const char *what,
                        struct err *e);
int gather_run_add_text(struct gather_run *r, const char *path, const char *text, size_t len,
                        const char *what, struct err *e);

/* Everything the cluster gives: the namespace, the sources, the GPU nodes, status.json, the
 * Events, with --doctor the doctor's reports, the logs. */
int gather_run_collect(struct gather_run *r, struct err *e);
/* `gpuop doctor --json` on every GPU node: a pod each, DOCTOR_PARALLEL at once, read and
 * removed (also on a stop). */
int gather_run_doctor(struct gather_run *r, struct err *e);

#endif
