/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The node status exporter's GPU health (node-status-exporter.h, "GPU health"): what NVML's
 * samples say to the health tracker (src/lib/gpuhealth), the device plugin's disagreement, the
 * Node condition to write and the health metrics. Pure.
 */
#include <stdio.h>
#include <string.h>

#include "kobj.h"
#include "node-status-exporter.h"

void nst_health_gpu(const struct gpu_sample *s, unsigned index, const char *uuid,
                    struct gh_gpu_obs *ret)
{
    struct gh_gpu_obs g = {.index = index, .uuid = uuid, .lost = s->lost};
    if (!s->lost) {
        g.ecc_ok = (s->valid & GPU_SAMPLE_ECC) != 0;
        g.dbe_volatile = s->ecc_dbe_vol;
        g.remap_ok = (s->valid & GPU_SAMPLE_REMAPPED) != 0;
        g.remap_pending = s->remap_pending;
        g.remap_failure = s->remap_failure;
        g.retired_ok = (s->valid & GPU_SAMPLE_RETIRED) != 0;
        g.retired_pending = s->retired_pending;
        g.nvlink_ok = (s->valid & GPU_SAMPLE_NVLINK_ERRORS) != 0;
        g.nvlink_errors = s->nvlink_recovery + s->nvlink_replay;
        g.clocks_ok = (s->valid & GPU_SAMPLE_CLOCK_EVENTS) != 0;
        g.clock_event_reasons = s->clock_event_reasons;
    }
    *ret = g;
}

int nst_plugin_held_back(const struct nst_report *r)
{
    if (!r->count_ok)
        return -1;
    if (!r->count.mismatch || r->lost > 0)
        return 0; /* short with a GPU lost: the lost GPU is the fault, not the plugin */
    int64_t held = 0;
    for (size_t i = 0; i < r->count.n_expected; i++) {
        int64_t adv = 0;
        for (size_t k = 0; k < r->count.n_advertised; k++)
            if (strcmp(r->count.advertised[k].name, r->count.expected[i].name) == 0)
                adv = r->count.advertised[k].count;
        if (r->count.expected[i].count > adv)
            held += r->count.expected[i].count - adv;
    }
    return held > 1000000 ? 1000000 : (int)held;
}

json_t *nst_health_condition_patch(const json_t *conditions, const struct gh_report *h,
                                   uint64_t now_ms)
{
    size_t i;
    json_t *c;
    json_array_foreach ((json_t *)conditions, i, c) {
        if (!streq_ptr(kobj_str(c, "type"), GH_CONDITION_TYPE))
            continue;
        if (streq_ptr(kobj_str(c, "status"), h->condition_status ? "True" : "False") &&
            streq_ptr(kobj_str(c, "reason"), h->condition_reason) &&
            streq_ptr(kobj_str(c, "message"), h->condition_message))
            return NULL;
    }
    char now[40];
    time_rfc3339(now_ms, now, sizeof(now));
    json_t *cond = kobj_condition(conditions, GH_CONDITION_TYPE, h->condition_status,
                                  h->condition_reason, h->condition_message, now, -1);
    /* a Node condition carries a heartbeat too (the kubelet's own do) */
    json_object_set_new(cond, "lastHeartbeatTime", json_string(now));
    return json_pack("{s:{s:[o]}}", "status", "conditions", cond);
}

void nst_render_health(struct prom_writer *w, const struct nst_report *r)
{
    const char *healthy = "gpuop_node_gpu_healthy";
    struct prom_label l[] = {{"node", r->node}};
    prom_family(w, healthy, PROM_GAUGE,
                "1 while no GPU fault asks to take the node out of service (the GPUHealthy "
                "condition)");
    prom_sample(w, healthy, l, 1, r->health.healthy);
    const char *faults = "gpuop_node_gpu_health_faults";
    prom_family(w, faults, PROM_GAUGE, "Active GPU faults on the node, by class");
    for (int c = 0; c < GH_CLS_COUNT; c++) {
        size_t n = 0;
        for (size_t i = 0; i < r->health.n_faults; i++)
            n += r->health.faults[i].cls == (enum gh_class)c;
        struct prom_label fl[] = {{"node", r->node}, {"class", gh_class_name(c)}};
        prom_sample(w, faults, fl, ARRAY_SIZE(fl), (double)n);
    }
    const char *action = "gpuop_node_gpu_health_action";
    prom_family(w, action, PROM_GAUGE,
                "The action the node's worst active GPU fault recommends: 1 for that action");
    for (int a = 0; a < GH_ACT_COUNT; a++) {
        struct prom_label al[] = {{"node", r->node}, {"action", gh_action_name(a)}};
        prom_sample(w, action, al, ARRAY_SIZE(al), r->health.action == (enum gh_action)a);
    }
    const char *events = "gpuop_node_gpu_health_events_total";
    prom_family(w, events, PROM_COUNTER, "GPU faults and events seen since the start, by class");
    for (int c = 0; c < GH_CLS_COUNT; c++) {
        struct prom_label el[] = {{"node", r->node}, {"class", gh_class_name(c)}};
        prom_sample_u64(w, events, el, ARRAY_SIZE(el), r->health_events[c]);
    }
}
