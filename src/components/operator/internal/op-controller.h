/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The operator's shell, shared by its files: controller.c (the component: options, the work
 * queue), informers.c (the informers), leader.c (the Lease), metrics-http.c (/metrics, /healthz,
 * /readyz) and reconcile.c (one reconcile: the snapshot read from the informers, op_plan() and
 * the upgrade pass called, their plans executed). Reconcile thread only, but for the fields
 * under `lock`.
 */
#ifndef GPUOP_OP_CONTROLLER_H
#define GPUOP_OP_CONTROLLER_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "http.h"
#include "kube.h"
#include "op-gpuquota.h"
#include "operator.h"
#include "remediation-ctl.h"
#include "svc.h"

/* The owned kinds, each with an informer on app.kubernetes.io/managed-by=gpuop. */
static const struct kube_resource *const owned_kinds[] = {
    &KUBE_DAEMONSETS,   &KUBE_SERVICEACCOUNTS,     &KUBE_SERVICES,
    &KUBE_CLUSTERROLES, &KUBE_CLUSTERROLEBINDINGS, &KUBE_ROLES,
    &KUBE_ROLEBINDINGS, &KUBE_RUNTIMECLASSES,      &KUBE_CONFIGMAPS,
};
#define N_OWNED ARRAY_SIZE(owned_kinds)

struct metrics {
    uint64_t reconciliations, failed, writes;
    uint64_t last_success_ms;
    int gpu_nodes;
    int status; /* 1 ready, 0 not ready, -1 failed/invalid */
};

struct controller {
    struct kube_client *kc;
    const char *ns;
    struct op_defaults defaults;
    struct op_templates *templates;
    struct kube_informer *policies, *nodes;
    /* NVIDIADrivers: not waited for at start (a cluster without the CRD runs the ClusterPolicy's
     * single driver); until listed, every NVIDIADriver DaemonSet stays as it is. */
    struct kube_informer *nvds;
    struct kube_informer *owned[N_OWNED];
    /* The exporter's ServiceMonitors (owned, like owned[]): not waited for at start; synced
     * once the Prometheus Operator's CRD is served, and until then none is written. */
    struct kube_informer *servicemonitors;
    /* The DRA DeviceClasses a GPUCluster renders (owned, like owned[]): not waited for at start;
     * resource.k8s.io/v1 is served from Kubernetes 1.34 on. */
    struct kube_informer *deviceclasses;
    /* GPUClusters (nvidia.com/v1alpha1): not waited for at start (a cluster without the CRD runs
     * its ClusterPolicy); read with the ClusterPolicies once listed. */
    struct kube_informer *gpuclusters;
    struct op_gpuquota gq; /* Pods, ResourceQuotas and the GPU capacity view */

    struct svc_workqueue *queue; /* informer handlers and the leader mark the cluster dirty */
    struct http_server *http;
    struct kube_leader *leader_elector;
    /* the elector's own client (its own rate limit, as a separate clientset has upstream): the
     * controller's bursts of writes never hold a Lease renewal back past its deadline */
    struct kube_client *lease_kc;
    struct op_upgrade *upg;     /* the driver upgrade controller (upgrade-ctl.c) */
    struct op_remediation *rem; /* the GPU remediation controller (remediation-ctl.c) */
    uint64_t alloc_requeue_ms;  /* the GPU allocation moves' next pass (alloc-ctl.c) */

    pthread_mutex_t lock;
    struct metrics m;
    bool leader;
    bool ready; /* readyz: informers synced, and (when leading) a first reconcile done */
    /* The takeover of NVIDIA's operator's objects (adopt-ctl.c): nothing of NVIDIA's was found
     * (no more scans), and until when a scan that found nothing to do is not repeated.
     * Reconcile thread only. */
    bool adopt_done;
    uint64_t adopt_idle_until_ms;
    /* ClusterPolicy name -> [resourceVersion before our status write, the object the server
     * returned]. Until the informer shows a newer version, reconciles read ours: what was
     * reported lives in that status, so a stale cache must not report it again (nor write it
     * again with an old resourceVersion and fail with a conflict). Reconcile thread only. */
    json_t *written;
    json_t *written_nvds; /* the same for NVIDIADrivers */
    json_t *written_gcs;  /* the same for GPUClusters */
    /* What the last reconcile failed to write, an input of the next plan (the status says so
     * until a write succeeds). Reconcile thread only. */
    struct op_write_errors write_errors;
    /* The active policy wants a ServiceMonitor whose kind is not served (yet): the reconcile is
     * queued again in a while, to write it once the CRD is installed. Reconcile thread only. */
    bool servicemonitor_wait;
    /* The operand namespace holds gpuop's record of the Pod Security labels it set: 1 yes, 0
     * no, -1 not read yet (it is read while this is not 0 or a policy enables psa). Reconcile
     * thread only. */
    int psa_record;
    /* Every Event of the operator and its controllers goes through it (aggregated,
     * rate-limited), once per reconcile, last. Reconcile thread only. */
    struct op_recorder *recorder;
};

/* Every write goes through this check: a replica that lost the lease stops in the middle of a
 * reconcile, at the next write, instead of finishing it while another replica already leads. */
int op_check_leader(struct controller *c, struct err *e);
void op_count_write(struct controller *c);
/* An Event about a ClusterPolicy, a GPUCluster or an NVIDIADriver (reconcile.c). */
void op_post_event(struct controller *c, const json_t *obj, const struct op_event *ev);

/* ---- informers.c ------------------------------------------------------------------------- */

/* The work queue's one key queued: something changed, reconcile. */
void op_mark_dirty(struct controller *c);
/* Every informer started (the GPU quota view's and the upgrade controller's too). */
int op_informers_start(struct controller *c, struct err *e);
/* 0 once every informer listed (the NVIDIADrivers' aside), 1 when stopped first, -ETIMEDOUT
 * after 60 s. */
int op_informers_wait_synced(struct controller *c, struct svc *s, struct err *e);
/* Every informer stopped, all at once (each takes up to a watch poll interval). */
void op_informers_free(struct controller *c);

/* ---- leader.c ---------------------------------------------------------------------------- */

/* Lease-based leader election with lo's Lease and timings, through c->lease_kc (the caller makes
 * it; the callbacks are leader.c's: leading marks the cluster dirty, losing the Lease stops the
 * writes); NULL: no election, this replica leads. */
int op_leader_start(struct controller *c, const struct kube_leader_opts *lo, struct err *e);

/* ---- metrics-http.c ----------------------------------------------------------------------- */

/* /metrics, /healthz and /readyz on listen ("" or NULL: none). */
int op_metrics_serve(struct controller *c, const char *listen, struct err *e);

/* ---- reconcile.c -------------------------------------------------------------------------- */

/* One reconcile: every ClusterPolicy, what it owns, the NVIDIADrivers and the driver upgrade.
 * *ret_requeue: not ready, look again in a while. -ECANCELED when the lease is lost. */
int op_reconcile(struct controller *c, bool *ret_requeue, struct err *e);

#endif
