/* SPDX-License-Identifier: Apache-2.0 */
/*
 * statusview: the view of `gpuop status`, the cluster at a glance from the API server alone
 * (docs/status-and-doctor.md). The shells (`gpuop status`'s status-main.c, `gpuop gather`) list
 * the objects; this core turns them into a view model and the view model into text or JSON:
 *
 *     objects (struct st_objects) --section.model--> JSON view model --section.text--> text
 *                                                                    `-> -o json as it is
 *
 * The output is a list of sections (st_sections: the summary with the three facts a cluster must
 * answer, the driver pools, the nodes, the GPU remediation, GPU capacity against namespace
 * quotas), each a pair of pure
 * functions: model (the fetched objects to a JSON value, the section's entry in -o json) and text
 * (that value to lines). A new section is one more entry in the list.
 *
 * Pure: no I/O, no clock (now comes in with the objects and the view). Thread-compatible.
 */
#ifndef GPUOP_STATUSVIEW_H
#define GPUOP_STATUSVIEW_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "capacity.h"
#include "util.h"

/* What the shell read; every array borrowed, none NULL (an empty array when absent). */
struct st_objects {
    json_t *policies;      /* ClusterPolicy items */
    json_t *drivers;       /* NVIDIADriver items (empty when the CRD is not installed) */
    json_t *nodes;         /* Node items */
    json_t *events;        /* Events about nodes (the drain records), any namespace */
    json_t *pods;          /* Pod items, every namespace (the capacity view's requests) */
    json_t *quotas;        /* ResourceQuota items, every namespace */
    json_t *upgrade_pools; /* DriverUpgradePool items (their breakers); may be NULL: none */
    json_t *slices;        /* ResourceSlice items (DRA); may be NULL: none */
    json_t *claims;        /* ResourceClaim items, every namespace (DRA); may be NULL: none */
    json_t *classes;       /* DeviceClass items (DRA quotas' resources); may be NULL: none */
    uint64_t now_ms;       /* wall clock, unix ms */
    /* The capacity view's pools (NULL, 0: one per GPU product) and over-commit threshold
     * (0: CAP_DEFAULT_RATIO), as the operator's --gpu-pool and --gpu-quota-overcommit-ratio. */
    const struct cap_pool_def *pools;
    size_t n_pools;
    double overcommit_ratio;
};

/* How text is drawn. */
struct st_view {
    bool color;      /* ANSI colours (a terminal that wants them) */
    unsigned width;  /* the terminal's columns; 0: unlimited (not a terminal) */
    bool wide;       /* -o wide: more columns, nothing cut */
    uint64_t now_ms; /* for ages ("5m ago") */
};

struct st_section {
    const char *name; /* its key in -o json: "summary", "pools", "nodes", "remediation", ... */
    /* The view model: a new JSON value (object or array). */
    json_t *(*model)(const struct st_objects *in);
    /* Appends the section's lines (each ending in '\n') to out. */
    void (*text)(const json_t *model, const struct st_view *v, struct sbuf *out);
};

/* The sections in output order, ended by {0}. */
extern const struct st_section st_sections[];

/* {"<name>": model, ...} of every section; a new object. */
json_t *st_model(const struct st_objects *in, const struct st_section *sections);
/* The text of every section in order, a blank line between them; malloc'ed into *ret. -E2BIG
 * when it passes max bytes (never cut silently). */
int st_render_text(const json_t *model, const struct st_section *sections, const struct st_view *v,
                   size_t max, char **ret, struct err *e);

/* ---- pieces, exposed for the tests -------------------------------------------------------- */

/* The sections' models: the three facts and the node counts; the pools; the GPU nodes. */
json_t *st_summary_model(const struct st_objects *in);
json_t *st_pools_model(const struct st_objects *in);
json_t *st_nodes_model(const struct st_objects *in);
/* The GPU nodes with a fault or a remediation state (state, action, the event, since when, why
 * it waits or failed), the breakers that are open, the GPURemediation condition. */
json_t *st_remediation_model(const struct st_objects *in);
/* Per node, the devices the GPU DRA driver (gpu.nvidia.com) publishes in its ResourceSlices (by
 * their type attribute) and the claims allocated on them with the pods that hold them:
 * {"driver", "nodes": [{"name", "devices", "types": {type: n}, "allocated", "claims":
 * [{"namespace", "name", "devices", "pods"}]}]}, nodes by name. */
json_t *st_dra_model(const struct st_objects *in);
void st_dra_text(const json_t *model, const struct st_view *v, struct sbuf *out);
/* The DriverUpgradePools' status.gpuAllocation (docs/dra.md, a pool on DRA node by node):
 * {"pools": [{"name", "target", "progress", "moving", "waiting", "error"?}]}, pools without one
 * left out; the text says nothing without pools. */
json_t *st_alloc_model(const struct st_objects *in);
void st_alloc_text(const json_t *model, const struct st_view *v, struct sbuf *out);
/* capacity.h's view of nodes, pods and quotas (cap_view_to_json); {"error": "..."} when the
 * objects are not lists. */
json_t *st_capacity_model(const struct st_objects *in);

/* The ClusterPolicy's last change: the managedFields entry with the latest time among those
 * that set spec fields outside a subresource (else among all entries outside a subresource):
 * {"manager","operation","time"}, or NULL when it has none. A new reference. */
json_t *st_last_change(const json_t *policy);

/* The pool a node belongs to: the NVIDIADriver that owns it (NVIDIA's label
 * nvidia.com/gpu-operator.driver.owner, which the operator sets), else the one whose
 * spec.nodeSelector its labels match ("nvidiadriver/<name>"), else its OS ("ubuntu22.04", from
 * NFD's os_release labels), else "unknown". buf >= 128 bytes. */
void st_node_pool(const json_t *node, const json_t *drivers, char *buf, size_t n);

/* A node's architecture as Kubernetes names it ("amd64", "arm64"): the kubelet's
 * status.nodeInfo.architecture, else the kubernetes.io/arch label; NULL when neither. */
const char *st_node_arch(const json_t *node);

/* Whether a node has (or had) NVIDIA GPUs: NFD's PCI label (vendor 10de), GFD's labels, gpuop's
 * node annotations, or nvidia.com resources in its allocatable. */
bool st_gpu_node(const json_t *node);

/* A table: rows of cells, column titles, the last column the one cut first to fit width; cells
 * may carry a colour ('\x01' + code letter at the start: g green, y yellow, r red, b bold). */
void st_table(struct sbuf *out, const char *const *titles, size_t ncols, json_t *rows,
              const struct st_view *v);

#endif
