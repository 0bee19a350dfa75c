/* SPDX-License-Identifier: Apache-2.0 */
/* The node status exporter's shell, shared by its files: the options and the pages
 * (node-status-exporter-main.c), what is read of the node and written to it (observe.c). */
#ifndef GPUOP_NODESTATUS_INTERNAL_H
#define GPUOP_NODESTATUS_INTERNAL_H

#include <pthread.h>

#include "node-status-exporter.h"

struct kube_client;
struct http_server;

#define NSE_EVQ_MAX 64 /* NVML events kept between two health observations */

struct nse_event {
    struct gh_event_obs ev;
    char uuid[GPU_UUID_MAX];
};

struct nse {
    const char *listen, *node, *dir, *kubeconfig, *sysfs, *mig_strategy;
    uint64_t interval_ms, grace_ms;
    bool once;
    enum nodestate_mig_strategy strategy;
    /* GPU health (health-watch.c) */
    bool health;
    uint64_t health_interval_ms, slowdown_window_ms;
    struct gh_state hst;
    size_t n_gpus;         /* GPUs of the last inventory */
    json_t *conds_written; /* the condition as last written (an array), or NULL */
    pthread_t ev_thread;
    bool ev_running;
    struct stop_token *ev_stop; /* ends the events thread */
    pthread_mutex_t ev_lock;
    struct nse_event evq[NSE_EVQ_MAX]; /* under ev_lock */
    size_t evq_n;
    uint64_t evq_dropped;
    int wake_fd; /* an eventfd the events thread writes; -1 */
    bool events_logged;

    struct kube_client *kc;
    struct gpu_lib *lib;
    struct nst_state st;
    struct nst_report report;
    pthread_mutex_t lock;
    char *text, *om; /* the last pages, under lock; NULL before the first observation */
    bool nvml_logged, node_logged, count_logged;
};

/* What one observation read and the memory its fields point into. */
struct nse_reading {
    struct nst_observation o;
    struct gpu_inventory *inv;
    struct nodestate_gpus gpus;
    json_t *node;
};
void nse_reading_clear(struct nse_reading *r);
/* Reads the node: the status files, the NVIDIA PCI functions, NVML (opened on first use and kept),
 * the Node. What cannot be read is left out of the observation (logged once until it reads
 * again). */
void nse_read(struct nse *x, struct nse_reading *ret);
/* Writes the gpu-count annotation the report asks for; a failure is counted and retried on the
 * next observation. */
void nse_write_annotation(struct nse *x);

/* The pages (metrics-http.c): nse_pages_update renders the report's and swaps them in; the
 * server serves /metrics (text, or OpenMetrics when asked for) and /health from them. */
int nse_pages_update(struct nse *x, struct err *e);
int nse_http_open(struct nse *x, struct http_server **ret, struct err *e);

/* The events thread (XID and ECC events to the queue, the wake fd written), once NVML is open;
 * stopped and joined by nse_health_stop. */
void nse_health_start(struct nse *x);
void nse_health_stop(struct nse *x);
/* One health observation: each GPU's sample, the events queued, the Node (`node`, just read; or
 * NULL: read here when its acknowledgement may matter); writes the annotation and the condition
 * when they changed, and sets the report's health. */
void nse_health_observe(struct nse *x, const json_t *node);

#endif
