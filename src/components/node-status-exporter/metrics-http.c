/* SPDX-License-Identifier: Apache-2.0 */
/* The node status exporter's pages over HTTP: the last observation's pages, rendered by the core
 * (nst_render_pages) and swapped in under the lock; a scrape copies one out. */
#include <string.h>

#include "http.h"
#include "node-status-exporter-internal.h"

#define PAGE_LIMIT (1u << 20)

int nse_pages_update(struct nse *x, struct err *e)
{
    char *t = NULL, *m = NULL;
    int r = nst_render_pages(&x->report, PAGE_LIMIT, &t, &m, e);
    if (r < 0)
        return r;
    pthread_mutex_lock(&x->lock);
    char *old_t = x->text, *old_m = x->om;
    x->text = t;
    x->om = m;
    pthread_mutex_unlock(&x->lock);
    free(old_t);
    free(old_m);
    return 0;
}

static int handle_metrics(const struct http_request *req, struct http_response *resp, void *ud)
{
    struct nse *x = ud;
    enum prom_format f = prom_negotiate(req->accept);
    pthread_mutex_lock(&x->lock);
    const char *page = f == PROM_FORMAT_OPENMETRICS ? x->om : x->text;
    if (page)
        http_response_copy(resp, 200, prom_content_type(f), page, strlen(page));
    else
        http_response_static(resp, 503, HTTP_CT_TEXT, "no observation yet\n");
    pthread_mutex_unlock(&x->lock);
    return 0;
}

static int handle_health(const struct http_request *req, struct http_response *resp, void *ud)
{
    struct nse *x = ud;
    (void)req;
    pthread_mutex_lock(&x->lock);
    bool ok = x->text != NULL;
    pthread_mutex_unlock(&x->lock);
    http_response_static(resp, ok ? 200 : 503, HTTP_CT_TEXT, ok ? "OK\n" : "no observation yet\n");
    return 0;
}

int nse_http_open(struct nse *x, struct http_server **ret, struct err *e)
{
    struct http_route routes[] = {{"/metrics", handle_metrics, x}, {"/health", handle_health, x}};
    struct http_config hc = {.listen = x->listen,
                             .routes = routes,
                             .n_routes = ARRAY_SIZE(routes),
                             .request_limit = 8192};
    return http_server_new(&hc, ret, e);
}
