/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One patch per node (operator.h, op_node_merge): what the operator's controllers want on a
 * node at a given moment, merged field by field by one rule, so that a node costs one write
 * however many controllers have something to say about it.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kobj.h"
#include "operator.h"

/* The fields a wish may set: the maps merged key by key, and the cordon. */
static const char *const maps[] = {"labels", "annotations"};

/* A wish's shape: metadata.{labels,annotations} maps of strings or nulls, an optional
 * metadata.resourceVersion, an optional boolean spec.unschedulable; nothing else. */
static int wish_check(const struct op_node_controller *ctl, const struct op_node_wish *w,
                      struct err *e)
{
    const char *who = ctl->name;
    if (!json_is_object(w->patch))
        return err_set(e, -EINVAL, "node %s: %s's wish is not an object", w->node, who);
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *)w->patch, k, v) {
        if (strcmp(k, "metadata") == 0 && json_is_object(v)) {
            const char *mk;
            json_t *mv;
            json_object_foreach (v, mk, mv) {
                if (strcmp(mk, "resourceVersion") == 0 && json_is_string(mv))
                    continue;
                bool is_map = strcmp(mk, maps[0]) == 0 || strcmp(mk, maps[1]) == 0;
                if (!is_map || !json_is_object(mv))
                    return err_set(e, -EINVAL, "node %s: %s's wish sets metadata.%s", w->node, who,
                                   mk);
                const char *lk;
                json_t *lv;
                json_object_foreach (mv, lk, lv) {
                    if (!json_is_string(lv) && !json_is_null(lv))
                        return err_set(e, -EINVAL,
                                       "node %s: %s's wish: metadata.%s.%s is neither a string "
                                       "nor null",
                                       w->node, who, mk, lk);
                }
            }
        } else if (strcmp(k, "spec") == 0 && json_is_object(v) && json_object_size(v) == 1 &&
                   json_is_boolean(json_object_get(v, "unschedulable"))) {
            continue;
        } else {
            return err_set(e, -EINVAL, "node %s: %s's wish sets %s, which the merge does not know",
                           w->node, who, k);
        }
    }
    return 0;
}

static void add_conflict(struct op_node_merged *m, const char *field, size_t winner, size_t loser)
{
    m->conflicts = xrealloc(m->conflicts, (m->n_conflicts + 1) * sizeof(*m->conflicts));
    m->conflicts[m->n_conflicts++] = (struct op_node_conflict){xstrdup(field), winner, loser};
}

/* The wishes of `order` (indexes into w, in precedence order) that `take` admits, merged into a
 * new patch (NULL: nothing to write). Conflicts go to m when `record`. */
static json_t *merge_some(const struct op_node_wish *w, const size_t *order, size_t n,
                          const bool *take, struct op_node_merged *m, bool record)
{
    json_t *meta = json_object();
    json_t *who = json_object(); /* "labels/k" -> index of the wish that set it */
    int unsched = -1;
    size_t unsched_from = 0;
    for (size_t o = 0; o < n; o++) {
        size_t i = order[o];
        if (!take[i])
            continue;
        for (size_t mi = 0; mi < ARRAY_SIZE(maps); mi++) {
            const char *k;
            json_t *v;
            json_object_foreach (
                kobj_keys(w[i].patch, (const char *const[]){"metadata", maps[mi], NULL}), k, v) {
                _cleanup_free_ char *field = xasprintf("metadata.%s.%s", maps[mi], k);
                json_t *by = json_object_get(who, field);
                if (!by) {
                    json_object_set(kobj_ensure_object(meta, maps[mi]), k, v);
                    json_object_set_new(who, field, json_integer((json_int_t)i));
                    continue;
                }
                json_t *have = json_object_get(json_object_get(meta, maps[mi]), k);
                size_t first = (size_t)json_integer_value(by);
                if (!json_equal(have, v) && record)
                    add_conflict(m, field, w[first].controller, w[i].controller);
            }
        }
        json_t *u = kobj_keys(w[i].patch, (const char *const[]){"spec", "unschedulable", NULL});
        if (json_is_boolean(u)) {
            int want = json_is_true(u);
            if (unsched < 0) {
                unsched = want;
                unsched_from = i;
            } else if (want != unsched) {
                /* a cordon holds, whoever asked first */
                if (record)
                    add_conflict(m, "spec.unschedulable",
                                 want ? w[i].controller : w[unsched_from].controller,
                                 want ? w[unsched_from].controller : w[i].controller);
                if (want) {
                    unsched = 1;
                    unsched_from = i;
                }
            }
        }
    }
    json_decref(who);
    if (json_object_size(meta) == 0 && unsched < 0) {
        json_decref(meta);
        return NULL;
    }
    json_t *patch = json_object();
    if (json_object_size(meta) > 0)
        json_object_set(patch, "metadata", meta);
    json_decref(meta);
    if (unsched >= 0)
        json_object_set_new(patch, "spec", json_pack("{s:b}", "unschedulable", unsched));
    return patch;
}

static int cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

int op_node_merge(const struct op_node_controller *ctl, size_t n_ctl, const struct op_node_wish *w,
                  size_t n, struct op_node_merged *ret, struct err *e)
{
    assert(n_ctl <= 64); /* controllers is a bit set */
    struct op_node_merged m = {0};
    if (n == 0) {
        *ret = m;
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        if (w[i].controller >= n_ctl)
            return err_set(e, -EINVAL, "node %s: wish of an unknown controller", w[i].node);
        if (!streq_ptr(w[i].node, w[0].node))
            return err_set(e, -EINVAL, "wishes for two nodes (%s, %s) in one merge", w[0].node,
                           w[i].node);
        int r = wish_check(&ctl[w[i].controller], &w[i], e);
        if (r < 0)
            return r;
    }
    /* precedence: the controllers' order, then the wishes' */
    _cleanup_free_ size_t *order = xcalloc(n, sizeof(*order));
    for (size_t i = 0; i < n; i++)
        order[i] = w[i].controller * n + i;
    qsort(order, n, sizeof(*order), cmp_size);
    for (size_t i = 0; i < n; i++)
        order[i] %= n;
    /* the precondition: the first ranked wish that has one sets it; a wish planned from another
     * version is dropped (its controller plans again from the node as it is then) */
    _cleanup_free_ bool *take = xcalloc(n, sizeof(*take));
    _cleanup_free_ bool *bare = xcalloc(n, sizeof(*bare));
    const char *rv = NULL;
    size_t rv_from = 0;
    bool any_bare = false, any_rv = false;
    for (size_t o = 0; o < n; o++) {
        size_t i = order[o];
        const char *wrv = kobj_path_str(w[i].patch, "metadata.resourceVersion");
        take[i] = true;
        if (!wrv) {
            bare[i] = any_bare = true;
            continue;
        }
        if (!rv) {
            rv = wrv;
            rv_from = i;
        } else if (strcmp(rv, wrv) != 0) {
            take[i] = false;
            add_conflict(&m, "metadata.resourceVersion", w[rv_from].controller, w[i].controller);
            continue;
        }
        any_rv = true;
    }
    m.patch = merge_some(w, order, n, take, &m, true);
    if (m.patch) {
        if (rv)
            json_object_set_new(kobj_ensure_object(m.patch, "metadata"), "resourceVersion",
                                json_string(rv));
        for (size_t i = 0; i < n; i++) {
            if (!take[i])
                continue;
            m.controllers |= UINT64_C(1) << w[i].controller;
            m.deploys |= ctl[w[i].controller].deploys;
        }
        if (any_bare && any_rv)
            m.fallback = merge_some(w, order, n, bare, &m, false);
    }
    /* a patch writes something */
    assert(!m.patch || json_object_size(m.patch) > 0);
    *ret = m;
    return 0;
}

void op_node_merged_done(struct op_node_merged *m)
{
    if (!m)
        return;
    json_decref(m->patch);
    json_decref(m->fallback);
    for (size_t i = 0; i < m->n_conflicts; i++)
        free(m->conflicts[i].field);
    free(m->conflicts);
    *m = (struct op_node_merged){0};
}

enum op_write_phase op_node_patch_phase(const struct op_node_merged *m)
{
    return m->deploys ? OP_PHASE_DEPLOY : OP_PHASE_BOOKKEEPING;
}
