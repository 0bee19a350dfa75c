/* SPDX-License-Identifier: Apache-2.0 */
/* The label computation: pure functions over the inventory and the resolved config. */
#include <assert.h>
#include <ctype.h>
#include <string.h>

#include "feature-discovery.h"

#define GPU_RESOURCE "nvidia.com/gpu"

/* ---- the label set ------------------------------------------------------------------------ */

void gfd_labels_free(struct gfd_labels *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->n; i++) {
        free(l->items[i].key);
        free(l->items[i].value);
    }
    free(l->items);
    free(l->warning);
    free(l);
}

const char *gfd_labels_get(const struct gfd_labels *l, const char *key)
{
    for (size_t i = 0; l && i < l->n; i++)
        if (strcmp(l->items[i].key, key) == 0)
            return l->items[i].value;
    return NULL;
}

int gfd_labels_format(const struct gfd_labels *l, struct sbuf *out)
{
    for (size_t i = 0; i < l->n; i++) {
        int r = sbuf_printf(out, "%s=%s\n", l->items[i].key, l->items[i].value);
        if (r < 0)
            return r;
    }
    return 0;
}

/* Records the first key or value that did not fit; gfd_labels_compute fails with it. */
static void overflow(struct gfd_labels *l, int code, const char *fmt, ...) GPUOP_PRINTF(3, 4);
static void overflow(struct gfd_labels *l, int code, const char *fmt, ...)
{
    if (l->overflow.code)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(l->overflow.msg, sizeof(l->overflow.msg), fmt, ap);
    va_end(ap);
    l->overflow.code = code;
}

/* Sets key (later sets replace earlier ones, as NVIDIA merges its labelers). */
static void label_set(struct gfd_labels *l, const char *key, const char *value)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->items[i].key, key) == 0) {
            free(l->items[i].value);
            l->items[i].value = xstrdup(value);
            return;
        }
    l->items = xrealloc(l->items, (l->n + 1) * sizeof(*l->items));
    l->items[l->n].key = xstrdup(key);
    l->items[l->n].value = xstrdup(value);
    l->n++;
}

static void label_setf(struct gfd_labels *l, const char *key, const char *fmt, ...)
    GPUOP_PRINTF(3, 4);
static void label_setf(struct gfd_labels *l, const char *key, const char *fmt, ...)
{
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof(buf)) {
        overflow(l, -ENOBUFS, "label %s: value longer than %zu bytes", key, sizeof(buf) - 1);
        return;
    }
    label_set(l, key, buf);
}

static int label_cmp(const void *a, const void *b)
{
    return strcmp(((const struct gfd_label *)a)->key, ((const struct gfd_label *)b)->key);
}

/* ---- names -------------------------------------------------------------------------------- */

char *gfd_sanitise(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    char *out = xmalloc(n + 1);
    size_t o = 0;
    bool pending_dash = false;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        bool keep = isalnum(ch) || ch == '-' || ch == '_' || ch == '.' || ch == ' ';
        if (!keep || (ch >= 0x80))
            continue; /* removed before splitting, so "a\nb" becomes "ab" */
        if (ch == ' ') {
            pending_dash = o > 0;
            continue;
        }
        if (pending_dash)
            out[o++] = '-';
        pending_dash = false;
        out[o++] = (char)ch;
    }
    out[o] = '\0';
    return out;
}

const char *gfd_arch_family(int major, int minor)
{
    switch (major) {
    case 1:
        return "tesla";
    case 2:
        return "fermi";
    case 3:
        return "kepler";
    case 5:
        return "maxwell";
    case 6:
        return "pascal";
    case 7:
        return minor < 5 ? "volta" : "turing";
    case 8:
        return minor < 9 ? "ampere" : "ada-lovelace";
    case 9:
        return "hopper";
    case 10:
    case 12:
        return "blackwell";
    case 13:
        return "rubin";
    default:
        return "undefined";
    }
}

/* ---- per-resource labels ------------------------------------------------------------------ */

/* One advertised resource ("nvidia.com/gpu", "nvidia.com/mig-1g.10gb") and its sharing. */
struct resource {
    const char *name;
    const struct dpconfig *config; /* NULL: sharing disabled (replicas 0) */
    bool invalid;                  /* the single strategy's -MIG-INVALID form */
};

static unsigned resource_replicas(const struct resource *r)
{
    if (r->invalid || !r->config)
        return 0;
    return dpconfig_replica_count(r->config, r->name);
}

static bool resource_shared(const struct resource *r)
{
    return resource_replicas(r) > 1;
}

static bool resource_renamed(const struct resource *r)
{
    if (!r->config)
        return false;
    const struct dpconfig_replicated_resource *rr = dpconfig_replicas_for(r->config, r->name);
    return rr && rr->rename && *rr->rename;
}

static void resource_set(struct gfd_labels *l, const struct resource *r, const char *suffix,
                         const char *value)
{
    char key[256];
    int n = snprintf(key, sizeof(key), "%s.%s", r->name, suffix);
    if (n < 0 || (size_t)n >= sizeof(key)) {
        overflow(l, -ENOBUFS, "label key \"%s.%s\": longer than %zu bytes", r->name, suffix,
                 sizeof(key) - 1);
        return;
    }
    label_set(l, key, value);
}

static void resource_setu(struct gfd_labels *l, const struct resource *r, const char *suffix,
                          uint64_t v)
{
    char buf[32];
    snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v);
    resource_set(l, r, suffix, buf);
}

/* product: the sanitised parts joined with '-', plus "-SHARED" when shared and not renamed. */
static void product_label(struct gfd_labels *l, const struct resource *r, const char *const *parts,
                          size_t n)
{
    struct sbuf b _cleanup_sbuf_;
    sbuf_init(&b, 1024);
    for (size_t i = 0; i < n; i++) {
        _cleanup_free_ char *s = gfd_sanitise(parts[i]);
        if (!*s)
            continue;
        sbuf_addf(&b, "%s%s", b.len ? "-" : "", s);
    }
    if (!b.len)
        return;
    if (resource_shared(r) && !resource_renamed(r))
        sbuf_adds(&b, "-SHARED");
    int err = sbuf_check(&b);
    if (err < 0) {
        overflow(l, err, "label %s.product: value longer than %zu bytes", r->name, b.limit);
        return;
    }
    resource_set(l, r, "product", b.data);
}

static void base_labels(struct gfd_labels *l, const struct resource *r, size_t count)
{
    resource_setu(l, r, "count", count);
    resource_setu(l, r, "replicas", resource_replicas(r));
    const char *strategy = "none";
    if (r->invalid)
        strategy = "";
    else if (resource_shared(r))
        strategy = dpconfig_sharing_strategy_name(dpconfig_sharing_strategy(r->config));
    resource_set(l, r, "sharing-strategy", strategy);
}

static void arch_labels(struct gfd_labels *l, const struct resource *r, const struct gpu_device *d)
{
    if (d->cc_major == 0)
        return;
    resource_set(l, r, "family", gfd_arch_family(d->cc_major, d->cc_minor));
    resource_setu(l, r, "compute.major", (uint64_t)d->cc_major);
    resource_setu(l, r, "compute.minor", (uint64_t)d->cc_minor);
}

static void full_gpu_labels(struct gfd_labels *l, const struct resource *r,
                            const struct gpu_device *d, size_t count)
{
    if (count == 0)
        return;
    const char *parts[] = {d->name};
    product_label(l, r, parts, 1);
    base_labels(l, r, count);
    uint64_t mib = d->memory_total_bytes / (1024 * 1024);
    if (mib)
        resource_setu(l, r, "memory", mib);
    arch_labels(l, r, d);
}

static void mig_labels(struct gfd_labels *l, const struct resource *r,
                       const struct gpu_device *parent, const struct gpu_mig_device *m,
                       size_t count)
{
    if (count == 0)
        return;
    const char *parts[] = {parent->name, "MIG", m->profile};
    product_label(l, r, parts, 3);
    base_labels(l, r, count);
    resource_setu(l, r, "memory", m->memory_mib);
    resource_setu(l, r, "multiprocessors", m->multiprocessors);
    resource_setu(l, r, "slices.gi", m->gi_slices);
    resource_setu(l, r, "slices.ci", m->ci_slices);
    resource_setu(l, r, "engines.copy", m->copy_engines);
    resource_setu(l, r, "engines.decoder", m->decoders);
    resource_setu(l, r, "engines.encoder", m->encoders);
    resource_setu(l, r, "engines.jpeg", m->jpegs);
    resource_setu(l, r, "engines.ofa", m->ofas);
}

static void invalid_labels(struct gfd_labels *l, const struct gpu_device *d)
{
    struct resource r = {.name = GPU_RESOURCE, .invalid = true};
    const char *parts[] = {d->name, "MIG", "INVALID"};
    product_label(l, &r, parts, 3);
    base_labels(l, &r, 0);
    resource_set(l, &r, "memory", "0");
    arch_labels(l, &r, d);
}

/* ---- strategies --------------------------------------------------------------------------- */

/* The GPUs that take part: lost ones are left out. */
struct gpus {
    size_t n;
    const struct gpu_device **v;
};

static const struct gpu_device *first_full(const struct gpus *g)
{
    for (size_t i = 0; i < g->n; i++)
        if (!g->v[i]->mig_enabled)
            return g->v[i];
    return NULL;
}

/* nvidia.com/gpu for strategies none and mixed: every physical GPU counts; MIG-enabled GPUs are
 * labelled as full GPUs without sharing, unless full GPUs exist, which carry the sharing. */
static void gpu_resource_all(struct gfd_labels *l, const struct gpus *g, const struct dpconfig *c)
{
    if (g->n == 0)
        return;
    const struct gpu_device *full = first_full(g);
    struct resource r = {.name = GPU_RESOURCE, .config = full ? c : NULL};
    full_gpu_labels(l, &r, full ? full : g->v[0], g->n);
}

static void strategy_single(struct gfd_labels *l, const struct gpus *g, const struct dpconfig *c)
{
    size_t n_enabled = 0, n_mig = 0;
    bool empty = false;
    const struct gpu_device *first_parent = NULL;
    const struct gpu_mig_device *first_mig = NULL;
    bool mixed_profiles = false;
    for (size_t i = 0; i < g->n; i++) {
        const struct gpu_device *d = g->v[i];
        if (!d->mig_enabled)
            continue;
        n_enabled++;
        if (d->n_mig == 0)
            empty = true;
        for (size_t k = 0; k < d->n_mig; k++) {
            if (!first_mig) {
                first_mig = &d->mig[k];
                first_parent = d;
            } else if (strcmp(first_mig->profile, d->mig[k].profile) != 0) {
                mixed_profiles = true;
            }
            n_mig++;
        }
    }
    if (n_enabled == 0) {
        gpu_resource_all(l, g, c);
        return;
    }
    const char *reason = NULL;
    if (n_enabled != g->n)
        reason = "all devices on the node must be configured with the same migEnabled value";
    else if (empty)
        reason = "a MIG-enabled GPU has no MIG devices";
    else if (mixed_profiles)
        reason = "more than one MIG device type present on node";
    if (reason) {
        /* The model and compute capability come from the first GPU that reports one. */
        const struct gpu_device *d = g->v[0];
        for (size_t i = 0; i < g->n; i++)
            if (g->v[i]->cc_major != 0) {
                d = g->v[i];
                break;
            }
        invalid_labels(l, d);
        l->warning = xasprintf("invalid configuration for mig-strategy=single: %s", reason);
        return;
    }
    struct resource r = {.name = GPU_RESOURCE, .config = c};
    mig_labels(l, &r, first_parent, first_mig, n_mig);
    /* the MIG labels lie over the parent's full-GPU ones: its architecture stays */
    arch_labels(l, &r, first_parent);
}

/* "nvidia.com/mig-<profile>" with '+' made '.' ("1g.10gb+me" -> "mig-1g.10gb.me"). */
static char *mig_resource_name(const char *profile)
{
    char *n = xasprintf(GFD_LABEL_PREFIX "mig-%s", profile);
    for (char *p = n; *p; p++)
        if (*p == '+')
            *p = '.';
    return n;
}

/* Mixed exposes only profiles whose compute instance spans its GPU instance (C == G), as
 * NVIDIA's device map (and gpuop's device plugin) do: "1c.3g.40gb" names one that does not. */
static bool mig_profile_exposed(const char *profile)
{
    size_t digits = 0;
    while (isdigit((unsigned char)profile[digits]))
        digits++;
    return !(digits > 0 && profile[digits] == 'c' && profile[digits + 1] == '.');
}

static void strategy_mixed(struct gfd_labels *l, const struct gpus *g, const struct dpconfig *c)
{
    gpu_resource_all(l, g, c);
    /* One resource per profile, in the order first seen. */
    for (size_t i = 0; i < g->n; i++) {
        const struct gpu_device *d = g->v[i];
        if (!d->mig_enabled)
            continue;
        for (size_t k = 0; k < d->n_mig; k++) {
            const struct gpu_mig_device *m = &d->mig[k];
            if (!mig_profile_exposed(m->profile))
                continue;
            bool seen = false;
            for (size_t pi = 0; pi <= i && !seen; pi++) {
                const struct gpu_device *pd = g->v[pi];
                if (!pd->mig_enabled)
                    continue;
                size_t lim = pi == i ? k : pd->n_mig;
                for (size_t pk = 0; pk < lim; pk++)
                    if (strcmp(pd->mig[pk].profile, m->profile) == 0)
                        seen = true;
            }
            if (seen)
                continue;
            size_t count = 0;
            for (size_t ci = i; ci < g->n; ci++) {
                const struct gpu_device *cd = g->v[ci];
                if (!cd->mig_enabled)
                    continue;
                for (size_t ck = 0; ck < cd->n_mig; ck++)
                    if (strcmp(cd->mig[ck].profile, m->profile) == 0)
                        count++;
            }
            _cleanup_free_ char *name = mig_resource_name(m->profile);
            struct resource r = {.name = name, .config = c};
            mig_labels(l, &r, d, m, count);
        }
    }
}

/* ---- node-level labels -------------------------------------------------------------------- */

static bool all_digits(const char *s, size_t n)
{
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isdigit((unsigned char)s[i]))
            return false;
    return true;
}

/* "X.Y[.Z]" into its parts; rev is "" for X.Y. */
static int split_driver_version(const char *v, char *maj, char *min, char *rev, size_t n)
{
    const char *d1 = strchr(v, '.');
    if (!d1)
        return -EINVAL;
    const char *d2 = strchr(d1 + 1, '.');
    size_t l1 = (size_t)(d1 - v);
    size_t l2 = d2 ? (size_t)(d2 - d1 - 1) : strlen(d1 + 1);
    size_t l3 = d2 ? strlen(d2 + 1) : 0;
    if (!all_digits(v, l1) || !all_digits(d1 + 1, l2) || (d2 && !all_digits(d2 + 1, l3)))
        return -EINVAL;
    if (l1 >= n || l2 >= n || l3 >= n)
        return -EINVAL;
    memcpy(maj, v, l1);
    maj[l1] = '\0';
    memcpy(min, d1 + 1, l2);
    min[l2] = '\0';
    if (d2)
        memcpy(rev, d2 + 1, l3);
    rev[l3] = '\0';
    return 0;
}

static int version_labels(struct gfd_labels *l, const struct gpu_inventory *inv, struct err *e)
{
    char maj[GPU_VERSION_MAX], min[GPU_VERSION_MAX], rev[GPU_VERSION_MAX];
    if (split_driver_version(inv->driver_version, maj, min, rev, sizeof(maj)) < 0)
        return err_set(e, -EINVAL, "driver version \"%s\": expected X.Y or X.Y.Z",
                       inv->driver_version);
    int cuda = inv->cuda_driver_version;
    if (cuda < 0)
        return err_set(e, -EINVAL, "CUDA driver version %d: expected a positive integer", cuda);
    int cmaj = cuda / 1000, cmin = (cuda % 1000) / 10;
    label_set(l, "nvidia.com/cuda.driver.major", maj);
    label_set(l, "nvidia.com/cuda.driver.minor", min);
    label_set(l, "nvidia.com/cuda.driver.rev", rev);
    label_set(l, "nvidia.com/cuda.driver-version.major", maj);
    label_set(l, "nvidia.com/cuda.driver-version.minor", min);
    label_set(l, "nvidia.com/cuda.driver-version.revision", rev);
    label_set(l, "nvidia.com/cuda.driver-version.full", inv->driver_version);
    label_setf(l, "nvidia.com/cuda.runtime.major", "%d", cmaj);
    label_setf(l, "nvidia.com/cuda.runtime.minor", "%d", cmin);
    label_setf(l, "nvidia.com/cuda.runtime-version.major", "%d", cmaj);
    label_setf(l, "nvidia.com/cuda.runtime-version.minor", "%d", cmin);
    label_setf(l, "nvidia.com/cuda.runtime-version.full", "%d.%d", cmaj, cmin);
    return 0;
}

/* compute (0x0302), graphics (0x0300), or unknown (no GPUs, other or mixed classes). MIG-enabled
 * GPUs count as compute. */
static const char *gpu_mode(const struct gpus *g)
{
    if (g->n == 0)
        return "unknown";
    unsigned first = 0;
    for (size_t i = 0; i < g->n; i++) {
        unsigned cls = g->v[i]->mig_enabled ? 0x0302 : g->v[i]->pci_class;
        if (i == 0)
            first = cls;
        else if (cls != first)
            return "unknown";
    }
    return first == 0x0302 ? "compute" : first == 0x0300 ? "graphics" : "unknown";
}

int gfd_labels_compute(const struct gfd_input *in, struct gfd_labels **ret, struct err *e)
{
    _cleanup_(gfd_labels_freep) struct gfd_labels *l = xcalloc(1, sizeof(*l));
    const struct gpu_inventory *inv = in->inventory;
    const struct dpconfig *c = in->config;
    _cleanup_(dpconfig_freep) struct dpconfig *defaults = NULL;
    if (!c)
        c = defaults = dpconfig_new();

    if (inv) {
        struct gpus g = {0};
        _cleanup_free_ const struct gpu_device **v = xcalloc(inv->n_gpus + 1, sizeof(*v));
        g.v = v;
        for (size_t i = 0; i < inv->n_gpus; i++)
            if (!inv->gpus[i].lost)
                g.v[g.n++] = &inv->gpus[i];

        int r = version_labels(l, inv, e);
        if (r < 0)
            return r;

        _cleanup_free_ char *machine =
            gfd_sanitise(in->machine_type ? in->machine_type : "unknown");
        label_set(l, "nvidia.com/gpu.machine", machine);

        bool mig_capable = false, mig_enabled = false;
        for (size_t i = 0; i < g.n; i++) {
            mig_capable |= g.v[i]->mig_capable || g.v[i]->mig_enabled;
            mig_enabled |= g.v[i]->mig_enabled;
        }
        label_set(l, "nvidia.com/mig.capable", mig_capable ? "true" : "false");

        bool mps = dpconfig_sharing_strategy(c) == DPCONFIG_SHARING_MPS;
        if (mps && mig_enabled) {
            for (size_t i = 0; i < g.n; i++)
                if (g.v[i]->mig_enabled)
                    return err_set(e, -EINVAL,
                                   "sharing.mps: MPS sharing is not supported with MIG-enabled "
                                   "GPUs (GPU %u, %s)",
                                   g.v[i]->index, g.v[i]->uuid);
        }
        label_set(l, "nvidia.com/mps.capable", mps ? "true" : "false");
        label_set(l, "nvidia.com/gpu.mode", gpu_mode(&g));
        if (in->vgpu) {
            label_set(l, "nvidia.com/vgpu.present", in->vgpu->present ? "true" : "false");
            if (in->vgpu->present && in->vgpu->host_driver_version[0]) {
                label_set(l, "nvidia.com/vgpu.host-driver-version", in->vgpu->host_driver_version);
                label_set(l, "nvidia.com/vgpu.host-driver-branch", in->vgpu->host_driver_branch);
            }
        }

        switch (c->mig_strategy) {
        case DPCONFIG_MIG_NONE:
            gpu_resource_all(l, &g, c);
            break;
        case DPCONFIG_MIG_SINGLE:
            strategy_single(l, &g, c);
            break;
        case DPCONFIG_MIG_MIXED:
            strategy_mixed(l, &g, c);
            break;
        default:
            return err_set(e, -EINVAL, "unknown MIG strategy %d", (int)c->mig_strategy);
        }
        if (c->mig_strategy != DPCONFIG_MIG_NONE)
            label_set(l, "nvidia.com/mig.strategy", dpconfig_mig_strategy_name(c->mig_strategy));
    }
    if (in->with_timestamp)
        label_setf(l, "nvidia.com/gfd.timestamp", "%lld", (long long)in->timestamp);

    if (l->overflow.code < 0)
        return err_set(e, l->overflow.code, "%s", l->overflow.msg);
    if (l->n > 1) /* qsort(NULL, 0, ...) is undefined */
        qsort(l->items, l->n, sizeof(*l->items), label_cmp);
    for (size_t i = 1; i < l->n; i++) /* sorted by key, each key once */
        assert(strcmp(l->items[i - 1].key, l->items[i].key) < 0);
    *ret = steal_ptr(&l);
    return 0;
}

void gfd_stamp_clear(struct gfd_stamp *s)
{
    free(s->last);
    s->last = NULL;
    s->at = 0;
}

int gfd_labels_stamped(const struct gfd_input *in, bool with_timestamp, int64_t now_s,
                       struct gfd_stamp *stamp, struct gfd_labels **ret, struct err *e)
{
    struct gfd_input plain_in = *in;
    plain_in.with_timestamp = false;
    _cleanup_(gfd_labels_freep) struct gfd_labels *plain = NULL;
    int r = gfd_labels_compute(&plain_in, &plain, e);
    if (r < 0)
        return r;
    struct sbuf b _cleanup_sbuf_;
    sbuf_init(&b, GFD_FILE_MAX);
    if (gfd_labels_format(plain, &b) < 0)
        return err_set(e, -ENOBUFS, "labels exceed %u bytes", GFD_FILE_MAX);
    const char *body = b.data ? b.data : "";
    if (!stamp->last || strcmp(stamp->last, body) != 0) {
        free(stamp->last);
        stamp->last = xstrdup(body);
        stamp->at = now_s;
    }
    if (!with_timestamp) {
        *ret = steal_ptr(&plain);
        return 0;
    }
    plain_in.with_timestamp = true;
    plain_in.timestamp = stamp->at;
    return gfd_labels_compute(&plain_in, ret, e);
}
