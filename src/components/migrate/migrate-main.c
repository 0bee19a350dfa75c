/* SPDX-License-Identifier: Apache-2.0 */
/* `gpuop migrate --from nvidia | --to nvidia`: the shell. It reads the cluster, plans with
 * migrate.c (preconditions, writes, notes; requests.c: the options, what is read, each write's
 * request) and prints the plan; with --apply it makes the writes in the plan's order and, handing
 * back to NVIDIA, waits for the toolkit's cleanup to roll out. It decides nothing. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "kube.h"
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
    {.flag = "timeout",
     .kind = SVC_DURATION,
     .off = M(timeout_ms),
     .min = 1000,
     .finite = true,
     .metavar = "DUR",
     .help = "--to nvidia --apply: how long the toolkit's cleanup may take to roll out (10m)"},
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

/* ---- writing -------------------------------------------------------------------------------- */

static int do_write(struct kube_client *kc, const struct mig_write *w, struct err *e)
{
    struct mig_request rq;
    int rc = mig_request_of(w, &rq, e);
    if (rc < 0)
        return rc;
    _cleanup_json_ json_t *out = NULL;
    switch (rq.verb) {
    case MIG_VERB_DELETE:
        rc = kube_delete(kc, rq.res, w->ns, w->name,
                         &(struct kube_delete_opts){.propagation = rq.propagation}, e);
        break;
    case MIG_VERB_PATCH:
        rc = kube_patch(kc, rq.res, w->ns, w->name, &(struct kube_patch_opts){.type = rq.patch},
                        w->body, &out, e);
        break;
    case MIG_VERB_UPDATE:
        rc = kube_update(kc, rq.res, w->ns, w->body, &out, e);
        break;
    case MIG_VERB_CREATE:
        rc = kube_create(kc, rq.res, w->ns, w->body, &out, e);
        break;
    }
    if (rc < 0 && rc == rq.done_code) {
        err_clear(e);
        rc = 0;
    }
    if (rc < 0)
        return err_prefix(e, "%s %s%s%s", w->res_kind, w->ns ? w->ns : "", w->ns ? "/" : "",
                          w->name);
    log_info(COMPONENT, "done", "kind=%s name=%s%s%s", w->res_kind, w->ns ? w->ns : "",
             w->ns ? "/" : "", w->name);
    return 0;
}

static int wait_rollout(struct svc *s, struct kube_client *kc, const struct mig_options *m,
                        const char *ds_name, struct err *e)
{
    uint64_t deadline = deadline_after(m->timeout_ms);
    for (;;) {
        _cleanup_json_ json_t *ds = NULL;
        int r = kube_get(kc, &KUBE_DAEMONSETS, m->ns, ds_name, &ds, e);
        if (r < 0)
            return err_prefix(e, "DaemonSet %s/%s", m->ns, ds_name);
        char why[128];
        if (adopt_ds_rolled_out(ds, why, sizeof(why))) {
            log_info(COMPONENT, "the toolkit's cleanup runs on every node", "daemonset=%s/%s",
                     m->ns, ds_name);
            return 0;
        }
        if (deadline_left_ms(deadline) == 0)
            return err_set(e, -ETIMEDOUT,
                           "DaemonSet %s/%s: the toolkit's cleanup did not roll out in %llu s (%s)",
                           m->ns, ds_name, (unsigned long long)(m->timeout_ms / 1000), why);
        if (svc_wait(s, 1000) == SVC_STOP)
            return err_set(e, -ECANCELED, "stopped while waiting for %s", ds_name);
    }
}

/* Until the n surge device plugin pods are Ready, and then ADOPT_SURGE_SETTLE_MS more (their
 * registration with the kubelet follows their start): only then may NVIDIA's plugin replace
 * gpuop's. */
static int wait_surge(struct svc *s, struct kube_client *kc, const struct mig_options *m, size_t n,
                      struct err *e)
{
    uint64_t deadline = deadline_after(m->timeout_ms);
    for (;;) {
        struct kube_list_opts lo = {.label_selector = "app=" ADOPT_SURGE_APP};
        _cleanup_json_ json_t *pods = NULL;
        int r = kube_list(kc, &KUBE_PODS, m->ns, &lo, &pods, e);
        if (r < 0)
            return err_prefix(e, "list pods app=%s", ADOPT_SURGE_APP);
        size_t ready = mig_pods_ready(pods);
        if (ready >= n) {
            log_info(COMPONENT, "the surge device plugins run on every node", "pods=%zu", ready);
            return svc_wait(s, ADOPT_SURGE_SETTLE_MS) == SVC_STOP
                       ? err_set(e, -ECANCELED, "stopped while the surge plugins register")
                       : 0;
        }
        if (deadline_left_ms(deadline) == 0)
            return err_set(e, -ETIMEDOUT,
                           "%zu of %zu surge device plugin pod(s) (app=%s) Ready in %llu s", ready,
                           n, ADOPT_SURGE_APP, (unsigned long long)(m->timeout_ms / 1000));
        if (svc_wait(s, 1000) == SVC_STOP)
            return err_set(e, -ECANCELED, "stopped while waiting for the surge plugins");
    }
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
        if ((r = do_write(kc, &plan.writes[i], e)) < 0)
            goto out;
    if (plan.surge_pods && (r = wait_surge(s, kc, m, plan.surge_pods, e)) < 0)
        goto out;
    if (plan.toolkit_ds && (r = wait_rollout(s, kc, m, plan.toolkit_ds, e)) < 0)
        goto out;
    printf("done: %zu change(s)\n", plan.n_writes);
out:
    mig_plan_done(&plan);
    return r;
}

const struct svc_component migrate_component = {
    .name = "migrate",
    .usage = "Usage: gpuop migrate --from nvidia | --to nvidia [--namespace NS] [--apply]\n"
             "       [--release NAME] [--nvidia-release NAME]\n\n"
             "Switches a cluster between NVIDIA's GPU Operator and gpuop without draining a GPU.\n"
             "Checks the preconditions (the operator being left stopped, the CRD versions, one\n"
             "ClusterPolicy, every GPU node's driver owner, no driver upgrade in flight) and\n"
             "prints the plan; with --apply it moves the objects' Helm ownership so that the\n"
             "other chart's `helm install` takes them over and the old release's `helm\n"
             "uninstall` deletes none of them (docs/migrate-from-nvidia.md,\n"
             "docs/rollback-to-nvidia.md). A refusal names the precondition and changes nothing.\n",
    .epilogue = "Exit: 0 planned (or applied); 1 refused (a precondition failed: nothing was\n"
                "changed) or a write failed (run it again: each write is idempotent); 2 bad\n"
                "input.\n",
    .options = {migrate_options},
    .state_size = sizeof(struct mig_options),
    .defaults = migrate_defaults,
    .configure = migrate_configure,
    .run = migrate_run,
};
