/* SPDX-License-Identifier: Apache-2.0 */
/* The takeover's shell (adopt-ctl.h): src/lib/adopt's plan read and executed. */
#include <string.h>

#include "adopt-ctl.h"
#include "kobj.h"
#include "operator-internal.h"
#include "yamlcfg.h"

#define COMPONENT "operator"

/* What the takeover looks at: the kinds NVIDIA's operator made (the operator may list all of
 * them; its Lease it cannot, and the plan lists that one only when it is seen). */
static const struct kube_resource *const scanned[] = {
    &KUBE_DAEMONSETS,   &KUBE_SERVICEACCOUNTS,     &KUBE_ROLES,
    &KUBE_ROLEBINDINGS, &KUBE_CONFIGMAPS,          &KUBE_SERVICES,
    &KUBE_CLUSTERROLES, &KUBE_CLUSTERROLEBINDINGS, &KUBE_RUNTIMECLASSES,
};

static const struct kube_resource *resource_of(const char *kind)
{
    if (streq_ptr(kind, "Pod"))
        return &KUBE_PODS;
    for (size_t i = 0; i < ARRAY_SIZE(scanned); i++)
        if (streq_ptr(scanned[i]->kind, kind))
            return scanned[i];
    return NULL;
}

static int list_into(struct controller *c, const struct kube_resource *r, const char *selector,
                     json_t *into, struct err *e)
{
    _cleanup_json_ json_t *list = NULL;
    struct kube_list_opts lo = {.label_selector = selector};
    int rc = kube_list(c->kc, r, r->namespaced ? c->ns : NULL, &lo, &list, e);
    if (rc < 0)
        return err_prefix(e, "takeover: list %s", r->plural);
    size_t i;
    json_t *o;
    json_array_foreach (json_object_get(list, "items"), i, o) {
        json_object_set_new(o, "kind", json_string(r->kind));
        json_array_append(into, o);
    }
    return 0;
}

static void takeover_event(struct controller *c, const json_t *cp, const char *type, char *msg)
{
    struct op_event ev = {.type = type, .reason = ADOPT_EVENT_REASON, .message = msg};
    log_info(COMPONENT, "takeover", "%s", msg);
    op_post_event(c, cp, &ev);
    free(msg);
}

static bool anything_nvidia(const json_t *objects, const json_t *pods)
{
    size_t i;
    json_t *o;
    json_array_foreach ((json_t *)objects, i, o) {
        if (adopt_is_nvidia(o))
            return true;
    }
    json_array_foreach ((json_t *)pods, i, o) {
        if (adopt_is_nvidia_pod(o) || streq_ptr(kobj_label(o, "app"), ADOPT_SURGE_APP))
            return true;
    }
    return false;
}

static const json_t *find_named(const json_t *arr, const char *kind, const char *name)
{
    size_t i;
    json_t *o;
    json_array_foreach ((json_t *)arr, i, o) {
        if (streq_ptr(kobj_kind(o), kind) && streq_ptr(kobj_name(o), name))
            return o;
    }
    return NULL;
}

/* Leaves a DaemonSet out of this pass's writes. */
static void drop_from_apply(struct op_plan *plan, const char *name)
{
    for (size_t i = json_array_size(plan->apply); i-- > 0;) {
        json_t *o = json_array_get(plan->apply, i);
        if (streq_ptr(kobj_kind(o), "DaemonSet") && streq_ptr(kobj_name(o), name))
            json_array_remove(plan->apply, i);
    }
}

/* gpuop's operand DaemonSets but the driver's, OnDelete while the takeover replaces pods; the
 * hash annotation says so, so that the change (and its undoing) is a write. */
static void hold_daemonsets(struct op_plan *plan)
{
    size_t i;
    json_t *d;
    json_array_foreach (plan->desired, i, d) {
        if (!streq_ptr(kobj_kind(d), "DaemonSet") || adopt_is_driver_daemonset(d))
            continue;
        if (!find_named(plan->apply, "DaemonSet", kobj_name(d)))
            json_array_append(plan->apply, d);
    }
    json_array_foreach (plan->apply, i, d) {
        if (!streq_ptr(kobj_kind(d), "DaemonSet") || adopt_is_driver_daemonset(d))
            continue;
        json_t *held = json_deep_copy(d);
        json_object_set_new(json_object_get(held, "spec"), "updateStrategy",
                            json_pack("{s:s}", "type", "OnDelete"));
        json_t *ann =
            kobj_ensure_keys(held, (const char *const[]){"metadata", "annotations", NULL});
        const char *h = json_string_value(json_object_get(ann, OP_HASH_ANNOTATION));
        _cleanup_free_ char *nh = xasprintf("%s-takeover", h ? h : "");
        json_object_set_new(ann, OP_HASH_ANNOTATION, json_string(nh));
        json_array_set_new(plan->apply, i, held);
    }
}

int op_adopt_prepare(struct controller *c, const json_t *cp, struct op_plan *plan,
                     struct op_adopt_pass *ret, struct err *e)
{
    *ret = (struct op_adopt_pass){0};
    uint64_t now = now_ms_real();
    if (c->adopt_done || now < c->adopt_idle_until_ms)
        return 0;
    _cleanup_json_ json_t *objects = json_array(), *pods = json_array();
    int r;
    /* A look first, three lists: NVIDIA's DaemonSets, its operand pods, surge pods. Without any
     * there is nothing to take over (what NVIDIA's operator made is used by its pods, or goes
     * with them), and no more is read from then on. */
    _cleanup_json_ json_t *dss = json_array(), *nvpods = json_array();
    if ((r = list_into(c, &KUBE_DAEMONSETS, NULL, dss, e)) < 0 ||
        (r = list_into(c, &KUBE_PODS, ADOPT_LABEL_MANAGED_BY "=" ADOPT_NVIDIA_MANAGER, nvpods, e)) <
            0 ||
        (r = list_into(c, &KUBE_PODS, "app=" ADOPT_SURGE_APP, nvpods, e)) < 0)
        return r;
    if (!anything_nvidia(dss, nvpods)) {
        c->adopt_done = true;
        ret->finished = true;
        return 0;
    }
    for (size_t i = 0; i < ARRAY_SIZE(scanned); i++)
        if ((r = list_into(c, scanned[i], NULL, objects, e)) < 0)
            return r;
    if ((r = list_into(c, &KUBE_PODS, NULL, pods, e)) < 0)
        return r;
    _cleanup_json_ json_t *nodes = kube_informer_list(c->nodes, NULL, NULL, NULL);
    struct adopt_input in = {.ns = c->ns,
                             .policy = cp,
                             .objects = objects,
                             .pods = pods,
                             .nodes = nodes,
                             .desired = plan->desired,
                             .now_ms = now};
    if ((r = adopt_plan(&in, &ret->plan, e)) < 0)
        return err_prefix(e, "takeover");
    ret->scanned = true;
    ret->pods = json_incref(pods);
    /* DaemonSets being deleted are left alone this pass (the next creates gpuop's). */
    size_t i;
    json_t *o;
    json_array_foreach (objects, i, o) {
        if (streq_ptr(kobj_kind(o), "DaemonSet") && kobj_deletion_timestamp(o))
            drop_from_apply(plan, kobj_name(o));
    }
    for (i = 0; i < ret->plan.n_items; i++) {
        const struct adopt_item *it = &ret->plan.items[i];
        if (it->action != ADOPT_RECREATE)
            continue;
        drop_from_apply(plan, it->name);
        if ((r = op_check_leader(c, e)) < 0)
            return r;
        struct kube_delete_opts d = {.propagation = KUBE_PROPAGATION_ORPHAN};
        struct err de = {0};
        r = kube_delete(c->kc, &KUBE_DAEMONSETS, c->ns, it->name, &d, &de);
        if (r < 0 && r != -ENOENT) {
            log_warn(COMPONENT, "takeover: DaemonSet not deleted", "name=%s error=\"%s\"", it->name,
                     err_msg(&de));
            continue;
        }
        op_count_write(c);
        takeover_event(c, cp, "Normal",
                       xasprintf("NVIDIA's DaemonSet %s deleted, its pods orphaned: %s", it->name,
                                 it->reason));
    }
    if (ret->plan.holding)
        hold_daemonsets(plan);
    return 0;
}

/* Whether a pod's controller is a DaemonSet that is gpuop's now (else its replacement would be
 * NVIDIA's again, or an orphan no DaemonSet has claimed yet would not come back). */
static int owner_is_gpuops(struct controller *c, const json_t *pod, bool *ret, struct err *e)
{
    *ret = false;
    size_t i;
    json_t *ref;
    json_array_foreach (kobj_path(pod, "metadata.ownerReferences"), i, ref) {
        if (!json_is_true(json_object_get(ref, "controller")) ||
            !streq_ptr(kobj_kind(ref), "DaemonSet"))
            continue;
        _cleanup_json_ json_t *ds = NULL;
        int r = kube_get(c->kc, &KUBE_DAEMONSETS, c->ns, kobj_str(ref, "name"), &ds, e);
        if (r == -ENOENT) {
            err_clear(e);
            return 0;
        }
        if (r < 0)
            return r;
        *ret = streq_ptr(kobj_uid(ds), kobj_str(ref, "uid")) &&
               streq_ptr(kobj_label(ds, ADOPT_LABEL_MANAGED_BY), ADOPT_GPUOP_MANAGER) &&
               !kobj_deletion_timestamp(ds);
    }
    return 0;
}

/* The surge device plugin pod of a node, from gpuop's device plugin DaemonSet as rendered. */
static json_t *surge_pod(const struct op_plan *plan, const json_t *cp, const char *ns,
                         const char *node)
{
    size_t i;
    json_t *d;
    json_array_foreach (plan->desired, i, d) {
        if (streq_ptr(kobj_kind(d), "DaemonSet") &&
            streq_ptr(kobj_path_str(d, "spec.selector.matchLabels.app"), ADOPT_DEVICE_PLUGIN_APP))
            return adopt_surge_pod(d, cp, ns, node);
    }
    return NULL;
}

static void put_condition(json_t *status, const json_t *cp, bool ok, const char *reason,
                          const char *msg)
{
    json_t *conds = json_object_get(status, "conditions");
    if (!json_is_array(conds)) {
        conds = json_array();
        json_object_set_new(status, "conditions", conds);
    }
    const json_t *stored = kobj_path(cp, "status.conditions");
    if (!reason) { /* no scan this pass: what was reported stays */
        size_t i;
        json_t *sc;
        json_array_foreach ((json_t *)stored, i, sc) {
            if (streq_ptr(kobj_str(sc, "type"), ADOPT_CONDITION_TYPE))
                kobj_conditions_put(conds, json_incref(sc));
        }
        return;
    }
    char now[40];
    time_rfc3339(now_ms_real(), now, sizeof(now));
    json_t *gen = kobj_path(cp, "metadata.generation");
    kobj_conditions_put(conds, kobj_condition(stored, ADOPT_CONDITION_TYPE, ok, reason, msg, now,
                                              json_is_integer(gen) ? json_integer_value(gen) : -1));
}

int op_adopt_finish(struct controller *c, const json_t *cp, struct op_plan *plan,
                    struct op_adopt_pass *pass, json_t *status, struct err *e)
{
    if (!pass->scanned) {
        if (!status)
            return 0;
        /* nothing of NVIDIA's left: a takeover reported under way is done */
        const char *was = kobj_condition_message(kobj_path(cp, "status.conditions"),
                                                 ADOPT_CONDITION_TYPE, "False");
        if (pass->finished && was)
            put_condition(status, cp, true, "OperandsTakenOver",
                          "nothing NVIDIA's operator made is left");
        else
            put_condition(status, cp, false, NULL, NULL);
        return 0;
    }
    const struct adopt_plan *ap = &pass->plan;
    bool acted = false;
    _cleanup_json_ json_t *started = json_object(); /* nodes whose turn began this pass */
    int r;
    for (size_t i = 0; i < ap->n_items; i++) {
        const struct adopt_item *it = &ap->items[i];
        if (!it->now || it->action == ADOPT_RECREATE)
            continue;
        if ((r = op_check_leader(c, e)) < 0)
            return r;
        struct err we = {0};
        acted = true;
        if (it->action == ADOPT_SURGE) {
            _cleanup_json_ json_t *pod = surge_pod(plan, cp, c->ns, it->node);
            _cleanup_json_ json_t *out = NULL;
            r = pod ? kube_create(c->kc, &KUBE_PODS, c->ns, pod, &out, &we) : 0;
            if (r < 0 && r != -EEXIST) {
                log_warn(COMPONENT, "takeover: surge plugin not created", "node=%s error=\"%s\"",
                         it->node, err_msg(&we));
                continue;
            }
            op_count_write(c);
            takeover_event(c, cp, "Normal",
                           xasprintf("node %s: gpuop's device plugin started beside NVIDIA's (%s)",
                                     it->node, it->name));
            continue;
        }
        if (it->action == ADOPT_REPLACE) {
            const json_t *pod = find_named(pass->pods, "Pod", it->name);
            bool ours = false;
            if (!pod || (r = owner_is_gpuops(c, pod, &ours, &we)) < 0 || !ours) {
                if (pod && r < 0)
                    log_warn(COMPONENT, "takeover: pod's owner not read", "pod=%s error=\"%s\"",
                             it->name, err_msg(&we));
                continue; /* its DaemonSet is not gpuop's yet: a later pass */
            }
        } else if (it->action != ADOPT_REMOVE) {
            continue;
        }
        const struct kube_resource *res = resource_of(it->kind);
        if (!res)
            continue;
        struct kube_delete_opts d = {.propagation = KUBE_PROPAGATION_BACKGROUND};
        r = kube_delete(c->kc, res, it->ns, it->name, &d, &we);
        if (r < 0 && r != -ENOENT) {
            log_warn(COMPONENT, "takeover: not deleted", "kind=%s name=%s error=\"%s\"", it->kind,
                     it->name, err_msg(&we));
            continue;
        }
        op_count_write(c);
        if (it->action == ADOPT_REPLACE) {
            if (!json_object_get(started, it->node)) {
                json_object_set_new(started, it->node, json_true());
                takeover_event(c, cp, "Normal",
                               xasprintf("node %s: NVIDIA's operand pods replaced by gpuop's (%lld "
                                         "node(s) at once; the driver stays)",
                                         it->node, ap->max_unavailable));
            }
        } else {
            takeover_event(c, cp, "Normal",
                           xasprintf("%s %s%s%s removed: %s", it->kind, it->ns ? it->ns : "",
                                     it->ns ? "/" : "", it->name, it->reason));
        }
    }
    size_t replace = adopt_plan_count(ap, ADOPT_REPLACE) + adopt_plan_count(ap, ADOPT_SURGE);
    size_t wait = adopt_plan_count(ap, ADOPT_WAIT), defer = adopt_plan_count(ap, ADOPT_DEFER);
    size_t leave = adopt_plan_count(ap, ADOPT_LEAVE);
    bool done =
        replace == 0 && ap->nodes_in_flight == 0 && adopt_plan_count(ap, ADOPT_RECREATE) == 0;
    _cleanup_free_ char *msg =
        xasprintf("operands: %zu node(s) done, %zu in flight, %zu to do (%lld at once); NVIDIA's "
                  "objects: %zu waiting until unused, %zu left (not gpuop's to remove); %zu "
                  "NVIDIA driver pod(s) kept running until a driver change replaces them",
                  ap->nodes_done, ap->nodes_in_flight, ap->nodes_todo, ap->max_unavailable, wait,
                  leave, defer);
    if (status)
        put_condition(status, cp, done, done ? "OperandsTakenOver" : "InProgress", msg);
    if (!acted && !ap->holding)
        c->adopt_idle_until_ms = now_ms_real() + ADOPT_IDLE_MS;
    if (ap->holding)
        plan->requeue = true; /* pods Ready for the settle time: no event says so */
    return 0;
}

void op_adopt_pass_done(struct op_adopt_pass *p)
{
    if (!p)
        return;
    adopt_plan_done(&p->plan);
    json_decref(p->pods);
    *p = (struct op_adopt_pass){0};
}
