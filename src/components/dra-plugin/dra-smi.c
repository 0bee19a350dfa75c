/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The plugin's shell (dra-plugin-internal.h): the GPUs' compute time slice set with the
 * driver's own nvidia-smi (NVML has no public call for it), found in the driver root's binary
 * folders and run with the driver's library folder first in its library path.
 */
#include <limits.h>
#include <string.h>
#include <unistd.h>

#include "dra-plugin-internal.h"
#include "nodestate.h"
#include "nvcdi.h"

int dra_driver_tool(const struct dra_flags *f, const char *name, char *path, size_t n,
                    char *lib_dir, size_t ln, struct err *e)
{
    _cleanup_free_ char *root = nvcdi_host_path(f->host_root, f->driver_root, "/");
    int r = nodestate_root_find(root, nodestate_bin_dirs, name, true, path, n);
    if (r < 0)
        return err_set(e, r, "%s not found in the driver root %s", name, root);
    struct err le = {0};
    char nvml[PATH_MAX];
    lib_dir[0] = 0;
    if (nvcdi_driver_find_nvml(f->host_root, f->driver_root, nvml, sizeof(nvml), &le) == 0) {
        char *slash = strrchr(nvml, '/');
        if (slash && slash != nvml) {
            *slash = 0;
            strlcpy_s(lib_dir, nvml, ln);
        }
    }
    return 0;
}

int dra_timeslices_apply(const struct dra_plugin *pl, const struct dra_claim *c,
                         const struct dra_timeslice *ts, size_t n, struct err *e)
{
    if (n == 0)
        return 0;
    char smi[PATH_MAX], lib_dir[PATH_MAX];
    int r = dra_driver_tool(pl->f, "nvidia-smi", smi, sizeof(smi), lib_dir, sizeof(lib_dir), e);
    if (r < 0)
        return err_prefix(e, "claim %s/%s: time slice", c->ref.ns, c->ref.name);
    _cleanup_free_ char *added = NULL;
    _cleanup_free_ const char **env = proc_env_lib_first(lib_dir, &added);
    for (size_t i = 0; i < n; i++) {
        char value[4];
        snprintf(value, sizeof(value), "%u", dra_interval_smi(ts[i].interval));
        const char *argv[] = {smi, "compute-policy", "-i", ts[i].uuid, "--set-timeslice", value,
                              NULL};
        if ((r = proc_run(argv, env, e)) < 0)
            return err_prefix(e, "claim %s/%s: GPU %s: %s compute-policy --set-timeslice %s",
                              c->ref.ns, c->ref.name, ts[i].uuid, smi, value);
        log_info(DRA_COMP, "time slice set", "claim=%s/%s gpu=%s interval=%s", c->ref.ns,
                 c->ref.name, ts[i].uuid, dra_interval_name(ts[i].interval));
    }
    return 0;
}
