/* SPDX-License-Identifier: Apache-2.0 */
/* `gpuop migrate --from nvidia | --to nvidia`: the shell. It reads the cluster, plans with
 * migrate.c (preconditions, writes, notes; requests.c: the options, what is read, each write's
 * request) and prints the plan; with --apply it makes the writes in the plan's order and, handing
 * back to NVIDIA, waits for the toolkit's cleanup to roll out. It decides nothing. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "kube.h"
#include "migrate-shell.h"
#include "migrate.h"
#include "svc.h"
#include "yamlcfg.h"

#define COMPONENT "migrate"

/* The options' state is the core's typed struct mig_options (migrate.h). */
#define M(m) offsetof(struct mig_options, m)
static const struct svc_option migrate_options[] = {
    {.flag = "from",
     .kind = SVC_STRING,
     .off = M(from),
     .metavar = "nvidia",
     .help = "take over from NVIDIA's GPU Operator"},
    {.flag = "to",
     .kind = SVC_STRING,
     .off = M(to),
     .metavar = "nvidia",
     .help = "hand back to NVIDIA's GPU Operator"},
    {.flag = "namespace",
     .kind = SVC_STRING,
     .off = M(ns),
     .metavar = "NS",
     .help = "the operators' namespace (default gpu-operator)"},
    {.flag = "release",
     .kind = SVC_STRING,
     .off = M(release),
     .metavar = "NAME",
     .help = "gpuop's Helm release (default gpuop)"},
    {.flag = "nvidia-release",
     .kind = SVC_STRING,
     .off = M(nvidia_release),
     .metavar = "NAME",
     .help = "NVIDIA's Helm release (default gpu-operator)"},
    {.flag = "apply",
     .kind = SVC_FLAG,
     .off = M(apply),
     .help = "make the changes (default: print the plan only)"},
    {.flag = "roll",
     .kind = SVC_FLAG,
     .off = M(roll),
     .help = "--to nvidia, after --apply and NVIDIA's chart: replace gpuop's operand pods node "
             "by node"},
    {.flag = "max-unavailable",
     .kind = SVC_UINT,
     .off = M(max_unavailable),
     .metavar = "N",
     .help = "--roll: nodes replaced at once (default: the ClusterPolicy's "
             "daemonsets.rollingUpdate.maxUnavailable)"},
    {.flag = "timeout",
     .kind = SVC_DURATION,
     .off = M(timeout_ms),
     .min = 1000,
     .finite = true,
     .metavar = "DUR",
     .help = "--to nvidia: how long --apply's waits and the whole --roll may take (10m)"},
    {.kind = SVC_FRAGMENT, .fragment = svc_kubeconfig_option, .off = M(kubeconfig)},
    {.kind = SVC_FRAGMENT, .fragment = svc_context_option, .off = M(context)},
    {0},
};
#undef M

static void migrate_defaults(void *state)
{
    mig_options_defaults(state);
}

static int migrate_configure(struct svc *s, struct err *e)
{
    enum mig_direction dir;
    return mig_options_check(svc_state(s), &dir, e);
}

/* ---- reading the cluster ------------------------------------------------------------------ */

/* Reads one list of the table into the lists; a kind the server does not serve (the ClusterPolicy
 * CRD absent) lists as empty. */
static int read_list(struct kube_client *kc, const struct mig_read *rd, const char *ns,
                     struct mig_lists *l, struct err *e)
{
    struct kube_list_opts lo = {.label_selector = rd->selector};
    _cleanup_json_ json_t *list = NULL;
    int rc = kube_list(kc, rd->res, rd->res->namespaced ? ns : NULL, &lo, &list, e);
    if (rc == -ENOENT) {
        err_clear(e);
        return 0;
    }
    if (rc < 0)
        return err_prefix(e, "list %s", rd->res->plural);
    mig_lists_add(l, rd, list);
    return 0;
}

static int read_world(struct kube_client *kc, const struct mig_options *m, struct mig_lists *l,
                      struct err *e)
{
    int r;
    for (const struct mig_read *rd = mig_reads; rd->res; rd++)
        if ((r = read_list(kc, rd, m->ns, l, e)) < 0)
            return r;
    for (const char *const *name = mig_crd_names; *name; name++) {
        _cleanup_json_ json_t *crd = NULL;
        r = kube_get(kc, &KUBE_CRDS, NULL, *name, &crd, e);
        if (r == -ENOENT) {
            err_clear(e);
            continue;
        }
        if (r < 0)
            return err_prefix(e, "CRD %s", *name);
        json_array_append(l->crds, crd);
    }
    return 0;
}

static int migrate_run(struct svc *s, struct err *e)
{
    struct mig_options *m = svc_state(s);
    enum mig_direction dir;
    int r = mig_options_check(m, &dir, e);
    if (r < 0)
        return r;
    _cleanup_(kube_client_freep) struct kube_client *kc = NULL;
    if ((r = kube_client_open(KUBE_CALLER_COMMAND, m->kubeconfig, m->context, svc_stop(s), &kc,
                              e)) < 0)
        return r;
    if (m->roll)
        return mig_roll_run(s, kc, m, e);
    struct mig_lists l;
    mig_lists_init(&l);
    struct mig_plan plan;
    r = read_world(kc, m, &l, e);
    if (r == 0) {
        struct mig_world mw = mig_world_of(m, dir, &l);
        r = mig_plan(&mw, &plan, e);
    }
    mig_lists_done(&l);
    if (r < 0)
        return r;
    _cleanup_free_ char *text = NULL;
    if ((r = mig_plan_text(&plan, m->apply, &text, e)) < 0)
        goto out;
    fputs(text, stdout);
    fflush(stdout);
    if ((r = mig_plan_refusal(&plan, e)) < 0 || !m->apply)
        goto out;
    for (size_t i = 0; i < plan.n_writes; i++)
        if ((r = mig_do_write(kc, &plan.writes[i], e)) < 0)
            goto out;
    if (plan.surge_pods && (r = mig_wait_surge(s, kc, m, plan.surge_pods, e)) < 0)
        goto out;
    if (plan.toolkit_ds && (r = mig_wait_rollout(s, kc, m, plan.toolkit_ds, e)) < 0)
        goto out;
    printf("done: %zu change(s)\n", plan.n_writes);
out:
    mig_plan_done(&plan);
    return r;
}

const struct svc_component migrate_component = {
    .name = "migrate",
    .usage = "Usage: gpuop migrate --from nvidia | --to nvidia [--namespace NS] [--apply]\n"
             "       [--release NAME] [--nvidia-release NAME]\n"
             "       gpuop migrate --to nvidia --roll [--max-unavailable N] [--timeout DUR]\n\n"
             "Switches a cluster between NVIDIA's GPU Operator and gpuop without draining a GPU.\n"
             "Checks the preconditions (the operator being left stopped, the CRD versions, one\n"
             "ClusterPolicy, every GPU node's driver owner, no driver upgrade in flight) and\n"
             "prints the plan; with --apply it moves the objects' Helm ownership so that the\n"
             "other chart's `helm install` takes them over and the old release's `helm\n"
             "uninstall` deletes none of them (docs/migrate-from-nvidia.md,\n"
             "docs/rollback-to-nvidia.md). A refusal names the precondition and changes nothing.\n"
             "--roll, on the way back: gpuop's operand pods replaced by NVIDIA's node by node.\n",
    .epilogue = "Exit: 0 planned (or applied); 1 refused (a precondition failed: nothing was\n"
                "changed) or a write failed (run it again: each write is idempotent); 2 bad\n"
                "input.\n",
    .options = {migrate_options},
    .state_size = sizeof(struct mig_options),
    .defaults = migrate_defaults,
    .configure = migrate_configure,
    .run = migrate_run,
};
