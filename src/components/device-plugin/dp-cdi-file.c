/* SPDX-License-Identifier: Apache-2.0 */
/* The CDI spec of the names the device plugin hands out under a cdi-* strategy (dp-shell.h):
 * rendered by the core (dp-cdi.c), written when it changes, removed when not wanted. */
#include <string.h>
#include <unistd.h>

#include "dp-shell.h"

void dp_cdi_spec_write(struct plugin *pl)
{
    if (!(pl->plan->opts.list_strategies & (DPCONFIG_LIST_CDI_ANNOTATIONS | DPCONFIG_LIST_CDI_CRI)))
        return;
    const char *root = pl->flags.cdi_root ? pl->flags.cdi_root : "/var/run/cdi";
    _cleanup_free_ char *path = xasprintf("%s/k8s.device-plugin.nvidia.com-gpu.json", root);
    if (strcmp(pl->plan->opts.cdi_kind, DP_CDI_VENDOR_CLASS) != 0) {
        /* another spec (the toolkit's) defines the names handed out: ours would be stale */
        if (unlink(path) == 0)
            log_info(DP_COMP, "CDI spec removed: the names are another spec's", "path=%s kind=%s",
                     path, pl->plan->opts.cdi_kind);
        return;
    }
    _cleanup_free_ char *text = NULL, *old = NULL;
    struct err e = {0};
    if (dp_cdi_spec_render(pl->plan, dp_host_path_exists, NULL, &text, &e) < 0) {
        log_warn(DP_COMP, "CDI spec not written", "path=%s error=\"%s\"", path, err_msg(&e));
        return;
    }
    if (!text) {
        if (unlink(path) == 0)
            log_info(DP_COMP, "CDI spec removed: no devices", "path=%s", path);
        return;
    }
    if (file_read_all(path, 4u << 20, &old, NULL, &e) == 0 && strcmp(old, text) == 0)
        return;
    err_clear(&e);
    if (mkdir_p(root, 0755) < 0 || file_write_atomic(path, text, strlen(text), 0644, &e) < 0) {
        log_warn(DP_COMP, "CDI spec not written", "path=%s error=\"%s\"", path,
                 e.code ? err_msg(&e) : "cannot create the directory");
        return;
    }
    log_info(DP_COMP, "CDI spec written", "path=%s", path);
}
