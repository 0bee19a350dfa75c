/* SPDX-License-Identifier: Apache-2.0 */
/* build/kubelet-sim: the shell. Reads and checks the cluster file and every node before anything
 * starts (bad input: one line, exit 2), then runs each node (node-run.c) and keeps their Node
 * objects and Leases until SIGTERM. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <poll.h>
#include <stddef.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kl-arch.h"
#include "kl-net.h"
#include "kl-node.h"
#include "kube.h"
#include "kubelet-sim.h"
#include "svc.h"

#define KL_COMPONENT          "kubelet-sim"
#define KL_CLUSTER_FILE_MAX   (1u << 20)
#define KL_LEASE_RENEW_MS     10000u
#define KL_STATUS_REPORT_MS   (5u * 60 * 1000) /* the kubelet's nodeStatusReportFrequency */
#define KL_BACKOFF_BASE_MS    10000.0
#define KL_BACKOFF_MAX_MS     300000.0
#define KL_API_QPS_PER_NODE   50.0 /* the kubelet's kubeAPIQPS default */
#define KL_API_BURST_PER_NODE 100u /* and kubeAPIBurst */
#define KL_INOTIFY_PER_NODE   32u  /* inotify instances a node's agents may take */

#if defined(__x86_64__)
#define KL_HOST_ARCH "amd64"
#elif defined(__aarch64__)
#define KL_HOST_ARCH "arm64"
#else
#define KL_HOST_ARCH "unknown"
#endif

struct kubelet_sim {
    const char *cluster_path, *kubeconfig, *subnet, *bridge, *root_base, *backoff_scale;
    const char *gpuop_exe, *sim_image_bin, *nvml_library, *pod_api_server, *arm64_build;
    uint64_t status_interval_ms, lease_duration_ms;
    unsigned kubelet_port;
    bool no_netns, no_nfd;
    /* from configure */
    struct kl_cluster *cluster;
    char ***gpu_models; /* per node, NULL-terminated; NULL for a CPU node */
    double backoff;
    char *exe_dir;
    struct kl_arch_host host; /* what runs an arm64 node's programs here */
    char *arm64_dir, *qemu;   /* host's strings */
};

static const struct svc_option kl_options[] = {
    {.flag = "cluster",
     .env = "KUBELET_SIM_CLUSTER",
     .kind = SVC_STRING,
     .off = offsetof(struct kubelet_sim, cluster_path),
     .metavar = "FILE",
     .help = "the cluster file: the simulated nodes (required)"},
    {.kind = SVC_FRAGMENT,
     .fragment = svc_kubeconfig_option,
     .off = offsetof(struct kubelet_sim, kubeconfig)},
    {.flag = "root-base",
     .kind = SVC_STRING,
     .off = offsetof(struct kubelet_sim, root_base),
     .metavar = "DIR",
     .help = "every node's root is DIR/<node name>, not the file's root"},
    {.flag = "subnet",
     .kind = SVC_STRING,
     .off = offsetof(struct kubelet_sim, subnet),
     .metavar = "CIDR",
     .help = "the nodes' addresses (198.18.0.0/16); the bridge has the first"},
    {.flag = "bridge",
     .kind = SVC_STRING,
     .off = offsetof(struct kubelet_sim, bridge),
     .metavar = "NAME",
     .help = "the bridge the nodes' veths join (klbr0)"},
    {.flag = "pod-api-server",
     .kind = SVC_STRING,
     .off = offsetof(struct kubelet_sim, pod_api_server),
     .metavar = "URL",
     .help = "the API server as pods reach it from their node (default: the\nkubeconfig's; "
             "a loopback one becomes the bridge's address)"},
    {.flag = "no-netns",
     .kind = SVC_FLAG,
     .off = offsetof(struct kubelet_sim, no_netns),
     .help = "no network namespaces (no root needed): every node on 127.0.0.1,\n"
             "node i's kubelet endpoint on --kubelet-port + i"},
    {.flag = "no-nfd",
     .kind = SVC_FLAG,
     .off = offsetof(struct kubelet_sim, no_nfd),
     .help = "a cluster without Node Feature Discovery: no NFD labels, no nfd-worker\n"
             "annotation (gpuop node-discovery's case)"},
    {.flag = "kubelet-port",
     .kind = SVC_UINT,
     .min = 1,
     .max = 65000,
     .off = offsetof(struct kubelet_sim, kubelet_port),
     .metavar = "PORT",
     .help = "the kubelet endpoint's port (10250)"},
    {.flag = "backoff-scale",
     .kind = SVC_STRING,
     .off = offsetof(struct kubelet_sim, backoff_scale),
     .metavar = "FACTOR",
     .help = "scales the restart backoff, 10s doubling to 5m (1; 0.01 in tests)"},
    {.flag = "node-status-interval",
     .kind = SVC_DURATION,
     .min = 100,
     .finite = true,
     .off = offsetof(struct kubelet_sim, status_interval_ms),
     .metavar = "DUR",
     .help = "how often status is computed, and posted when it changed (10s)"},
    {.flag = "lease-duration",
     .kind = SVC_DURATION,
     .min = 1000,
     .finite = true,
     .off = offsetof(struct kubelet_sim, lease_duration_ms),
     .metavar = "DUR",
     .help = "the node Lease's duration (40s); it is renewed every 10s"},
    {.flag = "gpuop",
     .kind = SVC_STRING,
     .off = offsetof(struct kubelet_sim, gpuop_exe),
     .metavar = "PATH",
     .help = "the gpuop binary gpuop images run (beside kubelet-sim)"},
    {.flag = "sim-image-bin",
     .kind = SVC_STRING,
     .off = offsetof(struct kubelet_sim, sim_image_bin),
     .metavar = "DIR",
     .help = "the simulated images' programs (sim-image-bin beside kubelet-sim)"},
    {.flag = "nvml-library",
     .kind = SVC_STRING,
     .off = offsetof(struct kubelet_sim, nvml_library),
     .metavar = "PATH",
     .help = "the simulated libnvidia-ml.so.1 (beside kubelet-sim)"},
    {.flag = "arm64-build",
     .kind = SVC_STRING,
     .off = offsetof(struct kubelet_sim, arm64_build),
     .metavar = "DIR",
     .help = "the aarch64 cross tree arm64 nodes run, under qemu-user (build-arm64\n"
             "beside kubelet-sim's folder, when it holds gpuop)"},
    {0},
};

static void kl_defaults(void *state)
{
    struct kubelet_sim *k = state;
    k->subnet = "198.18.0.0/16";
    k->bridge = "klbr0";
    k->kubelet_port = 10250;
    k->backoff_scale = "1";
    k->status_interval_ms = 10000;
    k->lease_duration_ms = 40000;
}

static char *beside_exe(const char *dir, const char *name)
{
    return xasprintf("%s/%s", dir, name);
}

/* A root must be a directory, or absent with its nearest existing parent a directory. */
static int check_root(const char *cluster, size_t i, const char *root, struct err *e)
{
    struct stat st;
    if (stat(root, &st) == 0) {
        if (!S_ISDIR(st.st_mode))
            return err_set(e, -ENOTDIR, "%s: nodes[%zu].root: \"%s\" exists and is not a directory",
                           cluster, i, root);
        return 0;
    }
    if (errno != ENOENT && errno != ENOTDIR)
        return err_errno(e, -errno, "%s: nodes[%zu].root: \"%s\"", cluster, i, root);
    _cleanup_free_ char *p = xstrdup(root);
    for (char *slash = strrchr(p, '/'); slash; slash = strrchr(p, '/')) {
        *slash = '\0';
        const char *parent = p[0] ? p : "/";
        if (stat(parent, &st) == 0) {
            if (!S_ISDIR(st.st_mode))
                return err_set(e, -ENOTDIR,
                               "%s: nodes[%zu].root: \"%s\" cannot be created: \"%s\" is not a "
                               "directory",
                               cluster, i, root, parent);
            return 0;
        }
        if (!p[0])
            break;
    }
    return 0;
}

/* ---- arm64 nodes (kl-arch.h): the cross tree, qemu-user, binfmt_misc ------------------------ */

/* What an arm64 node's pods run from a cross tree (a `make cross ARCH=arm64` build folder). */
static const char *const arm64_tree_files[] = {"gpuop", "gpuop-tomlx.so", "libnvidia-ml.so.1",
                                               "libcuda.so.1", "sim-image-bin/nvidia-driver"};

/* NULL when dir holds an aarch64 gpuop and the simulated libraries and images; else what is
 * missing or of another machine (owned). */
static char *arm64_tree_lacks(const char *dir)
{
    for (size_t i = 0; i < ARRAY_SIZE(arm64_tree_files); i++) {
        _cleanup_free_ char *p = xasprintf("%s/%s", dir, arm64_tree_files[i]);
        _cleanup_close_ int fd = open(p, O_RDONLY | O_CLOEXEC);
        unsigned char head[64];
        ssize_t n = fd >= 0 ? read(fd, head, sizeof(head)) : -1;
        if (n < 0)
            return xasprintf("\"%s\": %s", p, strerror(errno));
        if (!kl_arch_elf_is_aarch64(head, (size_t)n))
            return xasprintf("\"%s\" is not an aarch64 program", p);
    }
    return NULL;
}

static bool binfmt_aarch64(void)
{
    struct err e = {0};
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    return file_read_all("/proc/sys/fs/binfmt_misc/qemu-aarch64", 4096, &text, &len, &e) == 0 &&
           str_has_prefix(text, "enabled\n");
}

/* The cross tree and qemu-user, when a node is arm64 and this machine is not: --arm64-build
 * (checked: bad input) or build-arm64 beside this build's folder (used when complete). */
static int arm64_host(struct kubelet_sim *k, struct err *e)
{
    k->host.arch = KL_HOST_ARCH;
    bool want = false;
    for (size_t i = 0; i < k->cluster->n_nodes; i++)
        want = want || strcmp(k->cluster->nodes[i].arch, "arm64") == 0;
    if (!want || strcmp(KL_HOST_ARCH, "arm64") == 0)
        return 0;
    _cleanup_free_ char *dflt = xasprintf("%s/../build-arm64", k->exe_dir);
    const char *dir = k->arm64_build ? k->arm64_build : dflt;
    _cleanup_free_ char *abs = realpath(dir, NULL);
    _cleanup_free_ char *lacks = abs ? arm64_tree_lacks(abs) : NULL;
    if (k->arm64_build && !abs)
        return err_errno(e, -errno, "--arm64-build: \"%s\"", k->arm64_build);
    if (k->arm64_build && lacks)
        return err_set(e, -EINVAL, "--arm64-build: %s (make cross ARCH=arm64)", lacks);
    if (abs && lacks)
        log_warn(KL_COMPONENT, "the arm64 cross tree is incomplete: not used",
                 "tree=%s lacks=\"%s\"", abs, lacks);
    if (abs && !lacks)
        k->arm64_dir = steal_ptr(&abs);
    struct err qe = {0};
    _cleanup_free_ char *q = NULL;
    if (proc_find("qemu-aarch64-static", &q, &qe) < 0 && proc_find("qemu-aarch64", &q, &qe) < 0)
        q = NULL;
    k->qemu = q ? realpath(q, NULL) : NULL;
    k->host = (struct kl_arch_host){.arch = KL_HOST_ARCH,
                                    .arm64_dir = k->arm64_dir,
                                    .qemu = k->qemu,
                                    .binfmt = binfmt_aarch64()};
    return 0;
}

/* The shims of an arm64 node run under qemu (kl_arch_shim): <root>/var/lib/gpuop-sim/arm64/gpuop
 * and one per simulated image's program in .../sim-image-bin, each running the cross tree's. */
static int arm64_shims(const struct kl_node_spec *n, const char *qemu, const char *tree,
                       char **ret_gpuop, char **ret_bin, struct err *e)
{
    _cleanup_free_ char *dir = xasprintf("%s/var/lib/gpuop-sim/arm64", n->root);
    _cleanup_free_ char *bin = xasprintf("%s/sim-image-bin", dir);
    _cleanup_free_ char *tree_bin = xasprintf("%s/sim-image-bin", tree);
    _cleanup_free_ char *gpuop = xasprintf("%s/gpuop", dir);
    _cleanup_free_ char *target = xasprintf("%s/gpuop", tree);
    _cleanup_free_ char *text = NULL;
    int r = mkdir_p(bin, 0755);
    if (r < 0)
        return err_errno(e, r, "mkdir \"%s\"", bin);
    if ((r = kl_arch_shim(qemu, target, &text, e)) < 0 ||
        (r = file_write_atomic(gpuop, text, strlen(text), 0755, e)) < 0)
        return r;
    _cleanup_(closedirp) DIR *d = opendir(tree_bin);
    if (!d)
        return err_errno(e, -errno, "opendir \"%s\"", tree_bin);
    for (struct dirent *de; (de = readdir(d));) {
        if (de->d_name[0] == '.')
            continue;
        _cleanup_free_ char *src = xasprintf("%s/%s", tree_bin, de->d_name);
        _cleanup_free_ char *real = realpath(src, NULL);
        _cleanup_free_ char *shim = xasprintf("%s/%s", bin, de->d_name);
        _cleanup_free_ char *stext = NULL;
        if (!real)
            return err_errno(e, -errno, "realpath \"%s\"", src);
        if ((r = kl_arch_shim(qemu, real, &stext, e)) < 0 ||
            (r = file_write_atomic(shim, stext, strlen(stext), 0755, e)) < 0)
            return r;
    }
    *ret_gpuop = steal_ptr(&gpuop);
    *ret_bin = steal_ptr(&bin);
    return 0;
}

static int kl_configure(struct svc *s, struct err *e)
{
    struct kubelet_sim *k = svc_state(s);
    if (!k->cluster_path)
        return err_set(e, -EINVAL, "--cluster: required (the cluster file)");
    char *end = NULL;
    errno = 0;
    k->backoff = strtod(k->backoff_scale, &end);
    if (errno || end == k->backoff_scale || *end || !(k->backoff > 0) || k->backoff > 1000)
        return err_set(e, -EINVAL, "--backoff-scale: \"%s\" is not a factor in (0, 1000]",
                       k->backoff_scale);
    /* relative paths in the file are relative to it: give the parser an absolute name */
    _cleanup_free_ char *abs = NULL;
    if (k->cluster_path[0] == '/') {
        abs = xstrdup(k->cluster_path);
    } else {
        char cwd[PATH_MAX];
        if (!getcwd(cwd, sizeof(cwd)))
            return err_errno(e, -errno, "getcwd");
        abs = xasprintf("%s/%s", cwd, k->cluster_path);
    }
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    int r = file_read_all(k->cluster_path, KL_CLUSTER_FILE_MAX, &text, &len, e);
    if (r < 0)
        return r;
    struct kl_cluster *c = NULL;
    if ((r = kl_cluster_parse(abs, text, len, &c, e)) < 0) {
        /* name the file as the user gave it */
        size_t n = strlen(abs);
        if (strncmp(e->msg, abs, n) == 0) {
            char tmp[ERR_MSG_MAX];
            snprintf(tmp, sizeof(tmp), "%s%s", k->cluster_path, e->msg + n);
            snprintf(e->msg, sizeof(e->msg), "%s", tmp);
        }
        return r;
    }
    k->cluster = c;
    if (k->root_base) {
        if (k->root_base[0] != '/')
            return err_set(e, -EINVAL, "--root-base: \"%s\" is not an absolute path", k->root_base);
        for (size_t i = 0; i < c->n_nodes; i++) {
            free(c->nodes[i].root);
            c->nodes[i].root = xasprintf("%s/%s", k->root_base, c->nodes[i].name);
        }
    }
    k->gpu_models = xcalloc(c->n_nodes, sizeof(*k->gpu_models));
    for (size_t i = 0; i < c->n_nodes; i++) {
        const struct kl_node_spec *n = &c->nodes[i];
        if ((r = check_root(k->cluster_path, i, n->root, e)) < 0)
            return r;
        if (!n->fleet)
            continue;
        _cleanup_free_ char *fleet = NULL;
        size_t flen = 0;
        struct err fe = {0};
        if ((r = file_read_all(n->fleet, KL_CLUSTER_FILE_MAX, &fleet, &flen, &fe)) < 0 ||
            (r = kl_fleet_gpu_models(n->fleet, fleet, flen, &k->gpu_models[i], &fe)) < 0)
            return err_set(e, r, "%s: nodes[%zu].fleet: %s", k->cluster_path, i, err_msg(&fe));
    }
    /* the programs pods run, beside this binary unless named */
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0)
        return err_errno(e, -errno, "readlink /proc/self/exe");
    self[n] = '\0';
    *strrchr(self, '/') = '\0';
    k->exe_dir = xstrdup(self);
    if ((r = arm64_host(k, e)) < 0)
        return r;
    if (!k->no_netns && geteuid() != 0)
        return err_set(e, -EPERM, "network namespaces need root: run as root, or with --no-netns");
    if (k->no_netns && k->kubelet_port + c->n_nodes > 65535)
        return err_set(e, -ERANGE, "--kubelet-port: %u + %zu nodes passes 65535", k->kubelet_port,
                       c->n_nodes);
    return 0;
}

static void kl_cleanup(void *state)
{
    struct kubelet_sim *k = state;
    if (k->gpu_models && k->cluster)
        for (size_t i = 0; i < k->cluster->n_nodes; i++) {
            kl_strv_free(k->gpu_models[i]);
        }
    free(k->gpu_models);
    kl_cluster_free(k->cluster);
    free(k->exe_dir);
    free(k->arm64_dir);
    free(k->qemu);
}

struct kl_run {
    struct kl_net *net;
    struct kl_node **nodes;
    size_t n_nodes;
    int wake_fd;
    char **programs; /* per node: its gpuop, sim-image-bin, NVML library (arm64 nodes' own) */
    size_t n_programs;
};

static void run_stop(struct kl_run *r)
{
    for (size_t i = r->n_nodes; i > 0; i--)
        kl_node_stop(r->nodes[i - 1]);
    free(r->nodes);
    for (size_t i = 0; i < r->n_programs; i++)
        free(r->programs[i]);
    free(r->programs);
    if (r->net)
        kl_net_free(r->net);
    if (r->wake_fd >= 0)
        close(r->wake_fd);
}

static void sync_nodes(struct svc *s, struct kl_run *run, bool all, bool force, bool lease)
{
    for (size_t i = 0; i < run->n_nodes && !svc_stopped(s); i++) {
        if (!all && !kl_node_dirty(run->nodes[i]))
            continue;
        struct err e = {0};
        if (kl_node_sync(run->nodes[i], force, lease, &e) < 0 && !svc_stopped(s))
            log_warn(KL_COMPONENT, "node sync failed", "error=\"%s\"", err_msg(&e));
    }
}

/* Every simulated node's agents share this machine's inotify instances (one user, root), which a
 * real node has to itself: the default of 128 runs out at a few tens of nodes (the device plugin
 * then fails with EMFILE). Raised to KL_INOTIFY_PER_NODE per node when lower; a failure is
 * only a warning (not root: those tests skip anyway). */
static void inotify_limit_raise(size_t n_nodes)
{
    static const char path[] = "/proc/sys/fs/inotify/max_user_instances";
    struct err e = {0};
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    if (file_read_all(path, 64, &text, &len, &e) < 0)
        return;
    unsigned long have = strtoul(text, NULL, 10);
    unsigned long want = 128 + KL_INOTIFY_PER_NODE * (unsigned long)n_nodes;
    if (have >= want)
        return;
    _cleanup_free_ char *val = xasprintf("%lu\n", want);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    bool ok = fd >= 0 && write(fd, val, strlen(val)) == (ssize_t)strlen(val);
    if (fd >= 0)
        close(fd);
    if (ok)
        log_info(KL_COMPONENT, "inotify instances raised for the simulated nodes",
                 "sysctl=fs.inotify.max_user_instances from=%lu to=%lu", have, want);
    else
        log_warn(KL_COMPONENT, "inotify instances may run out",
                 "sysctl=fs.inotify.max_user_instances "
                 "value=%lu wanted=%lu error=\"%s\"",
                 have, want, strerror(errno));
}

static int kl_run(struct svc *s, struct err *e)
{
    struct kubelet_sim *k = svc_state(s);
    const struct kl_cluster *c = k->cluster;
    _cleanup_free_ char *pod_api = NULL;
    /* One client serves every node: its rate limit is what that many kubelets would have,
     * each with the kubelet's own defaults (kubeAPIQPS 50, kubeAPIBurst 100). */
    struct kube_options ko = {.kubeconfig = k->kubeconfig,
                              .qps = KL_API_QPS_PER_NODE * (double)c->n_nodes,
                              .burst = KL_API_BURST_PER_NODE * (unsigned)c->n_nodes,
                              .stop = svc_stop(s)};
    _cleanup_(kube_client_freep) struct kube_client *kc = NULL;
    int r = kube_client_new(&ko, &kc, e);
    if (r < 0)
        return err_prefix(e, "API client");
    _cleanup_free_ char *gpuop =
        k->gpuop_exe ? xstrdup(k->gpuop_exe) : beside_exe(k->exe_dir, "gpuop");
    _cleanup_free_ char *bin =
        k->sim_image_bin ? xstrdup(k->sim_image_bin) : beside_exe(k->exe_dir, "sim-image-bin");
    _cleanup_free_ char *nvml =
        k->nvml_library ? xstrdup(k->nvml_library) : beside_exe(k->exe_dir, "libnvidia-ml.so.1");
    struct kl_run run = {.nodes = xcalloc(c->n_nodes, sizeof(struct kl_node *)),
                         .wake_fd = -1,
                         .programs = xcalloc(3 * c->n_nodes, sizeof(char *))};
    run.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (run.wake_fd < 0) {
        r = err_errno(e, -errno, "eventfd");
        goto out;
    }
    inotify_limit_raise(c->n_nodes);
    if (!k->no_netns && (r = kl_net_new(k->bridge, k->subnet, &run.net, e)) < 0) {
        r = err_prefix(e, "network");
        goto out;
    }
    /* Pods in a node's namespace reach the API server at the kubeconfig's address unless it is
     * a loopback one, which is the pod's own there: then at the bridge's (the host's) address,
     * which reaches an API server listening on all addresses. */
    pod_api = k->pod_api_server ? xstrdup(k->pod_api_server) : NULL;
    const char *url = kube_client_server(kc);
    const char *hp = strstr(url ? url : "", "://");
    hp = hp ? hp + 3 : (url ? url : "");
    bool loopback = str_has_prefix(hp, "127.") || str_has_prefix(hp, "localhost") ||
                    str_has_prefix(hp, "0.0.0.0") || str_has_prefix(hp, "[::1]");
    if (!pod_api && run.net && loopback) {
        const char *end = strchrnul(hp, '/');
        const char *colon = memrchr(hp, ':', (size_t)(end - hp));
        pod_api = xasprintf("%.*s%s:%.*s", (int)(hp - url), url, kl_net_host_ip(run.net),
                            colon ? (int)(end - colon - 1) : 3, colon ? colon + 1 : "443");
        log_warn(KL_COMPONENT, "pods reach the API server at the bridge's address",
                 "kubeconfig=%s pods=%s", url, pod_api);
    }
    uint64_t base = (uint64_t)fmax(1.0, KL_BACKOFF_BASE_MS * k->backoff);
    uint64_t max = (uint64_t)fmax((double)base, KL_BACKOFF_MAX_MS * k->backoff);
    bool fallback_said = false;
    for (size_t i = 0; i < c->n_nodes && !svc_stopped(s); i++) {
        /* the node's programs: this machine's build, or the arm64 cross tree (kl-arch.h) */
        _cleanup_(kl_arch_plan_clear) struct kl_arch_plan plan = {0};
        /* kept until the nodes stop (their configs point into them) */
        char **node_gpuop = &run.programs[run.n_programs++];
        char **node_bin = &run.programs[run.n_programs++];
        char **node_nvml = &run.programs[run.n_programs++];
        if ((r = kl_arch_plan(c->nodes[i].arch, &k->host, &plan, e)) < 0)
            goto out;
        if (plan.mode == KL_ARCH_FALLBACK && !fallback_said) {
            log_warn(KL_COMPONENT, "arm64 nodes run this machine's programs",
                     "node=%s reason=\"%s\"", c->nodes[i].name, plan.reason);
            fallback_said = true;
        }
        if (plan.mode == KL_ARCH_QEMU &&
            (r = arm64_shims(&c->nodes[i], k->qemu, plan.tree, node_gpuop, node_bin, e)) < 0) {
            r = err_prefix(e, "node \"%s\": arm64 programs", c->nodes[i].name);
            goto out;
        }
        if (plan.mode == KL_ARCH_BINFMT) {
            *node_gpuop = xasprintf("%s/gpuop", plan.tree);
            *node_bin = xasprintf("%s/sim-image-bin", plan.tree);
        }
        if (plan.tree) {
            *node_nvml = xasprintf("%s/libnvidia-ml.so.1", plan.tree);
            log_info(KL_COMPONENT, "arm64 node runs the aarch64 build", "node=%s tree=%s via=%s",
                     c->nodes[i].name, plan.tree,
                     plan.mode == KL_ARCH_QEMU ? k->qemu : "binfmt_misc");
        }
        struct kl_node_config nc = {
            .spec = &c->nodes[i],
            .gpu_models = (const char *const *)k->gpu_models[i],
            .index = (unsigned)i,
            .net = run.net,
            .kubelet_port = k->no_netns ? k->kubelet_port + (unsigned)i : k->kubelet_port,
            .kc = kc,
            .gpuop_exe = *node_gpuop ? *node_gpuop : gpuop,
            .sim_image_bin = *node_bin ? *node_bin : bin,
            .nvml_library = *node_nvml ? *node_nvml : nvml,
            .programs_dir = plan.tree ? k->arm64_dir : NULL,
            .backoff_base_ms = base,
            .backoff_max_ms = max,
            .lease_duration_s = (unsigned)((k->lease_duration_ms + 999) / 1000),
            .wake_fd = run.wake_fd,
            .api_server = pod_api,
            .no_nfd = k->no_nfd,
        };
        if ((r = kl_node_start(&nc, &run.nodes[i], e)) < 0) {
            if (!svc_stopped(s))
                goto out;
            /* a stop while nodes start (their API calls end on it) is a stop, not a failure */
            err_clear(e);
            r = 0;
            break;
        }
        run.n_nodes = i + 1;
        log_info(KL_COMPONENT, "node started", "node=%s ip=%s port=%u root=%s", c->nodes[i].name,
                 kl_node_ip(run.nodes[i]), nc.kubelet_port, c->nodes[i].root);
    }
    log_info(KL_COMPONENT, "serving", "nodes=%zu", run.n_nodes);
    uint64_t next_status = deadline_after(k->status_interval_ms);
    uint64_t next_lease = deadline_after(KL_LEASE_RENEW_MS);
    uint64_t next_report = deadline_after(KL_STATUS_REPORT_MS);
    while (!svc_stopped(s)) {
        uint64_t next = next_status < next_lease ? next_status : next_lease;
        struct pollfd p[2] = {{.fd = svc_event_fd(s), .events = POLLIN},
                              {.fd = run.wake_fd, .events = POLLIN}};
        if (poll(p, 2, deadline_poll_ms(next)) < 0 && errno != EINTR) {
            r = err_errno(e, -errno, "poll");
            goto out;
        }
        if ((p[0].revents & POLLIN) && svc_dispatch(s) == SVC_STOP)
            break;
        if (p[1].revents & POLLIN) {
            uint64_t v;
            if (read(run.wake_fd, &v, sizeof(v)) < 0) {
                /* drained by an earlier read */
            }
            sync_nodes(s, &run, false, false, false);
        }
        bool status_due = deadline_left_ms(next_status) == 0;
        bool lease_due = deadline_left_ms(next_lease) == 0;
        bool report_due = deadline_left_ms(next_report) == 0;
        if (status_due || lease_due)
            sync_nodes(s, &run, true, report_due, lease_due);
        if (status_due)
            next_status = deadline_after(k->status_interval_ms);
        if (lease_due)
            next_lease = deadline_after(KL_LEASE_RENEW_MS);
        if (report_due)
            next_report = deadline_after(KL_STATUS_REPORT_MS);
    }
    r = 0;
out:
    log_info(KL_COMPONENT, "stopping", "nodes=%zu", run.n_nodes);
    run_stop(&run);
    return r;
}

static const struct svc_component kl_component = {
    .name = KL_COMPONENT,
    .usage = "Usage: kubelet-sim --cluster FILE [flags]\n\n"
             "A kubelet for simulated GPU nodes: keeps each node's Node object, Lease and NFD\n"
             "labels, runs the pods bound to its nodes as processes and serves the kubelet's\n"
             "device-plugin, PodResources and log endpoints. See sim/kubelet/README.md.\n",
    .options = {kl_options},
    .epilogue = "Exit: 0 on SIGTERM (every pod stopped, namespaces and the bridge removed), 2 on\n"
                "bad input (nothing started), 1 on a failure while running.\n",
    .state_size = sizeof(struct kubelet_sim),
    .defaults = kl_defaults,
    .configure = kl_configure,
    .run = kl_run,
    .cleanup = kl_cleanup,
};

int main(int argc, char **argv)
{
    return svc_main(&kl_component, argc, argv);
}
