/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Per-pool drivers: NVIDIADriver (nvidia.com/v1alpha1) objects, when the ClusterPolicy sets
 * spec.driver.useNvidiaDriverCRD. Pure, called by op_plan():
 *
 *  - each GPU node gets an owner, NVIDIA's label nvidia.com/gpu-operator.driver.owner: the one
 *    valid non-default NVIDIADriver whose nodeSelector matches it, else the default one
 *    (spec.default), else none;
 *  - each NVIDIADriver renders one driver DaemonSet per OS (NFD's os_release ID + VERSION_ID;
 *    with usePrecompiled, per OS and kernel) among the nodes it owns, named
 *    nvidia-<driverType>-driver-<name>-<os>, selecting the owner label and the OS labels;
 *  - bad input changes nothing: an NVIDIADriver that is invalid, or that selects a node another
 *    one selects too, keeps its live DaemonSets exactly as they are (none created, updated or
 *    deleted), and the nodes it claims keep their owner label; its status and an Event say why.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "operator-internal.h"
#include "operator.h"
#include "yamlcfg.h"

#define OS_ID_LABEL     "feature.node.kubernetes.io/system-os_release.ID"
#define OS_VER_LABEL    "feature.node.kubernetes.io/system-os_release.VERSION_ID"
#define KERNEL_LABEL    OP_LABEL_KERNEL
#define DEFAULT_IMAGE   "nvcr.io/nvidia/driver"
#define LABEL_VALUE_MAX 63
#define NAMED_NODES_MAX 10 /* nodes named in one conflict message; the rest are counted */

struct nvd {
    const json_t *obj;
    const json_t *kmc;       /* the ConfigMap spec.kernelModuleConfig.name names, as read */
    const char *kmc_missing; /* that name, when no such ConfigMap is there */
    const char *name;
    const json_t *spec;
    const json_t *selector; /* spec.nodeSelector when it is a map of strings, else NULL */
    bool is_default, precompiled;
    bool selects_all;  /* no nodeSelector (and not the default): every GPU node */
    char *invalid;     /* why it is refused, or NULL */
    json_t *conflicts; /* {node: [other NVIDIADrivers]} */
    char *image_base;  /* repository/image (or a full reference) */
    char *version;     /* spec.version, "" with a full reference */
    json_t *groups;    /* key -> {"os", "id", "ver", "kernel"?, "nodes": n} */
    int owned, no_os;  /* driver nodes it owns; those of them without the labels it splits on */
};

static void nvd_done(struct nvd *d)
{
    free(d->invalid);
    json_decref(d->conflicts);
    free(d->image_base);
    free(d->version);
    json_decref(d->groups);
}

/* ---- validation --------------------------------------------------------------------------- */

static bool ref_component_valid(const char *s, size_t n)
{
    /* [a-z0-9]+ with single '.', '_', '-' (or "__") separators, alphanumeric at both ends */
    if (n == 0 || !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= '0' && s[0] <= '9')))
        return false;
    char last = s[n - 1];
    if (!((last >= 'a' && last <= 'z') || (last >= '0' && last <= '9')))
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))
            continue;
        if (c != '.' && c != '_' && c != '-')
            return false;
    }
    return true;
}

/* An image reference as container runtimes parse it: [host[:port]/]path[:tag][@digest]. */
static bool image_ref_valid(const char *ref)
{
    if (!ref || !*ref || strlen(ref) > 512)
        return false;
    _cleanup_free_ char *r = xstrdup(ref);
    char *at = strchr(r, '@');
    if (at) {
        *at = '\0';
        const char *dg = at + 1;
        const char *colon = strchr(dg, ':');
        if (!colon || colon == dg || strlen(colon + 1) < 32)
            return false;
        for (const char *p = colon + 1; *p; p++)
            if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
                return false;
    }
    char *slash = strrchr(r, '/');
    char *colon = strrchr(slash ? slash : r, ':');
    if (colon) {
        *colon = '\0';
        const char *tag = colon + 1;
        size_t n = strlen(tag);
        if (n == 0 || n > 128 || tag[0] == '.' || tag[0] == '-')
            return false;
        for (const char *p = tag; *p; p++)
            if (!(isalnum((unsigned char)*p) || *p == '_' || *p == '.' || *p == '-'))
                return false;
    }
    /* the first component is a registry host when it has a '.' or a ':' or is localhost */
    char *first_end = strchr(r, '/');
    char *path = r;
    if (first_end) {
        size_t n = (size_t)(first_end - r);
        bool host =
            memchr(r, '.', n) || memchr(r, ':', n) || (n == 9 && !strncmp(r, "localhost", 9));
        if (host) {
            for (size_t i = 0; i < n; i++)
                if (!(isalnum((unsigned char)r[i]) || r[i] == '.' || r[i] == '-' || r[i] == ':'))
                    return false;
            path = first_end + 1;
        }
    }
    if (!*path)
        return false;
    for (char *p = path;;) {
        char *end = strchr(p, '/');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (!ref_component_valid(p, n))
            return false;
        if (!end)
            break;
        p = end + 1;
    }
    return true;
}

/* The image base and version: repository/image:version as NVIDIA composes them; an image with
 * a tag or digest of its own and no version is a full reference. */
static int nvd_image(struct nvd *d, struct err *e)
{
    const char *repo = kobj_str(d->spec, "repository");
    const char *image = kobj_str(d->spec, "image");
    const char *version = kobj_str(d->spec, "version");
    if (!image || !*image)
        image = DEFAULT_IMAGE;
    d->image_base = repo && *repo ? xasprintf("%s/%s", repo, image) : xstrdup(image);
    const char *slash = strrchr(d->image_base, '/');
    bool has_tag = strchr(d->image_base, '@') || strchr(slash ? slash : d->image_base, ':');
    if (!version || !*version) {
        if (!has_tag)
            return err_set(e, -EINVAL,
                           "spec.version: Required value: an NVIDIADriver names its driver "
                           "version (the image \"%s\" has no tag)",
                           d->image_base);
        d->version = xstrdup("");
    } else {
        if (has_tag)
            return err_set(e, -EINVAL,
                           "spec.image: Invalid value: \"%s\": a tag or digest and spec.version "
                           "both given",
                           d->image_base);
        d->version = xstrdup(version);
    }
    /* checked with a typical OS suffix, as it will run */
    _cleanup_free_ char *sample = *d->version
                                      ? xasprintf("%s:%s-ubuntu22.04", d->image_base, d->version)
                                      : xstrdup(d->image_base);
    if (!image_ref_valid(sample))
        return err_set(e, -EINVAL, "spec.image: Invalid value: \"%s\": not an image reference",
                       sample);
    return 0;
}

static int nvd_validate(struct nvd *d, struct err *e)
{
    const json_t *spec_schema =
        json_object_get(json_object_get(op_nvidiadriver_schema(), "properties"), "spec");
    int r = op_schema_validate(spec_schema, d->spec, "spec", e);
    if (r < 0)
        return r;
    if (strlen(d->name) > LABEL_VALUE_MAX)
        return err_set(e, -EINVAL,
                       "metadata.name: longer than %d characters (it is the value of the node "
                       "label " OP_LABEL_DRIVER_OWNER ")",
                       LABEL_VALUE_MAX);
    const char *type = kobj_str(d->spec, "driverType");
    if (type && strcmp(type, "gpu") != 0)
        return err_set(e, -EINVAL,
                       "spec.driverType: Unsupported value: \"%s\": gpuop deploys the gpu driver "
                       "type only",
                       type);
    const json_t *sel = json_object_get(d->spec, "nodeSelector");
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *)sel, k, v) {
        if (!kobj_valid_qualified_name(k))
            return err_set(e, -EINVAL, "spec.nodeSelector: Invalid value: \"%s\": not a label key",
                           k);
        if (!json_is_string(v) || !kobj_valid_label_value(json_string_value(v)))
            return err_set(e, -EINVAL,
                           "spec.nodeSelector.%s: Invalid value: a label value is at most 63 of "
                           "[A-Za-z0-9_.-], alphanumeric at both ends",
                           k);
        if (strcmp(k, OP_LABEL_DRIVER_OWNER) == 0)
            return err_set(e, -EINVAL,
                           "spec.nodeSelector: Forbidden: " OP_LABEL_DRIVER_OWNER
                           " is the operator's own label");
    }
    if (d->is_default && json_object_size(sel) > 0)
        return err_set(e, -EINVAL,
                       "spec.nodeSelector: Forbidden: the default NVIDIADriver selects the GPU "
                       "nodes no other one selects; it has no nodeSelector");
    if (d->precompiled && (json_is_true(kobj_path(d->spec, "gds.enabled")) ||
                           json_is_true(kobj_path(d->spec, "gdrcopy.enabled"))))
        return err_set(e, -EINVAL,
                       "spec.usePrecompiled: Forbidden: precompiled drivers do not support GDS "
                       "or GDRCopy");
    static const char *const kinds[] = {"limits", "requests"};
    for (size_t i = 0; i < ARRAY_SIZE(kinds); i++) {
        json_object_foreach (json_object_get(json_object_get(d->spec, "resources"), kinds[i]), k,
                             v) {
            const char *qs = json_string_value(v);
            if (json_is_integer(v) && json_integer_value(v) >= 0)
                continue;
            if (!qs || !op_quantity_valid(qs) || qs[0] == '-')
                return err_set(e, -EINVAL,
                               "spec.resources.%s.%s: Invalid value: not a non-negative "
                               "quantity (e.g. 100m, 64Mi, 2)",
                               kinds[i], k);
        }
    }
    size_t i;
    json_array_foreach (json_object_get(d->spec, "env"), i, v) {
        const char *n = kobj_str(v, "name");
        if (!n || !*n)
            return err_set(e, -EINVAL, "spec.env[%zu].name: Required value", i);
    }
    return nvd_image(d, e);
}

/* ---- nodes -------------------------------------------------------------------------------- */

static bool selects(const struct nvd *d, const json_t *labels)
{
    if (d->is_default)
        return false;
    return d->selects_all || (d->selector && kobj_labels_match(d->selector, labels));
}

/* "nvidia-gpu-driver-<name>-<suffix>" */
static char *ds_name(const struct nvd *d, const char *suffix)
{
    const char *type = kobj_str(d->spec, "driverType");
    return xasprintf("nvidia-%s-driver-%s-%s", type ? type : "gpu", d->name, suffix);
}

/* The value of the selector label: the DaemonSet's name, or a shortened one with its hash. */
static char *selector_value(const char *name)
{
    if (strlen(name) <= LABEL_VALUE_MAX)
        return xstrdup(name);
    return xasprintf("%.54s-%08llx", name, (unsigned long long)(op_fnv64(name) & 0xffffffffu));
}

/* The group a driver node of `d` falls in (by OS, and by kernel when precompiled), or NULL when
 * it lacks the labels. */
static char *group_key(const struct nvd *d, const json_t *labels, json_t **ret_group)
{
    const char *id = kobj_labels_get(labels, OS_ID_LABEL);
    const char *ver = kobj_labels_get(labels, OS_VER_LABEL);
    const char *kernel = kobj_labels_get(labels, KERNEL_LABEL);
    if (!id || !*id || !ver || !*ver || (d->precompiled && (!kernel || !*kernel)))
        return NULL;
    _cleanup_free_ char *os = xasprintf("%s%s", id, ver);
    char *key = d->precompiled ? xasprintf("%s %s", os, kernel) : xstrdup(os);
    *ret_group = json_pack("{s:s,s:s,s:s,s:i}", "os", os, "id", id, "ver", ver, "nodes", 0);
    if (d->precompiled)
        json_object_set_new(*ret_group, "kernel", json_string(kernel));
    return key;
}

static void add_conflict(struct nvd *d, const char *node, const char *other)
{
    json_t *list = json_object_get(d->conflicts, node);
    if (!list) {
        list = json_array();
        json_object_set_new(d->conflicts, node, list);
    }
    json_array_append_new(list, json_string(other));
}

/* The one valid default NVIDIADriver, or NULL; more than one are all invalid. */
static struct nvd *pick_default(struct nvd *ds, size_t n)
{
    size_t defaults = 0;
    struct nvd *dflt = NULL;
    for (size_t k = 0; k < n; k++) {
        if (ds[k].is_default && !ds[k].invalid) {
            defaults++;
            dflt = &ds[k];
        }
    }
    if (defaults <= 1)
        return dflt;
    struct sbuf b _cleanup_sbuf_;
    sbuf_init(&b, 4096);
    for (size_t k = 0; k < n; k++)
        if (ds[k].is_default && !ds[k].invalid)
            sbuf_addf(&b, "%s%s", b.len ? ", " : "", ds[k].name);
    for (size_t k = 0; k < n; k++)
        if (ds[k].is_default && !ds[k].invalid)
            ds[k].invalid = xasprintf("spec.default: Forbidden: more than one default "
                                      "NVIDIADriver (%s)",
                                      sbuf_check(&b) == 0 && b.data ? b.data : "...");
    return NULL;
}

/* GPU node `node`'s owner label change into `owners` (absent: unchanged): the one valid
 * non-default NVIDIADriver selecting it, else the default; a node two select, or one an invalid
 * NVIDIADriver claims, stays as it is (the conflicts are recorded on the NVIDIADrivers). */
static void plan_owner(struct nvd *ds, size_t n, struct nvd *dflt, const json_t *node,
                       json_t *owners)
{
    const char *nn = kobj_name(node);
    const json_t *labels = kobj_labels(node);
    const char *cur = kobj_labels_get(labels, OP_LABEL_DRIVER_OWNER);
    if (!nn)
        return;
    if (!op_node_is_gpu(labels)) {
        if (cur)
            json_object_set_new(owners, nn, json_null());
        return;
    }
    /* a node an invalid NVIDIADriver claims (owns, or selects) stays as it is */
    bool frozen = false;
    for (size_t k = 0; k < n; k++)
        frozen |= ds[k].invalid && (streq_ptr(cur, ds[k].name) || selects(&ds[k], labels));
    struct nvd *want = NULL;
    size_t matches = 0;
    for (size_t k = 0; k < n; k++) {
        if (ds[k].invalid || ds[k].is_default || !selects(&ds[k], labels))
            continue;
        matches++;
        want = &ds[k];
    }
    if (matches > 1) {
        for (size_t a = 0; a < n; a++) {
            if (ds[a].invalid || ds[a].is_default || !selects(&ds[a], labels))
                continue;
            for (size_t b = 0; b < n; b++)
                if (b != a && !ds[b].invalid && !ds[b].is_default && selects(&ds[b], labels))
                    add_conflict(&ds[a], nn, ds[b].name);
        }
        return; /* its owner label stays as it is */
    }
    if (frozen)
        return;
    if (!want)
        want = dflt;
    if (!want) {
        if (cur)
            json_object_set_new(owners, nn, json_null());
        return;
    }
    if (!streq_ptr(cur, want->name))
        json_object_set_new(owners, nn, json_string(want->name));
}

/* Each NVIDIADriver's groups (one DaemonSet per OS), from the owner each node has once the
 * owner patches are written. */
static void plan_groups(struct nvd *ds, size_t n, const json_t *nodes, const json_t *owners)
{
    size_t i;
    const json_t *node;
    json_array_foreach (nodes, i, node) {
        const json_t *labels = kobj_labels(node);
        json_t *ow = json_object_get(owners, kobj_name(node) ?: "");
        const char *owner =
            ow ? json_string_value(ow) : kobj_labels_get(labels, OP_LABEL_DRIVER_OWNER);
        if (!owner || !op_node_is_gpu(labels) || !op_node_runs_driver(labels))
            continue;
        for (size_t k = 0; k < n; k++) {
            struct nvd *d = &ds[k];
            if (d->invalid || !streq_ptr(d->name, owner))
                continue;
            d->owned++;
            json_t *g = NULL;
            _cleanup_free_ char *key = group_key(d, labels, &g);
            if (!key) {
                d->no_os++;
                continue;
            }
            json_t *have = json_object_get(d->groups, key);
            if (have)
                json_decref(g);
            else
                json_object_set_new(d->groups, key, have = g);
            json_object_set_new(
                have, "nodes",
                json_integer(json_integer_value(json_object_get(have, "nodes")) + 1));
        }
    }
}

/* Assigns each GPU node its owner; fills each NVIDIADriver's conflicts and OS groups. */
static void plan_owners(struct nvd *ds, size_t n, const json_t *nodes, json_t *owners)
{
    struct nvd *dflt = pick_default(ds, n);
    size_t i;
    const json_t *node;
    json_array_foreach (nodes, i, node)
        plan_owner(ds, n, dflt, node, owners);
    plan_groups(ds, n, nodes, owners);
}

/* ---- rendering ---------------------------------------------------------------------------- */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The group keys, sorted (a stable plan whatever the node order). */
static const char **sorted_keys(const json_t *obj, size_t *ret_n)
{
    size_t n = json_object_size(obj), i = 0;
    const char **keys = xcalloc(n + 1, sizeof(*keys));
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *)obj, k, v)
        keys[i++] = k;
    qsort(keys, n, sizeof(*keys), cmp_str);
    *ret_n = n;
    return keys;
}

/* The suffix of a group's DaemonSet name: the OS tag, plus a hash of the kernel. */
static char *group_suffix(const json_t *g)
{
    const char *kernel = kobj_str(g, "kernel");
    if (!kernel)
        return xstrdup(kobj_str(g, "os"));
    return xasprintf("%s-%08llx", kobj_str(g, "os"),
                     (unsigned long long)(op_fnv64(kernel) & 0xffffffffu));
}

static char *group_image(const struct nvd *d, const json_t *g)
{
    if (!*d->version)
        return xstrdup(d->image_base);
    const char *kernel = kobj_str(g, "kernel");
    if (kernel)
        return op_precompiled_image(d->image_base, d->version, kernel, kobj_str(g, "os"));
    return xasprintf("%s:%s-%s", d->image_base, d->version, kobj_str(g, "os"));
}

static void set_path_label(json_t *obj, const char *const *path, const char *k, const char *v)
{
    json_t *cur = obj;
    for (; *path; path++)
        cur = kobj_ensure_object(cur, *path);
    json_object_set_new(cur, k, json_string(v));
}

/* One group's DaemonSet: the driver template with the NVIDIADriver's settings (its env,
 * resources, args, probes, pull secrets, tolerations, labels, annotations, priority class in
 * place of the ClusterPolicy's driver and daemonsets sections). */
static int render_group(const struct nvd *d, const json_t *g, const struct op_nvd_input *in,
                        json_t **ret, struct err *e)
{
    const struct op_policy *p = in->policy;
    _cleanup_json_ json_t *cp = json_deep_copy(p->cp);
    json_t *spec = kobj_ensure_object(cp, "spec");
    json_object_set_new(spec, "driver", json_deep_copy(d->spec));
    /* its GDS and GDRCopy are its own sections (in spec.driver now), never the ClusterPolicy's */
    json_object_del(spec, "gds");
    json_object_del(spec, "gdrcopy");
    json_t *common = json_object();
    static const char *const keys[] = {"labels", "annotations", "tolerations", "priorityClassName"};
    for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
        json_t *v = json_object_get(d->spec, keys[i]);
        if (v)
            json_object_set(common, keys[i], v);
    }
    json_object_set_new(spec, "daemonsets", common);
    struct op_policy pp = *p; /* borrowed fields; nothing of it is freed */
    pp.cp = cp;
    pp.operand[OP_DRIVER].spec = json_object_get(spec, "driver");
    const char *pull = kobj_str(d->spec, "imagePullPolicy");
    pp.operand[OP_DRIVER].pull_policy = (char *)(pull && *pull ? pull : "IfNotPresent");
    _cleanup_free_ char *image = group_image(d, g);
    struct op_render_ctx ctx = {
        .os_tag = kobj_str(g, "os"), .driver_image = image, .kernel_module_config = d->kmc};
    _cleanup_json_ json_t *ds = NULL;
    int r = op_render_driver_daemonset(&pp, in->templates, &ctx, &ds, e);
    if (r < 0)
        return r;
    _cleanup_free_ char *suffix = group_suffix(g);
    _cleanup_free_ char *name = ds_name(d, suffix);
    _cleanup_free_ char *sel = selector_value(name);
    json_object_set_new(kobj_ensure_object(ds, "metadata"), "name", json_string(name));
    static const char *const meta_labels[] = {"metadata", "labels", NULL};
    static const char *const match[] = {"spec", "selector", "matchLabels", NULL};
    static const char *const tmpl_labels[] = {"spec", "template", "metadata", "labels", NULL};
    static const char *const node_sel[] = {"spec", "template", "spec", "nodeSelector", NULL};
    set_path_label(ds, meta_labels, OP_LABEL_NVIDIA_DRIVER, d->name);
    set_path_label(ds, meta_labels, OP_LABEL_DRIVER_DS, sel);
    set_path_label(ds, match, OP_LABEL_DRIVER_DS, sel);
    set_path_label(ds, tmpl_labels, OP_LABEL_NVIDIA_DRIVER, d->name);
    set_path_label(ds, tmpl_labels, OP_LABEL_DRIVER_DS, sel);
    set_path_label(ds, node_sel, OP_LABEL_DRIVER_OWNER, d->name);
    set_path_label(ds, node_sel, OS_ID_LABEL, kobj_str(g, "id"));
    set_path_label(ds, node_sel, OS_VER_LABEL, kobj_str(g, "ver"));
    if (kobj_str(g, "kernel"))
        set_path_label(ds, node_sel, KERNEL_LABEL, kobj_str(g, "kernel"));
    json_t *aff = json_object_get(d->spec, "nodeAffinity");
    if (json_is_object(aff) && json_object_size(aff) > 0)
        json_object_set_new(kobj_ensure_object(kobj_path(ds, "spec.template.spec"), "affinity"),
                            "nodeAffinity", json_deep_copy(aff));
    op_finish_object(ds, p);
    *ret = steal_ptr(&ds);
    return 0;
}

/* ---- status ------------------------------------------------------------------------------- */

/* Is a value set to something (an object with a set field, a non-empty string, true, ...)? */
static bool value_set(const json_t *v)
{
    if (json_is_object(v)) {
        const char *k;
        json_t *x;
        json_object_foreach ((json_t *)v, k, x)
            if (value_set(x))
                return true;
        return false;
    }
    if (json_is_array(v))
        return json_array_size(v) > 0;
    if (json_is_string(v))
        return json_string_length(v) > 0;
    if (json_is_integer(v))
        return json_integer_value(v) != 0;
    return json_is_true(v);
}

/* The spec fields set that gpuop accepts and does not act on ("spec.rdma", ...). */
static json_t *unsupported_fields(const json_t *spec)
{
    /* rdma, gds, gdrcopy, repoConfig, certConfig, licensingConfig, secretEnv,
     * kernelModuleConfig, the kernel module type and usePrecompiled are rendered as the
     * ClusterPolicy's driver settings are (render-driver.c) */
    static const char *const keys[] = {"virtualTopologyConfig", "manager",
                                       "podSecurityContext",    "upgradePolicy",
                                       "livenessProbe",         "readinessProbe"};
    json_t *out = json_array();
    for (size_t i = 0; i < ARRAY_SIZE(keys); i++)
        if (value_set(json_object_get(spec, keys[i])))
            json_array_append_new(out, json_sprintf("spec.%s", keys[i]));
    return out;
}

/* A new report of NVIDIADriver obj, appended to the result's. */
static struct op_report *new_report(struct op_nvd_result *res, const json_t *obj)
{
    res->reports = xrealloc(res->reports, (res->n_reports + 1) * sizeof(*res->reports));
    struct op_report *r = &res->reports[res->n_reports++];
    op_report_init(r, obj);
    return r;
}

/* "node gpu-3 is selected by a and b; ..." */
static char *conflict_msg(const struct nvd *d)
{
    struct sbuf b _cleanup_sbuf_;
    sbuf_init(&b, 8192);
    size_t n = 0;
    const char *node;
    json_t *others;
    json_object_foreach (d->conflicts, node, others) {
        if (n++ == NAMED_NODES_MAX)
            break;
        sbuf_addf(&b, "%snode %s is selected by NVIDIADrivers %s", n > 1 ? "; " : "", node,
                  d->name);
        size_t i;
        json_t *o;
        json_array_foreach (others, i, o)
            sbuf_addf(&b, " and %s", json_string_value(o));
    }
    size_t total = json_object_size(d->conflicts);
    if (total > NAMED_NODES_MAX)
        sbuf_addf(&b, "; and %zu more nodes", total - NAMED_NODES_MAX);
    sbuf_adds(&b, ": conflicting nodeSelectors, nothing changed on those nodes nor in this "
                  "NVIDIADriver's DaemonSets");
    return sbuf_check(&b) == 0 && b.data ? xstrdup(b.data) : xstrdup("conflicting nodeSelectors");
}

/* Refused (invalid or conflicting): notReady, the reason in Ready and Error, an Event when the
 * reason changes. */
static json_t *refused_status(const struct nvd *d, const struct op_status_ctx *sc, const char *ns,
                              struct op_report *rep, const char *reason, const char *msg)
{
    if (!streq_ptr(op_stored_condition(d->obj, "Error", "True"), msg))
        op_report_event(rep, "Warning", reason, msg);
    return json_pack("{s:s,s:s,s:s,s:[o,o]}", "state", "notReady", "namespace", ns, "nodes", "-",
                     "conditions", op_condition(sc, "Ready", false, reason, msg),
                     op_condition(sc, "Error", true, reason, msg));
}

/* The ConfigMap spec.kernelModuleConfig.name names, in the policy's namespace. */
static void find_kmc(struct nvd *d, const struct op_nvd_input *in)
{
    const char *name = kobj_path_str(d->spec, "kernelModuleConfig.name");
    if (!name || !*name)
        return;
    size_t i;
    const json_t *cm;
    json_array_foreach (in->configmaps, i, cm)
        if (streq_ptr(kobj_name(cm), name) && streq_ptr(kobj_namespace(cm), in->policy->namespace))
            d->kmc = cm;
    if (!d->kmc)
        d->kmc_missing = name;
}

/* The live DaemonSets of an NVIDIADriver (NULL: of every one), kept as they are. */
static void keep_live(const json_t *owned, const char *name, json_t *objects)
{
    size_t i;
    const json_t *o;
    json_array_foreach (owned, i, o) {
        const char *of = kobj_label(o, OP_LABEL_NVIDIA_DRIVER);
        if (streq_ptr(kobj_kind(o), "DaemonSet") && of && (!name || streq_ptr(of, name)) &&
            !kobj_deletion_timestamp(o))
            json_array_append(objects, (json_t *)o);
    }
}

/* A valid NVIDIADriver: renders its DaemonSets and reports them. */
static int plan_valid(struct nvd *d, const struct op_nvd_input *in, const struct op_status_ctx *sc,
                      struct op_report *rep, struct op_nvd_result *res, struct err *e)
{
    const char *ns = in->policy->namespace;
    size_t ng;
    _cleanup_free_ const char **keys = sorted_keys(d->groups, &ng);
    struct sbuf why _cleanup_sbuf_;
    sbuf_init(&why, 4096);
    long long ready_nodes = 0;
    json_t *daemonsets = json_array();
    for (size_t k = 0; k < ng; k++) {
        const json_t *g = json_object_get(d->groups, keys[k]);
        json_t *ds = NULL;
        int r = render_group(d, g, in, &ds, e);
        if (r < 0) {
            json_decref(daemonsets);
            return err_prefix(e, "NVIDIADriver %s", d->name);
        }
        json_array_append_new(res->objects, ds);
        json_array_append_new(daemonsets, json_string(kobj_name(ds)));
        const json_t *live = op_find_daemonset(in->owned, ns, kobj_name(ds));
        char w[160] = "not created yet";
        bool ok = live && op_object_current(ds, live) && op_ds_ready(live, w, sizeof(w));
        if (live && !op_object_current(ds, live))
            snprintf(w, sizeof(w), "being updated");
        long long nr = json_integer_value(kobj_path(live, "status.numberReady"));
        long long gn = json_integer_value(json_object_get(g, "nodes"));
        ready_nodes += nr < gn ? nr : gn;
        if (!ok)
            sbuf_addf(&why, "%sDaemonSet %s: %s", why.len ? "; " : "", kobj_name(ds), w);
    }
    if (d->no_os > 0)
        sbuf_addf(&why, "%s%d node(s) without the NFD labels %s%s", why.len ? "; " : "", d->no_os,
                  OS_ID_LABEL "/VERSION_ID", d->precompiled ? " and " KERNEL_LABEL : "");
    bool ready = why.len == 0;
    _cleanup_free_ char *msg =
        ready ? xasprintf("NVIDIADriver is ready: %d node(s) in %zu DaemonSet(s)", d->owned, ng)
              : xasprintf("NVIDIADriver is not ready: %s",
                          sbuf_check(&why) == 0 && why.data ? why.data : "(too long)");
    const char *state = ready ? "ready" : "notReady";
    json_t *st =
        json_pack("{s:s,s:s,s:o,s:[o,o]}", "state", state, "namespace", ns, "daemonsets",
                  daemonsets, "conditions",
                  op_condition(sc, "Ready", ready, ready ? "Reconciled" : "OperandNotReady", msg),
                  op_condition(sc, "Error", false, ready ? "Ready" : "OperandNotReady", ""));
    json_object_set_new(st, "nodes", json_sprintf("%lld/%d", ready_nodes, d->owned));
    /* fields accepted and not acted on: a condition, and one Event per distinct set */
    _cleanup_json_ json_t *unsup = unsupported_fields(d->spec);
    if (json_array_size(unsup) > 0) {
        _cleanup_free_ char *list = json_dumps(unsup, JSON_COMPACT);
        _cleanup_free_ char *umsg = xasprintf("accepted, not acted on by gpuop: %s", list);
        if (!streq_ptr(op_stored_condition(d->obj, "UnsupportedFields", NULL), umsg))
            op_report_event(rep, "Normal", "UnsupportedFields", umsg);
        json_array_append_new(
            json_object_get(st, "conditions"),
            op_condition(sc, "UnsupportedFields", true, "AcceptedNotApplied", umsg));
    }
    if (!streq_ptr(kobj_path_str(d->obj, "status.state"), state))
        op_report_event(rep, ready ? "Normal" : "Warning", ready ? "Ready" : "NotReady", msg);
    op_report_status(rep, st);
    if (!ready) {
        res->all_ready = false;
        if (!res->why)
            res->why = xasprintf("NVIDIADriver %s: %s", d->name, msg);
    }
    return 0;
}

static void plan_disabled(const json_t *obj, const struct op_nvd_input *in, struct op_report *rep)
{
    struct op_status_ctx sc;
    op_status_ctx_init(&sc, obj, in->now_ms);
    _cleanup_free_ char *msg =
        xasprintf("useNvidiaDriverCRD is not enabled in ClusterPolicy %s%s", in->policy->name,
                  in->policy->operand[OP_DRIVER].enabled ? "" : " (its driver is disabled)");
    json_t *st =
        json_pack("{s:s,s:s,s:[o]}", "state", "disabled", "namespace", in->policy->namespace,
                  "conditions", op_condition(&sc, "Ready", false, "Disabled", msg));
    if (!streq_ptr(kobj_path_str(obj, "status.state"), "disabled"))
        op_report_event(rep, "Normal", "Disabled", msg);
    op_report_status(rep, st);
}

/* One NVIDIADriver read: its spec, whether it is valid (and why not), the nodes it selects. */
static void nvd_load(struct nvd *d, const json_t *obj)
{
    d->obj = obj;
    d->name = kobj_name(obj);
    d->spec = json_object_get(obj, "spec");
    if (!json_is_object(d->spec))
        d->spec = NULL;
    d->is_default = json_is_true(json_object_get(d->spec, "default"));
    d->precompiled = json_is_true(json_object_get(d->spec, "usePrecompiled"));
    d->conflicts = json_object();
    d->groups = json_object();
    const json_t *sel = json_object_get(d->spec, "nodeSelector");
    struct err ve = {0};
    if (!d->spec)
        d->invalid = xstrdup("spec: Required value");
    else if (nvd_validate(d, &ve) < 0)
        d->invalid = xstrdup(err_msg(&ve));
    /* a selector that is a map of strings still says which nodes it claims */
    bool strings = json_is_object(sel);
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *)sel, k, v)
        strings &= json_is_string(v);
    d->selector = strings && json_object_size(sel) > 0 ? sel : NULL;
    d->selects_all =
        d->spec && !d->is_default && json_object_size(sel) == 0 && (!sel || json_is_object(sel));
}

int op_nvd_plan(const struct op_nvd_input *in, struct op_nvd_result *ret, struct err *e)
{
    struct op_nvd_result res = {
        .objects = json_array(), .owners = json_object(), .all_ready = true};
    size_t n = json_array_size(in->nvidia_drivers);
    struct nvd *ds = xcalloc(n + 1, sizeof(*ds));
    size_t nd = 0;
    int r = 0;
    size_t i;
    const json_t *obj;
    if (!in->delegated) {
        /* the single driver: no owner labels, every NVIDIADriver disabled */
        json_array_foreach (in->nodes, i, obj) {
            if (kobj_label(obj, OP_LABEL_DRIVER_OWNER) && kobj_name(obj))
                json_object_set_new(res.owners, kobj_name(obj), json_null());
        }
        json_array_foreach (in->nvidia_drivers, i, obj) {
            if (kobj_deletion_timestamp(obj) || !kobj_name(obj))
                continue;
            plan_disabled(obj, in, new_report(&res, obj));
        }
        goto done;
    }
    if (!in->nvidia_drivers) {
        /* not listed yet: nothing moves */
        keep_live(in->owned, NULL, res.objects);
        res.all_ready = false;
        res.why = xstrdup("the NVIDIADrivers are not listed yet");
        goto done;
    }
    json_array_foreach (in->nvidia_drivers, i, obj) {
        if (kobj_deletion_timestamp(obj) || !kobj_name(obj))
            continue;
        nvd_load(&ds[nd++], obj);
    }
    plan_owners(ds, nd, in->nodes, res.owners);
    res.all_ready = nd > 0;
    if (nd == 0)
        res.why = xstrdup("useNvidiaDriverCRD is set and no NVIDIADriver exists");
    for (size_t k = 0; k < nd; k++) {
        struct nvd *d = &ds[k];
        struct op_status_ctx sc;
        op_status_ctx_init(&sc, d->obj, in->now_ms);
        struct op_report *rep = new_report(&res, d->obj);
        if (d->invalid || json_object_size(d->conflicts) > 0) {
            _cleanup_free_ char *msg = d->invalid
                                           ? xasprintf("NVIDIADriver %s: %s", d->name, d->invalid)
                                           : conflict_msg(d);
            op_report_status(
                rep, refused_status(d, &sc, in->policy->namespace, rep,
                                    d->invalid ? "InvalidNVIDIADriver" : "ConflictingNodeSelector",
                                    msg));
            keep_live(in->owned, d->name, res.objects);
            res.all_ready = false;
            if (!res.why)
                res.why = xstrdup(msg);
            continue;
        }
        /* its kernel module ConfigMap missing: its DaemonSets are left as they are, as the
         * ClusterPolicy's is, until it exists */
        find_kmc(d, in);
        if (d->kmc_missing) {
            _cleanup_free_ char *msg = xasprintf(
                "NVIDIADriver %s: spec.kernelModuleConfig.name: ConfigMap %s/%s not found; its "
                "driver DaemonSets are left as they are until it exists",
                d->name, in->policy->namespace, d->kmc_missing);
            op_report_status(rep, refused_status(d, &sc, in->policy->namespace, rep,
                                                 "KernelModuleConfigMissing", msg));
            keep_live(in->owned, d->name, res.objects);
            res.all_ready = false;
            if (!res.why)
                res.why = xstrdup(msg);
            continue;
        }
        r = plan_valid(d, in, &sc, rep, &res, e);
        if (r < 0)
            goto done;
    }
done:
    for (size_t k = 0; k < nd; k++)
        nvd_done(&ds[k]);
    free(ds);
    if (r < 0) {
        op_nvd_result_done(&res);
        return r;
    }
    *ret = res;
    return 0;
}

void op_nvd_result_done(struct op_nvd_result *r)
{
    json_decref(r->objects);
    json_decref(r->owners);
    for (size_t i = 0; i < r->n_reports; i++)
        op_report_done(&r->reports[i]);
    free(r->reports);
    free(r->why);
    *r = (struct op_nvd_result){0};
}
