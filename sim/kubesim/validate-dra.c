/* SPDX-License-Identifier: Apache-2.0 */
/* resource.k8s.io/v1 (Dynamic Resource Allocation) as the API server's strategies treat it: the
 * decoder's defaults, the validation of DeviceClass, ResourceClaim, ResourceClaimTemplate and
 * ResourceSlice (and of a pod's resourceClaims) with the API server's field paths and messages,
 * what an update may not change, and the rules of a claim's status. Findings are Status causes. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "ks-cel.h"
#include "ks-objects.h"

/* resource.k8s.io/v1 limits */
#define DEVICE_REQUESTS_MAX    32
#define DEVICE_CONSTRAINTS_MAX 32
#define DEVICE_CONFIG_MAX      32
#define DEVICE_SELECTORS_MAX   32
#define FIRST_AVAILABLE_MAX    8
#define SLICE_DEVICES_MAX      128
#define SLICE_DEVICES_ADV_MAX  64 /* with counters or taints */
#define ATTRS_AND_CAPS_MAX     32
#define ATTR_VALUE_MAX         64
#define COUNTER_SETS_MAX       8
#define COUNTERS_PER_SET_MAX   32
#define CONSUMPTIONS_MAX       2
#define DRIVER_NAME_MAX        63
#define DEVICE_ID_MAX          32
#define POOL_NAME_MAX          253
#define OPAQUE_PARAMS_MAX      (10 * 1024)
#define RESERVED_FOR_MAX       256
#define ALLOCATION_RESULTS_MAX 32

static const char msg_c_ident[] =
    "a valid C identifier must start with alphabetic character or '_', followed by a string of "
    "alphanumeric characters or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName', regex used for "
    "validation is '[A-Za-z_][A-Za-z0-9_]*')";
static const char msg_request_ref[] =
    "must be the name of a request in the claim or the name of a request and a subrequest "
    "separated by '/'";

/* ---- messages, as apimachinery's field errors print them ------------------------------------ */

/* A Go %q rendering of s (JSON's escaping, which agrees for what names hold). */
static char *go_quote(const char *s)
{
    json_t *j = json_string(s ? s : "");
    char *q = j ? json_dumps(j, JSON_ENCODE_ANY) : NULL;
    json_decref(j);
    return q ? q : xstrdup("\"\"");
}

static void required(json_t *causes, const char *path, const char *detail)
{
    if (detail && detail[0])
        ks_add_cause(causes, "FieldValueRequired", path, "Required value: %s", detail);
    else
        ks_add_cause(causes, "FieldValueRequired", path, "Required value");
}

static void invalid_str(json_t *causes, const char *path, const char *value, const char *detail)
{
    _cleanup_free_ char *q = go_quote(value);
    ks_add_cause(causes, "FieldValueInvalid", path, "Invalid value: %s: %s", q, detail);
}

static void invalid_int(json_t *causes, const char *path, int64_t value, const char *detail)
{
    ks_add_cause(causes, "FieldValueInvalid", path, "Invalid value: %" PRId64 ": %s", value,
                 detail);
}

static void duplicate(json_t *causes, const char *path, const char *value)
{
    _cleanup_free_ char *q = go_quote(value);
    ks_add_cause(causes, "FieldValueDuplicate", path, "Duplicate value: %s", q);
}

static void too_many(json_t *causes, const char *path, size_t n, size_t max)
{
    ks_add_cause(causes, "FieldValueTooMany", path, "Too many: %zu: must have at most %zu items", n,
                 max);
}

static void too_long(json_t *causes, const char *path, size_t max)
{
    ks_add_cause(causes, "FieldValueTooLong", path, "Too long: may not be more than %zu bytes",
                 max);
}

/* ---- names ----------------------------------------------------------------------------------- */

static bool label_chars(const char *s)
{
    size_t n = strlen(s);
    if (!n)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (!alnum && !(c == '-' && i > 0 && i + 1 < n))
            return false;
    }
    return true;
}

/* corevalidation.ValidateDNS1123Label */
static void dns_label(json_t *causes, const char *path, const char *v)
{
    v = v ? v : "";
    if (strlen(v) > 63)
        invalid_str(causes, path, v, "must be no more than 63 characters");
    if (!label_chars(v))
        invalid_str(causes, path, v, ks_msg_dns_label);
}

/* corevalidation.ValidateDNS1123Subdomain */
static void dns_subdomain(json_t *causes, const char *path, const char *v)
{
    v = v ? v : "";
    if (strlen(v) > 253)
        invalid_str(causes, path, v, "must be no more than 253 characters");
    if (!kobj_valid_dns_subdomain(v) || strlen(v) > 253) {
        /* the regex part, checked apart from the length */
        bool ok = v[0] != '\0';
        const char *p = v;
        while (ok && *p) {
            const char *dot = strchr(p, '.');
            size_t l = dot ? (size_t)(dot - p) : strlen(p);
            char part[256];
            snprintf(part, sizeof(part), "%.*s", (int)(l > 255 ? 255 : l), p);
            ok = l > 0 && label_chars(part);
            p = dot ? dot + 1 : p + l;
            if (dot && !*p)
                ok = false;
        }
        if (!ok)
            invalid_str(causes, path, v, ks_msg_dns_subdomain);
    }
}

/* The validation of a driver name (a CSI driver's rules: a DNS subdomain, compared in lower case,
 * at most 63 bytes). */
static void driver_name(json_t *causes, const char *path, json_t *jv)
{
    const char *v = json_string_value(jv);
    if (!v || !v[0])
        required(causes, path, NULL);
    v = v ? v : "";
    if (strlen(v) > DRIVER_NAME_MAX)
        too_long(causes, path, DRIVER_NAME_MAX);
    _cleanup_free_ char *lower = ks_lower_dup(v);
    json_t *tmp = json_array();
    dns_subdomain(tmp, path, lower);
    if (json_array_size(tmp))
        invalid_str(causes, path, v, ks_msg_dns_subdomain);
    json_decref(tmp);
}

static bool c_ident(const char *s)
{
    if (!s[0] || !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z') || s[0] == '_'))
        return false;
    for (const char *p = s; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '_'))
            return false;
    return true;
}

static void c_identifier(json_t *causes, const char *path, const char *id)
{
    if (strlen(id) > DEVICE_ID_MAX)
        too_long(causes, path, DEVICE_ID_MAX);
    if (!c_ident(id))
        invalid_str(causes, path, id, msg_c_ident);
}

/* A QualifiedName: an attribute or capacity name, with or without a domain. */
static void qualified_name(json_t *causes, const char *path, const char *name)
{
    const char *slash = strchr(name, '/');
    if (!slash) {
        c_identifier(causes, path, name);
        return;
    }
    if (strchr(slash + 1, '/')) {
        invalid_str(causes, path, name, "must not contain more than one slash");
        return;
    }
    _cleanup_free_ char *domain = xstrndup(name, (size_t)(slash - name));
    if (!domain[0])
        invalid_str(causes, path, "", "the domain must not be empty");
    else {
        json_t *d = json_string(domain);
        driver_name(causes, path, d);
        json_decref(d);
    }
    if (!slash[1])
        invalid_str(causes, path, "", "the name must not be empty");
    else
        c_identifier(causes, path, slash + 1);
}

static void fully_qualified_name(json_t *causes, const char *path, const char *name)
{
    qualified_name(causes, path, name);
    if (!strchr(name, '/'))
        invalid_str(causes, path, name,
                    "a fully qualified name must be a domain and a name separated by a slash");
}

/* ---- claims ---------------------------------------------------------------------------------- */

/* The names a claim's requests and subrequests answer to: "req" and "req/sub". */
static json_t *request_names(json_t *devices)
{
    json_t *names = json_object();
    size_t i;
    json_t *r;
    json_array_foreach (json_object_get(devices, "requests"), i, r) {
        const char *n = kobj_str(r, "name");
        if (!n)
            continue;
        json_t *subs = json_object();
        size_t k;
        json_t *s;
        json_array_foreach (json_object_get(r, "firstAvailable"), k, s)
            if (kobj_str(s, "name"))
                json_object_set_new(subs, kobj_str(s, "name"), json_true());
        json_object_set_new(names, n, subs);
    }
    return names;
}

static bool request_ref_known(json_t *names, const char *ref)
{
    const char *slash = strchr(ref, '/');
    if (!slash)
        return json_object_get(names, ref) != NULL;
    if (strchr(slash + 1, '/'))
        return false;
    _cleanup_free_ char *parent = xstrndup(ref, (size_t)(slash - ref));
    json_t *subs = json_object_get(names, parent);
    return subs && json_object_get(subs, slash + 1);
}

static void request_refs(json_t *causes, const char *path, json_t *refs, json_t *names)
{
    size_t n = json_array_size(refs);
    if (n > DEVICE_REQUESTS_MAX) {
        too_many(causes, path, n, DEVICE_REQUESTS_MAX);
        return;
    }
    json_t *seen = json_object();
    size_t i;
    json_t *r;
    json_array_foreach (refs, i, r) {
        _cleanup_free_ char *p = xasprintf("%s[%zu]", path, i);
        const char *ref = json_string_value(r) ? json_string_value(r) : "";
        const char *slash = strchr(ref, '/');
        if (slash && strchr(slash + 1, '/')) {
            invalid_str(causes, p, ref, msg_request_ref);
            continue;
        }
        if (slash) {
            _cleanup_free_ char *a = xstrndup(ref, (size_t)(slash - ref));
            dns_label(causes, p, a);
            dns_label(causes, p, slash + 1);
        } else {
            dns_label(causes, p, ref);
        }
        if (!request_ref_known(names, ref))
            invalid_str(causes, p, ref, msg_request_ref);
        if (json_object_get(seen, ref))
            duplicate(causes, p, ref);
        json_object_set_new(seen, ref, json_true());
    }
    json_decref(seen);
}

static void cel_expression(json_t *causes, const char *path, json_t *expr)
{
    const char *e = json_string_value(expr);
    if (!e) {
        required(causes, path, NULL);
        return;
    }
    size_t len = json_string_length(expr);
    if (len > KS_CEL_MAX_LEN) {
        too_long(causes, path, KS_CEL_MAX_LEN);
        return;
    }
    struct ks_cel *c = NULL;
    char *err = NULL;
    if (ks_cel_compile(e, len, &c, &err) < 0) {
        invalid_str(causes, path, e, err);
        free(err);
        return;
    }
    ks_cel_free(c);
}

static void selectors(json_t *causes, const char *path, json_t *sels)
{
    size_t n = json_array_size(sels);
    if (n > DEVICE_SELECTORS_MAX) {
        too_many(causes, path, n, DEVICE_SELECTORS_MAX);
        return;
    }
    size_t i;
    json_t *s;
    json_array_foreach (sels, i, s) {
        json_t *cel = json_object_get(s, "cel");
        if (!json_is_object(cel)) {
            _cleanup_free_ char *p = xasprintf("%s[%zu].cel", path, i);
            required(causes, p, NULL);
            continue;
        }
        _cleanup_free_ char *p = xasprintf("%s[%zu].cel.expression", path, i);
        cel_expression(causes, p, json_object_get(cel, "expression"));
    }
}

static void device_class_name(json_t *causes, const char *path, json_t *v)
{
    const char *s = json_string_value(v);
    if (!s || !s[0])
        required(causes, path, NULL);
    else
        dns_subdomain(causes, path, s);
}

static void allocation_mode(json_t *causes, const char *path, json_t *req)
{
    const char *mode = kobj_str(req, "allocationMode");
    json_t *count = json_object_get(req, "count");
    int64_t n = json_is_integer(count) ? json_integer_value(count) : 0;
    _cleanup_free_ char *mp = xasprintf("%s.allocationMode", path);
    _cleanup_free_ char *cp = xasprintf("%s.count", path);
    if (streq_ptr(mode, "All")) {
        if (n != 0)
            invalid_int(causes, cp, n, "must not be specified when allocationMode is 'All'");
    } else if (streq_ptr(mode, "ExactCount")) {
        if (n <= 0)
            invalid_int(causes, cp, n, "must be greater than zero");
    } else {
        _cleanup_free_ char *q = go_quote(mode ? mode : "");
        ks_add_cause(causes, "FieldValueNotSupported", mp,
                     "Unsupported value: %s: supported values: \"All\", \"ExactCount\"", q);
    }
}

/* An ExactDeviceRequest or a DeviceSubRequest (the fields they share). */
static void exact_request(json_t *causes, const char *path, json_t *req)
{
    _cleanup_free_ char *dc = xasprintf("%s.deviceClassName", path);
    device_class_name(causes, dc, json_object_get(req, "deviceClassName"));
    _cleanup_free_ char *sp = xasprintf("%s.selectors", path);
    selectors(causes, sp, json_object_get(req, "selectors"));
    allocation_mode(causes, path, req);
}

static void device_request(json_t *causes, const char *path, json_t *req)
{
    _cleanup_free_ char *np = xasprintf("%s.name", path);
    dns_label(causes, np, kobj_str(req, "name"));
    json_t *fa = json_object_get(req, "firstAvailable");
    json_t *ex = json_object_get(req, "exactly");
    bool has_fa = json_array_size(fa) > 0, has_ex = json_is_object(ex);
    if (!has_fa && !has_ex) {
        required(causes, path, "exactly one of `exactly` or `firstAvailable` is required");
        return;
    }
    if (has_fa && has_ex) {
        ks_add_cause(causes, "FieldValueInvalid", path,
                     "Invalid value: \"null\": exactly one of `exactly` or `firstAvailable` is "
                     "required, but multiple fields are set");
        return;
    }
    if (has_ex) {
        _cleanup_free_ char *ep = xasprintf("%s.exactly", path);
        exact_request(causes, ep, ex);
        return;
    }
    _cleanup_free_ char *fp = xasprintf("%s.firstAvailable", path);
    size_t n = json_array_size(fa);
    if (n > FIRST_AVAILABLE_MAX) {
        too_many(causes, fp, n, FIRST_AVAILABLE_MAX);
        return;
    }
    json_t *seen = json_object();
    size_t i;
    json_t *s;
    json_array_foreach (fa, i, s) {
        _cleanup_free_ char *sp = xasprintf("%s[%zu]", fp, i);
        _cleanup_free_ char *snp = xasprintf("%s.name", sp);
        const char *sn = kobj_str(s, "name");
        dns_label(causes, snp, sn);
        exact_request(causes, sp, s);
        if (sn && json_object_get(seen, sn))
            duplicate(causes, sp, sn);
        if (sn)
            json_object_set_new(seen, sn, json_true());
    }
    json_decref(seen);
}

static void opaque_config(json_t *causes, const char *path, json_t *cfg)
{
    json_t *op = json_object_get(cfg, "opaque");
    _cleanup_free_ char *op_path = xasprintf("%s.opaque", path);
    if (!json_is_object(op)) {
        required(causes, op_path, NULL);
        return;
    }
    _cleanup_free_ char *dp = xasprintf("%s.driver", op_path);
    driver_name(causes, dp, json_object_get(op, "driver"));
    _cleanup_free_ char *pp = xasprintf("%s.parameters", op_path);
    json_t *params = json_object_get(op, "parameters");
    if (!params || json_is_null(params)) {
        required(causes, pp, NULL);
        return;
    }
    _cleanup_free_ char *raw = json_dumps(params, JSON_COMPACT | JSON_ENCODE_ANY);
    if (raw && strlen(raw) > OPAQUE_PARAMS_MAX)
        too_long(causes, pp, OPAQUE_PARAMS_MAX);
    else if (!json_is_object(params))
        invalid_str(causes, pp, raw ? raw : "", "parameters must be a valid JSON object");
}

static void device_claim(json_t *causes, const char *path, json_t *devices)
{
    json_t *names = request_names(devices);
    json_t *reqs = json_object_get(devices, "requests");
    _cleanup_free_ char *rp = xasprintf("%s.requests", path);
    size_t n = json_array_size(reqs);
    if (n > DEVICE_REQUESTS_MAX) {
        too_many(causes, rp, n, DEVICE_REQUESTS_MAX);
    } else {
        json_t *seen = json_object();
        size_t i;
        json_t *r;
        json_array_foreach (reqs, i, r) {
            _cleanup_free_ char *p = xasprintf("%s[%zu]", rp, i);
            device_request(causes, p, r);
            const char *nm = kobj_str(r, "name");
            if (nm && json_object_get(seen, nm))
                duplicate(causes, p, nm);
            if (nm)
                json_object_set_new(seen, nm, json_true());
        }
        json_decref(seen);
    }
    json_t *cons = json_object_get(devices, "constraints");
    _cleanup_free_ char *cp = xasprintf("%s.constraints", path);
    if (json_array_size(cons) > DEVICE_CONSTRAINTS_MAX) {
        too_many(causes, cp, json_array_size(cons), DEVICE_CONSTRAINTS_MAX);
    } else {
        size_t i;
        json_t *c;
        json_array_foreach (cons, i, c) {
            _cleanup_free_ char *p = xasprintf("%s[%zu]", cp, i);
            _cleanup_free_ char *rq = xasprintf("%s.requests", p);
            request_refs(causes, rq, json_object_get(c, "requests"), names);
            _cleanup_free_ char *mp = xasprintf("%s.matchAttribute", p);
            const char *ma = kobj_str(c, "matchAttribute");
            if (!ma)
                required(causes, mp, NULL);
            else
                fully_qualified_name(causes, mp, ma);
        }
    }
    json_t *cfgs = json_object_get(devices, "config");
    _cleanup_free_ char *fp = xasprintf("%s.config", path);
    if (json_array_size(cfgs) > DEVICE_CONFIG_MAX) {
        too_many(causes, fp, json_array_size(cfgs), DEVICE_CONFIG_MAX);
    } else {
        size_t i;
        json_t *c;
        json_array_foreach (cfgs, i, c) {
            _cleanup_free_ char *p = xasprintf("%s[%zu]", fp, i);
            _cleanup_free_ char *rq = xasprintf("%s.requests", p);
            request_refs(causes, rq, json_object_get(c, "requests"), names);
            opaque_config(causes, p, c);
        }
    }
    json_decref(names);
}

/* ---- slices ---------------------------------------------------------------------------------- */

static const char semver_re_msg[] = "must be a string compatible with semver.org spec 2.0.0";

/* semver.org 2.0.0: MAJOR.MINOR.PATCH, no leading zeroes, optional -prerelease and +build. */
static bool semver_valid(const char *s)
{
    const char *p = s;
    for (int k = 0; k < 3; k++) {
        const char *b = p;
        while (*p >= '0' && *p <= '9')
            p++;
        if (p == b || (p - b > 1 && *b == '0'))
            return false;
        if (k < 2 && *p++ != '.')
            return false;
    }
    for (int part = 0; part < 2 && *p; part++) {
        char lead = part == 0 ? '-' : '+';
        if (*p != lead) {
            if (part == 0 && *p == '+')
                continue;
            return false;
        }
        p++;
        for (;;) {
            const char *b = p;
            bool digits = true;
            while ((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') ||
                   (*p >= 'A' && *p <= 'Z') || *p == '-') {
                digits &= *p >= '0' && *p <= '9';
                p++;
            }
            if (p == b || (part == 0 && digits && p - b > 1 && *b == '0'))
                return false;
            if (*p != '.')
                break;
            p++;
        }
    }
    return *p == '\0';
}

static void attribute(json_t *causes, const char *path, json_t *a)
{
    int fields = 0;
    json_t *v;
    if ((v = json_object_get(a, "bool")) && !json_is_null(v))
        fields++;
    if ((v = json_object_get(a, "int")) && !json_is_null(v))
        fields++;
    if ((v = json_object_get(a, "string")) && !json_is_null(v)) {
        fields++;
        if (json_string_length(v) > ATTR_VALUE_MAX) {
            _cleanup_free_ char *p = xasprintf("%s.string", path);
            too_long(causes, p, ATTR_VALUE_MAX);
        }
    }
    if ((v = json_object_get(a, "version")) && !json_is_null(v)) {
        fields++;
        _cleanup_free_ char *p = xasprintf("%s.version", path);
        const char *s = json_string_value(v) ? json_string_value(v) : "";
        if (!semver_valid(s))
            invalid_str(causes, p, s, semver_re_msg);
        if (strlen(s) > ATTR_VALUE_MAX)
            too_long(causes, p, ATTR_VALUE_MAX);
    }
    if (fields == 0)
        invalid_str(causes, path, "", "exactly one value must be specified");
    else if (fields > 1) {
        _cleanup_free_ char *raw = json_dumps(a, JSON_COMPACT | JSON_SORT_KEYS);
        ks_add_cause(causes, "FieldValueInvalid", path,
                     "Invalid value: %s: exactly one value must be specified", raw ? raw : "{}");
    }
}

/* A map of counters: names are DNS labels, values {value: quantity}. */
static void counters(json_t *causes, const char *path, json_t *m)
{
    if (json_object_size(m) == 0) {
        required(causes, path, NULL);
        return;
    }
    if (json_object_size(m) > COUNTERS_PER_SET_MAX)
        too_many(causes, path, json_object_size(m), COUNTERS_PER_SET_MAX);
    const char *k;
    json_t *v;
    json_object_foreach (m, k, v) {
        _cleanup_free_ char *p = xasprintf("%s[%s]", path, k);
        dns_label(causes, p, k);
        int64_t q;
        if (!json_is_object(v) || ks_quantity_milli(json_object_get(v, "value"), &q) < 0) {
            _cleanup_free_ char *vp = xasprintf("%s.value", p);
            required(causes, vp, NULL);
        }
    }
}

static void slice_device(json_t *causes, const char *path, json_t *d, bool per_device)
{
    _cleanup_free_ char *np = xasprintf("%s.name", path);
    dns_label(causes, np, kobj_str(d, "name"));
    json_t *attrs = json_object_get(d, "attributes"), *caps = json_object_get(d, "capacity");
    size_t total = json_object_size(attrs) + json_object_size(caps);
    if (total > ATTRS_AND_CAPS_MAX) {
        char msg[96];
        snprintf(msg, sizeof(msg),
                 "the total number of attributes and capacities must not exceed %d",
                 ATTRS_AND_CAPS_MAX);
        invalid_int(causes, path, (int64_t)total, msg);
    }
    const char *k;
    json_t *v;
    json_object_foreach (attrs, k, v) {
        _cleanup_free_ char *p = xasprintf("%s.attributes[%s]", path, k);
        qualified_name(causes, p, k);
        attribute(causes, p, v);
    }
    json_object_foreach (caps, k, v) {
        _cleanup_free_ char *p = xasprintf("%s.capacity[%s]", path, k);
        qualified_name(causes, p, k);
        if (json_object_get(v, "requestPolicy")) {
            _cleanup_free_ char *rp = xasprintf("%s.requestPolicy", p);
            ks_add_cause(causes, "FieldValueForbidden", rp,
                         "Forbidden: allowMultipleAllocations must be true");
        }
    }
    json_t *cons = json_object_get(d, "consumesCounters");
    _cleanup_free_ char *cp = xasprintf("%s.consumesCounters", path);
    if (json_array_size(cons) > CONSUMPTIONS_MAX) {
        too_many(causes, cp, json_array_size(cons), CONSUMPTIONS_MAX);
    } else {
        json_t *seen = json_object();
        size_t i;
        json_t *c;
        json_array_foreach (cons, i, c) {
            _cleanup_free_ char *p = xasprintf("%s[%zu]", cp, i);
            _cleanup_free_ char *sp = xasprintf("%s.counterSet", p);
            const char *set = kobj_str(c, "counterSet");
            if (!set || !set[0])
                required(causes, sp, NULL);
            else
                dns_label(causes, sp, set);
            _cleanup_free_ char *kp = xasprintf("%s.counters", p);
            counters(causes, kp, json_object_get(c, "counters"));
            if (set && json_object_get(seen, set))
                duplicate(causes, p, set);
            if (set)
                json_object_set_new(seen, set, json_true());
        }
        json_decref(seen);
    }
    bool own = json_object_get(d, "nodeName") || json_object_get(d, "nodeSelector") ||
               json_object_get(d, "allNodes");
    if (!per_device && own)
        ks_add_cause(causes, "FieldValueInvalid", path,
                     "Invalid value: \"null\": `nodeName`, `nodeSelector` and `allNodes` can only "
                     "be set if `perDeviceNodeSelection` is set to true in the ResourceSlice spec");
    if (per_device) {
        int set = !!kobj_str(d, "nodeName") + !!json_object_get(d, "nodeSelector") +
                  json_is_true(json_object_get(d, "allNodes"));
        if (set != 1)
            ks_add_cause(causes, set ? "FieldValueInvalid" : "FieldValueRequired", path,
                         "%s: exactly one of `nodeName`, `nodeSelector`, or `allNodes` is "
                         "required when `perDeviceNodeSelection` is set to true in the "
                         "ResourceSlice spec",
                         set ? "Invalid value: \"null\"" : "Required value");
    }
}

static void slice_spec(json_t *causes, json_t *spec)
{
    driver_name(causes, "spec.driver", json_object_get(spec, "driver"));
    json_t *pool = json_object_get(spec, "pool");
    const char *pname = kobj_str(pool, "name");
    if (!pname || !pname[0]) {
        required(causes, "spec.pool.name", NULL);
    } else {
        if (strlen(pname) > POOL_NAME_MAX)
            too_long(causes, "spec.pool.name", POOL_NAME_MAX);
        const char *p = pname;
        for (;;) {
            const char *sl = strchr(p, '/');
            _cleanup_free_ char *part = sl ? xstrndup(p, (size_t)(sl - p)) : xstrdup(p);
            dns_subdomain(causes, "spec.pool.name", part);
            if (!sl)
                break;
            p = sl + 1;
        }
    }
    json_t *count = json_object_get(pool, "resourceSliceCount");
    int64_t c = json_is_integer(count) ? json_integer_value(count) : 0;
    if (c <= 0)
        invalid_int(causes, "spec.pool.resourceSliceCount", c, "must be greater than zero");
    json_t *gen = json_object_get(pool, "generation");
    if (json_is_integer(gen) && json_integer_value(gen) < 0)
        invalid_int(causes, "spec.pool.generation", json_integer_value(gen),
                    "must be greater than or equal to zero");

    struct sbuf set;
    sbuf_init(&set, 256);
    int n_set = 0;
    json_t *nn = json_object_get(spec, "nodeName");
    if (nn && !json_is_null(nn)) {
        const char *s = json_string_value(nn) ? json_string_value(nn) : "";
        if (s[0]) {
            sbuf_addf(&set, "%s`nodeName`", n_set++ ? ", " : "");
            dns_subdomain(causes, "spec.nodeName", s);
        } else {
            invalid_str(causes, "spec.nodeName", s,
                        "must be either unset or set to a non-empty string");
        }
    }
    json_t *sel = json_object_get(spec, "nodeSelector");
    if (sel && !json_is_null(sel)) {
        sbuf_addf(&set, "%s`nodeSelector`", n_set++ ? ", " : "");
        json_t *terms = json_object_get(sel, "nodeSelectorTerms");
        if (json_array_size(terms) != 1) {
            _cleanup_free_ char *raw =
                json_dumps(terms ? terms : json_null(), JSON_COMPACT | JSON_ENCODE_ANY);
            ks_add_cause(causes, "FieldValueInvalid", "spec.nodeSelector.nodeSelectorTerms",
                         "Invalid value: %s: must have exactly one node selector term",
                         raw ? raw : "null");
        }
    }
    const char *const flags[] = {"allNodes", "perDeviceNodeSelection"};
    for (size_t i = 0; i < ARRAY_SIZE(flags); i++) {
        json_t *f = json_object_get(spec, flags[i]);
        if (!f || json_is_null(f))
            continue;
        if (json_is_true(f)) {
            sbuf_addf(&set, "%s`%s`", n_set++ ? ", " : "", flags[i]);
        } else {
            _cleanup_free_ char *p = xasprintf("spec.%s", flags[i]);
            ks_add_cause(causes, "FieldValueInvalid", p,
                         "Invalid value: false: must be either unset or set to true");
        }
    }
    _cleanup_free_ char *set_text = ks_text_take(&set);
    if (n_set == 0)
        required(causes, "spec",
                 "exactly one of `nodeName`, `nodeSelector`, `allNodes`, "
                 "`perDeviceNodeSelection` is required");
    else if (n_set > 1)
        ks_add_cause(causes, "FieldValueInvalid", "spec",
                     "Invalid value: \"{%s}\": exactly one of `nodeName`, `nodeSelector`, "
                     "`allNodes`, `perDeviceNodeSelection` is required, but multiple fields are "
                     "set",
                     set_text);

    json_t *devs = json_object_get(spec, "devices");
    json_t *shared = json_object_get(spec, "sharedCounters");
    if (shared && !json_is_null(shared) && devs && !json_is_null(devs))
        ks_add_cause(causes, "FieldValueInvalid", "spec",
                     "Invalid value: \"\": only one of `sharedCounters` or `devices` is allowed");
    bool advanced = false;
    size_t i;
    json_t *d;
    json_array_foreach (devs, i, d)
        advanced |= json_array_size(json_object_get(d, "consumesCounters")) > 0 ||
                    json_array_size(json_object_get(d, "taints")) > 0;
    size_t max = advanced ? SLICE_DEVICES_ADV_MAX : SLICE_DEVICES_MAX;
    if (json_array_size(devs) > max) {
        too_many(causes, "spec.devices", json_array_size(devs), max);
    } else {
        bool per_device = json_is_true(json_object_get(spec, "perDeviceNodeSelection"));
        json_t *seen = json_object();
        json_array_foreach (devs, i, d) {
            _cleanup_free_ char *p = xasprintf("spec.devices[%zu]", i);
            slice_device(causes, p, d, per_device);
            const char *nm = kobj_str(d, "name");
            if (nm && json_object_get(seen, nm))
                duplicate(causes, p, nm);
            if (nm)
                json_object_set_new(seen, nm, json_true());
        }
        json_decref(seen);
    }
    if (json_array_size(shared) > COUNTER_SETS_MAX) {
        too_many(causes, "spec.sharedCounters", json_array_size(shared), COUNTER_SETS_MAX);
    } else {
        json_t *seen = json_object();
        json_t *cs;
        json_array_foreach (shared, i, cs) {
            _cleanup_free_ char *p = xasprintf("spec.sharedCounters[%zu]", i);
            _cleanup_free_ char *np = xasprintf("%s.name", p);
            const char *nm = kobj_str(cs, "name");
            if (!nm || !nm[0])
                required(causes, np, NULL);
            else
                dns_label(causes, np, nm);
            _cleanup_free_ char *kp = xasprintf("%s.counters", p);
            counters(causes, kp, json_object_get(cs, "counters"));
            if (nm && json_object_get(seen, nm))
                duplicate(causes, p, nm);
            if (nm)
                json_object_set_new(seen, nm, json_true());
        }
        json_decref(seen);
    }
}

/* ---- classes ------------------------------------------------------------------------------- */

/* v1helper.IsExtendedResourceName */
static bool extended_resource_name(const char *name)
{
    if (!strchr(name, '/') || strstr(name, "kubernetes.io/") || str_has_prefix(name, "requests."))
        return false;
    _cleanup_free_ char *q = xasprintf("requests.%s", name);
    return kobj_valid_qualified_name(q);
}

static void class_spec(json_t *causes, json_t *spec)
{
    selectors(causes, "spec.selectors", json_object_get(spec, "selectors"));
    json_t *cfgs = json_object_get(spec, "config");
    if (json_array_size(cfgs) > DEVICE_CONFIG_MAX) {
        too_many(causes, "spec.config", json_array_size(cfgs), DEVICE_CONFIG_MAX);
    } else {
        size_t i;
        json_t *c;
        json_array_foreach (cfgs, i, c) {
            _cleanup_free_ char *p = xasprintf("spec.config[%zu]", i);
            opaque_config(causes, p, c);
        }
    }
    json_t *ern = json_object_get(spec, "extendedResourceName");
    if (ern && !json_is_null(ern)) {
        const char *s = json_string_value(ern) ? json_string_value(ern) : "";
        if (!extended_resource_name(s))
            invalid_str(causes, "spec.extendedResourceName", s,
                        "must be a valid extended resource name");
    }
}

/* ---- entry points ---------------------------------------------------------------------------- */

static bool is_kind(struct ks_type *t, const char *plural)
{
    return !t->crd && streq(t->group, "resource.k8s.io") && streq(t->plural, plural);
}

bool ks_dra_type(struct ks_type *t)
{
    return !t->crd && streq(t->group, "resource.k8s.io");
}

/* SetDefaults of an ExactDeviceRequest or a DeviceSubRequest. */
static void request_defaults(json_t *r)
{
    if (!json_is_object(r))
        return;
    const char *mode = kobj_str(r, "allocationMode");
    if (!mode || !mode[0]) {
        json_object_set_new(r, "allocationMode", json_string("ExactCount"));
        mode = "ExactCount";
    }
    json_t *count = json_object_get(r, "count");
    if (streq(mode, "ExactCount") &&
        (!count || (json_is_integer(count) && !json_integer_value(count))))
        json_object_set_new(r, "count", json_integer(1));
    size_t i;
    json_t *tol;
    json_array_foreach (json_object_get(r, "tolerations"), i, tol)
        if (json_is_object(tol) && !kobj_str(tol, "operator"))
            json_object_set_new(tol, "operator", json_string("Equal"));
}

static void claim_spec_defaults(json_t *spec)
{
    size_t i;
    json_t *r;
    json_array_foreach (kobj_path(spec, "devices.requests"), i, r) {
        request_defaults(json_object_get(r, "exactly"));
        size_t k;
        json_t *s;
        json_array_foreach (json_object_get(r, "firstAvailable"), k, s)
            request_defaults(s);
    }
}

void ks_dra_defaults(struct ks_type *t, json_t *obj)
{
    if (is_kind(t, "resourceclaims"))
        claim_spec_defaults(json_object_get(obj, "spec"));
    else if (is_kind(t, "resourceclaimtemplates"))
        claim_spec_defaults(kobj_path(obj, "spec.spec"));
}

void ks_dra_validate(struct ks_type *t, json_t *obj, json_t *causes)
{
    if (is_kind(t, "resourceclaims")) {
        device_claim(causes, "spec.devices", kobj_path(obj, "spec.devices"));
    } else if (is_kind(t, "resourceclaimtemplates")) {
        /* the template's metadata: its labels as an object's, at their own path */
        json_t *found = json_array();
        ks_validate_labels(json_object_get(obj, "spec"), found);
        size_t i;
        json_t *c;
        json_array_foreach (found, i, c)
            json_object_set_new(c, "field", json_string("spec.metadata.labels"));
        json_array_extend(causes, found);
        json_decref(found);
        device_claim(causes, "spec.spec.devices", kobj_path(obj, "spec.spec.devices"));
    } else if (is_kind(t, "deviceclasses")) {
        class_spec(causes, json_object_get(obj, "spec"));
    } else if (is_kind(t, "resourceslices")) {
        slice_spec(causes, json_object_get(obj, "spec"));
    }
}

static void immutable(json_t *causes, const char *path, json_t *a, json_t *b)
{
    if (json_equal(a ? a : json_null(), b ? b : json_null()))
        return;
    _cleanup_free_ char *raw = json_dumps(b ? b : json_null(), JSON_COMPACT | JSON_ENCODE_ANY);
    ks_add_cause(causes, "FieldValueInvalid", path, "Invalid value: %s: field is immutable",
                 raw ? raw : "null");
}

void ks_dra_validate_update(struct ks_type *t, json_t *old, json_t *res, json_t *causes)
{
    if (is_kind(t, "resourceclaims") || is_kind(t, "resourceclaimtemplates")) {
        immutable(causes, "spec", json_object_get(old, "spec"), json_object_get(res, "spec"));
    } else if (is_kind(t, "resourceslices")) {
        immutable(causes, "spec.pool.name", kobj_path(old, "spec.pool.name"),
                  kobj_path(res, "spec.pool.name"));
        immutable(causes, "spec.driver", kobj_path(old, "spec.driver"),
                  kobj_path(res, "spec.driver"));
        immutable(causes, "spec.nodeName", kobj_path(old, "spec.nodeName"),
                  kobj_path(res, "spec.nodeName"));
    }
}

/* A claim's /status: reservedFor entries (resource, name, uid, unique by uid, at most 256) need
 * an allocation; an allocation, once set, is not changed; a new one names requests of the claim
 * and valid drivers, pools and devices; a claim being deleted gets no new reservations. */
void ks_dra_validate_status(struct ks_type *t, json_t *old, json_t *res, json_t *causes)
{
    if (!is_kind(t, "resourceclaims"))
        return;
    json_t *rf = kobj_path(res, "status.reservedFor");
    json_t *alloc = kobj_path(res, "status.allocation");
    json_t *old_alloc = kobj_path(old, "status.allocation");
    size_t n = json_array_size(rf);
    if (n > RESERVED_FOR_MAX) {
        too_many(causes, "status.reservedFor", n, RESERVED_FOR_MAX);
    } else {
        json_t *seen = json_object();
        size_t i;
        json_t *r;
        json_array_foreach (rf, i, r) {
            static const char *const req_fields[] = {"resource", "name", "uid"};
            for (size_t k = 0; k < ARRAY_SIZE(req_fields); k++) {
                const char *v = kobj_str(r, req_fields[k]);
                if (!v || !v[0]) {
                    _cleanup_free_ char *p =
                        xasprintf("status.reservedFor[%zu].%s", i, req_fields[k]);
                    required(causes, p, NULL);
                }
            }
            const char *uid = kobj_str(r, "uid");
            if (uid && uid[0] && json_object_get(seen, uid)) {
                _cleanup_free_ char *p = xasprintf("status.reservedFor[%zu]", i);
                duplicate(causes, p, uid);
            }
            if (uid)
                json_object_set_new(seen, uid, json_true());
        }
        json_decref(seen);
    }
    if (n > 0 && !json_is_object(alloc))
        ks_add_cause(causes, "FieldValueForbidden", "status.reservedFor",
                     "Forbidden: may not be specified when `allocated` is not set");
    if (n > 0 && json_is_object(alloc) && kobj_path(res, "metadata.deletionTimestamp")) {
        json_t *before = json_object();
        size_t i;
        json_t *r;
        json_array_foreach (kobj_path(old, "status.reservedFor"), i, r)
            if (kobj_str(r, "uid"))
                json_object_set_new(before, kobj_str(r, "uid"), json_true());
        bool added = false;
        json_array_foreach (rf, i, r)
            added |= !json_object_get(before, kobj_str(r, "uid") ? kobj_str(r, "uid") : "");
        json_decref(before);
        if (added)
            ks_add_cause(causes, "FieldValueForbidden", "status.reservedFor",
                         "Forbidden: new entries may not be added while `deallocationRequested` "
                         "or `deletionTimestamp` are set");
    }
    if (json_is_object(old_alloc) && json_is_object(alloc)) {
        immutable(causes, "status.allocation", old_alloc, alloc);
        return;
    }
    if (!json_is_object(alloc))
        return;
    json_t *names = request_names(kobj_path(res, "spec.devices"));
    json_t *results = kobj_path(alloc, "devices.results");
    if (json_array_size(results) > ALLOCATION_RESULTS_MAX) {
        too_many(causes, "status.allocation.devices.results", json_array_size(results),
                 ALLOCATION_RESULTS_MAX);
    } else {
        size_t i;
        json_t *r;
        json_array_foreach (results, i, r) {
            _cleanup_free_ char *p = xasprintf("status.allocation.devices.results[%zu]", i);
            _cleanup_free_ char *rq = xasprintf("%s.request", p);
            const char *req = kobj_str(r, "request") ? kobj_str(r, "request") : "";
            if (!request_ref_known(names, req))
                invalid_str(causes, rq, req, msg_request_ref);
            _cleanup_free_ char *dp = xasprintf("%s.driver", p);
            driver_name(causes, dp, json_object_get(r, "driver"));
            _cleanup_free_ char *pp = xasprintf("%s.pool", p);
            const char *pool = kobj_str(r, "pool");
            if (!pool || !pool[0])
                required(causes, pp, NULL);
            _cleanup_free_ char *vp = xasprintf("%s.device", p);
            dns_label(causes, vp, kobj_str(r, "device"));
        }
    }
    json_decref(names);
}

/* A pod's spec.resourceClaims and its containers' resources.claims. */
void ks_dra_validate_pod(json_t *pod, json_t *causes)
{
    json_t *spec = json_object_get(pod, "spec");
    json_t *claims = json_object_get(spec, "resourceClaims");
    json_t *names = json_object();
    size_t i;
    json_t *c;
    json_array_foreach (claims, i, c) {
        _cleanup_free_ char *p = xasprintf("spec.resourceClaims[%zu]", i);
        _cleanup_free_ char *np = xasprintf("%s.name", p);
        const char *name = kobj_str(c, "name");
        const char *rcn = kobj_str(c, "resourceClaimName");
        const char *rctn = kobj_str(c, "resourceClaimTemplateName");
        if (!name || !name[0]) {
            required(causes, np, NULL);
        } else if (json_object_get(names, name)) {
            duplicate(causes, np, name);
        } else {
            json_t *before = json_array();
            dns_label(before, np, name);
            if (json_array_size(before) == 0 && rctn) {
                /* the claim made from the template is named <pod>-<name>-<suffix> */
                _cleanup_free_ char *final = xasprintf("%s-%s", ks_obj_name(pod), name);
                json_t *sub = json_array();
                dns_subdomain(sub, np, final);
                if (json_array_size(sub)) {
                    _cleanup_free_ char *q = go_quote(final);
                    ks_add_cause(causes, "FieldValueInvalid", np,
                                 "Invalid value: %s: final ResourceClaim name: %s", q,
                                 ks_msg_dns_subdomain);
                }
                json_decref(sub);
            }
            json_array_extend(causes, before);
            json_decref(before);
            json_object_set_new(names, name, json_true());
        }
        /* %#v of core.PodResourceClaim, pointers as Go prints them */
        _cleanup_free_ char *qn = go_quote(name ? name : "");
        _cleanup_free_ char *value =
            xasprintf("core.PodResourceClaim{Name:%s, ResourceClaimName:(*string)(%s), "
                      "ResourceClaimTemplateName:(*string)(%s)}",
                      qn, rcn ? "0xc000a1b2c0" : "nil", rctn ? "0xc000a1b2d0" : "nil");
        if (rcn && rctn)
            ks_add_cause(causes, "FieldValueInvalid", p,
                         "Invalid value: %s: at most one of `resourceClaimName` or "
                         "`resourceClaimTemplateName` may be specified",
                         value);
        if (!rcn && !rctn)
            ks_add_cause(causes, "FieldValueInvalid", p,
                         "Invalid value: %s: must specify one of: `resourceClaimName`, "
                         "`resourceClaimTemplateName`",
                         value);
        if (rcn) {
            _cleanup_free_ char *sp = xasprintf("%s.resourceClaimName", p);
            dns_subdomain(causes, sp, rcn);
        }
        if (rctn) {
            _cleanup_free_ char *sp = xasprintf("%s.resourceClaimTemplateName", p);
            dns_subdomain(causes, sp, rctn);
        }
    }
    static const char *const lists[] = {"initContainers", "containers"};
    for (size_t l = 0; l < ARRAY_SIZE(lists); l++) {
        size_t k;
        json_t *ctr;
        json_array_foreach (json_object_get(spec, lists[l]), k, ctr) {
            json_t *seen = json_object();
            size_t j;
            json_t *rc;
            json_array_foreach (kobj_path(ctr, "resources.claims"), j, rc) {
                _cleanup_free_ char *p =
                    xasprintf("spec.%s[%zu].resources.claims[%zu]", lists[l], k, j);
                const char *name = kobj_str(rc, "name");
                if (!name || !name[0]) {
                    required(causes, p, NULL);
                    continue;
                }
                const char *req = kobj_str(rc, "request");
                _cleanup_free_ char *key =
                    req && req[0] ? xasprintf("%s/%s", name, req) : xstrdup(name);
                if (json_object_get(seen, key))
                    duplicate(causes, p, key);
                json_object_set_new(seen, key, json_true());
                if (!json_object_get(names, name)) {
                    struct sbuf b;
                    sbuf_init(&b, 64 * 1024);
                    const char *n;
                    json_t *v;
                    json_t *sorted = json_array();
                    json_object_foreach (names, n, v)
                        json_array_append_new(sorted, json_string(n));
                    /* sets.List sorts */
                    for (size_t x = 0; x < json_array_size(sorted); x++)
                        for (size_t y = x + 1; y < json_array_size(sorted); y++)
                            if (strcmp(json_string_value(json_array_get(sorted, x)),
                                       json_string_value(json_array_get(sorted, y))) > 0) {
                                json_t *tx = json_incref(json_array_get(sorted, x));
                                json_array_set(sorted, x, json_array_get(sorted, y));
                                json_array_set_new(sorted, y, tx);
                            }
                    size_t z;
                    json_array_foreach (sorted, z, v)
                        sbuf_addf(&b, "%s%s", z ? ", " : "", json_string_value(v));
                    json_decref(sorted);
                    _cleanup_free_ char *list = ks_text_take(&b);
                    _cleanup_free_ char *q = go_quote(name);
                    if (json_object_size(names) == 0)
                        ks_add_cause(causes, "FieldValueNotFound", p,
                                     "Not found: %s: must be one of the names in "
                                     "pod.spec.resourceClaims which is empty",
                                     q);
                    else
                        ks_add_cause(causes, "FieldValueNotFound", p,
                                     "Not found: %s: must be one of the names in "
                                     "pod.spec.resourceClaims: %s",
                                     q, list);
                }
            }
            json_decref(seen);
        }
    }
    json_decref(names);
}
