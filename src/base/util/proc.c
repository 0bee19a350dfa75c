/* SPDX-License-Identifier: Apache-2.0 */
/* util: running another program and waiting for it (util.h, "processes"). */
#include "util.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* in_fd: the program's stdin (-1: /dev/null). */
static int run_with(const char *const *argv, const char *const *envp, int in_fd, struct err *e)
{
    if (!argv || !argv[0] || argv[0][0] != '/')
        return err_set(e, -EINVAL, "run \"%s\": not an absolute path",
                       argv && argv[0] ? argv[0] : "");
    static const char *const no_env[] = {NULL};
    posix_spawnattr_t attr;
    posix_spawn_file_actions_t fa;
    if (posix_spawnattr_init(&attr) != 0)
        return err_set(e, -ENOMEM, "run \"%s\": out of memory", argv[0]);
    if (posix_spawn_file_actions_init(&fa) != 0) {
        posix_spawnattr_destroy(&attr);
        return err_set(e, -ENOMEM, "run \"%s\": out of memory", argv[0]);
    }
    /* The caller's blocked signals (svc blocks SIGTERM and friends for its signalfd thread) and
     * ignored ones (SIGPIPE) are not the program's. */
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    int r = posix_spawnattr_setsigmask(&attr, &none);
    if (r == 0)
        r = posix_spawnattr_setsigdefault(&attr, &all);
    if (r == 0)
        r = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    if (r == 0)
        r = in_fd < 0 ? posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0)
                      : posix_spawn_file_actions_adddup2(&fa, in_fd, 0);
    pid_t pid = -1;
    if (r == 0)
        r = posix_spawn(&pid, argv[0], &fa, &attr, (char *const *)argv,
                        (char *const *)(envp ? envp : no_env));
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    if (r != 0)
        return err_errno(e, -r, "run \"%s\"", argv[0]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return err_errno(e, -errno, "wait for \"%s\"", argv[0]);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
        return 0;
    if (WIFEXITED(st))
        return err_set(e, -EIO, "\"%s\" exited with status %d", argv[0], WEXITSTATUS(st));
    return err_set(e, -EIO, "\"%s\" ended by signal %d", argv[0],
                   WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

int proc_run(const char *const *argv, const char *const *envp, struct err *e)
{
    return run_with(argv, envp, -1, e);
}

int proc_run_input(const char *const *argv, const char *const *envp, const char *input,
                   struct err *e)
{
    size_t n = strlen(input);
    if (n > PROC_INPUT_MAX)
        return err_set(e, -E2BIG, "run \"%s\": %zu bytes of input, more than %d", argv[0], n,
                       PROC_INPUT_MAX);
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return err_errno(e, -errno, "run \"%s\": a pipe", argv[0]);
    /* all of it fits in the pipe's buffer: written before the program reads it */
    ssize_t w = n ? write(p[1], input, n) : 0;
    int saved = errno;
    close(p[1]);
    if (w != (ssize_t)n) {
        close(p[0]);
        return err_errno(e, w < 0 ? -saved : -EIO, "run \"%s\": its input", argv[0]);
    }
    int r = run_with(argv, envp, p[0], e);
    close(p[0]);
    return r;
}

int proc_find(const char *name, char **ret, struct err *e)
{
    if (!name || !*name)
        return err_set(e, -EINVAL, "an empty command name");
    if (strchr(name, '/')) {
        *ret = xstrdup(name);
        return 0;
    }
    const char *p = env_get("PATH");
    _cleanup_free_ char *dirs =
        xstrdup(p ? p : "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
    char *save = NULL;
    for (char *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        _cleanup_free_ char *cand = xasprintf("%s/%s", *d ? d : ".", name);
        if (access(cand, X_OK) == 0) {
            *ret = steal_ptr(&cand);
            return 0;
        }
    }
    return err_set(e, -ENOENT, "\"%s\": not found in PATH", name);
}

const char **proc_env_lib_first(const char *lib_dir, char **ret_added)
{
    bool add = lib_dir && *lib_dir;
    size_t n = 0;
    while (environ[n])
        n++;
    const char **env = xcalloc(n + 2, sizeof(*env));
    const char *old = env_get("LD_LIBRARY_PATH");
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!add || !str_has_prefix(environ[i], "LD_LIBRARY_PATH="))
            env[k++] = environ[i];
    *ret_added = NULL;
    if (add) {
        *ret_added = old ? xasprintf("LD_LIBRARY_PATH=%s:%s", lib_dir, old)
                         : xasprintf("LD_LIBRARY_PATH=%s", lib_dir);
        env[k++] = *ret_added;
    }
    env[k] = NULL;
    return env;
}
