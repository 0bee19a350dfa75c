/* SPDX-License-Identifier: Apache-2.0 */
/* kubesim's Dynamic Resource Allocation, table-driven. The allocator alone (ks-dra.h): selectors
 * true and false, capacities, counts, `All`, matchAttribute, firstAvailable, shared counters of
 * partitionable (MIG) devices, devices in use, the classes' and claims' configuration, node and
 * all-node pools, pool generations and completeness, and the scheduler's texts for CEL errors.
 * Then the API (ksim_handle): each kind's validation in the API server's words, a claim's status
 * rules, claims made from templates and released, the extended resource of a DeviceClass, the
 * scheduler's messages, and two pods racing for the last device. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ks-dra.h"
#include "kubesim.h"

/* JSON written with ` for its quotes, so CEL's ' and " stay as they are. */
static json_t *J(const char *text)
{
    char *s = xstrdup(text);
    for (char *p = s; *p; p++)
        if (*p == '`')
            *p = '"';
    json_error_t je;
    json_t *v = json_loads(s, 0, &je);
    if (!v)
        fail_msg("bad fixture: %s: %s", je.text, s);
    free(s);
    return v;
}

#define SEL(e) "{`cel`: {`expression`: `" e "`}}"

/* The device classes, joined into one object by fixture_classes(). */
static const char *const class_list[] = {
    "`gpu`: {`metadata`: {`name`: `gpu`}, `spec`: {`selectors`: [{`cel`: {`expression`: "
    "`device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'`}}]}}",
    "`mig`: {`metadata`: {`name`: `mig`}, `spec`: {`selectors`: [{`cel`: {`expression`: "
    "`device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'`}}]}}",
    "`net`: {`metadata`: {`name`: `net`}, `spec`: {`selectors`: [{`cel`: {`expression`: "
    "`device.driver == 'net.example.com'`}}]}}",
    "`gpu-cfg`: {`metadata`: {`name`: `gpu-cfg`}, `spec`: {`selectors`: [{`cel`: {`expression`: "
    "`device.attributes['gpu.nvidia.com'].type == 'gpu'`}}], `config`: [{`opaque`: {`driver`: "
    "`gpu.nvidia.com`, `parameters`: {`apiVersion`: `resource.nvidia.com/v1beta1`, `kind`: "
    "`GpuConfig`, `sharing`: {`strategy`: `TimeSlicing`}}}}]}}",
    "`broken`: {`metadata`: {`name`: `broken`}, `spec`: {`selectors`: [{`cel`: {`expression`: "
    "`device.attributes['gpu.nvidia.com'].rack == 'r1'`}}]}}",
};

static json_t *fixture_classes(void)
{
    struct sbuf b;
    sbuf_init(&b, 1u << 16);
    sbuf_adds(&b, "{");
    for (size_t i = 0; i < sizeof(class_list) / sizeof(class_list[0]); i++)
        sbuf_addf(&b, "%s%s", i ? "," : "", class_list[i]);
    sbuf_adds(&b, "}");
    assert_int_equal(sbuf_check(&b), 0);
    json_t *v = J(b.data);
    sbuf_free(&b);
    return v;
}

/* A full GPU; consumes: its consumesCounters entry ("" none). */
static char *gpu(const char *name, const char *product, const char *root, int index,
                 const char *mem, const char *consumes)
{
    return xasprintf("{`name`: `%s`, `attributes`: {`type`: {`string`: `gpu`}, `productName`: "
                     "{`string`: `%s`}, `resource.kubernetes.io/pcieRoot`: {`string`: `%s`}, "
                     "`index`: {`int`: %d}}, `capacity`: {`memory`: {`value`: `%s`}}%s}",
                     name, product, root, index, mem, consumes);
}

/* A MIG device of GPU 0, consuming its memory and memory slices. */
static char *mig(const char *name, const char *profile, const char *mem, int slices)
{
    return xasprintf("{`name`: `%s`, `attributes`: {`type`: {`string`: `mig`}, `profile`: "
                     "{`string`: `%s`}, `resource.kubernetes.io/pcieRoot`: {`string`: `pci0`}}, "
                     "`capacity`: {`memory`: {`value`: `%s`}}, `consumesCounters`: "
                     "[{`counterSet`: `gpu-0`, `counters`: {`memory`: {`value`: `%s`}, `slices`: "
                     "{`value`: `%d`}}}]}",
                     name, profile, mem, mem, slices);
}

static char *slice(const char *name, const char *node, const char *pool, int gen, int count,
                   const char *body)
{
    return xasprintf("{`metadata`: {`name`: `%s`}, `spec`: {`driver`: `gpu.nvidia.com`, "
                     "`nodeName`: `%s`, `pool`: {`name`: `%s`, `generation`: %d, "
                     "`resourceSliceCount`: %d}, %s}}",
                     name, node, pool, gen, count, body);
}

/* node-a: one pool of two slices (GPU 0's counters; its devices: GPU 0, four MIG devices of
 * it, GPU 1, an A100) and an older generation; node-b: an L4; every node: a network device. */
static json_t *fixture_slices(void)
{
    char *devs[] = {
        gpu("gpu-0", "NVIDIA H100 80GB HBM3", "pci0", 0, "80Gi",
            ", `consumesCounters`: [{`counterSet`: `gpu-0`, `counters`: {`memory`: {`value`: "
            "`80Gi`}, `slices`: {`value`: `7`}}}]"),
        mig("gpu-0-mig-1g-0", "1g.10gb", "10Gi", 1),
        mig("gpu-0-mig-1g-1", "1g.10gb", "10Gi", 1),
        mig("gpu-0-mig-3g-0", "3g.40gb", "40Gi", 3),
        mig("gpu-0-mig-4g-0", "4g.40gb", "40Gi", 4),
        gpu("gpu-1", "NVIDIA H100 80GB HBM3", "pci1", 1, "80Gi", ""),
        gpu("gpu-2", "NVIDIA A100-SXM4-40GB", "pci0", 2, "40Gi", ""),
    };
    struct sbuf d;
    sbuf_init(&d, 1u << 16);
    sbuf_adds(&d, "`devices`: [");
    for (size_t i = 0; i < sizeof(devs) / sizeof(devs[0]); i++) {
        sbuf_addf(&d, "%s%s", i ? "," : "", devs[i]);
        free(devs[i]);
    }
    sbuf_adds(&d, "]");
    assert_int_equal(sbuf_check(&d), 0);
    char *old = gpu("old-gpu", "Old", "pci9", 9, "1Gi", "");
    char *l4 = gpu("gpu-0", "NVIDIA L4", "pci0", 0, "23034Mi", "");
    char *old_body = xasprintf("`devices`: [%s]", old);
    char *l4_body = xasprintf("`devices`: [%s]", l4);
    char *parts[] = {
        slice("node-a-counters", "node-a", "node-a", 1, 2,
              "`sharedCounters`: [{`name`: `gpu-0`, `counters`: {`memory`: {`value`: `80Gi`}, "
              "`slices`: {`value`: `7`}}}]"),
        slice("node-a-devices", "node-a", "node-a", 1, 2, d.data),
        slice("node-a-old", "node-a", "node-a", 0, 1, old_body),
        slice("node-b", "node-b", "node-b", 1, 1, l4_body),
        xstrdup("{`metadata`: {`name`: `fabric`}, `spec`: {`driver`: `net.example.com`, "
                "`allNodes`: true, `pool`: {`name`: `fabric`, `generation`: 1, "
                "`resourceSliceCount`: 1}, `devices`: [{`name`: `fabric-0`, `attributes`: "
                "{`kind`: {`string`: `ib`}}}]}}"),
    };
    struct sbuf b;
    sbuf_init(&b, 1u << 16);
    sbuf_adds(&b, "[");
    for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
        sbuf_addf(&b, "%s%s", i ? "," : "", parts[i]);
        free(parts[i]);
    }
    sbuf_adds(&b, "]");
    assert_int_equal(sbuf_check(&b), 0);
    json_t *v = J(b.data);
    sbuf_free(&b);
    sbuf_free(&d);
    free(old);
    free(l4);
    free(old_body);
    free(l4_body);
    return v;
}

#define CLAIM(requests, extra)                                                              \
    "{`metadata`: {`name`: `c`, `namespace`: `default`}, `spec`: {`devices`: {`requests`: " \
    "[" requests "]" extra "}}}"
/* a second claim, "d" */
#define CLAIM_D(requests)                                                                   \
    "{`metadata`: {`name`: `d`, `namespace`: `default`}, `spec`: {`devices`: {`requests`: " \
    "[" requests "]}}}"
#define REQ(name, cls, extra)                                                           \
    "{`name`: `" name "`, `exactly`: {`deviceClassName`: `" cls "`, `allocationMode`: " \
    "`ExactCount`, `count`: 1" extra "}}"
#define REQN(name, cls, n, extra)                                                       \
    "{`name`: `" name "`, `exactly`: {`deviceClassName`: `" cls "`, `allocationMode`: " \
    "`ExactCount`, `count`: " #n extra "}}"
#define REQALL(name, cls, extra)                                                                   \
    "{`name`: `" name "`, `exactly`: {`deviceClassName`: `" cls "`, `allocationMode`: `All`" extra \
    "}}"
#define WITH(e)    ", `selectors`: [" SEL(e) "]"
#define H100       WITH("device.attributes['gpu.nvidia.com'].productName.startsWith('NVIDIA H100')")
#define PROFILE(p) WITH("device.attributes['gpu.nvidia.com'].profile == '" p "'")

struct tc {
    const char *what;
    const char *claims; /* a JSON array, ` for quotes */
    const char *node;
    const char *allocated; /* a JSON array of device ids in use, or NULL */
    const char *want; /* "req=device ..." per claim separated by " | ", "-" (none), "ERR:..." */
};

static const struct tc cases[] = {
    {"one GPU: the first one", "[" CLAIM(REQ("gpu", "gpu", ""), "") "]", "node-a", NULL,
     "gpu=gpu-0"},
    {"one GPU, the first in use", "[" CLAIM(REQ("gpu", "gpu", ""), "") "]", "node-a",
     "[`gpu.nvidia.com/node-a/gpu-0`]", "gpu=gpu-1"},
    {"selector true: two H100", "[" CLAIM(REQN("gpu", "gpu", 2, H100), "") "]", "node-a", NULL,
     "gpu=gpu-0 gpu=gpu-1"},
    {"selector false: three H100 on a node with two",
     "[" CLAIM(REQN("gpu", "gpu", 3, H100), "") "]", "node-a", NULL, "-"},
    {"selector on the product: the A100",
     "[" CLAIM(REQ("gpu", "gpu",
                   WITH("device.attributes['gpu.nvidia.com'].productName == "
                        "'NVIDIA A100-SXM4-40GB'")),
               "") "]",
     "node-a", NULL, "gpu=gpu-2"},
    {"selector matching nothing",
     "[" CLAIM(REQ("gpu", "gpu", WITH("device.attributes['gpu.nvidia.com'].productName == 'B200'")),
               "") "]",
     "node-a", NULL, "-"},
    {"older pool generation ignored",
     "[" CLAIM(REQ("gpu", "gpu", WITH("device.attributes['gpu.nvidia.com'].productName == 'Old'")),
               "") "]",
     "node-a", NULL, "-"},
    {"capacity: three GPUs of 30Gi or more",
     "[" CLAIM(REQN("gpu", "gpu", 3,
                    WITH("device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('30Gi')) "
                         ">= 0")),
               "") "]",
     "node-a", NULL, "gpu=gpu-0 gpu=gpu-1 gpu=gpu-2"},
    {"capacity: three GPUs of 50Gi or more (two have it)",
     "[" CLAIM(REQN("gpu", "gpu", 3,
                    WITH("device.capacity['gpu.nvidia.com'].memory.isGreaterThan(quantity("
                         "'50Gi'))")),
               "") "]",
     "node-a", NULL, "-"},
    {"All H100", "[" CLAIM(REQALL("gpu", "gpu", H100), "") "]", "node-a", NULL,
     "gpu=gpu-0 gpu=gpu-1"},
    {"All H100, one in use", "[" CLAIM(REQALL("gpu", "gpu", H100), "") "]", "node-a",
     "[`gpu.nvidia.com/node-a/gpu-1`]", "-"},
    {"All of none",
     "[" CLAIM(REQALL("gpu", "gpu", WITH("device.attributes['gpu.nvidia.com'].index > 10")),
               "") "]",
     "node-a", NULL, "-"},
    {"matchAttribute: the GPU beside the A100",
     "[" CLAIM(REQ("a100", "gpu", WITH("device.attributes['gpu.nvidia.com'].index == 2")) "," REQ(
                   "other", "gpu", WITH("device.attributes['gpu.nvidia.com'].index != 2")),
               ", `constraints`: [{`matchAttribute`: `resource.kubernetes.io/pcieRoot`}]") "]",
     "node-a", NULL, "a100=gpu-2 other=gpu-0"},
    {"matchAttribute: the only match in use",
     "[" CLAIM(REQ("a100", "gpu", WITH("device.attributes['gpu.nvidia.com'].index == 2")) "," REQ(
                   "other", "gpu", WITH("device.attributes['gpu.nvidia.com'].index != 2")),
               ", `constraints`: [{`matchAttribute`: `resource.kubernetes.io/pcieRoot`}]") "]",
     "node-a", "[`gpu.nvidia.com/node-a/gpu-0`]", "-"},
    {"matchAttribute limited to some requests",
     "[" CLAIM(REQ("a", "gpu", WITH("device.attributes['gpu.nvidia.com'].index == 1")) "," REQ(
                   "b", "gpu", "") "," REQ("c", "gpu", ""),
               ", `constraints`: [{`matchAttribute`: `gpu.nvidia.com/productName`, "
               "`requests`: [`a`, `b`]}]") "]",
     "node-a", NULL, "a=gpu-1 b=gpu-0 c=gpu-2"},
    {"firstAvailable: the second alternative",
     "[" CLAIM("{`name`: `gpu`, `firstAvailable`: [{`name`: `big`, `deviceClassName`: `gpu`, "
               "`allocationMode`: `ExactCount`, `count`: 3" H100 "}, {`name`: `small`, "
               "`deviceClassName`: `gpu`, `allocationMode`: `ExactCount`, `count`: 1" H100 "}]}",
               "") "]",
     "node-a", NULL, "gpu/small=gpu-0"},
    {"counters: two 1g MIG devices", "[" CLAIM(REQN("m", "mig", 2, PROFILE("1g.10gb")), "") "]",
     "node-a", NULL, "m=gpu-0-mig-1g-0 m=gpu-0-mig-1g-1"},
    {"counters: a full GPU after two MIG devices is the other GPU",
     "[" CLAIM(REQN("m", "mig", 2, PROFILE("1g.10gb")) "," REQ("g", "gpu", H100), "") "]", "node-a",
     NULL, "m=gpu-0-mig-1g-0 m=gpu-0-mig-1g-1 g=gpu-1"},
    {"counters: 3g and 4g share the GPU's 7 slices",
     "[" CLAIM(REQ("a", "mig", PROFILE("3g.40gb")) "," REQ("b", "mig", PROFILE("4g.40gb")), "") "]",
     "node-a", NULL, "a=gpu-0-mig-3g-0 b=gpu-0-mig-4g-0"},
    {"counters: 3g, 4g and a 1g need 8 slices",
     "[" CLAIM(REQ("a", "mig", PROFILE("3g.40gb")) "," REQ("b", "mig", PROFILE("4g.40gb")) "," REQ(
                   "c", "mig", PROFILE("1g.10gb")),
               "") "]",
     "node-a", NULL, "-"},
    {"counters: no MIG device while the full GPU is in use", "[" CLAIM(REQ("m", "mig", ""), "") "]",
     "node-a", "[`gpu.nvidia.com/node-a/gpu-0`]", "-"},
    {"counters: two claims of one pod share the counters",
     "[" CLAIM(REQ("a", "mig", PROFILE("4g.40gb")),
               "") "," CLAIM_D(REQ("b", "mig", PROFILE("4g.40gb"))) "]",
     "node-a", NULL, "-"},
    {"node-b's own pool", "[" CLAIM(REQ("gpu", "gpu", ""), "") "]", "node-b", NULL,
     "gpu=gpu-0@node-b"},
    {"a node with no pool of its own", "[" CLAIM(REQ("gpu", "gpu", ""), "") "]", "node-c", NULL,
     "-"},
    {"a device of every node", "[" CLAIM(REQ("nic", "net", ""), "") "]", "node-b", NULL,
     "nic=fabric-0@*"},
    {"two claims", "[" CLAIM(REQ("g", "gpu", ""), "") "," CLAIM_D(REQ("g", "gpu", "")) "]",
     "node-a", NULL, "g=gpu-0 | g=gpu-1"},
    {"CEL runtime error in the claim",
     "[" CLAIM(REQ("gpu", "gpu", WITH("device.attributes['gpu.nvidia.com'].rack == 'r1'")), "") "]",
     "node-a", NULL, "ERR:claim default/c: selector #0: CEL runtime error: no such key: rack"},
    {"CEL runtime error in the class", "[" CLAIM(REQ("gpu", "broken", ""), "") "]", "node-a", NULL,
     "ERR:class broken: selector #0: CEL runtime error: no such key: rack"},
    {"a class that is gone", "[" CLAIM(REQ("gpu", "nope", ""), "") "]", "node-a", NULL,
     "ERR:claim default/c, request gpu: could not retrieve device class nope: "
     "deviceclass.resource.k8s.io \"nope\" not found"},
};

static char *summarize(json_t *results)
{
    struct sbuf b;
    sbuf_init(&b, 4096);
    size_t i;
    json_t *a;
    json_array_foreach (results, i, a) {
        if (i)
            sbuf_adds(&b, " |");
        size_t k;
        json_t *r;
        json_array_foreach (json_object_get(json_object_get(a, "devices"), "results"), k, r) {
            sbuf_addf(&b, "%s%s=%s", i || k ? " " : "",
                      json_string_value(json_object_get(r, "request")),
                      json_string_value(json_object_get(r, "device")));
        }
        json_t *ns = json_object_get(a, "nodeSelector");
        const char *node = NULL;
        json_t *terms = json_object_get(ns, "nodeSelectorTerms");
        json_t *mf = json_object_get(json_array_get(terms, 0), "matchFields");
        node =
            json_string_value(json_array_get(json_object_get(json_array_get(mf, 0), "values"), 0));
        if (!ns)
            sbuf_adds(&b, "@*");
        else if (node && strcmp(node, "node-a") != 0)
            sbuf_addf(&b, "@%s", node);
    }
    assert_int_equal(sbuf_check(&b), 0);
    return sbuf_steal(&b);
}

static void test_allocate(void **state)
{
    (void)state;
    json_t *cls = fixture_classes(), *sl = fixture_slices();
    struct ks_dra_cel_cache *cel = ks_dra_cel_cache_new();
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const struct tc *t = &cases[i];
        json_t *claims = J(t->claims);
        json_t *allocated = json_object();
        if (t->allocated) {
            json_t *ids = J(t->allocated);
            size_t k;
            json_t *v;
            json_array_foreach (ids, k, v)
                json_object_set_new(allocated, json_string_value(v), json_true());
            json_decref(ids);
        }
        json_t *node = json_pack("{s:{s:s}}", "metadata", "name", t->node);
        struct ks_dra_input in = {.claims = claims,
                                  .classes = cls,
                                  .slices = sl,
                                  .allocated = allocated,
                                  .node = node,
                                  .cel = cel};
        json_t *res = NULL;
        char *err = NULL;
        int r = ks_dra_allocate(&in, &res, &err);
        char *got = r < 0 ? xasprintf("ERR:%s", err) : res ? summarize(res) : xstrdup("-");
        if (strcmp(got, t->want) != 0)
            fail_msg("%s:\n got: %s\nwant: %s", t->what, got, t->want);
        free(got);
        free(err);
        json_decref(res);
        json_decref(claims);
        json_decref(allocated);
        json_decref(node);
    }
    ks_dra_cel_cache_free(cel);
    json_decref(cls);
    json_decref(sl);
}

/* The configuration an allocation carries: the class's for its requests, then the claim's. */
static void test_config(void **state)
{
    (void)state;
    json_t *cls = fixture_classes(), *sl = fixture_slices();
    json_t *claims =
        J("[" CLAIM(REQ("a", "gpu-cfg", "") "," REQ("b", "gpu-cfg", "") "," REQ("c", "gpu", ""),
                    ", `config`: [{`requests`: [`c`], `opaque`: {`driver`: "
                    "`gpu.nvidia.com`, `parameters`: {`kind`: `GpuConfig`}}}, "
                    "{`requests`: [`zzz`], `opaque`: {`driver`: `x.example.com`, "
                    "`parameters`: {}}}]") "]");
    json_t *node = json_pack("{s:{s:s}}", "metadata", "name", "node-a");
    json_t *alloc = json_object();
    struct ks_dra_cel_cache *cel = ks_dra_cel_cache_new();
    struct ks_dra_input in = {.claims = claims,
                              .classes = cls,
                              .slices = sl,
                              .allocated = alloc,
                              .node = node,
                              .cel = cel};
    json_t *res = NULL;
    char *err = NULL;
    assert_int_equal(ks_dra_allocate(&in, &res, &err), 0);
    assert_non_null(res);
    json_t *config = json_object_get(json_object_get(json_array_get(res, 0), "devices"), "config");
    char *text = json_dumps(config, JSON_COMPACT | JSON_SORT_KEYS);
    assert_string_equal(
        text, "[{\"opaque\":{\"driver\":\"gpu.nvidia.com\",\"parameters\":{\"apiVersion\":"
              "\"resource.nvidia.com/v1beta1\",\"kind\":\"GpuConfig\",\"sharing\":{\"strategy\":"
              "\"TimeSlicing\"}}},\"requests\":[\"a\",\"b\"],\"source\":\"FromClass\"},"
              "{\"opaque\":{\"driver\":\"gpu.nvidia.com\",\"parameters\":{\"kind\":\"GpuConfig\"}},"
              "\"requests\":[\"c\"],\"source\":\"FromClaim\"}]");
    free(text);
    json_decref(res);
    /* no slice at all: nothing to allocate from */
    json_t *none = json_array();
    in.slices = none;
    assert_int_equal(ks_dra_allocate(&in, &res, &err), 0);
    assert_null(res);
    in.slices = sl;
    json_decref(none);
    /* an incomplete pool: ExactCount allocates, All waits for the pool */
    json_t *spec = json_object_get(json_array_get(sl, 1), "spec");
    json_object_set_new(json_object_get(spec, "pool"), "resourceSliceCount", json_integer(3));
    json_decref(claims);
    claims = J("[" CLAIM(REQ("gpu", "gpu", ""), "") "]");
    in.claims = claims;
    assert_int_equal(ks_dra_allocate(&in, &res, &err), 0);
    assert_non_null(res);
    json_decref(res);
    json_decref(claims);
    claims = J("[" CLAIM(REQALL("gpu", "gpu", ""), "") "]");
    in.claims = claims;
    assert_int_equal(ks_dra_allocate(&in, &res, &err), -EINVAL);
    assert_string_equal(err,
                        "claim default/c, request gpu: asks for all devices, but resource pool "
                        "gpu.nvidia.com/node-a is currently being updated");
    free(err);
    ks_dra_cel_cache_free(cel);
    json_decref(claims);
    json_decref(cls);
    json_decref(sl);
    json_decref(node);
    json_decref(alloc);
}

/* ---- through the API ----------------------------------------------------------------------- */

static uint64_t fake_now = 1800000000000ull;
static uint64_t clock_fn(void *ctx)
{
    (void)ctx;
    return fake_now;
}

static struct ksim *new_ksim(void)
{
    struct ksim_opts o;
    ksim_opts_default(&o);
    o.now_ms = clock_fn;
    o.pod_ready_delay_ms = 0;
    return ksim_new(&o);
}

static json_t *call(struct ksim *ks, const char *method, const char *path, const char *body,
                    int *ret_code)
{
    char *b = body ? xstrdup(body) : NULL;
    for (char *p = b; p && *p; p++)
        if (*p == '`')
            *p = '"';
    const char *q = strchr(path, '?');
    char p[512];
    snprintf(p, sizeof(p), "%.*s", q ? (int)(q - path) : (int)strlen(path), path);
    struct ksim_request rq = {.method = method,
                              .path = p,
                              .query = q ? q + 1 : NULL,
                              .content_type = method[0] == 'P' && method[1] == 'A'
                                                  ? "application/merge-patch+json"
                                                  : "application/json",
                              .accept = "application/json",
                              .body = b,
                              .body_len = b ? strlen(b) : 0};
    struct ksim_response rs;
    ksim_handle(ks, &rq, &rs);
    *ret_code = rs.code;
    json_t *v = rs.body ? json_loads(rs.body, 0, NULL) : NULL;
    ksim_response_free(&rs);
    free(b);
    return v;
}

static void must(struct ksim *ks, const char *method, const char *path, const char *body, int code)
{
    int got = 0;
    json_t *v = call(ks, method, path, body, &got);
    if (got != code) {
        char *t = json_dumps(v, JSON_COMPACT);
        fail_msg("%s %s: %d, want %d: %s", method, path, got, code, t ? t : "");
    }
    json_decref(v);
}

#define RES  "/apis/resource.k8s.io/v1"
#define PODS "/api/v1/namespaces/default/pods"

struct vc {
    const char *what;
    const char *path;
    const char *body;
    const char *message; /* the Status message, exactly */
};

#define DC(spec)                                                                              \
    "{`apiVersion`: `resource.k8s.io/v1`, `kind`: `DeviceClass`, `metadata`: {`name`: `x`}, " \
    "`spec`: " spec "}"
#define RC(devices)                                                                             \
    "{`apiVersion`: `resource.k8s.io/v1`, `kind`: `ResourceClaim`, `metadata`: {`name`: `x`}, " \
    "`spec`: {`devices`: " devices "}}"
#define RS(spec)                                                                                \
    "{`apiVersion`: `resource.k8s.io/v1`, `kind`: `ResourceSlice`, `metadata`: {`name`: `x`}, " \
    "`spec`: " spec "}"
#define POOL "`pool`: {`name`: `p`, `resourceSliceCount`: 1}"

static const struct vc validation[] = {
    {"request without exactly or firstAvailable", RES "/namespaces/default/resourceclaims",
     RC("{`requests`: [{`name`: `gpu`}]}"),
     "ResourceClaim.resource.k8s.io \"x\" is invalid: spec.devices.requests[0]: Required value: "
     "exactly one of `exactly` or `firstAvailable` is required"},
    {"request with both", RES "/namespaces/default/resourceclaims",
     RC("{`requests`: [{`name`: `gpu`, `exactly`: {`deviceClassName`: `gpu`}, `firstAvailable`: "
        "[{`name`: `a`, `deviceClassName`: `gpu`}]}]}"),
     "ResourceClaim.resource.k8s.io \"x\" is invalid: spec.devices.requests[0]: Invalid value: "
     "\"null\": exactly one of `exactly` or `firstAvailable` is required, but multiple fields are "
     "set"},
    {"no device class", RES "/namespaces/default/resourceclaims",
     RC("{`requests`: [{`name`: `gpu`, `exactly`: {}}]}"),
     "ResourceClaim.resource.k8s.io \"x\" is invalid: "
     "spec.devices.requests[0].exactly.deviceClassName: Required value"},
    {"count with All", RES "/namespaces/default/resourceclaims",
     RC("{`requests`: [{`name`: `gpu`, `exactly`: {`deviceClassName`: `gpu`, `allocationMode`: "
        "`All`, `count`: 2}}]}"),
     "ResourceClaim.resource.k8s.io \"x\" is invalid: spec.devices.requests[0].exactly.count: "
     "Invalid value: 2: must not be specified when allocationMode is 'All'"},
    {"negative count", RES "/namespaces/default/resourceclaims",
     RC("{`requests`: [{`name`: `gpu`, `exactly`: {`deviceClassName`: `gpu`, `count`: -1}}]}"),
     "ResourceClaim.resource.k8s.io \"x\" is invalid: spec.devices.requests[0].exactly.count: "
     "Invalid value: -1: must be greater than zero"},
    {"unknown mode", RES "/namespaces/default/resourceclaims",
     RC("{`requests`: [{`name`: `gpu`, `exactly`: {`deviceClassName`: `gpu`, `allocationMode`: "
        "`Some`}}]}"),
     "ResourceClaim.resource.k8s.io \"x\" is invalid: "
     "spec.devices.requests[0].exactly.allocationMode: Unsupported value: \"Some\": supported "
     "values: \"All\", \"ExactCount\""},
    {"duplicate request", RES "/namespaces/default/resourceclaims",
     RC("{`requests`: [{`name`: `gpu`, `exactly`: {`deviceClassName`: `gpu`}}, {`name`: `gpu`, "
        "`exactly`: {`deviceClassName`: `gpu`}}]}"),
     "ResourceClaim.resource.k8s.io \"x\" is invalid: spec.devices.requests[1]: Duplicate value: "
     "\"gpu\""},
    {"a selector CEL refuses", RES "/namespaces/default/resourceclaims",
     RC("{`requests`: [{`name`: `gpu`, `exactly`: {`deviceClassName`: `gpu`, `selectors`: [{`cel`: "
        "{`expression`: `device.capacity['gpu.nvidia.com'].memory > quantity('80Gi')`}}]}}]}"),
     "ResourceClaim.resource.k8s.io \"x\" is invalid: "
     "spec.devices.requests[0].exactly.selectors[0].cel.expression: Invalid value: "
     "\"device.capacity['gpu.nvidia.com'].memory > quantity('80Gi')\": compilation failed: "
     "ERROR: <input>:1:42: found no matching overload for '_>_' applied to "
     "'(kubernetes.Quantity, kubernetes.Quantity)'\n"
     " | device.capacity['gpu.nvidia.com'].memory > quantity('80Gi')\n"
     " | .........................................^"},
    {"constraint on an unknown request", RES "/namespaces/default/resourceclaims",
     RC("{`requests`: [{`name`: `gpu`, `exactly`: {`deviceClassName`: `gpu`}}], `constraints`: "
        "[{`requests`: [`nic`], `matchAttribute`: `resource.kubernetes.io/pcieRoot`}]}"),
     "ResourceClaim.resource.k8s.io \"x\" is invalid: spec.devices.constraints[0].requests[0]: "
     "Invalid value: \"nic\": must be the name of a request in the claim or the name of a request "
     "and a subrequest separated by '/'"},
    {"matchAttribute without a domain", RES "/namespaces/default/resourceclaims",
     RC("{`requests`: [{`name`: `gpu`, `exactly`: {`deviceClassName`: `gpu`}}], `constraints`: "
        "[{`matchAttribute`: `pcieRoot`}]}"),
     "ResourceClaim.resource.k8s.io \"x\" is invalid: spec.devices.constraints[0].matchAttribute: "
     "Invalid value: \"pcieRoot\": a fully qualified name must be a domain and a name separated "
     "by a slash"},
    {"config without opaque", RES "/namespaces/default/resourceclaims",
     RC("{`requests`: [{`name`: `gpu`, `exactly`: {`deviceClassName`: `gpu`}}], `config`: [{}]}"),
     "ResourceClaim.resource.k8s.io \"x\" is invalid: spec.devices.config[0].opaque: Required "
     "value"},
    {"template", RES "/namespaces/default/resourceclaimtemplates",
     "{`apiVersion`: `resource.k8s.io/v1`, `kind`: `ResourceClaimTemplate`, `metadata`: {`name`: "
     "`x`}, `spec`: {`spec`: {`devices`: {`requests`: [{`name`: `Gpu`, `exactly`: "
     "{`deviceClassName`: `gpu`}}]}}}}",
     "ResourceClaimTemplate.resource.k8s.io \"x\" is invalid: spec.spec.devices.requests[0].name: "
     "Invalid value: \"Gpu\": a lowercase RFC 1123 label must consist of lower case alphanumeric "
     "characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  "
     "or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"},
    {"class selector", RES "/deviceclasses",
     DC("{`selectors`: [{`cel`: {`expression`: `device.driver`}}]}"),
     "DeviceClass.resource.k8s.io \"x\" is invalid: spec.selectors[0].cel.expression: Invalid "
     "value: \"device.driver\": must evaluate to bool or the unknown type, not string"},
    {"class extended resource", RES "/deviceclasses", DC("{`extendedResourceName`: `gpu`}"),
     "DeviceClass.resource.k8s.io \"x\" is invalid: spec.extendedResourceName: Invalid value: "
     "\"gpu\": must be a valid extended resource name"},
    {"slice without a node", RES "/resourceslices", RS("{`driver`: `gpu.nvidia.com`, " POOL "}"),
     "ResourceSlice.resource.k8s.io \"x\" is invalid: spec: Required value: exactly one of "
     "`nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required"},
    {"slice with two", RES "/resourceslices",
     RS("{`driver`: `gpu.nvidia.com`, `nodeName`: `n`, `allNodes`: true, " POOL "}"),
     "ResourceSlice.resource.k8s.io \"x\" is invalid: spec: Invalid value: \"{`nodeName`, "
     "`allNodes`}\": exactly one of `nodeName`, `nodeSelector`, `allNodes`, "
     "`perDeviceNodeSelection` is required, but multiple fields are set"},
    {"slice pool count", RES "/resourceslices",
     RS("{`driver`: `gpu.nvidia.com`, `nodeName`: `n`, `pool`: {`name`: `p`}}"),
     "ResourceSlice.resource.k8s.io \"x\" is invalid: spec.pool.resourceSliceCount: Invalid "
     "value: 0: must be greater than zero"},
    {"slice with counters and devices", RES "/resourceslices",
     RS("{`driver`: `gpu.nvidia.com`, `nodeName`: `n`, " POOL ", `devices`: [{`name`: `d`}], "
        "`sharedCounters`: [{`name`: `s`, `counters`: {`memory`: {`value`: `1Gi`}}}]}"),
     "ResourceSlice.resource.k8s.io \"x\" is invalid: spec: Invalid value: \"\": only one of "
     "`sharedCounters` or `devices` is allowed"},
    {"device attribute with two values", RES "/resourceslices",
     RS("{`driver`: `gpu.nvidia.com`, `nodeName`: `n`, " POOL ", `devices`: [{`name`: `d`, "
        "`attributes`: {`model`: {}}}]}"),
     "ResourceSlice.resource.k8s.io \"x\" is invalid: spec.devices[0].attributes[model]: Invalid "
     "value: \"\": exactly one value must be specified"},
    {"device version", RES "/resourceslices",
     RS("{`driver`: `gpu.nvidia.com`, `nodeName`: `n`, " POOL ", `devices`: [{`name`: `d`, "
        "`attributes`: {`driverVersion`: {`version`: `550.127`}}}]}"),
     "ResourceSlice.resource.k8s.io \"x\" is invalid: spec.devices[0].attributes[driverVersion]"
     ".version: Invalid value: \"550.127\": must be a string compatible with semver.org spec "
     "2.0.0"},
    {"device names", RES "/resourceslices",
     RS("{`driver`: `gpu.nvidia.com`, `nodeName`: `n`, " POOL ", `devices`: [{`name`: `d`}, "
        "{`name`: `d`}]}"),
     "ResourceSlice.resource.k8s.io \"x\" is invalid: spec.devices[1]: Duplicate value: \"d\""},
    {"pod claim without a source", PODS,
     "{`apiVersion`: `v1`, `kind`: `Pod`, `metadata`: {`name`: `pod0`}, `spec`: {`resourceClaims`: "
     "[{`name`: `gpu`}], `containers`: [{`name`: `c`, `image`: `i`}]}}",
     "Pod \"pod0\" is invalid: spec.resourceClaims[0]: Invalid value: "
     "core.PodResourceClaim{Name:\"gpu\", ResourceClaimName:(*string)(nil), "
     "ResourceClaimTemplateName:(*string)(nil)}: must specify one of: `resourceClaimName`, "
     "`resourceClaimTemplateName`"},
    {"container claim not in the pod", PODS,
     "{`apiVersion`: `v1`, `kind`: `Pod`, `metadata`: {`name`: `pod0`}, `spec`: {`containers`: "
     "[{`name`: `c`, `image`: `i`, `resources`: {`claims`: [{`name`: `gpu`}]}}]}}",
     "Pod \"pod0\" is invalid: spec.containers[0].resources.claims[0]: Not found: \"gpu\": must be "
     "one of the names in pod.spec.resourceClaims which is empty"},
};

static void test_validation(void **state)
{
    (void)state;
    struct ksim *ks = new_ksim();
    for (size_t i = 0; i < sizeof(validation) / sizeof(validation[0]); i++) {
        const struct vc *v = &validation[i];
        int code = 0;
        json_t *st = call(ks, "POST", v->path, v->body, &code);
        const char *msg = json_string_value(json_object_get(st, "message"));
        if (code != 422 || !msg || strcmp(msg, v->message) != 0)
            fail_msg("%s: %d\n got: %s\nwant: %s", v->what, code, msg ? msg : "(none)", v->message);
        json_decref(st);
    }
    ksim_free(ks);
}

#define CLASS                                                                                   \
    "{`apiVersion`: `resource.k8s.io/v1`, `kind`: `DeviceClass`, `metadata`: {`name`: `gpu`}, " \
    "`spec`: {`selectors`: [{`cel`: {`expression`: `device.driver == 'gpu.nvidia.com'`}}], "    \
    "`extendedResourceName`: `example.com/gpu`}}"
#define SLICE(n, devs)                                                                       \
    "{`apiVersion`: `resource.k8s.io/v1`, `kind`: `ResourceSlice`, `metadata`: {`name`: `" n \
    "`}, `spec`: {`driver`: `gpu.nvidia.com`, `nodeName`: `" n "`, `pool`: {`name`: `" n     \
    "`, `resourceSliceCount`: 1}, `devices`: [" devs "]}}"
#define DEV(name) "{`name`: `" name "`, `attributes`: {`type`: {`string`: `gpu`}}}"
#define TEMPLATE                                                                               \
    "{`apiVersion`: `resource.k8s.io/v1`, `kind`: `ResourceClaimTemplate`, `metadata`: "       \
    "{`name`: `one`, `labels`: {`a`: `b`}}, `spec`: {`metadata`: {`labels`: {`team`: `ml`}}, " \
    "`spec`: {`devices`: {`requests`: [{`name`: `gpu`, `exactly`: {`deviceClassName`: "        \
    "`gpu`}}]}}}}"
#define POD_T(name)                                                                            \
    "{`apiVersion`: `v1`, `kind`: `Pod`, `metadata`: {`name`: `" name "`}, `spec`: "           \
    "{`resourceClaims`: [{`name`: `gpu`, `resourceClaimTemplateName`: `one`}], `containers`: " \
    "[{`name`: `c`, `image`: `i`, `resources`: {`claims`: [{`name`: `gpu`}]}}]}}"

static json_t *get(struct ksim *ks, const char *path)
{
    int code = 0;
    json_t *v = call(ks, "GET", path, NULL, &code);
    assert_int_equal(code, 200);
    return v;
}

static const char *cond_message(json_t *pod)
{
    json_t *c = json_array_get(json_object_get(json_object_get(pod, "status"), "conditions"), 0);
    return json_string_value(json_object_get(c, "message"));
}

static void settle(struct ksim *ks)
{
    for (int i = 0; i < 10 && ksim_reconcile(ks); i++)
        fake_now += 10;
}

/* A claim per pod from its template; the second pod waits for the only device; deleting the
 * first releases, deallocates and deletes its claim, and the second gets the device. */
static void test_templates(void **state)
{
    (void)state;
    struct ksim *ks = new_ksim();
    must(ks, "POST", "/api/v1/nodes",
         "{`apiVersion`: `v1`, `kind`: `Node`, `metadata`: {`name`: `n1`}, `status`: "
         "{`allocatable`: {`pods`: `110`}}}",
         201);
    must(ks, "POST", RES "/deviceclasses", CLASS, 201);
    must(ks, "POST", RES "/resourceslices", SLICE("n1", DEV("gpu-0")), 201);
    must(ks, "POST", RES "/namespaces/default/resourceclaimtemplates", TEMPLATE, 201);
    must(ks, "POST", PODS, POD_T("p1"), 201);
    settle(ks);
    must(ks, "POST", PODS, POD_T("p2"), 201);
    settle(ks);
    json_t *p1 = get(ks, PODS "/p1"), *p2 = get(ks, PODS "/p2");
    assert_string_equal(json_string_value(json_object_get(json_object_get(p1, "spec"), "nodeName")),
                        "n1");
    const char *claim1 = json_string_value(json_object_get(
        json_array_get(json_object_get(json_object_get(p1, "status"), "resourceClaimStatuses"), 0),
        "resourceClaimName"));
    assert_non_null(claim1);
    assert_true(strncmp(claim1, "p1-gpu-", 7) == 0 && strlen(claim1) == 12);
    assert_null(json_object_get(json_object_get(p2, "spec"), "nodeName"));
    assert_string_equal(cond_message(p2),
                        "0/1 nodes are available: 1 cannot allocate all claims. still not "
                        "schedulable, preemption: 0/1 nodes are available: 1 Preemption is not "
                        "helpful for scheduling.");
    char path[256];
    snprintf(path, sizeof(path), RES "/namespaces/default/resourceclaims/%s", claim1);
    json_t *c1 = get(ks, path);
    json_t *meta = json_object_get(c1, "metadata");
    assert_string_equal(json_string_value(json_object_get(json_object_get(meta, "annotations"),
                                                          "resource.kubernetes.io/pod-claim-name")),
                        "gpu");
    assert_string_equal(json_string_value(json_object_get(json_object_get(meta, "labels"), "team")),
                        "ml");
    json_t *ref = json_array_get(json_object_get(meta, "ownerReferences"), 0);
    assert_string_equal(json_string_value(json_object_get(ref, "name")), "p1");
    assert_true(json_is_true(json_object_get(ref, "controller")));
    assert_string_equal(json_string_value(json_array_get(json_object_get(meta, "finalizers"), 0)),
                        "resource.kubernetes.io/delete-protection");
    json_t *st = json_object_get(c1, "status");
    assert_string_equal(json_string_value(json_object_get(
                            json_array_get(json_object_get(st, "reservedFor"), 0), "name")),
                        "p1");
    json_t *r0 = json_array_get(
        json_object_get(json_object_get(json_object_get(st, "allocation"), "devices"), "results"),
        0);
    assert_string_equal(json_string_value(json_object_get(r0, "device")), "gpu-0");
    /* the allocation is immutable; a reservation needs an allocation */
    int code = 0;
    char status_path[300];
    snprintf(status_path, sizeof(status_path), "%s/status", path);
    json_t *bad = call(ks, "PATCH", status_path,
                       "{`status`: {`allocation`: {`devices`: {`results`: [{`request`: `gpu`, "
                       "`driver`: `gpu.nvidia.com`, `pool`: `n1`, `device`: `gpu-1`}]}}}}",
                       &code);
    assert_int_equal(code, 422);
    json_decref(bad);

    /* p1 goes: its reservation, the allocation and then the claim go; p2 runs on gpu-0 */
    must(ks, "DELETE", PODS "/p1?gracePeriodSeconds=0", NULL, 200);
    settle(ks);
    json_t *gone = call(ks, "GET", path, NULL, &code);
    assert_int_equal(code, 404);
    json_decref(gone);
    json_decref(p2);
    p2 = get(ks, PODS "/p2");
    assert_string_equal(json_string_value(json_object_get(json_object_get(p2, "spec"), "nodeName")),
                        "n1");
    json_decref(p1);
    json_decref(p2);
    json_decref(c1);
    ksim_free(ks);
}

/* A pod asking for a DeviceClass's extended resource on a node without a device plugin for it
 * gets the special claim; the scheduler's messages for a missing class and a CEL error. */
static void test_extended_and_errors(void **state)
{
    (void)state;
    struct ksim *ks = new_ksim();
    must(ks, "POST", "/api/v1/nodes",
         "{`apiVersion`: `v1`, `kind`: `Node`, `metadata`: {`name`: `n1`}, `status`: "
         "{`allocatable`: {`pods`: `110`}}}",
         201);
    must(ks, "POST", RES "/deviceclasses", CLASS, 201);
    must(ks, "POST", RES "/resourceslices",
         SLICE("n1", DEV("gpu-0") "," DEV("gpu-1") "," DEV("gpu-2")), 201);
    must(ks, "POST", PODS,
         "{`apiVersion`: `v1`, `kind`: `Pod`, `metadata`: {`name`: `ext`}, `spec`: {`containers`: "
         "[{`name`: `c`, `image`: `i`, `resources`: {`limits`: {`example.com/gpu`: 2}}}]}}",
         201);
    settle(ks);
    json_t *pod = get(ks, PODS "/ext");
    json_t *ers = json_object_get(json_object_get(pod, "status"), "extendedResourceClaimStatus");
    const char *cn = json_string_value(json_object_get(ers, "resourceClaimName"));
    assert_non_null(cn);
    json_t *m = json_array_get(json_object_get(ers, "requestMappings"), 0);
    assert_string_equal(json_string_value(json_object_get(m, "requestName")),
                        "container-0-request-0");
    assert_string_equal(json_string_value(json_object_get(m, "resourceName")), "example.com/gpu");
    char path[256];
    snprintf(path, sizeof(path), RES "/namespaces/default/resourceclaims/%s", cn);
    json_t *claim = get(ks, path);
    assert_string_equal(json_string_value(json_object_get(
                            json_object_get(json_object_get(claim, "metadata"), "annotations"),
                            "resource.kubernetes.io/extended-resource-claim")),
                        "true");
    assert_int_equal(
        json_array_size(json_object_get(
            json_object_get(json_object_get(json_object_get(claim, "status"), "allocation"),
                            "devices"),
            "results")),
        2);
    json_decref(claim);
    json_decref(pod);

    /* a claim naming a class that does not exist: PreFilter */
    must(ks, "POST", RES "/namespaces/default/resourceclaims",
         RC("{`requests`: [{`name`: `gpu`, `exactly`: {`deviceClassName`: `nope`}}]}"), 201);
    must(ks, "POST", PODS,
         "{`apiVersion`: `v1`, `kind`: `Pod`, `metadata`: {`name`: `nc`}, `spec`: "
         "{`resourceClaims`: [{`name`: `g`, `resourceClaimName`: `x`}], `containers`: [{`name`: "
         "`c`, `image`: `i`}]}}",
         201);
    /* a selector that fails at run time on the free device: the scheduler stops with the CEL
     * error (devices in use are passed over before their selectors are evaluated) */
    must(ks, "POST", RES "/namespaces/default/resourceclaims",
         "{`apiVersion`: `resource.k8s.io/v1`, `kind`: `ResourceClaim`, `metadata`: {`name`: `y`}, "
         "`spec`: {`devices`: {`requests`: [{`name`: `gpu`, `exactly`: {`deviceClassName`: `gpu`, "
         "`selectors`: [{`cel`: {`expression`: `device.attributes['gpu.nvidia.com'].model == "
         "'x'`}}]}}]}}}",
         201);
    must(ks, "POST", PODS,
         "{`apiVersion`: `v1`, `kind`: `Pod`, `metadata`: {`name`: `ce`}, `spec`: "
         "{`resourceClaims`: [{`name`: `g`, `resourceClaimName`: `y`}], `containers`: [{`name`: "
         "`c`, `image`: `i`}]}}",
         201);
    /* a claim that does not exist: the pod waits, unmarked */
    must(ks, "POST", PODS,
         "{`apiVersion`: `v1`, `kind`: `Pod`, `metadata`: {`name`: `wait`}, `spec`: "
         "{`resourceClaims`: [{`name`: `g`, `resourceClaimName`: `missing`}], `containers`: "
         "[{`name`: `c`, `image`: `i`}]}}",
         201);
    settle(ks);
    pod = get(ks, PODS "/nc");
    assert_string_equal(cond_message(pod),
                        "0/1 nodes are available: request gpu: device class nope does not exist. "
                        "no new claims to deallocate, preemption: 0/1 nodes are available: 1 "
                        "Preemption is not helpful for scheduling.");
    json_decref(pod);
    pod = get(ks, PODS "/ce");
    assert_string_equal(cond_message(pod),
                        "running \"DynamicResources\" filter plugin: claim default/y: selector #0: "
                        "CEL runtime error: no such key: model");
    json_decref(pod);
    pod = get(ks, PODS "/wait");
    assert_null(json_object_get(json_object_get(pod, "status"), "conditions"));
    json_decref(pod);
    ksim_free(ks);
}

/* One claim shared by three pods: the first allocates it, the second (scheduled) goes where
 * the device is and is reserved too, the third (bound by its creator) is reserved by the
 * controller; the claim is deallocated only when the last of them is gone. */
static json_t *reserved_names(struct ksim *ks)
{
    json_t *c = get(ks, RES "/namespaces/default/resourceclaims/shared");
    json_t *names = json_array();
    size_t i;
    json_t *r;
    json_array_foreach (json_object_get(json_object_get(c, "status"), "reservedFor"), i, r)
        json_array_append(names, json_object_get(r, "name"));
    json_decref(c);
    return names;
}

#define POD_SHARED(name, extra)                                                             \
    "{`apiVersion`: `v1`, `kind`: `Pod`, `metadata`: {`name`: `" name "`}, `spec`: {" extra \
    "`resourceClaims`: [{`name`: `gpu`, `resourceClaimName`: `shared`}], `containers`: "    \
    "[{`name`: `c`, `image`: `i`, `resources`: {`claims`: [{`name`: `gpu`}]}}]}}"

static void test_shared_claim(void **state)
{
    (void)state;
    struct ksim *ks = new_ksim();
    for (int i = 1; i <= 2; i++) {
        char body[256];
        snprintf(body, sizeof(body),
                 "{`apiVersion`: `v1`, `kind`: `Node`, `metadata`: {`name`: `n%d`}, `status`: "
                 "{`allocatable`: {`pods`: `110`}}}",
                 i);
        must(ks, "POST", "/api/v1/nodes", body, 201);
    }
    must(ks, "POST", RES "/deviceclasses", CLASS, 201);
    must(ks, "POST", RES "/resourceslices", SLICE("n2", DEV("gpu-0")), 201);
    must(ks, "POST", RES "/namespaces/default/resourceclaims",
         "{`apiVersion`: `resource.k8s.io/v1`, `kind`: `ResourceClaim`, `metadata`: {`name`: "
         "`shared`}, `spec`: {`devices`: {`requests`: [{`name`: `gpu`, `exactly`: "
         "{`deviceClassName`: `gpu`}}]}}}",
         201);
    must(ks, "POST", PODS, POD_SHARED("a", ""), 201);
    settle(ks);
    must(ks, "POST", PODS, POD_SHARED("b", ""), 201);
    must(ks, "POST", PODS, POD_SHARED("c", "`nodeName`: `n2`, "), 201);
    settle(ks);
    json_t *b = get(ks, PODS "/b");
    assert_string_equal(json_string_value(json_object_get(json_object_get(b, "spec"), "nodeName")),
                        "n2");
    json_decref(b);
    /* the controller reserves for c in the same round the scheduler reserves for b */
    json_t *names = reserved_names(ks);
    char *t = json_dumps(names, JSON_COMPACT);
    assert_string_equal(t, "[\"a\",\"c\",\"b\"]");
    free(t);
    json_decref(names);
    must(ks, "DELETE", PODS "/a?gracePeriodSeconds=0", NULL, 200);
    must(ks, "DELETE", PODS "/b?gracePeriodSeconds=0", NULL, 200);
    settle(ks);
    json_t *c = get(ks, RES "/namespaces/default/resourceclaims/shared");
    assert_true(json_is_object(json_object_get(json_object_get(c, "status"), "allocation")));
    json_decref(c);
    must(ks, "DELETE", PODS "/c?gracePeriodSeconds=0", NULL, 200);
    settle(ks);
    c = get(ks, RES "/namespaces/default/resourceclaims/shared");
    assert_null(json_object_get(json_object_get(c, "status"), "allocation"));
    assert_null(json_object_get(json_object_get(c, "metadata"), "finalizers"));
    json_decref(c);
    ksim_free(ks);
}

/* Two pods created at once for the last device: exactly one gets it, whatever the threads'
 * order; the other is unschedulable, and no device is allocated twice. */
struct racer {
    struct ksim *ks;
    const char *name;
};

static void *create_pod(void *arg)
{
    struct racer *r = arg;
    char body[1024];
    snprintf(body, sizeof(body),
             "{`apiVersion`: `v1`, `kind`: `Pod`, `metadata`: {`name`: `%s`}, `spec`: "
             "{`resourceClaims`: [{`name`: `gpu`, `resourceClaimTemplateName`: `one`}], "
             "`containers`: [{`name`: `c`, `image`: `i`}]}}",
             r->name);
    int code = 0;
    json_decref(call(r->ks, "POST", PODS, body, &code));
    return NULL;
}

static void *reconciler(void *arg)
{
    struct ksim *ks = arg;
    for (int i = 0; i < 200; i++)
        ksim_reconcile(ks);
    return NULL;
}

static void test_race(void **state)
{
    (void)state;
    for (int round = 0; round < 20; round++) {
        struct ksim *ks = new_ksim();
        must(ks, "POST", "/api/v1/nodes",
             "{`apiVersion`: `v1`, `kind`: `Node`, `metadata`: {`name`: `n1`}, `status`: "
             "{`allocatable`: {`pods`: `110`}}}",
             201);
        must(ks, "POST", RES "/deviceclasses", CLASS, 201);
        must(ks, "POST", RES "/resourceslices", SLICE("n1", DEV("gpu-0")), 201);
        must(ks, "POST", RES "/namespaces/default/resourceclaimtemplates", TEMPLATE, 201);
        struct racer a = {ks, "a"}, b = {ks, "b"};
        pthread_t ta, tb, tr;
        pthread_create(&tr, NULL, reconciler, ks);
        pthread_create(&ta, NULL, create_pod, &a);
        pthread_create(&tb, NULL, create_pod, &b);
        pthread_join(ta, NULL);
        pthread_join(tb, NULL);
        pthread_join(tr, NULL);
        settle(ks);
        json_t *pa = get(ks, PODS "/a"), *pb = get(ks, PODS "/b");
        bool ba = json_object_get(json_object_get(pa, "spec"), "nodeName") != NULL;
        bool bb = json_object_get(json_object_get(pb, "spec"), "nodeName") != NULL;
        assert_true(ba != bb);
        json_t *claims = get(ks, RES "/namespaces/default/resourceclaims");
        size_t allocated = 0, i;
        json_t *c;
        json_array_foreach (json_object_get(claims, "items"), i, c)
            allocated +=
                json_is_object(json_object_get(json_object_get(c, "status"), "allocation"));
        assert_int_equal(allocated, 1);
        json_decref(claims);
        json_decref(pa);
        json_decref(pb);
        ksim_free(ks);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_allocate),
        cmocka_unit_test(test_config),
        cmocka_unit_test(test_validation),
        cmocka_unit_test(test_templates),
        cmocka_unit_test(test_extended_and_errors),
        cmocka_unit_test(test_shared_claim),
        cmocka_unit_test(test_race),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
