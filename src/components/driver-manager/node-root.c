/* SPDX-License-Identifier: Apache-2.0 */
/* The driver manager's node root: the kernel modules unloaded with the image's rmmod, a stale
 * driver root unmounted. Each step reads the node again first: a run killed in between finds the
 * node as it is. */
#include <spawn.h>
#include <sys/mount.h>
#include <sys/wait.h>

#include "driver-manager-internal.h"

#define COMPONENT "driver-manager"

extern char **environ;

/* `rmmod NAME` from PATH (the image's kmod; the simulated images' on simulated nodes). */
static int rmmod(const char *module, struct err *e)
{
    char *argv[] = {(char *)"rmmod", (char *)module, NULL};
    pid_t pid;
    int r = posix_spawnp(&pid, "rmmod", NULL, NULL, argv, environ);
    if (r != 0)
        return err_errno(e, -r, "run rmmod %s", module);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return err_errno(e, -errno, "wait for rmmod %s", module);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
        return 0;
    return err_set(e, -EBUSY, "rmmod %s failed (%s %d): the module stays loaded", module,
                   WIFEXITED(st) ? "exit" : "signal",
                   WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
}

int dm_root_unload(struct drivermgr *d, struct err *e)
{
    struct nodestate_driver_facts f;
    int r = nodestate_driver_probe(d->host_root, d->driver_root, d->validations_dir, &f, e);
    if (r < 0)
        return r;
    enum nodestate_module order[NODESTATE_MOD_COUNT];
    size_t n = dm_unload_order(&f, order);
    for (size_t i = 0; i < n; i++) {
        log_info(COMPONENT, "unloading kernel module", "module=%s",
                 nodestate_module_name(order[i]));
        if ((r = rmmod(nodestate_module_name(order[i]), e)) < 0)
            return r;
    }
    return 0;
}

int dm_root_clean(struct drivermgr *d, struct err *e)
{
    struct nodestate_driver_facts f;
    int r = nodestate_driver_probe(d->host_root, d->driver_root, d->validations_dir, &f, e);
    if (r < 0)
        return r;
    if (dm_root_stale(&f)) {
        log_info(COMPONENT, "unmounting the stale driver root", "path=%s", d->driver_root);
        if (umount2(d->driver_root, MNT_DETACH) < 0 && errno != EINVAL)
            return err_errno(e, -errno, "unmount \"%s\"", d->driver_root);
    }
    return nodestate_file_remove(d->validations_dir, NODESTATE_DRIVER_CTR_READY, e);
}
