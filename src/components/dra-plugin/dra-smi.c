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

int dra_timeslices_apply(const struct dra_plugin *pl, const struct dra_claim *c,
                         const struct dra_timeslice *ts, size_t n, struct err *e)
{
    if (n == 0)
        return 0;
    _cleanup_free_ char *root = nvcdi_host_path(pl->f->host_root, pl->f->driver_root, "/");
    char smi[PATH_MAX], nvml[PATH_MAX];
    int r = nodestate_root_find(root, nodestate_bin_dirs, "nvidia-smi", true, smi, sizeof(smi));
    if (r < 0)
        return err_set(e, r, "claim %s/%s: time slice: nvidia-smi not found in the driver root %s",
                       c->ref.ns, c->ref.name, root);
    struct err le = {0};
    char lib_dir[PATH_MAX] = "";
    if (nvcdi_driver_find_nvml(pl->f->host_root, pl->f->driver_root, nvml, sizeof(nvml), &le) ==
        0) {
        char *slash = strrchr(nvml, '/');
        if (slash && slash != nvml) {
            *slash = 0;
            strlcpy_s(lib_dir, nvml, sizeof(lib_dir));
        }
    }
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
