/* SPDX-License-Identifier: Apache-2.0 */
/* kubelet-sim as a node-reboot tool (kl-reboot.h): the request, and the host after a reboot. */
#include <dirent.h>
#include <string.h>

#include "kl-node.h"
#include "kl-pod-plan.h"
#include "kl-reboot.h"
#include "kobj.h"
#include "remediation.h"
#include "simnvml.h"

bool kl_reboot_wanted(const json_t *node, char *buf, size_t n)
{
    const char *want = kobj_annotation(node, REM_ANN_REBOOT);
    if (!want || !*want || strlen(want) >= n ||
        streq_ptr(kobj_annotation(node, REM_ANN_REBOOT_DONE), want))
        return false;
    snprintf(buf, n, "%s", want);
    return true;
}

/* The status files the validator and the agents leave in /run/nvidia/validations: /run is a
 * tmpfs, gone with the boot. */
static int clear_validations(const char *root, struct err *e)
{
    _cleanup_free_ char *dir = xasprintf("%s/run/nvidia/validations", root);
    _cleanup_(closedirp) DIR *d = opendir(dir);
    if (!d)
        return 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        _cleanup_free_ char *p = xasprintf("%s/%s", dir, de->d_name);
        int r = kl_tree_remove(p, e);
        if (r < 0)
            return r;
    }
    return 0;
}

int kl_reboot_host(const struct kl_node_spec *spec, struct err *e)
{
    int r;
    if (spec->fleet) {
        struct sim_fleet *f _cleanup_(sim_fleet_freep) = NULL;
        if ((r = sim_fleet_load(spec->fleet, &f, e)) < 0)
            return r;
        _cleanup_free_ char *state = kl_node_nvml_state(spec);
        struct sim_store *st _cleanup_(sim_store_freep) = NULL;
        if ((r = sim_store_open(f, state, 0, &st, e)) < 0 || (r = sim_store_reboot(st, e)) < 0)
            return err_prefix(e, "the simulated GPUs");
    }
    if ((r = clear_validations(spec->root, e)) < 0)
        return r;
    if (spec->host_driver)
        return 0; /* the host loads its driver at boot: the layout writes it again */
    static const char *const modules[] = {"sys/module/nvidia",         "sys/module/nvidia_uvm",
                                          "sys/module/nvidia_modeset", "sys/module/nvidia_peermem",
                                          "sys/module/nvidia_fs",      "sys/module/gdrdrv",
                                          "proc/driver/nvidia"};
    for (size_t i = 0; i < ARRAY_SIZE(modules); i++) {
        _cleanup_free_ char *p = xasprintf("%s/%s", spec->root, modules[i]);
        if ((r = kl_tree_remove(p, e)) < 0)
            return r;
    }
    return 0;
}
