/* SPDX-License-Identifier: Apache-2.0 */
/* Readiness of what the operator deployed, by the rules NVIDIA's operator uses; what the node
 * agents reported in their annotations; a condition put into a status about to be written. */
#include <stdlib.h>
#include <string.h>

#include "kobj.h"
#include "nodestate.h"
#include "operator.h"

static json_int_t st_int(const json_t *status, const char *key)
{
    json_t *v = json_object_get(status, key);
    return json_is_integer(v) ? json_integer_value(v) : 0;
}

bool op_ds_ready(const json_t *ds, char *ret_reason, size_t reason_len)
{
    const json_t *status = json_object_get(ds, "status");
    json_int_t desired = st_int(status, "desiredNumberScheduled");
    json_int_t unavailable = st_int(status, "numberUnavailable");
    json_int_t available = st_int(status, "numberAvailable");
    json_int_t updated = st_int(status, "updatedNumberScheduled");
    json_int_t ready = st_int(status, "numberReady");
    json_int_t observed = st_int(status, "observedGeneration");
    json_t *g = json_object_get(json_object_get(ds, "metadata"), "generation");
    json_int_t generation = json_is_integer(g) ? json_integer_value(g) : 0;
    const char *strategy = json_string_value(
        json_object_get(json_object_get(json_object_get(ds, "spec"), "updateStrategy"), "type"));
    char tmp[1];
    if (!ret_reason) {
        ret_reason = tmp;
        reason_len = sizeof(tmp);
    }
    ret_reason[0] = '\0';
    if (!status) {
        snprintf(ret_reason, reason_len, "no status yet");
        return false;
    }
    /* Before anything the status says: a DaemonSet just created or changed has a status the
     * DaemonSet controller has not written yet (desired 0 reads as "no nodes to run on"). */
    if (observed < generation) {
        snprintf(ret_reason, reason_len, "generation %lld not yet observed", (long long)generation);
        return false;
    }
    if (desired == 0) {
        snprintf(ret_reason, reason_len, "no nodes to run on");
        return true;
    }
    if (unavailable != 0) {
        snprintf(ret_reason, reason_len, "%lld of %lld pods unavailable", (long long)unavailable,
                 (long long)desired);
        return false;
    }
    if (strategy && strcmp(strategy, "OnDelete") == 0) {
        /* Pods are replaced node by node by the upgrade flow; ready when all run and are ready. */
        if (ready != desired) {
            snprintf(ret_reason, reason_len, "%lld/%lld pods ready", (long long)ready,
                     (long long)desired);
            return false;
        }
        return true;
    }
    if (updated != desired || available != desired) {
        snprintf(ret_reason, reason_len, "%lld/%lld updated, %lld/%lld available",
                 (long long)updated, (long long)desired, (long long)available, (long long)desired);
        return false;
    }
    return true;
}

/* ---- what the node agents found ----------------------------------------------------------- */

bool op_node_annotation_watched(const char *key)
{
    return key && (str_has_prefix(key, NODESTATE_ANN_VALIDATION_PREFIX) ||
                   strcmp(key, NODESTATE_ANN_GPU_COUNT) == 0 ||
                   strcmp(key, NODESTATE_ANN_DRIVER_OWNER) == 0);
}

static int cmp_json_str(const void *a, const void *b)
{
    return strcmp(json_string_value(*(json_t *const *)a), json_string_value(*(json_t *const *)b));
}

/* Sorts an array of strings in place (node names lead each line, so lines sort by node). */
static void sort_lines(json_t *lines)
{
    size_t n = json_array_size(lines);
    if (n < 2)
        return;
    json_t **v = xcalloc(n, sizeof(*v));
    for (size_t i = 0; i < n; i++)
        v[i] = json_incref(json_array_get(lines, i));
    qsort(v, n, sizeof(*v), cmp_json_str);
    json_array_clear(lines);
    for (size_t i = 0; i < n; i++)
        json_array_append_new(lines, v[i]);
    free(v);
}

/* "gpu-2: driver: <reason>; plugin: <reason>", or NULL when no validation failed. */
static char *failed_line(const json_t *node)
{
    struct sbuf b _cleanup_sbuf_;
    sbuf_init(&b, 8192);
    size_t n = 0;
    for (int c = 0; c < NODESTATE_COMP_COUNT; c++) {
        char key[96];
        nodestate_validation_key(c, key, sizeof(key));
        const char *text = kobj_annotation(node, key);
        struct nodestate_validation v;
        struct err e = {0};
        if (!text || nodestate_validation_parse(text, &v, &e) < 0 || v.state != NODESTATE_V_FAILED)
            continue;
        sbuf_addf(&b, "%s%s: %s", n++ ? "; " : "", nodestate_component_name(c),
                  v.reason[0] ? v.reason : "failed");
    }
    if (n == 0 || b.error)
        return NULL;
    return xasprintf("%s: %s", kobj_name(node) ?: "?", b.data);
}

/* "gpu-2: 8 GPUs, nvidia.com/gpu: 7 of 8 advertised, GPU-... (lost), since <time>" (what the
 * exporter named as missing; the per-resource counts when it named nothing), or NULL when the
 * node's gpu-count annotation reports no mismatch. */
static char *mismatch_line(const json_t *node)
{
    const char *text = kobj_annotation(node, NODESTATE_ANN_GPU_COUNT);
    if (!text)
        return NULL;
    _cleanup_free_ struct nodestate_gpu_count *c = xcalloc(1, sizeof(*c));
    struct err e = {0};
    if (nodestate_gpu_count_parse(text, c, &e) < 0 || !c->mismatch)
        return NULL;
    struct sbuf b _cleanup_sbuf_;
    sbuf_init(&b, 8192);
    sbuf_addf(&b, "%s: %lld GPUs", kobj_name(node) ?: "?", (long long)c->physical);
    for (size_t i = 0; i < c->n_missing && i < 6; i++)
        sbuf_addf(&b, ", %s", c->missing[i]);
    if (c->n_missing > 6)
        sbuf_addf(&b, ", and %zu more", c->n_missing - 6);
    for (size_t i = 0; i < c->n_expected && c->n_missing == 0; i++) {
        int64_t adv = 0;
        for (size_t j = 0; j < c->n_advertised; j++)
            if (strcmp(c->advertised[j].name, c->expected[i].name) == 0)
                adv = c->advertised[j].count;
        if (adv < c->expected[i].count)
            sbuf_addf(&b, ", %s: %lld of %lld advertised", c->expected[i].name, (long long)adv,
                      (long long)c->expected[i].count);
    }
    if (c->since[0])
        sbuf_addf(&b, ", since %s", c->since);
    return b.error ? NULL : sbuf_steal(&b);
}

void op_node_findings(const json_t *nodes, json_t **ret_failed, json_t **ret_mismatch)
{
    json_t *failed = json_array(), *mismatch = json_array();
    size_t i;
    const json_t *n;
    json_array_foreach (nodes, i, n) {
        char *line = failed_line(n);
        if (line)
            json_array_append_new(failed, json_string(line));
        free(line);
        line = mismatch_line(n);
        if (line)
            json_array_append_new(mismatch, json_string(line));
        free(line);
    }
    sort_lines(failed);
    sort_lines(mismatch);
    *ret_failed = failed;
    *ret_mismatch = mismatch;
}

static json_t *status_conditions(json_t *status)
{
    json_t *conds = json_object_get(status, "conditions");
    if (!json_is_array(conds)) {
        conds = json_array();
        json_object_set_new(status, "conditions", conds);
    }
    return conds;
}

void op_status_condition_set(json_t *status, const json_t *obj, const char *type, bool cstatus,
                             const char *reason, const char *message, uint64_t now_ms)
{
    json_t *conds = status_conditions(status);
    char now[40];
    time_rfc3339(now_ms, now, sizeof(now));
    json_t *gen = kobj_path(obj, "metadata.generation");
    kobj_conditions_put(conds, kobj_condition(kobj_path(obj, "status.conditions"), type, cstatus,
                                              reason, message, now,
                                              json_is_integer(gen) ? json_integer_value(gen) : -1));
}

void op_status_condition_keep(json_t *status, const json_t *obj, const char *type)
{
    json_t *conds = status_conditions(status);
    size_t i;
    json_t *sc;
    json_array_foreach (kobj_path(obj, "status.conditions"), i, sc) {
        if (streq_ptr(kobj_str(sc, "type"), type))
            kobj_conditions_put(conds, json_incref(sc));
    }
}
