/* SPDX-License-Identifier: Apache-2.0 */
/*
 * MPS sharing (dra-plugin.h): the control daemon a claim with MPS devices gets (its folder, the
 * devices it sees, the limits told to it) and what its containers get (dra_claim_cdi_spec).
 * Pure.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "dra-plugin.h"

bool dra_mps_device(const struct dra_prepared_device *d)
{
    return d->sharing.strategy == DRA_SHARE_MPS;
}

int dra_mps_claim_dir(const char *uid, struct err *e)
{
    /* a metadata.uid is lower-case hex and dashes; anything else never names a folder */
    size_t n = strlen(uid);
    if (n == 0 || n >= DRA_UID_MAX || strspn(uid, "0123456789abcdefghijklmnopqrstuvwxyz-") != n)
        return err_set(e, -EINVAL, "claim UID \"%s\" is not a UID (lower-case letters, digits, -)",
                       uid);
    return 0;
}

/* The limit of the daemon's device at ordinal pos with that uuid: the per-device limit keyed by
 * the ordinal or the UUID, else the default; -1 none. */
static int64_t pinned_limit(const struct dra_sharing *sh, size_t pos, const char *uuid)
{
    int64_t v = sh->pinned_memory_limit;
    char idx[24];
    snprintf(idx, sizeof(idx), "%zu", pos);
    for (size_t i = 0; i < sh->n_limits; i++)
        if (strcmp(sh->limits[i].device, idx) == 0 || strcmp(sh->limits[i].device, uuid) == 0)
            v = sh->limits[i].bytes;
    return v;
}

int dra_mps_daemon_plan(const struct dra_claim *c, struct dra_mps_daemon *ret, struct err *e)
{
    struct dra_mps_daemon d = {.active_thread_percentage = -1};
    int r = dra_mps_claim_dir(c->ref.uid, e);
    if (r < 0)
        return err_prefix(e, "claim %s/%s", c->ref.ns, c->ref.name);
    /* the claim's MPS devices in bus order (GPU index, then placement), which is the order
     * CUDA numbers them in (CUDA_DEVICE_ORDER=PCI_BUS_ID) */
    for (size_t i = 0; i < c->n_devices && d.n_devices < DRA_CLAIM_DEVICES_MAX; i++) {
        const struct dra_prepared_device *x = &c->devices[i];
        if (!dra_mps_device(x))
            continue;
        if (!x->uuid[0])
            return err_set(e, -EINVAL, "claim %s/%s: device %s: MPS on a slice not made yet",
                           c->ref.ns, c->ref.name, x->device);
        size_t b = d.n_devices++;
        for (; b > 0; b--) {
            const struct dra_prepared_device *y = &c->devices[d.devices[b - 1]];
            if (y->gpu_index < x->gpu_index ||
                (y->gpu_index == x->gpu_index && y->start <= x->start))
                break;
            d.devices[b] = d.devices[b - 1];
        }
        d.devices[b] = i;
    }
    if (d.n_devices == 0) {
        *ret = d;
        return 0;
    }
    snprintf(d.claim_dir, sizeof(d.claim_dir), "%s", c->ref.uid);
    struct sbuf vis, cmd, env;
    sbuf_init(&vis, sizeof(d.visible_devices) - 1);
    sbuf_init(&cmd, sizeof(d.commands) - 1);
    sbuf_init(&env, sizeof(d.pinned_env) - 1);
    /* the first device's percentage: one daemon per claim has one default */
    d.active_thread_percentage = c->devices[d.devices[0]].sharing.active_thread_percentage;
    if (d.active_thread_percentage > 0)
        sbuf_addf(&cmd, "set_default_active_thread_percentage %d\n", d.active_thread_percentage);
    for (size_t p = 0; p < d.n_devices; p++) {
        const struct dra_prepared_device *x = &c->devices[d.devices[p]];
        sbuf_addf(&vis, "%s%s", p ? "," : "", x->uuid);
        int64_t v = pinned_limit(&x->sharing, p, x->uuid);
        if (v <= 0)
            continue;
        int64_t mb = (v + 1024 * 1024 - 1) / (1024 * 1024); /* MPS counts in MB */
        sbuf_addf(&cmd, "set_default_device_pinned_mem_limit %zu %" PRId64 "M\n", p, mb);
        sbuf_addf(&env, "%s%zu=%" PRId64 "M", env.len ? "," : "", p, mb);
    }
    if ((r = sbuf_check_err(&vis, e, "claim %s/%s: MPS devices", c->ref.ns, c->ref.name)) == 0 &&
        (r = sbuf_check_err(&cmd, e, "claim %s/%s: MPS commands", c->ref.ns, c->ref.name)) == 0 &&
        (r = sbuf_check_err(&env, e, "claim %s/%s: MPS limits", c->ref.ns, c->ref.name)) == 0) {
        snprintf(d.visible_devices, sizeof(d.visible_devices), "%s", vis.data ? vis.data : "");
        snprintf(d.commands, sizeof(d.commands), "%s", cmd.data ? cmd.data : "");
        snprintf(d.pinned_env, sizeof(d.pinned_env), "%s", env.data ? env.data : "");
        *ret = d;
    }
    sbuf_free(&vis);
    sbuf_free(&cmd);
    sbuf_free(&env);
    return r;
}
