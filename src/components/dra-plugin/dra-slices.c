/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The model as ResourceSlices (dra-plugin.h), NVIDIA's attribute names and types, and the plan
 * that makes the API server hold exactly them. Pure.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "dra-plugin.h"
#include "kobj.h"

#define SLICE_API     "resource.k8s.io/v1"
#define LABEL_MANAGED "app.kubernetes.io/managed-by"
#define LABEL_NODE    "gpuop.dev/dra-node"
#define STD_PREFIX    "resource.kubernetes.io/"

/* ---- values -------------------------------------------------------------------------------- */

static json_t *attr_string(const char *v)
{
    return json_pack("{s:s}", "string", v);
}

static json_t *attr_version(const char *v)
{
    char buf[GPU_VERSION_MAX];
    if (dra_semver(v, buf, sizeof(buf)) < 0)
        return NULL;
    return json_pack("{s:s}", "version", buf);
}

/* A capacity or counter: {"value": "<quantity>"}, bytes written as the API server writes them
 * ("81559Mi", "10Gi"), counts as plain numbers. */
static json_t *quantity(uint64_t v)
{
    char buf[40];
    if (v > (uint64_t)INT64_MAX / 1000)
        snprintf(buf, sizeof(buf), "%" PRIu64, v);
    else
        kobj_quantity_format((int64_t)v * 1000, true, buf, sizeof(buf));
    return json_pack("{s:s}", "value", buf);
}

static void set_new(json_t *obj, const char *key, json_t *v)
{
    if (v)
        json_object_set_new(obj, key, v);
}

/* The attributes a GPU and its MIG devices share. */
static void common_attrs(json_t *a, const struct gpu_inventory *inv, const struct gpu_device *g,
                         const char *pcie_root)
{
    char cc[16], cuda[32];
    snprintf(cc, sizeof(cc), "%d.%d", g->cc_major, g->cc_minor);
    snprintf(cuda, sizeof(cuda), "%d.%d", inv->cuda_driver_version / 1000,
             (inv->cuda_driver_version % 1000) / 10);
    set_new(a, "productName", attr_string(g->name));
    set_new(a, "brand", attr_string(dra_brand_name(g->brand)));
    set_new(a, "architecture", attr_string(dra_arch_name(g->arch)));
    set_new(a, "cudaComputeCapability", attr_version(cc));
    set_new(a, "driverVersion", attr_version(inv->driver_version));
    if (inv->cuda_driver_version > 0)
        set_new(a, "cudaDriverVersion", attr_version(cuda));
    char bus[GPU_BUSID_MAX];
    if (gpu_bus_id_sysfs(g->bus_id, bus, sizeof(bus)) == 0)
        set_new(a, STD_PREFIX "pciBusID", attr_string(bus));
    if (pcie_root && pcie_root[0])
        set_new(a, STD_PREFIX "pcieRoot", attr_string(pcie_root));
}

static json_t *counters_json(unsigned sm, unsigned ce, unsigned dec, unsigned enc, unsigned jpg,
                             unsigned ofa, uint64_t mem, unsigned slice_start, unsigned slices)
{
    json_t *c = json_object();
    set_new(c, "multiprocessors", quantity(sm));
    set_new(c, "copy-engines", quantity(ce));
    set_new(c, "decoders", quantity(dec));
    set_new(c, "encoders", quantity(enc));
    set_new(c, "jpeg-engines", quantity(jpg));
    set_new(c, "ofa-engines", quantity(ofa));
    set_new(c, "memory", quantity(mem));
    for (unsigned i = slice_start; i < slice_start + slices; i++) {
        char k[32];
        snprintf(k, sizeof(k), "memory-slice-%u", i);
        set_new(c, k, quantity(1));
    }
    return c;
}

static const struct dra_counter_set *counter_set_of(const struct dra_model *m, size_t gpu)
{
    for (size_t i = 0; i < m->n_counter_sets; i++)
        if (m->counter_sets[i].gpu == gpu)
            return &m->counter_sets[i];
    return NULL;
}

static json_t *device_json(const struct dra_model *m, const struct dra_device *d)
{
    const char *pcie_root = d->pcie_root;
    const struct gpu_device *g = &m->inv->gpus[d->gpu];
    json_t *a = json_object(), *c = json_object();
    json_t *dev = json_pack("{s:s}", "name", d->name);
    if (d->type == DRA_GPU) {
        set_new(a, "type", attr_string("gpu"));
        set_new(a, "uuid", attr_string(g->uuid));
        common_attrs(a, m->inv, g, pcie_root);
        set_new(c, "memory", quantity(d->memory_bytes));
    } else {
        set_new(a, "type", attr_string("mig"));
        if (d->type == DRA_MIG)
            set_new(a, "uuid", attr_string(g->mig[d->mig].uuid));
        set_new(a, "parentUUID", attr_string(g->uuid));
        set_new(a, "profile", attr_string(d->profile));
        common_attrs(a, m->inv, g, pcie_root);
        set_new(c, "multiprocessors", quantity(d->multiprocessors));
        set_new(c, "copyEngines", quantity(d->copy_engines));
        set_new(c, "decoders", quantity(d->decoders));
        set_new(c, "encoders", quantity(d->encoders));
        set_new(c, "jpegEngines", quantity(d->jpegs));
        set_new(c, "ofaEngines", quantity(d->ofas));
        set_new(c, "memory", quantity(d->memory_bytes));
        for (unsigned i = d->start; i < d->start + d->size; i++) {
            char k[32];
            snprintf(k, sizeof(k), "memorySlice%u", i);
            set_new(c, k, quantity(1));
        }
        const struct dra_counter_set *cs = m->partitionable ? counter_set_of(m, d->gpu) : NULL;
        if (cs)
            json_object_set_new(dev, "consumesCounters",
                                json_pack("[{s:s,s:o}]", "counterSet", cs->name, "counters",
                                          counters_json(d->multiprocessors, d->copy_engines,
                                                        d->decoders, d->encoders, d->jpegs, d->ofas,
                                                        d->memory_bytes, d->start, d->size)));
    }
    json_object_set_new(dev, "attributes", a);
    json_object_set_new(dev, "capacity", c);
    return dev;
}

/* ---- slices --------------------------------------------------------------------------------- */

static json_t *slice_new(const struct dra_slice_meta *meta, size_t index)
{
    char name[DRA_OBJ_NAME_MAX];
    /* <node>-gpu.nvidia.com-<n>, the node's part cut to fit a name */
    char tail[48];
    snprintf(tail, sizeof(tail), "-%s-%zu", DRA_DRIVER_NAME, index);
    int keep = (int)(sizeof(name) - 1 - strlen(tail));
    snprintf(name, sizeof(name), "%.*s%s", keep, meta->node_name, tail);
    json_t *labels = json_pack("{s:s}", LABEL_MANAGED, "gpuop");
    if (kobj_valid_label_value(meta->node_name) && strlen(meta->node_name) <= 63)
        json_object_set_new(labels, LABEL_NODE, json_string(meta->node_name));
    json_t *md = json_pack("{s:s,s:o}", "name", name, "labels", labels);
    if (meta->node_uid && meta->node_uid[0])
        json_object_set_new(md, "ownerReferences",
                            json_pack("[{s:s,s:s,s:s,s:s,s:b}]", "apiVersion", "v1", "kind", "Node",
                                      "name", meta->node_name, "uid", meta->node_uid, "controller",
                                      1));
    json_t *spec = json_pack("{s:s,s:s,s:{s:s,s:I,s:i}}", "driver", DRA_DRIVER_NAME, "nodeName",
                             meta->node_name, "pool", "name", meta->node_name, "generation",
                             (json_int_t)meta->generation, "resourceSliceCount", 0);
    return json_pack("{s:s,s:s,s:o,s:o}", "apiVersion", SLICE_API, "kind", "ResourceSlice",
                     "metadata", md, "spec", spec);
}

int dra_slices_render(const struct dra_model *m, const struct dra_slice_meta *meta, json_t **ret,
                      struct err *e)
{
    if (!meta || !meta->node_name || !meta->node_name[0])
        return err_set(e, -EINVAL, "ResourceSlices: no node name");
    json_t *out = json_array();
    /* counter sets first, at most 8 a slice */
    json_t *cur = NULL;
    for (size_t i = 0; i < m->n_counter_sets; i++) {
        const struct dra_counter_set *cs = &m->counter_sets[i];
        if (!cur ||
            json_array_size(kobj_path(cur, "spec.sharedCounters")) == DRA_SLICE_COUNTER_SETS_MAX) {
            cur = slice_new(meta, json_array_size(out));
            json_object_set_new(json_object_get(cur, "spec"), "sharedCounters", json_array());
            json_array_append_new(out, cur);
        }
        json_array_append_new(
            kobj_path(cur, "spec.sharedCounters"),
            json_pack("{s:s,s:o}", "name", cs->name, "counters",
                      counters_json(cs->multiprocessors, cs->copy_engines, cs->decoders,
                                    cs->encoders, cs->jpegs, cs->ofas, cs->memory_bytes, 0,
                                    cs->memory_slices)));
    }
    /* devices: GPU by GPU; a slice holds at most 128, or 64 once one consumes counters */
    cur = NULL;
    size_t lim = m->n_counter_sets ? DRA_SLICE_DEVICES_ADV_MAX : DRA_SLICE_DEVICES_MAX;
    for (size_t i = 0; i < m->n_devices; i++) {
        const struct dra_device *d = &m->devices[i];
        if (!d->published)
            continue;
        if (!cur || json_array_size(kobj_path(cur, "spec.devices")) >= lim) {
            cur = slice_new(meta, json_array_size(out));
            json_object_set_new(json_object_get(cur, "spec"), "devices", json_array());
            json_array_append_new(out, cur);
        }
        json_array_append_new(kobj_path(cur, "spec.devices"), device_json(m, d));
    }
    if (json_array_size(out) == 0) {
        cur = slice_new(meta, 0);
        json_object_set_new(json_object_get(cur, "spec"), "devices", json_array());
        json_array_append_new(out, cur);
    }
    size_t n = json_array_size(out);
    size_t i;
    json_t *s;
    json_array_foreach (out, i, s)
        json_object_set_new(kobj_path(s, "spec.pool"), "resourceSliceCount",
                            json_integer((json_int_t)n));
    *ret = out;
    return 0;
}

/* ---- publication ----------------------------------------------------------------------------- */

/* Whether two objects are equal but for the keys named skip (compared in place: no copies of
 * the slices, which are the largest objects the plugin holds while it publishes). */
static bool equal_but(const json_t *a, const json_t *b, const char *skip)
{
    if (!a && !b)
        return true;
    if (!json_is_object(a) || !json_is_object(b))
        return json_equal(a, b);
    const char *k;
    json_t *v;
    size_t na = 0, nb = 0;
    json_object_foreach ((json_t *)a, k, v) {
        if (strcmp(k, skip) == 0)
            continue;
        na++;
        if (!json_equal(v, json_object_get(b, k)))
            return false;
    }
    json_object_foreach ((json_t *)b, k, v)
        nb += strcmp(k, skip) != 0;
    return na == nb;
}

static bool null_or_equal(const json_t *a, const json_t *b)
{
    return (!a && !b) || (a && b && json_equal(a, b));
}

/* Whether two slices have the same content: spec without the pool's generation, labels, owners. */
static bool same_content(const json_t *x, const json_t *y)
{
    const json_t *sx = json_object_get(x, "spec"), *sy = json_object_get(y, "spec");
    const json_t *mx = json_object_get(x, "metadata"), *my = json_object_get(y, "metadata");
    return equal_but(sx, sy, "pool") &&
           equal_but(json_object_get(sx, "pool"), json_object_get(sy, "pool"), "generation") &&
           null_or_equal(json_object_get(mx, "labels"), json_object_get(my, "labels")) &&
           null_or_equal(json_object_get(mx, "ownerReferences"),
                         json_object_get(my, "ownerReferences"));
}

static const json_t *find_named(const json_t *arr, const char *name)
{
    size_t i;
    json_t *v;
    json_array_foreach (arr, i, v)
        if (streq_ptr(kobj_name(v), name))
            return v;
    return NULL;
}

int dra_publish_plan(const json_t *desired, const json_t *existing, struct dra_publish *ret,
                     struct err *e)
{
    if (!json_is_array(desired) || (existing && !json_is_array(existing)))
        return err_set(e, -EINVAL, "ResourceSlices: not a list");
    struct dra_publish p = {.create = json_array(), .update = json_array(), .remove = json_array()};
    int64_t max_gen = -1;
    bool same = json_array_size(desired) == json_array_size(existing);
    size_t i;
    json_t *v;
    json_array_foreach (existing, i, v) {
        json_t *g = kobj_path(v, "spec.pool.generation");
        if (json_is_integer(g) && json_integer_value(g) > max_gen)
            max_gen = json_integer_value(g);
    }
    json_array_foreach (existing, i, v) {
        json_t *g = kobj_path(v, "spec.pool.generation");
        if (!json_is_integer(g) || json_integer_value(g) != max_gen)
            same = false; /* a slice of an older generation: rewrite them all */
    }
    json_array_foreach (desired, i, v) {
        const json_t *old = find_named(existing, kobj_name(v));
        if (!old) {
            same = false;
            continue;
        }
        if (!same_content(v, old))
            same = false;
    }
    if (same && max_gen >= 0) {
        p.generation = max_gen;
        *ret = p;
        return 0;
    }
    p.generation = max_gen + 1;
    json_array_foreach (desired, i, v) {
        json_t *s = json_deep_copy(v);
        json_object_set_new(kobj_path(s, "spec.pool"), "generation",
                            json_integer((json_int_t)p.generation));
        const json_t *old = find_named(existing, kobj_name(v));
        if (old) {
            const char *rv = kobj_resource_version(old);
            if (rv)
                json_object_set_new(json_object_get(s, "metadata"), "resourceVersion",
                                    json_string(rv));
            json_array_append_new(p.update, s);
        } else {
            json_array_append_new(p.create, s);
        }
    }
    json_array_foreach (existing, i, v)
        if (!find_named(desired, kobj_name(v)) && kobj_name(v))
            json_array_append_new(p.remove, json_string(kobj_name(v)));
    *ret = p;
    return 0;
}

void dra_publish_clear(struct dra_publish *p)
{
    json_decref(p->create);
    json_decref(p->update);
    json_decref(p->remove);
    p->create = p->update = p->remove = NULL;
}

bool dra_publish_empty(const struct dra_publish *p)
{
    return json_array_size(p->create) == 0 && json_array_size(p->update) == 0 &&
           json_array_size(p->remove) == 0;
}

json_t *dra_slices_own(const json_t *list, const char *node)
{
    json_t *own = json_array();
    size_t i;
    json_t *v;
    json_array_foreach (json_object_get(list, "items"), i, v) {
        const json_t *spec = kobj_path(v, "spec");
        if (streq_ptr(kobj_str(spec, "driver"), DRA_DRIVER_NAME) &&
            streq_ptr(kobj_str(spec, "nodeName"), node))
            json_array_append(own, v);
    }
    return own;
}
