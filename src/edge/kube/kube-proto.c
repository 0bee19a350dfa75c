/* SPDX-License-Identifier: Apache-2.0 */
/* The pure protocol pieces: URLs, Status decoding, the watch-stream parser, rate limiting,
 * backoff and lease decisions. No I/O here. */
#include <assert.h>
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "kube-internal.h"

const struct kube_resource KUBE_NAMESPACES = {"", "v1", "namespaces", "Namespace", false};
const struct kube_resource KUBE_NODES = {"", "v1", "nodes", "Node", false};
const struct kube_resource KUBE_PODS = {"", "v1", "pods", "Pod", true};
const struct kube_resource KUBE_CONFIGMAPS = {"", "v1", "configmaps", "ConfigMap", true};
const struct kube_resource KUBE_SECRETS = {"", "v1", "secrets", "Secret", true};
const struct kube_resource KUBE_SERVICES = {"", "v1", "services", "Service", true};
const struct kube_resource KUBE_SERVICEACCOUNTS = {"", "v1", "serviceaccounts", "ServiceAccount",
                                                   true};
const struct kube_resource KUBE_EVENTS = {"", "v1", "events", "Event", true};
const struct kube_resource KUBE_DAEMONSETS = {"apps", "v1", "daemonsets", "DaemonSet", true};
const struct kube_resource KUBE_DEPLOYMENTS = {"apps", "v1", "deployments", "Deployment", true};
const struct kube_resource KUBE_CONTROLLERREVISIONS = {"apps", "v1", "controllerrevisions",
                                                       "ControllerRevision", true};
const struct kube_resource KUBE_LEASES = {"coordination.k8s.io", "v1", "leases", "Lease", true};
const struct kube_resource KUBE_PDBS = {"policy", "v1", "poddisruptionbudgets",
                                        "PodDisruptionBudget", true};
const struct kube_resource KUBE_RUNTIMECLASSES = {"node.k8s.io", "v1", "runtimeclasses",
                                                  "RuntimeClass", false};
const struct kube_resource KUBE_CRDS = {"apiextensions.k8s.io", "v1", "customresourcedefinitions",
                                        "CustomResourceDefinition", false};

/* The custom and optional kinds gpuop reads or writes: NVIDIA's CRDs, gpuop's own, RBAC, quotas,
 * the Prometheus Operator's (served only where its CRDs are installed) and DRA's. */
const struct kube_resource KUBE_CLUSTERPOLICIES = {"nvidia.com", "v1", "clusterpolicies",
                                                   "ClusterPolicy", false};
const struct kube_resource KUBE_NVIDIADRIVERS = {"nvidia.com", "v1alpha1", "nvidiadrivers",
                                                 "NVIDIADriver", false};
const struct kube_resource KUBE_GPUCLUSTERS = {"nvidia.com", "v1alpha1", "gpuclusters",
                                               "GPUCluster", false};
const struct kube_resource KUBE_DRIVERUPGRADEPOOLS = {
    "upgrade.gpuop.dev", "v1alpha1", "driverupgradepools", "DriverUpgradePool", false};
const struct kube_resource KUBE_CLUSTERROLES = {"rbac.authorization.k8s.io", "v1", "clusterroles",
                                                "ClusterRole", false};
const struct kube_resource KUBE_CLUSTERROLEBINDINGS = {
    "rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", false};
const struct kube_resource KUBE_ROLES = {"rbac.authorization.k8s.io", "v1", "roles", "Role", true};
const struct kube_resource KUBE_ROLEBINDINGS = {"rbac.authorization.k8s.io", "v1", "rolebindings",
                                                "RoleBinding", true};
const struct kube_resource KUBE_RESOURCEQUOTAS = {"", "v1", "resourcequotas", "ResourceQuota",
                                                  true};
const struct kube_resource KUBE_SERVICEMONITORS = {"monitoring.coreos.com", "v1", "servicemonitors",
                                                   "ServiceMonitor", true};
const struct kube_resource KUBE_PROMETHEUSRULES = {"monitoring.coreos.com", "v1", "prometheusrules",
                                                   "PrometheusRule", true};
const struct kube_resource KUBE_RESOURCECLAIMS = {"resource.k8s.io", "v1", "resourceclaims",
                                                  "ResourceClaim", true};
const struct kube_resource KUBE_RESOURCESLICES = {"resource.k8s.io", "v1", "resourceslices",
                                                  "ResourceSlice", false};
const struct kube_resource KUBE_DEVICECLASSES = {"resource.k8s.io", "v1", "deviceclasses",
                                                 "DeviceClass", false};

/* ---- URLs --------------------------------------------------------------------------------- */

int kube_url_escape(struct sbuf *b, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        unsigned char ch = *p;
        bool plain = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                     (ch >= '0' && ch <= '9') || ch == '-' || ch == '_' || ch == '.' || ch == '~';
        int r;
        if (plain)
            r = sbuf_append(b, p, 1);
        else {
            char enc[3] = {'%', hex[ch >> 4], hex[ch & 15]};
            r = sbuf_append(b, enc, 3);
        }
        if (r < 0)
            return r;
    }
    return 0;
}

int kube_build_path(struct sbuf *b, const struct kube_resource *r, const char *ns, const char *name,
                    const char *sub)
{
    int rc;
    if (!r->group || !r->group[0])
        rc = sbuf_printf(b, "/api/%s", r->version);
    else
        rc = sbuf_printf(b, "/apis/%s/%s", r->group, r->version);
    if (rc < 0)
        return rc;
    if (r->namespaced && ns && ns[0]) {
        if ((rc = sbuf_puts(b, "/namespaces/")) < 0 || (rc = kube_url_escape(b, ns)) < 0)
            return rc;
    }
    if ((rc = sbuf_printf(b, "/%s", r->plural)) < 0)
        return rc;
    if (name) {
        if ((rc = sbuf_puts(b, "/")) < 0 || (rc = kube_url_escape(b, name)) < 0)
            return rc;
    }
    if (sub && (rc = sbuf_printf(b, "/%s", sub)) < 0)
        return rc;
    return 0;
}

int kube_query_add(struct sbuf *b, const char *key, const char *value)
{
    if (!value || !value[0])
        return 0;
    int r = sbuf_printf(b, "%c%s=", b->data && strchr(b->data, '?') ? '&' : '?', key);
    if (r < 0)
        return r;
    return kube_url_escape(b, value);
}

int kube_selector_check(const char *what, const char *sel, struct err *e)
{
    if (!sel)
        return 0;
    size_t n = strlen(sel);
    if (n > 4096)
        return err_set(e, -EINVAL, "%s: longer than 4096 characters", what);
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)sel[i];
        if (ch < 0x20 || ch >= 0x7f)
            return err_set(e, -EINVAL, "%s \"%.64s\": control or non-ASCII character at %zu", what,
                           sel, i);
    }
    return 0;
}

/* ---- responses ---------------------------------------------------------------------------- */

int kube_http_errno(long http, const char *reason)
{
    switch (http) {
    case 400:
    case 422:
        return -EINVAL;
    case 401:
        return -EACCES;
    case 403:
        return -EPERM;
    case 404:
        return -ENOENT;
    case 405:
        return -EOPNOTSUPP;
    case 409:
        return streq_ptr(reason, "AlreadyExists") ? -EEXIST : KUBE_ECONFLICT;
    case 410:
        return KUBE_EGONE;
    case 413:
        return -EFBIG;
    case 415:
        return -EPROTO;
    case 429:
        return -EAGAIN;
    case 504:
        return -ETIMEDOUT;
    default:
        return http >= 500 ? -EIO : -EPROTO;
    }
}

/* Copies printable ASCII only, so a hostile body cannot inject into logs. */
static void sanitize(char *dst, size_t n, const char *src, size_t len)
{
    size_t o = 0;
    for (size_t i = 0; i < len && o + 1 < n; i++) {
        unsigned char ch = (unsigned char)src[i];
        dst[o++] = (ch >= 0x20 && ch < 0x7f) ? (char)ch : ' ';
    }
    dst[o] = '\0';
}

/* A Status is a few hundred bytes decoded: a body that would cost more is not decoded. */
#define STATUS_DECODED_MAX (1u << 20)

int kube_status_err(long http, const char *body, size_t len, const char *what, struct err *e)
{
    json_error_t je;
    json_t *st = body && len && kube_json_cost(body, len) <= STATUS_DECODED_MAX
                     ? json_loadb(body, len, JSON_DISABLE_EOF_CHECK, &je)
                     : NULL;
    const char *kind = json_string_value(json_object_get(st, "kind"));
    if (st && streq_ptr(kind, "Status")) {
        const char *msg = json_string_value(json_object_get(st, "message"));
        const char *reason = json_string_value(json_object_get(st, "reason"));
        char m[300], rs[64];
        sanitize(m, sizeof(m), msg ? msg : what, strlen(msg ? msg : what));
        sanitize(rs, sizeof(rs), reason ? reason : "", reason ? strlen(reason) : 0);
        int code = kube_http_errno(http, reason);
        if (rs[0])
            err_set(e, code, "%s (%ld %s)", m, http, rs);
        else
            err_set(e, code, "%s (%ld)", m, http);
        json_decref(st);
        return code;
    }
    json_decref(st);
    char snippet[120];
    sanitize(snippet, sizeof(snippet), body ? body : "", body ? len : 0);
    int code = kube_http_errno(http, NULL);
    if (snippet[0])
        return err_set(e, code, "%s: HTTP %ld: %s", what, http, snippet);
    return err_set(e, code, "%s: HTTP %ld", what, http);
}

/* ---- what JSON costs decoded --------------------------------------------------------------- */

/* A glibc malloc chunk for a request of n bytes: an 8-byte header, 16-byte steps, 32 at least. */
static size_t chunk(size_t n)
{
    if (n > SIZE_MAX / 2)
        return SIZE_MAX / 2;
    n = (n + 8 + 15) & ~(size_t)15;
    return n < 32 ? 32 : n;
}

/* jansson 2.14's tables: an array's starts at 8 slots and doubles; an object's hash buckets
 * (two pointers each) start at 8 and double once the members reach their number. */
static size_t slots(size_t n)
{
    size_t s = 8;
    while (s < n && s < SIZE_MAX / 4)
        s *= 2;
    return s;
}

/* The structs jansson allocates per value (json_t is a type and a reference count). */
#define COST_OBJECT_STRUCT 72 /* json_t + hashtable_t */
#define COST_ARRAY_STRUCT  40 /* json_t + size, entries, table */
#define COST_STRING_STRUCT 32 /* json_t + value, length */
#define COST_NUMBER_STRUCT 24 /* json_t + json_int_t or double */
#define COST_PAIR_HEAD     56 /* hash, two list links, value, key length; the key follows */
#define COST_BUCKET        16
#define COST_SLOT          8

static size_t cost_object(size_t members)
{
    return chunk(COST_OBJECT_STRUCT) + chunk(COST_BUCKET * slots(members));
}

static size_t cost_array(size_t elems)
{
    return chunk(COST_ARRAY_STRUCT) + chunk(COST_SLOT * slots(elems));
}

/* A string of n bytes: the parser allocates its text as it came (quotes and escapes included),
 * never less than the decoded value. */
static size_t cost_string(size_t n)
{
    return chunk(COST_STRING_STRUCT) + chunk(n + 3);
}

static size_t cost_member(size_t key_len)
{
    return chunk(COST_PAIR_HEAD + key_len + 1);
}

static size_t add_sat(size_t a, size_t b)
{
    return a > SIZE_MAX - b ? SIZE_MAX : a + b;
}

/* jansson's own nesting limit: deeper text is refused, so nothing deeper is counted. */
#define COST_DEPTH_MAX 2048

size_t kube_json_cost(const char *text, size_t n)
{
    struct level {
        size_t count;    /* members of an object, elements of an array */
        bool object;     /* else an array */
        bool expect_key; /* an object, before a member's name */
    };
    struct level small[64], *st = small;
    size_t cap = ARRAY_SIZE(small), depth = 0, total = 0, longest = 0, longest_key = 0;
    const char *p = text ? text : "";
    for (size_t i = 0; i < n; i++) {
        char ch = p[i];
        struct level *top = depth > 0 && depth <= cap ? &st[depth - 1] : NULL;
        switch (ch) {
        case ' ':
        case '\t':
        case '\n':
        case '\r':
            break;
        case '{':
        case '[':
            if (top && !top->object)
                top->count++;
            if (depth == cap && cap < COST_DEPTH_MAX) {
                struct level *big = xmalloc(sizeof(*st) * COST_DEPTH_MAX);
                memcpy(big, st, sizeof(*st) * cap);
                if (st != small)
                    free(st);
                st = big;
                cap = COST_DEPTH_MAX;
            }
            if (depth < cap)
                st[depth] = (struct level){.object = ch == '{', .expect_key = ch == '{'};
            depth++;
            break;
        case '}':
        case ']':
            if (depth == 0)
                break; /* not JSON: jansson refuses it */
            if (top)
                total =
                    add_sat(total, top->object ? cost_object(top->count) : cost_array(top->count));
            depth--;
            break;
        case ',':
            if (top && top->object)
                top->expect_key = true;
            break;
        case ':':
            if (top && top->object)
                top->expect_key = false;
            break;
        case '"': {
            /* the closing quote: the next one not escaped by an odd run of backslashes */
            size_t j = i + 1;
            for (;;) {
                const char *q = j < n ? memchr(p + j, '"', n - j) : NULL;
                if (!q) {
                    j = n;
                    break;
                }
                j = (size_t)(q - p);
                size_t bs = 0;
                while (j - bs > i + 1 && p[j - bs - 1] == '\\')
                    bs++;
                if (bs % 2 == 0)
                    break;
                j++;
            }
            size_t len = j - (i + 1);
            if (len > longest)
                longest = len;
            if (top && top->object && top->expect_key) {
                if (len > longest_key)
                    longest_key = len;
                top->count++;
                top->expect_key = false;
                total = add_sat(total, cost_member(len));
            } else {
                if (top && !top->object)
                    top->count++;
                total = add_sat(total, cost_string(len));
            }
            i = j; /* the closing quote (or the end) */
            break;
        }
        default: {
            /* a number or a literal (true, false, null); anything else jansson refuses */
            bool number = ch == '-' || (ch >= '0' && ch <= '9');
            if (top && !top->object)
                top->count++;
            if (number)
                total = add_sat(total, chunk(COST_NUMBER_STRUCT));
            size_t j = i + 1;
            while (j < n && ((p[j] >= '0' && p[j] <= '9') || (p[j] >= 'a' && p[j] <= 'z') ||
                             p[j] == '.' || p[j] == '+' || p[j] == '-' || p[j] == 'E'))
                j++;
            i = j - 1;
            break;
        }
        }
    }
    if (st != small)
        free(st);
    /* the parser's scratch: its token buffer (doubling, kept to the end), and a name's copy
     * until its member holds it (a string value keeps the parser's copy: counted above) */
    return add_sat(total, add_sat(chunk(2 * longest + 32) + chunk(longest_key + 3), 1024));
}

/* A scalar's price (0 for containers, priced by the caller's walk). */
static inline size_t scalar_cost(json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_STRING:
        return cost_string(json_string_length(v));
    case JSON_INTEGER:
    case JSON_REAL:
        return chunk(COST_NUMBER_STRUCT);
    default:
        return 0; /* true, false, null: shared */
    }
}

size_t kube_json_value_cost(json_t *v)
{
    size_t total;
    json_t *m;
    if (json_is_object(v)) {
        total = cost_object(json_object_size(v));
        for (void *it = json_object_iter(v); it; it = json_object_iter_next(v, it)) {
            m = json_object_iter_value(it);
            total = add_sat(total, cost_member(json_object_iter_key_len(it)));
            total = add_sat(total, json_is_object(m) || json_is_array(m) ? kube_json_value_cost(m)
                                                                         : scalar_cost(m));
        }
        return total;
    }
    if (json_is_array(v)) {
        size_t n = json_array_size(v);
        total = cost_array(n);
        for (size_t i = 0; i < n; i++) {
            m = json_array_get(v, i);
            total = add_sat(total, json_is_object(m) || json_is_array(m) ? kube_json_value_cost(m)
                                                                         : scalar_cost(m));
        }
        return total;
    }
    return scalar_cost(v);
}

/* Sizes in messages: KiB under 1 MiB, MiB with a decimal under 10, GiB from 10 GiB. */
void kube_mib(char *buf, size_t n, size_t bytes)
{
    double k = (double)bytes / 1024.0, m = k / 1024.0;
    if (m < 1)
        snprintf(buf, n, "%.0f KiB", k < 1 && bytes ? 1 : k);
    else if (m < 10)
        snprintf(buf, n, "%.1f MiB", m);
    else if (m < 10240)
        snprintf(buf, n, "%.0f MiB", m);
    else
        snprintf(buf, n, "%.0f GiB", m / 1024);
}

int kube_decoded_err(struct err *e, const char *what, const char *thing, size_t cost, size_t limit,
                     const char *knob)
{
    char c[32], l[32];
    kube_mib(c, sizeof(c), cost);
    kube_mib(l, sizeof(l), limit);
    return err_set(e, -EFBIG, "%s: %s would take about %s decoded, more than the %s limit (%s)",
                   what, thing, c, l, knob);
}

int kube_json_parse(const char *body, size_t len, size_t max_decoded, const char *what,
                    json_t **ret, struct err *e)
{
    if (max_decoded != SIZE_MAX) {
        size_t cost = kube_json_cost(body, len);
        if (cost > max_decoded)
            return kube_decoded_err(e, what, "the response", cost, max_decoded,
                                    "kube_options.max_decoded");
    }
    json_error_t je;
    json_t *v = json_loadb(body ? body : "", len, 0, &je);
    if (!v)
        return err_set(e, -EBADMSG, "%s: malformed JSON in the response: %s (at byte %d)", what,
                       je.text, je.position);
    if (!json_is_object(v)) {
        json_decref(v);
        return err_set(e, -EBADMSG, "%s: expected a JSON object in the response", what);
    }
    *ret = v;
    return 0;
}

/* ---- list bodies, item by item ----------------------------------------------------------- */

static size_t skip_ws(const char *s, size_t n, size_t i)
{
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
        i++;
    return i;
}

/* One past the end of the JSON value that starts at i: strings and brackets followed, nothing
 * else checked (the decode of the value does that). i itself where no value ends in the text. */
static size_t value_end(const char *s, size_t n, size_t i)
{
    size_t depth = 0;
    bool in_str = false;
    for (size_t k = i; k < n; k++) {
        char ch = s[k];
        if (in_str) {
            if (ch == '\\')
                k++;
            else if (ch == '"') {
                in_str = false;
                if (depth == 0)
                    return k + 1;
            }
            continue;
        }
        switch (ch) {
        case '"':
            in_str = true;
            break;
        case '{':
        case '[':
            depth++;
            break;
        case '}':
        case ']':
            if (depth == 0)
                return k; /* a number or literal ended by its container */
            if (--depth == 0)
                return k + 1;
            break;
        case ',':
        case ' ':
        case '\t':
        case '\n':
        case '\r':
            if (depth == 0)
                return k;
            break;
        default:
            break;
        }
    }
    return depth == 0 && !in_str ? n : i;
}

static int list_body_bad(struct err *e, const char *what, size_t at)
{
    return err_set(e, -EBADMSG, "%s: malformed JSON in the response (at byte %zu)", what, at);
}

int kube_list_body_each(const char *body, size_t len, size_t max_decoded, const char *what,
                        kube_item_text_fn fn, void *userdata, json_t **ret_rest, struct err *e)
{
    _cleanup_json_ json_t *rest = json_object();
    bool items = false;
    json_error_t je;
    size_t i = skip_ws(body, len, 0);
    if (i >= len || body[i] != '{')
        return list_body_bad(e, what, i);
    i = skip_ws(body, len, i + 1);
    if (i < len && body[i] == '}')
        i++;
    else {
        for (;;) {
            if (i >= len || body[i] != '"')
                return list_body_bad(e, what, i);
            size_t end = value_end(body, len, i);
            _cleanup_json_ json_t *key =
                end > i ? json_loadb(body + i, end - i, JSON_DECODE_ANY, &je) : NULL;
            if (!json_is_string(key) || strlen(json_string_value(key)) != json_string_length(key))
                return list_body_bad(e, what, i);
            i = skip_ws(body, len, end);
            if (i >= len || body[i] != ':')
                return list_body_bad(e, what, i);
            i = skip_ws(body, len, i + 1);
            const char *k = json_string_value(key);
            if (strcmp(k, "items") == 0) {
                if (items || i >= len || body[i] != '[')
                    return list_body_bad(e, what, i);
                items = true;
                i = skip_ws(body, len, i + 1);
                if (i < len && body[i] == ']')
                    i++;
                else {
                    for (;;) {
                        end = value_end(body, len, i);
                        if (end == i)
                            return list_body_bad(e, what, i);
                        int r = fn(body + i, end - i, userdata, e);
                        if (r < 0)
                            return r;
                        i = skip_ws(body, len, end);
                        if (i < len && body[i] == ',') {
                            i = skip_ws(body, len, i + 1);
                            continue;
                        }
                        if (i < len && body[i] == ']') {
                            i++;
                            break;
                        }
                        return list_body_bad(e, what, i);
                    }
                }
            } else {
                end = value_end(body, len, i);
                if (end == i)
                    return list_body_bad(e, what, i);
                size_t cost = kube_json_cost(body + i, end - i);
                if (cost > max_decoded)
                    return kube_decoded_err(e, what, "the response", cost, max_decoded,
                                            "kube_options.max_decoded");
                json_t *v = json_loadb(body + i, end - i, JSON_DECODE_ANY, &je);
                if (!v)
                    return list_body_bad(e, what, i + (size_t)(je.position > 0 ? je.position : 0));
                json_object_set_new(rest, k, v);
                i = end;
            }
            i = skip_ws(body, len, i);
            if (i < len && body[i] == ',') {
                i = skip_ws(body, len, i + 1);
                continue;
            }
            if (i < len && body[i] == '}') {
                i++;
                break;
            }
            return list_body_bad(e, what, i);
        }
    }
    if (skip_ws(body, len, i) != len)
        return list_body_bad(e, what, i);
    if (!items)
        return err_set(e, -EBADMSG, "%s: the answer has no \"items\" list", what);
    if (ret_rest)
        *ret_rest = steal_ptr(&rest);
    return 0;
}

/* ---- watch stream ------------------------------------------------------------------------- */

const char *kube_watch_type_name(enum kube_watch_type t)
{
    switch (t) {
    case KUBE_WATCH_ADDED:
        return "ADDED";
    case KUBE_WATCH_MODIFIED:
        return "MODIFIED";
    case KUBE_WATCH_DELETED:
        return "DELETED";
    case KUBE_WATCH_BOOKMARK:
        return "BOOKMARK";
    case KUBE_WATCH_ERROR:
        return "ERROR";
    }
    return "?";
}

int kube_watch_event_parse(const char *line, size_t n, size_t max_decoded,
                           enum kube_watch_type *ret_type, json_t **ret_obj, struct err *e)
{
    if (max_decoded != SIZE_MAX) {
        size_t cost = kube_json_cost(line, n);
        if (cost > max_decoded)
            return kube_decoded_err(e, "watch event", "the event", cost, max_decoded,
                                    "kube_options.max_decoded");
    }
    json_error_t je;
    json_t *ev = json_loadb(line, n, 0, &je);
    if (!ev)
        return err_set(e, -EBADMSG, "watch event: malformed JSON: %s (at byte %d)", je.text,
                       je.position);
    const char *t = json_string_value(json_object_get(ev, "type"));
    json_t *obj = json_object_get(ev, "object");
    static const char *const names[] = {"ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"};
    int type = -1;
    for (size_t i = 0; t && i < ARRAY_SIZE(names); i++)
        if (strcmp(t, names[i]) == 0)
            type = (int)i;
    if (type < 0 || !json_is_object(obj)) {
        char tn[40];
        sanitize(tn, sizeof(tn), t ? t : "", t ? strlen(t) : 0);
        json_decref(ev);
        if (type < 0)
            return err_set(e, -EBADMSG, "watch event: unknown or missing type \"%s\"", tn);
        return err_set(e, -EBADMSG, "watch event %s: \"object\" is not an object", tn);
    }
    *ret_type = (enum kube_watch_type)type;
    *ret_obj = json_incref(obj);
    json_decref(ev);
    return 0;
}

void kube_watch_parser_init(struct kube_watch_parser *p, size_t max_line, size_t max_decoded,
                            kube_watch_fn fn, void *userdata)
{
    memset(p, 0, sizeof(*p));
    sbuf_init(&p->line, max_line);
    p->max_decoded = max_decoded;
    p->fn = fn;
    p->userdata = userdata;
}

void kube_watch_parser_free(struct kube_watch_parser *p)
{
    sbuf_free(&p->line);
    if (p->mem)
        kube_budget_put(p->mem, p->line_held);
    p->line_held = 0;
}

int kube_in_flight_err(struct err *e, const char *what, struct kube_budget *b, size_t n)
{
    char need[32], lim[32];
    kube_mib(need, sizeof(need), n);
    kube_mib(lim, sizeof(lim), b->limit);
    return err_set(e, -ENOBUFS,
                   "%s: another %s of answers would pass the client's %s limit on what its calls "
                   "hold at once (kube_options.max_in_flight)",
                   what, need, lim);
}

static int parser_line(struct kube_watch_parser *p, const char *line, size_t n, struct err *e)
{
    /* blank lines (keep-alives) are skipped */
    size_t i = 0;
    while (i < n && (line[i] == ' ' || line[i] == '\r' || line[i] == '\t'))
        i++;
    if (i == n)
        return 0;
    /* an object the informer keeps nothing of, its version noted: not priced, not decoded */
    if (kube_prefilter_pass(p->pf, line, n, true)) {
        p->skipped++;
        return 0;
    }
    enum kube_watch_type t;
    json_t *obj = NULL;
    /* priced once: the limit, then the in-flight budget while the event is decoded and handled */
    size_t cost = kube_json_cost(line, n);
    if (cost > p->max_decoded)
        return kube_decoded_err(e, "watch event", "the event", cost, p->max_decoded,
                                "kube_options.max_decoded");
    if (p->mem && kube_budget_take(p->mem, cost) < 0)
        return kube_in_flight_err(e, "watch event", p->mem, cost);
    /* the object's unread members left out before it is decoded (kube_options.drop_fields) */
    _cleanup_free_ char *skim = p->drop ? xmalloc(n) : NULL;
    size_t m = skim ? kube_json_drop(line, n, p->drop, "object", skim) : SIZE_MAX;
    int r = m != SIZE_MAX ? kube_watch_event_parse(skim, m, SIZE_MAX, &t, &obj, e)
                          : kube_watch_event_parse(line, n, SIZE_MAX, &t, &obj, e);
    if (r < 0) {
        if (p->mem)
            kube_budget_put(p->mem, cost);
        return r;
    }
    p->events++;
    r = p->fn(t, obj, p->userdata);
    json_decref(obj);
    if (p->mem)
        kube_budget_put(p->mem, cost);
    if (r != 0) {
        p->stopped = r;
        return r < 0 ? r : 1;
    }
    return 0;
}

int kube_watch_parser_feed(struct kube_watch_parser *p, const char *data, size_t n, struct err *e)
{
    if (p->stopped)
        return p->stopped < 0 ? p->stopped : 1;
    while (n > 0) {
        const char *nl = memchr(data, '\n', n);
        size_t take = nl ? (size_t)(nl - data) : n;
        if (p->line.len == 0 && nl && take <= p->line.limit) {
            /* a whole line in this chunk: no copy (the limit holds as for a split line) */
            int r = parser_line(p, data, take, e);
            if (r != 0)
                return r;
        } else {
            size_t cap = sbuf_cap_after(&p->line, take);
            if (p->mem && cap > p->line_held) {
                if (kube_budget_take(p->mem, cap - p->line_held) < 0)
                    return kube_in_flight_err(e, "watch event", p->mem, cap - p->line_held);
                p->line_held = cap;
            }
            if (sbuf_append(&p->line, data, take) < 0)
                return err_set(e, -EFBIG, "watch event: longer than the %zu-byte limit",
                               p->line.limit);
            if (nl) {
                int r = parser_line(p, p->line.data, p->line.len, e);
                sbuf_reset(&p->line);
                if (r != 0)
                    return r;
            }
        }
        if (!nl)
            break;
        data += take + 1;
        n -= take + 1;
    }
    return 0;
}

int kube_watch_parser_finish(struct kube_watch_parser *p, struct err *e)
{
    if (p->stopped || p->line.len == 0)
        return 0;
    int r = parser_line(p, p->line.data, p->line.len, e);
    sbuf_reset(&p->line);
    if (r < 0)
        return err_prefix(e, "truncated watch stream");
    return 0;
}

/* ---- memory budgets ----------------------------------------------------------------------- */

void kube_budget_init(struct kube_budget *b, size_t limit)
{
    *b = (struct kube_budget){.limit = limit};
    pthread_mutex_init(&b->lock, NULL);
}

void kube_budget_destroy(struct kube_budget *b)
{
    assert(b->used == 0); /* every take was put back */
    pthread_mutex_destroy(&b->lock);
}

int kube_budget_take(struct kube_budget *b, size_t n)
{
    pthread_mutex_lock(&b->lock);
    bool ok = n <= b->limit && b->used <= b->limit - n;
    if (ok) {
        b->used += n;
        if (b->used > b->peak)
            b->peak = b->used;
    }
    pthread_mutex_unlock(&b->lock);
    return ok ? 0 : -ENOBUFS;
}

void kube_budget_put(struct kube_budget *b, size_t n)
{
    pthread_mutex_lock(&b->lock);
    assert(n <= b->used);
    b->used -= n <= b->used ? n : b->used;
    pthread_mutex_unlock(&b->lock);
}

size_t kube_budget_used(struct kube_budget *b)
{
    pthread_mutex_lock(&b->lock);
    size_t n = b->used;
    pthread_mutex_unlock(&b->lock);
    return n;
}

/* ---- rate limiting and backoff ------------------------------------------------------------ */

void kube_ratelimit_init(struct kube_ratelimit *rl, double qps, unsigned burst, uint64_t now_us)
{
    rl->qps = qps > 0 ? qps : 20;
    rl->burst = burst > 0 ? burst : 1;
    rl->tokens = rl->burst;
    rl->last_us = now_us;
}

uint64_t kube_ratelimit_reserve(struct kube_ratelimit *rl, uint64_t now_us)
{
    if (now_us > rl->last_us) {
        rl->tokens += (double)(now_us - rl->last_us) * rl->qps / 1e6;
        if (rl->tokens > rl->burst)
            rl->tokens = rl->burst;
        rl->last_us = now_us;
    }
    rl->tokens -= 1;
    if (rl->tokens >= 0)
        return 0;
    return (uint64_t)ceil(-rl->tokens * 1e6 / rl->qps);
}

uint64_t kube_backoff_ms(unsigned attempt, uint64_t base_ms, uint64_t max_ms, uint64_t rnd)
{
    if (base_ms == 0)
        base_ms = 1;
    if (max_ms < base_ms)
        max_ms = base_ms;
    uint64_t d = base_ms;
    for (unsigned i = 0; i < attempt && d < max_ms; i++)
        d *= 2;
    if (d > max_ms)
        d = max_ms;
    uint64_t half = d / 2;
    return half + rnd % (d - half + 1);
}

static int month_index(const char *m)
{
    static const char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
    if (strlen(m) != 3)
        return -1;
    for (int i = 0; i < 12; i++)
        if (strncmp(months + 3 * i, m, 3) == 0)
            return i;
    return -1;
}

/* An HTTP-date in any of the three forms RFC 9110 5.6.7 says a recipient must accept:
 * IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT"), RFC 850 ("Sunday, 06-Nov-94 08:49:37 GMT") and
 * asctime ("Sun Nov  6 08:49:37 1994"). Locale-independent; -EINVAL otherwise. */
static int http_date_parse(const char *s, time_t *ret)
{
    const char *p = s;
    while (isalpha((unsigned char)*p))
        p++; /* the day name */
    if (*p == ',')
        p++;
    while (*p == ' ')
        p++;
    char mon[4] = "";
    int d = 0, y = 0, hh = 0, mm = 0, ss = 0, n = 0;
    if (sscanf(p, "%2d %3[A-Za-z] %4d %2d:%2d:%2d GMT%n", &d, mon, &y, &hh, &mm, &ss, &n) == 6 &&
        n > 0 && p[n] == '\0') {
        /* IMF-fixdate */
    } else if ((n = 0, sscanf(p, "%2d-%3[A-Za-z]-%2d %2d:%2d:%2d GMT%n", &d, mon, &y, &hh, &mm, &ss,
                              &n) == 6) &&
               n > 0 && p[n] == '\0') {
        y += y < 70 ? 2000 : 1900; /* RFC 850's two-digit year */
    } else if ((n = 0, sscanf(p, "%3[A-Za-z] %2d %2d:%2d:%2d %4d%n", mon, &d, &hh, &mm, &ss, &y,
                              &n) == 6) &&
               n > 0 && p[n] == '\0') {
        /* asctime */
    } else {
        return -EINVAL;
    }
    int m = month_index(mon);
    if (m < 0 || d < 1 || d > 31 || hh > 23 || mm > 59 || ss > 60 || y < 1970 || hh < 0 || mm < 0 ||
        ss < 0)
        return -EINVAL;
    struct tm tm = {
        .tm_year = y - 1900, .tm_mon = m, .tm_mday = d, .tm_hour = hh, .tm_min = mm, .tm_sec = ss};
    time_t t = timegm(&tm);
    if (t == (time_t)-1)
        return -EINVAL;
    *ret = t;
    return 0;
}

int kube_parse_retry_after(const char *v, uint64_t now_unix_ms, uint64_t *ret_ms)
{
    if (!v)
        return -EINVAL;
    while (*v == ' ')
        v++;
    char buf[64];
    if (strlcpy_s(buf, v, sizeof(buf)) >= sizeof(buf))
        return -EINVAL; /* a cut value could parse as a different delay */
    size_t n = strlen(buf);
    while (n > 0 && (buf[n - 1] == ' ' || buf[n - 1] == '\r' || buf[n - 1] == '\n'))
        buf[--n] = '\0';
    uint64_t s;
    if (n > 0 && buf[0] >= '0' && buf[0] <= '9') {
        if (parse_u64(buf, &s) < 0 || s > 86400)
            return -EINVAL;
        *ret_ms = s * 1000;
        return 0;
    }
    time_t t;
    if (http_date_parse(buf, &t) < 0)
        return -EINVAL;
    uint64_t at = (uint64_t)t * 1000;
    *ret_ms = at > now_unix_ms ? at - now_unix_ms : 0;
    return 0;
}

uint64_t kube_random(void)
{
    uint64_t v;
    if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != sizeof(v))
        v = now_us_mono() * 6364136223846793005ull + 1442695040888963407ull;
    return v;
}

/* ---- leases ------------------------------------------------------------------------------- */

enum kube_lease_action kube_lease_decide(json_t *lease, const char *identity, bool expired)
{
    json_t *spec = json_object_get(lease, "spec");
    const char *holder = json_string_value(json_object_get(spec, "holderIdentity"));
    if (!holder || !holder[0])
        return KUBE_LEASE_ACQUIRE;
    if (strcmp(holder, identity) == 0)
        return KUBE_LEASE_RENEW;
    return expired ? KUBE_LEASE_ACQUIRE : KUBE_LEASE_WAIT;
}
