/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kl-devices: the kubelet's device manager for one node.
 *  - Registration (v1beta1) served on <root>/var/lib/kubelet/device-plugins/kubelet.sock; each
 *    registered plugin is dialled at its endpoint, GetDevicePluginOptions read, and ListAndWatch
 *    followed on a thread of its own. A plugin that re-registers replaces the old one; one whose
 *    stream ends has its devices counted unhealthy (capacity kept, allocatable 0) until it comes
 *    back, as the kubelet does.
 *  - Allocation: GetPreferredAllocation when the plugin offers it, then Allocate, for a pod's
 *    container; the result is recorded and checkpointed (a JSON file beside the socket, written
 *    atomically), so a restarted kubelet-sim keeps running pods' devices and never hands one
 *    device to two pods.
 *  - PodResources v1 (List, Get, GetAllocatableResources) on
 *    <root>/var/lib/kubelet/pod-resources/kubelet.sock, from the same records.
 *
 * Threads: every function is thread-safe. on_change is called from an internal thread, without
 * any lock of this module held, whenever a resource's device set or health changes.
 */
#ifndef GPUOP_KL_DEVICES_H
#define GPUOP_KL_DEVICES_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include <jansson.h>

#include "kl-runtime.h"
#include "util.h"

struct kl_devices;

struct kl_devices_config {
    const char *root;      /* the node root */
    const char *node_name; /* for logs */
    void (*on_change)(void *userdata);
    void *userdata;
};

int kl_devices_new(const struct kl_devices_config *cfg, struct kl_devices **ret, struct err *e);
/* Stops the servers and the plugin streams, removes the sockets; the checkpoint stays. */
void kl_devices_free(struct kl_devices *d);

/* {"nvidia.com/gpu": {"capacity": 8, "allocatable": 7}, ...}: every resource any plugin ever
 * registered since start (allocatable counts healthy devices). A new reference. */
json_t *kl_devices_resources(struct kl_devices *d);

/* A device node a container was given: an Allocate DeviceSpec or a CDI deviceNodes entry. What
 * the entry leaves out (type, numbers, mode, owner) is the host node's, read when the container
 * is made, as containerd fills it in. */
struct kl_alloc_device {
    char *path;      /* in the container */
    char *host_path; /* on the machine (a CDI host path has the node root in front) */
    char type;       /* 'c' or 'b'; 0: the host node's */
    bool has_numbers;
    unsigned major, minor;
    bool has_mode, has_uid, has_gid;
    unsigned file_mode, uid, gid;
};

/* What a container gets from its devices: the Allocate responses merged (envs, mounts, device
 * nodes, annotations) and the CDI device names to resolve (kl-cdi.h). */
struct kl_alloc {
    char **envs; /* "NAME=value", NULL-terminated */
    struct kl_mount *mounts;
    size_t n_mounts;
    struct kl_alloc_device *devices; /* one per container path, the first kept */
    size_t n_devices;
    char **cdi_devices;  /* fully-qualified CDI names, NULL-terminated */
    json_t *annotations; /* object */
};
void kl_alloc_free(struct kl_alloc *a);

/* The node the container's runtime makes for d: what d leaves out taken from host, the host
 * node's stat (NULL when host_errno says it could not be read). Pure. Errors name the device as
 * containerd does ("error gathering device information while adding custom device
 * \"/dev/nvidia0\": no such file or directory"), and a host path that is not a device node. */
int kl_device_resolve(const struct kl_alloc_device *d, const struct stat *host, int host_errno,
                      struct kl_device *ret, struct err *e);

/* Allocates requests ({"nvidia.com/gpu": 2}; resources no plugin serves are ignored, as the
 * kubelet ignores non-device extended resources) for one container of a pod. Idempotent per
 * (pod_uid, container): a second call returns the devices recorded (Allocate is called again with
 * the same IDs, as the kubelet does on a container restart). -ENOSPC (with the resource named)
 * when fewer healthy free devices remain than requested; -EAGAIN when the resource's plugin is
 * not registered (yet). */
int kl_devices_allocate(struct kl_devices *d, const char *pod_uid, const char *pod_namespace,
                        const char *pod_name, const char *container, json_t *requests,
                        struct kl_alloc **ret, struct err *e);

/* Frees every device held by the pod (the pod terminated or was deleted). */
void kl_devices_release(struct kl_devices *d, const char *pod_uid);

/* Frees the devices of every pod whose uid is not in live_uids (an array of strings): after a
 * restart, pods deleted meanwhile. */
void kl_devices_retain(struct kl_devices *d, json_t *live_uids);

#endif
