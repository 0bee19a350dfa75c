/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The chart's hooks (deploy/helm/gpuop/templates/hooks.yaml): `gpuop operator apply-crds`
 * (pre-upgrade: the chart's CRDs applied, since helm never updates crds/ once installed) and
 * `gpuop operator uninstall` (pre-delete: the operator stopped, the toolkit's cleanup turned on
 * and rolled out, the release's ClusterPolicies and NVIDIADrivers deleted, every toolkit pod
 * gone, so each node's runtime configuration is restored; the CRDs deleted when asked). Their
 * decisions, pure (hooks.c); the shell is hooks-main.c. Objects are borrowed unless stated.
 */
#ifndef GPUOP_OPERATOR_HOOKS_H
#define GPUOP_OPERATOR_HOOKS_H

#include <jansson.h>
#include <stdbool.h>

#include "util.h"

/* A document of a CRD file, as apply-crds takes it: apiextensions.k8s.io/v1
 * CustomResourceDefinition with a name and a spec; `where` ("FILE: document 2") prefixes the
 * error. */
int op_crd_check(const json_t *doc, const char *where, struct err *e);

enum op_crd_action {
    OP_CRD_CREATE,
    OP_CRD_UPDATE,    /* *ret_obj: desired with live's resourceVersion, for a PUT */
    OP_CRD_UNCHANGED, /* the spec, labels and annotations are already desired's */
};
/* What to write for a CRD `desired` given the stored one (`live`, NULL when absent). */
enum op_crd_action op_crd_plan(const json_t *desired, const json_t *live, json_t **ret_obj);

#endif
