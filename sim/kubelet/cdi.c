/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kl-cdi: CDI names resolved for a simulated node (kl-cdi.h). Parsing, checking and the
 * directories' priority are src/edge/cdi's; this part maps the resolved edits onto kubelet-sim's
 * container: environment, mounts and device nodes. Hooks are never run (kubelet-sim has no OCI
 * runtime); netDevices, intelRdt and additionalGids are not applied.
 *
 * Host paths: a spec on a simulated node names paths of that node's host, so mount sources and
 * device nodes are prefixed with the node root (a mount of /usr/lib/x/libcuda.so.1 binds
 * <root>/usr/lib/x/libcuda.so.1). deviceNodes without hostPath use path, as CDI does; the
 * container gets the node at path, with the spec's type, numbers, mode and owner, the rest read
 * from the host's node when the container is made (kl_device_resolve).
 */
#include <string.h>

#include "cdi.h"
#include "kl-cdi.h"
#include "kl-devices-internal.h"

#define COMP "kl-cdi"

static void apply_edits(const char *root, const struct cdi_edits *ed, struct kl_alloc *a)
{
    for (size_t i = 0; i < ed->n_env; i++) {
        const char *s = ed->env[i];
        const char *eq = strchr(s, '=');
        _cleanup_free_ char *name = xstrndup(s, (size_t)(eq - s));
        kl_alloc_setenv(a, name, eq + 1);
    }
    for (size_t i = 0; i < ed->n_device_nodes; i++) {
        const struct cdi_device_node *d = &ed->device_nodes[i];
        struct kl_alloc_device dev = {
            .path = xstrdup(d->path),
            .host_path = kl_host_path(root, d->host_path ? d->host_path : d->path),
            .type =
                d->type && (d->type[0] == 'c' || d->type[0] == 'b') && !d->type[1] ? d->type[0] : 0,
            .has_numbers = d->has_major && d->has_minor && d->major >= 0 &&
                           d->major <= UINT32_MAX && d->minor >= 0 && d->minor <= UINT32_MAX,
            .major = (unsigned)d->major,
            .minor = (unsigned)d->minor,
            .has_mode = d->has_file_mode,
            .file_mode = d->file_mode,
            .has_uid = d->has_uid,
            .uid = d->uid,
            .has_gid = d->has_gid,
            .gid = d->gid,
        };
        kl_alloc_add_device(a, &dev);
    }
    for (size_t i = 0; i < ed->n_mounts; i++) {
        const struct cdi_mount *m = &ed->mounts[i];
        bool ro = false;
        for (size_t k = 0; k < m->n_options; k++)
            ro |= strcmp(m->options[k], "ro") == 0;
        kl_alloc_add_mount(a, kl_host_path(root, m->host_path), xstrdup(m->container_path), ro);
    }
}

int kl_cdi_resolve(const char *root, const char *const *names, struct kl_alloc *a, struct err *e)
{
    if (!names || !names[0])
        return 0;
    _cleanup_free_ char *etc = kl_host_path(root, "/etc/cdi");
    _cleanup_free_ char *run = kl_host_path(root, "/var/run/cdi");
    const char *dirs[] = {etc, run};
    _cleanup_(cdi_registry_freep) struct cdi_registry *reg = NULL;
    int r = cdi_registry_load(dirs, ARRAY_SIZE(dirs), &reg, e);
    if (r < 0)
        return r;
    if (*cdi_registry_errors(reg))
        log_warn(COMP, "CDI specs skipped", "error=\"%s\"", cdi_registry_errors(reg));
    size_t n = 0;
    while (names[n])
        n++;
    _cleanup_free_ const struct cdi_edits **edits = NULL;
    size_t n_edits = 0;
    if ((r = cdi_registry_resolve(reg, names, n, &edits, &n_edits, e)) < 0)
        return r;
    for (size_t i = 0; i < n_edits; i++)
        apply_edits(root, edits[i], a);
    return 0;
}
