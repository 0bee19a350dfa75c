/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The plugin's shell (dra-plugin-internal.h): the MPS control daemons of the claims shared
 * through MPS. A claim's daemon is the driver root's nvidia-cuda-mps-control, started (-d) by the
 * plugin with the claim's devices alone visible, its pipe and log folders in the claim's folder
 * under <plugin dir>/mps, and in a mount namespace of its own whose /dev/shm is the claim's shm
 * folder (the containers get the same folders: dra_claim_cdi_spec). The limits are told to it
 * once it answers. The decisions (which devices, which limits) are dra_mps_daemon_plan's.
 */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dra-plugin-internal.h"

#define MPS_CONTROL  "nvidia-cuda-mps-control"
#define EXIT_NO_NS   126 /* the child could not make its mount namespace */
#define EXIT_NO_EXEC 127
#define MPS_DIR_MAX  (PATH_MAX + DRA_UID_MAX + 2)

struct mps_run {
    char bin[PATH_MAX];
    char dir[MPS_DIR_MAX]; /* the claim's folder, this process's view */
    char pipe[MPS_DIR_MAX + 8], log[MPS_DIR_MAX + 8], shm[MPS_DIR_MAX + 8];
    const char **env; /* malloc'ed: the plugin's environment, the driver's libraries first, and
                         the daemon's own variables */
    char *added;      /* malloc'ed strings env holds */
    char *vars[4];
};

static void mps_run_clear(struct mps_run *m)
{
    free(m->env);
    free(m->added);
    for (size_t i = 0; i < ARRAY_SIZE(m->vars); i++)
        free(m->vars[i]);
}

static bool is_ours(const char *s)
{
    return str_has_prefix(s, "CUDA_MPS_") || str_has_prefix(s, "CUDA_VISIBLE_DEVICES=") ||
           str_has_prefix(s, "PATH=");
}

static int mps_run_init(const struct dra_plugin *pl, const struct dra_mps_daemon *d,
                        struct mps_run *m, struct err *e)
{
    memset(m, 0, sizeof(*m));
    char lib_dir[PATH_MAX];
    int r =
        dra_driver_tool(pl->f, MPS_CONTROL, m->bin, sizeof(m->bin), lib_dir, sizeof(lib_dir), e);
    if (r < 0)
        return r;
    snprintf(m->dir, sizeof(m->dir), "%s/%s", pl->mps_root, d->claim_dir);
    snprintf(m->pipe, sizeof(m->pipe), "%s/pipe", m->dir);
    snprintf(m->log, sizeof(m->log), "%s/log", m->dir);
    snprintf(m->shm, sizeof(m->shm), "%s/shm", m->dir);
    _cleanup_free_ const char **base = proc_env_lib_first(lib_dir, &m->added);
    size_t n = 0;
    while (base[n])
        n++;
    m->env = xcalloc(n + ARRAY_SIZE(m->vars) + 1, sizeof(*m->env));
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!is_ours(base[i]))
            m->env[k++] = base[i];
    m->vars[0] = xasprintf("CUDA_MPS_PIPE_DIRECTORY=%s", m->pipe);
    m->vars[1] = xasprintf("CUDA_MPS_LOG_DIRECTORY=%s", m->log);
    m->vars[2] = xasprintf("CUDA_VISIBLE_DEVICES=%s", d->visible_devices);
    /* the daemon starts the MPS server it finds in PATH: the driver's, beside it */
    const char *path = env_get("PATH");
    _cleanup_free_ char *bin_dir = xstrdup(m->bin);
    *strrchr(bin_dir, '/') = 0; /* an absolute path: dra_driver_tool's */
    m->vars[3] = xasprintf("PATH=%s%s%s", bin_dir, path && *path ? ":" : "", path ? path : "");
    for (size_t i = 0; i < ARRAY_SIZE(m->vars); i++)
        m->env[k++] = m->vars[i];
    return 0;
}

/* Whether the claim's daemon answers (its client's get_server_list). */
static bool mps_answers(const struct mps_run *m)
{
    const char *argv[] = {m->bin, NULL};
    struct err e = {0};
    return proc_run_input(argv, m->env, "get_server_list\n", &e) == 0;
}

/* Starts the daemon (-d: it returns once the daemon runs) in a mount namespace whose /dev/shm
 * is the claim's shm folder. Only system calls between fork and exec: the plugin has threads. */
static int mps_spawn(const struct mps_run *m, struct err *e)
{
    const char *argv[] = {m->bin, "-d", NULL};
    pid_t pid = fork();
    if (pid < 0)
        return err_errno(e, -errno, "fork for %s", m->bin);
    if (pid == 0) {
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        signal(SIGPIPE, SIG_DFL);
        int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (null >= 0)
            dup2(null, 0); /* stdin without close-on-exec, the rest closed by exec */
        if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
            mount(m->shm, "/dev/shm", NULL, MS_BIND, NULL) < 0)
            _exit(EXIT_NO_NS);
        execve(m->bin, (char *const *)argv, (char *const *)m->env);
        _exit(EXIT_NO_EXEC);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return err_errno(e, -errno, "wait for %s -d", m->bin);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
        return 0;
    if (WIFEXITED(st) && WEXITSTATUS(st) == EXIT_NO_NS)
        return err_set(e, -EPERM, "%s -d: no mount namespace with %s as /dev/shm (privileged?)",
                       m->bin, m->shm);
    if (WIFEXITED(st) && WEXITSTATUS(st) == EXIT_NO_EXEC)
        return err_set(e, -ENOEXEC, "%s -d: not run", m->bin);
    if (WIFEXITED(st))
        return err_set(e, -EIO, "%s -d exited with status %d", m->bin, WEXITSTATUS(st));
    return err_set(e, -EIO, "%s -d ended by signal %d", m->bin, WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

int dra_mps_start(struct dra_plugin *pl, const struct dra_claim *c, struct err *e)
{
    struct dra_mps_daemon d;
    int r = dra_mps_daemon_plan(c, &d, e);
    if (r < 0 || d.n_devices == 0)
        return r;
    struct mps_run m;
    if ((r = mps_run_init(pl, &d, &m, e)) < 0)
        return err_prefix(e, "claim %s/%s: MPS", c->ref.ns, c->ref.name);
    if (mps_answers(&m)) {
        mps_run_clear(&m);
        return 0;
    }
    if (mkdir_p(m.pipe, 0755) < 0 || mkdir_p(m.log, 0755) < 0 || mkdir_p(m.shm, 01777) < 0) {
        r = err_errno(e, -errno, "claim %s/%s: MPS folders in %s", c->ref.ns, c->ref.name, m.dir);
        goto out;
    }
    const char *argv[] = {m.bin, NULL};
    if ((r = mps_spawn(&m, e)) < 0 ||
        (d.commands[0] && (r = proc_run_input(argv, m.env, d.commands, e)) < 0)) {
        err_prefix(e, "claim %s/%s: MPS control daemon", c->ref.ns, c->ref.name);
        goto out;
    }
    log_info(DRA_COMP, "MPS control daemon started",
             "claim=%s/%s devices=%s active_thread_percentage=%d pinned_limits=%s", c->ref.ns,
             c->ref.name, d.visible_devices, d.active_thread_percentage,
             d.pinned_env[0] ? d.pinned_env : "none");
out:
    mps_run_clear(&m);
    return r;
}

/* Removes the files of folder dir, then dir (what is left in it stays, logged). */
static void remove_flat(const char *dir)
{
    DIR *dh = opendir(dir);
    if (dh) {
        struct dirent *de;
        while ((de = readdir(dh)))
            if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
                unlinkat(dirfd(dh), de->d_name, 0);
        closedir(dh);
    }
    if (rmdir(dir) < 0 && errno != ENOENT)
        log_warn(DRA_COMP, "MPS folder not removed", "path=%s errno=%d", dir, errno);
}

int dra_mps_stop(struct dra_plugin *pl, const struct dra_claim *c, struct err *e)
{
    struct dra_mps_daemon d;
    int r = dra_mps_daemon_plan(c, &d, e);
    if (r < 0 || d.n_devices == 0)
        return r;
    struct mps_run m;
    if ((r = mps_run_init(pl, &d, &m, e)) < 0)
        return err_prefix(e, "claim %s/%s: MPS", c->ref.ns, c->ref.name);
    if (mps_answers(&m)) {
        const char *argv[] = {m.bin, NULL};
        if ((r = proc_run_input(argv, m.env, "quit\n", e)) < 0) {
            err_prefix(e, "claim %s/%s: MPS control daemon: quit", c->ref.ns, c->ref.name);
            mps_run_clear(&m);
            return r;
        }
        log_info(DRA_COMP, "MPS control daemon stopped", "claim=%s/%s", c->ref.ns, c->ref.name);
    }
    remove_flat(m.pipe);
    remove_flat(m.log);
    remove_flat(m.shm);
    remove_flat(m.dir);
    mps_run_clear(&m);
    return 0;
}

void dra_mps_supervise(struct dra_plugin *pl)
{
    for (size_t i = 0; i < pl->claims.n; i++) {
        const struct dra_claim *c = pl->claims.v[i];
        if (c->state != DRA_PREPARE_COMPLETED || !dra_claim_has_edits(c))
            continue;
        struct err e = {0};
        if (dra_mps_start(pl, c, &e) < 0)
            log_warn(DRA_COMP, "MPS control daemon not running", "claim=%s/%s error=\"%s\"",
                     c->ref.ns, c->ref.name, err_msg(&e));
    }
}
