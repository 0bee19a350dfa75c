/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The operator's planner, table-tested: each JSON file in tests/operator/plan is a small cluster
 * (ClusterPolicies, nodes) and a list of steps. A step changes the cluster, plans, compares the
 * plan with what the step expects, and (unless "execute": false) applies the plan to the cluster
 * as the controller would: node labels patched, objects created or replaced, pruned objects
 * deleted, statuses written. DaemonSets come up ready unless the step says otherwise.
 *
 * Fixture keys: "policies": [{"file": path under the source root | "object": {...},
 * "name", "creationTimestamp", "patch": merge patch}], "nodes": {name: labels}, "steps": [{
 * "policy_patch": {name: merge patch}, "node_labels": {name: labels merge patch},
 * "node_annotations": {name: {key: value | null}} (also at the top, for the start; an object
 * value is written as its compact JSON text, as the node agents write theirs),
 * "ds_status": {name: status}, "apply_errors": [...], "delete_policy": name, "add_policy": a
 * policy as in "policies" (a ClusterPolicy or a GPUCluster: the snapshot holds both kinds),
 * "nvidia_drivers": {name: merge patch of the NVIDIADriver, created when new; null deletes it}
 * (also at the top, for the start), "nvidia_drivers_unlisted": true (the informer has not
 * listed them: the snapshot has none), "expect": {...}}].
 * Expectations: "policies": {name: {"state", "write", "valid", "events": [reasons],
 * "conditions": {type: {...}}, "absent": [types]}}, "node_patches": {node: patch} (exact),
 * "apply": ["Kind/name", ...] (exact), "apply_count", "prune": [...] (exact), "health",
 * "requeue", "gpu_nodes", "has_active", "desired_image": {"DaemonSet/name": image},
 * "driver_nodes": [node, ...] (exact, in the plan's order),
 * "desired": {"Kind/name": subset of the object}, "not_desired": ["Kind/name"],
 * "nvidia_drivers": {name: {"state", "write", "events": [reasons], "conditions": {type: {...}},
 * "status": subset}}. A string starting with "~" matches as a substring.
 */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <string.h>

#include "../unit/compact-nodes.h"
#include "kobj.h"
#include "operator.h"
#include "yamlcfg.h"

static const struct op_defaults defaults = {"gpu-operator", "gpuop:test"};
static struct op_templates *templates;
static const char *src_root;

/* expected is a subset of actual: objects key by key, arrays element by element (same length),
 * "~text" strings as substrings. */
static bool subset(const json_t *want, const json_t *got, const char *path, char *why, size_t n)
{
    if (json_is_string(want) && json_string_value(want)[0] == '~') {
        if (json_is_string(got) && strstr(json_string_value(got), json_string_value(want) + 1))
            return true;
    } else if (json_is_object(want)) {
        if (!json_is_object(got))
            goto mismatch;
        const char *k;
        json_t *v;
        json_object_foreach ((json_t *)want, k, v) {
            if (strcmp(k, "absent") == 0 || strcmp(k, "not_desired") == 0)
                continue; /* checked on their own */
            _cleanup_free_ char *p = xasprintf("%s.%s", path, k);
            if (!subset(v, json_object_get(got, k), p, why, n))
                return false;
        }
        return true;
    } else if (json_is_array(want)) {
        if (!json_is_array(got) || json_array_size(got) != json_array_size(want))
            goto mismatch;
        size_t i;
        json_t *v;
        json_array_foreach (want, i, v) {
            _cleanup_free_ char *p = xasprintf("%s[%zu]", path, i);
            if (!subset(v, json_array_get(got, i), p, why, n))
                return false;
        }
        return true;
    } else if (json_equal(want, got)) {
        return true;
    }
mismatch:;
    _cleanup_free_ char *w = json_dumps(want, JSON_COMPACT | JSON_ENCODE_ANY);
    _cleanup_free_ char *g = got ? json_dumps(got, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    snprintf(why, n, "%s: want %s, got %.600s", path, w, g ? g : "(absent)");
    return false;
}

static const char *name_of(const json_t *o)
{
    return json_string_value(json_object_get(json_object_get(o, "metadata"), "name"));
}

static char *kind_name(const json_t *o)
{
    return xasprintf("%s/%s", json_string_value(json_object_get(o, "kind")), name_of(o));
}

/* A report's conditions by type, and its Events (their reasons, and the whole list). */
static void report_view(const struct op_report *r, json_t **ret_conds, json_t **ret_reasons,
                        json_t **ret_events)
{
    json_t *conds = json_object();
    size_t j;
    json_t *c;
    json_array_foreach (json_object_get(r->status, "conditions"), j, c)
        json_object_set(conds, json_string_value(json_object_get(c, "type")), c);
    json_t *reasons = json_array(), *events = json_array();
    for (size_t i = 0; i < r->n_events; i++) {
        const struct op_event *ev = &r->events[i];
        json_array_append_new(reasons, json_string(ev->reason));
        json_array_append_new(events, json_pack("{s:s,s:s,s:s}", "type", ev->type, "reason",
                                                ev->reason, "message", ev->message));
    }
    *ret_conds = conds;
    *ret_reasons = reasons;
    *ret_events = events;
}

/* The plan as the fixtures see it (the typed plan rendered as the JSON they were written
 * against). */
static json_t *plan_view(const struct op_plan *plan)
{
    json_t *v =
        json_pack("{s:{},s:{},s:[],s:[],s:i,s:i,s:b,s:b,s:{}}", "policies", "node_patches", "apply",
                  "prune", "gpu_nodes", plan->gpu_nodes, "health", plan->health, "requeue",
                  plan->requeue, "has_active", plan->has_active, "desired_image");
    size_t i;
    json_t *x;
    for (i = 0; i < plan->n_policies; i++) {
        const struct op_policy_report *pr = &plan->policies[i];
        json_t *conds, *reasons, *events;
        report_view(&pr->r, &conds, &reasons, &events);
        json_object_set_new(json_object_get(v, "policies"), pr->r.name,
                            json_pack("{s:b,s:b,s:O?,s:o,s:o,s:o}", "write", pr->r.write, "valid",
                                      pr->valid, "state", json_object_get(pr->r.status, "state"),
                                      "conditions", conds, "events", reasons, "event_list",
                                      events));
    }
    for (i = 0; i < plan->n_node_patches; i++)
        json_object_set(json_object_get(v, "node_patches"), plan->node_patches[i].node,
                        plan->node_patches[i].labels);
    json_t *dn = json_array();
    const char *dk;
    json_object_foreach (plan->driver_nodes, dk, x)
        json_array_append_new(dn, json_string(dk));
    json_object_set_new(v, "driver_nodes", dn);
    json_array_foreach (plan->apply, i, x) {
        _cleanup_free_ char *k = kind_name(x);
        json_array_append_new(json_object_get(v, "apply"), json_string(k));
    }
    for (i = 0; i < plan->n_prune; i++) {
        _cleanup_free_ char *k = xasprintf("%s/%s", plan->prune[i].kind, plan->prune[i].name);
        json_array_append_new(json_object_get(v, "prune"), json_string(k));
    }
    json_object_set_new(v, "apply_count", json_integer((json_int_t)json_array_size(plan->apply)));
    json_t *nvds = json_object();
    json_object_set_new(v, "nvidia_drivers", nvds);
    for (i = 0; i < plan->n_nvidia_drivers; i++) {
        const struct op_report *r = &plan->nvidia_drivers[i];
        json_t *conds, *reasons, *events;
        report_view(r, &conds, &reasons, &events);
        json_object_set_new(nvds, r->name,
                            json_pack("{s:b,s:O?,s:O,s:o,s:o,s:o}", "write", r->write, "state",
                                      json_object_get(r->status, "state"), "status", r->status,
                                      "conditions", conds, "events", reasons, "event_list",
                                      events));
    }
    json_t *desired = json_object();
    json_object_set_new(v, "desired", desired);
    json_array_foreach (plan->desired, i, x) {
        if (!streq_ptr(json_string_value(json_object_get(x, "kind")), "DaemonSet"))
            continue;
        json_t *ctr = json_array_get(
            json_object_get(
                json_object_get(json_object_get(json_object_get(x, "spec"), "template"), "spec"),
                "containers"),
            0);
        _cleanup_free_ char *k = kind_name(x);
        json_object_set(json_object_get(v, "desired_image"), k, json_object_get(ctr, "image"));
        json_object_set(desired, k, x);
    }
    return v;
}

static json_t *find_named(json_t *list, const char *kind, const char *name, const char *ns,
                          size_t *ret_index)
{
    size_t i;
    json_t *o;
    json_array_foreach (list, i, o) {
        if ((!kind || streq_ptr(json_string_value(json_object_get(o, "kind")), kind)) &&
            streq_ptr(name_of(o), name) &&
            streq_ptr(
                json_string_value(json_object_get(json_object_get(o, "metadata"), "namespace")),
                ns)) {
            if (ret_index)
                *ret_index = i;
            return o;
        }
    }
    return NULL;
}

static json_t *ready_status(void)
{
    return json_pack("{s:i,s:i,s:i,s:i,s:i}", "desiredNumberScheduled", 2, "numberAvailable", 2,
                     "updatedNumberScheduled", 2, "numberReady", 2, "observedGeneration", 1);
}

/* What the controller does with a plan, done to the in-memory cluster. */
static void execute(json_t *cluster, const struct op_plan *plan)
{
    json_t *nodes = json_object_get(cluster, "nodes");
    json_t *owned = json_object_get(cluster, "owned");
    json_t *policies = json_object_get(cluster, "policies");
    size_t i;
    json_t *x;
    for (i = 0; i < plan->n_node_patches; i++) {
        json_t *labels = json_object_get(
            json_object_get(find_named(nodes, NULL, plan->node_patches[i].node, NULL, NULL),
                            "metadata"),
            "labels");
        const char *k;
        json_t *v;
        json_object_foreach (plan->node_patches[i].labels, k, v) {
            if (json_is_null(v))
                json_object_del(labels, k);
            else
                json_object_set(labels, k, v);
        }
    }
    json_array_foreach (plan->apply, i, x) {
        json_t *obj = json_deep_copy(x);
        json_object_set_new(json_object_get(obj, "metadata"), "generation", json_integer(1));
        if (streq_ptr(json_string_value(json_object_get(obj, "kind")), "DaemonSet"))
            json_object_set_new(obj, "status", ready_status());
        size_t at;
        const char *ns =
            json_string_value(json_object_get(json_object_get(obj, "metadata"), "namespace"));
        if (find_named(owned, json_string_value(json_object_get(obj, "kind")), name_of(obj), ns,
                       &at))
            json_array_set_new(owned, at, obj);
        else
            json_array_append_new(owned, obj);
    }
    for (i = 0; i < plan->n_prune; i++) {
        size_t at;
        if (find_named(owned, plan->prune[i].kind, plan->prune[i].name, plan->prune[i].ns, &at))
            json_array_remove(owned, at);
    }
    for (i = 0; i < plan->n_nvidia_drivers; i++) {
        const struct op_report *r = &plan->nvidia_drivers[i];
        if (!r->write)
            continue;
        json_t *d = find_named(json_object_get(cluster, "nvds"), NULL, r->name, NULL, NULL);
        json_object_set_new(d, "status", json_deep_copy(r->status));
    }
    for (i = 0; i < plan->n_policies; i++) {
        const struct op_report *r = &plan->policies[i].r;
        if (!r->write)
            continue;
        json_t *cp = find_named(policies, NULL, r->name, NULL, NULL);
        json_object_set_new(cp, "status", json_deep_copy(r->status));
    }
}

/* RFC 7386 merge patch, in place (the objects are held by pointer). */
static void merge_patch(json_t *target, const json_t *patch)
{
    json_t *m = kobj_merge_patch(target, patch);
    json_object_clear(target);
    json_object_update(target, m);
    json_decref(m);
}

static json_t *load_policy(const json_t *def)
{
    json_t *cp;
    const char *file = json_string_value(json_object_get(def, "file"));
    if (file) {
        _cleanup_free_ char *path = xasprintf("%s/%s", src_root, file);
        struct err e = {0};
        cp = NULL;
        if (yaml_load_file(path, &cp, &e) < 0)
            fail_msg("%s", err_msg(&e));
    } else {
        cp = json_deep_copy(json_object_get(def, "object"));
    }
    json_t *meta = json_object_get(cp, "metadata");
    json_t *v;
    if ((v = json_object_get(def, "name")))
        json_object_set(meta, "name", v);
    json_object_set_new(meta, "uid", json_sprintf("uid-%s", name_of(cp)));
    json_object_set_new(meta, "generation", json_integer(1));
    v = json_object_get(def, "creationTimestamp");
    json_object_set_new(meta, "creationTimestamp",
                        v ? json_incref(v) : json_string("2026-01-01T00:00:00Z"));
    if ((v = json_object_get(def, "patch")))
        merge_patch(cp, v);
    return cp;
}

/* Creates, merge-patches (bumping its generation) or, for null, deletes NVIDIADrivers. */
static void change_nvds(json_t *nvds, const json_t *changes)
{
    const char *k;
    json_t *x;
    json_object_foreach ((json_t *)changes, k, x) {
        size_t at;
        json_t *d = find_named(nvds, NULL, k, NULL, &at);
        if (json_is_null(x)) {
            if (d)
                json_array_remove(nvds, at);
            continue;
        }
        if (!d) {
            d = json_pack("{s:s,s:s,s:{s:s,s:s,s:I,s:s}}", "apiVersion", "nvidia.com/v1alpha1",
                          "kind", "NVIDIADriver", "metadata", "name", k, "uid", "uid-nvd",
                          "generation", (json_int_t)0, "creationTimestamp", "2026-01-01T00:00:00Z");
            json_array_append_new(nvds, d);
        }
        merge_patch(d, x);
        json_t *meta = json_object_get(d, "metadata");
        json_object_set_new(
            meta, "generation",
            json_integer(json_integer_value(json_object_get(meta, "generation")) + 1));
    }
}

/* Sets (or, for null, removes) a node's annotations; objects become their JSON text. */
static void annotate(json_t *node, const json_t *annotations)
{
    json_t *meta = json_object_get(node, "metadata");
    json_t *ann = json_object_get(meta, "annotations");
    if (!ann) {
        ann = json_object();
        json_object_set_new(meta, "annotations", ann);
    }
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *)annotations, k, v) {
        if (json_is_null(v))
            json_object_del(ann, k);
        else if (json_is_object(v)) {
            _cleanup_free_ char *text = json_dumps(v, JSON_COMPACT);
            json_object_set_new(ann, k, json_string(text));
        } else {
            json_object_set(ann, k, v);
        }
    }
}

/* compact: the planner reads nodes whose labels are compact, and must plan the same. */
static void run_fixture(const char *path, bool compact)
{
    json_error_t je;
    _cleanup_json_ json_t *fx = json_load_file(path, 0, &je);
    if (!fx)
        fail_msg("%s:%d: %s", path, je.line, je.text);
    _cleanup_json_ json_t *cluster =
        json_pack("{s:[],s:[],s:[],s:[]}", "policies", "nodes", "owned", "nvds");
    change_nvds(json_object_get(cluster, "nvds"), json_object_get(fx, "nvidia_drivers"));
    json_t *policies = json_object_get(cluster, "policies");
    json_t *nodes = json_object_get(cluster, "nodes");
    size_t i;
    json_t *x;
    json_array_foreach (json_object_get(fx, "policies"), i, x) {
        json_array_append_new(policies, load_policy(x));
    }
    const char *k;
    json_object_foreach (json_object_get(fx, "nodes"), k, x) {
        json_array_append_new(nodes,
                              json_pack("{s:{s:s,s:O}}", "metadata", "name", k, "labels", x));
    }
    json_object_foreach (json_object_get(fx, "node_annotations"), k, x) {
        json_t *n = find_named(nodes, NULL, k, NULL, NULL);
        assert_non_null(n);
        annotate(n, x);
    }
    uint64_t now = 1767225600000ull; /* 2026-01-01T00:00:00Z */
    json_t *step;
    json_array_foreach (json_object_get(fx, "steps"), i, step) {
        now += 60000;
        json_object_foreach (json_object_get(step, "policy_patch"), k, x) {
            json_t *cp = find_named(policies, NULL, k, NULL, NULL);
            assert_non_null(cp);
            merge_patch(cp, x);
            json_t *meta = json_object_get(cp, "metadata");
            json_object_set_new(
                meta, "generation",
                json_integer(json_integer_value(json_object_get(meta, "generation")) + 1));
        }
        json_object_foreach (json_object_get(step, "node_labels"), k, x) {
            json_t *n = find_named(nodes, NULL, k, NULL, NULL);
            assert_non_null(n);
            merge_patch(json_object_get(json_object_get(n, "metadata"), "labels"), x);
        }
        json_object_foreach (json_object_get(step, "node_annotations"), k, x) {
            json_t *n = find_named(nodes, NULL, k, NULL, NULL);
            assert_non_null(n);
            annotate(n, x);
        }
        json_object_foreach (json_object_get(step, "ds_status"), k, x) {
            json_t *ds =
                find_named(json_object_get(cluster, "owned"), "DaemonSet", k, "gpu-operator", NULL);
            assert_non_null(ds);
            json_object_set(ds, "status", x);
        }
        change_nvds(json_object_get(cluster, "nvds"), json_object_get(step, "nvidia_drivers"));
        const char *del = json_string_value(json_object_get(step, "delete_policy"));
        size_t at;
        if (del && find_named(policies, NULL, del, NULL, &at))
            json_array_remove(policies, at);
        if (json_object_get(step, "add_policy"))
            json_array_append_new(policies, load_policy(json_object_get(step, "add_policy")));
        /* the fixture's failed writes, [{"object", "reason"}], as the shell records them */
        struct op_write_errors werr = {0};
        size_t we;
        json_t *wx;
        json_array_foreach (json_object_get(step, "apply_errors"), we, wx)
            op_write_errors_add(&werr, kobj_str(wx, "object"), kobj_str(wx, "reason"));
        struct op_snapshot snap = {
            .policies = policies,
            .nodes = nodes,
            .owned = json_object_get(cluster, "owned"),
            .apply_errors = &werr,
            .defaults = &defaults,
            .templates = templates,
            .now_ms = now,
            .nvidia_drivers = json_is_true(json_object_get(step, "nvidia_drivers_unlisted"))
                                  ? NULL
                                  : json_object_get(cluster, "nvds")};
        _cleanup_json_ json_t *intern = json_object();
        _cleanup_json_ json_t *cnodes = compact ? test_compact_nodes(nodes, intern) : NULL;
        if (cnodes)
            snap.nodes = cnodes;
        _cleanup_(op_plan_freep) struct op_plan *plan = NULL;
        struct err e = {0};
        int pr = op_plan(&snap, &plan, &e);
        op_write_errors_done(&werr);
        if (pr < 0)
            fail_msg("%s step %zu: %s", path, i, err_msg(&e));
        /* Node patches alike are one value, held once. */
        for (size_t a = 0; a < plan->n_node_patches; a++)
            for (size_t b = a + 1; b < plan->n_node_patches; b++)
                if (json_equal(plan->node_patches[a].labels, plan->node_patches[b].labels) &&
                    plan->node_patches[a].labels != plan->node_patches[b].labels)
                    fail_msg("%s step %zu: nodes %s and %s: equal patches held twice", path, i,
                             plan->node_patches[a].node, plan->node_patches[b].node);
        /* Every object planned is one a real API server accepts. */
        size_t d;
        json_t *obj;
        json_array_foreach (plan->desired, d, obj) {
            if (op_api_validate(obj, &e) < 0)
                fail_msg("%s step %zu: the API server would refuse it: %s", path, i, err_msg(&e));
        }
        _cleanup_json_ json_t *view = plan_view(plan);
        json_t *want = json_object_get(step, "expect");
        char why[1024];
        if (want && !subset(want, view, "plan", why, sizeof(why)))
            fail_msg("%s step %zu: %s", path, i, why);
        /* Node patches are compared whole: no node may get a label the step does not expect. */
        json_t *wnp = json_object_get(want, "node_patches");
        if (wnp && !json_equal(wnp, json_object_get(view, "node_patches"))) {
            _cleanup_free_ char *g =
                json_dumps(json_object_get(view, "node_patches"), JSON_COMPACT | JSON_SORT_KEYS);
            fail_msg("%s step %zu: node_patches: got %s", path, i, g);
        }
        json_t *nd;
        json_array_foreach (json_object_get(want, "not_desired"), d, nd) {
            if (json_object_get(json_object_get(view, "desired"), json_string_value(nd)))
                fail_msg("%s step %zu: %s is desired", path, i, json_string_value(nd));
        }
        /* Absent conditions. */
        json_object_foreach (json_object_get(want, "policies"), k, x) {
            size_t j;
            json_t *t;
            json_array_foreach (json_object_get(x, "absent"), j, t) {
                if (json_object_get(
                        json_object_get(json_object_get(json_object_get(view, "policies"), k),
                                        "conditions"),
                        json_string_value(t)))
                    fail_msg("%s step %zu: %s has condition %s", path, i, k, json_string_value(t));
            }
        }
        if (!json_is_false(json_object_get(step, "execute")))
            execute(cluster, plan);
    }
}

static void fixtures(bool compact)
{
    _cleanup_free_ char *dir = xasprintf("%s/tests/operator/plan", src_root);
    struct dirent **names = NULL;
    int n = scandir(dir, &names, NULL, alphasort);
    if (n < 0)
        fail_msg("%s: %s", dir, strerror(errno));
    int ran = 0;
    for (int i = 0; i < n; i++) {
        size_t len = strlen(names[i]->d_name);
        if (len > 5 && strcmp(names[i]->d_name + len - 5, ".json") == 0) {
            _cleanup_free_ char *p = xasprintf("%s/%s", dir, names[i]->d_name);
            print_message("fixture %s%s\n", names[i]->d_name, compact ? " (compact labels)" : "");
            run_fixture(p, compact);
            ran++;
        }
        free(names[i]);
    }
    free(names);
    assert_true(ran >= 8);
}

static void test_fixtures(void **state)
{
    (void)state;
    fixtures(false);
}

/* The same fixtures, the same plans, with the nodes' labels as the node informer keeps them. */
static void test_fixtures_compact_labels(void **state)
{
    (void)state;
    fixtures(true);
}

/* The "~" and subset rules the fixtures rely on can fail. */
static void test_subset(void **state)
{
    (void)state;
    char why[256];
    _cleanup_json_ json_t *got = json_pack("{s:s,s:[i,i]}", "a", "hello world", "b", 1, 2);
    _cleanup_json_ json_t *w1 = json_pack("{s:s}", "a", "~world");
    _cleanup_json_ json_t *w2 = json_pack("{s:s}", "a", "~mars");
    _cleanup_json_ json_t *w3 = json_pack("{s:[i]}", "b", 1);
    _cleanup_json_ json_t *w4 = json_pack("{s:i}", "c", 1);
    assert_true(subset(w1, got, "x", why, sizeof(why)));
    assert_false(subset(w2, got, "x", why, sizeof(why)));
    assert_false(subset(w3, got, "x", why, sizeof(why)));
    assert_false(subset(w4, got, "x", why, sizeof(why)));
}

int main(void)
{
    src_root = getenv("GPUOP_SOURCE_ROOT");
    if (!src_root)
        src_root = "../..";
    struct err e = {0};
    if (op_templates_builtin(&templates, &e) < 0) {
        fprintf(stderr, "%s\n", err_msg(&e));
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_subset),
        cmocka_unit_test(test_fixtures),
        cmocka_unit_test(test_fixtures_compact_labels),
    };
    int r = cmocka_run_group_tests(tests, NULL, NULL);
    op_templates_free(templates);
    return r;
}
