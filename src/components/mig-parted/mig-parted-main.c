/* SPDX-License-Identifier: Apache-2.0 */
/* gpuop mig-parted apply|assert|export: the MIG layout of this node's GPUs by hand. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "migparted.h"
#include "svc.h"

#define COMP "mig-parted"

/* Every verb's state. */
struct migparted_cli {
    const char *file, *config;
    bool mode_only, debug;
};

#define C(m) offsetof(struct migparted_cli, m)
/* apply and assert: which layout. */
static const struct svc_option mp_layout_options[] = {
    {.flag = "config-file",
     .short_flag = 'f',
     .env = "MIG_PARTED_CONFIG_FILE",
     .kind = SVC_STRING,
     .off = C(file),
     .metavar = "FILE",
     .help = "the mig-parted v1 config (required)"},
    {.flag = "selected-config",
     .short_flag = 'c',
     .env = "MIG_PARTED_SELECTED_CONFIG",
     .kind = SVC_STRING,
     .off = C(config),
     .metavar = "NAME",
     .help = "the named config in it (required)"},
    {.flag = "mode-only",
     .kind = SVC_FLAG,
     .off = C(mode_only),
     .help = "only the MIG mode, not the instances"},
    {0},
};

/* every verb */
static const struct svc_option mp_debug_option[] = {
    {.flag = "debug",
     .short_flag = 'd',
     .env = "MIG_PARTED_DEBUG",
     .kind = SVC_FLAG,
     .off = C(debug),
     .help = "debug logs"},
    {0},
};
#undef C

#define MP_EPILOGUE                                                                 \
    "Also read: GPUOP_NVML_LIBRARY (default libnvidia-ml.so.1).\n"                  \
    "Exit: 0 done; 1 a failure, or assert found another layout; 2 bad input (the\n" \
    "config file, an unknown config name, a layout these GPUs cannot hold).\n"

static int export_configure(struct svc *s, struct err *e)
{
    (void)e;
    struct migparted_cli *c = svc_state(s);
    if (c->debug)
        log_set_level(LOG_DEBUG);
    return 0;
}

static int layout_configure(struct svc *s, struct err *e)
{
    struct migparted_cli *c = svc_state(s);
    export_configure(s, e);
    if (!c->file)
        return err_set(e, -EINVAL, "-f FILE (or MIG_PARTED_CONFIG_FILE) is required");
    if (!c->config)
        return err_set(e, -EINVAL, "-c CONFIG (or MIG_PARTED_SELECTED_CONFIG) is required");
    return 0;
}

/* The GPUs as they are now. */
static int read_node(struct gpu_lib **ret_lib, struct mp_node **ret_node, struct err *e)
{
    _cleanup_(gpu_lib_freep) struct gpu_lib *lib = NULL;
    _cleanup_(mp_node_freep) struct mp_node *node = NULL;
    int r;
    if ((r = gpu_lib_open(NULL, &lib, e)) < 0 || (r = mp_node_read(lib, &node, e)) < 0)
        return r;
    *ret_lib = steal_ptr(&lib);
    *ret_node = steal_ptr(&node);
    return 0;
}

/* The named config planned on the GPUs: bad input when the file, the name or the layout is. */
struct layout {
    struct mp_spec *spec;
    const struct mp_config *cfg;
    struct gpu_lib *lib;
    struct mp_node *node;
    struct mp_plan *plan;
};

static void layout_done(struct layout *l)
{
    mp_plan_free(l->plan);
    mp_node_free(l->node);
    gpu_lib_free(l->lib);
    mp_spec_free(l->spec);
}

static int layout_plan(struct svc *s, struct layout *l, struct err *e)
{
    struct migparted_cli *c = svc_state(s);
    int r;
    if ((r = mp_spec_load(c->file, &l->spec, e)) < 0)
        return svc_bad_input(s, r);
    if (!(l->cfg = mp_spec_find(l->spec, c->config)))
        return svc_bad_input(s,
                             err_set(e, -ENOENT, "%s: no config named \"%s\"", c->file, c->config));
    if ((r = read_node(&l->lib, &l->node, e)) < 0)
        return r;
    if ((r = mp_plan_make(l->cfg, l->node->gpus, l->node->n_gpus, &l->plan, e)) < 0)
        return svc_bad_input(s, err_prefix(e, "%s", c->file));
    return 0;
}

static int apply_run(struct svc *s, struct err *e)
{
    struct migparted_cli *c = svc_state(s);
    _cleanup_(layout_done) struct layout l = {0};
    int r = layout_plan(s, &l, e);
    if (r < 0)
        return r;
    struct mp_apply_result res;
    if ((r = mp_apply(l.lib, l.node, l.plan, c->mode_only ? MP_APPLY_MODE_ONLY : 0, &res, e)) < 0)
        return r;
    log_info(COMP, "applied", "config=%s gpus_changed=%u mode_only=%s", l.cfg->name,
             res.gpus_changed, c->mode_only ? "true" : "false");
    return 0;
}

static int assert_run(struct svc *s, struct err *e)
{
    struct migparted_cli *c = svc_state(s);
    _cleanup_(layout_done) struct layout l = {0};
    int r = layout_plan(s, &l, e);
    if (r < 0)
        return r;
    if ((r = mp_plan_matches(l.plan, l.node->gpus, l.node->n_gpus, c->mode_only, e)) < 0)
        return r;
    log_info(COMP, "the layout matches", "config=%s mode_only=%s", l.cfg->name,
             c->mode_only ? "true" : "false");
    return 0;
}

static int export_run(struct svc *s, struct err *e)
{
    (void)s;
    _cleanup_(gpu_lib_freep) struct gpu_lib *lib = NULL;
    _cleanup_(mp_node_freep) struct mp_node *node = NULL;
    int r = read_node(&lib, &node, e);
    if (r < 0)
        return r;
    _cleanup_free_ char *text = mp_export(node->gpus, node->n_gpus, "current");
    if (!text)
        return err_set(e, -E2BIG, "export: the layout is larger than 1 MiB");
    fputs(text, stdout);
    return fflush(stdout) == 0 ? 0 : err_errno(e, -errno, "write the config");
}

static const struct svc_component migparted_apply = {
    .name = "apply",
    .summary = "Lay the GPUs out as the named config says",
    .usage = "Usage: gpuop mig-parted apply -f FILE -c CONFIG [--mode-only]\n\n"
             "Checks the named config against the GPUs (profiles, counts, placements), then\n"
             "creates its GPU and compute instances; GPUs already laid out as asked are not\n"
             "touched; a failure puts every GPU it changed back.\n",
    .options = {mp_layout_options, mp_debug_option},
    .epilogue = MP_EPILOGUE,
    .state_size = sizeof(struct migparted_cli),
    .configure = layout_configure,
    .run = apply_run,
};

static const struct svc_component migparted_assert = {
    .name = "assert",
    .summary = "Exit 0 when the GPUs are laid out as the named config says",
    .usage = "Usage: gpuop mig-parted assert -f FILE -c CONFIG [--mode-only]\n\n"
             "Exit 0 when the GPUs are laid out as the named config says, 1 (naming what\n"
             "differs) when not.\n",
    .options = {mp_layout_options, mp_debug_option},
    .epilogue = MP_EPILOGUE,
    .state_size = sizeof(struct migparted_cli),
    .configure = layout_configure,
    .run = assert_run,
};

static const struct svc_component migparted_export = {
    .name = "export",
    .summary = "Print the current layout as a v1 config named \"current\"",
    .options = {mp_debug_option},
    .epilogue = MP_EPILOGUE,
    .state_size = sizeof(struct migparted_cli),
    .configure = export_configure,
    .run = export_run,
};

const struct svc_component migparted_component = {
    .name = COMP,
    .usage = "Usage: gpuop mig-parted COMMAND [flags]\n\n"
             "The MIG layout of this node's GPUs from a mig-parted v1 config.\n",
    .epilogue = MP_EPILOGUE,
    .verbs = {&migparted_apply, &migparted_assert, &migparted_export},
};
