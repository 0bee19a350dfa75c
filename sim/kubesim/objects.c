/* SPDX-License-Identifier: Apache-2.0 */
/* The object lifecycle: create, update, replace, delete (with finalizers, propagation and
 * graceful pod deletion), bind, scale. Callers (the HTTP layer, controllers, --load) get a
 * struct ks_status; nothing here knows about requests or responses. */
#include <inttypes.h>
#include <string.h>

#include "ks-objects.h"

static bool ns_exists(struct ksim *ks, const char *ns, bool *terminating)
{
    struct ks_type *nst = ks_type_find(ks, "", "v1", "namespaces");
    json_t *o = ks_get(nst, "", ns);
    if (terminating)
        *terminating = o && kobj_path(o, "metadata.deletionTimestamp");
    return o != NULL;
}

/* Strips what a client may not set and fills what the server owns; 422 with the causes. */
static int prepare_create(struct ksim *ks, struct ks_type *t, const char *ns, json_t *obj,
                          struct ks_status *st)
{
    json_t *meta = kobj_ensure_object(obj, "metadata");
    const char *name = kobj_name(obj);
    const char *gen = kobj_meta_str(obj, "generateName");
    json_t *causes = json_array();
    if ((!name || !name[0]) && gen && gen[0]) {
        char sfx[8];
        ks_random_suffix(ks, sfx);
        _cleanup_free_ char *n = xasprintf("%s%s", gen, sfx);
        json_object_set_new(meta, "name", json_string(n));
        name = kobj_name(obj);
    }
    if (!name || !name[0]) {
        ks_add_cause(causes, "FieldValueRequired", "metadata.name",
                     "Required value: name or generateName is required");
        return ks_invalid(st, t, "", causes);
    }
    if (t->namespaced)
        json_object_set_new(meta, "namespace", json_string(ns));
    else
        json_object_del(meta, "namespace");
    ks_validate_name(t, name, causes);
    ks_validate_labels(obj, causes);
    ks_dra_defaults(t, obj);
    ks_validate_type(ks, t, obj, causes);
    if (t->crd && t->schema) {
        /* decoding defaults and prunes; create cannot set a status subresource */
        ks_crd_schema_admit(t->schema, obj);
        if (t->has_status)
            json_object_del(obj, "status");
        ks_crd_schema_validate(t->schema, obj, NULL, causes);
    }
    if (json_array_size(causes))
        return ks_invalid(st, t, name, causes);
    json_decref(causes);
    char now[40];
    ks_now_str(ks, now, sizeof(now));
    _cleanup_free_ char *uid = ks_new_uid(ks);
    json_object_set_new(meta, "uid", json_string(uid));
    json_object_set_new(meta, "creationTimestamp", json_string(now));
    json_object_del(meta, "deletionTimestamp");
    json_object_del(meta, "deletionGracePeriodSeconds");
    json_object_del(meta, "resourceVersion");
    json_object_del(meta, "selfLink");
    if (t->has_generation)
        json_object_set_new(meta, "generation", json_integer(1));
    else
        json_object_del(meta, "generation");
    ks_defaults_on_create(ks, t, obj);
    return 0;
}

int ks_obj_create(struct ksim *ks, struct ks_type *t, const char *ns, json_t *obj, bool dry,
                  json_t **ret_obj, struct ks_status *st)
{
    _cleanup_json_ json_t *own = obj;
    _cleanup_free_ char *gv = ks_type_gv(t);
    const char *kind = json_string_value(json_object_get(obj, "kind"));
    const char *av = json_string_value(json_object_get(obj, "apiVersion"));
    if (!kind || !kind[0]) {
        _cleanup_free_ char *dump = json_dumps(obj, JSON_COMPACT);
        return ks_status_set(st, 400, "BadRequest", NULL, "Object 'Kind' is missing in '%.200s'",
                             dump ? dump : "");
    }
    if (!streq(kind, t->kind))
        return ks_status_set(st, 400, "BadRequest", NULL,
                             "the kind in the data (%s) does not match the expected kind (%s)",
                             kind, t->kind);
    if (av && !streq(av, gv))
        return ks_status_set(
            st, 400, "BadRequest", NULL,
            "the API version in the data (%s) does not match the expected API version (%s)", av,
            gv);
    int r = ks_decode_check(t, obj, st);
    if (r < 0)
        return r;
    json_object_set_new(obj, "apiVersion", json_string(gv));
    const char *body_ns = kobj_namespace(obj);
    if (t->namespaced && body_ns && body_ns[0] && !streq(body_ns, ns))
        return ks_bad_request(st, "the namespace of the provided object does not match the "
                                  "namespace sent on the request");
    if (t->namespaced) {
        bool term = false;
        if (!ns_exists(ks, ns, &term))
            return ks_not_found(st, ks_type_find(ks, "", "v1", "namespaces"), ns);
        if (term) {
            _cleanup_free_ char *q2 = ks_type_qualified(t);
            return ks_status_set(st, 403, "Forbidden", ks_status_details(t, ks_obj_name(obj)),
                                 "%s \"%s\" is forbidden: unable to create new content in "
                                 "namespace %s because it is being terminated",
                                 q2, ks_obj_name(obj), ns);
        }
    }
    r = prepare_create(ks, t, ns, obj, st);
    if (r < 0)
        return r;
    const char *name = ks_obj_name(obj);
    if (ks_get(t, ns, name)) {
        _cleanup_free_ char *q2 = ks_type_qualified(t);
        return ks_status_set(st, 409, "AlreadyExists", ks_status_details(t, name),
                             "%s \"%s\" already exists", q2, name);
    }
    r = ks_quota_admit(ks, t, ns, obj, dry, st);
    if (r < 0)
        return r;
    if (!t->crd && streq(t->plural, "resourcequotas"))
        json_object_set_new(obj, "status", ks_quota_status(ks, obj));
    ks_managed_record(ks, t, NULL, obj, NULL);
    ks_status_ok(st, 201, NULL);
    if (dry) {
        if (ret_obj)
            *ret_obj = steal_ptr(&own);
        return 0;
    }
    json_t *stored = steal_ptr(&own);
    ks_commit(ks, t, stored, KS_ADDED, NULL);
    if (!t->crd && streq(t->plural, "customresourcedefinitions"))
        ks_types_serve_crd(ks, stored, true);
    if (ret_obj)
        *ret_obj = json_incref(stored);
    return 0;
}

int ksim_create_object(struct ksim *ks, json_t *obj, struct err *e)
{
    pthread_mutex_lock(&ks->lock);
    int r = ks_obj_create_any(ks, obj, e);
    pthread_mutex_unlock(&ks->lock);
    return r;
}

int ksim_create_object_own(struct ksim *ks, json_t *obj, struct err *e)
{
    pthread_mutex_lock(&ks->lock);
    int r = ks_obj_create_own(ks, obj, e);
    pthread_mutex_unlock(&ks->lock);
    return r;
}

int ks_obj_create_any(struct ksim *ks, json_t *obj, struct err *e)
{
    return ks_obj_create_own(ks, json_deep_copy(obj), e);
}

int ks_obj_create_own(struct ksim *ks, json_t *obj_in, struct err *e)
{
    _cleanup_json_ json_t *obj = obj_in;
    const char *av = json_string_value(json_object_get(obj, "apiVersion"));
    const char *kind = json_string_value(json_object_get(obj, "kind"));
    struct ks_type *t = ks_type_by_kind(ks, av, kind);
    if (!t)
        return err_set(e, -ENOENT, "no resource for apiVersion \"%s\" kind \"%s\"", av ? av : "",
                       kind ? kind : "");
    /* copies: the create changes obj (its namespace set, values shared once stored) */
    _cleanup_free_ char *kind_copy = xstrdup(kind);
    const char *ons = kobj_namespace(obj);
    _cleanup_free_ char *ns = xstrdup(ons && ons[0] ? ons : "default");
    kind = kind_copy;
    if (t->namespaced && !ns_exists(ks, ns, NULL)) {
        json_t *nso = json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "v1", "kind", "Namespace",
                                "metadata", "name", ns);
        _cleanup_status_ struct ks_status st0 = {0};
        ks_obj_create(ks, ks_type_find(ks, "", "v1", "namespaces"), "", nso, false, NULL, &st0);
    }
    _cleanup_status_ struct ks_status st = {0};
    if (ks_obj_create(ks, t, ns, json_incref(obj), false, NULL, &st) < 0)
        return err_set(e, -EINVAL, "create %s \"%s\": %s", kind, ks_obj_name(obj),
                       st.message && st.message[0] ? st.message : "failed");
    return 0;
}

/* The part of an object generation tracks: everything but metadata and status. */
static bool spec_key(const char *k)
{
    return !streq(k, "metadata") && !streq(k, "status") && !streq(k, "apiVersion") &&
           !streq(k, "kind");
}

static bool spec_changed(json_t *a, json_t *b)
{
    size_t na = 0, nb = 0;
    const char *k;
    json_t *v;
    json_object_foreach (a, k, v) {
        if (!spec_key(k))
            continue;
        na++;
        if (!json_equal(v, json_object_get(b, k)))
            return true;
    }
    json_object_foreach (b, k, v)
        nb += spec_key(k);
    return na != nb;
}

/* The start of a status write's new version: a copy of old's top and metadata, the rest shared
 * with old, since only those are changed in place below (status is replaced whole). Kinds whose
 * writes change more in place (custom resources' schema defaults, DRA defaults) copy it all. */
static json_t *status_version(struct ks_type *t, json_t *old)
{
    if (t->crd || ks_dra_type(t) || !json_is_object(json_object_get(old, "metadata")))
        return json_deep_copy(old);
    json_t *res = json_copy(old);
    json_object_set_new(res, "metadata", json_copy(json_object_get(old, "metadata")));
    return res;
}

/* Applies an update: obj (stolen) replaces old under the subresource's rules. */
int ks_obj_update(struct ksim *ks, struct ks_type *t, json_t *old, json_t *obj, const char *sub,
                  bool dry, json_t **ret_obj, struct ks_status *st)
{
    _cleanup_json_ json_t *res = NULL;
    _cleanup_free_ char *gv = ks_type_gv(t);
    if (sub && streq(sub, "status")) {
        res = status_version(t, old);
        json_t *s = json_object_get(obj, "status");
        if (s)
            json_object_set(res, "status", s);
        else
            json_object_del(res, "status");
        json_decref(obj);
    } else if (sub && streq(sub, "finalize")) {
        res = json_deep_copy(old);
        json_t *f = kobj_path(obj, "spec.finalizers");
        json_t *spec = kobj_ensure_object(res, "spec");
        if (f)
            json_object_set(spec, "finalizers", f);
        else
            json_object_del(spec, "finalizers");
        json_decref(obj);
    } else {
        res = obj;
        if (t->has_status) {
            json_t *s = json_object_get(old, "status");
            if (s)
                json_object_set(res, "status", s);
            else
                json_object_del(res, "status");
        }
    }
    if (t->crd && t->schema)
        ks_crd_schema_admit(t->schema, res); /* before generation compares specs */
    json_object_set_new(res, "apiVersion", json_string(gv));
    json_object_set_new(res, "kind", json_string(t->kind));
    if (!t->crd && streq(t->plural, "secrets"))
        ks_secret_string_data(res);
    json_t *meta = kobj_ensure_object(res, "metadata");
    json_t *om = json_object_get(old, "metadata");
    const char *keep[] = {"name",
                          "namespace",
                          "uid",
                          "creationTimestamp",
                          "deletionTimestamp",
                          "deletionGracePeriodSeconds",
                          "generation",
                          "resourceVersion"};
    for (size_t i = 0; i < ARRAY_SIZE(keep); i++) {
        json_t *v = json_object_get(om, keep[i]);
        if (v)
            json_object_set(meta, keep[i], v);
        else
            json_object_del(meta, keep[i]);
    }
    if (!json_object_get(meta, "managedFields") && json_object_get(om, "managedFields"))
        json_object_set(meta, "managedFields", json_object_get(om, "managedFields"));
    if (t->has_generation && spec_changed(old, res)) {
        json_int_t g = json_integer_value(json_object_get(om, "generation"));
        json_object_set_new(meta, "generation", json_integer(g + 1));
    }
    json_t *causes = json_array();
    ks_validate_labels(res, causes);
    ks_dra_defaults(t, res);
    if (t->crd && t->schema)
        ks_crd_schema_validate(t->schema, res, old, causes);
    if (!sub) {
        ks_validate_type(ks, t, res, causes);
        ks_validate_immutable(t, old, res, causes);
    } else if (streq(sub, "status")) {
        ks_dra_validate_status(t, old, res, causes);
    }
    if (json_array_size(causes))
        return ks_invalid(st, t, ks_obj_name(old), causes);
    json_decref(causes);
    ks_managed_record(ks, t, old, res, sub);
    ks_status_ok(st, 200, NULL);
    json_t *result;
    if (json_equal(res, old)) {
        result = json_incref(old);
    } else if (dry) {
        result = json_incref(res);
    } else if (kobj_path(res, "metadata.deletionTimestamp") &&
               json_array_size(kobj_path(res, "metadata.finalizers")) == 0) {
        ks_commit(ks, t, json_incref(res), KS_MODIFIED, old);
        ks_remove(ks, t, res);
        result = json_incref(res);
    } else {
        json_t *stored = steal_ptr(&res);
        ks_commit(ks, t, stored, KS_MODIFIED, old);
        if (!t->crd && streq(t->plural, "customresourcedefinitions"))
            ks_types_serve_crd(ks, stored, true);
        result = json_incref(stored);
    }
    if (ret_obj)
        *ret_obj = result;
    else
        json_decref(result);
    return 0;
}

void ks_update(struct ksim *ks, struct ks_type *t, json_t *old, json_t *obj, const char *sub)
{
    _cleanup_status_ struct ks_status st = {0};
    ks_obj_update(ks, t, old, obj, sub, false, NULL, &st);
}

int ks_obj_replace(struct ksim *ks, struct ks_type *t, const char *name, json_t *cur, json_t *obj,
                   const char *sub, bool dry, json_t **ret_obj, struct ks_status *st)
{
    _cleanup_json_ json_t *own = obj;
    const char *bn = kobj_name(obj);
    if (!bn || !streq(bn, name))
        return ks_status_set(st, 400, "BadRequest", NULL,
                             "the name of the object (%s) does not match the name on the URL (%s)",
                             bn ? bn : "", name);
    if (!cur)
        return ks_not_found(st, t, name);
    int r = ks_decode_check(t, obj, st);
    if (r < 0)
        return r;
    const char *rv = kobj_resource_version(obj);
    if (rv && rv[0] && !streq_ptr(rv, kobj_resource_version(cur)))
        return ks_conflict(st, t, name);
    return ks_obj_update(ks, t, cur, steal_ptr(&own), sub, dry, ret_obj, st);
}

/* ---- delete ------------------------------------------------------------------------------- */

/* Removes every custom resource of a CRD being deleted. */
static void crd_cleanup(struct ksim *ks, json_t *crd)
{
    const char *g = kobj_path_str(crd, "spec.group");
    const char *pl = kobj_path_str(crd, "spec.names.plural");
    for (struct ks_type *t = ks->types; t; t = t->next) {
        if (!t->crd || !streq_ptr(t->group, g) || !streq_ptr(t->plural, pl))
            continue;
        for (;;) {
            void *it = json_object_iter(t->objs);
            if (!it)
                break;
            ks_remove(ks, t, json_object_iter_value(it));
        }
        t->served = false;
    }
}

void ks_delete_obj(struct ksim *ks, struct ks_type *t, json_t *obj, const char *propagation)
{
    ks_delete_obj_grace(ks, t, obj, propagation, -1);
}

/* The finalizer a propagationPolicy asks for (Foreground, Orphan), or NULL. */
static const char *propagation_finalizer(const char *propagation)
{
    if (propagation && streq(propagation, "Foreground"))
        return "foregroundDeletion";
    if (propagation && streq(propagation, "Orphan"))
        return "orphan";
    return NULL;
}

/* Appends f (NULL: nothing) to obj's metadata.finalizers unless it is there. */
static void finalizer_add(json_t *obj, const char *f)
{
    if (!f || kobj_has_finalizer(obj, f))
        return;
    json_t *meta = kobj_ensure_object(obj, "metadata");
    json_t *list = json_object_get(meta, "finalizers");
    if (!json_is_array(list)) {
        list = json_array();
        json_object_set_new(meta, "finalizers", list);
    }
    json_array_append_new(list, json_string(f));
}

/* Graceful pod deletion: a bound pod is marked (deletionTimestamp = now + grace) and the
 * simulated kubelet removes it once its containers are "stopped" (after the shorter of the
 * grace period and --pod-ready-delay). grace < 0: the pod's terminationGracePeriodSeconds. */
static bool pod_graceful(struct ksim *ks, struct ks_type *t, json_t *obj, const char *propagation,
                         int64_t grace)
{
    if (t->crd || t->group[0] || !streq(t->plural, "pods") || !kobj_path_str(obj, "spec.nodeName"))
        return false;
    if (grace < 0) {
        json_t *g = kobj_path(obj, "spec.terminationGracePeriodSeconds");
        grace = json_is_integer(g) ? json_integer_value(g) : 30;
    }
    if (grace <= 0)
        return false;
    uint64_t now = ks_now(ks);
    json_t *n = json_deep_copy(obj);
    json_t *meta = kobj_ensure_object(n, "metadata");
    char ts[40];
    time_rfc3339(now + (uint64_t)grace * 1000, ts, sizeof(ts));
    json_object_set_new(meta, "deletionTimestamp", json_string(ts));
    json_object_set_new(meta, "deletionGracePeriodSeconds", json_integer(grace));
    const char *add = propagation_finalizer(propagation);
    finalizer_add(n, add);
    uint64_t kill = (uint64_t)grace * 1000;
    if (ks->opts.pod_ready_delay_ms < kill)
        kill = ks->opts.pod_ready_delay_ms;
    const char *uid = kobj_uid(obj);
    if (uid)
        json_object_set_new(ks->pod_dying, uid, json_integer((json_int_t)(now + kill)));
    if (!ks->next_due || now + kill < ks->next_due)
        ks->next_due = now + kill;
    ks_commit(ks, t, n, KS_MODIFIED, obj);
    return true;
}

void ks_delete_obj_grace(struct ksim *ks, struct ks_type *t, json_t *obj, const char *propagation,
                         int64_t grace)
{
    if (kobj_path(obj, "metadata.deletionTimestamp")) {
        /* a forced (grace 0) delete of a terminating pod removes it now */
        if (grace == 0 && !t->crd && streq(t->plural, "pods") &&
            json_array_size(kobj_path(obj, "metadata.finalizers")) == 0)
            ks_remove(ks, t, obj);
        return;
    }
    if (pod_graceful(ks, t, obj, propagation, grace))
        return;
    bool is_ns = !t->crd && streq(t->plural, "namespaces");
    bool is_crd = !t->crd && streq(t->plural, "customresourcedefinitions");
    json_t *fin = kobj_path(obj, "metadata.finalizers");
    const char *add = propagation_finalizer(propagation);
    if (json_array_size(fin) == 0 && !add && !is_ns) {
        if (is_crd)
            crd_cleanup(ks, obj);
        ks_remove(ks, t, obj);
        return;
    }
    json_t *n = json_deep_copy(obj);
    json_t *meta = kobj_ensure_object(n, "metadata");
    char now[40];
    ks_now_str(ks, now, sizeof(now));
    json_object_set_new(meta, "deletionTimestamp", json_string(now));
    json_object_set_new(meta, "deletionGracePeriodSeconds", json_integer(0));
    finalizer_add(n, add);
    if (t->has_generation)
        json_object_set_new(
            meta, "generation",
            json_integer(json_integer_value(json_object_get(meta, "generation")) + 1));
    if (is_ns)
        json_object_set_new(kobj_ensure_object(n, "status"), "phase", json_string("Terminating"));
    ks_commit(ks, t, n, KS_MODIFIED, obj);
}

int ks_obj_delete(struct ksim *ks, struct ks_type *t, json_t *obj, const struct ks_delete_opts *o,
                  json_t **ret_obj, struct ks_status *st)
{
    const char *prop = o->propagation;
    if (prop && !streq(prop, "Foreground") && !streq(prop, "Background") &&
        !streq(prop, "Orphan")) {
        json_t *causes = json_array();
        ks_add_cause(causes, "FieldValueNotSupported", "propagationPolicy",
                     "Unsupported value: \"%s\": supported values: \"Foreground\", "
                     "\"Background\", \"Orphan\"",
                     prop);
        return ks_invalid(st, t, ks_obj_name(obj), causes);
    }
    if (o->uid && !streq_ptr(o->uid, kobj_uid(obj)))
        return ks_status_set(st, 409, "Conflict", ks_status_details(t, ks_obj_name(obj)),
                             "Precondition failed: UID in precondition: %s, UID in object meta: %s",
                             o->uid, kobj_uid(obj) ?: "");
    if (o->rv && !streq_ptr(o->rv, kobj_resource_version(obj)))
        return ks_status_set(st, 409, "Conflict", ks_status_details(t, ks_obj_name(obj)),
                             "Precondition failed: ResourceVersion in precondition: %s, "
                             "ResourceVersion in object meta: %s",
                             o->rv, kobj_resource_version(obj) ?: "");
    ks_status_ok(st, 200, NULL);
    if (o->dry) {
        if (ret_obj)
            *ret_obj = json_incref(obj);
        return 0;
    }
    _cleanup_free_ char *name = xstrdup(ks_obj_name(obj));
    _cleanup_free_ char *ns = xstrdup(ks_obj_ns(obj));
    _cleanup_free_ char *uid = xstrdup(kobj_uid(obj) ?: "");
    _cleanup_json_ json_t *keep = json_incref(obj);
    ks_delete_obj_grace(ks, t, obj, prop, o->grace);
    json_t *now = ks_get(t, ns, name);
    json_t *result = NULL;
    if (now) {
        result = json_incref(now);
    } else if (!t->crd && streq(t->plural, "pods")) {
        result = json_incref(keep);
    } else {
        json_t *d = ks_status_details(t, name);
        json_object_set_new(d, "uid", json_string(uid));
        ks_status_ok(st, 200, d);
    }
    if (ret_obj)
        *ret_obj = result;
    else
        json_decref(result);
    return 0;
}

/* ---- the scale subresource (autoscaling/v1 Scale) ---------------------------------------- */

json_t *ks_obj_scale_of(struct ks_type *t, json_t *obj)
{
    (void)t;
    /* The limit is what the labels themselves take, so the selector is never cut. */
    json_t *ml = kobj_path(obj, "spec.selector.matchLabels");
    size_t need = 0;
    const char *k;
    json_t *v;
    json_object_foreach (ml, k, v)
        need += strlen(k) + (json_string_value(v) ? json_string_length(v) : 0) + 2;
    struct sbuf sel;
    sbuf_init(&sel, need);
    json_object_foreach (ml, k, v)
        sbuf_addf(&sel, "%s%s=%s", sel.len ? "," : "", k, json_string_value(v) ?: "");
    _cleanup_free_ char *selector = ks_text_take(&sel);
    json_t *rep = kobj_path(obj, "spec.replicas");
    json_t *meta = json_object();
    const char *keep[] = {"name", "namespace", "uid", "resourceVersion", "creationTimestamp"};
    for (size_t i = 0; i < ARRAY_SIZE(keep); i++)
        if (json_object_get(json_object_get(obj, "metadata"), keep[i]))
            json_object_set(meta, keep[i],
                            json_object_get(json_object_get(obj, "metadata"), keep[i]));
    json_t *sc = json_pack(
        "{s:s,s:s,s:o,s:{s:I},s:{s:I,s:s}}", "kind", "Scale", "apiVersion", "autoscaling/v1",
        "metadata", meta, "spec", "replicas",
        (json_int_t)(json_is_integer(rep) ? json_integer_value(rep) : 1), "status", "replicas",
        (json_int_t)json_integer_value(kobj_path(obj, "status.replicas")), "selector", selector);
    return sc;
}

int ks_obj_scale_set(struct ksim *ks, struct ks_type *t, json_t *cur, json_t *want, bool dry,
                     json_t **ret_scale, struct ks_status *st)
{
    json_t *rep = kobj_path(want, "spec.replicas");
    const char *rv = kobj_resource_version(want);
    if (rv && rv[0] && !streq_ptr(rv, kobj_resource_version(cur)))
        return ks_conflict(st, t, ks_obj_name(cur));
    if (!json_is_integer(rep) || json_integer_value(rep) < 0) {
        json_t *causes = json_array();
        ks_add_cause(causes, "FieldValueInvalid", "spec.replicas",
                     "Invalid value: must be greater than or equal to 0");
        return ks_invalid(st, t, ks_obj_name(cur), causes);
    }
    json_t *n = json_deep_copy(cur);
    json_object_set(kobj_ensure_object(n, "spec"), "replicas", rep);
    _cleanup_free_ char *ns = xstrdup(ks_obj_ns(cur));
    _cleanup_free_ char *name = xstrdup(ks_obj_name(cur));
    json_t *updated = NULL;
    int r = ks_obj_update(ks, t, cur, n, NULL, dry, &updated, st);
    if (r < 0)
        return r;
    json_t *now = ks_get(t, ns, name);
    if (now) {
        json_decref(updated);
        updated = ks_obj_scale_of(t, now);
    }
    *ret_scale = updated;
    return 0;
}

int ks_obj_bind(struct ksim *ks, struct ks_type *t, json_t *pod, const char *node,
                struct ks_status *st)
{
    const char *name = ks_obj_name(pod);
    if (!node || !node[0]) {
        json_t *causes = json_array();
        ks_add_cause(causes, "FieldValueRequired", "target.name", "Required value");
        return ks_invalid(st, t, name, causes);
    }
    if (kobj_path_str(pod, "spec.nodeName"))
        return ks_status_set(st, 409, "Conflict", ks_status_details(t, name),
                             "pod %s is already assigned to node \"%s\"", name,
                             kobj_path_str(pod, "spec.nodeName"));
    json_t *bound = json_deep_copy(pod);
    json_object_set_new(kobj_ensure_object(bound, "spec"), "nodeName", json_string(node));
    char ts[40];
    ks_now_str(ks, ts, sizeof(ts));
    json_object_set_new(kobj_ensure_object(bound, "status"), "conditions",
                        json_pack("[{s:s,s:s,s:n,s:s}]", "type", "PodScheduled", "status", "True",
                                  "lastProbeTime", "lastTransitionTime", ts));
    ks_commit(ks, t, bound, KS_MODIFIED, pod);
    return ks_status_ok(st, 201, NULL);
}
