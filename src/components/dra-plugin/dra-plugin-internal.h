/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The plugin's shell, shared by its files: dra-plugin-main.c (the component), dra-node.c (NVML,
 * publication, the node's CDI spec, health), dra-serve.c (the kubelet's services) and
 * dra-smi.c (the GPUs' time slice through the driver's nvidia-smi) and dra-mps-daemon.c (the
 * claims' MPS control daemons).
 *
 * Threads: the component's own (publication every --resync), the health thread, the DRA
 * server's loop (prepare, unprepare) and the registration server's loop. plugin.mu guards the
 * view, the claims and the faults; NVML's MIG layout is read and changed only with it held, so a
 * slice being made is never published as a device of its own. The gRPC handlers read claims from
 * the informer's store, never from the network.
 */
#ifndef GPUOP_DRA_PLUGIN_INTERNAL_H
#define GPUOP_DRA_PLUGIN_INTERNAL_H

#include <limits.h>
#include <pthread.h>

#include "dra-plugin.h"
#include "gpuhealth.h"
#include "grpc.h"
#include "kube.h"

#define DRA_COMP "dra-plugin"

/* What the plugin read of its node: the inventory, what it read beside it, the model. */
struct dra_node_view {
    struct gpu_inventory *inv;
    struct dra_gpu_extra *extra;
    struct gpu_mig_profile **profiles; /* per GPU, extra[i].profiles (partitionable devices) */
    struct dra_model *model;
};
void dra_node_view_clear(struct dra_node_view *v);
/* Reads the GPUs and builds the model. faults: NULL when none known; claims: the prepared
 * claims, whose MIG slices are theirs (NULL: none). */
int dra_node_read(struct gpu_lib *lib, const struct dra_flags *f, const struct dra_faults *faults,
                  const struct dra_claims *claims, struct dra_node_view *ret, struct err *e);

struct dra_plugin {
    struct dra_flags *f;
    pthread_mutex_t mu;
    struct dra_node_view view;
    struct dra_claims claims;
    struct kube_informer *claims_inf;
    struct gpu_lib *lib;
    struct stop_token *stop;
    struct gh_policy hp;
    struct dra_faults faults;
    char checkpoint[PATH_MAX];
    char cdi_dir[PATH_MAX];       /* this process's view */
    char mps_root[PATH_MAX];      /* the claims' MPS folders, this process's view */
    char mps_root_host[PATH_MAX]; /* ... the host's (CDI specs name it) */
};

/* dra-node.c */
/* Reads the GPUs, swaps the view in, publishes, writes the node's CDI spec. Errors are logged:
 * the next pass tries again. */
void dra_resync(struct dra_plugin *pl, struct kube_client *kc);
/* The node's CDI spec written again when it changed (pl->mu held or not). */
void dra_cdi_base_write(struct dra_plugin *pl);
void *dra_health_main(void *arg);

/* dra-smi.c */
/* The driver root's program name (under --host-root) in path, and the driver's library folder
 * in lib_dir ("" unknown); -ENOENT naming the root when it has none. */
int dra_driver_tool(const struct dra_flags *f, const char *name, char *path, size_t n,
                    char *lib_dir, size_t ln, struct err *e);
/* Sets the GPUs' compute time slice for claim c with the driver root's nvidia-smi (pl->f read
 * only); the first failure is the error, naming the claim and the GPU. */
int dra_timeslices_apply(const struct dra_plugin *pl, const struct dra_claim *c,
                         const struct dra_timeslice *ts, size_t n, struct err *e);

/* dra-mps-daemon.c (pl->mu held) */
/* Claim c's MPS control daemon running: started, and told its limits, when it does not answer
 * (nothing for a claim without MPS devices). */
int dra_mps_start(struct dra_plugin *pl, const struct dra_claim *c, struct err *e);
/* Claim c's daemon told to quit and its folder removed. */
int dra_mps_stop(struct dra_plugin *pl, const struct dra_claim *c, struct err *e);
/* Every prepared MPS claim's daemon running again (after a restart, or one that ended). */
void dra_mps_supervise(struct dra_plugin *pl);

/* dra-serve.c */
int dra_checkpoint_save(struct dra_plugin *pl, struct err *e);
/* The DRA service on dra_sock, then the registration service on reg_sock. */
int dra_serve(struct dra_plugin *pl, const char *dra_sock, const char *reg_sock,
              struct grpc_server **ret_dra, struct grpc_server **ret_reg, struct err *e);

#endif
