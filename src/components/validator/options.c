/* SPDX-License-Identifier: Apache-2.0 */
/* `gpuop validator`'s options (each with its environment variable, as NVIDIA's validator reads
 * them) and their defaults, for the shell (validator-main.c). */
#include <stddef.h>

#include "validator-internal.h"

static int check_abs_path(const void *dst, const char *source, struct err *e)
{
    const char *p = *(const char *const *)dst;
    if (!p || p[0] != '/')
        return err_set(e, -EINVAL, "%s: \"%s\" is not an absolute path", source, p ? p : "");
    return 0;
}

#define F(m) offsetof(struct val, m)
const struct svc_option val_options[] = {
    {.flag = "component",
     .env = "COMPONENT",
     .kind = SVC_ENUM,
     .choices = val_component_names,
     .off = F(component),
     .metavar = "NAME",
     .help = "the check: driver, toolkit, cuda, plugin, all-done or toolkit-ready (required)"},
    {.flag = "wait",
     .env = "WITH_WAIT",
     .kind = SVC_BOOL,
     .off = F(wait),
     .help = "retry every --interval until the check passes"},
    {.flag = "once",
     .kind = SVC_BOOL,
     .off = F(once),
     .help = "all-done: exit when checked (a readiness probe), not wait"},
    {.flag = "without-plugin",
     .env = "WITHOUT_PLUGIN",
     .kind = SVC_BOOL,
     .off = F(without_plugin),
     .help = "all-done: no plugin-ready (a node without the device plugin)"},
    {.flag = "host-root",
     .env = "HOST_ROOT_MOUNT",
     .kind = SVC_STRING,
     .off = F(host_root),
     .check = check_abs_path,
     .metavar = "DIR",
     .help = "where the host's file system is mounted (/host)"},
    {.flag = "driver-install-dir",
     .env = "DRIVER_INSTALL_DIR",
     .kind = SVC_STRING,
     .off = F(driver_root),
     .check = check_abs_path,
     .metavar = "DIR",
     .help = "the containerized driver's root (/run/nvidia/driver)"},
    {.flag = "validations-dir",
     .env = "OUTPUT_DIR",
     .kind = SVC_STRING,
     .off = F(validations_dir),
     .check = check_abs_path,
     .metavar = "DIR",
     .help = "the status files' folder (/run/nvidia/validations)"},
    {.kind = SVC_FRAGMENT,
     .fragment = svc_node_name_option,
     .off = F(node_name),
     .help = "this node, for Events and annotations (none: no API\n"
             "server; the plugin check needs it)"},
    {.flag = "namespace",
     .env = "OPERATOR_NAMESPACE",
     .kind = SVC_STRING,
     .off = F(ns),
     .metavar = "NS",
     .help = "the driver and toolkit DaemonSets' namespace\n(default: the client's)"},
    {.kind = SVC_FRAGMENT, .fragment = svc_kubeconfig_option, .off = F(kubeconfig)},
    {.flag = "interval",
     .env = "SLEEP_INTERVAL",
     .kind = SVC_DURATION,
     .min = 100,
     .max = 300000,
     .finite = true,
     .expect = "expected a duration from 100ms to 5m",
     .off = F(interval_ms),
     .metavar = "DUR",
     .help = "time between tries (5s; 100ms to 5m)"},
    {.flag = "timeout",
     .env = "GPU_RESOURCE_DISCOVERY_TIMEOUT",
     .kind = SVC_DURATION,
     .min = 1,
     .finite = true,
     .off = F(timeout_ms),
     .metavar = "DUR",
     .help = "how long the plugin check waits for the node to\nadvertise its GPUs (150s)"},
    {.flag = "driver-version",
     .env = "DRIVER_VERSION",
     .kind = SVC_STRING,
     .off = F(driver_version),
     .metavar = "VERSION",
     .help = "the driver version the driver check expects (default: any)"},
    {.flag = "mig-strategy",
     .env = "MIG_STRATEGY",
     .kind = SVC_STRING,
     .off = F(mig_strategy),
     .metavar = "S",
     .help = "none, single or mixed when the node has no\nnvidia.com/mig.strategy label"},
    {.flag = "sysfs-root",
     .env = "GPUOP_SYSFS_ROOT",
     .kind = SVC_STRING,
     .off = F(sysfs_root),
     .check = check_abs_path,
     .metavar = "DIR",
     .help = "sysfs, where the node's PCI devices are counted (<host-root>/sys)"},
    {.env = "GPUOP_NVML_LIBRARY",
     .kind = SVC_STRING,
     .off = F(nvml_library),
     .help = "libnvidia-ml.so.1 to load (default: the driver root's)"},
    {.env = "GPUOP_CUDA_LIBRARY",
     .kind = SVC_STRING,
     .off = F(cuda_library),
     .help = "libcuda.so.1 to load (default: the driver root's)"},
    {0},
};
#undef F

void val_defaults(void *state)
{
    struct val *v = state;
    v->component = -1;
    v->host_root = "/host";
    v->driver_root = "/run/nvidia/driver";
    v->validations_dir = NODESTATE_VALIDATIONS_DIR;
    v->interval_ms = 5000;
    v->timeout_ms = 150000;
}
