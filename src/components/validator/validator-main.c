/* SPDX-License-Identifier: Apache-2.0 */
/* `gpuop validator --component=...`: the shell around validator.h. It reads the options (the
 * environment included) once, then runs the check's plan: gathers each fact the core asks for
 * (probes.c), and carries out the verdict: the status file written or removed, the node
 * annotation validation.gpuop.dev/<component>, an Event (node-api.c), the log. */
#include <dirent.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "validator-internal.h"

#define COMP "validator"

static int val_configure(struct svc *s, struct err *e)
{
    struct val *v = svc_state(s);
    if (v->component < 0)
        return err_set(e, -EINVAL,
                       "--component: required (driver, toolkit, cuda, plugin, "
                       "all-done, toolkit-ready)");
    struct stat st;
    /* The checks read the host; all-done and the toolkit-ready wait read only status files. */
    bool reads_host = v->component < VAL_ALL_DONE;
    if (reads_host && stat(v->host_root, &st) < 0)
        return err_errno(e, -errno, "--host-root \"%s\"", v->host_root);
    if (reads_host && !S_ISDIR(st.st_mode))
        return err_set(e, -ENOTDIR, "--host-root \"%s\": not a directory", v->host_root);
    /* The status folder: created when absent (the hostPath is DirectoryOrCreate); anything
     * else that cannot be listed is bad input. */
    if (stat(v->validations_dir, &st) < 0) {
        int r = mkdir_p(v->validations_dir, 0755);
        if (r < 0)
            return err_errno(e, r, "--validations-dir \"%s\"", v->validations_dir);
    } else if (!S_ISDIR(st.st_mode)) {
        return err_set(e, -ENOTDIR, "--validations-dir \"%s\": not a directory",
                       v->validations_dir);
    }
    _cleanup_(closedirp) DIR *d = opendir(v->validations_dir);
    if (!d)
        return err_errno(e, -errno, "--validations-dir \"%s\"", v->validations_dir);
    if (v->component == VAL_PLUGIN && !v->node_name)
        return err_set(e, -EINVAL, "--node-name (NODE_NAME): required by the plugin check");
    enum nodestate_mig_strategy ms;
    if (v->mig_strategy && nodestate_mig_strategy_parse(v->mig_strategy, &ms) < 0)
        return err_set(e, -EINVAL, "--mig-strategy: \"%s\" is not none, single or mixed",
                       v->mig_strategy);
    int w = v->sysfs_root ? snprintf(v->sysfs, sizeof(v->sysfs), "%s", v->sysfs_root)
                          : snprintf(v->sysfs, sizeof(v->sysfs), "%s/sys",
                                     strcmp(v->host_root, "/") == 0 ? "" : v->host_root);
    if (w < 0 || (size_t)w >= sizeof(v->sysfs))
        return err_set(e, -ENAMETOOLONG, "--sysfs-root: path too long");
    v->cfg = (struct val_config){.paths = {v->host_root, v->driver_root, v->validations_dir},
                                 .driver_version = v->driver_version,
                                 .mig_strategy = v->mig_strategy,
                                 .nvml_library = v->nvml_library,
                                 .cuda_library = v->cuda_library,
                                 .without_plugin = v->without_plugin};
    return 0;
}

/* ---- one try ------------------------------------------------------------------------------ */

/* Gathers what the check's plan asks for, one probe at a time, until the verdict (in st). */
static void plan_check(struct val *v, struct val_step *st)
{
    struct val_gathered g _cleanup_(val_gathered_clear) = {0};
    for (;;) {
        val_check_step((enum val_component)v->component, &v->cfg, &g.f, st);
        if (st->probe == VAL_PROBE_NONE)
            return;
        log_debug(COMP, "probe", "probe=%s", val_probe_name(st->probe));
        val_probe_run(v, st, &g);
    }
}

/* A verdict that passed: its status files, the owner it verified, its line. A file that cannot
 * be written turns it into an error. */
static void carry_out(struct val *v, struct val_step *st)
{
    struct err e = {0};
    int r = st->write ? nodestate_file_write(v->validations_dir, st->file, st->text, &e) : 0;
    for (int f = 0; f < NODESTATE_FILE_COUNT && r == 0; f++)
        r = st->also[f]   ? nodestate_file_write(v->validations_dir, f, NULL, &e)
            : st->drop[f] ? nodestate_file_remove(v->validations_dir, f, &e)
                          : 0;
    if (r < 0) {
        st->outcome = VAL_ERROR;
        st->code = e.code;
        strlcpy_s(st->reason, e.msg, sizeof(st->reason));
        return;
    }
    if (st->record_owner)
        val_api_record_owner(v, &st->owner);
    if (st->log_msg)
        log_info(COMP, st->log_msg, "%s", st->log_kv);
}

/* What a try leads to (val_report_plan), carried out. */
static void report(struct val *v, const struct val_report *rep, const char *reason)
{
    struct err re = {0};
    if (rep->remove_file && nodestate_file_remove(v->validations_dir, rep->file, &re) < 0)
        log_warn(COMP, "cannot remove the status file", "error=\"%s\"", log_kv_quote(re.msg));
    if (rep->log_retry) {
        char q[NODESTATE_REASON_MAX];
        strlcpy_s(q, reason, sizeof(q));
        log_warn(COMP, "not validated yet, retrying", "component=%s reason=\"%s\" every=%llums",
                 val_component_names[v->component], log_kv_quote(q),
                 (unsigned long long)v->interval_ms);
    }
    if (rep->annotate)
        val_api_annotate(v, rep->state, rep->state == NODESTATE_V_OK ? NULL : reason);
    if (rep->event)
        val_api_event(v, rep->warning, rep->event_reason, rep->message);
}

static int val_run(struct svc *s, struct err *e)
{
    struct val *v = svc_state(s);
    const char *name = val_component_names[v->component];
    int r = val_api_open(v, svc_stop(s), e);
    if (r < 0)
        return r;
    uint64_t window = val_try_window_ms((enum val_component)v->component, v->wait, v->timeout_ms);
    bool polls = window > 0;
    uint64_t deadline = deadline_after(window);
    char last[NODESTATE_REASON_MAX] = "";
    struct val_step *st _cleanup_free_ = xcalloc(1, sizeof(*st));
    _cleanup_close_ int ifd = polls ? val_status_watch(v) : -1;
    for (;;) {
        plan_check(v, st);
        if (st->outcome == VAL_PASSED)
            carry_out(v, st);
        bool more = polls && (deadline == DEADLINE_NEVER || deadline_left_ms(deadline) > 0);
        struct val_report rep;
        val_report_plan((enum val_component)v->component, st->outcome, st->reason, last, more,
                        &rep);
        report(v, &rep, st->reason);
        int code = st->outcome == VAL_ERROR ? st->code : -ENODEV;
        memcpy(last, st->reason, sizeof(last));
        val_step_clear(st);
        if (rep.next == VAL_NEXT_FAIL)
            return err_set(e, code, "%s", rep.message);
        if (rep.next == VAL_NEXT_DONE)
            break;
        uint64_t nap = v->interval_ms;
        if (deadline != DEADLINE_NEVER && deadline_left_ms(deadline) < nap)
            nap = deadline_left_ms(deadline);
        if (val_status_wait(s, ifd, nap) == SVC_STOP) {
            log_info(COMP, "stopped before the check passed", "component=%s", name);
            return 0;
        }
    }
    if (v->component != VAL_ALL_DONE || v->once)
        return 0;
    while (svc_wait(s, DEADLINE_NEVER) != SVC_STOP)
        ;
    /* the pod going away takes the checks' files with it: nothing reads a stale success */
    struct err re = {0};
    for (int f = 0; f < NODESTATE_FILE_COUNT; f++)
        if (val_status_cleared_on_stop(f) && nodestate_file_remove(v->validations_dir, f, &re) < 0)
            log_warn(COMP, "cannot remove a status file", "error=\"%s\"", log_kv_quote(re.msg));
    return 0;
}

const struct svc_component validator_component = {
    .name = COMP,
    .usage = "Usage: gpuop validator --component=driver|toolkit|cuda|plugin|all-done|toolkit-ready"
             " [flags]\n\n"
             "Validates one layer of the node's GPU stack, as NVIDIA's operator validator does,\n"
             "and writes its status file in /run/nvidia/validations (driver-ready, toolkit-ready,\n"
             "cuda-ready, plugin-ready) only when it passes. all-done checks every status file,\n"
             "then waits for a signal and removes the checks' status files (--once: a probe).\n"
             "toolkit-ready (with --wait) waits for toolkit-ready: the init container of the\n"
             "operands that need the toolkit.\n",
    .flags_title = "Flags (each also set by the environment variable shown; flag > env > "
                   "default):",
    .options = {val_options},
    .epilogue = "A failure is one line, an Event on the node (ValidationFailed) and the node\n"
                "annotation validation.gpuop.dev/<component>.\n"
                "Exit status: 0 when the check passed (or a signal stopped it), 1 when it failed,\n"
                "2 on bad usage (an unknown component, a missing host root, a status folder that\n"
                "cannot be listed).\n",
    .state_size = sizeof(struct val),
    .defaults = val_defaults,
    .configure = val_configure,
    .run = val_run,
    .cleanup = val_api_close,
};
