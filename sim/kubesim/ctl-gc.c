/* SPDX-License-Identifier: Apache-2.0 */
/* Garbage collection through ownerReferences (background, foreground, orphan). */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "ks-controllers.h"

static json_t *remove_finalizer(json_t *obj, const char *f)
{
    json_t *n = json_deep_copy(obj);
    json_t *fin = kobj_path(n, "metadata.finalizers");
    for (size_t i = json_array_size(fin); i-- > 0;)
        if (streq_ptr(json_string_value(json_array_get(fin, i)), f))
            json_array_remove(fin, i);
    return n;
}

/* One dependent: deleted when no owner is left, its references to gone or orphaning owners
 * dropped, deleted in the foreground with an owner deleted so (its uid marked in dependents). */
static bool gc_dependent(struct ksim *ks, struct ks_type *t, json_t *o, json_t *dependents)
{
    json_t *refs = kobj_path(o, "metadata.ownerReferences");
    if (!json_array_size(refs))
        return false;
    bool changed = false;
    size_t live = 0, j;
    json_t *r;
    bool foreground_owner = false;
    json_t *keep = json_array();
    bool orphaned = false;
    json_array_foreach (refs, j, r) {
        const char *uid = kobj_str(r, "uid");
        json_t *where = uid ? json_object_get(ks->uids, uid) : NULL;
        if (!where)
            continue;
        struct ks_type *ot =
            (struct ks_type *)(intptr_t)json_integer_value(json_array_get(where, 0));
        json_t *owner = json_object_get(ot->objs, json_string_value(json_array_get(where, 1)));
        if (owner && ks_is_deleting(owner) && kobj_has_finalizer(owner, "orphan")) {
            orphaned = true;
            continue;
        }
        live++;
        json_array_append(keep, r);
        if (owner && ks_is_deleting(owner) && kobj_has_finalizer(owner, "foregroundDeletion")) {
            foreground_owner = true;
            json_object_set_new(dependents, uid, json_true());
        }
    }
    if (live == 0 && !orphaned) {
        if (!ks_is_deleting(o)) {
            ks_delete_obj(ks, t, o, "Background");
            changed = true;
        }
    } else if (orphaned || live < json_array_size(refs)) {
        json_t *n = json_deep_copy(o);
        if (json_array_size(keep))
            json_object_set(json_object_get(n, "metadata"), "ownerReferences", keep);
        else
            json_object_del(json_object_get(n, "metadata"), "ownerReferences");
        ks_update(ks, t, o, n, NULL);
        changed = true;
    } else if (foreground_owner && !ks_is_deleting(o)) {
        ks_delete_obj(ks, t, o, "Foreground");
        changed = true;
    }
    json_decref(keep);
    return changed;
}

/* Only objects whose ownerReferences were set or changed since the last pass, and nothing was
 * deleted since (their owners are as the last pass saw them): those objects alone, as they are
 * now. false when the event log no longer reaches back to the last pass. */
static bool gc_changed_only(struct ksim *ks, uint64_t cursor, bool *changed)
{
    size_t i0;
    if (!ks_ev_since(ks, cursor, &i0))
        return false;
    size_t end = ks->ev_len;
    json_t *todo = json_array(), *seen = json_object(), *dependents = json_object();
    for (size_t i = i0; i < end; i++) {
        struct ks_event *e = &ks->ev[i];
        if (e->kind == KS_DELETED || !kobj_path(e->obj, "metadata.ownerReferences"))
            continue;
        json_t *cur = ks_get(e->type, ks_obj_ns(e->obj), ks_obj_name(e->obj));
        char id[64];
        snprintf(id, sizeof(id), "%p", (void *)cur);
        if (!cur || json_object_get(seen, id))
            continue;
        json_object_set_new(seen, id, json_true());
        json_array_append_new(todo, json_pack("[IO]", (json_int_t)(intptr_t)e->type, cur));
    }
    size_t i;
    json_t *x;
    json_array_foreach (todo, i, x) {
        struct ks_type *t = (struct ks_type *)(intptr_t)json_integer_value(json_array_get(x, 0));
        json_t *o = json_array_get(x, 1);
        /* an earlier one's deletion may have changed or removed it */
        if (ks_get(t, ks_obj_ns(o), ks_obj_name(o)) == o)
            *changed |= gc_dependent(ks, t, o, dependents);
    }
    json_decref(todo);
    json_decref(seen);
    json_decref(dependents);
    return true;
}

bool ks_ctl_gc(struct ksim *ks)
{
    if (!ks->gc_dirty && !ks->gc_full)
        return false;
    bool full = ks->gc_full;
    uint64_t cursor = ks->gc_cursor;
    ks->gc_dirty = ks->gc_full = false;
    ks->gc_cursor = ks->rv;
    bool changed = false;
    if (!full && gc_changed_only(ks, cursor, &changed))
        return changed;
    /* owners being deleted with foreground/orphan finalizers, by uid -> remaining dependents */
    json_t *dependents = json_object();
    for (struct ks_type *t = ks->types; t; t = t->next) {
        json_t *objs = ctl_values(t->objs);
        size_t i;
        json_t *o;
        json_array_foreach (objs, i, o)
            changed |= gc_dependent(ks, t, o, dependents);
        json_decref(objs);
    }
    /* finish owners: orphan finalizer done once nothing references them; foreground once no
     * dependents remain */
    for (struct ks_type *t = ks->types; t; t = t->next) {
        json_t *objs = ctl_values(t->objs);
        size_t i;
        json_t *o;
        json_array_foreach (objs, i, o) {
            if (!ks_is_deleting(o))
                continue;
            const char *uid = kobj_uid(o);
            const char *fin = NULL;
            if (kobj_has_finalizer(o, "orphan"))
                fin = "orphan";
            else if (kobj_has_finalizer(o, "foregroundDeletion") &&
                     !json_object_get(dependents, uid))
                fin = "foregroundDeletion";
            if (!fin)
                continue;
            ks_update(ks, t, o, remove_finalizer(o, fin), NULL);
            changed = true;
        }
        json_decref(objs);
    }
    json_decref(dependents);
    return changed;
}
