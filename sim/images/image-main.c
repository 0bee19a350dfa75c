/* SPDX-License-Identifier: Apache-2.0 */
/*
 * build/sim-image: the simulated images' programs, chosen by the name it runs under (the
 * symlinks of build/sim-image-bin/, or the copy a driver container puts in its driver root), or
 * by its first argument (`sim-image nvidia-smi -L`).
 */
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <stdarg.h>
#include <string.h>
#include <sys/signalfd.h>

#include "images-shell.h"
#include "simimage.h"

static const struct {
    const char *name;
    int (*main)(int argc, char **argv);
} programs[] = {
    {"nvidia-driver", simimg_driver_main},
    {"nvidia-smi", simimg_smi_main},
    {"cuda-sample", simimg_cuda_sample_main},
    {"rmmod", simimg_rmmod_main},
    {"nvidia-operand", simimg_operand_main},
    {"nvidia-gds-driver", simimg_gds_main},
    {"nvidia-gdrcopy-driver", simimg_gdrcopy_main},
    {"lsmod", simimg_lsmod_main},
    {"nvidia-cuda-mps-control", simimg_mps_control_main},
};

void simimg_say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    fflush(stdout);
}

void simimg_fail(const char *fmt, ...)
{
    fflush(stdout);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fflush(stderr);
}

int simimg_signals_open(void)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGQUIT);
    sigaddset(&set, SIGHUP);
    if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
        return -errno;
    int fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    return fd < 0 ? -errno : fd;
}

bool simimg_signal_wait(int sigfd, uint64_t ms, int *ret_sig)
{
    uint64_t deadline = deadline_after(ms);
    for (;;) {
        struct signalfd_siginfo si;
        if (read(sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
            *ret_sig = (int)si.ssi_signo;
            return true;
        }
        uint64_t left = deadline_left_ms(deadline);
        if (left == 0)
            return false;
        struct pollfd p = {.fd = sigfd, .events = POLLIN};
        poll(&p, 1, left > INT32_MAX ? INT32_MAX : (int)left);
    }
}

int simimg_env_seconds(const char *name, double def, uint64_t *ret_ms, struct err *e)
{
    const char *v = env_get(name);
    double s = def;
    if (v && *v) {
        char *end = NULL;
        errno = 0;
        s = strtod(v, &end);
        if (errno || end == v || *end || !isfinite(s) || s < 0 || s > 86400)
            return err_set(e, -EINVAL, "%s: \"%s\" is not a number of seconds (0 to 86400)", name,
                           v);
    }
    *ret_ms = (uint64_t)(s * 1000.0 + 0.5);
    return 0;
}

int simimg_state_open(struct sim_fleet **ret_fleet, struct sim_store **ret_store, struct err *e)
{
    const char *path = env_get("GPUOP_SIM_FLEET");
    *ret_fleet = NULL;
    *ret_store = NULL;
    if (!path)
        return 0;
    struct sim_fleet *f _cleanup_(sim_fleet_freep) = NULL;
    int r = sim_fleet_load(path, &f, e);
    if (r < 0)
        return r;
    struct sim_store *s = NULL;
    if ((r = sim_store_open(f, env_get("GPUOP_SIM_STATE"), 0, &s, e)) < 0)
        return r;
    *ret_fleet = steal_ptr(&f);
    *ret_store = s;
    return 0;
}

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

int main(int argc, char **argv)
{
    const char *name = argc > 0 ? base_name(argv[0]) : "";
    for (int shift = 0; shift < 2; shift++) {
        for (size_t i = 0; i < ARRAY_SIZE(programs); i++)
            if (strcmp(name, programs[i].name) == 0)
                return programs[i].main(argc - shift, argv + shift);
        if (argc < 2)
            break;
        name = argv[1];
    }
    fprintf(stderr, "sim-image: run as nvidia-driver, nvidia-smi, cuda-sample, rmmod, lsmod, "
                    "nvidia-operand, nvidia-gds-driver, nvidia-gdrcopy-driver or "
                    "nvidia-cuda-mps-control (a link of that name, or "
                    "`sim-image NAME ARGS...`)\n");
    return 2;
}
