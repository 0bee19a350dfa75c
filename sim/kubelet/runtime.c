/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kl-runtime: one container as a process (kl-runtime.h).
 *
 * How a container is made. kubelet-sim is multi-threaded, so between fork and exec the child
 * may only make async-signal-safe calls: no malloc, no locks, no stdio. The parent therefore
 * compiles the whole setup into a plan, an array of struct op (every path already joined, every
 * string already formatted, every host-side file already open), and the child only walks it,
 * one system call or two per op. When an op fails the child writes its index and errno to a
 * close-on-exec pipe and exits; the parent reads that pipe until EOF (exec succeeded, or the
 * child ended) and turns a report into an error that names the op ("bind \"/src\" on \"/data\":
 * No such file or directory").
 *
 * The plan of kl_container_start, in order:
 *  1. setns into the node's network namespace (opened by the parent), unshare a mount namespace
 *     (and a UTS namespace when a hostname is set); every mount made private (MS_REC).
 *  2. A tmpfs on KL_ROOT_MNT (a directory on the host's /run, shared by every container: each
 *     mounts its own tmpfs there in its own namespace) becomes the root. The host's /usr, /bin,
 *     /sbin, /lib, /lib32, /lib64, /libx32 and /etc, where they exist: a symlink (Debian's
 *     merged /usr) is recreated as a symlink; a directory is an overlay whose lower layer is the
 *     host's directory and whose upper layer is a scratch tmpfs, so the spec's mount points can
 *     be created under it (/etc/cfg/x, /usr/bin/nvidia-smi) without touching the host; once the
 *     spec's mounts are made the overlay is made read-only, and the scratch tmpfs is lazily
 *     unmounted (the overlay keeps it). Where overlayfs fails, the directory is bound read-only.
 *     The host's mounts below those directories (a container engine's /etc/hosts and
 *     /etc/resolv.conf), which an overlay does not show, are bound again, read-only.
 *  3. /dev: privileged, the host's bound (MS_REC); else a tmpfs with containerd's default
 *     devices (null, zero, full, random, urandom, tty) bound from the host, a devpts instance
 *     of its own, a /dev/shm tmpfs and the /dev/fd, stdin, stdout, stderr, ptmx links. A fresh
 *     /proc (the host's bound where procfs cannot be mounted), /sys bound, /tmp and /run tmpfs.
 *     Unless privileged, /sys is read-only (recursively) and so are /proc/bus, /proc/fs,
 *     /proc/irq, /proc/sys and /proc/sysrq-trigger, as containerd makes them.
 *  3b. Not privileged: the spec's device nodes, made in the container's /dev with mknod (type,
 *     major, minor, mode, owner), as runc makes linux.devices outside a user namespace: the
 *     container sees exactly the devices it was given. Privileged: none are made (the bound /dev
 *     is the machine's own).
 *  4. The spec's mounts in order: the target is created (a directory for a directory source, an
 *     empty file for a file source), the source bound (MS_REC), and made read-only when asked.
 *  5. pivot_root into the new root, the old root detached; chdir to workdir (created when
 *     missing); sethostname (a name longer than 63 bytes cut as the kubelet cuts a pod's).
 *  6. Not privileged: the capability bounding set and the permitted, effective and inheritable
 *     sets cut to the default set of containerd and Docker (KL_DEFAULT_CAPS); ambient cleared.
 *  7. stdin /dev/null, stdout and stderr the log file (opened by the parent, O_APPEND), a
 *     session of its own (setsid: kl_container_stop kills the process group), signal
 *     dispositions reset and the signal mask emptied, then execve of each PATH candidate (PATH
 *     from envp, else the usual default). When none runs, the reason goes to the log and the
 *     exit status is 127 (not found) or 126 (found, not runnable), as a shell does.
 *
 * No PID namespace: a container's processes keep host pids, which the simulated NVML reports and
 * the exporter attributes, as on a real node where the driver sees host pids.
 *
 * The kubelet must not ignore SIGCHLD (its children would be reaped by the kernel and
 * kl_container_reap would see none) and must not reap with waitpid(-1).
 *
 * Known limits: an absolute symlink in a host directory (/etc/localtime -> /usr/share/...) is
 * followed on the host side when a mount target goes through it; there are no cgroups. An exec
 * (kl_container_exec) joins the container's network, UTS and mount namespaces, enters the
 * container's root as its process sees it (/proc/PID/root, opened before the joins) and runs with
 * its environment and capability bounding set. Joining a mount namespace alone would leave the
 * exec at the namespace's root mount, which is not the container's root where kubelet-sim itself
 * runs under chroot (the container's pivot_root replaces the chroot's mount, not the namespace's
 * root): a runtime's exec enters both, and so does this one.
 */
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>

#include "kl-runtime.h"

/* Where each container's root tmpfs is mounted, in the container's own mount namespace. */
#define KL_ROOT_MNT "/run/kubelet-sim/rootfs"
/* The overlays' upper and work directories, a tmpfs under the new root until pivot_root. */
#define KL_LAYERS       "/.kl-layers"
#define KL_DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
/* containerd's and Docker's default capabilities. */
#define CAPBIT(c) (UINT64_C(1) << (c))
#define KL_DEFAULT_CAPS                                                                       \
    (CAPBIT(CAP_CHOWN) | CAPBIT(CAP_DAC_OVERRIDE) | CAPBIT(CAP_FSETID) | CAPBIT(CAP_FOWNER) | \
     CAPBIT(CAP_MKNOD) | CAPBIT(CAP_NET_RAW) | CAPBIT(CAP_SETGID) | CAPBIT(CAP_SETUID) |      \
     CAPBIT(CAP_SETFCAP) | CAPBIT(CAP_SETPCAP) | CAPBIT(CAP_NET_BIND_SERVICE) |               \
     CAPBIT(CAP_SYS_CHROOT) | CAPBIT(CAP_KILL) | CAPBIT(CAP_AUDIT_WRITE))
/* How long a SIGKILLed process may take to exit before stop reports it stuck. */
#define KILL_WAIT_MS 5000
/* The most of /proc/PID/environ an exec takes for its environment. */
#define ENVIRON_MAX (256 * 1024)

/* ---- the plan ------------------------------------------------------------------------------ */

enum op_kind {
    OP_SETNS,    /* setns(fd, arg) */
    OP_UNSHARE,  /* unshare(flags) */
    OP_MOUNT,    /* mount(src, path, fstype, flags, data) */
    OP_BIND_RO,  /* bind src on path (MS_REC), then read-only; arg: recursively */
    OP_RDONLY,   /* path read-only; arg: recursively */
    OP_MKDIR,    /* mkdir -p path */
    OP_TOUCH,    /* path an empty file, its directories created */
    OP_SYMLINK,  /* symlink(src, path) */
    OP_UMOUNT,   /* umount2(path, MNT_DETACH) */
    OP_RMDIR,    /* rmdir(path) */
    OP_CHDIR,    /* chdir(path) */
    OP_WORKDIR,  /* mkdir -p path (failure ignored), chdir(path) */
    OP_PIVOT,    /* pivot_root(".", "."), umount the old root, chdir("/") */
    OP_HOSTNAME, /* sethostname(src) */
    OP_CAPS,     /* capabilities cut to mask, arg the last capability */
    OP_DUP2,     /* dup2(fd, arg) */
    OP_MKNOD,    /* mknod(path, flags, mask), its directories created, chmod, chown(uid, gid) */
    OP_FCHROOT,  /* fchdir(fd), chroot("."), chdir("/"): enter a root held open by fd */
};

struct op {
    enum op_kind kind;
    /* On failure run the next op instead; on success skip it. */
    bool orelse;
    int fd;
    int arg;
    unsigned long flags;
    uint64_t mask;
    unsigned uid, gid;
    char *path, *src, *fstype, *data;
    char *what; /* the op in an error: "mount tmpfs on \"/tmp\"" */
};

struct plan {
    struct op *ops;
    size_t n, cap;
};

static void plan_free(struct plan *p)
{
    for (size_t i = 0; i < p->n; i++) {
        struct op *o = &p->ops[i];
        free(o->path);
        free(o->src);
        free(o->fstype);
        free(o->data);
        free(o->what);
    }
    free(p->ops);
    *p = (struct plan){0};
}

static struct op *plan_add(struct plan *p, enum op_kind kind, char *what)
{
    if (p->n == p->cap) {
        p->cap = p->cap ? 2 * p->cap : 32;
        p->ops = xrealloc(p->ops, p->cap * sizeof(*p->ops));
    }
    struct op *o = &p->ops[p->n++];
    *o = (struct op){.kind = kind, .fd = -1, .what = what};
    return o;
}

static char *dup_or_null(const char *s)
{
    return s ? xstrdup(s) : NULL;
}

static void plan_mount(struct plan *p, const char *src, const char *path, const char *fstype,
                       unsigned long flags, const char *data, char *what)
{
    struct op *o = plan_add(p, OP_MOUNT, what);
    o->src = dup_or_null(src);
    o->path = dup_or_null(path);
    o->fstype = dup_or_null(fstype);
    o->flags = flags;
    o->data = dup_or_null(data);
}

static void plan_path(struct plan *p, enum op_kind kind, const char *path, int arg, char *what)
{
    struct op *o = plan_add(p, kind, what);
    o->path = xstrdup(path);
    o->arg = arg;
}

/* ---- the child: async-signal-safe from here to execve ------------------------------------- */

struct report {
    int32_t op;
    int32_t err; /* positive errno */
};

struct child {
    const struct plan *plan;
    const char *const *argv;
    const char *const *envp;
    char *const *candidates; /* the paths execve tries, NULL-terminated */
    int err_fd;
};

static void child_write(int fd, const char *s)
{
    size_t n = strlen(s);
    while (n > 0) {
        ssize_t w = write(fd, s, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        s += w;
        n -= (size_t)w;
    }
}

static int child_mkdir_p(const char *path, mode_t mode)
{
    char buf[PATH_MAX];
    size_t n = strlen(path);
    if (n >= sizeof(buf))
        return -ENAMETOOLONG;
    memcpy(buf, path, n + 1);
    for (char *s = buf + 1;; s++) {
        if (*s != '/' && *s != '\0')
            continue;
        char c = *s;
        *s = '\0';
        if (mkdir(buf, mode) < 0 && errno != EEXIST) {
            int r = -errno;
            struct stat st;
            if (stat(buf, &st) < 0 || !S_ISDIR(st.st_mode))
                return r;
        }
        *s = c;
        if (c == '\0')
            return 0;
    }
}

/* mkdir -p of path's directory. */
static int child_mkdir_parent(const char *path)
{
    char dir[PATH_MAX];
    size_t n = strlen(path);
    if (n >= sizeof(dir))
        return -ENAMETOOLONG;
    memcpy(dir, path, n + 1);
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir)
        return 0;
    *slash = '\0';
    return child_mkdir_p(dir, 0755);
}

static int child_rdonly(const char *path, bool recursive)
{
    struct mount_attr attr = {.attr_set = MOUNT_ATTR_RDONLY};
    if (syscall(SYS_mount_setattr, AT_FDCWD, path, recursive ? AT_RECURSIVE : 0, &attr,
                sizeof(attr)) == 0)
        return 0;
    if (errno != ENOSYS)
        return -errno;
    /* Before Linux 5.12: the top mount only. */
    if (mount(NULL, path, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY, NULL) < 0)
        return -errno;
    return 0;
}

static int child_caps(uint64_t keep, int last_cap)
{
    for (int c = 0; c <= last_cap && c < 64; c++)
        if (!(keep & CAPBIT(c)) && prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 && errno != EINVAL)
            return -errno;
    (void)prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
    struct __user_cap_data_struct d[2];
    if (syscall(SYS_capget, &h, d) < 0)
        return -errno;
    for (int i = 0; i < 2; i++) {
        uint32_t k = (uint32_t)(keep >> (32 * i));
        d[i].effective &= k;
        d[i].permitted &= k;
        d[i].inheritable = 0;
    }
    if (syscall(SYS_capset, &h, d) < 0)
        return -errno;
    return 0;
}

static int child_op(const struct op *o)
{
    switch (o->kind) {
    case OP_SETNS:
        return setns(o->fd, o->arg) < 0 ? -errno : 0;
    case OP_UNSHARE:
        return unshare((int)o->flags) < 0 ? -errno : 0;
    case OP_MOUNT:
        return mount(o->src, o->path, o->fstype, o->flags, o->data) < 0 ? -errno : 0;
    case OP_BIND_RO:
        if (mount(o->src, o->path, NULL, MS_BIND | MS_REC, NULL) < 0)
            return -errno;
        return child_rdonly(o->path, o->arg != 0);
    case OP_RDONLY:
        return child_rdonly(o->path, o->arg != 0);
    case OP_MKDIR:
        return child_mkdir_p(o->path, 0755);
    case OP_TOUCH: {
        struct stat st;
        if (stat(o->path, &st) == 0)
            return 0;
        int r = child_mkdir_parent(o->path);
        if (r < 0)
            return r;
        int fd = open(o->path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOCTTY, 0644);
        if (fd < 0)
            return -errno;
        close(fd);
        return 0;
    }
    case OP_SYMLINK:
        return symlink(o->src, o->path) < 0 ? -errno : 0;
    case OP_UMOUNT:
        return umount2(o->path, MNT_DETACH) < 0 ? -errno : 0;
    case OP_RMDIR:
        return rmdir(o->path) < 0 ? -errno : 0;
    case OP_CHDIR:
        return chdir(o->path) < 0 ? -errno : 0;
    case OP_WORKDIR:
        (void)child_mkdir_p(o->path, 0755);
        return chdir(o->path) < 0 ? -errno : 0;
    case OP_PIVOT:
        if (syscall(SYS_pivot_root, ".", ".") < 0)
            return -errno;
        if (umount2(".", MNT_DETACH) < 0)
            return -errno;
        return chdir("/") < 0 ? -errno : 0;
    case OP_FCHROOT:
        if (fchdir(o->fd) < 0 || chroot(".") < 0)
            return -errno;
        return chdir("/") < 0 ? -errno : 0;
    case OP_HOSTNAME:
        return sethostname(o->src, strlen(o->src)) < 0 ? -errno : 0;
    case OP_CAPS:
        return child_caps(o->mask, o->arg);
    case OP_DUP2:
        return dup2(o->fd, o->arg) < 0 ? -errno : 0;
    case OP_MKNOD: {
        int r = child_mkdir_parent(o->path);
        if (r < 0)
            return r;
        if (mknod(o->path, (mode_t)o->flags, (dev_t)o->mask) < 0)
            return -errno;
        /* the mode without the umask, and the owner the spec names */
        if (chmod(o->path, (mode_t)o->flags & 07777) < 0 || chown(o->path, o->uid, o->gid) < 0)
            return -errno;
        return 0;
    }
    }
    return -EINVAL;
}

static _Noreturn void child_fail(const struct child *c, size_t op, int err)
{
    struct report r = {.op = (int32_t)op, .err = err};
    ssize_t w;
    do
        w = write(c->err_fd, &r, sizeof(r));
    while (w < 0 && errno == EINTR);
    _exit(126);
}

static _Noreturn void child_main(const struct child *c)
{
    /* Handlers the parent installed must not run here, and ignored signals (SIGPIPE) must not
     * stay ignored across exec; the mask (all blocked since before fork) is emptied last. */
    for (int sig = 1; sig < NSIG; sig++) {
        if (sig == SIGKILL || sig == SIGSTOP)
            continue;
        struct sigaction sa = {.sa_handler = SIG_DFL};
        (void)sigaction(sig, &sa, NULL);
    }
    (void)setsid();
    const struct plan *p = c->plan;
    for (size_t i = 0; i < p->n; i++) {
        int r = child_op(&p->ops[i]);
        if (p->ops[i].orelse) {
            if (r == 0)
                i++;
            continue;
        }
        if (r < 0)
            child_fail(c, i, -r);
    }
    /* Every descriptor the kubelet holds (other threads' sockets too) closes at exec. */
    (void)close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
    sigset_t none;
    sigemptyset(&none);
    (void)sigprocmask(SIG_SETMASK, &none, NULL);

    int err = ENOENT;
    for (char *const *cand = c->candidates; *cand; cand++) {
        execve(*cand, (char *const *)c->argv, (char *const *)c->envp);
        /* As execvp: a candidate that exists but cannot run is the error to report, unless a
         * later one runs. */
        if (errno != ENOENT && errno != ENOTDIR)
            err = errno;
    }
    child_write(2, "exec \"");
    child_write(2, c->argv[0]);
    if (err == ENOENT && !strchr(c->argv[0], '/')) {
        child_write(2, "\": executable file not found in $PATH\n");
    } else {
        child_write(2, "\": ");
        const char *desc = strerrordesc_np(err);
        child_write(2, desc ? desc : "unknown error");
        child_write(2, "\n");
    }
    _exit(err == ENOENT || err == ENOTDIR ? 127 : 126);
}

/* ---- the parent --------------------------------------------------------------------------- */

/* fd moved above 2 (0..2 are the child's stdio), close-on-exec. */
static int fd_above_stdio(int fd)
{
    if (fd < 0 || fd > 2)
        return fd;
    int n = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    int saved = errno;
    close(fd);
    errno = saved;
    return n;
}

static int open_cloexec(const char *path, int flags, mode_t mode, struct err *e, const char *verb)
{
    int fd = fd_above_stdio(open(path, flags | O_CLOEXEC | O_NOCTTY, mode));
    if (fd < 0)
        return err_errno(e, -errno, "%s \"%s\"", verb, path);
    return fd;
}

/* The paths execve tries for argv0: itself when it names a path, else each PATH entry of envp
 * (the default PATH when envp has none), joined with it. NULL-terminated; free with strv_free. */
static char **exec_candidates(const char *argv0, const char *const *envp)
{
    char **v = NULL;
    size_t n = 0;
    if (strchr(argv0, '/')) {
        v = xcalloc(2, sizeof(*v));
        v[0] = xstrdup(argv0);
        return v;
    }
    const char *path = KL_DEFAULT_PATH;
    /* The first PATH, the one getenv would find. */
    for (const char *const *p = envp; p && *p; p++)
        if (str_has_prefix(*p, "PATH=")) {
            path = *p + 5;
            break;
        }
    size_t cap = 1;
    for (const char *s = path; *s; s++)
        cap += *s == ':';
    v = xcalloc(cap + 1, sizeof(*v));
    for (const char *s = path;;) {
        const char *end = strchrnul(s, ':');
        int len = (int)(end - s);
        /* An empty entry is the working directory, as in execvp. */
        v[n++] = len ? xasprintf("%.*s/%s", len, s, argv0) : xstrdup(argv0);
        if (!*end)
            break;
        s = end + 1;
    }
    return v;
}

static void strv_free(char **v)
{
    for (char **p = v; p && *p; p++)
        free(*p);
    free(v);
}
DEFINE_CLEANUP_FUNC(char *, strv_free)

static void plan_freep(struct plan *p)
{
    plan_free(p);
}

static ssize_t read_full(int fd, void *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, (char *)buf + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -errno;
        if (r == 0)
            break;
        got += (size_t)r;
    }
    return (ssize_t)got;
}

/* Forks the child that runs plan then execs argv. Returns once it exec'd (or failed at exec:
 * that is its exit status), or with the error of the op that failed (the child reaped). */
static int spawn(const struct plan *plan, const char *const *argv, const char *const *envp,
                 pid_t *ret_pid, struct err *e)
{
    _cleanup_(strv_freep) char **candidates = exec_candidates(argv[0], envp);
    static const char *const no_env[] = {NULL};
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) < 0)
        return err_errno(e, -errno, "pipe");
    _cleanup_close_ int rfd = fd_above_stdio(pfd[0]);
    _cleanup_close_ int wfd = fd_above_stdio(pfd[1]);
    if (rfd < 0 || wfd < 0)
        return err_errno(e, -errno, "pipe");
    struct child c = {.plan = plan,
                      .argv = argv,
                      .envp = envp ? envp : no_env,
                      .candidates = candidates,
                      .err_fd = wfd};

    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pid_t pid = fork();
    if (pid == 0)
        child_main(&c);
    int fork_errno = errno;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (pid < 0)
        return err_errno(e, -fork_errno, "fork");
    close(steal_fd(&wfd));

    struct report r;
    ssize_t n = read_full(rfd, &r, sizeof(r));
    if (n == 0) {
        *ret_pid = pid;
        return 0;
    }
    /* A report, or no way to know: the child exits (or is made to) and is reaped. */
    if (n < 0)
        (void)kill(pid, SIGKILL);
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (n < 0)
        return err_errno(e, (int)n, "read the container's setup report");
    if (n != (ssize_t)sizeof(r) || r.op < 0 || (size_t)r.op >= plan->n || r.err <= 0)
        return err_set(e, -EIO, "the container's setup report is malformed");
    return err_errno(e, -r.err, "%s", plan->ops[r.op].what);
}

/* A spec mount's target: absolute, without "." or ".." components (it must stay inside the
 * container's root). */
static bool target_ok(const char *t)
{
    if (!t || t[0] != '/')
        return false;
    for (const char *s = t; *s;) {
        while (*s == '/')
            s++;
        const char *end = strchrnul(s, '/');
        size_t len = (size_t)(end - s);
        if ((len == 1 && s[0] == '.') || (len == 2 && s[0] == '.' && s[1] == '.'))
            return false;
        s = end;
    }
    return true;
}

static int last_cap(void)
{
    _cleanup_free_ char *text = NULL;
    struct err ignored = {0};
    int v;
    if (file_read_all("/proc/sys/kernel/cap_last_cap", 64, &text, NULL, &ignored) < 0)
        return 63;
    text[strcspn(text, "\n")] = '\0';
    return parse_int(text, &v) == 0 && v >= 0 && v < 64 ? v : 63;
}

/* What containerd makes read-only in /proc for a container that is not privileged. */
static const char *const proc_read_only[] = {"bus", "fs", "irq", "sys", "sysrq-trigger"};

static const char *const host_dirs[] = {"usr",   "bin",   "sbin",   "lib",
                                        "lib32", "lib64", "libx32", "etc"};

/* Step 2 of the header comment: the host's system directories under the new root. */
static int plan_host_dirs(struct plan *p, struct err *e)
{
    const char *R = KL_ROOT_MNT;
    plan_path(p, OP_MKDIR, KL_ROOT_MNT KL_LAYERS, 0, xstrdup("mkdir \"" KL_LAYERS "\""));
    plan_mount(p, "tmpfs", KL_ROOT_MNT KL_LAYERS, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0700",
               xstrdup("mount tmpfs on \"" KL_LAYERS "\""));
    for (size_t i = 0; i < ARRAY_SIZE(host_dirs); i++) {
        const char *d = host_dirs[i];
        _cleanup_free_ char *host = xasprintf("/%s", d);
        _cleanup_free_ char *in = xasprintf("%s/%s", R, d);
        struct stat st;
        if (lstat(host, &st) < 0) {
            if (errno == ENOENT)
                continue;
            return err_errno(e, -errno, "stat \"%s\"", host);
        }
        if (S_ISLNK(st.st_mode)) {
            char target[PATH_MAX];
            ssize_t n = readlink(host, target, sizeof(target) - 1);
            if (n < 0)
                return err_errno(e, -errno, "readlink \"%s\"", host);
            target[n] = '\0';
            struct op *o = plan_add(p, OP_SYMLINK, xasprintf("symlink \"%s\"", host));
            o->src = xstrdup(target);
            o->path = xstrdup(in);
            continue;
        }
        if (!S_ISDIR(st.st_mode))
            continue;
        _cleanup_free_ char *upper = xasprintf("%s%s/%s.upper", R, KL_LAYERS, d);
        _cleanup_free_ char *work = xasprintf("%s%s/%s.work", R, KL_LAYERS, d);
        _cleanup_free_ char *opts =
            xasprintf("lowerdir=%s,upperdir=%s,workdir=%s", host, upper, work);
        plan_path(p, OP_MKDIR, in, 0, xasprintf("mkdir \"%s\"", host));
        plan_path(p, OP_MKDIR, upper, 0, xasprintf("mkdir the upper layer of \"%s\"", host));
        plan_path(p, OP_MKDIR, work, 0, xasprintf("mkdir the work layer of \"%s\"", host));
        plan_mount(p, "overlay", in, "overlay", 0, opts,
                   xasprintf("mount an overlay of \"%s\"", host));
        p->ops[p->n - 1].orelse = true;
        struct op *o = plan_add(p, OP_BIND_RO, xasprintf("bind \"%s\" read-only", host));
        o->src = xstrdup(host);
        o->path = xstrdup(in);
    }
    return 0;
}

/* Decodes mountinfo's octal escapes (\040 for a space) in place. */
static void mountinfo_unescape(char *s)
{
    char *w = s;
    for (const char *r = s; *r;) {
        if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' &&
            r[3] >= '0' && r[3] <= '7') {
            *w++ = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
            r += 4;
        } else {
            *w++ = *r++;
        }
    }
    *w = '\0';
}

/* The mount point's top directory is one the container has as an overlay of the host's. */
static bool under_host_dir(const char *mp)
{
    for (size_t i = 0; i < ARRAY_SIZE(host_dirs); i++) {
        size_t n = strlen(host_dirs[i]);
        struct stat st;
        _cleanup_free_ char *host = xasprintf("/%s", host_dirs[i]);
        if (mp[0] == '/' && strncmp(mp + 1, host_dirs[i], n) == 0 && mp[n + 1] == '/' &&
            mp[n + 2] && lstat(host, &st) == 0 && S_ISDIR(st.st_mode))
            return true;
    }
    return false;
}

/* An overlay shows its lower directory's own file system, not what is mounted below it: the
 * host's mounts under /etc (a container engine's /etc/hosts and /etc/resolv.conf) and /usr are
 * bound again, read-only, where they were. */
static int plan_host_submounts(struct plan *p, struct err *e)
{
    _cleanup_free_ char *text = NULL;
    int r = file_read_all("/proc/self/mountinfo", 4u << 20, &text, NULL, e);
    if (r < 0)
        return r;
    _cleanup_(strv_freep) char **done = xcalloc(1, sizeof(char *));
    size_t n_done = 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        /* "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw": field 5. */
        char *mp = line;
        for (int f = 0; f < 4 && mp; f++) {
            mp = strchr(mp, ' ');
            mp = mp ? mp + 1 : NULL;
        }
        if (!mp)
            continue;
        mp[strcspn(mp, " ")] = '\0';
        mountinfo_unescape(mp);
        if (!under_host_dir(mp))
            continue;
        bool covered = false;
        for (size_t i = 0; i < n_done && !covered; i++) {
            size_t n = strlen(done[i]);
            covered = strncmp(mp, done[i], n) == 0 && (mp[n] == '/' || mp[n] == '\0');
        }
        struct stat st;
        if (covered || stat(mp, &st) < 0)
            continue;
        _cleanup_free_ char *in = xasprintf("%s%s", KL_ROOT_MNT, mp);
        if (S_ISDIR(st.st_mode))
            plan_path(p, OP_MKDIR, in, 0, xasprintf("mkdir \"%s\"", mp));
        else
            plan_path(p, OP_TOUCH, in, 0, xasprintf("create \"%s\"", mp));
        struct op *o = plan_add(p, OP_BIND_RO, xasprintf("bind the host's \"%s\" read-only", mp));
        o->src = xstrdup(mp);
        o->path = xstrdup(in);
        o->arg = 1;
        done = xrealloc(done, (n_done + 2) * sizeof(char *));
        done[n_done++] = xstrdup(mp);
        done[n_done] = NULL;
    }
    return 0;
}

/* A pod name as a hostname, cut as the kubelet cuts it: at most 63 bytes, then without a
 * trailing '-' or '.'. */
static char *pod_hostname(const char *name)
{
    char *h = xstrndup(name, 63);
    size_t n = strlen(h);
    while (n > 1 && (h[n - 1] == '-' || h[n - 1] == '.'))
        h[--n] = '\0';
    return h;
}

/* The devices every container has (containerd's default set); the rest only privileged. */
static const char *const default_devices[] = {"null", "zero", "full", "random", "urandom", "tty"};
static const char *const dev_links[][2] = {{"fd", "/proc/self/fd"},
                                           {"stdin", "/proc/self/fd/0"},
                                           {"stdout", "/proc/self/fd/1"},
                                           {"stderr", "/proc/self/fd/2"},
                                           {"ptmx", "pts/ptmx"}};

/* /dev: privileged, the host's (MS_REC); else a tmpfs with the default devices bound from the
 * host, a devpts of its own, a /dev/shm tmpfs and the usual symlinks, so that a mount target
 * created under /dev is the container's, never a new file in the host's /dev. */
static void plan_dev(struct plan *p, bool privileged)
{
    const char *R = KL_ROOT_MNT;
    _cleanup_free_ char *dev = xasprintf("%s/dev", R);
    plan_path(p, OP_MKDIR, dev, 0, xstrdup("mkdir \"/dev\""));
    if (privileged) {
        plan_mount(p, "/dev", dev, NULL, MS_BIND | MS_REC, NULL, xstrdup("bind \"/dev\""));
        return;
    }
    plan_mount(p, "tmpfs", dev, "tmpfs", MS_NOSUID, "mode=0755",
               xstrdup("mount tmpfs on \"/dev\""));
    for (size_t i = 0; i < ARRAY_SIZE(default_devices); i++) {
        _cleanup_free_ char *host = xasprintf("/dev/%s", default_devices[i]);
        _cleanup_free_ char *in = xasprintf("%s%s", R, host);
        if (access(host, F_OK) < 0)
            continue;
        plan_path(p, OP_TOUCH, in, 0, xasprintf("create \"%s\"", host));
        plan_mount(p, host, in, NULL, MS_BIND, NULL, xasprintf("bind \"%s\"", host));
    }
    _cleanup_free_ char *pts = xasprintf("%s/dev/pts", R);
    plan_path(p, OP_MKDIR, pts, 0, xstrdup("mkdir \"/dev/pts\""));
    plan_mount(p, "devpts", pts, "devpts", MS_NOSUID | MS_NOEXEC,
               "newinstance,ptmxmode=0666,mode=0620", xstrdup("mount devpts on \"/dev/pts\""));
    p->ops[p->n - 1].orelse = true;
    plan_mount(p, "/dev/pts", pts, NULL, MS_BIND, NULL, xstrdup("bind \"/dev/pts\""));
    _cleanup_free_ char *shm = xasprintf("%s/dev/shm", R);
    plan_path(p, OP_MKDIR, shm, 0, xstrdup("mkdir \"/dev/shm\""));
    plan_mount(p, "shm", shm, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=1777",
               xstrdup("mount tmpfs on \"/dev/shm\""));
    for (size_t i = 0; i < ARRAY_SIZE(dev_links); i++) {
        struct op *o = plan_add(p, OP_SYMLINK, xasprintf("symlink \"/dev/%s\"", dev_links[i][0]));
        o->src = xstrdup(dev_links[i][1]);
        o->path = xasprintf("%s/dev/%s", R, dev_links[i][0]);
    }
}

/* Step 3b: the spec's device nodes in the container's /dev tmpfs. */
static int plan_devices(struct plan *p, const struct kl_device *devs, size_t n, struct err *e)
{
    for (size_t i = 0; i < n; i++) {
        const struct kl_device *d = &devs[i];
        if (!d->path || !str_has_prefix(d->path, "/dev/") || !target_ok(d->path))
            return err_set(e, -EINVAL,
                           "devices[%zu]: path \"%s\": not an absolute path under /dev "
                           "without . or ..",
                           i, d->path ? d->path : "");
        if (d->type != 'c' && d->type != 'b')
            return err_set(e, -EINVAL, "devices[%zu] \"%s\": type '%c' (c or b)", i, d->path,
                           d->type ? d->type : '?');
        struct op *o = plan_add(
            p, OP_MKNOD, xasprintf("mknod \"%s\" %c %u:%u", d->path, d->type, d->major, d->minor));
        o->path = xasprintf("%s%s", KL_ROOT_MNT, d->path);
        o->flags = (d->type == 'c' ? S_IFCHR : S_IFBLK) | (d->file_mode & 07777);
        o->mask = makedev(d->major, d->minor);
        o->uid = d->uid;
        o->gid = d->gid;
    }
    return 0;
}

int kl_container_start(const struct kl_container_spec *s, pid_t *ret_pid, int *ret_pidfd,
                       struct err *e)
{
    if (!s || !s->argv || !s->argv[0] || !s->argv[0][0])
        return err_set(e, -EINVAL, "container: no command");
    if (!s->log_path || !s->log_path[0])
        return err_set(e, -EINVAL, "container \"%s\": no log file", s->argv[0]);
    const char *R = KL_ROOT_MNT;

    _cleanup_close_ int log_fd =
        open_cloexec(s->log_path, O_WRONLY | O_APPEND | O_CREAT, 0640, e, "open the log file");
    if (log_fd < 0)
        return log_fd;
    _cleanup_close_ int null_fd = open_cloexec("/dev/null", O_RDONLY, 0, e, "open");
    if (null_fd < 0)
        return null_fd;
    _cleanup_close_ int net_fd = -1;
    if (s->netns_path) {
        net_fd = open_cloexec(s->netns_path, O_RDONLY, 0, e, "open the network namespace");
        if (net_fd < 0)
            return net_fd;
    }
    int r = mkdir_p(R, 0700);
    if (r < 0)
        return err_errno(e, r, "mkdir \"%s\"", R);

    _cleanup_(plan_freep) struct plan p = {0};
    struct op *o;
    if (net_fd >= 0) {
        o = plan_add(&p, OP_SETNS, xasprintf("join the network namespace \"%s\"", s->netns_path));
        o->fd = net_fd;
        o->arg = CLONE_NEWNET;
    }
    o = plan_add(&p, OP_UNSHARE, xstrdup("unshare the mount namespace"));
    o->flags = CLONE_NEWNS | (s->hostname ? CLONE_NEWUTS : 0);
    plan_mount(&p, NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL, xstrdup("make \"/\" private"));
    plan_mount(&p, "tmpfs", R, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755",
               xasprintf("mount tmpfs on \"%s\"", R));
    r = plan_host_dirs(&p, e);
    if (r < 0)
        return r;
    r = plan_host_submounts(&p, e);
    if (r < 0)
        return r;

    plan_dev(&p, s->privileged);
    if (!s->privileged) {
        r = plan_devices(&p, s->devices, s->n_devices, e);
        if (r < 0)
            return r;
    }
    _cleanup_free_ char *proc = xasprintf("%s/proc", R);
    plan_path(&p, OP_MKDIR, proc, 0, xstrdup("mkdir \"/proc\""));
    plan_mount(&p, "proc", proc, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL,
               xstrdup("mount proc on \"/proc\""));
    p.ops[p.n - 1].orelse = true;
    plan_mount(&p, "/proc", proc, NULL, MS_BIND | MS_REC, NULL, xstrdup("bind \"/proc\""));
    if (!s->privileged)
        for (size_t i = 0; i < ARRAY_SIZE(proc_read_only); i++) {
            _cleanup_free_ char *in = xasprintf("%s/proc/%s", R, proc_read_only[i]);
            struct stat st;
            _cleanup_free_ char *host = xasprintf("/proc/%s", proc_read_only[i]);
            if (stat(host, &st) < 0)
                continue;
            o = plan_add(&p, OP_BIND_RO, xasprintf("make \"%s\" read-only", host));
            o->src = xstrdup(in);
            o->path = xstrdup(in);
        }
    _cleanup_free_ char *sys = xasprintf("%s/sys", R);
    plan_path(&p, OP_MKDIR, sys, 0, xstrdup("mkdir \"/sys\""));
    plan_mount(&p, "/sys", sys, NULL, MS_BIND | MS_REC, NULL, xstrdup("bind \"/sys\""));
    if (!s->privileged)
        plan_path(&p, OP_RDONLY, sys, 1, xstrdup("make \"/sys\" read-only"));
    _cleanup_free_ char *tmp = xasprintf("%s/tmp", R);
    plan_path(&p, OP_MKDIR, tmp, 0, xstrdup("mkdir \"/tmp\""));
    plan_mount(&p, "tmpfs", tmp, "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777",
               xstrdup("mount tmpfs on \"/tmp\""));
    _cleanup_free_ char *run = xasprintf("%s/run", R);
    plan_path(&p, OP_MKDIR, run, 0, xstrdup("mkdir \"/run\""));
    plan_mount(&p, "tmpfs", run, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755",
               xstrdup("mount tmpfs on \"/run\""));

    for (size_t i = 0; i < s->n_mounts; i++) {
        const struct kl_mount *m = &s->mounts[i];
        if (!m->source || !m->source[0])
            return err_set(e, -EINVAL, "mounts[%zu]: no source", i);
        if (!target_ok(m->target))
            return err_set(e, -EINVAL,
                           "mounts[%zu]: target \"%s\": not an absolute path without . or ..", i,
                           m->target ? m->target : "");
        struct stat st;
        if (stat(m->source, &st) < 0)
            return err_errno(e, -errno, "mount source \"%s\"", m->source);
        if (((s->privileged && str_has_prefix(m->target, "/dev/")) ||
             str_has_prefix(m->target, "/sys/")) &&
            access(m->target, F_OK) < 0) {
            /* A container shares the machine's real /sys (and a privileged one its /dev), and
             * kubelet-sim never creates files there: a target the machine lacks (/dev/log
             * without a syslog socket, /sys/class/dmi/id/product_name without DMI) is left out,
             * as a warning, not bound. */
            log_warn("kl-runtime", "mount left out: its target is absent from the machine",
                     "target=%s source=%s", m->target, m->source);
            continue;
        }
        _cleanup_free_ char *in = xasprintf("%s%s", R, m->target);
        if (S_ISDIR(st.st_mode))
            plan_path(&p, OP_MKDIR, in, 0, xasprintf("mkdir \"%s\"", m->target));
        else
            plan_path(&p, OP_TOUCH, in, 0, xasprintf("create \"%s\"", m->target));
        plan_mount(&p, m->source, in, NULL, MS_BIND | MS_REC, NULL,
                   xasprintf("bind \"%s\" on \"%s\"", m->source, m->target));
        if (m->read_only)
            plan_path(&p, OP_RDONLY, in, 0, xasprintf("make \"%s\" read-only", m->target));
    }

    for (size_t i = 0; i < ARRAY_SIZE(host_dirs); i++) {
        _cleanup_free_ char *in = xasprintf("%s/%s", R, host_dirs[i]);
        struct stat st;
        if (lstat(in + strlen(R), &st) == 0 && S_ISDIR(st.st_mode))
            plan_path(&p, OP_RDONLY, in, 0, xasprintf("make \"/%s\" read-only", host_dirs[i]));
    }
    plan_path(&p, OP_UMOUNT, KL_ROOT_MNT KL_LAYERS, 0, xstrdup("unmount \"" KL_LAYERS "\""));
    plan_path(&p, OP_RMDIR, KL_ROOT_MNT KL_LAYERS, 0, xstrdup("rmdir \"" KL_LAYERS "\""));
    plan_path(&p, OP_CHDIR, R, 0, xasprintf("chdir \"%s\"", R));
    plan_path(&p, OP_PIVOT, ".", 0, xasprintf("pivot_root to \"%s\"", R));
    const char *workdir = s->workdir && s->workdir[0] ? s->workdir : "/";
    plan_path(&p, OP_WORKDIR, workdir, 0, xasprintf("working directory \"%s\"", workdir));
    if (s->hostname) {
        o = plan_add(&p, OP_HOSTNAME, xasprintf("sethostname \"%s\"", s->hostname));
        o->src = pod_hostname(s->hostname);
    }
    if (!s->privileged) {
        o = plan_add(&p, OP_CAPS, xstrdup("drop capabilities"));
        o->mask = KL_DEFAULT_CAPS;
        o->arg = last_cap();
    }
    const int stdio[3] = {null_fd, log_fd, log_fd};
    for (int i = 0; i < 3; i++) {
        o = plan_add(&p, OP_DUP2, xasprintf("set up fd %d", i));
        o->fd = stdio[i];
        o->arg = i;
    }

    pid_t pid;
    r = spawn(&p, s->argv, s->envp, &pid, e);
    if (r < 0)
        return err_prefix(e, "container \"%s\"", s->argv[0]);
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (pidfd < 0) {
        int saved = errno;
        kill(pid, SIGKILL);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
        return err_errno(e, -saved, "pidfd_open %d", (int)pid);
    }
    *ret_pid = pid;
    *ret_pidfd = pidfd;
    return 0;
}

int kl_container_reap(pid_t pid, int pidfd, int *ret_status, struct err *e)
{
    (void)pidfd;
    if (pid <= 0)
        return err_set(e, -EINVAL, "reap: bad pid %d", (int)pid);
    for (;;) {
        int status;
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) {
            *ret_status = status;
            return 1;
        }
        if (r == 0)
            return 0;
        if (errno != EINTR)
            return err_errno(e, -errno, "wait for pid %d", (int)pid);
    }
}

/* Waits until pid exits (pidfd polls readable), the deadline passes, or stop fires. Returns 1
 * when it exited and was reaped, 0 otherwise. */
static int wait_exit(pid_t pid, int pidfd, uint64_t deadline, const struct stop_token *stop,
                     int *ret_status, struct err *e)
{
    for (;;) {
        int r = kl_container_reap(pid, pidfd, ret_status, e);
        if (r != 0)
            return r;
        if (stop && stop_requested(stop))
            return 0;
        int left = deadline_poll_ms(deadline);
        if (left == 0)
            return 0;
        struct pollfd fds[2];
        nfds_t n = 0;
        if (pidfd >= 0)
            fds[n++] = (struct pollfd){.fd = pidfd, .events = POLLIN};
        else if (left < 0 || left > 20)
            left = 20; /* no pidfd: a short nap, then look again */
        if (stop)
            fds[n++] = (struct pollfd){.fd = stop_fd(stop), .events = POLLIN};
        if (poll(fds, n, left) < 0 && errno != EINTR)
            return err_errno(e, -errno, "poll pid %d", (int)pid);
    }
}

/* Through the pidfd where there is one: a pid the caller already reaped (and the kernel gave to
 * another process) is never signalled. */
static int signal_process(pid_t pid, int pidfd, int sig)
{
    if (pidfd >= 0)
        return syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0) < 0 ? -errno : 0;
    return kill(pid, sig) < 0 ? -errno : 0;
}

int kl_container_stop(pid_t pid, int pidfd, uint64_t grace_ms, const struct stop_token *stop,
                      int *ret_status, struct err *e)
{
    if (pid <= 0)
        return err_set(e, -EINVAL, "stop: bad pid %d", (int)pid);
    int status;
    int r = signal_process(pid, pidfd, SIGTERM);
    if (r < 0 && r != -ESRCH)
        return err_errno(e, r, "kill %d", (int)pid);
    r = wait_exit(pid, pidfd, deadline_after(grace_ms), stop, &status, e);
    if (r < 0)
        return r;
    if (r == 0) {
        /* The process group too: what the container started dies with it, as it would with
         * its PID namespace. pid is not reaped yet, so its group id is still its own. */
        (void)kill(-pid, SIGKILL);
        (void)signal_process(pid, pidfd, SIGKILL);
        r = wait_exit(pid, pidfd, deadline_after(KILL_WAIT_MS), NULL, &status, e);
        if (r < 0)
            return r;
        if (r == 0)
            return err_set(e, -ETIMEDOUT, "pid %d: still running %d ms after SIGKILL", (int)pid,
                           KILL_WAIT_MS);
    }
    *ret_status = status;
    return 0;
}

/* The capability bounding set of a running process (CapBnd in /proc/PID/status). */
static int process_cap_bounding(pid_t pid, uint64_t *ret)
{
    _cleanup_free_ char *path = xasprintf("/proc/%d/status", (int)pid);
    _cleanup_free_ char *text = NULL;
    struct err ignored = {0};
    int r = file_read_all(path, 64 * 1024, &text, NULL, &ignored);
    if (r < 0)
        return r;
    const char *line = strstr(text, "\nCapBnd:\t");
    if (!line)
        return -ENOENT;
    line += strlen("\nCapBnd:\t");
    size_t n = strspn(line, "0123456789abcdef");
    uint64_t v;
    if (n == 0 || n > 16 || hex_parse(line, n, &v) < 0)
        return -EINVAL;
    *ret = v;
    return 0;
}

/* The environment of a running process (/proc/PID/environ) as envp; NULL when unreadable. */
static char **process_environ(pid_t pid, char **ret_text)
{
    _cleanup_free_ char *path = xasprintf("/proc/%d/environ", (int)pid);
    _cleanup_free_ char *text = NULL;
    size_t len;
    struct err ignored = {0};
    if (file_read_all(path, ENVIRON_MAX, &text, &len, &ignored) < 0 || len == 0)
        return NULL;
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        n += text[i] == '\0';
    if (text[len - 1] != '\0')
        n++;
    char **v = xcalloc(n + 1, sizeof(*v));
    size_t k = 0;
    for (size_t i = 0; i < len && k < n; i += strlen(text + i) + 1)
        v[k++] = text + i;
    *ret_text = steal_ptr(&text);
    return v;
}

/* Reads the command's output into out until EOF or the deadline, then reaps it. Returns its
 * exit code (128 + the signal when killed), or -ETIMEDOUT (the command killed). */
static int exec_collect(pid_t child, int rfd, uint64_t deadline, char *out, size_t out_size,
                        struct err *e)
{
    size_t got = 0;
    bool eof = false;
    while (!eof && deadline_poll_ms(deadline) != 0) {
        struct pollfd pf = {.fd = rfd, .events = POLLIN};
        int pr = poll(&pf, 1, deadline_poll_ms(deadline));
        if (pr <= 0)
            continue; /* EINTR, or the deadline the loop condition ends on */
        char buf[4096];
        ssize_t n = read(rfd, buf, sizeof(buf));
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n <= 0) {
            eof = true;
            break;
        }
        if (out && out_size > 1 && got < out_size - 1) {
            size_t take = (size_t)n < out_size - 1 - got ? (size_t)n : out_size - 1 - got;
            memcpy(out + got, buf, take);
            got += take;
            out[got] = '\0';
        }
    }
    int status;
    /* Output closed: the command is done or about to be; wait for it within the deadline. */
    int r = eof ? wait_exit(child, -1, deadline, NULL, &status, e) : 0;
    if (r == 1) {
        if (WIFEXITED(status))
            return WEXITSTATUS(status);
        if (WIFSIGNALED(status))
            return 128 + WTERMSIG(status);
        return err_set(e, -EIO, "unexpected wait status %#x", (unsigned)status);
    }
    (void)kill(-child, SIGKILL);
    (void)kill(child, SIGKILL);
    while (waitpid(child, &status, 0) < 0 && errno == EINTR)
        ;
    return r < 0 ? r : err_set(e, -ETIMEDOUT, "timed out");
}

static void close_fds(int (*fds)[3])
{
    for (size_t i = 0; i < ARRAY_SIZE(*fds); i++)
        closep(&(*fds)[i]);
}

int kl_container_exec(pid_t pid, const char *const *argv, uint64_t timeout_ms, char *out,
                      size_t out_size, struct err *e)
{
    if (pid <= 0 || !argv || !argv[0] || !argv[0][0])
        return err_set(e, -EINVAL, "exec: no command or bad pid %d", (int)pid);
    if (out && out_size > 0)
        out[0] = '\0';
    uint64_t deadline = deadline_after(timeout_ms);
    static const struct {
        const char *name;
        int type;
    } ns[] = {{"net", CLONE_NEWNET}, {"uts", CLONE_NEWUTS}, {"mnt", CLONE_NEWNS}};
    _cleanup_(close_fds) int ns_fd[3] = {-1, -1, -1};
    _cleanup_(plan_freep) struct plan p = {0};
    for (size_t i = 0; i < ARRAY_SIZE(ns); i++) {
        _cleanup_free_ char *path = xasprintf("/proc/%d/ns/%s", (int)pid, ns[i].name);
        ns_fd[i] = open_cloexec(path, O_RDONLY, 0, e, "open");
        if (ns_fd[i] < 0)
            return err_prefix(e, "exec \"%s\" in pid %d", argv[0], (int)pid);
        /* The mount namespace last: joining it changes the root the others' paths used. */
        struct op *o = plan_add(&p, OP_SETNS, xasprintf("join \"%s\"", path));
        o->fd = ns_fd[i];
        o->arg = ns[i].type;
    }
    /* The container's root as its process sees it, held open across the joins. */
    _cleanup_free_ char *root_path = xasprintf("/proc/%d/root", (int)pid);
    _cleanup_close_ int root_fd =
        open_cloexec(root_path, O_RDONLY | O_DIRECTORY, 0, e, "open the container's root");
    if (root_fd < 0)
        return err_prefix(e, "exec \"%s\" in pid %d", argv[0], (int)pid);
    struct op *ro = plan_add(&p, OP_FCHROOT, xasprintf("enter \"%s\"", root_path));
    ro->fd = root_fd;
    /* The container's capabilities: an exec into an unprivileged container is unprivileged. */
    uint64_t caps;
    if (process_cap_bounding(pid, &caps) == 0) {
        struct op *o = plan_add(&p, OP_CAPS, xstrdup("set the container's capabilities"));
        o->mask = caps;
        o->arg = last_cap();
    }

    _cleanup_close_ int null_fd = open_cloexec("/dev/null", O_RDONLY, 0, e, "open");
    if (null_fd < 0)
        return null_fd;
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) < 0)
        return err_errno(e, -errno, "pipe");
    _cleanup_close_ int rfd = fd_above_stdio(pfd[0]);
    _cleanup_close_ int wfd = fd_above_stdio(pfd[1]);
    if (rfd < 0 || wfd < 0)
        return err_errno(e, -errno, "pipe");
    const int stdio[3] = {null_fd, wfd, wfd};
    for (int i = 0; i < 3; i++) {
        struct op *o = plan_add(&p, OP_DUP2, xasprintf("set up fd %d", i));
        o->fd = stdio[i];
        o->arg = i;
    }

    /* The container's environment, as an exec in a real container has it. */
    _cleanup_free_ char *env_text = NULL;
    _cleanup_free_ char **envp = process_environ(pid, &env_text);
    pid_t child;
    int r = spawn(&p, argv, (const char *const *)envp, &child, e);
    if (r < 0)
        return err_prefix(e, "exec \"%s\" in pid %d", argv[0], (int)pid);
    close(steal_fd(&wfd));
    r = exec_collect(child, rfd, deadline, out, out_size, e);
    if (r < 0)
        return err_prefix(e, "exec \"%s\" in pid %d", argv[0], (int)pid);
    return r;
}
