/* SPDX-License-Identifier: Apache-2.0 */
/* gRPC wire helpers: message framing, header values. Pure functions, no I/O. */
#include <inttypes.h>
#include <stdarg.h>
#include <string.h>
#include <strings.h>

#include "grpc-internal.h"

static const char *const status_names[] = {
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
};

const char *grpc_status_name(int code)
{
    if (code < 0 || (size_t)code >= ARRAY_SIZE(status_names))
        return "UNKNOWN";
    return status_names[code];
}

void grpc_frame_prefix(uint8_t out[GRPC_PREFIX_LEN], uint32_t len)
{
    out[0] = 0;
    out[1] = (uint8_t)(len >> 24);
    out[2] = (uint8_t)(len >> 16);
    out[3] = (uint8_t)(len >> 8);
    out[4] = (uint8_t)len;
}

void grpc_deframer_init(struct grpc_deframer *d, size_t max_msg)
{
    *d = (struct grpc_deframer){.max_msg = max_msg};
}

void grpc_deframer_free(struct grpc_deframer *d)
{
    free(d->msg);
    d->msg = NULL;
}

bool grpc_deframer_idle(const struct grpc_deframer *d)
{
    return d->prefix_have == 0 && !d->msg;
}

static int GPUOP_PRINTF(4, 5)
    deframer_fail(struct grpc_deframer *d, int code, struct err *e, const char *fmt, ...)
{
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    d->failed = code;
    grpc_deframer_free(d);
    err_set(e, -EBADMSG, "%s", buf);
    return code;
}

int grpc_deframer_feed(struct grpc_deframer *d, const uint8_t *data, size_t len, grpc_msg_fn fn,
                       void *userdata, struct err *e)
{
    if (d->failed) {
        err_set(e, -EBADMSG, "message stream already failed");
        return d->failed;
    }
    while (len > 0) {
        if (!d->msg) {
            size_t take = GRPC_PREFIX_LEN - d->prefix_have;
            if (take > len)
                take = len;
            memcpy(d->prefix + d->prefix_have, data, take);
            d->prefix_have += take;
            data += take;
            len -= take;
            if (d->prefix_have < GRPC_PREFIX_LEN)
                break;
            uint8_t flag = d->prefix[0];
            size_t mlen = ((size_t)d->prefix[1] << 24) | ((size_t)d->prefix[2] << 16) |
                          ((size_t)d->prefix[3] << 8) | d->prefix[4];
            if (flag == 1)
                return deframer_fail(d, GRPC_STATUS_UNIMPLEMENTED, e,
                                     "compressed message (flag %zu, %zu bytes) but no "
                                     "grpc-encoding was negotiated",
                                     (size_t)flag, mlen);
            if (flag != 0)
                return deframer_fail(d, GRPC_STATUS_INTERNAL, e,
                                     "bad message flag %zu (message of %zu bytes)", (size_t)flag,
                                     mlen);
            if (mlen > d->max_msg)
                return deframer_fail(d, GRPC_STATUS_RESOURCE_EXHAUSTED, e,
                                     "message of %zu bytes is larger than the limit of %zu bytes",
                                     mlen, d->max_msg);
            d->msg = malloc(mlen ? mlen : 1);
            if (!d->msg)
                return deframer_fail(d, GRPC_STATUS_RESOURCE_EXHAUSTED, e,
                                     "out of memory for a message of %zu bytes", mlen);
            d->msg_len = mlen;
            d->msg_have = 0;
        }
        size_t take = d->msg_len - d->msg_have;
        if (take > len)
            take = len;
        if (take)
            memcpy(d->msg + d->msg_have, data, take);
        d->msg_have += take;
        data += take;
        len -= take;
        if (d->msg_have == d->msg_len) {
            uint8_t *m = d->msg;
            size_t mlen = d->msg_len;
            d->msg = NULL;
            d->prefix_have = 0;
            if (fn(userdata, m, mlen) < 0)
                return deframer_fail(d, GRPC_STATUS_INTERNAL, e, "message of %zu bytes refused",
                                     mlen);
        }
    }
    return 0;
}

bool grpc_name_is(const uint8_t *name, size_t len, const char *lit)
{
    size_t n = strlen(lit);
    return len == n && memcmp(name, lit, n) == 0;
}

static bool pct_plain(unsigned char c)
{
    return c >= 0x20 && c <= 0x7e && c != '%';
}

size_t grpc_percent_encode(const char *in, size_t in_len, char *out, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (size_t i = 0; i < in_len; i++) {
        unsigned char c = (unsigned char)in[i];
        if (pct_plain(c)) {
            if (o + 1 >= n)
                break;
            out[o++] = (char)c;
        } else {
            if (o + 3 >= n)
                break;
            out[o++] = '%';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 15];
        }
    }
    out[o] = '\0';
    return o;
}

size_t grpc_percent_decode(const char *in, size_t in_len, char *out, size_t n)
{
    size_t o = 0;
    for (size_t i = 0; i < in_len && o + 1 < n; i++) {
        char c = in[i];
        if (c == '%' && i + 2 < in_len) {
            int h = hex_digit(in[i + 1]), l = hex_digit(in[i + 2]);
            if (h >= 0 && l >= 0) {
                c = (char)(h * 16 + l);
                i += 2;
            }
        }
        out[o++] = c == '\0' ? '?' : c;
    }
    out[o] = '\0';
    return o;
}

void grpc_timeout_format(uint64_t ms, char out[16])
{
    /* At most 8 digits: pick the finest unit that fits, rounding up when coarser. */
    if (ms <= 99999999u) {
        snprintf(out, 16, "%" PRIu64 "m", ms);
        return;
    }
    uint64_t s = (ms + 999) / 1000;
    if (s <= 99999999u) {
        snprintf(out, 16, "%" PRIu64 "S", s);
        return;
    }
    uint64_t m = (s + 59) / 60;
    if (m <= 99999999u) {
        snprintf(out, 16, "%" PRIu64 "M", m);
        return;
    }
    uint64_t h = (m + 59) / 60;
    if (h > 99999999u)
        h = 99999999u;
    snprintf(out, 16, "%" PRIu64 "H", h);
}

#define TIMEOUT_CAP_MS (100ull * 24 * 3600 * 1000)

int grpc_timeout_parse(const char *s, size_t len, uint64_t *ret_ms)
{
    if (len < 2 || len > 9)
        return -EINVAL;
    uint64_t v = 0;
    for (size_t i = 0; i + 1 < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -EINVAL;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    uint64_t ms;
    switch (s[len - 1]) {
    case 'H':
        ms = v * 3600000u;
        break;
    case 'M':
        ms = v * 60000u;
        break;
    case 'S':
        ms = v * 1000u;
        break;
    case 'm':
        ms = v;
        break;
    case 'u':
        ms = (v + 999) / 1000;
        break;
    case 'n':
        ms = (v + 999999) / 1000000;
        break;
    default:
        return -EINVAL;
    }
    *ret_ms = ms > TIMEOUT_CAP_MS ? TIMEOUT_CAP_MS : ms;
    return 0;
}

bool grpc_content_type_ok(const char *v, size_t len)
{
    static const char ct[] = "application/grpc";
    size_t n = sizeof(ct) - 1;
    if (len < n || strncasecmp(v, ct, n) != 0)
        return false;
    return len == n || v[n] == '+' || v[n] == ';';
}

int grpc_status_parse(const char *v, size_t len, int *ret)
{
    if (len == 0 || len > 10)
        return -EINVAL;
    int64_t x = 0;
    for (size_t i = 0; i < len; i++) {
        if (v[i] < '0' || v[i] > '9')
            return -EINVAL;
        x = x * 10 + (v[i] - '0');
    }
    if (x > INT32_MAX)
        return -EINVAL;
    *ret = (int)x;
    return 0;
}

int grpc_status_from_http(int http_status)
{
    switch (http_status) {
    case 400:
        return GRPC_STATUS_INTERNAL;
    case 401:
        return GRPC_STATUS_UNAUTHENTICATED;
    case 403:
        return GRPC_STATUS_PERMISSION_DENIED;
    case 404:
        return GRPC_STATUS_UNIMPLEMENTED;
    case 429:
    case 502:
    case 503:
    case 504:
        return GRPC_STATUS_UNAVAILABLE;
    default:
        return GRPC_STATUS_UNKNOWN;
    }
}

int grpc_status_from_h2_error(uint32_t h2_error)
{
    switch (h2_error) {
    case 0x0: /* NO_ERROR */
    case 0x1: /* PROTOCOL_ERROR */
    case 0x2: /* INTERNAL_ERROR */
    case 0x3: /* FLOW_CONTROL_ERROR */
    case 0x4: /* SETTINGS_TIMEOUT */
    case 0x6: /* FRAME_SIZE_ERROR */
    case 0x9: /* COMPRESSION_ERROR */
    case 0xa: /* CONNECT_ERROR */
        return GRPC_STATUS_INTERNAL;
    case 0x7: /* REFUSED_STREAM */
        return GRPC_STATUS_UNAVAILABLE;
    case 0x8: /* CANCEL */
        return GRPC_STATUS_CANCELLED;
    case 0xb: /* ENHANCE_YOUR_CALM */
        return GRPC_STATUS_RESOURCE_EXHAUSTED;
    case 0xc: /* INADEQUATE_SECURITY */
        return GRPC_STATUS_PERMISSION_DENIED;
    default:
        return GRPC_STATUS_UNKNOWN;
    }
}

int grpc_pb_pack(const ProtobufCMessage *msg, size_t limit, uint8_t **ret, size_t *ret_len,
                 struct err *e)
{
    size_t n = protobuf_c_message_get_packed_size(msg);
    if (limit && n > limit)
        return err_set(e, -EMSGSIZE, "%s message of %zu bytes is larger than the limit of %zu",
                       msg->descriptor->name, n, limit);
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf)
        return err_set(e, -ENOMEM, "%s message of %zu bytes: out of memory", msg->descriptor->name,
                       n);
    size_t w = protobuf_c_message_pack(msg, buf);
    if (w != n) {
        free(buf);
        return err_set(e, -EINVAL, "%s message: packed %zu bytes, expected %zu",
                       msg->descriptor->name, w, n);
    }
    *ret = buf;
    *ret_len = n;
    return 0;
}

int grpc_pb_unpack(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len,
                   size_t limit, ProtobufCMessage **ret, struct err *e)
{
    if (limit && len > limit)
        return err_set(e, -EMSGSIZE, "%s message of %zu bytes is larger than the limit of %zu",
                       desc->name, len, limit);
    ProtobufCMessage *m = protobuf_c_message_unpack(desc, NULL, len, data);
    if (!m)
        return err_set(e, -EBADMSG, "%s message of %zu bytes does not parse", desc->name, len);
    *ret = m;
    return 0;
}
