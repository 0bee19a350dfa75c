/* SPDX-License-Identifier: Apache-2.0 */
/* gpuop installed into the toolkit directory (toolkit-internal.h): the binary the spec's hooks run
 * and the handler script the runtime runs, each written only when it differs. */
#include <string.h>

#include "toolkit-internal.h"

#define SELF_MAX (512u << 20)

int tk_install(struct tk *t, struct err *e)
{
    _cleanup_free_ char *self = NULL;
    size_t len;
    int r = file_read_all("/proc/self/exe", SELF_MAX, &self, &len, e);
    if (r < 0)
        return err_prefix(e, "install gpuop");
    _cleanup_free_ char *bin_rel = xasprintf("%s/%s", t->install_dir, TOOLKIT_BINARY_NAME);
    _cleanup_free_ char *bin = tk_on_host(t, bin_rel);
    _cleanup_free_ char *old = NULL;
    size_t old_len = 0;
    struct err ie = {0};
    if (file_read_all(bin, SELF_MAX, &old, &old_len, &ie) < 0 || old_len != len ||
        memcmp(old, self, len) != 0) {
        if ((r = tk_write_file(bin, "toolkit install", self, len, 0755, e)) < 0)
            return r;
        log_info(TK_COMP, "installed gpuop", "path=%s", bin_rel);
    }
    _cleanup_free_ char *script =
        toolkit_wrapper_script(bin_rel, t->accept_envvar_unprivileged, t->accept_volume_mounts);
    _cleanup_free_ char *wrap_rel = xasprintf("%s/%s", t->install_dir, TOOLKIT_WRAPPER_NAME);
    _cleanup_free_ char *wrap = tk_on_host(t, wrap_rel);
    free(old);
    old = NULL;
    if (file_read_all(wrap, 65536, &old, &old_len, &ie) < 0 || strcmp(old, script) != 0)
        return tk_write_file(wrap, "toolkit install", script, strlen(script), 0755, e);
    return 0;
}
