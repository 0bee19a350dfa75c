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

size_t dra_mps_order(const struct dra_claim *c, size_t *ret)
{
    size_t n = 0;
    for (size_t i = 0; i < c->n_devices && n < DRA_CLAIM_DEVICES_MAX; i++) {
        const struct dra_prepared_device *x = &c->devices[i];
        if (!dra_mps_device(x))
            continue;
        size_t b = n++;
        for (; b > 0; b--) {
            const struct dra_prepared_device *y = &c->devices[ret[b - 1]];
            if (y->gpu_index < x->gpu_index ||
                (y->gpu_index == x->gpu_index && y->start <= x->start))
                break;
            ret[b] = ret[b - 1];
        }
        ret[b] = i;
    }
    return n;
}

int dra_mps_daemon_plan(const struct dra_claim *c, struct dra_mps_daemon *ret, struct err *e)
{
    struct dra_mps_daemon d = {.active_thread_percentage = -1};
    d.n_devices = dra_mps_order(c, d.devices);
    if (d.n_devices == 0) {
        *ret = d;
        return 0;
    }
    int r = dra_mps_claim_dir(c->ref.uid, e);
    if (r < 0)
        return err_prefix(e, "claim %s/%s", c->ref.ns, c->ref.name);
    for (size_t p = 0; p < d.n_devices; p++)
        if (!c->devices[d.devices[p]].uuid[0])
            return err_set(e, -EINVAL, "claim %s/%s: device %s: MPS on a slice not made yet",
                           c->ref.ns, c->ref.name, c->devices[d.devices[p]].device);
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
        int64_t v = x->sharing.pinned_memory_limit;
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
