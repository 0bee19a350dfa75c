/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Health policy. As NVIDIA's plugin: XIDs 13, 31, 43, 45, 68 and 109 are application errors and
 * leave the GPU healthy; DP_DISABLE_HEALTHCHECKS adds XIDs to ignore ("all"/"xids": ignore every
 * XID), DP_ENABLE_HEALTHCHECKS force-enables XIDs over both ("all": every XID counts).
 * Beyond NVIDIA's plugin: double-bit ECC events count too, and a device returns to Healthy after
 * a quiet period (dp_health_recover); a lost GPU never does.
 */
#include <ctype.h>
#include <string.h>

#include "device-plugin.h"

static const uint64_t default_ignored[] = {13, 31, 43, 45, 68, 109};

/* Parses one comma list: sets *all on "all"/"xids" (or only "all" when only_all), adds numbers. */
static void parse_xid_list(const char *s, bool accept_xids_word, bool *all, uint64_t *set,
                           size_t *n)
{
    if (!s)
        return;
    const char *p = s;
    for (;;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        while (len && isspace((unsigned char)*p))
            p++, len--;
        while (len && isspace((unsigned char)p[len - 1]))
            len--;
        char tok[32];
        if (len > 0 && len < sizeof(tok)) {
            for (size_t i = 0; i < len; i++)
                tok[i] = (char)tolower((unsigned char)p[i]);
            tok[len] = 0;
            uint64_t v;
            bool digits = true;
            for (size_t i = 0; i < len; i++)
                digits = digits && isdigit((unsigned char)tok[i]);
            if (strcmp(tok, "all") == 0 || (accept_xids_word && strcmp(tok, "xids") == 0))
                *all = true;
            else if (digits && parse_u64(tok, &v) == 0 && *n < DP_XID_SET_MAX)
                set[(*n)++] = v;
            /* else: malformed, ignored as NVIDIA's plugin does */
        }
        if (!end)
            break;
        p = end + 1;
    }
}

void dp_health_policy_init(struct dp_health_policy *hp, const char *disable_env,
                           const char *enable_env)
{
    memset(hp, 0, sizeof(*hp));
    for (size_t i = 0; i < ARRAY_SIZE(default_ignored); i++)
        hp->ignored[hp->n_ignored++] = default_ignored[i];
    parse_xid_list(disable_env, true, &hp->disable_all, hp->ignored, &hp->n_ignored);
    parse_xid_list(enable_env, false, &hp->enable_all, hp->enabled, &hp->n_enabled);
}

static bool in_set(const uint64_t *set, size_t n, uint64_t v)
{
    for (size_t i = 0; i < n; i++)
        if (set[i] == v)
            return true;
    return false;
}

bool dp_health_xid_is_critical(const struct dp_health_policy *hp, uint64_t xid)
{
    if (hp->enable_all || in_set(hp->enabled, hp->n_enabled, xid))
        return true;
    if (hp->disable_all)
        return false;
    return !in_set(hp->ignored, hp->n_ignored, xid);
}

bool dp_health_event_is_critical(const struct dp_health_policy *hp, const struct gpu_event *ev)
{
    if (ev->type & GPU_EVENT_XID)
        return dp_health_xid_is_critical(hp, ev->data);
    if (ev->type & GPU_EVENT_ECC_DBE)
        return !hp->disable_all || hp->enable_all;
    return false;
}

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
            if (d->healthy)
                changed++;
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
