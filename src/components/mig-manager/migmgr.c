/* SPDX-License-Identifier: Apache-2.0 */
/* migmgr's pure core: what to do next from what the Node and the GPUs say. */
#include <string.h>

#include "mig-manager.h"

static const char *const paused_labels[] = {
    "nvidia.com/gpu.deploy.device-plugin",
    "nvidia.com/gpu.deploy.gpu-feature-discovery",
    "nvidia.com/gpu.deploy.dcgm-exporter",
    "nvidia.com/gpu.deploy.dcgm",
    "nvidia.com/gpu.deploy.nvsm",
    "nvidia.com/gpu.deploy.client",
    NULL,
};

const struct nodeops_pause mm_pause = {.word = MM_PAUSED, .labels = paused_labels};

static bool empty(const char *s)
{
    return !s || !s[0];
}

enum mm_action mm_decide(const struct mm_input *in)
{
    if (empty(in->want))
        return in->paused || !empty(in->progress) ? MM_RESTORE : MM_NOTHING;
    /* A failed apply is not retried in a loop (each try would evict again). */
    if (streq_ptr(in->state, "failed") && streq_ptr(in->failed, in->want) && empty(in->progress) &&
        !in->paused)
        return MM_NOTHING;
    if (in->config_error)
        return MM_REFUSE;
    if (in->matches)
        return streq_ptr(in->state, "success") && !in->paused && empty(in->progress) ? MM_NOTHING
                                                                                     : MM_FINISH;
    if (in->reset_pending)
        return streq_ptr(in->state, "rebooting") && !in->paused && streq_ptr(in->progress, in->want)
                   ? MM_NOTHING
                   : MM_AWAIT_RESET;
    return MM_CHANGE;
}

const char *mm_action_name(enum mm_action a)
{
    static const char *const n[] = {"nothing", "restore", "refuse",
                                    "finish",  "change",  "await-reset"};
    return (unsigned)a < ARRAY_SIZE(n) ? n[a] : "?";
}
