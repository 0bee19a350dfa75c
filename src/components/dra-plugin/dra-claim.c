/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Claims (dra-plugin.h): a ResourceClaim's allocation to the devices this node prepares, their
 * sharing, their CDI names and the claim's own CDI spec; the set of prepared claims. Pure.
 */
#include <assert.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "dra-plugin.h"
#include "kobj.h"

void dra_claim_free(struct dra_claim *c)
{
    if (!c)
        return;
    free(c->devices);
    free(c);
}

/* ---- the plan ------------------------------------------------------------------------------- */

struct opaque {
    const json_t *requests; /* NULL or empty: every request */
    struct dra_config cfg;
    size_t index;
};

/* Whether a config's request list names the result's request ("req", or "req/sub" whose
 * request "req" is named, or exactly "req/sub"). */
static bool names_request(const json_t *requests, const char *request)
{
    size_t i;
    json_t *v;
    size_t main_len = strcspn(request, "/");
    json_array_foreach (requests, i, v) {
        const char *s = json_string_value(v);
        if (!s)
            continue;
        if (strcmp(s, request) == 0 ||
            (strlen(s) == main_len && strncmp(s, request, main_len) == 0))
            return true;
    }
    return false;
}

static int fill_device(const struct dra_model *m, const struct dra_device *d,
                       struct dra_prepared_device *pd)
{
    const struct gpu_device *g = &m->inv->gpus[d->gpu];
    pd->type = d->type;
    pd->gpu_index = g->index;
    pd->minor = g->minor;
    if (d->type == DRA_GPU) {
        strlcpy_s(pd->uuid, g->uuid, sizeof(pd->uuid));
        return 0;
    }
    strlcpy_s(pd->parent_uuid, g->uuid, sizeof(pd->parent_uuid));
    strlcpy_s(pd->profile, d->profile, sizeof(pd->profile));
    pd->gi_profile_id = d->gi_profile_id;
    pd->start = d->start;
    pd->size = d->size;
    if (d->type == DRA_MIG) {
        const struct gpu_mig_device *mg = &g->mig[d->mig];
        strlcpy_s(pd->uuid, mg->uuid, sizeof(pd->uuid));
        pd->gi_id = mg->gi_id;
        pd->ci_id = mg->ci_id;
    }
    return 0;
}

int dra_claim_plan(const struct dra_model *m, const char *pool, const struct dra_claim_ref *ref,
                   const json_t *claim, struct dra_claim **ret, struct err *e)
{
    const char *ns = ref->ns, *name = ref->name;
    const char *uid = kobj_uid(claim);
    if (!uid || strcmp(uid, ref->uid) != 0)
        return err_set(e, -ESTALE, "claim %s/%s has UID %s, not %s (it was replaced)", ns, name,
                       uid ? uid : "(none)", ref->uid);
    const json_t *alloc = kobj_path(claim, "status.allocation");
    if (!json_is_object(alloc))
        return err_set(e, -ENOENT, "claim %s/%s is not allocated", ns, name);
    const json_t *results = kobj_path(alloc, "devices.results");
    const json_t *configs = kobj_path(alloc, "devices.config");

    /* the configs of this driver, in order (the class's, then the claim's) */
    _cleanup_(dra_claim_freep) struct dra_claim *c = NULL; /* before the first goto out */
    size_t n_cfg = 0;
    struct opaque *cfg = xcalloc(json_array_size(configs) + 1, sizeof(*cfg));
    size_t i;
    json_t *v;
    int r = 0;
    json_array_foreach (configs, i, v) {
        const json_t *op = json_object_get(v, "opaque");
        if (!streq_ptr(kobj_str(op, "driver"), DRA_DRIVER_NAME))
            continue;
        char where[DRA_NS_MAX + DRA_OBJ_NAME_MAX + 64];
        snprintf(where, sizeof(where), "claim %s/%s: config %zu (%s)", ns, name, i,
                 streq_ptr(kobj_str(v, "source"), "FromClass") ? "from the class" : "the claim's");
        if ((r = dra_config_parse(json_object_get(op, "parameters"), where, &cfg[n_cfg].cfg, e)) <
            0)
            goto out;
        cfg[n_cfg].requests = json_object_get(v, "requests");
        cfg[n_cfg].index = i;
        n_cfg++;
    }

    c = xcalloc(1, sizeof(*c));
    size_t dev_cfg[DRA_CLAIM_DEVICES_MAX]; /* the config each device got, SIZE_MAX none */
    c->ref = *ref;
    c->state = DRA_PREPARE_STARTED;
    c->devices = xcalloc(json_array_size(results) + 1, sizeof(*c->devices));
    json_array_foreach (results, i, v) {
        if (!streq_ptr(kobj_str(v, "driver"), DRA_DRIVER_NAME))
            continue;
        const char *req = kobj_str(v, "request"), *rpool = kobj_str(v, "pool"),
                   *dev = kobj_str(v, "device");
        if (!req || !rpool || !dev) {
            r = err_set(e, -EINVAL, "claim %s/%s: result %zu: request, pool or device missing", ns,
                        name, i);
            goto out;
        }
        if (strcmp(rpool, pool) != 0) {
            r = err_set(e, -EINVAL,
                        "claim %s/%s: device %s is in pool %s, not in this node's pool %s", ns,
                        name, dev, rpool, pool);
            goto out;
        }
        const struct dra_device *d = dra_model_find(m, dev);
        if (!d) {
            r = err_set(e, -ENODEV, "claim %s/%s: device %s: not a device of this node", ns, name,
                        dev);
            goto out;
        }
        if (c->n_devices == DRA_CLAIM_DEVICES_MAX) {
            r = err_set(e, -E2BIG, "claim %s/%s: more than %d devices", ns, name,
                        DRA_CLAIM_DEVICES_MAX);
            goto out;
        }
        struct dra_prepared_device *pd = &c->devices[c->n_devices];
        dev_cfg[c->n_devices] = SIZE_MAX;
        strlcpy_s(pd->request, req, sizeof(pd->request));
        strlcpy_s(pd->pool, rpool, sizeof(pd->pool));
        strlcpy_s(pd->device, dev, sizeof(pd->device));
        fill_device(m, d, pd);
        bool is_gpu = d->type == DRA_GPU;
        /* the last config that applies wins */
        for (size_t k = n_cfg; k-- > 0;) {
            bool named = json_array_size(cfg[k].requests) > 0;
            if (named && !names_request(cfg[k].requests, req))
                continue;
            bool fits = (cfg[k].cfg.kind == DRA_CONFIG_GPU) == is_gpu;
            if (!fits && named) {
                r = err_set(e, -EINVAL,
                            "claim %s/%s: config %zu: a %s for request %s, whose device %s is a %s",
                            ns, name, cfg[k].index,
                            cfg[k].cfg.kind == DRA_CONFIG_GPU ? "GpuConfig" : "MigDeviceConfig",
                            req, dev, is_gpu ? "whole GPU" : "MIG device");
                goto out;
            }
            if (!fits)
                continue;
            pd->sharing = cfg[k].cfg.sharing;
            dev_cfg[c->n_devices] = k;
            break;
        }
        if (pd->sharing.strategy == DRA_SHARE_NONE) {
            pd->sharing.active_thread_percentage = -1;
            pd->sharing.pinned_memory_limit = -1;
        }
        c->n_devices++;
    }
    /* each MPS device's own pinned memory limit: its config's per-device limit naming its
     * ordinal (bus order, the daemon's numbering) or its UUID, else the default */
    size_t ord[DRA_CLAIM_DEVICES_MAX];
    size_t n_mps = dra_mps_order(c, ord);
    for (size_t p = 0; p < n_mps; p++) {
        struct dra_prepared_device *pd = &c->devices[ord[p]];
        assert(dev_cfg[ord[p]] < n_cfg); /* an MPS device has its config */
        const struct dra_config *dc = &cfg[dev_cfg[ord[p]]].cfg;
        char idx[24];
        snprintf(idx, sizeof(idx), "%zu", p);
        for (size_t l = 0; l < dc->n_limits; l++)
            if (strcmp(dc->limits[l].device, idx) == 0 ||
                (pd->uuid[0] && strcmp(dc->limits[l].device, pd->uuid) == 0))
                pd->sharing.pinned_memory_limit = dc->limits[l].bytes;
    }
    /* as many devices as it has: a prepared claim is kept until it is unprepared */
    c->devices = xrealloc(c->devices, (c->n_devices ? c->n_devices : 1) * sizeof(*c->devices));
    *ret = steal_ptr(&c);
out:
    free(cfg);
    return r;
}

/* ---- CDI ------------------------------------------------------------------------------------ */

bool dra_claim_has_edits(const struct dra_claim *c)
{
    for (size_t i = 0; i < c->n_devices; i++)
        if (dra_mps_device(&c->devices[i]))
            return true;
    return false;
}

size_t dra_claim_cdi_ids(const struct dra_claim *c, size_t i, char ids[2][DRA_CDI_ID_MAX])
{
    const struct dra_prepared_device *d = &c->devices[i];
    if (!d->uuid[0])
        return 0;
    size_t n = 0;
    snprintf(ids[n++], DRA_CDI_ID_MAX, "%s=%s", DRA_CDI_BASE_KIND, d->uuid);
    if (dra_mps_device(d))
        snprintf(ids[n++], DRA_CDI_ID_MAX, "%s=%s-%s", DRA_CDI_CLAIM, c->ref.uid, d->device);
    return n;
}

int dra_claim_cdi_spec(const struct dra_claim *c, const struct dra_cdi_paths *paths, char **ret,
                       struct err *e)
{
    *ret = NULL;
    if (!dra_claim_has_edits(c))
        return 0;
    if (!paths || !paths->mps_root || paths->mps_root[0] != '/')
        return err_set(e, -EINVAL, "claim %s/%s: MPS needs an absolute folder root", c->ref.ns,
                       c->ref.name);
    struct dra_mps_daemon d;
    int r = dra_mps_daemon_plan(c, &d, e);
    if (r < 0)
        return r;
    json_t *env = json_array();
    json_array_append_new(env, json_string("CUDA_DEVICE_ORDER=PCI_BUS_ID"));
    json_array_append_new(env, json_string("CUDA_MPS_PIPE_DIRECTORY=" DRA_MPS_PIPE_DIR));
    if (d.active_thread_percentage > 0) {
        char s[64];
        snprintf(s, sizeof(s), "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=%d", d.active_thread_percentage);
        json_array_append_new(env, json_string(s));
    }
    if (d.pinned_env[0]) {
        _cleanup_free_ char *s = xasprintf("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=%s", d.pinned_env);
        json_array_append_new(env, json_string(s));
    }
    _cleanup_free_ char *pipe = xasprintf("%s/%s/pipe", paths->mps_root, d.claim_dir);
    _cleanup_free_ char *shm = xasprintf("%s/%s/shm", paths->mps_root, d.claim_dir);
    json_t *mounts =
        json_pack("[{s:s,s:s,s:[s,s]},{s:s,s:s,s:[s,s]}]", "hostPath", pipe, "containerPath",
                  DRA_MPS_PIPE_DIR, "options", "rbind", "rw", "hostPath", shm, "containerPath",
                  "/dev/shm", "options", "rbind", "rw");
    json_t *devs = json_array();
    for (size_t i = 0; i < c->n_devices; i++) {
        const struct dra_prepared_device *x = &c->devices[i];
        if (!dra_mps_device(x))
            continue;
        char name[DRA_UID_MAX + DRA_DEV_NAME_MAX + 2];
        snprintf(name, sizeof(name), "%s-%s", c->ref.uid, x->device);
        json_array_append_new(devs, json_pack("{s:s,s:{s:O,s:O}}", "name", name, "containerEdits",
                                              "env", env, "mounts", mounts));
    }
    json_t *spec =
        json_pack("{s:s,s:s,s:o}", "cdiVersion", "0.5.0", "kind", DRA_CDI_CLAIM, "devices", devs);
    json_decref(env);
    json_decref(mounts);
    char *text = json_dumps(spec, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(spec);
    if (!text)
        return err_set(e, -ENOMEM, "claim %s/%s: CDI spec", c->ref.ns, c->ref.name);
    *ret = text;
    return 0;
}

/* ---- the set of claims ---------------------------------------------------------------------- */

void dra_claims_clear(struct dra_claims *cs)
{
    for (size_t i = 0; i < cs->n; i++)
        dra_claim_free(cs->v[i]);
    free(cs->v);
    cs->v = NULL;
    cs->n = 0;
}

struct dra_claim *dra_claims_find(const struct dra_claims *cs, const char *uid)
{
    for (size_t i = 0; i < cs->n; i++)
        if (strcmp(cs->v[i]->ref.uid, uid) == 0)
            return cs->v[i];
    return NULL;
}

int dra_claims_put(struct dra_claims *cs, struct dra_claim *c, struct err *e)
{
    for (size_t i = 0; i < cs->n; i++)
        if (strcmp(cs->v[i]->ref.uid, c->ref.uid) == 0) {
            if (cs->v[i] != c)
                dra_claim_free(cs->v[i]);
            cs->v[i] = c;
            return 0;
        }
    if (cs->n >= DRA_CLAIMS_MAX)
        return err_set(e, -ENOSPC, "claim %s/%s: %d claims are prepared already", c->ref.ns,
                       c->ref.name, DRA_CLAIMS_MAX);
    cs->v = xrealloc(cs->v, (cs->n + 1) * sizeof(*cs->v));
    cs->v[cs->n++] = c;
    return 0;
}

struct dra_claim *dra_claims_take(struct dra_claims *cs, const char *uid)
{
    for (size_t i = 0; i < cs->n; i++)
        if (strcmp(cs->v[i]->ref.uid, uid) == 0) {
            struct dra_claim *c = cs->v[i];
            memmove(&cs->v[i], &cs->v[i + 1], (cs->n - i - 1) * sizeof(*cs->v));
            cs->n--;
            return c;
        }
    return NULL;
}

struct dra_owned_slice *dra_claims_owned(const struct dra_claims *cs, size_t *ret_n)
{
    size_t n = 0, cap = 0;
    struct dra_owned_slice *v = NULL;
    for (size_t i = 0; i < cs->n; i++)
        for (size_t k = 0; k < cs->v[i]->n_devices; k++) {
            const struct dra_prepared_device *d = &cs->v[i]->devices[k];
            if (!d->created || d->type == DRA_GPU)
                continue;
            if (n == cap) {
                cap = cap ? cap * 2 : 8;
                v = xrealloc(v, cap * sizeof(*v));
            }
            strlcpy_s(v[n].parent_uuid, d->parent_uuid, sizeof(v[n].parent_uuid));
            v[n].gi_id = d->gi_id;
            n++;
        }
    *ret_n = n;
    return v;
}

json_t *dra_claim_project(json_t *obj, void *ud)
{
    (void)ud;
    /* What a plan reads: the identity and the allocation. Not the rest of the metadata: a
     * claim's managedFields and kubectl's last-applied annotation were about 18 KiB a claim of
     * the plugin's memory (bench/dra). */
    static const char *const keep[] = {"apiVersion",          "kind",
                                       "metadata.name",       "metadata.namespace",
                                       "metadata.uid",        "metadata.resourceVersion",
                                       "metadata.generation", "metadata.deletionTimestamp",
                                       "status.allocation"};
    json_t *out = json_object();
    for (size_t i = 0; out && i < ARRAY_SIZE(keep); i++)
        kobj_path_copy(out, obj, keep[i]);
    return out;
}
