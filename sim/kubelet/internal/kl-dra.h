/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kl-dra: the kubelet's Dynamic Resource Allocation for one node.
 *  - The plugin watcher: sockets appearing in <root>/var/lib/kubelet/plugins_registry are
 *    dialled, asked pluginregistration.Registration/GetInfo, checked (type "DRAPlugin", a
 *    name, an endpoint, "v1.DRAPlugin" among the versions) and told the outcome with
 *    NotifyRegistrationStatus; a socket that goes away deregisters its plugin. An endpoint is a
 *    path of the node's host (the node root in front).
 *  - Before a pod's containers start (kl_dra_prepare): its claims (spec.resourceClaims through
 *    status.resourceClaimStatuses, and status.extendedResourceClaimStatus) are read from the API
 *    server, must be reserved for the pod, and are prepared with each allocated driver's
 *    k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources, batched per driver, once per
 *    claim however many pods of the node share it.
 *  - A container gets the CDI devices its claims' prepared devices name (kl_dra_container_alloc),
 *    resolved against the node's CDI specs as containerd resolves them (kl-cdi.h).
 *  - When a pod has stopped (kl_dra_unprepare), the claims no other pod of the node uses are
 *    unprepared with NodeUnprepareResources.
 *
 * Threads: every function is thread-safe; the watcher runs on a thread of its own. Prepared
 * claims are kept in memory only (a restarted kubelet-sim prepares again; drivers' prepare is
 * idempotent).
 */
#ifndef GPUOP_KL_DRA_H
#define GPUOP_KL_DRA_H

#include <stddef.h>

#include <jansson.h>

#include "kl-devices.h"
#include "kube.h"
#include "util.h"

struct kl_dra;

struct kl_dra_config {
    const char *root;      /* the node root */
    const char *node_name; /* for logs */
    struct kube_client *kc;
    uint64_t scan_ms; /* how often plugins_registry is read; 0: 500 */
};

int kl_dra_new(const struct kl_dra_config *cfg, struct kl_dra **ret, struct err *e);
/* Stops the watcher; claims stay prepared (as a kubelet that stops). Accepts NULL. */
void kl_dra_free(struct kl_dra *d);

/* Prepares the pod's claims (idempotent). 0, or an error saying what failed, as the kubelet's
 * FailedPrepareDynamicResources event does (a claim not reserved for the pod, a driver not
 * registered, the driver's own error). */
int kl_dra_prepare(struct kl_dra *d, const json_t *pod, struct err *e);
/* Appends the container's DRA devices (CDI names resolved under the node root) to *alloc,
 * making it when NULL and there is something to add. */
int kl_dra_container_alloc(struct kl_dra *d, const json_t *pod, const char *container,
                           struct kl_alloc **alloc, struct err *e);
/* The pod stopped: the claims it alone used are unprepared. */
void kl_dra_unprepare(struct kl_dra *d, const char *pod_uid);
/* Registered DRA plugins: {"gpu.nvidia.com": "<host path of its endpoint>"} (a new reference). */
json_t *kl_dra_plugins(struct kl_dra *d);

/* ---- the pure parts (dra-core.c), table-tested ------------------------------------------- */

/* The claims a pod uses, in order: [{"podClaim": NAME, "claim": CLAIM}] for spec.resourceClaims
 * (a template's claim through status.resourceClaimStatuses; an entry whose claim is null needs
 * none) and {"extended": true, "claim": CLAIM} for status.extendedResourceClaimStatus. -EAGAIN
 * with the kubelet's text when a template's claim is not in the status yet. */
int kl_dra_pod_claims(const json_t *pod, json_t **ret, struct err *e);

/* The CDI device names a container gets: its resources.claims entries (a whole claim, or one
 * request of it: devices whose requestNames are empty or name the request, a subrequest
 * "req/sub" standing for "req") and its extended-resource request mappings. claims: pod claim
 * name -> claim UID, ext_uid: the extended resource claim's UID (NULL none), prepared: claim UID
 * -> [{"requestNames": [...], "cdiDeviceIDs": [...]}]. Each name once, in order. */
json_t *kl_dra_container_cdi(const json_t *pod, const char *container, const json_t *claims,
                             const char *ext_uid, const json_t *prepared);

/* A plugin's GetInfo answer as the kubelet's plugin watcher and DRA handler check it; 0, or
 * -EINVAL with the reason its NotifyRegistrationStatus carries. */
int kl_dra_check_plugin(const char *socket_path, const char *type, const char *name,
                        const char *endpoint, const char *const *versions, size_t n_versions,
                        struct err *e);

#endif
