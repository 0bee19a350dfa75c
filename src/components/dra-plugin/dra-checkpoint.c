/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The checkpoint (dra-plugin.h): the prepared claims as a versioned JSON document with a CRC-32
 * of its claims, so a restart between prepare and unprepare finds what it prepared, and a file
 * damaged or from an unknown version is refused, naming what is wrong. Pure.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <zlib.h>

#include "dra-plugin.h"

static const char *const type_names[] = {"gpu", "mig", "mig-dynamic"};
static const char *const state_names[] = {"PrepareStarted", "PrepareCompleted"};

/* ---- encode ---------------------------------------------------------------------------------- */

static json_t *sharing_json(const struct dra_sharing *s)
{
    json_t *o = json_pack("{s:s}", "strategy", dra_strategy_name(s->strategy));
    if (s->strategy == DRA_SHARE_TIME_SLICING)
        json_object_set_new(o, "interval", json_string(dra_interval_name(s->interval)));
    if (s->strategy == DRA_SHARE_MPS) {
        if (s->active_thread_percentage >= 0)
            json_object_set_new(o, "activeThreadPercentage",
                                json_integer(s->active_thread_percentage));
        if (s->pinned_memory_limit >= 0)
            json_object_set_new(o, "pinnedMemoryLimit", json_integer(s->pinned_memory_limit));
        if (s->multi_user)
            json_object_set_new(o, "multiUser", json_true());
    }
    return o;
}

static json_t *device_json(const struct dra_prepared_device *d)
{
    return json_pack("{s:s,s:s,s:s,s:s,s:i,s:i,s:s,s:s,s:s,s:i,s:i,s:i,s:i,s:i,s:b,s:o}", "request",
                     d->request, "pool", d->pool, "device", d->device, "type", type_names[d->type],
                     "gpuIndex", (int)d->gpu_index, "minor", (int)d->minor, "uuid", d->uuid,
                     "parentUUID", d->parent_uuid, "profile", d->profile, "giProfileId",
                     (int)d->gi_profile_id, "placementStart", (int)d->start, "placementSize",
                     (int)d->size, "giId", (int)d->gi_id, "ciId", (int)d->ci_id, "created",
                     d->created, "sharing", sharing_json(&d->sharing));
}

static json_t *claim_json(const struct dra_claim *c)
{
    json_t *devs = json_array();
    for (size_t k = 0; k < c->n_devices; k++)
        json_array_append_new(devs, device_json(&c->devices[k]));
    return json_pack("{s:s,s:s,s:s,s:s,s:o}", "uid", c->ref.uid, "namespace", c->ref.ns, "name",
                     c->ref.name, "state", state_names[c->state], "devices", devs);
}

#define DUMP_FLAGS (JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY)

/* The checksum of the claims' text as json_dumps(claims, DUMP_FLAGS) writes it. */
static void checksum_of(const char *text, size_t len, char buf[16])
{
    uLong crc = crc32(0L, Z_NULL, 0);
    crc = crc32(crc, (const Bytef *)text, (uInt)len);
    snprintf(buf, 16, "%08lx", crc & 0xffffffffUL);
}

static int checksum(const json_t *claims, char buf[16])
{
    char *text = json_dumps(claims, DUMP_FLAGS);
    if (!text)
        return -ENOMEM;
    checksum_of(text, strlen(text), buf);
    free(text);
    return 0;
}

int dra_checkpoint_encode(const struct dra_claims *cs, char **ret, struct err *e)
{
    /* Claim by claim into one buffer: the claims array is the text json_dumps(claims,
     * DUMP_FLAGS) would write (its elements joined by commas), without every claim's JSON in
     * memory at once (200 claims' objects were a quarter of the plugin's peak). */
    struct sbuf b;
    sbuf_init(&b, DRA_CHECKPOINT_MAX);
    sbuf_addf(&b, "{\"version\":\"%s\",\"claims\":[", DRA_CHECKPOINT_VERSION);
    size_t start = b.len - 1;
    int r = 0;
    for (size_t i = 0; i < cs->n && r == 0; i++) {
        json_t *o = claim_json(cs->v[i]);
        char *t = o ? json_dumps(o, DUMP_FLAGS) : NULL;
        json_decref(o);
        if (!t) {
            r = err_set(e, -ENOMEM, "checkpoint: out of memory");
            break;
        }
        if (i)
            sbuf_adds(&b, ",");
        sbuf_adds(&b, t);
        free(t);
    }
    sbuf_adds(&b, "]");
    if (r == 0 && (r = sbuf_check(&b)) < 0)
        r = err_set(e, -EFBIG, "checkpoint: larger than %u bytes", DRA_CHECKPOINT_MAX);
    if (r < 0) {
        sbuf_free(&b);
        return r;
    }
    char sum[16];
    checksum_of(b.data + start, b.len - start, sum);
    sbuf_addf(&b, ",\"checksum\":\"%s\"}\n", sum);
    if (sbuf_check(&b) < 0) {
        sbuf_free(&b);
        return err_set(e, -EFBIG, "checkpoint: larger than %u bytes", DRA_CHECKPOINT_MAX);
    }
    *ret = sbuf_steal(&b);
    return 0;
}

/* ---- decode ---------------------------------------------------------------------------------- */

struct rd {
    const char *path;
    struct err *e;
    char at[96]; /* "claims[2].devices[0]" */
};

static int bad(struct rd *rd, const char *field, const char *why)
{
    return err_set(rd->e, -EINVAL, "checkpoint \"%s\": %s%s%s: %s", rd->path, rd->at,
                   *rd->at ? "." : "", field, why);
}

static int get_str(struct rd *rd, const json_t *o, const char *k, char *buf, size_t n)
{
    const char *s = json_string_value(json_object_get(o, k));
    if (!s)
        return bad(rd, k, "not a string");
    if (strlen(s) >= n)
        return bad(rd, k, "too long");
    strlcpy_s(buf, s, n);
    return 0;
}

static int get_uint(struct rd *rd, const json_t *o, const char *k, unsigned *ret)
{
    json_t *v = json_object_get(o, k);
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 0xffffffffLL)
        return bad(rd, k, "not an unsigned integer");
    *ret = (unsigned)json_integer_value(v);
    return 0;
}

static int pick(struct rd *rd, const json_t *o, const char *k, const char *const *names, size_t n,
                int *ret)
{
    const char *s = json_string_value(json_object_get(o, k));
    for (size_t i = 0; s && i < n; i++)
        if (strcmp(s, names[i]) == 0) {
            *ret = (int)i;
            return 0;
        }
    return bad(rd, k, "unknown value");
}

static int sharing_from(struct rd *rd, const json_t *o, struct dra_sharing *s)
{
    *s = (struct dra_sharing){.active_thread_percentage = -1, .pinned_memory_limit = -1};
    if (!json_is_object(o))
        return bad(rd, "sharing", "not an object");
    static const char *const strategies[] = {"", "TimeSlicing", "MPS"};
    static const char *const ivs[] = {"Default", "Short", "Medium", "Long"};
    int v = 0;
    int r = pick(rd, o, "strategy", strategies, 3, &v);
    if (r < 0)
        return r;
    s->strategy = (enum dra_strategy)v;
    if (json_object_get(o, "interval")) {
        if ((r = pick(rd, o, "interval", ivs, 4, &v)) < 0)
            return r;
        s->interval = (enum dra_interval)v;
    }
    json_t *x = json_object_get(o, "activeThreadPercentage");
    if (x) {
        if (!json_is_integer(x) || json_integer_value(x) < 1 || json_integer_value(x) > 100)
            return bad(rd, "sharing.activeThreadPercentage", "not 1 to 100");
        s->active_thread_percentage = (int)json_integer_value(x);
    }
    x = json_object_get(o, "pinnedMemoryLimit");
    if (x) {
        if (!json_is_integer(x) || json_integer_value(x) < 0)
            return bad(rd, "sharing.pinnedMemoryLimit", "not a byte count");
        s->pinned_memory_limit = json_integer_value(x);
    }
    s->multi_user = json_is_true(json_object_get(o, "multiUser"));
    return 0;
}

static int device_from(struct rd *rd, const json_t *o, struct dra_prepared_device *d)
{
    int r, t = 0;
    if (!json_is_object(o))
        return bad(rd, "", "not an object");
    if ((r = get_str(rd, o, "request", d->request, sizeof(d->request))) < 0 ||
        (r = get_str(rd, o, "pool", d->pool, sizeof(d->pool))) < 0 ||
        (r = get_str(rd, o, "device", d->device, sizeof(d->device))) < 0 ||
        (r = pick(rd, o, "type", type_names, 3, &t)) < 0 ||
        (r = get_uint(rd, o, "gpuIndex", &d->gpu_index)) < 0 ||
        (r = get_uint(rd, o, "minor", &d->minor)) < 0 ||
        (r = get_str(rd, o, "uuid", d->uuid, sizeof(d->uuid))) < 0 ||
        (r = get_str(rd, o, "parentUUID", d->parent_uuid, sizeof(d->parent_uuid))) < 0 ||
        (r = get_str(rd, o, "profile", d->profile, sizeof(d->profile))) < 0 ||
        (r = get_uint(rd, o, "giProfileId", &d->gi_profile_id)) < 0 ||
        (r = get_uint(rd, o, "placementStart", &d->start)) < 0 ||
        (r = get_uint(rd, o, "placementSize", &d->size)) < 0 ||
        (r = get_uint(rd, o, "giId", &d->gi_id)) < 0 ||
        (r = get_uint(rd, o, "ciId", &d->ci_id)) < 0)
        return r;
    d->type = (enum dra_dev_type)t;
    json_t *cr = json_object_get(o, "created");
    if (!json_is_boolean(cr))
        return bad(rd, "created", "not a boolean");
    d->created = json_is_true(cr);
    return sharing_from(rd, json_object_get(o, "sharing"), &d->sharing);
}

int dra_checkpoint_decode(const char *text, size_t len, const char *path, struct dra_claims *ret,
                          struct err *e)
{
    struct rd rd = {.path = path ? path : "(checkpoint)", .e = e};
    struct dra_claims cs = {0};
    size_t i = 0;
    while (i < len && (text[i] == ' ' || text[i] == '\n' || text[i] == '\t' || text[i] == '\r'))
        i++;
    if (i == len) {
        *ret = cs;
        return 0;
    }
    json_error_t je;
    json_t *doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!doc)
        return err_set(e, -EINVAL, "checkpoint \"%s\": line %d: %s", rd.path, je.line, je.text);
    int r = 0;
    const char *ver = json_string_value(json_object_get(doc, "version"));
    json_t *claims = json_object_get(doc, "claims");
    const char *sum = json_string_value(json_object_get(doc, "checksum"));
    char want[16];
    if (!ver || strcmp(ver, DRA_CHECKPOINT_VERSION) != 0) {
        r = err_set(e, -EINVAL, "checkpoint \"%s\": version \"%s\": this plugin reads %s", rd.path,
                    ver ? ver : "", DRA_CHECKPOINT_VERSION);
        goto out;
    }
    if (!json_is_array(claims)) {
        r = bad(&rd, "claims", "not a list");
        goto out;
    }
    if (checksum(claims, want) < 0 || !sum || strcmp(sum, want) != 0) {
        r = err_set(e, -EBADMSG, "checkpoint \"%s\": checksum %s does not match its claims (%s)",
                    rd.path, sum ? sum : "(none)", want);
        goto out;
    }
    json_t *c;
    json_array_foreach (claims, i, c) {
        snprintf(rd.at, sizeof(rd.at), "claims[%zu]", i);
        struct dra_claim *cl = xcalloc(1, sizeof(*cl));
        int st = 0;
        json_t *devs = json_object_get(c, "devices");
        if (!json_is_object(c) ||
            (r = get_str(&rd, c, "uid", cl->ref.uid, sizeof(cl->ref.uid))) < 0 ||
            (r = get_str(&rd, c, "namespace", cl->ref.ns, sizeof(cl->ref.ns))) < 0 ||
            (r = get_str(&rd, c, "name", cl->ref.name, sizeof(cl->ref.name))) < 0 ||
            (r = pick(&rd, c, "state", state_names, 2, &st)) < 0 ||
            (!json_is_array(devs) && (r = bad(&rd, "devices", "not a list")) < 0) ||
            (json_array_size(devs) > DRA_CLAIM_DEVICES_MAX &&
             (r = bad(&rd, "devices", "more than 32")) < 0)) {
            if (r == 0)
                r = bad(&rd, "", "not an object");
            dra_claim_free(cl);
            goto out;
        }
        cl->state = (enum dra_claim_state)st;
        cl->devices = xcalloc(json_array_size(devs) + 1, sizeof(*cl->devices));
        size_t k;
        json_t *d;
        json_array_foreach (devs, k, d) {
            snprintf(rd.at, sizeof(rd.at), "claims[%zu].devices[%zu]", i, k);
            if ((r = device_from(&rd, d, &cl->devices[k])) < 0) {
                dra_claim_free(cl);
                goto out;
            }
            cl->n_devices++;
        }
        if (dra_claims_find(&cs, cl->ref.uid)) {
            snprintf(rd.at, sizeof(rd.at), "claims[%zu]", i);
            r = bad(&rd, "uid", "given twice");
            dra_claim_free(cl);
            goto out;
        }
        if ((r = dra_claims_put(&cs, cl, e)) < 0) {
            dra_claim_free(cl);
            goto out;
        }
    }
out:
    json_decref(doc);
    if (r < 0) {
        dra_claims_clear(&cs);
        return r;
    }
    *ret = cs;
    return 0;
}
