/* SPDX-License-Identifier: Apache-2.0 */
/* gpuop doctor's reads of a node root (doctor_probe, doctor.h). */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timex.h>
#include <sys/un.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "doctor.h"
#include "gpu.h"
#include "rtconfig.h"

#define SMALL_FILE (64u << 10)

static const char *rp(const char *root)
{
    return strcmp(root, "/") == 0 ? "" : root;
}

static bool exists(const char *path)
{
    return access(path, F_OK) == 0;
}

static void read_small(const char *path, char *buf, size_t n)
{
    _cleanup_free_ char *text = NULL;
    struct err e = {0};
    buf[0] = '\0';
    if (file_read_all(path, SMALL_FILE, &text, NULL, &e) < 0)
        return;
    snprintf(buf, n, "%s", text);
    buf[strcspn(buf, "\n")] = '\0';
}

static void add_dkms(struct doctor_facts *f, const char *path)
{
    if (f->n_dkms < DOCTOR_ITEMS)
        snprintf(f->dkms[f->n_dkms], sizeof(f->dkms[0]), "%s", path);
    f->n_dkms++;
}

/* var/lib/dkms/nvidia/<version> and the running kernel's updates/dkms/nvidia*.ko */
static void probe_dkms(struct doctor_facts *f)
{
    const char *r = rp(f->host_root);
    _cleanup_free_ char *tree = xasprintf("%s/var/lib/dkms/nvidia", r);
    _cleanup_(closedirp) DIR *d = opendir(tree);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        _cleanup_free_ char *p = xasprintf("%s/%s", tree, de->d_name);
        add_dkms(f, p);
    }
    _cleanup_free_ char *mods = xasprintf("%s/lib/modules/%s/updates/dkms", r, f->kernel);
    _cleanup_(closedirp) DIR *m = opendir(mods);
    while (m && (de = readdir(m))) {
        if (!str_has_prefix(de->d_name, "nvidia") || !strstr(de->d_name, ".ko"))
            continue;
        _cleanup_free_ char *p = xasprintf("%s/%s", mods, de->d_name);
        add_dkms(f, p);
    }
}

static int add_lib(const char *path, const char *version, void *ud)
{
    struct doctor_facts *f = ud;
    if (f->n_libs < DOCTOR_ITEMS) {
        snprintf(f->libs[f->n_libs].path, sizeof(f->libs[0].path), "%s", path);
        snprintf(f->libs[f->n_libs].version, sizeof(f->libs[0].version), "%s", version);
    }
    f->n_libs++;
    return 0;
}

static void probe_libs(struct doctor_facts *f)
{
    static const char *const stems[] = {"libnvidia-ml", "libcuda", "libnvidia-ptxjitcompiler",
                                        "libnvidia-cfg", "libnvidia-nvvm"};
    for (size_t i = 0; i < ARRAY_SIZE(stems); i++)
        (void)nodestate_root_versioned_libs(f->host_root, stems[i], add_lib, f);
}

static void probe_persistenced(struct doctor_facts *f)
{
    static const char *const dirs[] = {"/etc/systemd/system", "/usr/lib/systemd/system",
                                       "/lib/systemd/system"};
    const char *r = rp(f->host_root);
    for (size_t i = 0; i < ARRAY_SIZE(dirs) && !f->persistenced_unit[0]; i++) {
        _cleanup_free_ char *p = xasprintf("%s%s/nvidia-persistenced.service", r, dirs[i]);
        struct stat st;
        if (stat(p, &st) == 0 && S_ISREG(st.st_mode))
            snprintf(f->persistenced_unit, sizeof(f->persistenced_unit), "%s", p);
    }
    _cleanup_free_ char *etc = xasprintf("%s/etc/systemd/system", r);
    _cleanup_(closedirp) DIR *d = opendir(etc);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        size_t n = strlen(de->d_name);
        if (n < 6 || strcmp(de->d_name + n - 6, ".wants") != 0)
            continue;
        _cleanup_free_ char *l = xasprintf("%s/%s/nvidia-persistenced.service", etc, de->d_name);
        struct stat st;
        if (lstat(l, &st) == 0)
            f->persistenced_enabled = true;
    }
}

/* The resource a socket's name says it serves: NVIDIA's naming (nvidia-<name>.sock for
 * nvidia.com/<name>; nvidia.sock before 0.10), GKE's (nvidiaGPU-*.sock). */
static void socket_resource(const char *name, char *buf, size_t n)
{
    size_t len = strlen(name);
    buf[0] = '\0';
    if (len < 5 || strcmp(name + len - 5, ".sock") != 0)
        return;
    if (strcmp(name, "nvidia.sock") == 0 || str_has_prefix(name, "nvidiaGPU-"))
        snprintf(buf, n, "nvidia.com/gpu");
    else if (str_has_prefix(name, "nvidia-"))
        snprintf(buf, n, "nvidia.com/%.*s", (int)(len - 5 - 7), name + 7);
}

static bool socket_live(const char *path)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(a.sun_path))
        return false;
    memcpy(a.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    bool ok = connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
    close(fd);
    return ok;
}

static void probe_plugins(struct doctor_facts *f)
{
    _cleanup_free_ char *dir = xasprintf("%s/var/lib/kubelet/device-plugins", rp(f->host_root));
    _cleanup_(closedirp) DIR *d = opendir(dir);
    f->plugin_dir = d != NULL;
    struct dirent *de;
    while (d && (de = readdir(d))) {
        size_t len = strlen(de->d_name);
        if (len < 5 || strcmp(de->d_name + len - 5, ".sock") != 0 ||
            strcmp(de->d_name, "kubelet.sock") == 0)
            continue;
        if (f->n_sockets < DOCTOR_ITEMS) {
            struct doctor_socket *s = &f->sockets[f->n_sockets];
            strlcpy_s(s->name, de->d_name, sizeof(s->name)); /* a longer name is cut */
            socket_resource(de->d_name, s->resource, sizeof(s->resource));
            _cleanup_free_ char *p = xasprintf("%s/%s", dir, de->d_name);
            s->live = socket_live(p);
        }
        f->n_sockets++;
    }
    _cleanup_free_ char *vdir = xasprintf("%s" NODESTATE_VALIDATIONS_DIR, rp(f->host_root));
    f->plugin_ready = nodestate_file_exists(vdir, NODESTATE_PLUGIN_READY);
}

static void probe_nvml(struct doctor_facts *f, const char *lib)
{
    snprintf(f->nvml_lib, sizeof(f->nvml_lib), "%s", lib ? lib : "");
    struct gpu_lib *gl = NULL;
    struct gpu_inventory *inv = NULL;
    struct err e = {0};
    if (gpu_lib_open(lib, &gl, &e) < 0 || gpu_inventory_read(gl, &inv, &e) < 0) {
        snprintf(f->nvml_error, sizeof(f->nvml_error), "%s", err_msg(&e));
        gpu_lib_free(gl);
        return;
    }
    f->nvml_ok = true;
    strlcpy_s(f->nvml_version, inv->driver_version, sizeof(f->nvml_version));
    f->n_gpus = inv->n_gpus;
    for (size_t i = 0; i < inv->n_gpus && i < DOCTOR_ITEMS; i++) {
        strlcpy_s(f->gpus[i].name, inv->gpus[i].name, sizeof(f->gpus[i].name));
        strlcpy_s(f->gpus[i].vbios, inv->gpus[i].vbios, sizeof(f->gpus[i].vbios));
    }
    gpu_inventory_free(inv);
    gpu_lib_free(gl);
}

static void probe_runtime(struct doctor_facts *f)
{
    const char *r = rp(f->host_root);
    _cleanup_free_ char *vdir = xasprintf("%s" NODESTATE_VALIDATIONS_DIR, r);
    char mpath[PATH_MAX];
    if (nodestate_file_path(vdir, NODESTATE_TOOLKIT_CTR_READY, mpath, sizeof(mpath)) < 0)
        return;
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    struct err e = {0};
    enum rtconfig_kind k;
    if (rtconfig_detect(f->host_root, NULL, NULL, &k, &e) == 0)
        snprintf(f->runtime, sizeof(f->runtime), "%s", rtconfig_kind_name(k));
    if (file_read_all(mpath, SMALL_FILE, &text, &len, &e) < 0) {
        if (e.code != -ENOENT)
            snprintf(f->marker_error, sizeof(f->marker_error), "%s", err_msg(&e));
        return;
    }
    f->have_marker = true;
    if (nodestate_toolkit_marker_parse(mpath, text, len, &f->marker, &e) < 0) {
        snprintf(f->marker_error, sizeof(f->marker_error), "%s", err_msg(&e));
        return;
    }
    if (!f->marker.check_runtime)
        return;
    struct err de = {0};
    if (rtconfig_detect(f->host_root, NULL, f->marker.runtime[0] ? f->marker.runtime : NULL, &k,
                        &de) < 0) {
        snprintf(f->runtime_error, sizeof(f->runtime_error), "%s", err_msg(&de));
        return;
    }
    snprintf(f->runtime, sizeof(f->runtime), "%s", rtconfig_kind_name(k));
    struct rtconfig_options ro = {
        .runtime_name = f->marker.runtime_name,
        .runtime_path = f->marker.runtime_path,
        .enable_cdi = f->marker.cdi_enabled,
        .config_path = f->marker.runtime_config[0] ? f->marker.runtime_config : NULL};
    struct err ce = {0};
    f->runtime_checked = true;
    if (rtconfig_check(f->host_root, k, &ro, &ce) < 0)
        snprintf(f->runtime_config, sizeof(f->runtime_config), "%s", err_msg(&ce));
}

static void probe_headers(struct doctor_facts *f)
{
    const char *r = rp(f->host_root);
    const char *const fmts[] = {"%s/lib/modules/%s/build", "%s/usr/src/linux-headers-%s",
                                "%s/usr/src/kernels/%s"};
    for (size_t i = 0; i < ARRAY_SIZE(fmts) && !f->headers[0]; i++) {
        char p[PATH_MAX];
        snprintf(p, sizeof(p), fmts[i], r, f->kernel);
        struct stat st;
        if (stat(p, &st) == 0 && S_ISDIR(st.st_mode))
            snprintf(f->headers, sizeof(f->headers), "%s", p);
    }
}

static void probe_iommu(struct doctor_facts *f)
{
    const char *r = rp(f->host_root);
    _cleanup_free_ char *g = xasprintf("%s/sys/kernel/iommu_groups", r);
    _cleanup_(closedirp) DIR *d = opendir(g);
    f->iommu_groups = d ? 0 : -1;
    struct dirent *de;
    while (d && (de = readdir(d)))
        if (de->d_name[0] != '.')
            f->iommu_groups++;
    if (!d && errno == ENOENT) {
        /* no iommu_groups folder: a kernel without IOMMU support, or no /sys: tell them apart */
        _cleanup_free_ char *sys = xasprintf("%s/sys/kernel", r);
        if (exists(sys))
            f->iommu_groups = 0;
    }
    _cleanup_free_ char *cl = xasprintf("%s/proc/cmdline", r);
    read_small(cl, f->cmdline, sizeof(f->cmdline));
}

/* The kernel's clock discipline (the clock is the machine's, not a container's): adjtimex says
 * whether NTP (chrony, timesyncd, ntpd) keeps it synchronised. */
static void probe_clock(struct doctor_facts *f)
{
    struct timex tx = {0};
    int st = adjtimex(&tx);
    if (st < 0) {
        f->clock_synced = -1;
        snprintf(f->clock_source, sizeof(f->clock_source), "adjtimex: %s", strerror(errno));
        return;
    }
    f->clock_synced = st != TIME_ERROR && !(tx.status & STA_UNSYNC);
    snprintf(f->clock_source, sizeof(f->clock_source), "kernel clock %s, max error %ld us",
             f->clock_synced ? "synchronised" : "unsynchronised (STA_UNSYNC)", tx.maxerror);
}

int doctor_probe(const char *host_root, const char *driver_root, struct doctor_facts *ret,
                 struct err *e)
{
    struct doctor_facts *f = xcalloc(1, sizeof(*f));
    snprintf(f->host_root, sizeof(f->host_root), "%s", host_root);
    snprintf(f->driver_root, sizeof(f->driver_root), "%s", driver_root);
    _cleanup_free_ char *droot = xasprintf("%s%s", rp(host_root), driver_root);
    _cleanup_free_ char *vdir = xasprintf("%s" NODESTATE_VALIDATIONS_DIR, rp(host_root));
    int r = nodestate_driver_probe(host_root, droot, vdir, &f->drv, e);
    if (r < 0) {
        free(f);
        return err_prefix(e, "node root unreadable");
    }
    _cleanup_free_ char *osr = xasprintf("%s/proc/sys/kernel/osrelease", rp(host_root));
    read_small(osr, f->kernel, sizeof(f->kernel));
    if (!f->kernel[0]) {
        struct utsname u;
        if (uname(&u) == 0)
            snprintf(f->kernel, sizeof(f->kernel), "%s", u.release);
    }
    probe_dkms(f);
    probe_libs(f);
    probe_persistenced(f);
    probe_plugins(f);
    /* NVML from the driver that owns the node: the containerized driver's root, else the host's
     * library; $GPUOP_NVML_LIBRARY overrides both */
    const char *lib = NULL;
    if (!env_get("GPUOP_NVML_LIBRARY"))
        lib = f->drv.root_nvml[0]   ? f->drv.root_nvml
              : f->drv.host_nvml[0] ? f->drv.host_nvml
                                    : NULL;
    probe_nvml(f, lib);
    probe_runtime(f);
    probe_headers(f);
    probe_iommu(f);
    probe_clock(f);
    *ret = *f;
    free(f);
    return 0;
}
