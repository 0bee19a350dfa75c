/* SPDX-License-Identifier: Apache-2.0 */
/* A GPU reset, a driver reload and a node reboot as NVML shows them afterwards (simnvml.h). */
#include <string.h>

#include "nvml-abi.h"
#include "simnvml.h"

/* What a reset and a driver reload both clear: the volatile counts, the rows pending remapping
 * (the remapping takes effect), the last XID. */
static void reinit(struct sim_gpu_state *g)
{
    g->ecc_sbe_vol = 0;
    g->ecc_dbe_vol = 0;
    g->remap_pending = false;
    g->nvlink_recovery = 0;
    g->nvlink_replay = 0;
    g->last_xid = 0;
}

int sim_gpu_reset(struct sim_gpu_state *g)
{
    if (g->lost)
        return NVML_ERROR_GPU_IS_LOST;
    sim_mig_reset(g);
    reinit(g);
    return NVML_SUCCESS;
}

void sim_gpu_driver_reload(struct sim_gpu_state *g)
{
    if (g->lost)
        return; /* off the bus: the driver does not find it again */
    reinit(g);
    g->retired_pending = false;
    g->timeslice = 0; /* the module's setting goes with it */
}

void sim_gpu_reboot(struct sim_gpu_state *g)
{
    g->lost = false;
    sim_mig_reset(g);
    reinit(g);
    g->retired_pending = false;
    g->mig_fail_in = 0;
    g->timeslice = 0;
    /* MIG instances do not survive a reboot; the mode does */
    g->n_gi = 0;
    memset(g->gi, 0, sizeof(g->gi));
}

static int reboot_fn(struct sim_update *u, struct sim_state *st, void *arg, struct err *e)
{
    (void)u;
    (void)arg;
    (void)e;
    for (size_t i = 0; i < st->n_gpus; i++)
        sim_gpu_reboot(&st->gpus[i]);
    st->n_procs = 0;
    st->boots++;
    return 0;
}

int sim_store_reboot(struct sim_store *s, struct err *e)
{
    return sim_store_update(s, reboot_fn, NULL, e);
}
