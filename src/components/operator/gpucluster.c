/* SPDX-License-Identifier: Apache-2.0 */
/*
 * NVIDIA's GPUCluster (nvidia.com/v1alpha1): the DRA stack. A GPUCluster is read as the
 * ClusterPolicy it amounts to (the node stack with NVIDIA's defaults, its daemonsets, hostPaths
 * and exporter sections, no device plugin, no MIG manager) plus its draDriver section, which
 * renders the DRA kubelet plugin (`gpuop dra-plugin`), its RBAC and NVIDIA's DeviceClasses.
 * Pure.
 */
#include <assert.h>
#include <string.h>

#include "operator-internal.h"
#include "operator.h"
#include "upgrade.h"
#include "yamlcfg.h"

/* The GPUCluster CRD's one rule beyond its schema (x-kubernetes-validations). */
#define GC_NAME "gpu-cluster"

static json_t *section_or_empty(const json_t *spec, const char *key)
{
    json_t *v = json_object_get(spec, key);
    return json_is_object(v) ? json_deep_copy(v) : json_object();
}

int op_gpucluster_policy(const json_t *gc, bool nvidia_drivers, json_t **ret_cp, struct err *e)
{
    const char *name = kobj_name(gc);
    if (!name || !*name)
        return err_set(e, -EINVAL, "GPUCluster: metadata.name is missing");
    if (strcmp(name, GC_NAME) != 0)
        return err_set(e, -EINVAL,
                       "GPUCluster \"%s\": metadata.name: Invalid value: \"%s\": GPUCluster is a "
                       "singleton, metadata.name must be '" GC_NAME "'",
                       name, name);
    const json_t *spec = json_object_get(gc, "spec");
    _cleanup_json_ json_t *empty = json_object();
    const json_t *spec_schema = kobj_at(op_gpucluster_schema(), "properties", "spec");
    int r = op_schema_validate(spec_schema, json_is_object(spec) ? spec : empty, "spec", e);
    if (r < 0)
        return err_prefix(e, "GPUCluster \"%s\"", name);

    /* draDriver: the kubelet plugin's section. Its container's env and resources (NVIDIA's
     * gpus.kubeletPlugin) move up to where the renderer reads a section's; the image parts are
     * reported as a ClusterPolicy section's are (gpuop runs its operand image). */
    json_t *dra = section_or_empty(spec, "draDriver");
    json_t *kp = kobj_path(dra, "gpus.kubeletPlugin");
    static const char *const moved[] = {"env", "resources"};
    for (size_t i = 0; i < ARRAY_SIZE(moved); i++) {
        json_t *v = json_object_get(kp, moved[i]);
        if (v)
            json_object_set(dra, moved[i], v);
        json_object_del(kp, moved[i]);
    }
    if (kp && json_object_size(kp) == 0)
        json_object_del(json_object_get(dra, "gpus"), "kubeletPlugin");
    json_t *gpus = json_object_get(dra, "gpus");
    if (gpus && json_is_object(gpus) && json_object_size(gpus) == 0)
        json_object_del(dra, "gpus");
    static const char *const kinds[] = {"limits", "requests"};
    for (size_t k = 0; k < ARRAY_SIZE(kinds); k++) {
        const char *rk;
        json_t *q;
        json_object_foreach (
            kobj_path(dra, kinds[k][0] == 'l' ? "resources.limits" : "resources.requests"), rk, q) {
            const char *qs = json_string_value(q);
            if (json_is_integer(q) && json_integer_value(q) >= 0)
                continue;
            if (!qs || !op_quantity_valid(qs) || qs[0] == '-') {
                /* rk lives in dra */
                r = err_set(e, -EINVAL,
                            "GPUCluster \"%s\": spec.draDriver.gpus.kubeletPlugin.resources.%s.%s: "
                            "Invalid value: not a non-negative quantity (e.g. 100m, 64Mi, 2)",
                            name, kinds[k], rk);
                json_decref(dra);
                return r;
            }
        }
    }
    _cleanup_free_ char *ref = op_image_ref(dra);
    json_object_del(dra, "repository");
    json_object_del(dra, "version");
    json_object_del(dra, "image");
    if (ref)
        json_object_set_new(dra, "image", json_string(ref));

    json_t *s = json_pack("{s:{},s:o,s:o,s:o,s:{s:b},s:{s:b},s:{},s:{},s:{},s:{},s:{},s:o}",
                          "operator", "daemonsets", section_or_empty(spec, "daemonsets"), "dcgm",
                          section_or_empty(spec, "dcgm"), "dcgmExporter",
                          section_or_empty(spec, "dcgmExporter"), "devicePlugin", "enabled", 0,
                          "migManager", "enabled", 0, "driver", "toolkit", "gfd",
                          "nodeStatusExporter", "validator", "draDriver", dra);
    /* NVIDIADrivers exist: they own the driver, per pool (NVIDIA's GPUCluster leaves the driver
     * to them); none: the driver DaemonSet as a ClusterPolicy's defaults render it */
    if (nvidia_drivers)
        json_object_set_new(json_object_get(s, "driver"), "useNvidiaDriverCRD", json_true());
    json_t *hp = json_object_get(spec, "hostPaths");
    if (json_is_object(hp))
        json_object_set_new(s, "hostPaths", json_deep_copy(hp));
    json_t *cp = json_deep_copy(gc);
    json_object_set_new(cp, "spec", s);
    json_object_set_new(cp, "kind", json_string("GPUCluster"));
    json_object_set_new(cp, "apiVersion", json_string("nvidia.com/v1alpha1"));
    *ret_cp = cp;
    return 0;
}

json_t *op_gpucluster_status(json_t *status)
{
    /* What the CRD's status holds: state (ready, notReady or disabled), namespace, conditions.
     * Anything else the API server would prune, and the status would never read back equal. */
    static const char *const keep[] = {"state", "namespace", "conditions"};
    json_t *out = json_object();
    for (size_t i = 0; i < ARRAY_SIZE(keep); i++) {
        json_t *v = json_object_get(status, keep[i]);
        if (v)
            json_object_set(out, keep[i], v);
    }
    const char *state = kobj_str(out, "state");
    if (state && strcmp(state, "ready") != 0 && strcmp(state, "disabled") != 0)
        json_object_set_new(out, "state", json_string("notReady"));
    json_decref(status);
    return out;
}

/* The validator on a GPUCluster's nodes: no device plugin, so no plugin check (it compares the
 * node's allocatable nvidia.com/gpu with the GPUs, which a DRA node does not advertise); the
 * pod is Ready while the driver, toolkit and CUDA checks' files are there. */
static void validator_without_plugin(json_t *ds)
{
    json_t *podspec = kobj_path(ds, "spec.template.spec");
    json_t *inits = json_object_get(podspec, "initContainers");
    for (size_t i = json_array_size(inits); i-- > 0;) {
        if (streq_ptr(kobj_str(json_array_get(inits, i), "name"), "plugin-validation"))
            json_array_remove(inits, i);
    }
    json_t *main = op_find_container(podspec, "containers", "nvidia-operator-validator");
    if (!main)
        return;
    /* all-done, and its readiness probe, without the plugin's file */
    json_array_append_new(json_object_get(main, "args"), json_string("--without-plugin"));
    json_array_append_new(kobj_path(main, "readinessProbe.exec.command"),
                          json_string("--without-plugin"));
}

/* Under a ClusterPolicy the kubelet plugin runs only on the nodes its DriverUpgradePools moved
 * to DRA (labelled UPG_LABEL_DEPLOY_DRA=true, after their device plugin stopped): a node never
 * runs both. */
static void dra_only_on_labelled(json_t *ds)
{
    json_t *terms = kobj_path(
        ds,
        "spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
        ".nodeSelectorTerms");
    size_t i;
    json_t *term;
    json_array_foreach (terms, i, term) {
        json_t *exprs = json_object_get(term, "matchExpressions");
        if (json_is_array(exprs))
            json_array_append_new(exprs, json_pack("{s:s,s:s,s:[s]}", "key", UPG_LABEL_DEPLOY_DRA,
                                                   "operator", "In", "values", "true"));
    }
}

int op_render_dra(const struct op_policy *p, const struct op_templates *t,
                  const struct op_render_ctx *ctx, json_t *all, struct err *e)
{
    assert(p->gpucluster || p->dra_nodes);
    size_t i;
    json_t *obj;
    json_array_foreach (all, i, obj) {
        if (p->gpucluster && streq_ptr(kobj_kind(obj), "DaemonSet") &&
            streq_ptr(kobj_name(obj), op_component_def(OP_VALIDATOR)->ds_name))
            validator_without_plugin(obj);
    }
    const json_t *dra = json_object_get(json_object_get(p->cp, "spec"), "draDriver");
    _cleanup_json_ json_t *vars = op_render_vars(p, OP_DEVICE_PLUGIN, ctx);
    const char *pp = kobj_str(dra, "imagePullPolicy");
    json_object_set_new(vars, "PULL_POLICY", json_string(pp && *pp ? pp : "IfNotPresent"));
    json_object_set_new(vars, "IMAGE", json_string(p->operand_image));
    _cleanup_json_ json_t *docs = NULL;
    int r = op_render_file(t, OP_DRA_TEMPLATE, vars, &docs, e);
    if (r < 0)
        return err_prefix(e, "render draDriver");
    json_array_foreach (docs, i, obj) {
        if (!streq_ptr(kobj_kind(obj), "DaemonSet"))
            continue;
        /* the common settings (daemonsets.*), then the section's own */
        op_daemonset_overrides(obj, p, OP_DEVICE_PLUGIN, ctx);
        if (!p->gpucluster)
            dra_only_on_labelled(obj);
        json_t *podspec = kobj_path(obj, "spec.template.spec");
        op_apply_pull_secrets(podspec, json_object_get(dra, "imagePullSecrets"));
        json_t *main = op_find_container(podspec, "containers", NULL);
        op_merge_env(main, json_object_get(dra, "env"));
        json_t *res = json_object_get(dra, "resources");
        if (main && json_is_object(res) && json_object_size(res) > 0)
            json_object_set(main, "resources", res);
    }
    json_array_extend(all, docs);
    return 0;
}
