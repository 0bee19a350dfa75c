/* SPDX-License-Identifier: Apache-2.0 */
/* The DRA section (statusview.h): per node, the devices the GPU DRA driver (gpu.nvidia.com)
 * publishes in its ResourceSlices, and the ResourceClaims allocated on them with the pods that
 * hold them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kobj.h"
#include "statusview.h"

#define DRA_DRIVER CAP_DRA_DRIVER

/* The node's entry in `nodes` (name -> entry), made when new. */
static json_t *node_of(json_t *nodes, const char *name)
{
    json_t *n = json_object_get(nodes, name);
    if (!n) {
        n = json_pack("{s:s,s:i,s:{},s:i,s:[]}", "name", name, "devices", 0, "types", "allocated",
                      0, "claims");
        json_object_set_new(nodes, name, n);
    }
    return n;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void count_up(json_t *obj, const char *key, json_int_t by)
{
    json_object_set_new(obj, key, json_integer(json_integer_value(json_object_get(obj, key)) + by));
}

json_t *st_dra_model(const struct st_objects *in)
{
    _cleanup_(json_decrefp) json_t *nodes = json_object(); /* name -> entry */
    _cleanup_(json_decrefp) json_t *pools = json_object(); /* pool -> node */
    size_t i;
    json_t *sl;
    json_array_foreach (in->slices, i, sl) {
        const char *node = kobj_path_str(sl, "spec.nodeName");
        const char *pool = kobj_path_str(sl, "spec.pool.name");
        if (!streq_ptr(kobj_path_str(sl, "spec.driver"), DRA_DRIVER) || !node)
            continue;
        if (pool)
            json_object_set_new(pools, pool, json_string(node));
        json_t *n = node_of(nodes, node);
        size_t k;
        json_t *dev;
        json_array_foreach (kobj_path(sl, "spec.devices"), k, dev) {
            const char *type = kobj_path_str(dev, "attributes.type.string");
            count_up(n, "devices", 1);
            count_up(json_object_get(n, "types"), type ? type : "other", 1);
        }
    }
    json_t *claim;
    json_array_foreach (in->claims, i, claim) {
        _cleanup_(json_decrefp) json_t *by_node = json_object(); /* node -> [device] */
        size_t k;
        json_t *res;
        json_array_foreach (kobj_path(claim, "status.allocation.devices.results"), k, res) {
            if (!streq_ptr(kobj_str(res, "driver"), DRA_DRIVER))
                continue;
            const char *pool = kobj_str(res, "pool") ?: "";
            const char *node = json_string_value(json_object_get(pools, pool));
            node = node ? node : pool; /* gpuop's pool is its node */
            json_t *devs = json_object_get(by_node, node);
            if (!devs) {
                devs = json_array();
                json_object_set_new(by_node, node, devs);
            }
            json_array_append_new(devs, json_string(kobj_str(res, "device") ?: "?"));
        }
        const char *node;
        json_t *devs;
        json_object_foreach (by_node, node, devs) {
            json_t *pods = json_array();
            json_t *ref;
            json_array_foreach (kobj_path(claim, "status.reservedFor"), k, ref) {
                if (streq_ptr(kobj_str(ref, "resource"), "pods"))
                    json_array_append_new(pods, json_string(kobj_str(ref, "name") ?: "?"));
            }
            json_t *n = node_of(nodes, node);
            count_up(n, "allocated", (json_int_t)json_array_size(devs));
            json_array_append_new(json_object_get(n, "claims"),
                                  json_pack("{s:s,s:s,s:O,s:o}", "namespace",
                                            kobj_namespace(claim) ?: "", "name",
                                            kobj_name(claim) ?: "", "devices", devs, "pods", pods));
        }
    }
    /* nodes by name (a JSON object's keys keep insertion order: sorted here) */
    size_t nn = json_object_size(nodes), at = 0;
    _cleanup_free_ const char **names = xcalloc(nn + 1, sizeof(*names));
    const char *key;
    json_t *v;
    json_object_foreach (nodes, key, v)
        names[at++] = key;
    qsort(names, nn, sizeof(*names), name_cmp);
    json_t *out = json_array();
    for (size_t k = 0; k < nn; k++)
        json_array_append(out, json_object_get(nodes, names[k]));
    return json_pack("{s:s,s:o}", "driver", DRA_DRIVER, "nodes", out);
}

void st_dra_text(const json_t *m, const struct st_view *v, struct sbuf *out)
{
    json_t *nodes = json_object_get(m, "nodes");
    if (json_array_size(nodes) == 0)
        return;
    sbuf_addf(out, "DRA (%s): devices published and claims allocated, per node\n",
              kobj_str(m, "driver") ?: DRA_DRIVER);
    static const char *const titles[] = {"NODE", "DEVICES", "ALLOCATED", "CLAIMS"};
    _cleanup_(json_decrefp) json_t *rows = json_array();
    size_t i;
    json_t *n;
    json_array_foreach (nodes, i, n) {
        struct sbuf types _cleanup_sbuf_, claims _cleanup_sbuf_;
        sbuf_init(&types, 1024);
        sbuf_init(&claims, 4096);
        const char *t;
        json_t *c;
        json_object_foreach (json_object_get(n, "types"), t, c)
            sbuf_addf(&types, "%s%lld %s", types.len ? ", " : "", (long long)json_integer_value(c),
                      t);
        size_t k;
        json_array_foreach (json_object_get(n, "claims"), k, c) {
            sbuf_addf(&claims, "%s%s/%s:", k ? "; " : "", kobj_str(c, "namespace"),
                      kobj_str(c, "name"));
            size_t d;
            json_t *x;
            json_array_foreach (json_object_get(c, "devices"), d, x)
                sbuf_addf(&claims, " %s", json_string_value(x));
            json_array_foreach (json_object_get(c, "pods"), d, x)
                sbuf_addf(&claims, "%s%s", d ? ", " : " (pod ", json_string_value(x));
            if (json_array_size(json_object_get(c, "pods")) > 0)
                sbuf_adds(&claims, ")");
        }
        long long devs = (long long)json_integer_value(json_object_get(n, "devices"));
        long long alloc = (long long)json_integer_value(json_object_get(n, "allocated"));
        char dcell[1100], acell[64], ccell[64];
        /* past the cell's bound: how many, not a cut list */
        snprintf(ccell, sizeof(ccell), "%zu claims", json_array_size(json_object_get(n, "claims")));
        snprintf(dcell, sizeof(dcell), "%lld%s%s%s", devs, types.len ? " (" : "",
                 types.error || !types.data ? "" : types.data, types.len ? ")" : "");
        snprintf(acell, sizeof(acell), "%lld/%lld", alloc, devs);
        json_array_append_new(rows, json_pack("[s,s,s,s]", kobj_str(n, "name") ?: "?", dcell, acell,
                                              claims.error ? ccell
                                              : claims.len ? claims.data
                                                           : "-"));
    }
    st_table(out, titles, 4, rows, v);
}

/* ---- the pools' GPU allocation ------------------------------------------------------------ */

json_t *st_alloc_model(const struct st_objects *in)
{
    json_t *pools = json_array();
    size_t i;
    json_t *p;
    json_array_foreach (in->upgrade_pools, i, p) {
        const json_t *ga = kobj_path(p, "status.gpuAllocation");
        if (!json_is_object(ga) || !kobj_name(p))
            continue;
        json_t *row =
            json_pack("{s:s,s:s,s:s,s:O,s:O}", "name", kobj_name(p), "target",
                      kobj_str(ga, "target") ?: "?", "progress", kobj_str(ga, "progress") ?: "?",
                      "moving", json_object_get(ga, "moving") ?: json_null(), "waiting",
                      json_object_get(ga, "waiting") ?: json_null());
        if (kobj_str(ga, "error"))
            json_object_set_new(row, "error", json_string(kobj_str(ga, "error")));
        json_array_append_new(pools, row);
    }
    return json_pack("{s:o}", "pools", pools);
}

void st_alloc_text(const json_t *m, const struct st_view *v, struct sbuf *out)
{
    json_t *pools = json_object_get(m, "pools");
    if (json_array_size(pools) == 0)
        return;
    sbuf_adds(out,
              "GPU allocation per DriverUpgradePool: the device plugin or DRA, nodes moving\n");
    static const char *const titles[] = {"POOL", "TARGET", "ON TARGET", "MOVING"};
    _cleanup_(json_decrefp) json_t *rows = json_array();
    size_t i;
    json_t *p;
    json_array_foreach (pools, i, p) {
        struct sbuf moving _cleanup_sbuf_;
        sbuf_init(&moving, 4096);
        size_t k;
        json_t *n;
        json_array_foreach (json_object_get(p, "moving"), k, n)
            sbuf_addf(&moving, "%s%s: %s", k ? "; " : "", kobj_str(n, "node") ?: "?",
                      kobj_str(n, "step") ?: "?");
        size_t waiting = json_array_size(json_object_get(p, "waiting"));
        if (waiting)
            sbuf_addf(&moving, "%s%zu waiting", moving.len ? "; " : "", waiting);
        if (kobj_str(p, "error"))
            sbuf_addf(&moving, "%s%s", moving.len ? "; " : "", kobj_str(p, "error"));
        json_array_append_new(rows, json_pack("[s,s,s,s]", kobj_str(p, "name") ?: "?",
                                              kobj_str(p, "target") ?: "?",
                                              kobj_str(p, "progress") ?: "?",
                                              moving.error ? "(too long)"
                                              : moving.len ? moving.data
                                                           : "-"));
    }
    st_table(out, titles, 4, rows, v);
}
