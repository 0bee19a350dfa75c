/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The pod workers' shell (kl-pods.h): an informer on the node's pods, one worker thread per
 * pod. A worker reads the world (its processes, probe results), asks kl_pod_plan what to do,
 * does it through kl-runtime, kl-devices and kl-cdi, and writes Events and pods/status. It
 * decides nothing itself.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kl-cdi.h"
#include "kl-dra.h"
#include "kl-pod-plan.h"
#include "kl-pods.h"
#include "kl-runtime.h"
#include "kobj.h"

#define COMPONENT         "kubelet-sim"
#define SHUTDOWN_GRACE_MS 10000
#define PROBE_OUT_MAX     1024
#define MAX_POLL_FDS      64

struct ctr_rt {
    struct kl_ctr_obs obs; /* its strings point at the fields below */
    char *container_id, *image_id, *pull_error, *create_error, *create_reason, *last_id;
    char *log_path;                    /* the current attempt's log */
    bool fallback_to_logs;             /* terminationMessagePolicy: FallbackToLogsOnError */
    char *term_message, *last_message; /* obs.exited.message, obs.last.message */
    pid_t pid;
    int pidfd;
    struct kl_image image;
    /* a kill running on a thread of its own */
    pthread_t killer;
    bool killer_joinable;
    uint64_t kill_grace_ms;
    bool kill_at_stop; /* the stop token cuts the grace short */
    atomic_bool kill_done;
    int kill_status;
    struct pod_worker *w;
};

struct pod_worker {
    struct kl_pods *owner;
    char *uid, *ns, *name;
    json_t *pod;  /* the latest object (owner->lock) */
    bool removed; /* owner->lock */
    int wake_fd;  /* eventfd */
    pthread_t thread;
    struct ctr_rt *init, *ctrs;
    size_t n_init, n_ctrs;
    struct kl_pod_volumes *vols;
    char *mount_error;
    char *sa_token; /* the pod's own ServiceAccount token (TokenRequest, bound to the pod) */
    uint64_t admitted_ms, deletion_seen_ms;
    json_t *written; /* the last status written */
    bool released;
    atomic_bool finished;
    struct pod_worker *next;
};

struct kl_pods {
    struct kl_pods_config cfg;
    struct stop_token *stop;
    atomic_bool shutting_down;
    struct kube_informer *inf;
    pthread_mutex_t lock;
    struct pod_worker *workers;
    json_t *done_uids; /* pods whose worker deleted them: late events are ignored */
    bool sim_bin_ok;   /* the simulated images' folder exists (else it is not mounted) */
    char *sa_token, *sa_ca, *api_host, *api_port;
};

/* ---- helpers ------------------------------------------------------------------------------ */

static void wake(struct pod_worker *w)
{
    uint64_t one = 1;
    ssize_t n = write(w->wake_fd, &one, sizeof(one));
    (void)n;
}

static void set_str(char **dst, const char *v)
{
    free(*dst);
    *dst = v ? xstrdup(v) : NULL;
}

static void random_hex(char *out, size_t n_hex)
{
    static const char hex[] = "0123456789abcdef";
    unsigned char buf[64];
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    ssize_t got = fd >= 0 ? read(fd, buf, sizeof(buf)) : -1;
    if (fd >= 0)
        close(fd);
    for (size_t i = 0; i < n_hex; i++) {
        unsigned v = got == (ssize_t)sizeof(buf) ? buf[i / 2 % sizeof(buf)]
                                                 : (unsigned)(now_us_mono() >> (i % 32));
        out[i] = hex[i % 2 ? v & 15 : v >> 4];
    }
    out[n_hex] = '\0';
}

static const json_t *ctr_spec(const json_t *pod, bool init, size_t i)
{
    return json_array_get(kobj_path(pod, init ? "spec.initContainers" : "spec.containers"), i);
}

static struct ctr_rt *ctr_at(struct pod_worker *w, bool init, size_t i)
{
    return init ? &w->init[i] : &w->ctrs[i];
}

static void event(struct pod_worker *w, const json_t *pod, const char *type, const char *reason,
                  const char *field_path, const char *fmt, ...) GPUOP_PRINTF(6, 7);
static void event(struct pod_worker *w, const json_t *pod, const char *type, const char *reason,
                  const char *field_path, const char *fmt, ...)
{
    struct kl_pods *p = w->owner;
    if (!p->cfg.kc)
        return;
    va_list ap;
    va_start(ap, fmt);
    _cleanup_free_ char *msg = NULL;
    if (vasprintf(&msg, fmt, ap) < 0)
        msg = NULL;
    va_end(ap);
    json_t *inv = json_pack("{s:s,s:s,s:{s:s,s:s,s:s}}", "kind", "Pod", "apiVersion", "v1",
                            "metadata", "name", w->name, "namespace", w->ns, "uid", w->uid);
    if (field_path)
        json_object_set_new(inv, "fieldPath", json_string(field_path));
    (void)pod;
    struct kube_event ev = {.ns = w->ns,
                            .involved = inv,
                            .type = type,
                            .reason = reason,
                            .message = msg ? msg : "",
                            .component = "kubelet",
                            .host = p->cfg.node->name};
    struct err e = {0};
    if (kube_event_create(p->cfg.kc, &ev, &e) < 0)
        log_debug(COMPONENT, "event not written", "pod=%s/%s reason=%s err=\"%s\"", w->ns, w->name,
                  reason, err_msg(&e));
    json_decref(inv);
}

static char *field_path(bool init, const char *name)
{
    return xasprintf("spec.%s{%s}", init ? "initContainers" : "containers", name);
}

/* ---- lookups for the spec builders --------------------------------------------------------- */

static int get_obj(struct kl_pods *p, const struct kube_resource *r, const char *ns,
                   const char *name, json_t **ret, struct err *e)
{
    if (!p->cfg.kc)
        return err_set(e, -ENOENT, "not found");
    return kube_get(p->cfg.kc, r, ns, name, ret, e);
}
static int get_cm(void *ud, const char *ns, const char *name, json_t **ret, struct err *e)
{
    return get_obj(ud, &KUBE_CONFIGMAPS, ns, name, ret, e);
}
static int get_secret(void *ud, const char *ns, const char *name, json_t **ret, struct err *e)
{
    return get_obj(ud, &KUBE_SECRETS, ns, name, ret, e);
}

static struct kl_spec_input spec_input(struct pod_worker *w, const json_t *pod)
{
    struct kl_pods *p = w->owner;
    const struct kl_node_spec *n = p->cfg.node;
    return (struct kl_spec_input){
        .pod = pod,
        .node_root = n->root,
        .host_ip = p->cfg.node_ip,
        .pod_ip = p->cfg.node_ip,
        .node_cpu_milli = n->cpu * 1000,
        .node_memory_bytes = n->memory_bytes,
        .gpuop_exe = p->cfg.gpuop_exe,
        .sim_image_bin = p->sim_bin_ok ? p->cfg.sim_image_bin : NULL,
        .sim_env = p->cfg.sim_env,
        .sim_paths = p->cfg.sim_paths,
        .api_host = p->api_host,
        .api_port = p->api_port,
        .sa_token = w->sa_token ? w->sa_token : p->sa_token,
        .sa_ca_pem = p->sa_ca,
        .get_configmap = get_cm,
        .get_secret = get_secret,
        .lookup_ud = p,
    };
}

/* ---- observations ------------------------------------------------------------------------- */

static void record_exit(struct ctr_rt *c, int status)
{
    c->obs.phase = KL_CTR_EXITED;
    c->obs.exited = (struct kl_ctr_termination){
        .exit_code = WIFEXITED(status)     ? WEXITSTATUS(status)
                     : WIFSIGNALED(status) ? 128 + WTERMSIG(status)
                                           : 1,
        .started_ms = c->obs.started_ms,
        .finished_ms = now_ms_real(),
        .container_id = c->container_id,
    };
    /* A failed container's message: its log's tail, as the kubelet reads it, when asked. */
    free(c->term_message);
    c->term_message = NULL;
    if (c->obs.exited.exit_code != 0 && c->fallback_to_logs && c->log_path) {
        /* the last 64 KiB hold more than 80 lines' worth of the 2048 bytes kept */
        char buf[65536];
        _cleanup_close_ int fd = open(c->log_path, O_RDONLY | O_CLOEXEC);
        struct stat st;
        if (fd >= 0 && fstat(fd, &st) == 0) {
            off_t off = st.st_size > (off_t)sizeof(buf) ? st.st_size - (off_t)sizeof(buf) : 0;
            ssize_t n = pread(fd, buf, sizeof(buf), off);
            if (n > 0)
                c->term_message = kl_log_tail_message(buf, (size_t)n);
        }
        c->obs.exited.message = c->term_message;
    }
    if (c->pidfd >= 0)
        close(c->pidfd);
    c->pidfd = -1;
    c->pid = 0;
    c->obs.killing = false;
}

static void observe(struct pod_worker *w)
{
    for (int l = 0; l < 2; l++) {
        size_t n = l ? w->n_ctrs : w->n_init;
        for (size_t i = 0; i < n; i++) {
            struct ctr_rt *c = ctr_at(w, l == 0, i);
            if (c->obs.phase != KL_CTR_RUNNING)
                continue;
            if (c->obs.killing) {
                if (atomic_load(&c->kill_done)) {
                    pthread_join(c->killer, NULL);
                    c->killer_joinable = false;
                    atomic_store(&c->kill_done, false);
                    record_exit(c, c->kill_status);
                }
                continue;
            }
            int status = 0;
            struct err e = {0};
            if (kl_container_reap(c->pid, c->pidfd, &status, &e) == 1)
                record_exit(c, status);
        }
    }
}

/* ---- actions ------------------------------------------------------------------------------ */

static void do_pull(struct pod_worker *w, const json_t *pod, const struct kl_action *a)
{
    struct kl_pods *p = w->owner;
    struct ctr_rt *c = ctr_at(w, a->init, a->index);
    const char *image = kobj_str(ctr_spec(pod, a->init, a->index), "image");
    _cleanup_free_ char *fp = field_path(a->init, a->name);
    struct err e = {0};
    kl_image_clear(&c->image);
    if (kl_image_resolve(image, p->cfg.gpuop_exe, &c->image, &e) < 0) {
        set_str(&c->pull_error, err_msg(&e));
        c->obs.pull_error = c->pull_error;
        c->obs.pull_failures++;
        c->obs.last_pull_ms = now_ms_real();
        event(w, pod, "Normal", "Pulling", fp, "Pulling image \"%s\"", image ? image : "");
        event(w, pod, "Warning", "Failed", fp, "Failed to pull image \"%s\": %s",
              image ? image : "", err_msg(&e));
        event(w, pod, "Warning", "Failed", fp, "Error: ErrImagePull");
        return;
    }
    c->obs.pulled = true;
    c->obs.pull_failures = 0;
    set_str(&c->image_id, c->image.image_id);
    c->obs.image_id = c->image_id;
    event(w, pod, "Normal", "Pulled", fp, "Container image \"%s\" already present on machine",
          image ? image : "");
}

/* Extended resources of a container's limits (what a device plugin may serve). */
static json_t *device_requests(const json_t *spec)
{
    json_t *req = json_object();
    const char *k;
    json_t *v;
    json_object_foreach (kobj_path(spec, "resources.limits"), k, v) {
        if (!strchr(k, '/') || str_has_prefix(k, "kubernetes.io/"))
            continue;
        int64_t n = 0;
        if (json_is_integer(v))
            n = json_integer_value(v);
        else if (json_is_string(v) && kobj_quantity_milli(json_string_value(v), &n) == 0)
            n /= 1000;
        if (n > 0)
            json_object_set_new(req, k, json_integer(n));
    }
    return req;
}

static void create_failed(struct pod_worker *w, const json_t *pod, struct ctr_rt *c, const char *fp,
                          const char *reason, const char *msg)
{
    set_str(&c->create_error, msg);
    set_str(&c->create_reason, reason);
    c->obs.create_error = c->create_error;
    c->obs.create_reason = c->create_reason;
    c->obs.create_failures++;
    c->obs.last_create_ms = now_ms_real();
    event(w, pod, "Warning", "Failed", fp, "Error: %s", msg);
}

static void do_start(struct pod_worker *w, const json_t *pod, const struct kl_action *a)
{
    struct kl_pods *p = w->owner;
    struct ctr_rt *c = ctr_at(w, a->init, a->index);
    const json_t *spec = ctr_spec(pod, a->init, a->index);
    _cleanup_free_ char *fp = field_path(a->init, a->name);
    struct kl_spec_input in = spec_input(w, pod);
    struct err e = {0};

    if (!c->image.entrypoint &&
        kl_image_resolve(kobj_str(spec, "image"), p->cfg.gpuop_exe, &c->image, &e) < 0) {
        create_failed(w, pod, c, fp, "CreateContainerError", err_msg(&e));
        return;
    }
    _cleanup_(kl_ctr_build_freep) struct kl_ctr_build *b = NULL;
    if (kl_ctr_build(&in, w->vols, a->init, a->index, &c->image, &b, &e) < 0) {
        create_failed(w, pod, c, fp, "CreateContainerConfigError", err_msg(&e));
        return;
    }
    struct kl_alloc *alloc = NULL;
    json_t *req = device_requests(spec);
    /* what the pod's extended resource claim serves (DRA, through a DeviceClass's
     * extendedResourceName) is not asked of the device plugins: the kubelet leaves it to the
     * claim, as on a node whose device plugin for that resource stopped */
    size_t mi;
    json_t *map;
    json_array_foreach (kobj_path(pod, "status.extendedResourceClaimStatus.requestMappings"), mi,
                        map) {
        if (streq_ptr(kobj_str(map, "containerName"), a->name) && kobj_str(map, "resourceName"))
            json_object_del(req, kobj_str(map, "resourceName"));
    }
    if (p->cfg.devices && json_object_size(req) > 0) {
        int r =
            kl_devices_allocate(p->cfg.devices, w->uid, w->ns, w->name, a->name, req, &alloc, &e);
        if (r == 0 && alloc->cdi_devices && alloc->cdi_devices[0])
            r = kl_cdi_resolve(p->cfg.node->root, (const char *const *)alloc->cdi_devices, alloc,
                               &e);
        if (r < 0) {
            json_decref(req);
            kl_alloc_free(alloc);
            create_failed(w, pod, c, fp, "CreateContainerError", err_msg(&e));
            return;
        }
    }
    json_decref(req);
    /* the CDI devices of the container's DRA claims */
    if (p->cfg.dra && kl_dra_container_alloc(p->cfg.dra, pod, a->name, &alloc, &e) < 0) {
        kl_alloc_free(alloc);
        create_failed(w, pod, c, fp, "CreateContainerError", err_msg(&e));
        return;
    }

    bool privileged = json_is_true(kobj_path(spec, "securityContext.privileged"));
    /* mounts: the build's and the devices' */
    size_t n_m = b->n_mounts + (alloc ? alloc->n_mounts : 0);
    struct kl_mount *mounts = xcalloc(n_m ? n_m : 1, sizeof(*mounts));
    size_t m = 0;
    for (size_t i = 0; i < b->n_mounts; i++)
        mounts[m++] = b->mounts[i];
    for (size_t i = 0; alloc && i < alloc->n_mounts; i++)
        mounts[m++] = alloc->mounts[i];
    /* env: the build's, then the devices' (the runtime adds them over the spec's: a later value
     * of a name wins); NVIDIA_VISIBLE_DEVICES once, as the nvidia runtime handler leaves it */
    size_t n_env = 0, n_alloc_env = 0;
    while (b->envp[n_env])
        n_env++;
    while (alloc && alloc->envs && alloc->envs[n_alloc_env])
        n_alloc_env++;
    const char **envp = xcalloc(n_env + n_alloc_env + 2, sizeof(*envp));
    size_t k_env = 0;
    const char *visible = NULL;
    for (size_t i = 0; i < n_env + n_alloc_env; i++) {
        const char *kv = i < n_env ? b->envp[i] : alloc->envs[i - n_env];
        if (str_has_prefix(kv, "NVIDIA_VISIBLE_DEVICES="))
            visible = kv + strlen("NVIDIA_VISIBLE_DEVICES=");
        else
            envp[k_env++] = kv;
    }
    _cleanup_free_ char *handled =
        kl_nvidia_visible(visible, privileged, mounts, m, p->cfg.node->root);
    _cleanup_free_ char *visible_kv =
        handled || visible ? xasprintf("NVIDIA_VISIBLE_DEVICES=%s", handled ? handled : visible)
                           : NULL;
    if (visible_kv)
        envp[k_env++] = visible_kv;
    /* device nodes: each as the container's runtime makes it, what is missing read from the
     * host's node; one that cannot be read fails the container, as containerd fails it */
    size_t n_dev = alloc ? alloc->n_devices : 0;
    struct kl_device *devs = xcalloc(n_dev ? n_dev : 1, sizeof(*devs));
    for (size_t i = 0; i < n_dev; i++) {
        struct stat st;
        int serr = stat(alloc->devices[i].host_path, &st) == 0 ? 0 : errno;
        if (kl_device_resolve(&alloc->devices[i], serr ? NULL : &st, serr, &devs[i], &e) < 0) {
            free(devs);
            free(mounts);
            free(envp);
            kl_alloc_free(alloc);
            create_failed(w, pod, c, fp, "CreateContainerError", err_msg(&e));
            return;
        }
    }

    unsigned restart = c->obs.restart_count + (c->obs.phase == KL_CTR_EXITED ? 1 : 0);
    _cleanup_free_ char *log_dir = xasprintf("%s/var/log/pods/%s_%s_%s/%s", p->cfg.node->root,
                                             w->ns, w->name, w->uid, a->name);
    _cleanup_free_ char *log_path = xasprintf("%s/%u.log", log_dir, restart);
    int r = mkdir_p(log_dir, 0755);
    struct kl_container_spec cs = {
        .argv = (const char *const *)b->argv,
        .envp = envp,
        .workdir = b->workdir,
        .mounts = mounts,
        .n_mounts = m,
        .devices = devs,
        .n_devices = n_dev,
        .netns_path = p->cfg.netns_path, /* every pod of a node shares its address */
        .hostname = w->name,
        .log_path = log_path,
        .privileged = privileged,
    };
    pid_t pid = 0;
    int pidfd = -1;
    if (r < 0)
        err_errno(&e, r, "mkdir \"%s\"", log_dir);
    else
        r = kl_container_start(&cs, &pid, &pidfd, &e);
    free(envp);
    free(mounts);
    free(devs);
    kl_alloc_free(alloc);
    if (r < 0) {
        create_failed(w, pod, c, fp, "CreateContainerError", err_msg(&e));
        return;
    }
    char hex[65];
    random_hex(hex, 64);
    if (c->obs.phase == KL_CTR_EXITED) {
        c->obs.has_last = true;
        c->obs.last = c->obs.exited;
        set_str(&c->last_id, c->container_id);
        c->obs.last.container_id = c->last_id;
        set_str(&c->last_message, c->term_message);
        c->obs.last.message = c->last_message;
        c->obs.restart_count = restart;
        c->obs.backoff_updated_ms = now_ms_real();
    }
    c->obs.backoff_ms = a->backoff_ms;
    set_str(&c->log_path, log_path);
    c->fallback_to_logs =
        streq_ptr(kobj_str(spec, "terminationMessagePolicy"), "FallbackToLogsOnError");
    free(c->container_id);
    c->container_id = xasprintf("containerd://%s", hex);
    c->obs.container_id = c->container_id;
    c->obs.phase = KL_CTR_RUNNING;
    c->obs.started_ms = now_ms_real();
    c->obs.create_failures = 0;
    c->obs.create_error = NULL;
    c->obs.prestop_done = false;
    for (int k = 0; k < KL_PROBE_N; k++)
        kl_probe_init(&c->obs.probes[k], (enum kl_probe_kind)k);
    c->pid = pid;
    c->pidfd = pidfd;
    event(w, pod, "Normal", "Created", fp, "Created container %s", a->name);
    event(w, pod, "Normal", "Started", fp, "Started container %s", a->name);
}

static void *killer_main(void *arg)
{
    struct ctr_rt *c = arg;
    struct err e = {0};
    int status = 0;
    /* a kill the plan asked for ends at once when kubelet-sim stops; the kills of stop_all
     * (kubelet-sim stopping) give the grace period, capped */
    int r = kl_container_stop(c->pid, c->pidfd, c->kill_grace_ms,
                              c->kill_at_stop ? c->w->owner->stop : NULL, &status, &e);
    if (r < 0) {
        log_warn(COMPONENT, "stopping a container failed", "pod=%s/%s err=\"%s\"", c->w->ns,
                 c->w->name, err_msg(&e));
        status = W_EXITCODE(137, 0);
    }
    c->kill_status = status;
    atomic_store(&c->kill_done, true);
    wake(c->w);
    return NULL;
}

static void do_kill(struct pod_worker *w, const json_t *pod, const struct kl_action *a)
{
    struct ctr_rt *c = ctr_at(w, a->init, a->index);
    _cleanup_free_ char *fp = field_path(a->init, a->name);
    event(w, pod, "Normal", "Killing", fp, "%s", a->message ? a->message : "Stopping container");
    c->obs.killing = true;
    c->kill_grace_ms = a->grace_ms;
    c->kill_at_stop = true;
    atomic_store(&c->kill_done, false);
    if (pthread_create(&c->killer, NULL, killer_main, c) != 0) {
        int status = 0;
        struct err e = {0};
        kl_container_stop(c->pid, c->pidfd, a->grace_ms, NULL, &status, &e);
        record_exit(c, status);
        return;
    }
    c->killer_joinable = true;
}

/* A TCP connection to ip:port within timeout_ms: the socket, or a negative code. */
static int tcp_connect(const char *ip, int port, uint64_t timeout_ms)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, ip, &sa.sin_addr) != 1)
        return -EINVAL;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 && errno != EINPROGRESS) {
        int r = -errno;
        close(fd);
        return r;
    }
    struct pollfd pf = {.fd = fd, .events = POLLOUT};
    int n = poll(&pf, 1, (int)timeout_ms);
    int soerr = 0;
    socklen_t sl = sizeof(soerr);
    if (n <= 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0 || soerr) {
        close(fd);
        return n == 0 ? -ETIMEDOUT : -(soerr ? soerr : ECONNREFUSED);
    }
    return fd;
}

static int probe_port(const json_t *ctr, const json_t *port)
{
    if (json_is_integer(port))
        return (int)json_integer_value(port);
    const char *name = json_string_value(port);
    int v;
    if (name && parse_int(name, &v) == 0)
        return v;
    size_t i;
    json_t *cp;
    json_array_foreach (json_object_get(ctr, "ports"), i, cp) {
        if (streq_ptr(kobj_str(cp, "name"), name))
            return (int)json_integer_value(json_object_get(cp, "containerPort"));
    }
    return -1;
}

/* Runs a handler (probe or preStop): exec, httpGet, tcpSocket (and grpc as a connection).
 * true on success; out holds the reason otherwise. */
static bool run_handler(struct pod_worker *w, struct ctr_rt *c, const json_t *ctr, const json_t *h,
                        uint64_t timeout_ms, char *out, size_t out_size)
{
    struct kl_pods *p = w->owner;
    out[0] = '\0';
    json_t *x;
    if ((x = json_object_get(h, "exec"))) {
        json_t *cmd = json_object_get(x, "command");
        size_t n = json_array_size(cmd);
        if (n == 0) {
            snprintf(out, out_size, "exec: no command");
            return false;
        }
        const char **argv = xcalloc(n + 1, sizeof(*argv));
        for (size_t i = 0; i < n; i++)
            argv[i] = json_string_value(json_array_get(cmd, i));
        argv[0] = kl_image_program(&c->image, argv[0]); /* /usr/bin/gpuop: the image's program */
        struct err e = {0};
        int r = kl_container_exec(c->pid, argv, timeout_ms, out, out_size, &e);
        free(argv);
        if (r == -ETIMEDOUT)
            snprintf(out, out_size, "command timed out");
        else if (r < 0)
            snprintf(out, out_size, "%s", err_msg(&e));
        return r == 0;
    }
    if ((x = json_object_get(h, "sleep"))) {
        int64_t s = json_integer_value(json_object_get(x, "seconds"));
        stop_wait(p->stop, (uint64_t)(s > 0 ? s : 0) * 1000);
        return true;
    }
    const char *host = p->cfg.node_ip ? p->cfg.node_ip : "127.0.0.1";
    bool http = false;
    if ((x = json_object_get(h, "httpGet")))
        http = true;
    else if (!(x = json_object_get(h, "tcpSocket")) && !(x = json_object_get(h, "grpc"))) {
        snprintf(out, out_size, "unsupported handler");
        return false;
    }
    if (kobj_str(x, "host"))
        host = kobj_str(x, "host");
    int port = probe_port(ctr, json_object_get(x, "port"));
    if (port <= 0 || port > 65535) {
        snprintf(out, out_size, "invalid port");
        return false;
    }
    int fd = tcp_connect(host, port, timeout_ms);
    if (fd < 0) {
        snprintf(out, out_size, "dial tcp %s:%d: connect: %s", host, port, strerror(-fd));
        return false;
    }
    bool ok = true;
    if (http && !streq_ptr(kobj_str(x, "scheme"), "HTTPS")) {
        const char *path = kobj_str(x, "path");
        char req[1024];
        int n = snprintf(req, sizeof(req),
                         "GET %s HTTP/1.1\r\nHost: %s:%d\r\nUser-Agent: kube-probe/1.30\r\n"
                         "Accept: */*\r\nConnection: close\r\n\r\n",
                         path && path[0] ? path : "/", host, port);
        uint64_t deadline = deadline_after(timeout_ms);
        char resp[256];
        size_t got = 0;
        ok = false;
        if (n > 0 && (size_t)n < sizeof(req) && send(fd, req, (size_t)n, MSG_NOSIGNAL) == n) {
            while (got < sizeof(resp) - 1 && !memchr(resp, '\n', got)) {
                struct pollfd pf = {.fd = fd, .events = POLLIN};
                if (poll(&pf, 1, deadline_poll_ms(deadline)) <= 0)
                    break;
                ssize_t k = recv(fd, resp + got, sizeof(resp) - 1 - got, 0);
                if (k <= 0)
                    break;
                got += (size_t)k;
            }
            resp[got] = '\0';
            int code = 0;
            if (sscanf(resp, "HTTP/%*s %d", &code) == 1) {
                ok = code >= 200 && code < 400;
                if (!ok)
                    snprintf(out, out_size, "HTTP probe failed with statuscode: %d", code);
            } else {
                snprintf(out, out_size, "Get \"http://%s:%d%s\": no response", host, port,
                         path ? path : "/");
            }
        }
    }
    close(fd);
    return ok;
}

static void do_probe(struct pod_worker *w, const json_t *pod, const struct kl_action *a)
{
    struct ctr_rt *c = ctr_at(w, a->init, a->index);
    const json_t *spec = ctr_spec(pod, a->init, a->index);
    const json_t *probe = kl_probe_spec(spec, a->probe);
    char out[PROBE_OUT_MAX];
    bool ok = run_handler(w, c, spec, probe, a->grace_ms ? a->grace_ms : 1000, out, sizeof(out));
    kl_probe_record(&c->obs.probes[a->probe], probe, ok, now_ms_real());
    if (!ok) {
        _cleanup_free_ char *fp = field_path(a->init, a->name);
        event(w, pod, "Warning", "Unhealthy", fp, "%s probe failed: %s",
              kl_probe_kind_name(a->probe), out);
    }
}

static void do_prestop(struct pod_worker *w, const json_t *pod, const struct kl_action *a)
{
    struct ctr_rt *c = ctr_at(w, a->init, a->index);
    const json_t *spec = ctr_spec(pod, a->init, a->index);
    char out[PROBE_OUT_MAX];
    if (!run_handler(w, c, spec, kobj_path(spec, "lifecycle.preStop"), a->grace_ms, out,
                     sizeof(out))) {
        _cleanup_free_ char *fp = field_path(a->init, a->name);
        event(w, pod, "Warning", "FailedPreStopHook", fp, "PreStopHook failed: %s", out);
    }
    c->obs.prestop_done = true;
}

/* ---- the worker --------------------------------------------------------------------------- */

/* Whether the pod reads a service-account token: the automounted one, or a projected source. */
static bool pod_wants_token(const json_t *pod)
{
    if (!json_is_false(kobj_path(pod, "spec.automountServiceAccountToken")))
        return true;
    size_t i, k;
    json_t *v, *src;
    json_array_foreach (kobj_path(pod, "spec.volumes"), i, v) {
        json_array_foreach (kobj_path(v, "projected.sources"), k, src) {
            if (json_object_get(src, "serviceAccountToken"))
                return true;
        }
    }
    return false;
}

/* As the kubelet does: a TokenRequest for the pod's ServiceAccount, bound to the pod, so each
 * pod acts with its own account's RBAC (never the kubelet's credentials). */
static int request_token(struct pod_worker *w, const json_t *pod, struct err *e)
{
    struct kl_pods *p = w->owner;
    if (w->sa_token || !p->cfg.kc || !pod_wants_token(pod))
        return 0;
    const char *sa = kobj_path_str(pod, "spec.serviceAccountName");
    if (!sa || !sa[0])
        sa = "default";
    _cleanup_(json_decrefp) json_t *req = json_pack(
        "{s:s,s:s,s:{s:[],s:i,s:{s:s,s:s,s:s,s:s}}}", "apiVersion", "authentication.k8s.io/v1",
        "kind", "TokenRequest", "spec", "audiences", "expirationSeconds", 3607, "boundObjectRef",
        "kind", "Pod", "apiVersion", "v1", "name", w->name, "uid", w->uid);
    _cleanup_(json_decrefp) json_t *resp = NULL;
    int r = kube_create_sub(p->cfg.kc, &KUBE_SERVICEACCOUNTS, w->ns, sa, "token", req, &resp, e);
    if (r < 0)
        return err_prefix(e,
                          "MountVolume.SetUp failed for volume \"kube-api-access\" : failed "
                          "to fetch token for serviceaccount %s",
                          sa);
    const char *tok = kobj_path_str(resp, "status.token");
    if (!tok || !tok[0])
        return err_set(e, -EPROTO, "TokenRequest for serviceaccount %s: no token in the answer",
                       sa);
    w->sa_token = xstrdup(tok);
    return 0;
}

static void setup_volumes(struct pod_worker *w, const json_t *pod)
{
    if (w->vols)
        return;
    struct err e = {0};
    /* the pod's ResourceClaims are prepared before its sandbox, as the kubelet does */
    if (w->owner->cfg.dra && kl_dra_prepare(w->owner->cfg.dra, pod, &e) < 0) {
        _cleanup_free_ char *msg =
            xasprintf("Failed to prepare dynamic resources: %s", err_msg(&e));
        if (!streq_ptr(w->mount_error, msg))
            event(w, pod, "Warning", "FailedPrepareDynamicResources", NULL, "%s", msg);
        set_str(&w->mount_error, msg);
        return;
    }
    if (request_token(w, pod, &e) < 0) {
        if (!streq_ptr(w->mount_error, err_msg(&e)))
            event(w, pod, "Warning", "FailedMount", NULL, "%s", err_msg(&e));
        set_str(&w->mount_error, err_msg(&e));
        return;
    }
    struct kl_spec_input in = spec_input(w, pod);
    if (kl_pod_volumes_setup(&in, &w->vols, &e) < 0) {
        if (!streq_ptr(w->mount_error, err_msg(&e)))
            event(w, pod, "Warning", "FailedMount", NULL, "%s", err_msg(&e));
        set_str(&w->mount_error, err_msg(&e));
        return;
    }
    set_str(&w->mount_error, NULL);
}

static void write_status(struct pod_worker *w, json_t *status)
{
    struct kl_pods *p = w->owner;
    if (!p->cfg.kc || (w->written && json_equal(w->written, status)))
        return;
    json_t *patch = json_pack("{s:O}", "status", status);
    struct kube_patch_opts o = {.type = KUBE_PATCH_MERGE, .status = true};
    struct err e = {0};
    int r = kube_patch(p->cfg.kc, &KUBE_PODS, w->ns, w->name, &o, patch, NULL, &e);
    json_decref(patch);
    if (r < 0) {
        log_debug(COMPONENT, "pod status not written", "pod=%s/%s err=\"%s\"", w->ns, w->name,
                  err_msg(&e));
        return;
    }
    json_decref(w->written);
    w->written = json_incref(status);
}

static struct kl_pod_obs pod_obs(struct pod_worker *w, bool removed, struct kl_ctr_obs *io,
                                 struct kl_ctr_obs *co)
{
    for (size_t i = 0; i < w->n_init; i++)
        io[i] = w->init[i].obs;
    for (size_t i = 0; i < w->n_ctrs; i++)
        co[i] = w->ctrs[i].obs;
    return (struct kl_pod_obs){
        .init = io,
        .n_init = w->n_init,
        .ctrs = co,
        .n_ctrs = w->n_ctrs,
        .sandbox_ready = w->vols != NULL,
        .mount_error = w->mount_error,
        .admitted_ms = w->admitted_ms,
        .deletion_seen_ms = w->deletion_seen_ms,
        .removed = removed,
        .host_ip = w->owner->cfg.node_ip,
        .pod_ip = w->owner->cfg.node_ip,
    };
}

/* Waits for a change (a process exit, a pod update, a kill done), the plan's wake time or the
 * stop token. */
static void worker_wait(struct pod_worker *w, uint64_t wake_ms)
{
    struct pollfd fds[MAX_POLL_FDS];
    size_t n = 0;
    fds[n++] = (struct pollfd){.fd = w->wake_fd, .events = POLLIN};
    fds[n++] = (struct pollfd){.fd = stop_fd(w->owner->stop), .events = POLLIN};
    for (int l = 0; l < 2; l++) {
        size_t cnt = l ? w->n_ctrs : w->n_init;
        for (size_t i = 0; i < cnt && n < MAX_POLL_FDS; i++) {
            struct ctr_rt *c = ctr_at(w, l == 0, i);
            if (c->obs.phase == KL_CTR_RUNNING && !c->obs.killing && c->pidfd >= 0)
                fds[n++] = (struct pollfd){.fd = c->pidfd, .events = POLLIN};
        }
    }
    uint64_t now = now_ms_real();
    int timeout = wake_ms == UINT64_MAX ? 60000 : wake_ms <= now ? 0 : (int)(wake_ms - now);
    if (timeout > 60000)
        timeout = 60000; /* a periodic resync, as the kubelet's */
    if (poll(fds, n, timeout) > 0 && (fds[0].revents & POLLIN)) {
        uint64_t v;
        ssize_t k = read(w->wake_fd, &v, sizeof(v));
        (void)k;
    }
}

static void stop_all(struct pod_worker *w, const json_t *pod)
{
    int64_t g = json_integer_value(kobj_path(pod, "spec.terminationGracePeriodSeconds"));
    uint64_t grace = g > 0 ? (uint64_t)g * 1000 : 0;
    if (!json_is_integer(kobj_path(pod, "spec.terminationGracePeriodSeconds")))
        grace = 30000;
    if (grace > SHUTDOWN_GRACE_MS)
        grace = SHUTDOWN_GRACE_MS;
    for (int l = 0; l < 2; l++) {
        size_t n = l ? w->n_ctrs : w->n_init;
        for (size_t i = 0; i < n; i++) {
            struct ctr_rt *c = ctr_at(w, l == 0, i);
            if (c->obs.phase == KL_CTR_RUNNING && !c->obs.killing) {
                c->obs.killing = true;
                c->kill_grace_ms = grace;
                c->kill_at_stop = false;
                atomic_store(&c->kill_done, false);
                if (pthread_create(&c->killer, NULL, killer_main, c) == 0)
                    c->killer_joinable = true;
                else
                    c->obs.killing = false;
            }
        }
    }
    for (int l = 0; l < 2; l++) {
        size_t n = l ? w->n_ctrs : w->n_init;
        for (size_t i = 0; i < n; i++) {
            struct ctr_rt *c = ctr_at(w, l == 0, i);
            if (c->killer_joinable) {
                pthread_join(c->killer, NULL);
                c->killer_joinable = false;
                record_exit(c, c->kill_status);
            }
        }
    }
}

static void *worker_main(void *arg)
{
    struct pod_worker *w = arg;
    struct kl_pods *p = w->owner;
    struct kl_plan_config pc = {.backoff_base_ms = p->cfg.backoff_base_ms,
                                .backoff_max_ms = p->cfg.backoff_max_ms};
    json_t *pod = NULL;
    bool delete_done = false, gone = false;
    while (!atomic_load(&p->shutting_down)) {
        pthread_mutex_lock(&p->lock);
        json_decref(pod);
        pod = json_incref(w->pod);
        bool removed = w->removed;
        pthread_mutex_unlock(&p->lock);
        gone = removed;

        if ((kobj_deletion_timestamp(pod) || removed) && !w->deletion_seen_ms)
            w->deletion_seen_ms = now_ms_real();
        observe(w);
        if (!w->deletion_seen_ms)
            setup_volumes(w, pod);

        struct kl_ctr_obs *io = xcalloc(w->n_init + 1, sizeof(*io));
        struct kl_ctr_obs *co = xcalloc(w->n_ctrs + 1, sizeof(*co));
        struct kl_pod_obs obs = pod_obs(w, removed, io, co);
        struct kl_pod_plan plan = {0};
        struct err e = {0};
        int r = kl_pod_plan(pod, &obs, &pc, now_ms_real(), &plan, &e);
        free(io);
        free(co);
        if (r < 0) {
            log_warn(COMPONENT, "pod not run", "pod=%s/%s err=\"%s\"", w->ns, w->name, err_msg(&e));
            worker_wait(w, UINT64_MAX);
            continue;
        }
        for (size_t i = 0; i < plan.n_events; i++)
            event(w, pod, plan.events[i].type, plan.events[i].reason, plan.events[i].field_path,
                  "%s", plan.events[i].message);
        if (!removed)
            write_status(w, plan.status);
        for (size_t i = 0; i < plan.n_actions && !atomic_load(&p->shutting_down); i++) {
            const struct kl_action *a = &plan.actions[i];
            switch (a->kind) {
            case KL_ACT_PULL:
                do_pull(w, pod, a);
                break;
            case KL_ACT_START:
                do_start(w, pod, a);
                break;
            case KL_ACT_PRESTOP:
                do_prestop(w, pod, a);
                break;
            case KL_ACT_KILL:
                do_kill(w, pod, a);
                break;
            case KL_ACT_PROBE:
                do_probe(w, pod, a);
                break;
            }
        }
        if (plan.terminal && plan.all_stopped && !w->released) {
            if (p->cfg.devices)
                kl_devices_release(p->cfg.devices, w->uid);
            if (p->cfg.dra)
                kl_dra_unprepare(p->cfg.dra, w->uid);
            w->released = true;
        }
        bool acted = plan.n_actions > 0;
        bool finished = (removed && plan.all_stopped) || plan.delete_pod;
        if (plan.delete_pod && p->cfg.kc) {
            struct kube_delete_opts o = {
                .has_grace = true, .grace_period_seconds = 0, .precondition_uid = w->uid};
            if (kube_delete(p->cfg.kc, &KUBE_PODS, w->ns, w->name, &o, &e) < 0 && e.code != -ENOENT)
                log_warn(COMPONENT, "pod not deleted", "pod=%s/%s err=\"%s\"", w->ns, w->name,
                         err_msg(&e));
            delete_done = true;
        }
        uint64_t wake_ms = plan.wake_ms;
        kl_pod_plan_clear(&plan);
        if (finished || delete_done)
            break;
        if (!acted)
            worker_wait(w, wake_ms);
    }
    /* kubelet-sim stops, or the pod is gone: nothing of it may keep running */
    stop_all(w, pod);
    if (delete_done || gone) {
        struct err e = {0};
        if (p->cfg.devices)
            kl_devices_release(p->cfg.devices, w->uid);
        if (p->cfg.dra)
            kl_dra_unprepare(p->cfg.dra, w->uid);
        if (kl_pod_volumes_teardown(p->cfg.node->root, w->uid, &e) < 0)
            log_warn(COMPONENT, "pod folder not removed", "pod=%s/%s err=\"%s\"", w->ns, w->name,
                     err_msg(&e));
    }
    if (delete_done) {
        pthread_mutex_lock(&p->lock);
        json_object_set_new(p->done_uids, w->uid, json_true());
        pthread_mutex_unlock(&p->lock);
    }
    json_decref(pod);
    atomic_store(&w->finished, true);
    return NULL;
}

static void worker_free(struct pod_worker *w)
{
    if (!w)
        return;
    for (int l = 0; l < 2; l++) {
        size_t n = l ? w->n_ctrs : w->n_init;
        for (size_t i = 0; i < n; i++) {
            struct ctr_rt *c = ctr_at(w, l == 0, i);
            if (c->pidfd >= 0)
                close(c->pidfd);
            free(c->container_id);
            free(c->image_id);
            free(c->pull_error);
            free(c->create_error);
            free(c->create_reason);
            free(c->last_id);
            free(c->log_path);
            free(c->term_message);
            free(c->last_message);
            kl_image_clear(&c->image);
        }
    }
    free(w->init);
    free(w->ctrs);
    kl_pod_volumes_free(w->vols);
    free(w->mount_error);
    if (w->sa_token) {
        explicit_bzero(w->sa_token, strlen(w->sa_token));
        free(w->sa_token);
    }
    json_decref(w->written);
    json_decref(w->pod);
    if (w->wake_fd >= 0)
        close(w->wake_fd);
    free(w->uid);
    free(w->ns);
    free(w->name);
    free(w);
}

/* A pod that ran under an earlier kubelet-sim: its processes are gone (as after a node reboot).
 * Containers that ran count as exited with an unknown result, so the restart policy decides and
 * restartCount goes on from where it was; init containers that completed stay completed. */
static void seed_from_status(struct pod_worker *w, const json_t *pod)
{
    static const char *const lists[2] = {"status.initContainerStatuses",
                                         "status.containerStatuses"};
    for (int l = 0; l < 2; l++) {
        size_t n = l ? w->n_ctrs : w->n_init;
        const json_t *specs = kobj_path(pod, l ? "spec.containers" : "spec.initContainers");
        for (size_t i = 0; i < n; i++) {
            const char *name = kobj_str(json_array_get(specs, i), "name");
            size_t k;
            json_t *cs;
            json_array_foreach (kobj_path(pod, lists[l]), k, cs) {
                if (!streq_ptr(kobj_str(cs, "name"), name) || !kobj_str(cs, "containerID"))
                    continue;
                struct ctr_rt *c = ctr_at(w, l == 0, i);
                json_t *term = kobj_path(cs, "state.terminated");
                uint64_t now = now_ms_real();
                c->obs.restart_count =
                    (unsigned)json_integer_value(json_object_get(cs, "restartCount"));
                c->obs.phase = KL_CTR_EXITED;
                c->obs.pulled = true;
                set_str(&c->image_id, kobj_str(cs, "imageID"));
                c->obs.image_id = c->image_id;
                set_str(&c->container_id, kobj_str(cs, "containerID"));
                c->obs.container_id = c->container_id;
                c->obs.started_ms = now;
                c->obs.exited = (struct kl_ctr_termination){
                    .exit_code =
                        term ? (int)json_integer_value(json_object_get(term, "exitCode")) : 255,
                    .reason = term ? NULL : "Unknown",
                    .started_ms = now,
                    .finished_ms = now,
                    .container_id = c->container_id,
                };
            }
        }
    }
}

/* ---- informer handlers -------------------------------------------------------------------- */

static struct pod_worker *find_locked(struct kl_pods *p, const char *uid)
{
    for (struct pod_worker *w = p->workers; w; w = w->next)
        if (streq_ptr(w->uid, uid))
            return w;
    return NULL;
}

/* Joins and frees the workers that ended (with p->lock not held). */
static void reap_workers(struct kl_pods *p)
{
    for (;;) {
        struct pod_worker *done = NULL;
        pthread_mutex_lock(&p->lock);
        for (struct pod_worker **pp = &p->workers; *pp; pp = &(*pp)->next) {
            if (atomic_load(&(*pp)->finished)) {
                done = *pp;
                *pp = done->next;
                break;
            }
        }
        pthread_mutex_unlock(&p->lock);
        if (!done)
            return;
        pthread_join(done->thread, NULL);
        worker_free(done);
    }
}

static void on_pod(json_t *obj, struct kl_pods *p)
{
    const char *uid = kobj_uid(obj);
    if (!uid || atomic_load(&p->shutting_down))
        return;
    reap_workers(p);
    pthread_mutex_lock(&p->lock);
    if (json_object_get(p->done_uids, uid)) {
        pthread_mutex_unlock(&p->lock);
        return;
    }
    struct pod_worker *w = find_locked(p, uid);
    if (w) {
        json_decref(w->pod);
        w->pod = json_incref(obj);
        wake(w);
        pthread_mutex_unlock(&p->lock);
        return;
    }
    w = xcalloc(1, sizeof(*w));
    w->owner = p;
    w->uid = xstrdup(uid);
    w->ns = xstrdup(kobj_namespace(obj) ? kobj_namespace(obj) : "default");
    w->name = xstrdup(kobj_name(obj) ? kobj_name(obj) : "");
    w->pod = json_incref(obj);
    w->admitted_ms = now_ms_real();
    w->n_init = json_array_size(kobj_path(obj, "spec.initContainers"));
    w->n_ctrs = json_array_size(kobj_path(obj, "spec.containers"));
    w->init = xcalloc(w->n_init + 1, sizeof(*w->init));
    w->ctrs = xcalloc(w->n_ctrs + 1, sizeof(*w->ctrs));
    for (int l = 0; l < 2; l++) {
        size_t n = l ? w->n_ctrs : w->n_init;
        for (size_t i = 0; i < n; i++) {
            struct ctr_rt *c = ctr_at(w, l == 0, i);
            c->pidfd = -1;
            c->w = w;
        }
    }
    seed_from_status(w, obj);
    w->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (w->wake_fd < 0 || pthread_create(&w->thread, NULL, worker_main, w) != 0) {
        log_error(COMPONENT, "pod worker not started", "pod=%s/%s", w->ns, w->name);
        pthread_mutex_unlock(&p->lock);
        worker_free(w);
        return;
    }
    w->next = p->workers;
    p->workers = w;
    pthread_mutex_unlock(&p->lock);
}

static void on_add(json_t *obj, void *ud)
{
    on_pod(obj, ud);
}

static void on_update(json_t *old, json_t *obj, void *ud)
{
    (void)old;
    on_pod(obj, ud);
}

static void on_delete(json_t *obj, void *ud)
{
    struct kl_pods *p = ud;
    pthread_mutex_lock(&p->lock);
    struct pod_worker *w = find_locked(p, kobj_uid(obj));
    if (w) {
        w->removed = true;
        wake(w);
    }
    if (kobj_uid(obj))
        json_object_del(p->done_uids, kobj_uid(obj));
    pthread_mutex_unlock(&p->lock);
}

/* ---- the module --------------------------------------------------------------------------- */

/* "https://host:port" → host, port ("443" when absent). */
static void split_server(const char *url, char **ret_host, char **ret_port)
{
    const char *s = strstr(url ? url : "", "://");
    s = s ? s + 3 : (url ? url : "");
    const char *end = strchrnul(s, '/');
    const char *colon = NULL;
    if (*s == '[') {
        const char *rb = memchr(s, ']', (size_t)(end - s));
        if (rb) {
            *ret_host = xstrndup(s + 1, (size_t)(rb - s - 1));
            *ret_port = rb[1] == ':' ? xstrndup(rb + 2, (size_t)(end - rb - 2)) : xstrdup("443");
            return;
        }
    }
    for (const char *c = s; c < end; c++)
        if (*c == ':')
            colon = c;
    if (colon) {
        *ret_host = xstrndup(s, (size_t)(colon - s));
        *ret_port = xstrndup(colon + 1, (size_t)(end - colon - 1));
    } else {
        *ret_host = xstrndup(s, (size_t)(end - s));
        *ret_port = xstrdup("443");
    }
}

int kl_pods_new(const struct kl_pods_config *cfg, struct kl_pods **ret, struct err *e)
{
    if (!cfg || !cfg->node || !cfg->node->root || !cfg->gpuop_exe || !cfg->sim_image_bin)
        return err_set(e, -EINVAL, "pod workers: node, gpuop and image folders are required");
    struct kl_pods *p = xcalloc(1, sizeof(*p));
    p->cfg = *cfg;
    p->done_uids = json_object();
    struct stat st;
    p->sim_bin_ok = stat(cfg->sim_image_bin, &st) == 0 && S_ISDIR(st.st_mode);
    if (!p->sim_bin_ok)
        log_warn(COMPONENT, "simulated images' folder missing: driver and CUDA images will not run",
                 "node=%s folder=%s", cfg->node->name, cfg->sim_image_bin);
    pthread_mutex_init(&p->lock, NULL);
    int r = stop_token_new(&p->stop, e);
    if (r < 0) {
        free(p);
        return r;
    }
    if (cfg->kc) {
        split_server(cfg->api_server ? cfg->api_server : kube_client_server(cfg->kc), &p->api_host,
                     &p->api_port);
        if ((r = kube_client_credentials(cfg->kc, &p->sa_token, &p->sa_ca, e)) < 0) {
            kl_pods_free(p);
            return err_prefix(e, "node %s: service-account credentials", cfg->node->name);
        }
        /* a client without a bearer token (client certificates, or no authentication): pods
         * still get a token file, as in-cluster config requires one; an API server that
         * authenticates will refuse it */
        if (!p->sa_token)
            p->sa_token = xstrdup("kubelet-sim-no-token");
        _cleanup_free_ char *sel = xasprintf("spec.nodeName=%s", cfg->node->name);
        struct kube_informer_opts o = {
            .field_selector = sel,
            .handlers = {.on_add = on_add,
                         .on_update = on_update,
                         .on_delete = on_delete,
                         .userdata = p},
        };
        if ((r = kube_informer_new(cfg->kc, &KUBE_PODS, &o, &p->inf, e)) < 0) {
            kl_pods_free(p);
            return err_prefix(e, "node %s: pod informer", cfg->node->name);
        }
    }
    *ret = p;
    return 0;
}

void kl_pods_free(struct kl_pods *p)
{
    if (!p)
        return;
    atomic_store(&p->shutting_down, true);
    kube_informer_free(p->inf); /* no handler runs after this */
    p->inf = NULL;
    pthread_mutex_lock(&p->lock);
    for (struct pod_worker *w = p->workers; w; w = w->next)
        wake(w);
    pthread_mutex_unlock(&p->lock);
    stop_request(p->stop);
    for (struct pod_worker *w = p->workers, *next; w; w = next) {
        next = w->next;
        pthread_join(w->thread, NULL);
        worker_free(w);
    }
    p->workers = NULL;
    stop_token_free(p->stop);
    json_decref(p->done_uids);
    pthread_mutex_destroy(&p->lock);
    if (p->sa_token) {
        explicit_bzero(p->sa_token, strlen(p->sa_token));
        free(p->sa_token);
    }
    free(p->sa_ca);
    free(p->api_host);
    free(p->api_port);
    free(p);
}

/* ---- logs --------------------------------------------------------------------------------- */

int kl_pods_log_path(struct kl_pods *p, const char *ns, const char *pod, const char *container,
                     bool previous, char **ret_path, struct err *e)
{
    /* the pod's folder: <ns>_<pod>_<uid>; the newest uid when a pod of that name came again */
    _cleanup_free_ char *base = xasprintf("%s/var/log/pods", p->cfg.node->root);
    _cleanup_free_ char *prefix = xasprintf("%s_%s_", ns, pod);
    DIR *d = opendir(base);
    if (!d)
        return err_set(e, -ENOENT, "pod \"%s\" in namespace \"%s\": no logs", pod, ns);
    _cleanup_free_ char *best = NULL;
    time_t best_t = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!str_has_prefix(de->d_name, prefix) || strchr(de->d_name + strlen(prefix), '_'))
            continue;
        _cleanup_free_ char *dir = xasprintf("%s/%s/%s", base, de->d_name, container);
        struct stat st;
        if (stat(dir, &st) < 0)
            continue;
        if (!best || st.st_mtime >= best_t) {
            free(best);
            best = steal_ptr(&dir);
            best_t = st.st_mtime;
        }
    }
    closedir(d);
    if (!best)
        return err_set(e, -ENOENT, "container \"%s\" in pod \"%s\" is waiting to start", container,
                       pod);
    /* the highest restart number is the current attempt */
    long hi = -1;
    d = opendir(best);
    while (d && (de = readdir(d))) {
        int n;
        char *dot = strstr(de->d_name, ".log");
        if (!dot || dot[4])
            continue;
        _cleanup_free_ char *num = xstrndup(de->d_name, (size_t)(dot - de->d_name));
        if (parse_int(num, &n) == 0 && n > hi)
            hi = n;
    }
    if (d)
        closedir(d);
    long want = previous ? hi - 1 : hi;
    if (want < 0)
        return err_set(e, -ENOENT,
                       previous ? "previous terminated container \"%s\" in pod \"%s\" not found"
                                : "container \"%s\" in pod \"%s\" is waiting to start",
                       container, pod);
    *ret_path = xasprintf("%s/%ld.log", best, want);
    return 0;
}
