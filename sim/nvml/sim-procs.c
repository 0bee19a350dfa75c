/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Processes holding simulated GPUs (registered by the simulated CUDA workload, listed by
 * nvmlDeviceGetComputeRunningProcesses, checked by the simulated driver's unload) and the
 * simulated node's kernel module (<root>/sys/module/nvidia/version), the references its
 * clients hold on it, and its device nodes.
 */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "simnvml.h"

bool sim_pid_alive(uint32_t pid)
{
    if (pid == 0 || pid > INT32_MAX)
        return false;
    return kill((pid_t)pid, 0) == 0 || errno == EPERM;
}

size_t sim_procs_live(const struct sim_state *st, unsigned gpu, struct sim_proc *ret, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < st->n_procs; i++) {
        const struct sim_proc *p = &st->procs[i];
        if ((gpu != SIM_NO_ID && p->gpu != gpu) || !sim_pid_alive(p->pid))
            continue;
        if (ret && n < max)
            ret[n] = *p;
        n++;
    }
    return n;
}

struct procs_op {
    const struct sim_proc *add;
    size_t n_add;
    uint32_t remove_pid;
};

static bool pid_in(uint32_t pid, const struct sim_proc *procs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (procs[i].pid == pid)
            return true;
    return false;
}

static int procs_apply(struct sim_update *u, struct sim_state *st, void *arg, struct err *e)
{
    (void)u;
    const struct procs_op *op = arg;
    size_t keep = 0;
    bool changed = false;
    for (size_t i = 0; i < st->n_procs; i++) {
        const struct sim_proc *p = &st->procs[i];
        bool drop = p->pid == op->remove_pid || pid_in(p->pid, op->add, op->n_add) ||
                    !sim_pid_alive(p->pid);
        if (drop) {
            changed = true;
            continue;
        }
        st->procs[keep++] = *p;
    }
    st->n_procs = keep;
    for (size_t i = 0; i < op->n_add; i++) {
        if (op->add[i].gpu >= st->n_gpus)
            return err_set(e, -EINVAL, "process %u: GPU %u is out of range (the fleet has %zu)",
                           op->add[i].pid, op->add[i].gpu, st->n_gpus);
        if (st->n_procs >= SIM_MAX_PROCS)
            return err_set(e, -ENOSPC, "process %u: the simulated GPUs already run %d processes",
                           op->add[i].pid, SIM_MAX_PROCS);
        st->procs[st->n_procs++] = op->add[i];
        changed = true;
    }
    return changed ? 0 : 1; /* 1: nothing to write */
}

int sim_procs_register(struct sim_store *s, const struct sim_proc *procs, size_t n, struct err *e)
{
    if (n > SIM_MAX_PROCS)
        return err_set(e, -ENOSPC, "%zu processes: at most %d", n, SIM_MAX_PROCS);
    struct procs_op op = {.add = procs, .n_add = n};
    int r = sim_store_update(s, procs_apply, &op, e);
    return r > 0 ? 0 : r;
}

int sim_procs_unregister(struct sim_store *s, uint32_t pid, struct err *e)
{
    struct procs_op op = {.remove_pid = pid};
    int r = sim_store_update(s, procs_apply, &op, e);
    return r > 0 ? 0 : r;
}

struct load_op {
    uint32_t pid;
    const struct sim_load *load;
};

static int load_apply(struct sim_update *u, struct sim_state *st, void *arg, struct err *e)
{
    (void)u;
    const struct load_op *op = arg;
    bool found = false;
    for (size_t i = 0; i < st->n_procs; i++) {
        struct sim_proc *p = &st->procs[i];
        if (p->pid != op->pid || !sim_pid_alive(p->pid))
            continue;
        found = true;
        p->has_load = op->load != NULL;
        p->load = op->load ? *op->load : (struct sim_load){0};
    }
    if (!found)
        return err_set(e, -ENOENT, "process %u holds no simulated GPU", op->pid);
    return 0;
}

int sim_procs_set_load(struct sim_store *s, uint32_t pid, const struct sim_load *load,
                       struct err *e)
{
    struct load_op op = {.pid = pid, .load = load};
    return sim_store_update(s, load_apply, &op, e);
}

int sim_driver_loaded(const char *root, char *buf, size_t n, struct err *e)
{
    _cleanup_free_ char *path = xasprintf("%s%s", root, SIM_DRIVER_VERSION_FILE);
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    int r = file_read_all(path, 256, &text, &len, e);
    if (r == -ENOENT || r == -ENOTDIR) {
        err_clear(e);
        return 0;
    }
    if (r < 0)
        return r;
    size_t a = 0;
    while (a < len && (text[a] == ' ' || text[a] == '\t' || text[a] == '\n' || text[a] == '\r'))
        a++;
    while (len > a && (text[len - 1] == ' ' || text[len - 1] == '\t' || text[len - 1] == '\n' ||
                       text[len - 1] == '\r'))
        len--;
    if (len == a || len - a >= n)
        return err_set(e, -EINVAL, "%s: not a driver version", path);
    for (size_t i = a; i < len; i++)
        if (!((text[i] >= '0' && text[i] <= '9') || text[i] == '.'))
            return err_set(e, -EINVAL, "%s: \"%.*s\" is not a driver version", path, (int)(len - a),
                           text + a);
    memcpy(buf, text + a, len - a);
    buf[len - a] = '\0';
    return 1;
}

static int refcnt_open(const char *root, int *ret_fd, struct err *e)
{
    _cleanup_free_ char *path = xasprintf("%s%s", root, SIM_MODULE_REFCNT_FILE);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 && errno != ENOENT && errno != ENOTDIR)
        return err_errno(e, -errno, "open \"%s\"", path);
    *ret_fd = fd;
    return 0;
}

static int flock_retry(int fd, int op)
{
    while (flock(fd, op) < 0)
        if (errno != EINTR)
            return -errno;
    return 0;
}

/* Whether fd is still the refcnt file of the loaded module: an unload removes it (the version
 * file first), a reload makes a new one. */
static bool refcnt_current(const char *root, int fd)
{
    _cleanup_free_ char *path = xasprintf("%s%s", root, SIM_MODULE_REFCNT_FILE);
    _cleanup_free_ char *version = xasprintf("%s%s", root, SIM_DRIVER_VERSION_FILE);
    struct stat a, b, v;
    return fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_ino == b.st_ino &&
           a.st_dev == b.st_dev && stat(version, &v) == 0;
}

int sim_module_get(const char *root, int *ret_fd, struct err *e)
{
    _cleanup_free_ char *version = xasprintf("%s%s", root, SIM_DRIVER_VERSION_FILE);
    /* a reload between open and lock makes a new file: a few tries, then it is a busy node */
    for (int tries = 0; tries < 8; tries++) {
        int fd = -1, r = refcnt_open(root, &fd, e);
        if (r < 0)
            return r;
        struct stat st;
        bool loaded = stat(version, &st) == 0;
        if (fd < 0) {
            if (loaded)
                *ret_fd = -1;
            return loaded ? 1 : 0;
        }
        if ((r = flock_retry(fd, LOCK_SH)) < 0) {
            close(fd);
            return err_errno(e, r, "lock \"%s%s\"", root, SIM_MODULE_REFCNT_FILE);
        }
        if (refcnt_current(root, fd)) {
            *ret_fd = fd;
            return 1;
        }
        close(fd);
        if (stat(version, &st) < 0)
            return 0; /* unloaded while this waited */
    }
    return err_set(e, -EAGAIN, "%s%s: the module keeps reloading", root, SIM_MODULE_REFCNT_FILE);
}

int sim_module_lock(const char *root, int *ret_fd, struct err *e)
{
    int fd = -1, r = refcnt_open(root, &fd, e);
    if (r < 0)
        return r;
    if (fd < 0) {
        *ret_fd = -1;
        return 1;
    }
    if ((r = flock_retry(fd, LOCK_EX | LOCK_NB)) < 0) {
        close(fd);
        if (r == -EWOULDBLOCK)
            return 0;
        return err_errno(e, r, "lock \"%s%s\"", root, SIM_MODULE_REFCNT_FILE);
    }
    *ret_fd = fd;
    return 1;
}

int sim_cuda_version_for_driver(const char *driver_version, int fallback)
{
    /* The CUDA version each driver branch introduced (NVIDIA's CUDA toolkit release notes,
     * "CUDA Toolkit and Corresponding Driver Versions"). */
    static const struct {
        unsigned branch;
        int cuda;
    } table[] = {
        {470, 11040}, {510, 11060}, {515, 11070}, {520, 11080}, {525, 12000},
        {530, 12010}, {535, 12020}, {545, 12030}, {550, 12040}, {555, 12050},
        {560, 12060}, {565, 12070}, {570, 12080}, {575, 12090}, {580, 13000},
    };
    unsigned branch = 0;
    const char *p = driver_version;
    for (; *p >= '0' && *p <= '9' && branch < 100000; p++)
        branch = branch * 10 + (unsigned)(*p - '0');
    if (p == driver_version)
        return fallback;
    for (size_t i = 0; i < ARRAY_SIZE(table); i++)
        if (table[i].branch == branch)
            return table[i].cuda;
    return fallback;
}

/* ---- the driver's device nodes ---------------------------------------------------------- */

#define CAP_GIS      15 /* GPU instances per GPU in the capability layout */
#define CAP_PER_GI   9  /* the GI's access, then 8 compute instances' */
#define CAP_CONFIG   1
#define CAP_MONITOR  2
#define CAP_FIRST_GI 3

unsigned sim_mig_cap_minor(unsigned gpu_minor, unsigned gi, int ci)
{
    unsigned base = CAP_FIRST_GI + gpu_minor * CAP_GIS * CAP_PER_GI + gi * CAP_PER_GI;
    return ci < 0 ? base : base + 1 + (unsigned)ci;
}

static void node_add(struct sim_dev_node **v, size_t *n, size_t *cap, unsigned major,
                     unsigned minor, const char *name)
{
    if (*n == *cap) {
        *cap = *cap ? 2 * *cap : 16;
        *v = xrealloc(*v, *cap * sizeof(**v));
    }
    struct sim_dev_node *d = &(*v)[(*n)++];
    snprintf(d->path, sizeof(d->path), "/dev/%s", name);
    d->major = major;
    d->minor = minor;
}

size_t sim_dev_layout(size_t n_gpus, const bool *mig_capable, struct sim_dev_node **ret)
{
    struct sim_dev_node *v = NULL;
    size_t n = 0, cap = 0;
    char name[48];
    node_add(&v, &n, &cap, SIM_GPU_MAJOR, 255, "nvidiactl");
    node_add(&v, &n, &cap, SIM_GPU_MAJOR, 254, "nvidia-modeset");
    node_add(&v, &n, &cap, SIM_UVM_MAJOR, 0, "nvidia-uvm");
    node_add(&v, &n, &cap, SIM_UVM_MAJOR, 1, "nvidia-uvm-tools");
    bool any_mig = false;
    for (size_t i = 0; i < n_gpus && i < SIM_CTL_MINOR; i++) {
        snprintf(name, sizeof(name), "nvidia%zu", i);
        node_add(&v, &n, &cap, SIM_GPU_MAJOR, (unsigned)i, name);
        any_mig |= mig_capable && mig_capable[i];
    }
    if (any_mig) {
        node_add(&v, &n, &cap, SIM_CAPS_MAJOR, CAP_CONFIG, "nvidia-caps/nvidia-cap1");
        node_add(&v, &n, &cap, SIM_CAPS_MAJOR, CAP_MONITOR, "nvidia-caps/nvidia-cap2");
    }
    for (size_t i = 0; mig_capable && i < n_gpus && i < SIM_CTL_MINOR; i++)
        for (unsigned k = 0; mig_capable[i] && k < CAP_GIS * CAP_PER_GI; k++) {
            unsigned minor = sim_mig_cap_minor((unsigned)i, 0, -1) + k;
            snprintf(name, sizeof(name), "nvidia-caps/nvidia-cap%u", minor);
            node_add(&v, &n, &cap, SIM_CAPS_MAJOR, minor, name);
        }
    *ret = v;
    return n;
}

/* The minors of the character devices in dir named prefix<digits> (and of that major when it is
 * not 0), at most SIM_DEV_MAX. */
static size_t dev_minors(const char *dir, const char *prefix, unsigned major, unsigned *v)
{
    size_t n = 0, pl = strlen(prefix);
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < SIM_DEV_MAX) {
        struct stat st;
        const char *num = de->d_name + pl;
        if (strncmp(de->d_name, prefix, pl) != 0 || !*num ||
            strspn(num, "0123456789") != strlen(num) ||
            fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISCHR(st.st_mode) ||
            (major && major(st.st_rdev) != major))
            continue;
        v[n++] = minor(st.st_rdev);
    }
    closedir(d);
    return n;
}

void sim_dev_read(const char *dev, struct sim_dev_nodes *ret)
{
    _cleanup_free_ char *ctl = xasprintf("%s/nvidiactl", dev);
    _cleanup_free_ char *caps = xasprintf("%s/nvidia-caps", dev);
    struct stat st;
    ret->ctl = stat(ctl, &st) == 0 && S_ISCHR(st.st_mode);
    ret->n_gpu = dev_minors(dev, "nvidia", SIM_GPU_MAJOR, ret->gpu_minors);
    ret->n_cap = dev_minors(caps, "nvidia-cap", 0, ret->cap_minors);
}
