/* SPDX-License-Identifier: Apache-2.0 */
/* The node status exporter's shell, shared by its files: the options and the pages
 * (node-status-exporter-main.c), what is read of the node and written to it (observe.c). */
#ifndef GPUOP_NODESTATUS_INTERNAL_H
#define GPUOP_NODESTATUS_INTERNAL_H

#include <pthread.h>

#include "node-status-exporter.h"

struct kube_client;

struct nse {
    const char *listen, *node, *dir, *kubeconfig, *sysfs, *mig_strategy;
    uint64_t interval_ms, grace_ms;
    bool once;
    enum nodestate_mig_strategy strategy;

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

#endif
