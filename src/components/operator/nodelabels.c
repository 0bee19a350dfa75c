/* SPDX-License-Identifier: Apache-2.0 */
/* The labels gpuop keeps on each node: GPU presence and the per-component deploy labels the
 * operand DaemonSets select on. */
#include <ctype.h>
#include <string.h>

#include "kobj.h"
#include "operator-internal.h"
#include "operator.h"

static const char *const nfd_gpu_labels[] = {
    "feature.node.kubernetes.io/pci-10de.present",
    "feature.node.kubernetes.io/pci-0302_10de.present",
    "feature.node.kubernetes.io/pci-0300_10de.present",
    NULL,
};

const char *op_label_after(const json_t *labels, const json_t *patch, const char *key)
{
    json_t *v = json_object_get(patch, key);
    if (v)
        return json_string_value(v); /* null: removed */
    return kobj_labels_get(labels, key);
}

/* Whether the node has a label of NFD's once `patch` is written (any value counts). */
static bool has_nfd_labels(const json_t *labels, const json_t *patch)
{
    static const char nfd[] = "feature.node.kubernetes.io/";
    const char *k, *v;
    kobj_labels_foreach (labels, it, k, v) {
        if (str_has_prefix(k, nfd) && !json_is_null(json_object_get(patch, k)))
            return true;
    }
    const char *pk;
    json_t *pv;
    json_object_foreach ((json_t *)patch, pk, pv) {
        if (str_has_prefix(pk, nfd) && !json_is_null(pv))
            return true;
    }
    return false;
}

/*
 * With NFD on the node, its PCI labels decide (so gpu.present follows them when they go away);
 * without NFD, an administrator's nvidia.com/gpu.present=true marks a GPU node.
 */
bool op_node_is_gpu_after(const json_t *labels, const json_t *patch)
{
    for (const char *const *k = nfd_gpu_labels; *k; k++)
        if (streq_ptr(op_label_after(labels, patch, *k), "true"))
            return true;
    if (has_nfd_labels(labels, patch))
        return false;
    return streq_ptr(op_label_after(labels, patch, OP_LABEL_GPU_PRESENT), "true");
}

bool op_node_is_gpu(const json_t *labels)
{
    return op_node_is_gpu_after(labels, NULL);
}

static bool contains_ci(const char *hay, const char *needle)
{
    if (!hay)
        return false;
    size_t n = strlen(needle);
    for (const char *p = hay; *p; p++)
        if (strncasecmp(p, needle, n) == 0)
            return true;
    return false;
}

enum mig_capability { MIG_UNKNOWN, MIG_NO, MIG_YES };

/* MIG capability as GPU feature discovery reports it, else guessed from the product name;
 * unknown when neither label is there: feature discovery paused (by the MIG manager during a
 * change, by the driver manager) has taken its labels away, which says nothing of the GPUs. */
static enum mig_capability node_mig_capable(const json_t *labels)
{
    const char *cap = kobj_labels_get(labels, OP_LABEL_MIG_CAPABLE);
    if (cap)
        return strcmp(cap, "true") == 0 ? MIG_YES : MIG_NO;
    const char *product = kobj_labels_get(labels, "nvidia.com/gpu.product");
    if (!product)
        return MIG_UNKNOWN;
    return contains_ci(product, "h100") || contains_ci(product, "a100") ||
                   contains_ci(product, "a30") || contains_ci(product, "h200")
               ? MIG_YES
               : MIG_NO;
}

static void want(json_t *patch, const json_t *labels, const char *key, const char *value)
{
    const char *cur = kobj_labels_get(labels, key);
    if (value) {
        if (!streq_ptr(cur, value))
            json_object_set_new(patch, key, json_string(value));
    } else if (kobj_labels_has(labels, key)) {
        json_object_set_new(patch, key, json_null());
    }
}

int op_node_labels(const json_t *labels, const struct op_policy *p, json_t **ret_patch,
                   struct err *e)
{
    (void)e;
    json_t *empty = NULL;
    if (!json_is_object(labels) && !kobj_labels_is_compact(labels))
        labels = empty = json_object();
    json_t *patch = json_object();
    bool gpu = op_node_is_gpu(labels);
    bool operands_off = streq_ptr(kobj_labels_get(labels, OP_LABEL_DEPLOY_OPERANDS), "false");

    if (!gpu) {
        want(patch, labels, OP_LABEL_GPU_PRESENT, NULL);
        for (int c = 0; c < OP_N_COMPONENTS; c++)
            want(patch, labels, op_component_def(c)->deploy_label, NULL);
    } else {
        want(patch, labels, OP_LABEL_GPU_PRESENT, "true");
        enum mig_capability mig = node_mig_capable(labels);
        bool mig_capable = mig == MIG_YES;
        for (int c = 0; c < OP_N_COMPONENTS && p; c++) {
            const struct op_component_def *def = op_component_def(c);
            const char *cur = kobj_labels_get(labels, def->deploy_label);
            if (operands_off || (def->mig_capable_only && mig == MIG_NO)) {
                want(patch, labels, def->deploy_label, NULL);
                continue;
            }
            /* Unknown: as it is. Removing it would stop the MIG manager in the middle of the
             * change that paused feature discovery. */
            if (def->mig_capable_only && mig == MIG_UNKNOWN)
                continue;
            /* Only fill in: a value others wrote (false, pre-installed, paused-for-...) stands. */
            if (!cur || !*cur)
                json_object_set_new(patch, def->deploy_label, json_string("true"));
        }
        /* migManager.config.default "": MIG-capable nodes are left unlabelled (their layout
         * stays as it is until someone names one). */
        if (p && !operands_off && mig_capable && p->operand[OP_MIG_MANAGER].enabled &&
            p->mig_config_default[0] && !kobj_labels_has(labels, OP_LABEL_MIG_CONFIG))
            json_object_set_new(patch, OP_LABEL_MIG_CONFIG, json_string(p->mig_config_default));
    }
    json_decref(empty);
    *ret_patch = patch;
    return 0;
}
