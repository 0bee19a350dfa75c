/* SPDX-License-Identifier: Apache-2.0 */
/* Kubernetes' protobuf encoding, both ways, for every message in the generated tables: the
 * `k8s\0` + runtime.Unknown envelope, objects, lists and watch events. One generic walk over a
 * message's field table; the messages JSON writes differently (times, quantities, int-or-string,
 * embedded objects) are converted here. Bytes in, JSON out and back; fuzzed on its own. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ks-pb-tables.h"
#include "kubesim-pb.h"

#define PB_MAX_DEPTH 64
/* a nested message's scratch buffer: no more than a request or response could hold */
#define PB_MAX_BYTES (1u << 30)

static const unsigned char magic[4] = {'k', '8', 's', 0};

enum { WIRE_VARINT = 0, WIRE_I64 = 1, WIRE_LEN = 2, WIRE_I32 = 5 };

/* ---- wire format -------------------------------------------------------------------------- */

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

int ks_pb_next(const unsigned char **p, const unsigned char *end, uint64_t *field, int *wire,
               const unsigned char **data, size_t *len, uint64_t *val)
{
    if (*p >= end)
        return 0;
    uint64_t key;
    if (!pb_varint(p, end, &key) || (key >> 3) == 0)
        return -1;
    *field = key >> 3;
    *wire = (int)(key & 7);
    *data = NULL;
    *len = 0;
    *val = 0;
    switch (*wire) {
    case WIRE_VARINT:
        return pb_varint(p, end, val) ? 1 : -1;
    case WIRE_I64:
        if (end - *p < 8)
            return -1;
        *p += 8;
        return 1;
    case WIRE_I32:
        if (end - *p < 4)
            return -1;
        *p += 4;
        return 1;
    case WIRE_LEN:
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

static void put_varint(struct sbuf *b, uint64_t v)
{
    unsigned char tmp[10];
    size_t n = 0;
    do {
        tmp[n] = (unsigned char)(v & 0x7f);
        v >>= 7;
        if (v)
            tmp[n] |= 0x80;
        n++;
    } while (v);
    sbuf_add(b, tmp, n);
}

static void put_key(struct sbuf *b, uint32_t no, int wire)
{
    put_varint(b, ((uint64_t)no << 3) | (uint64_t)wire);
}

static void put_bytes(struct sbuf *b, uint32_t no, const void *d, size_t n)
{
    put_key(b, no, WIRE_LEN);
    put_varint(b, n);
    sbuf_add(b, d, n);
}

static void put_uint(struct sbuf *b, uint32_t no, uint64_t v)
{
    put_key(b, no, WIRE_VARINT);
    put_varint(b, v);
}

/* ---- tables ------------------------------------------------------------------------------- */

static const struct ks_pb_msg *msg_find(const char *name)
{
    size_t lo = 0, hi = ks_pb_n_msgs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(ks_pb_msgs[mid].name, name);
        if (c == 0)
            return &ks_pb_msgs[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static const struct ks_pb_field *field_find(const struct ks_pb_msg *m, uint64_t no)
{
    size_t lo = 0, hi = m->n_fields;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (m->fields[mid].no == no)
            return &m->fields[mid];
        if (m->fields[mid].no < no)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* The message of a kind: in its apiVersion's package, else one of meta/v1's kinds (Status,
 * DeleteOptions, WatchEvent), which every group version serves. */
static const struct ks_pb_msg *kind_msg(const char *api_version, const char *kind)
{
    if (!api_version || !kind || !kind[0] || strchr(kind, '.'))
        return NULL;
    char name[256];
    for (size_t i = 0; i < ks_pb_n_packages; i++) {
        if (strcmp(ks_pb_packages[i].api_version, api_version) != 0)
            continue;
        if ((size_t)snprintf(name, sizeof(name), "%s.%s", ks_pb_packages[i].package, kind) >=
            sizeof(name))
            return NULL;
        const struct ks_pb_msg *m = msg_find(name);
        if (m && m->special == KS_PBS_NONE)
            return m;
    }
    if ((size_t)snprintf(name, sizeof(name), "k8s.io.apimachinery.pkg.apis.meta.v1.%s", kind) >=
        sizeof(name))
        return NULL;
    const struct ks_pb_msg *m = msg_find(name);
    return m && m->special == KS_PBS_NONE ? m : NULL;
}

bool ks_pb_knows(const char *api_version, const char *kind)
{
    return kind_msg(api_version, kind) != NULL;
}

/* ---- times and durations ------------------------------------------------------------------ */

static int format_time(int64_t secs, int32_t nanos, bool micro, char *buf, size_t n)
{
    struct tm tm;
    time_t t = (time_t)secs;
    if (nanos < 0 || nanos > 999999999 || !gmtime_r(&t, &tm) || tm.tm_year + 1900 < 0 ||
        tm.tm_year + 1900 > 9999)
        return -EBADMSG;
    int r;
    if (micro)
        r = snprintf(buf, n, "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ", tm.tm_year + 1900,
                     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, nanos / 1000);
    else
        r = snprintf(buf, n, "%04d-%02d-%02dT%02d:%02d:%02dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
    return r > 0 && (size_t)r < n ? 0 : -EBADMSG;
}

static bool digits(const char **s, int n, int *v)
{
    *v = 0;
    for (int i = 0; i < n; i++, (*s)++) {
        if (**s < '0' || **s > '9')
            return false;
        *v = *v * 10 + (**s - '0');
    }
    return true;
}

/* RFC 3339 ("2006-01-02T15:04:05.999999999Z07:00") into seconds and nanoseconds. */
static int parse_time(const char *s, int64_t *ret_secs, int32_t *ret_nanos)
{
    struct tm tm = {0};
    int y, mo, d, h, mi, sec, nanos = 0;
    if (!digits(&s, 4, &y) || *s++ != '-' || !digits(&s, 2, &mo) || *s++ != '-' ||
        !digits(&s, 2, &d) || (*s != 'T' && *s != 't' && *s != ' ') || !*s++ ||
        !digits(&s, 2, &h) || *s++ != ':' || !digits(&s, 2, &mi) || *s++ != ':' ||
        !digits(&s, 2, &sec))
        return -EINVAL;
    if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60)
        return -EINVAL;
    if (*s == '.') {
        s++;
        int n = 0;
        for (; *s >= '0' && *s <= '9'; s++, n++)
            if (n < 9)
                nanos = nanos * 10 + (*s - '0');
        if (!n)
            return -EINVAL;
        for (; n < 9; n++)
            nanos *= 10;
    }
    int64_t off = 0;
    if (*s == 'Z' || *s == 'z') {
        s++;
    } else if (*s == '+' || *s == '-') {
        int sign = *s++ == '-' ? -1 : 1, oh, om;
        if (!digits(&s, 2, &oh) || *s++ != ':' || !digits(&s, 2, &om) || oh > 23 || om > 59)
            return -EINVAL;
        off = sign * (oh * 3600 + om * 60);
    } else {
        return -EINVAL;
    }
    if (*s)
        return -EINVAL;
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    tm.tm_hour = h;
    tm.tm_min = mi;
    tm.tm_sec = sec;
    *ret_secs = (int64_t)timegm(&tm) - off;
    *ret_nanos = nanos;
    return 0;
}

/* Go's time.Duration.String(): "1h2m3.5s", "1.5ms", "0s". */
static void format_duration(int64_t d, char *buf, size_t n)
{
    if (d == 0) {
        snprintf(buf, n, "0s");
        return;
    }
    const char *sign = d < 0 ? "-" : "";
    uint64_t u = d < 0 ? (uint64_t)0 - (uint64_t)d : (uint64_t)d;
    char frac[16] = "";
    if (u < 1000000000ull) {
        static const struct {
            uint64_t div;
            const char *unit;
        } small[] = {{1000000, "ms"}, {1000, "µs"}, {1, "ns"}};
        for (size_t i = 0; i < ARRAY_SIZE(small); i++) {
            if (u < small[i].div)
                continue;
            uint64_t whole = u / small[i].div, rest = u % small[i].div;
            if (rest) {
                int w = small[i].div == 1000000 ? 6 : 3;
                snprintf(frac, sizeof(frac), ".%0*" PRIu64, w, rest);
                for (size_t l = strlen(frac); l > 1 && frac[l - 1] == '0'; l--)
                    frac[l - 1] = '\0';
            }
            snprintf(buf, n, "%s%" PRIu64 "%s%s", sign, whole, frac, small[i].unit);
            return;
        }
    }
    uint64_t secs = u / 1000000000ull, ns = u % 1000000000ull;
    if (ns) {
        snprintf(frac, sizeof(frac), ".%09" PRIu64, ns);
        for (size_t l = strlen(frac); l > 1 && frac[l - 1] == '0'; l--)
            frac[l - 1] = '\0';
    }
    uint64_t h = secs / 3600, m = secs / 60 % 60, s = secs % 60;
    if (h)
        snprintf(buf, n, "%s%" PRIu64 "h%" PRIu64 "m%" PRIu64 "%ss", sign, h, m, s, frac);
    else if (m)
        snprintf(buf, n, "%s%" PRIu64 "m%" PRIu64 "%ss", sign, m, s, frac);
    else
        snprintf(buf, n, "%s%" PRIu64 "%ss", sign, s, frac);
}

/* Go's time.ParseDuration, for what format_duration writes and the like. */
static int parse_duration(const char *s, int64_t *ret)
{
    static const struct {
        const char *unit;
        double ns;
    } units[] = {{"ns", 1},   {"us", 1e3}, {"µs", 1e3}, {"μs", 1e3},
                 {"ms", 1e6}, {"s", 1e9},  {"m", 60e9}, {"h", 3600e9}};
    bool neg = false;
    if (*s == '-' || *s == '+')
        neg = *s++ == '-';
    if (streq_ptr(s, "0")) {
        *ret = 0;
        return 0;
    }
    if (!*s)
        return -EINVAL;
    double total = 0;
    while (*s) {
        char *end;
        if (!((*s >= '0' && *s <= '9') || *s == '.'))
            return -EINVAL;
        double v = strtod(s, &end);
        if (end == s)
            return -EINVAL;
        s = end;
        size_t best = 0, best_len = 0;
        for (size_t i = 0; i < ARRAY_SIZE(units); i++) {
            size_t l = strlen(units[i].unit);
            if (!strncmp(s, units[i].unit, l) && l > best_len) {
                best = i;
                best_len = l;
            }
        }
        if (!best_len)
            return -EINVAL;
        total += v * units[best].ns;
        s += best_len;
    }
    if (total > 9.2e18)
        return -ERANGE;
    *ret = (int64_t)(neg ? -total : total);
    return 0;
}

/* ---- protobuf to JSON --------------------------------------------------------------------- */

static int decode_msg(const struct ks_pb_msg *m, const unsigned char *d, size_t n, json_t *obj,
                      int depth, struct err *e);
static int decode_envelope(const unsigned char *b, size_t blen, json_t **ret, int depth,
                           struct err *e);

static int bad(struct err *e, const struct ks_pb_msg *m, const struct ks_pb_field *f,
               const char *why)
{
    return err_set(e, -EBADMSG, "protobuf: %s.%s: %s", m->name, f ? f->json : "?", why);
}

/* The scalar fields of a special message (seconds/nanos, duration, type/intVal/strVal, a
 * string or bytes field 1): fields 1 to 3 as varints or byte strings. */
struct special_fields {
    uint64_t v[4];
    const unsigned char *d[4];
    size_t l[4];
    bool has[4];
};

static int read_special(const unsigned char *d, size_t n, struct special_fields *sf)
{
    memset(sf, 0, sizeof(*sf));
    const unsigned char *p = d, *end = d + n, *data;
    size_t len;
    uint64_t f, v;
    int w, r;
    while ((r = ks_pb_next(&p, end, &f, &w, &data, &len, &v)) > 0) {
        if (f > 3)
            continue;
        sf->has[f] = true;
        if (w == WIRE_LEN) {
            sf->d[f] = data;
            sf->l[f] = len;
        } else if (w == WIRE_VARINT) {
            sf->v[f] = v;
        }
    }
    return r;
}

/* A special message's bytes as JSON; *ret NULL when JSON leaves it out (no raw bytes). */
static int decode_special(const struct ks_pb_msg *m, const unsigned char *d, size_t n, json_t **ret,
                          int depth, struct err *e)
{
    struct special_fields sf;
    *ret = NULL;
    if (m->special != KS_PBS_STRLIST && read_special(d, n, &sf) < 0)
        return err_set(e, -EBADMSG, "protobuf: %s: malformed", m->name);
    switch (m->special) {
    case KS_PBS_TIME:
    case KS_PBS_MICROTIME: {
        if (n == 0) {
            /* a zero time: Go writes a non-pointer one as null (a nil pointer is not sent) */
            *ret = json_null();
            return 0;
        }
        char buf[64];
        if (format_time((int64_t)sf.v[1], (int32_t)sf.v[2], m->special == KS_PBS_MICROTIME, buf,
                        sizeof(buf)) < 0)
            return err_set(e, -EBADMSG, "protobuf: %s: out of range", m->name);
        *ret = json_string(buf);
        return 0;
    }
    case KS_PBS_DURATION: {
        char buf[64];
        format_duration((int64_t)sf.v[1], buf, sizeof(buf));
        *ret = json_string(buf);
        return 0;
    }
    case KS_PBS_QUANTITY:
        *ret = sf.d[1] ? json_stringn((const char *)sf.d[1], sf.l[1]) : json_string("0");
        break;
    case KS_PBS_INTORSTRING:
        if (sf.v[1] == 1)
            *ret = sf.d[3] ? json_stringn((const char *)sf.d[3], sf.l[3]) : json_string("");
        else
            *ret = json_integer((int32_t)(uint32_t)sf.v[2]);
        break;
    case KS_PBS_RAWEXT:
    case KS_PBS_RAWJSON: {
        if (!sf.d[1] || sf.l[1] == 0)
            return 0;
        if (sf.l[1] >= 4 && !memcmp(sf.d[1], magic, 4))
            return decode_envelope(sf.d[1], sf.l[1], ret, depth + 1, e);
        json_error_t je;
        *ret = json_loadb((const char *)sf.d[1], sf.l[1], JSON_DECODE_ANY, &je);
        if (!*ret)
            return err_set(e, -EBADMSG, "protobuf: %s: raw bytes are not JSON: %s", m->name,
                           je.text);
        return 0;
    }
    case KS_PBS_STRLIST: {
        json_t *a = json_array();
        const unsigned char *p = d, *end = d + n, *data;
        size_t len;
        uint64_t f, v;
        int w, r;
        while ((r = ks_pb_next(&p, end, &f, &w, &data, &len, &v)) > 0) {
            if (f != 1)
                continue;
            json_t *s = w == WIRE_LEN ? json_stringn((const char *)data, len) : NULL;
            if (!s) {
                json_decref(a);
                return err_set(e, -EBADMSG, "protobuf: %s: items: not a string", m->name);
            }
            json_array_append_new(a, s);
        }
        if (r < 0) {
            json_decref(a);
            return err_set(e, -EBADMSG, "protobuf: %s: malformed", m->name);
        }
        *ret = a;
        return 0;
    }
    default:
        return err_set(e, -EBADMSG, "protobuf: %s: not a special message", m->name);
    }
    if (!*ret)
        return err_set(e, -EBADMSG, "protobuf: %s: not UTF-8", m->name);
    return 0;
}

/* One value of field f (its wire form: w, data/len, v) as JSON; *ret NULL when left out. */
static int decode_value(const struct ks_pb_msg *m, const struct ks_pb_field *f, int w,
                        const unsigned char *data, size_t len, uint64_t v, json_t **ret, int depth,
                        struct err *e)
{
    *ret = NULL;
    bool omit = (f->flags & KS_PBF_OMITZERO) && f->card == KS_PBC_ONE;
    switch (f->type) {
    case KS_PBT_STRING:
        if (w != WIRE_LEN)
            return bad(e, m, f, "wrong wire type");
        if (omit && len == 0)
            return 0;
        *ret = json_stringn((const char *)data, len);
        return *ret ? 0 : bad(e, m, f, "not UTF-8");
    case KS_PBT_BYTES: {
        if (w != WIRE_LEN)
            return bad(e, m, f, "wrong wire type");
        if (omit && len == 0)
            return 0;
        char *b = base64_encode(data, len);
        *ret = json_string(b);
        free(b);
        return 0;
    }
    case KS_PBT_BOOL:
        if (w != WIRE_VARINT)
            return bad(e, m, f, "wrong wire type");
        if (omit && !v)
            return 0;
        *ret = json_boolean(v != 0);
        return 0;
    case KS_PBT_INT32:
    case KS_PBT_INT64:
        if (w != WIRE_VARINT)
            return bad(e, m, f, "wrong wire type");
        if (omit && !v)
            return 0;
        *ret = json_integer(f->type == KS_PBT_INT32 ? (json_int_t)(int32_t)(uint32_t)v
                                                    : (json_int_t)(int64_t)v);
        return 0;
    case KS_PBT_MSG: {
        if (w != WIRE_LEN)
            return bad(e, m, f, "wrong wire type");
        const struct ks_pb_msg *sub = &ks_pb_msgs[f->msg];
        if (sub->special != KS_PBS_NONE)
            return decode_special(sub, data, len, ret, depth, e);
        json_t *o = json_object();
        int r = decode_msg(sub, data, len, o, depth + 1, e);
        if (r < 0) {
            json_decref(o);
            return r;
        }
        *ret = o;
        return 0;
    }
    default:
        return bad(e, m, f, "unknown type");
    }
}

/* The zero value of a map entry with no value field. */
static int decode_zero(const struct ks_pb_msg *m, const struct ks_pb_field *f, json_t **ret,
                       int depth, struct err *e)
{
    static const unsigned char none[1];
    switch (f->type) {
    case KS_PBT_STRING:
    case KS_PBT_BYTES:
        *ret = json_string("");
        return 0;
    case KS_PBT_MSG:
        return decode_value(m, f, WIRE_LEN, none, 0, 0, ret, depth, e);
    default:
        *ret = f->type == KS_PBT_BOOL ? json_false() : json_integer(0);
        return 0;
    }
}

static int decode_map_entry(const struct ks_pb_msg *m, const struct ks_pb_field *f,
                            const unsigned char *d, size_t n, json_t *map, int depth, struct err *e)
{
    const unsigned char *p = d, *end = d + n, *data;
    size_t len;
    uint64_t no, v;
    int w, r;
    json_t *key = NULL, *val = NULL;
    /* map values are never left out: a map entry's value keeps its zero */
    struct ks_pb_field vf = *f;
    vf.flags = 0;
    vf.card = KS_PBC_ONE;
    while ((r = ks_pb_next(&p, end, &no, &w, &data, &len, &v)) > 0) {
        if (no == 1) {
            json_decref(key);
            key = w == WIRE_LEN ? json_stringn((const char *)data, len) : NULL;
            if (!key) {
                r = bad(e, m, f, "map key is not a string");
                break;
            }
        } else if (no == 2) {
            json_decref(val);
            val = NULL;
            if ((r = decode_value(m, &vf, w, data, len, v, &val, depth, e)) < 0)
                break;
            r = 1;
        }
    }
    if (r == -1)
        r = bad(e, m, f, "malformed map entry");
    if (r == 0 && !val)
        r = decode_zero(m, &vf, &val, depth, e);
    if (r == 0)
        json_object_set(map, key ? json_string_value(key) : "", val ? val : json_null());
    json_decref(key);
    json_decref(val);
    return r < 0 ? r : 0;
}

static json_t *ensure(json_t *obj, const char *key, bool array)
{
    json_t *v = json_object_get(obj, key);
    if (array ? json_is_array(v) : json_is_object(v))
        return v;
    v = array ? json_array() : json_object();
    json_object_set_new(obj, key, v);
    return v;
}

static int decode_msg(const struct ks_pb_msg *m, const unsigned char *d, size_t n, json_t *obj,
                      int depth, struct err *e)
{
    if (depth > PB_MAX_DEPTH)
        return err_set(e, -EBADMSG, "protobuf: %s: nested too deep", m->name);
    const unsigned char *p = d, *end = d + n, *data;
    size_t len;
    uint64_t no, v;
    int w, r;
    while ((r = ks_pb_next(&p, end, &no, &w, &data, &len, &v)) > 0) {
        const struct ks_pb_field *f = field_find(m, no);
        if (!f)
            continue; /* a field newer than the tables */
        if (f->card == KS_PBC_MAP) {
            if (w != WIRE_LEN)
                return bad(e, m, f, "wrong wire type");
            if ((r = decode_map_entry(m, f, data, len, ensure(obj, f->json, false), depth, e)) < 0)
                return r;
            continue;
        }
        if (f->card == KS_PBC_REPEATED && w == WIRE_LEN &&
            (f->type == KS_PBT_INT32 || f->type == KS_PBT_INT64 || f->type == KS_PBT_BOOL)) {
            /* packed */
            json_t *a = ensure(obj, f->json, true);
            const unsigned char *q = data, *qe = data + len;
            while (q < qe) {
                uint64_t x;
                if (!pb_varint(&q, qe, &x))
                    return bad(e, m, f, "malformed packed varint");
                json_t *val;
                if ((r = decode_value(m, f, WIRE_VARINT, NULL, 0, x, &val, depth, e)) < 0)
                    return r;
                json_array_append_new(a, val);
            }
            continue;
        }
        if (f->flags & KS_PBF_INLINE) {
            if (w != WIRE_LEN || f->type != KS_PBT_MSG)
                return bad(e, m, f, "wrong wire type");
            if ((r = decode_msg(&ks_pb_msgs[f->msg], data, len, obj, depth + 1, e)) < 0)
                return r;
            continue;
        }
        json_t *val;
        if ((r = decode_value(m, f, w, data, len, v, &val, depth, e)) < 0)
            return r;
        if (f->card == KS_PBC_REPEATED)
            json_array_append_new(ensure(obj, f->json, true), val ? val : json_null());
        else if (val)
            json_object_set_new(obj, f->json, val);
        else
            json_object_del(obj, f->json);
    }
    if (r < 0)
        return err_set(e, -EBADMSG, "protobuf: %s: malformed", m->name);
    return 0;
}

/* The envelope's typeMeta and raw bytes. */
static int read_envelope(const unsigned char *b, size_t blen, json_t **ret_av, json_t **ret_kind,
                         const unsigned char **ret_raw, size_t *ret_raw_len, struct err *e)
{
    if (blen < 4 || memcmp(b, magic, 4) != 0)
        return err_set(e, -EBADMSG, "protobuf: no k8s envelope");
    const unsigned char *p = b + 4, *end = b + blen, *data, *tm = NULL, *raw = NULL;
    size_t len, tml = 0, rawl = 0;
    uint64_t f, v;
    int w, r;
    while ((r = ks_pb_next(&p, end, &f, &w, &data, &len, &v)) > 0) {
        if (w == WIRE_LEN && f == 1)
            tm = data, tml = len;
        else if (w == WIRE_LEN && f == 2)
            raw = data, rawl = len;
    }
    if (r < 0 || !tm)
        return err_set(e, -EBADMSG, "protobuf: malformed runtime.Unknown");
    json_t *av = NULL, *kind = NULL;
    p = tm;
    end = tm + tml;
    while ((r = ks_pb_next(&p, end, &f, &w, &data, &len, &v)) > 0) {
        json_t **slot = w == WIRE_LEN && f == 1 ? &av : w == WIRE_LEN && f == 2 ? &kind : NULL;
        if (slot) {
            json_decref(*slot);
            *slot = json_stringn((const char *)data, len);
        }
    }
    /* a NUL inside names no kind (and would not survive a C string) */
    if (r < 0 || !av || !kind || strlen(json_string_value(av)) != json_string_length(av) ||
        strlen(json_string_value(kind)) != json_string_length(kind)) {
        json_decref(av);
        json_decref(kind);
        return err_set(e, -EBADMSG, "protobuf: malformed typeMeta");
    }
    *ret_av = av;
    *ret_kind = kind;
    *ret_raw = raw ? raw : b;
    *ret_raw_len = rawl;
    return 0;
}

/* A list's items carry no apiVersion and kind in protobuf; kubesim's JSON lists give them,
 * so the decoded list does too. */
static void fill_item_types(json_t *obj)
{
    const char *kind = json_string_value(json_object_get(obj, "kind"));
    size_t kl = kind ? strlen(kind) : 0;
    json_t *items = json_object_get(obj, "items");
    if (kl <= 4 || strcmp(kind + kl - 4, "List") != 0 || !json_is_array(items))
        return;
    size_t i;
    json_t *it;
    json_array_foreach (items, i, it) {
        if (!json_is_object(it) || json_object_get(it, "kind"))
            continue;
        json_object_set(it, "apiVersion", json_object_get(obj, "apiVersion"));
        json_object_set_new(it, "kind", json_stringn(kind, kl - 4));
    }
}

static int decode_envelope(const unsigned char *b, size_t blen, json_t **ret, int depth,
                           struct err *e)
{
    if (depth > PB_MAX_DEPTH)
        return err_set(e, -EBADMSG, "protobuf: nested too deep");
    json_t *av = NULL, *kind = NULL;
    const unsigned char *raw = NULL;
    size_t rawl = 0;
    int r = read_envelope(b, blen, &av, &kind, &raw, &rawl, e);
    if (r < 0)
        return r;
    const struct ks_pb_msg *m = kind_msg(json_string_value(av), json_string_value(kind));
    if (!m) {
        r = err_set(e, -ENOENT, "protobuf: no message for %s %s", json_string_value(av),
                    json_string_value(kind));
        json_decref(av);
        json_decref(kind);
        return r;
    }
    json_t *obj = json_object();
    json_object_set_new(obj, "apiVersion", av);
    json_object_set_new(obj, "kind", kind);
    if ((r = decode_msg(m, raw, rawl, obj, depth + 1, e)) < 0) {
        json_decref(obj);
        return r;
    }
    fill_item_types(obj);
    *ret = obj;
    return 0;
}

int ks_pb_decode(const void *body, size_t len, json_t **ret, struct err *e)
{
    return decode_envelope(body, len, ret, 0, e);
}

int ks_pb_decode_watch_event(const void *msg, size_t len, char **ret_type, json_t **ret_obj,
                             struct err *e)
{
    const struct ks_pb_msg *m = msg_find("k8s.io.apimachinery.pkg.apis.meta.v1.WatchEvent");
    json_t *ev = json_object();
    int r = m ? decode_msg(m, msg, len, ev, 0, e) : err_set(e, -ENOENT, "no WatchEvent");
    const char *type = json_string_value(json_object_get(ev, "type"));
    json_t *obj = json_object_get(ev, "object");
    if (r == 0 && (!type || !json_is_object(obj)))
        r = err_set(e, -EBADMSG, "protobuf: a WatchEvent without type or object");
    if (r == 0) {
        *ret_type = xstrdup(type);
        *ret_obj = json_incref(obj);
    }
    json_decref(ev);
    return r;
}

/* ---- JSON to protobuf --------------------------------------------------------------------- */

static int encode_msg(const struct ks_pb_msg *m, json_t *obj, struct sbuf *out, int depth,
                      struct err *e);
static int encode_envelope(json_t *obj, struct sbuf *out, int depth, struct err *e);

static int mismatch(struct err *e, const struct ks_pb_msg *m, const struct ks_pb_field *f,
                    const char *want)
{
    return err_set(e, -EINVAL, "protobuf: %s.%s: expected %s", m->name, f->json, want);
}

/* A nested message: encoded into a scratch buffer, then length-prefixed into out. */
static int put_msg_with(struct sbuf *out, uint32_t no,
                        int (*fn)(const void *ctx, json_t *v, struct sbuf *b, int depth,
                                  struct err *e),
                        const void *ctx, json_t *v, int depth, struct err *e)
{
    struct sbuf tmp;
    sbuf_init(&tmp, PB_MAX_BYTES);
    int r = fn(ctx, v, &tmp, depth + 1, e);
    if (r == 0 && (r = sbuf_check(&tmp)) < 0)
        err_set(e, r, "protobuf: message too big");
    if (r == 0)
        put_bytes(out, no, tmp.data, tmp.len);
    sbuf_free(&tmp);
    return r;
}

static int encode_special(const struct ks_pb_msg *m, json_t *v, struct sbuf *b, struct err *e)
{
    switch (m->special) {
    case KS_PBS_TIME:
    case KS_PBS_MICROTIME: {
        int64_t secs;
        int32_t nanos;
        if (!json_is_string(v) || parse_time(json_string_value(v), &secs, &nanos) < 0)
            return err_set(e, -EINVAL, "protobuf: %s: not an RFC 3339 time", m->name);
        put_uint(b, 1, (uint64_t)secs);
        put_uint(b, 2, (uint64_t)(int64_t)nanos);
        return 0;
    }
    case KS_PBS_DURATION: {
        int64_t ns;
        if (!json_is_string(v) || parse_duration(json_string_value(v), &ns) < 0)
            return err_set(e, -EINVAL, "protobuf: %s: not a duration", m->name);
        put_uint(b, 1, (uint64_t)ns);
        return 0;
    }
    case KS_PBS_QUANTITY: {
        char buf[64];
        const char *s = json_string_value(v);
        if (json_is_integer(v)) {
            snprintf(buf, sizeof(buf), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
            s = buf;
        } else if (json_is_real(v)) {
            snprintf(buf, sizeof(buf), "%.17g", json_real_value(v));
            s = buf;
        }
        if (!s)
            return err_set(e, -EINVAL, "protobuf: %s: not a quantity", m->name);
        put_bytes(b, 1, s, json_is_string(v) ? json_string_length(v) : strlen(s));
        return 0;
    }
    case KS_PBS_INTORSTRING:
        if (json_is_integer(v)) {
            json_int_t i = json_integer_value(v);
            if (i < INT32_MIN || i > INT32_MAX)
                return err_set(e, -EINVAL, "protobuf: %s: out of range", m->name);
            put_uint(b, 1, 0);
            put_uint(b, 2, (uint64_t)(int64_t)i);
            put_bytes(b, 3, "", 0);
        } else if (json_is_string(v)) {
            put_uint(b, 1, 1);
            put_uint(b, 2, 0);
            put_bytes(b, 3, json_string_value(v), json_string_length(v));
        } else {
            return err_set(e, -EINVAL, "protobuf: %s: not an int or a string", m->name);
        }
        return 0;
    case KS_PBS_RAWEXT:
    case KS_PBS_RAWJSON: {
        char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        if (!s)
            return err_set(e, -EINVAL, "protobuf: %s: not JSON", m->name);
        put_bytes(b, 1, s, strlen(s));
        free(s);
        return 0;
    }
    case KS_PBS_STRLIST: {
        size_t i;
        json_t *x;
        if (!json_is_array(v))
            return err_set(e, -EINVAL, "protobuf: %s: not an array", m->name);
        json_array_foreach (v, i, x) {
            if (!json_is_string(x))
                return err_set(e, -EINVAL, "protobuf: %s: not a string", m->name);
            put_bytes(b, 1, json_string_value(x), json_string_length(x));
        }
        return 0;
    }
    default:
        return err_set(e, -EINVAL, "protobuf: %s: not special", m->name);
    }
}

static int encode_sub(const void *ctx, json_t *v, struct sbuf *b, int depth, struct err *e)
{
    const struct ks_pb_msg *m = ctx;
    if (m->special != KS_PBS_NONE)
        return encode_special(m, v, b, e);
    if (!json_is_object(v))
        return err_set(e, -EINVAL, "protobuf: %s: expected an object", m->name);
    return encode_msg(m, v, b, depth, e);
}

/* One value of field f into out (with its key). */
static int encode_value(const struct ks_pb_msg *m, const struct ks_pb_field *f, uint32_t no,
                        json_t *v, struct sbuf *out, int depth, struct err *e)
{
    switch (f->type) {
    case KS_PBT_STRING:
        if (!json_is_string(v))
            return mismatch(e, m, f, "a string");
        put_bytes(out, no, json_string_value(v), json_string_length(v));
        return 0;
    case KS_PBT_BYTES: {
        char *d;
        size_t n;
        if (!json_is_string(v) ||
            base64_decode(json_string_value(v), json_string_length(v), &d, &n) < 0)
            return mismatch(e, m, f, "base64");
        put_bytes(out, no, d, n);
        free(d);
        return 0;
    }
    case KS_PBT_BOOL:
        if (!json_is_boolean(v))
            return mismatch(e, m, f, "a boolean");
        put_uint(out, no, json_is_true(v));
        return 0;
    case KS_PBT_INT32:
    case KS_PBT_INT64: {
        if (!json_is_integer(v))
            return mismatch(e, m, f, "an integer");
        json_int_t i = json_integer_value(v);
        if (f->type == KS_PBT_INT32 && (i < INT32_MIN || i > INT32_MAX))
            return mismatch(e, m, f, "a 32-bit integer");
        put_uint(out, no, (uint64_t)(int64_t)i);
        return 0;
    }
    case KS_PBT_MSG:
        return put_msg_with(out, no, encode_sub, &ks_pb_msgs[f->msg], v, depth, e);
    default:
        return mismatch(e, m, f, "a known type");
    }
}

struct map_entry_ctx {
    const struct ks_pb_msg *m;
    const struct ks_pb_field *f;
    const char *key;
};

static int encode_map_entry(const void *ctx, json_t *v, struct sbuf *b, int depth, struct err *e)
{
    const struct map_entry_ctx *c = ctx;
    put_bytes(b, 1, c->key, strlen(c->key));
    return encode_value(c->m, c->f, 2, v, b, depth, e);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int encode_inline(const void *ctx, json_t *v, struct sbuf *b, int depth, struct err *e)
{
    return encode_msg(ctx, v, b, depth, e);
}

static int encode_msg(const struct ks_pb_msg *m, json_t *obj, struct sbuf *out, int depth,
                      struct err *e)
{
    if (depth > PB_MAX_DEPTH)
        return err_set(e, -EINVAL, "protobuf: %s: nested too deep", m->name);
    for (size_t i = 0; i < m->n_fields; i++) {
        const struct ks_pb_field *f = &m->fields[i];
        int r = 0;
        if (f->flags & KS_PBF_INLINE) {
            r = put_msg_with(out, f->no, encode_inline, &ks_pb_msgs[f->msg], obj, depth, e);
            if (r < 0)
                return r;
            continue;
        }
        json_t *v = json_object_get(obj, f->json);
        if (json_is_null(v) && f->card == KS_PBC_ONE && f->type == KS_PBT_MSG &&
            (ks_pb_msgs[f->msg].special == KS_PBS_TIME ||
             ks_pb_msgs[f->msg].special == KS_PBS_MICROTIME)) {
            put_bytes(out, f->no, "", 0); /* a zero time */
            continue;
        }
        if (!v || json_is_null(v))
            continue;
        if (f->card == KS_PBC_ONE) {
            r = encode_value(m, f, f->no, v, out, depth, e);
        } else if (f->card == KS_PBC_REPEATED) {
            size_t j;
            json_t *x;
            if (!json_is_array(v))
                return mismatch(e, m, f, "an array");
            json_array_foreach (v, j, x)
                if ((r = encode_value(m, f, f->no, x, out, depth, e)) < 0)
                    break;
        } else {
            if (!json_is_object(v))
                return mismatch(e, m, f, "an object");
            /* sorted, as Kubernetes writes maps */
            size_t n = json_object_size(v), j = 0;
            const char **keys = xcalloc(n ? n : 1, sizeof(*keys));
            const char *k;
            json_t *x;
            json_object_foreach (v, k, x)
                keys[j++] = k;
            qsort(keys, n, sizeof(*keys), cmp_str);
            for (j = 0; j < n && r == 0; j++) {
                struct map_entry_ctx c = {m, f, keys[j]};
                r = put_msg_with(out, f->no, encode_map_entry, &c, json_object_get(v, keys[j]),
                                 depth, e);
            }
            free(keys);
        }
        if (r < 0)
            return r;
    }
    return 0;
}

static int encode_envelope(json_t *obj, struct sbuf *out, int depth, struct err *e)
{
    const char *av = json_string_value(json_object_get(obj, "apiVersion"));
    const char *kind = json_string_value(json_object_get(obj, "kind"));
    const struct ks_pb_msg *m = kind_msg(av, kind);
    if (!m)
        return err_set(e, -ENOENT, "protobuf: no message for %s %s", av ? av : "(none)",
                       kind ? kind : "(none)");
    struct sbuf raw, tm;
    sbuf_init(&raw, PB_MAX_BYTES);
    sbuf_init(&tm, 1024);
    int r = encode_msg(m, obj, &raw, depth, e);
    put_bytes(&tm, 1, av, strlen(av));
    put_bytes(&tm, 2, kind, strlen(kind));
    if (r == 0 && ((r = sbuf_check(&raw)) < 0 || (r = sbuf_check(&tm)) < 0))
        err_set(e, r, "protobuf: %s too big", kind);
    if (r == 0) {
        sbuf_add(out, magic, sizeof(magic));
        put_bytes(out, 1, tm.data, tm.len);
        put_bytes(out, 2, raw.data, raw.len);
        put_bytes(out, 3, "", 0); /* contentEncoding */
        put_bytes(out, 4, "", 0); /* contentType */
        if ((r = sbuf_check(out)) < 0)
            err_set(e, r, "protobuf: %s does not fit", kind);
    }
    sbuf_free(&raw);
    sbuf_free(&tm);
    return r;
}

int ks_pb_encode(json_t *obj, struct sbuf *out, struct err *e)
{
    if (!json_is_object(obj))
        return err_set(e, -EINVAL, "protobuf: not an object");
    return encode_envelope(obj, out, 0, e);
}

int ks_pb_encode_watch_event(const char *type, json_t *obj, struct sbuf *out, struct err *e)
{
    struct sbuf env, ev, raw;
    sbuf_init(&env, PB_MAX_BYTES);
    sbuf_init(&ev, PB_MAX_BYTES);
    sbuf_init(&raw, PB_MAX_BYTES);
    int r = ks_pb_encode(obj, &env, e);
    if (r == 0) {
        put_bytes(&raw, 1, env.data, env.len); /* RawExtension.raw */
        put_bytes(&ev, 1, type, strlen(type));
        put_bytes(&ev, 2, raw.data, raw.len);
        if ((r = sbuf_check(&raw)) < 0 || (r = sbuf_check(&ev)) < 0)
            err_set(e, r, "protobuf: watch event too big");
    }
    if (r == 0 && ev.len > UINT32_MAX)
        r = err_set(e, -ENOBUFS, "protobuf: watch event too big");
    if (r == 0) {
        unsigned char len[4] = {(unsigned char)(ev.len >> 24), (unsigned char)(ev.len >> 16),
                                (unsigned char)(ev.len >> 8), (unsigned char)ev.len};
        sbuf_add(out, len, sizeof(len));
        sbuf_add(out, ev.data, ev.len);
        if ((r = sbuf_check(out)) < 0)
            err_set(e, r, "protobuf: watch event does not fit");
    }
    sbuf_free(&env);
    sbuf_free(&ev);
    sbuf_free(&raw);
    return r;
}
