/* SPDX-License-Identifier: Apache-2.0 */
/*
 * operator: gpuop's control plane. One reconcile loop turns a ClusterPolicy (nvidia.com/v1,
 * NVIDIA GPU Operator's schema) into the components on every GPU node.
 *
 * This header is the pure core, table-tested without a cluster: Kubernetes objects in and out
 * are jansson values (json_t), owned by the caller unless stated otherwise.
 *
 *   op_policy_parse()    ClusterPolicy -> struct op_policy (validated against the CRD schema
 *                        gpuop installs; fields gpuop does not act on are listed, not dropped)
 *   op_node_labels()     a node's labels -> the label patch gpuop wants on it
 *   op_render()          policy -> every object of every enabled component (from the operand
 *                        templates in deploy/operands, compiled in)
 *   op_ds_ready()        a DaemonSet's status -> ready or not, and why
 *   op_plan()            what the cluster holds -> what to write (node labels, objects to
 *                        apply and to prune, each ClusterPolicy's and NVIDIADriver's status,
 *                        Events)
 *
 * Everything here is thread-compatible (no shared state) and does no I/O, except
 * op_templates_load_dir(), which reads an override directory.
 */
#ifndef GPUOP_OPERATOR_H
#define GPUOP_OPERATOR_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "util.h"

/* The components, in NVIDIA's state order. */
enum op_component {
    OP_DRIVER = 0,
    OP_TOOLKIT,
    OP_VALIDATOR,
    OP_DEVICE_PLUGIN,
    OP_DCGM,
    OP_DCGM_EXPORTER,
    OP_GFD,
    OP_MIG_MANAGER,
    OP_NODE_STATUS_EXPORTER,
    OP_N_COMPONENTS
};

struct op_component_def {
    const char *spec_key;     /* "devicePlugin" */
    const char *state;        /* "state-device-plugin" */
    const char *title;        /* "DevicePlugin" (condition types) */
    const char *ds_name;      /* "nvidia-device-plugin-daemonset"; NULL: not deployed by gpuop */
    const char *deploy_label; /* "nvidia.com/gpu.deploy.device-plugin" */
    const char *template;     /* "device-plugin.yaml" */
    bool always_enabled;      /* the validator runs whenever a policy is active */
    bool mig_capable_only;    /* deploy label only on MIG-capable nodes */
};

const struct op_component_def *op_component_def(enum op_component c);

#define OP_LABEL_GPU_PRESENT     "nvidia.com/gpu.present"
#define OP_LABEL_DEPLOY_OPERANDS "nvidia.com/gpu.deploy.operands"
#define OP_LABEL_MIG_CONFIG      "nvidia.com/mig.config"
#define OP_LABEL_MIG_CAPABLE     "nvidia.com/mig.capable"
#define OP_MANAGED_BY            "gpuop"
#define OP_HASH_ANNOTATION       "gpuop.nvidia.com/applied-hash"
/* With spec.driver.useNvidiaDriverCRD: the NVIDIADriver that owns a GPU node (NVIDIA's label;
 * each NVIDIADriver's DaemonSets select on it), and the NVIDIADriver a DaemonSet is for. */
#define OP_LABEL_DRIVER_OWNER  "nvidia.com/gpu-operator.driver.owner"
#define OP_LABEL_NVIDIA_DRIVER "gpuop.dev/nvidia-driver"
#define OP_LABEL_DRIVER_DS     "gpuop.dev/driver-daemonset" /* the selector label */
/* The driver version when spec.driver names none (NVIDIA GPU Operator v26.7.0's default). The
 * chart's driver.version (deploy/helm/gpuop/values.yaml) is the same value: the helm-chart test
 * renders a ClusterPolicy without a version and fails when they differ. */
#define OP_DEFAULT_DRIVER_VERSION "595.91.07"

struct op_operand {
    bool enabled;
    char *image;       /* resolved image reference */
    char *pull_policy; /* "IfNotPresent" unless the policy says otherwise */
    json_t *spec;      /* the policy's section for this component (borrowed from policy->cp) */
};

struct op_defaults {
    const char *namespace;     /* where operands go, e.g. "gpu-operator" */
    const char *operand_image; /* the gpuop image every component but the driver runs */
};

struct op_policy {
    char *name;
    char *uid;
    int64_t generation;
    struct op_operand operand[OP_N_COMPONENTS];
    char *mig_strategy;       /* none|single|mixed */
    char *runtime_class;      /* operator.runtimeClass, default "nvidia" */
    char *update_strategy;    /* daemonsets.updateStrategy */
    json_t *max_unavailable;  /* daemonsets.rollingUpdate.maxUnavailable or NULL */
    char *mig_config_default; /* migManager.config.default, default "all-disabled" */
    char *driver_repository, *driver_image, *driver_version; /* spec.driver image parts */
    bool use_nvidia_driver_crd; /* spec.driver.useNvidiaDriverCRD: NVIDIADrivers own the driver */
    bool psa_enabled;           /* spec.psa.enabled: the namespace's Pod Security labels */
    char *namespace;
    char *operand_image;
    json_t *unimplemented; /* array of "spec.x.y" paths set in the policy that gpuop ignores */
    /* Settings that open GPU isolation or leave GPU pods without GPUs under the nvidia runtime
     * handler (docs/runtime.md): the condition's reason and message; NULL when none. */
    const char *gpu_access_reason;
    char *gpu_access_msg;
    json_t *cp; /* the whole ClusterPolicy object (owned reference) */
    /* Read from a GPUCluster (op_gpucluster_policy): the objects are owned by it, and the DRA
     * stack is rendered (the kubelet plugin instead of the device plugin). */
    bool gpucluster;
    /* A ClusterPolicy whose DriverUpgradePools move nodes to DRA (op_snapshot.dra_nodes): the
     * DRA stack is rendered too, its kubelet plugin on the nodes labelled for it
     * (UPG_LABEL_DEPLOY_DRA, docs/dra.md). */
    bool dra_nodes;
};

/* "ClusterPolicy" or "GPUCluster": the kind the policy was read from. */
const char *op_policy_kind(const struct op_policy *p);

/* A GPUCluster (nvidia.com/v1alpha1, NVIDIA's DRA stack) read as the ClusterPolicy-shaped object
 * op_policy_parse takes (a new object, kind GPUCluster, its metadata and status the
 * GPUCluster's): NVIDIA's defaults for the node stack, the GPUCluster's daemonsets, hostPaths,
 * dcgm and dcgmExporter sections, the device plugin and the MIG manager off, and its draDriver
 * section, from which op_render renders the DRA kubelet plugin and NVIDIA's DeviceClasses. With
 * `nvidia_drivers` (NVIDIADriver objects exist) the driver is theirs (useNvidiaDriverCRD), as
 * NVIDIA's GPUCluster leaves it to them. Fails, naming the field, on what the GPUCluster CRD
 * refuses (its schema, the singleton name, quantities). */
int op_gpucluster_policy(const json_t *gc, bool nvidia_drivers, json_t **ret_cp, struct err *e);

/* Parses and validates a ClusterPolicy object. Invalid input (a wrong type, an unknown enum
 * value, ...) fails with a message naming the field; nothing is half-applied. */
int op_policy_parse(json_t *cp, const struct op_defaults *d, struct op_policy **ret, struct err *e);
void op_policy_free(struct op_policy *p);
DEFINE_CLEANUP_FUNC(struct op_policy, op_policy_free)

/* Validates `value` against an OpenAPI v3 schema of a CRD (the subset CRDs use: type, enum,
 * properties, additionalProperties, items, required, minimum, maxLength, minLength,
 * x-kubernetes-int-or-string, x-kubernetes-preserve-unknown-fields, anyOf). Unknown fields are
 * not errors (the API server prunes them). `path` prefixes messages ("spec"). */
int op_schema_validate(const json_t *schema, const json_t *value, const char *path, struct err *e);
/* The openAPIV3Schema of the compiled-in ClusterPolicy CRD (borrowed; never NULL). */
const json_t *op_clusterpolicy_schema(void);

/* Whether an exporter env entry names a counters file of NVIDIA's dcgm-exporter image
 * (DCGM_EXPORTER_COLLECTORS=/etc/dcgm-exporter/<file>, not a ConfigMap's under custom/): gpuop's
 * image has none, so the entry is left out and the exporter keeps its built-in set. */
bool op_nvidia_exporter_file(const json_t *name, const json_t *value);

/* Is this node a GPU node (NFD PCI labels, or nvidia.com/gpu.present=true without NFD)? */
bool op_node_is_gpu(const json_t *labels);

/*
 * The labels gpuop wants on a node, as a JSON merge patch for metadata.labels: an object of
 * key -> string (set) or null (remove); empty when nothing changes. `p` may be NULL (no active
 * policy: labels are still kept for GPU presence, no deploy labels are added).
 */
int op_node_labels(const json_t *labels, const struct op_policy *p, json_t **ret_patch,
                   struct err *e);

/* Templates: file name -> contents. The compiled-in set is always available; a directory
 * (gpuop operator --operand-templates) replaces files of the same name. */
struct op_templates;
int op_templates_builtin(struct op_templates **ret, struct err *e);
int op_templates_load_dir(struct op_templates *t, const char *dir, struct err *e);
void op_templates_free(struct op_templates *t);
DEFINE_CLEANUP_FUNC(struct op_templates, op_templates_free)

/* The Pod Security labels of the operand namespace, as a JSON merge patch of the Namespace
 * ({"metadata": {"labels", "annotations"}}); NULL when nothing is to be written or `ns` (the
 * Namespace as read) is NULL. With spec.psa.enabled, NVIDIA's labels
 * pod-security.kubernetes.io/{enforce,audit,warn}=privileged (the driver, toolkit and other node
 * agents are privileged pods), only those that differ; the value each replaced (or its absence)
 * is recorded in OP_PSA_ANNOTATION. With it off (p NULL or psa disabled), each recorded label
 * that still reads privileged is put back as it was and the record removed; an administrator's
 * other labels, and labels gpuop did not set, are never touched. */
#define OP_PSA_ANNOTATION "gpuop.dev/pod-security-labels-set"
json_t *op_psa_patch(const struct op_policy *p, const json_t *ns);

/* Context the render needs beyond the policy: the driver image's OS tag from the GPU nodes'
 * NFD os_release labels (e.g. "ubuntu22.04"; NULL when unknown). */
struct op_render_ctx {
    const char *os_tag;
    const char
        *driver_image; /* the driver image, when set (an NVIDIADriver's); else the policy's */
    /* The ConfigMap driver.kernelModuleConfig.name names, as read (its data and binaryData
     * keys are mounted one by one); NULL: not known, nothing is mounted. */
    const json_t *kernel_module_config;
};

/*
 * Renders every object of every enabled component, plus the RuntimeClass, in NVIDIA's order:
 * a JSON array of objects, each with metadata.labels app.kubernetes.io/managed-by=gpuop, an
 * owner reference to the ClusterPolicy and the OP_HASH_ANNOTATION of its own content.
 */
int op_render(const struct op_policy *p, const struct op_templates *t,
              const struct op_render_ctx *ctx, json_t **ret_objects, struct err *e);
/* The driver image for an OS tag: repository/image:version[-os_tag]. */
char *op_driver_image(const struct op_policy *p, const char *os_tag);

/* The stable content hash of an object (its JSON with metadata.annotations[hash] and status
 * excluded, keys sorted), hex. */
char *op_object_hash(const json_t *obj);

/* DaemonSet readiness by NVIDIA's rules; *ret_reason says why not ("2/5 available", ...). */
bool op_ds_ready(const json_t *ds, char *ret_reason, size_t reason_len);

/* The condition `type` put into status.conditions (status: what is about to be written for obj;
 * the array made): a new one (cstatus, reason, message) that keeps the lastTransitionTime of the
 * one obj stores while its status holds, observedGeneration obj's (none without one); or
 * (op_status_condition_keep) the ones obj stores, as they are: the pass that decides the
 * condition could not run. A condition of that type already in status is replaced. */
void op_status_condition_set(json_t *status, const json_t *obj, const char *type, bool cstatus,
                             const char *reason, const char *message, uint64_t now_ms);
void op_status_condition_keep(json_t *status, const json_t *obj, const char *type);

/*
 * What the node agents reported in their node annotations (src/lib/nodestate): *ret_failed gets a
 * line per node with a failed validation (validation.gpuop.dev/<component>), naming the
 * components and their reasons; *ret_mismatch a line per node whose gpu-count annotation says
 * mismatch (advertised fewer GPUs than it has past the grace period), with the counts. Lines
 * start with the node's name and are sorted; new arrays of strings. Annotations that do not
 * parse are skipped.
 */
void op_node_findings(const json_t *nodes, json_t **ret_failed, json_t **ret_mismatch);
/* The node annotations the operator reads (the node informer keeps only those). */
bool op_node_annotation_watched(const char *key);

/*
 * The API server's validation rules for the fields gpuop renders, beyond what the JSON schemas
 * check: names and label syntax, int-or-string as an integer or a percentage, quantities,
 * port and probe ranges, selector and template labels. A real cluster refuses what fails here
 * with 422; the message names the object and the field.
 */
int op_api_validate(const json_t *obj, struct err *e);
bool op_quantity_valid(const char *s);
/* Is the live object what `desired` renders (same content hash, labelled as gpuop's)? An object
 * someone stripped of the managed-by label is out of gpuop's informers and pruning: not current. */
bool op_object_current(const json_t *desired, const json_t *live);

/*
 * The planner: one reconcile's decisions, with no I/O and no clock. The shell reads the world
 * into a snapshot, plans, and executes the plan in this order: each ignored policy's events and
 * status; for the active policy, node patches, applies, (when every apply succeeded) prunes,
 * then its events and status. A status is written only when `write` is set (it differs from the
 * stored one), so a converged cluster costs no writes. The plan is typed; JSON appears only
 * where it is a Kubernetes object's body (the objects to apply, a status, a label patch).
 */

/* An object the last execution failed to write, and why. */
struct op_write_error {
    char *object; /* "DaemonSet gpu-operator/nvidia-driver-daemonset", "Node gpu-1" */
    char *reason;
};
struct op_write_errors {
    struct op_write_error *v;
    size_t n;
};
void op_write_errors_add(struct op_write_errors *w, const char *object, const char *reason);
bool op_write_errors_equal(const struct op_write_errors *a, const struct op_write_errors *b);
void op_write_errors_done(struct op_write_errors *w);

struct op_snapshot {
    const json_t *policies; /* ClusterPolicy objects (array), freshest known */
    const json_t *nodes;    /* Node objects (array; metadata.labels and the annotations
                               op_node_annotation_watched names are all that is read) */
    const json_t *owned;    /* every object gpuop's informers hold, any owned kind (array) */
    /* What the previous execution failed to write; NULL or empty when it succeeded. */
    const struct op_write_errors *apply_errors;
    const struct op_defaults *defaults;
    const struct op_templates *templates;
    uint64_t now_ms; /* wall clock (ms since the epoch): condition transition times */
    /* More findings for the active policy, each a condition while it has lines (an Event of
     * event_type when its message changes, a Normal one when it clears): [{"type", "reason",
     * "event_type", "lines": [...], "cleared_reason", "cleared_message"}]; NULL: none.
     * op_gpuquota_findings() makes the GPU quota ones. */
    const json_t *findings;
    /* NVIDIADriver objects (nvidia.com/v1alpha1); NULL when not listed (yet): with
     * useNvidiaDriverCRD every NVIDIADriver DaemonSet then stays as it is. */
    const json_t *nvidia_drivers;
    /* The operand namespace (a Namespace object); NULL when not read: its Pod Security labels
     * are then left as they are. */
    const json_t *namespace_obj;
    /* The ConfigMaps of the operand namespace the policies name in
     * spec.driver.kernelModuleConfig.name, as read (an array; NULL: none). One a policy names
     * and that is not here does not exist: its driver DaemonSets are left as they are. */
    const json_t *configmaps;
    /* The ServiceMonitor kind is served (the Prometheus Operator's CRD is installed): without it
     * a rendered ServiceMonitor is left out, as NVIDIA's operator does. */
    bool servicemonitor_served;
    /* Some node runs DRA or is moving to it, or a DriverUpgradePool asks for it
     * (upg_alloc_dra_wanted): a ClusterPolicy renders the DRA stack beside the device plugin. */
    bool dra_nodes;
};

struct op_event {
    const char *type; /* "Normal" or "Warning" */
    const char *reason;
    char *message;
};

/* What a ClusterPolicy's or an NVIDIADriver's reconcile reports. */
struct op_report {
    char *name;
    json_t *object; /* the ClusterPolicy or NVIDIADriver as read (a reference) */
    json_t *status; /* its status as it should read */
    bool write;     /* status differs from the stored one */
    struct op_event *events;
    size_t n_events;
};

struct op_policy_report {
    struct op_report r;
    bool active; /* the one reconciled; the others are ignored */
    bool valid;  /* it parsed and validated: its operands are planned */
};

struct op_node_patch {
    char *node;
    /* merge patch of metadata.labels: key -> string, or null to remove; one value for every
     * node whose patch is alike (held once), so read-only */
    json_t *labels;
};

/* An object to delete. */
struct op_object_ref {
    char *kind;
    char *ns; /* NULL: cluster-scoped */
    char *name;
};

struct op_plan {
    /* One per ClusterPolicy that is not being deleted, ignored ones first, the active one last
     * (`active` points at it; NULL: none). */
    struct op_policy_report *policies;
    size_t n_policies;
    struct op_policy_report *active;
    struct op_node_patch *node_patches; /* only nodes that change */
    size_t n_node_patches;
    /* {node: true}: the GPU nodes a driver DaemonSet of the active policy targets once the node
     * patches are written. The driver upgrade reads it: such a node with no driver pod yet will
     * run the current template, and is recorded upgrade-done in that same patch. */
    json_t *driver_nodes;
    /* A merge patch of the operand namespace (op_psa_patch); NULL: none. */
    json_t *namespace_patch;
    json_t *desired; /* every object the active policy renders (an array; empty when none) */
    json_t *apply;   /* the desired objects not current in the snapshot, in order */
    struct op_object_ref *prune;
    size_t n_prune;
    /* One per NVIDIADriver while a valid ClusterPolicy is active. */
    struct op_report *nvidia_drivers;
    size_t n_nvidia_drivers;
    int gpu_nodes; /* GPU nodes seen */
    /* The active policy renders a ServiceMonitor whose kind is not served: none is written
     * (its status says so); the shell looks again in a while. */
    bool servicemonitor_missing;
    bool has_active; /* a ClusterPolicy is active (valid or not) */
    int health;      /* active policy: 1 ready, 0 not ready, -1 invalid */
    bool requeue;    /* not ready: look again in a while even without events */
};

/* Fails only on a broken template (the active policy's render); an invalid ClusterPolicy is a
 * plan (its status says why), not an error. */
int op_plan(const struct op_snapshot *s, struct op_plan **ret, struct err *e);
void op_plan_free(struct op_plan *p);
DEFINE_CLEANUP_FUNC(struct op_plan, op_plan_free)

/* ---- one write per node: the controllers' wishes merged (nodemerge.c) --------------------- */

/*
 * Several controllers want things on a node at the same moment: the deploy labels (op_plan),
 * the driver upgrade's state label, annotations and cordon (src/lib/upgrade), and more to come.
 * Each says what it wants as a wish; op_node_merge() makes them one merge patch per node, so
 * that a node costs one write, by one rule for wishes that disagree:
 *   1. a field (a label, an annotation, spec.unschedulable) takes one value;
 *   2. a cordon holds: spec.unschedulable true wins over false, whoever asks (no controller
 *      puts a node back in service that another takes out of it);
 *   3. otherwise the controller first in the table wins; the others' wishes for that field are
 *      dropped and named in the conflicts;
 *   4. a wish planned from a resourceVersion (metadata.resourceVersion, a precondition) makes
 *      the patch carry it; a wish planned from another version than the first ranked one is
 *      dropped whole (its controller plans again from the node as it is then). A patch with a
 *      precondition also comes with a fallback: the wishes planned without one, written alone
 *      when the server refuses the whole patch because the node changed (409).
 * A controller that wants nothing of a node has no wish for it: a node already as wanted costs
 * nothing.
 */
struct op_node_controller {
    const char *name; /* "driver-upgrade", in logs */
    /* its wishes change what runs on the node (the operand DaemonSets select on its labels):
     * the executor writes them before the status (enum op_write_phase) */
    bool deploys;
};
/* One controller's wish for one node: a JSON merge patch of the Node setting only
 * metadata.labels and metadata.annotations (key -> string, or null to remove),
 * spec.unschedulable, and optionally metadata.resourceVersion (the version it was planned
 * from). */
struct op_node_wish {
    const char *node;
    size_t controller;   /* index into the controllers' table */
    const json_t *patch; /* borrowed */
};
struct op_node_conflict {
    char *field;          /* "metadata.labels.nvidia.com/x", "spec.unschedulable" */
    size_t winner, loser; /* controllers */
};
struct op_node_merged {
    json_t *patch;        /* the node's one patch; NULL: nothing to write */
    json_t *fallback;     /* the wishes planned without a precondition, alone; NULL: none needed */
    uint64_t controllers; /* bit c: controller c has a wish in patch */
    bool deploys;         /* one of them deploys */
    struct op_node_conflict *conflicts;
    size_t n_conflicts;
};
/* Merges the wishes for one node (every w[i].node the same; in any order) by the rule above.
 * -EINVAL for a wish that sets anything else, or for wishes of several nodes. */
int op_node_merge(const struct op_node_controller *ctl, size_t n_ctl, const struct op_node_wish *w,
                  size_t n, struct op_node_merged *ret, struct err *e);
void op_node_merged_done(struct op_node_merged *m);

/* The executor's order of writes in a reconcile (reconcile.c), one rule: what readiness depends
 * on goes first, the status next, bookkeeping after it, so that bookkeeping never delays what
 * the ClusterPolicy's status says. */
enum op_write_phase {
    OP_PHASE_DEPLOY,      /* node patches that carry a deploying controller's wish */
    OP_PHASE_OBJECTS,     /* operand objects applied, then pruned */
    OP_PHASE_STATUS,      /* the NVIDIADrivers' and the ClusterPolicy's statuses */
    OP_PHASE_BOOKKEEPING, /* the other node patches; the upgrade's evictions and pod deletions
                             (each after its node's patch); the DriverUpgradePools' statuses */
    OP_PHASE_EVENTS,      /* Events, aggregated and rate-limited (op_recorder) */
};
/* The phase a merged node patch is written in. */
enum op_write_phase op_node_patch_phase(const struct op_node_merged *m);

/* ---- Events that scale (recorder.c) -------------------------------------------------------- */

/*
 * The operator's Events go through one recorder, shaped as the Kubernetes event recorder shapes
 * a controller's:
 *   - aggregation: Events alike (type, reason, message) about OP_EVENT_AGGREGATE_MIN or more
 *     objects of one kind in one group (the driver upgrade's: a pool) in one pass become one
 *     Event about the group's object, its count the number of objects and its message naming a
 *     sample ("... on 1000 nodes: gpu-1, gpu-2, gpu-3, gpu-4, gpu-5 and 995 more"); later alike
 *     Events of the group within the window count it up;
 *   - counting up: an Event repeated within OP_EVENT_WINDOW_MS about the same object updates
 *     the one posted (count, lastTimestamp, series: kubectl shows "(x3 over 5m)") instead of
 *     making another;
 *   - a token bucket per source and object (OP_EVENT_BURST, one more every
 *     OP_EVENT_REFILL_MS, as client-go's recorder): an Event past it is dropped, and counted.
 * What a user needs per node is in the node's own labels and `gpuop status`. The recorder
 * keeps its memory bounded; it is not thread-safe (the reconcile thread owns it).
 */
#define OP_EVENT_AGGREGATE_MIN 10
#define OP_EVENT_WINDOW_MS     (10 * 60 * 1000)
#define OP_EVENT_BURST         25
#define OP_EVENT_REFILL_MS     (5 * 60 * 1000)
#define OP_EVENT_SAMPLE        5

struct op_recorder_opts {
    const char *component; /* source.component; NULL: "gpuop-operator" */
    unsigned burst;        /* 0: the defaults above */
    uint64_t refill_ms;
    unsigned aggregate_min;
    uint64_t window_ms;
    unsigned sample;
};
/* An object an Event is about (strings borrowed). */
struct op_event_ref {
    const char *api_version, *kind, *ns, *name, *uid; /* ns, uid: NULL when none */
};
struct op_event_in {
    struct op_event_ref about;
    const char *ns; /* the Event's namespace */
    const char *type, *reason, *message;
    /* Events of one group may be aggregated into one about group_ref (in group_ns); NULL:
     * never aggregated (an Event about the ClusterPolicy itself) */
    const char *group;
    struct op_event_ref group_ref;
    const char *group_ns;
    /* Further distinct objects of this group the Event is also about, beyond those with an
     * entry of their own (a queue keeps OP_EVENT_QUEUE_KEEP a group; the rest count here) */
    size_t more;
};
struct op_event_write {
    bool patch; /* false: create `body`; true: merge-patch Event ns/name with `body` */
    char *ns, *name;
    json_t *body;
    /* patch: the whole Event as counted, to create under the same name when the one to count
     * up is gone (deleted with its namespace, expired) */
    json_t *recreate;
    char *key; /* the recorder's, for op_recorder_result */
};
struct op_event_writes {
    struct op_event_write *v;
    size_t n;
    size_t dropped; /* Events the token buckets held back */
};
struct op_recorder;
struct op_recorder *op_recorder_new(const struct op_recorder_opts *o);
void op_recorder_free(struct op_recorder *r);
DEFINE_CLEANUP_FUNC(struct op_recorder, op_recorder_free)
/* One pass's Events (in order) to the writes that post them, in order. */
void op_recorder_plan(struct op_recorder *r, const struct op_event_in *ev, size_t n,
                      uint64_t now_ms, struct op_event_writes *ret);
/* What became of a write: one that failed is forgotten, so that a repeat posts anew. */
void op_recorder_result(struct op_recorder *r, const struct op_event_write *w, bool ok);
void op_event_writes_done(struct op_event_writes *w);
/* A queue of Events that owns copies of their strings, so that a reconcile collects its
 * controllers' Events as it goes and plans them once, at its end. A group's Events past its
 * first OP_EVENT_QUEUE_KEEP distinct objects keep only their objects' names, to count them
 * (the recorder aggregates such a group whatever its options: aggregate_min is at most this):
 * an upgrade pass over 10,000 nodes queues 64 Events and 10,000 names, not 10,000 Events. */
#define OP_EVENT_QUEUE_KEEP 64
json_t *op_event_queue_new(void);
void op_event_queue_add(json_t *queue, const struct op_event_in *ev);
/* The queue's Events, borrowing its strings (valid while the queue is unchanged); a group's
 * first Event carries the count of its objects past the kept ones (op_event_in.more). */
struct op_event_in *op_event_queue_view(const json_t *queue, size_t *ret_n);

/* ---- GPU quotas against advertised capacity (gpuquota.c; the view is src/lib/capacity's) --------
 */

struct cap_view;
struct prom_writer;
/* The view's findings for op_snapshot.findings: GPUQuotaOvercommitted (a resource's quotas past
 * the threshold times what is advertised), GPUPoolBelowQuota (a pool advertising less than the
 * quotas pinned to it, naming the pool and the namespaces), GPUQuotaMissing (namespaces with GPU
 * pods and no GPU quota; listed, Normal Events). A new array. */
json_t *op_gpuquota_findings(const struct cap_view *v);
/* gpuop_gpu_capacity{resource,pool} and the other gpuop_gpu_* families of the view. */
void op_gpuquota_metrics(const struct cap_view *v, struct prom_writer *w);
/* Whether the view counts a pod at all: a container requesting or limited to a GPU resource
 * (cap_gpu_resource), or a DRA resource claim. A pod's requests and claims cannot change. */
bool op_gpuquota_pod_counts(const json_t *pod);
/* What the JSON text of every pod op_gpuquota_pod_counts keeps holds (kube_informer_opts.
 * prefilter's groups, for the pod informer): "nvidia.com/" with "requests" or "limits", or
 * "resourceClaims". An operand pod (its tolerations and node selector name nvidia.com/ labels,
 * but it requests nothing) holds none whole. A pod the view reads through an extended resource
 * that a DeviceClass maps to DRA requests it by the class's extendedResourceName, which the view
 * maps only when it is a GPU resource (nvidia.com/...; src/lib/capacity): the same groups. */
extern const char *const *const op_gpuquota_pod_texts[];

#endif
