/* SPDX-License-Identifier: Apache-2.0 */
/* The operator's HTTP endpoints (op-controller.h): /metrics (the reconciles, the writes, the
 * lease, the GPU quota view, the driver upgrades and the GPU remediation), /healthz and /readyz. */
#include <pthread.h>

#include "op-controller.h"
#include "prom.h"
#include "upgrade-ctl.h"

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
    op_remediation_metrics(c->rem, &w);
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

int op_metrics_serve(struct controller *c, const char *listen, struct err *e)
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
