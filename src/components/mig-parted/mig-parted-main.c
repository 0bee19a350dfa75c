/* SPDX-License-Identifier: Apache-2.0 */
/* gpuop mig-parted apply|assert|export: the MIG layout of this node's GPUs by hand. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "migparted.h"
#include "svc.h"

struct migparted_cli {
    const char *file, *config;
    bool mode_only, debug;
};

#define C(m) offsetof(struct migparted_cli, m)
static const struct svc_option mp_options[] = {
    {.flag = "config-file",
     .short_flag = 'f',
     .env = "MIG_PARTED_CONFIG_FILE",
     .kind = SVC_STRING,
     .off = C(file),
     .metavar = "FILE",
     .help = "the mig-parted v1 config (apply, assert)"},
    {.flag = "selected-config",
     .short_flag = 'c',
     .env = "MIG_PARTED_SELECTED_CONFIG",
     .kind = SVC_STRING,
     .off = C(config),
     .metavar = "NAME",
     .help = "the named config in it (apply, assert)"},
    {.flag = "mode-only",
     .kind = SVC_FLAG,
     .off = C(mode_only),
     .help = "only the MIG mode, not the instances (apply, assert)"},
    {.flag = "debug",
     .short_flag = 'd',
     .env = "MIG_PARTED_DEBUG",
     .kind = SVC_FLAG,
     .off = C(debug),
     .help = "debug logs"},
    {0},
};
#undef C

static int mp_configure(struct svc *s, struct err *e)
{
    struct migparted_cli *c = svc_state(s);
    size_t n;
    const char *const *args = svc_args(s, &n);
    if (c->debug)
        log_set_level(LOG_DEBUG);
    if (n != 1)
        return err_set(e, -EINVAL, "a command is required: apply, assert or export (see --help)");
    if (strcmp(args[0], "export") == 0)
        return c->mode_only ? err_set(e, -EINVAL, "export: --mode-only belongs to apply and assert")
                            : 0;
    if (strcmp(args[0], "apply") != 0 && strcmp(args[0], "assert") != 0)
        return err_set(e, -EINVAL, "unknown command \"%s\" (apply, assert or export)", args[0]);
    if (!c->file)
        return err_set(e, -EINVAL, "%s: -f FILE (or MIG_PARTED_CONFIG_FILE) is required", args[0]);
    if (!c->config)
        return err_set(e, -EINVAL, "%s: -c CONFIG (or MIG_PARTED_SELECTED_CONFIG) is required",
                       args[0]);
    return 0;
}

static int mp_run(struct svc *s, struct err *e)
{
    struct migparted_cli *c = svc_state(s);
    size_t n_args;
    const char *cmd = svc_args(s, &n_args)[0];
    _cleanup_(mp_spec_freep) struct mp_spec *spec = NULL;
    const struct mp_config *cfg = NULL;
    int r;
    if (strcmp(cmd, "export") != 0) {
        if ((r = mp_spec_load(c->file, &spec, e)) < 0)
            return svc_bad_input(s, r);
        if (!(cfg = mp_spec_find(spec, c->config)))
            return svc_bad_input(
                s, err_set(e, -ENOENT, "%s: no config named \"%s\"", c->file, c->config));
    }
    _cleanup_(gpu_lib_freep) struct gpu_lib *lib = NULL;
    if ((r = gpu_lib_open(NULL, &lib, e)) < 0)
        return r;
    _cleanup_(mp_node_freep) struct mp_node *node = NULL;
    if ((r = mp_node_read(lib, &node, e)) < 0)
        return r;
    if (!cfg) {
        _cleanup_free_ char *text = mp_export(node->gpus, node->n_gpus, "current");
        if (!text)
            return err_set(e, -E2BIG, "export: the layout is larger than 1 MiB");
        fputs(text, stdout);
        return fflush(stdout) == 0 ? 0 : err_errno(e, -errno, "write the config");
    }
    _cleanup_(mp_plan_freep) struct mp_plan *plan = NULL;
    if ((r = mp_plan_make(cfg, node->gpus, node->n_gpus, &plan, e)) < 0)
        return svc_bad_input(s, err_prefix(e, "%s", c->file));
    if (strcmp(cmd, "assert") == 0) {
        if ((r = mp_plan_matches(plan, node->gpus, node->n_gpus, c->mode_only, e)) < 0)
            return r;
        log_info("mig-parted", "the layout matches", "config=%s mode_only=%s", cfg->name,
                 c->mode_only ? "true" : "false");
        return 0;
    }
    struct mp_apply_result res;
    if ((r = mp_apply(lib, node, plan, c->mode_only ? MP_APPLY_MODE_ONLY : 0, &res, e)) < 0)
        return r;
    log_info("mig-parted", "applied", "config=%s gpus_changed=%u mode_only=%s", cfg->name,
             res.gpus_changed, c->mode_only ? "true" : "false");
    return 0;
}

const struct svc_component migparted_component = {
    .name = "mig-parted",
    .usage = "Usage: gpuop mig-parted apply|assert -f FILE -c CONFIG [--mode-only]\n"
             "       gpuop mig-parted export\n"
             "\n"
             "The MIG layout of this node's GPUs from a mig-parted v1 config:\n"
             "  apply   checks the named config against the GPUs (profiles, counts, placements),\n"
             "          then creates its GPU and compute instances; GPUs already laid out as\n"
             "          asked are not touched; a failure puts every GPU it changed back\n"
             "  assert  exit 0 when the GPUs are laid out as the config says, 1 when not\n"
             "  export  prints the current layout as a v1 config named \"current\"\n",
    .options = {mp_options},
    .epilogue = "Also read: GPUOP_NVML_LIBRARY (default libnvidia-ml.so.1).\n"
                "Exit: 0 done; 1 a failure, or assert found another layout; 2 bad input (the\n"
                "config file, an unknown config name, a layout these GPUs cannot hold).\n",
    .max_args = 1,
    .state_size = sizeof(struct migparted_cli),
    .configure = mp_configure,
    .run = mp_run,
};
