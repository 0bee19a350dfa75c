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

/* ---- apply-crds ----------------------------------------------------------------------------- */

#define OP_CRD_FILES_MAX 64 /* CRD files in one folder */

/* Whether apply-crds reads a file of its folder: a *.yaml name, not hidden. */
bool op_crd_file(const char *name);

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

/* The CRDs of one file (docs: its documents, as yaml_load_file_all gives them) appended to out,
 * each checked by op_crd_check with "PATH: document N"; empty documents are skipped. On an
 * error nothing of this file is appended. */
int op_crds_add(json_t *out, const json_t *docs, const char *path, struct err *e);

/* ---- uninstall ------------------------------------------------------------------------------- */

/* uninstall's options: --release required, each --delete-crd a CRD name. The error names the
 * flag. */
int op_uninstall_check(const char *release, const char *const *delete_crds, size_t n,
                       struct err *e);

/* The pods of a Deployment (its spec.selector.matchLabels as a label selector, malloc'ed), or
 * NULL when it has none: nothing to wait for. */
char *op_deployment_pods_selector(const json_t *deployment);

/* The first toolkit DaemonSet of a list (items) whose cleanup has not rolled out to every node:
 * its name (borrowed) and why (adopt_ds_rolled_out's words); NULL when every one has. */
const char *op_toolkit_pending(const json_t *items, char *why, size_t why_len);

/* The objects of a list (items) the release owns by Helm's annotations (adopt_helm_owned), which
 * uninstall deletes, and the others, which it keeps: two new arrays of names. */
void op_release_split(const json_t *items, const char *release, const char *ns, json_t **ret_delete,
                      json_t **ret_keep);

#endif
