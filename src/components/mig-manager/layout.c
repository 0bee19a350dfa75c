/* SPDX-License-Identifier: Apache-2.0 */
/* The MIG manager's GPUs: the mig-parted config file read and planned against the GPUs
 * (migparted), the plan applied, the node's CDI spec written again (nvcdi). */
#include <string.h>
#include <unistd.h>

#include "mig-manager-internal.h"
#include "nvcdi.h"

#define COMPONENT "mig-manager"

int mm_layout_open(struct migmgr *m, struct err *e)
{
    int r = gpu_lib_open(NULL, &m->lib, e);
    if (r < 0)
        return r;
    struct nvcdi_gen_options go = {
        .host_root = m->host_root, .lib = m->lib, .spec_path = m->cdi_spec};
    m->cdi = nvcdi_gen_new(&go);
    return 0;
}

void mm_layout_close(struct migmgr *m)
{
    nvcdi_gen_free(m->cdi);
    gpu_lib_free(m->lib);
    m->cdi = NULL;
    m->lib = NULL;
}

void mm_view_clear(struct mm_view *v)
{
    mp_spec_free(v->spec);
    mp_node_free(v->gpus);
    mp_plan_free(v->plan);
    memset(v, 0, sizeof(*v));
}

int mm_view_read(struct migmgr *m, const char *want, struct mm_view *v, struct err *e)
{
    int r = mp_node_read(m->lib, &v->gpus, e);
    if (r < 0)
        return r;
    if (!want || !want[0])
        return 0;
    if (mp_spec_load(m->config_file, &v->spec, &v->why) < 0) {
        v->config_error = true;
        return 0;
    }
    const struct mp_config *c = mp_spec_find(v->spec, want);
    if (!c) {
        err_set(&v->why, -ENOENT, "%s: no config named \"%s\" (%s=%s)", m->config_file, want,
                MM_LABEL_CONFIG, want);
        v->config_error = true;
        return 0;
    }
    if (mp_plan_make(c, v->gpus->gpus, v->gpus->n_gpus, &v->plan, &v->why) < 0) {
        err_prefix(&v->why, "%s", m->config_file);
        v->config_error = true;
        return 0;
    }
    struct err ignored = {0};
    v->matches = mp_plan_matches(v->plan, v->gpus->gpus, v->gpus->n_gpus, false, &ignored) == 0;
    v->reset_pending =
        mp_plan_reset_pending(v->plan, v->gpus->gpus, v->gpus->n_gpus, &v->reset_why) > 0;
    return 0;
}

int mm_layout_apply(struct migmgr *m, const char *want, struct mm_view *v, enum mm_after_apply *ret,
                    bool *ret_rollback_failed, struct err *why, struct err *e)
{
    /* The layout a failure goes back to: as the GPUs are now, just before the change. */
    mp_node_free(v->gpus);
    v->gpus = NULL;
    int r = mp_node_read(m->lib, &v->gpus, e);
    if (r < 0)
        return r;
    struct mp_apply_result res = {0};
    /* Every GPU's MIG mode first: a mode the driver can only set with a GPU reset stops the
     * change there, before any instance is touched. */
    int ar = mp_apply(m->lib, v->gpus, v->plan, MP_APPLY_MODES_FIRST, &res, why);
    bool still_pending = false;
    if (ar == 0 && res.reset_required) {
        _cleanup_(mp_node_freep) struct mp_node *now = NULL;
        if ((r = mp_node_read(m->lib, &now, e)) < 0)
            return r;
        still_pending = mp_plan_reset_pending(v->plan, now->gpus, now->n_gpus, why) > 0;
    }
    if (ar < 0)
        log_error(COMPONENT, "apply failed", "config=%s rolled_back=%s error=\"%s\"", want,
                  res.rolled_back ? "true" : "false", err_msg(why));
    *ret = mm_after_apply(ar, res.reset_required, still_pending);
    *ret_rollback_failed = res.rollback_failed;
    return 0;
}

void mm_layout_cdi(struct migmgr *m)
{
    _cleanup_free_ char *path = nvcdi_host_path(m->host_root, "/", m->cdi_spec);
    if (access(path, F_OK) < 0) {
        log_debug(COMPONENT, "no CDI spec to regenerate", "path=%s", path);
        return;
    }
    struct err e = {0};
    _cleanup_free_ char *spec = NULL, *old = NULL;
    size_t old_len = 0;
    int r = nvcdi_gen_spec(m->cdi, &spec, NULL, 0, &e);
    if (r == 0 && file_read_all(path, NVCDI_SPEC_MAX, &old, &old_len, &e) == 0 &&
        old_len == strlen(spec) && memcmp(old, spec, old_len) == 0) {
        log_info(COMPONENT, "CDI spec already current", "path=%s", m->cdi_spec);
        return;
    }
    err_clear(&e);
    if (r == 0)
        r = file_write_atomic(path, spec, strlen(spec), 0644, &e);
    if (r < 0) {
        log_warn(COMPONENT, "CDI spec not regenerated; the toolkit will", "path=%s error=\"%s\"",
                 m->cdi_spec, err_msg(&e));
        return;
    }
    log_info(COMPONENT, "CDI spec regenerated", "path=%s driver_root=%s", m->cdi_spec,
             nvcdi_gen_driver_root(m->cdi));
}
