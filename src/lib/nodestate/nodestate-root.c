/* SPDX-License-Identifier: Apache-2.0 */
/* What a node root shows about the NVIDIA driver (nodestate.h, "the driver on a node root"): the
 * one probe the driver manager, the validator and `gpuop doctor` read the node through. */
#include <ctype.h>
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nodestate.h"

#define SMALL_FILE    4096
#define MOUNTINFO_MAX (4u << 20)

const char *nodestate_module_name(enum nodestate_module m)
{
    static const char *const names[] = {
        [NODESTATE_MOD_NVIDIA_DRM] = "nvidia_drm",
        [NODESTATE_MOD_NVIDIA_MODESET] = "nvidia_modeset",
        [NODESTATE_MOD_NVIDIA_UVM] = "nvidia_uvm",
        [NODESTATE_MOD_NVIDIA_PEERMEM] = "nvidia_peermem",
        [NODESTATE_MOD_NVIDIA_FS] = "nvidia_fs",
        [NODESTATE_MOD_GDRDRV] = "gdrdrv",
        [NODESTATE_MOD_NVIDIA] = "nvidia",
    };
    return (unsigned)m < ARRAY_SIZE(names) ? names[m] : "?";
}

/* The driver's library folders, in the order NVIDIA's toolkit searches a driver root
 * (node-components.md §3; "" is the root itself), x86_64's and aarch64's, then /usr/lib, where
 * distributions without a multiarch folder put them and NVIDIA's toolkit finds them through the
 * ld cache (which gpuop does not read). */
const char *const nodestate_lib_dirs[] = {
    "",
    "/usr/lib64",
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu/nvidia/current",
    "/usr/lib/aarch64-linux-gnu/nvidia/current",
    "/lib64",
    "/lib/x86_64-linux-gnu",
    "/lib/aarch64-linux-gnu",
    "/usr/lib",
    NULL,
};

/* The executable locator's order (a root's PATH), then /opt/bin (Flatcar's drivers). */
const char *const nodestate_bin_dirs[] = {
    "/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin", "/opt/bin", NULL,
};

static const char *root_prefix(const char *root)
{
    return strcmp(root, "/") == 0 ? "" : root;
}

int nodestate_root_find(const char *root, const char *const *dirs, const char *name, bool want_exec,
                        char *buf, size_t n)
{
    const char *r = root_prefix(root);
    for (size_t i = 0; dirs[i]; i++) {
        char rel[PATH_MAX], path[PATH_MAX], resolved[PATH_MAX];
        int w = snprintf(rel, sizeof(rel), "%s/%s", dirs[i], name);
        int w2 = snprintf(path, sizeof(path), "%s%s", r, rel);
        if (w < 0 || (size_t)w >= sizeof(rel) || w2 < 0 || (size_t)w2 >= sizeof(path))
            return -ENAMETOOLONG;
        /* Links are read as the host would (absolute targets inside root); a link that does
         * not resolve there may still resolve in this container's view (a test bed's links to
         * its build folder). */
        struct stat st;
        const char *found = resolved;
        if (file_root_resolve(root, rel, resolved, sizeof(resolved)) < 0 ||
            stat(resolved, &st) < 0) {
            if (stat(path, &st) < 0)
                continue;
            found = path;
        }
        if (!S_ISREG(st.st_mode) || st.st_size == 0)
            continue;
        if (want_exec && !(st.st_mode & 0111))
            continue;
        if (strlcpy_s(buf, found, n) >= n)
            return -ENAMETOOLONG;
        return 0;
    }
    return -ENOENT;
}

bool nodestate_version_like(const char *s, size_t n)
{
    bool dot = false;
    if (n == 0 || n >= NODESTATE_VERSION_MAX || !isdigit((unsigned char)s[0]))
        return false;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '.')
            dot = true;
        else if (!isdigit((unsigned char)s[i]))
            return false;
    }
    return dot;
}

/* The first version-looking word of a text ("NVRM version: NVIDIA UNIX ... Module  550.127.05"). */
static void first_version(const char *text, char *buf, size_t n)
{
    const char *p = text;
    while (*p) {
        while (*p && isspace((unsigned char)*p))
            p++;
        size_t len = strcspn(p, " \t\r\n");
        if (nodestate_version_like(p, len) && len < n) {
            memcpy(buf, p, len);
            buf[len] = '\0';
            return;
        }
        p += len;
    }
}

static void read_module_version(const char *r, char *buf, size_t n)
{
    static const char *const files[] = {"/sys/module/nvidia/version",
                                        "/proc/driver/nvidia/version"};
    for (size_t i = 0; i < ARRAY_SIZE(files) && !buf[0]; i++) {
        _cleanup_free_ char *p = xasprintf("%s%s", r, files[i]);
        _cleanup_free_ char *text = NULL;
        struct err e = {0};
        if (file_read_all(p, SMALL_FILE, &text, NULL, &e) == 0)
            first_version(text, buf, n);
    }
}

static bool path_exists(const char *r, const char *rel)
{
    char path[PATH_MAX];
    int w = snprintf(path, sizeof(path), "%s%s", r, rel);
    if (w < 0 || (size_t)w >= sizeof(path))
        return false;
    return access(path, F_OK) == 0;
}

static bool is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Whether dir holds anything (a missing folder holds nothing). */
static bool dir_used(const char *dir)
{
    _cleanup_(closedirp) DIR *d = opendir(dir);
    if (!d)
        return false;
    struct dirent *de;
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
            return true;
    return false;
}

int nodestate_root_versioned_libs(const char *root, const char *stem, nodestate_versioned_fn fn,
                                  void *ud)
{
    const char *r = root_prefix(root);
    size_t sl = strlen(stem);
    for (size_t i = 0; nodestate_lib_dirs[i]; i++) {
        _cleanup_free_ char *dir = xasprintf("%s%s", r, nodestate_lib_dirs[i]);
        _cleanup_(closedirp) DIR *d = opendir(dir[0] ? dir : "/");
        if (!d)
            continue;
        struct dirent *de;
        while ((de = readdir(d))) {
            if (strncmp(de->d_name, stem, sl) != 0 || strncmp(de->d_name + sl, ".so.", 4) != 0)
                continue;
            const char *v = de->d_name + sl + 4;
            if (!nodestate_version_like(v, strlen(v)))
                continue;
            _cleanup_free_ char *p = xasprintf("%s/%s", dir, de->d_name);
            int r2 = fn(p, v, ud);
            if (r2 != 0)
                return r2;
        }
    }
    return 0;
}

struct nvml_pick {
    const char *want;
    char *path, *version;
    size_t pn, vn;
};

/* want's version when it is there, else the first found. */
static int pick_nvml(const char *path, const char *version, void *ud)
{
    struct nvml_pick *p = ud;
    bool wanted = p->want && p->want[0] && strcmp(version, p->want) == 0;
    if (wanted || !p->path[0]) {
        snprintf(p->path, p->pn, "%s", path);
        snprintf(p->version, p->vn, "%s", version);
    }
    return wanted ? 1 : 0;
}

static void find_nvml(const char *root, const char *want, char *path, size_t pn, char *version,
                      size_t vn)
{
    struct nvml_pick p = {.want = want, .path = path, .version = version, .pn = pn, .vn = vn};
    (void)nodestate_root_versioned_libs(root, "libnvidia-ml", pick_nvml, &p);
}

/* Whether path is a mount point of this mount namespace (/proc/self/mountinfo's 5th field). */
static bool mountpoint(const char *path)
{
    char real[PATH_MAX];
    if (!realpath(path, real))
        return false;
    _cleanup_free_ char *text = NULL;
    struct err e = {0};
    if (file_read_all("/proc/self/mountinfo", MOUNTINFO_MAX, &text, NULL, &e) < 0)
        return false;
    for (char *line = text; line && *line;) {
        char *next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        char *save = NULL, *f = strtok_r(line, " ", &save);
        for (int i = 1; f && i < 5; i++)
            f = strtok_r(NULL, " ", &save);
        if (f && strcmp(f, real) == 0)
            return true;
        line = next;
    }
    return false;
}

static int find_one(const char *root, const char *const *dirs, const char *name, bool exec,
                    char *buf, size_t n, const char *what, struct err *e)
{
    int r = nodestate_root_find(root, dirs, name, exec, buf, n);
    if (r < 0 && r != -ENOENT)
        return err_set(e, r, "%s \"%s\": path too long", what, root);
    return 0;
}

int nodestate_driver_probe(const char *host_root, const char *driver_root,
                           const char *validations_dir, struct nodestate_driver_facts *ret,
                           struct err *e)
{
    struct stat st;
    if (!host_root || !host_root[0])
        return err_set(e, -EINVAL, "no host root");
    if (stat(host_root, &st) < 0)
        return err_errno(e, -errno, "host root \"%s\"", host_root);
    if (!S_ISDIR(st.st_mode))
        return err_set(e, -ENOTDIR, "host root \"%s\": not a folder", host_root);
    if (access(host_root, R_OK | X_OK) < 0)
        return err_errno(e, -errno, "host root \"%s\"", host_root);
    struct nodestate_driver_facts *f = xcalloc(1, sizeof(*f));
    const char *r = root_prefix(host_root);
    for (int m = 0; m < NODESTATE_MOD_COUNT; m++) {
        _cleanup_free_ char *p = xasprintf("%s/sys/module/%s", r, nodestate_module_name(m));
        f->module[m] = is_dir(p);
    }
    if (f->module[NODESTATE_MOD_NVIDIA])
        read_module_version(r, f->module_version, sizeof(f->module_version));
    int rc;
    if ((rc = find_one(host_root, nodestate_bin_dirs, "nvidia-smi", true, f->host_smi,
                       sizeof(f->host_smi), "host root", e)) < 0 ||
        (rc = find_one(host_root, nodestate_lib_dirs, "libnvidia-ml.so.1", false, f->host_nvml,
                       sizeof(f->host_nvml), "host root", e)) < 0)
        goto out;
    find_nvml(host_root, f->module_version, f->host_lib, sizeof(f->host_lib), f->host_lib_version,
              sizeof(f->host_lib_version));
    if (driver_root && driver_root[0] && is_dir(driver_root)) {
        if ((rc = find_one(driver_root, nodestate_bin_dirs, "nvidia-smi", true, f->root_smi,
                           sizeof(f->root_smi), "driver root", e)) < 0 ||
            (rc = find_one(driver_root, nodestate_lib_dirs, "libnvidia-ml.so.1", false,
                           f->root_nvml, sizeof(f->root_nvml), "driver root", e)) < 0)
            goto out;
        find_nvml(driver_root, f->module_version, f->root_lib, sizeof(f->root_lib),
                  f->root_lib_version, sizeof(f->root_lib_version));
        f->root_used = dir_used(driver_root);
        f->root_dev = path_exists(root_prefix(driver_root), "/dev/nvidiactl");
        f->root_mountpoint = mountpoint(driver_root);
    }
    f->ctr_ready = nodestate_file_exists(validations_dir, NODESTATE_DRIVER_CTR_READY);
    *ret = *f;
    rc = 0;
out:
    free(f);
    return rc;
}
