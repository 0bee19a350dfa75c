/* SPDX-License-Identifier: Apache-2.0 */
/* Test helpers: start and stop a peer process (the python stand-in, kubesim), temp files. */
#ifndef GPUOP_TESTS_KUBE_PEER_H
#define GPUOP_TESTS_KUBE_PEER_H

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util.h"

struct peer {
    pid_t pid;
    int port;
};

/* Every peer still running, killed at exit: a failed assertion (a longjmp) must not leave a
 * server behind holding the test runner's pipes. */
static pid_t peer_pids[64];

static inline void peer_kill_all(void)
{
    for (size_t i = 0; i < ARRAY_SIZE(peer_pids); i++)
        if (peer_pids[i] > 0) {
            kill(peer_pids[i], SIGKILL);
            waitpid(peer_pids[i], NULL, 0);
            peer_pids[i] = 0;
        }
}

static inline void peer_track(pid_t pid, bool add)
{
    static bool registered;
    if (!registered) {
        atexit(peer_kill_all);
        registered = true;
    }
    for (size_t i = 0; i < ARRAY_SIZE(peer_pids); i++)
        if (add ? peer_pids[i] == 0 : peer_pids[i] == pid) {
            peer_pids[i] = add ? pid : 0;
            return;
        }
}

/* Starts argv; when read_port, its first stdout line is the port it listens on. */
static inline int peer_start(char *const argv[], bool read_port, struct peer *p)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) < 0)
        return -errno;
    pid_t pid = fork();
    if (pid < 0)
        return -errno;
    if (pid == 0) {
        int devnull = open("/dev/null", O_RDWR);
        dup2(read_port ? fds[1] : devnull, 1);
        if (devnull >= 0)
            dup2(devnull, 0);
        execv(argv[0], argv);
        _exit(127);
    }
    close(fds[1]);
    peer_track(pid, true);
    p->pid = pid;
    p->port = 0;
    if (read_port) {
        char buf[64] = {0};
        size_t n = 0;
        uint64_t deadline = now_ms_mono() + 10000;
        while (n < sizeof(buf) - 1 && !memchr(buf, '\n', n) && now_ms_mono() < deadline) {
            struct pollfd pf = {fds[0], POLLIN, 0};
            if (poll(&pf, 1, 200) <= 0)
                continue;
            ssize_t r = read(fds[0], buf + n, sizeof(buf) - 1 - n);
            if (r <= 0)
                break;
            n += (size_t)r;
        }
        p->port = atoi(buf);
    }
    close(fds[0]);
    if (read_port && p->port <= 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        peer_track(pid, false);
        return -EIO;
    }
    return 0;
}

static inline void peer_stop(struct peer *p)
{
    if (p->pid > 0) {
        kill(p->pid, SIGTERM);
        int st;
        uint64_t deadline = now_ms_mono() + 3000;
        while (waitpid(p->pid, &st, WNOHANG) == 0) {
            if (now_ms_mono() > deadline) {
                kill(p->pid, SIGKILL);
                waitpid(p->pid, &st, 0);
                break;
            }
            usleep(10000);
        }
        peer_track(p->pid, false);
    }
    p->pid = 0;
}

static inline int free_port(void)
{
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof(a);
    if (bind(s, (struct sockaddr *)&a, sizeof(a)) < 0 ||
        getsockname(s, (struct sockaddr *)&a, &l) < 0) {
        close(s);
        return -1;
    }
    close(s);
    return ntohs(a.sin_port);
}

static inline void write_text(const char *path, const char *text)
{
    struct err e = {0};
    if (file_write_atomic(path, text, strlen(text), 0600, &e) < 0) {
        fprintf(stderr, "%s\n", e.msg);
        abort();
    }
}

static inline bool wait_file(const char *path, uint64_t ms)
{
    uint64_t deadline = now_ms_mono() + ms;
    struct stat st;
    while (now_ms_mono() < deadline) {
        if (stat(path, &st) == 0 && st.st_size > 0)
            return true;
        usleep(20000);
    }
    return false;
}

#endif
