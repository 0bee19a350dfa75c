/* SPDX-License-Identifier: Apache-2.0 */
/* The MIG manager's shell, shared by its files: the options and the actions
 * (mig-manager-main.c), its Node (node-api.c) and the GPUs' layout (layout.c). */
#ifndef GPUOP_MIGMGR_INTERNAL_H
#define GPUOP_MIGMGR_INTERNAL_H

#include "mig-manager.h"
#include "migparted.h"

struct kube_client;
struct svc;
struct nvcdi_gen;

struct migmgr {
    const char *node, *kubeconfig, *config_file, *event_ns;
    int kill_after; /* the test hook: an index of mm_hook_names, -1 none */
    const char *host_root, *cdi_spec;
    uint64_t interval_ms, operand_wait_ms, eviction_timeout_ms;

    struct svc *svc;
    struct kube_client *kc;
    struct gpu_lib *lib;
    struct nvcdi_gen *cdi;
    json_t *node_obj; /* the Node as last read or written */
    bool blocked_reported;
};

/* ---- node-api.c: the Node, through the API server ----------------------------------------- */

int mm_node_read(struct migmgr *m, struct err *e);
/* Writes the patch (cleared; nothing when empty); the Node as written becomes node_obj. */
int mm_node_patch(struct migmgr *m, struct mm_patch *p, struct err *e);
/* The Event mm_event_text says; a failure is logged. */
void mm_node_event(struct migmgr *m, enum mm_event k, const char *want, const char *from,
                   const char *detail);
/* The patches mm_conclude_patch, mm_pending_patch, mm_pause_patch and mm_await_reset_patch
 * say, written. */
int mm_node_conclude(struct migmgr *m, const char *state, const char *want, const char *reason,
                     struct err *e);
int mm_node_pending(struct migmgr *m, const char *want, struct err *e);
int mm_node_pause(struct migmgr *m, struct err *e);
int mm_node_await_reset(struct migmgr *m, const char *want, const char *why, bool *ret_first,
                        struct err *e);
/* Evicts the node's GPU pods through the Eviction API (nodeops) and waits for them to go; a
 * blocked eviction is recorded on the node (and one Event). *ret_evicted: who went. */
int mm_node_evict(struct migmgr *m, char **ret_evicted, struct err *e);

/* ---- layout.c: the config file and the GPUs ----------------------------------------------- */

/* What the config file and the GPUs say of the config wanted. */
struct mm_view {
    struct mp_spec *spec;
    struct mp_node *gpus;
    struct mp_plan *plan;
    struct err why;       /* config_error's reason */
    struct err reset_why; /* reset_pending's: the GPUs waiting for a reset */
    bool config_error;
    bool matches;
    bool reset_pending;
};
/* NVML loaded and the CDI spec's generator made; closed (accepts a state never opened). */
int mm_layout_open(struct migmgr *m, struct err *e);
void mm_layout_close(struct migmgr *m);
void mm_view_clear(struct mm_view *v);
/* Reads the config file and the GPUs and plans want. A problem with the config (the file, the
 * name, a layout the GPUs cannot hold) is config_error with the reason; one reading the GPUs is
 * an error. */
int mm_view_read(struct migmgr *m, const char *want, struct mm_view *v, struct err *e);
/* Applies v's plan to the GPUs as they are now (every GPU's MIG mode first; a failure rolls
 * back): what it led to, with the reason in why (a failure's, or the reset's). */
int mm_layout_apply(struct migmgr *m, const char *want, struct mm_view *v, enum mm_after_apply *ret,
                    bool *ret_rollback_failed, struct err *why, struct err *e);
/* The node's CDI spec written again for the new layout, where the toolkit keeps one (a failure
 * is logged: the toolkit writes it again within its interval). */
void mm_layout_cdi(struct migmgr *m);

#endif
