/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kl-pods: the pod workers of one simulated node. Watches the pods bound to the node (field
 * selector spec.nodeName), runs each as processes through kl-runtime (init containers in order,
 * then the containers), with env resolved (value, valueFrom fieldRef/resourceFieldRef/
 * configMapKeyRef/secretKeyRef, envFrom), volumes materialised (hostPath from the node root,
 * ConfigMap, Secret, downwardAPI, projected, emptyDir, the service-account token and CA), devices
 * from kl-devices and CDI; restarts with the kubelet's backoff; runs probes and preStop hooks;
 * terminates gracefully; and writes pods/status as the kubelet reports it. The decisions (what to
 * start, restart, kill, which status to report) are a pure core with table tests
 * (kl_pod_plan in pod-plan.c); this is the shell.
 *
 * Images: a gpuop image (name "gpuop" or ending in "/gpuop", any tag) runs the built gpuop;
 * NVIDIA's driver image and the CUDA workload images run the simulated programs (sim/images);
 * any other image ends in ErrImagePull / ImagePullBackOff.
 *
 * Logs: <root>/var/log/pods/<ns>_<pod>_<uid>/<container>/<restartCount>.log, as the kubelet lays
 * them out; kl_pods_log_path finds the current or previous one.
 */
#ifndef GPUOP_KL_PODS_H
#define GPUOP_KL_PODS_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "kl-devices.h"
#include "kube.h"
#include "kubelet-sim.h"
#include "util.h"

struct kl_pods;
struct kl_dra;

struct kl_pods_config {
    const struct kl_node_spec *node;
    const char *node_ip;          /* the node's address (status.hostIP, status.podIP) */
    const char *netns_path;       /* the node's network namespace; NULL: the host's */
    struct kl_devices *devices;   /* the node's device manager */
    struct kl_dra *dra;           /* the node's DRA claims and plugins (kl-dra.h); NULL: none */
    struct kube_client *kc;       /* shared; thread-safe */
    const char *gpuop_exe;        /* absolute path of build/gpuop */
    const char *sim_image_bin;    /* folder of the simulated images' programs */
    const char *const *sim_env;   /* "K=V" the simulated hardware adds to every container
                                   * (GPUOP_SIM_FLEET, GPUOP_SIM_STATE, GPUOP_SIM_ROOT,
                                   * GPUOP_NVML_LIBRARY, GPUOP_CUDA_LIBRARY) and the
                                   * sanitizer settings (kl_sanitizer_env), NULL-terminated */
    const char *const *sim_paths; /* bound at their own paths in every container (the fleet
                                   * file, the node root); the node root read-write */
    uint64_t backoff_base_ms;     /* 10000, doubling to backoff_max_ms */
    uint64_t backoff_max_ms;      /* 300000 */
    const char *api_server;       /* the URL pods reach the API server at, for their
                                   * KUBERNETES_SERVICE_HOST/PORT (from inside the node's network
                                   * namespace, the host's loopback is not the host); NULL: the
                                   * client's server */
};

int kl_pods_new(const struct kl_pods_config *cfg, struct kl_pods **ret, struct err *e);
/* Stops every container of the node (SIGTERM, grace period, SIGKILL) and the watch. */
void kl_pods_free(struct kl_pods *p);

/* The log file of a container: the running (or last) attempt, or the one before it. -ENOENT
 * when there is none ("previous terminated container ... not found"). */
int kl_pods_log_path(struct kl_pods *p, const char *ns, const char *pod, const char *container,
                     bool previous, char **ret_path, struct err *e);

#endif
