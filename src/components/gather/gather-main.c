/* SPDX-License-Identifier: Apache-2.0 */
/* `gpuop gather` (also `kubectl gpuop gather`): reads the cluster, puts what the core says into
 * the bundle (gather.h) and writes it atomically. What it could not read is said in the bundle's
 * index, never fatal: an API server that cannot be reached still gives the local facts. */
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "doctorpod.h"
#include "gather.h"
#include "kobj.h"
#include "kube.h"
#include "statusview.h"
#include "svc.h"
#include "yamlcfg.h"

#define COMPONENT       "gather"
#define DOCTOR_PARALLEL 16 /* doctor pods at once */
#define DOCTOR_POLL_MS  500
#define DOCTOR_LOG_MAX  (1u << 20)
#define MAX_LOGS        4096 /* container logs one bundle reads */
/* --log-bytes' largest: well under the API client's limit on one response (64 MiB), so that a
 * kubelet which ignores limitBytes still answers within it */
#define LOG_BYTES_MAX (32u << 20)

static const struct kube_resource RES_RESOURCEQUOTAS = {"", "v1", "resourcequotas", "ResourceQuota",
                                                        true};

struct gather {
    const char *kubeconfig, *context, *output, *ns, *max_size_s, *log_bytes_s, *doctor_image;
    uint64_t since_ms, doctor_timeout_ms;
    unsigned tail;
    bool doctor;
    uint64_t max_size, log_bytes; /* parsed */
};

static const struct svc_option gather_options[] = {
    {.kind = SVC_FRAGMENT,
     .fragment = svc_kubeconfig_option,
     .off = offsetof(struct gather, kubeconfig)},
    {.kind = SVC_FRAGMENT, .fragment = svc_context_option, .off = offsetof(struct gather, context)},
    {.flag = "output",
     .short_flag = 'o',
     .kind = SVC_STRING,
     .off = offsetof(struct gather, output),
     .metavar = "FILE",
     .help = "the bundle (default gpuop-gather-<UTC time>.tar.gz here;\n"
             "a folder: that name in it)"},
    {.flag = "namespace",
     .short_flag = 'n',
     .kind = SVC_STRING,
     .off = offsetof(struct gather, ns),
     .metavar = "NS",
     .help = "the operator's and operands' namespace (default gpu-operator)"},
    {.flag = "since",
     .kind = SVC_DURATION,
     .min = 1000,
     .finite = true,
     .off = offsetof(struct gather, since_ms),
     .metavar = "DUR",
     .help = "only the logs and Events of the last DUR (default: every\n"
             "Event, each log's --tail)"},
    {.flag = "tail",
     .kind = SVC_UINT,
     .min = 1,
     .max = 1000000,
     .off = offsetof(struct gather, tail),
     .metavar = "LINES",
     .help = "the last LINES lines of each container's log (default 1000)"},
    {.flag = "log-bytes",
     .kind = SVC_STRING,
     .off = offsetof(struct gather, log_bytes_s),
     .metavar = "SIZE",
     .help = "at most SIZE of each container's log, its end kept (default 1Mi,\n"
             "at most 32Mi)"},
    {.flag = "max-size",
     .kind = SVC_STRING,
     .off = offsetof(struct gather, max_size_s),
     .metavar = "SIZE",
     .help = "the bundle's bound (default 64Mi, 256Ki to 4Gi): what would\n"
             "pass it is left out and said so in its index"},
    {.flag = "doctor",
     .kind = SVC_FLAG,
     .off = offsetof(struct gather, doctor),
     .help = "also `gpuop doctor --json` on every GPU node (a short-lived\n"
             "privileged pod each, in --namespace)"},
    {.flag = "doctor-image",
     .kind = SVC_STRING,
     .off = offsetof(struct gather, doctor_image),
     .metavar = "IMAGE",
     .help = "with --doctor: the pods' image (default the operator\n"
             "Deployment's, else gpuop:" GPUOP_VERSION ")"},
    {.flag = "doctor-timeout",
     .kind = SVC_DURATION,
     .min = 1000,
     .finite = true,
     .off = offsetof(struct gather, doctor_timeout_ms),
     .metavar = "DUR",
     .help = "with --doctor: how long the pods may take (default 2m)"},
    {0},
};

static void gather_defaults(void *state)
{
    struct gather *g = state;
    g->ns = "gpu-operator";
    g->tail = 1000;
    g->max_size_s = "64Mi";
    g->log_bytes_s = "1Mi";
    g->doctor_timeout_ms = 120000;
}

/* A byte size as a Kubernetes quantity ("64Mi", "1G", "1048576"), within [min, max]. */
static int parse_size(const char *flag, const char *s, uint64_t min, uint64_t max, uint64_t *ret,
                      struct err *e)
{
    int64_t milli = 0;
    if (kobj_quantity_milli(s, &milli) < 0 || milli < 0)
        return err_set(e, -EINVAL, "--%s %s: expected a size such as 64Mi", flag, s);
    uint64_t v = (uint64_t)milli / 1000;
    if (v < min || v > max)
        return err_set(e, -ERANGE, "--%s %s: expected %llu to %llu bytes", flag, s,
                       (unsigned long long)min, (unsigned long long)max);
    *ret = v;
    return 0;
}

static int gather_configure(struct svc *s, struct err *e)
{
    struct gather *g = svc_state(s);
    int r;
    if ((r = parse_size("max-size", g->max_size_s, GATHER_MIN_SIZE, GATHER_MAX_SIZE, &g->max_size,
                        e)) < 0 ||
        (r = parse_size("log-bytes", g->log_bytes_s, 1024, LOG_BYTES_MAX, &g->log_bytes, e)) < 0)
        return r;
    if (!g->ns[0] || strlen(g->ns) > 63)
        return err_set(e, -EINVAL, "--namespace \"%s\": expected a namespace name", g->ns);
    if (g->output && !g->output[0])
        return err_set(e, -EINVAL, "--output: expected a file name");
    return 0;
}

/* ---- one run ------------------------------------------------------------------------------ */

struct run {
    struct svc *s;
    struct gather *g;
    struct kube_client *kc;  /* with the stop token */
    struct kube_client *kc2; /* without: the doctor pods' removal */
    struct gather_bundle *b;
    uint64_t now_ms;
    bool down, have_nodes;
    char down_why[768];
    json_t *nodes, *policies, *drivers, *pods, *deployments; /* items, never NULL */
};

/* An API call's failure: said in the index; one that says the API server cannot be used at all
 * makes every later call a "not read" instead of another wait. */
static void api_failed(struct run *r, const char *what, const struct err *ee, bool optional)
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

static bool skipped(struct run *r, const char *what)
{
    if (!r->down && !svc_stopped(r->s))
        return false;
    gather_bundle_missing(r->b, what, "%s", r->down ? r->down_why : "not read: stopped");
    return true;
}

/* The items of a list; NULL when it could not be read, which the index says. */
static json_t *list_items(struct run *r, const struct kube_resource *res, const char *ns,
                          const struct kube_list_opts *o, const char *what, bool optional)
{
    if (skipped(r, what))
        return NULL;
    json_t *l = NULL;
    struct err ee = {0};
    if (kube_list(r->kc, res, ns, o, &l, &ee) < 0) {
        api_failed(r, what, &ee, optional);
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
static int add(struct run *r, const char *path, const void *data, size_t len, const char *what,
               size_t redactions, struct err *e)
{
    int rc = gather_bundle_add(r->b, path, data, len, what, redactions, e);
    if (rc == 1)
        log_warn(COMPONENT, "left out: the size bound", "path=%s bytes=%zu", path, len);
    return rc < 0 ? rc : 0;
}

static int add_yaml(struct run *r, const char *path, const json_t *obj, const char *what,
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
    return add(r, path, y.data, y.len, what, red, e);
}

static int add_text(struct run *r, const char *path, const char *text, size_t len, const char *what,
                    struct err *e)
{
    struct sbuf t _cleanup_sbuf_;
    sbuf_init(&t, len * 12 + 64);
    size_t red = gather_redact_text(text, len, &t);
    if (sbuf_check(&t) < 0) {
        gather_bundle_missing(r->b, path, "redaction: larger than %zu bytes", t.limit);
        return 0;
    }
    return add(r, path, t.data, t.len, what, red, e);
}

static int collect_sources(struct run *r, struct err *e)
{
    const char *ns = r->g->ns;
    for (const struct gather_source *src = gather_sources; src->res; src++) {
        char what[256], dir[160];
        if (src->res->namespaced) {
            snprintf(what, sizeof(what), "%s in namespace %s", src->res->plural, ns);
            snprintf(dir, sizeof(dir), "namespaces/%s/%s", ns, src->dir);
        } else {
            snprintf(what, sizeof(what), "%s", src->res->plural);
            snprintf(dir, sizeof(dir), "cluster/%s", src->dir);
        }
        _cleanup_(json_decrefp) json_t *items =
            list_items(r, src->res, src->res->namespaced ? ns : NULL, NULL, what, src->optional);
        size_t i;
        json_t *obj;
        json_array_foreach (items, i, obj) {
            if (!gather_wanted(src, obj))
                continue;
            char name[254], path[512], desc[384];
            gather_path_part(kobj_name(obj), name, sizeof(name));
            snprintf(path, sizeof(path), "%s/%s.yaml", dir, name);
            snprintf(desc, sizeof(desc), "%s %s", src->res->kind, kobj_name(obj) ?: "");
            int rc = add_yaml(r, path, obj, desc, e);
            if (rc < 0)
                return rc;
        }
        json_t **keep = src->res == &KUBE_PODS                   ? &r->pods
                        : src->res == &KUBE_DEPLOYMENTS          ? &r->deployments
                        : streq_ptr(src->dir, "clusterpolicies") ? &r->policies
                        : streq_ptr(src->dir, "nvidiadrivers")   ? &r->drivers
                                                                 : NULL;
        if (keep && items) {
            json_decref(*keep);
            *keep = json_incref(items);
        }
    }
    return 0;
}

static int collect_nodes(struct run *r, struct err *e)
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
        int rc = add_yaml(r, path, view, desc, e);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static int collect_events(struct run *r, struct err *e)
{
    const char *ns = r->g->ns;
    char what[128], path[160];
    snprintf(what, sizeof(what), "events in namespace %s", ns);
    snprintf(path, sizeof(path), "namespaces/%s/events.yaml", ns);
    _cleanup_(json_decrefp) json_t *items = list_items(r, &KUBE_EVENTS, ns, NULL, path, false);
    if (items) {
        _cleanup_(json_decrefp) json_t *evs = gather_events_since(items, r->now_ms, r->g->since_ms);
        int rc = add_yaml(r, path, evs, what, e);
        if (rc < 0)
            return rc;
    }
    struct kube_list_opts nodes = {.field_selector = "involvedObject.kind=Node"};
    _cleanup_(json_decrefp) json_t *nitems =
        list_items(r, &KUBE_EVENTS, NULL, &nodes, "cluster/node-events.yaml", false);
    if (!nitems)
        return 0;
    _cleanup_(json_decrefp) json_t *nevs = gather_events_since(nitems, r->now_ms, r->g->since_ms);
    return add_yaml(r, "cluster/node-events.yaml", nevs, "events about nodes (every namespace)", e);
}

/* `gpuop status -o json` from what was read, plus the lists only the status view needs. */
static int collect_status(struct run *r, struct err *e)
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
        list_items(r, &RES_RESOURCEQUOTAS, NULL, NULL, "status.json: resourcequotas", false);
    /* a list that could not be read is said in the index and counts as empty, as gpuop status
     * counts a list it may not read */
    _cleanup_(json_decrefp) json_t *none = json_array();
    struct st_objects in = {.policies = r->policies,
                            .drivers = r->drivers,
                            .nodes = r->nodes,
                            .events = events ? events : none,
                            .pods = pods ? pods : none,
                            .quotas = quotas ? quotas : none,
                            .now_ms = r->now_ms};
    _cleanup_(json_decrefp) json_t *model = st_model(&in, st_sections);
    size_t red = model ? gather_redact_object(model) : 0;
    _cleanup_free_ char *text = model ? json_dumps(model, JSON_INDENT(2) | JSON_SORT_KEYS) : NULL;
    if (!text)
        return err_set(e, -ENOMEM, "render status.json");
    _cleanup_free_ char *nl = xasprintf("%s\n", text);
    return add(r, "status.json", nl, strlen(nl), "gpuop status -o json", red, e);
}

/* ---- the doctor on every GPU node --------------------------------------------------------- */

struct doc {
    const char *node;
    char *pod;
    bool done;
};

static void doctor_path(const char *node, bool json, char *buf, size_t n)
{
    char part[254];
    gather_path_part(node, part, sizeof(part));
    snprintf(buf, n, "doctor/%s.%s", part, json ? "json" : "log");
}

static int doctor_finish(struct run *r, struct doc *d, const json_t *pod, struct err *e)
{
    struct doctorpod_result res = {.exit_code = -1};
    doctorpod_read(r->kc, r->g->ns, d->pod, pod, DOCTOR_LOG_MAX, &res);
    int code = res.exit_code, rc = 0;
    bool report = code == 0 || code == 3 || code == 4;
    char path[300], what[512];
    doctor_path(d->node, report, path, sizeof(path));
    if (res.log) {
        snprintf(what, sizeof(what), "gpuop doctor --json on node %s (pod %s/%s: %s, exit %d)",
                 d->node, r->g->ns, d->pod, res.phase, code);
        rc = add_text(r, path, res.log, res.log_len, what, e);
    } else {
        gather_bundle_missing(r->b, path, "the log of pod %s/%s (exit %d): %s", r->g->ns, d->pod,
                              code, err_msg(&res.log_err));
    }
    doctorpod_result_clear(&res);
    doctorpod_delete(r->kc2, r->g->ns, d->pod, COMPONENT);
    d->done = true;
    return rc;
}

static int doctor_batch(struct run *r, struct doc *docs, size_t n, const char *image, struct err *e)
{
    const struct gather *g = r->g;
    for (size_t i = 0; i < n; i++) {
        char path[300];
        doctor_path(docs[i].node, true, path, sizeof(path));
        if (skipped(r, path)) {
            docs[i].done = true;
            continue;
        }
        struct doctorpod_opts po = {.node = docs[i].node,
                                    .ns = g->ns,
                                    .image = image,
                                    .json = true,
                                    .deadline_s = (unsigned)(g->doctor_timeout_ms / 1000) + 30};
        struct err ee = {0};
        if (doctorpod_start(r->kc, &po, COMPONENT, &docs[i].pod, &ee) < 0) {
            api_failed(r, path, &ee, false);
            docs[i].done = true;
        }
    }
    uint64_t deadline = deadline_after(g->doctor_timeout_ms);
    int rc = 0;
    for (;;) {
        size_t left = 0;
        for (size_t i = 0; i < n && rc == 0; i++) {
            if (docs[i].done)
                continue;
            json_t *pod = NULL;
            char phase[32] = "";
            struct err ee = {0};
            int p = doctorpod_poll(r->kc, g->ns, docs[i].pod, &pod, phase, sizeof(phase), &ee);
            if (p == 1) {
                rc = doctor_finish(r, &docs[i], pod, e);
                json_decref(pod);
                continue;
            }
            char path[300];
            doctor_path(docs[i].node, true, path, sizeof(path));
            if (p < 0) {
                api_failed(r, path, &ee, false);
            } else if (deadline_left_ms(deadline) == 0) {
                gather_bundle_missing(
                    r->b, path, "pod %s/%s did not finish within %llus (phase %s)", g->ns,
                    docs[i].pod, (unsigned long long)(g->doctor_timeout_ms / 1000),
                    phase[0] ? phase : "none");
            } else {
                left++;
                continue;
            }
            doctorpod_delete(r->kc2, g->ns, docs[i].pod, COMPONENT);
            docs[i].done = true;
        }
        if (rc < 0 || left == 0)
            break;
        if (svc_wait(r->s, DOCTOR_POLL_MS) == SVC_STOP)
            break;
    }
    /* a stop or a failure: the pods still running go too */
    for (size_t i = 0; i < n; i++) {
        if (docs[i].done)
            continue;
        char path[300];
        doctor_path(docs[i].node, true, path, sizeof(path));
        gather_bundle_missing(r->b, path, "not read: stopped");
        doctorpod_delete(r->kc2, g->ns, docs[i].pod, COMPONENT);
    }
    return rc;
}

static int collect_doctor(struct run *r, struct err *e)
{
    const char *image = r->g->doctor_image;
    if (!image)
        image = gather_doctor_image(r->deployments, "gpuop:" GPUOP_VERSION);
    size_t n = 0;
    struct doc *docs = xcalloc(json_array_size(r->nodes) + 1, sizeof(*docs));
    size_t i;
    json_t *node;
    json_array_foreach (r->nodes, i, node)
        if (st_gpu_node(node) && kobj_name(node))
            docs[n++].node = kobj_name(node);
    log_info(COMPONENT, "doctor on GPU nodes", "nodes=%zu image=%s namespace=%s", n, image,
             r->g->ns);
    int rc = 0;
    for (size_t at = 0; at < n && rc == 0; at += DOCTOR_PARALLEL)
        rc = doctor_batch(r, docs + at, n - at < DOCTOR_PARALLEL ? n - at : DOCTOR_PARALLEL, image,
                          e);
    for (size_t k = 0; k < n; k++)
        free(docs[k].pod);
    free(docs);
    return rc;
}

/* ---- logs --------------------------------------------------------------------------------- */

/* The end of a log cut to max bytes, from a line's start where one is near. */
static size_t tail_start(const char *log, size_t len, size_t max)
{
    if (len <= max)
        return 0;
    size_t at = len - max;
    const char *nl = memchr(log + at, '\n', len - at);
    return nl && (size_t)(nl - log) + 1 < len ? (size_t)(nl - log) + 1 : at;
}

static int collect_logs(struct run *r, struct err *e)
{
    const struct gather *g = r->g;
    struct gather_log *logs = NULL;
    size_t n = 0, more = 0;
    gather_log_plan(r->pods, MAX_LOGS, &logs, &n, &more);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        struct gather_log *l = &logs[i];
        if (skipped(r, l->path))
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
            api_failed(r, l->path, &ee, false);
            continue;
        }
        size_t start = tail_start(log, len, (size_t)g->log_bytes);
        char what[512];
        snprintf(what, sizeof(what), "log of %s/%s container %s%s%s", g->ns, l->pod, l->container,
                 l->previous ? " (previous instance)" : "",
                 start ? " (its end only: --log-bytes)" : "");
        rc = add_text(r, l->path, log + start, len - start, what, e);
    }
    if (rc == 0 && more)
        gather_bundle_missing(r->b, "logs", "%zu more container logs: more than %u", more,
                              MAX_LOGS);
    free(logs);
    return rc;
}

/* ---- the shell ---------------------------------------------------------------------------- */

static bool is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The file to write and the bundle's folder name (its base name without .tar.gz / .tgz). */
static void output_of(const struct gather *g, uint64_t now_ms, char *path, size_t pn, char *root,
                      size_t rn)
{
    char stamp[40], iso[40];
    time_rfc3339(now_ms, iso, sizeof(iso));
    size_t k = 0;
    for (const char *p = iso; *p && k + 1 < sizeof(stamp); p++)
        if (*p != '-' && *p != ':')
            stamp[k++] = *p;
    stamp[k] = '\0';
    char def[96];
    snprintf(def, sizeof(def), "gpuop-gather-%s.tar.gz", stamp);
    if (!g->output)
        snprintf(path, pn, "%s", def);
    else if (is_dir(g->output))
        snprintf(path, pn, "%s%s%s", g->output, str_has_suffix(g->output, "/") ? "" : "/", def);
    else
        snprintf(path, pn, "%s", g->output);
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    char name[96];
    strlcpy_s(name, base, sizeof(name));
    static const char *const exts[] = {".tar.gz", ".tgz", ".gz"};
    for (size_t i = 0; i < ARRAY_SIZE(exts); i++)
        if (str_has_suffix(name, exts[i])) {
            name[strlen(name) - strlen(exts[i])] = '\0';
            break;
        }
    gather_path_part(name, root, rn);
}

static json_t *facts_of(const struct gather *g, const char *server, uint64_t now_ms)
{
    char created[40];
    time_rfc3339(now_ms, created, sizeof(created));
    struct sbuf cmd _cleanup_sbuf_;
    sbuf_init(&cmd, 4096);
    sbuf_addf(&cmd, "gpuop gather --namespace %s --tail %u --log-bytes %s --max-size %s", g->ns,
              g->tail, g->log_bytes_s, g->max_size_s);
    if (g->since_ms)
        sbuf_addf(&cmd, " --since %llus", (unsigned long long)(g->since_ms / 1000));
    if (g->doctor)
        sbuf_adds(&cmd, " --doctor");
    if (g->context)
        sbuf_addf(&cmd, " --context %s", g->context);
    return json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:I}", "version",
                     "gpuop " GPUOP_VERSION " (git " GPUOP_GIT_REV ")", "created", created,
                     "command", sbuf_check(&cmd) == 0 ? cmd.data : "gpuop gather", "kubeconfig",
                     g->kubeconfig ? g->kubeconfig
                                   : "(default: $KUBECONFIG, in-cluster, ~/.kube/config)",
                     "context", g->context ? g->context : "(current)", "server", server,
                     "namespace", g->ns, "maxSize", (json_int_t)g->max_size);
}

static int collect(struct run *r, struct err *e)
{
    int rc;
    /* the namespace first: the first call says whether the API server answers at all */
    char path[160], what[128];
    snprintf(path, sizeof(path), "namespaces/%s/namespace.yaml", r->g->ns);
    snprintf(what, sizeof(what), "namespace %s", r->g->ns);
    json_t *nsobj = NULL;
    struct err ee = {0};
    if (kube_get(r->kc, &KUBE_NAMESPACES, NULL, r->g->ns, &nsobj, &ee) < 0)
        api_failed(r, path, &ee, false);
    else if ((rc = add_yaml(r, path, nsobj, what, e)) < 0) {
        json_decref(nsobj);
        return rc;
    }
    json_decref(nsobj);
    if ((rc = collect_sources(r, e)) < 0 || (rc = collect_nodes(r, e)) < 0 ||
        (rc = collect_status(r, e)) < 0 || (rc = collect_events(r, e)) < 0)
        return rc;
    if (r->g->doctor && (rc = collect_doctor(r, e)) < 0)
        return rc;
    return collect_logs(r, e);
}

/* The bundle from a client (crc: its creation's result, ce its error), written to path. */
static int bundle(struct run *r, int crc, const struct err *ce, const char *path, const char *root,
                  struct err *e)
{
    const struct gather *g = r->g;
    char server[512] = "unknown";
    if (r->kc)
        gather_redact_url(kube_client_server(r->kc), server, sizeof(server));
    _cleanup_(json_decrefp) json_t *facts = facts_of(g, server, r->now_ms);
    struct gather_bundle_opts bo = {
        .root = root, .max_size = g->max_size, .now_ms = r->now_ms, .facts = facts};
    int rc = gather_bundle_new(&bo, &r->b, e);
    if (rc < 0)
        return rc;
    struct sbuf y _cleanup_sbuf_;
    sbuf_init(&y, 1 << 20);
    if ((rc = yaml_emit(facts, &y, e)) < 0 ||
        (rc = add(r, "local.yaml", y.data, y.len,
                  "gpuop's version, the command, the API server (no credentials)", 0, e)) < 0)
        return rc;
    if (crc < 0) {
        r->down = true;
        snprintf(r->down_why, sizeof(r->down_why), "not read: no API client (%s)", err_msg(ce));
        gather_bundle_missing(r->b, "the cluster", "no API client: %s", err_msg(ce));
        log_warn(COMPONENT, "no API client", "error=\"%s\"", err_msg(ce));
    } else if ((rc = collect(r, e)) < 0) {
        return rc;
    } else if (r->down) {
        gather_bundle_missing(r->b, "the cluster", "%s", r->down_why);
    }
    size_t files = 0, missing = 0;
    gather_bundle_counts(r->b, &files, &missing);
    _cleanup_free_ char *data = NULL;
    size_t len = 0;
    if ((rc = gather_bundle_finish(r->b, &data, &len, e)) < 0 ||
        (rc = file_write_atomic(path, data, len, 0600, e)) < 0)
        return rc;
    log_info(COMPONENT, "bundle written", "path=%s bytes=%zu files=%zu not_collected=%zu", path,
             len, files, missing);
    printf("%s\n", path);
    if (fflush(stdout) != 0)
        return err_errno(e, -errno, "write to stdout");
    return 0;
}

static int gather_run(struct svc *s, struct err *e)
{
    struct gather *g = svc_state(s);
    struct run r = {.s = s, .g = g, .now_ms = now_ms_real()};
    char path[PATH_MAX], root[96];
    output_of(g, r.now_ms, path, sizeof(path), root, sizeof(root));
    /* a folder that cannot take the bundle fails now, not after the collection */
    _cleanup_free_ char *dir = xstrdup(path);
    char *slash = strrchr(dir, '/');
    if (slash)
        slash[slash == dir ? 1 : 0] = '\0';
    if (access(slash ? dir : ".", W_OK) < 0)
        return err_errno(e, -errno, "write the bundle into \"%s\"", slash ? dir : ".");

    struct err ce = {0};
    struct kube_options ko =
        kube_options_for(KUBE_CALLER_COMMAND, g->kubeconfig, g->context, svc_stop(s));
    ko.max_retries = 2; /* an API server that does not answer is said, not waited for long */
    int crc = kube_client_new(&ko, &r.kc, &ce);
    if (crc == 0 && g->doctor) {
        struct kube_options ko2 = ko;
        ko2.stop = NULL; /* the doctor pods' removal outlives a stop */
        crc = kube_client_new(&ko2, &r.kc2, &ce);
    }
    r.nodes = json_array();
    r.policies = json_array();
    r.drivers = json_array();
    r.pods = json_array();
    r.deployments = json_array();
    int rc = bundle(&r, crc, &ce, path, root, e);
    gather_bundle_free(r.b);
    kube_client_free(r.kc);
    kube_client_free(r.kc2);
    json_decref(r.nodes);
    json_decref(r.policies);
    json_decref(r.drivers);
    json_decref(r.pods);
    json_decref(r.deployments);
    return rc;
}

const struct svc_component gather_component = {
    .name = "gather",
    .usage =
        "Usage: gpuop gather [--output FILE] [--doctor] [--namespace NS] [--since DUR]\n"
        "                    [--max-size SIZE] [flags]\n"
        "       kubectl gpuop gather [...]\n\n"
        "One support bundle (a .tar.gz) to attach to a bug report: gpuop status -o json, the\n"
        "ClusterPolicies and NVIDIADrivers, every gpuop object in YAML, each GPU node's labels,\n"
        "annotations and conditions, the namespace's Events and its pods' recent logs, and with\n"
        "--doctor `gpuop doctor --json` from every GPU node. Secrets are never read; credentials\n"
        "are replaced by <redacted>. The bundle stays under --max-size; its MANIFEST lists what\n"
        "it holds and what it could not collect, and why. It prints the bundle's path.\n",
    .epilogue = "Exit: 0 the bundle was written (even partial: an API server that cannot be\n"
                "reached still gives the local facts), 1 nothing could be written, 2 bad flags.\n",
    .options = {gather_options},
    .state_size = sizeof(struct gather),
    .defaults = gather_defaults,
    .configure = gather_configure,
    .run = gather_run,
};
