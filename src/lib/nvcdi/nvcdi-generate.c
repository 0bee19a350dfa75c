/* SPDX-License-Identifier: Apache-2.0 */
/* nvcdi's shell: the inputs of the spec read from the node (driver root, NVML, the driver's files,
 * the MIG capability minors, the control device nodes), the spec rendered and checked. */
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cdi.h"
#include "nodestate.h"
#include "nvcdi.h"

#define MINORS_MAX (1u << 20)

struct nvcdi_gen {
    struct nvcdi_gen_options o;
    struct gpu_lib *own_lib; /* opened here when the caller lent none */
    char driver_root[256];
    char dev_root[256];
    char hook_path[PATH_MAX]; /* the last run's; "" when its hooks were left out */
    size_t n_warnings;        /* the last run's */
    struct nvcdi_warning *warnings;
};

static void warnings_clear(struct nvcdi_gen *g)
{
    for (size_t i = 0; i < g->n_warnings; i++) {
        free(g->warnings[i].path);
        free(g->warnings[i].reason);
    }
    free(g->warnings);
    g->warnings = NULL;
    g->n_warnings = 0;
}

static void warn(struct nvcdi_gen *g, const char *what, const char *path, const char *reason)
{
    g->warnings = xrealloc(g->warnings, (g->n_warnings + 1) * sizeof(*g->warnings));
    g->warnings[g->n_warnings++] =
        (struct nvcdi_warning){.what = what, .path = xstrdup(path), .reason = xstrdup(reason)};
}

size_t nvcdi_gen_warnings(const struct nvcdi_gen *g, const struct nvcdi_warning **ret)
{
    *ret = g->warnings;
    return g->n_warnings;
}

struct nvcdi_gen *nvcdi_gen_new(const struct nvcdi_gen_options *o)
{
    struct nvcdi_gen *g = xcalloc(1, sizeof(*g));
    g->o = *o;
    if (!g->o.host_root)
        g->o.host_root = "/";
    if (!g->o.validations_dir)
        g->o.validations_dir = NODESTATE_VALIDATIONS_DIR;
    if (!g->o.spec_path)
        g->o.spec_path = NVCDI_CDI_SPEC;
    return g;
}

void nvcdi_gen_free(struct nvcdi_gen *g)
{
    if (!g)
        return;
    gpu_lib_free(g->own_lib);
    warnings_clear(g);
    free(g);
}

const char *nvcdi_gen_driver_root(const struct nvcdi_gen *g)
{
    return g->driver_root;
}

/* driver-ready's roots (NVIDIA_DRIVER_ROOT, NVIDIA_DEV_ROOT); "/" and none without the file. */
static int read_driver_ready(struct nvcdi_gen *g, struct err *e)
{
    g->dev_root[0] = 0;
    char rel[512];
    int r = nodestate_file_path(g->o.validations_dir, NODESTATE_DRIVER_READY, rel, sizeof(rel));
    if (r < 0)
        return err_set(e, r, "driver-ready: the path is too long");
    _cleanup_free_ char *path = nvcdi_host_path(g->o.host_root, "/", rel);
    _cleanup_free_ char *text = NULL;
    size_t len;
    r = file_read_all(path, 65536, &text, &len, e);
    if (r == -ENOENT) {
        err_clear(e);
        strlcpy_s(g->driver_root, "/", sizeof(g->driver_root));
        return 0;
    }
    if (r < 0)
        return r;
    struct nodestate_driver_ready dr;
    if ((r = nodestate_driver_ready_parse(path, text, len, &dr, e)) < 0)
        return r;
    if (dr.driver_root[0] != '/')
        return err_set(e, -EINVAL, "%s: NVIDIA_DRIVER_ROOT \"%s\" is not an absolute path", path,
                       dr.driver_root);
    strlcpy_s(g->driver_root, dr.driver_root, sizeof(g->driver_root));
    if (dr.dev_root[0] == '/')
        strlcpy_s(g->dev_root, dr.dev_root, sizeof(g->dev_root));
    return 0;
}

/* The driver and device roots: the options, else what driver-ready says (NVIDIA_DRIVER_ROOT,
 * NVIDIA_DEV_ROOT), else "/"; the device root defaults to the driver root. */
static int resolve_driver_root(struct nvcdi_gen *g, struct err *e)
{
    int r = 0;
    g->dev_root[0] = 0;
    if (g->o.driver_root)
        strlcpy_s(g->driver_root, g->o.driver_root, sizeof(g->driver_root));
    else
        r = read_driver_ready(g, e);
    if (r < 0)
        return r;
    if (g->o.dev_root)
        strlcpy_s(g->dev_root, g->o.dev_root, sizeof(g->dev_root));
    else if (!g->dev_root[0])
        strlcpy_s(g->dev_root, g->driver_root, sizeof(g->dev_root));
    return 0;
}

static int open_nvml(struct nvcdi_gen *g, struct gpu_lib **ret, struct err *e)
{
    if (g->o.lib) {
        *ret = g->o.lib;
        return 0;
    }
    if (!g->own_lib) {
        char found[4096];
        const char *path = g->o.nvml_library;
        if (!path || !*path) {
            int r = nvcdi_driver_find_nvml(g->o.host_root, g->driver_root, found, sizeof(found), e);
            if (r < 0)
                return r;
            path = found;
        }
        int r = gpu_lib_open(path, &g->own_lib, e);
        if (r < 0)
            return r;
    }
    *ret = g->own_lib;
    return 0;
}

int nvcdi_gen_inventory(struct nvcdi_gen *g, struct gpu_inventory **ret, struct err *e)
{
    int r = resolve_driver_root(g, e);
    if (r < 0)
        return r;
    struct gpu_lib *lib;
    if ((r = open_nvml(g, &lib, e)) < 0)
        return r;
    r = gpu_inventory_read(lib, ret, e);
    if (r < 0 && g->own_lib) {
        /* a driver being replaced: load it again next time */
        gpu_lib_free(g->own_lib);
        g->own_lib = NULL;
    }
    return r;
}

/* The gpuop the hooks run: the option, else where the toolkit says it installed gpuop
 * (.toolkit-ctr-ready's TOOLKIT_INSTALL_DIR), else NVCDI_HOOK_PATH. Left out (a warning) unless
 * it is an executable file on the host: a hook the runtime cannot run fails every container. */
static void find_hook(struct nvcdi_gen *g)
{
    g->hook_path[0] = 0;
    if (g->o.hook_path && !*g->o.hook_path)
        return; /* hooks off */
    char path[PATH_MAX];
    strlcpy_s(path, g->o.hook_path ? g->o.hook_path : NVCDI_HOOK_PATH, sizeof(path));
    char rel[512];
    if (!g->o.hook_path && nodestate_file_path(g->o.validations_dir, NODESTATE_TOOLKIT_CTR_READY,
                                               rel, sizeof(rel)) == 0) {
        _cleanup_free_ char *mpath = nvcdi_host_path(g->o.host_root, "/", rel);
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        struct err me = {0};
        struct nodestate_toolkit_marker m;
        if (file_read_all(mpath, 65536, &text, &len, &me) == 0 &&
            nodestate_toolkit_marker_parse(mpath, text, len, &m, &me) == 0 && m.install_dir[0] &&
            strlen(m.install_dir) + sizeof("/gpuop") <= sizeof(path))
            snprintf(path, sizeof(path), "%.*s/gpuop", (int)(sizeof(path) - sizeof("/gpuop")),
                     m.install_dir);
    }
    char found[PATH_MAX];
    struct stat st;
    if (path[0] != '/')
        warn(g, "CDI hooks left out", path, "not an absolute path");
    else if (g->o.hook_unchecked)
        strlcpy_s(g->hook_path, path, sizeof(g->hook_path));
    else if (file_root_resolve(g->o.host_root, path, found, sizeof(found)) < 0 ||
             stat(found, &st) < 0 || !S_ISREG(st.st_mode) || !(st.st_mode & 0111))
        warn(g, "CDI hooks left out", path, "not an executable file on the host");
    else
        strlcpy_s(g->hook_path, path, sizeof(g->hook_path));
}

int nvcdi_gen_spec(struct nvcdi_gen *g, char **ret, char *ret_version, size_t version_len,
                   struct err *e)
{
    warnings_clear(g);
    _cleanup_(gpu_inventory_freep) struct gpu_inventory *inv = NULL;
    int r = nvcdi_gen_inventory(g, &inv, e);
    if (r < 0)
        return r;
    _cleanup_(nvcdi_driver_freep) struct nvcdi_driver *drv = NULL;
    if ((r = nvcdi_driver_lookup(g->o.host_root, g->driver_root, inv->driver_version, &drv, e)) < 0)
        return r;
    for (size_t i = 0; i < drv->n_skipped; i++)
        warn(g, "driver file left out of the CDI spec", drv->skipped[i].path,
             drv->skipped[i].reason);
    find_hook(g);
    _cleanup_free_ char *minors = NULL;
    struct err me = {0};
    if (g->o.mig_minors && *g->o.mig_minors &&
        file_read_all(g->o.mig_minors, MINORS_MAX, &minors, NULL, &me) < 0)
        minors = NULL;
    const char *dev_root = g->dev_root;
    bool present[NVCDI_N_CONTROL];
    for (size_t i = 0; i < NVCDI_N_CONTROL; i++) {
        _cleanup_free_ char *p = nvcdi_host_path(g->o.host_root, dev_root, nvcdi_control_nodes[i]);
        present[i] = access(p, F_OK) == 0;
    }
    struct nvcdi_cdi_input in = {
        .inv = inv,
        .driver = drv,
        .driver_root = g->driver_root,
        .dev_root = dev_root,
        .mig_minors = minors,
        .control_present = present,
        .hook_path = g->hook_path[0] ? g->hook_path : NULL,
        .kind = g->o.kind,
    };
    _cleanup_free_ char *spec = NULL;
    if ((r = nvcdi_cdi_render(&in, &spec, e)) < 0)
        return r;
    /* read back as every CDI consumer will, before anyone sees it */
    _cleanup_(cdi_spec_freep) struct cdi_spec *parsed = NULL;
    if ((r = cdi_spec_parse(g->o.spec_path, spec, strlen(spec), &parsed, e)) < 0)
        return err_prefix(e, "the generated spec does not check");
    *ret = steal_ptr(&spec);
    if (ret_version)
        strlcpy_s(ret_version, inv->driver_version, version_len);
    return 0;
}
