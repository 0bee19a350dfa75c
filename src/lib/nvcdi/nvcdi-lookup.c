/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The driver's files under a driver root, found as nvidia-ctk's locators find them (the notes'
 * §3): the versioned libraries in every library directory that holds any (nodestate's one list
 * of them), the firmware of that version, the binaries in the executable directories, the IPC
 * sockets. The only I/O of the module besides the daemon's shell; readdir order never reaches
 * the result (names are sorted).
 *
 * Every path is resolved inside the driver root (util's file_root_resolve): a link is followed
 * as the driver root's own system would follow it, an absolute target starting again at the
 * driver root and ".." stopping at it. A file whose links end outside it (not found inside, not
 * a regular file, a library link to something not named as a library) is left out and named
 * in the driver's skipped list; one that resolves elsewhere inside it is mounted from there, so
 * that the runtime, which follows links as the host sees them, never reaches outside the root.
 */
#include <dirent.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nodestate.h"
#include "nvcdi.h"

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
    for (size_t i = 0; i < d->n_files; i++) {
        free(d->files[i].path);
        free(d->files[i].resolved);
    }
    free(d->files);
    for (size_t i = 0; i < d->n_skipped; i++) {
        free(d->skipped[i].path);
        free(d->skipped[i].reason);
    }
    free(d->skipped);
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

/* "<dir>/<name>" inside the root ("" or "/" + name gives "/name"). */
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

/* ---- paths inside the driver root --------------------------------------------------------- */

struct lookup {
    struct nvcdi_driver *d;
    char *proot; /* the driver root as this process reaches it: "/" or "/host/run/nvidia/driver" */
    size_t plen; /* what file_root_resolve puts in front of an inner path: 0 for "/" */
    const char *driver_root; /* host view, for messages */
};

/* What path (inside the driver root) is once its links are followed inside it. */
struct resolved {
    char inner[PATH_MAX];   /* the resolved path inside the driver root ("/usr/lib/x") */
    char process[PATH_MAX]; /* the same as this process reaches it */
    struct stat st;         /* lstat of it; valid when found */
    bool found;
    bool linked; /* path itself, or a folder on the way, is a link: inner differs from path */
};

/* 0, or a negative errno when the links cannot be followed (a loop, a name too long). */
static int resolve(const struct lookup *l, const char *path, struct resolved *ret)
{
    int r = file_root_resolve(l->proot, path, ret->process, sizeof(ret->process));
    if (r < 0)
        return r;
    const char *inner = ret->process + l->plen;
    if (strlcpy_s(ret->inner, *inner ? inner : "/", sizeof(ret->inner)) >= sizeof(ret->inner))
        return -ENAMETOOLONG;
    ret->found = lstat(ret->process, &ret->st) == 0;
    ret->linked = strcmp(ret->inner, path) != 0;
    return 0;
}

static void skip(struct lookup *l, const char *path, const char *fmt, ...) GPUOP_PRINTF(3, 4);
static void skip(struct lookup *l, const char *path, const char *fmt, ...)
{
    struct nvcdi_driver *d = l->d;
    if (d->n_skipped >= NVCDI_LOOKUP_MAX)
        return;
    va_list ap;
    va_start(ap, fmt);
    char reason[PATH_MAX + 128];
    vsnprintf(reason, sizeof(reason), fmt, ap);
    va_end(ap);
    d->skipped = xrealloc(d->skipped, (d->n_skipped + 1) * sizeof(*d->skipped));
    d->skipped[d->n_skipped++] =
        (struct nvcdi_skipped){.path = xstrdup(path), .reason = xstrdup(reason)};
}

/* "lib<x>.so" or "lib<x>.so.<anything>": what a library's own file is named. */
static bool library_name(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    const char *so = strstr(base, ".so");
    return str_has_prefix(base, "lib") && so && so > base + 3 && (so[3] == 0 || so[3] == '.');
}

/* Whether path's last component is there (as anything, a link too) once its folder is
 * resolved: a link that leads nowhere is worth a warning, a file that is not there is not. */
static bool entry_exists(const struct lookup *l, const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash || !slash[1])
        return true;
    _cleanup_free_ char *dir =
        slash == path ? xstrdup("/") : xstrndup(path, (size_t)(slash - path));
    char pdir[PATH_MAX];
    if (file_root_resolve(l->proot, dir, pdir, sizeof(pdir)) < 0)
        return false;
    _cleanup_free_ char *p = xasprintf("%s/%s", pdir, slash + 1);
    struct stat st;
    return lstat(p, &st) == 0;
}

/* Whether path resolves inside the driver root to a file of the kind wanted (a regular file,
 * named as a library when library; a directory when dir; anything but a directory otherwise).
 * When not, and complain is set, it is recorded as skipped with the reason. */
enum want { WANT_FILE, WANT_LIBRARY, WANT_DIR, WANT_NOT_DIR };

static bool check(struct lookup *l, const char *path, enum want want, bool complain,
                  struct resolved *ret)
{
    int r = resolve(l, path, ret);
    if (r < 0) {
        if (complain)
            skip(l, path, "its links cannot be followed inside the driver root: %s", strerror(-r));
        return false;
    }
    const char *why = NULL;
    if (!ret->found)
        why = "which is not inside the driver root";
    else if (want == WANT_DIR       ? !S_ISDIR(ret->st.st_mode)
             : want == WANT_NOT_DIR ? S_ISDIR(ret->st.st_mode)
                                    : !S_ISREG(ret->st.st_mode))
        why = want == WANT_DIR       ? "not a directory"
              : want == WANT_NOT_DIR ? "a directory"
                                     : "not a regular file";
    else if (want == WANT_LIBRARY && !library_name(ret->inner))
        why = "not a library";
    if (!why)
        return true;
    if (complain && ret->linked && entry_exists(l, path))
        skip(l, path, "resolves to \"%s\" inside the driver root \"%s\", %s", ret->inner,
             l->driver_root, why);
    return false;
}

static int add_file(struct nvcdi_driver *d, enum nvcdi_file_kind kind, char *path,
                    const struct resolved *res, struct err *e)
{
    if (d->n_files >= NVCDI_LOOKUP_MAX) {
        free(path);
        return err_set(e, -E2BIG, "more than %u driver files", NVCDI_LOOKUP_MAX);
    }
    d->files = xrealloc(d->files, (d->n_files + 1) * sizeof(*d->files));
    d->files[d->n_files++] = (struct nvcdi_file){
        .kind = kind,
        .path = path,
        .resolved = res && res->linked ? xstrdup(res->inner) : NULL,
    };
    return 0;
}

/* ---- directories -------------------------------------------------------------------------- */

/* The entries of a directory (its resolved process path) for which want() is true, sorted. A
 * missing directory gives none. */
static void list_dir(const char *pdir, bool (*want)(const char *name, void *ud), void *ud,
                     struct names *out)
{
    _cleanup_(closedirp) DIR *dp = opendir(pdir);
    if (!dp)
        return;
    struct dirent *de;
    while ((de = readdir(dp)))
        if (de->d_name[0] != '.' && want(de->d_name, ud))
            names_add(out, de->d_name);
    if (out->n > 1)
        qsort(out->v, out->n, sizeof(*out->v), cmp_str);
}

/* lib*.so.<version> */
static bool want_versioned(const char *name, void *ud)
{
    const char *version = ud;
    size_t n = strlen(name), vl = strlen(version);
    if (!str_has_prefix(name, "lib") || n < vl + 4 + 3)
        return false;
    return strcmp(name + n - vl, version) == 0 && strncmp(name + n - vl - 4, ".so.", 4) == 0;
}

/* lib*.so.<something> that is a link (lstat in the resolved directory) */
struct link_want {
    const char *pdir;
    const struct names *libs;
};
static bool want_link(const char *name, void *ud)
{
    const struct link_want *lw = ud;
    if (!str_has_prefix(name, "lib") || !strstr(name, ".so.") || names_has(lw->libs, name))
        return false;
    _cleanup_free_ char *p = xasprintf("%s/%s", lw->pdir, name);
    struct stat st;
    return lstat(p, &st) == 0 && S_ISLNK(st.st_mode);
}

static bool want_gsp(const char *name, void *ud)
{
    (void)ud;
    return str_has_prefix(name, "gsp") && str_has_suffix(name, ".bin");
}

/* The link's target's file name ("libcuda.so.550.90.07" of "../x/libcuda.so.550.90.07"). */
static bool link_names_one_of(const char *plink, const struct names *libs)
{
    char target[PATH_MAX];
    ssize_t n = readlink(plink, target, sizeof(target) - 1);
    if (n <= 0 || (size_t)n >= sizeof(target) - 1)
        return false;
    target[n] = 0;
    const char *base = strrchr(target, '/');
    return names_has(libs, base ? base + 1 : target);
}

/* Adds the versioned libraries of one directory (dir as searched, rdir resolved), those of its
 * vdpau/, and the links to them. */
static int add_lib_dir(struct lookup *l, const char *dir, const struct resolved *rdir,
                       bool *ret_nvml, bool *ret_cuda, struct err *e)
{
    struct nvcdi_driver *d = l->d;
    struct names found = {0}, libs = {0}, links = {0}, vdpau = {0};
    int r = 0;
    list_dir(rdir->process, want_versioned, d->version, &found);
    _cleanup_free_ char *nvml = xasprintf("libnvidia-ml.so.%s", d->version);
    _cleanup_free_ char *cuda = xasprintf("libcuda.so.%s", d->version);
    for (size_t i = 0; r == 0 && i < found.n; i++) {
        _cleanup_free_ char *p = child(dir, found.v[i]);
        struct resolved res;
        if (!check(l, p, WANT_LIBRARY, true, &res))
            continue;
        names_add(&libs, found.v[i]);
        if (strcmp(found.v[i], nvml) == 0)
            *ret_nvml = true;
        if (strcmp(found.v[i], cuda) == 0 && !d->libcuda_dir) {
            *ret_cuda = true;
            d->libcuda_dir = xstrdup(*dir ? dir : "/");
        }
        r = add_file(d, NVCDI_FILE_LIBRARY, steal_ptr(&p), &res, e);
    }
    _cleanup_free_ char *vdir = child(dir, "vdpau");
    struct resolved rv;
    if (r == 0 && check(l, vdir, WANT_DIR, false, &rv))
        list_dir(rv.process, want_versioned, d->version, &vdpau);
    for (size_t i = 0; r == 0 && i < vdpau.n; i++) {
        _cleanup_free_ char *p = child(vdir, vdpau.v[i]);
        struct resolved res;
        if (check(l, p, WANT_LIBRARY, true, &res))
            r = add_file(d, NVCDI_FILE_LIBRARY, steal_ptr(&p), &res, e);
    }
    struct link_want lw = {.pdir = rdir->process, .libs = &libs};
    if (r == 0)
        list_dir(rdir->process, want_link, &lw, &links);
    for (size_t i = 0; r == 0 && i < links.n; i++) {
        _cleanup_free_ char *plink = xasprintf("%s/%s", rdir->process, links.v[i]);
        if (!link_names_one_of(plink, &libs))
            continue; /* a link to another version, or to something else: not the driver's */
        _cleanup_free_ char *p = child(dir, links.v[i]);
        struct resolved res;
        if (check(l, p, WANT_LIBRARY, true, &res))
            r = add_file(d, NVCDI_FILE_LINK, steal_ptr(&p), &res, e);
    }
    names_clear(&found);
    names_clear(&libs);
    names_clear(&links);
    names_clear(&vdpau);
    return r;
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
    for (size_t i = 0; nodestate_lib_dirs[i] && off < n; i++)
        off += (size_t)snprintf(buf + off, n - off, "%s%s", i ? " " : "",
                                *nodestate_lib_dirs[i] ? nodestate_lib_dirs[i] : "/");
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
    if (stat(proot, &rst) < 0 || !S_ISDIR(rst.st_mode))
        return err_set(e, -ENOENT, "driver root \"%s\" (at \"%s\"): not a directory", driver_root,
                       proot);
    struct lookup l = {.d = d,
                       .proot = proot,
                       .plen = strcmp(proot, "/") == 0 ? 0 : strlen(proot),
                       .driver_root = driver_root};

    /* Libraries: every search directory holding lib*.so.<version>, once per directory as it
     * resolves inside the root (/lib -> usr/lib counts once). */
    struct names seen = {0};
    bool have_nvml = false, have_cuda = false;
    int r = 0;
    for (size_t i = 0; r == 0 && nodestate_lib_dirs[i]; i++) {
        struct resolved rdir;
        const char *dir = nodestate_lib_dirs[i];
        if (!check(&l, *dir ? dir : "/", WANT_DIR, false, &rdir) || names_has(&seen, rdir.inner))
            continue;
        names_add(&seen, rdir.inner);
        r = add_lib_dir(&l, dir, &rdir, &have_nvml, &have_cuda, e);
    }
    names_clear(&seen);
    if (r < 0)
        return r;
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
    struct resolved rfw;
    struct names fw = {0};
    if (check(&l, fwdir, WANT_DIR, false, &rfw))
        list_dir(rfw.process, want_gsp, NULL, &fw);
    for (size_t i = 0; r == 0 && i < fw.n; i++) {
        _cleanup_free_ char *p = child(fwdir, fw.v[i]);
        struct resolved res;
        if (check(&l, p, WANT_FILE, true, &res))
            r = add_file(d, NVCDI_FILE_FIRMWARE, steal_ptr(&p), &res, e);
    }
    names_clear(&fw);
    if (r < 0)
        return r;

    /* Binaries: the first directory that has each. */
    for (size_t b = 0; b < ARRAY_SIZE(binaries); b++)
        for (size_t k = 0; nodestate_bin_dirs[k]; k++) {
            _cleanup_free_ char *p = child(nodestate_bin_dirs[k], binaries[b]);
            struct resolved res;
            if (!check(&l, p, WANT_FILE, true, &res))
                continue;
            if ((r = add_file(d, NVCDI_FILE_BINARY, steal_ptr(&p), &res, e)) < 0)
                return r;
            break;
        }

    /* IPC. */
    for (size_t i = 0; i < ARRAY_SIZE(ipc_sockets); i++) {
        struct resolved res;
        if (check(&l, ipc_sockets[i], WANT_NOT_DIR, true, &res) &&
            (r = add_file(d, NVCDI_FILE_IPC, xstrdup(ipc_sockets[i]), &res, e)) < 0)
            return r;
    }
    for (size_t i = 0; i < ARRAY_SIZE(ipc_dirs); i++) {
        struct resolved res;
        if (check(&l, ipc_dirs[i], WANT_DIR, true, &res) &&
            (r = add_file(d, NVCDI_FILE_IPC, xstrdup(ipc_dirs[i]), &res, e)) < 0)
            return r;
    }
    *ret = steal_ptr(&d);
    return 0;
}

int nvcdi_driver_find_nvml(const char *host_root, const char *driver_root, char *buf, size_t n,
                           struct err *e)
{
    _cleanup_free_ char *proot = nvcdi_host_path(host_root, driver_root, "/");
    struct lookup l = {.proot = proot,
                       .plen = strcmp(proot, "/") == 0 ? 0 : strlen(proot),
                       .driver_root = driver_root};
    for (size_t i = 0; nodestate_lib_dirs[i]; i++) {
        _cleanup_free_ char *p = child(nodestate_lib_dirs[i], "libnvidia-ml.so.1");
        struct resolved res;
        if (!check(&l, p, WANT_LIBRARY, false, &res))
            continue;
        if (strlcpy_s(buf, res.process, n) >= n)
            return err_set(e, -ENAMETOOLONG, "NVML path \"%s\": too long", res.process);
        return 0;
    }
    char dirs[256];
    searched(dirs, sizeof(dirs));
    return err_set(
        e, -ENOENT,
        "driver root \"%s\": no libnvidia-ml.so.1 (NVML) in its library directories (%s)",
        driver_root, dirs);
}
