/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kl-node: the Node object and heartbeat Lease a kubelet keeps for one simulated node, and the
 * labels Node Feature Discovery's worker would put on it. Pure functions over jansson values (the
 * time passed in); the shell (kubelet-main.c) reads the world, calls these and writes the result
 * through src/edge/kube.
 *
 * Labels, by owner:
 *  - the kubelet's: kubernetes.io/{hostname,os,arch}, beta.kubernetes.io/{os,arch}, reset on
 *    every update as the kubelet's updateDefaultLabels does; the cluster file's extra labels at
 *    registration only (as --node-labels);
 *  - NFD's (kl_nfd_labels, kl_features_parse): the PCI, kernel and os_release labels and the
 *    local feature files. The set written is remembered in the annotation
 *    nfd.node.kubernetes.io/feature-labels (names without the default prefix, comma-separated,
 *    sorted, as nfd-master keeps it) so a label NFD no longer produces is removed, and only such
 *    a label: labels of other owners are never touched.
 */
#ifndef GPUOP_KL_NODE_H
#define GPUOP_KL_NODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "kubelet-sim.h"
#include "nodestate.h"
#include "util.h"

#define KL_KUBELET_VERSION   "v1.32.4"
#define KL_KUBELET_PORT      10250
#define KL_NFD_PREFIX        NODESTATE_NFD_PREFIX /* nodestate.h: NFD's labels are computed there */
#define KL_NFD_LABELS_ANN    NODESTATE_NFD_LABELS_ANN
#define KL_SIMULATED_ANN     "kubelet.gpuop.dev/simulated"
#define KL_LEASE_NAMESPACE   "kube-node-lease"
#define KL_LEASE_DURATION_S  40
#define KL_EVICTION_RESERVE  (100ull << 20) /* memory.available<100Mi, kept off allocatable */
#define KL_EPHEMERAL_STORAGE (100ull << 30)

/* The PCI class NVIDIA's GPU of that model shows (NFD reads it from sysfs): "0302" (3D
 * controller: datacenter GPUs) or "0300" (VGA controller: GeForce, Quadro, RTX workstation). */
const char *kl_pci_class_for_model(const char *model);

/* The GPU models a fleet file lists (gpus[].model, each `count` times), NULL-terminated, for the
 * PCI labels; the rest of the file is the simulated driver's to check. path names the file in
 * errors. Pure. */
#define KL_FLEET_MAX_GPUS 1024
int kl_fleet_gpu_models(const char *path, const char *text, size_t len, char ***ret, struct err *e);
void kl_strv_free(char **v);

/* The sanitizer settings kubelet-sim gives every container ("ASAN_OPTIONS=...",
 * NULL-terminated; free with kl_strv_free): its own ASAN_OPTIONS, UBSAN_OPTIONS and LSAN_OPTIONS
 * (each as given, NULL when unset), so pod processes stop on the reports the test's other
 * processes stop on; with asan (kubelet-sim, so the pods' programs, built with AddressSanitizer)
 * ASAN_OPTIONS gains intercept_tls_get_addr=0 unless it names that flag itself (node.c says why).
 * Pure. */
char **kl_sanitizer_env(const char *asan_options, const char *ubsan_options,
                        const char *lsan_options, bool asan);

/* The labels nfd-worker's pci, kernel and system sources give the node, each
 * "feature.node.kubernetes.io/..." = string. gpu_models (NULL-terminated; NULL or empty for a CPU
 * node) are the fleet's GPUs: pci-10de.present (the GPU operator chart's deviceLabelFields
 * [vendor]) and pci-<class>_10de.present (NFD's default [class, vendor]). A new object. */
json_t *kl_nfd_labels(const struct kl_node_spec *spec, const char *const *gpu_models);

/* Adds the labels of one local feature file (NFD's features.d format: "name[=value]" per line,
 * '#' comments, "# +expiry-time=<RFC 3339>" ignoring the whole file once past at now_ms; a name
 * without a prefix gets feature.node.kubernetes.io/; namespaces other than NFD's own and
 * nvidia.com are denied, as nfd-master does) into labels, later files overriding earlier ones.
 * Invalid lines are skipped; returns how many were (0 when every line was used), or a negative
 * code with e set when the text is too large. Pure (fuzzed). */
#define KL_FEATURES_MAX_BYTES (256u << 10)
int kl_features_parse(const char *text, size_t len, uint64_t now_ms, json_t *labels, struct err *e);

/* The node's identity, derived from its name so that it is stable across restarts. */
struct kl_node_ids {
    char machine_id[33]; /* 32 hex */
    char system_uuid[37];
    char boot_id[37];
};
void kl_node_ids(const char *name, struct kl_node_ids *ret);
/* The boot ID after `boot` simulated reboots (0: kl_node_ids'). */
void kl_node_boot_id(const char *name, unsigned boot, char *buf, size_t n);

/* What the shell read of the node at one instant. */
struct kl_node_facts {
    const struct kl_node_spec *spec;
    const char *ip;           /* InternalIP */
    unsigned kubelet_port;    /* daemonEndpoints.kubeletEndpoint.Port */
    json_t *device_resources; /* kl_devices_resources' object, or NULL */
    uint64_t now_ms;          /* wall clock */
    unsigned boot;            /* simulated reboots so far (the boot ID follows) */
};

/* A Node to create: metadata (name, the kubelet's and the file's labels, the simulated
 * annotation) and status. A new object. */
json_t *kl_node_object(const struct kl_node_facts *f);

/* Sets the kubelet's labels, the simulated annotation and the NFD labels (nfd_labels: the
 * labels NFD produces now, with those of the previous call removed when gone, per the
 * annotation, and nfd-worker's annotation; not an object: a cluster without NFD, whose labels
 * and annotations are left as they are). Returns 0 when node changed (write it), 1 when nothing
 * did; the kube_mutate_fn contract. */
int kl_node_apply_labels(json_t *node, const struct kl_node_spec *spec, json_t *nfd_labels);

/* Sets status: capacity and allocatable (cpu, memory, pods, ephemeral-storage, hugepages, the
 * device plugins' resources; other extended resources someone else set are kept), conditions
 * (heartbeat now, transition time kept while a condition's status holds), nodeInfo, addresses,
 * daemonEndpoints. Returns 0 when anything besides the heartbeat times changed or force is set
 * (write it), 1 otherwise. */
int kl_node_apply_status(json_t *node, const struct kl_node_facts *f, bool force);

/* The node's Lease (coordination.k8s.io/v1) in kube-node-lease, owned by the Node (node_uid may
 * be NULL: no owner reference). A new object. */
json_t *kl_lease_object(const char *node, const char *node_uid, unsigned duration_s,
                        uint64_t now_ms);
/* Renews lease in place: holder, duration and renewTime. */
void kl_lease_renew(json_t *lease, const char *node, unsigned duration_s, uint64_t now_ms);

/* ---- the running node (node-run.c): the shell's side ------------------------------------- */

struct kl_net;
struct kube_client;
struct kl_node;

struct kl_node_config {
    const struct kl_node_spec *spec;
    const char *const *gpu_models; /* the fleet's, NULL-terminated; NULL for a CPU node */
    unsigned index;                /* 0-based, in the cluster file */
    struct kl_net *net;            /* NULL: no namespace, the node listens on 127.0.0.1 */
    unsigned kubelet_port;         /* 10250; without a namespace each node's own */
    struct kube_client *kc;        /* shared; thread-safe */
    const char *gpuop_exe;         /* absolute paths of the built programs */
    const char *sim_image_bin;
    const char *nvml_library;
    const char *programs_dir; /* bound read-only at its own path in every container: the cross
                               * tree an arm64 node's programs come from; NULL: none */
    uint64_t backoff_base_ms, backoff_max_ms;
    unsigned lease_duration_s;
    int wake_fd;            /* an eventfd written when the node's devices change */
    const char *api_server; /* the API server as pods reach it; NULL: the client's */
    bool no_nfd;            /* no NFD in the cluster: no NFD labels or annotations written */
};

/* Creates the node root's layout (kl_node_layout), the node's namespace, device manager, pod
 * workers and kubelet endpoint (/containerLogs, /healthz), and registers the Node and its Lease.
 * On error everything started is stopped. */
int kl_node_start(const struct kl_node_config *cfg, struct kl_node **ret, struct err *e);
/* One pass: the labels NFD produces now (written when they changed), status (written when it
 * changed, or when force_status: the heartbeat is due) and, with renew_lease, the Lease. */
int kl_node_sync(struct kl_node *n, bool force_status, bool renew_lease, struct err *e);
/* Whether the device manager reported a change since the last sync. */
bool kl_node_dirty(struct kl_node *n);
/* Stops the pods (kl_pods_free), the device manager and the endpoint. Accepts NULL. */
void kl_node_stop(struct kl_node *n);
const char *kl_node_ip(const struct kl_node *n);

/* The node root's host files: os-release, the kernel's version file and headers, the kubelet's
 * folders, the container runtime's config (when absent: the toolkit edits it), NFD's features.d,
 * the simulated NVML's state folder, the GPUs' PCI functions in sys/bus/pci/devices (vendor and
 * class, as sysfs lists them; gpu_models NULL-terminated, NULL for a CPU node) and, with a host
 * driver, the loaded module, its libraries and nvidia-smi. Idempotent. */
int kl_node_layout(const struct kl_node_spec *spec, const char *const *gpu_models,
                   const char *nvml_library, const char *sim_image_bin, struct err *e);
/* <root>/var/lib/gpuop-sim/nvml: the simulated NVML's state folder (GPUOP_SIM_STATE). */
char *kl_node_nvml_state(const struct kl_node_spec *spec);

#endif
