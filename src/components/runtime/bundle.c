/* SPDX-License-Identifier: Apache-2.0 */
/* `gpuop runtime`'s bundle (runtime-internal.h): config.json read, the devices it asks for
 * resolved in the CDI directories, their edits applied, config.json replaced atomically. */
#include <string.h>
#include <sys/stat.h>

#include "runtime-internal.h"

#define OCI_CONFIG_MAX (16u << 20)
#define MAX_SPEC_DIRS  16

/* The policy of the options; the capabilities of a privileged container are the wrapper's own
 * bounding set, which the container runtime that started it grants one. */
static int policy_from(const struct runtime_opts *o, char *keys, struct runtime_policy *ret,
                       struct err *e)
{
    _cleanup_free_ char *status = NULL;
    struct err ignored = {0};
    if (file_read_all("/proc/self/status", 1u << 16, &status, NULL, &ignored) < 0)
        status = NULL;
    struct runtime_policy p = {.default_kind = o->default_kind,
                               .accept_envvar_unprivileged = o->accept_envvar_unprivileged,
                               .accept_volume_mounts = o->accept_volume_mounts,
                               .privileged_caps = runtime_status_bounding_set(status)};
    int r = runtime_policy_annotation_keys(&p, keys, e);
    if (r < 0)
        return err_prefix(e, "--cdi-annotation-keys");
    *ret = p;
    return 0;
}

int runtime_bundle_edit(const struct runtime_cmdline *c, const struct runtime_opts *o,
                        struct err *e)
{
    _cleanup_free_ char *config = xasprintf("%s/config.json", c->bundle ? c->bundle : ".");
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    int r = file_read_all(config, OCI_CONFIG_MAX, &text, &len, e);
    if (r < 0)
        return r;
    json_error_t je;
    _cleanup_(json_decrefp) json_t *oci = json_loadb(text, len, 0, &je);
    if (!oci)
        return err_set(e, -EINVAL, "%s:%d:%d: %s", config, je.line, je.column, je.text);
    _cleanup_free_ char *keys = xstrdup(o->annotation_keys ? o->annotation_keys : "");
    struct runtime_policy pol;
    if ((r = policy_from(o, keys, &pol, e)) < 0)
        return r;
    _cleanup_(runtime_request_clear) struct runtime_request rq = {0};
    if ((r = runtime_request_read(oci, &pol, &rq, e)) < 0)
        return err_prefix(e, "%s", config);
    if (rq.n_ignored_annotations)
        log_debug(RUNTIME_COMP, "cdi.k8s.io/ annotations not trusted", "config=%s count=%zu",
                  config, rq.n_ignored_annotations);
    if (rq.env == RUNTIME_ENV_IGNORED) {
        /* Said in runc's log, where the node's administrator looks, when the container gets no
         * GPU at all (one given GPUs by its allocation only hears it at debug level); the
         * container is created either way. */
        _cleanup_free_ char *msg =
            xasprintf("%s: NVIDIA_VISIBLE_DEVICES of a container that is not privileged is ignored "
                      "(set to void); GPUs come from the device plugin's allocation",
                      config);
        if (rq.n == 0)
            runtime_log_line(c, "warning", msg);
        else
            log_debug(RUNTIME_COMP, "NVIDIA_VISIBLE_DEVICES ignored", "config=%s devices=%zu",
                      config, rq.n);
        runtime_env_void(oci);
    }
    if (rq.n == 0 && rq.env != RUNTIME_ENV_IGNORED) {
        log_debug(RUNTIME_COMP, "no devices requested", "config=%s", config);
        return 0;
    }
    if (rq.n > 0) {
        _cleanup_free_ char *dirs_buf = xstrdup(o->spec_dirs);
        const char *dirs[MAX_SPEC_DIRS];
        size_t n_dirs = 0;
        char *save = NULL;
        for (char *d = strtok_r(dirs_buf, ":", &save); d && n_dirs < MAX_SPEC_DIRS;
             d = strtok_r(NULL, ":", &save))
            dirs[n_dirs++] = d;
        _cleanup_(cdi_registry_freep) struct cdi_registry *reg = NULL;
        if ((r = cdi_registry_load(dirs, n_dirs, &reg, e)) < 0 ||
            (r = runtime_edit_config(oci, reg, (const char *const *)rq.names, rq.n, NULL, NULL,
                                     e)) < 0)
            return err_prefix(e, "%s", config);
    }
    _cleanup_free_ char *out = json_dumps(oci, JSON_COMPACT);
    if (!out)
        return err_set(e, -ENOMEM, "%s: encoding the edited spec", config);
    struct stat st;
    unsigned mode = stat(config, &st) == 0 ? (st.st_mode & 07777) : 0644;
    if ((r = file_write_atomic(config, out, strlen(out), mode, e)) < 0)
        return r;
    log_debug(RUNTIME_COMP, "config edited", "config=%s devices=%zu", config, rq.n);
    return 0;
}
