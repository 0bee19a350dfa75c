/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpuop operator: the I/O shell around the pure core. Informers keep the ClusterPolicies, the
 * nodes and everything gpuop owns in memory; one reconcile thread (reconcile.c) plans from them
 * and writes only the differences (a converged cluster costs no writes); a Lease makes sure only
 * one replica writes. This file is the component: informers, leader election, the work queue,
 * /metrics and the options.
 */
#include <malloc.h>
#include <pthread.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#include "http.h"
#include "kube.h"
#include "op-cli.h"
#include "op-controller.h"
#include "op-gpuquota.h"
#include "operator-internal.h"
#include "operator.h"
#include "prom.h"
#include "svc.h"
#include "upgrade-ctl.h"
#include "upgrade.h"
#include "yamlcfg.h"

#define COMPONENT "operator"

/* The one work-queue key: a reconcile covers every ClusterPolicy and what they own. */
#define RECONCILE_KEY "cluster"
#define RETRY_BASE_MS 100  /* failed reconcile: 100 ms doubling ... */
#define RETRY_MAX_MS  3000 /* ... to 3 s */
#define REQUEUE_MS    5000 /* not ready yet: look again */

/* The component's state: the options, then the controller. */
struct op_process {
    const char *kubeconfig, *ns, *operand_image, *templates_dir, *metrics_listen;
    const char *leader_elect, *lease_name, *identity;
    const char *overcommit_ratio;
    struct svc_strings gpu_pools;
    uint64_t lease_ms, renew_ms, retry_ms, qps;
    unsigned burst;
    bool elect;
    char *id, *default_image;
    struct controller c;
};

static void mark_dirty(struct controller *c)
{
    svc_workqueue_add(c->queue, RECONCILE_KEY);
}

static int upg_may_write(void *u, struct err *e)
{
    return op_check_leader(u, e);
}
static void upg_wrote(void *u)
{
    op_count_write(u);
}
static void upg_dirty(void *u)
{
    mark_dirty(u);
}

static void h_add(json_t *obj, void *u)
{
    (void)obj;
    mark_dirty(u);
}
static void h_update(json_t *old, json_t *obj, void *u)
{
    (void)old;
    (void)obj;
    mark_dirty(u);
}
static void h_delete(json_t *obj, void *u)
{
    (void)obj;
    mark_dirty(u);
}

/* ---- metrics and health ------------------------------------------------------------------- */

static int h_metrics(const struct http_request *req, struct http_response *resp, void *u)
{
    struct controller *c = u;
    pthread_mutex_lock(&c->lock);
    struct metrics m = c->m;
    bool leader = c->leader;
    pthread_mutex_unlock(&c->lock);
    enum prom_format f = prom_negotiate(req->accept);
    struct sbuf b;
    sbuf_init(&b, 8u << 20); /* the GPU quota families grow with pools and namespaces */
    struct prom_writer w;
    prom_writer_init(&w, &b, f);
    prom_metric_u64(&w, "gpu_operator_reconciliation_total", PROM_COUNTER, "Reconciliations run",
                    m.reconciliations);
    prom_metric_u64(&w, "gpu_operator_reconciliation_failed_total", PROM_COUNTER,
                    "Reconciliations that failed", m.failed);
    prom_metric(&w, "gpu_operator_reconciliation_last_success_ts_seconds", PROM_GAUGE,
                "Time of the last successful reconciliation", (double)m.last_success_ms / 1000.0);
    prom_metric(&w, "gpu_operator_reconciliation_status", PROM_GAUGE,
                "1 ready, 0 not ready, -1 failed or invalid policy", m.status);
    prom_metric(&w, "gpu_operator_gpu_nodes_total", PROM_GAUGE, "GPU nodes seen", m.gpu_nodes);
    prom_metric_u64(&w, "gpuop_operator_api_writes_total", PROM_COUNTER,
                    "Write calls made to the API server", m.writes);
    prom_metric(&w, "gpuop_operator_leader", PROM_GAUGE, "1 when this replica leads",
                leader ? 1 : 0);
    op_gpuquota_write_metrics(&c->gq, &w);
    op_upgrade_metrics(c->upg, &w);
    int r = prom_writer_finish(&w);
    if (r < 0) {
        sbuf_free(&b);
        return r; /* a truncated page is no page */
    }
    size_t len = b.len;
    http_response_take(resp, 200, prom_content_type(f), sbuf_steal(&b), len);
    return 0;
}

static int h_healthz(const struct http_request *req, struct http_response *resp, void *u)
{
    (void)req;
    (void)u;
    http_response_static(resp, 200, HTTP_CT_TEXT, "ok\n");
    return 0;
}

static int h_readyz(const struct http_request *req, struct http_response *resp, void *u)
{
    (void)req;
    struct controller *c = u;
    pthread_mutex_lock(&c->lock);
    bool ready = c->ready;
    pthread_mutex_unlock(&c->lock);
    http_response_static(resp, ready ? 200 : 503, HTTP_CT_TEXT, ready ? "ok\n" : "not ready\n");
    return 0;
}

/* ---- leader election ---------------------------------------------------------------------- */

static void on_started(void *u)
{
    struct controller *c = u;
    log_info(COMPONENT, "became leader", NULL);
    pthread_mutex_lock(&c->lock);
    c->leader = true;
    pthread_mutex_unlock(&c->lock);
    mark_dirty(c);
}

static void on_stopped(void *u)
{
    struct controller *c = u;
    log_warn(COMPONENT, "lost leadership; stopping writes", NULL);
    pthread_mutex_lock(&c->lock);
    c->leader = false;
    pthread_mutex_unlock(&c->lock);
}

static void on_new_leader(const char *identity, void *u)
{
    (void)u;
    log_info(COMPONENT, "leader", "identity=%s", identity ? identity : "");
}

/* ---- main --------------------------------------------------------------------------------- */

static void *informer_free_thread(void *inf)
{
    kube_informer_free(inf);
    return NULL;
}

/* Each informer takes up to a watch poll interval to stop; stopping them one after another made
 * shutdown take ~10 s. Stop them all at once. */
#define N_INFORMERS (5 + N_OWNED) /* policies, nodes, owned, pods, quotas, nvidiadrivers */
static void informers_free(struct kube_informer **infs, size_t n)
{
    pthread_t th[N_INFORMERS];
    bool started[N_INFORMERS];
    if (n > N_INFORMERS)
        n = N_INFORMERS;
    for (size_t k = 0; k < n; k++) {
        started[k] = infs[k] && pthread_create(&th[k], NULL, informer_free_thread, infs[k]) == 0;
        if (!started[k])
            kube_informer_free(infs[k]);
    }
    for (size_t k = 0; k < n; k++)
        if (started[k])
            pthread_join(th[k], NULL);
}

/* ---- options ------------------------------------------------------------------------------ */

static int check_bool(const void *dst, const char *source, struct err *e)
{
    bool b;
    if (parse_bool(*(const char *const *)dst, &b) < 0)
        return err_set(e, -EINVAL, "%s: not a boolean", source);
    return 0;
}

#define X(m) offsetof(struct op_process, m)
static const struct svc_option operator_options[] = {
    {.kind = SVC_FRAGMENT, .fragment = svc_kubeconfig_option, .off = X(kubeconfig)},
    {.kind = SVC_FRAGMENT, .fragment = op_namespace_option, .off = X(ns)},
    {.kind = SVC_FRAGMENT, .fragment = op_operand_image_option, .off = X(operand_image)},
    {.kind = SVC_FRAGMENT, .fragment = op_operand_templates_option, .off = X(templates_dir)},
    {.flag = "metrics-listen",
     .kind = SVC_STRING,
     .off = X(metrics_listen),
     .metavar = "ADDR",
     .help = "/metrics, /healthz, /readyz (default :8080; \"\" off)"},
    {.flag = "leader-elect",
     .kind = SVC_STRING,
     .off = X(leader_elect),
     .metavar = "BOOL",
     .check = check_bool,
     .help = "Lease-based leader election (default true)"},
    {.flag = "leader-election-id",
     .kind = SVC_STRING,
     .off = X(lease_name),
     .metavar = "NAME",
     .help = "the Lease's name (default gpuop-operator)"},
    {.flag = "identity",
     .env = "POD_NAME",
     .kind = SVC_STRING,
     .off = X(identity),
     .metavar = "ID",
     .help = "this replica's identity (default: the host name)"},
    {.flag = "leader-lease-duration",
     .kind = SVC_DURATION,
     .min = 1,
     .finite = true,
     .off = X(lease_ms),
     .metavar = "D",
     .expect = "expected a positive duration",
     .help = "how long others wait after the last renewal (default 15s)"},
    {.flag = "leader-renew-deadline",
     .kind = SVC_DURATION,
     .min = 1,
     .finite = true,
     .off = X(renew_ms),
     .metavar = "D",
     .expect = "expected a positive duration",
     .help = "the leader stops writing when it could not renew for this\n"
             "long (default 10s; less than the lease duration)"},
    {.flag = "leader-retry-period",
     .kind = SVC_DURATION,
     .min = 1,
     .finite = true,
     .off = X(retry_ms),
     .metavar = "D",
     .expect = "expected a positive duration",
     .help = "period of lease attempts (default 2s)"},
    {.flag = "kube-qps",
     .kind = SVC_U64,
     .min = 1,
     .max = 100000,
     .off = X(qps),
     .metavar = "N",
     .expect = "expected a positive number",
     .help = "client-side rate limit (default 50)"},
    {.flag = "gpu-pool",
     .kind = SVC_STRINGS,
     .off = X(gpu_pools),
     .metavar = "NAME:K=V[,K=V]",
     .help = "a GPU pool of the capacity-and-quota view: the nodes with\n"
             "these labels (repeatable; default: one pool per\n"
             "nvidia.com/gpu.product)"},
    {.flag = "gpu-quota-overcommit-ratio",
     .env = "GPUOP_GPU_QUOTA_OVERCOMMIT_RATIO",
     .kind = SVC_STRING,
     .off = X(overcommit_ratio),
     .metavar = "R",
     .help = "report when namespace GPU quotas pass R times the GPUs\n"
             "advertised (default 1.0)"},
    {.flag = "kube-burst",
     .kind = SVC_UINT,
     .min = 1,
     .off = X(burst),
     .metavar = "N",
     .expect = "expected a positive number",
     .help = "client-side burst (default 100)"},
    {0},
};
#undef X

static void operator_defaults(void *state)
{
    struct op_process *o = state;
    o->ns = "gpu-operator";
    o->metrics_listen = ":8080";
    o->leader_elect = "true";
    o->lease_name = "gpuop-operator";
    o->lease_ms = 15000;
    o->renew_ms = 10000;
    o->retry_ms = 2000;
    o->qps = 50;
    o->burst = 100;
    o->c.written = json_object();
    o->c.written_nvds = json_object();
    pthread_mutex_init(&o->c.lock, NULL);
}

static int operator_configure(struct svc *s, struct err *e)
{
    struct op_process *o = svc_state(s);
    bool elect = true;
    parse_bool(o->leader_elect, &elect); /* checked with the option */
    o->elect = elect;
    if (!(o->retry_ms < o->renew_ms && o->renew_ms < o->lease_ms))
        return err_set(e, -EINVAL,
                       "leader election needs --leader-retry-period < --leader-renew-deadline < "
                       "--leader-lease-duration (%llu/%llu/%llu ms)",
                       (unsigned long long)o->retry_ms, (unsigned long long)o->renew_ms,
                       (unsigned long long)o->lease_ms);
    char host[256] = "gpuop-operator";
    gethostname(host, sizeof(host) - 1);
    o->id = xstrdup(o->identity ? o->identity : host);
    o->default_image = xasprintf("gpuop:%s", GPUOP_VERSION);
    o->c.ns = o->ns;
    o->c.defaults.namespace = o->ns;
    o->c.defaults.operand_image = o->operand_image ? o->operand_image : o->default_image;
    return op_gpuquota_configure(&o->c.gq, o->gpu_pools.v, o->gpu_pools.n, o->overcommit_ratio, e);
}

static void operator_cleanup(void *state)
{
    struct op_process *o = state;
    struct controller *c = &o->c;
    kube_leader_free(c->leader_elector); /* first: the Lease is released before anything else */
    http_server_free(c->http);
    op_upgrade_free(c->upg);
    struct kube_informer *infs[N_INFORMERS] = {c->nodes, c->policies};
    for (size_t k = 0; k < N_OWNED; k++)
        infs[2 + k] = c->owned[k];
    infs[2 + N_OWNED] = c->gq.pods;
    infs[3 + N_OWNED] = c->gq.quotas;
    infs[4 + N_OWNED] = c->nvds;
    informers_free(infs, ARRAY_SIZE(infs));
    op_gpuquota_clear(&c->gq);
    svc_workqueue_free(c->queue);
    op_templates_free(c->templates);
    json_decref(c->written);
    json_decref(c->written_nvds);
    op_write_errors_done(&c->write_errors);
    kube_client_free(c->kc);
    pthread_mutex_destroy(&c->lock);
    free(o->id);
    free(o->default_image);
}

/* ---- run ---------------------------------------------------------------------------------- */

/* What the node informer keeps of a node: its labels, the node agents' annotations and what the
 * GPU capacity view reads (allocatable, capacity, cordon, Ready), so a
 * heartbeat changes nothing kept (no reconcile) and an agent's finding does (a reconcile). */
static json_t *project_node(json_t *obj, void *userdata)
{
    (void)userdata;
    static const char *const node_fields[] = {"metadata.labels", NULL};
    json_t *p = kube_project_fields(obj, node_fields);
    const char *k;
    json_t *v;
    json_object_foreach (kobj_annotations(obj), k, v) {
        if (op_node_annotation_watched(k))
            json_object_set(
                kobj_ensure_keys(p, (const char *const[]){"metadata", "annotations", NULL}), k, v);
    }
    op_gpuquota_project_node(obj, p);
    upg_project_node(obj, p); /* the upgrade controller reads this informer too */
    return p;
}

static int start_informers(struct controller *c, struct err *e)
{
    struct kube_informer_handlers hh = {h_add, h_update, h_delete, c};
    struct kube_informer_opts po = {.handlers = hh};
    /* nothing queries nodes by label: no label index (about 2.5 KiB per node at NFD's labels) */
    static const char *const no_index[] = {NULL};
    struct kube_informer_opts no = {
        .project = project_node, .index_label_keys = no_index, .handlers = hh};
    int r;
    if ((r = kube_informer_new(c->kc, &RES_CLUSTERPOLICIES, &po, &c->policies, e)) < 0 ||
        (r = kube_informer_new(c->kc, &KUBE_NODES, &no, &c->nodes, e)) < 0 ||
        (r = kube_informer_new(c->kc, &RES_NVIDIADRIVERS, &po, &c->nvds, e)) < 0)
        return r;
    for (size_t k = 0; k < N_OWNED; k++) {
        struct kube_informer_opts oo = {.ns = owned_kinds[k]->namespaced ? c->ns : NULL,
                                        .label_selector =
                                            "app.kubernetes.io/managed-by=" OP_MANAGED_BY,
                                        .handlers = hh};
        if ((r = kube_informer_new(c->kc, owned_kinds[k], &oo, &c->owned[k], e)) < 0)
            return r;
    }
    if ((r = op_gpuquota_start(&c->gq, c->kc, &hh, e)) < 0)
        return r;
    struct op_upgrade_hooks uh = {upg_may_write, upg_wrote, upg_dirty, c};
    return op_upgrade_new(c->kc, c->ns, c->nodes, &uh, &c->upg, e);
}

static int start_metrics(struct controller *c, const char *listen, struct err *e)
{
    if (!listen || !*listen)
        return 0;
    struct http_route routes[] = {
        {"/metrics", h_metrics, c},
        {"/healthz", h_healthz, c},
        {"/readyz", h_readyz, c},
    };
    struct http_config hc = {.listen = listen, .routes = routes, .n_routes = ARRAY_SIZE(routes)};
    return http_server_new(&hc, &c->http, e);
}

/* 0 once every informer listed, 1 when stopped first, -ETIMEDOUT after 60 s. */
static int wait_synced(struct controller *c, struct svc *s, struct err *e)
{
    uint64_t deadline = deadline_after(60000);
    struct kube_informer *all[N_INFORMERS - 1] = {c->policies, c->nodes}; /* not nvds */
    for (size_t k = 0; k < N_OWNED; k++)
        all[2 + k] = c->owned[k];
    all[2 + N_OWNED] = c->gq.pods;
    all[3 + N_OWNED] = c->gq.quotas;
    for (size_t k = 0; k < ARRAY_SIZE(all); k++) {
        /* Short waits: the stop is looked at between them. */
        while (kube_informer_wait_synced(all[k], 100) < 0) {
            if (svc_stopped(s))
                return 1;
            if (deadline_left_ms(deadline) == 0)
                return err_set(e, -ETIMEDOUT, "informers did not sync within 60 s");
        }
    }
    return 0;
}

static int start_leader(struct op_process *o, struct err *e)
{
    struct controller *c = &o->c;
    if (!o->elect) {
        c->leader = true;
        return 0;
    }
    struct kube_leader_opts lo = {.ns = c->ns,
                                  .name = o->lease_name,
                                  .identity = o->id,
                                  .lease_ms = o->lease_ms,
                                  .renew_ms = o->renew_ms,
                                  .retry_ms = o->retry_ms,
                                  .on_started = on_started,
                                  .on_stopped = on_stopped,
                                  .on_new_leader = on_new_leader,
                                  .userdata = c};
    return kube_leader_new(c->kc, &lo, &c->leader_elector, e);
}

/* One pass of the work queue's key: reconcile, then requeue as the result says. */
static void reconcile_key(struct controller *c, struct svc *s, const char *key)
{
    pthread_mutex_lock(&c->lock);
    bool leader = c->leader;
    pthread_mutex_unlock(&c->lock);
    if (!leader)
        return; /* becoming the leader queues it again */
    bool requeue = false;
    struct err re = {0};
    uint64_t t0 = now_ms_mono();
    int r = op_reconcile(c, &requeue, &re);
    if (svc_stopped(s))
        return;
    if (r == -ECANCELED) {
        /* Lost the lease mid-way: stop here; the new leader (or this one, when it leads
         * again) reconciles from the cluster's state. */
        log_warn(COMPONENT, "reconcile stopped", "error=\"%s\"", err_msg(&re));
        return;
    }
    pthread_mutex_lock(&c->lock);
    c->m.reconciliations++;
    if (r < 0) {
        c->m.failed++;
        c->m.status = -1;
    } else {
        c->m.last_success_ms = now_ms_real();
    }
    pthread_mutex_unlock(&c->lock);
    if (r < 0) {
        /* Rate-limited retry: 100 ms doubling to 3 s. */
        log_error(COMPONENT, "reconcile failed", "error=\"%s\" retry_ms=%llu", err_msg(&re),
                  (unsigned long long)svc_backoff_ms(RETRY_BASE_MS, RETRY_MAX_MS,
                                                     svc_workqueue_failures(c->queue, key)));
        svc_workqueue_add_rate_limited(c->queue, key);
        return;
    }
    svc_workqueue_forget(c->queue, key);
    log_debug(COMPONENT, "reconciled", "ms=%llu requeue=%d",
              (unsigned long long)(now_ms_mono() - t0), requeue);
    /* Not ready yet: look again in 5 s even without events, as NVIDIA's operator does.
     * DaemonSet status changes arrive as events before that anyway. */
    if (requeue)
        svc_workqueue_add_after(c->queue, key, REQUEUE_MS);
    uint64_t upg_ms = op_upgrade_requeue_ms(c->upg); /* a timeout, a soak, a window */
    if (upg_ms)
        svc_workqueue_add_after(c->queue, key, upg_ms);
}

static int operator_run(struct svc *s, struct err *e)
{
    /* One malloc arena: the operator's threads (an informer per resource, the reconcile loop)
     * are I/O bound, and an arena per thread kept the peak of each one's list parsing
     * (bench/operator at 2,000 nodes: 83 MiB RSS with one arena per thread, 67 MiB with one). */
    mallopt(M_ARENA_MAX, 1);
    struct op_process *o = svc_state(s);
    struct controller *c = &o->c;
    struct kube_options ko = {
        .kubeconfig = o->kubeconfig, .qps = (double)o->qps, .burst = o->burst, .stop = svc_stop(s)};
    struct svc_workqueue_config qc = {.base_delay_ms = RETRY_BASE_MS, .max_delay_ms = RETRY_MAX_MS};
    int r;
    if ((r = kube_client_new(&ko, &c->kc, e)) < 0 ||
        (r = svc_workqueue_new(&qc, svc_stop(s), &c->queue, e)) < 0 ||
        (r = op_templates_builtin(&c->templates, e)) < 0 ||
        (o->templates_dir && (r = op_templates_load_dir(c->templates, o->templates_dir, e)) < 0) ||
        (r = start_informers(c, e)) < 0 || (r = start_metrics(c, o->metrics_listen, e)) < 0 ||
        (r = wait_synced(c, s, e)) != 0)
        return r < 0 ? r : 0;
    log_info(COMPONENT, "caches synced", "namespace=%s identity=%s", c->ns, o->id);
    if ((r = start_leader(o, e)) < 0)
        return r;
    pthread_mutex_lock(&c->lock);
    c->ready = true; /* synced; a passive replica is ready to take over */
    pthread_mutex_unlock(&c->lock);
    mark_dirty(c);
    for (;;) {
        _cleanup_free_ char *key = NULL;
        if (svc_workqueue_get(c->queue, DEADLINE_NEVER, &key) < 0)
            break; /* -ECANCELED: stopped */
        reconcile_key(c, s, key);
        svc_workqueue_done(c->queue, key);
    }
    log_info(COMPONENT, "stopping", NULL);
    return 0;
}

const struct svc_component operator_component = {
    .name = COMPONENT,
    .usage = "Usage: gpuop operator [flags]\n"
             "       gpuop operator render --policy FILE [flags]\n\n"
             "The control plane: reconciles the ClusterPolicy (nvidia.com/v1) into the GPU stack "
             "on\n"
             "every GPU node (node labels, operand DaemonSets, RBAC, RuntimeClass, status).\n",
    .verbs = {&op_render_component, &op_apply_crds_component, &op_uninstall_component},
    .flags_title = "Flags (environment variable in brackets; a flag wins over its variable):",
    .options = {operator_options},
    .epilogue = "Signals: SIGTERM, SIGINT and SIGQUIT exit 0 within 2 s whatever the API server "
                "does\n"
                "(the leader releases its Lease when the API server answers within 1 s); SIGHUP "
                "is\n"
                "logged and ignored.\n",
    .state_size = sizeof(struct op_process),
    .defaults = operator_defaults,
    .configure = operator_configure,
    .run = operator_run,
    .cleanup = operator_cleanup,
};
