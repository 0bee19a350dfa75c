/* SPDX-License-Identifier: Apache-2.0 */
/* gpuop's objects by name (adopt_expected): a table of deploy/operands. tests/adopt checks it
 * against the templates and tests/operator against the operator's render, so it cannot drift. */
#include <string.h>

#include "adopt-internal.h"
#include "kobj.h"

#define KV(...) ((const char *const[]){__VA_ARGS__, NULL})

/* A component as deploy/operands renders it. */
struct gpuop_operand {
    const char *spec_key;
    bool always;     /* rendered whenever a policy is active (the validator) */
    bool default_on; /* when spec.<key>.enabled is unset */
    const char *ds;
    const char *const *template_labels; /* pairs; the selector is app=<ds> */
    const char *const *objects;         /* "Kind", "name" pairs besides the DaemonSet */
    /* an object rendered only when a spec.<key> boolean is true: the path below the key, kind
     * and name (the exporter's ServiceMonitor) */
    const char *const *when;
};

static const struct gpuop_operand operands[] = {
    {"driver", false, true, "nvidia-driver-daemonset",
     KV("app", "nvidia-driver-daemonset", "app.kubernetes.io/component", "nvidia-driver"),
     KV("ServiceAccount", "nvidia-driver", "ClusterRole", "gpuop-nvidia-driver", "Role",
        "gpuop-nvidia-driver", "RoleBinding", "gpuop-nvidia-driver", "ClusterRoleBinding",
        "gpuop-nvidia-driver")},
    {"toolkit", false, true, "nvidia-container-toolkit-daemonset",
     KV("app", "nvidia-container-toolkit-daemonset"),
     KV("ServiceAccount", "nvidia-container-toolkit")},
    {"validator", true, true, "nvidia-operator-validator",
     KV("app", "nvidia-operator-validator", "app.kubernetes.io/part-of", "gpu-operator"),
     KV("ServiceAccount", "nvidia-operator-validator", "ClusterRole",
        "gpuop-nvidia-operator-validator", "Role", "gpuop-nvidia-operator-validator", "RoleBinding",
        "gpuop-nvidia-operator-validator", "ClusterRoleBinding",
        "gpuop-nvidia-operator-validator")},
    {"devicePlugin", false, true, "nvidia-device-plugin-daemonset",
     KV("app", "nvidia-device-plugin-daemonset"), KV("ServiceAccount", "nvidia-device-plugin")},
    {"dcgmExporter", false, true, "nvidia-dcgm-exporter", KV("app", "nvidia-dcgm-exporter"),
     KV("ServiceAccount", "nvidia-dcgm-exporter", "Service", "nvidia-dcgm-exporter"),
     KV("serviceMonitor.enabled", "ServiceMonitor", "nvidia-dcgm-exporter")},
    {"gfd", false, true, "gpu-feature-discovery",
     KV("app", "gpu-feature-discovery", "app.kubernetes.io/part-of", "nvidia-gpu"),
     KV("ServiceAccount", "nvidia-gpu-feature-discovery")},
    {"migManager", false, true, "nvidia-mig-manager", KV("app", "nvidia-mig-manager"),
     KV("ServiceAccount", "nvidia-mig-manager", "ClusterRole", "gpuop-nvidia-mig-manager",
        "ClusterRoleBinding", "gpuop-nvidia-mig-manager", "Role", "gpuop-nvidia-mig-manager",
        "RoleBinding", "gpuop-nvidia-mig-manager", "ConfigMap", "default-mig-parted-config")},
    {"nodeStatusExporter", false, false, "nvidia-node-status-exporter",
     KV("app", "nvidia-node-status-exporter"),
     KV("ServiceAccount", "nvidia-node-status-exporter", "ClusterRole",
        "gpuop-nvidia-node-status-exporter", "ClusterRoleBinding",
        "gpuop-nvidia-node-status-exporter")},
};

bool adopt_kind_namespaced(const char *kind)
{
    return !(streq_ptr(kind, "ClusterRole") || streq_ptr(kind, "ClusterRoleBinding") ||
             streq_ptr(kind, "RuntimeClass") || streq_ptr(kind, "Node"));
}

static json_t *object(const char *kind, const char *name, const char *ns)
{
    json_t *o = json_pack("{s:s,s:{s:s}}", "kind", kind, "metadata", "name", name);
    if (ns && adopt_kind_namespaced(kind))
        json_object_set_new(json_object_get(o, "metadata"), "namespace", json_string(ns));
    return o;
}

static bool enabled(const json_t *spec, const struct gpuop_operand *op)
{
    if (op->always)
        return true;
    json_t *en = kobj_path(json_object_get(spec, op->spec_key), "enabled");
    return json_is_boolean(en) ? json_is_true(en) : op->default_on;
}

int adopt_expected(const json_t *policy, const char *ns, json_t **ret, struct err *e)
{
    if (!json_is_object(policy))
        return err_set(e, -EINVAL, "ClusterPolicy: expected an object");
    const json_t *spec = json_object_get(policy, "spec");
    _cleanup_(json_decrefp) json_t *out = json_array();
    /* The RuntimeClass (operator.runtimeClass, "nvidia" by default). */
    const char *rc = kobj_path_str(spec, "operator.runtimeClass");
    json_array_append_new(out, object("RuntimeClass", rc && *rc ? rc : "nvidia", NULL));
    bool nvd_crd = json_is_true(kobj_path(spec, "driver.useNvidiaDriverCRD"));
    for (size_t i = 0; i < ARRAY_SIZE(operands); i++) {
        const struct gpuop_operand *op = &operands[i];
        if (!enabled(spec, op))
            continue;
        bool driver = strcmp(op->spec_key, "driver") == 0;
        for (const char *const *kv = op->objects; kv[0]; kv += 2)
            json_array_append_new(out, object(kv[0], kv[1], ns));
        if (op->when && json_is_true(kobj_path(json_object_get(spec, op->spec_key), op->when[0])))
            json_array_append_new(out, object(op->when[1], op->when[2], ns));
        if (driver && nvd_crd)
            continue; /* the NVIDIADrivers' DaemonSets, named per NVIDIADriver, instead */
        json_t *ds = object("DaemonSet", op->ds, ns);
        json_t *labels = json_object();
        for (const char *const *kv = op->template_labels; kv[0]; kv += 2)
            json_object_set_new(labels, kv[0], json_string(kv[1]));
        json_object_set_new(ds, "spec",
                            json_pack("{s:{s:{s:s}},s:{s:{s:o}}}", "selector", "matchLabels", "app",
                                      op->ds, "template", "metadata", "labels", labels));
        json_array_append_new(out, ds);
    }
    *ret = steal_ptr(&out);
    return 0;
}

const char *adopt_component_of_ds(const char *ds)
{
    for (size_t i = 0; i < ARRAY_SIZE(operands); i++)
        if (streq_ptr(operands[i].ds, ds))
            return operands[i].spec_key;
    return NULL;
}
