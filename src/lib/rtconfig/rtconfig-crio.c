/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CRI-O's config, the pure part: a drop-in only (crio.conf.d is read in name order and merged
 * key by key), so the user's files are never edited. The handler's entry takes the keys of the
 * runc or crun entry in force (the last file that names it wins, as in CRI-O), then
 * runtime_path and runtime_type = "oci".
 */
#include <errno.h>
#include <string.h>

#include "rtconfig-internal.h"
#include "tomlx.h"

int rtconfig_crio_edit(const struct rtconfig_text *configs, size_t n,
                       const struct rtconfig_options *o, struct sbuf *ret_dropin, size_t *ret_bad,
                       struct err *e)
{
    int r0 = tomlx_open(e);
    if (r0 < 0)
        return r0;
    _cleanup_(tomlx_freep) struct tomlx *d = tomlx_new();
    if (!d)
        return err_set(e, -ENOMEM, "out of memory");
    /* The last file naming runc, else the last naming crun. */
    _cleanup_(tomlx_freep) struct tomlx *with_runc = NULL;
    _cleanup_(tomlx_freep) struct tomlx *with_crun = NULL;

    for (size_t i = 0; i < n; i++) {
        _cleanup_(tomlx_freep) struct tomlx *t = NULL;
        int r = tomlx_parse(configs[i].data, configs[i].data ? configs[i].len : 0, &t, NULL, e);
        if (r < 0) {
            if (ret_bad)
                *ret_bad = i;
            return r;
        }
        enum tomlx_type rt = tomlx_type_at(t, TP("crio", "runtime", "runtimes"));
        if (rt != TOMLX_NONE && rt != TOMLX_TABLE) {
            if (ret_bad)
                *ret_bad = i;
            return err_set(e, -EINVAL, "crio.runtime.runtimes: not a table");
        }
        if (tomlx_type_at(t, TP("crio", "runtime", "runtimes", "runc")) == TOMLX_TABLE) {
            tomlx_free(with_runc);
            with_runc = steal_ptr(&t);
        } else if (tomlx_type_at(t, TP("crio", "runtime", "runtimes", "crun")) == TOMLX_TABLE) {
            tomlx_free(with_crun);
            with_crun = steal_ptr(&t);
        }
    }
    const struct tomlx *src = with_runc ? with_runc : with_crun;
    const char *base = with_runc ? "runc" : with_crun ? "crun" : NULL;

    int r = 0;
    if (src)
        r = tomlx_copy(src, TP("crio", "runtime", "runtimes", base), d,
                       TP("crio", "runtime", "runtimes", o->runtime_name));
    if (r >= 0)
        r = tomlx_set_str(d, TP("crio", "runtime", "runtimes", o->runtime_name, "runtime_path"),
                          o->runtime_path);
    if (r >= 0)
        r = tomlx_set_str(d, TP("crio", "runtime", "runtimes", o->runtime_name, "runtime_type"),
                          "oci");
    if (r >= 0 && o->set_as_default)
        r = tomlx_set_str(d, TP("crio", "runtime", "default_runtime"), o->runtime_name);
    if (r < 0)
        return err_errno(e, r, "crio.runtime.runtimes.%s", o->runtime_name);

    sbuf_adds(ret_dropin, "# Written by gpuop: the ");
    sbuf_adds(ret_dropin, o->runtime_name);
    sbuf_addf(ret_dropin,
              " runtime handler%s%s. gpuop rewrites this file and removes it on\n"
              "# cleanup. CRI-O reads CDI specs from /etc/cdi and /var/run/cdi.\n\n",
              base ? ", keys from " : "", base ? base : "");
    r = tomlx_emit(d, ret_dropin);
    if (r < 0)
        return sbuf_check_err(ret_dropin, e, "CRI-O drop-in");
    return sbuf_check_err(ret_dropin, e, "CRI-O drop-in");
}
