/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The driver's files under a driver root, found as nvidia-ctk's locators find them (the notes'
 * §3): the versioned libraries in the first of the library directories that hold any, the
 * firmware of that version, the binaries in the executable directories, the IPC sockets. The
 * only I/O of the module besides the daemon's shell; readdir order never reaches the result
 * (names are sorted).
 */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nvcdi.h"

const char *const nvcdi_library_dirs[] = {
    "/",
    "/usr/lib64",
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu/nvidia/current",
    "/usr/lib/aarch64-linux-gnu/nvidia/current",
    "/lib64",
    "/lib/x86_64-linux-gnu",
    "/lib/aarch64-linux-gnu",
    NULL,
};

/* Where the executable locator looks (a PATH for a root filesystem), in order. */
static const char *const bin_dirs[] = {"/usr/local/sbin", "/usr/local/bin", "/usr/sbin",
                                       "/usr/bin",        "/sbin",          "/bin"};
static const char *const binaries[] = {
    "nvidia-smi",
    "nvidia-debugdump",
    "nvidia-persistenced",
    "nvidia-cuda-mps-control",
    "nvidia-cuda-mps-server",
    "nvidia-imex",
    "nvidia-imex-ctl",
};
/* IPC: sockets (any file type but a directory) and the MPS pipe directory. */
static const char *const ipc_sockets[] = {"/run/nvidia-persistenced/socket",
                                          "/run/nvidia-fabricmanager/socket"};
static const char *const ipc_dirs[] = {"/tmp/nvidia-mps"};

void nvcdi_driver_free(struct nvcdi_driver *d)
{
    if (!d)
        return;
    for (size_t i = 0; i < d->n_files; i++)
        free(d->files[i].path);
    free(d->files);
    free(d->libcuda_dir);
    free(d);
}

char *nvcdi_host_path(const char *host_root, const char *driver_root, const char *path)
{
    size_t hl = strlen(host_root), dl = strlen(driver_root);
    while (hl > 0 && host_root[hl - 1] == '/')
        hl--;
    while (dl > 0 && driver_root[dl - 1] == '/')
        dl--;
    return xasprintf("%.*s%.*s%s", (int)hl, host_root, (int)dl, driver_root,
                     strcmp(path, "/") == 0 && (hl || dl) ? "" : path);
}

/* "<dir>/<name>" inside the root ("/" + name gives "/name"). */
static char *child(const char *dir, const char *name)
{
    return xasprintf("%s/%s", strcmp(dir, "/") == 0 ? "" : dir, name);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

struct names {
    size_t n;
    char **v;
};

static void names_clear(struct names *ns)
{
    for (size_t i = 0; i < ns->n; i++)
        free(ns->v[i]);
    free(ns->v);
    ns->n = 0;
    ns->v = NULL;
}

static void names_add(struct names *ns, const char *s)
{
    ns->v = xrealloc(ns->v, (ns->n + 1) * sizeof(*ns->v));
    ns->v[ns->n++] = xstrdup(s);
}

static bool names_has(const struct names *ns, const char *s)
{
    for (size_t i = 0; i < ns->n; i++)
        if (strcmp(ns->v[i], s) == 0)
            return true;
    return false;
}

/* The entries of a directory (at its process path) for which want() is true, sorted. A missing
 * directory gives none. */
static void list_dir(const char *pdir, bool (*want)(const char *pdir, const char *name, void *ud),
                     void *ud, struct names *out)
{
    _cleanup_(closedirp) DIR *d = opendir(pdir);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d)))
        if (de->d_name[0] != '.' && want(pdir, de->d_name, ud))
            names_add(out, de->d_name);
    if (out->n > 1)
        qsort(out->v, out->n, sizeof(*out->v), cmp_str);
}

static bool is_reg(const char *pdir, const char *name)
{
    _cleanup_free_ char *p = xasprintf("%s/%s", pdir, name);
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* lib*.so.<version>, a regular file (or a link to one). */
static bool want_versioned(const char *pdir, const char *name, void *ud)
{
    const char *version = ud;
    size_t n = strlen(name), vl = strlen(version);
    if (!str_has_prefix(name, "lib") || n < vl + 4 + 3)
        return false;
    if (strcmp(name + n - vl, version) != 0 || strncmp(name + n - vl - 4, ".so.", 4) != 0)
        return false;
    return is_reg(pdir, name);
}

/* A link named lib*.so.<something> whose target's file name is one of the versioned libraries
 * of its directory (libcuda.so.1 -> libcuda.so.550.90.07). */
struct link_want {
    const struct names *libs;
};
static bool want_link(const char *pdir, const char *name, void *ud)
{
    const struct link_want *lw = ud;
    if (!str_has_prefix(name, "lib") || !strstr(name, ".so.") || names_has(lw->libs, name))
        return false;
    _cleanup_free_ char *p = xasprintf("%s/%s", pdir, name);
    struct stat st;
    if (lstat(p, &st) < 0 || !S_ISLNK(st.st_mode))
        return false;
    char target[4096];
    ssize_t n = readlink(p, target, sizeof(target) - 1);
    if (n <= 0)
        return false;
    target[n] = 0;
    const char *base = strrchr(target, '/');
    base = base ? base + 1 : target;
    return names_has(lw->libs, base) && is_reg(pdir, name);
}

static bool want_gsp(const char *pdir, const char *name, void *ud)
{
    (void)ud;
    return str_has_prefix(name, "gsp") && str_has_suffix(name, ".bin") && is_reg(pdir, name);
}

static int add_file(struct nvcdi_driver *d, enum nvcdi_file_kind kind, char *path, struct err *e)
{
    if (d->n_files >= NVCDI_LOOKUP_MAX) {
        free(path);
        return err_set(e, -E2BIG, "more than %u driver files", NVCDI_LOOKUP_MAX);
    }
    d->files = xrealloc(d->files, (d->n_files + 1) * sizeof(*d->files));
    d->files[d->n_files++] = (struct nvcdi_file){.kind = kind, .path = path};
    return 0;
}

static bool valid_version(const char *v)
{
    if (!*v || strlen(v) >= GPU_VERSION_MAX)
        return false;
    for (const char *p = v; *p; p++)
        if (!((*p >= '0' && *p <= '9') || *p == '.'))
            return false;
    return v[0] != '.';
}

static void searched(char *buf, size_t n)
{
    size_t off = 0;
    buf[0] = 0;
    for (size_t i = 0; nvcdi_library_dirs[i] && off < n; i++)
        off += (size_t)snprintf(buf + off, n - off, "%s%s", i ? " " : "", nvcdi_library_dirs[i]);
}

/* Adds the versioned libraries of one directory (and its vdpau/) and the links to them. */
static int add_lib_dir(struct nvcdi_driver *d, const char *pdir, const char *dir,
                       const char *version, bool *ret_nvml, bool *ret_cuda, struct err *e)
{
    struct names libs = {0}, links = {0}, vdpau = {0};
    int r = 0;
    list_dir(pdir, want_versioned, (void *)version, &libs);
    _cleanup_free_ char *pvdpau = xasprintf("%s/vdpau", pdir);
    _cleanup_free_ char *vdir = child(dir, "vdpau");
    list_dir(pvdpau, want_versioned, (void *)version, &vdpau);
    struct link_want lw = {.libs = &libs};
    list_dir(pdir, want_link, &lw, &links);
    _cleanup_free_ char *nvml = xasprintf("libnvidia-ml.so.%s", version);
    _cleanup_free_ char *cuda = xasprintf("libcuda.so.%s", version);
    for (size_t i = 0; r == 0 && i < libs.n; i++) {
        if (strcmp(libs.v[i], nvml) == 0)
            *ret_nvml = true;
        if (strcmp(libs.v[i], cuda) == 0 && !d->libcuda_dir) {
            *ret_cuda = true;
            d->libcuda_dir = xstrdup(dir);
        }
        r = add_file(d, NVCDI_FILE_LIBRARY, child(dir, libs.v[i]), e);
    }
    for (size_t i = 0; r == 0 && i < vdpau.n; i++)
        r = add_file(d, NVCDI_FILE_LIBRARY, child(vdir, vdpau.v[i]), e);
    for (size_t i = 0; r == 0 && i < links.n; i++)
        r = add_file(d, NVCDI_FILE_LINK, child(dir, links.v[i]), e);
    names_clear(&libs);
    names_clear(&links);
    names_clear(&vdpau);
    return r;
}

int nvcdi_driver_lookup(const char *host_root, const char *driver_root, const char *version,
                        struct nvcdi_driver **ret, struct err *e)
{
    if (!valid_version(version))
        return err_set(e, -EINVAL, "driver version \"%s\": not digits and dots", version);
    _cleanup_(nvcdi_driver_freep) struct nvcdi_driver *d = xcalloc(1, sizeof(*d));
    strlcpy_s(d->version, version, sizeof(d->version));
    _cleanup_free_ char *proot = nvcdi_host_path(host_root, driver_root, "/");
    struct stat rst;
    if (stat(*proot ? proot : "/", &rst) < 0 || !S_ISDIR(rst.st_mode))
        return err_set(e, -ENOENT, "driver root \"%s\" (at \"%s\"): not a directory", driver_root,
                       *proot ? proot : "/");

    /* Libraries: every search directory holding lib*.so.<version>, once per directory. */
    dev_t seen_dev[16];
    ino_t seen_ino[16];
    size_t n_seen = 0;
    bool have_nvml = false, have_cuda = false;
    int r;
    for (size_t i = 0; nvcdi_library_dirs[i]; i++) {
        _cleanup_free_ char *pdir = nvcdi_host_path(host_root, driver_root, nvcdi_library_dirs[i]);
        struct stat st;
        if (stat(*pdir ? pdir : "/", &st) < 0 || !S_ISDIR(st.st_mode))
            continue;
        bool dup = false;
        for (size_t k = 0; k < n_seen; k++)
            dup |= seen_dev[k] == st.st_dev && seen_ino[k] == st.st_ino;
        if (dup)
            continue;
        if (n_seen < ARRAY_SIZE(seen_dev)) {
            seen_dev[n_seen] = st.st_dev;
            seen_ino[n_seen++] = st.st_ino;
        }
        r = add_lib_dir(d, *pdir ? pdir : "/", nvcdi_library_dirs[i], version, &have_nvml,
                        &have_cuda, e);
        if (r < 0)
            return r;
    }
    if (!have_nvml || !have_cuda) {
        char dirs[256];
        searched(dirs, sizeof(dirs));
        return err_set(e, -ENOENT,
                       "driver root \"%s\": no %s.so.%s (%s) in its library directories (%s)",
                       driver_root, have_nvml ? "libcuda" : "libnvidia-ml", version,
                       have_nvml ? "CUDA" : "NVML", dirs);
    }

    /* Firmware of this version. */
    _cleanup_free_ char *fwdir = xasprintf("/lib/firmware/nvidia/%s", version);
    _cleanup_free_ char *pfw = nvcdi_host_path(host_root, driver_root, fwdir);
    struct names fw = {0};
    list_dir(pfw, want_gsp, NULL, &fw);
    r = 0;
    for (size_t i = 0; r == 0 && i < fw.n; i++)
        r = add_file(d, NVCDI_FILE_FIRMWARE, child(fwdir, fw.v[i]), e);
    names_clear(&fw);
    if (r < 0)
        return r;

    /* Binaries: the first directory that has each. */
    for (size_t b = 0; b < ARRAY_SIZE(binaries); b++)
        for (size_t k = 0; k < ARRAY_SIZE(bin_dirs); k++) {
            _cleanup_free_ char *pdir = nvcdi_host_path(host_root, driver_root, bin_dirs[k]);
            if (!is_reg(pdir, binaries[b]))
                continue;
            if ((r = add_file(d, NVCDI_FILE_BINARY, child(bin_dirs[k], binaries[b]), e)) < 0)
                return r;
            break;
        }

    /* IPC. */
    for (size_t i = 0; i < ARRAY_SIZE(ipc_sockets); i++) {
        _cleanup_free_ char *p = nvcdi_host_path(host_root, driver_root, ipc_sockets[i]);
        struct stat st;
        if (stat(p, &st) == 0 && !S_ISDIR(st.st_mode) &&
            (r = add_file(d, NVCDI_FILE_IPC, xstrdup(ipc_sockets[i]), e)) < 0)
            return r;
    }
    for (size_t i = 0; i < ARRAY_SIZE(ipc_dirs); i++) {
        _cleanup_free_ char *p = nvcdi_host_path(host_root, driver_root, ipc_dirs[i]);
        struct stat st;
        if (stat(p, &st) == 0 && S_ISDIR(st.st_mode) &&
            (r = add_file(d, NVCDI_FILE_IPC, xstrdup(ipc_dirs[i]), e)) < 0)
            return r;
    }
    *ret = steal_ptr(&d);
    return 0;
}

int nvcdi_driver_find_nvml(const char *host_root, const char *driver_root, char *buf, size_t n,
                           struct err *e)
{
    for (size_t i = 0; nvcdi_library_dirs[i]; i++) {
        _cleanup_free_ char *pdir = nvcdi_host_path(host_root, driver_root, nvcdi_library_dirs[i]);
        if (!is_reg(*pdir ? pdir : "/", "libnvidia-ml.so.1"))
            continue;
        _cleanup_free_ char *p = xasprintf("%s/libnvidia-ml.so.1", pdir);
        if (strlcpy_s(buf, p, n) >= n)
            return err_set(e, -ENAMETOOLONG, "NVML path \"%s\": too long", p);
        return 0;
    }
    char dirs[256];
    searched(dirs, sizeof(dirs));
    return err_set(
        e, -ENOENT,
        "driver root \"%s\": no libnvidia-ml.so.1 (NVML) in its library directories (%s)",
        driver_root, dirs);
}
