/* SPDX-License-Identifier: Apache-2.0 */
/* The driver manager's shell, shared by its files: the options (driver-manager-main.c), its Node
 * (node-api.c) and the node root (node-root.c). */
#ifndef GPUOP_DRIVERMGR_INTERNAL_H
#define GPUOP_DRIVERMGR_INTERNAL_H

#include "driver-manager.h"

struct kube_client;

struct drivermgr {
    const char *host_root, *driver_root, *validations_dir, *node, *kubeconfig;
    const char *driver_version, *event_ns;
    int exit_after; /* the test hook: an index of dm_hook_names, -1 none */
    uint64_t operand_wait_ms, host_wait_ms;
    struct dm_config cfg;

    struct kube_client *kc;
    json_t *node_obj; /* the Node as last read or written */
    bool blocked_reported;
};

/* ---- node-api.c: the Node, through the API server ----------------------------------------- */

int dm_node_read(struct drivermgr *d, struct err *e);
/* A merge patch of the Node (taken); the Node as written becomes node_obj. */
int dm_node_patch(struct drivermgr *d, json_t *patch, struct err *e);
/* The operands paused (the labels nodeops says). */
int dm_node_pause(struct drivermgr *d, struct err *e);
/* The operands restored (dm_restore_patch; pre_installed: gpu.deploy.driver=pre-installed too)
 * and the node uncordoned when the driver manager cordoned it. */
int dm_node_restore(struct drivermgr *d, bool pre_installed, struct err *e);
/* Cordons the node unless it is cordoned already, marking the cordon as the driver manager's. */
int dm_node_cordon(struct drivermgr *d, struct err *e);
/* An Event on the Node; a failure is logged. */
void dm_node_event(struct drivermgr *d, const char *type, const char *reason, const char *msg);
/* gpuop.dev/driver-owner and its Event. */
int dm_node_report(struct drivermgr *d, const struct dm_finding *f, struct err *e);
/* Evicts the node's GPU pods (drain false) or what a drain takes (drain true, dm_evict_select)
 * through the Eviction API (nodeops) and waits for them to go; a blocked eviction is one
 * Warning Event. */
struct svc;
int dm_node_evict(struct svc *s, struct drivermgr *d, bool drain, struct err *e);
/* gpuop.dev/last-drain and its Event, before the drain's first eviction. */
int dm_node_record_drain(struct drivermgr *d, const struct dm_finding *f, struct err *e);

/* ---- node-root.c: the kernel modules and the driver root ---------------------------------- */

/* The test hook (GPUOP_DRIVER_MANAGER_KILL_AFTER): the process dies as by `kill -9` once the
 * step named names[d->exit_after] is done; step NULL: nothing. */
void dm_step_done(const struct drivermgr *d, const char *const *names, const char *step);

/* The loaded modules unloaded (`rmmod`), as the node shows them now. */
int dm_root_unload(struct drivermgr *d, struct err *e);
/* A stale driver root unmounted, .driver-ctr-ready removed. */
int dm_root_clean(struct drivermgr *d, struct err *e);

/* ---- remediate-main.c: `gpuop driver-manager remediate` ---------------------------------- */

extern const struct svc_component drivermgr_remediate_component;

#endif
