/* SPDX-License-Identifier: Apache-2.0 */
/* One running simulated node (kl-node.h): its root's layout, namespace, device manager, pod
 * workers, kubelet endpoint, Node object and Lease. The decisions are node.c's pure functions. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <poll.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kl-devices.h"
#include "kl-dra.h"
#include "kl-net.h"
#include "kl-arch.h"
#include "kl-node.h"
#include "kl-pods.h"
#include "kl-reboot.h"
#include "kobj.h"
#include "kube.h"
#include "remediation.h"
#include "yamlcfg.h"

#define KL_COMPONENT      "kubelet-sim"
#define KL_LOG_TAIL_MAX   (16u << 20) /* bytes of a log served without follow */
#define KL_FOLLOW_MAX_MS  (6ull * 3600 * 1000)
#define KL_HTTP_CONN_MAX  64u
#define KL_FEATURES_FILES 64

struct kl_node {
    struct kl_node_config cfg;
    const struct kl_node_spec *spec;
    char *ip;
    char *netns_path;
    struct kl_devices *devices;
    struct kl_dra *dra;
    struct kl_pods *pods;
    struct MHD_Daemon *http;
    atomic_int stopping;
    atomic_int dirty;
    char *uid;           /* the Node's metadata.uid, for the Lease's owner reference */
    json_t *written_nfd; /* the NFD labels last written */
    char **sim_env;
    const char *sim_paths[4];
    unsigned boots; /* simulated reboots (kl-reboot.h) */
};

const char *kl_node_ip(const struct kl_node *n)
{
    return n->ip;
}

char *kl_node_nvml_state(const struct kl_node_spec *spec)
{
    return xasprintf("%s/var/lib/gpuop-sim/nvml", spec->root);
}

/* ---- the root's layout --------------------------------------------------------------------- */

static int mkdir_in(const char *root, const char *rel, struct err *e)
{
    _cleanup_free_ char *p = xasprintf("%s/%s", root, rel);
    int r = mkdir_p(p, 0755);
    if (r < 0)
        return err_errno(e, r, "mkdir \"%s\"", p);
    return 0;
}

static int write_in(const char *root, const char *rel, const char *text, bool keep, struct err *e)
{
    _cleanup_free_ char *p = xasprintf("%s/%s", root, rel);
    if (keep && access(p, F_OK) == 0)
        return 0;
    _cleanup_free_ char *dir = xstrdup(p);
    *strrchr(dir, '/') = '\0';
    int r = mkdir_p(dir, 0755);
    if (r < 0)
        return err_errno(e, r, "mkdir \"%s\"", dir);
    return file_write_atomic(p, text, strlen(text), 0644, e);
}

/* A copy of the file src at root/rel: a driver's library is a file of the node's root, not a
 * link out of it (the CDI spec's lookup follows links only inside the root). */
static int copy_in(const char *root, const char *rel, const char *src, struct err *e)
{
    _cleanup_free_ char *p = xasprintf("%s/%s", root, rel);
    _cleanup_free_ char *dir = xstrdup(p);
    *strrchr(dir, '/') = '\0';
    int r = mkdir_p(dir, 0755);
    if (r < 0)
        return err_errno(e, r, "mkdir \"%s\"", dir);
    return file_copy(src, p, 256u << 20, 0755, e);
}

/* A symlink at root/rel to target, replacing what is there. */
static int link_in(const char *root, const char *rel, const char *target, struct err *e)
{
    _cleanup_free_ char *p = xasprintf("%s/%s", root, rel);
    _cleanup_free_ char *dir = xstrdup(p);
    *strrchr(dir, '/') = '\0';
    int r = mkdir_p(dir, 0755);
    if (r < 0)
        return err_errno(e, r, "mkdir \"%s\"", dir);
    char cur[4096];
    ssize_t n = readlink(p, cur, sizeof(cur) - 1);
    if (n >= 0) {
        cur[n] = '\0';
        if (strcmp(cur, target) == 0)
            return 0;
    }
    if (unlink(p) < 0 && errno != ENOENT)
        return err_errno(e, -errno, "unlink \"%s\"", p);
    if (symlink(target, p) < 0)
        return err_errno(e, -errno, "symlink \"%s\"", p);
    return 0;
}

static const char *runtime_config(enum kl_runtime_kind k, const char **ret_text)
{
    switch (k) {
    case KL_RUNTIME_CRIO:
        *ret_text = "# CRI-O's configuration (simulated node)\n[crio]\n[crio.runtime]\n"
                    "default_runtime = \"crun\"\n";
        return "etc/crio/crio.conf";
    case KL_RUNTIME_DOCKER:
        *ret_text = "{\n  \"exec-opts\": [\"native.cgroupdriver=systemd\"]\n}\n";
        return "etc/docker/daemon.json";
    case KL_RUNTIME_CONTAINERD:
        break;
    }
    *ret_text = "# containerd's configuration (simulated node)\nversion = 2\n\n"
                "[plugins.\"io.containerd.grpc.v1.cri\".containerd]\n"
                "  default_runtime_name = \"runc\"\n";
    return "etc/containerd/config.toml";
}

/* The simulated libcuda: libcuda.so.1 beside the simulated libnvidia-ml (both are built into
 * the same folder). */
static char *kl_node_cuda_library(const char *nvml_library)
{
    const char *slash = strrchr(nvml_library, '/');
    if (!slash)
        return xstrdup("libcuda.so.1");
    return xasprintf("%.*s/libcuda.so.1", (int)(slash - nvml_library), nvml_library);
}

/* The GPUs' PCI functions as sysfs lists them (bus/pci/devices/<address>/{vendor,class}): what
 * gpuop node-discovery reads. The folder exists on every node, a CPU node's empty. */
static int layout_pci(const char *root, const char *const *gpu_models, struct err *e)
{
    int r = mkdir_in(root, "sys/bus/pci/devices", e);
    for (size_t i = 0; r == 0 && gpu_models && gpu_models[i]; i++) {
        _cleanup_free_ char *dev = xasprintf("sys/bus/pci/devices/0000:%02zx:00.0", i + 0x10);
        _cleanup_free_ char *vendor = xasprintf("%s/vendor", dev);
        _cleanup_free_ char *class = xasprintf("%s/class", dev);
        _cleanup_free_ char *cv = xasprintf("0x%s00\n", kl_pci_class_for_model(gpu_models[i]));
        if ((r = write_in(root, vendor, "0x10de\n", false, e)) == 0)
            r = write_in(root, class, cv, false, e);
    }
    return r;
}

int kl_node_layout(const struct kl_node_spec *s, const char *const *gpu_models,
                   const char *nvml_library, const char *sim_image_bin, struct err *e)
{
    static const char *const dirs[] = {
        "var/lib/kubelet/device-plugins",
        "var/lib/kubelet/pod-resources",
        "var/lib/kubelet/pods",
        "var/log/pods",
        "run/nvidia",
        "etc/kubernetes/node-feature-discovery/features.d",
        "var/lib/gpuop-sim/nvml",
        "etc/cdi",
        "var/run/cdi",
        "tmp",
    };
    const char *root = s->root;
    int r = mkdir_p(root, 0755);
    if (r < 0)
        return err_errno(e, r, "mkdir \"%s\"", root);
    for (size_t i = 0; i < ARRAY_SIZE(dirs); i++)
        if ((r = mkdir_in(root, dirs[i], e)) < 0)
            return r;
    _cleanup_free_ char *os =
        xasprintf("NAME=\"%s\"\nID=%s\nVERSION_ID=\"%s\"\nPRETTY_NAME=\"%s\"\n", s->os_id, s->os_id,
                  s->os_version_id, s->os_pretty);
    _cleanup_free_ char *ver = xasprintf("Linux version %s (simulated) #1 SMP\n", s->kernel);
    _cleanup_free_ char *rel = xasprintf("%s\n", s->kernel);
    const char *rtconfig_text = NULL;
    const char *rt_path = runtime_config(s->runtime, &rtconfig_text);
    if ((r = write_in(root, "etc/os-release", os, false, e)) < 0 ||
        (r = write_in(root, "proc/version", ver, false, e)) < 0 ||
        (r = write_in(root, "proc/sys/kernel/osrelease", rel, false, e)) < 0 ||
        (r = write_in(root, rt_path, rtconfig_text, true, e)) < 0 ||
        /* the node's /dev/null, for hostPath volumes of it (type CharDevice) */
        (r = link_in(root, "dev/null", "/dev/null", e)) < 0 ||
        (r = layout_pci(root, gpu_models, e)) < 0)
        return r;
    for (char **h = s->kernel_headers; h && *h; h++) {
        _cleanup_free_ char *d = xasprintf("usr/src/linux-headers-%s", *h);
        _cleanup_free_ char *m = xasprintf("%s/Makefile", d);
        _cleanup_free_ char *mk = xasprintf("# kernel headers for %s (simulated)\n", *h);
        if ((r = mkdir_in(root, d, e)) < 0 || (r = write_in(root, m, mk, true, e)) < 0)
            return r;
    }
    if (!s->host_driver)
        return 0;
    const char *v = s->host_driver;
    _cleanup_free_ char *mod = xasprintf("%s\n", v);
    /* the driver's libraries in the node's multiarch folder, of the node's architecture */
    const char *ma = kl_arch_multiarch(s->arch);
    bool arm = strcmp(ma, "aarch64-linux-gnu") == 0;
    _cleanup_free_ char *proc =
        xasprintf("NVRM version: NVIDIA UNIX %s  %s  (simulated host driver)\n"
                  "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n",
                  arm ? "Open Kernel Module for aarch64" : "x86_64 Kernel Module", v);
    _cleanup_free_ char *lib = xasprintf("usr/lib/%s/libnvidia-ml.so.%s", ma, v);
    _cleanup_free_ char *lib_link = xasprintf("usr/lib/%s/libnvidia-ml.so.1", ma);
    _cleanup_free_ char *lib_name = xasprintf("libnvidia-ml.so.%s", v);
    _cleanup_free_ char *cuda = kl_node_cuda_library(nvml_library);
    _cleanup_free_ char *cuda_lib = xasprintf("usr/lib/%s/libcuda.so.%s", ma, v);
    _cleanup_free_ char *cuda_link = xasprintf("usr/lib/%s/libcuda.so.1", ma);
    _cleanup_free_ char *cuda_name = xasprintf("libcuda.so.%s", v);
    if ((r = write_in(root, "sys/module/nvidia/version", mod, false, e)) < 0 ||
        (r = write_in(root, "proc/driver/nvidia/version", proc, false, e)) < 0 ||
        (r = copy_in(root, lib, nvml_library, e)) < 0 ||
        (r = link_in(root, lib_link, lib_name, e)) < 0 ||
        (r = copy_in(root, cuda_lib, cuda, e)) < 0 ||
        (r = link_in(root, cuda_link, cuda_name, e)) < 0)
        return r;
    _cleanup_free_ char *smi = xasprintf("%s/nvidia-smi", sim_image_bin);
    if (access(smi, X_OK) == 0 && (r = link_in(root, "usr/bin/nvidia-smi", smi, e)) < 0)
        return r;
    return 0;
}

/* ---- the kubelet endpoint ------------------------------------------------------------------- */

/* Opens a listening socket inside the node's network namespace: a thread of its own enters it,
 * so the process's other threads stay where they are. */
struct listen_job {
    const char *netns_path;
    const char *ip;
    unsigned port;
    int fd;
    int error;
};

static void *listen_in_netns(void *arg)
{
    struct listen_job *j = arg;
    j->fd = -1;
    if (j->netns_path) {
        _cleanup_close_ int ns = open(j->netns_path, O_RDONLY | O_CLOEXEC);
        if (ns < 0 || setns(ns, CLONE_NEWNET) < 0) {
            j->error = -errno;
            return NULL;
        }
    }
    _cleanup_close_ int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        j->error = -errno;
        return NULL;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)j->port)};
    if (inet_pton(AF_INET, j->ip, &sa.sin_addr) != 1) {
        j->error = -EINVAL;
        return NULL;
    }
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 64) < 0) {
        j->error = -errno;
        return NULL;
    }
    j->fd = steal_fd(&fd);
    return NULL;
}

static int open_listener(const char *netns_path, const char *ip, unsigned port, int *ret_fd,
                         struct err *e)
{
    struct listen_job j = {.netns_path = netns_path, .ip = ip, .port = port};
    pthread_t t;
    int r = pthread_create(&t, NULL, listen_in_netns, &j);
    if (r != 0)
        return err_errno(e, -r, "start a thread");
    pthread_join(t, NULL);
    if (j.fd < 0)
        return err_errno(e, j.error ? j.error : -EIO, "listen on %s:%u%s%s", ip, port,
                         netns_path ? " in " : "", netns_path ? netns_path : "");
    *ret_fd = j.fd;
    return 0;
}

struct log_stream {
    struct kl_node *node;
    int fd;   /* the log file */
    int sock; /* the client's connection, to notice it leaving */
    bool follow;
    off_t base; /* the file offset of the response's first byte (tailLines) */
    off_t end;  /* without follow: where to stop */
    uint64_t deadline;
    char *ns, *pod, *container;
    char *path;
};

static void log_stream_free(void *cls)
{
    struct log_stream *ls = cls;
    if (ls->fd >= 0)
        close(ls->fd);
    free(ls->ns);
    free(ls->pod);
    free(ls->container);
    free(ls->path);
    free(ls);
}

/* Following ends when the container has a newer log (it restarted), the pod is gone, the client
 * left, the node stops, or after KL_FOLLOW_MAX_MS. */
static bool follow_over(struct log_stream *ls)
{
    if (atomic_load(&ls->node->stopping) || deadline_left_ms(ls->deadline) == 0)
        return true;
    struct pollfd p = {.fd = ls->sock, .events = POLLRDHUP};
    if (ls->sock >= 0 && poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)))
        return true;
    _cleanup_free_ char *cur = NULL;
    struct err e = {0};
    if (kl_pods_log_path(ls->node->pods, ls->ns, ls->pod, ls->container, false, &cur, &e) < 0)
        return true;
    return strcmp(cur, ls->path) != 0;
}

static ssize_t log_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct log_stream *ls = cls;
    off_t at = ls->base + (off_t)pos;
    for (;;) {
        size_t want = max;
        if (!ls->follow) {
            if (at >= ls->end)
                return MHD_CONTENT_READER_END_OF_STREAM;
            if (at + (off_t)want > ls->end)
                want = (size_t)(ls->end - at);
        }
        ssize_t n = pread(ls->fd, buf, want, at);
        if (n > 0)
            return n;
        if (n < 0 && errno != EINTR)
            return MHD_CONTENT_READER_END_WITH_ERROR;
        if (!ls->follow || follow_over(ls))
            return MHD_CONTENT_READER_END_OF_STREAM;
        usleep(100 * 1000);
    }
}

/* The offset where the last n lines of the file begin. */
static off_t tail_offset(int fd, off_t size, uint64_t n)
{
    if (n == 0)
        return size;
    char buf[8192];
    off_t pos = size;
    uint64_t lines = 0;
    bool first = true;
    while (pos > 0) {
        size_t chunk = pos > (off_t)sizeof(buf) ? sizeof(buf) : (size_t)pos;
        pos -= (off_t)chunk;
        ssize_t got = pread(fd, buf, chunk, pos);
        if (got <= 0)
            return 0;
        for (ssize_t i = got - 1; i >= 0; i--) {
            if (buf[i] != '\n')
                continue;
            if (first && pos + i == size - 1) { /* the last line's own newline */
                first = false;
                continue;
            }
            first = false;
            if (++lines == n)
                return pos + i + 1;
        }
    }
    return 0;
}

static enum MHD_Result answer_text(struct MHD_Connection *c, unsigned status, const char *text)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_MUST_COPY);
    MHD_add_response_header(r, "Content-Type", "text/plain; charset=utf-8");
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static bool query_true(struct MHD_Connection *c, const char *key)
{
    const char *v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, key);
    bool b = false;
    return v && parse_bool(v, &b) == 0 && b;
}

static enum MHD_Result container_logs(struct kl_node *n, struct MHD_Connection *c, const char *rest)
{
    /* NS/POD/CONTAINER */
    _cleanup_free_ char *copy = xstrdup(rest);
    char *save = NULL;
    char *ns = strtok_r(copy, "/", &save), *pod = strtok_r(NULL, "/", &save),
         *ctr = strtok_r(NULL, "/", &save);
    if (!ns || !pod || !ctr || strtok_r(NULL, "/", &save))
        return answer_text(c, MHD_HTTP_BAD_REQUEST, "expected /containerLogs/NS/POD/CONTAINER\n");
    if (!n->pods)
        return answer_text(c, MHD_HTTP_SERVICE_UNAVAILABLE, "this node runs no pods\n");
    bool previous = query_true(c, "previous"), follow = query_true(c, "follow");
    _cleanup_free_ char *path = NULL;
    struct err e = {0};
    int r = kl_pods_log_path(n->pods, ns, pod, ctr, previous, &path, &e);
    if (r < 0) {
        _cleanup_free_ char *msg = xasprintf("%s\n", err_msg(&e));
        return answer_text(c, r == -ENOENT ? MHD_HTTP_NOT_FOUND : MHD_HTTP_INTERNAL_SERVER_ERROR,
                           msg);
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        if (fd >= 0)
            close(fd);
        return answer_text(c, MHD_HTTP_NOT_FOUND, "the container has no log yet\n");
    }
    off_t start = 0;
    const char *tail = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "tailLines");
    uint64_t lines;
    if (tail && parse_u64(tail, &lines) == 0)
        start = tail_offset(fd, st.st_size, lines);
    if (!follow && st.st_size - start > (off_t)KL_LOG_TAIL_MAX)
        start = st.st_size - (off_t)KL_LOG_TAIL_MAX;
    struct log_stream *ls = xcalloc(1, sizeof(*ls));
    ls->node = n;
    ls->fd = fd;
    ls->follow = follow && !previous;
    ls->end = st.st_size;
    ls->deadline = deadline_after(KL_FOLLOW_MAX_MS);
    ls->ns = xstrdup(ns);
    ls->pod = xstrdup(pod);
    ls->container = xstrdup(ctr);
    ls->path = steal_ptr(&path);
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    ls->sock = ci ? ci->connect_fd : -1;
    ls->base = start;
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024,
                                                                  log_read, ls, log_stream_free);
    MHD_add_response_header(resp, "Content-Type", "text/plain");
    enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, resp);
    MHD_destroy_response(resp);
    return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *data,
                                  size_t *data_size, void **con_cls)
{
    (void)version;
    (void)data;
    struct kl_node *n = cls;
    if (*con_cls == NULL) {
        *con_cls = n; /* the first call only announces the request */
        return MHD_YES;
    }
    if (*data_size)
        return answer_text(c, MHD_HTTP_CONTENT_TOO_LARGE, "no request body expected\n");
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
        return answer_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "GET only\n");
    if (strcmp(url, "/healthz") == 0)
        return answer_text(c, MHD_HTTP_OK, "ok");
    if (str_has_prefix(url, "/containerLogs/"))
        return container_logs(n, c, url + strlen("/containerLogs/"));
    return answer_text(c, MHD_HTTP_NOT_FOUND, "404 page not found\n");
}

/* ---- start, sync, stop ---------------------------------------------------------------------- */

static void on_devices_change(void *userdata)
{
    struct kl_node *n = userdata;
    atomic_store(&n->dirty, 1);
    uint64_t one = 1;
    if (n->cfg.wake_fd >= 0 && write(n->cfg.wake_fd, &one, sizeof(one)) < 0) {
        /* the eventfd is full or gone: the next periodic sync picks the change up */
    }
}

bool kl_node_dirty(struct kl_node *n)
{
    return atomic_load(&n->dirty) != 0;
}

/* Whether this kubelet-sim, so the gpuop and simulated programs its pods run (the same build),
 * has AddressSanitizer. */
#if defined(__SANITIZE_ADDRESS__)
#define KL_ASAN_BUILD true
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KL_ASAN_BUILD true
#endif
#endif
#ifndef KL_ASAN_BUILD
#define KL_ASAN_BUILD false
#endif

static char **sim_env(const struct kl_node_config *cfg)
{
    /* the sanitizer settings first, then the simulated hardware's variables */
    char **san = kl_sanitizer_env(env_get("ASAN_OPTIONS"), env_get("UBSAN_OPTIONS"),
                                  env_get("LSAN_OPTIONS"), KL_ASAN_BUILD);
    size_t i = 0;
    while (san[i])
        i++;
    char **env = xcalloc(i + 6, sizeof(char *));
    memcpy(env, san, i * sizeof(char *));
    free(san);
    _cleanup_free_ char *state = kl_node_nvml_state(cfg->spec);
    if (cfg->spec->fleet)
        env[i++] = xasprintf("GPUOP_SIM_FLEET=%s", cfg->spec->fleet);
    env[i++] = xasprintf("GPUOP_SIM_STATE=%s", state);
    env[i++] = xasprintf("GPUOP_SIM_ROOT=%s", cfg->spec->root);
    env[i++] = xasprintf("GPUOP_NVML_LIBRARY=%s", cfg->nvml_library);
    _cleanup_free_ char *cuda = kl_node_cuda_library(cfg->nvml_library);
    env[i++] = xasprintf("GPUOP_CUDA_LIBRARY=%s", cuda);
    return env;
}

void kl_node_stop(struct kl_node *n)
{
    if (!n)
        return;
    atomic_store(&n->stopping, 1);
    if (n->pods)
        kl_pods_free(n->pods);
    kl_dra_free(n->dra);
    if (n->devices)
        kl_devices_free(n->devices);
    if (n->http)
        MHD_stop_daemon(n->http);
    for (char **p = n->sim_env; p && *p; p++)
        free(*p);
    free(n->sim_env);
    json_decref(n->written_nfd);
    free(n->uid);
    free(n->ip);
    free(n->netns_path);
    free(n);
}
DEFINE_CLEANUP_FUNC(struct kl_node, kl_node_stop)

static int register_node(struct kl_node *n, struct err *e)
{
    _cleanup_json_ json_t *cur = NULL;
    int r = kube_get(n->cfg.kc, &KUBE_NODES, NULL, n->spec->name, &cur, e);
    if (r == -ENOENT) {
        struct kl_node_facts f = {.spec = n->spec,
                                  .ip = n->ip,
                                  .kubelet_port = n->cfg.kubelet_port,
                                  .now_ms = now_ms_real()};
        _cleanup_json_ json_t *obj = kl_node_object(&f);
        r = kube_create(n->cfg.kc, &KUBE_NODES, NULL, obj, &cur, e);
        if (r == 0)
            log_info(KL_COMPONENT, "node registered", "node=%s ip=%s", n->spec->name, n->ip);
    }
    if (r < 0)
        return err_prefix(e, "register node \"%s\"", n->spec->name);
    free(n->uid);
    n->uid = kobj_uid(cur) ? xstrdup(kobj_uid(cur)) : NULL;
    return 0;
}

static int start_devices(struct kl_node *n, struct err *e)
{
    struct kl_devices_config dc = {.root = n->spec->root,
                                   .node_name = n->spec->name,
                                   .on_change = on_devices_change,
                                   .userdata = n};
    if (kl_devices_new(&dc, &n->devices, e) < 0)
        return err_prefix(e, "node \"%s\": device manager", n->spec->name);
    return 0;
}

static int start_pods(struct kl_node *n, struct err *e)
{
    const struct kl_node_config *cfg = &n->cfg;
    struct kl_pods_config pc = {.node = n->spec,
                                .node_ip = n->ip,
                                .netns_path = n->netns_path,
                                .devices = n->devices,
                                .dra = n->dra,
                                .kc = cfg->kc,
                                .gpuop_exe = cfg->gpuop_exe,
                                .sim_image_bin = cfg->sim_image_bin,
                                .sim_env = (const char *const *)n->sim_env,
                                .sim_paths = n->sim_paths,
                                .backoff_base_ms = cfg->backoff_base_ms,
                                .backoff_max_ms = cfg->backoff_max_ms,
                                .api_server = cfg->api_server};
    if (kl_pods_new(&pc, &n->pods, e) < 0)
        return err_prefix(e, "node \"%s\": pod workers", n->spec->name);
    return 0;
}

/* A reboot the node asked for (kl-reboot.h): its pods and devices stop, the host comes back as
 * after a boot, then they start again; the answer goes on the Node. */
static int node_reboot(struct kl_node *n, const char *id, struct err *e)
{
    log_info(KL_COMPONENT, "node rebooting", "node=%s request=%s", n->spec->name, id);
    kl_pods_free(n->pods);
    n->pods = NULL;
    kl_devices_free(n->devices);
    n->devices = NULL;
    int r = kl_reboot_host(n->spec, e);
    if (r == 0)
        r = kl_node_layout(n->spec, n->cfg.gpu_models, n->cfg.nvml_library, n->cfg.sim_image_bin,
                           e);
    n->boots++;
    if (r == 0)
        r = start_devices(n, e);
    if (r == 0)
        r = start_pods(n, e);
    if (r < 0)
        return err_prefix(e, "node \"%s\": reboot", n->spec->name);
    _cleanup_json_ json_t *patch =
        json_pack("{s:{s:{s:s}}}", "metadata", "annotations", REM_ANN_REBOOT_DONE, id);
    struct kube_patch_opts po = {.type = KUBE_PATCH_MERGE, .field_manager = "kubelet-sim"};
    if ((r = kube_patch(n->cfg.kc, &KUBE_NODES, NULL, n->spec->name, &po, patch, NULL, e)) < 0)
        return err_prefix(e, "node \"%s\": reboot answer", n->spec->name);
    atomic_store(&n->dirty, 1);
    log_info(KL_COMPONENT, "node rebooted", "node=%s request=%s boots=%u", n->spec->name, id,
             n->boots);
    return 0;
}

int kl_node_start(const struct kl_node_config *cfg, struct kl_node **ret, struct err *e)
{
    struct kl_node *n _cleanup_(kl_node_stopp) = xcalloc(1, sizeof(*n));
    n->cfg = *cfg;
    n->spec = cfg->spec;
    int r;
    if ((r = kl_node_layout(n->spec, cfg->gpu_models, cfg->nvml_library, cfg->sim_image_bin, e)) <
        0)
        return err_prefix(e, "node \"%s\": root", n->spec->name);
    if (cfg->net) {
        if ((r = kl_net_add_node(cfg->net, n->spec->name, cfg->index, &n->netns_path, &n->ip, e)) <
            0)
            return err_prefix(e, "node \"%s\": network", n->spec->name);
    } else {
        n->ip = xstrdup("127.0.0.1");
    }
    n->sim_env = sim_env(cfg);
    size_t np = 0;
    n->sim_paths[np++] = n->spec->root;
    if (n->spec->fleet)
        n->sim_paths[np++] = n->spec->fleet;
    if (cfg->programs_dir)
        n->sim_paths[np++] = cfg->programs_dir;
    if ((r = start_devices(n, e)) < 0)
        return r;
    {
        struct kl_dra_config rc = {
            .root = n->spec->root, .node_name = n->spec->name, .kc = cfg->kc};
        if ((r = kl_dra_new(&rc, &n->dra, e)) < 0)
            return err_prefix(e, "node \"%s\": DRA", n->spec->name);
    }
    if ((r = register_node(n, e)) < 0)
        return r;
    if ((r = start_pods(n, e)) < 0)
        return r;
    int fd = -1;
    if ((r = open_listener(n->netns_path, n->ip, cfg->kubelet_port, &fd, e)) < 0)
        return err_prefix(e, "node \"%s\": kubelet endpoint", n->spec->name);
    n->http = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD, 0,
                               NULL, NULL, on_request, n, MHD_OPTION_LISTEN_SOCKET, fd,
                               MHD_OPTION_CONNECTION_LIMIT, KL_HTTP_CONN_MAX,
                               MHD_OPTION_CONNECTION_TIMEOUT, 0u, MHD_OPTION_END);
    if (!n->http) {
        close(fd);
        return err_set(e, -EIO, "node \"%s\": kubelet endpoint: libmicrohttpd did not start",
                       n->spec->name);
    }
    if ((r = kl_node_sync(n, true, true, e)) < 0)
        return r;
    *ret = steal_ptr(&n);
    return 0;
}

/* NFD's labels now: the pci, kernel and system sources, then the local feature files in name
 * order (a later file overrides). */
static json_t *nfd_labels_now(struct kl_node *n)
{
    if (n->cfg.no_nfd)
        return json_null(); /* kl_node_apply_labels: no NFD, its labels left alone */
    json_t *labels = kl_nfd_labels(n->spec, n->cfg.gpu_models);
    _cleanup_free_ char *dir =
        xasprintf("%s/etc/kubernetes/node-feature-discovery/features.d", n->spec->root);
    struct dirent **names = NULL;
    int count = scandir(dir, &names, NULL, alphasort);
    for (int i = 0; i < count; i++) {
        const char *name = names[i]->d_name;
        if (name[0] != '.' && i < KL_FEATURES_FILES) {
            _cleanup_free_ char *p = xasprintf("%s/%s", dir, name);
            _cleanup_free_ char *text = NULL;
            size_t len = 0;
            struct err e = {0};
            int r = file_read_all(p, KL_FEATURES_MAX_BYTES, &text, &len, &e);
            if (r == 0)
                r = kl_features_parse(text, len, now_ms_real(), labels, &e);
            if (r < 0)
                log_warn(KL_COMPONENT, "feature file skipped", "node=%s error=\"%s\"",
                         n->spec->name, err_msg(&e));
            else if (r > 0)
                log_debug(KL_COMPONENT, "feature file lines skipped", "node=%s file=%s lines=%d",
                          n->spec->name, name, r);
        }
        free(names[i]);
    }
    free(names);
    return labels;
}

struct labels_ctx {
    const struct kl_node_spec *spec;
    json_t *nfd;
};

static int mutate_labels(json_t *obj, void *userdata, struct err *e)
{
    (void)e;
    struct labels_ctx *c = userdata;
    return kl_node_apply_labels(obj, c->spec, c->nfd);
}

struct status_ctx {
    struct kl_node_facts facts;
    bool force;
    bool reboot; /* the node asks for a reboot (kl-reboot.h) */
    char reboot_id[64];
};

static int mutate_status(json_t *obj, void *userdata, struct err *e)
{
    (void)e;
    struct status_ctx *c = userdata;
    c->reboot = kl_reboot_wanted(obj, c->reboot_id, sizeof(c->reboot_id));
    return kl_node_apply_status(obj, &c->facts, c->force);
}

struct lease_ctx {
    const char *node;
    unsigned duration_s;
};

static int mutate_lease(json_t *obj, void *userdata, struct err *e)
{
    (void)e;
    struct lease_ctx *c = userdata;
    kl_lease_renew(obj, c->node, c->duration_s, now_ms_real());
    return 0;
}

static int renew_lease(struct kl_node *n, struct err *e)
{
    struct lease_ctx lc = {.node = n->spec->name, .duration_s = n->cfg.lease_duration_s};
    int r = kube_update_retry(n->cfg.kc, &KUBE_LEASES, KL_LEASE_NAMESPACE, n->spec->name, false,
                              mutate_lease, &lc, NULL, e);
    if (r != -ENOENT)
        return r;
    _cleanup_json_ json_t *lease =
        kl_lease_object(n->spec->name, n->uid, n->cfg.lease_duration_s, now_ms_real());
    r = kube_create(n->cfg.kc, &KUBE_LEASES, KL_LEASE_NAMESPACE, lease, NULL, e);
    if (r == -ENOENT) { /* the namespace: an API server without its system namespaces */
        _cleanup_json_ json_t *ns = json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "v1", "kind",
                                              "Namespace", "metadata", "name", KL_LEASE_NAMESPACE);
        struct err e2 = {0};
        (void)kube_create(n->cfg.kc, &KUBE_NAMESPACES, NULL, ns, NULL, &e2);
        r = kube_create(n->cfg.kc, &KUBE_LEASES, KL_LEASE_NAMESPACE, lease, NULL, e);
    }
    return r;
}

int kl_node_sync(struct kl_node *n, bool force_status, bool renew, struct err *e)
{
    int r;
    _cleanup_json_ json_t *nfd = nfd_labels_now(n);
    if (!json_equal(nfd, n->written_nfd)) {
        struct labels_ctx lc = {.spec = n->spec, .nfd = nfd};
        r = kube_update_retry(n->cfg.kc, &KUBE_NODES, NULL, n->spec->name, false, mutate_labels,
                              &lc, NULL, e);
        if (r < 0 && r != -ENOENT) /* -ENOENT: the status write below registers it */
            return err_prefix(e, "node \"%s\": labels", n->spec->name);
        if (r == 0) {
            json_decref(n->written_nfd);
            n->written_nfd = json_incref(nfd);
        }
    }
    atomic_store(&n->dirty, 0);
    _cleanup_json_ json_t *res = n->devices ? kl_devices_resources(n->devices) : NULL;
    struct status_ctx sc = {.facts = {.spec = n->spec,
                                      .ip = n->ip,
                                      .kubelet_port = n->cfg.kubelet_port,
                                      .device_resources = res,
                                      .now_ms = now_ms_real(),
                                      .boot = n->boots},
                            .force = force_status};
    r = kube_update_retry(n->cfg.kc, &KUBE_NODES, NULL, n->spec->name, true, mutate_status, &sc,
                          NULL, e);
    if (r == -ENOENT) {
        /* deleted, or a restarted API server: register again; the labels follow next pass */
        log_info(KL_COMPONENT, "node gone, registering again", "node=%s", n->spec->name);
        json_decref(n->written_nfd);
        n->written_nfd = NULL;
        atomic_store(&n->dirty, 1);
        r = register_node(n, e);
    }
    if (r < 0)
        return err_prefix(e, "node \"%s\": status", n->spec->name);
    if (sc.reboot && (r = node_reboot(n, sc.reboot_id, e)) < 0)
        return r;
    if (renew && (r = renew_lease(n, e)) < 0)
        return err_prefix(e, "node \"%s\": lease", n->spec->name);
    return 0;
}
