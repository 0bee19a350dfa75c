/* SPDX-License-Identifier: Apache-2.0 */
/* The capacity-and-quota view: see capacity.h. Built in jansson maps, handed out as plain
 * sorted arrays. */
#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "capacity.h"
#include "kobj.h"
#include "nodestate.h"
#include "yamlcfg.h" /* _cleanup_json_ */

#define REQ_PREFIX "requests."
#define POOL_OTHER "(no pool)"

bool cap_gpu_resource(const char *name)
{
    return name && str_has_prefix(name, CAP_GPU_PREFIX) && name[strlen(CAP_GPU_PREFIX)] != '\0' &&
           kobj_valid_qualified_name(name);
}

/* ---- pool definitions --------------------------------------------------------------------- */

void cap_pool_def_clear(struct cap_pool_def *p)
{
    if (!p)
        return;
    json_decref(p->match_labels);
    p->match_labels = NULL;
}

int cap_settings_parse(const char *const *pools, size_t n, const char *ratio,
                       struct cap_pool_def *ret_pools, size_t *ret_n, double *ret_ratio,
                       struct err *e)
{
    *ret_n = 0;
    if (n > CAP_POOLS_MAX)
        return err_set(e, -EINVAL, "--gpu-pool: at most %d pools", CAP_POOLS_MAX);
    for (size_t i = 0; i < n; i++) {
        int r = cap_pool_def_parse(pools[i], &ret_pools[i], e);
        if (r < 0)
            return err_prefix(e, "--gpu-pool");
        *ret_n = i + 1;
        for (size_t j = 0; j < i; j++)
            if (strcmp(ret_pools[j].name, ret_pools[i].name) == 0)
                return err_set(e, -EINVAL, "--gpu-pool: pool \"%s\" defined twice",
                               ret_pools[i].name);
    }
    if (ratio) {
        char *end = NULL;
        errno = 0;
        double v = strtod(ratio, &end);
        if (errno || end == ratio || *end || !(v > 0) || v > 1e6)
            return err_set(e, -EINVAL,
                           "--gpu-quota-overcommit-ratio \"%s\": expected a number above 0 "
                           "(1.0: quotas may promise what is advertised)",
                           ratio);
        *ret_ratio = v;
    }
    return 0;
}

int cap_pool_def_parse(const char *spec, struct cap_pool_def *ret, struct err *e)
{
    const char *colon = spec ? strchr(spec, ':') : NULL;
    if (!colon)
        return err_set(e, -EINVAL, "GPU pool \"%s\": want NAME:key=value[,key=value...]",
                       spec ? spec : "");
    size_t nl = (size_t)(colon - spec);
    char name[CAP_POOL_NAME_MAX];
    if (nl == 0 || nl >= sizeof(name))
        return err_set(e, -EINVAL, "GPU pool \"%s\": the name must be 1 to %d characters", spec,
                       CAP_POOL_NAME_MAX - 1);
    memcpy(name, spec, nl);
    name[nl] = '\0';
    if (!kobj_valid_dns_label(name))
        return err_set(e, -EINVAL, "GPU pool \"%s\": the name \"%s\" is not a DNS label", spec,
                       name);
    _cleanup_json_ json_t *labels = json_object();
    _cleanup_free_ char *rest = xstrdup(colon + 1);
    char *save = NULL;
    for (char *kv = strtok_r(rest, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        if (!eq)
            return err_set(e, -EINVAL, "GPU pool \"%s\": \"%s\" is not key=value", name, kv);
        *eq = '\0';
        if (!kobj_valid_qualified_name(kv))
            return err_set(e, -EINVAL, "GPU pool \"%s\": \"%s\" is not a label key", name, kv);
        if (!kobj_valid_label_value(eq + 1))
            return err_set(e, -EINVAL, "GPU pool \"%s\": \"%s\" is not a label value", name,
                           eq + 1);
        json_object_set_new(labels, kv, json_string(eq + 1));
    }
    if (json_object_size(labels) == 0)
        return err_set(e, -EINVAL, "GPU pool \"%s\": no key=value selects its nodes", name);
    memcpy(ret->name, name, nl + 1);
    ret->match_labels = steal_ptr(&labels);
    return 0;
}

/* ---- helpers ------------------------------------------------------------------------------ */

static int64_t units(json_t *q)
{
    int64_t m = 0;
    if (json_is_integer(q))
        return json_integer_value(q) > 0 ? (int64_t)json_integer_value(q) : 0;
    if (!json_is_string(q) || kobj_quantity_milli(json_string_value(q), &m) < 0 || m <= 0)
        return 0;
    return m / 1000 + (m % 1000 != 0);
}

static void add(json_t *map, const char *k, int64_t v)
{
    json_t *cur = json_object_get(map, k);
    json_object_set_new(map, k, json_integer((cur ? json_integer_value(cur) : 0) + v));
}

static int64_t get(const json_t *map, const char *k)
{
    json_t *v = json_object_get(map, k);
    return json_is_integer(v) ? (int64_t)json_integer_value(v) : 0;
}

/* map[a][b] (created) */
static json_t *sub(json_t *map, const char *a)
{
    json_t *s = json_object_get(map, a);
    if (!s) {
        s = json_object();
        json_object_set_new(map, a, s);
    }
    return s;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The keys of an object as a sorted malloc'ed array of malloc'ed strings. */
static char **sorted_keys(const json_t *o, size_t *ret_n)
{
    size_t n = json_object_size(o), i = 0;
    char **v = xcalloc(n ? n : 1, sizeof(*v));
    const char *k;
    json_t *x;
    json_object_foreach ((json_t *)o, k, x)
        v[i++] = xstrdup(k);
    qsort(v, n, sizeof(*v), cmp_str);
    *ret_n = n;
    return v;
}

static void free_strv(char **v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        free(v[i]);
    free(v);
}

/* Whether the pod's nodeSelector and required node affinity admit a node with these labels. */
static bool pod_fits(const json_t *pod, const json_t *labels)
{
    json_t *sel = kobj_path(pod, "spec.nodeSelector");
    if (json_is_object(sel) && !kobj_labels_match(sel, labels))
        return false;
    json_t *terms =
        kobj_path(pod, "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution."
                       "nodeSelectorTerms");
    if (!json_is_array(terms) || json_array_size(terms) == 0)
        return true;
    size_t i, j;
    json_t *t, *ex;
    json_array_foreach (terms, i, t) {
        bool ok = true;
        json_array_foreach (json_object_get(t, "matchExpressions"), j, ex)
            ok = ok && kobj_match_expression(ex, labels);
        if (ok)
            return true;
    }
    return false;
}

static bool pod_finished(const json_t *pod)
{
    const char *phase = kobj_path_str(pod, "status.phase");
    return streq_ptr(phase, "Succeeded") || streq_ptr(phase, "Failed");
}

/* The pod's GPU requests in units: containers summed, at least the largest init container; a
 * limit without a request counts as the request (as the API server defaults it). */
static json_t *pod_gpu_requests(const json_t *pod)
{
    json_t *sum = json_object();
    static const char *const lists[] = {"spec.containers", "spec.initContainers"};
    for (size_t l = 0; l < 2; l++) {
        size_t i;
        json_t *c;
        json_array_foreach (kobj_path(pod, lists[l]), i, c) {
            json_t *req = kobj_path(c, "resources.requests");
            json_t *lim = kobj_path(c, "resources.limits");
            _cleanup_json_ json_t *mine = json_object();
            const char *k;
            json_t *v;
            json_object_foreach (lim, k, v)
                if (cap_gpu_resource(k))
                    json_object_set_new(mine, k, json_integer(units(v)));
            json_object_foreach (req, k, v)
                if (cap_gpu_resource(k))
                    json_object_set_new(mine, k, json_integer(units(v)));
            json_object_foreach (mine, k, v) {
                if (l == 0)
                    add(sum, k, json_integer_value(v));
                else if (json_integer_value(v) > get(sum, k))
                    json_object_set(sum, k, v);
            }
        }
    }
    const char *k;
    json_t *v;
    void *tmp;
    json_object_foreach_safe (sum, tmp, k, v)
        if (json_integer_value(v) <= 0)
            json_object_del(sum, k);
    return sum;
}

static bool node_ready(const json_t *node)
{
    const json_t *c = kobj_condition_find(node, "Ready");
    if (c)
        return streq_ptr(kobj_str(c, "status"), "True");
    /* no conditions reported at all: taken as ready */
    return !json_is_array(kobj_path(node, "status.conditions"));
}

/* What one GPU node has: physical and allocatable per resource, and why it is excluded from
 * what is advertised (NULL: it is not). */
struct node_info {
    const json_t *node;
    const char *name;
    const json_t *labels;
    json_t *physical;    /* resource -> units */
    json_t *allocatable; /* resource -> units */
    char *excluded;
    size_t pool;
};

/* dra_adv: what the node publishes through DRA (resource -> devices; NULL: nothing). */
static void node_info_read(const json_t *node, const json_t *dra_adv, json_t *resources,
                           struct node_info *ni)
{
    ni->node = node;
    ni->name = kobj_name(node) ?: "";
    ni->labels = kobj_labels(node);
    ni->physical = json_object();
    ni->allocatable = json_object();
    const char *k;
    json_t *v;
    json_t *cap = kobj_path(node, "status.capacity");
    json_object_foreach (kobj_path(node, "status.allocatable"), k, v)
        if (cap_gpu_resource(k))
            json_object_set_new(ni->allocatable, k, json_integer(units(v)));
    struct nodestate_gpu_count gc;
    struct err e = {0};
    const char *ann = kobj_annotation(node, NODESTATE_ANN_GPU_COUNT);
    bool have_ann = ann && nodestate_gpu_count_parse(ann, &gc, &e) == 0 && gc.n_expected > 0;
    if (have_ann) {
        for (size_t i = 0; i < gc.n_expected; i++)
            if (cap_gpu_resource(gc.expected[i].name))
                json_object_set_new(ni->physical, gc.expected[i].name,
                                    json_integer(gc.expected[i].count));
    } else {
        json_object_foreach (cap, k, v)
            if (cap_gpu_resource(k))
                json_object_set_new(ni->physical, k, json_integer(units(v)));
        const char *cnt = kobj_label(node, "nvidia.com/gpu.count");
        int64_t n;
        if (!json_object_get(ni->physical, "nvidia.com/gpu") && cnt && parse_i64(cnt, &n) == 0 &&
            n > 0 && !streq_ptr(kobj_label(node, "nvidia.com/mig.strategy"), "mixed"))
            json_object_set_new(ni->physical, "nvidia.com/gpu", json_integer(n));
    }
    /* the gpu-count annotation compares NVML with the device plugin's allocatable: on a node
     * whose GPUs only DRA publishes, its shortfall says nothing */
    bool dra_only = json_object_size(dra_adv) > 0 && json_object_size(ni->allocatable) == 0;
    if (!node_ready(node)) {
        ni->excluded = xstrdup("not Ready");
    } else if (json_is_true(kobj_path(node, "spec.unschedulable"))) {
        ni->excluded = xstrdup("cordoned");
    } else if (have_ann && gc.mismatch && !dra_only) {
        ni->excluded = xasprintf("advertises fewer GPUs than it has (%s)",
                                 gc.n_missing ? gc.missing[0] : "gpu-count mismatch");
    } else {
        json_object_foreach (cap, k, v) {
            int64_t c = units(v), a = get(ni->allocatable, k);
            if (cap_gpu_resource(k) && a < c) {
                ni->excluded = xasprintf("unhealthy GPUs: %s %lld of %lld allocatable", k,
                                         (long long)a, (long long)c);
                break;
            }
        }
    }
    /* a node moving from the device plugin to DRA offers the same GPUs through both: each
     * device once */
    json_object_foreach ((json_t *)dra_adv, k, v)
        if (json_integer_value(v) > get(ni->allocatable, k))
            json_object_set(ni->allocatable, k, v);
    json_object_foreach (ni->physical, k, v)
        json_object_set_new(resources, k, json_true());
    json_object_foreach (ni->allocatable, k, v)
        json_object_set_new(resources, k, json_true());
}

static bool node_is_gpu(const json_t *node, const struct node_info *ni)
{
    return json_object_size(ni->physical) || json_object_size(ni->allocatable) ||
           streq_ptr(kobj_label(node, "nvidia.com/gpu.present"), "true") ||
           kobj_label(node, "nvidia.com/gpu.product");
}

/* ---- DRA ---------------------------------------------------------------------------------- */

#define DRA_QUOTA_SUFFIX    ".deviceclass.resource.k8s.io/devices"
#define DRA_IMPLICIT_PREFIX REQ_PREFIX "deviceclass.resource.kubernetes.io/"
#define DRA_GPU_CLASS       "gpu.nvidia.com"
#define DRA_RES_MAX         128

/* The resource a published device stands for (see capacity.h); NULL for the others. */
static const char *dra_device_resource(const json_t *dev, char buf[static DRA_RES_MAX])
{
    const char *type = kobj_path_str(dev, "attributes.type.string");
    if (streq_ptr(type, "gpu"))
        return "nvidia.com/gpu";
    const char *profile = kobj_path_str(dev, "attributes.profile.string");
    if (!streq_ptr(type, "mig") || !profile)
        return NULL;
    int w = snprintf(buf, DRA_RES_MAX, "nvidia.com/mig-%s", profile);
    return w > 0 && w < DRA_RES_MAX && cap_gpu_resource(buf) ? buf : NULL;
}

static char *two(const char *a, const char *b)
{
    return xasprintf("%s/%s", a, b);
}

/* How many devices consuming `use` (a consumesCounters entry's counters) a counter set's
 * totals hold at once; 0 when a counter is unknown or unreadable. */
static int64_t counters_fit(const json_t *set, const json_t *use)
{
    int64_t fit = INT64_MAX;
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *)use, k, v) {
        int64_t need = 0, have = 0;
        if (kobj_quantity_milli(kobj_str(v, "value"), &need) < 0 || need <= 0)
            continue; /* consumes none of it */
        const json_t *total = json_object_get(set, k);
        if (!total || kobj_quantity_milli(kobj_str(total, "value"), &have) < 0 || have < need)
            return 0;
        if (have / need < fit)
            fit = have / need;
    }
    return fit;
}

/* What the DRA objects say, per node and per claim. */
struct dra {
    json_t *node_adv;  /* node -> resource -> devices (on-demand ones as many as fit) */
    json_t *pool_node; /* pool -> node */
    json_t *dev_res;   /* "pool/device" -> resource */
    json_t *class_res; /* DeviceClass -> resource */
};

static void dra_clear(struct dra *d)
{
    json_decref(d->node_adv);
    json_decref(d->pool_node);
    json_decref(d->dev_res);
    json_decref(d->class_res);
}

static void dra_read(const json_t *slices, const json_t *classes, struct dra *d)
{
    d->node_adv = json_object();
    d->pool_node = json_object();
    d->dev_res = json_object();
    d->class_res = json_object();
    _cleanup_json_ json_t *sets = json_object();      /* "pool/set" -> counters */
    _cleanup_json_ json_t *on_demand = json_object(); /* "node/pool/set/resource" -> {n, fit} */
    size_t i, k;
    json_t *sl, *x;
    json_array_foreach (slices, i, sl) {
        const char *pool = kobj_path_str(sl, "spec.pool.name");
        if (!json_is_object(sl) || !streq_ptr(kobj_path_str(sl, "spec.driver"), CAP_DRA_DRIVER) ||
            !pool)
            continue;
        json_array_foreach (kobj_path(sl, "spec.sharedCounters"), k, x) {
            const char *name = kobj_str(x, "name");
            if (name && json_is_object(json_object_get(x, "counters"))) {
                _cleanup_free_ char *key = two(pool, name);
                json_object_set(sets, key, json_object_get(x, "counters"));
            }
        }
    }
    json_array_foreach (slices, i, sl) {
        const char *pool = kobj_path_str(sl, "spec.pool.name");
        const char *node = kobj_path_str(sl, "spec.nodeName");
        /* a pool that is not a node's (network-attached devices) is no node's capacity */
        if (!json_is_object(sl) || !streq_ptr(kobj_path_str(sl, "spec.driver"), CAP_DRA_DRIVER) ||
            !pool || !node)
            continue;
        json_object_set_new(d->pool_node, pool, json_string(node));
        json_t *adv = sub(d->node_adv, node);
        json_array_foreach (kobj_path(sl, "spec.devices"), k, x) {
            char buf[DRA_RES_MAX];
            const char *res = dra_device_resource(x, buf), *name = kobj_str(x, "name");
            if (!res || !name)
                continue;
            _cleanup_free_ char *dkey = two(pool, name);
            json_object_set_new(d->dev_res, dkey, json_string(res));
            json_t *uses = json_object_get(x, "consumesCounters");
            if (json_array_size(uses) == 0) {
                add(adv, res, 1);
                continue;
            }
            /* on demand: devices of one profile on one GPU overlap; as many as its counters
             * hold at once */
            int64_t fit = INT64_MAX;
            size_t u;
            json_t *use;
            json_array_foreach (uses, u, use) {
                _cleanup_free_ char *skey = two(pool, kobj_str(use, "counterSet") ?: "");
                int64_t f =
                    counters_fit(json_object_get(sets, skey), json_object_get(use, "counters"));
                fit = f < fit ? f : fit;
            }
            _cleanup_free_ char *gkey =
                xasprintf("%s/%s/%s/%s", node, pool,
                          kobj_str(json_array_get(uses, 0), "counterSet") ?: "", res);
            json_t *g = json_object_get(on_demand, gkey);
            if (!g) {
                g = json_pack("{s:s,s:s,s:I,s:I}", "node", node, "res", res, "n", (json_int_t)0,
                              "fit", (json_int_t)fit);
                json_object_set_new(on_demand, gkey, g);
            }
            add(g, "n", 1);
            if (fit < get(g, "fit"))
                json_object_set_new(g, "fit", json_integer(fit));
        }
    }
    const char *key;
    json_object_foreach (on_demand, key, x) {
        int64_t n = get(x, "n"), fit = get(x, "fit");
        add(sub(d->node_adv, kobj_str(x, "node")), kobj_str(x, "res"), n < fit ? n : fit);
    }
    json_array_foreach (classes, i, x) {
        const char *ern = kobj_path_str(x, "spec.extendedResourceName");
        if (kobj_name(x) && cap_gpu_resource(ern))
            json_object_set_new(d->class_res, kobj_name(x), json_string(ern));
    }
    if (!json_object_get(d->class_res, DRA_GPU_CLASS))
        json_object_set_new(d->class_res, DRA_GPU_CLASS, json_string("nvidia.com/gpu"));
}

/* The GPU resource a ResourceQuota key limits: requests.<GPU resource>, or a DRA device-class
 * quota of a class the view maps; NULL for any other key. */
static const char *quota_resource(const char *key, const struct dra *d)
{
    if (str_has_prefix(key, DRA_IMPLICIT_PREFIX))
        return json_string_value(json_object_get(d->class_res, key + strlen(DRA_IMPLICIT_PREFIX)));
    if (str_has_prefix(key, REQ_PREFIX) && cap_gpu_resource(key + strlen(REQ_PREFIX)))
        return key + strlen(REQ_PREFIX);
    if (str_has_suffix(key, DRA_QUOTA_SUFFIX) && strlen(key) > strlen(DRA_QUOTA_SUFFIX)) {
        _cleanup_free_ char *cls = xstrndup(key, strlen(key) - strlen(DRA_QUOTA_SUFFIX));
        return json_string_value(json_object_get(d->class_res, cls));
    }
    return NULL;
}

/* Whether a claim is held: reserved for a pod that is known and not finished, or for a
 * consumer that is not a pod. */
static bool claim_held(const json_t *claim, const json_t *pods_by_key, json_t *ret_pods)
{
    bool held = false;
    size_t i;
    json_t *ref;
    json_array_foreach (kobj_path(claim, "status.reservedFor"), i, ref) {
        const char *group = kobj_str(ref, "apiGroup");
        if (!streq_ptr(kobj_str(ref, "resource"), "pods") || (group && *group)) {
            held = true;
            continue;
        }
        _cleanup_free_ char *key =
            two(kobj_namespace(claim) ?: "default", kobj_str(ref, "name") ?: "");
        const json_t *pod = json_object_get(pods_by_key, key);
        if (pod && !pod_finished(pod)) {
            held = true;
            json_array_append_new(ret_pods, json_string(key));
        }
    }
    return held;
}

/* The devices of one held claim: resource -> devices, per node. A device no longer published
 * still counts when its name says it is a whole GPU (gpu-<minor>). */
static json_t *claim_devices(const json_t *claim, const struct dra *d)
{
    json_t *by_node = json_object();
    size_t i;
    json_t *r;
    json_array_foreach (kobj_path(claim, "status.allocation.devices.results"), i, r) {
        const char *pool = kobj_str(r, "pool"), *dev = kobj_str(r, "device");
        if (!streq_ptr(kobj_str(r, "driver"), CAP_DRA_DRIVER) || !pool || !dev)
            continue;
        _cleanup_free_ char *dkey = two(pool, dev);
        const char *res = json_string_value(json_object_get(d->dev_res, dkey));
        int64_t minor;
        if (!res && str_has_prefix(dev, "gpu-") && parse_i64(dev + 4, &minor) == 0)
            res = "nvidia.com/gpu";
        if (!res)
            continue;
        /* gpuop's and NVIDIA's pools are named after their node */
        const char *node = json_string_value(json_object_get(d->pool_node, pool)) ?: pool;
        add(sub(by_node, node), res, 1);
    }
    return by_node;
}

/* ---- the view ----------------------------------------------------------------------------- */

void cap_view_free(struct cap_view *v)
{
    if (!v)
        return;
    for (size_t i = 0; i < v->n_resources; i++)
        free(v->resources[i].name);
    free(v->resources);
    for (size_t i = 0; i < v->n_pools; i++) {
        struct cap_pool *p = &v->pools[i];
        free(p->name);
        free(p->selector);
        free_strv(p->excluded, p->n_excluded);
        for (size_t j = 0; j < p->n_res; j++)
            free_strv(p->res[j].pinned_ns, p->res[j].n_pinned_ns);
        free(p->res);
    }
    free(v->pools);
    for (size_t i = 0; i < v->n_namespaces; i++) {
        free(v->namespaces[i].name);
        free(v->namespaces[i].res);
        free_strv(v->namespaces[i].pools, v->namespaces[i].n_pools);
    }
    free(v->namespaces);
    free(v);
}

static char *selector_text(const json_t *labels)
{
    size_t n;
    char **keys = sorted_keys(labels, &n);
    char *s = xstrdup("");
    for (size_t i = 0; i < n; i++) {
        char *next = xasprintf("%s%s%s=%s", s, i ? "," : "", keys[i],
                               json_string_value(json_object_get(labels, keys[i])));
        free(s);
        s = next;
    }
    free_strv(keys, n);
    return s;
}

static size_t index_of(char **v, size_t n, const char *s)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i], s) == 0)
            return i;
    return n;
}

int cap_view_compute(const struct cap_input *in, struct cap_view **ret, struct err *e)
{
    const json_t *nodes = in->nodes, *pods = in->pods, *quotas = in->quotas;
    const json_t *const lists[] = {nodes, pods, quotas, in->slices, in->claims, in->classes};
    for (size_t l = 0; l < ARRAY_SIZE(lists); l++)
        if (lists[l] && !json_is_array(lists[l]))
            return err_set(e, -EINVAL,
                           "capacity view: nodes, pods, quotas, resourceslices, "
                           "resourceclaims and deviceclasses must be arrays");
    _cleanup_(dra_clear) struct dra dra = {0};
    dra_read(in->slices, in->classes, &dra);
    _cleanup_(cap_view_freep) struct cap_view *v = xcalloc(1, sizeof(*v));
    v->threshold = in->overcommit_ratio > 0 ? in->overcommit_ratio : CAP_DEFAULT_RATIO;
    _cleanup_json_ json_t *resources = json_object();

    /* nodes, and the pools they fall in */
    size_t n_nodes = json_array_size(nodes), n_gpu = 0;
    struct node_info *ni = xcalloc(n_nodes ? n_nodes : 1, sizeof(*ni));
    _cleanup_json_ json_t *pool_sel = json_object(); /* pool name -> match labels */
    for (size_t i = 0; i < in->n_pools; i++)
        if (!json_object_get(pool_sel, in->pools[i].name))
            json_object_set(pool_sel, in->pools[i].name, in->pools[i].match_labels);
    /* each GPU node's pool name (borrowed: a pool's, a node's label, POOL_OTHER) */
    _cleanup_free_ const char **node_pool = xcalloc(n_nodes ? n_nodes : 1, sizeof(*node_pool));
    /* the nodes of a pool have alike resources: each alike set held once (read-only after) */
    _cleanup_json_ json_t *alike = json_object();
    for (size_t i = 0; i < n_nodes; i++) {
        const json_t *node = json_array_get(nodes, i);
        struct node_info tmp = {0};
        node_info_read(node, json_object_get(dra.node_adv, kobj_name(node) ?: ""), resources, &tmp);
        tmp.physical = kobj_intern(alike, tmp.physical);
        tmp.allocatable = kobj_intern(alike, tmp.allocatable);
        if (!node_is_gpu(node, &tmp)) {
            json_decref(tmp.physical);
            json_decref(tmp.allocatable);
            free(tmp.excluded);
            continue;
        }
        const char *pool = NULL;
        if (in->n_pools) {
            for (size_t p = 0; p < in->n_pools && !pool; p++)
                if (kobj_labels_match(in->pools[p].match_labels, tmp.labels))
                    pool = in->pools[p].name;
            if (!pool) {
                pool = POOL_OTHER;
                json_object_set_new(pool_sel, POOL_OTHER, json_object());
            }
        } else {
            const char *prod = kobj_label(node, "nvidia.com/gpu.product");
            pool = prod ? prod : POOL_OTHER;
            if (!json_object_get(pool_sel, pool))
                json_object_set_new(pool_sel, pool,
                                    prod ? json_pack("{s:s}", "nvidia.com/gpu.product", prod)
                                         : json_object());
        }
        node_pool[n_gpu] = pool;
        ni[n_gpu++] = tmp;
    }
    size_t n_pools;
    char **pool_names = sorted_keys(pool_sel, &n_pools);
    for (size_t i = 0; i < n_gpu; i++)
        ni[i].pool = index_of(pool_names, n_pools, node_pool[i]);

    /* pods: what each namespace requests and where it can land; what each pool's nodes run */
    _cleanup_json_ json_t *ns_req = json_object();     /* ns -> resource -> units */
    _cleanup_json_ json_t *ns_pools = json_object();   /* ns -> pool -> true */
    _cleanup_json_ json_t *ns_pods = json_object();    /* ns -> GPU pods */
    _cleanup_json_ json_t *pool_req = json_object();   /* pool -> resource -> units */
    _cleanup_json_ json_t *node_idx = json_object();   /* node name -> index */
    _cleanup_json_ json_t *placements = json_object(); /* selection -> pools (object) */
    for (size_t i = 0; i < n_gpu; i++)
        json_object_set_new(node_idx, ni[i].name, json_integer((json_int_t)i));
    size_t i;
    json_t *pod;

    /* DRA claims: a held claim's devices count once, for its namespace and its node's pool;
     * the pods holding it learn what they use (where they can land) */
    _cleanup_json_ json_t *pods_by_key = json_object(); /* "ns/name" -> pod */
    _cleanup_json_ json_t *ext_claims = json_object();  /* "ns/claim" of extended resources */
    _cleanup_json_ json_t *pod_dra = json_object();     /* "ns/name" -> resource -> devices */
    json_array_foreach (pods, i, pod) {
        if (!json_is_object(pod))
            continue;
        const char *ns = kobj_namespace(pod) ?: "default";
        _cleanup_free_ char *key = two(ns, kobj_name(pod) ?: "");
        json_object_set(pods_by_key, key, pod);
        const char *ext =
            kobj_path_str(pod, "status.extendedResourceClaimStatus.resourceClaimName");
        if (ext) {
            _cleanup_free_ char *ckey = two(ns, ext);
            json_object_set_new(ext_claims, ckey, json_true());
        }
    }
    json_t *claim;
    json_array_foreach (in->claims, i, claim) {
        const char *ns = kobj_namespace(claim) ?: "default";
        _cleanup_free_ char *ckey = two(ns, kobj_name(claim) ?: "");
        if (!json_is_object(claim) ||
            streq_ptr(kobj_annotation(claim, CAP_DRA_EXTENDED_ANNOT), "true") ||
            json_object_get(ext_claims, ckey))
            continue; /* counted through its pod's extended-resource request */
        _cleanup_json_ json_t *holders = json_array();
        if (!claim_held(claim, pods_by_key, holders))
            continue;
        _cleanup_json_ json_t *by_node = claim_devices(claim, &dra);
        const char *node, *k;
        json_t *devs, *x;
        json_object_foreach (by_node, node, devs) {
            json_t *on = json_object_get(node_idx, node);
            json_object_foreach (devs, k, x) {
                json_object_set_new(resources, k, json_true());
                add(sub(ns_req, ns), k, json_integer_value(x));
                if (on)
                    add(sub(pool_req, pool_names[ni[json_integer_value(on)].pool]), k,
                        json_integer_value(x));
                size_t h;
                json_t *hk;
                json_array_foreach (holders, h, hk)
                    add(sub(pod_dra, json_string_value(hk)), k, json_integer_value(x));
            }
        }
    }

    json_array_foreach (pods, i, pod) {
        if (!json_is_object(pod) || pod_finished(pod))
            continue;
        const char *ns = kobj_namespace(pod) ?: "default";
        _cleanup_json_ json_t *req = pod_gpu_requests(pod);
        _cleanup_free_ char *pkey = two(ns, kobj_name(pod) ?: "");
        json_t *dra_req = json_object_get(pod_dra, pkey);
        if (json_object_size(req) == 0 && json_object_size(dra_req) == 0)
            continue;
        add(ns_pods, ns, 1);
        json_t *nr = sub(ns_req, ns), *np = sub(ns_pools, ns);
        const char *k;
        json_t *x;
        json_object_foreach (req, k, x) {
            add(nr, k, json_integer_value(x));
            json_object_set_new(resources, k, json_true());
        }
        json_t *on = json_object_get(node_idx, kobj_path_str(pod, "spec.nodeName") ?: "");
        if (on) {
            struct node_info *n = &ni[json_integer_value(on)];
            json_object_set_new(np, pool_names[n->pool], json_true());
            json_t *pr = sub(pool_req, pool_names[n->pool]);
            json_object_foreach (req, k, x)
                add(pr, k, json_integer_value(x));
        }
        /* where it can land: pods of one workload share their selection, so the pools are
         * worked out once per distinct (selector, affinity, resources); what its claims hold
         * counts as resources it uses */
        json_object_update_missing(req, dra_req);
        _cleanup_json_ json_t *sig_v = json_pack("[O?,O?,O]", kobj_path(pod, "spec.nodeSelector"),
                                                 kobj_path(pod, "spec.affinity.nodeAffinity"), req);
        _cleanup_free_ char *sig = json_dumps(sig_v, JSON_COMPACT | JSON_SORT_KEYS);
        json_t *landing = sig ? json_object_get(placements, sig) : NULL;
        if (!landing) {
            landing = json_object();
            for (size_t j = 0; j < n_gpu; j++) {
                bool offers = false;
                json_object_foreach (req, k, x)
                    offers |= get(ni[j].physical, k) > 0 || get(ni[j].allocatable, k) > 0;
                if (offers && !json_object_get(landing, pool_names[ni[j].pool]) &&
                    pod_fits(pod, ni[j].labels))
                    json_object_set_new(landing, pool_names[ni[j].pool], json_true());
            }
            if (sig)
                json_object_set_new(placements, sig, landing); /* the map holds it */
        }
        json_object_update(np, landing);
        if (!sig)
            json_decref(landing); /* not kept (no signature): ours alone */
    }

    /* quotas: per namespace, per resource, the smallest hard and its used */
    _cleanup_json_ json_t *ns_hard = json_object(); /* ns -> resource -> units */
    _cleanup_json_ json_t *ns_used = json_object();
    json_t *q;
    json_array_foreach (quotas, i, q) {
        const char *ns = kobj_namespace(q) ?: "default";
        const char *k;
        json_t *x;
        json_object_foreach (kobj_path(q, "spec.hard"), k, x) {
            const char *r = quota_resource(k, &dra);
            if (!r)
                continue;
            int64_t h = units(x);
            json_t *cur = json_object_get(sub(ns_hard, ns), r);
            if (cur && json_integer_value(cur) <= h)
                continue;
            json_object_set_new(sub(ns_hard, ns), r, json_integer(h));
            json_object_set_new(
                sub(ns_used, ns), r,
                json_integer(units(json_object_get(kobj_path(q, "status.used"), k))));
            json_object_set_new(resources, r, json_true());
        }
    }

    /* the resources, sorted */
    size_t n_res;
    char **res_names = sorted_keys(resources, &n_res);
    v->n_resources = n_res;
    v->resources = xcalloc(n_res ? n_res : 1, sizeof(*v->resources));
    for (size_t r = 0; r < n_res; r++)
        v->resources[r].name = res_names[r];
    free(res_names); /* the names now belong to v->resources */

    /* namespaces with a GPU quota or GPU pods; those without pods land wherever their quota's
     * resources are offered */
    _cleanup_json_ json_t *all_ns = json_object();
    const char *k;
    json_t *x;
    json_object_foreach (ns_hard, k, x)
        json_object_set_new(all_ns, k, json_true());
    json_object_foreach (ns_req, k, x)
        json_object_set_new(all_ns, k, json_true());
    size_t n_ns;
    char **ns_names = sorted_keys(all_ns, &n_ns);
    v->n_namespaces = n_ns;
    v->namespaces = xcalloc(n_ns ? n_ns : 1, sizeof(*v->namespaces));
    for (size_t n = 0; n < n_ns; n++) {
        struct cap_namespace *cn = &v->namespaces[n];
        const char *ns = ns_names[n];
        cn->name = ns_names[n];
        json_t *hard = json_object_get(ns_hard, ns), *used = json_object_get(ns_used, ns);
        json_t *req = json_object_get(ns_req, ns);
        cn->gpu_pods = (size_t)get(ns_pods, ns);
        cn->no_quota = cn->gpu_pods > 0 && json_object_size(hard) == 0;
        cn->res = xcalloc(n_res ? n_res : 1, sizeof(*cn->res));
        for (size_t r = 0; r < n_res; r++) {
            const char *rn = v->resources[r].name;
            if (!json_object_get(hard, rn) && !json_object_get(req, rn))
                continue;
            struct cap_ns_resource *nr = &cn->res[cn->n_res++];
            nr->name = rn;
            nr->hard = json_object_get(hard, rn) ? get(hard, rn) : -1;
            nr->used = json_object_get(hard, rn) ? get(used, rn) : -1;
            nr->requested = get(req, rn);
        }
        json_t *np = sub(ns_pools, ns);
        if (cn->gpu_pods == 0) {
            for (size_t j = 0; j < n_gpu; j++)
                json_object_foreach (hard, k, x)
                    if (get(ni[j].physical, k) > 0 || get(ni[j].allocatable, k) > 0)
                        json_object_set_new(np, pool_names[ni[j].pool], json_true());
        }
        cn->pools = sorted_keys(np, &cn->n_pools);
    }
    free(ns_names); /* the names now belong to v->namespaces */

    /* pools */
    v->n_pools = n_pools;
    v->pools = xcalloc(n_pools ? n_pools : 1, sizeof(*v->pools));
    for (size_t p = 0; p < n_pools; p++) {
        struct cap_pool *cp = &v->pools[p];
        cp->name = pool_names[p];
        cp->selector = selector_text(json_object_get(pool_sel, cp->name));
        cp->n_res = n_res;
        cp->res = xcalloc(n_res ? n_res : 1, sizeof(*cp->res));
        _cleanup_json_ json_t *excl = json_object();
        for (size_t j = 0; j < n_gpu; j++) {
            if (ni[j].pool != p)
                continue;
            cp->n_nodes++;
            if (ni[j].excluded)
                json_object_set_new(excl, ni[j].name, json_string(ni[j].excluded));
        }
        char **names = sorted_keys(excl, &cp->n_excluded);
        for (size_t j = 0; j < cp->n_excluded; j++) {
            char *line =
                xasprintf("%s: %s", names[j], json_string_value(json_object_get(excl, names[j])));
            free(names[j]);
            names[j] = line;
        }
        cp->excluded = names;
        for (size_t r = 0; r < n_res; r++) {
            struct cap_pool_resource *pr = &cp->res[r];
            const char *rn = v->resources[r].name;
            pr->name = rn;
            for (size_t j = 0; j < n_gpu; j++) {
                if (ni[j].pool != p)
                    continue;
                pr->a.physical += get(ni[j].physical, rn);
                if (!ni[j].excluded)
                    pr->a.advertised += get(ni[j].allocatable, rn);
            }
            pr->a.requested = get(json_object_get(pool_req, cp->name), rn);
            _cleanup_json_ json_t *pinned = json_object();
            for (size_t n = 0; n < v->n_namespaces; n++) {
                struct cap_namespace *cn = &v->namespaces[n];
                int64_t h = get(json_object_get(ns_hard, cn->name), rn);
                if (h <= 0 || index_of(cn->pools, cn->n_pools, cp->name) == cn->n_pools)
                    continue;
                pr->a.quota += h;
                if (cn->n_pools == 1) {
                    pr->pinned += h;
                    json_object_set_new(pinned, cn->name, json_true());
                }
            }
            pr->pinned_ns = sorted_keys(pinned, &pr->n_pinned_ns);
            pr->short_ = pr->pinned > 0 && (double)pr->pinned > v->threshold * pr->a.advertised;
        }
    }
    free(pool_names); /* the names now belong to v->pools */

    /* totals */
    for (size_t r = 0; r < n_res; r++) {
        struct cap_resource *cr = &v->resources[r];
        for (size_t p = 0; p < n_pools; p++) {
            cr->total.physical += v->pools[p].res[r].a.physical;
            cr->total.advertised += v->pools[p].res[r].a.advertised;
            cr->total.requested += v->pools[p].res[r].a.requested;
        }
        json_object_foreach (ns_hard, k, x)
            cr->total.quota += get(x, cr->name);
        cr->ratio = cr->total.advertised > 0 ? (double)cr->total.quota / cr->total.advertised
                    : cr->total.quota > 0    ? INFINITY
                                             : 0.0;
        cr->over = cr->ratio > v->threshold;
    }

    assert(kobj_intern_check(alike)); /* nothing changed a set nodes share */
    for (size_t j = 0; j < n_gpu; j++) {
        json_decref(ni[j].physical);
        json_decref(ni[j].allocatable);
        free(ni[j].excluded);
    }
    free(ni);
    *ret = steal_ptr(&v);
    return 0;
}

/* ---- JSON --------------------------------------------------------------------------------- */

static json_t *strv_json(char **v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_string(v[i]));
    return a;
}

static json_t *amounts_json(const struct cap_amounts *a)
{
    return json_pack("{s:I,s:I,s:I,s:I}", "physical", (json_int_t)a->physical, "advertised",
                     (json_int_t)a->advertised, "requested", (json_int_t)a->requested, "quota",
                     (json_int_t)a->quota);
}

json_t *cap_view_to_json(const struct cap_view *v)
{
    json_t *res = json_array(), *pools = json_array(), *nss = json_array();
    for (size_t r = 0; r < v->n_resources; r++) {
        const struct cap_resource *cr = &v->resources[r];
        json_t *o = amounts_json(&cr->total);
        json_object_set_new(o, "name", json_string(cr->name));
        /* JSON has no infinity: null stands for "quota with nothing advertised" */
        json_object_set_new(o, "overcommitRatio",
                            isinf(cr->ratio) ? json_null() : json_real(cr->ratio));
        json_object_set_new(o, "over", json_boolean(cr->over));
        json_array_append_new(res, o);
    }
    for (size_t p = 0; p < v->n_pools; p++) {
        const struct cap_pool *cp = &v->pools[p];
        json_t *rl = json_array();
        for (size_t r = 0; r < cp->n_res; r++) {
            const struct cap_pool_resource *pr = &cp->res[r];
            if (!pr->a.physical && !pr->a.advertised && !pr->a.requested && !pr->a.quota)
                continue;
            json_t *o = amounts_json(&pr->a);
            json_object_set_new(o, "name", json_string(pr->name));
            json_object_set_new(o, "pinnedQuota", json_integer(pr->pinned));
            json_object_set_new(o, "pinnedNamespaces", strv_json(pr->pinned_ns, pr->n_pinned_ns));
            json_object_set_new(o, "short", json_boolean(pr->short_));
            json_array_append_new(rl, o);
        }
        json_array_append_new(pools,
                              json_pack("{s:s,s:s,s:I,s:o,s:o}", "name", cp->name, "selector",
                                        cp->selector, "nodes", (json_int_t)cp->n_nodes, "excluded",
                                        strv_json(cp->excluded, cp->n_excluded), "resources", rl));
    }
    for (size_t n = 0; n < v->n_namespaces; n++) {
        const struct cap_namespace *cn = &v->namespaces[n];
        json_t *rl = json_array();
        for (size_t r = 0; r < cn->n_res; r++) {
            const struct cap_ns_resource *nr = &cn->res[r];
            json_t *o =
                json_pack("{s:s,s:I}", "name", nr->name, "requested", (json_int_t)nr->requested);
            if (nr->hard >= 0) {
                json_object_set_new(o, "hard", json_integer(nr->hard));
                json_object_set_new(o, "used", json_integer(nr->used));
            }
            json_array_append_new(rl, o);
        }
        json_array_append_new(nss,
                              json_pack("{s:s,s:o,s:o,s:I,s:b}", "name", cn->name, "resources", rl,
                                        "pools", strv_json(cn->pools, cn->n_pools), "gpuPods",
                                        (json_int_t)cn->gpu_pods, "noGPUQuota", cn->no_quota));
    }
    return json_pack("{s:f,s:o,s:o,s:o}", "threshold", v->threshold, "resources", res, "pools",
                     pools, "namespaces", nss);
}
