/* SPDX-License-Identifier: Apache-2.0 */
/* The remediation section's view model (statusview.h): each GPU node with a fault or a
 * remediation state (src/lib/remediation's labels and annotations, the node agent's health
 * annotation), the breakers that are open, and the ClusterPolicy's GPURemediation condition. */
#include <stdlib.h>
#include <string.h>

#include "gpuhealth.h"
#include "kobj.h"
#include "remediation.h"
#include "statusview.h"

static json_t *str_or_null(const char *s)
{
    return s ? json_string(s) : json_null();
}

/* An epoch-ms annotation as RFC 3339, or null. */
static json_t *ms_time(const char *v)
{
    int64_t ms;
    if (!v || parse_i64(v, &ms) < 0 || ms <= 0)
        return json_null();
    char buf[64];
    time_rfc3339((uint64_t)ms, buf, sizeof(buf));
    return json_string(buf);
}

/* A node's entry, or NULL: in service with no fault. */
static json_t *node_entry(const json_t *node)
{
    const char *state = kobj_label(node, REM_LABEL_STATE);
    const char *waiting = kobj_annotation(node, REM_ANN_WAITING);
    const char *ht = kobj_annotation(node, GH_ANN_HEALTH);
    struct gh_health h;
    struct err e = {0};
    bool h_ok = ht && gh_health_parse(ht, strlen(ht), &h, &e) == 0;
    bool faulty = h_ok && !h.healthy;
    if (!state && !waiting && !faulty && !(ht && !h_ok))
        return NULL;
    json_t *event = json_null();
    if (h_ok && h.has_last) {
        char reason[64];
        gh_fault_reason(&h.last, reason, sizeof(reason));
        char since[64];
        time_rfc3339(h.last.since_ms > 0 ? (uint64_t)h.last.since_ms : 0, since, sizeof(since));
        event = json_pack("{s:s,s:s,s:s,s:s}", "reason", reason, "action",
                          gh_action_name(h.last.action), "message", h.last.message, "time", since);
    }
    const char *action = kobj_annotation(node, REM_ANN_ACTION);
    if (!action && faulty)
        action = gh_action_name(h.action);
    const char *why = streq_ptr(state, "failed") ? kobj_annotation(node, REM_ANN_REASON) : waiting;
    return json_pack("{s:s?,s:s,s:o,s:o,s:o,s:o,s:o,s:o,s:o}", "name", kobj_name(node), "state",
                     state         ? state
                     : faulty      ? "fault"
                     : ht && !h_ok ? "unknown"
                                   : "in-service",
                     "action", str_or_null(action), "fault",
                     str_or_null(kobj_annotation(node, REM_ANN_FAULT)), "event", event, "since",
                     ms_time(kobj_annotation(node, REM_ANN_SINCE)), "why", str_or_null(why),
                     "healthError", ht && !h_ok ? json_string(err_msg(&e)) : json_null(), "request",
                     str_or_null(kobj_annotation(node, REM_ANN_REQUEST)
                                     ?: kobj_annotation(node, REM_ANN_REBOOT)));
}

/* An open breaker's entry ("<epoch ms> <why>", or a value a person wrote). */
static json_t *breaker_entry(const char *scope, const char *name, const char *value)
{
    char *end = NULL;
    long long at = strtoll(value, &end, 10);
    bool timed = end != value && at > 0;
    char since[64] = "";
    if (timed)
        time_rfc3339((uint64_t)at, since, sizeof(since));
    return json_pack("{s:s,s:s?,s:o,s:s}", "scope", scope, "name", name, "since",
                     timed ? json_string(since) : json_null(), "why",
                     timed && *end == ' ' ? end + 1 : value);
}

json_t *st_remediation_model(const struct st_objects *in)
{
    json_t *nodes = json_array();
    size_t i;
    json_t *node;
    json_array_foreach (in->nodes, i, node) {
        json_t *n = st_gpu_node(node) ? node_entry(node) : NULL;
        if (n)
            json_array_append_new(nodes, n);
    }
    json_t *breakers = json_array();
    json_t *condition = json_null();
    json_t *cp;
    json_array_foreach (in->policies, i, cp) {
        const char *v = kobj_annotation(cp, REM_ANN_BREAKER);
        if (v)
            json_array_append_new(breakers, breaker_entry("cluster", kobj_name(cp), v));
        if ((v = kobj_annotation(cp, REM_ANN_BREAKER_DEFAULT)))
            json_array_append_new(breakers, breaker_entry("pool", "default", v));
        size_t k;
        json_t *c;
        json_array_foreach (kobj_path(cp, "status.conditions"), k, c) {
            if (json_is_null(condition) && streq_ptr(kobj_str(c, "type"), REM_CONDITION_TYPE))
                condition = json_pack("{s:O?,s:O?,s:O?}", "status", json_object_get(c, "status"),
                                      "reason", json_object_get(c, "reason"), "message",
                                      json_object_get(c, "message"));
        }
    }
    json_t *pool;
    json_array_foreach (in->upgrade_pools, i, pool) {
        const char *v = kobj_annotation(pool, REM_ANN_BREAKER);
        if (v)
            json_array_append_new(breakers, breaker_entry("pool", kobj_name(pool), v));
    }
    return json_pack("{s:o,s:o,s:o}", "nodes", nodes, "breakers", breakers, "condition", condition);
}
