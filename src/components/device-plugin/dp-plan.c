/* SPDX-License-Identifier: Apache-2.0 */
/* What the plugin advertises: resources, sockets and device lists from an inventory + config. */
#include <string.h>
#include <strings.h>

#include "device-plugin.h"

void dp_options_defaults(struct dp_options *o)
{
    memset(o, 0, sizeof(*o));
    o->mig_strategy = DPCONFIG_MIG_NONE;
    o->list_strategies = DPCONFIG_LIST_DEFAULT;
    o->id_strategy = DPCONFIG_DEVICE_ID_UUID;
    strlcpy_s(o->dev_root, "/", sizeof(o->dev_root));
    strlcpy_s(o->cdi_annotation_prefix, "cdi.k8s.io/", sizeof(o->cdi_annotation_prefix));
    strlcpy_s(o->cdi_kind, DP_CDI_VENDOR_CLASS, sizeof(o->cdi_kind));
    o->shared_policy = DPCONFIG_ALLOC_DISTRIBUTED;
}

int dp_options_set_cdi_kind(struct dp_options *o, const char *kind, struct err *e)
{
    const char *slash = strchr(kind, '/');
    size_t len = strlen(kind);
    if (!slash || slash == kind || !slash[1] || strchr(slash + 1, '/'))
        return err_set(e, -EINVAL, "CDI kind \"%s\": expected <vendor>/<class>", kind);
    if (len >= sizeof(o->cdi_kind))
        return err_set(e, -EINVAL, "CDI kind \"%s\": longer than %zu characters", kind,
                       sizeof(o->cdi_kind) - 1);
    for (const char *c = kind; *c; c++) {
        bool vendor = c < slash, first = c == kind || c == slash + 1;
        bool ok = c == slash || (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') ||
                  (!first && (*c == '.' || *c == '-')) ||
                  (!vendor && ((*c >= 'A' && *c <= 'Z') || (!first && *c == '_')));
        if (!ok)
            return err_set(e, -EINVAL,
                           "CDI kind \"%s\": '%c' at %zu: the vendor takes [a-z0-9.-], the class "
                           "[a-zA-Z0-9_.-], each starting with a letter or digit",
                           kind, *c, (size_t)(c - kind));
    }
    strlcpy_s(o->cdi_kind, kind, sizeof(o->cdi_kind));
    return 0;
}

unsigned dp_pair_score(unsigned topo_level, unsigned nvlinks)
{
    unsigned s;
    switch (topo_level) {
    case GPU_TOPO_INTERNAL:
        s = 60;
        break;
    case GPU_TOPO_SINGLE:
        s = 50;
        break;
    case GPU_TOPO_MULTIPLE:
        s = 40;
        break;
    case GPU_TOPO_HOSTBRIDGE:
        s = 30;
        break;
    case GPU_TOPO_NODE:
        s = 20;
        break;
    case GPU_TOPO_SYSTEM:
        s = 10;
        break;
    default:
        s = 0;
    }
    return s + 100 * nvlinks;
}

void dp_plan_free(struct dp_plan *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n_resources; i++)
        free(p->resources[i].devices);
    free(p->resources);
    free(p->pair_score);
    free(p->gpu_uuid);
    free(p);
}

struct dp_resource *dp_plan_find(struct dp_plan *p, const char *resource_name)
{
    for (size_t i = 0; p && i < p->n_resources; i++)
        if (strcmp(p->resources[i].name, resource_name) == 0)
            return &p->resources[i];
    return NULL;
}

const struct dp_device *dp_resource_find(const struct dp_resource *r, const char *id)
{
    for (size_t i = 0; r && id && i < r->n_devices; i++)
        if (strcmp(r->devices[i].id, id) == 0)
            return &r->devices[i];
    return NULL;
}

void dp_plan_carry_health(struct dp_plan *p, const struct dp_plan *old)
{
    if (!p || !old)
        return;
    for (size_t i = 0; i < p->n_resources; i++)
        for (size_t j = 0; j < p->resources[i].n_devices; j++) {
            struct dp_device *d = &p->resources[i].devices[j];
            for (size_t k = 0; k < old->n_resources; k++) {
                const struct dp_device *o = NULL;
                for (size_t m = 0; m < old->resources[k].n_devices && !o; m++)
                    if (strcmp(old->resources[k].devices[m].base_id, d->base_id) == 0)
                        o = &old->resources[k].devices[m];
                if (o) {
                    d->healthy = d->healthy && o->healthy;
                    d->lost = d->lost || o->lost;
                    if (o->last_error_ms > d->last_error_ms)
                        d->last_error_ms = o->last_error_ms;
                    if (o->ecc_vol_at_error > d->ecc_vol_at_error)
                        d->ecc_vol_at_error = o->ecc_vol_at_error;
                    break;
                }
            }
        }
}

/* ---- building ----------------------------------------------------------------------------- */

/* A resource under construction: devices before replication. */
struct proto_res {
    char name[DP_NAME_MAX];
    size_t n, cap;
    struct dp_device *devs;
};

static struct proto_res *proto_get(struct proto_res **list, size_t *n, const char *name)
{
    for (size_t i = 0; i < *n; i++)
        if (strcmp((*list)[i].name, name) == 0)
            return &(*list)[i];
    *list = xrealloc(*list, (*n + 1) * sizeof(**list));
    struct proto_res *r = &(*list)[(*n)++];
    memset(r, 0, sizeof(*r));
    strlcpy_s(r->name, name, sizeof(r->name));
    return r;
}

static void proto_add(struct proto_res *r, const struct dp_device *d)
{
    if (r->n == r->cap) {
        r->cap = r->cap ? r->cap * 2 : 8;
        r->devs = xrealloc(r->devs, r->cap * sizeof(*r->devs));
    }
    r->devs[r->n++] = *d;
}

static void full_gpu_device(const struct gpu_device *g, unsigned gi, struct dp_device *d)
{
    memset(d, 0, sizeof(*d));
    strlcpy_s(d->id, g->uuid, sizeof(d->id));
    strlcpy_s(d->base_id, g->uuid, sizeof(d->base_id));
    snprintf(d->index, sizeof(d->index), "%u", g->index);
    d->gpu = gi;
    d->minor = g->minor;
    d->numa_node = g->numa_node;
    d->gi_cap = d->ci_cap = -1;
    d->replica = -1;
    d->healthy = !g->lost;
    d->lost = g->lost;
}

static void mig_device(const struct gpu_device *g, unsigned gi, const struct gpu_mig_device *m,
                       struct dp_device *d)
{
    memset(d, 0, sizeof(*d));
    strlcpy_s(d->id, m->uuid, sizeof(d->id));
    strlcpy_s(d->base_id, m->uuid, sizeof(d->base_id));
    snprintf(d->index, sizeof(d->index), "%u:%u", g->index, m->index);
    d->gpu = gi;
    d->minor = g->minor;
    d->is_mig = true;
    d->gi_id = m->gi_id;
    d->ci_id = m->ci_id;
    d->numa_node = g->numa_node;
    d->gi_cap = d->ci_cap = -1;
    d->replica = -1;
    d->healthy = !g->lost;
    d->lost = g->lost;
}

/* NVIDIA exposes only MIG profiles whose compute instance spans the GPU instance (C == G);
 * "1c.2g.20gb" style names are the others. */
static bool mig_profile_exposed(const struct gpu_mig_device *m)
{
    if (m->gi_slices && m->ci_slices && m->gi_slices != m->ci_slices)
        return false;
    const char *dot = strchr(m->profile, '.');
    const char *c = strchr(m->profile, 'c');
    return !(c && dot && c < dot);
}

static void mig_resource_name(const char *profile, char *buf, size_t n)
{
    snprintf(buf, n, "nvidia.com/mig-%s", profile);
    for (char *q = buf; *q; q++)
        if (*q == '+')
            *q = '.';
}

static int build_single(const struct gpu_inventory *inv, struct proto_res **list, size_t *n,
                        struct err *e)
{
    int seen_enabled = -1;
    for (size_t i = 0; i < inv->n_gpus; i++) {
        const struct gpu_device *g = &inv->gpus[i];
        if (g->lost)
            continue;
        if (seen_enabled >= 0 && seen_enabled != (int)g->mig_enabled)
            return err_set(e, -EINVAL,
                           "mig-strategy single: all devices on the node must be "
                           "configured with the same migEnabled value");
        seen_enabled = g->mig_enabled;
    }
    const char *profile = NULL;
    for (size_t i = 0; i < inv->n_gpus; i++) {
        const struct gpu_device *g = &inv->gpus[i];
        if (seen_enabled != 1 || !g->mig_enabled) {
            if (seen_enabled == 1)
                continue; /* a lost GPU of a MIG node: its MIG devices are unknown */
            struct dp_device d;
            full_gpu_device(g, (unsigned)i, &d);
            proto_add(proto_get(list, n, "nvidia.com/gpu"), &d);
            continue;
        }
        if (g->n_mig == 0)
            return err_set(e, -EINVAL,
                           "mig-strategy single: GPU %u (%s) has MIG enabled but no MIG devices",
                           g->index, g->uuid);
        for (size_t j = 0; j < g->n_mig; j++) {
            const struct gpu_mig_device *m = &g->mig[j];
            if (profile && strcmp(profile, m->profile) != 0)
                return err_set(e, -EINVAL,
                               "mig-strategy single: more than one MIG device type present on "
                               "node (%s and %s)",
                               profile, m->profile);
            profile = m->profile;
            struct dp_device d;
            mig_device(g, (unsigned)i, m, &d);
            proto_add(proto_get(list, n, "nvidia.com/gpu"), &d);
        }
    }
    return 0;
}

static int proto_cmp(const void *a, const void *b)
{
    const struct proto_res *x = a, *y = b;
    bool xg = strcmp(x->name, "nvidia.com/gpu") == 0, yg = strcmp(y->name, "nvidia.com/gpu") == 0;
    if (xg != yg)
        return xg ? -1 : 1;
    return strcmp(x->name, y->name);
}

int dp_plan_build(const struct gpu_inventory *inv, const struct dp_options *opts,
                  struct dp_plan **ret, struct err *e)
{
    struct proto_res *list = NULL;
    size_t n = 0;
    int r = 0;
    bool any_mig = false;

    switch (opts->mig_strategy) {
    case DPCONFIG_MIG_NONE:
        for (size_t i = 0; i < inv->n_gpus; i++) {
            struct dp_device d;
            full_gpu_device(&inv->gpus[i], (unsigned)i, &d);
            proto_add(proto_get(&list, &n, "nvidia.com/gpu"), &d);
        }
        break;
    case DPCONFIG_MIG_SINGLE:
        r = build_single(inv, &list, &n, e);
        break;
    case DPCONFIG_MIG_MIXED:
        for (size_t i = 0; i < inv->n_gpus; i++) {
            const struct gpu_device *g = &inv->gpus[i];
            if (!g->mig_enabled) {
                struct dp_device d;
                full_gpu_device(g, (unsigned)i, &d);
                proto_add(proto_get(&list, &n, "nvidia.com/gpu"), &d);
                continue;
            }
            for (size_t j = 0; j < g->n_mig; j++) {
                if (!mig_profile_exposed(&g->mig[j]))
                    continue;
                char name[DP_NAME_MAX];
                mig_resource_name(g->mig[j].profile, name, sizeof(name));
                struct dp_device d;
                mig_device(g, (unsigned)i, &g->mig[j], &d);
                proto_add(proto_get(&list, &n, name), &d);
            }
        }
        break;
    }
    for (size_t i = 0; r == 0 && i < n; i++)
        for (size_t j = 0; j < list[i].n; j++)
            any_mig = any_mig || list[i].devs[j].is_mig;

    if (r == 0 && opts->sharing == DPCONFIG_SHARING_MPS) {
        if (opts->mig_strategy == DPCONFIG_MIG_MIXED || any_mig)
            r = err_set(e, -EINVAL,
                        "sharing.mps: MPS sharing is not supported with MIG devices "
                        "or mig-strategy mixed");
        else if (!opts->mps_root[0])
            r = err_set(e, -EINVAL, "sharing.mps: MPS sharing requires --mps-root (MPS_ROOT)");
    }

    struct dp_plan *p = NULL;
    if (r == 0) {
        if (n > 1)
            qsort(list, n, sizeof(*list), proto_cmp);
        p = xcalloc(1, sizeof(*p));
        p->opts = *opts;
        p->n_gpus = (unsigned)inv->n_gpus;
        p->pair_score = xcalloc(inv->n_gpus ? inv->n_gpus * inv->n_gpus : 1, sizeof(unsigned));
        p->gpu_uuid = xcalloc(inv->n_gpus ? inv->n_gpus : 1, sizeof(*p->gpu_uuid));
        for (size_t a = 0; a < inv->n_gpus; a++) {
            strlcpy_s(p->gpu_uuid[a], inv->gpus[a].uuid, GPU_UUID_MAX);
            for (size_t b = 0; b < inv->n_gpus; b++) {
                size_t k = a * inv->n_gpus + b;
                if (a != b && inv->topo_level && inv->nvlinks)
                    p->pair_score[k] = dp_pair_score(inv->topo_level[k], inv->nvlinks[k]);
            }
        }
        p->resources = xcalloc(n ? n : 1, sizeof(*p->resources));
    }
    for (size_t i = 0; r == 0 && i < n; i++) {
        struct proto_res *pr = &list[i];
        struct dp_resource *res = &p->resources[p->n_resources];
        unsigned replicas = 1;
        for (size_t k = 0; opts->sharing != DPCONFIG_SHARING_NONE && k < opts->n_shared; k++)
            if (strcmp(opts->shared[k].name, pr->name) == 0 && opts->shared[k].replicas > 1)
                replicas = opts->shared[k].replicas;
        if (replicas > DP_MAX_REPLICAS) {
            r = err_set(e, -EINVAL, "sharing: %s: %u replicas is more than the limit %u", pr->name,
                        replicas, DP_MAX_REPLICAS);
            break;
        }
        p->n_resources++;
        res->replicas = replicas;
        if (replicas > 1) {
            res->fail_requests_gt_one = opts->fail_requests_gt_one;
            if (opts->rename_by_default)
                snprintf(res->name, sizeof(res->name), "%.*s.shared", DP_NAME_MAX - 16, pr->name);
            else
                strlcpy_s(res->name, pr->name, sizeof(res->name));
        } else {
            strlcpy_s(res->name, pr->name, sizeof(res->name));
        }
        const char *shortname = strchr(res->name, '/');
        shortname = shortname ? shortname + 1 : res->name;
        snprintf(res->socket, sizeof(res->socket), "nvidia-%.*s.sock", DP_NAME_MAX - 16, shortname);
        res->n_devices = pr->n * replicas;
        res->devices = xcalloc(res->n_devices ? res->n_devices : 1, sizeof(*res->devices));
        size_t k = 0;
        for (size_t j = 0; j < pr->n; j++)
            for (unsigned rep = 0; rep < replicas; rep++) {
                struct dp_device *d = &res->devices[k++];
                *d = pr->devs[j];
                if (replicas > 1) {
                    d->replica = (int)rep;
                    snprintf(d->id, sizeof(d->id), "%.*s::%u", DP_ID_MAX - 16, d->base_id, rep);
                }
            }
    }
    for (size_t i = 0; i < n; i++)
        free(list[i].devs);
    free(list);
    if (r < 0) {
        dp_plan_free(p);
        return r;
    }
    *ret = p;
    return 0;
}

size_t dp_plan_apply_mig_minors(struct dp_plan *p, const char *text)
{
    size_t n = 0;
    for (size_t i = 0; i < p->n_resources; i++)
        for (size_t j = 0; j < p->resources[i].n_devices; j++) {
            struct dp_device *d = &p->resources[i].devices[j];
            if (!d->is_mig)
                continue;
            d->gi_cap = (int)gpu_mig_cap_minor(text, d->minor, d->gi_id, -1);
            d->ci_cap = (int)gpu_mig_cap_minor(text, d->minor, d->gi_id, (int)d->ci_id);
            n++;
        }
    return n;
}
