/* SPDX-License-Identifier: Apache-2.0 */
/* `gpuop migrate --from nvidia | --to nvidia`: the shell. It reads the cluster, plans with
 * migrate.c (preconditions, writes, notes) and prints the plan; with --apply it makes the writes
 * in the plan's order and, handing back to NVIDIA, waits for the toolkit's cleanup to roll out.
 * It decides nothing. */
#include <assert.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "kobj.h"
#include "kube.h"
#include "migrate.h"
#include "svc.h"
#include "upgrade.h"
#include "yamlcfg.h"

#define COMPONENT "migrate"

static const struct kube_resource RES_CLUSTERPOLICIES = {"nvidia.com", "v1", "clusterpolicies",
                                                         "ClusterPolicy", false};
static const struct kube_resource RES_ROLES = {"rbac.authorization.k8s.io", "v1", "roles", "Role",
                                               true};
static const struct kube_resource RES_ROLEBINDINGS = {"rbac.authorization.k8s.io", "v1",
                                                      "rolebindings", "RoleBinding", true};
static const struct kube_resource RES_CLUSTERROLES = {"rbac.authorization.k8s.io", "v1",
                                                      "clusterroles", "ClusterRole", false};
static const struct kube_resource RES_CLUSTERROLEBINDINGS = {
    "rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", false};

/* What the takeover looks at (adopt_input.objects), and what migrate writes. */
static const struct kube_resource *const object_kinds[] = {
    &KUBE_DAEMONSETS,         &KUBE_SERVICEACCOUNTS, &RES_ROLES,   &RES_ROLEBINDINGS,
    &KUBE_CONFIGMAPS,         &KUBE_SERVICES,        &KUBE_LEASES, &RES_CLUSTERROLES,
    &RES_CLUSTERROLEBINDINGS, &KUBE_RUNTIMECLASSES,
};
static const struct kube_resource *const written_kinds[] = {
    &KUBE_DEPLOYMENTS, &RES_CLUSTERPOLICIES, &KUBE_SERVICEACCOUNTS, &KUBE_SERVICES, &KUBE_SECRETS,
    &KUBE_DAEMONSETS,  &KUBE_PODS,
};
static const char *const crd_names[] = {"clusterpolicies.nvidia.com", "nvidiadrivers.nvidia.com"};

struct migrate {
    const char *from, *to, *ns, *release, *nvidia_release, *kubeconfig, *context;
    bool apply;
    uint64_t timeout_ms;
};

#define M(m) offsetof(struct migrate, m)
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
    struct migrate *m = state;
    m->ns = "gpu-operator";
    m->release = "gpuop";
    m->nvidia_release = "gpu-operator";
    m->timeout_ms = 10 * 60 * 1000;
}

static int migrate_configure(struct svc *s, struct err *e)
{
    struct migrate *m = svc_state(s);
    if (!!m->from == !!m->to)
        return err_set(e, -EINVAL, "give one of --from nvidia and --to nvidia");
    const char *peer = m->from ? m->from : m->to;
    if (strcmp(peer, "nvidia") != 0)
        return err_set(e, -EINVAL, "--%s \"%s\": the only other operator is nvidia",
                       m->from ? "from" : "to", peer);
    const char *const names[][2] = {
        {"namespace", m->ns}, {"release", m->release}, {"nvidia-release", m->nvidia_release}};
    for (size_t i = 0; i < ARRAY_SIZE(names); i++)
        if (!kobj_valid_dns_label(names[i][1]))
            return err_set(e, -EINVAL, "--%s \"%s\": not a DNS label", names[i][0], names[i][1]);
    return 0;
}

/* ---- reading the cluster ------------------------------------------------------------------ */

struct world {
    json_t *deployments, *crds, *policies, *nodes, *pods, *objects, *releases;
};

static void world_done(struct world *w)
{
    json_decref(w->deployments);
    json_decref(w->crds);
    json_decref(w->policies);
    json_decref(w->nodes);
    json_decref(w->pods);
    json_decref(w->objects);
    json_decref(w->releases);
}

/* The items of a list, each given its kind (list items come without it). A kind the server does
 * not serve (the ClusterPolicy CRD absent) lists as empty. */
static int list_kind(struct kube_client *kc, const struct kube_resource *r, const char *ns,
                     const char *selector, json_t *into, struct err *e)
{
    struct kube_list_opts lo = {.label_selector = selector};
    _cleanup_json_ json_t *list = NULL;
    int rc = kube_list(kc, r, r->namespaced ? ns : NULL, &lo, &list, e);
    if (rc == -ENOENT) {
        err_clear(e);
        return 0;
    }
    if (rc < 0)
        return err_prefix(e, "list %s", r->plural);
    size_t i;
    json_t *o;
    json_array_foreach (json_object_get(list, "items"), i, o) {
        json_object_set_new(o, "kind", json_string(r->kind));
        json_array_append(into, o);
    }
    return 0;
}

static int read_world(struct kube_client *kc, const struct migrate *m, struct world *w,
                      struct err *e)
{
    *w = (struct world){json_array(), json_array(), json_array(), json_array(),
                        json_array(), json_array(), json_array()};
    int r;
    if ((r = list_kind(kc, &KUBE_DEPLOYMENTS, m->ns, NULL, w->deployments, e)) < 0 ||
        (r = list_kind(kc, &RES_CLUSTERPOLICIES, NULL, NULL, w->policies, e)) < 0 ||
        (r = list_kind(kc, &KUBE_NODES, NULL, NULL, w->nodes, e)) < 0 ||
        (r = list_kind(kc, &KUBE_PODS, m->ns, NULL, w->pods, e)) < 0 ||
        (r = list_kind(kc, &KUBE_SECRETS, m->ns, "owner=helm", w->releases, e)) < 0)
        return r;
    for (size_t i = 0; i < ARRAY_SIZE(object_kinds); i++)
        if ((r = list_kind(kc, object_kinds[i], m->ns, NULL, w->objects, e)) < 0)
            return r;
    for (size_t i = 0; i < ARRAY_SIZE(crd_names); i++) {
        _cleanup_json_ json_t *crd = NULL;
        r = kube_get(kc, &KUBE_CRDS, NULL, crd_names[i], &crd, e);
        if (r == -ENOENT) {
            err_clear(e);
            continue;
        }
        if (r < 0)
            return err_prefix(e, "CRD %s", crd_names[i]);
        json_array_append(w->crds, crd);
    }
    return 0;
}

/* ---- writing -------------------------------------------------------------------------------- */

static const struct kube_resource *resource_of(const char *kind)
{
    for (size_t i = 0; i < ARRAY_SIZE(written_kinds); i++)
        if (streq_ptr(written_kinds[i]->kind, kind))
            return written_kinds[i];
    return NULL;
}

static int do_write(struct kube_client *kc, const struct mig_write *w, struct err *e)
{
    const struct kube_resource *r = resource_of(w->res_kind);
    assert(r);
    _cleanup_json_ json_t *out = NULL;
    int rc = 0;
    switch (w->kind) {
    case MIG_DELETE:
    case MIG_DELETE_ORPHAN: {
        struct kube_delete_opts d = {.propagation = w->kind == MIG_DELETE
                                                        ? KUBE_PROPAGATION_BACKGROUND
                                                        : KUBE_PROPAGATION_ORPHAN};
        rc = kube_delete(kc, r, w->ns, w->name, &d, e);
        if (rc == -ENOENT) {
            err_clear(e);
            rc = 0;
        }
        break;
    }
    case MIG_PATCH_MERGE:
    case MIG_PATCH_STRATEGIC: {
        struct kube_patch_opts po = {.type = w->kind == MIG_PATCH_MERGE ? KUBE_PATCH_MERGE
                                                                        : KUBE_PATCH_STRATEGIC};
        rc = kube_patch(kc, r, w->ns, w->name, &po, w->body, &out, e);
        break;
    }
    case MIG_REPLACE:
        rc = kube_update(kc, r, w->ns, w->body, &out, e);
        break;
    case MIG_CREATE:
        rc = kube_create(kc, r, w->ns, w->body, &out, e);
        if (rc == -EEXIST) {
            err_clear(e);
            rc = 0;
        }
        break;
    }
    if (rc < 0)
        return err_prefix(e, "%s %s%s%s", w->res_kind, w->ns ? w->ns : "", w->ns ? "/" : "",
                          w->name);
    log_info(COMPONENT, "done", "kind=%s name=%s%s%s", w->res_kind, w->ns ? w->ns : "",
             w->ns ? "/" : "", w->name);
    return 0;
}

static int wait_rollout(struct svc *s, struct kube_client *kc, const struct migrate *m,
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
static int wait_surge(struct svc *s, struct kube_client *kc, const struct migrate *m, size_t n,
                      struct err *e)
{
    uint64_t deadline = deadline_after(m->timeout_ms);
    for (;;) {
        _cleanup_json_ json_t *pods = json_array();
        int r = list_kind(kc, &KUBE_PODS, m->ns, "app=" ADOPT_SURGE_APP, pods, e);
        if (r < 0)
            return r;
        size_t ready = 0, i;
        json_t *p;
        json_array_foreach (pods, i, p) {
            ready += upg_pod_ready(p);
        }
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
    struct migrate *m = svc_state(s);
    _cleanup_(kube_client_freep) struct kube_client *kc = NULL;
    int r = kube_client_open(KUBE_CALLER_COMMAND, m->kubeconfig, m->context, svc_stop(s), &kc, e);
    if (r < 0)
        return r;
    struct world w;
    r = read_world(kc, m, &w, e);
    if (r < 0) {
        world_done(&w);
        return r;
    }
    struct mig_world mw = {.dir = m->from ? MIG_FROM_NVIDIA : MIG_TO_NVIDIA,
                           .ns = m->ns,
                           .release = m->release,
                           .nvidia_release = m->nvidia_release,
                           .deployments = w.deployments,
                           .crds = w.crds,
                           .policies = w.policies,
                           .nodes = w.nodes,
                           .pods = w.pods,
                           .objects = w.objects,
                           .releases = w.releases};
    struct mig_plan plan;
    r = mig_plan(&mw, &plan, e);
    world_done(&w);
    if (r < 0)
        return r;
    _cleanup_free_ char *text = NULL;
    if ((r = mig_plan_text(&plan, m->apply, &text, e)) < 0)
        goto out;
    fputs(text, stdout);
    fflush(stdout);
    if (plan.refused) {
        for (size_t i = 0; i < plan.n_checks; i++)
            if (!plan.checks[i].ok) {
                r = err_set(e, -EPERM, "refused: %s: %s", plan.checks[i].name,
                            plan.checks[i].detail);
                break;
            }
        goto out;
    }
    if (!m->apply)
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
    .state_size = sizeof(struct migrate),
    .defaults = migrate_defaults,
    .configure = migrate_configure,
    .run = migrate_run,
};
