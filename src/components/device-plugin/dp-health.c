/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Device health. Which events count is src/lib/gpuhealth's policy (NVIDIA's plugin's XIDs,
 * DP_DISABLE_HEALTHCHECKS, DP_ENABLE_HEALTHCHECKS, double-bit ECC). Beyond NVIDIA's plugin: a
 * device returns to Healthy after a quiet period (dp_health_recover), or as soon as NVML shows
 * its GPU reset and healthy (dp_health_reset_cleared); a lost GPU never does.
 */
#include <string.h>

#include "device-plugin.h"

static bool event_hits(const struct dp_plan *p, const struct dp_device *d,
                       const struct gpu_event *ev)
{
    if (ev->uuid[0]) {
        if (d->gpu >= p->n_gpus || strcmp(p->gpu_uuid[d->gpu], ev->uuid) != 0)
            return false;
    } else if (d->gpu != ev->gpu_index) {
        return false;
    }
    if (!d->is_mig)
        return true;
    return (ev->gi_id == 0xFFFFFFFFu || ev->gi_id == d->gi_id) &&
           (ev->ci_id == 0xFFFFFFFFu || ev->ci_id == d->ci_id);
}

size_t dp_health_apply(struct dp_plan *p, const struct gpu_event *ev, uint64_t now_ms)
{
    size_t changed = 0;
    for (size_t i = 0; i < p->n_resources; i++)
        for (size_t j = 0; j < p->resources[i].n_devices; j++) {
            struct dp_device *d = &p->resources[i].devices[j];
            if (!event_hits(p, d, ev))
                continue;
            if (d->healthy) {
                changed++;
                d->ecc_vol_at_error = 0; /* a new episode: its count is noted after it */
            }
            d->healthy = false;
            d->last_error_ms = now_ms;
        }
    return changed;
}

size_t dp_health_mark_lost(struct dp_plan *p, unsigned gpu)
{
    size_t changed = 0;
    for (size_t i = 0; i < p->n_resources; i++)
        for (size_t j = 0; j < p->resources[i].n_devices; j++) {
            struct dp_device *d = &p->resources[i].devices[j];
            if (d->gpu != gpu)
                continue;
            if (d->healthy || !d->lost)
                changed++;
            d->healthy = false;
            d->lost = true;
        }
    return changed;
}

size_t dp_health_recover(struct dp_plan *p, uint64_t now_ms, uint64_t recovery_ms)
{
    if (recovery_ms == 0)
        return 0;
    size_t changed = 0;
    for (size_t i = 0; i < p->n_resources; i++)
        for (size_t j = 0; j < p->resources[i].n_devices; j++) {
            struct dp_device *d = &p->resources[i].devices[j];
            if (d->healthy || d->lost || now_ms < d->last_error_ms ||
                now_ms - d->last_error_ms < recovery_ms)
                continue;
            d->healthy = true;
            changed++;
        }
    return changed;
}

uint64_t dp_health_recovery_due(const struct dp_plan *p, uint64_t now_ms, uint64_t recovery_ms)
{
    uint64_t mask = 0;
    if (recovery_ms == 0)
        return 0;
    for (size_t i = 0; i < p->n_resources; i++)
        for (size_t j = 0; j < p->resources[i].n_devices; j++) {
            const struct dp_device *d = &p->resources[i].devices[j];
            if (!d->healthy && !d->lost && now_ms >= d->last_error_ms &&
                now_ms - d->last_error_ms >= recovery_ms && d->gpu < 64)
                mask |= 1ull << d->gpu;
        }
    return mask;
}

uint64_t dp_health_probe(unsigned n_gpus, uint64_t due, int critical_gpu, bool sweep)
{
    if (sweep)
        return n_gpus >= 64 ? ~0ull : (1ull << n_gpus) - 1;
    if (critical_gpu >= 0 && critical_gpu < 64)
        due |= 1ull << critical_gpu;
    return due;
}

void dp_health_note_ecc(struct dp_plan *p, unsigned gpu, const struct dp_gpu_now *now)
{
    uint64_t vol = now->ecc_sbe_vol + now->ecc_dbe_vol;
    if (now->lost || vol < now->ecc_sbe_vol) /* lost: nothing read; or the sum overflowed */
        return;
    for (size_t i = 0; i < p->n_resources; i++)
        for (size_t j = 0; j < p->resources[i].n_devices; j++) {
            struct dp_device *d = &p->resources[i].devices[j];
            if (d->gpu == gpu && !d->healthy && !d->lost && vol > d->ecc_vol_at_error)
                d->ecc_vol_at_error = vol;
        }
}

uint64_t dp_health_reset_watch(const struct dp_plan *p)
{
    uint64_t mask = 0;
    for (size_t i = 0; i < p->n_resources; i++)
        for (size_t j = 0; j < p->resources[i].n_devices; j++) {
            const struct dp_device *d = &p->resources[i].devices[j];
            if (!d->healthy && !d->lost && d->gpu < 64)
                mask |= 1ull << d->gpu;
        }
    return mask;
}

bool dp_health_reset_cleared(uint64_t ecc_vol_at_error, const struct dp_gpu_now *now)
{
    uint64_t vol = now->ecc_sbe_vol + now->ecc_dbe_vol;
    return ecc_vol_at_error > 0 && !now->lost && vol >= now->ecc_sbe_vol &&
           vol < ecc_vol_at_error && now->ecc_dbe_vol == 0 && !now->remap_pending &&
           !now->remap_failure && !now->retired_pending;
}

size_t dp_health_recover_reset(struct dp_plan *p, unsigned gpu, const struct dp_gpu_now *now)
{
    size_t changed = 0;
    for (size_t i = 0; i < p->n_resources; i++)
        for (size_t j = 0; j < p->resources[i].n_devices; j++) {
            struct dp_device *d = &p->resources[i].devices[j];
            if (d->gpu != gpu || d->healthy || d->lost ||
                !dp_health_reset_cleared(d->ecc_vol_at_error, now))
                continue;
            d->healthy = true;
            d->ecc_vol_at_error = 0;
            changed++;
        }
    return changed;
}
