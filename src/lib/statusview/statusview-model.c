/* SPDX-License-Identifier: Apache-2.0 */
/* gpuop status: the fetched objects to the view model (statusview.h), one function per section. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kobj.h"
#include "nodestate.h"
#include "statusview.h"

#define LABEL_UPGRADE_STATE "nvidia.com/gpu-driver-upgrade-state"
#define LABEL_MIG_CONFIG    "nvidia.com/mig.config"
#define LABEL_MIG_STATE     "nvidia.com/mig.config.state"
#define LABEL_MIG_STRATEGY  "nvidia.com/mig.strategy"
#define LABEL_GPU_COUNT     "nvidia.com/gpu.count"
#define LABEL_DRIVER_OWNER  "nvidia.com/gpu-operator.driver.owner" /* NVIDIADriver pools */
#define LABEL_OS_ID         "feature.node.kubernetes.io/system-os_release.ID"
#define LABEL_OS_VERSION    "feature.node.kubernetes.io/system-os_release.VERSION_ID"

/* ---- helpers ------------------------------------------------------------------------------ */

/* a later than b (RFC 3339 UTC times; an unparsable one is older than any). */
static bool time_after(const char *a, const char *b)
{
    uint64_t ta = 0, tb = 0;
    bool oka = a && time_parse_rfc3339(a, &ta) == 0;
    bool okb = b && time_parse_rfc3339(b, &tb) == 0;
    if (!oka)
        return false;
    return !okb || ta > tb;
}

static json_t *str_or_null(const char *s)
{
    return s && s[0] ? json_string(s) : json_null();
}

/* The oldest ClusterPolicy (the one the operator acts on), or NULL. */
static const json_t *first_policy(const json_t *policies)
{
    const json_t *best = NULL;
    size_t i;
    json_t *p;
    json_array_foreach (policies, i, p) {
        if (!best || time_after(kobj_creation_timestamp(best), kobj_creation_timestamp(p)) ||
            (streq_ptr(kobj_creation_timestamp(best), kobj_creation_timestamp(p)) &&
             strcmp(kobj_name(p) ?: "", kobj_name(best) ?: "") < 0))
            best = p;
    }
    return best;
}

json_t *st_last_change(const json_t *policy)
{
    const json_t *best = NULL;
    bool best_spec = false;
    size_t i;
    json_t *mf;
    json_array_foreach (kobj_path(policy, "metadata.managedFields"), i, mf) {
        const char *sub = kobj_str(mf, "subresource");
        if (sub && sub[0])
            continue;
        bool spec = json_object_get(json_object_get(mf, "fieldsV1"), "f:spec") != NULL;
        if (best_spec && !spec)
            continue;
        /* equal times (one-second resolution): the later entry, the later write */
        if (!best || (spec && !best_spec) ||
            !time_after(kobj_str(best, "time"), kobj_str(mf, "time"))) {
            best = mf;
            best_spec = spec;
        }
    }
    if (!best)
        return NULL;
    return json_pack("{s:o,s:o,s:o}", "manager", str_or_null(kobj_str(best, "manager")),
                     "operation", str_or_null(kobj_str(best, "operation")), "time",
                     str_or_null(kobj_str(best, "time")));
}

static bool labels_match(const json_t *labels, const json_t *selector)
{
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *)selector, k, v) {
        if (!json_is_string(v) || !streq_ptr(kobj_str(labels, k), json_string_value(v)))
            return false;
    }
    return true;
}

void st_node_pool(const json_t *node, const json_t *drivers, char *buf, size_t n)
{
    json_t *labels = kobj_labels(node);
    /* the operator's choice, where it made one (a node two NVIDIADrivers select has none) */
    const char *owner = kobj_str(labels, LABEL_DRIVER_OWNER);
    if (owner && owner[0]) {
        snprintf(buf, n, "nvidiadriver/%s", owner);
        return;
    }
    size_t i;
    json_t *d;
    json_array_foreach (drivers, i, d) {
        json_t *sel = kobj_path(d, "spec.nodeSelector");
        if (json_is_object(sel) && labels_match(labels, sel)) {
            snprintf(buf, n, "nvidiadriver/%s", kobj_name(d) ?: "?");
            return;
        }
    }
    const char *id = kobj_str(labels, LABEL_OS_ID), *ver = kobj_str(labels, LABEL_OS_VERSION);
    if (id && id[0])
        snprintf(buf, n, "%s%s", id, ver ? ver : "");
    else
        snprintf(buf, n, "unknown");
}

bool st_gpu_node(const json_t *node)
{
    const char *k;
    json_t *v;
    json_object_foreach (kobj_labels(node), k, v) {
        if (str_has_prefix(k, "feature.node.kubernetes.io/pci-") && strstr(k, "10de") &&
            streq_ptr(json_string_value(v), "true"))
            return true;
        if (streq_ptr(k, "nvidia.com/gpu.present") || streq_ptr(k, LABEL_GPU_COUNT))
            return true;
    }
    json_object_foreach (kobj_annotations(node), k, v) {
        if (streq_ptr(k, NODESTATE_ANN_DRIVER_OWNER) || streq_ptr(k, NODESTATE_ANN_GPU_COUNT) ||
            str_has_prefix(k, NODESTATE_ANN_VALIDATION_PREFIX))
            return true;
    }
    json_object_foreach (kobj_path(node, "status.allocatable"), k, v)
        if (str_has_prefix(k, "nvidia.com/"))
            return true;
    return false;
}

static bool node_ready(const json_t *node)
{
    size_t i;
    json_t *c;
    json_array_foreach (kobj_path(node, "status.conditions"), i, c)
        if (streq_ptr(kobj_str(c, "type"), "Ready"))
            return streq_ptr(kobj_str(c, "status"), "True");
    return false;
}

static int64_t quantity(const json_t *v)
{
    int64_t m = 0;
    if (json_is_integer(v))
        return json_integer_value(v);
    if (!json_is_string(v) || kobj_quantity_milli(json_string_value(v), &m) < 0)
        return -1;
    return m / 1000;
}

enum health { H_OK, H_WARN, H_FAIL };
static const char *health_name(enum health h)
{
    return h == H_FAIL ? "fail" : h == H_WARN ? "warn" : "ok";
}

struct node_eval {
    enum health health;
    json_t *problems; /* array of strings */
};

static void problem(struct node_eval *ev, enum health h, const char *fmt, ...) GPUOP_PRINTF(3, 4);
static void problem(struct node_eval *ev, enum health h, const char *fmt, ...)
{
    char buf[NODESTATE_REASON_MAX + 128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    json_array_append_new(ev->problems, json_string(buf));
    if (h > ev->health)
        ev->health = h;
}

/* The upgrade state's category: done, failed, required, inProgress, or none. */
static const char *upgrade_category(const char *state)
{
    if (!state || !state[0])
        return "none";
    if (streq_ptr(state, "upgrade-done"))
        return "done";
    if (streq_ptr(state, "upgrade-failed"))
        return "failed";
    if (streq_ptr(state, "upgrade-required"))
        return "required";
    return "inProgress";
}

/* ---- nodes -------------------------------------------------------------------------------- */

static json_t *driver_model(const json_t *node, struct node_eval *ev)
{
    const char *text = kobj_annotation(node, NODESTATE_ANN_DRIVER_OWNER);
    if (!text)
        return json_null();
    struct nodestate_driver_owner o;
    struct err e = {0};
    if (nodestate_driver_owner_parse(text, &o, &e) < 0) {
        problem(ev, H_WARN, "%s", err_msg(&e));
        return json_null();
    }
    if (o.owner == NODESTATE_OWNER_NONE)
        problem(ev, H_WARN, "no driver (%s)", o.source);
    return json_pack("{s:s,s:o,s:o,s:o}", "owner", nodestate_owner_name(o.owner), "version",
                     str_or_null(o.version), "source", str_or_null(o.source), "time",
                     str_or_null(o.time));
}

static json_t *validations_model(const json_t *node, struct node_eval *ev)
{
    json_t *out = json_object();
    for (int c = 0; c < NODESTATE_COMP_COUNT; c++) {
        char key[96];
        nodestate_validation_key(c, key, sizeof(key));
        const char *text = kobj_annotation(node, key);
        if (!text)
            continue;
        struct nodestate_validation v;
        struct err e = {0};
        if (nodestate_validation_parse(text, &v, &e) < 0) {
            problem(ev, H_WARN, "%s", err_msg(&e));
            continue;
        }
        const char *comp = nodestate_component_name(c);
        if (v.state == NODESTATE_V_FAILED)
            problem(ev, H_FAIL, "%s validation failed: %s", comp, v.reason);
        else if (v.state == NODESTATE_V_WAITING)
            problem(ev, H_WARN, "%s validation waiting: %s", comp, v.reason);
        json_object_set_new(out, comp,
                            json_pack("{s:s,s:s,s:o}", "state", nodestate_vstate_name(v.state),
                                      "reason", v.reason, "time", str_or_null(v.time)));
    }
    return out;
}

static json_t *counts_object(const struct nodestate_resource_count *c, size_t n, int64_t *ret_total)
{
    json_t *o = json_object();
    int64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        json_object_set_new(o, c[i].name, json_integer(c[i].count));
        total += c[i].count;
    }
    *ret_total = total;
    return o;
}

static json_t *gpus_model(const json_t *node, struct node_eval *ev)
{
    const char *text = kobj_annotation(node, NODESTATE_ANN_GPU_COUNT);
    if (text) {
        struct nodestate_gpu_count *c = xcalloc(1, sizeof(*c));
        struct err e = {0};
        json_t *out = NULL;
        if (nodestate_gpu_count_parse(text, c, &e) < 0) {
            problem(ev, H_WARN, "%s", err_msg(&e));
        } else {
            int64_t adv = 0, exp = 0;
            json_t *missing = json_array();
            for (size_t i = 0; i < c->n_missing; i++)
                json_array_append_new(missing, json_string(c->missing[i]));
            json_t *a = counts_object(c->advertised, c->n_advertised, &adv);
            json_t *x = counts_object(c->expected, c->n_expected, &exp);
            out = json_pack("{s:s,s:I,s:I,s:I,s:o,s:o,s:b,s:b,s:o,s:o}", "source",
                            NODESTATE_ANN_GPU_COUNT, "physical", (json_int_t)c->physical,
                            "advertisedTotal", (json_int_t)adv, "expectedTotal", (json_int_t)exp,
                            "advertised", a, "expected", x, "short", c->short_, "mismatch",
                            c->mismatch || c->short_, "missing", missing, "since",
                            str_or_null(c->since));
            if (c->mismatch || c->short_) {
                char what[NODESTATE_REASON_MAX] = "";
                size_t off = 0;
                for (size_t i = 0; i < c->n_missing && off < sizeof(what); i++) {
                    int w = snprintf(what + off, sizeof(what) - off, "%s%s", i ? ", " : ": ",
                                     c->missing[i]);
                    if (w < 0)
                        break;
                    off += (size_t)w;
                }
                problem(ev, c->mismatch ? H_FAIL : H_WARN,
                        "advertises fewer GPUs than it has (%lld of %lld)%s%s%s", (long long)adv,
                        (long long)exp, what, c->since[0] ? ", since " : "", c->since);
            }
        }
        free(c);
        if (out)
            return out;
    }
    /* Without the exporter's annotation: GFD's count against what the node advertises. */
    int64_t physical = -1, gpus = 0, mig = 0;
    const char *cl = kobj_label(node, LABEL_GPU_COUNT);
    int64_t v;
    if (cl && parse_i64(cl, &v) == 0)
        physical = v;
    const char *k;
    json_t *q;
    json_object_foreach (kobj_path(node, "status.allocatable"), k, q) {
        int64_t n = quantity(q);
        if (n < 0)
            continue;
        if (str_has_prefix(k, "nvidia.com/gpu"))
            gpus += n;
        else if (str_has_prefix(k, "nvidia.com/mig-"))
            mig += n;
    }
    bool short_ = physical > 0 && mig == 0 && gpus < physical;
    if (short_)
        problem(ev, H_WARN, "advertises %lld nvidia.com/gpu of %lld GPUs (nvidia.com/gpu.count)",
                (long long)gpus, (long long)physical);
    return json_pack("{s:s,s:o,s:I,s:o,s:b,s:b}", "source", "labels", "physical",
                     physical >= 0 ? json_integer(physical) : json_null(), "advertisedTotal",
                     (json_int_t)(gpus + mig), "expectedTotal",
                     physical >= 0 && mig == 0 ? json_integer(physical) : json_null(), "short",
                     short_, "mismatch", short_);
}

static json_t *mig_model(const json_t *node, struct node_eval *ev)
{
    const char *cfg = kobj_label(node, LABEL_MIG_CONFIG);
    const char *st = kobj_label(node, LABEL_MIG_STATE);
    const char *strategy = kobj_label(node, LABEL_MIG_STRATEGY);
    if (!cfg && !st && !strategy)
        return json_null();
    if (streq_ptr(st, "failed"))
        problem(ev, H_FAIL, "MIG layout %s failed", cfg ? cfg : "");
    else if (st && !streq_ptr(st, "success"))
        problem(ev, H_WARN, "MIG layout %s %s", cfg ? cfg : "", st);
    return json_pack("{s:o,s:o,s:o}", "config", str_or_null(cfg), "state", str_or_null(st),
                     "strategy", str_or_null(strategy));
}

static json_t *drain_of(const json_t *node)
{
    const char *text = kobj_annotation(node, NODESTATE_ANN_LAST_DRAIN);
    struct nodestate_drain d;
    struct err e = {0};
    if (!text || nodestate_drain_parse(text, &d, &e) < 0)
        return NULL;
    return json_pack("{s:s?,s:s,s:s,s:o}", "node", kobj_name(node), "time", d.time, "reason",
                     d.reason, "by", str_or_null(d.by));
}

static json_t *node_model(const json_t *node, const json_t *drivers)
{
    struct node_eval ev = {.health = H_OK, .problems = json_array()};
    char pool[128];
    st_node_pool(node, drivers, pool, sizeof(pool));
    bool ready = node_ready(node);
    bool cordoned = json_is_true(kobj_path(node, "spec.unschedulable"));
    if (!ready)
        problem(&ev, H_FAIL, "node not Ready");
    if (cordoned)
        problem(&ev, H_WARN, "cordoned");
    json_t *drv = driver_model(node, &ev);
    json_t *val = validations_model(node, &ev);
    json_t *gpus = gpus_model(node, &ev);
    json_t *mig = mig_model(node, &ev);
    const char *up = kobj_label(node, LABEL_UPGRADE_STATE);
    const char *cat = upgrade_category(up);
    if (streq_ptr(cat, "failed"))
        problem(&ev, H_FAIL, "driver upgrade failed");
    else if (streq_ptr(cat, "inProgress"))
        problem(&ev, H_WARN, "driver upgrade: %s", up);
    json_t *drain = drain_of(node);
    const char *os = kobj_path_str(node, "status.nodeInfo.osImage");
    json_t *out = json_pack(
        "{s:s?,s:s,s:b,s:b,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:s,s:o}", "name", kobj_name(node),
        "pool", pool, "ready", ready, "cordoned", cordoned, "driver", drv, "validations", val,
        "gpus", gpus, "mig", mig, "upgradeState", str_or_null(up), "product",
        str_or_null(kobj_label(node, "nvidia.com/gpu.product")), "os", str_or_null(os), "lastDrain",
        drain ? drain : json_null(), "health", health_name(ev.health), "problems", ev.problems);
    json_object_set_new(out, "arch", str_or_null(st_node_arch(node)));
    return out;
}

const char *st_node_arch(const json_t *node)
{
    const char *arch = kobj_path_str(node, "status.nodeInfo.architecture");
    return arch && arch[0] ? arch : kobj_label(node, "kubernetes.io/arch");
}

static int by_name(const void *a, const void *b)
{
    const json_t *x = *(const json_t *const *)a, *y = *(const json_t *const *)b;
    return strcmp(kobj_name(x) ?: "", kobj_name(y) ?: "");
}

/* The GPU nodes, sorted by name. */
static json_t *gpu_nodes(const struct st_objects *in)
{
    size_t n = json_array_size(in->nodes), k = 0;
    const json_t **v = xcalloc(n ? n : 1, sizeof(*v));
    size_t i;
    json_t *node;
    json_array_foreach (in->nodes, i, node)
        if (st_gpu_node(node))
            v[k++] = node;
    qsort(v, k, sizeof(*v), by_name);
    json_t *out = json_array();
    for (i = 0; i < k; i++)
        json_array_append(out, (json_t *)v[i]);
    free(v);
    return out;
}

json_t *st_nodes_model(const struct st_objects *in)
{
    json_t *out = json_array();
    _cleanup_(json_decrefp) json_t *nodes = gpu_nodes(in);
    size_t i;
    json_t *node;
    json_array_foreach (nodes, i, node)
        json_array_append_new(out, node_model(node, in->drivers));
    return out;
}

/* ---- pools -------------------------------------------------------------------------------- */

static int by_field_name(const void *a, const void *b)
{
    const json_t *x = *(const json_t *const *)a, *y = *(const json_t *const *)b;
    return strcmp(kobj_str(x, "name") ?: "", kobj_str(y, "name") ?: "");
}

json_t *st_pools_model(const struct st_objects *in)
{
    _cleanup_(json_decrefp) json_t *nodes = st_nodes_model(in);
    json_t *pools = json_object(); /* name -> pool */
    const json_t *cp = first_policy(in->policies);
    size_t i;
    json_t *n;
    json_array_foreach (nodes, i, n) {
        const char *name = kobj_str(n, "pool");
        json_t *p = json_object_get(pools, name);
        if (!p) {
            const char *target = kobj_path_str(cp, "spec.driver.version");
            if (str_has_prefix(name, "nvidiadriver/")) {
                size_t k;
                json_t *d;
                json_array_foreach (in->drivers, k, d)
                    if (streq_ptr(kobj_name(d), name + strlen("nvidiadriver/")))
                        target = kobj_path_str(d, "spec.version");
            }
            p = json_pack("{s:s,s:i,s:o,s:{},s:{s:i,s:i,s:i,s:i,s:i},s:{}}", "name", name, "nodes",
                          0, "targetVersion", str_or_null(target), "versions", "upgrade", "done", 0,
                          "inProgress", 0, "failed", 0, "required", 0, "none", 0, "states");
            json_object_set_new(pools, name, p);
        }
        json_object_set_new(p, "nodes",
                            json_integer(json_integer_value(json_object_get(p, "nodes")) + 1));
        const char *ver = kobj_path_str(n, "driver.version");
        json_t *vers = json_object_get(p, "versions");
        const char *vk = ver ? ver : "unknown";
        json_object_set_new(vers, vk,
                            json_integer(json_integer_value(json_object_get(vers, vk)) + 1));
        const char *up = kobj_str(n, "upgradeState");
        json_t *cats = json_object_get(p, "upgrade");
        const char *cat = upgrade_category(up);
        json_object_set_new(cats, cat,
                            json_integer(json_integer_value(json_object_get(cats, cat)) + 1));
        if (streq_ptr(cat, "inProgress")) {
            json_t *states = json_object_get(p, "states");
            json_object_set_new(states, up,
                                json_integer(json_integer_value(json_object_get(states, up)) + 1));
        }
    }
    json_t *out = json_array();
    const char *k;
    json_t *p;
    json_object_foreach (pools, k, p)
        json_array_append(out, p);
    json_decref(pools);
    /* jansson keeps insertion order; sort by name for a stable output */
    size_t m = json_array_size(out);
    const json_t **v = xcalloc(m ? m : 1, sizeof(*v));
    for (i = 0; i < m; i++)
        v[i] = json_array_get(out, i);
    qsort(v, m, sizeof(*v), by_field_name);
    json_t *sorted = json_array();
    for (i = 0; i < m; i++)
        json_array_append(sorted, (json_t *)v[i]);
    free(v);
    json_decref(out);
    return sorted;
}

/* ---- summary ------------------------------------------------------------------------------ */

static json_t *last_drain(const struct st_objects *in)
{
    json_t *best = NULL;
    size_t i;
    json_t *o;
    json_array_foreach (in->nodes, i, o) {
        json_t *d = drain_of(o);
        if (d && (!best || time_after(kobj_str(d, "time"), kobj_str(best, "time")))) {
            json_decref(best);
            best = d;
        } else {
            json_decref(d);
        }
    }
    /* Events keep drains whose node annotation was since overwritten or removed */
    json_array_foreach (in->events, i, o) {
        if (!streq_ptr(kobj_str(o, "reason"), "NodeDrain") ||
            !streq_ptr(kobj_path_str(o, "involvedObject.kind"), "Node"))
            continue;
        const char *t = kobj_str(o, "lastTimestamp");
        if (!t)
            t = kobj_str(o, "eventTime");
        if (!t)
            t = kobj_creation_timestamp(o);
        if (!t || (best && !time_after(t, kobj_str(best, "time"))))
            continue;
        json_decref(best);
        best = json_pack("{s:s?,s:s,s:s?,s:o}", "node", kobj_path_str(o, "involvedObject.name"),
                         "time", t, "reason", kobj_str(o, "message"), "by",
                         str_or_null(kobj_path_str(o, "source.component")));
    }
    return best ? best : json_null();
}

json_t *st_summary_model(const struct st_objects *in)
{
    const json_t *cp = first_policy(in->policies);
    json_t *policy = json_null();
    if (cp) {
        json_t *lc = st_last_change(cp);
        policy = json_pack("{s:s?,s:o,s:o,s:i}", "name", kobj_name(cp), "state",
                           str_or_null(kobj_path_str(cp, "status.state")), "lastChange",
                           lc ? lc : json_null(), "count", (int)json_array_size(in->policies));
    }
    _cleanup_(json_decrefp) json_t *nodes = st_nodes_model(in);
    int attention = 0;
    size_t i;
    json_t *n;
    json_array_foreach (nodes, i, n)
        if (!streq_ptr(kobj_str(n, "health"), "ok"))
            attention++;
    return json_pack("{s:o,s:o,s:o,s:{s:i,s:i,s:i}}", "operatorVersion",
                     str_or_null(kobj_path_str(cp, "status.operatorVersion")), "clusterPolicy",
                     policy, "lastDrain", last_drain(in), "nodes", "total",
                     (int)json_array_size(in->nodes), "gpu", (int)json_array_size(nodes),
                     "attention", attention);
}

/* ---- capacity ----------------------------------------------------------------------------- */

json_t *st_capacity_model(const struct st_objects *in)
{
    _cleanup_(json_decrefp) json_t *none = json_array();
    struct cap_input ci = {.nodes = in->nodes,
                           .pods = in->pods ? in->pods : none,
                           .quotas = in->quotas ? in->quotas : none,
                           .slices = in->slices,
                           .claims = in->claims,
                           .classes = in->classes,
                           .pools = in->pools,
                           .n_pools = in->n_pools,
                           .overcommit_ratio = in->overcommit_ratio};
    struct err e = {0};
    _cleanup_(cap_view_freep) struct cap_view *v = NULL;
    if (cap_view_compute(&ci, &v, &e) < 0)
        return json_pack("{s:s}", "error", err_msg(&e));
    return cap_view_to_json(v);
}
