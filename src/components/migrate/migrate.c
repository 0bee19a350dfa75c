/* SPDX-License-Identifier: Apache-2.0 */
/* gpuop migrate's core (migrate.h): preconditions, writes and notes, pure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kobj.h"
#include "migrate.h"
#include "yamlcfg.h"

#define GPUOP_NAME_LABEL "app.kubernetes.io/name"
#define LABEL_UPGRADE    "nvidia.com/gpu-driver-upgrade-state"

/* ---- building ------------------------------------------------------------------------------- */

static void check(struct mig_plan *p, const char *name, bool ok, char *detail /* taken */)
{
    p->checks = xrealloc(p->checks, (p->n_checks + 1) * sizeof(*p->checks));
    p->checks[p->n_checks++] = (struct mig_check){.name = name, .ok = ok, .detail = detail};
    p->refused = p->refused || !ok;
}

void mig_write_add(struct mig_write **writes, size_t *n, enum mig_write_kind k,
                   const char *res_kind, const char *ns, const char *name, json_t *body, char *why)
{
    *writes = xrealloc(*writes, (*n + 1) * sizeof(**writes));
    (*writes)[(*n)++] = (struct mig_write){.kind = k,
                                           .res_kind = xstrdup(res_kind),
                                           .ns = ns ? xstrdup(ns) : NULL,
                                           .name = xstrdup(name),
                                           .body = body,
                                           .why = why};
}

void mig_writes_free(struct mig_write *writes, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(writes[i].res_kind);
        free(writes[i].ns);
        free(writes[i].name);
        json_decref(writes[i].body);
        free(writes[i].why);
    }
    free(writes);
}

static void write_add(struct mig_plan *p, enum mig_write_kind k, const char *res_kind,
                      const char *ns, const char *name, json_t *body /* taken */,
                      char *why /* taken */)
{
    mig_write_add(&p->writes, &p->n_writes, k, res_kind, ns, name, body, why);
}

static void note(struct mig_plan *p, char *text /* taken */)
{
    json_array_append_new(p->notes, json_string(text));
    free(text);
}

/* ---- whose is what --------------------------------------------------------------------------- */

static bool is_gpuop_operator(const json_t *dep)
{
    return streq_ptr(kobj_label(dep, GPUOP_NAME_LABEL), "gpuop") &&
           streq_ptr(kobj_label(dep, "app.kubernetes.io/component"), "operator");
}

/* NVIDIA's operator Deployment: its chart's (app=gpu-operator on its pods) and not gpuop's. */
static bool is_nvidia_operator(const json_t *dep)
{
    return !is_gpuop_operator(dep) &&
           streq_ptr(kobj_path_str(dep, "spec.template.metadata.labels.app"), "gpu-operator");
}

static size_t pods_matching(const json_t *pods, const json_t *match_labels)
{
    size_t n = 0, i;
    json_t *p;
    if (!json_is_object(match_labels) || json_object_size(match_labels) == 0)
        return 0;
    json_array_foreach ((json_t *)pods, i, p) {
        if (kobj_labels_match(match_labels, kobj_labels(p)))
            n++;
    }
    return n;
}

/* ---- preconditions -----------------------------------------------------------------------------
 */

/* The operator being left is stopped: its Deployment at 0 replicas (no pod left) or gone. */
static void check_stopped(struct mig_plan *p, const struct mig_world *w, json_t **ret_dep)
{
    bool from = w->dir == MIG_FROM_NVIDIA;
    const char *who = from ? "NVIDIA's operator" : "gpuop's operator";
    *ret_dep = NULL;
    size_t i;
    json_t *d;
    json_array_foreach ((json_t *)w->deployments, i, d) {
        if (from ? !is_nvidia_operator(d) : !is_gpuop_operator(d))
            continue;
        json_t *rep = kobj_path(d, "spec.replicas");
        long long want = json_is_integer(rep) ? (long long)json_integer_value(rep) : 1;
        size_t running = pods_matching(w->pods, kobj_path(d, "spec.selector.matchLabels"));
        if (want > 0 || running > 0) {
            check(p, from ? "NVIDIA's operator stopped" : "gpuop's operator stopped", false,
                  xasprintf("Deployment %s/%s wants %lld replica(s) and %zu pod(s) of it remain: "
                            "stop it first (kubectl -n %s scale deployment %s --replicas=0)",
                            w->ns, kobj_name(d), want, running, w->ns, kobj_name(d)));
            return;
        }
        *ret_dep = d;
        check(
            p, from ? "NVIDIA's operator stopped" : "gpuop's operator stopped", true,
            xasprintf("Deployment %s/%s is at 0 replicas, no pod of it runs", w->ns, kobj_name(d)));
        return;
    }
    check(p, from ? "NVIDIA's operator stopped" : "gpuop's operator stopped", true,
          xasprintf("no Deployment of %s in %s", who, w->ns));
}

struct known_crd {
    const char *name, *version;
    bool required;
};
static const struct known_crd known_crds[] = {
    {"clusterpolicies.nvidia.com", "v1", true},
    {"nvidiadrivers.nvidia.com", "v1alpha1", false},
};

static void check_crds(struct mig_plan *p, const struct mig_world *w)
{
    _cleanup_free_ char *seen = xstrdup("");
    for (size_t k = 0; k < ARRAY_SIZE(known_crds); k++) {
        const json_t *crd = NULL;
        size_t i;
        json_t *c;
        json_array_foreach ((json_t *)w->crds, i, c) {
            if (streq_ptr(kobj_name(c), known_crds[k].name))
                crd = c;
        }
        if (!crd) {
            if (known_crds[k].required) {
                check(p, "CRD versions", false,
                      xasprintf("CRD %s is not installed: there is no ClusterPolicy to take over",
                                known_crds[k].name));
                return;
            }
            continue;
        }
        /* every version served or stored must be the one gpuop knows */
        json_t *v;
        json_array_foreach (kobj_path(crd, "spec.versions"), i, v) {
            if (!streq_ptr(kobj_str(v, "name"), known_crds[k].version)) {
                check(p, "CRD versions", false,
                      xasprintf("CRD %s has version %s, which gpuop does not know (it knows %s): "
                                "nothing is changed",
                                known_crds[k].name, kobj_str(v, "name") ?: "?",
                                known_crds[k].version));
                return;
            }
        }
        json_array_foreach (kobj_path(crd, "status.storedVersions"), i, v) {
            if (!streq_ptr(json_string_value(v), known_crds[k].version)) {
                check(p, "CRD versions", false,
                      xasprintf("CRD %s stores objects at version %s, which gpuop does not know "
                                "(it knows %s)",
                                known_crds[k].name, json_string_value(v) ?: "?",
                                known_crds[k].version));
                return;
            }
        }
        char *s = xasprintf("%s%s%s %s", seen, *seen ? ", " : "", known_crds[k].name,
                            known_crds[k].version);
        free(seen);
        seen = s;
    }
    check(p, "CRD versions", true, xstrdup(seen));
}

static const json_t *check_one_policy(struct mig_plan *p, const struct mig_world *w)
{
    size_t n = json_array_size(w->policies);
    if (n == 1) {
        const json_t *cp = json_array_get(w->policies, 0);
        check(p, "one ClusterPolicy", true, xasprintf("%s", kobj_name(cp)));
        return cp;
    }
    if (n == 0) {
        check(p, "one ClusterPolicy", false, xstrdup("none: there is nothing to take over"));
        return NULL;
    }
    _cleanup_free_ char *names = xstrdup("");
    size_t i;
    json_t *cp;
    json_array_foreach ((json_t *)w->policies, i, cp) {
        char *s = xasprintf("%s%s%s", names, i ? ", " : "", kobj_name(cp));
        free(names);
        names = s;
    }
    check(p, "one ClusterPolicy", false,
          xasprintf("%zu ClusterPolicies (%s): both operators act on one; delete the others "
                    "first (the one whose status is ignored)",
                    n, names));
    return NULL;
}

static bool gpu_node(const json_t *node)
{
    return streq_ptr(kobj_label(node, "nvidia.com/gpu.present"), "true");
}

/* Every GPU node's driver has a known owner: a Ready pod of the driver DaemonSet, or the host
 * (deploy.driver=pre-installed or false, or the policy's driver disabled). */
static void check_driver_owners(struct mig_plan *p, const struct mig_world *w, const json_t *cp)
{
    bool policy_driver = !cp || !json_is_false(kobj_path(cp, "spec.driver.enabled"));
    size_t by_pod = 0, by_host = 0, i;
    json_t *node;
    json_array_foreach ((json_t *)w->nodes, i, node) {
        if (!gpu_node(node))
            continue;
        const char *name = kobj_name(node);
        const char *deploy = kobj_label(node, "nvidia.com/gpu.deploy.driver");
        if (!policy_driver || streq_ptr(deploy, "pre-installed") || streq_ptr(deploy, "false")) {
            by_host++;
            continue;
        }
        const json_t *drv = NULL, *nvd = NULL;
        size_t j;
        json_t *pod;
        json_array_foreach ((json_t *)w->pods, j, pod) {
            if (!streq_ptr(kobj_path_str(pod, "spec.nodeName"), name))
                continue;
            const char *app = kobj_label(pod, "app");
            if (streq_ptr(app, "nvidia-driver-daemonset"))
                drv = pod;
            else if (app && strncmp(app, "nvidia-gpu-driver-", 18) == 0)
                nvd = pod;
        }
        if (nvd) {
            check(p, "every GPU node's driver owner", false,
                  xasprintf("node %s: its driver is run by %s, an NVIDIADriver's pod: a takeover "
                            "of NVIDIADriver-managed drivers is not supported yet",
                            name, kobj_name(nvd)));
            return;
        }
        if (!drv || !kobj_pod_ready(drv)) {
            check(p, "every GPU node's driver owner", false,
                  xasprintf("node %s: %s, and its driver is not marked pre-installed: who owns "
                            "its driver is unknown (wait for its driver pod, or label the node "
                            "nvidia.com/gpu.deploy.driver=pre-installed)",
                            name,
                            drv ? "its driver pod is not Ready"
                                : "no pod of nvidia-driver-daemonset runs there"));
            return;
        }
        by_pod++;
    }
    check(p, "every GPU node's driver owner", true,
          xasprintf("%zu GPU node(s) with a Ready driver pod (left running), %zu with the host's "
                    "driver",
                    by_pod, by_host));
}

static bool upgrade_in_flight(const char *state)
{
    static const char *const busy[] = {
        "cordon-required",      "wait-for-jobs-required", "pod-deletion-required", "drain-required",
        "pod-restart-required", "validation-required",    "uncordon-required",     "upgrade-failed",
    };
    for (size_t i = 0; i < ARRAY_SIZE(busy); i++)
        if (streq_ptr(state, busy[i]))
            return true;
    return false;
}

static void check_upgrades(struct mig_plan *p, const struct mig_world *w)
{
    _cleanup_free_ char *busy = xstrdup("");
    size_t n_busy = 0, n_done = 0, n_required = 0, i;
    json_t *node;
    json_array_foreach ((json_t *)w->nodes, i, node) {
        const char *st = kobj_label(node, LABEL_UPGRADE);
        if (upgrade_in_flight(st)) {
            char *s = xasprintf("%s%s%s (%s)", busy, n_busy ? ", " : "", kobj_name(node), st);
            free(busy);
            busy = s;
            n_busy++;
        } else if (streq_ptr(st, "upgrade-done")) {
            n_done++;
        } else if (streq_ptr(st, "upgrade-required")) {
            n_required++;
        }
    }
    if (n_busy)
        check(p, "no driver upgrade in flight", false,
              xasprintf("%zu node(s) mid-upgrade: %s; let the upgrade finish (or fail and be "
                        "handled) first",
                        n_busy, busy));
    else
        check(p, "no driver upgrade in flight", true,
              xasprintf("upgrade-done on %zu node(s), upgrade-required on %zu (it waits for the "
                        "next operator)",
                        n_done, n_required));
}

/* The latest record of a release, or NULL; a record mid-operation fails the check. */
static const json_t *latest_release(struct mig_plan *p, const struct mig_world *w,
                                    const char *release, bool must_settle)
{
    const json_t *best = NULL;
    long long best_v = -1;
    size_t i;
    json_t *s;
    json_array_foreach ((json_t *)w->releases, i, s) {
        if (!streq_ptr(kobj_label(s, "owner"), "helm") ||
            !streq_ptr(kobj_label(s, "name"), release))
            continue;
        long long v = strtoll(kobj_label(s, "version") ?: "0", NULL, 10);
        if (v > best_v) {
            best_v = v;
            best = s;
        }
    }
    if (!must_settle)
        return best;
    const char *status = best ? kobj_label(best, "status") : NULL;
    if (best && status && strncmp(status, "pending-", 8) != 0 &&
        strcmp(status, "uninstalling") != 0) {
        check(p, "the release's record settled", true,
              xasprintf("Helm release %s, revision %lld, %s", release, best_v, status));
        return best;
    }
    if (best) {
        check(p, "the release's record settled", false,
              xasprintf("Helm release %s, revision %lld, is %s: let helm finish first", release,
                        best_v, status ? status : "of no status"));
        return NULL;
    }
    check(p, "the release's record settled", true,
          xasprintf("no Helm release %s in %s: no release record to change", release, w->ns));
    return NULL;
}

/* ---- writes ---------------------------------------------------------------------------------- */

static const json_t *find_obj(const struct mig_world *w, const char *kind, const char *name)
{
    size_t i;
    json_t *o;
    json_array_foreach ((json_t *)w->objects, i, o) {
        if (streq_ptr(kobj_kind(o), kind) && streq_ptr(kobj_name(o), name))
            return o;
    }
    return NULL;
}

/* Helm's ownership metadata of `release` on an object (skipped when it has it already). */
static void give_to_release(struct mig_plan *p, const struct mig_world *w, const json_t *obj,
                            const char *kind, const char *release)
{
    if (!obj || (adopt_helm_owned(obj, release, w->ns) &&
                 streq_ptr(kobj_label(obj, ADOPT_LABEL_MANAGED_BY), "Helm")))
        return;
    json_t *patch = json_pack("{s:{s:{s:s,s:s},s:{s:s}}}", "metadata", "annotations",
                              ADOPT_HELM_RELEASE_NAME, release, ADOPT_HELM_RELEASE_NAMESPACE, w->ns,
                              "labels", ADOPT_LABEL_MANAGED_BY, "Helm");
    const char *ns = streq_ptr(kind, "ClusterPolicy") ? NULL : w->ns;
    write_add(p, MIG_PATCH_MERGE, kind, ns, kobj_name(obj), patch,
              xasprintf("Helm's ownership metadata of release %s: `helm install %s` takes it over",
                        release, release));
}

/* The source release's record: every object kept, no delete hook. */
static int keep_release(struct mig_plan *p, const json_t *secret, const char *release,
                        struct err *e)
{
    if (!secret)
        return 0;
    if (kobj_annotation(secret, "migrate.gpuop.dev/kept"))
        return 0; /* done by an earlier run */
    _cleanup_json_ json_t *rel = NULL;
    int r = mig_release_decode(kobj_path_str(secret, "data.release"), &rel, e);
    if (r < 0)
        return err_prefix(e, "Secret %s", kobj_name(secret));
    size_t docs = 0, hooks = 0;
    if ((r = mig_release_keep_all(rel, &docs, &hooks, e)) < 0)
        return err_prefix(e, "Secret %s", kobj_name(secret));
    _cleanup_free_ char *data = NULL;
    if ((r = mig_release_encode(rel, &data, e)) < 0)
        return r;
    json_t *obj = json_deep_copy(secret);
    json_object_set_new(json_object_get(obj, "data"), "release", json_string(data));
    json_t *ann = kobj_ensure_keys(obj, (const char *const[]){"metadata", "annotations", NULL});
    _cleanup_free_ char *what = xasprintf("gpuop migrate: %zu object(s) kept, %zu delete hook(s) "
                                          "dropped",
                                          docs, hooks);
    json_object_set_new(ann, "migrate.gpuop.dev/kept", json_string(what));
    write_add(p, MIG_REPLACE, "Secret", kobj_namespace(secret), kobj_name(secret), obj,
              xasprintf("release %s's record: helm.sh/resource-policy keep on its %zu object(s), "
                        "its %zu pre-/post-delete hook(s) dropped: `helm uninstall %s` deletes "
                        "nothing",
                        release, docs, hooks, release));
    return 0;
}

/* NVIDIA's selectors (../shared/reference's facts) where they differ from gpuop's. */
static const char *const nvidia_part_of[][2] = {
    {"gpu-feature-discovery", "nvidia-gpu"},
    {"nvidia-operator-validator", "gpu-operator"},
};

static int plan_from_nvidia(struct mig_plan *p, const struct mig_world *w, const json_t *cp,
                            const json_t *dep, const json_t *rel, struct err *e)
{
    if (dep)
        write_add(p, MIG_DELETE, "Deployment", w->ns, kobj_name(dep), NULL,
                  xstrdup("NVIDIA's operator, at 0 replicas: its selector is not gpuop's chart's "
                          "and cannot change; gpuop's chart creates its own"));
    give_to_release(p, w, cp, "ClusterPolicy", w->release);
    give_to_release(p, w, find_obj(w, "ServiceAccount", "gpu-operator"), "ServiceAccount",
                    w->release);
    give_to_release(p, w, find_obj(w, "Service", "gpu-operator"), "Service", w->release);
    int r = keep_release(p, rel, w->nvidia_release, e);
    if (r < 0)
        return r;
    /* What gpuop's operator will do, its chart's objects counted as gpuop's. */
    _cleanup_json_ json_t *desired = NULL;
    if ((r = adopt_expected(cp, w->ns, &desired, e)) < 0)
        return r;
    const char *const chart[][2] = {{"ServiceAccount", "gpu-operator"},
                                    {"Service", "gpu-operator"}};
    for (size_t i = 0; i < ARRAY_SIZE(chart); i++)
        json_array_append_new(desired,
                              json_pack("{s:s,s:{s:s,s:s}}", "kind", chart[i][0], "metadata",
                                        "name", chart[i][1], "namespace", w->ns));
    struct adopt_input in = {.ns = w->ns,
                             .policy = cp,
                             .objects = w->objects,
                             .pods = w->pods,
                             .nodes = w->nodes,
                             .desired = desired};
    if ((r = adopt_plan(&in, &p->takeover, e)) < 0)
        return r;
    p->has_takeover = true;
    /* GPU access under gpuop's runtime handler */
    const char *strategy = NULL;
    size_t i;
    json_t *ev;
    json_array_foreach (kobj_path(cp, "spec.devicePlugin.env"), i, ev) {
        if (streq_ptr(kobj_str(ev, "name"), "DEVICE_LIST_STRATEGY"))
            strategy = kobj_str(ev, "value");
    }
    note(p, xstrdup("GPU access: containers that run keep the devices they were given; the "
                    "takeover restarts no workload and no driver. gpuop's runtime handler ignores "
                    "an unprivileged container's own NVIDIA_VISIBLE_DEVICES and gpuop's device "
                    "plugin gives devices as volume mounts (docs/runtime.md): a node's operands "
                    "are replaced together (toolkit, device plugin, the rest), so a pod admitted "
                    "there afterwards gets its GPUs from gpuop's plugin."));
    if (strategy && strstr(strategy, "envvar") && !strstr(strategy, "volume-mounts") &&
        !strstr(strategy, "cdi-"))
        note(p, xasprintf("GPU access: the ClusterPolicy sets devicePlugin.env "
                          "DEVICE_LIST_STRATEGY=%s: under gpuop's handler a new GPU pod would get "
                          "no GPU (the GPUAccess condition). Install gpuop's chart with "
                          "volume-mounts (or leave the variable out: gpuop's default).",
                          strategy));
    note(p, xasprintf("next: helm install %s <gpuop chart> -n %s --set operator.repository=<your "
                      "registry> -f <(helm get values %s -n %s)   (NVIDIA's values keep the "
                      "policy as it is; a driver version or template change then waits for the "
                      "upgrade controller and the pool's policy)",
                      w->release, w->ns, w->nvidia_release, w->ns));
    note(p, xasprintf("then: helm uninstall %s -n %s deletes nothing (its objects are kept); "
                      "NVIDIA's chart objects gpuop does not use (its operator's RBAC, NFD) stay "
                      "until you delete them",
                      w->nvidia_release, w->ns));
    return 0;
}

/* NVIDIA's operator applies the ClusterPolicy's spec.daemonsets.updateStrategy to every operand
 * DaemonSet (the driver's is always OnDelete): at OnDelete its DaemonSets replace none of gpuop's
 * pods on their own, and `gpuop migrate --to nvidia --roll` replaces them node by node. The
 * value it had is kept in an annotation, for the roll to print how to restore it. */
static void hold_update_strategy(struct mig_plan *p, const json_t *cp)
{
    const char *had = kobj_path_str(cp, "spec.daemonsets.updateStrategy");
    if (streq_ptr(had, "OnDelete"))
        return;
    const char *kept = kobj_annotation(cp, MIG_ANN_UPDATE_STRATEGY);
    json_t *patch =
        json_pack("{s:{s:{s:s}},s:{s:{s:s}}}", "metadata", "annotations", MIG_ANN_UPDATE_STRATEGY,
                  kept  ? kept
                  : had ? had
                        : "RollingUpdate",
                  "spec", "daemonsets", "updateStrategy", "OnDelete");
    write_add(p, MIG_PATCH_MERGE, "ClusterPolicy", NULL, kobj_name(cp), patch,
              xasprintf("spec.daemonsets.updateStrategy OnDelete (was %s): NVIDIA's DaemonSets "
                        "then replace no pod of gpuop's on their own; `gpuop migrate --to nvidia "
                        "--roll` replaces them node by node",
                        had ? had : "RollingUpdate, by default"));
}

static int plan_to_nvidia(struct mig_plan *p, const struct mig_world *w, const json_t *cp,
                          const json_t *dep, const json_t *rel, struct err *e)
{
    if (dep)
        write_add(p, MIG_DELETE, "Deployment", w->ns, kobj_name(dep), NULL,
                  xstrdup("gpuop's operator, at 0 replicas: NVIDIA's chart creates its own, "
                          "with another selector"));
    give_to_release(p, w, cp, "ClusterPolicy", w->nvidia_release);
    give_to_release(p, w, find_obj(w, "ServiceAccount", "gpu-operator"), "ServiceAccount",
                    w->nvidia_release);
    hold_update_strategy(p, cp);
    int r = keep_release(p, rel, w->release, e);
    if (r < 0)
        return r;
    size_t i;
    json_t *o;
    /* The device plugin surged on the way back as on the way there: a plugin of gpuop's stays
     * registered on each node (a pod of its own, its own socket) while NVIDIA's DaemonSet
     * replaces gpuop's plugin pod, so the kubelet never marks the node's GPUs unhealthy. */
    const json_t *dp = find_obj(w, "DaemonSet", ADOPT_DEVICE_PLUGIN_APP);
    if (dp && streq_ptr(kobj_label(dp, ADOPT_LABEL_MANAGED_BY), ADOPT_GPUOP_MANAGER)) {
        json_array_foreach ((json_t *)w->pods, i, o) {
            const char *node = kobj_path_str(o, "spec.nodeName");
            if (!node || !streq_ptr(kobj_label(o, "app"), ADOPT_DEVICE_PLUGIN_APP) ||
                kobj_deletion_timestamp(o))
                continue;
            _cleanup_free_ char *name = xasprintf("%s-%s", ADOPT_SURGE_APP, node);
            bool there = false;
            size_t k;
            json_t *q;
            json_array_foreach ((json_t *)w->pods, k, q) {
                there |= streq_ptr(kobj_name(q), name) && !kobj_deletion_timestamp(q);
            }
            json_t *pod = there ? NULL : adopt_surge_pod(dp, cp, w->ns, node);
            if (!there && !pod)
                continue;
            p->surge_pods++;
            if (pod)
                write_add(p, MIG_CREATE, "Pod", w->ns, name, pod,
                          xasprintf("gpuop's device plugin on node %s on a socket of its own: "
                                    "the node's GPUs stay registered while NVIDIA's plugin "
                                    "replaces gpuop's",
                                    node));
        }
    }
    json_array_foreach ((json_t *)w->objects, i, o) {
        if (!streq_ptr(kobj_kind(o), "DaemonSet") ||
            !streq_ptr(kobj_label(o, ADOPT_LABEL_MANAGED_BY), ADOPT_GPUOP_MANAGER))
            continue;
        const char *name = kobj_name(o);
        if (streq_ptr(name, ADOPT_TOOLKIT_DS)) {
            json_t *patch = adopt_toolkit_cleanup_patch(o);
            if (!p->toolkit_ds)
                p->toolkit_ds = xstrdup(name);
            if (patch)
                write_add(p, MIG_PATCH_STRATEGIC, "DaemonSet", w->ns, name, patch,
                          xstrdup("the toolkit's cleanup on (TOOLKIT_CLEANUP=true): as NVIDIA's "
                                  "toolkit pods replace gpuop's, each node's runtime "
                                  "configuration goes back to its bytes before gpuop, and the "
                                  "nvidia handler to NVIDIA's runtime"));
        }
        for (size_t k = 0; k < ARRAY_SIZE(nvidia_part_of); k++) {
            if (!streq_ptr(name, nvidia_part_of[k][0]))
                continue;
            write_add(p, MIG_DELETE_ORPHAN, "DaemonSet", w->ns, name, NULL,
                      xasprintf("NVIDIA's selector adds app.kubernetes.io/part-of=%s, which a "
                                "DaemonSet cannot change to: deleted with its pods orphaned "
                                "(they carry that label), NVIDIA's claims them",
                                nvidia_part_of[k][1]));
        }
    }
    /* what gpuop leaves behind */
    size_t rbac = 0, ann = 0;
    json_array_foreach ((json_t *)w->objects, i, o) {
        const char *k = kobj_kind(o);
        if (streq_ptr(kobj_label(o, ADOPT_LABEL_MANAGED_BY), ADOPT_GPUOP_MANAGER) &&
            (streq_ptr(k, "Role") || streq_ptr(k, "RoleBinding") || streq_ptr(k, "ClusterRole") ||
             streq_ptr(k, "ClusterRoleBinding")))
            rbac++;
    }
    json_t *node;
    json_array_foreach ((json_t *)w->nodes, i, node) {
        const char *k;
        json_t *v;
        json_object_foreach (kobj_annotations(node), k, v) {
            ann += strstr(k, "gpuop.dev/") != NULL;
        }
    }
    if (p->surge_pods)
        note(p, xasprintf("--roll removes each node's surge plugin once NVIDIA's device plugin "
                          "there has registered; all at once, by hand, once NVIDIA's plugin runs "
                          "on every node: kubectl -n %s delete pods -l app=%s (gpuop's %zu surge "
                          "device plugin pod(s); NVIDIA's plugin has taken the GPUs over by then, "
                          "so removing them changes nothing the kubelet sees)",
                          w->ns, ADOPT_SURGE_APP, p->surge_pods));
    note(p, xasprintf("left for you once NVIDIA's operands run on every node: gpuop's RBAC (%zu "
                      "object(s): kubectl delete clusterroles,clusterrolebindings,roles,"
                      "rolebindings -A -l app.kubernetes.io/managed-by=gpuop), its node "
                      "annotations (%zu: the gpuop.dev/, validation.gpuop.dev/ and "
                      "upgrade.gpuop.dev/ keys), and on each node /var/lib/gpuop/rtconfig (the "
                      "runtime configuration's backups and status) and the toolkit install "
                      "folder's gpuop-runtime",
                      rbac, ann));
    note(p, xasprintf("next: helm install %s nvidia/gpu-operator -n %s -f <your values> --set "
                      "daemonsets.updateStrategy=OnDelete (NVIDIA's chart takes the ClusterPolicy "
                      "and the ServiceAccount over; at OnDelete its DaemonSets replace none of "
                      "gpuop's pods on their own); then gpuop migrate --to nvidia -n %s --roll "
                      "replaces them node by node; helm uninstall %s -n %s then deletes nothing",
                      w->nvidia_release, w->ns, w->ns, w->release, w->ns));
    return 0;
}

int mig_plan(const struct mig_world *w, struct mig_plan *ret, struct err *e)
{
    struct mig_plan p = {.dir = w->dir, .notes = json_array()};
    const json_t *dep = NULL;
    check_stopped(&p, w, (json_t **)&dep);
    check_crds(&p, w);
    const json_t *cp = check_one_policy(&p, w);
    check_driver_owners(&p, w, cp);
    check_upgrades(&p, w);
    const char *source = w->dir == MIG_FROM_NVIDIA ? w->nvidia_release : w->release;
    const json_t *rel = latest_release(&p, w, source, true);
    const char *target = w->dir == MIG_FROM_NVIDIA ? w->release : w->nvidia_release;
    const json_t *existing = latest_release(&p, w, target, false);
    if (existing && !streq_ptr(kobj_label(existing, "status"), "uninstalled"))
        check(&p, "the target release is free", false,
              xasprintf("Helm release %s exists already in %s (%s): uninstall it or pick "
                        "another name",
                        target, w->ns, kobj_label(existing, "status") ?: "?"));
    if (p.refused) {
        *ret = p;
        return 0;
    }
    int r = w->dir == MIG_FROM_NVIDIA ? plan_from_nvidia(&p, w, cp, dep, rel, e)
                                      : plan_to_nvidia(&p, w, cp, dep, rel, e);
    if (r < 0) {
        mig_plan_done(&p);
        return r;
    }
    *ret = p;
    return 0;
}

void mig_plan_done(struct mig_plan *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n_checks; i++)
        free(p->checks[i].detail);
    free(p->checks);
    mig_writes_free(p->writes, p->n_writes);
    if (p->has_takeover)
        adopt_plan_done(&p->takeover);
    free(p->toolkit_ds);
    json_decref(p->notes);
    *p = (struct mig_plan){0};
}

static const char *write_verb(enum mig_write_kind k)
{
    switch (k) {
    case MIG_DELETE:
        return "delete";
    case MIG_DELETE_ORPHAN:
        return "orphan";
    case MIG_PATCH_MERGE:
    case MIG_PATCH_STRATEGIC:
        return "patch";
    case MIG_REPLACE:
        return "replace";
    case MIG_CREATE:
        return "create";
    }
    return "?";
}

/* sbuf_printf that remembers a failure (a text past the limit) in r */
#define OUT(...)                              \
    do {                                      \
        if (r == 0)                           \
            r = sbuf_printf(&b, __VA_ARGS__); \
    } while (0)

int mig_plan_text(const struct mig_plan *p, bool apply, char **ret, struct err *e)
{
    _cleanup_sbuf_ struct sbuf b;
    sbuf_init(&b, 1 << 20);
    int r = 0;
    OUT("gpuop migrate %s nvidia%s\npreconditions:\n",
        p->dir == MIG_FROM_NVIDIA ? "--from" : "--to", apply ? "" : " (dry run)");
    for (size_t i = 0; i < p->n_checks; i++)
        OUT("  %-4s %s: %s\n", p->checks[i].ok ? "ok" : "FAIL", p->checks[i].name,
            p->checks[i].detail);
    if (p->refused) {
        OUT("refused: a precondition failed; nothing was changed\n");
    } else {
        OUT("%s:\n", apply ? "changes" : "changes (made with --apply)");
        for (size_t i = 0; i < p->n_writes; i++) {
            const struct mig_write *w = &p->writes[i];
            OUT("  %-7s %s %s%s%s: %s\n", write_verb(w->kind), w->res_kind, w->ns ? w->ns : "",
                w->ns ? "/" : "", w->name, w->why);
        }
        if (p->n_writes == 0)
            OUT("  none: an earlier run made them\n");
        if (p->has_takeover) {
            _cleanup_free_ char *t = adopt_plan_text(&p->takeover);
            OUT("what gpuop's operator then does, %s", t);
        }
        size_t i;
        json_t *n;
        json_array_foreach (p->notes, i, n)
            OUT("%s\n", json_string_value(n));
    }
    if (r < 0)
        return err_set(e, r, "the plan's text is over %u bytes", 1u << 20);
    *ret = sbuf_steal(&b);
    return 0;
}
