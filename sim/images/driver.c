/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nvidia-driver: NVIDIA's driver container (nvcr.io/nvidia/driver), simulated on a node root.
 *
 *   nvidia-driver init          what the container runs: the steps of the real `init`, logged as
 *                               it logs them, then wait for SIGTERM and unload
 *   nvidia-driver host-install  a driver pre-installed on the host: modules loaded, libraries
 *                               and nvidia-smi under the root itself (for a node's setup)
 *
 * The node root is GPUOP_SIM_ROOT. The driver version comes from DRIVER_VERSION or the image tag
 * (GPUOP_SIM_IMAGE); the kernel from GPUOP_SIM_KERNEL, else <root>/proc/version, else uname -r.
 * A kernel "has headers" when <root>/usr/src/linux-headers-<kernel> exists. A precompiled image
 * (NVIDIA's tag <branch>-<kernel>-<os>) needs no headers and compiles nothing; it refuses a node
 * whose kernel is not the one its modules were built for, and its full version is DRIVER_VERSION
 * or the simulated fleet's driver when that is of its branch.
 *
 * Loaded means <root>/sys/module/nvidia/version (what the simulated NVML checks). A driver this
 * container loaded is marked by <root>/run/nvidia/driver/.sim-loaded-by-container, so a restart
 * unloads and reloads it; any other loaded driver is the host's, and the container refuses it
 * as the real one does ("Could not unload NVIDIA driver kernel modules, driver is in use").
 */
#include <dirent.h>
#include <fcntl.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/utsname.h>

#include "images-shell.h"
#include "simimage.h"

#define MARKER     "/run/nvidia/driver/.sim-loaded-by-container"
#define DRIVER_DIR "/run/nvidia/driver"
#define LIB_DIR    "/usr/lib/x86_64-linux-gnu"
#define PID_FILE   "/run/nvidia/nvidia-driver.pid"
#define BIN_LIMIT  (256u << 20)

struct driver {
    const char *root;
    struct simimg_driver_ref ref;
    char kernel[128];
    bool open;    /* the open kernel modules (KERNEL_MODULE_TYPE) */
    bool peermem; /* GPU_DIRECT_RDMA_ENABLED: nvidia-peermem too */
    bool sources; /* the kernel sources the module containers build against are laid out */
};

static bool exists(const char *root, const char *rel)
{
    _cleanup_free_ char *p = xasprintf("%s%s", root, rel);
    struct stat sb;
    return stat(p, &sb) == 0;
}

static int write_file(const char *root, const char *rel, const char *text, unsigned mode,
                      struct err *e)
{
    _cleanup_free_ char *p = xasprintf("%s%s", root, rel);
    _cleanup_free_ char *dir = xstrdup(p);
    *strrchr(dir, '/') = '\0';
    int r = mkdir_p(dir, 0755);
    if (r < 0)
        return err_errno(e, r, "create \"%s\"", dir);
    return file_write_atomic(p, text, strlen(text), mode, e);
}

static int copy_file(const char *src, const char *dst, unsigned mode, struct err *e)
{
    _cleanup_free_ char *dir = xstrdup(dst);
    *strrchr(dir, '/') = '\0';
    int r = mkdir_p(dir, 0755);
    if (r < 0)
        return err_errno(e, r, "create \"%s\"", dir);
    return file_copy(src, dst, BIN_LIMIT, mode, e);
}

static int symlink_replace(const char *target, const char *path, struct err *e)
{
    if (unlink(path) < 0 && errno != ENOENT)
        return err_errno(e, -errno, "remove \"%s\"", path);
    if (symlink(target, path) < 0)
        return err_errno(e, -errno, "link \"%s\" to \"%s\"", path, target);
    return 0;
}

/* A simulated driver library: $env, else the one named name beside this program. */
static char *sim_library(const char *env, const char *name)
{
    const char *p = env_get(env);
    if (p)
        return xstrdup(p);
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0)
        return xstrdup(name);
    self[n] = '\0';
    *strrchr(self, '/') = '\0';
    return xasprintf("%s/%s", self, name);
}

/* The driver's device nodes under <prefix>/dev for the node's fleet (GPUOP_SIM_FLEET), as
 * nvidia-modprobe makes them: character devices, 0666. Without CAP_MKNOD (a test run as a user)
 * none are made; no fleet, none either. */
static int make_device_nodes(const char *prefix, struct err *e)
{
    const char *fleet_path = env_get("GPUOP_SIM_FLEET");
    if (!fleet_path)
        return 0;
    _cleanup_(sim_fleet_freep) struct sim_fleet *f = NULL;
    int r = sim_fleet_load(fleet_path, &f, e);
    if (r < 0)
        return r;
    _cleanup_free_ bool *mig = xcalloc(f->n_gpus + 1, sizeof(*mig));
    for (size_t i = 0; i < f->n_gpus; i++)
        mig[i] = f->gpus[i].mig_capable;
    _cleanup_free_ struct sim_dev_node *nodes = NULL;
    size_t n = sim_dev_layout(f->n_gpus, mig, &nodes);
    for (size_t i = 0; i < n; i++) {
        _cleanup_free_ char *p = xasprintf("%s%s", prefix, nodes[i].path);
        _cleanup_free_ char *dir = xstrdup(p);
        *strrchr(dir, '/') = '\0';
        if ((r = mkdir_p(dir, 0755)) < 0)
            return err_errno(e, r, "create \"%s\"", dir);
        if (unlink(p) < 0 && errno != ENOENT)
            return err_errno(e, -errno, "remove \"%s\"", p);
        if (mknod(p, S_IFCHR | 0666, makedev(nodes[i].major, nodes[i].minor)) < 0) {
            if (errno == EPERM)
                return 0;
            return err_errno(e, -errno, "mknod \"%s\"", p);
        }
        (void)chmod(p, 0666);
    }
    return 0;
}

/* Removes <prefix>/dev/nvidia* and <prefix>/dev/nvidia-caps. */
static void remove_device_nodes(const char *prefix)
{
    _cleanup_free_ char *caps = xasprintf("%s/dev/nvidia-caps", prefix);
    _cleanup_free_ char *dev = xasprintf("%s/dev", prefix);
    const char *dirs[] = {caps, dev};
    for (size_t k = 0; k < ARRAY_SIZE(dirs); k++) {
        DIR *dir = opendir(dirs[k]);
        if (!dir)
            continue;
        struct dirent *de;
        while ((de = readdir(dir)))
            if (str_has_prefix(de->d_name, "nvidia"))
                unlinkat(dirfd(dir), de->d_name, de->d_type == DT_DIR ? AT_REMOVEDIR : 0);
        closedir(dir);
    }
    rmdir(dev);
}

/* Loads the modules (<root>/sys/module, <root>/proc/driver/nvidia) and lays out the user-space
 * driver under prefix (the driver root, or the host root for a pre-installed driver), its
 * device nodes in <prefix>/dev. */
static int driver_load(const struct driver *d, const char *prefix, bool by_container, struct err *e)
{
    const char *v = d->ref.version;
    _cleanup_free_ char *lib = sim_library("GPUOP_NVML_LIBRARY", "libnvidia-ml.so.1");
    _cleanup_free_ char *lib_dst = xasprintf("%s%s/libnvidia-ml.so.%s", prefix, LIB_DIR, v);
    _cleanup_free_ char *lib_link = xasprintf("%s%s/libnvidia-ml.so.1", prefix, LIB_DIR);
    _cleanup_free_ char *lib_target = xasprintf("libnvidia-ml.so.%s", v);
    _cleanup_free_ char *cuda = sim_library("GPUOP_CUDA_LIBRARY", "libcuda.so.1");
    _cleanup_free_ char *cuda_dst = xasprintf("%s%s/libcuda.so.%s", prefix, LIB_DIR, v);
    _cleanup_free_ char *cuda_link = xasprintf("%s%s/libcuda.so.1", prefix, LIB_DIR);
    _cleanup_free_ char *cuda_target = xasprintf("libcuda.so.%s", v);
    _cleanup_free_ char *smi_dst = xasprintf("%s/usr/bin/nvidia-smi", prefix);
    _cleanup_free_ char *mps_dst = xasprintf("%s/usr/bin/nvidia-cuda-mps-control", prefix);
    int r;
    if ((r = copy_file(lib, lib_dst, 0644, e)) < 0 ||
        (r = symlink_replace(lib_target, lib_link, e)) < 0 ||
        (r = copy_file(cuda, cuda_dst, 0644, e)) < 0 ||
        (r = symlink_replace(cuda_target, cuda_link, e)) < 0 ||
        (r = copy_file("/proc/self/exe", smi_dst, 0755, e)) < 0 ||
        (r = copy_file("/proc/self/exe", mps_dst, 0755, e)) < 0 ||
        (r = make_device_nodes(prefix, e)) < 0)
        return r;
    struct sbuf proc _cleanup_sbuf_;
    sbuf_init(&proc, 4096);
    if ((r = simimg_proc_version_text(v, d->kernel, d->open, &proc)) < 0)
        return err_set(e, r, "/proc/driver/nvidia/version: too long");
    static const char *const modules[] = {"nvidia_uvm", "nvidia_modeset"};
    for (size_t i = 0; i < ARRAY_SIZE(modules); i++) {
        _cleanup_free_ char *ref = xasprintf("/sys/module/%s/refcnt", modules[i]);
        _cleanup_free_ char *init = xasprintf("/sys/module/%s/initstate", modules[i]);
        if ((r = write_file(d->root, ref, "0\n", 0644, e)) < 0 ||
            (r = write_file(d->root, init, "live\n", 0644, e)) < 0)
            return r;
    }
    _cleanup_free_ char *vline = xasprintf("%s\n", v);
    if ((r = write_file(d->root, "/proc/driver/nvidia/version", proc.data, 0444, e)) < 0 ||
        (r = write_file(d->root, "/sys/module/nvidia/refcnt", "2\n", 0644, e)) < 0 ||
        (r = write_file(d->root, "/sys/module/nvidia/initstate", "live\n", 0644, e)) < 0)
        return r;
    if (d->peermem &&
        ((r = write_file(d->root, "/sys/module/nvidia_peermem/refcnt", "0\n", 0644, e)) < 0 ||
         (r = write_file(d->root, "/sys/module/nvidia_peermem/initstate", "live\n", 0644, e)) < 0))
        return r;
    /* the folder the module containers (nvidia-fs, gdrdrv) wait for, and in it the driver's
     * kernel sources they build against (none in a precompiled image) */
    _cleanup_free_ char *src = xasprintf("%s/usr/src", prefix);
    if (by_container && mkdir_p(src, 0755) < 0)
        return err_errno(e, -errno, "mkdir \"%s\"", src);
    _cleanup_free_ char *nv_src = xasprintf("%s/nvidia-%s", src, v);
    if (by_container && d->sources && mkdir_p(nv_src, 0755) < 0)
        return err_errno(e, -errno, "mkdir \"%s\"", nv_src);
    if (by_container && (r = write_file(d->root, MARKER, vline, 0644, e)) < 0)
        return r;
    /* last: from here on NVML on this node answers with this driver */
    return write_file(d->root, SIM_DRIVER_VERSION_FILE, vline, 0444, e);
}

static void remove_rel(const char *root, const char *rel)
{
    _cleanup_free_ char *p = xasprintf("%s%s", root, rel);
    if (unlink(p) < 0 && errno == EISDIR)
        rmdir(p);
}

/* Removes what driver_load made for a container (the version file first: NVML sees the driver
 * gone before anything else goes), keeping the driver root folder (a mount point on a node). */
static void driver_unload(const char *root)
{
    remove_rel(root, SIM_DRIVER_VERSION_FILE);
    /* the modules of the pod's other containers go with nvidia (the real _unload_driver's
     * list); their containers find them gone */
    static const char *const files[] = {
        "/sys/module/nvidia_fs/refcnt",
        "/sys/module/nvidia_fs/initstate",
        "/sys/module/nvidia_fs",
        "/sys/module/gdrdrv/refcnt",
        "/sys/module/gdrdrv/initstate",
        "/sys/module/gdrdrv",
        "/sys/module/nvidia_peermem/refcnt",
        "/sys/module/nvidia_peermem/initstate",
        "/sys/module/nvidia_peermem",
        "/sys/module/nvidia/refcnt",
        "/sys/module/nvidia/initstate",
        "/sys/module/nvidia_uvm/refcnt",
        "/sys/module/nvidia_uvm/initstate",
        "/sys/module/nvidia_modeset/refcnt",
        "/sys/module/nvidia_modeset/initstate",
        "/sys/module/nvidia",
        "/sys/module/nvidia_uvm",
        "/sys/module/nvidia_modeset",
        "/proc/driver/nvidia/version",
        "/proc/driver/nvidia",
    };
    for (size_t i = 0; i < ARRAY_SIZE(files); i++)
        remove_rel(root, files[i]);
    _cleanup_free_ char *libdir = xasprintf("%s%s%s", root, DRIVER_DIR, LIB_DIR);
    DIR *dir = opendir(libdir);
    if (dir) {
        struct dirent *de;
        while ((de = readdir(dir)))
            if (str_has_prefix(de->d_name, "libnvidia-ml.so.") ||
                str_has_prefix(de->d_name, "libcuda.so."))
                unlinkat(dirfd(dir), de->d_name, 0);
        closedir(dir);
    }
    _cleanup_free_ char *srcdir = xasprintf("%s%s/usr/src", root, DRIVER_DIR);
    dir = opendir(srcdir);
    if (dir) {
        struct dirent *de;
        while ((de = readdir(dir)))
            if (str_has_prefix(de->d_name, "nvidia-"))
                unlinkat(dirfd(dir), de->d_name, AT_REMOVEDIR);
        closedir(dir);
    }
    static const char *const rootfs[] = {
        DRIVER_DIR "/usr/src",
        DRIVER_DIR "/usr/bin/nvidia-smi",
        DRIVER_DIR "/usr/bin/nvidia-cuda-mps-control",
        DRIVER_DIR "/usr/bin",
        DRIVER_DIR LIB_DIR,
        DRIVER_DIR "/usr/lib",
        DRIVER_DIR "/usr",
        MARKER,
    };
    for (size_t i = 0; i < ARRAY_SIZE(rootfs); i++)
        remove_rel(root, rootfs[i]);
    _cleanup_free_ char *prefix = xasprintf("%s%s", root, DRIVER_DIR);
    remove_device_nodes(prefix);
}

int simimg_module_take(const char *root, int *ret_fd, struct err *e)
{
    struct sim_fleet *f _cleanup_(sim_fleet_freep) = NULL;
    struct sim_store *s _cleanup_(sim_store_freep) = NULL;
    int r = simimg_state_open(&f, &s, e);
    if (r < 0)
        return r;
    if (s && sim_procs_live(sim_store_state(s), SIM_NO_ID, NULL, 0) > 0)
        return 0;
    return sim_module_lock(root, ret_fd, e);
}

/* The real container's _unload_driver: 0 when nothing is loaded any more, -EBUSY (logged) when
 * the loaded driver cannot go. */
static int unload_step(const struct driver *d, bool shutdown)
{
    if (!exists(d->root, SIM_DRIVER_VERSION_FILE)) {
        if (exists(d->root, MARKER))
            driver_unload(d->root); /* a half-done load of an earlier run */
        return 0;
    }
    simimg_say("Unloading NVIDIA driver kernel modules...\n");
    if (!exists(d->root, MARKER)) {
        simimg_fail("Could not unload NVIDIA driver kernel modules, driver is in use\n");
        return -EBUSY;
    }
    struct err e = {0};
    _cleanup_close_ int held = -1;
    int unused = simimg_module_take(d->root, &held, &e);
    if (unused < 0) {
        simimg_fail("nvidia-driver: %s\n", err_msg(&e));
        return unused;
    }
    if (unused == 0) {
        simimg_fail("rmmod: ERROR: Module nvidia is in use\n");
        simimg_fail("Could not unload NVIDIA driver kernel modules, driver is in use\n");
        return -EBUSY;
    }
    simimg_say("Unmounting NVIDIA driver rootfs...\n");
    driver_unload(d->root);
    (void)shutdown;
    return 0;
}

static int kernel_release(const char *root, char *buf, size_t n)
{
    const char *k = env_get("GPUOP_SIM_KERNEL");
    if (k && *k) {
        snprintf(buf, n, "%s", k);
        return 0;
    }
    _cleanup_free_ char *path = xasprintf("%s/proc/version", root);
    _cleanup_free_ char *text = NULL;
    struct err e = {0};
    if (file_read_all(path, 4096, &text, NULL, &e) == 0 &&
        simimg_kernel_from_proc_version(text, buf, n, &e) == 0)
        return 0;
    struct utsname u;
    if (uname(&u) < 0)
        return -errno;
    snprintf(buf, n, "%s", u.release);
    return 0;
}

/* The GPUs of the node's fleet (none without GPUOP_SIM_FLEET); NULL on a fleet error, logged. */
static struct sim_fleet *node_fleet(bool *ret_err)
{
    *ret_err = false;
    const char *path = env_get("GPUOP_SIM_FLEET");
    if (!path)
        return NULL;
    struct sim_fleet *f = NULL;
    struct err e = {0};
    if (sim_fleet_load(path, &f, &e) < 0) {
        simimg_fail("nvidia-driver: %s\n", err_msg(&e));
        *ret_err = true;
        return NULL;
    }
    return f;
}

/* Does a GPU of this architecture have a GSP (the open modules run it: Turing and newer), and
 * does it need the open modules (Blackwell and newer)? By name: the NVML numbers stay NVML's. */
static bool arch_has_gsp(unsigned arch)
{
    static const char *const old[] = {"kepler", "maxwell", "pascal", "volta"};
    const char *n = sim_arch_name(arch);
    for (size_t i = 0; i < ARRAY_SIZE(old); i++)
        if (strcmp(n, old[i]) == 0)
            return false;
    return true;
}

static bool arch_open_only(unsigned arch)
{
    const char *n = sim_arch_name(arch);
    return strcmp(n, "blackwell") == 0 || strcmp(n, "rubin") == 0;
}

/* Which modules to build and load, from KERNEL_MODULE_TYPE and the node's GPUs. */
static int module_type(struct driver *d)
{
    bool ferr;
    _cleanup_(sim_fleet_freep) struct sim_fleet *f = node_fleet(&ferr);
    if (ferr)
        return -EINVAL;
    bool all_gsp = true, open_only = false;
    for (size_t i = 0; f && i < f->n_gpus; i++) {
        all_gsp = all_gsp && arch_has_gsp(f->gpus[i].arch);
        open_only = open_only || arch_open_only(f->gpus[i].arch);
    }
    unsigned branch = (unsigned)strtoul(d->ref.version, NULL, 10);
    struct err e = {0};
    if (simimg_module_type(env_get("KERNEL_MODULE_TYPE"), env_get("OPEN_KERNEL_MODULES_ENABLED"),
                           all_gsp, open_only, branch, &d->open, &e) < 0) {
        simimg_fail("nvidia-driver: %s\n", err_msg(&e));
        return -EINVAL;
    }
    const char *rdma = env_get("GPU_DIRECT_RDMA_ENABLED");
    d->peermem = rdma && strcmp(rdma, "true") == 0;
    const char *sources = env_get("SIM_DRIVER_SOURCES");
    if (sources && strcmp(sources, "true") != 0 && strcmp(sources, "false") != 0) {
        simimg_fail("nvidia-driver: SIM_DRIVER_SOURCES \"%s\": expected true or false\n", sources);
        return -EINVAL;
    }
    d->sources = !d->ref.kernel[0] && !(sources && strcmp(sources, "false") == 0);
    return 0;
}

/* The real modules' refusal: a GPU before Turing under the open modules, Blackwell and newer
 * under the proprietary ones. Logs modprobe's error, then the kernel's lines (dmesg's tail) of
 * the first GPU that refused, so that the log's last line, the pod's termination message, says
 * why; returns true. */
static bool module_refused(const struct driver *d)
{
    bool ferr;
    _cleanup_(sim_fleet_freep) struct sim_fleet *f = node_fleet(&ferr);
    bool refused = ferr;
    for (size_t i = 0; f && i < f->n_gpus; i++) {
        const struct sim_gpu_spec *g = &f->gpus[i];
        if (d->open ? arch_has_gsp(g->arch) : !arch_open_only(g->arch))
            continue;
        struct sbuf b _cleanup_sbuf_;
        sbuf_init(&b, 4096);
        simimg_nvrm_refusal(d->open, g->bus_id_legacy, g->pci_device_id, &b);
        simimg_fail("modprobe: ERROR: could not insert 'nvidia': No such device\n");
        if (sbuf_check(&b) == 0)
            simimg_fail("%s", b.data);
        return true;
    }
    return refused;
}

static int driver_setup(struct driver *d)
{
    d->root = env_get("GPUOP_SIM_ROOT");
    if (!d->root || d->root[0] != '/') {
        simimg_fail("nvidia-driver: GPUOP_SIM_ROOT must name the node root (an absolute path)\n");
        return -EINVAL;
    }
    struct err e = {0};
    if (simimg_driver_ref_parse(env_get("GPUOP_SIM_IMAGE"), env_get("DRIVER_VERSION"), &d->ref,
                                &e) < 0) {
        simimg_fail("nvidia-driver: %s\n", err_msg(&e));
        return -EINVAL;
    }
    if (kernel_release(d->root, d->kernel, sizeof(d->kernel)) < 0) {
        simimg_fail("nvidia-driver: cannot tell the kernel release\n");
        return -EINVAL;
    }
    if (d->ref.kernel[0]) {
        bool ferr;
        _cleanup_(sim_fleet_freep) struct sim_fleet *f = node_fleet(&ferr);
        if (ferr)
            return -EINVAL;
        if (simimg_driver_ref_complete(&d->ref, f ? f->driver_version : NULL, &e) < 0) {
            simimg_fail("nvidia-driver: %s\n", err_msg(&e));
            return -EINVAL;
        }
    }
    return module_type(d);
}

static int init(struct driver *d)
{
    struct err e = {0};
    uint64_t build_ms = 0;
    if (simimg_env_seconds("SIM_DRIVER_BUILD_SECONDS", 2, &build_ms, &e) < 0) {
        simimg_fail("nvidia-driver: %s\n", err_msg(&e));
        return 1;
    }
    int sigfd _cleanup_close_ = simimg_signals_open();
    if (sigfd < 0) {
        simimg_fail("nvidia-driver: signals: %s\n", strerror(-sigfd));
        return 1;
    }
    simimg_say("\n========== NVIDIA Software Installer ==========\n\n");
    simimg_say("Starting installation of NVIDIA driver version %s for Linux kernel version %s\n\n",
               d->ref.version, d->kernel);

    _cleanup_free_ char *pid_path = xasprintf("%s%s", d->root, PID_FILE);
    _cleanup_free_ char *run_dir = xasprintf("%s/run/nvidia", d->root);
    mkdir_p(run_dir, 0755);
    _cleanup_close_ int pid_fd = open(pid_path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (pid_fd < 0 || flock(pid_fd, LOCK_EX | LOCK_NB) < 0) {
        simimg_fail("An instance of the NVIDIA driver is already running, aborting\n");
        return 1;
    }
    char pid_text[32];
    int pid_len = snprintf(pid_text, sizeof(pid_text), "%d\n", (int)getpid());
    if (ftruncate(pid_fd, 0) < 0 || pwrite(pid_fd, pid_text, (size_t)pid_len, 0) != pid_len) {
        simimg_fail("nvidia-driver: write \"%s\": %s\n", pid_path, strerror(errno));
        return 1;
    }

    if (unload_step(d, false) < 0)
        return 1;

    int sig = 0;
    if (d->ref.kernel[0]) {
        /* precompiled: the modules in the image were built for one kernel, nothing is compiled */
        if (strcmp(d->ref.kernel, d->kernel) != 0) {
            simimg_fail(
                "Kernel version mismatch: the precompiled modules of this driver image are for "
                "Linux kernel version %s, this node runs %s; use the image of the node's "
                "kernel\n",
                d->ref.kernel, d->kernel);
            unlink(pid_path);
            return 1;
        }
        simimg_say("Proceeding with Linux kernel version %s\n", d->kernel);
        simimg_say("Kernel module type: %s\n", d->open ? "open" : "proprietary");
        simimg_say("Installing precompiled NVIDIA driver kernel modules for Linux kernel version "
                   "%s...\n",
                   d->kernel);
    } else {
        simimg_say("Resolving Linux kernel version...\n");
        _cleanup_free_ char *headers = xasprintf("/usr/src/linux-headers-%s", d->kernel);
        if (!exists(d->root, headers)) {
            simimg_fail("Could not resolve Linux kernel version\n");
            return 1;
        }
        simimg_say("Proceeding with Linux kernel version %s\n", d->kernel);
        simimg_say("Kernel module type: %s\n", d->open ? "open" : "proprietary");
        simimg_say("Installing Linux kernel headers...\n");
        simimg_say("Installing Linux kernel module files...\n");
        simimg_say("Generating Linux kernel version string...\n");
        simimg_say("Compiling NVIDIA driver kernel modules...\n");
        if (simimg_signal_wait(sigfd, build_ms, &sig)) {
            simimg_say("Caught signal\n");
            unlink(pid_path);
            return 1;
        }
        simimg_say("Relinking NVIDIA driver kernel modules...\n");
        simimg_say("Building NVIDIA driver package nvidia-modules-%s...\n", d->kernel);
    }
    simimg_say("Installing NVIDIA driver kernel modules...\n");
    simimg_say("Parsing kernel module parameters...\n");
    simimg_say("Loading ipmi and i2c_core kernel modules...\n");
    simimg_say("Loading NVIDIA driver kernel modules...\n");
    simimg_say("+ modprobe nvidia\n");
    /* a GPU that will not run the modules built: the kernel's lines, then modprobe's failure */
    if (module_refused(d)) {
        unlink(pid_path);
        return 1;
    }
    simimg_say("+ modprobe nvidia-uvm\n+ modprobe nvidia-modeset\n");
    if (d->peermem)
        simimg_say("+ modprobe nvidia-peermem\n");
    _cleanup_free_ char *prefix = xasprintf("%s%s", d->root, DRIVER_DIR);
    if (driver_load(d, prefix, true, &e) < 0) {
        simimg_fail("nvidia-driver: %s\n", err_msg(&e));
        driver_unload(d->root);
        unlink(pid_path);
        return 1;
    }
    simimg_say("Starting NVIDIA persistence daemon...\n");
    simimg_say("Mounting NVIDIA driver rootfs...\n");
    simimg_say("Done, now waiting for signal\n");

    for (;;) {
        if (!simimg_signal_wait(sigfd, UINT32_MAX, &sig))
            continue;
        simimg_say("Caught signal\n");
        simimg_say("Stopping NVIDIA persistence daemon...\n");
        if (unload_step(d, true) < 0)
            return 1; /* the modules stay loaded; the GPUs keep working */
        unlink(pid_path);
        return 0;
    }
}

static int host_install(struct driver *d)
{
    struct err e = {0};
    if (exists(d->root, SIM_DRIVER_VERSION_FILE)) {
        simimg_fail("nvidia-driver: a driver is already loaded on %s\n", d->root);
        return 1;
    }
    if (driver_load(d, d->root, false, &e) < 0) {
        simimg_fail("nvidia-driver: %s\n", err_msg(&e));
        return 1;
    }
    simimg_say("NVIDIA driver %s installed on the host %s\n", d->ref.version, d->root);
    return 0;
}

/* The peermem sidecar's commands: probe (loaded?) and reload (load it again whenever it is
 * gone while nvidia is loaded, until a signal). */
static int peermem(struct driver *d, bool reload)
{
    if (!reload)
        return exists(d->root, "/sys/module/nvidia_peermem/initstate") ? 0 : 1;
    int sigfd _cleanup_close_ = simimg_signals_open();
    if (sigfd < 0) {
        simimg_fail("nvidia-driver: signals: %s\n", strerror(-sigfd));
        return 1;
    }
    for (;;) {
        if (exists(d->root, SIM_DRIVER_VERSION_FILE) &&
            !exists(d->root, "/sys/module/nvidia_peermem/initstate")) {
            struct err e = {0};
            simimg_say("+ modprobe nvidia-peermem\n");
            if (write_file(d->root, "/sys/module/nvidia_peermem/refcnt", "0\n", 0644, &e) < 0 ||
                write_file(d->root, "/sys/module/nvidia_peermem/initstate", "live\n", 0644, &e) <
                    0) {
                simimg_fail("nvidia-driver: %s\n", err_msg(&e));
                return 1;
            }
        }
        int sig = 0;
        if (simimg_signal_wait(sigfd, 1000, &sig))
            return 0;
    }
}

int simimg_driver_main(int argc, char **argv)
{
    const char *cmd = argc > 1 ? argv[1] : "";
    bool is_init = strcmp(cmd, "init") == 0, is_host = strcmp(cmd, "host-install") == 0;
    bool is_probe = strcmp(cmd, "probe_nvidia_peermem") == 0;
    bool is_reload = strcmp(cmd, "reload_nvidia_peermem") == 0;
    if (!is_init && !is_host && !is_probe && !is_reload) {
        simimg_fail("Usage: nvidia-driver init | host-install | probe_nvidia_peermem | "
                    "reload_nvidia_peermem\n");
        return 1;
    }
    struct driver d = {0};
    if (driver_setup(&d) < 0)
        return 1;
    if (is_probe || is_reload)
        return peermem(&d, is_reload);
    return is_init ? init(&d) : host_install(&d);
}
