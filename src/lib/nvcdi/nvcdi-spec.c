/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The CDI spec of a node's GPUs, rendered as YAML by hand so that the bytes depend on the input
 * only (key order, quoting and list order fixed here). Pure: no I/O, no clock.
 */
#include <stdio.h>
#include <string.h>

#include "nvcdi.h"

const char *const nvcdi_control_nodes[] = {"/dev/nvidiactl", "/dev/nvidia-uvm",
                                           "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset", NULL};

#define MOUNT_OPTIONS "[ro, nosuid, nodev, rbind, rprivate]"
#define IPC_OPTIONS   "[ro, nosuid, nodev, rbind, rprivate, noexec]"
#define NAME_MAX_LEN  128

/* ---- YAML scalars ------------------------------------------------------------------------- */

static bool plain_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           strchr("_./:@+=,-", c);
}

/* A scalar YAML reads back as this same string without quotes: no indicator first, nothing a
 * YAML 1.1 reader takes for a number, a boolean or null. */
static bool plain_ok(const char *s)
{
    static const char *const words[] = {"y",     "n",  "yes", "no",  "true",
                                        "false", "on", "off", "null"};
    if (!*s || !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z') || s[0] == '/' ||
                 s[0] == '_'))
        return false;
    for (const char *p = s; *p; p++)
        if (!plain_char(*p))
            return false;
    if (s[strlen(s) - 1] == ':')
        return false;
    for (size_t i = 0; i < ARRAY_SIZE(words); i++)
        if (strcasecmp(s, words[i]) == 0)
            return false;
    return true;
}

static void scalar(struct sbuf *b, const char *s)
{
    if (plain_ok(s)) {
        sbuf_adds(b, s);
        return;
    }
    sbuf_adds(b, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            sbuf_addf(b, "\\%c", *p);
        else if (*p < 0x20 || *p == 0x7f)
            sbuf_addf(b, "\\x%02x", *p);
        else
            sbuf_add(b, p, 1);
    }
    sbuf_adds(b, "\"");
}

/* "<indent><key>: <scalar>\n" */
static void kv(struct sbuf *b, const char *indent, const char *key, const char *value)
{
    sbuf_addf(b, "%s%s: ", indent, key);
    scalar(b, value);
    sbuf_adds(b, "\n");
}

/* ---- cdiVersion --------------------------------------------------------------------------- */

const char *nvcdi_cdi_min_version(const struct nvcdi_cdi_features *f)
{
    if (f->extra_gids)
        return "0.7.0";
    if (f->annotations)
        return "0.6.0";
    if (f->digit_names || f->host_paths)
        return "0.5.0";
    if (f->mount_types)
        return "0.4.0";
    return "0.3.0";
}

/* ---- names -------------------------------------------------------------------------------- */

/* Calls fn for every device name in the spec's order; gpu/mig say what it names (mig NULL: the
 * whole GPU; gpu NULL: "all"). Stops at the first error. */
typedef int (*name_fn)(const char *name, const struct gpu_device *gpu,
                       const struct gpu_mig_device *mig, void *ud);

static int for_each_name(const struct gpu_inventory *inv, name_fn fn, void *ud)
{
    int r;
    char name[NAME_MAX_LEN];
    for (size_t i = 0; i < inv->n_gpus; i++) {
        const struct gpu_device *g = &inv->gpus[i];
        snprintf(name, sizeof(name), "%u", g->index);
        if ((r = fn(name, g, NULL, ud)) < 0)
            return r;
        if (g->uuid[0] && (r = fn(g->uuid, g, NULL, ud)) < 0)
            return r;
        for (size_t k = 0; g->mig_enabled && k < g->n_mig; k++) {
            const struct gpu_mig_device *m = &g->mig[k];
            snprintf(name, sizeof(name), "%u:%u", g->index, m->index);
            if ((r = fn(name, g, m, ud)) < 0)
                return r;
            if (m->uuid[0] && (r = fn(m->uuid, g, m, ud)) < 0)
                return r;
        }
    }
    return fn("all", NULL, NULL, ud);
}

static int name_line(const char *name, const struct gpu_device *gpu,
                     const struct gpu_mig_device *mig, void *ud)
{
    (void)gpu;
    (void)mig;
    sbuf_addf(ud, "%s=%s\n", NVCDI_CDI_KIND, name);
    return 0;
}

int nvcdi_cdi_names(const struct gpu_inventory *inv, struct sbuf *out)
{
    if (inv->n_gpus == 0)
        return 0;
    (void)for_each_name(inv, name_line, out);
    return sbuf_check(out);
}

/* ---- the spec ----------------------------------------------------------------------------- */

struct render {
    struct sbuf *b;
    const struct nvcdi_cdi_input *in;
    const char *dev_root;
};

/* One device node; hostPath when the device root is not "/"; type and numbers when known
 * (major < 0: the runtime reads them from the host's node). */
static void dev_node(struct render *rd, const char *indent, const char *path, int major, int minor)
{
    struct sbuf *b = rd->b;
    sbuf_addf(b, "%s- path: ", indent);
    scalar(b, path);
    sbuf_adds(b, "\n");
    char sub[32];
    snprintf(sub, sizeof(sub), "%s  ", indent);
    if (strcmp(rd->dev_root, "/") != 0) {
        size_t rl = strlen(rd->dev_root);
        while (rl > 0 && rd->dev_root[rl - 1] == '/')
            rl--;
        _cleanup_free_ char *host = xasprintf("%.*s%s", (int)rl, rd->dev_root, path);
        kv(b, sub, "hostPath", host);
    }
    if (major >= 0) {
        sbuf_addf(b, "%stype: c\n", sub);
        sbuf_addf(b, "%smajor: %d\n", sub, major);
        sbuf_addf(b, "%sminor: %d\n", sub, minor);
    }
}

static void gpu_nodes(struct render *rd, const char *indent, const struct gpu_device *g)
{
    char path[64];
    snprintf(path, sizeof(path), "/dev/nvidia%u", g->minor);
    dev_node(rd, indent, path, NVCDI_GPU_MAJOR, (int)g->minor);
}

/* A MIG device's capability nodes: its GPU instance's and its compute instance's. The major is
 * the driver's nvidia-caps one, assigned at load: left for the runtime to read from the node. */
static void mig_nodes(struct render *rd, const char *indent, const struct gpu_device *g,
                      const struct gpu_mig_device *m)
{
    char path[64];
    snprintf(path, sizeof(path), "/dev/nvidia-caps/nvidia-cap%u",
             gpu_mig_cap_minor(rd->in->mig_minors, g->minor, m->gi_id, -1));
    dev_node(rd, indent, path, -1, 0);
    snprintf(path, sizeof(path), "/dev/nvidia-caps/nvidia-cap%u",
             gpu_mig_cap_minor(rd->in->mig_minors, g->minor, m->gi_id, (int)m->ci_id));
    dev_node(rd, indent, path, -1, 0);
}

static int device_entry(const char *name, const struct gpu_device *gpu,
                        const struct gpu_mig_device *mig, void *ud)
{
    struct render *rd = ud;
    struct sbuf *b = rd->b;
    const char *ind = "    ";
    sbuf_adds(b, "- name: ");
    scalar(b, name);
    sbuf_adds(b, "\n  containerEdits:\n    deviceNodes:\n");
    if (gpu) {
        gpu_nodes(rd, ind, gpu);
        if (mig)
            mig_nodes(rd, ind, gpu, mig);
        return 0;
    }
    /* all: every GPU's node, then every MIG device's capability nodes */
    const struct gpu_inventory *inv = rd->in->inv;
    for (size_t i = 0; i < inv->n_gpus; i++)
        gpu_nodes(rd, ind, &inv->gpus[i]);
    for (size_t i = 0; i < inv->n_gpus; i++)
        for (size_t k = 0; inv->gpus[i].mig_enabled && k < inv->gpus[i].n_mig; k++)
            mig_nodes(rd, ind, &inv->gpus[i], &inv->gpus[i].mig[k]);
    return 0;
}

/* A driver file: hostPath is the driver root plus where the file is once its links are followed
 * inside the root, so the runtime, which follows links as the host sees them, reads the file the
 * lookup checked and nothing outside the driver root. */
static void mount(struct render *rd, const struct nvcdi_file *f, const char *options)
{
    struct sbuf *b = rd->b;
    const char *root = rd->in->driver_root;
    size_t rl = strlen(root);
    while (rl > 0 && root[rl - 1] == '/')
        rl--;
    _cleanup_free_ char *host =
        xasprintf("%.*s%s", (int)rl, root, f->resolved ? f->resolved : f->path);
    sbuf_adds(b, "  - hostPath: ");
    scalar(b, host);
    sbuf_adds(b, "\n");
    kv(b, "    ", "containerPath", f->path);
    sbuf_addf(b, "    options: %s\n", options);
}

/* One createContainer hook running `gpuop cdi-hook <args>`. */
static void hook(struct render *rd, const char *const *args, size_t n)
{
    struct sbuf *b = rd->b;
    sbuf_adds(b, "  - hookName: createContainer\n");
    kv(b, "    ", "path", rd->in->hook_path);
    sbuf_adds(b, "    args:\n    - gpuop\n    - cdi-hook\n");
    for (size_t i = 0; i < n; i++) {
        sbuf_adds(b, "    - ");
        scalar(b, args[i]);
        sbuf_adds(b, "\n");
    }
}

/* The folders of the driver's libraries, in the order of the mounts, each once. */
static size_t library_folders(const struct nvcdi_driver *d, char **out, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < d->n_files; i++) {
        if (d->files[i].kind != NVCDI_FILE_LIBRARY)
            continue;
        const char *p = d->files[i].path;
        const char *slash = strrchr(p, '/');
        size_t len = slash && slash != p ? (size_t)(slash - p) : 1;
        bool seen = false;
        for (size_t k = 0; k < n && !seen; k++)
            seen = strlen(out[k]) == len && strncmp(out[k], p, len) == 0;
        if (!seen && n < max)
            out[n++] = xstrndup(p, len);
    }
    return n;
}

/* What NVIDIA's hooks give a container, by gpuop's own: the development link libcuda.so next to
 * libcuda.so.1, then the loader's cache built with the driver's library folders (and the image's
 * CUDA forward-compatible libraries first when they are newer than the driver). */
static void hooks(struct render *rd)
{
    const struct nvcdi_driver *d = rd->in->driver;
    sbuf_adds(rd->b, "  hooks:\n");
    if (d->libcuda_dir) {
        _cleanup_free_ char *link = xasprintf(
            "libcuda.so.1::%s/libcuda.so", strcmp(d->libcuda_dir, "/") == 0 ? "" : d->libcuda_dir);
        const char *args[] = {"create-symlinks", "--link", link};
        hook(rd, args, ARRAY_SIZE(args));
    }
    char *folders[NVCDI_HOOK_FOLDERS];
    size_t nf = library_folders(d, folders, ARRAY_SIZE(folders));
    const char *args[3 + 2 * NVCDI_HOOK_FOLDERS];
    size_t n = 0;
    args[n++] = "update-ldcache";
    args[n++] = "--host-driver-version";
    args[n++] = d->version;
    for (size_t i = 0; i < nf; i++) {
        args[n++] = "--folder";
        args[n++] = folders[i];
    }
    hook(rd, args, n);
    for (size_t i = 0; i < nf; i++)
        free(folders[i]);
}

int nvcdi_cdi_render(const struct nvcdi_cdi_input *in, char **ret, struct err *e)
{
    if (!in->inv || in->inv->n_gpus == 0)
        return err_set(e, -EINVAL, "CDI spec: no GPUs (a spec needs at least one device)");
    if (!in->driver || !in->driver_root || in->driver_root[0] != '/')
        return err_set(e, -EINVAL, "CDI spec: the driver root must be an absolute path");
    struct render rd = {.in = in, .dev_root = in->dev_root ? in->dev_root : in->driver_root};
    if (rd.dev_root[0] != '/')
        return err_set(e, -EINVAL, "CDI spec: the device root must be an absolute path");
    if (in->hook_path && in->hook_path[0] != '/')
        return err_set(e, -EINVAL, "CDI spec: the hook \"%s\" is not an absolute path",
                       in->hook_path);
    _cleanup_sbuf_ struct sbuf b;
    sbuf_init(&b, NVCDI_SPEC_MAX);
    rd.b = &b;

    struct nvcdi_cdi_features f = {
        .digit_names = true, /* index names: "0", "0:1" */
        .host_paths = strcmp(rd.dev_root, "/") != 0,
    };
    sbuf_adds(&b, "---\n");
    kv(&b, "", "cdiVersion", nvcdi_cdi_min_version(&f));
    kv(&b, "", "kind", in->kind ? in->kind : NVCDI_CDI_KIND);
    sbuf_adds(&b, "devices:\n");
    (void)for_each_name(in->inv, device_entry, &rd);

    sbuf_adds(&b, "containerEdits:\n  env:\n  - NVIDIA_VISIBLE_DEVICES=void\n");
    bool any_control = false;
    for (size_t i = 0; nvcdi_control_nodes[i]; i++)
        any_control |= !in->control_present || in->control_present[i];
    if (any_control) {
        sbuf_adds(&b, "  deviceNodes:\n");
        for (size_t i = 0; nvcdi_control_nodes[i]; i++)
            if (!in->control_present || in->control_present[i])
                dev_node(&rd, "  ", nvcdi_control_nodes[i], -1, 0);
    }
    const struct nvcdi_driver *d = in->driver;
    if (d->n_files)
        sbuf_adds(&b, "  mounts:\n");
    for (size_t i = 0; i < d->n_files; i++)
        mount(&rd, &d->files[i], d->files[i].kind == NVCDI_FILE_IPC ? IPC_OPTIONS : MOUNT_OPTIONS);
    if (in->hook_path)
        hooks(&rd);
    int r = sbuf_check_err(&b, e, "CDI spec");
    if (r < 0)
        return r;
    *ret = sbuf_steal(&b);
    return 0;
}
