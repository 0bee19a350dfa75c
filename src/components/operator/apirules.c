/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Kubernetes API server's own validation rules for the fields gpuop renders: what the JSON
 * schemas accept but a real cluster refuses with 422 (an int-or-string "1", a quantity "1 GB",
 * a label value with a space, a port 0). Messages follow the API server's wording.
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kobj.h"
#include "operator.h"

/* ---- syntax ------------------------------------------------------------------------------- */

bool op_quantity_valid(const char *s)
{
    return kobj_valid_quantity(s, NULL);
}

/* ---- objects ------------------------------------------------------------------------------ */

/* Collects the first error, its path built as it goes down. */
struct vctx {
    struct err *e;
    int r;
    char path[512];
};

static void fail(struct vctx *v, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail(struct vctx *v, const char *field, const char *fmt, ...)
{
    if (v->r < 0)
        return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    v->r = err_set(v->e, -EINVAL, "%s%s%s: %s", v->path, *v->path && *field ? "." : "", field, msg);
}

/* Appends a path element for the duration of a check; returns the old length. */
static size_t push(struct vctx *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static size_t push(struct vctx *v, const char *fmt, ...)
{
    size_t old = strlen(v->path);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v->path + old, sizeof(v->path) - old, fmt, ap);
    va_end(ap);
    return old;
}

static void pop(struct vctx *v, size_t old)
{
    v->path[old] = '\0';
}

static void check_labels(struct vctx *v, const json_t *labels, const char *field, bool values)
{
    if (!labels)
        return;
    if (!json_is_object(labels)) {
        fail(v, field, "must be a map of strings");
        return;
    }
    const char *k;
    json_t *val;
    json_object_foreach ((json_t *)labels, k, val) {
        if (!kobj_valid_qualified_name(k))
            fail(v, field,
                 "Invalid value: \"%s\": name part must consist of alphanumeric "
                 "characters, '-', '_' or '.', and must start and end with an alphanumeric "
                 "character",
                 k);
        if (!json_is_string(val))
            fail(v, field, "Invalid value: %s: must be a string", k);
        else if (values && !kobj_valid_label_value(json_string_value(val)))
            fail(v, field,
                 "Invalid value: \"%s\": a valid label must be an empty string or "
                 "consist of alphanumeric characters, '-', '_' or '.', and must start and end "
                 "with an alphanumeric character",
                 json_string_value(val));
    }
}

static void check_meta(struct vctx *v, const json_t *meta, bool service)
{
    size_t o = push(v, "metadata");
    const char *name = json_string_value(json_object_get(meta, "name"));
    if (!name)
        fail(v, "name", "Required value: name or generateName is required");
    else if (service ? !(kobj_valid_dns_label(name) && isalpha((unsigned char)name[0]))
                     : !kobj_valid_dns_subdomain(name))
        fail(v, "name",
             "Invalid value: \"%s\": a lowercase RFC 1123 %s must consist of lower "
             "case alphanumeric characters, '-'%s",
             name, service ? "label" : "subdomain", service ? "" : " or '.'");
    const char *ns = json_string_value(json_object_get(meta, "namespace"));
    if (ns && !kobj_valid_dns_label(ns))
        fail(v, "namespace", "Invalid value: \"%s\"", ns);
    check_labels(v, json_object_get(meta, "labels"), "labels", true);
    check_labels(v, json_object_get(meta, "annotations"), "annotations", false);
    pop(v, o);
}

static void check_int_range(struct vctx *v, const json_t *obj, const char *field, json_int_t lo,
                            json_int_t hi, bool required)
{
    const json_t *x = json_object_get(obj, field);
    if (!x) {
        if (required)
            fail(v, field, "Required value");
        return;
    }
    if (!json_is_integer(x)) {
        fail(v, field, "Invalid value: must be an integer");
        return;
    }
    json_int_t n = json_integer_value(x);
    if (n < lo || n > hi)
        fail(v, field, "Invalid value: %lld: must be between %lld and %lld, inclusive",
             (long long)n, (long long)lo, (long long)hi);
}

/* A port given as a number (1-65535) or an IANA service name. */
static void check_port_ref(struct vctx *v, const json_t *obj, const char *field)
{
    const json_t *x = json_object_get(obj, field);
    if (json_is_string(x)) {
        if (!kobj_valid_iana_svc_name(json_string_value(x)))
            fail(v, field,
                 "Invalid value: \"%s\": must contain only alpha-numeric characters "
                 "(a-z, 0-9), and hyphens (-), at most 15 characters, a letter among them",
                 json_string_value(x));
        return;
    }
    check_int_range(v, obj, field, 1, 65535, true);
}

static void check_quantities(struct vctx *v, const json_t *map, const char *field)
{
    const char *k;
    json_t *q;
    json_object_foreach ((json_t *)map, k, q) {
        const char *s = json_string_value(q);
        char buf[32];
        if (json_is_integer(q)) {
            snprintf(buf, sizeof(buf), "%lld", (long long)json_integer_value(q));
            s = buf;
        }
        if (!s || !op_quantity_valid(s) || s[0] == '-')
            fail(v, field,
                 "Invalid value: %s: quantities must match the regular expression "
                 "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$' and be non-negative",
                 k);
    }
}

static void check_probe(struct vctx *v, const json_t *pr, const char *which)
{
    if (!pr)
        return;
    size_t o = push(v, ".%s", which);
    static const char *const nonneg[] = {"initialDelaySeconds", "timeoutSeconds", "periodSeconds",
                                         "successThreshold", "failureThreshold"};
    for (size_t i = 0; i < ARRAY_SIZE(nonneg); i++)
        check_int_range(v, pr, nonneg[i], 0, INT32_MAX, false);
    const json_t *st = json_object_get(pr, "successThreshold");
    if (strcmp(which, "readinessProbe") != 0 && st && json_integer_value(st) != 1)
        fail(v, "successThreshold", "Invalid value: %lld: must be 1",
             (long long)json_integer_value(st));
    int handlers = 0;
    static const char *const kinds[] = {"exec", "httpGet", "tcpSocket", "grpc"};
    for (size_t i = 0; i < ARRAY_SIZE(kinds); i++)
        handlers += json_object_get(pr, kinds[i]) != NULL;
    if (handlers != 1)
        fail(v, "", "%s: must specify exactly one handler type", which);
    if (json_object_get(pr, "httpGet"))
        check_port_ref(v, json_object_get(pr, "httpGet"), "port");
    if (json_object_get(pr, "tcpSocket"))
        check_port_ref(v, json_object_get(pr, "tcpSocket"), "port");
    if (json_object_get(pr, "grpc"))
        check_int_range(v, json_object_get(pr, "grpc"), "port", 1, 65535, true);
    pop(v, o);
}

static void check_container(struct vctx *v, const json_t *c, const json_t *volumes)
{
    const char *name = json_string_value(json_object_get(c, "name"));
    if (!name || !kobj_valid_dns_label(name))
        fail(v, "name", "Invalid value: \"%s\": a lowercase RFC 1123 label", name ? name : "");
    const char *image = json_string_value(json_object_get(c, "image"));
    if (!image || !*image || strchr(image, ' '))
        fail(v, "image", "Required value");
    size_t i;
    const json_t *x;
    json_array_foreach (json_object_get(c, "ports"), i, x) {
        size_t o = push(v, ".ports[%zu]", i);
        check_int_range(v, x, "containerPort", 1, 65535, true);
        check_int_range(v, x, "hostPort", 0, 65535, false);
        const char *pn = json_string_value(json_object_get(x, "name"));
        if (pn && !kobj_valid_iana_svc_name(pn))
            fail(v, "name", "Invalid value: \"%s\"", pn);
        const char *proto = json_string_value(json_object_get(x, "protocol"));
        if (proto && strcmp(proto, "TCP") && strcmp(proto, "UDP") && strcmp(proto, "SCTP"))
            fail(v, "protocol", "Unsupported value: \"%s\"", proto);
        pop(v, o);
    }
    json_array_foreach (json_object_get(c, "env"), i, x) {
        const char *en = json_string_value(json_object_get(x, "name"));
        bool ok = en && *en && !isdigit((unsigned char)en[0]);
        for (const char *p = en; ok && *p; p++)
            ok = isalnum((unsigned char)*p) || strchr("_-.", *p);
        if (!ok) {
            size_t o = push(v, ".env[%zu]", i);
            fail(v, "name",
                 "Invalid value: \"%s\": a valid environment variable name must "
                 "consist of alphabetic characters, digits, '_', '-', or '.', and must not start "
                 "with a digit",
                 en ? en : "");
            pop(v, o);
        }
    }
    const json_t *res = json_object_get(c, "resources");
    check_quantities(v, json_object_get(res, "limits"), "resources.limits");
    check_quantities(v, json_object_get(res, "requests"), "resources.requests");
    json_array_foreach (json_object_get(c, "volumeMounts"), i, x) {
        const char *vn = json_string_value(json_object_get(x, "name"));
        bool found = false;
        size_t j;
        const json_t *vol;
        json_array_foreach (volumes, j, vol) {
            found = found || streq_ptr(json_string_value(json_object_get(vol, "name")), vn);
        }
        if (!found) {
            size_t o = push(v, ".volumeMounts[%zu]", i);
            fail(v, "name", "Not found: \"%s\"", vn ? vn : "");
            pop(v, o);
        }
    }
    check_probe(v, json_object_get(c, "livenessProbe"), "livenessProbe");
    check_probe(v, json_object_get(c, "readinessProbe"), "readinessProbe");
    check_probe(v, json_object_get(c, "startupProbe"), "startupProbe");
}

static void check_podspec(struct vctx *v, const json_t *ps)
{
    const json_t *volumes = json_object_get(ps, "volumes");
    size_t i;
    const json_t *x;
    json_array_foreach (volumes, i, x) {
        const char *vn = json_string_value(json_object_get(x, "name"));
        if (!vn || !kobj_valid_dns_label(vn)) {
            size_t o = push(v, ".volumes[%zu]", i);
            fail(v, "name", "Invalid value: \"%s\"", vn ? vn : "");
            pop(v, o);
        }
    }
    static const char *const lists[] = {"initContainers", "containers"};
    for (size_t l = 0; l < ARRAY_SIZE(lists); l++) {
        json_array_foreach (json_object_get(ps, lists[l]), i, x) {
            size_t o = push(v, ".%s[%zu]", lists[l], i);
            check_container(v, x, volumes);
            pop(v, o);
        }
    }
    if (json_array_size(json_object_get(ps, "containers")) == 0)
        fail(v, "containers", "Required value");
    const char *pc = json_string_value(json_object_get(ps, "priorityClassName"));
    if (pc && !kobj_valid_dns_subdomain(pc))
        fail(v, "priorityClassName", "Invalid value: \"%s\"", pc);
    const char *sa = json_string_value(json_object_get(ps, "serviceAccountName"));
    if (sa && !kobj_valid_dns_subdomain(sa))
        fail(v, "serviceAccountName", "Invalid value: \"%s\"", sa);
    check_labels(v, json_object_get(ps, "nodeSelector"), "nodeSelector", true);
    json_array_foreach (json_object_get(ps, "tolerations"), i, x) {
        size_t o = push(v, ".tolerations[%zu]", i);
        const char *op = json_string_value(json_object_get(x, "operator"));
        const char *val = json_string_value(json_object_get(x, "value"));
        const char *eff = json_string_value(json_object_get(x, "effect"));
        const char *key = json_string_value(json_object_get(x, "key"));
        if (op && strcmp(op, "Exists") && strcmp(op, "Equal"))
            fail(v, "operator", "Unsupported value: \"%s\"", op);
        if (streq_ptr(op, "Exists") && val && *val)
            fail(v, "operator", "Invalid value: value must be empty when `operator` is 'Exists'");
        if (eff && *eff && strcmp(eff, "NoSchedule") && strcmp(eff, "PreferNoSchedule") &&
            strcmp(eff, "NoExecute"))
            fail(v, "effect", "Unsupported value: \"%s\"", eff);
        if (key && *key && !kobj_valid_qualified_name(key))
            fail(v, "key", "Invalid value: \"%s\"", key);
        pop(v, o);
    }
    json_array_foreach (json_object_get(ps, "imagePullSecrets"), i, x) {
        const char *n = json_string_value(json_object_get(x, "name"));
        if (!n || !kobj_valid_dns_subdomain(n)) {
            size_t o = push(v, ".imagePullSecrets[%zu]", i);
            fail(v, "name", "Invalid value: \"%s\"", n ? n : "");
            pop(v, o);
        }
    }
}

static void check_daemonset(struct vctx *v, const json_t *ds)
{
    const json_t *spec = json_object_get(ds, "spec");
    size_t o = push(v, "spec");
    const json_t *sel = json_object_get(json_object_get(spec, "selector"), "matchLabels");
    const json_t *tmeta = json_object_get(json_object_get(spec, "template"), "metadata");
    check_labels(v, sel, "selector.matchLabels", true);
    const char *k;
    json_t *val;
    json_object_foreach ((json_t *)sel, k, val) {
        if (!json_equal(val, json_object_get(json_object_get(tmeta, "labels"), k)))
            fail(v, "template.metadata.labels",
                 "Invalid value: `selector` does not match template `labels`");
    }
    if (!sel || json_object_size(sel) == 0)
        fail(v, "selector", "Required value");
    check_labels(v, json_object_get(tmeta, "labels"), "template.metadata.labels", true);
    check_labels(v, json_object_get(tmeta, "annotations"), "template.metadata.annotations", false);
    const json_t *us = json_object_get(spec, "updateStrategy");
    const char *type = json_string_value(json_object_get(us, "type"));
    if (type && strcmp(type, "RollingUpdate") && strcmp(type, "OnDelete"))
        fail(v, "updateStrategy.type", "Unsupported value: \"%s\"", type);
    const json_t *ru = json_object_get(us, "rollingUpdate");
    if (ru && streq_ptr(type, "OnDelete"))
        fail(v, "updateStrategy.rollingUpdate", "Forbidden: may not be set for OnDelete");
    bool zero_unavail = false, zero_surge = true;
    static const char *const ios[] = {"maxUnavailable", "maxSurge"};
    for (size_t i = 0; i < ARRAY_SIZE(ios); i++) {
        const json_t *x = json_object_get(ru, ios[i]);
        if (!x)
            continue;
        _cleanup_free_ char *field =
            xasprintf("%s.updateStrategy.rollingUpdate.%s", v->path, ios[i]);
        json_t *norm = NULL;
        struct err ie = {0};
        if (json_is_string(x) &&
            strspn(json_string_value(x), "0123456789") == strlen(json_string_value(x))) {
            /* The API server decodes an int-or-string "1" as a string: not a percentage. */
            _cleanup_free_ char *f = xasprintf("updateStrategy.rollingUpdate.%s", ios[i]);
            fail(v, f,
                 "Invalid value: \"%s\": a valid percent string must be a numeric string "
                 "followed by an ending '%%'",
                 json_string_value(x));
            continue;
        }
        if (kobj_int_or_percent(x, field, &norm, &ie) < 0) {
            if (v->r == 0)
                v->r = err_set(v->e, ie.code, "%s", err_msg(&ie));
            continue;
        }
        bool zero = json_is_integer(norm) ? json_integer_value(norm) == 0
                                          : strtol(json_string_value(norm), NULL, 10) == 0;
        if (i == 0)
            zero_unavail = zero;
        else
            zero_surge = zero;
        json_decref(norm);
    }
    if (ru && zero_unavail && zero_surge && json_object_get(ru, "maxUnavailable"))
        fail(v, "updateStrategy.rollingUpdate.maxUnavailable",
             "Invalid value: may not be 0 when `maxSurge` is 0");
    size_t o2 = push(v, ".template.spec");
    check_podspec(v, json_object_get(json_object_get(spec, "template"), "spec"));
    pop(v, o2);
    pop(v, o);
}

static void check_service(struct vctx *v, const json_t *svc)
{
    const json_t *spec = json_object_get(svc, "spec");
    const char *type = json_string_value(json_object_get(spec, "type"));
    if (type && strcmp(type, "ClusterIP") && strcmp(type, "NodePort") &&
        strcmp(type, "LoadBalancer") && strcmp(type, "ExternalName"))
        fail(v, "spec.type", "Unsupported value: \"%s\"", type);
    const json_t *ports = json_object_get(spec, "ports");
    size_t i;
    const json_t *x;
    json_array_foreach (ports, i, x) {
        size_t o = push(v, "spec.ports[%zu]", i);
        check_int_range(v, x, "port", 1, 65535, true);
        if (json_object_get(x, "targetPort"))
            check_port_ref(v, x, "targetPort");
        const char *pn = json_string_value(json_object_get(x, "name"));
        if (json_array_size(ports) > 1 && !pn)
            fail(v, "name", "Required value");
        pop(v, o);
    }
    check_labels(v, json_object_get(spec, "selector"), "spec.selector", true);
}

int op_api_validate(const json_t *obj, struct err *e)
{
    struct vctx v = {.e = e};
    const char *kind = json_string_value(json_object_get(obj, "kind"));
    if (!kind || !json_is_string(json_object_get(obj, "apiVersion")))
        return err_set(e, -EINVAL, "object has no kind or apiVersion");
    check_meta(&v, json_object_get(obj, "metadata"), strcmp(kind, "Service") == 0);
    if (strcmp(kind, "DaemonSet") == 0)
        check_daemonset(&v, obj);
    else if (strcmp(kind, "Service") == 0)
        check_service(&v, obj);
    if (v.r < 0)
        return err_prefix(
            e, "%s %s", kind,
            json_string_value(json_object_get(json_object_get(obj, "metadata"), "name")));
    return 0;
}
