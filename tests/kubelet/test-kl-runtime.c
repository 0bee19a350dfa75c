/* SPDX-License-Identifier: Apache-2.0 */
/* kl-runtime against the real kernel: a container's root and mounts, what it cannot see, read-only
 * mounts, the node's network namespace, capabilities, graceful and forced stops, exec into a
 * running container, a missing program, setup errors, and no descriptor leaked. Needs root. */
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "kl-runtime.h"

static int count_fds(void);

/* Every wait in this file is bounded by this. */
#define WAIT_MS 10000

static char scratch[256];  /* under /tmp: sources of mounts, logs */
static char hidden[256];   /* under /var/tmp: never mounted into a container */
static char log_path[512]; /* one per test, truncated by fresh_log */
static const char *const env_path[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
}

static char *read_text(const char *path)
{
    char *text = NULL;
    struct err e = {0};
    int r = file_read_all(path, 1 << 20, &text, NULL, &e);
    if (r < 0)
        fail_msg("%s", e.msg);
    return text;
}

static void fresh_log(const char *name)
{
    snprintf(log_path, sizeof(log_path), "%s/%s.log", scratch, name);
    unlink(log_path);
}

/* Waits for the container's exit (bounded) and returns its wait status; closes pidfd. */
static int wait_container(pid_t pid, int pidfd)
{
    struct pollfd pf = {.fd = pidfd, .events = POLLIN};
    assert_int_equal(poll(&pf, 1, WAIT_MS), 1);
    int status = -1;
    struct err e = {0};
    assert_int_equal(kl_container_reap(pid, pidfd, &status, &e), 1);
    close(pidfd);
    return status;
}

static int run(const struct kl_container_spec *s)
{
    pid_t pid;
    int pidfd;
    struct err e = {0};
    int r = kl_container_start(s, &pid, &pidfd, &e);
    if (r < 0)
        fail_msg("start: %s", e.msg);
    return wait_container(pid, pidfd);
}

static int run_sh(const char *script, const struct kl_mount *mounts, size_t n_mounts)
{
    const char *argv[] = {"/bin/sh", "-c", script, NULL};
    struct kl_container_spec s = {.argv = argv,
                                  .envp = env_path,
                                  .mounts = mounts,
                                  .n_mounts = n_mounts,
                                  .log_path = log_path};
    return run(&s);
}

/* Waits until the log holds needle. */
static void wait_log(const char *needle)
{
    uint64_t deadline = deadline_after(WAIT_MS);
    while (deadline_left_ms(deadline) > 0) {
        char *text = NULL;
        struct err e = {0};
        bool found = file_read_all(log_path, 1 << 20, &text, NULL, &e) == 0 && strstr(text, needle);
        free(text);
        if (found)
            return;
        usleep(10000);
    }
    fail_msg("\"%s\" never appeared in %s", needle, log_path);
}

static void assert_exit(int status, int code)
{
    if (!WIFEXITED(status) || WEXITSTATUS(status) != code)
        fail_msg("wait status %#x, expected exit %d; log:\n%s", (unsigned)status, code,
                 read_text(log_path));
}

static void test_mounts_and_log(void **state)
{
    (void)state;
    fresh_log("mounts");
    char dir[512], file[512];
    snprintf(dir, sizeof(dir), "%s/data", scratch);
    snprintf(file, sizeof(file), "%s/cfg-x", scratch);
    assert_int_equal(mkdir_p(dir, 0755), 0);
    char item[600];
    snprintf(item, sizeof(item), "%s/hello.txt", dir);
    write_text(item, "");
    write_text(file, "cfgvalue\n");
    struct kl_mount m[] = {{dir, "/data", false}, {file, "/etc/cfg/x", true}};
    int st = run_sh("echo hi; ls /data; cat /etc/cfg/x", m, 2);
    assert_exit(st, 0);
    char *text = read_text(log_path);
    assert_string_equal(text, "hi\nhello.txt\ncfgvalue\n");
    free(text);
    /* The mount point was made in the container's layer, not in the host's /etc. */
    assert_int_equal(access("/etc/cfg/x", F_OK), -1);

    /* The log is appended to, never truncated. */
    assert_exit(run_sh("echo again", NULL, 0), 0);
    text = read_text(log_path);
    assert_string_equal(text, "hi\nhello.txt\ncfgvalue\nagain\n");
    free(text);
}

/* In a mount namespace of its own, a file bound over one in the host's /etc: the container
 * sees it (an overlay alone would show the file below). Returns 0 when it did. */
static int submount_child(const char *over, const char *file)
{
    if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
        mount(file, over, NULL, MS_BIND, NULL) < 0)
        return 2;
    char script[600];
    snprintf(script, sizeof(script), "cat '%s'", over);
    const char *argv[] = {"/bin/sh", "-c", script, NULL};
    struct kl_container_spec s = {.argv = argv, .envp = env_path, .log_path = log_path};
    pid_t pid;
    int pidfd;
    struct err e = {0};
    if (kl_container_start(&s, &pid, &pidfd, &e) < 0) {
        fprintf(stderr, "start: %s\n", e.msg);
        return 3;
    }
    struct pollfd pf = {.fd = pidfd, .events = POLLIN};
    int status;
    if (poll(&pf, 1, WAIT_MS) != 1 || kl_container_reap(pid, pidfd, &status, &e) != 1)
        return 4;
    char *text = NULL;
    if (file_read_all(log_path, 4096, &text, NULL, &e) < 0)
        return 5;
    int r = strcmp(text, "klrt-submount\n") == 0 ? 0 : 6;
    if (r)
        fprintf(stderr, "the container read \"%s\"\n", text);
    free(text);
    return r;
}

static void test_host_submounts(void **state)
{
    (void)state;
    fresh_log("submount");
    const char *over = access("/etc/hostname", F_OK) == 0 ? "/etc/hostname" : "/etc/passwd";
    char file[512];
    snprintf(file, sizeof(file), "%s/submount", scratch);
    write_text(file, "klrt-submount\n");
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(submount_child(over, file));
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_root_and_workdir(void **state)
{
    (void)state;
    fresh_log("root");
    /* The host's programs run unchanged; /proc is fresh and shows this process; /tmp and /run
     * are empty tmpfs; the working directory is created. */
    const char *argv[] = {"/bin/sh", "-c",
                          "pwd; test -x /usr/bin/env || exit 11; test -r /proc/$$/status || "
                          "exit 12; test -z \"$(ls -A /tmp /run 2>&1 | grep -v :)\" || exit 13; "
                          "echo \"$KLRT_VAR\"",
                          NULL};
    const char *envp[] = {"PATH=/usr/bin:/bin", "KLRT_VAR=from-env", NULL};
    struct kl_container_spec s = {
        .argv = argv, .envp = envp, .workdir = "/work/dir", .log_path = log_path};
    assert_exit(run(&s), 0);
    char *text = read_text(log_path);
    assert_string_equal(text, "/work/dir\nfrom-env\n");
    free(text);
}

static void test_dev(void **state)
{
    (void)state;
    char file[512];
    snprintf(file, sizeof(file), "%s/dev-file", scratch);
    write_text(file, "devfile\n");
    /* Not privileged: the default devices work, host-only ones are absent, and a mount target
     * under /dev is created in the container's /dev, not the host's. */
    struct kl_mount m = {file, "/dev/klrt-dev", true};
    fresh_log("dev");
    assert_exit(run_sh("echo x > /dev/null; head -c 4 /dev/zero | wc -c; test -c /dev/urandom; "
                       "test -e /dev/loop0 && echo loop0; test -e /dev/kmsg && echo kmsg; "
                       "test -d /dev/pts && test -d /dev/shm && test -L /dev/fd || echo links; "
                       "cat /dev/klrt-dev",
                       &m, 1),
                0);
    char *text = read_text(log_path);
    assert_string_equal(text, "4\ndevfile\n");
    free(text);
    assert_int_equal(access("/dev/klrt-dev", F_OK), -1);

    /* Privileged: the host's /dev, where a missing target is left out rather than created. */
    const char *argv[] = {"/bin/sh", "-c", "test -e /dev/kmsg && echo kmsg", NULL};
    struct kl_container_spec s = {
        .argv = argv, .envp = env_path, .log_path = log_path, .privileged = true};
    fresh_log("dev-priv");
    if (access("/dev/kmsg", F_OK) == 0) {
        assert_exit(run(&s), 0);
        text = read_text(log_path);
        assert_string_equal(text, "kmsg\n");
        free(text);
    }
    const char *argv2[] = {"/bin/sh", "-c", "test -e /dev/klrt-dev && echo bound || echo left-out",
                           NULL};
    s.argv = argv2;
    s.mounts = &m;
    s.n_mounts = 1;
    fresh_log("dev-priv-missing");
    assert_exit(run(&s), 0);
    text = read_text(log_path);
    assert_string_equal(text, "left-out\n");
    free(text);
    assert_int_equal(access("/dev/klrt-dev", F_OK), -1);
}

static void test_hidden_host_path(void **state)
{
    (void)state;
    fresh_log("hidden");
    char secret[512];
    snprintf(secret, sizeof(secret), "%s/secret", hidden);
    write_text(secret, "host only\n");
    /* The scratch folder under /tmp is not visible either: /tmp is the container's own. */
    char script[1200];
    snprintf(script, sizeof(script),
             "if [ -e '%s' ] || [ -e '%s' ] || [ -e '%s' ]; then echo visible; exit 1; fi; "
             "echo hidden",
             secret, hidden, scratch);
    assert_exit(run_sh(script, NULL, 0), 0);
    char *text = read_text(log_path);
    assert_string_equal(text, "hidden\n");
    free(text);
}

static void test_read_only(void **state)
{
    (void)state;
    fresh_log("ro");
    char ro[512], rw[512];
    snprintf(ro, sizeof(ro), "%s/ro", scratch);
    snprintf(rw, sizeof(rw), "%s/rw", scratch);
    assert_int_equal(mkdir_p(ro, 0755), 0);
    assert_int_equal(mkdir_p(rw, 0755), 0);
    struct kl_mount m[] = {{ro, "/ro", true}, {rw, "/var/lib/rw", false}};
    /* A read-only mount, the host's /etc and /usr, and /sys refuse writes; a writable mount
     * writes through to the host. */
    int st = run_sh("for f in /ro/f /etc/klrt-f /usr/klrt-f /sys/klrt-f; do "
                    "  if echo x 2>/dev/null > $f; then echo \"wrote $f\"; exit 1; fi; done; "
                    "echo y > /var/lib/rw/f",
                    m, 2);
    assert_exit(st, 0);
    char path[600];
    snprintf(path, sizeof(path), "%s/f", ro);
    assert_int_equal(access(path, F_OK), -1);
    assert_int_equal(access("/etc/klrt-f", F_OK), -1);
    snprintf(path, sizeof(path), "%s/f", rw);
    char *text = read_text(path);
    assert_string_equal(text, "y\n");
    free(text);
}

static void test_capabilities(void **state)
{
    (void)state;
    fresh_log("caps");
    const char *argv[] = {"/bin/sh", "-c", "grep -E '^Cap(Bnd|Eff)' /proc/self/status", NULL};
    struct kl_container_spec s = {.argv = argv, .envp = env_path, .log_path = log_path};
    assert_exit(run(&s), 0);
    char *text = read_text(log_path);
    /* containerd's default set: no CAP_SYS_ADMIN, CAP_NET_ADMIN, CAP_SYS_PTRACE ... */
    assert_string_equal(text, "CapEff:\t00000000a80425fb\nCapBnd:\t00000000a80425fb\n");
    free(text);

    fresh_log("caps-priv");
    s.privileged = true;
    assert_exit(run(&s), 0);
    /* Privileged: the kubelet's own set. */
    text = read_text(log_path);
    char *self = read_text("/proc/self/status");
    char *bnd = strstr(self, "CapBnd:");
    assert_non_null(bnd);
    bnd[strcspn(bnd, "\n") + 1] = '\0';
    assert_non_null(strstr(text, bnd));
    assert_null(strstr(text, "a80425fb"));
    free(self);
    free(text);
}

static void test_netns_and_hostname(void **state)
{
    (void)state;
    if (access("/usr/sbin/ip", X_OK) != 0 && access("/sbin/ip", X_OK) != 0)
        skip();
    char ns[64], cmd[160], path[128];
    snprintf(ns, sizeof(ns), "klrt-test-%d", (int)getpid());
    snprintf(cmd, sizeof(cmd), "ip netns add %s", ns);
    assert_int_equal(system(cmd), 0);
    snprintf(path, sizeof(path), "/run/netns/%s", ns);
    fresh_log("netns");
    const char *argv[] = {"/bin/sh", "-c", "cat /proc/sys/kernel/hostname; cat /proc/net/dev",
                          NULL};
    struct kl_container_spec s = {.argv = argv,
                                  .envp = env_path,
                                  .netns_path = path,
                                  .hostname = "klrt-node",
                                  .log_path = log_path};
    int st = run(&s);
    snprintf(cmd, sizeof(cmd), "ip netns delete %s", ns);
    assert_int_equal(system(cmd), 0);
    assert_exit(st, 0);
    char *text = read_text(log_path);
    assert_true(str_has_prefix(text, "klrt-node\n"));
    /* Interfaces are the lines with a colon: only lo in a fresh namespace. */
    int n = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"))
        if (strchr(line, ':')) {
            n++;
            assert_non_null(strstr(line, "lo:"));
        }
    assert_int_equal(n, 1);
    free(text);

    /* A long pod name is cut to 63 bytes, as the kubelet does, without a trailing '-'. */
    const char *argv_h[] = {"/bin/cat", "/proc/sys/kernel/hostname", NULL};
    struct kl_container_spec sh = {
        .argv = argv_h,
        .envp = env_path,
        .hostname = "a-pod-name-that-is-longer-than-a-hostname-may-be-012345678901--34567",
        .log_path = log_path};
    fresh_log("hostname");
    assert_exit(run(&sh), 0);
    text = read_text(log_path);
    assert_string_equal(text, "a-pod-name-that-is-longer-than-a-hostname-may-be-012345678901\n");
    free(text);

    /* The host's hostname did not change. */
    char host[256];
    assert_int_equal(gethostname(host, sizeof(host)), 0);
    assert_string_not_equal(host, "klrt-node");
}

static void test_proc_sys(void **state)
{
    (void)state;
    /* The hostname sysctl of the container's own UTS namespace: writable by root in a
     * privileged container only (read-only /proc/sys), never the host's. */
    const char *argv[] = {"/bin/sh", "-c",
                          "echo klrt-b 2>/dev/null > /proc/sys/kernel/hostname; "
                          "cat /proc/sys/kernel/hostname; echo 1 2>/dev/null > /proc/sysrq-trigger "
                          "&& echo sysrq-writable; true",
                          NULL};
    struct kl_container_spec s = {
        .argv = argv, .envp = env_path, .hostname = "klrt-a", .log_path = log_path};
    fresh_log("proc-sys");
    assert_exit(run(&s), 0);
    char *text = read_text(log_path);
    assert_string_equal(text, "klrt-a\n");
    free(text);

    const char *argv_priv[] = {"/bin/sh", "-c",
                               "echo klrt-b > /proc/sys/kernel/hostname; "
                               "cat /proc/sys/kernel/hostname",
                               NULL};
    s.argv = argv_priv;
    s.privileged = true;
    fresh_log("proc-sys-priv");
    assert_exit(run(&s), 0);
    text = read_text(log_path);
    assert_string_equal(text, "klrt-b\n");
    free(text);
    char host[256];
    assert_int_equal(gethostname(host, sizeof(host)), 0);
    assert_string_not_equal(host, "klrt-b");
}

/* kubelet-sim starts containers from many threads at once. */
struct starter {
    int id;
    int failures;
    char msg[2048];
};

static void *starter_main(void *arg)
{
    struct starter *st = arg;
    for (int i = 0; i < 5; i++) {
        char log[600], script[64];
        snprintf(log, sizeof(log), "%s/thread-%d-%d.log", scratch, st->id, i);
        snprintf(script, sizeof(script), "echo %d-%d", st->id, i);
        const char *argv[] = {"/bin/sh", "-c", script, NULL};
        struct kl_container_spec s = {.argv = argv, .envp = env_path, .log_path = log};
        pid_t pid;
        int pidfd;
        struct err e = {0};
        if (kl_container_start(&s, &pid, &pidfd, &e) < 0) {
            st->failures++;
            snprintf(st->msg, sizeof(st->msg), "%s", e.msg);
            continue;
        }
        struct pollfd pf = {.fd = pidfd, .events = POLLIN};
        int status = -1;
        if (poll(&pf, 1, WAIT_MS) != 1 || kl_container_reap(pid, pidfd, &status, &e) != 1 ||
            !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            st->failures++;
            snprintf(st->msg, sizeof(st->msg), "container %d-%d: status %#x", st->id, i,
                     (unsigned)status);
        }
        close(pidfd);
        char *text = NULL;
        char want[64];
        snprintf(want, sizeof(want), "%d-%d\n", st->id, i);
        if (file_read_all(log, 4096, &text, NULL, &e) < 0 || strcmp(text, want) != 0) {
            st->failures++;
            snprintf(st->msg, sizeof(st->msg), "log %s: \"%s\"", log, text ? text : e.msg);
        }
        free(text);
    }
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    int before = count_fds();
    struct starter st[6];
    pthread_t t[6];
    for (int i = 0; i < 6; i++) {
        st[i] = (struct starter){.id = i};
        assert_int_equal(pthread_create(&t[i], NULL, starter_main, &st[i]), 0);
    }
    for (int i = 0; i < 6; i++) {
        assert_int_equal(pthread_join(t[i], NULL), 0);
        if (st[i].failures)
            fail_msg("thread %d: %d failures, last: %s", i, st[i].failures, st[i].msg);
    }
    assert_int_equal(count_fds(), before);
}

static pid_t start_sh(const char *script, const struct kl_mount *mounts, size_t n_mounts,
                      int *ret_pidfd)
{
    const char *argv[] = {"/bin/sh", "-c", script, NULL};
    struct kl_container_spec s = {.argv = argv,
                                  .envp = env_path,
                                  .mounts = mounts,
                                  .n_mounts = n_mounts,
                                  .log_path = log_path};
    pid_t pid;
    struct err e = {0};
    if (kl_container_start(&s, &pid, ret_pidfd, &e) < 0)
        fail_msg("start: %s", e.msg);
    return pid;
}

/* The process group is gone (its members may take a moment to be reaped by init). */
static void assert_group_gone(pid_t pgid)
{
    uint64_t deadline = deadline_after(WAIT_MS);
    while (kill(-pgid, 0) == 0 && deadline_left_ms(deadline) > 0)
        usleep(10000);
    assert_int_equal(kill(-pgid, 0), -1);
}

static void test_stop_graceful(void **state)
{
    (void)state;
    fresh_log("stop-term");
    int pidfd;
    pid_t pid = start_sh("trap 'echo bye; exit 0' TERM; echo ready; while :; do sleep 0.05; done",
                         NULL, 0, &pidfd);
    wait_log("ready");
    struct err e = {0};
    int status = -1;
    uint64_t t0 = now_ms_mono();
    assert_int_equal(kl_container_stop(pid, pidfd, 5000, NULL, &status, &e), 0);
    assert_true(now_ms_mono() - t0 < 3000);
    close(pidfd);
    assert_exit(status, 0);
    wait_log("bye");
    assert_group_gone(pid);
}

static void test_stop_kill(void **state)
{
    (void)state;
    fresh_log("stop-kill");
    int pidfd;
    pid_t pid = start_sh("trap '' TERM; echo ready; while :; do sleep 0.05; done", NULL, 0, &pidfd);
    wait_log("ready");
    struct err e = {0};
    int status = -1;
    uint64_t t0 = now_ms_mono();
    assert_int_equal(kl_container_stop(pid, pidfd, 300, NULL, &status, &e), 0);
    uint64_t took = now_ms_mono() - t0;
    close(pidfd);
    assert_true(took >= 300 && took < 3000);
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGKILL);
    assert_group_gone(pid);
}

static void test_stop_token(void **state)
{
    (void)state;
    fresh_log("stop-token");
    int pidfd;
    pid_t pid = start_sh("trap '' TERM; echo ready; while :; do sleep 0.05; done", NULL, 0, &pidfd);
    wait_log("ready");
    struct stop_token *tok = NULL;
    struct err e = {0};
    assert_int_equal(stop_token_new(&tok, &e), 0);
    stop_request(tok);
    int status = -1;
    uint64_t t0 = now_ms_mono();
    /* A minute's grace, cut short by the token. */
    assert_int_equal(kl_container_stop(pid, pidfd, 60000, tok, &status, &e), 0);
    assert_true(now_ms_mono() - t0 < 3000);
    close(pidfd);
    stop_token_free(tok);
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGKILL);
}

static void test_exec(void **state)
{
    (void)state;
    fresh_log("exec");
    char dir[512], secret[600];
    snprintf(dir, sizeof(dir), "%s/exec-data", scratch);
    assert_int_equal(mkdir_p(dir, 0755), 0);
    snprintf(secret, sizeof(secret), "%s/secret.txt", dir);
    write_text(secret, "s3cret\n");
    struct kl_mount m[] = {{dir, "/only/in/container", true}};
    int pidfd;
    pid_t pid = start_sh("echo ready; while :; do sleep 0.05; done", m, 1, &pidfd);
    wait_log("ready");

    struct err e = {0};
    char out[128];
    const char *cat[] = {"cat", "/only/in/container/secret.txt", NULL};
    assert_int_equal(kl_container_exec(pid, cat, 5000, out, sizeof(out), &e), 0);
    assert_string_equal(out, "s3cret\n");
    /* The output is cut to the buffer, NUL-terminated. */
    char small[4];
    assert_int_equal(kl_container_exec(pid, cat, 5000, small, sizeof(small), &e), 0);
    assert_string_equal(small, "s3c");
    /* The container's root and environment. */
    const char *sh[] = {"sh", "-c", "test ! -e /var/tmp && pwd && echo \"$PATH\"; exit 3", NULL};
    assert_int_equal(kl_container_exec(pid, sh, 5000, out, sizeof(out), &e), 3);
    assert_string_equal(out, "/\n/usr/sbin:/usr/bin:/sbin:/bin\n");
    assert_int_equal(kl_container_exec(pid, sh, 5000, NULL, 0, &e), 3);
    /* The container's capabilities, not the kubelet's. */
    const char *caps[] = {"grep", "^CapBnd", "/proc/self/status", NULL};
    assert_int_equal(kl_container_exec(pid, caps, 5000, out, sizeof(out), &e), 0);
    assert_string_equal(out, "CapBnd:\t00000000a80425fb\n");
    /* A missing program: 127, with the reason as its output. */
    const char *missing[] = {"klrt-no-such-program", NULL};
    assert_int_equal(kl_container_exec(pid, missing, 5000, out, sizeof(out), &e), 127);
    assert_non_null(strstr(out, "not found"));
    /* A command past its timeout is killed. */
    const char *slow[] = {"sleep", "5", NULL};
    uint64_t t0 = now_ms_mono();
    assert_int_equal(kl_container_exec(pid, slow, 200, NULL, 0, &e), -ETIMEDOUT);
    assert_true(now_ms_mono() - t0 < 2000);
    assert_non_null(strstr(e.msg, "timed out"));
    /* A child that keeps the output open past the command's end does not hold it past the
     * timeout either. */
    const char *bg[] = {"sh", "-c", "sleep 5 & exit 0", NULL};
    t0 = now_ms_mono();
    int r = kl_container_exec(pid, bg, 300, NULL, 0, &e);
    assert_true(r == 0 || r == -ETIMEDOUT);
    assert_true(now_ms_mono() - t0 < 2000);

    int status;
    assert_int_equal(kl_container_stop(pid, pidfd, 1000, NULL, &status, &e), 0);
    close(pidfd);
    /* A process that is gone: an error naming it. */
    assert_true(kl_container_exec(pid, cat, 1000, NULL, 0, &e) < 0);
    assert_non_null(strstr(e.msg, "/proc/"));
}

static void test_missing_program(void **state)
{
    (void)state;
    fresh_log("missing");
    const char *argv[] = {"klrt-no-such-program", NULL};
    struct kl_container_spec s = {.argv = argv, .envp = env_path, .log_path = log_path};
    assert_exit(run(&s), 127);
    char *text = read_text(log_path);
    assert_non_null(strstr(text, "\"klrt-no-such-program\": executable file not found in $PATH"));
    free(text);

    fresh_log("missing-abs");
    const char *abs[] = {"/no/such/klrt", NULL};
    s.argv = abs;
    assert_exit(run(&s), 127);
    text = read_text(log_path);
    assert_non_null(strstr(text, "\"/no/such/klrt\": No such file or directory"));
    free(text);

    /* Found but not executable: 126. */
    fresh_log("noexec");
    char file[512];
    snprintf(file, sizeof(file), "%s/not-a-program", scratch);
    write_text(file, "data\n");
    assert_int_equal(chmod(file, 0644), 0);
    struct kl_mount m = {file, "/opt/not-a-program", true};
    const char *noexec[] = {"/opt/not-a-program", NULL};
    s.argv = noexec;
    s.mounts = &m;
    s.n_mounts = 1;
    assert_exit(run(&s), 126);
    text = read_text(log_path);
    assert_non_null(strstr(text, "\"/opt/not-a-program\": Permission denied"));
    free(text);
}

/* The spec's device nodes: made in the container's /dev with their numbers, mode and owner, and
 * nothing else there; never on the host, and none made in a privileged container. */
static void test_devices(void **state)
{
    (void)state;
    const struct kl_device devs[] = {
        {"/dev/nvidia3", 'c', 195, 3, 0666, 0, 0},
        {"/dev/nvidiactl", 'c', 195, 255, 0640, 0, 44},
        {"/dev/nvidia-caps/nvidia-cap12", 'c', 237, 12, 0444, 0, 0},
    };
    const char *argv[] = {
        "/bin/sh", "-c",
        "stat -c '%n %F %t:%T %a %g' /dev/nvidia3 /dev/nvidiactl /dev/nvidia-caps/nvidia-cap12; "
        "ls /dev | grep nvidia | tr '\n' ' '; echo",
        NULL};
    struct kl_container_spec s = {.argv = argv,
                                  .envp = env_path,
                                  .log_path = log_path,
                                  .devices = devs,
                                  .n_devices = ARRAY_SIZE(devs)};
    bool host_had[ARRAY_SIZE(devs)];
    for (size_t i = 0; i < ARRAY_SIZE(devs); i++)
        host_had[i] = access(devs[i].path, F_OK) == 0;
    fresh_log("devices");
    assert_exit(run(&s), 0);
    char *text = read_text(log_path);
    assert_string_equal(text, "/dev/nvidia3 character special file c3:3 666 0\n"
                              "/dev/nvidiactl character special file c3:ff 640 44\n"
                              "/dev/nvidia-caps/nvidia-cap12 character special file ed:c 444 0\n"
                              "nvidia-caps nvidia3 nvidiactl \n");
    free(text);
    for (size_t i = 0; i < ARRAY_SIZE(devs); i++) /* the host's /dev is untouched */
        assert_int_equal(access(devs[i].path, F_OK) == 0, host_had[i]);

    /* Privileged: the machine's /dev, where nothing is made. */
    const struct kl_device odd[] = {{"/dev/klrt-node", 'c', 1, 3, 0666, 0, 0}};
    const char *argv2[] = {"/bin/sh", "-c", "test -e /dev/klrt-node && echo made || echo none",
                           NULL};
    s.argv = argv2;
    s.devices = odd;
    s.n_devices = 1;
    s.privileged = true;
    fresh_log("devices-priv");
    assert_exit(run(&s), 0);
    text = read_text(log_path);
    assert_string_equal(text, "none\n");
    free(text);
    assert_int_equal(access("/dev/klrt-node", F_OK), -1);
}

static void test_setup_errors(void **state)
{
    (void)state;
    fresh_log("errors");
    const char *argv[] = {"/bin/true", NULL};
    char missing[512];
    snprintf(missing, sizeof(missing), "%s/no-such-source", scratch);
    struct kl_mount m = {missing, "/x", false};
    struct kl_container_spec s = {
        .argv = argv, .envp = env_path, .mounts = &m, .n_mounts = 1, .log_path = log_path};
    pid_t pid;
    int pidfd;
    struct err e = {0};
    assert_int_equal(kl_container_start(&s, &pid, &pidfd, &e), -ENOENT);
    assert_non_null(strstr(e.msg, missing));

    m = (struct kl_mount){scratch, "/a/../../escape", false};
    assert_int_equal(kl_container_start(&s, &pid, &pidfd, &e), -EINVAL);
    assert_non_null(strstr(e.msg, "/a/../../escape"));

    s.n_mounts = 0;
    s.netns_path = "/run/netns/klrt-no-such-namespace";
    assert_int_equal(kl_container_start(&s, &pid, &pidfd, &e), -ENOENT);
    assert_non_null(strstr(e.msg, "/run/netns/klrt-no-such-namespace"));

    /* A file that is no namespace: the child's setns fails, reported with the op. */
    s.netns_path = log_path;
    write_text(log_path, "");
    assert_int_equal(kl_container_start(&s, &pid, &pidfd, &e), -EINVAL);
    assert_non_null(strstr(e.msg, "join the network namespace"));
    assert_non_null(strstr(e.msg, log_path));

    /* A file mounted where the container has a directory. */
    s.netns_path = NULL;
    char file[512];
    snprintf(file, sizeof(file), "%s/a-file", scratch);
    write_text(file, "x");
    m = (struct kl_mount){file, "/usr/bin", false};
    s.n_mounts = 1;
    int r = kl_container_start(&s, &pid, &pidfd, &e);
    assert_true(r < 0);
    assert_non_null(strstr(e.msg, "\"/usr/bin\""));

    /* Device nodes outside /dev, of an unknown type, or one /dev has already. */
    s.n_mounts = 0;
    struct kl_device d = {"/etc/nvidia0", 'c', 195, 0, 0666, 0, 0};
    s.devices = &d;
    s.n_devices = 1;
    assert_int_equal(kl_container_start(&s, &pid, &pidfd, &e), -EINVAL);
    assert_non_null(strstr(e.msg, "\"/etc/nvidia0\": not an absolute path under /dev"));
    d = (struct kl_device){"/dev/../etc/x", 'c', 195, 0, 0666, 0, 0};
    assert_int_equal(kl_container_start(&s, &pid, &pidfd, &e), -EINVAL);
    d = (struct kl_device){"/dev/fifo", 'p', 0, 0, 0666, 0, 0};
    assert_int_equal(kl_container_start(&s, &pid, &pidfd, &e), -EINVAL);
    assert_non_null(strstr(e.msg, "type 'p' (c or b)"));
    d = (struct kl_device){"/dev/null", 'c', 1, 3, 0666, 0, 0};
    assert_int_equal(kl_container_start(&s, &pid, &pidfd, &e), -EEXIST);
    assert_non_null(strstr(e.msg, "mknod \"/dev/null\" c 1:3"));
    s.n_devices = 0;

    s.log_path = NULL;
    assert_int_equal(kl_container_start(&s, &pid, &pidfd, &e), -EINVAL);
}

static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    assert_non_null(d);
    int n = 0;
    for (struct dirent *de; (de = readdir(d));)
        n += de->d_name[0] != '.';
    closedir(d);
    return n;
}

static void test_no_fd_leak(void **state)
{
    (void)state;
    fresh_log("leak");
    const char *argv[] = {"/bin/true", NULL};
    struct kl_container_spec s = {.argv = argv, .envp = env_path, .log_path = log_path};
    int before = count_fds();
    for (int i = 0; i < 20; i++)
        assert_exit(run(&s), 0);
    /* A failed start leaks nothing either. */
    struct kl_mount m = {"/klrt-no-such-source", "/x", false};
    s.mounts = &m;
    s.n_mounts = 1;
    pid_t pid;
    int pidfd;
    struct err e = {0};
    assert_true(kl_container_start(&s, &pid, &pidfd, &e) < 0);
    assert_int_equal(count_fds(), before);
}

static int rm_rf(const char *path)
{
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", path);
    return system(cmd);
}

int main(void)
{
    if (geteuid() != 0) {
        fprintf(stderr, "SKIP: kl-runtime needs root (namespaces, mounts, pivot_root)\n");
        return 77;
    }
    snprintf(scratch, sizeof(scratch), "/tmp/klrt-XXXXXX");
    snprintf(hidden, sizeof(hidden), "/var/tmp/klrt-hidden-XXXXXX");
    if (!mkdtemp(scratch) || !mkdtemp(hidden)) {
        perror("mkdtemp");
        return 1;
    }
    /* A root without CAP_SYS_ADMIN (an unprivileged container): skip, saying so. */
    snprintf(log_path, sizeof(log_path), "%s/probe.log", scratch);
    const char *argv[] = {"/bin/true", NULL};
    struct kl_container_spec probe = {.argv = argv, .envp = env_path, .log_path = log_path};
    pid_t pid;
    int pidfd;
    struct err e = {0};
    if (kl_container_start(&probe, &pid, &pidfd, &e) < 0) {
        bool denied = e.code == -EPERM;
        fprintf(stderr, "%scannot start a container here: %s\n", denied ? "SKIP: " : "", e.msg);
        rm_rf(scratch);
        rm_rf(hidden);
        return denied ? 77 : 1;
    }
    struct pollfd pf = {.fd = pidfd, .events = POLLIN};
    poll(&pf, 1, WAIT_MS);
    int status;
    (void)kl_container_reap(pid, pidfd, &status, &e);
    close(pidfd);

    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mounts_and_log),
        cmocka_unit_test(test_root_and_workdir),
        cmocka_unit_test(test_hidden_host_path),
        cmocka_unit_test(test_read_only),
        cmocka_unit_test(test_capabilities),
        cmocka_unit_test(test_netns_and_hostname),
        cmocka_unit_test(test_stop_graceful),
        cmocka_unit_test(test_stop_kill),
        cmocka_unit_test(test_stop_token),
        cmocka_unit_test(test_exec),
        cmocka_unit_test(test_missing_program),
        cmocka_unit_test(test_setup_errors),
        cmocka_unit_test(test_no_fd_leak),
        cmocka_unit_test(test_proc_sys),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_host_submounts),
        cmocka_unit_test(test_dev),
        cmocka_unit_test(test_devices),
    };
    int r = cmocka_run_group_tests(tests, NULL, NULL);
    rm_rf(scratch);
    rm_rf(hidden);
    return r;
}
