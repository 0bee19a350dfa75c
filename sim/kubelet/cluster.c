/* SPDX-License-Identifier: Apache-2.0 */
/* The cluster file (kubelet-sim.h): YAML in, checked node specs out, no file-system access. */
#include <ctype.h>
#include <errno.h>
#include <string.h>

#include "kobj.h"
#include "kubelet-sim.h"
#include "yamlcfg.h"

#define KL_CLUSTER_MAX_NODES   4096
#define KL_MAX_KERNEL_HEADERS  64
#define KL_KERNEL_RELEASE_MAX  64 /* uname's release field holds 65 bytes */
#define KL_PATH_MAX            4096
#define KL_NODE_NAME_MAX       63 /* the name is also the kubernetes.io/hostname label value */
#define KL_DEFAULT_CPU         8
#define KL_DEFAULT_MEMORY      (32ull << 30)
#define KL_DEFAULT_PODS        110
#define KL_CLUSTER_API_VERSION "gpuop.dev/v1alpha1"
#define KL_CLUSTER_KIND        "SimCluster"

static void node_spec_clear(struct kl_node_spec *n)
{
    free(n->name);
    free(n->fleet);
    free(n->root);
    free(n->kernel);
    free(n->os_id);
    free(n->os_version_id);
    free(n->os_pretty);
    if (n->kernel_headers)
        for (char **h = n->kernel_headers; *h; h++)
            free(*h);
    free(n->kernel_headers);
    free(n->host_driver);
    json_decref(n->labels);
}

void kl_cluster_free(struct kl_cluster *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->n_nodes; i++)
        node_spec_clear(&c->nodes[i]);
    free(c->nodes);
    free(c);
}
DEFINE_CLEANUP_FUNC(struct kl_cluster, kl_cluster_free)

/* Joins base and rel (rel absolute: rel alone) and removes ".", ".." and repeated slashes
 * lexically, as a shell user reads the path. ".." at the top of an absolute path stays at "/". */
static int path_resolve(const char *base, const char *rel, char **ret)
{
    struct sbuf joined _cleanup_sbuf_;
    sbuf_init(&joined, KL_PATH_MAX);
    if (rel[0] != '/' && base[0] != '\0')
        sbuf_addf(&joined, "%s/", base);
    sbuf_adds(&joined, rel);
    int r = sbuf_check(&joined);
    if (r < 0)
        return r;
    bool absolute = joined.data[0] == '/';
    /* segments kept, as offsets into a copy whose separators become NULs */
    _cleanup_free_ char *copy = xstrdup(joined.data);
    size_t n_seg = 0, cap = 16;
    _cleanup_free_ const char **seg = xcalloc(cap, sizeof(*seg));
    char *save = NULL;
    for (char *s = strtok_r(copy, "/", &save); s; s = strtok_r(NULL, "/", &save)) {
        if (strcmp(s, ".") == 0)
            continue;
        if (strcmp(s, "..") == 0) {
            if (n_seg > 0 && strcmp(seg[n_seg - 1], "..") != 0)
                n_seg--;
            else if (!absolute)
                seg[n_seg++] = s;
        } else {
            seg[n_seg++] = s;
        }
        if (n_seg == cap) {
            cap *= 2;
            seg = xrealloc(seg, cap * sizeof(*seg));
        }
    }
    struct sbuf out _cleanup_sbuf_;
    sbuf_init(&out, KL_PATH_MAX);
    if (absolute)
        sbuf_adds(&out, "/");
    for (size_t i = 0; i < n_seg; i++)
        sbuf_addf(&out, "%s%s", i ? "/" : "", seg[i]);
    if (!absolute && n_seg == 0)
        sbuf_adds(&out, ".");
    if ((r = sbuf_check(&out)) < 0)
        return r;
    *ret = sbuf_steal(&out);
    return 0;
}

/* The folder of the cluster file, "" when the path names no folder. */
static char *cluster_dir(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return xstrdup("");
    if (slash == path)
        return xstrdup("/");
    return xstrndup(path, (size_t)(slash - path));
}

/* Reads an optional/required string field that must be non-empty and free of control bytes. */
static int get_text(json_t *obj, const char *key, const char *ctx, bool required, char **ret,
                    struct err *e)
{
    const char *s = NULL;
    int r = cfg_string(obj, key, ctx, required, &s, e);
    if (r <= 0)
        return r;
    if (s[0] == '\0')
        return err_set(e, -EINVAL, "%s.%s: must not be empty", ctx, key);
    for (const char *p = s; *p; p++)
        if (iscntrl((unsigned char)*p))
            return err_set(e, -EINVAL, "%s.%s: holds a control character", ctx, key);
    *ret = xstrdup(s);
    return 1;
}

/* A kernel release as `uname -r` prints it: 1-64 bytes of [A-Za-z0-9._+~-], a digit first. */
static bool kernel_release_valid(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > KL_KERNEL_RELEASE_MAX || !isdigit((unsigned char)s[0]))
        return false;
    return strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._+~-") == n;
}

/* A driver version as NVIDIA numbers them: 2 or 3 dot-separated decimal fields ("550.127.05"). */
static bool driver_version_valid(const char *s)
{
    unsigned fields = 0;
    const char *p = s;
    for (;;) {
        size_t d = strspn(p, "0123456789");
        if (d == 0 || d > 6)
            return false;
        fields++;
        p += d;
        if (*p == '\0')
            break;
        if (*p++ != '.')
            return false;
    }
    return fields >= 2 && fields <= 3;
}

/* A memory size: an integer (bytes) or a resource.Quantity of whole bytes ("2015564Mi", "32Gi",
 * "64G", "1e9"). Fractions, milli-units and negative values are refused. */
static int get_memory(json_t *obj, const char *key, const char *ctx, uint64_t *ret, struct err *e)
{
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v))
        return 0;
    if (json_is_integer(v)) {
        if (json_integer_value(v) <= 0)
            return err_set(e, -ERANGE, "%s.%s: must be above zero", ctx, key);
        *ret = (uint64_t)json_integer_value(v);
        return 1;
    }
    if (!json_is_string(v))
        return err_set(e, -EINVAL, "%s.%s: expected a quantity such as 64Gi, got %s", ctx, key,
                       cfg_type_name(v));
    const char *s = json_string_value(v);
    bool negative = false;
    if (!kobj_valid_quantity(s, &negative))
        return err_set(e, -EINVAL, "%s.%s: \"%s\" is not a quantity such as 64Gi", ctx, key, s);
    const char *p = s;
    if (*p == '+')
        p++;
    size_t digits = strspn(p, "0123456789");
    if (negative || *p == '-' || digits == 0 || p[digits] == '.')
        return err_set(e, -EINVAL, "%s.%s: \"%s\" is not a whole positive number of bytes", ctx,
                       key, s);
    uint64_t mant = 0;
    for (size_t i = 0; i < digits; i++) {
        if (mant > (UINT64_MAX - 9) / 10)
            return err_set(e, -ERANGE, "%s.%s: \"%s\" is too large", ctx, key, s);
        mant = mant * 10 + (uint64_t)(p[i] - '0');
    }
    const char *suf = p + digits;
    static const struct {
        const char *suffix;
        unsigned base, exp;
    } mult[] = {
        {"", 10, 0},   {"Ki", 2, 10}, {"Mi", 2, 20}, {"Gi", 2, 30}, {"Ti", 2, 40},
        {"Pi", 2, 50}, {"Ei", 2, 60}, {"k", 10, 3},  {"M", 10, 6},  {"G", 10, 9},
        {"T", 10, 12}, {"P", 10, 15}, {"E", 10, 18},
    };
    unsigned base = 0, exp = 0;
    for (size_t i = 0; i < ARRAY_SIZE(mult); i++)
        if (strcmp(suf, mult[i].suffix) == 0) {
            base = mult[i].base;
            exp = mult[i].exp;
            break;
        }
    if (base == 0 && (suf[0] == 'e' || suf[0] == 'E')) {
        int64_t x;
        if (suf[1] == '-' || parse_i64(suf + 1 + (suf[1] == '+'), &x) < 0 || x > 19)
            return err_set(e, -EINVAL, "%s.%s: \"%s\" is not a whole positive number of bytes", ctx,
                           key, s);
        base = 10;
        exp = (unsigned)x;
    }
    if (base == 0)
        return err_set(e, -EINVAL, "%s.%s: \"%s\" is not a whole positive number of bytes", ctx,
                       key, s);
    uint64_t bytes = mant;
    for (unsigned i = 0; i < exp && bytes; i++) {
        if (bytes > UINT64_MAX / base)
            return err_set(e, -ERANGE, "%s.%s: \"%s\" is too large", ctx, key, s);
        bytes *= base;
    }
    if (bytes == 0)
        return err_set(e, -ERANGE, "%s.%s: must be above zero", ctx, key);
    *ret = bytes;
    return 1;
}

static int get_path(json_t *obj, const char *key, const char *ctx, bool required, const char *base,
                    char **ret, struct err *e)
{
    _cleanup_free_ char *raw = NULL;
    int r = get_text(obj, key, ctx, required, &raw, e);
    if (r <= 0)
        return r;
    _cleanup_free_ char *abs = NULL;
    if (path_resolve(base, raw, &abs) < 0)
        return err_set(e, -ENAMETOOLONG, "%s.%s: the path is too long", ctx, key);
    if (abs[0] != '/')
        return err_set(e, -EINVAL,
                       "%s.%s: \"%s\" resolves to \"%s\", not an absolute path (name the "
                       "cluster file by an absolute path, or give an absolute %s)",
                       ctx, key, raw, abs, key);
    *ret = steal_ptr(&abs);
    return 1;
}

static int parse_os(json_t *node, const char *ctx, struct kl_node_spec *n, struct err *e)
{
    json_t *os = NULL;
    int r = cfg_object(node, "os", ctx, true, &os, e);
    if (r < 0)
        return r;
    char octx[300];
    snprintf(octx, sizeof(octx), "%s.os", ctx);
    static const char *const keys[] = {"id", "versionId", "prettyName", NULL};
    if ((r = cfg_known_keys(os, octx, keys, e)) < 0)
        return r;
    if ((r = get_text(os, "id", octx, true, &n->os_id, e)) < 0 ||
        (r = get_text(os, "versionId", octx, true, &n->os_version_id, e)) < 0 ||
        (r = get_text(os, "prettyName", octx, false, &n->os_pretty, e)) < 0)
        return r;
    /* both become label values (feature.node.kubernetes.io/system-os_release.*) */
    if (!kobj_valid_label_value(n->os_id))
        return err_set(e, -EINVAL, "%s.id: \"%s\" is not a valid label value", octx, n->os_id);
    if (!kobj_valid_label_value(n->os_version_id))
        return err_set(e, -EINVAL, "%s.versionId: \"%s\" is not a valid label value", octx,
                       n->os_version_id);
    if (!n->os_pretty)
        n->os_pretty = xasprintf("%s %s", n->os_id, n->os_version_id);
    return 0;
}

static int parse_runtime(json_t *node, const char *ctx, struct kl_node_spec *n, struct err *e)
{
    const char *s = NULL;
    int r = cfg_string(node, "runtime", ctx, true, &s, e);
    if (r < 0)
        return r;
    if (strcmp(s, "containerd") == 0)
        n->runtime = KL_RUNTIME_CONTAINERD;
    else if (strcmp(s, "cri-o") == 0)
        n->runtime = KL_RUNTIME_CRIO;
    else if (strcmp(s, "docker") == 0)
        n->runtime = KL_RUNTIME_DOCKER;
    else
        return err_set(e, -EINVAL, "%s.runtime: \"%s\" is not one of containerd, cri-o, docker",
                       ctx, s);
    return 0;
}

static int parse_headers(json_t *node, const char *ctx, struct kl_node_spec *n, struct err *e)
{
    json_t *list = NULL;
    int r = cfg_array(node, "kernelHeaders", ctx, false, &list, e);
    if (r < 0)
        return r;
    size_t count = list ? json_array_size(list) : 0;
    if (count > KL_MAX_KERNEL_HEADERS)
        return err_set(e, -E2BIG, "%s.kernelHeaders: more than %d entries", ctx,
                       KL_MAX_KERNEL_HEADERS);
    n->kernel_headers = xcalloc(count + 1, sizeof(char *));
    for (size_t i = 0; i < count; i++) {
        json_t *v = json_array_get(list, i);
        if (!json_is_string(v))
            return err_set(e, -EINVAL, "%s.kernelHeaders[%zu]: expected a string, got %s", ctx, i,
                           cfg_type_name(v));
        const char *k = json_string_value(v);
        if (!kernel_release_valid(k))
            return err_set(e, -EINVAL,
                           "%s.kernelHeaders[%zu]: \"%s\" is not a kernel release such as "
                           "5.15.0-127-generic",
                           ctx, i, k);
        for (size_t j = 0; j < i; j++)
            if (strcmp(n->kernel_headers[j], k) == 0)
                return err_set(e, -EINVAL, "%s.kernelHeaders[%zu]: \"%s\" is listed twice", ctx, i,
                               k);
        n->kernel_headers[i] = xstrdup(k);
    }
    return 0;
}

static int parse_labels(json_t *node, const char *ctx, struct kl_node_spec *n, struct err *e)
{
    json_t *labels = NULL;
    int r = cfg_object(node, "labels", ctx, false, &labels, e);
    if (r < 0)
        return r;
    n->labels = json_object();
    if (!labels)
        return 0;
    const char *k;
    json_t *v;
    json_object_foreach (labels, k, v) {
        if (!kobj_valid_qualified_name(k))
            return err_set(e, -EINVAL, "%s.labels: \"%s\" is not a valid label key", ctx, k);
        if (!json_is_string(v))
            return err_set(e, -EINVAL, "%s.labels.%s: expected a string, got %s", ctx, k,
                           cfg_type_name(v));
        if (!kobj_valid_label_value(json_string_value(v)))
            return err_set(e, -EINVAL, "%s.labels.%s: \"%s\" is not a valid label value", ctx, k,
                           json_string_value(v));
        json_object_set_new(n->labels, k, json_string(json_string_value(v)));
    }
    return 0;
}

/* One root inside another's would mix two nodes' host files. */
static bool path_within(const char *inner, const char *outer)
{
    size_t n = strlen(outer);
    return strncmp(inner, outer, n) == 0 && (inner[n] == '\0' || inner[n] == '/');
}

/* Against the nodes before it: a name twice, or two nodes sharing host files. */
static int check_name_unique(const struct kl_cluster *c, size_t i, const char *ctx, struct err *e)
{
    for (size_t j = 0; j < i; j++)
        if (strcmp(c->nodes[j].name, c->nodes[i].name) == 0)
            return err_set(e, -EINVAL, "%s.name: duplicate node name \"%s\" (nodes[%zu])", ctx,
                           c->nodes[i].name, j);
    return 0;
}

static int check_root_unique(const struct kl_cluster *c, size_t i, const char *ctx, struct err *e)
{
    const struct kl_node_spec *n = &c->nodes[i];
    for (size_t j = 0; j < i; j++) {
        const struct kl_node_spec *o = &c->nodes[j];
        if (strcmp(o->root, n->root) == 0)
            return err_set(e, -EINVAL, "%s.root: \"%s\" is also the root of nodes[%zu] (\"%s\")",
                           ctx, n->root, j, o->name);
        if (path_within(n->root, o->root) || path_within(o->root, n->root))
            return err_set(e, -EINVAL,
                           "%s.root: \"%s\" and the root of nodes[%zu] (\"%s\") lie one inside "
                           "the other",
                           ctx, n->root, j, o->name);
    }
    return 0;
}

/* arch: the node's architecture as Kubernetes names it (kubernetes.io/arch, nodeInfo); amd64 when
 * left out, arm64 for a Grace (GH200, GB200) node. */
static int parse_arch(json_t *node, const char *ctx, struct kl_node_spec *n, struct err *e)
{
    static const char *const known[] = {"amd64", "arm64"};
    _cleanup_free_ char *arch = NULL;
    int r = get_text(node, "arch", ctx, false, &arch, e);
    if (r < 0)
        return r;
    n->arch = known[0];
    if (!arch)
        return 0;
    for (size_t i = 0; i < ARRAY_SIZE(known); i++)
        if (strcmp(arch, known[i]) == 0) {
            n->arch = known[i];
            return 0;
        }
    return err_set(e, -EINVAL, "%s.arch: \"%s\" is not a node architecture (amd64, arm64)", ctx,
                   arch);
}

static int parse_node(struct kl_cluster *c, size_t i, json_t *node, const char *ctx,
                      const char *base, struct err *e)
{
    struct kl_node_spec *n = &c->nodes[i];
    static const char *const keys[] = {"name",    "fleet",         "root",       "kernel", "os",
                                       "runtime", "kernelHeaders", "hostDriver", "cpu",    "memory",
                                       "pods",    "labels",        "arch",       NULL};
    int r;
    if (!json_is_object(node))
        return err_set(e, -EINVAL, "%s: expected a mapping, got %s", ctx, cfg_type_name(node));
    if ((r = cfg_known_keys(node, ctx, keys, e)) < 0)
        return r;
    if ((r = get_text(node, "name", ctx, true, &n->name, e)) < 0)
        return r;
    if (!kobj_valid_dns_subdomain(n->name))
        return err_set(e, -EINVAL,
                       "%s.name: \"%s\" is not a DNS-1123 subdomain (lower-case letters, digits, "
                       "'-' and '.', alphanumeric at both ends)",
                       ctx, n->name);
    if (strlen(n->name) > KL_NODE_NAME_MAX)
        return err_set(e, -EINVAL,
                       "%s.name: \"%s\" is longer than %d bytes (it is the node's hostname)", ctx,
                       n->name, KL_NODE_NAME_MAX);
    if ((r = check_name_unique(c, i, ctx, e)) < 0)
        return r;
    if ((r = get_path(node, "fleet", ctx, false, base, &n->fleet, e)) < 0 ||
        (r = get_path(node, "root", ctx, true, base, &n->root, e)) < 0)
        return r;
    if (strcmp(n->root, "/") == 0)
        return err_set(e, -EINVAL, "%s.root: the host's \"/\" cannot be a node root", ctx);
    if ((r = check_root_unique(c, i, ctx, e)) < 0)
        return r;
    if ((r = get_text(node, "kernel", ctx, true, &n->kernel, e)) < 0)
        return r;
    if (!kernel_release_valid(n->kernel))
        return err_set(e, -EINVAL,
                       "%s.kernel: \"%s\" is not a kernel release such as 5.15.0-127-generic", ctx,
                       n->kernel);
    if ((r = parse_os(node, ctx, n, e)) < 0 || (r = parse_runtime(node, ctx, n, e)) < 0 ||
        (r = parse_headers(node, ctx, n, e)) < 0)
        return r;
    if ((r = get_text(node, "hostDriver", ctx, false, &n->host_driver, e)) < 0)
        return r;
    if (n->host_driver && !driver_version_valid(n->host_driver))
        return err_set(e, -EINVAL,
                       "%s.hostDriver: \"%s\" is not a driver version such as 550.127.05", ctx,
                       n->host_driver);
    if (n->host_driver && !n->fleet)
        return err_set(e, -EINVAL,
                       "%s.hostDriver: a node without a fleet (a CPU node) has no driver", ctx);
    int64_t cpu = KL_DEFAULT_CPU, pods = KL_DEFAULT_PODS;
    n->memory_bytes = KL_DEFAULT_MEMORY;
    if ((r = cfg_int64(node, "cpu", ctx, false, 1, 100000, &cpu, e)) < 0 ||
        (r = get_memory(node, "memory", ctx, &n->memory_bytes, e)) < 0 ||
        (r = cfg_int64(node, "pods", ctx, false, 1, 10000, &pods, e)) < 0)
        return r;
    n->cpu = (uint64_t)cpu;
    n->pods = (uint64_t)pods;
    if ((r = parse_arch(node, ctx, n, e)) < 0)
        return r;
    return parse_labels(node, ctx, n, e);
}

int kl_cluster_parse(const char *path, const char *text, size_t len, struct kl_cluster **ret,
                     struct err *e)
{
    _cleanup_json_ json_t *doc = NULL;
    int r = yaml_parse_one(text, len, path, &doc, e);
    if (r < 0)
        return r;
    if (!json_is_object(doc))
        return err_set(e, -EINVAL, "%s: expected a mapping at the top, got %s", path,
                       cfg_type_name(doc));
    const char *k;
    json_t *v;
    json_object_foreach (doc, k, v) {
        if (strcmp(k, "apiVersion") != 0 && strcmp(k, "kind") != 0 && strcmp(k, "nodes") != 0)
            return err_set(e, -EINVAL, "%s: unknown field \"%s\" (known: apiVersion, kind, nodes)",
                           path, k);
    }
    json_t *api = json_object_get(doc, "apiVersion"), *kind = json_object_get(doc, "kind");
    if (!json_is_string(api) || strcmp(json_string_value(api), KL_CLUSTER_API_VERSION) != 0)
        return err_set(e, -EINVAL, "%s: apiVersion: expected \"%s\"", path, KL_CLUSTER_API_VERSION);
    if (!json_is_string(kind) || strcmp(json_string_value(kind), KL_CLUSTER_KIND) != 0)
        return err_set(e, -EINVAL, "%s: kind: expected \"%s\"", path, KL_CLUSTER_KIND);
    json_t *nodes = json_object_get(doc, "nodes");
    if (!json_is_array(nodes))
        return err_set(e, -EINVAL, "%s: nodes: expected a list of nodes, got %s", path,
                       nodes ? cfg_type_name(nodes) : "nothing");
    size_t count = json_array_size(nodes);
    if (count == 0)
        return err_set(e, -EINVAL, "%s: nodes: the list is empty", path);
    if (count > KL_CLUSTER_MAX_NODES)
        return err_set(e, -E2BIG, "%s: nodes: more than %d nodes", path, KL_CLUSTER_MAX_NODES);

    _cleanup_free_ char *base = cluster_dir(path);
    struct kl_cluster *c _cleanup_(kl_cluster_freep) = xcalloc(1, sizeof(*c));
    c->nodes = xcalloc(count, sizeof(*c->nodes));
    for (size_t i = 0; i < count; i++) {
        char ctx[256];
        snprintf(ctx, sizeof(ctx), "%.200s: nodes[%zu]", path, i);
        c->n_nodes = i + 1; /* so a half-filled spec is freed */
        if ((r = parse_node(c, i, json_array_get(nodes, i), ctx, base, e)) < 0)
            return r;
    }
    *ret = steal_ptr(&c);
    return 0;
}
