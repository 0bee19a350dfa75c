/* SPDX-License-Identifier: Apache-2.0 */
/* `gpuop operator render`: the objects a ClusterPolicy (or a GPUCluster) turns into, without a
 * cluster; and the flags it shares with `gpuop operator`, so that it renders what the operator
 * would. */
#include <stddef.h>
#include <stdio.h>

#include "op-cli.h"
#include "kobj.h"
#include "operator.h"
#include "svc.h"
#include "yamlcfg.h"

const struct svc_option op_namespace_option[] = {
    {.flag = "namespace",
     .env = "OPERATOR_NAMESPACE",
     .kind = SVC_STRING,
     .metavar = "NS",
     .help = "namespace of the operands (default gpu-operator)"},
    {0},
};

const struct svc_option op_operand_image_option[] = {
    {.flag = "operand-image",
     .env = "OPERAND_IMAGE",
     .kind = SVC_STRING,
     .metavar = "IMAGE",
     .help = "image of every gpuop component (default gpuop:" GPUOP_VERSION ")"},
    {0},
};

const struct svc_option op_operand_templates_option[] = {
    {.flag = "operand-templates",
     .kind = SVC_STRING,
     .metavar = "DIR",
     .help = "override the compiled-in deploy/operands templates"},
    {0},
};

struct op_render_cli {
    const char *policy, *os_tag, *ns, *operand_image, *templates_dir;
    char *default_image;
};

#define R(m) offsetof(struct op_render_cli, m)
static const struct svc_option render_options[] = {
    {.flag = "policy",
     .kind = SVC_STRING,
     .off = R(policy),
     .metavar = "FILE",
     .help = "the ClusterPolicy, YAML or JSON (required)"},
    {.flag = "os-tag",
     .kind = SVC_STRING,
     .off = R(os_tag),
     .metavar = "TAG",
     .help = "the GPU nodes' OS, for the driver image (ubuntu22.04)"},
    {.kind = SVC_FRAGMENT, .fragment = op_namespace_option, .off = R(ns)},
    {.kind = SVC_FRAGMENT, .fragment = op_operand_image_option, .off = R(operand_image)},
    {.kind = SVC_FRAGMENT, .fragment = op_operand_templates_option, .off = R(templates_dir)},
    {0},
};
#undef R

static void render_defaults(void *state)
{
    struct op_render_cli *r = state;
    r->ns = "gpu-operator";
}

static void render_cleanup(void *state)
{
    struct op_render_cli *r = state;
    free(r->default_image);
}

static int render_configure(struct svc *s, struct err *e)
{
    struct op_render_cli *r = svc_state(s);
    if (!r->policy)
        return err_set(e, -EINVAL, "--policy FILE is required");
    if (!r->operand_image)
        r->operand_image = r->default_image = xasprintf("gpuop:%s", GPUOP_VERSION);
    return 0;
}

/* Every failure is the input's (the policy, the templates): exit 2. */
static int render_run(struct svc *s, struct err *e)
{
    struct op_render_cli *r = svc_state(s);
    _cleanup_json_ json_t *cp = NULL;
    _cleanup_(op_templates_freep) struct op_templates *t = NULL;
    _cleanup_(op_policy_freep) struct op_policy *p = NULL;
    _cleanup_json_ json_t *objs = NULL;
    struct op_defaults d = {r->ns, r->operand_image};
    struct op_render_ctx ctx = {.os_tag = r->os_tag};
    int rc;
    if ((rc = op_templates_builtin(&t, e)) < 0)
        return rc; /* the compiled-in set: a bug, not input */
    if (r->templates_dir && (rc = op_templates_load_dir(t, r->templates_dir, e)) < 0)
        return svc_bad_input(s, err_prefix(e, "--operand-templates"));
    if ((rc = yaml_load_file(r->policy, &cp, e)) < 0)
        return svc_bad_input(s, rc);
    /* a GPUCluster: the ClusterPolicy it amounts to, with its DRA stack */
    if (streq_ptr(kobj_kind(cp), "GPUCluster")) {
        json_t *as_policy = NULL;
        if ((rc = op_gpucluster_policy(cp, false, &as_policy, e)) < 0)
            return svc_bad_input(s, err_prefix(e, "%s", r->policy));
        json_decref(cp);
        cp = as_policy;
    }
    if ((rc = op_policy_parse(cp, &d, &p, e)) < 0 || (rc = op_render(p, t, &ctx, &objs, e)) < 0)
        return svc_bad_input(s, err_prefix(e, "%s", r->policy));
    if (json_dumpf(objs, stdout, JSON_INDENT(2) | JSON_SORT_KEYS) < 0 || fputc('\n', stdout) < 0 ||
        fflush(stdout) != 0)
        return err_errno(e, errno ? -errno : -EIO, "write the objects to stdout");
    /* what only the cluster knows, said (not an error: the operator acts on it) */
    const char *kmc = kobj_path_str(p->operand[OP_DRIVER].spec, "kernelModuleConfig.name");
    if (kmc && *kmc)
        fprintf(stderr,
                "driver.kernelModuleConfig: the keys of ConfigMap %s are mounted by the running "
                "operator, which reads it; not shown here\n",
                kmc);
    if (json_is_true(kobj_path(p->operand[OP_DRIVER].spec, "usePrecompiled")))
        fprintf(stderr, "driver.usePrecompiled: the running operator makes one driver DaemonSet "
                        "per kernel of the GPU nodes; shown here is the template's one\n");
    if (json_array_size(p->unimplemented) > 0) {
        _cleanup_free_ char *u = json_dumps(p->unimplemented, JSON_COMPACT);
        fprintf(stderr, "accepted, not acted on by gpuop: %s\n", u);
    }
    return 0;
}

const struct svc_component op_render_component = {
    .name = "render",
    .summary = "Print the objects a ClusterPolicy turns into, without a cluster",
    .usage = "Usage: gpuop operator render --policy FILE [--os-tag ubuntu22.04]\n"
             "       [--namespace NS] [--operand-image IMAGE] [--operand-templates DIR]\n\n"
             "Prints, as a JSON list, every object the ClusterPolicy in FILE (YAML or JSON)\n"
             "turns into, exactly as the operator would create them.\n",
    .epilogue = "Exit: 0 done; 2 bad input (the policy, its file or the templates: one line\n"
                "naming the file and the field).\n",
    .options = {render_options},
    .state_size = sizeof(struct op_render_cli),
    .defaults = render_defaults,
    .configure = render_configure,
    .run = render_run,
    .cleanup = render_cleanup,
};
