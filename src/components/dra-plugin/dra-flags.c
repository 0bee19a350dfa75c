/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The plugin's flags (dra-plugin.h): one declarative table, parsed by the component runtime, and
 * the checks that need more than one flag. Pure.
 */
#include <stddef.h>
#include <string.h>

#include "dra-plugin.h"

const struct svc_option dra_common_options[] = {
    {.kind = SVC_FRAGMENT,
     .fragment = svc_node_name_option,
     .off = offsetof(struct dra_flags, node_name)},
    {.flag = "library",
     .env = "GPUOP_NVML_LIBRARY",
     .kind = SVC_STRING,
     .off = offsetof(struct dra_flags, library),
     .metavar = "PATH",
     .help = "the NVML library to load (default: libnvidia-ml.so.1)"},
    {.flag = "partitionable-devices",
     .env = "DRA_PARTITIONABLE_DEVICES",
     .kind = SVC_BOOL,
     .off = offsetof(struct dra_flags, partitionable),
     .help = "publish every placement of every MIG profile a MIG-enabled GPU can still hold\n"
             "(shared counters) and make the MIG slice when a claim is prepared (false)"},
    {0},
};

const struct svc_option dra_options[] = {
    {.kind = SVC_FRAGMENT,
     .fragment = svc_kubeconfig_option,
     .off = offsetof(struct dra_flags, kubeconfig)},
    {.flag = "host-root",
     .env = "DRA_HOST_ROOT",
     .kind = SVC_STRING,
     .off = offsetof(struct dra_flags, host_root),
     .metavar = "DIR",
     .help = "where this process sees the host's / (\"/\"); the other paths are the host's"},
    {.flag = "registry-dir",
     .env = "DRA_REGISTRY_DIR",
     .kind = SVC_STRING,
     .off = offsetof(struct dra_flags, registry_dir),
     .metavar = "DIR",
     .help = "the kubelet's plugin registration folder (/var/lib/kubelet/plugins_registry)"},
    {.flag = "plugin-dir",
     .env = "DRA_PLUGIN_DIR",
     .kind = SVC_STRING,
     .off = offsetof(struct dra_flags, plugin_dir),
     .metavar = "DIR",
     .help = "the plugin's socket and checkpoint folder (/var/lib/kubelet/plugins/gpu.nvidia.com)"},
    {.flag = "cdi-dir",
     .env = "DRA_CDI_DIR",
     .kind = SVC_STRING,
     .off = offsetof(struct dra_flags, cdi_dir),
     .metavar = "DIR",
     .help = "where the CDI specs are written (/var/run/cdi)"},
    {.flag = "driver-root",
     .env = "NVIDIA_DRIVER_ROOT",
     .kind = SVC_STRING,
     .off = offsetof(struct dra_flags, driver_root),
     .metavar = "DIR",
     .help = "the driver's root on the host, for the CDI spec (default: as driver-ready says)"},
    {.flag = "resync",
     .env = "DRA_RESYNC",
     .kind = SVC_DURATION,
     .min = 100,
     .finite = true,
     .off = offsetof(struct dra_flags, resync_ms),
     .metavar = "DUR",
     .help = "how often the GPUs are read again and the slices checked (10s)"},
    {.flag = "health-recovery-period",
     .env = "DRA_HEALTH_RECOVERY_PERIOD",
     .kind = SVC_DURATION,
     .finite = true,
     .off = offsetof(struct dra_flags, recovery_ms),
     .metavar = "DUR",
     .help = "a GPU withdrawn for an XID or ECC error is published again after DUR without\n"
             "one (0: not until the plugin restarts; a lost GPU never)"},
    {0},
};

void dra_flags_defaults(void *state)
{
    struct dra_flags *f = state;
    f->host_root = "/";
    f->registry_dir = "/var/lib/kubelet/plugins_registry";
    f->plugin_dir = "/var/lib/kubelet/plugins/" DRA_DRIVER_NAME;
    f->cdi_dir = "/var/run/cdi";
    f->resync_ms = 10000;
}

int dra_flags_check(const struct dra_flags *f, bool serving, struct err *e)
{
    if (!f->node_name || !f->node_name[0])
        return err_set(e, -EINVAL, "--node-name (NODE_NAME) is required");
    if (strlen(f->node_name) >= DRA_OBJ_NAME_MAX)
        return err_set(e, -EINVAL, "--node-name: \"%.32s...\" is longer than %d characters",
                       f->node_name, DRA_OBJ_NAME_MAX - 1);
    if (!serving)
        return 0;
    const char *paths[][2] = {{"--host-root", f->host_root},
                              {"--registry-dir", f->registry_dir},
                              {"--plugin-dir", f->plugin_dir},
                              {"--cdi-dir", f->cdi_dir}};
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
        if (!paths[i][1] || paths[i][1][0] != '/')
            return err_set(e, -EINVAL, "%s: \"%s\" is not an absolute path", paths[i][0],
                           paths[i][1] ? paths[i][1] : "");
    return 0;
}
