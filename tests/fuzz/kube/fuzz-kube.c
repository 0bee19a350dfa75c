/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzzes the client's response parsing: the watch-stream parser (fed in chunks whose size the
 * first byte picks), Status decoding, JSON bodies and their price (never below what jansson
 * takes to decode them), list bodies item by item, members left out before decoding (the rest
 * decodes the same), the prefilter (what it passes over holds none of its groups of strings
 * decoded), and kubeconfig resolution of the same bytes read as YAML. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../kube/json-alloc-count.h"
#include "kube-internal.h"
#include "yamlcfg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int on_event(enum kube_watch_type t, json_t *obj, void *ud)
{
    size_t *n = ud;
    (*n)++;
    (void)kube_watch_type_name(t);
    /* what the informer reads of every event */
    json_t *meta = json_object_get(obj, "metadata");
    (void)json_string_value(json_object_get(meta, "name"));
    (void)json_string_value(json_object_get(meta, "resourceVersion"));
    const char *const keep[] = {"status.allocatable", "spec.taints", NULL};
    json_decref(kube_project_fields(obj, keep));
    return *n > 1000 ? 1 : 0;
}

/* A list body's items, each decoded as the client does. */
static int on_item(const char *text, size_t n, void *ud, struct err *e)
{
    (void)e;
    size_t *items = ud;
    json_decref(json_loadb(text, n, JSON_DECODE_ANY, NULL));
    (*items)++;
    return 0;
}

/* Item by item agrees with the whole decode: a body jansson accepts and the walk accepts has
 * the same number of items. */
static void check_items(const char *in, size_t n)
{
    struct err e = {0};
    size_t items = 0;
    json_t *rest = NULL;
    int r = kube_list_body_each(in, n, 1u << 20, "fuzz", on_item, &items, &rest, &e);
    json_decref(rest);
    json_t *v = json_loadb(in, n, 0, NULL);
    json_t *all = json_object_get(v, "items");
    if (r == 0 && json_is_array(all) && json_array_size(all) != items) {
        fprintf(stderr, "walked %zu items, jansson decoded %zu\n", items, json_array_size(all));
        abort();
    }
    json_decref(v);
}

/* Whatever jansson accepts, the price is at least what decoding it took. */
static void check_price(const char *in, size_t n)
{
    size_t price = kube_json_cost(in, n);
    json_alloc_count_start();
    json_t *v = json_loadb(in, n, 0, NULL);
    json_decref(v);
    size_t took = json_alloc_peak;
    json_alloc_count_stop();
    if (v && price < took) {
        fprintf(stderr, "priced %zu, jansson took %zu\n", price, took);
        abort();
    }
}

/* json_object_del at a dotted path, where its parents are objects */
static void del_path(json_t *v, const char *path)
{
    char buf[64];
    snprintf(buf, sizeof(buf), "%s", path);
    char *last = strrchr(buf, '.');
    json_t *parent = v;
    if (last) {
        *last = 0;
        for (char *save = NULL, *k = strtok_r(buf, ".", &save); k && parent;
             k = strtok_r(NULL, ".", &save))
            parent = json_object_get(parent, k);
    }
    if (json_is_object(parent))
        json_object_del(parent, last ? last + 1 : buf);
}

/* Members left out of the text before decoding: whatever jansson decodes as an object, the
 * skimmed text (never longer) decodes to it less those members; with a watch event's
 * "object", less its object's members. */
static void check_drop(const char *in, size_t n)
{
    static const char *const paths[] = {"metadata.managedFields", "status.images", "a", "b.c.d",
                                        NULL};
    char *out = malloc(n ? n : 1);
    json_t *v = json_loadb(in, n, 0, NULL);
    for (int under = 0; under < 2; under++) {
        size_t m = kube_json_drop(in, n, paths, under ? "object" : NULL, out);
        if (m == SIZE_MAX)
            continue;
        if (m > n)
            abort();
        if (!json_is_object(v))
            continue; /* a fault inside a value left out goes unseen */
        json_t *want = json_deep_copy(v);
        json_t *at = under ? json_object_get(want, "object") : want;
        for (size_t i = 0; paths[i]; i++)
            del_path(at, paths[i]);
        json_t *got = json_loadb(out, m, 0, NULL);
        if (!got || !json_equal(got, want)) {
            fprintf(stderr, "skimmed %.*s\n", (int)m, out);
            abort();
        }
        json_decref(got);
        json_decref(want);
    }
    json_decref(v);
    free(out);
}

/* Whether any member name or string in v (at any depth) holds s. */
static bool holds(const json_t *v, const char *s)
{
    if (json_is_string(v) && memmem(json_string_value(v), json_string_length(v), s, strlen(s)))
        return true;
    const char *k;
    json_t *x;
    size_t idx;
    if (json_is_object(v)) {
        json_object_foreach ((json_t *)v, k, x) {
            if (strstr(k, s) || holds(x, s))
                return true;
        }
    }
    if (json_is_array(v)) {
        json_array_foreach (v, idx, x)
            if (holds(x, s))
                return true;
    }
    return false;
}

/* Whether v's names and strings hold every string of some group. */
static bool holds_group(const json_t *v, const char *const *const *groups)
{
    for (size_t g = 0; groups[g]; g++) {
        bool all = true;
        for (size_t i = 0; all && groups[g][i]; i++)
            all = holds(v, groups[g][i]);
        if (all)
            return true;
    }
    return false;
}

struct told {
    enum kube_watch_type t;
    char ns[KUBE_PREFILTER_NAME_MAX], name[KUBE_PREFILTER_NAME_MAX], rv[KUBE_PREFILTER_NAME_MAX];
    bool has_ns, has_rv;
};

static bool note(enum kube_watch_type t, const char *ns, const char *name, const char *rv, void *ud)
{
    struct told *tl = ud;
    tl->t = t;
    tl->has_ns = ns != NULL;
    tl->has_rv = rv != NULL;
    snprintf(tl->ns, sizeof(tl->ns), "%s", ns ? ns : "");
    snprintf(tl->name, sizeof(tl->name), "%s", name);
    snprintf(tl->rv, sizeof(tl->rv), "%s", rv ? rv : "");
    return true;
}

/* The prefilter: whenever it says the text may hold no group of strings whole, the decoded
 * member names and strings hold no group whole; whenever it passes an item or event over, what it
 * told of it is what the decoded object says (a watch event's type is never a BOOKMARK or an
 * ERROR). */
static void check_prefilter(const char *in, size_t n)
{
    static const char *const gpu[] = {"nvidia.com/", "requests", NULL};
    static const char *const claims[] = {"resourceClaims", NULL};
    static const char *const odd[] = {"x\"y", "caf\xc3\xa9", NULL};
    static const char *const *const strings[] = {gpu, claims, odd, NULL};
    json_t *v = json_loadb(in, n, JSON_DECODE_ANY, NULL);
    if (v && !kube_json_may_hold(in, n, strings) && holds_group(v, strings)) {
        fprintf(stderr, "may hold none, yet decoded: %.*s\n", (int)n, in);
        abort();
    }
    for (int event = 0; event < 2; event++) {
        struct told tl = {0};
        struct kube_prefilter pf = {strings, note, &tl};
        if (!kube_prefilter_pass(&pf, in, n, event) || !json_is_object(v))
            continue;
        json_t *obj = event ? json_object_get(v, "object") : v;
        json_t *meta = json_object_get(obj, "metadata");
        const char *type = json_string_value(json_object_get(v, "type"));
        const char *ns = json_string_value(json_object_get(meta, "namespace"));
        const char *rv = json_string_value(json_object_get(meta, "resourceVersion"));
        bool ok = !holds_group(v, strings) &&
                  strcmp(json_string_value(json_object_get(meta, "name")) ?: "", tl.name) == 0 &&
                  tl.has_ns == (ns != NULL) && strcmp(ns ?: "", tl.ns) == 0 &&
                  tl.has_rv == (rv != NULL) && strcmp(rv ?: "", tl.rv) == 0 &&
                  (!event || (tl.t != KUBE_WATCH_BOOKMARK && tl.t != KUBE_WATCH_ERROR &&
                              strcmp(type ?: "", kube_watch_type_name(tl.t)) == 0));
        if (!ok) {
            fprintf(stderr, "passed over (event %d) %.*s\n", event, (int)n, in);
            abort();
        }
    }
    json_decref(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    size_t chunk = (size_t)data[0] % 64 + 1;
    const char *in = (const char *)data + 1;
    size_t n = size - 1;

    struct err e = {0};
    size_t events = 0;
    struct kube_watch_parser p;
    kube_watch_parser_init(&p, 4096, SIZE_MAX, on_event, &events);
    for (size_t off = 0; off < n; off += chunk) {
        size_t take = n - off < chunk ? n - off : chunk;
        if (kube_watch_parser_feed(&p, in + off, take, &e) != 0)
            break;
    }
    kube_watch_parser_finish(&p, &e);
    kube_watch_parser_free(&p);

    check_price(in, n);
    check_items(in, n);
    check_drop(in, n);
    check_prefilter(in, n);
    kube_status_err(400 + (long)(data[0] % 200), in, n, "fuzz", &e);
    json_t *v = NULL;
    if (kube_json_parse(in, n, 1u << 20, "fuzz", &v, &e) == 0)
        json_decref(v);

    json_t *doc = NULL;
    if (yaml_parse_one(in, n, "fuzz", &doc, &e) == 0) {
        struct kube_conn c = {0};
        if (kube_conn_from_kubeconfig(doc, "/fuzz/kubeconfig", NULL, &c, &e) == 0)
            kube_conn_clear(&c);
        json_decref(doc);
    }
    return 0;
}
