/* SPDX-License-Identifier: Apache-2.0 */
/* `gpuop remediation reset`: a person closes an open remediation breaker by recording the reset
 * (REM_ANN_BREAKER_RESET, now in epoch ms) on the object that holds it: the ClusterPolicy for the
 * cluster's breaker and the default pool's, a DriverUpgradePool for its own. The operator's
 * planner then removes the breaker and counts only the quarantines after the reset. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>

#include "kobj.h"
#include "kube.h"
#include "remediation.h"
#include "svc.h"
#include "yamlcfg.h"

#define COMPONENT "remediation"

struct reset {
    const char *kubeconfig, *context, *pool, *policy;
};

static const struct svc_option reset_options[] = {
    {.kind = SVC_FRAGMENT,
     .fragment = svc_kubeconfig_option,
     .off = offsetof(struct reset, kubeconfig)},
    {.kind = SVC_FRAGMENT, .fragment = svc_context_option, .off = offsetof(struct reset, context)},
    {.flag = "pool",
     .kind = SVC_STRING,
     .off = offsetof(struct reset, pool),
     .metavar = "NAME",
     .help = "reset this DriverUpgradePool's breaker (default: the\n"
             "cluster's and the default pool's, on the ClusterPolicy)"},
    {.flag = "policy",
     .kind = SVC_STRING,
     .off = offsetof(struct reset, policy),
     .metavar = "NAME",
     .help = "the ClusterPolicy (default: the cluster's only one)"},
    {0},
};

/* The ClusterPolicy's name: the one named, else the only one. */
static int policy_name(struct svc *s, struct kube_client *kc, const char *named, char **ret,
                       struct err *e)
{
    if (named) {
        *ret = xstrdup(named);
        return 0;
    }
    _cleanup_(json_decrefp) json_t *list = NULL;
    struct kube_list_opts lo = {0};
    int r = kube_list(kc, &KUBE_CLUSTERPOLICIES, NULL, &lo, &list, e);
    if (r < 0)
        return err_prefix(e, "list the ClusterPolicies");
    json_t *items = json_object_get(list, "items");
    if (json_array_size(items) != 1) {
        svc_bad_input(s, -EINVAL);
        return err_set(e, -EINVAL, "%zu ClusterPolicies in the cluster: name one with --policy",
                       json_array_size(items));
    }
    *ret = xstrdup(kobj_name(json_array_get(items, 0)) ?: "");
    return 0;
}

static int reset_run(struct svc *s, struct err *e)
{
    struct reset *o = svc_state(s);
    _cleanup_(kube_client_freep) struct kube_client *kc = NULL;
    int r = kube_client_open(KUBE_CALLER_COMMAND, o->kubeconfig, o->context, svc_stop(s), &kc, e);
    if (r < 0)
        return r;
    _cleanup_free_ char *name = NULL;
    if (o->pool)
        name = xstrdup(o->pool);
    else if ((r = policy_name(s, kc, o->policy, &name, e)) < 0)
        return r;
    const struct kube_resource *res = o->pool ? &KUBE_DRIVERUPGRADEPOOLS : &KUBE_CLUSTERPOLICIES;
    char now[32];
    snprintf(now, sizeof(now), "%llu", (unsigned long long)now_ms_real());
    _cleanup_(json_decrefp) json_t *patch =
        json_pack("{s:{s:{s:s}}}", "metadata", "annotations", REM_ANN_BREAKER_RESET, now);
    struct kube_patch_opts po = {.type = KUBE_PATCH_MERGE};
    _cleanup_(json_decrefp) json_t *out = NULL;
    r = kube_patch(kc, res, NULL, name, &po, patch, &out, e);
    if (r == -ENOENT) {
        svc_bad_input(s, r);
        return err_set(e, r, "%s %s: not found", res->kind, name);
    }
    if (r < 0)
        return err_prefix(e, "%s %s", res->kind, name);
    const char *open = kobj_annotation(out, REM_ANN_BREAKER);
    const char *dflt = o->pool ? NULL : kobj_annotation(out, REM_ANN_BREAKER_DEFAULT);
    printf("%s %s: breaker reset at %s (epoch ms); %s\n", res->kind, name, now,
           open || dflt ? "the operator closes it on its next pass" : "no breaker was open there");
    if (fflush(stdout) != 0)
        return err_errno(e, -errno, "write to stdout");
    return 0;
}

static const struct svc_component reset_component = {
    .name = "reset",
    .summary = "Reset (close) an open remediation breaker",
    .usage = "Usage: gpuop remediation reset [--pool NAME | --policy NAME] [flags]\n\n"
             "Closes a remediation breaker a fault storm opened: records the reset on the\n"
             "ClusterPolicy (the cluster's breaker and the default pool's) or, with --pool, on\n"
             "the DriverUpgradePool; the operator resumes quarantines, counting only those after\n"
             "the reset.\n",
    .options = {reset_options},
    .state_size = sizeof(struct reset),
    .run = reset_run,
};

const struct svc_component remediation_component = {
    .name = COMPONENT,
    .usage = "Usage: gpuop remediation COMMAND [flags]\n\n"
             "A person's commands on the GPU remediation (docs/remediation.md).\n",
    .verbs = {&reset_component},
};
