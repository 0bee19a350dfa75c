/* SPDX-License-Identifier: Apache-2.0 */
/* What `gpuop migrate` asks of the API server (migrate.h, "the requests"): its options as typed,
 * the lists it reads, the request each planned write is, its refusal. Pure. */
#include <assert.h>
#include <string.h>

#include "kobj.h"
#include "migrate.h"
#include "upgrade.h"

#define L(m) offsetof(struct mig_lists, m)
const struct mig_read mig_reads[] = {
    {&KUBE_DEPLOYMENTS, NULL, L(deployments)},
    {&KUBE_CLUSTERPOLICIES, NULL, L(policies)},
    {&KUBE_NODES, NULL, L(nodes)},
    {&KUBE_PODS, NULL, L(pods)},
    {&KUBE_SECRETS, "owner=helm", L(releases)},
    /* what the takeover looks at (adopt_input.objects) */
    {&KUBE_DAEMONSETS, NULL, L(objects)},
    {&KUBE_SERVICEACCOUNTS, NULL, L(objects)},
    {&KUBE_ROLES, NULL, L(objects)},
    {&KUBE_ROLEBINDINGS, NULL, L(objects)},
    {&KUBE_CONFIGMAPS, NULL, L(objects)},
    {&KUBE_SERVICES, NULL, L(objects)},
    {&KUBE_LEASES, NULL, L(objects)},
    {&KUBE_CLUSTERROLES, NULL, L(objects)},
    {&KUBE_CLUSTERROLEBINDINGS, NULL, L(objects)},
    {&KUBE_RUNTIMECLASSES, NULL, L(objects)},
    {0},
};
#undef L

const char *const mig_crd_names[] = {"clusterpolicies.nvidia.com", "nvidiadrivers.nvidia.com",
                                     NULL};

/* the kinds the plan writes */
static const struct kube_resource *const written_kinds[] = {
    &KUBE_DEPLOYMENTS, &KUBE_CLUSTERPOLICIES, &KUBE_SERVICEACCOUNTS,
    &KUBE_SERVICES,    &KUBE_SECRETS,         &KUBE_DAEMONSETS,
    &KUBE_PODS,        &KUBE_NODES,
};

void mig_options_defaults(struct mig_options *o)
{
    o->ns = "gpu-operator";
    o->release = "gpuop";
    o->nvidia_release = "gpu-operator";
    o->timeout_ms = 10 * 60 * 1000;
}

int mig_options_check(const struct mig_options *o, enum mig_direction *ret_dir, struct err *e)
{
    if (!!o->from == !!o->to)
        return err_set(e, -EINVAL, "give one of --from nvidia and --to nvidia");
    const char *peer = o->from ? o->from : o->to;
    if (strcmp(peer, "nvidia") != 0)
        return err_set(e, -EINVAL, "--%s \"%s\": the only other operator is nvidia",
                       o->from ? "from" : "to", peer);
    const char *const names[][2] = {
        {"namespace", o->ns}, {"release", o->release}, {"nvidia-release", o->nvidia_release}};
    for (size_t i = 0; i < ARRAY_SIZE(names); i++)
        if (!kobj_valid_dns_label(names[i][1]))
            return err_set(e, -EINVAL, "--%s \"%s\": not a DNS label", names[i][0],
                           names[i][1] ? names[i][1] : "");
    if (o->roll && (o->from || o->apply))
        return err_set(e, -EINVAL, "--roll goes with --to nvidia alone (run --apply first)");
    if (o->max_unavailable && !o->roll)
        return err_set(e, -EINVAL, "--max-unavailable goes with --roll");
    *ret_dir = o->from ? MIG_FROM_NVIDIA : MIG_TO_NVIDIA;
    return 0;
}

void mig_lists_init(struct mig_lists *l)
{
    *l = (struct mig_lists){json_array(), json_array(), json_array(), json_array(),
                            json_array(), json_array(), json_array()};
}

void mig_lists_done(struct mig_lists *l)
{
    json_t **all[] = {&l->deployments, &l->crds,    &l->policies, &l->nodes,
                      &l->pods,        &l->objects, &l->releases};
    for (size_t i = 0; i < ARRAY_SIZE(all); i++) {
        json_decref(*all[i]);
        *all[i] = NULL;
    }
}

void mig_lists_add(struct mig_lists *l, const struct mig_read *rd, json_t *list)
{
    json_t *into = *(json_t **)((char *)l + rd->field);
    assert(json_is_array(into));
    size_t i;
    json_t *o;
    json_array_foreach (json_object_get(list, "items"), i, o) {
        json_object_set_new(o, "kind", json_string(rd->res->kind)); /* items come without it */
        json_array_append(into, o);
    }
}

struct mig_world mig_world_of(const struct mig_options *o, enum mig_direction dir,
                              const struct mig_lists *l)
{
    return (struct mig_world){.dir = dir,
                              .ns = o->ns,
                              .release = o->release,
                              .nvidia_release = o->nvidia_release,
                              .deployments = l->deployments,
                              .crds = l->crds,
                              .policies = l->policies,
                              .nodes = l->nodes,
                              .pods = l->pods,
                              .objects = l->objects,
                              .releases = l->releases};
}

int mig_request_of(const struct mig_write *w, struct mig_request *ret, struct err *e)
{
    const struct kube_resource *res = NULL;
    for (size_t i = 0; i < ARRAY_SIZE(written_kinds) && !res; i++)
        if (streq_ptr(written_kinds[i]->kind, w->res_kind))
            res = written_kinds[i];
    if (!res)
        return err_set(e, -EINVAL, "%s %s: not a kind migrate writes", w->res_kind ?: "(none)",
                       w->name ?: "");
    struct mig_request r = {.res = res};
    switch (w->kind) {
    case MIG_DELETE:
    case MIG_DELETE_ORPHAN:
        r.verb = MIG_VERB_DELETE;
        r.propagation =
            w->kind == MIG_DELETE ? KUBE_PROPAGATION_BACKGROUND : KUBE_PROPAGATION_ORPHAN;
        r.done_code = -ENOENT; /* gone already */
        break;
    case MIG_PATCH_MERGE:
    case MIG_PATCH_STRATEGIC:
        r.verb = MIG_VERB_PATCH;
        r.patch = w->kind == MIG_PATCH_MERGE ? KUBE_PATCH_MERGE : KUBE_PATCH_STRATEGIC;
        break;
    case MIG_REPLACE:
        r.verb = MIG_VERB_UPDATE;
        break;
    case MIG_CREATE:
        r.verb = MIG_VERB_CREATE;
        r.done_code = -EEXIST; /* one that exists is left as it is */
        break;
    }
    *ret = r;
    return 0;
}

int mig_plan_refusal(const struct mig_plan *p, struct err *e)
{
    if (!p->refused)
        return 0;
    for (size_t i = 0; i < p->n_checks; i++)
        if (!p->checks[i].ok)
            return err_set(e, -EPERM, "refused: %s: %s", p->checks[i].name, p->checks[i].detail);
    return err_set(e, -EPERM, "refused");
}

size_t mig_pods_ready(const json_t *list)
{
    size_t ready = 0, i;
    json_t *p;
    json_array_foreach (json_object_get(list, "items"), i, p) {
        ready += upg_pod_ready(p);
    }
    return ready;
}
