/* SPDX-License-Identifier: Apache-2.0 */
/* `gpuop operator uninstall`, the chart's pre-delete hook (op-hooks.h): a shell over hooks.c's
 * decisions (apply-crds, the pre-upgrade hook, is hooks-crds-main.c). */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "adopt.h"
#include "kobj.h"
#include "kube.h"
#include "op-cli.h"
#include "op-controller.h"
#include "op-hooks.h"
#include "operator.h"
#include "svc.h"
#include "yamlcfg.h"

#define COMPONENT "operator"

struct op_uninstall_cli {
    const char *ns, *release, *deployment, *kubeconfig, *context;
    struct svc_strings delete_crds;
    uint64_t timeout_ms;
};

#define U(m) offsetof(struct op_uninstall_cli, m)
static const struct svc_option uninstall_options[] = {
    {.kind = SVC_FRAGMENT, .fragment = op_namespace_option, .off = U(ns)},
    {.flag = "release",
     .kind = SVC_STRING,
     .off = U(release),
     .metavar = "NAME",
     .help = "the Helm release being uninstalled (required): its ClusterPolicies\n"
             "and NVIDIADrivers, by Helm's annotations, are deleted"},
    {.flag = "deployment",
     .kind = SVC_STRING,
     .off = U(deployment),
     .metavar = "NAME",
     .help = "the operator's Deployment, scaled to 0 first (default gpu-operator)"},
    {.flag = "delete-crd",
     .kind = SVC_STRINGS,
     .off = U(delete_crds),
     .metavar = "NAME",
     .help = "a CRD deleted last (repeatable; operator.cleanupCRD)"},
    {.flag = "timeout",
     .kind = SVC_DURATION,
     .off = U(timeout_ms),
     .min = 1000,
     .finite = true,
     .metavar = "DUR",
     .help = "how long each wait may take (default 10m)"},
    {.kind = SVC_FRAGMENT, .fragment = svc_kubeconfig_option, .off = U(kubeconfig)},
    {.kind = SVC_FRAGMENT, .fragment = svc_context_option, .off = U(context)},
    {0},
};
#undef U

static void uninstall_defaults(void *state)
{
    struct op_uninstall_cli *u = state;
    u->ns = "gpu-operator";
    u->deployment = "gpu-operator";
    u->timeout_ms = 10 * 60 * 1000;
}

static int uninstall_configure(struct svc *s, struct err *e)
{
    struct op_uninstall_cli *u = svc_state(s);
    return op_uninstall_check(u->release, (const char *const *)u->delete_crds.v, u->delete_crds.n,
                              e);
}

#define TOOLKIT_SELECTOR \
    "app=nvidia-container-toolkit-daemonset,app.kubernetes.io/managed-by=" OP_MANAGED_BY

/* Polls `done` once a second until it says yes (1), fails, the deadline passes or the stop
 * token fires. */
static int wait_for(struct svc *s, uint64_t deadline, const char *what,
                    int (*done)(struct kube_client *kc, const struct op_uninstall_cli *u,
                                struct err *e),
                    struct kube_client *kc, const struct op_uninstall_cli *u, struct err *e)
{
    for (;;) {
        int r = done(kc, u, e);
        if (r != 0)
            return r < 0 ? r : 0;
        if (deadline_left_ms(deadline) == 0)
            return err_set(e, -ETIMEDOUT, "%s: not done after %llu s", what,
                           (unsigned long long)(u->timeout_ms / 1000));
        if (svc_wait(s, 1000) == SVC_STOP)
            return err_set(e, -ECANCELED, "%s: stopped", what);
    }
}

static int count_pods(struct kube_client *kc, const char *ns, const char *selector, size_t *ret,
                      struct err *e)
{
    struct kube_list_opts lo = {.label_selector = selector};
    _cleanup_json_ json_t *list = NULL;
    int r = kube_list(kc, &KUBE_PODS, ns, &lo, &list, e);
    if (r < 0)
        return err_prefix(e, "list pods %s in %s", selector, ns);
    *ret = json_array_size(json_object_get(list, "items"));
    return 0;
}

static int operator_stopped(struct kube_client *kc, const struct op_uninstall_cli *u, struct err *e)
{
    _cleanup_json_ json_t *dep = NULL;
    int r = kube_get(kc, &KUBE_DEPLOYMENTS, u->ns, u->deployment, &dep, e);
    if (r == -ENOENT) {
        err_clear(e);
        return 1;
    }
    _cleanup_free_ char *sel = r < 0 ? NULL : op_deployment_pods_selector(dep);
    size_t n = 0;
    if (r < 0 || !sel || (r = count_pods(kc, u->ns, sel, &n, e)) < 0)
        return r < 0 ? r : 1; /* no selector to find its pods by: nothing to wait for */
    return n == 0;
}

static int toolkits_rolled_out(struct kube_client *kc, const struct op_uninstall_cli *u,
                               struct err *e)
{
    struct kube_list_opts lo = {.label_selector = TOOLKIT_SELECTOR};
    _cleanup_json_ json_t *list = NULL;
    int r = kube_list(kc, &KUBE_DAEMONSETS, u->ns, &lo, &list, e);
    if (r < 0)
        return err_prefix(e, "list the toolkit DaemonSets");
    char why[128];
    const char *ds = op_toolkit_pending(json_object_get(list, "items"), why, sizeof(why));
    if (ds)
        log_info(COMPONENT, "waiting for the toolkit's cleanup to roll out", "daemonset=%s %s", ds,
                 why);
    return !ds;
}

static int toolkits_gone(struct kube_client *kc, const struct op_uninstall_cli *u, struct err *e)
{
    size_t n = 0;
    int r = count_pods(kc, u->ns, TOOLKIT_SELECTOR, &n, e);
    if (r < 0)
        return r;
    if (n > 0)
        log_info(COMPONENT, "waiting for the toolkit pods to restore the runtime configuration",
                 "pods=%zu", n);
    return n == 0;
}

/* Deletes a cluster-scoped object; one already gone is done. */
static int delete_gone(struct kube_client *kc, const struct kube_resource *res, const char *name,
                       struct err *e)
{
    struct kube_delete_opts d = {.propagation = KUBE_PROPAGATION_BACKGROUND};
    int r = kube_delete(kc, res, NULL, name, &d, e);
    if (r < 0 && r != -ENOENT)
        return err_prefix(e, "delete %s %s", res->kind, name);
    err_clear(e);
    log_info(COMPONENT, r == -ENOENT ? "already gone" : "deleted", "kind=%s name=%s", res->kind,
             name);
    return 0;
}

static int delete_owned(struct kube_client *kc, const struct kube_resource *res,
                        const struct op_uninstall_cli *u, struct err *e)
{
    _cleanup_json_ json_t *list = NULL, *del = NULL, *keep = NULL;
    int r = kube_list(kc, res, NULL, NULL, &list, e);
    if (r == -ENOENT) { /* the CRD is not installed */
        err_clear(e);
        return 0;
    }
    if (r < 0)
        return err_prefix(e, "list %s", res->plural);
    op_release_split(json_object_get(list, "items"), u->release, u->ns, &del, &keep);
    size_t i;
    json_t *name;
    json_array_foreach (keep, i, name)
        log_info(COMPONENT, "kept: not this release's", "kind=%s name=%s", res->kind,
                 json_string_value(name));
    json_array_foreach (del, i, name) {
        if ((r = delete_gone(kc, res, json_string_value(name), e)) < 0)
            return r;
    }
    return 0;
}

static int uninstall_run(struct svc *s, struct err *e)
{
    struct op_uninstall_cli *u = svc_state(s);
    _cleanup_(kube_client_freep) struct kube_client *kc = NULL;
    int r = kube_client_open(KUBE_CALLER_COMMAND, u->kubeconfig, u->context, svc_stop(s), &kc, e);
    if (r < 0)
        return r;
    /* 1. The operator stops, so that nothing renders the toolkit back. */
    _cleanup_json_ json_t *scale = json_pack("{s:{s:i}}", "spec", "replicas", 0);
    _cleanup_json_ json_t *out = NULL;
    struct kube_patch_opts mp = {.type = KUBE_PATCH_MERGE};
    r = kube_patch(kc, &KUBE_DEPLOYMENTS, u->ns, u->deployment, &mp, scale, &out, e);
    if (r < 0 && r != -ENOENT)
        return err_prefix(e, "scale Deployment %s/%s to 0", u->ns, u->deployment);
    err_clear(e);
    if ((r = wait_for(s, deadline_after(u->timeout_ms), "the operator's pods to stop",
                      operator_stopped, kc, u, e)) < 0)
        return r;
    log_info(COMPONENT, "operator stopped", "deployment=%s/%s", u->ns, u->deployment);
    /* 2. Each toolkit DaemonSet's cleanup on, rolled out to every node. */
    struct kube_list_opts lo = {.label_selector = TOOLKIT_SELECTOR};
    _cleanup_json_ json_t *dss = NULL;
    if ((r = kube_list(kc, &KUBE_DAEMONSETS, u->ns, &lo, &dss, e)) < 0)
        return err_prefix(e, "list the toolkit DaemonSets");
    size_t i;
    json_t *ds;
    json_array_foreach (json_object_get(dss, "items"), i, ds) {
        _cleanup_json_ json_t *patch = adopt_toolkit_cleanup_patch(ds);
        if (!patch)
            continue;
        struct kube_patch_opts sp = {.type = KUBE_PATCH_STRATEGIC};
        _cleanup_json_ json_t *pout = NULL;
        if ((r = kube_patch(kc, &KUBE_DAEMONSETS, u->ns, kobj_name(ds), &sp, patch, &pout, e)) < 0)
            return err_prefix(e, "turn the cleanup of DaemonSet %s/%s on", u->ns, kobj_name(ds));
        log_info(COMPONENT, "toolkit cleanup on", "daemonset=%s/%s", u->ns, kobj_name(ds));
    }
    if ((r = wait_for(s, deadline_after(u->timeout_ms), "the toolkit's cleanup to roll out",
                      toolkits_rolled_out, kc, u, e)) < 0)
        return r;
    /* 3. The release's policies go, and with them the operands; each toolkit restores its node's
     * runtime configuration as its pod stops. */
    if ((r = delete_owned(kc, &KUBE_NVIDIADRIVERS, u, e)) < 0 ||
        (r = delete_owned(kc, &KUBE_CLUSTERPOLICIES, u, e)) < 0 ||
        (r = delete_owned(kc, &KUBE_GPUCLUSTERS, u, e)) < 0)
        return r;
    if ((r = wait_for(s, deadline_after(u->timeout_ms), "the toolkit pods to stop", toolkits_gone,
                      kc, u, e)) < 0)
        return r;
    /* 4. The CRDs, when asked (operator.cleanupCRD). */
    for (i = 0; i < u->delete_crds.n; i++)
        if ((r = delete_gone(kc, &KUBE_CRDS, u->delete_crds.v[i], e)) < 0)
            return r;
    log_info(COMPONENT, "uninstall hook done", "release=%s namespace=%s", u->release, u->ns);
    return 0;
}

const struct svc_component op_uninstall_component = {
    .name = "uninstall",
    .summary = "Stop the operator and restore every node's runtime configuration (the chart's "
               "pre-delete hook)",
    .usage = "Usage: gpuop operator uninstall --release NAME [--namespace NS]\n"
             "       [--deployment NAME] [--delete-crd NAME]... [--timeout DUR]\n\n"
             "Scales the operator's Deployment to 0 and waits for its pods to stop; turns the\n"
             "toolkit's cleanup on (TOOLKIT_CLEANUP=true) in gpuop's toolkit DaemonSets and\n"
             "waits until it runs on every node; deletes the release's ClusterPolicies and\n"
             "NVIDIADrivers (those with its Helm annotations; others are kept) and waits until\n"
             "every toolkit pod has stopped, each having taken gpuop's changes out of its node's\n"
             "runtime configuration; then deletes the CRDs named with --delete-crd.\n",
    .epilogue = "Exit: 0 done; 2 bad input; 1 a write refused or a wait that timed out (what it\n"
                "waited for is named).\n",
    .options = {uninstall_options},
    .state_size = sizeof(struct op_uninstall_cli),
    .defaults = uninstall_defaults,
    .configure = uninstall_configure,
    .run = uninstall_run,
};
