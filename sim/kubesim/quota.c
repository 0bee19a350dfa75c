/* SPDX-License-Identifier: Apache-2.0 */
/* ResourceQuota: what the API server's quota admission and the quota controller do. A create is
 * charged against every quota of its namespace (pods: their compute requests and limits,
 * requests.<extended resource> such as nvidia.com/gpu and MIG slices, pods, count/pods; any
 * object: count/<resource>[.<group>]); one that would pass a quota's status.hard is refused with
 * 403 and the API server's message, one that fits is added to status.used in the same locked
 * step, so two creates racing for the last unit cannot both pass. The controller
 * (ks_ctl_quotas) recomputes status.used from the store, which releases what deleted and
 * finished (Succeeded, Failed) pods held. */
#include <inttypes.h>
#include <string.h>
#include <time.h>

#include "ks-controllers.h"

#define REQ_PREFIX "requests."
#define LIM_PREFIX "limits."

static bool has_prefix(const char *s, const char *p)
{
    return strncmp(s, p, strlen(p)) == 0;
}

/* An extended resource: a qualified name outside the kubernetes.io domains, not "requests.*". */
static bool extended_resource(const char *r)
{
    const char *slash = strchr(r, '/');
    if (!slash || has_prefix(r, REQ_PREFIX))
        return false;
    size_t dl = (size_t)(slash - r);
    static const char kio[] = "kubernetes.io";
    if (dl >= sizeof(kio) - 1 && strncmp(slash - (sizeof(kio) - 1), kio, sizeof(kio) - 1) == 0)
        return false;
    return kobj_valid_qualified_name(r);
}

/* The resource names the pod evaluator tracks: a quota's other names are accepted but never
 * charged (limits.<extended resource> among them: extended resources are quota'd by request). */
static bool pod_tracks(const char *r)
{
    static const char *const std[] = {"pods",
                                      "count/pods",
                                      "cpu",
                                      "memory",
                                      "requests.cpu",
                                      "requests.memory",
                                      "limits.cpu",
                                      "limits.memory",
                                      "ephemeral-storage",
                                      "requests.ephemeral-storage",
                                      "limits.ephemeral-storage"};
    for (size_t i = 0; i < ARRAY_SIZE(std); i++)
        if (streq(r, std[i]))
            return true;
    if (has_prefix(r, "hugepages-") || has_prefix(r, REQ_PREFIX "hugepages-"))
        return true;
    return has_prefix(r, REQ_PREFIX) && extended_resource(r + strlen(REQ_PREFIX));
}

/* count/<plural> for the core group, count/<plural>.<group> otherwise; the legacy object-count
 * names of a few core types too. */
static bool counts_type(const struct ks_type *t, const char *r)
{
    if (!has_prefix(r, "count/"))
        return !t->group[0] &&
               (streq(r, "configmaps") || streq(r, "secrets") || streq(r, "services") ||
                streq(r, "resourcequotas") || streq(r, "replicationcontrollers") ||
                streq(r, "persistentvolumeclaims")) &&
               streq(r, t->plural);
    r += strlen("count/");
    size_t pl = strlen(t->plural);
    if (strncmp(r, t->plural, pl) != 0)
        return false;
    if (!t->group[0])
        return r[pl] == '\0';
    return r[pl] == '.' && streq(r + pl + 1, t->group);
}

static void add_milli(json_t *u, const char *k, int64_t m)
{
    json_t *cur = json_object_get(u, k);
    int64_t v = cur ? (int64_t)json_integer_value(cur) : 0;
    v = m > INT64_MAX - v ? INT64_MAX : v + m;
    json_object_set_new(u, k, json_integer(v));
}

static void max_milli(json_t *u, const char *k, int64_t m)
{
    json_t *cur = json_object_get(u, k);
    if (!cur || json_integer_value(cur) < m)
        json_object_set_new(u, k, json_integer(m));
}

/* The pod's effective requests or limits (which: "requests", "limits") in thousandths: the sum
 * over its containers, at least the largest init container's, plus the pod overhead. */
static json_t *pod_resources(json_t *pod, const char *which)
{
    json_t *sum = json_object();
    size_t i;
    json_t *c;
    const char *k;
    json_t *v;
    int64_t m;
    json_array_foreach (kobj_path(pod, "spec.containers"), i, c)
        json_object_foreach (kobj_path(json_object_get(c, "resources"), which), k, v)
            if (ks_quantity_milli(v, &m) == 0)
                add_milli(sum, k, m);
    json_array_foreach (kobj_path(pod, "spec.initContainers"), i, c)
        json_object_foreach (kobj_path(json_object_get(c, "resources"), which), k, v)
            if (ks_quantity_milli(v, &m) == 0)
                max_milli(sum, k, m);
    json_object_foreach (kobj_path(pod, "spec.overhead"), k, v)
        if (ks_quantity_milli(v, &m) == 0 && (streq(which, "requests") || json_object_get(sum, k)))
            add_milli(sum, k, m);
    return sum;
}

/* Whether the pod still holds compute quota: not finished, not past its deletion grace. */
static bool pod_live(struct ksim *ks, json_t *pod)
{
    const char *phase = kobj_path_str(pod, "status.phase");
    if (streq_ptr(phase, "Succeeded") || streq_ptr(phase, "Failed"))
        return false;
    const char *del = kobj_path_str(pod, "metadata.deletionTimestamp");
    if (del) {
        struct tm tm = {0};
        if (strptime(del, "%Y-%m-%dT%H:%M:%SZ", &tm)) {
            json_t *g = kobj_path(pod, "metadata.deletionGracePeriodSeconds");
            int64_t end = (int64_t)timegm(&tm) + (json_is_integer(g) ? json_integer_value(g) : 0);
            if ((int64_t)(ks_now(ks) / 1000) > end)
                return false;
        }
    }
    return true;
}

json_t *ks_quota_pod_usage(struct ksim *ks, json_t *pod)
{
    json_t *u = json_object();
    add_milli(u, "count/pods", 1000);
    if (!pod_live(ks, pod))
        return u;
    add_milli(u, "pods", 1000);
    _cleanup_json_ json_t *req = pod_resources(pod, "requests");
    _cleanup_json_ json_t *lim = pod_resources(pod, "limits");
    static const char *const compute[] = {"cpu", "memory", "ephemeral-storage"};
    for (size_t i = 0; i < ARRAY_SIZE(compute); i++) {
        json_t *r = json_object_get(req, compute[i]), *l = json_object_get(lim, compute[i]);
        char name[64];
        if (r) {
            add_milli(u, compute[i], json_integer_value(r));
            snprintf(name, sizeof(name), REQ_PREFIX "%s", compute[i]);
            add_milli(u, name, json_integer_value(r));
        }
        if (l) {
            snprintf(name, sizeof(name), LIM_PREFIX "%s", compute[i]);
            add_milli(u, name, json_integer_value(l));
        }
    }
    const char *k;
    json_t *v;
    json_object_foreach (req, k, v) {
        bool huge = has_prefix(k, "hugepages-");
        if (!huge && !extended_resource(k))
            continue;
        if (huge)
            add_milli(u, k, json_integer_value(v));
        _cleanup_free_ char *name = xasprintf(REQ_PREFIX "%s", k);
        add_milli(u, name, json_integer_value(v));
    }
    return u;
}

/* What creating obj (of type t) charges, keyed by resource name in thousandths. */
static json_t *create_usage(struct ksim *ks, struct ks_type *t, json_t *obj, json_t *hard)
{
    if (!t->crd && streq(t->plural, "pods"))
        return ks_quota_pod_usage(ks, obj);
    json_t *u = json_object();
    const char *k;
    json_t *v;
    json_object_foreach (hard, k, v)
        if (counts_type(t, k))
            add_milli(u, k, 1000);
    return u;
}

static bool tracked(struct ks_type *t, const char *r)
{
    return (!t->crd && streq(t->plural, "pods")) ? pod_tracks(r) : counts_type(t, r);
}

/* Whether name's quantity is written in binary units (memory, storage, hugepages). */
static bool binary_resource(const char *r)
{
    return strstr(r, "memory") || strstr(r, "storage") || strstr(r, "hugepages-");
}

static json_t *quantity_json(const char *r, int64_t milli)
{
    char buf[40];
    kobj_quantity_format(milli, binary_resource(r), buf, sizeof(buf));
    return json_string(buf);
}

static int64_t milli_of(json_t *list, const char *k)
{
    int64_t m = 0;
    json_t *v = json_object_get(list, k);
    if (!v || ks_quantity_milli(v, &m) < 0)
        return 0;
    return m;
}

/* "a=1,b=2" of names (a sorted array) from a ResourceList; names it lacks are left out. */
static void pretty(struct sbuf *b, json_t *names, json_t *list)
{
    size_t i, n = 0;
    json_t *name;
    json_array_foreach (names, i, name) {
        const char *k = json_string_value(name);
        json_t *v = json_object_get(list, k);
        if (!v)
            continue;
        int64_t m = 0;
        if (json_is_integer(v))
            m = json_integer_value(v);
        else
            m = milli_of(list, k);
        char q[40];
        kobj_quantity_format(m, binary_resource(k), q, sizeof(q));
        sbuf_addf(b, "%s%s=%s", n++ ? "," : "", k, q);
    }
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Sorted JSON array of an object's keys. */
static json_t *sorted_keys(json_t *o)
{
    size_t n = json_object_size(o), i = 0;
    _cleanup_free_ const char **ks = xcalloc(n ? n : 1, sizeof(*ks));
    const char *k;
    json_t *v;
    json_object_foreach (o, k, v)
        ks[i++] = k;
    qsort(ks, n, sizeof(*ks), cmp_str);
    json_t *a = json_array();
    for (i = 0; i < n; i++)
        json_array_append_new(a, json_string(ks[i]));
    return a;
}

/* The pod evaluator's backward-compatible rule: a quota on cpu or memory needs each container
 * to state it ("limits.cpu for: a,b; requests.memory for: a"). NULL when nothing is missing. */
static char *missing_constraints(json_t *pod, json_t *hard)
{
    static const struct {
        const char *quota, *which, *res;
    } rules[] = {
        {"cpu", "requests", "cpu"},
        {"limits.cpu", "limits", "cpu"},
        {"limits.memory", "limits", "memory"},
        {"memory", "requests", "memory"},
        {"requests.cpu", "requests", "cpu"},
        {"requests.memory", "requests", "memory"},
    };
    _cleanup_(sbuf_free) struct sbuf b;
    sbuf_init(&b, 4096);
    bool any = false;
    for (size_t r = 0; r < ARRAY_SIZE(rules); r++) {
        if (!json_object_get(hard, rules[r].quota))
            continue;
        _cleanup_(sbuf_free) struct sbuf names;
        sbuf_init(&names, 1024);
        size_t i, n = 0;
        json_t *c;
        json_array_foreach (kobj_path(pod, "spec.containers"), i, c)
            if (!kobj_path(json_object_get(c, "resources"), rules[r].which) ||
                !json_object_get(kobj_path(json_object_get(c, "resources"), rules[r].which),
                                 rules[r].res))
                sbuf_addf(&names, "%s%s", n++ ? "," : "", kobj_str(c, "name") ?: "");
        if (!n)
            continue;
        sbuf_addf(&b, "%s%s for: %s", any ? "; " : "", rules[r].quota, names.data ?: "");
        any = true;
    }
    return any ? ks_text_take(&b) : NULL;
}

/* The objects of t in ns, in name order (a new array). */
static json_t *store_list(struct ks_type *t, const char *ns)
{
    _cleanup_free_ char *last = NULL;
    size_t remaining;
    return ks_store_list(t, ns, NULL, NULL, NULL, 0, &last, &remaining);
}

/* The quotas of ns, in name order (a new array). */
static json_t *ns_quotas(struct ksim *ks, const char *ns)
{
    struct ks_type *qt = ks_type_find(ks, "", "v1", "resourcequotas");
    return qt ? store_list(qt, ns) : json_array();
}

int ks_quota_admit(struct ksim *ks, struct ks_type *t, const char *ns, json_t *obj, bool dry,
                   struct ks_status *st)
{
    if (!t->namespaced)
        return 0;
    _cleanup_json_ json_t *quotas = ns_quotas(ks, ns);
    if (json_array_size(quotas) == 0)
        return 0;
    bool is_pod = !t->crd && streq(t->plural, "pods");
    _cleanup_free_ char *q2 = ks_type_qualified(t);
    const char *name = ks_obj_name(obj);
    /* each quota's new status.used, applied only once every quota has admitted */
    _cleanup_json_ json_t *charges = json_array();
    size_t i;
    json_t *q;
    json_array_foreach (quotas, i, q) {
        /* what this quota constrains for the object: the tracked names of its status.hard
         * (a quota the controller has not seen yet constrains nothing) */
        json_t *hard = kobj_path(q, "status.hard");
        json_t *used = kobj_path(q, "status.used");
        _cleanup_json_ json_t *interesting = json_object();
        const char *k;
        json_t *v;
        json_object_foreach (hard, k, v)
            if (tracked(t, k))
                json_object_set_new(interesting, k, json_true());
        if (json_object_size(interesting) == 0)
            continue;
        if (is_pod) {
            _cleanup_free_ char *miss = missing_constraints(obj, interesting);
            if (miss)
                return ks_status_set(st, 403, "Forbidden", ks_status_details(t, name),
                                     "%s \"%s\" is forbidden: failed quota: %s: must specify %s",
                                     q2, name, ks_obj_name(q), miss);
        }
        _cleanup_json_ json_t *names = sorted_keys(interesting);
        size_t j;
        json_t *n;
        json_array_foreach (names, j, n)
            if (!json_object_get(used, json_string_value(n))) {
                _cleanup_(sbuf_free) struct sbuf b;
                sbuf_init(&b, 4096);
                json_array_foreach (names, j, n)
                    sbuf_addf(&b, "%s%s", j ? "," : "", json_string_value(n));
                return ks_status_set(st, 403, "Forbidden", ks_status_details(t, name),
                                     "%s \"%s\" is forbidden: status unknown for quota: %s, "
                                     "resources: %s",
                                     q2, name, ks_obj_name(q), b.data ?: "");
            }
        _cleanup_json_ json_t *delta = create_usage(ks, t, obj, hard);
        /* requested: the delta masked to what this quota tracks and limits */
        _cleanup_json_ json_t *requested = json_object();
        json_object_foreach (delta, k, v)
            if (json_object_get(hard, k) && json_object_get(interesting, k))
                json_object_set(requested, k, v);
        if (json_object_size(requested) == 0)
            continue;
        _cleanup_json_ json_t *exceeded = json_object();
        json_t *new_used = json_is_object(used) ? json_deep_copy(used) : json_object();
        json_object_foreach (requested, k, v) {
            int64_t now_used = milli_of(used, k), want = json_integer_value(v);
            int64_t total = want > INT64_MAX - now_used ? INT64_MAX : now_used + want;
            if (total > milli_of(hard, k))
                json_object_set_new(exceeded, k, json_true());
            json_object_set_new(new_used, k, quantity_json(k, total));
        }
        if (json_object_size(exceeded)) {
            json_decref(new_used);
            _cleanup_json_ json_t *xnames = sorted_keys(exceeded);
            _cleanup_(sbuf_free) struct sbuf rq;
            sbuf_init(&rq, 4096);
            _cleanup_(sbuf_free) struct sbuf us;
            sbuf_init(&us, 4096);
            _cleanup_(sbuf_free) struct sbuf hd;
            sbuf_init(&hd, 4096);
            pretty(&rq, xnames, requested);
            pretty(&us, xnames, used);
            pretty(&hd, xnames, hard);
            return ks_status_set(st, 403, "Forbidden", ks_status_details(t, name),
                                 "%s \"%s\" is forbidden: exceeded quota: %s, requested: %s, "
                                 "used: %s, limited: %s",
                                 q2, name, ks_obj_name(q), rq.data ?: "", us.data ?: "",
                                 hd.data ?: "");
        }
        json_array_append_new(charges, json_pack("{s:O,s:o}", "quota", q, "used", new_used));
    }
    if (dry)
        return 0;
    struct ks_type *qt = ks_type_find(ks, "", "v1", "resourcequotas");
    json_array_foreach (charges, i, q) {
        json_t *cur = json_object_get(q, "quota");
        json_t *n = json_deep_copy(cur);
        json_object_set(kobj_ensure_object(n, "status"), "used", json_object_get(q, "used"));
        ks_update(ks, qt, cur, n, "status");
    }
    return 0;
}

/* What the objects of the namespaces in names (ns -> {resource name: true}) use of those names:
 * ns -> {resource: thousandths}, every tracked name present (0 when nothing uses it). One pass
 * over each type's objects, whatever the number of quotas. */
static json_t *usage_by_ns(struct ksim *ks, json_t *names)
{
    json_t *usage = json_object();
    for (struct ks_type *t = ks->types; t; t = t->next) {
        if (!t->served || !t->namespaced)
            continue;
        bool any = false;
        const char *ns, *k;
        json_t *set, *v;
        json_object_foreach (names, ns, set)
            json_object_foreach (set, k, v)
                if (tracked(t, k)) {
                    any = true;
                    json_t *u = json_object_get(usage, ns);
                    if (!u) {
                        u = json_object();
                        json_object_set_new(usage, ns, u);
                    }
                    if (!json_object_get(u, k))
                        json_object_set_new(u, k, json_integer(0));
                }
        if (!any)
            continue;
        json_t *o;
        json_object_foreach (t->objs, k, o) {
            json_t *set_ns = json_object_get(names, ks_obj_ns(o));
            if (!set_ns)
                continue;
            _cleanup_json_ json_t *u = create_usage(ks, t, o, set_ns);
            json_t *sum = json_object_get(usage, ks_obj_ns(o));
            const char *r;
            json_t *x;
            json_object_foreach (u, r, x)
                if (json_object_get(set_ns, r) && tracked(t, r))
                    add_milli(sum, r, json_integer_value(x));
        }
    }
    return usage;
}

/* The status of quota given its namespace's usage: hard from spec, used from the usage for the
 * names some evaluator tracks; the others keep the value they had (none: absent). */
static json_t *status_of(json_t *quota, json_t *ns_usage)
{
    json_t *hard = kobj_path(quota, "spec.hard");
    json_t *old_used = kobj_path(quota, "status.used");
    json_t *used = json_object();
    json_t *st =
        json_pack("{s:O,s:o}", "hard", json_is_object(hard) ? hard : json_object(), "used", used);
    const char *k;
    json_t *v;
    json_object_foreach (hard, k, v) {
        json_t *u = json_object_get(ns_usage, k);
        json_t *o = json_object_get(old_used, k);
        if (u)
            json_object_set_new(used, k, quantity_json(k, json_integer_value(u)));
        else if (o)
            json_object_set(used, k, o);
    }
    return st;
}

static void add_names(json_t *names, json_t *quota)
{
    const char *ns = ks_obj_ns(quota);
    json_t *set = json_object_get(names, ns);
    if (!set) {
        set = json_object();
        json_object_set_new(names, ns, set);
    }
    const char *k;
    json_t *v;
    json_object_foreach (kobj_path(quota, "spec.hard"), k, v)
        json_object_set_new(set, k, json_true());
}

json_t *ks_quota_status(struct ksim *ks, json_t *quota)
{
    _cleanup_json_ json_t *names = json_object();
    add_names(names, quota);
    _cleanup_json_ json_t *usage = usage_by_ns(ks, names);
    return status_of(quota, json_object_get(usage, ks_obj_ns(quota)));
}

void ks_quota_validate(json_t *obj, json_t *causes)
{
    static const char *const std[] = {
        "pods",
        "services",
        "replicationcontrollers",
        "resourcequotas",
        "secrets",
        "configmaps",
        "persistentvolumeclaims",
        "services.nodeports",
        "services.loadbalancers",
        "cpu",
        "memory",
        "requests.cpu",
        "requests.memory",
        "requests.storage",
        "requests.ephemeral-storage",
        "limits.cpu",
        "limits.memory",
        "limits.ephemeral-storage",
        "ephemeral-storage",
    };
    static const char *const lists[] = {"spec.hard", "status.hard", "status.used"};
    for (size_t l = 0; l < ARRAY_SIZE(lists); l++) {
        const char *k;
        json_t *v;
        json_object_foreach (kobj_path(obj, lists[l]), k, v) {
            bool ok = strchr(k, '/') != NULL || has_prefix(k, "hugepages-") ||
                      has_prefix(k, REQ_PREFIX "hugepages-");
            for (size_t i = 0; !ok && i < ARRAY_SIZE(std); i++)
                ok = streq(k, std[i]);
            if (!ok) {
                _cleanup_free_ char *f = xasprintf("%s[%s]", lists[l], k);
                ks_add_cause(causes, "FieldValueInvalid", f,
                             "Invalid value: \"%s\": must be a standard resource for quota", k);
            }
            int64_t m;
            if (ks_quantity_milli(v, &m) < 0) {
                bool neg = false;
                if (json_is_string(v) && kobj_valid_quantity(json_string_value(v), &neg) && neg) {
                    _cleanup_free_ char *f = xasprintf("%s[%s]", lists[l], k);
                    ks_add_cause(causes, "FieldValueInvalid", f,
                                 "Invalid value: \"%s\": must be greater than or equal to 0",
                                 json_string_value(v));
                }
            }
        }
    }
}

bool ks_ctl_quotas(struct ksim *ks)
{
    struct ks_type *qt = ctl_core(ks, "resourcequotas");
    if (!qt || json_object_size(qt->objs) == 0)
        return false;
    _cleanup_json_ json_t *all = ctl_values(qt->objs);
    _cleanup_json_ json_t *names = json_object();
    size_t i;
    json_t *q;
    json_array_foreach (all, i, q)
        if (!ks_is_deleting(q))
            add_names(names, q);
    _cleanup_json_ json_t *usage = usage_by_ns(ks, names);
    bool changed = false;
    json_array_foreach (all, i, q) {
        if (ks_is_deleting(q))
            continue;
        changed |= ctl_set_status(ks, qt, q, status_of(q, json_object_get(usage, ks_obj_ns(q))));
    }
    return changed;
}
