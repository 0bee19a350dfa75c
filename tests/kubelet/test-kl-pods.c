/* SPDX-License-Identifier: Apache-2.0 */
/* The pod workers' shell against kubesim, with a stand-in container runtime (plain fork/exec:
 * no namespaces, so no root needed) and no devices: init containers, a running pod turning
 * Ready through an exec readiness probe, CrashLoopBackOff with lastState and the previous log,
 * ErrImagePull/ImagePullBackOff, a Never pod Succeeded, graceful deletion ending with the
 * object deleted, Events. The real runtime is tested in its own module. Skips (77) when
 * kubesim is not built. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>

#include <cmocka.h>

#include "kl-cdi.h"
#include "kl-dra.h"
#include "kl-pods.h"
#include "kl-runtime.h"
#include "kobj.h"
#include "kube-peer.h"

/* every process started, to check that none is left */
static pid_t started[256];
static size_t n_started;

#ifdef KL_PODS_REAL_RUNTIME
/* The real runtime (namespaces, mounts): kl_container_start wrapped (ld --wrap) to count. */
int __real_kl_container_start(const struct kl_container_spec *s, pid_t *ret_pid, int *ret_pidfd,
                              struct err *e);
int __wrap_kl_container_start(const struct kl_container_spec *s, pid_t *ret_pid, int *ret_pidfd,
                              struct err *e);
int __wrap_kl_container_start(const struct kl_container_spec *s, pid_t *ret_pid, int *ret_pidfd,
                              struct err *e)
{
    int r = __real_kl_container_start(s, ret_pid, ret_pidfd, e);
    if (r == 0 && n_started < ARRAY_SIZE(started))
        started[n_started++] = *ret_pid;
    return r;
}
#else
/* ---- the stand-in runtime ----------------------------------------------------------------- */

static const char *env_path(const char *const *envp)
{
    for (; envp && *envp; envp++)
        if (strncmp(*envp, "PATH=", 5) == 0)
            return *envp + 5;
    return "/usr/bin:/bin";
}

static char *find_program(const char *name, const char *const *envp)
{
    if (strchr(name, '/'))
        return strdup(name);
    char *path = strdup(env_path(envp)), *save = NULL;
    for (char *d = strtok_r(path, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        char *c = xasprintf("%s/%s", d, name);
        if (access(c, X_OK) == 0) {
            free(path);
            return c;
        }
        free(c);
    }
    free(path);
    return NULL;
}

int kl_container_start(const struct kl_container_spec *s, pid_t *ret_pid, int *ret_pidfd,
                       struct err *e)
{
    char *prog = find_program(s->argv[0], s->envp);
    if (!prog)
        return err_set(e, -ENOENT, "exec: \"%s\": executable file not found in $PATH", s->argv[0]);
    int log = open(s->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
    if (log < 0) {
        free(prog);
        return err_errno(e, -errno, "open \"%s\"", s->log_path);
    }
    pid_t pid = fork();
    if (pid == 0) {
        dup2(log, 1);
        dup2(log, 2);
        execve(prog, (char *const *)s->argv, (char *const *)s->envp);
        _exit(127);
    }
    close(log);
    free(prog);
    if (pid > 0 && n_started < ARRAY_SIZE(started))
        started[n_started++] = pid;
    if (pid < 0)
        return err_errno(e, -errno, "fork");
    int fd = (int)syscall(SYS_pidfd_open, pid, 0);
    *ret_pid = pid;
    *ret_pidfd = fd;
    return 0;
}

int kl_container_reap(pid_t pid, int pidfd, int *ret_status, struct err *e)
{
    (void)pidfd;
    (void)e;
    int st;
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid) {
        *ret_status = st;
        return 1;
    }
    return 0;
}

int kl_container_stop(pid_t pid, int pidfd, uint64_t grace_ms, const struct stop_token *stop,
                      int *ret_status, struct err *e)
{
    (void)stop;
    (void)e;
    kill(pid, SIGTERM);
    struct pollfd pf = {.fd = pidfd, .events = POLLIN};
    if (poll(&pf, 1, (int)grace_ms) <= 0)
        kill(pid, SIGKILL);
    waitpid(pid, ret_status, 0);
    return 0;
}

int kl_container_exec(pid_t pid, const char *const *argv, uint64_t timeout_ms, char *out,
                      size_t out_size, struct err *e)
{
    (void)pid;
    (void)timeout_ms;
    (void)e;
    if (out && out_size)
        out[0] = '\0';
    pid_t c = fork();
    if (c == 0) {
        execvp(argv[0], (char *const *)argv);
        _exit(127);
    }
    int st;
    waitpid(c, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

#endif

int kl_devices_allocate(struct kl_devices *d, const char *pod_uid, const char *pod_namespace,
                        const char *pod_name, const char *container, json_t *requests,
                        struct kl_alloc **ret, struct err *e)
{
    (void)d, (void)pod_uid, (void)pod_namespace, (void)pod_name, (void)container;
    (void)requests, (void)ret;
    return err_set(e, -EAGAIN, "no devices in this test");
}
void kl_devices_release(struct kl_devices *d, const char *pod_uid)
{
    (void)d, (void)pod_uid;
}
void kl_alloc_free(struct kl_alloc *a)
{
    (void)a;
}
int kl_cdi_resolve(const char *root, const char *const *names, struct kl_alloc *a, struct err *e)
{
    (void)root, (void)names, (void)a;
    return err_set(e, -ENOENT, "no CDI in this test");
}
int kl_device_resolve(const struct kl_alloc_device *d, const struct stat *host, int host_errno,
                      struct kl_device *ret, struct err *e)
{
    (void)d, (void)host, (void)host_errno, (void)ret;
    return err_set(e, -ENODEV, "no devices in this test");
}
/* no DRA manager in this test (the config's dra is NULL): never called */
int kl_dra_prepare(struct kl_dra *d, const json_t *pod, struct err *e)
{
    (void)d, (void)pod, (void)e;
    return 0;
}
int kl_dra_container_alloc(struct kl_dra *d, const json_t *pod, const char *container,
                           struct kl_alloc **alloc, struct err *e)
{
    (void)d, (void)pod, (void)container, (void)alloc, (void)e;
    return 0;
}
void kl_dra_unprepare(struct kl_dra *d, const char *pod_uid)
{
    (void)d, (void)pod_uid;
}

/* ---- the test ----------------------------------------------------------------------------- */

static char tmpdir[256];
static char kubesim[512];
static struct peer sim;
static struct kube_client *kc;

static int setup(void **state)
{
    (void)state;
#ifdef KL_PODS_REAL_RUNTIME
    if (geteuid() != 0) {
        fprintf(stderr, "skip: the container runtime needs root\n");
        exit(77);
    }
#endif
    const char *b = getenv("GPUOP_BUILD_ROOT");
    snprintf(kubesim, sizeof(kubesim), "%s/kubesim", b ? b : "build");
    if (access(kubesim, X_OK) != 0) {
        fprintf(stderr, "skip: %s not built\n", kubesim);
        exit(77);
    }
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/kl-pods.XXXXXX");
    assert_non_null(mkdtemp(tmpdir));
    char kcpath[512], listen[64];
    snprintf(kcpath, sizeof(kcpath), "%s/kc.yaml", tmpdir);
    snprintf(listen, sizeof(listen), "127.0.0.1:%d", free_port());
    char *argv[] = {kubesim, "--listen",    listen,    "--kubeconfig-out",
                    kcpath,  "--log-level", "warn",    "--pod-ready-delay",
                    "1h",    "--tls",       "--token", "t0ken-for-pods",
                    NULL};
    assert_int_equal(peer_start(argv, false, &sim), 0);
    if (!wait_file(kcpath, 10000))
        fail_msg("kubesim wrote no kubeconfig");
    struct kube_options o = {.kubeconfig = kcpath, .qps = 1000, .burst = 1000};
    struct err e = {0};
    if (kube_client_new(&o, &kc, &e) < 0)
        fail_msg("client: %s", err_msg(&e));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    kube_client_free(kc);
    peer_stop(&sim);
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static void create_pod(const char *json)
{
    json_error_t je;
    json_t *pod = json_loads(json, 0, &je);
    if (!pod)
        fail_msg("pod JSON: %s", je.text);
    struct err e = {0};
    if (kube_create(kc, &KUBE_PODS, "default", pod, NULL, &e) < 0)
        fail_msg("create: %s", err_msg(&e));
    json_decref(pod);
}

/* Waits (up to 20 s) until the pod's status value at path is want (a string, or JSON text);
 * "(gone)" waits until the pod is deleted. */
static void wait_pod(const char *name, const char *path, const char *want)
{
    uint64_t deadline = now_ms_mono() + 20000;
    char *last = NULL;
    while (now_ms_mono() < deadline) {
        json_t *pod = NULL;
        struct err e = {0};
        int r = kube_get(kc, &KUBE_PODS, "default", name, &pod, &e);
        if (r == -ENOENT && strcmp(want, "(gone)") == 0) {
            free(last);
            return;
        }
        if (r == 0) {
            json_t *v = kobj_path(pod, path);
            free(last);
            last = json_is_string(v) ? strdup(json_string_value(v))
                   : v               ? json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT)
                                     : strdup("(absent)");
            bool ok = strcmp(last, want) == 0 || (strcmp(want, "(any)") == 0 && v);
            if (!ok && strcmp(want, "(gone)") == 0) {
                free(last);
                last = json_dumps(json_object_get(pod, "status"), JSON_COMPACT);
            }
            json_decref(pod);
            if (ok) {
                free(last);
                return;
            }
        }
        usleep(50000);
    }
    json_t *pod = NULL;
    struct err e = {0};
    char *all = NULL;
    if (kube_get(kc, &KUBE_PODS, "default", name, &pod, &e) == 0)
        all = json_dumps(json_object_get(pod, "status"), JSON_INDENT(1));
    fail_msg("pod %s: %s is %s, want %s\n%s", name, path, last ? last : "(none)", want,
             all ? all : "");
}

#define POD(name, spec)                                                                       \
    "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"" name "\"},\"spec\":{" \
    "\"nodeName\":\"n1\",\"terminationGracePeriodSeconds\":2," spec "}}"

static void test_lifecycle(void **state)
{
    (void)state;
    if (getenv("KL_TEST_VERBOSE"))
        log_set_level(LOG_DEBUG);
    char root[512];
    snprintf(root, sizeof(root), "%s/n1", tmpdir);
    assert_int_equal(mkdir_p(root, 0755), 0);
    struct kl_node_spec node = {.name = "n1", .root = root, .cpu = 8, .memory_bytes = 1ULL << 30};
    const char *sim_env[] = {"GPUOP_SIM_ROOT=/x", NULL};
    struct kl_pods_config cfg = {
        .node = &node,
        .node_ip = "127.0.0.1",
        .kc = kc,
        .gpuop_exe = "/bin/sh", /* a "gpuop image" runs the shell here */
        .sim_image_bin = "/nonexistent",
        .sim_env = sim_env,
        .backoff_base_ms = 300,
        .backoff_max_ms = 1200,
        .api_server = "https://10.9.8.7:6443",
    };
    struct kl_pods *p = NULL;
    struct err e = {0};
    /* the node must exist: pods bound to a missing node are garbage-collected */
    json_t *n1 = json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "v1", "kind", "Node", "metadata",
                           "name", "n1");
    assert_int_equal(kube_create(kc, &KUBE_NODES, NULL, n1, NULL, &e), 0);
    json_decref(n1);
    if (kl_pods_new(&cfg, &p, &e) < 0)
        fail_msg("kl_pods_new: %s", err_msg(&e));

    create_pod(POD("web",
                   "\"initContainers\":[{\"name\":\"init\",\"image\":\"gpuop:1\","
                   "\"args\":[\"-c\",\"echo init-ran\"]}],"
                   "\"containers\":[{\"name\":\"main\",\"image\":\"gpuop:1\",\"args\":[\"-c\","
                   "\"echo hello $(GREETING) $GPUOP_SIM_ROOT "
                   "$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT; exec sleep 30\"],\"env\":[{"
                   "\"name\":\"GREETING\",\"value\":\"world\"}],\"readinessProbe\":{"
                   "\"exec\":{\"command\":[\"true\"]},\"periodSeconds\":1}}]"));
    create_pod(POD("crash", "\"containers\":[{\"name\":\"c\",\"image\":\"gpuop:1\",\"args\":["
                            "\"-c\",\"echo crashing; exit 3\"]}]"));
    create_pod(POD("nopull", "\"containers\":[{\"name\":\"c\",\"image\":\"busybox:1.36\"}]"));
    /* a liveness probe to a port nothing listens on: killed and restarted */
    create_pod(POD("live", "\"containers\":[{\"name\":\"c\",\"image\":\"gpuop:1\",\"args\":["
                           "\"-c\",\"exec sleep 30\"],\"livenessProbe\":{\"tcpSocket\":{\"port\":"
                           "1},\"periodSeconds\":1,\"failureThreshold\":1}}]"));
    create_pod(POD("job", "\"restartPolicy\":\"Never\",\"containers\":[{\"name\":\"c\","
                          "\"image\":\"gpuop:1\",\"args\":[\"-c\",\"exit 0\"]}]"));

    wait_pod("web", "status.phase", "Running");
    wait_pod("web", "status.conditions.2.type", "Ready");
    wait_pod("web", "status.conditions.2.status", "True");
    wait_pod("web", "status.initContainerStatuses.0.state.terminated.reason", "Completed");
    wait_pod("web", "status.containerStatuses.0.ready", "true");
    wait_pod("web", "status.hostIP", "127.0.0.1");
    char *log = NULL;
    assert_int_equal(kl_pods_log_path(p, "default", "web", "main", false, &log, &e), 0);
    assert_true(str_has_suffix(log, "/main/0.log"));
    char *text = NULL;
    size_t len;
    assert_int_equal(file_read_all(log, 4096, &text, &len, &e), 0);
    assert_string_equal(text, "hello world /x 10.9.8.7:6443\n");
    free(text);
    free(log);
    assert_int_equal(kl_pods_log_path(p, "default", "web", "main", true, &log, &e), -ENOENT);
    assert_string_equal(err_msg(&e),
                        "previous terminated container \"main\" in pod \"web\" not found");

    /* the service-account token (the pod's own ServiceAccount's, from a TokenRequest) and the
     * client's CA, where in-cluster config reads them */
    {
        json_t *web = NULL;
        assert_int_equal(kube_get(kc, &KUBE_PODS, "default", "web", &web, &e), 0);
        char *tok = NULL, *ca = NULL, *got = NULL;
        assert_int_equal(kube_client_credentials(kc, &tok, &ca, &e), 0);
        assert_non_null(tok);
        assert_non_null(ca);
        char *path = xasprintf("%s/var/lib/kubelet/pods/%s/volumes/kubernetes.io~projected/"
                               "kube-api-access-sim/token",
                               root, kobj_uid(web));
        assert_int_equal(file_read_all(path, 65536, &got, &len, &e), 0);
        assert_string_not_equal(got, tok); /* never the kubelet's own credentials */
        static const struct kube_resource token_reviews = {"authentication.k8s.io", "v1",
                                                           "tokenreviews", "TokenReview", false};
        json_t *review = json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "authentication.k8s.io/v1",
                                   "kind", "TokenReview", "spec", "token", got);
        json_t *answer = NULL;
        assert_int_equal(kube_create(kc, &token_reviews, NULL, review, &answer, &e), 0);
        assert_string_equal(kobj_path_str(answer, "status.user.username"),
                            "system:serviceaccount:default:default");
        json_decref(review);
        json_decref(answer);
        free(got);
        free(path);
        path = xasprintf("%s/var/lib/kubelet/pods/%s/volumes/kubernetes.io~projected/"
                         "kube-api-access-sim/ca.crt",
                         root, kobj_uid(web));
        assert_int_equal(file_read_all(path, 1 << 20, &got, &len, &e), 0);
        assert_string_equal(got, ca);
        free(got);
        free(path);
        free(tok);
        free(ca);
        json_decref(web);
    }

    wait_pod("crash", "status.containerStatuses.0.state.waiting.reason", "CrashLoopBackOff");
    wait_pod("crash", "status.containerStatuses.0.lastState.terminated.exitCode", "3");
    wait_pod("crash", "status.containerStatuses.0.lastState.terminated.reason", "Error");
    assert_int_equal(kl_pods_log_path(p, "default", "crash", "c", true, &log, &e), 0);
    assert_int_equal(file_read_all(log, 4096, &text, &len, &e), 0);
    assert_string_equal(text, "crashing\n");
    free(text);
    free(log);

    wait_pod("live", "status.containerStatuses.0.lastState.terminated.exitCode", "143");
    {
        json_t *live = NULL;
        assert_int_equal(kube_get(kc, &KUBE_PODS, "default", "live", &live, &e), 0);
        assert_true(
            json_integer_value(kobj_path(live, "status.containerStatuses.0.restartCount")) >= 1);
        json_decref(live);
    }
    wait_pod("nopull", "status.containerStatuses.0.state.waiting.reason", "ImagePullBackOff");
    wait_pod("nopull", "status.phase", "Pending");
    wait_pod("job", "status.phase", "Succeeded");
    wait_pod("job", "status.containerStatuses.0.state.terminated.reason", "Completed");

    /* graceful deletion: SIGTERM, then the kubelet deletes the object */
    struct kube_delete_opts o = {0};
    assert_int_equal(kube_delete(kc, &KUBE_PODS, "default", "web", &o, &e), 0);
    wait_pod("web", "status.phase", "(gone)");

    /* Events as the kubelet writes them (written as they happen: allow the last to land) */
    int started_ev = 0, backoff = 0, failed_pull = 0, killing = 0, unhealthy = 0;
    for (int round = 0; round < 50 && killing < 2; round++) {
        if (round)
            usleep(100000);
        started_ev = backoff = failed_pull = killing = unhealthy = 0;
        json_t *evs = NULL;
        assert_int_equal(kube_list(kc, &KUBE_EVENTS, "default", NULL, &evs, &e), 0);
        size_t i;
        json_t *ev;
        json_array_foreach (json_object_get(evs, "items"), i, ev) {
            const char *r = kobj_str(ev, "reason");
            if (getenv("KL_TEST_VERBOSE"))
                fprintf(stderr, "event %s %s: %s\n", kobj_path_str(ev, "involvedObject.name"), r,
                        kobj_str(ev, "message"));
            started_ev += streq_ptr(r, "Started");
            unhealthy += streq_ptr(r, "Unhealthy") &&
                         str_has_prefix(kobj_str(ev, "message"),
                                        "Liveness probe failed: dial tcp 127.0.0.1:1: connect:");
            backoff += streq_ptr(r, "BackOff");
            killing += streq_ptr(r, "Killing");
            failed_pull += streq_ptr(r, "Failed") &&
                           str_has_prefix(kobj_str(ev, "message"), "Failed to pull image");
        }
        json_decref(evs);
    }
    assert_true(started_ev >= 4);
    assert_true(backoff >= 1);
    assert_true(failed_pull >= 1);
    assert_true(killing >= 2); /* the deletion and the liveness failure */
    assert_true(unhealthy >= 1);
    /* a kubelet-sim restart: running containers come back as restarts, a completed pod stays
     * completed */
    create_pod(POD("svc", "\"containers\":[{\"name\":\"c\",\"image\":\"gpuop:1\",\"args\":["
                          "\"-c\",\"exec sleep 30\"]}]"));
    wait_pod("svc", "status.containerStatuses.0.state.running.startedAt", "(any)");
    kl_pods_free(p);
    size_t before = n_started;
    if (kl_pods_new(&cfg, &p, &e) < 0)
        fail_msg("kl_pods_new again: %s", err_msg(&e));
    wait_pod("svc", "status.containerStatuses.0.restartCount", "1");
    wait_pod("svc", "status.containerStatuses.0.lastState.terminated.reason", "Unknown");
    wait_pod("svc", "status.containerStatuses.0.state.running.startedAt", "(any)");
    wait_pod("job", "status.phase", "Succeeded");
    assert_true(n_started > before);
    kl_pods_free(p);
    /* every container stopped and reaped */
    assert_true(n_started >= 5); /* init, main, job and crash twice */
    for (size_t k = 0; k < n_started; k++)
        if (kill(started[k], 0) == 0)
            fail_msg("process %d still there", (int)started[k]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_lifecycle)};
    return cmocka_run_group_tests(tests, setup, teardown);
}
