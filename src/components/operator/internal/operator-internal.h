/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers shared by the operator's source files. */
#ifndef GPUOP_OPERATOR_INTERNAL_H
#define GPUOP_OPERATOR_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "kobj.h" /* the object accessors (one vocabulary for the tree) */
#include "operator.h"

struct embedded_file {
    const char *name;
    const char *data;
    size_t len;
};
/* Generated from deploy/operands/ and deploy/crds/ by tools/embed.c. */
extern const struct embedded_file op_embedded_operands[];
extern const struct embedded_file op_embedded_crds[];
/* deploy/upgrade/compat-matrix.yaml, the compatibility matrix gpuop ships. */
extern const struct embedded_file op_embedded_upgrade[];

/* repository/image:version of a component section, or NULL when it names no image. */
char *op_image_ref(const json_t *sec);

struct op_policy;
struct op_templates;
struct op_render_ctx;
struct op_report;

/* ---- status conditions (plan.c), shared by the ClusterPolicy's and each NVIDIADriver's ---- */

struct op_status_ctx {
    const json_t *old_conditions;
    int64_t generation;
    char now[40];
};
void op_status_ctx_init(struct op_status_ctx *sc, const json_t *obj, uint64_t now_ms);
/* A condition; it keeps its lastTransitionTime while its status does not change. */
json_t *op_condition(const struct op_status_ctx *sc, const char *type, bool status,
                     const char *reason, const char *message);
/* The stored message of an object's condition of `type` (and `status` unless NULL), or NULL:
 * what was reported lives in the status, so a restarted operator repeats nothing. */
const char *op_stored_condition(const json_t *obj, const char *type, const char *status);
/* ---- reports (plan.c), the ClusterPolicy's and each NVIDIADriver's (operator.h) ---------- */

/* A report of `obj` (a reference is kept), no status, no Events. */
void op_report_init(struct op_report *r, const json_t *obj);
void op_report_event(struct op_report *r, const char *type, const char *reason,
                     const char *message);
/* Sets the status (stolen), and whether it must be written: it differs from the stored one. */
void op_report_status(struct op_report *r, json_t *status);
void op_report_done(struct op_report *r);

/* Does the driver DaemonSet target this GPU node (no pre-installed driver, operands on)? */
bool op_node_runs_driver(const json_t *labels);
/* The node as it will be once `patch` (a merge patch of its labels: key -> string, null to
 * remove; NULL: none) is written, read through the patch without a merged copy: label `key`
 * (the patch's value first, else the node's), and the two questions above. */
const char *op_label_after(const json_t *labels, const json_t *patch, const char *key);
bool op_node_is_gpu_after(const json_t *labels, const json_t *patch);
bool op_node_runs_driver_after(const json_t *labels, const json_t *patch);
/* The DaemonSet ns/name among the owned objects (a JSON array), or NULL. */
const json_t *op_find_daemonset(const json_t *owned, const char *ns, const char *name);

/* ---- rendering pieces (render.c) ---------------------------------------------------------- */

/* The variables a template is rendered with for component c (${NAMESPACE}, ${IMAGE}, ...). */
json_t *op_render_vars(const struct op_policy *p, enum op_component c,
                       const struct op_render_ctx *ctx);
/* A template file's documents with the variables substituted (a new array). */
int op_render_file(const struct op_templates *t, const char *file, const json_t *vars,
                   json_t **ret_docs, struct err *e);
/* The policy's common (daemonsets.*) and component c's settings applied to a DaemonSet. */
void op_daemonset_overrides(json_t *ds, const struct op_policy *p, enum op_component c,
                            const struct op_render_ctx *ctx);

/* FNV-1a 64 of a string. */
uint64_t op_fnv64(const char *s);
/* The driver template's DaemonSet for `p`, with the policy's overrides, not finished (no owner
 * reference, no hash): nvdriver.c renames and re-selects it per NVIDIADriver and OS. */
int op_render_driver_daemonset(const struct op_policy *p, const struct op_templates *t,
                               const struct op_render_ctx *ctx, json_t **ret_ds, struct err *e);
/* env lists merge by name: `env`'s entries replace the container's of the same name. */
void op_merge_env(json_t *container, const json_t *env);
/* The container `name` of a pod spec's `list` ("containers", "initContainers"); NULL: the
 * first. Borrowed. */
json_t *op_find_container(json_t *podspec, const char *list, const char *name);
/* imagePullSecrets (names or {name}) set on a pod spec; nothing when the list is empty. */
void op_apply_pull_secrets(json_t *podspec, const json_t *secrets);

/* ---- the driver pod's settings (render-driver.c) ------------------------------------------ */

/* Refuses what NVIDIA's operator refuses among spec.driver's settings and spec.gds/gdrcopy
 * (precompiled drivers with GDS or GDRCopy): `path` names the
 * section in messages ("spec", "NVIDIADriver \"x\" spec"). */
int op_driver_settings_check(const json_t *drv, const json_t *spec, const char *path,
                             struct err *e);
/* The kernel module type the driver container is told: driver.kernelModuleType, "open" for
 * the older useOpenKernelModules: true (with the type unset or auto), NULL when neither. */
const char *op_kernel_module_type(const json_t *drv);
/* Applies spec.driver's settings (kernel module type, RDMA, GDS and GDRCopy containers,
 * repository and certificate ConfigMaps, licensing, secretEnv) to the driver DaemonSet's pod
 * spec, as NVIDIA's operator renders them; `gds`/`gdrcopy` are those sections (NULL: off),
 * ctx's os_tag the GPU nodes' OS ("ubuntu22.04"; NULL: unknown), its kernel_module_config the
 * ConfigMap driver.kernelModuleConfig names (NULL: unknown, not mounted); ctx may be NULL. */
void op_driver_settings_apply(json_t *podspec, const json_t *drv, const json_t *gds,
                              const json_t *gdrcopy, const struct op_render_ctx *ctx);

/* NFD's label of a node's kernel (uname -r): precompiled driver DaemonSets select on it. */
#define OP_LABEL_KERNEL "feature.node.kubernetes.io/kernel-version.full"
/* A precompiled driver image, NVIDIA's tag scheme: base:<branch>-<kernel>-<os_tag>, the branch
 * being the version's first number ("595.91.07" -> "595"); `base` alone without a version. */
char *op_precompiled_image(const char *base, const char *version, const char *kernel,
                           const char *os_tag);

/* Labels it as gpuop's, owned by the ClusterPolicy, with the hash of its content. */
void op_finish_object(json_t *obj, const struct op_policy *p);

/* ---- per-pool drivers: NVIDIADriver (nvdriver.c) ------------------------------------------ */

struct op_nvd_input {
    const json_t *nvidia_drivers; /* NVIDIADriver objects; NULL: not listed (yet) */
    const json_t *nodes, *owned;
    const struct op_policy *policy; /* the active, valid ClusterPolicy */
    const struct op_templates *templates;
    /* the ConfigMaps of the policy's namespace (NULL: none listed): each NVIDIADriver's
     * kernelModuleConfig names one */
    const json_t *configmaps;
    bool delegated; /* the policy's driver is on and spec.driver.useNvidiaDriverCRD is true */
    uint64_t now_ms;
};
struct op_nvd_result {
    json_t *objects; /* DaemonSets wanted: rendered ones, and live ones kept as they are */
    json_t *owners;  /* node -> owner label value, or null to remove it; absent: unchanged */
    struct op_report *reports; /* one per NVIDIADriver: op_plan.nvidia_drivers */
    size_t n_reports;
    bool all_ready; /* every NVIDIADriver ready (delegated only) */
    char *why;      /* when not: the ClusterPolicy's DriverReady message */
};
int op_nvd_plan(const struct op_nvd_input *in, struct op_nvd_result *ret, struct err *e);
void op_nvd_result_done(struct op_nvd_result *r);
/* The openAPIV3Schema of the compiled-in NVIDIADriver CRD (borrowed; never NULL). */
const json_t *op_nvidiadriver_schema(void);

/* ---- GPUCluster: the DRA stack (gpucluster.c) --------------------------------------------- */

#define OP_DRA_TEMPLATE "dra-kubelet-plugin.yaml"
#define OP_DRA_DS_NAME  "nvidia-dra-driver-gpu-kubelet-plugin"
/* The status as the GPUCluster CRD holds it (state ready|notReady|disabled, namespace,
 * conditions); `status` is stolen. */
json_t *op_gpucluster_status(json_t *status);
/* The DRA stack appended to `all` (the kubelet plugin's DaemonSet, its RBAC, the DeviceClasses),
 * and the validator's DaemonSet in `all` made to run without the device plugin's check. */
int op_render_dra(const struct op_policy *p, const struct op_templates *t,
                  const struct op_render_ctx *ctx, json_t *all, struct err *e);
/* The openAPIV3Schema of the compiled-in GPUCluster CRD (borrowed; never NULL). */
const json_t *op_gpucluster_schema(void);

#endif
