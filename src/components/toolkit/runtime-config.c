/* SPDX-License-Identifier: Apache-2.0 */
/* The node's container runtime configured for the handler (toolkit-internal.h), through
 * src/lib/rtconfig: detected, configured at start, followed on every pass, restored on
 * --cleanup. */
#include "toolkit-internal.h"

static void rt_options(const struct tk *t, struct rtconfig_options *o, char *path, size_t n)
{
    toolkit_rt_options(t->runtime_class, t->install_dir, t->set_as_default, t->rt.restart, path, n,
                       o);
}

int tk_runtime_detect(struct tk *t, struct err *e)
{
    if (!t->rt.configure)
        return 0;
    const char *want = t->default_runtime && *t->default_runtime ? t->default_runtime : NULL;
    if (!t->rt.known) {
        int r = rtconfig_detect(t->host_root, t->node_runtime_version, want, &t->rt.kind, e);
        if (r < 0)
            return err_prefix(e, "container runtime");
    }
    /* The config's parser (a module) loads now: a missing one fails before anything is written. */
    int r = rtconfig_prepare(t->rt.kind, e);
    if (r < 0)
        return err_prefix(e, "configure %s", rtconfig_kind_name(t->rt.kind));
    return 0; /* logged with "ready", once it is configured */
}

/* rtconfig_configure for the handler; path gets the handler's binary. */
static int configure(struct tk *t, bool *ret_changed, char *path, size_t n, struct err *e)
{
    struct rtconfig_options o;
    rt_options(t, &o, path, n);
    return rtconfig_configure(t->host_root, t->rt.kind, &o, ret_changed, e);
}

int tk_runtime_configure(struct tk *t, struct err *e)
{
    if (!t->rt.configure)
        return 0;
    char path[512];
    bool changed = false;
    if (configure(t, &changed, path, sizeof(path), e) < 0)
        return err_prefix(e, "configure %s", rtconfig_kind_name(t->rt.kind));
    log_info(TK_COMP, changed ? "runtime configured" : "runtime already configured",
             "runtime=%s handler=%s path=%s", rtconfig_kind_name(t->rt.kind), t->runtime_class,
             path);
    return 0;
}

/* The runtime's config kept as configured: an edit of the main config since is followed
 * (containerd's drop-in repeats its CRI section, which would otherwise hide the edit), and what
 * was undone by hand is written again; nothing changed, nothing written. */
void tk_runtime_follow(struct tk *t)
{
    if (!t->rt.configure)
        return;
    char path[512];
    struct err e = {0};
    bool changed = false;
    const char *name = rtconfig_kind_name(t->rt.kind);
    if (configure(t, &changed, path, sizeof(path), &e) < 0) {
        if (!t->runtime_failing)
            log_warn(TK_COMP, "cannot keep the runtime configured", "runtime=%s error=\"%s\"", name,
                     err_msg(&e));
        t->runtime_failing = true;
        return;
    }
    if (changed)
        log_info(TK_COMP, "runtime config followed an edit", "runtime=%s", name);
    else if (t->runtime_failing)
        log_info(TK_COMP, "runtime config readable again", "runtime=%s", name);
    t->runtime_failing = false;
}

void tk_runtime_restore(struct tk *t)
{
    if (!t->rt.configure)
        return;
    struct rtconfig_options o;
    char path[512];
    rt_options(t, &o, path, sizeof(path));
    struct err e = {0};
    struct rtconfig_restore_report rep = {0};
    const char *name = rtconfig_kind_name(t->rt.kind);
    if (rtconfig_restore(t->host_root, t->rt.kind, &o, &rep, &e) < 0)
        log_error(TK_COMP, "cannot restore the runtime's config", "runtime=%s error=\"%s\"", name,
                  err_msg(&e));
    for (size_t i = 0; i < rep.n; i++)
        if (rep.files[i].what == RTCONFIG_UNDO_LEFT)
            log_warn(TK_COMP, "runtime config left as it is: gpuop cannot tell its changes apart",
                     "runtime=%s path=%s reason=\"%s\" status=%s/status", name, rep.files[i].path,
                     rep.files[i].why, RTCONFIG_STATE_DIR);
        else
            log_info(TK_COMP, "runtime config restored", "runtime=%s path=%s result=%s", name,
                     rep.files[i].path, rtconfig_undo_name(rep.files[i].what));
}
