/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rmmod: kmod's module unloader, simulated on a node root (GPUOP_SIM_ROOT): a loaded module is
 * the folder <root>/sys/module/<name>. Like the real one it refuses a module that is not loaded,
 * nvidia while a module that depends on it is loaded ("in use by: ..."), and nvidia while a live
 * process holds one of the node's GPUs or a reference on the module (an NVML client between
 * nvmlInit and nvmlShutdown, as an open /dev/nvidia* holds a real one): "Module nvidia is in
 * use", the driver container's check. No reference can be taken while it unloads.
 * Unloading nvidia takes its version file first (the simulated NVML then sees no driver) and
 * /proc/driver/nvidia with it. The driver root the driver container laid out is not rmmod's:
 * it stays (a stale driver root the next driver container cleans).
 */
#include <ftw.h>
#include <string.h>
#include <sys/stat.h>

#include "images-shell.h"

/* The modules that use nvidia, as the kernel lists them in "in use by". */
static const char *const nvidia_users[] = {"nvidia_drm",     "nvidia_modeset", "nvidia_uvm",
                                           "nvidia_peermem", "nvidia_fs",      "gdrdrv"};

static int rm_entry(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
    (void)sb;
    (void)ftw;
    return (type == FTW_DP ? rmdir(path) : unlink(path)) < 0 && errno != ENOENT ? -1 : 0;
}

static bool loaded(const char *root, const char *module)
{
    _cleanup_free_ char *p = xasprintf("%s/sys/module/%s", root, module);
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static int unload(const char *root, const char *module)
{
    if (!loaded(root, module)) {
        fprintf(stderr, "rmmod: ERROR: Module %s is not currently loaded\n", module);
        return 1;
    }
    bool nvidia = strcmp(module, "nvidia") == 0;
    if (nvidia) {
        char users[128] = "";
        for (size_t i = 0; i < ARRAY_SIZE(nvidia_users); i++)
            if (loaded(root, nvidia_users[i]))
                snprintf(users + strlen(users), sizeof(users) - strlen(users), " %s",
                         nvidia_users[i]);
        if (users[0]) {
            fprintf(stderr, "rmmod: ERROR: Module nvidia is in use by:%s\n", users);
            return 1;
        }
        struct err e = {0};
        _cleanup_close_ int held = -1;
        int unused = simimg_module_take(root, &held, &e);
        if (unused < 0) {
            fprintf(stderr, "rmmod: ERROR: %s\n", err_msg(&e));
            return 1;
        }
        if (unused == 0) {
            fprintf(stderr, "rmmod: ERROR: Module nvidia is in use\n");
            return 1;
        }
        _cleanup_free_ char *v = xasprintf("%s%s", root, SIM_DRIVER_VERSION_FILE);
        if (unlink(v) < 0 && errno != ENOENT) {
            fprintf(stderr, "rmmod: ERROR: could not remove '%s': %s\n", module, strerror(errno));
            return 1;
        }
        _cleanup_free_ char *proc = xasprintf("%s/proc/driver/nvidia", root);
        nftw(proc, rm_entry, 8, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
    }
    _cleanup_free_ char *dir = xasprintf("%s/sys/module/%s", root, module);
    if (nftw(dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS | FTW_MOUNT) < 0) {
        fprintf(stderr, "rmmod: ERROR: could not remove '%s': %s\n", module, strerror(errno));
        return 1;
    }
    return 0;
}

int simimg_rmmod_main(int argc, char **argv)
{
    const char *root = env_get("GPUOP_SIM_ROOT");
    if (!root || root[0] != '/') {
        fprintf(stderr, "rmmod: GPUOP_SIM_ROOT must name the node root (an absolute path)\n");
        return 1;
    }
    int first = 1;
    while (first < argc && argv[first][0] == '-')
        first++; /* -f, -v, -s: nothing to do differently here */
    if (first >= argc) {
        fprintf(stderr, "Usage: rmmod [options] modulename ...\n");
        return 1;
    }
    int rc = 0;
    for (int i = first; i < argc && rc == 0; i++)
        rc = unload(root, argv[i]);
    return rc;
}
