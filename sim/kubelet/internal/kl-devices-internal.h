/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kl-devices internals shared by devices.c (the manager) and devices-podres.c (PodResources v1):
 * the records both read, under kl_devices.mu.
 */
#ifndef GPUOP_KL_DEVICES_INTERNAL_H
#define GPUOP_KL_DEVICES_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "kl-devices.h"

#define KL_NUMA_NONE (-1) /* a device without topology, as the kubelet's checkpoint keys it */

struct kl_dev {
    char *id;
    bool healthy;
    int64_t numa; /* KL_NUMA_NONE: no topology */
};

/* One extended resource some plugin registered since start. */
struct kl_res {
    char *name;
    struct kl_dev *devs; /* the plugin's order (the last ListAndWatch update) */
    size_t n_devs;
    struct kl_plugin *plugin; /* the current registration; NULL before any */
    bool streaming;           /* its ListAndWatch stream is open */
};

/* One container's devices of one resource (a PodDeviceEntry of the checkpoint). */
struct kl_entry {
    char *pod_uid, *pod_namespace, *pod_name, *container, *resource;
    char **ids; /* n_ids */
    int64_t *numa;
    size_t n_ids;
    uint8_t *resp; /* the packed ContainerAllocateResponse */
    size_t resp_len;
};

struct kl_devices {
    char *root, *node_name;
    char *dir;         /* <root>/var/lib/kubelet/device-plugins */
    char *ckpt_path;   /* <dir>/kubelet_internal_checkpoint */
    char *podres_sock; /* <root>/var/lib/kubelet/pod-resources/kubelet.sock */
    void (*on_change)(void *userdata);
    void *userdata;
    struct stop_token *stop;  /* requested by kl_devices_free: ends plugin calls at once */
    pthread_mutex_t alloc_mu; /* serialises kl_devices_allocate (taken before mu) */
    pthread_mutex_t mu;       /* everything below */
    bool stopping;
    struct kl_res **res;
    size_t n_res;
    struct kl_entry **entries;
    size_t n_entries;
    json_t *registered;        /* checkpoint RegisteredDevices: {resource: [ids]} */
    struct kl_plugin *plugins; /* every plugin whose thread is not joined yet */
    struct grpc_server *reg_srv, *podres_srv;
};

/* Building a kl_alloc (devices.c; kl-cdi uses them too). Strings passed as char * are owned by
 * a afterwards. setenv replaces an earlier NAME (a later edit wins, as maps merge); device nodes
 * are kept once each. */
void kl_alloc_setenv(struct kl_alloc *a, const char *name, const char *value);
void kl_alloc_add_mount(struct kl_alloc *a, char *source, char *target, bool read_only);
/* A path of the node's host as the machine sees it: <root><p> (p when root is "/" or empty). */
char *kl_host_path(const char *root, const char *p);
/* d's strings are owned by a afterwards; a device whose container path a already has is
 * dropped (freed). */
void kl_alloc_add_device(struct kl_alloc *a, struct kl_alloc_device *d);

/* devices-podres.c: registers List, Get and GetAllocatableResources on s. */
int kl_podres_register(struct kl_devices *d, struct grpc_server *s, struct err *e);

#endif
