/* SPDX-License-Identifier: Apache-2.0 */
/* The protobuf request bodies kubectl's typed client sends (a runtime.Unknown envelope around a
 * Namespace, ConfigMap, Secret, ServiceAccount or Eviction), decoded into the JSON object they
 * stand for. Bytes in, JSON out, no store: fuzzed on its own (tests/fuzz/kubesim). */
#include <string.h>

#include "kubesim-internal.h"
#include "kubesim-pb.h"

static bool pb_varint(const unsigned char **p, const unsigned char *end, uint64_t *v)
{
    *v = 0;
    for (int shift = 0; shift < 64 && *p < end; shift += 7) {
        unsigned char b = *(*p)++;
        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return true;
    }
    return false;
}

/* The first length-delimited field `want` of a message; false when absent or malformed. */
static bool pb_field(const unsigned char *buf, size_t len, uint64_t want, const unsigned char **ret,
                     size_t *ret_len)
{
    const unsigned char *p = buf, *end = buf + len;
    while (p < end) {
        uint64_t key, v;
        if (!pb_varint(&p, end, &key))
            return false;
        switch (key & 7) {
        case 0:
            if (!pb_varint(&p, end, &v))
                return false;
            break;
        case 1:
            if (end - p < 8)
                return false;
            p += 8;
            break;
        case 5:
            if (end - p < 4)
                return false;
            p += 4;
            break;
        case 2:
            if (!pb_varint(&p, end, &v) || v > (uint64_t)(end - p))
                return false;
            if ((key >> 3) == want) {
                *ret = p;
                *ret_len = (size_t)v;
                return true;
            }
            p += v;
            break;
        default:
            return false;
        }
    }
    return false;
}

/* ---- protobuf request bodies: the kinds kubectl's typed client creates -------------------- */

int ks_pb_next(const unsigned char **p, const unsigned char *end, uint64_t *field, int *wire,
               const unsigned char **data, size_t *len, uint64_t *val)
{
    if (*p >= end)
        return 0;
    uint64_t key;
    if (!pb_varint(p, end, &key))
        return -1;
    *field = key >> 3;
    *wire = (int)(key & 7);
    *data = NULL;
    *len = 0;
    *val = 0;
    switch (*wire) {
    case 0:
        return pb_varint(p, end, val) ? 1 : -1;
    case 1:
        if (end - *p < 8)
            return -1;
        *p += 8;
        return 1;
    case 5:
        if (end - *p < 4)
            return -1;
        *p += 4;
        return 1;
    case 2:
        if (!pb_varint(p, end, val) || *val > (uint64_t)(end - *p))
            return -1;
        *data = *p;
        *len = (size_t)*val;
        *p += *len;
        return 1;
    default:
        return -1;
    }
}

static json_t *pb_string(const unsigned char *d, size_t n)
{
    return json_stringn((const char *)d, n); /* NULL for invalid UTF-8 */
}

/* A map<string,string|bytes> entry into obj; bytes are base64'ed as JSON carries them. */
static int pb_map_entry(const unsigned char *d, size_t n, bool bytes, json_t *obj)
{
    const unsigned char *p = d, *end = d + n, *data;
    size_t len;
    uint64_t f, v;
    int w, r;
    json_t *key = NULL, *val = NULL;
    while ((r = ks_pb_next(&p, end, &f, &w, &data, &len, &v)) > 0) {
        if (w != 2)
            continue;
        json_t **slot = f == 1 ? &key : f == 2 ? &val : NULL;
        if (!slot)
            continue;
        json_decref(*slot);
        if (f == 2 && bytes) {
            char *b = base64_encode(data, len);
            *slot = json_string(b);
            free(b);
        } else {
            *slot = pb_string(data, len);
        }
    }
    if (r == 0 && json_is_string(key)) {
        if (val)
            json_object_set(obj, json_string_value(key), val);
        else
            json_object_set_new(obj, json_string_value(key), json_string(""));
    }
    json_decref(key);
    json_decref(val);
    return r;
}

static int pb_meta(const unsigned char *d, size_t n, json_t *meta)
{
    const unsigned char *p = d, *end = d + n, *data;
    size_t len;
    uint64_t f, v;
    int w, r;
    while ((r = ks_pb_next(&p, end, &f, &w, &data, &len, &v)) > 0) {
        if (w != 2)
            continue;
        if (f == 1 || f == 2 || f == 3) {
            json_t *s = pb_string(data, len);
            if (s)
                json_object_set_new(meta,
                                    f == 1   ? "name"
                                    : f == 2 ? "generateName"
                                             : "namespace",
                                    s);
        } else if (f == 11 || f == 12) {
            if (pb_map_entry(data, len, false,
                             kobj_ensure_object(meta, f == 11 ? "labels" : "annotations")) < 0)
                return -1;
        } else if (f == 14) {
            json_t *fin = json_object_get(meta, "finalizers");
            if (!fin) {
                fin = json_array();
                json_object_set_new(meta, "finalizers", fin);
            }
            json_t *s = pb_string(data, len);
            if (s)
                json_array_append_new(fin, s);
        }
    }
    return r;
}

/* Decodes a protobuf body (runtime.Unknown envelope) of Namespace, ConfigMap, Secret,
 * ServiceAccount or Eviction into the JSON object it stands for; NULL when not one of those. */
json_t *ks_pb_decode(const char *body, size_t blen, const char **ret_kind)
{
    const unsigned char *b = (const unsigned char *)body;
    *ret_kind = NULL;
    if (blen < 4 || memcmp(b, "k8s\0", 4) != 0)
        return NULL;
    const unsigned char *tm, *raw;
    size_t tml, rawl;
    if (!pb_field(b + 4, blen - 4, 1, &tm, &tml) || !pb_field(b + 4, blen - 4, 2, &raw, &rawl))
        return NULL;
    const unsigned char *avp, *kp;
    size_t avl, kl;
    if (!pb_field(tm, tml, 1, &avp, &avl) || !pb_field(tm, tml, 2, &kp, &kl))
        return NULL;
    static const char *const kinds[] = {"Namespace", "ConfigMap", "Secret", "ServiceAccount",
                                        "Eviction"};
    const char *kind = NULL;
    for (size_t i = 0; i < ARRAY_SIZE(kinds); i++)
        if (strlen(kinds[i]) == kl && !memcmp(kinds[i], kp, kl))
            kind = kinds[i];
    json_t *av = pb_string(avp, avl);
    if (!kind || !av) {
        json_decref(av);
        return NULL;
    }
    json_t *obj = json_pack("{s:o,s:s,s:{}}", "apiVersion", av, "kind", kind, "metadata");
    const unsigned char *p = raw, *end = raw + rawl, *data;
    size_t len;
    uint64_t f, v;
    int w, r;
    while ((r = ks_pb_next(&p, end, &f, &w, &data, &len, &v)) > 0) {
        if (f == 1 && w == 2) {
            if (pb_meta(data, len, json_object_get(obj, "metadata")) < 0)
                r = -1;
        } else if (streq(kind, "Namespace") && f == 2 && w == 2) {
            const unsigned char *q = data, *qe = data + len, *d2;
            size_t l2;
            uint64_t f2, v2;
            int w2;
            json_t *fin = json_array();
            while (ks_pb_next(&q, qe, &f2, &w2, &d2, &l2, &v2) > 0)
                if (f2 == 1 && w2 == 2)
                    json_array_append_new(fin, pb_string(d2, l2) ?: json_string(""));
            json_object_set_new(obj, "spec", json_pack("{s:o}", "finalizers", fin));
        } else if ((streq(kind, "ConfigMap") && (f == 2 || f == 3) && w == 2) ||
                   (streq(kind, "Secret") && (f == 2 || f == 4) && w == 2)) {
            bool bytes = (streq(kind, "ConfigMap") && f == 3) || (streq(kind, "Secret") && f == 2);
            const char *key = f == 2                     ? "data"
                              : streq(kind, "ConfigMap") ? "binaryData"
                                                         : "stringData";
            if (pb_map_entry(data, len, bytes, kobj_ensure_object(obj, key)) < 0)
                r = -1;
        } else if (streq(kind, "Secret") && f == 3 && w == 2) {
            json_t *s = pb_string(data, len);
            if (s)
                json_object_set_new(obj, "type", s);
        } else if (((streq(kind, "ConfigMap") && f == 4) || (streq(kind, "Secret") && f == 5)) &&
                   w == 0) {
            json_object_set_new(obj, "immutable", json_boolean(v != 0));
        }
        if (r < 0)
            break;
    }
    if (r < 0) {
        json_decref(obj);
        return NULL;
    }
    *ret_kind = kind;
    return obj;
}
