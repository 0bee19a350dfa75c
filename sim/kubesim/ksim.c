/* SPDX-License-Identifier: Apache-2.0 */
/* A ksim's life: construction (types, store, the built-in namespaces), the controller pass,
 * shutdown and metrics. The top of the core: it calls every layer and no layer calls it. */
#include <inttypes.h>
#include <string.h>

#include "ks-auth.h"
#include "ks-controllers.h"
#include "prom.h"

uint64_t ksim_resource_version(struct ksim *ks)
{
    pthread_mutex_lock(&ks->lock);
    uint64_t rv = ks->rv;
    pthread_mutex_unlock(&ks->lock);
    return rv;
}

void ksim_opts_default(struct ksim_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->watch_retention_ms = 5 * 60 * 1000;
    o->pod_ready_delay_ms = 1000;
    o->bookmark_interval_ms = 60 * 1000;
    o->max_body = 3u << 20;
    o->max_events = 1u << 20;
    o->max_pods_per_owner = KS_MAX_PODS_PER_OWNER;
    o->daemon_burst = KS_DAEMON_BURST;
}

struct ksim *ksim_new(const struct ksim_opts *o)
{
    struct ksim *ks = xcalloc(1, sizeof(*ks));
    if (o)
        ks->opts = *o;
    else
        ksim_opts_default(&ks->opts);
    if (!ks->opts.max_events)
        ks->opts.max_events = 1u << 20;
    if (!ks->opts.max_body)
        ks->opts.max_body = 3u << 20;
    if (!ks->opts.max_pods_per_owner)
        ks->opts.max_pods_per_owner = KS_MAX_PODS_PER_OWNER;
    if (!ks->opts.daemon_burst)
        ks->opts.daemon_burst = KS_DAEMON_BURST;
    if (!ks->opts.bookmark_interval_ms)
        ks->opts.bookmark_interval_ms = 60 * 1000;
    pthread_mutex_init(&ks->lock, NULL);
    cond_init_monotonic(&ks->changed);
    ks->rv = ks->opts.initial_rv;
    ks->compacted_rv = ks->opts.initial_rv;
    ks->uids = json_object();
    ks->pdb_disrupted = json_object();
    ks->pod_born = json_object();
    ks->pod_dying = json_object();
    ks->dra_events = json_object();
    ks->kubelet_waiting = json_object();
    ks_types_init(ks);
    ks_auth_init(ks);
    static const char *const nss[] = {"default", "kube-system", "kube-public", "kube-node-lease"};
    for (size_t i = 0; i < ARRAY_SIZE(nss); i++) {
        json_t *ns = json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "v1", "kind", "Namespace",
                               "metadata", "name", nss[i]);
        struct err e = {0};
        ksim_create_object(ks, ns, &e);
        json_decref(ns);
    }
    return ks;
}

void ksim_free(struct ksim *ks)
{
    if (!ks)
        return;
    ks_journal_free(ks->journal);
    ks_store_free(ks);
    ks_types_free(ks);
    json_decref(ks->uids);
    json_decref(ks->pdb_disrupted);
    json_decref(ks->pod_born);
    json_decref(ks->pod_dying);
    json_decref(ks->dra_events);
    json_decref(ks->kubelet_waiting);
    json_decref(ks->ds_index);
    free(ks->admin_token);
    json_decref(ks->sa_tokens);
    pthread_mutex_destroy(&ks->lock);
    pthread_cond_destroy(&ks->changed);
    free(ks);
}

void ksim_shutdown(struct ksim *ks)
{
    pthread_mutex_lock(&ks->lock);
    ks->shutdown = true;
    pthread_cond_broadcast(&ks->changed);
    pthread_mutex_unlock(&ks->lock);
}

void ksim_wait_change(struct ksim *ks, uint64_t wait_ms)
{
    pthread_mutex_lock(&ks->lock);
    if (!ks->dirty && !ks->shutdown)
        ks_cond_wait(ks, wait_ms);
    pthread_mutex_unlock(&ks->lock);
}

bool ksim_reconcile(struct ksim *ks)
{
    pthread_mutex_lock(&ks->lock);
    ks_store_compact(ks);
    if (ks->journal)
        ks_journal_maybe_compact(ks);
    bool changed = ks_controllers(ks);
    pthread_mutex_unlock(&ks->lock);
    return changed;
}

int ksim_metrics(struct ksim *ks, struct sbuf *out)
{
    struct prom_writer w;
    prom_writer_init(&w, out, PROM_FORMAT_TEXT);
    pthread_mutex_lock(&ks->lock);
    prom_metric_u64(&w, "kubesim_watches_active", PROM_GAUGE, "Watch streams open now.",
                    ks->watches_active);
    prom_metric_u64(&w, "kubesim_watch_events_total", PROM_COUNTER,
                    "Watch events sent, bookmarks included.", ks->watch_events_total);
    prom_metric_u64(&w, "kubesim_resource_version", PROM_GAUGE, "The global resourceVersion.",
                    ks->rv);
    prom_family(&w, "kubesim_objects", PROM_GAUGE, "Objects stored, by resource.");
    for (struct ks_type *t = ks->types; t; t = t->next)
        if (t->served)
            prom_sample_u64(&w, "kubesim_objects",
                            (const struct prom_label[]){{"resource", t->plural}}, 1,
                            json_object_size(t->objs));
    pthread_mutex_unlock(&ks->lock);
    return prom_writer_finish(&w);
}
