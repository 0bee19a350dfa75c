/* SPDX-License-Identifier: Apache-2.0 */
/* dm_root_probe: what a node root shows about the NVIDIA driver (the file reads of drivermgr). */
#include <ctype.h>
#include <dirent.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "drivermgr.h"

#define SMALL_FILE    4096
#define MOUNTINFO_MAX (4u << 20)

static const char *const bin_dirs[] = {
    "usr/bin", "usr/sbin", "bin", "sbin", "usr/local/bin", "usr/local/sbin", "opt/bin",
};
static const char *const lib_dirs[] = {
    "usr/lib/x86_64-linux-gnu", "usr/lib/aarch64-linux-gnu", "usr/lib64", "usr/lib", "lib64",
    "lib/x86_64-linux-gnu",     "lib/aarch64-linux-gnu",
};

static bool version_like(const char *s, size_t n)
{
    bool dot = false;
    if (n == 0 || n >= DM_VERSION_MAX || !isdigit((unsigned char)s[0]))
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
        if (version_like(p, len) && len < n) {
            memcpy(buf, p, len);
            buf[len] = '\0';
            return;
        }
        p += len;
    }
}

static void read_module_version(const char *host, char *buf, size_t n)
{
    static const char *const files[] = {"sys/module/nvidia/version", "proc/driver/nvidia/version"};
    for (size_t i = 0; i < ARRAY_SIZE(files) && !buf[0]; i++) {
        _cleanup_free_ char *p = xasprintf("%s/%s", host, files[i]);
        _cleanup_free_ char *text = NULL;
        struct err e = {0};
        if (file_read_all(p, SMALL_FILE, &text, NULL, &e) == 0)
            first_version(text, buf, n);
    }
}

static bool is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* An executable, non-empty file; or a symbolic link (its target is the host's to resolve). */
static bool is_program(const char *path)
{
    struct stat st;
    if (lstat(path, &st) < 0)
        return false;
    if (S_ISLNK(st.st_mode))
        return true;
    return S_ISREG(st.st_mode) && st.st_size > 0 && (st.st_mode & 0111);
}

/* libnvidia-ml.so.<version> under root's lib folders: want's when it is there, else the first
 * found. Fills path (full) and version; leaves them "" when there is none. */
static void find_nvml(const char *root, const char *want, char *path, size_t pn, char *version,
                      size_t vn)
{
    static const char prefix[] = "libnvidia-ml.so.";
    for (size_t i = 0; i < ARRAY_SIZE(lib_dirs); i++) {
        _cleanup_free_ char *dir = xasprintf("%s/%s", root, lib_dirs[i]);
        DIR *d = opendir(dir);
        if (!d)
            continue;
        struct dirent *de;
        while ((de = readdir(d))) {
            if (!str_has_prefix(de->d_name, prefix))
                continue;
            const char *v = de->d_name + sizeof(prefix) - 1;
            if (!version_like(v, strlen(v)))
                continue;
            bool wanted = want && want[0] && strcmp(v, want) == 0;
            if (wanted || !path[0]) {
                snprintf(path, pn, "%s/%s", dir, de->d_name);
                snprintf(version, vn, "%s", v);
            }
            if (wanted) {
                closedir(d);
                return;
            }
        }
        closedir(d);
    }
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

int dm_root_probe(const char *host_root, const char *driver_root, struct dm_root_facts *ret,
                  struct err *e)
{
    struct stat st;
    if (!host_root || !host_root[0])
        return err_set(e, -EINVAL, "no host root");
    if (stat(host_root, &st) < 0)
        return err_errno(e, -errno, "host root \"%s\"", host_root);
    if (!S_ISDIR(st.st_mode))
        return err_set(e, -ENOTDIR, "host root \"%s\": not a folder", host_root);
    struct dm_root_facts f = {0};
    for (int m = 0; m < DM_MOD_COUNT; m++) {
        _cleanup_free_ char *p = xasprintf("%s/sys/module/%s", host_root, dm_module_name(m));
        f.module[m] = is_dir(p);
    }
    if (f.module[DM_MOD_NVIDIA])
        read_module_version(host_root, f.module_version, sizeof(f.module_version));
    for (size_t i = 0; i < ARRAY_SIZE(bin_dirs) && !f.host_smi[0]; i++) {
        _cleanup_free_ char *p = xasprintf("%s/%s/nvidia-smi", host_root, bin_dirs[i]);
        if (is_program(p))
            snprintf(f.host_smi, sizeof(f.host_smi), "%s", p);
    }
    find_nvml(host_root, f.module_version, f.host_lib, sizeof(f.host_lib), f.host_lib_version,
              sizeof(f.host_lib_version));
    if (driver_root && driver_root[0] && is_dir(driver_root)) {
        find_nvml(driver_root, f.module_version, f.root_lib, sizeof(f.root_lib), f.root_lib_version,
                  sizeof(f.root_lib_version));
        f.root_mountpoint = mountpoint(driver_root);
    }
    *ret = f;
    return 0;
}
