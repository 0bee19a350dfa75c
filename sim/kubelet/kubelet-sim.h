/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubelet-sim: a kubelet for simulated GPU nodes (build/kubelet-sim). It keeps each node's Node
 * object and heartbeat Lease, runs the pods bound to its nodes as processes (each node in its own
 * network namespace with its own address and root directory), serves the kubelet's device-plugin
 * Registration and PodResources gRPC APIs, and reports pod status as a kubelet does.
 *
 * This header is the module's pure part: the cluster file. The rest lives behind the internal
 * headers in internal/ (runtime, devices, CDI, network), which the shell (kubelet-main.c) wires.
 *
 * Cluster file (YAML):
 *
 *     apiVersion: gpuop.dev/v1alpha1
 *     kind: SimCluster
 *     nodes:
 *     - name: dgx-h100-1                 # a DNS-1123 subdomain, unique in the file
 *       fleet: ../fleets/dgx-h100.yaml   # relative paths are relative to the cluster file
 *       root: /tmp/cluster/dgx-h100-1    # the node's host filesystem; created when absent
 *       kernel: 5.15.0-127-generic       # uname -r
 *       os: {id: ubuntu, versionId: "22.04", prettyName: Ubuntu 22.04.5 LTS}
 *       runtime: containerd              # containerd | cri-o | docker
 *       kernelHeaders: [5.15.0-127-generic]  # kernels a driver container can build for
 *       hostDriver: "550.127.05"         # optional: a driver pre-installed on the host
 *       cpu: 224                         # optional capacity (default 8, 32Gi, 110 pods)
 *       memory: 2015564Mi
 *       pods: 110
 *       labels: {node-role.example/gpu: "true"}   # optional extra labels
 *
 * A node without `fleet` is a CPU node.
 */
#ifndef GPUOP_KUBELET_SIM_H
#define GPUOP_KUBELET_SIM_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "util.h"

enum kl_runtime_kind {
    KL_RUNTIME_CONTAINERD,
    KL_RUNTIME_CRIO,
    KL_RUNTIME_DOCKER,
};

struct kl_node_spec {
    char *name;
    char *fleet; /* absolute path, NULL for a CPU node */
    char *root;  /* absolute path */
    char *kernel;
    char *os_id, *os_version_id, *os_pretty;
    enum kl_runtime_kind runtime;
    char **kernel_headers; /* NULL-terminated */
    char *host_driver;     /* NULL: none pre-installed */
    const char *arch;      /* GOARCH name: "amd64" (default) or "arm64" (a Grace node) */
    uint64_t cpu, memory_bytes, pods;
    json_t *labels; /* object, may be empty */
};

struct kl_cluster {
    struct kl_node_spec *nodes;
    size_t n_nodes;
};

/* Parses a cluster file's text; path names the file in errors ("cluster.yaml: nodes[2].root: ...")
 * and is the base of relative paths. Checks every field; does not touch the file system. */
int kl_cluster_parse(const char *path, const char *text, size_t len, struct kl_cluster **ret,
                     struct err *e);
void kl_cluster_free(struct kl_cluster *c);

#endif
