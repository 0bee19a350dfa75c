/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpuop operator: the I/O shell around the pure core. Informers keep the ClusterPolicies, the
 * nodes and everything gpuop owns in memory; one reconcile thread (reconcile.c) plans from them
 * and writes only the differences (a converged cluster costs no writes); a Lease makes sure only
 * one replica writes. This file is the component: the options, the work queue and its
 * reconcile loop; the informers are informers.c's, the Lease leader.c's, /metrics
 * metrics-http.c's.
 */
#include <malloc.h>
#include <pthread.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#include "http.h"
#include "kube.h"
#include "op-cli.h"
#include "alloc-ctl.h"
#include "op-controller.h"
#include "op-gpuquota.h"
#include "operator.h"
#include "svc.h"
#include "upgrade-ctl.h"

#define COMPONENT "operator"

#define RETRY_BASE_MS             100   /* failed reconcile: 100 ms doubling ... */
#define RETRY_MAX_MS              3000  /* ... to 3 s */
#define REQUEUE_MS                5000  /* not ready yet: look again */
#define SERVICEMONITOR_RECHECK_MS 30000 /* the informer's longest backoff between lists */

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
    o->c.psa_record = -1; /* the namespace is read once to learn it */
    o->c.written_nvds = json_object();
    o->c.written_gcs = json_object();
    o->c.recorder = op_recorder_new(NULL);
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
    kube_client_free(c->lease_kc);
    http_server_free(c->http);
    op_remediation_free(c->rem); /* first: it borrows the upgrade controller's informers */
    op_upgrade_free(c->upg);
    op_informers_free(c);
    op_gpuquota_clear(&c->gq);
    svc_workqueue_free(c->queue);
    op_templates_free(c->templates);
    json_decref(c->written);
    json_decref(c->written_nvds);
    json_decref(c->written_gcs);
    op_recorder_free(c->recorder);
    op_write_errors_done(&c->write_errors);
    kube_client_free(c->kc);
    pthread_mutex_destroy(&c->lock);
    free(o->id);
    free(o->default_image);
}

/* ---- run ---------------------------------------------------------------------------------- */

/* The Lease this replica takes (leader election off: it leads). */
static int start_leader(struct op_process *o, struct svc *s, struct err *e)
{
    if (o->elect) {
        struct kube_options ko = {.kubeconfig = o->kubeconfig,
                                  .qps = (double)o->qps,
                                  .burst = o->burst,
                                  .stop = svc_stop(s)};
        int r = kube_client_new(&ko, &o->c.lease_kc, e);
        if (r < 0)
            return err_prefix(e, "the leader election's client");
    }
    struct kube_leader_opts lo = {.ns = o->c.ns,
                                  .name = o->lease_name,
                                  .identity = o->id,
                                  .lease_ms = o->lease_ms,
                                  .renew_ms = o->renew_ms,
                                  .retry_ms = o->retry_ms};
    return op_leader_start(&o->c, o->elect ? &lo : NULL, e);
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
    if (r == KUBE_ECONFLICT) {
        /* A write raced another writer of the same object (the remediation controller's
         * annotation on the ClusterPolicy, an administrator): not a failure; the next pass plans
         * from the object as it now is. */
        log_info(COMPONENT, "reconcile conflicted with a newer write, again", "error=\"%s\"",
                 err_msg(&re));
        svc_workqueue_add_rate_limited(c->queue, key);
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
    /* a ServiceMonitor waits for its CRD: look again as often as its informer lists */
    if (c->servicemonitor_wait)
        svc_workqueue_add_after(c->queue, key, SERVICEMONITOR_RECHECK_MS);
    uint64_t upg_ms = op_upgrade_requeue_ms(c->upg); /* a timeout, a soak, a window */
    if (upg_ms)
        svc_workqueue_add_after(c->queue, key, upg_ms);
    uint64_t rem_ms = op_remediation_requeue_ms(c->rem); /* a drain, a request, a timeout */
    if (rem_ms)
        svc_workqueue_add_after(c->queue, key, rem_ms);
    uint64_t alloc_ms = op_alloc_requeue_ms(c); /* a node moving between plugins */
    if (alloc_ms)
        svc_workqueue_add_after(c->queue, key, alloc_ms);
}

static int operator_run(struct svc *s, struct err *e)
{
    /* One malloc arena: the operator's threads (an informer per resource, the reconcile loop)
     * are I/O bound, and an arena per thread kept the peak of each one's list parsing
     * (bench/operator at 2,000 nodes: 83 MiB RSS with one arena per thread, 67 MiB with one). */
    mallopt(M_ARENA_MAX, 1);
    /* Buffers of 64 KiB and more (list pages, large bodies) mapped on their own and returned
     * when freed, never holes among the informers' small long-lived objects; a fixed threshold
     * also keeps glibc from raising it after the first large free */
    mallopt(M_MMAP_THRESHOLD, 64 * 1024);
    struct op_process *o = svc_state(s);
    struct controller *c = &o->c;
    /* what no informer reader of the operator reads, left out before the informers' items and
     * events are decoded: writers' managedFields (the API server keeps them when an update
     * omits them) and a node's status.images (~75% of a real node's bytes together) */
    static const char *const unread[] = {"metadata.managedFields", "status.images", NULL};
    struct kube_options ko = {.kubeconfig = o->kubeconfig,
                              .qps = (double)o->qps,
                              .burst = o->burst,
                              .stop = svc_stop(s),
                              .drop_fields = unread};
    struct svc_workqueue_config qc = {.base_delay_ms = RETRY_BASE_MS, .max_delay_ms = RETRY_MAX_MS};
    int r;
    if ((r = kube_client_new(&ko, &c->kc, e)) < 0 ||
        (r = svc_workqueue_new(&qc, svc_stop(s), &c->queue, e)) < 0 ||
        (r = op_templates_builtin(&c->templates, e)) < 0 ||
        (o->templates_dir && (r = op_templates_load_dir(c->templates, o->templates_dir, e)) < 0) ||
        (r = op_informers_start(c, e)) < 0 || (r = op_metrics_serve(c, o->metrics_listen, e)) < 0 ||
        (r = op_informers_wait_synced(c, s, e)) != 0)
        return r < 0 ? r : 0;
    log_info(COMPONENT, "caches synced", "namespace=%s identity=%s", c->ns, o->id);
    if ((r = start_leader(o, s, e)) < 0)
        return r;
    pthread_mutex_lock(&c->lock);
    c->ready = true; /* synced; a passive replica is ready to take over */
    pthread_mutex_unlock(&c->lock);
    op_mark_dirty(c);
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
