/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The health annotation (gpuhealth.h, GH_ANN_HEALTH): written by the node agent, read back by it
 * after a restart and by the remediation planner. JSON, compact, keys sorted:
 *
 *   {"acked":3,"action":"reset-gpu","faults":[FAULT...],"healthy":false,"last":FAULT,"seq":5}
 *   FAULT: {"action":"reset-gpu","class":"ecc-dbe","code":0,"gpu":3,"live":true,
 *           "message":"...","seq":5,"since":"2026-01-01T00:00:00.250Z","uuid":"GPU-..."}
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "gpuhealth.h"
#include "yamlcfg.h"

#define ANN GH_ANN_HEALTH

/* RFC 3339 with milliseconds: the planner measures the time to quarantine from it. */
static void time_ms_text(int64_t ms, char *buf, size_t n)
{
    char s[40];
    time_rfc3339((uint64_t)(ms > 0 ? ms : 0), s, sizeof(s));
    size_t l = strlen(s);
    if (l && s[l - 1] == 'Z')
        s[l - 1] = '\0';
    snprintf(buf, n, "%s.%03dZ", s, (int)((ms > 0 ? ms : 0) % 1000));
}

static json_t *fault_json(const struct gh_fault *f)
{
    char since[48];
    time_ms_text(f->since_ms, since, sizeof(since));
    return json_pack("{s:s,s:s,s:I,s:i,s:b,s:s,s:I,s:s,s:s}", "action", gh_action_name(f->action),
                     "class", gh_class_name(f->cls), "code", (json_int_t)f->code, "gpu", f->gpu,
                     "live", f->live, "message", f->message, "seq", (json_int_t)f->seq, "since",
                     since, "uuid", f->uuid);
}

char *gh_health_format(const struct gh_health *h)
{
    json_t *faults = json_array();
    for (size_t i = 0; i < h->n_faults; i++)
        json_array_append_new(faults, fault_json(&h->faults[i]));
    _cleanup_json_ json_t *doc = json_pack("{s:I,s:s,s:o,s:b,s:I}", "acked", (json_int_t)h->acked,
                                           "action", gh_action_name(h->action), "faults", faults,
                                           "healthy", h->healthy, "seq", (json_int_t)h->seq);
    if (h->has_last)
        json_object_set_new(doc, "last", fault_json(&h->last));
    char *s = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS);
    return s ? s : xstrdup("{}");
}

static int fault_parse(json_t *o, const char *ctx, struct gh_fault *ret, struct err *e)
{
    if (!json_is_object(o))
        return err_set(e, -EINVAL, "%s: expected an object, got %s", ctx, cfg_type_name(o));
    struct gh_fault f = {0};
    const char *action = NULL, *cls = NULL, *msg = NULL, *since = NULL, *uuid = NULL;
    int64_t seq = 0, code = 0, gpu = -1;
    bool live = false;
    int r;
    if ((r = cfg_string(o, "action", ctx, true, &action, e)) < 0 ||
        (r = cfg_string(o, "class", ctx, true, &cls, e)) < 0 ||
        (r = cfg_int64(o, "seq", ctx, true, 0, INT64_MAX, &seq, e)) < 0 ||
        (r = cfg_int64(o, "code", ctx, false, 0, UINT32_MAX, &code, e)) < 0 ||
        (r = cfg_int64(o, "gpu", ctx, false, -1, GH_GPUS_MAX - 1, &gpu, e)) < 0 ||
        (r = cfg_bool(o, "live", ctx, false, &live, e)) < 0 ||
        (r = cfg_string(o, "message", ctx, false, &msg, e)) < 0 ||
        (r = cfg_string(o, "since", ctx, false, &since, e)) < 0 ||
        (r = cfg_string(o, "uuid", ctx, false, &uuid, e)) < 0)
        return r;
    int a = gh_action_parse(action), c = gh_class_parse(cls);
    if (a < 0)
        return err_set(e, -EINVAL, "%s.action: unknown action \"%s\"", ctx, action);
    if (c < 0)
        return err_set(e, -EINVAL, "%s.class: unknown class \"%s\"", ctx, cls);
    uint64_t ms = 0;
    if (since && time_parse_rfc3339(since, &ms) < 0)
        return err_set(e, -EINVAL, "%s.since: \"%s\" is not an RFC 3339 time", ctx, since);
    if (uuid && strlen(uuid) >= sizeof(f.uuid))
        return err_set(e, -EINVAL, "%s.uuid: longer than %zu bytes", ctx, sizeof(f.uuid) - 1);
    f.seq = (uint64_t)seq;
    f.cls = (enum gh_class)c;
    f.code = (unsigned)code;
    f.gpu = (int)gpu;
    f.action = (enum gh_action)a;
    f.live = live;
    f.since_ms = (int64_t)ms;
    snprintf(f.uuid, sizeof(f.uuid), "%s", uuid ? uuid : "");
    snprintf(f.message, sizeof(f.message), "%s", msg ? msg : "");
    *ret = f;
    return 0;
}

int gh_health_parse(const char *text, size_t len, struct gh_health *ret, struct err *e)
{
    if (!text)
        return err_set(e, -EINVAL, "%s: no value", ANN);
    if (len > GH_ANNOTATION_MAX)
        return err_set(e, -E2BIG, "%s: longer than %u bytes", ANN, GH_ANNOTATION_MAX);
    json_error_t je;
    _cleanup_json_ json_t *doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!doc)
        return err_set(e, -EINVAL, "%s: not JSON: %s", ANN, je.text);
    if (!json_is_object(doc))
        return err_set(e, -EINVAL, "%s: expected an object, got %s", ANN, cfg_type_name(doc));
    struct gh_health h = {0};
    int64_t seq = 0, acked = 0;
    const char *action = "none";
    json_t *faults = NULL, *last = NULL;
    int r;
    if ((r = cfg_int64(doc, "seq", ANN, true, 0, INT64_MAX, &seq, e)) < 0 ||
        (r = cfg_int64(doc, "acked", ANN, false, 0, INT64_MAX, &acked, e)) < 0 ||
        (r = cfg_bool(doc, "healthy", ANN, true, &h.healthy, e)) < 0 ||
        (r = cfg_string(doc, "action", ANN, false, &action, e)) < 0 ||
        (r = cfg_array(doc, "faults", ANN, false, &faults, e)) < 0 ||
        (r = cfg_object(doc, "last", ANN, false, &last, e)) < 0)
        return r;
    int a = gh_action_parse(action);
    if (a < 0)
        return err_set(e, -EINVAL, "%s.action: unknown action \"%s\"", ANN, action);
    if (json_array_size(faults) > GH_FAULTS_MAX)
        return err_set(e, -E2BIG, "%s.faults: more than %d", ANN, GH_FAULTS_MAX);
    h.seq = (uint64_t)seq;
    h.acked = (uint64_t)acked;
    h.action = (enum gh_action)a;
    size_t i;
    json_t *v;
    json_array_foreach (faults, i, v) {
        char ctx[64];
        snprintf(ctx, sizeof(ctx), "%s.faults[%zu]", ANN, i);
        if ((r = fault_parse(v, ctx, &h.faults[h.n_faults], e)) < 0)
            return r;
        h.n_faults++;
    }
    if (last) {
        if ((r = fault_parse(last, ANN ".last", &h.last, e)) < 0)
            return r;
        h.has_last = true;
    }
    *ret = h;
    return 0;
}
