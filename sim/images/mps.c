/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nvidia-cuda-mps-control, simulated: the MPS control daemon and its client, enough for a
 * plugin's start, limits, liveness and stop to be told apart and asserted.
 *
 *   nvidia-cuda-mps-control -d   the daemon, in the background: the parent returns once it is up
 *   nvidia-cuda-mps-control -f   the daemon, in the foreground
 *   nvidia-cuda-mps-control      the client: each line of stdin is a command for the daemon
 *
 * Both find each other through $CUDA_MPS_PIPE_DIRECTORY (default /tmp/nvidia-mps): the daemon
 * keeps a FIFO `control` and its pid in `nvidia-cuda-mps-control.pid` there. It writes
 * $CUDA_MPS_LOG_DIRECTORY/control.log (default /var/log/nvidia-mps): a line at start naming
 * CUDA_VISIBLE_DEVICES, one per command it was told, one when it quits. `quit` ends it (the
 * client waits until it is gone). The client without a daemon says so and exits 1; a second
 * daemon on the same pipe folder is refused (exit 1). No MPS server is started: the simulated
 * CUDA library does not connect to one.
 */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "images-shell.h"
#include "simimage.h"

#define PID_FILE "nvidia-cuda-mps-control.pid"

struct mps_dirs {
    char pipe[512], log[512];
};

static void dirs_read(struct mps_dirs *d)
{
    const char *p = env_get("CUDA_MPS_PIPE_DIRECTORY"), *l = env_get("CUDA_MPS_LOG_DIRECTORY");
    snprintf(d->pipe, sizeof(d->pipe), "%s", p && *p ? p : "/tmp/nvidia-mps");
    snprintf(d->log, sizeof(d->log), "%s", l && *l ? l : "/var/log/nvidia-mps");
}

static void log_line(const struct mps_dirs *d, const char *fmt, const char *arg)
{
    char path[600];
    snprintf(path, sizeof(path), "%s/control.log", d->log);
    FILE *f = fopen(path, "ae");
    if (!f)
        return;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    fprintf(f, "[%lld.%03ld] ", (long long)ts.tv_sec, ts.tv_nsec / 1000000);
    fprintf(f, fmt, arg);
    fputc('\n', f);
    fclose(f);
}

/* Whether pid runs (a zombie, its parent not reaping yet, does not). */
static bool alive(pid_t pid)
{
    if (kill(pid, 0) < 0 && errno == ESRCH)
        return false;
    char path[64], buf[256];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    buf[n > 0 ? n : 0] = 0;
    const char *p = strrchr(buf, ')');
    return !(p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X'));
}

/* The running daemon's pid, 0 when none. */
static pid_t daemon_pid(const struct mps_dirs *d)
{
    char path[600], buf[32] = "";
    snprintf(path, sizeof(path), "%s/" PID_FILE, d->pipe);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    long pid = n > 0 ? strtol(buf, NULL, 10) : 0;
    if (pid <= 0 || !alive((pid_t)pid))
        return 0;
    return (pid_t)pid;
}

static int serve(const struct mps_dirs *d)
{
    char fifo[600], pidf[600];
    snprintf(fifo, sizeof(fifo), "%s/control", d->pipe);
    snprintf(pidf, sizeof(pidf), "%s/" PID_FILE, d->pipe);
    unlink(fifo);
    if (mkfifo(fifo, 0600) < 0) {
        simimg_fail("nvidia-cuda-mps-control: %s: %s\n", fifo, strerror(errno));
        return 1;
    }
    /* read and write: no end of file while no client is connected */
    int fd = open(fifo, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        simimg_fail("nvidia-cuda-mps-control: %s: %s\n", fifo, strerror(errno));
        return 1;
    }
    const char *vis = env_get("CUDA_VISIBLE_DEVICES");
    log_line(d, "startup CUDA_VISIBLE_DEVICES=%s", vis ? vis : "(all)");
    char pid[32];
    int n = snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
    struct err e = {0};
    if (file_write_atomic(pidf, pid, (size_t)n, 0644, &e) < 0) {
        simimg_fail("nvidia-cuda-mps-control: %s\n", err_msg(&e));
        return 1;
    }
    /* commands, a line each; gone with its pipe folder (a test's folder removed) */
    char buf[4096];
    size_t have = 0;
    bool quit = false;
    while (!quit && access(pidf, F_OK) == 0) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 1000) <= 0)
            continue;
        ssize_t got = read(fd, buf + have, sizeof(buf) - 1 - have);
        if (got <= 0)
            continue;
        have += (size_t)got;
        buf[have] = 0;
        char *line = buf, *nl;
        while (!quit && (nl = strchr(line, '\n'))) {
            *nl = 0;
            if (line[0])
                log_line(d, "command %s", line);
            quit = strcmp(line, "quit") == 0;
            line = nl + 1;
        }
        have = strlen(line);
        memmove(buf, line, have);
        if (have == sizeof(buf) - 1)
            have = 0; /* a line too long: dropped */
    }
    unlink(pidf);
    unlink(fifo);
    log_line(d, "exit%s", "");
    close(fd);
    return 0;
}

static int start_daemon(const struct mps_dirs *d, bool foreground)
{
    if (daemon_pid(d)) {
        simimg_fail("An instance of this daemon is already running\n");
        return 1;
    }
    if (mkdir_p(d->pipe, 0755) < 0 || mkdir_p(d->log, 0755) < 0) {
        simimg_fail("nvidia-cuda-mps-control: %s or %s: %s\n", d->pipe, d->log, strerror(errno));
        return 1;
    }
    if (foreground)
        return serve(d);
    pid_t child = fork();
    if (child < 0) {
        simimg_fail("nvidia-cuda-mps-control: fork: %s\n", strerror(errno));
        return 1;
    }
    if (child == 0) {
        setsid();
        int null = open("/dev/null", O_RDWR);
        if (null >= 0) {
            dup2(null, 0);
            dup2(null, 1);
            dup2(null, 2);
            if (null > 2)
                close(null);
        }
        _exit(serve(d));
    }
    /* the parent returns once the daemon answers */
    for (int i = 0; i < 500; i++) {
        if (daemon_pid(d))
            return 0;
        usleep(10 * 1000);
    }
    simimg_fail("nvidia-cuda-mps-control: the daemon did not start\n");
    return 1;
}

static int client(const struct mps_dirs *d)
{
    pid_t pid = daemon_pid(d);
    char fifo[600];
    snprintf(fifo, sizeof(fifo), "%s/control", d->pipe);
    int fd = pid ? open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC) : -1;
    if (fd < 0) {
        simimg_fail("Cannot find MPS control daemon process\n");
        return 1;
    }
    char line[512];
    bool quit = false;
    while (fgets(line, sizeof(line), stdin)) {
        size_t n = strcspn(line, "\r\n");
        line[n] = '\n';
        if (write(fd, line, n + 1) != (ssize_t)(n + 1)) {
            simimg_fail("nvidia-cuda-mps-control: %s: %s\n", fifo, strerror(errno));
            close(fd);
            return 1;
        }
        quit |= n == 4 && strncmp(line, "quit", 4) == 0;
    }
    close(fd);
    for (int i = 0; quit && i < 1000 && alive(pid); i++)
        usleep(10 * 1000);
    return 0;
}

int simimg_mps_control_main(int argc, char **argv)
{
    struct mps_dirs d;
    dirs_read(&d);
    if (argc > 1 && (strcmp(argv[1], "-d") == 0 || strcmp(argv[1], "-f") == 0))
        return start_daemon(&d, argv[1][1] == 'f');
    if (argc > 1) {
        simimg_fail("nvidia-cuda-mps-control: unknown option %s (-d, -f, or commands on stdin)\n",
                    argv[1]);
        return 2;
    }
    return client(&d);
}
