/* SPDX-License-Identifier: Apache-2.0 */
/* gather's reads (gather-internal.h): each list and object the core names, into the bundle;
 * what could not be read is said in its index, never fatal. */
#include <stdio.h>
#include <string.h>

#include "gather-internal.h"
#include "kobj.h"
#include "kube.h"
#include "statusview.h"

#define COMPONENT GATHER_COMPONENT
#define MAX_LOGS  4096 /* container logs one bundle reads */

/* An API call's failure: said in the index; one that says the API server cannot be used at all
 * makes every later call a "not read" instead of another wait. */
void gather_run_failed(struct gather_run *r, const char *what, const struct err *ee, bool optional)
{
    if (optional && ee->code == -ENOENT) {
        gather_bundle_missing(r->b, what, "not installed (%s)", err_msg(ee));
        return;
    }
    gather_bundle_missing(r->b, what, "%s", err_msg(ee));
    struct sbuf t _cleanup_sbuf_; /* API errors may quote a URL's password */
    sbuf_init(&t, 64 * 1024);
    gather_redact_text(err_msg(ee), strlen(err_msg(ee)), &t);
    log_warn(COMPONENT, "not collected", "what=%s error=\"%s\"", what,
             sbuf_check(&t) == 0 ? t.data : GATHER_REDACTED);
    if (gather_api_down(ee->code) && !r->down) {
        r->down = true;
        snprintf(r->down_why, sizeof(r->down_why),
                 "not read: the API server could not be used (%s)",
                 err_msg(ee)); /* the index redacts it */
    }
}

bool gather_run_skipped(struct gather_run *r, const char *what)
{
    if (!r->down && !svc_stopped(r->s))
        return false;
    gather_bundle_missing(r->b, what, "%s", r->down ? r->down_why : "not read: stopped");
    return true;
}

/* The items of a list; NULL when it could not be read, which the index says. */
static json_t *list_items(struct gather_run *r, const struct kube_resource *res, const char *ns,
                          const struct kube_list_opts *o, const char *what, bool optional)
{
    if (gather_run_skipped(r, what))
        return NULL;
    json_t *l = NULL;
    struct err ee = {0};
    if (kube_list(r->kc, res, ns, o, &l, &ee) < 0) {
        gather_run_failed(r, what, &ee, optional);
        return NULL;
    }
    json_t *items = json_incref(json_object_get(l, "items"));
    json_decref(l);
    if (!json_is_array(items)) {
        json_decref(items);
        items = json_array();
    }
    return items;
}

/* Adds bytes; a failure of the bundle itself ends the run. */
int gather_run_add(struct gather_run *r, const char *path, const void *data, size_t len,
                   const char *what, size_t redactions, struct err *e)
{
    int rc = gather_bundle_add(r->b, path, data, len, what, redactions, e);
    if (rc == 1)
        log_warn(COMPONENT, "left out: the size bound", "path=%s bytes=%zu", path, len);
    return rc < 0 ? rc : 0;
}

int gather_run_add_yaml(struct gather_run *r, const char *path, const json_t *obj, const char *what,
                        struct err *e)
{
    struct sbuf y _cleanup_sbuf_;
    sbuf_init(&y, (size_t)r->g->max_size);
    size_t red = 0;
    struct err ee = {0};
    if (gather_object_yaml(obj, &y, &red, &ee) < 0) {
        gather_bundle_missing(r->b, path, "%s", err_msg(&ee));
        return 0;
    }
    return gather_run_add(r, path, y.data, y.len, what, red, e);
}

int gather_run_add_text(struct gather_run *r, const char *path, const char *text, size_t len,
                        const char *what, struct err *e)
{
    struct sbuf t _cleanup_sbuf_;
    sbuf_init(&t, len * 12 + 64);
    size_t red = gather_redact_text(text, len, &t);
    if (sbuf_check(&t) < 0) {
        gather_bundle_missing(r->b, path, "redaction: larger than %zu bytes", t.limit);
        return 0;
    }
    return gather_run_add(r, path, t.data, t.len, what, red, e);
}

static int collect_sources(struct gather_run *r, struct err *e)
{
    const char *ns = r->g->ns;
    for (const struct gather_source *src = gather_sources; src->res; src++) {
        char what[256], dir[160];
        gather_source_names(src, ns, what, sizeof(what), dir, sizeof(dir));
        _cleanup_(json_decrefp) json_t *items =
            list_items(r, src->res, src->res->namespaced ? ns : NULL, NULL, what, src->optional);
        size_t i;
        json_t *obj;
        json_array_foreach (items, i, obj) {
            if (!gather_wanted(src, obj))
                continue;
            char path[512], desc[384];
            gather_object_names(dir, src->res->kind, obj, path, sizeof(path), desc, sizeof(desc));
            int rc = gather_run_add_yaml(r, path, obj, desc, e);
            if (rc < 0)
                return rc;
        }
        json_t **kept[] = {[GATHER_KEEP_NONE] = NULL,
                           [GATHER_KEEP_POLICIES] = &r->policies,
                           [GATHER_KEEP_DRIVERS] = &r->drivers,
                           [GATHER_KEEP_PODS] = &r->pods,
                           [GATHER_KEEP_DEPLOYMENTS] = &r->deployments};
        json_t **keep = kept[gather_keep_of(src)];
        if (keep && items) {
            json_decref(*keep);
            *keep = json_incref(items);
        }
    }
    return 0;
}

static int collect_nodes(struct gather_run *r, struct err *e)
{
    json_t *nodes = list_items(r, &KUBE_NODES, NULL, NULL, "nodes", false);
    if (!nodes)
        return 0;
    json_decref(r->nodes);
    r->nodes = nodes;
    r->have_nodes = true;
    size_t i;
    json_t *node;
    json_array_foreach (r->nodes, i, node) {
        if (!st_gpu_node(node))
            continue;
        char name[254], path[300], desc[300];
        gather_path_part(kobj_name(node), name, sizeof(name));
        snprintf(path, sizeof(path), "nodes/%s.yaml", name);
        snprintf(desc, sizeof(desc), "GPU node %s: labels, annotations, conditions",
                 kobj_name(node) ?: "");
        _cleanup_(json_decrefp) json_t *view = gather_node_view(node);
        int rc = gather_run_add_yaml(r, path, view, desc, e);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static int collect_events(struct gather_run *r, struct err *e)
{
    const char *ns = r->g->ns;
    char what[128], path[160];
    snprintf(what, sizeof(what), "events in namespace %s", ns);
    snprintf(path, sizeof(path), "namespaces/%s/events.yaml", ns);
    _cleanup_(json_decrefp) json_t *items = list_items(r, &KUBE_EVENTS, ns, NULL, path, false);
    if (items) {
        _cleanup_(json_decrefp) json_t *evs = gather_events_since(items, r->now_ms, r->g->since_ms);
        int rc = gather_run_add_yaml(r, path, evs, what, e);
        if (rc < 0)
            return rc;
    }
    struct kube_list_opts nodes = {.field_selector = "involvedObject.kind=Node"};
    _cleanup_(json_decrefp) json_t *nitems =
        list_items(r, &KUBE_EVENTS, NULL, &nodes, "cluster/node-events.yaml", false);
    if (!nitems)
        return 0;
    _cleanup_(json_decrefp) json_t *nevs = gather_events_since(nitems, r->now_ms, r->g->since_ms);
    return gather_run_add_yaml(r, "cluster/node-events.yaml", nevs,
                               "events about nodes (every namespace)", e);
}

/* `gpuop status -o json` from what was read, plus the lists only the status view needs. */
static int collect_status(struct gather_run *r, struct err *e)
{
    if (!r->have_nodes) {
        gather_bundle_missing(r->b, "status.json", "not made: the nodes could not be read");
        return 0;
    }
    struct kube_list_opts drains = {.field_selector = "involvedObject.kind=Node,reason=NodeDrain"};
    _cleanup_(json_decrefp) json_t *events =
        list_items(r, &KUBE_EVENTS, NULL, &drains, "status.json: node drain events", false);
    _cleanup_(json_decrefp) json_t *pods =
        list_items(r, &KUBE_PODS, NULL, NULL, "status.json: pods (every namespace)", false);
    _cleanup_(json_decrefp) json_t *quotas =
        list_items(r, &KUBE_RESOURCEQUOTAS, NULL, NULL, "status.json: resourcequotas", false);
    struct gather_status_in in = {.policies = r->policies,
                                  .drivers = r->drivers,
                                  .nodes = r->nodes,
                                  .events = events,
                                  .pods = pods,
                                  .quotas = quotas,
                                  .now_ms = r->now_ms};
    _cleanup_free_ char *text = NULL;
    size_t red = 0;
    int rc = gather_status_json(&in, &text, &red, e);
    if (rc < 0)
        return rc;
    return gather_run_add(r, "status.json", text, strlen(text), "gpuop status -o json", red, e);
}

static int collect_logs(struct gather_run *r, struct err *e)
{
    const struct gather_options *g = r->g;
    struct gather_log *logs = NULL;
    size_t n = 0, more = 0;
    gather_log_plan(r->pods, MAX_LOGS, &logs, &n, &more);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        struct gather_log *l = &logs[i];
        if (gather_run_skipped(r, l->path))
            continue;
        if (gather_bundle_full(r->b)) {
            gather_bundle_missing(r->b, l->path, "not read: the size bound was reached");
            continue;
        }
        struct kube_log_opts lo = {.container = l->container,
                                   .previous = l->previous,
                                   .tail_lines = g->tail,
                                   .since_seconds = (g->since_ms + 999) / 1000,
                                   .limit_bytes = (size_t)g->log_bytes};
        _cleanup_free_ char *log = NULL;
        size_t len = 0;
        struct err ee = {0};
        if (kube_pod_log_opts(r->kc, g->ns, l->pod, &lo, &log, &len, &ee) < 0) {
            gather_run_failed(r, l->path, &ee, false);
            continue;
        }
        size_t start = gather_log_tail_start(log, len, (size_t)g->log_bytes);
        char what[512];
        snprintf(what, sizeof(what), "log of %s/%s container %s%s%s", g->ns, l->pod, l->container,
                 l->previous ? " (previous instance)" : "",
                 start ? " (its end only: --log-bytes)" : "");
        rc = gather_run_add_text(r, l->path, log + start, len - start, what, e);
    }
    if (rc == 0 && more)
        gather_bundle_missing(r->b, "logs", "%zu more container logs: more than %u", more,
                              MAX_LOGS);
    free(logs);
    return rc;
}

int gather_run_collect(struct gather_run *r, struct err *e)
{
    int rc;
    /* the namespace first: the first call says whether the API server answers at all */
    char path[160], what[128];
    snprintf(path, sizeof(path), "namespaces/%s/namespace.yaml", r->g->ns);
    snprintf(what, sizeof(what), "namespace %s", r->g->ns);
    json_t *nsobj = NULL;
    struct err ee = {0};
    if (kube_get(r->kc, &KUBE_NAMESPACES, NULL, r->g->ns, &nsobj, &ee) < 0)
        gather_run_failed(r, path, &ee, false);
    else if ((rc = gather_run_add_yaml(r, path, nsobj, what, e)) < 0) {
        json_decref(nsobj);
        return rc;
    }
    json_decref(nsobj);
    if ((rc = collect_sources(r, e)) < 0 || (rc = collect_nodes(r, e)) < 0 ||
        (rc = collect_status(r, e)) < 0 || (rc = collect_events(r, e)) < 0)
        return rc;
    if (r->g->doctor && (rc = gather_run_doctor(r, e)) < 0)
        return rc;
    return collect_logs(r, e);
}
