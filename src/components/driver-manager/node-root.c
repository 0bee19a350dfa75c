/* SPDX-License-Identifier: Apache-2.0 */
/* The driver manager's node root: the kernel modules unloaded with the image's rmmod, a stale
 * driver root unmounted. Each step reads the node again first: a run killed in between finds the
 * node as it is. */
#include <signal.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

#include "driver-manager-internal.h"

#define COMPONENT "driver-manager"

/* `rmmod NAME` from PATH (the image's kmod; the simulated images' on simulated nodes), with this
 * process's environment. */
static int rmmod(const char *module, struct err *e)
{
    _cleanup_free_ char *path = NULL;
    int r = proc_find("rmmod", &path, e);
    if (r < 0)
        return err_prefix(e, "run rmmod %s", module);
    const char *argv[] = {path, module, NULL};
    if ((r = proc_run(argv, (const char *const *)environ, e)) == -EIO) {
        _cleanup_free_ char *how = xstrdup(err_msg(e)); /* "... exited with status 1" */
        return err_set(e, -EBUSY, "rmmod %s failed (%s): the module stays loaded", module, how);
    }
    return r < 0 ? err_prefix(e, "run rmmod %s", module) : 0;
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

void dm_step_done(const struct drivermgr *d, const char *const *names, const char *step)
{
    if (!step)
        return;
    log_debug(COMPONENT, "step done", "step=%s", step);
    if (d->exit_after >= 0 && strcmp(names[d->exit_after], step) == 0) {
        log_info(COMPONENT, "killed after step (test hook)", "step=%s", step);
        kill(getpid(), SIGKILL);
    }
}
