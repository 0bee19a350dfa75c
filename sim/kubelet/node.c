/* SPDX-License-Identifier: Apache-2.0 */
/* The Node object, its Lease and NFD's labels (kl-node.h): pure functions, the time passed in. */
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <string.h>
#include <time.h>

#include "kl-node.h"
#include "kobj.h"
#include "nodestate.h"
#include "yamlcfg.h"

#define KL_NFD_WORKER_VERSION "v0.17.2"

static const char *runtime_version(enum kl_runtime_kind k)
{
    switch (k) {
    case KL_RUNTIME_CONTAINERD:
        return "containerd://1.7.24";
    case KL_RUNTIME_CRIO:
        return "cri-o://1.30.4";
    case KL_RUNTIME_DOCKER:
        return "docker://27.3.1";
    }
    return "containerd://1.7.24";
}

const char *kl_pci_class_for_model(const char *model)
{
    static const char *const display[] = {"GeForce", "Quadro", "TITAN", "RTX"};
    for (size_t i = 0; i < ARRAY_SIZE(display); i++)
        if (model && strstr(model, display[i]))
            return "0300";
    return "0302";
}

json_t *kl_nfd_labels(const struct kl_node_spec *spec, const char *const *gpu_models)
{
    size_t n = 0;
    while (gpu_models && gpu_models[n])
        n++;
    _cleanup_free_ const char **classes = xcalloc(n + 1, sizeof(*classes));
    for (size_t i = 0; i < n; i++)
        classes[i] = kl_pci_class_for_model(gpu_models[i]);
    struct nodestate_nfd_input in = {.pci_classes = classes,
                                     .n_pci = n,
                                     .os_id = spec->os_id,
                                     .os_version_id = spec->os_version_id,
                                     .kernel = spec->kernel};
    return nodestate_nfd_labels(&in);
}

void kl_strv_free(char **v)
{
    for (char **p = v; p && *p; p++)
        free(*p);
    free(v);
}

/* Why pod processes run with intercept_tls_get_addr=0: the sanitizer runtime GCC 12 ships tracks
 * the dynamic TLS of dlopen'ed libraries (libcuda.so.1's and libnvidia-ml.so.1's __thread
 * variables) by intercepting __tls_get_addr and guessing each block's bounds: a block 16 bytes
 * into a page is taken for glibc 2.19's layout, its bounds read from a header before it. glibc
 * 2.34 on has no such header, and where its block lands there the runtime records garbage (seen:
 * "DTLS 8 at 0x0000000001cc-0x0008000012ce"), which LeakSanitizer's tracer scans at exit and dies
 * on ("Tracer caught signal 11"; the process exits 134 after its work succeeded). The heap layout
 * decides it, so it is deterministic per program and environment: the validator's cuda check on
 * the MIG node hit it in its pod on every try, never outside. Off, the blocks are still scanned:
 * glibc allocates them with the intercepted malloc and reaches them from the thread's DTV (a block
 * held only by a dlopen'ed library's __thread pointer is not reported), so no leak check is lost,
 * only the guess. */
static bool names_flag(const char *options, const char *flag)
{
    size_t n = strlen(flag);
    for (const char *p = options; p && *p;) {
        p += strspn(p, ": \t,");
        if (strncmp(p, flag, n) == 0 && p[n] == '=')
            return true;
        p += strcspn(p, ": \t,");
    }
    return false;
}

char **kl_sanitizer_env(const char *asan_options, const char *ubsan_options,
                        const char *lsan_options, bool asan)
{
    char **env = xcalloc(4, sizeof(char *));
    size_t i = 0;
    if (asan && !names_flag(asan_options, "intercept_tls_get_addr"))
        env[i++] =
            xasprintf("ASAN_OPTIONS=%s%sintercept_tls_get_addr=0", asan_options ? asan_options : "",
                      asan_options && *asan_options ? ":" : "");
    else if (asan_options)
        env[i++] = xasprintf("ASAN_OPTIONS=%s", asan_options);
    if (ubsan_options)
        env[i++] = xasprintf("UBSAN_OPTIONS=%s", ubsan_options);
    if (lsan_options)
        env[i++] = xasprintf("LSAN_OPTIONS=%s", lsan_options);
    assert(i < 4);
    return env;
}

int kl_fleet_gpu_models(const char *path, const char *text, size_t len, char ***ret, struct err *e)
{
    _cleanup_json_ json_t *doc = NULL;
    int r = yaml_parse_one(text, len, path, &doc, e);
    if (r < 0)
        return r;
    json_t *gpus = json_object_get(doc, "gpus");
    if (!json_is_array(gpus) || json_array_size(gpus) == 0)
        return err_set(e, -EINVAL, "%s: gpus: expected a list of GPUs", path);
    size_t n_entries = json_array_size(gpus), total = 0, i;
    _cleanup_free_ int64_t *counts = xcalloc(n_entries, sizeof(*counts));
    json_t *g;
    json_array_foreach (gpus, i, g) {
        char ctx[300];
        snprintf(ctx, sizeof(ctx), "%.200s: gpus[%zu]", path, i);
        const char *model = NULL;
        counts[i] = 1;
        if ((r = cfg_string(g, "model", ctx, true, &model, e)) < 0 ||
            (r = cfg_int64(g, "count", ctx, false, 1, KL_FLEET_MAX_GPUS, &counts[i], e)) < 0)
            return r;
        total += (size_t)counts[i];
        if (total > KL_FLEET_MAX_GPUS)
            return err_set(e, -E2BIG, "%s: gpus: more than %d GPUs", path, KL_FLEET_MAX_GPUS);
    }
    char **v = xcalloc(total + 1, sizeof(char *));
    size_t n = 0;
    json_array_foreach (gpus, i, g)
        for (int64_t c = 0; c < counts[i]; c++)
            v[n++] = xstrdup(json_string_value(json_object_get(g, "model")));
    *ret = v;
    return 0;
}

/* ---- local feature files ------------------------------------------------------------------ */

/* nfd-master's namespace rules, with the GPU operator chart's extraLabelNs: [nvidia.com]. */
static bool namespace_allowed(const char *ns, size_t n)
{
    static const char *const own[] = {"feature.node.kubernetes.io", "profile.node.kubernetes.io"};
    for (size_t i = 0; i < ARRAY_SIZE(own); i++) {
        size_t m = strlen(own[i]);
        if (n == m && strncmp(ns, own[i], m) == 0)
            return true;
        if (n > m + 1 && ns[n - m - 1] == '.' && strncmp(ns + n - m, own[i], m) == 0)
            return true;
    }
    return n == strlen("nvidia.com") && strncmp(ns, "nvidia.com", n) == 0;
}

/* "# +expiry-time=2026-12-02T03:50:24Z": true when the time has passed or does not parse (NFD
 * refuses the file then too). */
static bool expired(const char *value, uint64_t now_ms)
{
    struct tm tm = {0};
    const char *end = strptime(value, "%Y-%m-%dT%H:%M:%S", &tm);
    if (!end)
        return true;
    if (*end == '.')
        for (end++; isdigit((unsigned char)*end); end++)
            ;
    if (strcmp(end, "Z") != 0)
        return true;
    time_t t = timegm(&tm);
    return t < 0 || (uint64_t)t * 1000 <= now_ms;
}

int kl_features_parse(const char *text, size_t len, uint64_t now_ms, json_t *labels, struct err *e)
{
    if (len > KL_FEATURES_MAX_BYTES)
        return err_set(e, -EFBIG, "larger than %u bytes", KL_FEATURES_MAX_BYTES);
    _cleanup_json_ json_t *found = json_object();
    int skipped = 0;
    size_t pos = 0;
    while (pos < len) {
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t end = nl ? (size_t)(nl - text) : len;
        _cleanup_free_ char *line = xstrndup(text + pos, end - pos);
        pos = end + 1;
        size_t n = strlen(line); /* an embedded NUL cuts the line there */
        while (n > 0 && isspace((unsigned char)line[n - 1]))
            line[--n] = '\0';
        char *l = line;
        while (isspace((unsigned char)*l))
            l++;
        if (*l == '\0')
            continue;
        if (*l == '#') {
            const char *d = l + 1;
            while (*d == ' ')
                d++;
            if (str_has_prefix(d, "+expiry-time=") && expired(d + strlen("+expiry-time="), now_ms))
                return 0; /* the whole file is stale */
            continue;
        }
        char *eq = strchr(l, '=');
        const char *value = "true";
        if (eq) {
            *eq = '\0';
            value = eq + 1;
        }
        _cleanup_free_ char *name = NULL;
        const char *slash = strchr(l, '/');
        if (!slash)
            name = xasprintf("%s%s", KL_NFD_PREFIX, l);
        else if (namespace_allowed(l, (size_t)(slash - l)))
            name = xstrdup(l);
        if (!name || !kobj_valid_qualified_name(name) || !kobj_valid_label_value(value)) {
            skipped++;
            continue;
        }
        json_object_set_new(found, name, json_string(value));
    }
    json_object_update(labels, found);
    return skipped;
}

/* ---- identity ----------------------------------------------------------------------------- */

static uint64_t fnv1a64(const char *s, uint64_t salt)
{
    uint64_t h = 0xcbf29ce484222325ull ^ salt;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ull;
    }
    return h;
}

static void uuid_from(uint64_t a, uint64_t b, char *buf, size_t n)
{
    /* an RFC 4122 version 4 layout */
    snprintf(buf, n, "%08llx-%04llx-4%03llx-%04llx-%012llx", (unsigned long long)(a >> 32),
             (unsigned long long)((a >> 16) & 0xffff), (unsigned long long)(a & 0xfff),
             (unsigned long long)(0x8000 | ((b >> 48) & 0x3fff)),
             (unsigned long long)(b & 0xffffffffffffull));
}

void kl_node_ids(const char *name, struct kl_node_ids *ret)
{
    uint64_t m1 = fnv1a64(name, 1), m2 = fnv1a64(name, 2);
    snprintf(ret->machine_id, sizeof(ret->machine_id), "%016llx%016llx", (unsigned long long)m1,
             (unsigned long long)m2);
    uuid_from(fnv1a64(name, 3), fnv1a64(name, 4), ret->system_uuid, sizeof(ret->system_uuid));
    uuid_from(fnv1a64(name, 5), fnv1a64(name, 6), ret->boot_id, sizeof(ret->boot_id));
}

void kl_node_boot_id(const char *name, unsigned boot, char *buf, size_t n)
{
    uuid_from(fnv1a64(name, 5) + boot, fnv1a64(name, 6) + 7 * (uint64_t)boot, buf, n);
}

/* ---- the Node ------------------------------------------------------------------------------ */

/* A spec not from kl_cluster_parse (a test's) may leave arch unset: amd64. */
static const char *kl_node_arch(const struct kl_node_spec *spec)
{
    return spec->arch ? spec->arch : "amd64";
}

static void kubelet_labels(json_t *labels, const struct kl_node_spec *spec)
{
    json_object_set_new(labels, "kubernetes.io/hostname", json_string(spec->name));
    json_object_set_new(labels, "kubernetes.io/os", json_string("linux"));
    json_object_set_new(labels, "kubernetes.io/arch", json_string(kl_node_arch(spec)));
    json_object_set_new(labels, "beta.kubernetes.io/os", json_string("linux"));
    json_object_set_new(labels, "beta.kubernetes.io/arch", json_string(kl_node_arch(spec)));
}

static bool set_string(json_t *obj, const char *key, const char *value)
{
    if (streq_ptr(kobj_str(obj, key), value))
        return false;
    json_object_set_new(obj, key, json_string(value));
    return true;
}

int kl_node_apply_labels(json_t *node, const struct kl_node_spec *spec, json_t *nfd_labels)
{
    json_t *labels = kobj_ensure_keys(node, (const char *const[]){"metadata", "labels", NULL});
    json_t *annotations =
        kobj_ensure_keys(node, (const char *const[]){"metadata", "annotations", NULL});
    _cleanup_json_ json_t *before = json_deep_copy(json_object_get(node, "metadata"));

    kubelet_labels(labels, spec);
    set_string(annotations, KL_SIMULATED_ANN, "external");

    if (json_is_object(nfd_labels)) {
        nodestate_nfd_apply(labels, annotations, nfd_labels, KL_NFD_LABELS_ANN);
        set_string(annotations, "nfd.node.kubernetes.io/worker.version", KL_NFD_WORKER_VERSION);
    }
    return json_equal(before, json_object_get(node, "metadata")) ? 1 : 0;
}

static json_t *quantity_bytes(uint64_t bytes)
{
    if (bytes % 1024 == 0)
        return json_sprintf("%lluKi", (unsigned long long)(bytes / 1024));
    return json_sprintf("%llu", (unsigned long long)bytes);
}

/* An extended resource (a domain-prefixed name outside kubernetes.io), which the kubelet leaves
 * to its owner unless a device plugin serves it. */
static bool extended_resource(const char *name)
{
    const char *slash = strchr(name, '/');
    if (!slash)
        return false;
    size_t n = (size_t)(slash - name);
    return !(n >= 13 && strncmp(slash - 13, "kubernetes.io", 13) == 0);
}

static void resources(json_t *status, const struct kl_node_facts *f)
{
    const struct kl_node_spec *s = f->spec;
    json_t *old_cap = json_object_get(status, "capacity");
    json_t *old_alloc = json_object_get(status, "allocatable");
    json_t *cap = json_object(), *alloc = json_object();
    /* others' extended resources first, so device plugins' win */
    const char *k;
    json_t *v;
    json_object_foreach (old_cap, k, v)
        if (extended_resource(k))
            json_object_set(cap, k, v);
    json_object_foreach (old_alloc, k, v)
        if (extended_resource(k))
            json_object_set(alloc, k, v);
    json_object_set_new(cap, "cpu", json_sprintf("%llu", (unsigned long long)s->cpu));
    json_object_set_new(alloc, "cpu", json_sprintf("%llu", (unsigned long long)s->cpu));
    json_object_set_new(cap, "memory", quantity_bytes(s->memory_bytes));
    json_object_set_new(alloc, "memory",
                        quantity_bytes(s->memory_bytes > KL_EVICTION_RESERVE * 2
                                           ? s->memory_bytes - KL_EVICTION_RESERVE
                                           : s->memory_bytes / 2));
    json_object_set_new(cap, "pods", json_sprintf("%llu", (unsigned long long)s->pods));
    json_object_set_new(alloc, "pods", json_sprintf("%llu", (unsigned long long)s->pods));
    json_object_set_new(cap, "ephemeral-storage", quantity_bytes(KL_EPHEMERAL_STORAGE));
    json_object_set_new(alloc, "ephemeral-storage",
                        json_sprintf("%llu", (unsigned long long)(KL_EPHEMERAL_STORAGE / 10 * 9)));
    json_object_set_new(cap, "hugepages-1Gi", json_string("0"));
    json_object_set_new(alloc, "hugepages-1Gi", json_string("0"));
    json_object_set_new(cap, "hugepages-2Mi", json_string("0"));
    json_object_set_new(alloc, "hugepages-2Mi", json_string("0"));
    json_object_foreach (f->device_resources, k, v) {
        json_int_t c = json_integer_value(json_object_get(v, "capacity"));
        json_int_t a = json_integer_value(json_object_get(v, "allocatable"));
        json_object_set_new(cap, k, json_sprintf("%lld", (long long)(c > 0 ? c : 0)));
        json_object_set_new(alloc, k, json_sprintf("%lld", (long long)(a > 0 ? a : 0)));
    }
    json_object_set_new(status, "capacity", cap);
    json_object_set_new(status, "allocatable", alloc);
}

static void conditions(json_t *status, uint64_t now_ms)
{
    static const struct {
        const char *type, *status, *reason, *message;
    } want[] = {
        {"MemoryPressure", "False", "KubeletHasSufficientMemory",
         "kubelet has sufficient memory available"},
        {"DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"},
        {"PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"},
        {"Ready", "True", "KubeletReady", "kubelet is posting ready status"},
    };
    char now[32];
    time_rfc3339(now_ms, now, sizeof(now));
    json_t *old = json_object_get(status, "conditions");
    json_t *out = json_array();
    /* conditions of other types (a node problem detector's, the GPU health agent's) are kept,
     * as the kubelet keeps them */
    size_t k;
    json_t *other;
    json_array_foreach (old, k, other) {
        bool ours = false;
        for (size_t i = 0; i < ARRAY_SIZE(want); i++)
            ours |= streq_ptr(kobj_str(other, "type"), want[i].type);
        if (!ours)
            json_array_append(out, other);
    }
    for (size_t i = 0; i < ARRAY_SIZE(want); i++) {
        const char *transition = now;
        size_t j;
        json_t *c;
        json_array_foreach (old, j, c) {
            if (streq_ptr(kobj_str(c, "type"), want[i].type) &&
                streq_ptr(kobj_str(c, "status"), want[i].status) &&
                kobj_str(c, "lastTransitionTime"))
                transition = kobj_str(c, "lastTransitionTime");
        }
        json_array_append_new(out, json_pack("{s:s,s:s,s:s,s:s,s:s,s:s}", "type", want[i].type,
                                             "status", want[i].status, "lastHeartbeatTime", now,
                                             "lastTransitionTime", transition, "reason",
                                             want[i].reason, "message", want[i].message));
    }
    json_object_set_new(status, "conditions", out);
}

/* A copy of status without heartbeat times, to tell a change from a heartbeat. */
static json_t *without_heartbeats(json_t *status)
{
    json_t *c = json_deep_copy(status);
    if (!c)
        return json_object();
    size_t i;
    json_t *cond;
    json_array_foreach (json_object_get(c, "conditions"), i, cond)
        json_object_del(cond, "lastHeartbeatTime");
    return c;
}

int kl_node_apply_status(json_t *node, const struct kl_node_facts *f, bool force)
{
    json_t *status = json_object_get(node, "status");
    if (!json_is_object(status)) {
        status = json_object();
        json_object_set_new(node, "status", status);
    }
    _cleanup_json_ json_t *before = without_heartbeats(status);
    const struct kl_node_spec *s = f->spec;
    resources(status, f);
    conditions(status, f->now_ms);
    struct kl_node_ids ids;
    kl_node_ids(s->name, &ids);
    kl_node_boot_id(s->name, f->boot, ids.boot_id, sizeof(ids.boot_id));
    json_object_set_new(
        status, "nodeInfo",
        json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s}", "machineID", ids.machine_id,
                  "systemUUID", ids.system_uuid, "bootID", ids.boot_id, "kernelVersion", s->kernel,
                  "osImage", s->os_pretty, "containerRuntimeVersion", runtime_version(s->runtime),
                  "kubeletVersion", KL_KUBELET_VERSION, "kubeProxyVersion", KL_KUBELET_VERSION,
                  "operatingSystem", "linux", "architecture", kl_node_arch(s)));
    json_object_set_new(status, "addresses",
                        json_pack("[{s:s,s:s},{s:s,s:s}]", "type", "InternalIP", "address",
                                  f->ip ? f->ip : "127.0.0.1", "type", "Hostname", "address",
                                  s->name));
    json_object_set_new(status, "daemonEndpoints",
                        json_pack("{s:{s:i}}", "kubeletEndpoint", "Port",
                                  (int)(f->kubelet_port ? f->kubelet_port : KL_KUBELET_PORT)));
    _cleanup_json_ json_t *after = without_heartbeats(status);
    return force || !json_equal(before, after) ? 0 : 1;
}

json_t *kl_node_object(const struct kl_node_facts *f)
{
    const struct kl_node_spec *s = f->spec;
    json_t *labels = json_deep_copy(s->labels ? s->labels : json_object());
    if (!labels)
        labels = json_object();
    kubelet_labels(labels, s);
    json_t *node = json_pack("{s:s,s:s,s:{s:s,s:o,s:{s:s,s:s,s:s}}}", "apiVersion", "v1", "kind",
                             "Node", "metadata", "name", s->name, "labels", labels, "annotations",
                             KL_SIMULATED_ANN, "external", "node.alpha.kubernetes.io/ttl", "0",
                             "volumes.kubernetes.io/controller-managed-attach-detach", "true");
    kl_node_apply_status(node, f, true);
    return node;
}

/* ---- the Lease ------------------------------------------------------------------------------ */

static void micro_time(uint64_t unix_ms, char *buf, size_t n)
{
    time_t t = (time_t)(unix_ms / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    char head[24];
    strftime(head, sizeof(head), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, n, "%s.%06lluZ", head, (unsigned long long)(unix_ms % 1000) * 1000);
}

void kl_lease_renew(json_t *lease, const char *node, unsigned duration_s, uint64_t now_ms)
{
    json_t *spec = kobj_ensure_object(lease, "spec");
    char now[40];
    micro_time(now_ms, now, sizeof(now));
    json_object_set_new(spec, "holderIdentity", json_string(node));
    json_object_set_new(spec, "leaseDurationSeconds", json_integer(duration_s));
    json_object_set_new(spec, "renewTime", json_string(now));
}

json_t *kl_lease_object(const char *node, const char *node_uid, unsigned duration_s,
                        uint64_t now_ms)
{
    json_t *lease =
        json_pack("{s:s,s:s,s:{s:s,s:s}}", "apiVersion", "coordination.k8s.io/v1", "kind", "Lease",
                  "metadata", "name", node, "namespace", KL_LEASE_NAMESPACE);
    if (node_uid)
        json_object_set_new(json_object_get(lease, "metadata"), "ownerReferences",
                            json_pack("[{s:s,s:s,s:s,s:s}]", "apiVersion", "v1", "kind", "Node",
                                      "name", node, "uid", node_uid));
    kl_lease_renew(lease, node, duration_s, now_ms);
    return lease;
}
