/* SPDX-License-Identifier: Apache-2.0 */
/* exporter internals shared between the shell's files: the state (exporter-main.c's options,
 * the collector's, what the threads share), the collector (collector.c), the XID events thread
 * (xid-events.c) and the kubelet's PodResources client (podres.c). */
#ifndef GPUOP_EXPORTER_INTERNAL_H
#define GPUOP_EXPORTER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "exporter.h"
#include "http.h"

/* A rendered collection, shared by reference between the collector and in-flight responses. */
struct exp_snapshot {
    atomic_int refs;
    char *text;
    size_t text_len;
    char *om;
    size_t om_len;
};
void exp_snapshot_unref(void *snapshot); /* accepts NULL; an http_response release function */

/* One GPU's GPU Performance Monitoring across collections, by UUID: its support, found once,
 * its sampler, made once per MIG layout, and the last pair's values, which the collection's
 * exp_gpu_state.prof points at. */
#define EXP_GPM_GPUS 64
struct exp_gpm_slot {
    char uuid[GPU_UUID_MAX];
    bool asked;                      /* support known (a failed query is asked again) */
    struct exp_gpm_support support;  /* index, support and the reason */
    struct gpu_gpm_sampler *sampler; /* where supported */
    struct exp_gpm_layout layout;    /* the sampler's */
    uint64_t last_ms;                /* the last sample, monotonic; 0 none */
    bool failing;                    /* a failure logged, not yet recovered */
    struct exp_prof prof;            /* the last pair's values */
};

struct exporter {
    /* configuration */
    const char *listen;
    const char *collectors;
    uint64_t interval_ms;
    bool kubernetes;
    const char *socket;
    char *hostname; /* NULL: no host label */
    bool no_hostname;
    const char *node_name;
    bool lower_hostname;
    const char *resource_names;
    bool once;
    int once_format; /* enum prom_format */
    uint64_t xid_window_ms;
    uint64_t clock_window_ms;

    struct exp_counters *counters;
    struct gpu_lib *lib;

    /* collector state (collector thread only) */
    struct gpu_inventory *inv;
    struct exp_gpu_state *gpus;
    size_t n_gpus;
    struct exp_self self;
    struct exp_pod_map pods;
    bool podres_failing;
    struct exp_clock_table clocks;
    bool want_prof;  /* the counters ask for profiling fields */
    bool gpm_logged; /* the start-up notice of unsupported profiling fields is out */
    size_t n_gpm;
    struct exp_gpm_slot gpm[EXP_GPM_GPUS];

    /* shared */
    pthread_mutex_t lock;
    struct stop_token *stop;   /* svc's */
    struct exp_snapshot *snap; /* under lock; NULL before the first collection */
    atomic_uint_fast64_t scrapes;
    struct exp_xid_log xids; /* under lock */
    atomic_uint_fast64_t event_errors;
};

/* ---- collector.c -------------------------------------------------------------------------- */

/* One collection: the GPUs sampled, the pod map refreshed (--kubernetes), the pages rendered and
 * swapped in as the latest snapshot. */
int exp_collect(struct exporter *x, struct err *e);
/* The collector thread: exp_collect every interval until the stop token fires. */
void *exp_collector_thread(void *exporter);
/* The latest snapshot with a reference taken (exp_snapshot_unref); NULL before the first. */
struct exp_snapshot *exp_snapshot_get(struct exporter *x);
/* Frees the collector's state. */
void exp_collector_clear(struct exporter *x);
/* For --once: takes a first GPM sample of every GPU that has GPM, so that the collection after it
 * has a pair. Returns how many GPUs were sampled. */
size_t exp_gpm_prime(struct exporter *x);

/* ---- xid-events.c ------------------------------------------------------------------------- */

/* The events thread: NVML's XID events into x->xids until the stop token fires; a failing
 * subscription is retried (and counted in x->event_errors). */
void *exp_xid_events_thread(void *exporter);

/* ---- podres.c ----------------------------------------------------------------------------- */

/* Lists pod resources from the kubelet (PodResources v1 List over gRPC on a unix socket) and
 * adds the GPU devices to *map. The whole exchange ends by timeout_ms, or at once when stop is
 * requested. Without gRPC support compiled in: -EOPNOTSUPP. */
int exp_podresources_list(const char *socket_path, const struct gpu_inventory *inv,
                          const char *extra_resource_names, uint64_t timeout_ms,
                          struct stop_token *stop, struct exp_pod_map *map, struct err *e);

#endif
