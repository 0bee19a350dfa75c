/* SPDX-License-Identifier: Apache-2.0 */
/* The device plugin's health thread (dp-shell.h): NVML's XID and ECC events through the health
 * policy (dp-health.c), lost GPUs probed, devices recovered after the quiet period or once NVML
 * shows their GPU reset and healthy; every change broadcast to the ListAndWatch streams. */
#include <assert.h>

#include "dp-shell.h"

#define DP_LOST_CHECK_MS  2000
#define DP_RESET_CHECK_MS 1000
#define DP_EVENT_WAIT_MS  100

/* What the early recovery reads of a sample; false when its ECC counts were not read. */
static bool gpu_now_of(const struct gpu_sample *smp, struct dp_gpu_now *ret)
{
    if (!smp->lost && !(smp->valid & GPU_SAMPLE_ECC))
        return false;
    *ret = (struct dp_gpu_now){
        .lost = smp->lost,
        .ecc_sbe_vol = smp->ecc_sbe_vol,
        .ecc_dbe_vol = smp->ecc_dbe_vol,
        .remap_pending = (smp->valid & GPU_SAMPLE_REMAPPED) && smp->remap_pending,
        .remap_failure = (smp->valid & GPU_SAMPLE_REMAPPED) && smp->remap_failure,
        .retired_pending = (smp->valid & GPU_SAMPLE_RETIRED) && smp->retired_pending,
    };
    return true;
}

static void *health_main(void *arg)
{
    struct plugin *pl = arg;
    struct err e = {0};
    _cleanup_(gpu_events_freep) struct gpu_events *ev = steal_ptr(&pl->health_ev);
    uint64_t last_lost = 0, last_reset = 0, last_wait_err = 0;
    while (!stop_requested(pl->stop)) {
        struct gpu_event event;
        int r = -ETIMEDOUT;
        if (ev) {
            r = gpu_events_wait(ev, DP_EVENT_WAIT_MS, &event, &e);
        } else if (stop_wait(pl->stop, DP_EVENT_WAIT_MS)) {
            break;
        }
        uint64_t now = now_ms_mono();
        size_t changed = 0;
        if (r < 0 && r != -ETIMEDOUT) {
            if (now - last_wait_err > 10000)
                log_warn(DP_COMP, "waiting for GPU events failed", "error=\"%s\"", err_msg(&e));
            last_wait_err = now;
            if (stop_wait(pl->stop, 200))
                break;
        }
        pthread_mutex_lock(&pl->mu);
        unsigned n_gpus = pl->plan ? pl->plan->n_gpus : 0;
        bool critical = r == 0 && gh_policy_event_critical(&pl->hp, &event);
        if (critical) {
            size_t c = dp_health_apply(pl->plan, &event, now);
            log_warn(DP_COMP, "GPU error: devices marked Unhealthy",
                     "gpu=%u uuid=%s type=0x%llx xid=%llu gi=%u ci=%u devices=%zu", event.gpu_index,
                     event.uuid, (unsigned long long)event.type, (unsigned long long)event.data,
                     event.gi_id, event.ci_id, c);
            changed += c;
        } else if (r == 0) {
            log_info(DP_COMP, "GPU event ignored by the health policy",
                     "gpu=%u type=0x%llx xid=%llu", event.gpu_index, (unsigned long long)event.type,
                     (unsigned long long)event.data);
        }
        uint64_t due = pl->plan ? dp_health_recovery_due(pl->plan, now, pl->recovery_ms) : 0;
        uint64_t watch = 0;
        if (pl->plan && now - last_reset >= DP_RESET_CHECK_MS) {
            watch = dp_health_reset_watch(pl->plan);
            last_reset = now;
        }
        pthread_mutex_unlock(&pl->mu);
        bool sweep = now - last_lost >= DP_LOST_CHECK_MS;
        if (sweep)
            last_lost = now;
        int critical_gpu = critical && event.gpu_index < 64 ? (int)event.gpu_index : -1;
        uint64_t probe = dp_health_probe(n_gpus, due | watch, critical_gpu, sweep);
        uint64_t lost = 0, seen = 0;
        struct dp_gpu_now nows[64];
        for (unsigned g = 0; g < n_gpus && g < 64; g++) {
            if (!(probe & (1ull << g)))
                continue;
            struct gpu_sample smp;
            struct err se = {0};
            if (gpu_sample_read(pl->lib, g, &smp, &se) < 0)
                continue;
            if (smp.lost)
                lost |= 1ull << g;
            if (gpu_now_of(&smp, &nows[g]))
                seen |= 1ull << g;
        }
        pthread_mutex_lock(&pl->mu);
        for (unsigned g = 0; g < n_gpus && g < 64 && pl->plan && g < pl->plan->n_gpus; g++) {
            if (!(seen & (1ull << g)))
                continue;
            if ((watch & (1ull << g)) && (int)g != critical_gpu) {
                size_t c = dp_health_recover_reset(pl->plan, g, &nows[g]);
                if (c)
                    log_info(DP_COMP, "devices Healthy again: NVML shows the GPU reset and healthy",
                             "gpu=%u devices=%zu ecc_volatile=%llu", g, c,
                             (unsigned long long)(nows[g].ecc_sbe_vol + nows[g].ecc_dbe_vol));
                changed += c;
            }
            if ((watch & (1ull << g)) || (int)g == critical_gpu)
                dp_health_note_ecc(pl->plan, g, &nows[g]);
        }
        for (unsigned g = 0; g < n_gpus && g < 64; g++)
            if ((lost & (1ull << g)) && pl->plan && g < pl->plan->n_gpus) {
                size_t c = dp_health_mark_lost(pl->plan, g);
                if (c)
                    log_error(DP_COMP, "GPU is lost: devices Unhealthy for good", "gpu=%u", g);
                changed += c;
            }
        size_t rec = pl->plan ? dp_health_recover(pl->plan, now, pl->recovery_ms) : 0;
        if (rec)
            log_info(DP_COMP, "devices Healthy again after the quiet period", "devices=%zu", rec);
        changed += rec;
        pthread_mutex_unlock(&pl->mu);
        if (changed)
            dp_broadcast(pl);
    }
    return NULL;
}

void dp_health_start(struct plugin *pl)
{
    /* The event set is registered here, before the devices are served: an error in the first
     * moment they are advertised is not lost to the thread's start-up (NVML delivers only what
     * happens after the registration). */
    struct err e = {0};
    assert(!pl->health_ev && !pl->health_running);
    if (gpu_events_open(pl->lib, GPU_EVENT_XID | GPU_EVENT_ECC_DBE, &pl->health_ev, &e) < 0)
        log_warn(DP_COMP,
                 "Failed to start health check; continuing with event health checks "
                 "disabled",
                 "error=\"%s\"", err_msg(&e));
    if (pthread_create(&pl->health, NULL, health_main, pl) == 0) {
        pl->health_running = true;
    } else {
        log_error(DP_COMP, "cannot start the health thread", NULL);
        gpu_events_free(steal_ptr(&pl->health_ev));
    }
}

void dp_health_join(struct plugin *pl)
{
    if (!pl->health_running)
        return;
    stop_request(pl->stop); /* the process is ending, on success or error alike */
    pthread_join(pl->health, NULL);
    pl->health_running = false;
}
