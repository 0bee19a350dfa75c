/* SPDX-License-Identifier: Apache-2.0 */
/* Dynamic Resource Allocation's control loops: the resourceclaim controller (a claim per pod from
 * each ResourceClaimTemplate; reservations of pods that are gone or done released; claims no pod
 * uses deallocated; claims made for pods that are done deleted) and the scheduler's
 * DynamicResources plugin (PreEnqueue, PreFilter, Filter with the allocator of ks-dra.h, and
 * PreBind: the allocation, the reservation and the special claim of extended resources a
 * DeviceClass maps). The decisions are the allocator's (ctl-dra-alloc.c); this reads the store and
 * writes the results. */
#include <assert.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "ks-controllers.h"
#include "ks-dra.h"

#define FINALIZER          "resource.kubernetes.io/delete-protection"
#define POD_CLAIM_ANNOT    "resource.kubernetes.io/pod-claim-name"
#define EXTENDED_ANNOT     "resource.kubernetes.io/extended-resource-claim"
#define IMPLICIT_PREFIX    "deviceclass.resource.kubernetes.io/"
#define RESERVED_FOR_MAX   256
#define GENERATED_BASE_MAX 57 /* 63 less a hyphen and 5 random characters */

static struct ks_type *dra(struct ksim *ks, const char *plural)
{
    struct ks_type *t = ks_type_find(ks, "resource.k8s.io", "v1", plural);
    assert(t);
    return t;
}

/* The kubelet's and the controller's view of a pod that will not run (again). */
static bool pod_done(json_t *pod)
{
    const char *ph = kobj_path_str(pod, "status.phase");
    return streq_ptr(ph, "Succeeded") || streq_ptr(ph, "Failed") ||
           (ks_is_deleting(pod) && !kobj_path_str(pod, "spec.nodeName"));
}

static json_t *owning_pod_ref(json_t *claim)
{
    size_t i;
    json_t *r;
    json_array_foreach (kobj_path(claim, "metadata.ownerReferences"), i, r)
        if (json_is_true(json_object_get(r, "controller")) && streq_ptr(kobj_kind(r), "Pod") &&
            streq_ptr(kobj_api_version(r), "v1"))
            return r;
    return NULL;
}

static bool reserved_for(json_t *claim, const char *uid)
{
    size_t i;
    json_t *r;
    json_array_foreach (kobj_path(claim, "status.reservedFor"), i, r)
        if (streq_ptr(kobj_str(r, "uid"), uid))
            return true;
    return false;
}

/* An Event about a pod once per (pod, message), as the recorder's aggregation would show it. */
static void pod_event_once(struct ksim *ks, json_t *pod, const char *reason, const char *msg)
{
    _cleanup_free_ char *key = xasprintf("%s/%s/%s", kobj_uid(pod) ?: "", reason, msg);
    if (json_object_get(ks->dra_events, key))
        return;
    json_object_set_new(ks->dra_events, key, json_true());
    ctl_event(ks, pod, "Pod", "Warning", reason, msg);
}

/* ==== the resourceclaim controller ============================================================ */

/* The claim of a pod's template entry, when the controller made it already. */
static json_t *find_generated(struct ks_type *ct, json_t *pod, const char *pod_claim)
{
    const char *k;
    json_t *c;
    json_object_foreach (ct->objs, k, c) {
        if (!streq(ks_obj_ns(c), ks_obj_ns(pod)) || !ctl_controlled_by(c, kobj_uid(pod)))
            continue;
        if (streq_ptr(kobj_annotation(c, POD_CLAIM_ANNOT), pod_claim))
            return c;
    }
    return NULL;
}

static char *generate_name(const char *pod, const char *claim)
{
    size_t lp = strlen(pod), lc = strlen(claim), total = lp + lc + 2;
    if (total <= GENERATED_BASE_MAX)
        return xasprintf("%s-%s-", pod, claim);
    /* both names cut in proportion to their lengths, as the controller does */
    return xasprintf("%.*s-%.*s", (int)(lp * GENERATED_BASE_MAX / total), pod,
                     (int)(lc * GENERATED_BASE_MAX / total), claim);
}

/* Creates the claims of a pod's template entries and records them in its status. */
static bool sync_pod(struct ksim *ks, json_t *pod)
{
    struct ks_type *ct = dra(ks, "resourceclaims"), *tt = dra(ks, "resourceclaimtemplates");
    struct ks_type *pt = ctl_core(ks, "pods");
    json_t *statuses = json_deep_copy(kobj_path(pod, "status.resourceClaimStatuses"));
    if (!json_is_array(statuses)) {
        json_decref(statuses);
        statuses = json_array();
    }
    bool add = false;
    size_t i;
    json_t *pc;
    json_array_foreach (kobj_path(pod, "spec.resourceClaims"), i, pc) {
        const char *name = kobj_str(pc, "name"), *tmpl = kobj_str(pc, "resourceClaimTemplateName");
        if (!name || !tmpl)
            continue;
        bool known = false;
        size_t k;
        json_t *st;
        json_array_foreach (statuses, k, st)
            known |= streq_ptr(kobj_str(st, "name"), name);
        if (known)
            continue;
        json_t *claim = find_generated(ct, pod, name);
        if (!claim) {
            json_t *t = ks_get(tt, ks_obj_ns(pod), tmpl);
            if (!t) {
                _cleanup_free_ char *msg =
                    xasprintf("PodResourceClaim %s: resource claim template \"%s\": "
                              "resourceclaimtemplate.resource.k8s.io \"%s\" not found",
                              name, tmpl, tmpl);
                pod_event_once(ks, pod, "FailedResourceClaimCreation", msg);
                continue;
            }
            json_t *annots = json_deep_copy(kobj_path(t, "spec.metadata.annotations"));
            if (!json_is_object(annots)) {
                json_decref(annots);
                annots = json_object();
            }
            json_object_set_new(annots, POD_CLAIM_ANNOT, json_string(name));
            _cleanup_free_ char *gen = generate_name(ks_obj_name(pod), name);
            json_t *meta = json_pack("{s:s,s:s,s:o,s:[o]}", "generateName", gen, "namespace",
                                     ks_obj_ns(pod), "annotations", annots, "ownerReferences",
                                     ctl_owner_ref(pod, "v1", "Pod"));
            json_t *labels = kobj_path(t, "spec.metadata.labels");
            if (json_is_object(labels))
                json_object_set(meta, "labels", labels);
            json_t *obj = json_pack("{s:s,s:s,s:o,s:O}", "apiVersion", "resource.k8s.io/v1", "kind",
                                    "ResourceClaim", "metadata", meta, "spec",
                                    kobj_path(t, "spec.spec") ?: json_object());
            _cleanup_status_ struct ks_status cst = {0};
            json_t *created = NULL;
            if (ks_obj_create(ks, ct, ks_obj_ns(pod), obj, false, &created, &cst) < 0) {
                _cleanup_free_ char *msg = xasprintf("PodResourceClaim %s: %s", name,
                                                     cst.message ? cst.message : "create failed");
                pod_event_once(ks, pod, "FailedResourceClaimCreation", msg);
                continue;
            }
            claim = created;
            json_decref(created); /* the store holds it */
        }
        json_array_append_new(statuses, json_pack("{s:s,s:s}", "name", name, "resourceClaimName",
                                                  ks_obj_name(claim)));
        add = true;
    }
    if (!add) {
        json_decref(statuses);
        return false;
    }
    json_t *cur = ks_get(pt, ks_obj_ns(pod), ks_obj_name(pod));
    if (!cur) {
        json_decref(statuses);
        return true;
    }
    json_t *n = json_deep_copy(cur);
    json_object_set_new(kobj_ensure_object(n, "status"), "resourceClaimStatuses", statuses);
    ks_update(ks, pt, cur, n, "status");
    return true;
}

static json_t *pod_ref(json_t *pod)
{
    return json_pack("{s:s,s:s,s:s}", "resource", "pods", "name", ks_obj_name(pod), "uid",
                     kobj_uid(pod) ?: "");
}

/* A pod bound without the scheduler (spec.nodeName written by its creator): its allocated
 * claims are reserved for it here, as the controller does; unallocated ones stay so. */
static bool reserve_bound(struct ksim *ks, json_t *pod)
{
    if (!kobj_path_str(pod, "spec.nodeName"))
        return false;
    struct ks_type *ct = dra(ks, "resourceclaims");
    bool changed = false;
    size_t i;
    json_t *pc;
    json_array_foreach (kobj_path(pod, "spec.resourceClaims"), i, pc) {
        const char *name = kobj_str(pc, "resourceClaimName");
        size_t k;
        json_t *st;
        json_array_foreach (kobj_path(pod, "status.resourceClaimStatuses"), k, st)
            if (!name && streq_ptr(kobj_str(st, "name"), kobj_str(pc, "name")))
                name = kobj_str(st, "resourceClaimName");
        json_t *claim = name ? ks_get(ct, ks_obj_ns(pod), name) : NULL;
        if (!claim || !json_is_object(kobj_path(claim, "status.allocation")) ||
            reserved_for(claim, kobj_uid(pod)) ||
            json_array_size(kobj_path(claim, "status.reservedFor")) >= RESERVED_FOR_MAX)
            continue;
        json_t *n = json_deep_copy(claim);
        json_t *stat = kobj_ensure_object(n, "status");
        json_t *rf = json_object_get(stat, "reservedFor");
        if (!json_is_array(rf)) {
            rf = json_array();
            json_object_set_new(stat, "reservedFor", rf);
        }
        json_array_append_new(rf, pod_ref(pod));
        ks_update(ks, ct, claim, n, "status");
        changed = true;
    }
    return changed;
}

static void remove_finalizer(struct ksim *ks, struct ks_type *ct, json_t *claim)
{
    json_t *cur = ks_get(ct, ks_obj_ns(claim), ks_obj_name(claim));
    if (!cur || !kobj_has_finalizer(cur, FINALIZER))
        return;
    json_t *n = json_deep_copy(cur);
    json_t *fin = kobj_path(n, "metadata.finalizers");
    for (size_t i = json_array_size(fin); i-- > 0;)
        if (streq_ptr(json_string_value(json_array_get(fin, i)), FINALIZER))
            json_array_remove(fin, i);
    if (json_array_size(fin) == 0) /* an empty list is no list, as the API server writes it */
        json_object_del(kobj_ensure_object(n, "metadata"), "finalizers");
    ks_update(ks, ct, cur, n, NULL);
}

static void set_claim_status(struct ksim *ks, struct ks_type *ct, json_t *claim, json_t *reserved,
                             bool deallocate)
{
    json_t *cur = ks_get(ct, ks_obj_ns(claim), ks_obj_name(claim));
    if (!cur)
        return;
    json_t *n = json_deep_copy(cur);
    json_t *st = kobj_ensure_object(n, "status");
    if (json_array_size(reserved))
        json_object_set(st, "reservedFor", reserved);
    else
        json_object_del(st, "reservedFor");
    if (deallocate) {
        json_object_del(st, "allocation");
        json_object_del(st, "devices");
    }
    ks_update(ks, ct, cur, n, "status");
}

/* Releases the reservations of pods that are gone or done; deallocates a claim its last user
 * left; deletes a claim made for a pod that will not run again. */
static bool sync_claim(struct ksim *ks, json_t *claim)
{
    struct ks_type *ct = dra(ks, "resourceclaims");
    struct ks_type *pt = ctl_core(ks, "pods");
    const char *ns = ks_obj_ns(claim);
    json_t *rf = kobj_path(claim, "status.reservedFor");
    json_t *valid = json_array();
    size_t i;
    json_t *r;
    json_array_foreach (rf, i, r) {
        if (!streq_ptr(kobj_str(r, "resource"), "pods") || kobj_str(r, "apiGroup")) {
            json_array_append(valid, r); /* not a pod: not this controller's to judge */
            continue;
        }
        json_t *pod = ks_get(pt, ns, kobj_str(r, "name") ?: "");
        if (pod && streq_ptr(kobj_uid(pod), kobj_str(r, "uid")) && !pod_done(pod))
            json_array_append(valid, r);
    }
    bool changed = false;
    bool has_fin = kobj_has_finalizer(claim, FINALIZER);
    bool allocated = json_is_object(kobj_path(claim, "status.allocation"));
    if (json_array_size(valid) < json_array_size(rf)) {
        /* the last user gone: the devices are free for other claims */
        set_claim_status(ks, ct, claim, valid, json_array_size(valid) == 0 && has_fin);
        json_t *now = ks_get(ct, ns, ks_obj_name(claim));
        if (now && !json_is_object(kobj_path(now, "status.allocation")))
            remove_finalizer(ks, ct, now);
        changed = true;
    } else if (has_fin && ks_is_deleting(claim) && json_array_size(valid) == 0) {
        if (allocated)
            set_claim_status(ks, ct, claim, valid, true);
        json_t *now = ks_get(ct, ns, ks_obj_name(claim));
        if (now)
            remove_finalizer(ks, ct, now);
        changed = true;
    }
    if (json_array_size(valid) == 0) {
        json_t *owner = owning_pod_ref(claim);
        json_t *cur = ks_get(ct, ns, ks_obj_name(claim));
        json_t *pod = owner ? ks_get(pt, ns, kobj_str(owner, "name") ?: "") : NULL;
        if (cur && pod && !ks_is_deleting(cur) &&
            (!streq_ptr(kobj_uid(pod), kobj_str(owner, "uid")) || pod_done(pod))) {
            ks_delete_obj(ks, ct, cur, NULL);
            changed = true;
        }
    }
    json_decref(valid);
    return changed;
}

bool ks_ctl_resourceclaims(struct ksim *ks)
{
    bool changed = false;
    json_t *pods = ctl_values(ctl_core(ks, "pods")->objs);
    size_t i;
    json_t *p;
    json_array_foreach (pods, i, p) {
        if (!json_array_size(kobj_path(p, "spec.resourceClaims")) || pod_done(p) ||
            ks_is_deleting(p))
            continue;
        changed |= sync_pod(ks, p);
        json_t *now = ks_get(ctl_core(ks, "pods"), ks_obj_ns(p), ks_obj_name(p));
        if (now)
            changed |= reserve_bound(ks, now);
    }
    json_decref(pods);
    json_t *claims = ctl_values(dra(ks, "resourceclaims")->objs);
    json_t *c;
    json_array_foreach (claims, i, c)
        changed |= sync_claim(ks, c);
    json_decref(claims);
    return changed;
}

/* ==== the scheduler's DynamicResources plugin ================================================= */

struct ks_dra_sched {
    struct ksim *ks;
    json_t *classes;   /* name -> DeviceClass */
    json_t *slices;    /* array */
    json_t *allocated; /* "driver/pool/device" -> true */
    json_t *ext;       /* extended resource name -> DeviceClass name */
    struct ks_dra_cel_cache *cel;
};

struct ks_dra_pod {
    json_t *pod;
    json_t *claims;   /* the pod's claims, in spec order */
    json_t *to_alloc; /* indices into claims of those to allocate */
    json_t *ext;      /* extended resources DRA may serve: name -> class */
    json_t *per_node; /* node -> {results, ext_requests, ext_mappings} */
    bool has_claims;  /* spec.resourceClaims non-empty */
};

static void add_allocated(json_t *set, json_t *claim)
{
    size_t i;
    json_t *r;
    json_array_foreach (kobj_path(claim, "status.allocation.devices.results"), i, r) {
        if (json_is_true(json_object_get(r, "adminAccess")))
            continue;
        char *id = ks_dra_device_id(r);
        json_object_set_new(set, id, json_true());
        free(id);
    }
}

struct ks_dra_sched *ks_dra_sched_new(struct ksim *ks)
{
    struct ks_dra_sched *s = xcalloc(1, sizeof(*s));
    s->ks = ks;
    s->classes = json_object();
    s->slices = json_array();
    s->allocated = json_object();
    s->ext = json_object();
    s->cel = ks_dra_cel_cache_new();
    const char *k;
    json_t *o;
    json_t *stamp = json_object(); /* extended resource -> creationTimestamp of its class */
    json_object_foreach (dra(ks, "deviceclasses")->objs, k, o) {
        json_object_set(s->classes, ks_obj_name(o), o);
        /* every class is reachable as deviceclass.resource.kubernetes.io/<name>; one naming an
         * extendedResourceName serves that too (the newest class wins a name two classes use) */
        _cleanup_free_ char *implicit = xasprintf(IMPLICIT_PREFIX "%s", ks_obj_name(o));
        json_object_set_new(s->ext, implicit, json_string(ks_obj_name(o)));
        const char *ern = kobj_path_str(o, "spec.extendedResourceName");
        if (!ern)
            continue;
        const char *ts = kobj_creation_timestamp(o) ?: "";
        const char *have = json_string_value(json_object_get(stamp, ern));
        const char *have_class = json_string_value(json_object_get(s->ext, ern));
        if (have &&
            (strcmp(have, ts) > 0 || (!strcmp(have, ts) && strcmp(have_class, ks_obj_name(o)) < 0)))
            continue;
        json_object_set_new(stamp, ern, json_string(ts));
        json_object_set_new(s->ext, ern, json_string(ks_obj_name(o)));
    }
    json_decref(stamp);
    json_object_foreach (dra(ks, "resourceslices")->objs, k, o)
        json_array_append(s->slices, o);
    json_object_foreach (dra(ks, "resourceclaims")->objs, k, o)
        add_allocated(s->allocated, o);
    return s;
}

void ks_dra_sched_free(struct ks_dra_sched *s)
{
    if (!s)
        return;
    json_decref(s->classes);
    json_decref(s->slices);
    json_decref(s->allocated);
    json_decref(s->ext);
    ks_dra_cel_cache_free(s->cel);
    free(s);
}

void ks_dra_pod_free(struct ks_dra_pod *p)
{
    if (!p)
        return;
    json_decref(p->pod);
    json_decref(p->claims);
    json_decref(p->to_alloc);
    json_decref(p->ext);
    json_decref(p->per_node);
    free(p);
}

/* The extended resources of the pod's containers (requests, limits standing in) that a
 * DeviceClass maps: name -> class. */
static json_t *pod_extended(struct ks_dra_sched *s, json_t *pod)
{
    json_t *out = json_object();
    static const char *const lists[] = {"initContainers", "containers"};
    for (size_t l = 0; l < ARRAY_SIZE(lists); l++) {
        size_t i;
        json_t *c;
        json_array_foreach (json_object_get(json_object_get(pod, "spec"), lists[l]), i, c) {
            for (int pass = 0; pass < 2; pass++) {
                const char *k;
                json_t *v;
                json_object_foreach (kobj_path(c, pass ? "resources.limits" : "resources.requests"),
                                     k, v) {
                    json_t *cls = json_object_get(s->ext, k);
                    if (cls)
                        json_object_set(out, k, cls);
                }
            }
        }
    }
    return out;
}

int ks_dra_prefilter(struct ks_dra_sched *s, json_t *pod, struct ks_dra_pod **ret, char **ret_msg)
{
    struct ks_type *ct = dra(s->ks, "resourceclaims");
    struct ks_dra_pod *p = xcalloc(1, sizeof(*p));
    p->pod = json_incref(pod);
    p->claims = json_array();
    p->to_alloc = json_array();
    p->per_node = json_object();
    p->ext = pod_extended(s, pod);
    json_t *pcs = kobj_path(pod, "spec.resourceClaims");
    p->has_claims = json_array_size(pcs) > 0;
    const char *ns = ks_obj_ns(pod);
    size_t i;
    json_t *pc;
    json_array_foreach (pcs, i, pc) {
        const char *cname = kobj_str(pc, "resourceClaimName");
        bool must_own = false;
        if (!cname && kobj_str(pc, "resourceClaimTemplateName")) {
            bool found = false;
            size_t k;
            json_t *st;
            json_array_foreach (kobj_path(pod, "status.resourceClaimStatuses"), k, st)
                if (streq_ptr(kobj_str(st, "name"), kobj_str(pc, "name"))) {
                    found = true;
                    cname = kobj_str(st, "resourceClaimName");
                }
            if (!found) {
                ks_dra_pod_free(p);
                return KS_DRA_WAIT; /* "ResourceClaim not created yet" */
            }
            if (!cname)
                continue; /* no claim needed */
            must_own = true;
        }
        json_t *claim = cname ? ks_get(ct, ns, cname) : NULL;
        if (!claim || ks_is_deleting(claim) ||
            (must_own && !ctl_controlled_by(claim, kobj_uid(pod)))) {
            ks_dra_pod_free(p);
            return KS_DRA_WAIT;
        }
        json_array_append(p->claims, claim);
    }
    json_array_foreach (p->claims, i, pc) {
        if (json_is_object(kobj_path(pc, "status.allocation"))) {
            if (json_array_size(kobj_path(pc, "status.reservedFor")) >= RESERVED_FOR_MAX &&
                !reserved_for(pc, kobj_uid(pod))) {
                *ret_msg = xstrdup("resourceclaim in use");
                ks_dra_pod_free(p);
                return KS_DRA_UNSCHEDULABLE;
            }
            continue;
        }
        json_array_append_new(p->to_alloc, json_integer((json_int_t)i));
        size_t k;
        json_t *r;
        json_array_foreach (kobj_path(pc, "spec.devices.requests"), k, r) {
            json_t *fa = json_object_get(r, "firstAvailable");
            size_t n = json_array_size(fa) ? json_array_size(fa) : 1;
            for (size_t j = 0; j < n; j++) {
                json_t *rq =
                    json_array_size(fa) ? json_array_get(fa, j) : json_object_get(r, "exactly");
                const char *cls = kobj_str(rq, "deviceClassName");
                if (cls && json_object_get(s->classes, cls))
                    continue;
                _cleanup_free_ char *rn =
                    json_array_size(fa)
                        ? xasprintf("%s/%s", kobj_str(r, "name") ?: "", kobj_str(rq, "name") ?: "")
                        : xstrdup(kobj_str(r, "name") ?: "");
                *ret_msg =
                    xasprintf("request %s: device class %s does not exist", rn, cls ? cls : "");
                ks_dra_pod_free(p);
                return KS_DRA_UNSCHEDULABLE;
            }
        }
    }
    *ret = p;
    return KS_DRA_OK;
}

bool ks_dra_pod_has_claims(const struct ks_dra_pod *p)
{
    return p->has_claims;
}

/* Whether NodeResourcesFit leaves an extended resource to DRA on this node: a DeviceClass maps
 * it and the node does not advertise it (a device plugin would). A node whose device plugin
 * stopped keeps the resource at 0 (the kubelet does not drop it): that advertises none. */
bool ks_dra_extended_delegated(const struct ks_dra_pod *p, json_t *node, const char *resource)
{
    if (!json_object_get(p->ext, resource))
        return false;
    json_t *q = json_object_get(kobj_path(node, "status.allocatable"), resource);
    return !q || streq_ptr(json_string_value(q), "0");
}

/* The special claim's requests on this node: one per container and extended resource the node
 * leaves to DRA, "container-<i>-request-<j>" (i over init containers then containers, j the
 * resource's place among the container's sorted requests). */
static void extended_requests(const struct ks_dra_pod *p, json_t *node, json_t **ret_requests,
                              json_t **ret_mappings)
{
    json_t *reqs = json_array(), *maps = json_array();
    json_t *spec = json_object_get(p->pod, "spec");
    size_t idx = 0;
    static const char *const lists[] = {"initContainers", "containers"};
    for (size_t l = 0; l < ARRAY_SIZE(lists); l++) {
        size_t i;
        json_t *c;
        json_array_foreach (json_object_get(spec, lists[l]), i, c) {
            /* the container's requests as the API server defaults them (limits stand in) */
            json_t *all = json_object();
            for (int pass = 1; pass >= 0; pass--) {
                const char *k;
                json_t *v;
                json_object_foreach (kobj_path(c, pass ? "resources.limits" : "resources.requests"),
                                     k, v)
                    json_object_set(all, k, v);
            }
            size_t n = json_object_size(all), j = 0;
            const char **keys = xcalloc(n ? n : 1, sizeof(*keys));
            const char *k;
            json_t *v;
            json_object_foreach (all, k, v)
                keys[j++] = k;
            for (size_t a = 0; a < n; a++)
                for (size_t b = a + 1; b < n; b++)
                    if (strcmp(keys[a], keys[b]) > 0) {
                        const char *t = keys[a];
                        keys[a] = keys[b];
                        keys[b] = t;
                    }
            for (size_t r = 0; r < n; r++) {
                if (!ks_dra_extended_delegated(p, node, keys[r]))
                    continue;
                int64_t milli = 0;
                if (ks_quantity_milli(json_object_get(all, keys[r]), &milli) < 0 || milli <= 0)
                    continue;
                _cleanup_free_ char *rn = xasprintf("container-%zu-request-%zu", idx, r);
                json_array_append_new(
                    reqs,
                    json_pack("{s:s,s:{s:s,s:s,s:I}}", "name", rn, "exactly", "deviceClassName",
                              json_string_value(json_object_get(p->ext, keys[r])), "allocationMode",
                              "ExactCount", "count", (json_int_t)((milli + 999) / 1000)));
                json_array_append_new(maps, json_pack("{s:s,s:s,s:s}", "containerName",
                                                      kobj_str(c, "name") ?: "", "resourceName",
                                                      keys[r], "requestName", rn));
            }
            free(keys);
            json_decref(all);
            idx++;
        }
    }
    *ret_requests = reqs;
    *ret_mappings = maps;
}

int ks_dra_filter(struct ks_dra_sched *s, struct ks_dra_pod *p, json_t *node,
                  const char **ret_reason, char **ret_err)
{
    *ret_reason = NULL;
    if (json_array_size(p->claims) == 0 && json_object_size(p->ext) == 0)
        return 0;
    bool unavailable = false;
    size_t i;
    json_t *c;
    json_array_foreach (p->claims, i, c) {
        json_t *sel = kobj_path(c, "status.allocation.nodeSelector");
        if (!json_is_object(sel))
            continue;
        bool any = false;
        size_t k;
        json_t *term;
        json_array_foreach (json_object_get(sel, "nodeSelectorTerms"), k, term)
            any |= ctl_node_term_matches(term, node);
        if (!any)
            unavailable = true;
    }
    json_t *ext_reqs = NULL, *ext_maps = NULL;
    extended_requests(p, node, &ext_reqs, &ext_maps);
    json_t *claims = json_array();
    json_array_foreach (p->to_alloc, i, c)
        json_array_append(claims, json_array_get(p->claims, (size_t)json_integer_value(c)));
    json_t *ext_claim = NULL;
    if (json_array_size(ext_reqs)) {
        ext_claim =
            json_pack("{s:{s:s,s:s},s:{s:{s:O}}}", "metadata", "name", "<extended-resources>",
                      "namespace", ks_obj_ns(p->pod), "spec", "devices", "requests", ext_reqs);
        json_array_append(claims, ext_claim);
    }
    if (json_array_size(claims)) {
        struct ks_dra_input in = {.claims = claims,
                                  .classes = s->classes,
                                  .slices = s->slices,
                                  .allocated = s->allocated,
                                  .node = node,
                                  .cel = s->cel};
        json_t *results = NULL;
        int r = ks_dra_allocate(&in, &results, ret_err);
        if (r < 0) {
            json_decref(claims);
            json_decref(ext_claim);
            json_decref(ext_reqs);
            json_decref(ext_maps);
            return r;
        }
        if (!results) {
            *ret_reason = "cannot allocate all claims";
        } else {
            json_object_set_new(p->per_node, ks_obj_name(node),
                                json_pack("{s:o,s:O,s:O}", "results", results, "extRequests",
                                          ext_reqs, "extMappings", ext_maps));
        }
    }
    json_decref(claims);
    json_decref(ext_claim);
    json_decref(ext_reqs);
    json_decref(ext_maps);
    if (!*ret_reason && unavailable)
        *ret_reason = "resourceclaim not available on the node";
    return 0;
}

/* PreBind of one claim: the finalizer, then the allocation (if new) and the pod's reservation. */
static void bind_claim(struct ks_dra_sched *s, json_t *claim, json_t *allocation, json_t *pod)
{
    struct ksim *ks = s->ks;
    struct ks_type *ct = dra(ks, "resourceclaims");
    const char *ns = ks_obj_ns(claim), *name = ks_obj_name(claim);
    json_t *cur = ks_get(ct, ns, name);
    if (!cur)
        return;
    if (allocation && !kobj_has_finalizer(cur, FINALIZER)) {
        json_t *n = json_deep_copy(cur);
        json_t *meta = kobj_ensure_object(n, "metadata");
        json_t *fin = json_object_get(meta, "finalizers");
        if (!json_is_array(fin)) {
            fin = json_array();
            json_object_set_new(meta, "finalizers", fin);
        }
        json_array_append_new(fin, json_string(FINALIZER));
        ks_update(ks, ct, cur, n, NULL);
        cur = ks_get(ct, ns, name);
        if (!cur)
            return;
    }
    if (!allocation && reserved_for(cur, kobj_uid(pod)))
        return;
    json_t *n = json_deep_copy(cur);
    json_t *st = kobj_ensure_object(n, "status");
    if (allocation) {
        json_object_set(st, "allocation", allocation);
        add_allocated(s->allocated, n);
    }
    json_t *rf = json_object_get(st, "reservedFor");
    if (!json_is_array(rf)) {
        rf = json_array();
        json_object_set_new(st, "reservedFor", rf);
    }
    if (!reserved_for(n, kobj_uid(pod)))
        json_array_append_new(rf, pod_ref(pod));
    ks_update(ks, ct, cur, n, "status");
}

void ks_dra_bind(struct ks_dra_sched *s, struct ks_dra_pod *p, json_t *node, json_t *bound)
{
    struct ksim *ks = s->ks;
    json_t *pn = json_object_get(p->per_node, ks_obj_name(node));
    json_t *results = json_object_get(pn, "results");
    size_t next = 0, i;
    json_t *c;
    json_array_foreach (p->claims, i, c) {
        json_t *alloc = NULL;
        size_t k;
        json_t *ix;
        json_array_foreach (p->to_alloc, k, ix)
            if ((size_t)json_integer_value(ix) == i)
                alloc = json_array_get(results, next++);
        bind_claim(s, c, alloc, p->pod);
    }
    json_t *ext_reqs = json_object_get(pn, "extRequests");
    if (!json_array_size(ext_reqs))
        return;
    /* the special claim of the extended resources, created now, allocated and reserved */
    struct ks_type *ct = dra(ks, "resourceclaims");
    _cleanup_free_ char *gen = xasprintf("%s-extended-resources-", ks_obj_name(p->pod));
    json_t *obj =
        json_pack("{s:s,s:s,s:{s:s,s:s,s:{s:s},s:[o],s:[s]},s:{s:{s:O}}}", "apiVersion",
                  "resource.k8s.io/v1", "kind", "ResourceClaim", "metadata", "generateName", gen,
                  "namespace", ks_obj_ns(p->pod), "annotations", EXTENDED_ANNOT, "true",
                  "ownerReferences", ctl_owner_ref(p->pod, "v1", "Pod"), "finalizers", FINALIZER,
                  "spec", "devices", "requests", ext_reqs);
    _cleanup_status_ struct ks_status st = {0};
    json_t *created = NULL;
    if (ks_obj_create(ks, ct, ks_obj_ns(p->pod), obj, false, &created, &st) < 0)
        return;
    bind_claim(s, created, json_array_get(results, next), p->pod);
    json_object_set_new(kobj_ensure_object(bound, "status"), "extendedResourceClaimStatus",
                        json_pack("{s:O,s:s}", "requestMappings",
                                  json_object_get(pn, "extMappings"), "resourceClaimName",
                                  ks_obj_name(created)));
    json_decref(created);
}
