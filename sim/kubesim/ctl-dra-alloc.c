/* SPDX-License-Identifier: Apache-2.0 */
/* Structured allocation of ResourceClaims on one node (ks-dra.h): kube-scheduler's allocator
 * over plain JSON. A depth-first search over the claims' requests, device after device, in a
 * fixed order (pools by driver and name, slices by name, devices as listed), backtracking when a
 * constraint, a counter or a later request fails; the first complete solution wins. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "ks-cel.h"
#include "ks-controllers.h"
#include "ks-dra.h"

#define RESULTS_MAX    32 /* resource.AllocationResultsMaxSize */
#define DEFAULT_BUDGET 200000

/* ---- compiled selectors -------------------------------------------------------------------- */

struct ks_dra_cel_cache {
    json_t *index; /* expression -> position */
    struct ks_cel **progs;
    char **errs;
    size_t n;
};

struct ks_dra_cel_cache *ks_dra_cel_cache_new(void)
{
    struct ks_dra_cel_cache *c = xcalloc(1, sizeof(*c));
    c->index = json_object();
    return c;
}

void ks_dra_cel_cache_free(struct ks_dra_cel_cache *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->n; i++) {
        ks_cel_free(c->progs[i]);
        free(c->errs[i]);
    }
    free(c->progs);
    free(c->errs);
    json_decref(c->index);
    free(c);
}

static const struct ks_cel *cel_get(struct ks_dra_cel_cache *c, const char *expr,
                                    const char **ret_err)
{
    json_t *at = json_object_get(c->index, expr);
    if (!at) {
        c->progs = xrealloc(c->progs, (c->n + 1) * sizeof(*c->progs));
        c->errs = xrealloc(c->errs, (c->n + 1) * sizeof(*c->errs));
        c->progs[c->n] = NULL;
        c->errs[c->n] = NULL;
        if (ks_cel_compile(expr, strlen(expr), &c->progs[c->n], &c->errs[c->n]) < 0)
            c->progs[c->n] = NULL;
        at = json_integer((json_int_t)c->n++);
        json_object_set_new(c->index, expr, at);
    }
    size_t i = (size_t)json_integer_value(at);
    *ret_err = c->errs[i];
    return c->progs[i];
}

/* ---- the search's state -------------------------------------------------------------------- */

struct pool {
    const char *driver, *name;
    char *id; /* driver/pool */
    int64_t gen;
    int64_t want; /* resourceSliceCount */
    json_t *slices;
    json_t *counters; /* counter set -> {counter -> thousandths} */
    char *invalid;    /* why the pool cannot be used, or NULL */
};

struct dev {
    json_t *d, *slice;
    size_t pool;
    char *id;   /* driver/pool/device */
    int holder; /* the claim it is being allocated for in this search, -1 none */
};

struct reqd {
    size_t claim;
    const char *name;   /* the request's, or the subrequest's */
    const char *parent; /* the request of a subrequest, NULL for a request */
    char *full;         /* "req" or "req/sub" */
    json_t *r;          /* exactly, or the subrequest */
    json_t *cls;
    bool all;
    size_t ndev;
    size_t *alldevs;
};

struct creq {
    size_t first, n; /* its reqd entries: one, or one per alternative */
    bool subs;
    size_t selected;
};

struct constraint {
    json_t *reqs; /* names the constraint applies to; empty: all */
    const char *attr;
    json_t *value; /* the attribute of the first device, borrowed */
    size_t n;
};

struct result {
    struct reqd *rd;
    size_t dev;
};

struct claimst {
    json_t *claim;
    struct creq *creqs;
    size_t ncreqs;
    struct constraint *cons;
    size_t ncons;
    struct result *res;
    size_t nres;
};

struct alloc {
    const struct ks_dra_input *in;
    const char *node_name;
    struct pool *pools;
    size_t npools;
    struct dev *devs;
    size_t ndevs;
    struct reqd *reqs;
    size_t nreqs;
    struct claimst *claims;
    size_t nclaims;
    signed char *match; /* nreqs x ndevs: -1 not known yet */
    size_t steps, budget;
    char *err;
};

enum { A_FAIL = 0, A_DONE = 1, A_ERROR = -1, A_STOP = -2 };

static void set_err(struct alloc *a, const char *fmt, ...) GPUOP_PRINTF(2, 3);
static void set_err(struct alloc *a, const char *fmt, ...)
{
    if (a->err)
        return;
    va_list ap;
    va_start(ap, fmt);
    struct sbuf b;
    sbuf_init(&b, 64 * 1024);
    sbuf_vaddf(&b, fmt, ap);
    va_end(ap);
    a->err = ks_text_take(&b);
}

static const char *claim_key(struct alloc *a, size_t ci, char *buf, size_t n)
{
    json_t *c = a->claims[ci].claim;
    snprintf(buf, n, "%s/%s", ks_obj_ns(c), ks_obj_name(c));
    return buf;
}

char *ks_dra_device_id(json_t *result)
{
    return xasprintf("%s/%s/%s", kobj_str(result, "driver") ?: "", kobj_str(result, "pool") ?: "",
                     kobj_str(result, "device") ?: "");
}

/* ---- pools --------------------------------------------------------------------------------- */

static bool selector_matches(json_t *sel, json_t *node)
{
    size_t i;
    json_t *term;
    json_array_foreach (json_object_get(sel, "nodeSelectorTerms"), i, term)
        if (ctl_node_term_matches(term, node))
            return true;
    return false;
}

/* Whether devices of this slice (or this device, with per-device node selection) can be used on
 * the node. */
static bool slice_for_node(json_t *spec, json_t *node, const char *node_name)
{
    const char *nn = kobj_str(spec, "nodeName");
    if (nn)
        return streq(nn, node_name);
    if (json_is_true(json_object_get(spec, "allNodes")))
        return true;
    json_t *sel = json_object_get(spec, "nodeSelector");
    if (json_is_object(sel))
        return selector_matches(sel, node);
    return false;
}

static int cmp_slice(const void *x, const void *y)
{
    json_t *a = *(json_t *const *)x, *b = *(json_t *const *)y;
    return strcmp(ks_obj_name(a), ks_obj_name(b));
}

static int cmp_pool(const void *x, const void *y)
{
    const struct pool *a = x, *b = y;
    return strcmp(a->id, b->id);
}

static void gather(struct alloc *a)
{
    json_t *node = a->in->node;
    size_t i;
    json_t *s;
    json_array_foreach (a->in->slices, i, s) {
        json_t *spec = json_object_get(s, "spec");
        bool per_device = json_is_true(json_object_get(spec, "perDeviceNodeSelection"));
        if (!per_device && !slice_for_node(spec, node, a->node_name))
            continue;
        const char *driver = kobj_str(spec, "driver"), *pname = kobj_path_str(spec, "pool.name");
        if (!driver || !pname)
            continue;
        int64_t gen = json_integer_value(kobj_path(spec, "pool.generation"));
        struct pool *p = NULL;
        for (size_t k = 0; k < a->npools; k++)
            if (streq(a->pools[k].driver, driver) && streq(a->pools[k].name, pname))
                p = &a->pools[k];
        if (!p) {
            a->pools = xrealloc(a->pools, (a->npools + 1) * sizeof(*a->pools));
            p = &a->pools[a->npools++];
            *p = (struct pool){.driver = driver,
                               .name = pname,
                               .id = xasprintf("%s/%s", driver, pname),
                               .gen = gen,
                               .slices = json_array()};
        }
        if (gen < p->gen)
            continue;
        if (gen > p->gen) {
            json_array_clear(p->slices);
            p->gen = gen;
        }
        json_array_append(p->slices, s);
        p->want = json_integer_value(kobj_path(spec, "pool.resourceSliceCount"));
    }
    if (a->npools > 1)
        qsort(a->pools, a->npools, sizeof(*a->pools), cmp_pool);
    for (size_t k = 0; k < a->npools; k++) {
        struct pool *p = &a->pools[k];
        size_t n = json_array_size(p->slices);
        json_t **sorted = xcalloc(n ? n : 1, sizeof(*sorted));
        for (size_t j = 0; j < n; j++)
            sorted[j] = json_array_get(p->slices, j);
        qsort(sorted, n, sizeof(*sorted), cmp_slice);
        json_t *names = json_object();
        p->counters = json_object();
        for (size_t j = 0; j < n; j++) {
            json_t *spec = json_object_get(sorted[j], "spec");
            size_t x;
            json_t *cs;
            json_array_foreach (json_object_get(spec, "sharedCounters"), x, cs) {
                const char *set = kobj_str(cs, "name");
                if (!set)
                    continue;
                if (json_object_get(p->counters, set) && !p->invalid)
                    p->invalid = xasprintf("duplicate counter set name %s", set);
                json_t *vals = json_object();
                const char *cn;
                json_t *cv;
                json_object_foreach (json_object_get(cs, "counters"), cn, cv) {
                    int64_t m = 0;
                    (void)ks_quantity_milli(json_object_get(cv, "value"), &m);
                    json_object_set_new(vals, cn, json_integer(m));
                }
                json_object_set_new(p->counters, set, vals);
            }
            bool per_device = json_is_true(json_object_get(spec, "perDeviceNodeSelection"));
            json_t *d;
            json_array_foreach (json_object_get(spec, "devices"), x, d) {
                const char *dn = kobj_str(d, "name");
                if (!dn)
                    continue;
                if (json_object_get(names, dn) && !p->invalid)
                    p->invalid = xasprintf("duplicate device name %s", dn);
                json_object_set_new(names, dn, json_true());
                if (per_device && !slice_for_node(d, a->in->node, a->node_name))
                    continue;
                a->devs = xrealloc(a->devs, (a->ndevs + 1) * sizeof(*a->devs));
                a->devs[a->ndevs++] = (struct dev){.d = d,
                                                   .slice = sorted[j],
                                                   .pool = k,
                                                   .id = xasprintf("%s/%s", p->id, dn),
                                                   .holder = -1};
            }
        }
        json_decref(names);
        free(sorted);
    }
}

static bool pool_incomplete(const struct pool *p)
{
    return (int64_t)json_array_size(p->slices) != p->want;
}

static bool in_use(struct alloc *a, size_t d)
{
    return a->devs[d].holder >= 0 || json_object_get(a->in->allocated, a->devs[d].id);
}

/* ---- selection --------------------------------------------------------------------------- */

static int selectors_match(struct alloc *a, struct reqd *rd, size_t d, json_t *sels,
                           const char *cls)
{
    struct dev *dv = &a->devs[d];
    const char *driver = a->pools[dv->pool].driver;
    size_t i;
    json_t *s;
    json_array_foreach (sels, i, s) {
        const char *expr = kobj_path_str(s, "cel.expression");
        char ck[600];
        if (!expr) {
            set_err(a,
                    "claim %s, request %s, selector #%zu: CEL expression empty (unsupported "
                    "selector type?)",
                    claim_key(a, rd->claim, ck, sizeof(ck)), rd->full, i);
            return A_ERROR;
        }
        const char *cerr = NULL;
        const struct ks_cel *prog = cel_get(a->in->cel, expr, &cerr);
        if (!prog) {
            if (cls)
                set_err(a, "class %s: selector #%zu: CEL compile error: %s", cls, i, cerr);
            else
                set_err(a, "claim %s: selector #%zu: CEL compile error: %s",
                        claim_key(a, rd->claim, ck, sizeof(ck)), i, cerr);
            return A_ERROR;
        }
        bool m = false;
        char *rerr = NULL;
        if (ks_cel_match(prog, driver, json_object_get(dv->d, "attributes"),
                         json_object_get(dv->d, "capacity"), &m, &rerr) < 0) {
            if (cls)
                set_err(a, "class %s: selector #%zu: CEL runtime error: %s", cls, i, rerr);
            else
                set_err(a, "claim %s: selector #%zu: CEL runtime error: %s",
                        claim_key(a, rd->claim, ck, sizeof(ck)), i, rerr);
            free(rerr);
            return A_ERROR;
        }
        if (!m)
            return A_FAIL;
    }
    return A_DONE;
}

/* Whether device d satisfies the request's class and its own selectors (cached). */
static int selectable(struct alloc *a, size_t ri, size_t d)
{
    signed char *m = &a->match[ri * a->ndevs + d];
    if (*m >= 0)
        return *m;
    struct reqd *rd = &a->reqs[ri];
    int r = selectors_match(a, rd, d, kobj_path(rd->cls, "spec.selectors"), ks_obj_name(rd->cls));
    if (r == A_DONE)
        r = selectors_match(a, rd, d, json_object_get(rd->r, "selectors"), NULL);
    if (r == A_ERROR)
        return r;
    *m = (signed char)r;
    return r;
}

/* ---- constraints ------------------------------------------------------------------------- */

static bool constraint_applies(struct constraint *c, struct reqd *rd)
{
    if (json_array_size(c->reqs) == 0)
        return true;
    const char *base = rd->parent ? rd->parent : rd->name;
    size_t i;
    json_t *v;
    json_array_foreach (c->reqs, i, v) {
        const char *s = json_string_value(v);
        if (streq_ptr(s, base) || (rd->parent && streq_ptr(s, rd->full)))
            return true;
    }
    return false;
}

/* The attribute named by a fully qualified name: as written, or unqualified in the driver's
 * own domain. */
static json_t *lookup_attr(json_t *dev, const char *driver, const char *fq)
{
    json_t *attrs = json_object_get(dev, "attributes");
    json_t *v = json_object_get(attrs, fq);
    if (v)
        return v;
    const char *slash = strchr(fq, '/');
    if (!slash || strlen(driver) != (size_t)(slash - fq) || strncmp(fq, driver, strlen(driver)))
        return NULL;
    return json_object_get(attrs, slash + 1);
}

static bool same_attr(json_t *x, json_t *y)
{
    static const char *const kinds[] = {"string", "int", "bool", "version"};
    for (size_t i = 0; i < ARRAY_SIZE(kinds); i++) {
        json_t *a = json_object_get(x, kinds[i]);
        if (a && !json_is_null(a))
            return json_equal(a, json_object_get(y, kinds[i]));
    }
    return false;
}

static bool constraint_add(struct alloc *a, struct constraint *c, struct reqd *rd, size_t d)
{
    if (!constraint_applies(c, rd))
        return true;
    json_t *attr = lookup_attr(a->devs[d].d, a->pools[a->devs[d].pool].driver, c->attr);
    if (!attr)
        return false;
    if (c->n == 0) {
        c->value = attr;
        c->n = 1;
        return true;
    }
    if (!same_attr(c->value, attr))
        return false;
    c->n++;
    return true;
}

static void constraint_remove(struct constraint *c, struct reqd *rd)
{
    if (!constraint_applies(c, rd))
        return;
    if (c->n && --c->n == 0)
        c->value = NULL;
}

/* ---- counters ---------------------------------------------------------------------------- */

/* Whether the pool's counter sets still hold what device d consumes, after what the devices in
 * use (held by other claims, or picked in this search) consume. */
static bool counters_fit(struct alloc *a, size_t d)
{
    json_t *cons = json_object_get(a->devs[d].d, "consumesCounters");
    if (json_array_size(cons) == 0)
        return true;
    struct pool *p = &a->pools[a->devs[d].pool];
    size_t i;
    json_t *c;
    json_array_foreach (cons, i, c) {
        json_t *set = json_object_get(p->counters, kobj_str(c, "counterSet") ?: "");
        if (!set)
            return false;
        const char *cn;
        json_t *need;
        json_object_foreach (json_object_get(c, "counters"), cn, need) {
            json_t *have = json_object_get(set, cn);
            if (!have)
                return false;
            int64_t avail = json_integer_value(have), want = 0;
            (void)ks_quantity_milli(json_object_get(need, "value"), &want);
            for (size_t o = 0; o < a->ndevs; o++) {
                if (a->devs[o].pool != a->devs[d].pool || !in_use(a, o))
                    continue;
                size_t k;
                json_t *oc;
                json_array_foreach (json_object_get(a->devs[o].d, "consumesCounters"), k, oc) {
                    if (!streq_ptr(kobj_str(oc, "counterSet"), kobj_str(c, "counterSet")))
                        continue;
                    int64_t used = 0;
                    (void)ks_quantity_milli(kobj_at(oc, "counters", cn, "value"), &used);
                    avail -= used;
                }
            }
            if (avail < want)
                return false;
        }
    }
    return true;
}

/* ---- the search ---------------------------------------------------------------------------- */

static int allocate_device(struct alloc *a, struct reqd *rd, size_t d, bool must)
{
    if (in_use(a, d))
        return A_FAIL;
    if (!counters_fit(a, d))
        return A_FAIL;
    struct claimst *cs = &a->claims[rd->claim];
    for (size_t i = 0; i < cs->ncons; i++) {
        if (constraint_add(a, &cs->cons[i], rd, d))
            continue;
        for (size_t k = 0; k < i; k++)
            constraint_remove(&cs->cons[k], rd);
        if (must) {
            char ck[600];
            set_err(a,
                    "claim %s, request %s: cannot add device %s because a claim constraint would "
                    "not be satisfied",
                    claim_key(a, rd->claim, ck, sizeof(ck)), rd->full, a->devs[d].id);
            return A_ERROR;
        }
        return A_FAIL;
    }
    a->devs[d].holder = (int)rd->claim;
    cs->res[cs->nres++] = (struct result){rd, d};
    return A_DONE;
}

static void deallocate_device(struct alloc *a, struct reqd *rd, size_t d)
{
    struct claimst *cs = &a->claims[rd->claim];
    for (size_t i = 0; i < cs->ncons; i++)
        constraint_remove(&cs->cons[i], rd);
    a->devs[d].holder = -1;
    cs->nres--;
}

static int allocate_one(struct alloc *a, size_t ci, size_t qi, size_t si, size_t di, bool in_sub)
{
    if (ci >= a->nclaims)
        return A_DONE;
    struct claimst *cs = &a->claims[ci];
    if (qi >= cs->ncreqs)
        return allocate_one(a, ci + 1, 0, 0, 0, false);
    struct creq *cr = &cs->creqs[qi];
    if (cr->subs && !in_sub) {
        /* alternatives in order: the first that leads to a full solution is kept */
        for (size_t s = 0; s < cr->n; s++) {
            int r = allocate_one(a, ci, qi, s, 0, true);
            if (r == A_DONE)
                cr->selected = s;
            if (r != A_FAIL)
                return r;
        }
        return A_FAIL;
    }
    size_t ri = cr->first + (cr->subs ? si : 0);
    struct reqd *rd = &a->reqs[ri];
    if (rd->all && rd->ndev == 0)
        return A_FAIL;
    if (di >= rd->ndev)
        return allocate_one(a, ci, qi + 1, 0, 0, false);
    if (cs->nres + rd->ndev - di > RESULTS_MAX)
        return A_FAIL;
    if (rd->all) {
        size_t d = rd->alldevs[di];
        if (++a->steps > a->budget)
            return A_STOP;
        int r = allocate_device(a, rd, d, true);
        if (r != A_DONE)
            return r;
        r = allocate_one(a, ci, qi, si, di + 1, in_sub);
        if (r != A_DONE)
            deallocate_device(a, rd, d);
        return r;
    }
    for (size_t d = 0; d < a->ndevs; d++) {
        if (in_use(a, d))
            continue;
        struct pool *p = &a->pools[a->devs[d].pool];
        if (p->invalid) {
            set_err(a, "pool %s is invalid: %s", p->name, p->invalid);
            return A_ERROR;
        }
        int sel = selectable(a, ri, d);
        if (sel == A_ERROR)
            return A_ERROR;
        if (sel != A_DONE)
            continue;
        if (++a->steps > a->budget)
            return A_STOP;
        int r = allocate_device(a, rd, d, false);
        if (r == A_ERROR)
            return r;
        if (r != A_DONE)
            continue;
        r = allocate_one(a, ci, qi, si, di + 1, in_sub);
        if (r == A_DONE)
            return r;
        deallocate_device(a, rd, d);
        if (r != A_FAIL)
            return r;
    }
    return A_FAIL;
}

/* ---- setting up ---------------------------------------------------------------------------- */

static int setup_request(struct alloc *a, struct reqd *rd, size_t ri)
{
    char ck[600];
    const char *cname = kobj_str(rd->r, "deviceClassName");
    if (!cname || !cname[0]) {
        set_err(a, "claim %s, request %s: missing device class name (unsupported request type?)",
                claim_key(a, rd->claim, ck, sizeof(ck)), rd->full);
        return A_ERROR;
    }
    rd->cls = json_object_get(a->in->classes, cname);
    if (!rd->cls) {
        set_err(a,
                "claim %s, request %s: could not retrieve device class %s: "
                "deviceclass.resource.k8s.io \"%s\" not found",
                claim_key(a, rd->claim, ck, sizeof(ck)), rd->full, cname, cname);
        return A_ERROR;
    }
    const char *mode = kobj_str(rd->r, "allocationMode") ?: "ExactCount";
    if (streq(mode, "ExactCount")) {
        json_t *cnt = json_object_get(rd->r, "count");
        int64_t n = json_is_integer(cnt) ? json_integer_value(cnt) : 1;
        rd->ndev = n > 0 ? (size_t)n : 0;
        if (n > RESULTS_MAX) /* no allocation could hold it */
            rd->ndev = RESULTS_MAX + 1;
        return A_DONE;
    }
    if (!streq(mode, "All")) {
        set_err(a, "claim %s, request %s: unsupported count mode %s",
                claim_key(a, rd->claim, ck, sizeof(ck)), rd->full, mode);
        return A_ERROR;
    }
    rd->all = true;
    for (size_t k = 0; k < a->npools; k++) {
        if (pool_incomplete(&a->pools[k])) {
            set_err(a,
                    "claim %s, request %s: asks for all devices, but resource pool %s is currently "
                    "being updated",
                    claim_key(a, rd->claim, ck, sizeof(ck)), rd->full, a->pools[k].id);
            return A_ERROR;
        }
        if (a->pools[k].invalid) {
            set_err(a,
                    "claim %s, request %s: asks for all devices, but resource pool %s is currently "
                    "invalid",
                    claim_key(a, rd->claim, ck, sizeof(ck)), rd->full, a->pools[k].id);
            return A_ERROR;
        }
    }
    rd->alldevs = xcalloc(a->ndevs ? a->ndevs : 1, sizeof(*rd->alldevs));
    for (size_t d = 0; d < a->ndevs; d++) {
        int s = selectable(a, ri, d);
        if (s == A_ERROR)
            return A_ERROR;
        if (s == A_DONE)
            rd->alldevs[rd->ndev++] = d;
    }
    return A_DONE;
}

static void add_reqd(struct alloc *a, size_t ci, const char *name, const char *parent, json_t *r)
{
    a->reqs = xrealloc(a->reqs, (a->nreqs + 1) * sizeof(*a->reqs));
    a->reqs[a->nreqs++] = (struct reqd){
        .claim = ci,
        .name = name,
        .parent = parent,
        .full = parent ? xasprintf("%s/%s", parent, name) : xstrdup(name),
        .r = r,
    };
}

static int setup(struct alloc *a)
{
    a->nclaims = json_array_size(a->in->claims);
    a->claims = xcalloc(a->nclaims ? a->nclaims : 1, sizeof(*a->claims));
    for (size_t ci = 0; ci < a->nclaims; ci++) {
        struct claimst *cs = &a->claims[ci];
        cs->claim = json_array_get(a->in->claims, ci);
        json_t *reqs = kobj_path(cs->claim, "spec.devices.requests");
        cs->ncreqs = json_array_size(reqs);
        cs->creqs = xcalloc(cs->ncreqs ? cs->ncreqs : 1, sizeof(*cs->creqs));
        size_t i;
        json_t *r;
        json_array_foreach (reqs, i, r) {
            const char *name = kobj_str(r, "name") ?: "";
            json_t *fa = json_object_get(r, "firstAvailable");
            struct creq *cr = &cs->creqs[i];
            cr->first = a->nreqs;
            if (json_array_size(fa)) {
                cr->subs = true;
                size_t k;
                json_t *s;
                json_array_foreach (fa, k, s)
                    add_reqd(a, ci, kobj_str(s, "name") ?: "", name, s);
                cr->n = json_array_size(fa);
            } else {
                add_reqd(a, ci, name, NULL, json_object_get(r, "exactly"));
                cr->n = 1;
            }
        }
        json_t *cons = kobj_path(cs->claim, "spec.devices.constraints");
        cs->ncons = json_array_size(cons);
        cs->cons = xcalloc(cs->ncons ? cs->ncons : 1, sizeof(*cs->cons));
        json_t *c;
        json_array_foreach (cons, i, c) {
            const char *attr = kobj_str(c, "matchAttribute");
            if (!attr) {
                char ck[600];
                set_err(a,
                        "claim %s, constraint #%zu: empty constraint (unsupported constraint "
                        "type?)",
                        claim_key(a, ci, ck, sizeof(ck)), i);
                return A_ERROR;
            }
            cs->cons[i] = (struct constraint){.reqs = json_object_get(c, "requests"), .attr = attr};
        }
        cs->res = xcalloc(RESULTS_MAX + 1, sizeof(*cs->res));
    }
    a->match = xmalloc((a->nreqs ? a->nreqs : 1) * (a->ndevs ? a->ndevs : 1));
    memset(a->match, -1, (a->nreqs ? a->nreqs : 1) * (a->ndevs ? a->ndevs : 1));
    for (size_t ri = 0; ri < a->nreqs; ri++)
        if (setup_request(a, &a->reqs[ri], ri) == A_ERROR)
            return A_ERROR;
    return A_DONE;
}

/* ---- results ------------------------------------------------------------------------------- */

static void add_unique(json_t *list, json_t *req)
{
    size_t i;
    json_t *v;
    json_array_foreach (list, i, v)
        if (json_equal(v, req))
            return;
    json_array_append(list, req);
}

static json_t *node_selector(struct alloc *a, struct claimst *cs)
{
    json_t *fields = json_array(), *exprs = json_array();
    json_t *out = NULL;
    for (size_t i = 0; i < cs->nres && !out; i++) {
        struct dev *dv = &a->devs[cs->res[i].dev];
        json_t *spec = json_object_get(dv->slice, "spec");
        bool per_device = json_is_true(json_object_get(spec, "perDeviceNodeSelection"));
        json_t *src = per_device ? dv->d : spec;
        const char *nn = kobj_str(src, "nodeName");
        if (nn) {
            out = json_pack("{s:[{s:[{s:s,s:s,s:[s]}]}]}", "nodeSelectorTerms", "matchFields",
                            "key", "metadata.name", "operator", "In", "values", nn);
            break;
        }
        json_t *term = json_array_get(kobj_path(src, "nodeSelector.nodeSelectorTerms"), 0);
        size_t k;
        json_t *req;
        json_array_foreach (json_object_get(term, "matchFields"), k, req)
            add_unique(fields, req);
        json_array_foreach (json_object_get(term, "matchExpressions"), k, req)
            add_unique(exprs, req);
    }
    if (!out && (json_array_size(fields) || json_array_size(exprs))) {
        json_t *term = json_object();
        if (json_array_size(exprs))
            json_object_set(term, "matchExpressions", exprs);
        if (json_array_size(fields))
            json_object_set(term, "matchFields", fields);
        out = json_pack("{s:[o]}", "nodeSelectorTerms", term);
    }
    json_decref(fields);
    json_decref(exprs);
    return out;
}

static json_t *claim_result(struct alloc *a, struct claimst *cs)
{
    json_t *results = json_array();
    for (size_t i = 0; i < cs->nres; i++) {
        struct dev *dv = &a->devs[cs->res[i].dev];
        struct pool *p = &a->pools[dv->pool];
        json_array_append_new(results, json_pack("{s:s,s:s,s:s,s:s}", "request",
                                                 cs->res[i].rd->full, "driver", p->driver, "pool",
                                                 p->name, "device", kobj_str(dv->d, "name")));
    }
    /* the classes' configuration once per class, for the requests using it; then the claim's */
    json_t *config = json_array();
    json_t *class_at = json_object(); /* class -> [first, end) in config */
    for (size_t q = 0; q < cs->ncreqs; q++) {
        struct creq *cr = &cs->creqs[q];
        struct reqd *rd = &a->reqs[cr->first + (cr->subs ? cr->selected : 0)];
        const char *cname = ks_obj_name(rd->cls);
        json_t *range = json_object_get(class_at, cname);
        if (range) {
            for (json_int_t k = json_integer_value(json_array_get(range, 0));
                 k < json_integer_value(json_array_get(range, 1)); k++)
                json_array_append_new(
                    json_object_get(json_array_get(config, (size_t)k), "requests"),
                    json_string(rd->full));
            continue;
        }
        size_t start = json_array_size(config);
        size_t k;
        json_t *c;
        json_array_foreach (kobj_path(rd->cls, "spec.config"), k, c) {
            json_t *e = json_deep_copy(c);
            json_object_set_new(e, "source", json_string("FromClass"));
            json_object_set_new(e, "requests", json_pack("[s]", rd->full));
            json_array_append_new(config, e);
        }
        json_object_set_new(
            class_at, cname,
            json_pack("[I,I]", (json_int_t)start, (json_int_t)json_array_size(config)));
    }
    json_decref(class_at);
    size_t k;
    json_t *c;
    json_array_foreach (kobj_path(cs->claim, "spec.devices.config"), k, c) {
        json_t *reqs = json_object_get(c, "requests");
        bool applies = json_array_size(reqs) == 0;
        for (size_t q = 0; q < cs->ncreqs && !applies; q++) {
            struct creq *cr = &cs->creqs[q];
            struct reqd *rd = &a->reqs[cr->first + (cr->subs ? cr->selected : 0)];
            size_t j;
            json_t *v;
            json_array_foreach (reqs, j, v) {
                const char *s = json_string_value(v);
                if (streq_ptr(s, rd->parent ? rd->parent : rd->name) ||
                    (rd->parent && streq_ptr(s, rd->full)))
                    applies = true;
            }
        }
        if (!applies)
            continue;
        json_t *e = json_deep_copy(c);
        json_object_set_new(e, "source", json_string("FromClaim"));
        json_array_append_new(config, e);
    }
    json_t *devices = json_pack("{s:o}", "results", results);
    if (json_array_size(config))
        json_object_set_new(devices, "config", config);
    else
        json_decref(config);
    json_t *out = json_pack("{s:o}", "devices", devices);
    json_t *ns = node_selector(a, cs);
    if (ns)
        json_object_set_new(out, "nodeSelector", ns);
    return out;
}

int ks_dra_allocate(const struct ks_dra_input *in, json_t **ret_results, char **ret_err)
{
    struct alloc a = {.in = in,
                      .node_name = ks_obj_name(in->node),
                      .budget = in->budget ? in->budget : DEFAULT_BUDGET};
    gather(&a);
    int r = setup(&a);
    if (r != A_ERROR)
        r = allocate_one(&a, 0, 0, 0, 0, false);
    int ret = 0;
    if (r == A_ERROR) {
        *ret_err = a.err ? a.err : xstrdup("allocation failed");
        a.err = NULL;
        ret = -EINVAL;
    } else if (r == A_DONE) {
        json_t *out = json_array();
        for (size_t ci = 0; ci < a.nclaims; ci++)
            json_array_append_new(out, claim_result(&a, &a.claims[ci]));
        *ret_results = out;
    } else {
        *ret_results = NULL;
    }
    free(a.err);
    for (size_t i = 0; i < a.npools; i++) {
        free(a.pools[i].id);
        free(a.pools[i].invalid);
        json_decref(a.pools[i].slices);
        json_decref(a.pools[i].counters);
    }
    free(a.pools);
    for (size_t i = 0; i < a.ndevs; i++)
        free(a.devs[i].id);
    free(a.devs);
    for (size_t i = 0; i < a.nreqs; i++) {
        free(a.reqs[i].full);
        free(a.reqs[i].alldevs);
    }
    free(a.reqs);
    for (size_t i = 0; i < a.nclaims; i++) {
        free(a.claims[i].creqs);
        free(a.claims[i].cons);
        free(a.claims[i].res);
    }
    free(a.claims);
    free(a.match);
    return ret;
}
