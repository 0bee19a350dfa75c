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

#include <stdbool.h>

#include "nodeops.h"

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

enum mm_action mm_decide(const struct mm_input *in);
const char *mm_action_name(enum mm_action a);

#endif
