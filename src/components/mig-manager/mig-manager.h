/* SPDX-License-Identifier: Apache-2.0 */
/*
 * migmgr: the decisions of `gpuop mig-manager`, the node agent that lays out the node's GPUs as
 * the nvidia.com/mig.config label names a config of the mig-parted config file
 * (docs/mig-manager.md). Its whole state is on the Node: the labels nvidia.com/mig.config
 * (wanted) and nvidia.com/mig.config.state (pending, success, failed, rebooting), the operand pause
 * (nodeops, word "paused-for-mig-change") and the annotations below; a process killed anywhere
 * decides again from them and finishes the change (or gives it up and restores the operands).
 * Pure; thread-compatible.
 */
#ifndef GPUOP_MIGMGR_H
#define GPUOP_MIGMGR_H

#include <jansson.h>
#include <stdbool.h>

#include "nodeops.h"
#include "util.h"

#define MM_LABEL_CONFIG "nvidia.com/mig.config"
#define MM_LABEL_STATE  "nvidia.com/mig.config.state"
#define MM_PAUSED       "paused-for-mig-change"
/* The config a change is under way for (set with state pending, removed when it ends). */
#define MM_ANN_PROGRESS "gpuop.dev/mig-manager.progress"
/* Why the state is what it is: the refusal, the failure, the budget an eviction waits on. */
#define MM_ANN_REASON "gpuop.dev/mig-manager.reason"
/* The config whose apply failed: not tried again until the label names another one (or this
 * annotation is removed). */
#define MM_ANN_FAILED "gpuop.dev/mig-manager.failed"
/* The config last applied with success, for the next change's Event. */
#define MM_ANN_APPLIED "gpuop.dev/mig-manager.applied"
/* "true": change the layout without evicting the pods using the GPUs first. */
#define MM_ANN_FORCE "gpuop.dev/mig-manager.force"

/* The operands paused around a change: NVIDIA's list (the device plugin, feature discovery,
 * DCGM and its exporter, NVSM, and a GPU client's label when the node has one). */
extern const struct nodeops_pause mm_pause;

struct mm_input {
    const char *want;     /* nvidia.com/mig.config; NULL or "": none */
    const char *state;    /* nvidia.com/mig.config.state */
    const char *progress; /* MM_ANN_PROGRESS */
    const char *failed;   /* MM_ANN_FAILED */
    bool paused;          /* an operand paused with MM_PAUSED */
    bool config_error;    /* want cannot be used: bad file, unknown name, does not fit */
    bool matches;         /* the GPUs are laid out as want says */
    /* The MIG mode want asks for is set on some GPU but waits for a GPU reset (the driver
     * could not reset it live): only a reboot (or a reset) finishes it. */
    bool reset_pending;
};

enum mm_action {
    MM_NOTHING, /* as wanted, nothing left behind */
    MM_RESTORE, /* no config wanted: undo a pause or a change a killed run left */
    MM_REFUSE,  /* state failed with the reason; operands restored; GPUs untouched */
    MM_FINISH,  /* the layout is there: restore the operands, state success */
    MM_CHANGE,  /* pending, pause, wait for the operands, evict, apply, then finish */
    /* state rebooting with the reason, operands restored (the GPUs serve their current layout
     * meanwhile), the change kept in progress: after the reset it is an MM_CHANGE again */
    MM_AWAIT_RESET,
};

/* What the Node says: want, state, progress, failed, paused (the rest is the GPUs'); the strings
 * point into node. */
void mm_input_read(const json_t *node, struct mm_input *ret);
enum mm_action mm_decide(const struct mm_input *in);
const char *mm_action_name(enum mm_action a);

/* ---- a change's steps --------------------------------------------------------------------- */

/* The names the test hook (GPUOP_MIG_MANAGER_KILL_AFTER) knows, in the order a change passes
 * them; NULL-terminated. */
extern const char *const mm_hook_names[];

/* Whether a change evicts the GPU pods first: not when the node says MM_ANN_FORCE=true. */
bool mm_evict_first(const json_t *node);

enum mm_after_apply {
    MM_APPLIED,      /* the layout is there: finish */
    MM_APPLY_FAILED, /* state failed with the reason (the GPUs rolled back) */
    MM_RESET_WAIT,   /* a mode waits for a GPU reset: MM_AWAIT_RESET */
    MM_RESET_DONE,   /* it waited, but a reset came in between: the next look finishes */
};
/* What an apply (MP_APPLY_MODES_FIRST) led to: mp_apply's r, whether it stopped at a mode change
 * waiting for a reset, and then whether the GPUs, read again, still wait for it. */
enum mm_after_apply mm_after_apply(int r, bool reset_required, bool still_pending);

/* ---- what is written on the Node ---------------------------------------------------------- */

/* A merge patch of the Node's metadata: labels and annotations, either NULL (a null value
 * removes the key). Owned: mm_patch_clear. */
struct mm_patch {
    json_t *labels, *annotations;
};
void mm_patch_clear(struct mm_patch *p);
bool mm_patch_empty(const struct mm_patch *p);

/* Ends a change or a refusal: the operands restored, the state set (NULL: left as it is), the
 * progress removed, the reason set (NULL removes it), the failed config set to want unless the
 * state is success (then removed, and the applied config set to want). */
int mm_conclude_patch(const json_t *node, const char *state, const char *want, const char *reason,
                      struct mm_patch *ret, struct err *e);
/* A change starts: state pending, progress want, reason and failed removed. Empty when the node
 * is pending for want already. */
void mm_pending_patch(const json_t *node, const char *want, struct mm_patch *ret);
/* The operands paused (empty when they are). */
int mm_pause_patch(const json_t *node, struct mm_patch *ret, struct err *e);
/* A mode change waits for a GPU reset: the operands restored, state rebooting, the change kept
 * in progress, the reason why, failed removed. *ret_first: the state was not rebooting yet. */
int mm_await_reset_patch(const json_t *node, const char *want, const char *why,
                         struct mm_patch *ret, bool *ret_first, struct err *e);
/* An eviction waits on why (nodeops'): "waiting for an eviction: <why>" recorded as the reason
 * (empty when the node says it already). */
void mm_blocked_patch(const json_t *node, const char *why, struct mm_patch *ret);
/* The evictions done: a wait's reason removed (empty when there is none). */
void mm_unblocked_patch(const json_t *node, struct mm_patch *ret);

/* ---- Events ------------------------------------------------------------------------------- */

enum mm_event {
    MM_EV_REFUSED,          /* detail: why the config cannot be used */
    MM_EV_FAILED,           /* detail: why the apply failed */
    MM_EV_ROLLBACK_FAILED,  /* ... and the rollback too */
    MM_EV_APPLIED,          /* from: the config before; detail: the pods evicted */
    MM_EV_REBOOT,           /* detail: the GPUs waiting for a reset */
    MM_EV_EVICTION_BLOCKED, /* detail: the wait's reason (mm_blocked_patch's) */
};
struct mm_event_text {
    bool warning;
    const char *reason; /* MIGConfigFailed, MIGConfigApplied, ... */
    char msg[1024];
};
void mm_event_text(enum mm_event k, const char *want, const char *from, const char *detail,
                   struct mm_event_text *ret);

#endif
