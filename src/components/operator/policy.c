/* SPDX-License-Identifier: Apache-2.0 */
/* ClusterPolicy -> struct op_policy. */
#include <stdlib.h>
#include <string.h>

#include "operator-internal.h"
#include "operator.h"
#include "yamlcfg.h"

static const struct op_component_def components[OP_N_COMPONENTS] = {
    [OP_DRIVER] = {"driver", "state-driver", "Driver", "nvidia-driver-daemonset",
                   "nvidia.com/gpu.deploy.driver", "driver.yaml", false, false},
    [OP_TOOLKIT] = {"toolkit", "state-container-toolkit", "ContainerToolkit",
                    "nvidia-container-toolkit-daemonset", "nvidia.com/gpu.deploy.container-toolkit",
                    "container-toolkit.yaml", false, false},
    [OP_VALIDATOR] = {"validator", "state-operator-validation", "OperatorValidation",
                      "nvidia-operator-validator", "nvidia.com/gpu.deploy.operator-validator",
                      "operator-validator.yaml", true, false},
    [OP_DEVICE_PLUGIN] = {"devicePlugin", "state-device-plugin", "DevicePlugin",
                          "nvidia-device-plugin-daemonset", "nvidia.com/gpu.deploy.device-plugin",
                          "device-plugin.yaml", false, false},
    /* gpuop's exporter reads NVML itself: no DCGM host engine is deployed (see docs). */
    [OP_DCGM] = {"dcgm", "state-dcgm", "DCGM", NULL, "nvidia.com/gpu.deploy.dcgm", NULL, false,
                 false},
    [OP_DCGM_EXPORTER] = {"dcgmExporter", "state-dcgm-exporter", "DCGMExporter",
                          "nvidia-dcgm-exporter", "nvidia.com/gpu.deploy.dcgm-exporter",
                          "dcgm-exporter.yaml", false, false},
    [OP_GFD] = {"gfd", "gpu-feature-discovery", "GPUFeatureDiscovery", "gpu-feature-discovery",
                "nvidia.com/gpu.deploy.gpu-feature-discovery", "gpu-feature-discovery.yaml", false,
                false},
    [OP_MIG_MANAGER] = {"migManager", "state-mig-manager", "MIGManager", "nvidia-mig-manager",
                        "nvidia.com/gpu.deploy.mig-manager", "mig-manager.yaml", false, true},
    [OP_NODE_STATUS_EXPORTER] = {"nodeStatusExporter", "state-node-status-exporter",
                                 "NodeStatusExporter", "nvidia-node-status-exporter",
                                 "nvidia.com/gpu.deploy.node-status-exporter",
                                 "node-status-exporter.yaml", false, false},
};

const struct op_component_def *op_component_def(enum op_component c)
{
    if ((unsigned)c >= OP_N_COMPONENTS)
        return NULL;
    return &components[c];
}

/* Components NVIDIA enables when `enabled` is unset. */
static bool default_enabled(enum op_component c)
{
    return c != OP_DCGM && c != OP_NODE_STATUS_EXPORTER;
}

static char *dup_or(const char *s, const char *fallback)
{
    return xstrdup(s && *s ? s : fallback);
}

static const char *jstr(const json_t *obj, const char *key)
{
    return json_string_value(json_object_get(obj, key));
}

/* repository/image:version, image alone as a full reference, or NULL when the section names
 * no image. */
char *op_image_ref(const json_t *sec)
{
    const char *repo = jstr(sec, "repository");
    const char *image = jstr(sec, "image");
    const char *version = jstr(sec, "version");
    if (image && *image && repo && *repo && version && *version)
        return xasprintf("%s/%s:%s", repo, image, version);
    if (image && *image && !(repo && *repo) && !(version && *version))
        return xstrdup(image);
    if (image && *image && version && *version)
        return xasprintf("%s:%s", image, version);
    return NULL;
}

/* ---- fields gpuop acts on ----------------------------------------------------------------- */

/* Paths under spec gpuop implements; "*" stands for any component section key. A set field
 * whose path has none of these as a prefix is reported (accepted, not acted on). */
static const char *const implemented[] = {
    "operator.runtimeClass",
    "operator.defaultRuntime", /* deprecated upstream too: the runtime is detected per node */
    "operator.initContainer",  /* deprecated upstream */
    "daemonsets.labels",
    "daemonsets.annotations",
    "daemonsets.tolerations",
    "daemonsets.priorityClassName",
    "daemonsets.updateStrategy",
    "daemonsets.rollingUpdate",
    "driver.upgradePolicy",      /* the upgrade controller, src/components/operator/upgrade-ctl.c */
    "driver.useNvidiaDriverCRD", /* per-pool drivers, src/components/operator/nvdriver.c */
    "*.enabled",
    "*.repository",
    "*.image",
    "*.version",
    "*.imagePullPolicy",
    "*.imagePullSecrets",
    "*.resources",
    "*.args",
    "*.env",
    "mig.strategy",
    "migManager.config.default",
    "devicePlugin.config",
    "devicePlugin.mps.root",
    "dcgmExporter.config.name",
    "dcgmExporter.annotations",
    "dcgmExporter.service.type",
    "toolkit.installDir",
    "driver.startupProbe", /* timings on the driver container's startup probe */
    "hostPaths",
    "cdi.enabled",
    "validator.driver.env",
    "validator.toolkit.env",
    "validator.cuda.env",
    "validator.plugin.env",
    "psp.enabled", /* PodSecurityPolicy no longer exists; nothing to do */
    "psa.enabled", /* the operand namespace's Pod Security labels (plan.c) */
    "*.hostNetwork",
    "dcgmExporter.serviceMonitor", /* a ServiceMonitor for the exporter (render.c) */
    /* the driver pod's settings, rendered as NVIDIA's operator renders them (render.c) */
    "driver.kernelModuleType",
    "driver.usePrecompiled",     /* one driver DaemonSet per kernel (plan.c) */
    "driver.kernelModuleConfig", /* its keys as /drivers/<key> (render-driver.c) */
    "driver.useOpenKernelModules",
    "driver.rdma",
    "driver.repoConfig",
    "driver.certConfig",
    "driver.licensingConfig",
    "driver.secretEnv",
    "gds",
    "gdrcopy",
    /* a GPUCluster's DRA kubelet plugin (gpucluster.c; env and resources are its
     * gpus.kubeletPlugin's) */
    "draDriver.imagePullPolicy",
    "draDriver.imagePullSecrets",
    "draDriver.env",
    "draDriver.resources",
    NULL,
};

/* Sections that only mean something with sandboxWorkloads.enabled. */
static const char *const sandbox_sections[] = {
    "vgpuManager", "vgpuDeviceManager",       "vfioManager", "sandboxDevicePlugin", "kataManager",
    "ccManager",   "kataSandboxDevicePlugin", NULL,
};

static bool is_component_key(const char *k)
{
    for (int c = 0; c < OP_N_COMPONENTS; c++)
        if (strcmp(components[c].spec_key, k) == 0)
            return true;
    return false;
}

static bool path_implemented(const char *path)
{
    const char *dot = strchr(path, '.');
    for (const char *const *p = implemented; *p; p++) {
        const char *pat = *p;
        if (pat[0] == '*' && dot) {
            _cleanup_free_ char *head = xstrndup(path, (size_t)(dot - path));
            if (!is_component_key(head))
                continue;
            if (str_has_prefix(dot, pat + 1) &&
                (dot[strlen(pat + 1)] == '\0' || dot[strlen(pat + 1)] == '.'))
                return true;
            continue;
        }
        size_t n = strlen(pat);
        if (strncmp(path, pat, n) == 0 && (path[n] == '\0' || path[n] == '.'))
            return true;
    }
    return false;
}

/* A value that asks for nothing: null, false, "", and mappings made only of such values. */
static bool inert(const json_t *v)
{
    if (json_is_object(v)) {
        const char *k;
        json_t *sub;
        json_object_foreach ((json_t *)v, k, sub) {
            if (!inert(sub))
                return false;
        }
        return true;
    }
    return json_is_null(v) || json_is_false(v) ||
           (json_is_string(v) && json_string_length(v) == 0) ||
           (json_is_array(v) && json_array_size(v) == 0);
}

/* Collects set-but-not-implemented paths, shortened to the first unimplemented level. */
static void collect_unimplemented(const json_t *v, const char *path, json_t *out)
{
    if (inert(v))
        return;
    if (path[0] && !path_implemented(path)) {
        /* Is any deeper path implemented? Then descend; else report here. */
        bool deeper = false;
        size_t n = strlen(path);
        for (const char *const *p = implemented; *p && !deeper; p++) {
            const char *pat = *p;
            if (pat[0] == '*') {
                const char *dot = strchr(path, '.');
                _cleanup_free_ char *head = xstrndup(path, dot ? (size_t)(dot - path) : n);
                if (is_component_key(head) && !dot)
                    deeper = true;
            } else if (strncmp(pat, path, n) == 0 && pat[n] == '.') {
                deeper = true;
            }
        }
        if (!deeper || !json_is_object(v)) {
            _cleanup_free_ char *full = xasprintf("spec.%s", path);
            json_array_append_new(out, json_string(full));
            return;
        }
    } else if (path[0]) {
        return; /* implemented: everything under it too */
    }
    if (!json_is_object(v))
        return;
    const char *k;
    json_t *sub;
    json_object_foreach ((json_t *)v, k, sub) {
        _cleanup_free_ char *p = path[0] ? xasprintf("%s.%s", path, k) : xstrdup(k);
        collect_unimplemented(sub, p, out);
    }
}

/* ---- the operand namespace ---------------------------------------------------------------- */

/* What gpuop set, read back from the namespace's annotation: {label: the value before, or
 * null}; an empty object when there is none or it does not parse (nothing then is restored). */
static json_t *psa_record(const json_t *ns)
{
    const char *a = kobj_str(kobj_annotations(ns), OP_PSA_ANNOTATION);
    json_t *rec = a ? json_loads(a, 0, NULL) : NULL;
    if (!json_is_object(rec)) {
        json_decref(rec);
        return json_object();
    }
    return rec;
}

json_t *op_psa_patch(const struct op_policy *p, const json_t *ns)
{
    static const char *const modes[] = {"enforce", "audit", "warn"};
    if (!ns)
        return NULL; /* not read: what was there before is unknown, nothing is written */
    const json_t *have = kobj_labels(ns);
    bool had_record = kobj_str(kobj_annotations(ns), OP_PSA_ANNOTATION) != NULL;
    _cleanup_json_ json_t *rec = psa_record(ns);
    _cleanup_json_ json_t *labels = json_object();
    _cleanup_json_ json_t *annotations = json_object();
    if (p && p->psa_enabled) {
        bool recorded = false;
        for (size_t i = 0; i < ARRAY_SIZE(modes); i++) {
            _cleanup_free_ char *key = xasprintf("pod-security.kubernetes.io/%s", modes[i]);
            const char *cur = kobj_str(have, key);
            if (streq_ptr(cur, "privileged"))
                continue; /* already so (the administrator's, or ours) */
            json_object_set_new(labels, key, json_string("privileged"));
            /* the first value gpuop replaced is the one restored, whatever it re-sets later */
            if (!json_object_get(rec, key)) {
                json_object_set_new(rec, key, cur ? json_string(cur) : json_null());
                recorded = true;
            }
        }
        if (recorded) {
            _cleanup_free_ char *v = json_dumps(rec, JSON_COMPACT | JSON_SORT_KEYS);
            json_object_set_new(annotations, OP_PSA_ANNOTATION, json_string(v));
        }
    } else if (had_record) {
        /* off: each label gpuop set goes back to what it was, unless someone changed it since */
        const char *key;
        json_t *before;
        json_object_foreach (rec, key, before) {
            if (strncmp(key, "pod-security.kubernetes.io/", 27) != 0)
                continue; /* an edited record names no other label */
            if (streq_ptr(kobj_str(have, key), "privileged"))
                json_object_set(labels, key, json_is_string(before) ? before : json_null());
        }
        json_object_set_new(annotations, OP_PSA_ANNOTATION, json_null());
    }
    if (json_object_size(labels) == 0 && json_object_size(annotations) == 0)
        return NULL;
    json_t *meta = json_object();
    if (json_object_size(labels) > 0)
        json_object_set(meta, "labels", labels);
    if (json_object_size(annotations) > 0)
        json_object_set(meta, "annotations", annotations);
    return json_pack("{s:o}", "metadata", meta);
}

const char *op_policy_kind(const struct op_policy *p)
{
    return p->gpucluster ? "GPUCluster" : "ClusterPolicy";
}

/* ---- parse -------------------------------------------------------------------------------- */

void op_policy_free(struct op_policy *p)
{
    if (!p)
        return;
    free(p->name);
    free(p->uid);
    for (int c = 0; c < OP_N_COMPONENTS; c++) {
        free(p->operand[c].image);
        free(p->operand[c].pull_policy);
    }
    free(p->mig_strategy);
    free(p->runtime_class);
    free(p->update_strategy);
    json_decref(p->max_unavailable);
    free(p->mig_config_default);
    free(p->driver_repository);
    free(p->driver_image);
    free(p->driver_version);
    free(p->namespace);
    free(p->operand_image);
    json_decref(p->unimplemented);
    free(p->gpu_access_msg);
    json_decref(p->cp);
    free(p);
}

/* The value of env entry `name` of a ClusterPolicy section's env list, or NULL. */
static const char *section_env(const json_t *sec, const char *name)
{
    size_t i;
    json_t *ev;
    json_array_foreach (json_object_get(sec, "env"), i, ev) {
        if (streq_ptr(jstr(ev, "name"), name))
            return jstr(ev, "value");
    }
    return NULL;
}

bool op_nvidia_exporter_file(const json_t *name, const json_t *value)
{
    const char *n = json_string_value(name), *v = json_string_value(value);
    return streq_ptr(n, "DCGM_EXPORTER_COLLECTORS") && v &&
           strncmp(v, "/etc/dcgm-exporter/", 19) == 0 &&
           strncmp(v, "/etc/dcgm-exporter/custom/", 26) != 0;
}

/* The toolkit's runtime handler is closed (docs/runtime.md): the policy asking to trust an
 * unprivileged container's NVIDIA_VISIBLE_DEVICES opens GPU isolation; a device plugin handing
 * out GPUs by that variable alone gives GPU pods none. Either is reported (only the policy's
 * env is read: a device plugin config file's deviceListStrategy is not). */
static void gpu_access_check(struct op_policy *p)
{
    if (!p->operand[OP_TOOLKIT].enabled)
        return;
    bool trusted = false;
    const char *acc = section_env(p->operand[OP_TOOLKIT].spec,
                                  "ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED");
    if (acc && parse_bool(acc, &trusted) == 0 && trusted) {
        p->gpu_access_reason = "EnvvarTrustedWhenUnprivileged";
        p->gpu_access_msg = xstrdup(
            "toolkit.env ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED is true: the "
            "nvidia runtime handler honours an unprivileged container's NVIDIA_VISIBLE_DEVICES, "
            "so any pod of the runtime class can use any GPU, allocated or not");
        return;
    }
    const char *list = section_env(p->operand[OP_DEVICE_PLUGIN].spec, "DEVICE_LIST_STRATEGY");
    if (!p->operand[OP_DEVICE_PLUGIN].enabled || !list || !strstr(list, "envvar") ||
        strstr(list, "volume-mounts") || strstr(list, "cdi-"))
        return;
    p->gpu_access_reason = "EnvvarListStrategyIgnored";
    p->gpu_access_msg = xasprintf(
        "devicePlugin.env DEVICE_LIST_STRATEGY is \"%s\": the nvidia runtime handler ignores "
        "NVIDIA_VISIBLE_DEVICES of unprivileged containers, so GPU pods get no GPU; use "
        "volume-mounts (gpuop's default) or cdi-cri",
        list);
}

int op_policy_parse(json_t *cp, const struct op_defaults *d, struct op_policy **ret, struct err *e)
{
    if (!json_is_object(cp))
        return err_set(e, -EINVAL, "ClusterPolicy: expected an object");
    json_t *meta = json_object_get(cp, "metadata");
    const char *name = jstr(meta, "name");
    if (!name || !*name)
        return err_set(e, -EINVAL, "ClusterPolicy: metadata.name is missing");
    json_t *spec = json_object_get(cp, "spec");
    if (!spec)
        spec = json_object(); /* leaked ref avoided below */
    else
        json_incref(spec);
    _cleanup_json_ json_t *spec_ref = spec;

    const json_t *schema = op_clusterpolicy_schema();
    const json_t *spec_schema = json_object_get(json_object_get(schema, "properties"), "spec");
    int r = op_schema_validate(spec_schema, spec, "spec", e);
    if (r < 0)
        return err_prefix(e, "ClusterPolicy \"%s\"", name);

    _cleanup_(op_policy_freep) struct op_policy *p = xcalloc(1, sizeof(*p));
    p->cp = json_incref(cp);
    p->gpucluster = streq_ptr(kobj_kind(cp), "GPUCluster");
    p->name = xstrdup(name);
    p->uid = dup_or(jstr(meta, "uid"), "");
    json_t *gen = json_object_get(meta, "generation");
    p->generation = json_is_integer(gen) ? (int64_t)json_integer_value(gen) : 0;
    p->namespace = dup_or(d ? d->namespace : NULL, "gpu-operator");
    p->operand_image = dup_or(d ? d->operand_image : NULL, "gpuop:" GPUOP_VERSION);
    p->unimplemented = json_array();

    /* The sample policy sets no enabled flag for some sections; unset means NVIDIA's default. */
    for (int c = 0; c < OP_N_COMPONENTS; c++) {
        json_t *sec = json_object_get(spec, components[c].spec_key);
        struct op_operand *o = &p->operand[c];
        o->spec = sec;
        json_t *en = json_object_get(sec, "enabled");
        o->enabled = components[c].always_enabled ? true
                     : json_is_boolean(en)        ? json_is_true(en)
                                                  : default_enabled(c);
        if (!components[c].ds_name)
            o->enabled = false; /* accepted; nothing of gpuop's to deploy (see dcgm) */
        const char *pp = jstr(sec, "imagePullPolicy");
        o->pull_policy = dup_or(pp, "IfNotPresent");
        _cleanup_free_ char *ref = op_image_ref(sec);
        if (c == OP_DRIVER) {
            o->image = ref ? steal_ptr(&ref) : xstrdup("nvcr.io/nvidia/driver");
        } else {
            /* Every other operand runs the operand image (--operand-image), never a section's
             * own: NVIDIA's per-component images do not run gpuop's subcommands, and telling a
             * gpuop image apart by its name would replace a mirrored one silently. */
            o->image = xstrdup(p->operand_image);
            if (ref) {
                _cleanup_free_ char *path = xasprintf("spec.%s.image", components[c].spec_key);
                json_array_append_new(p->unimplemented, json_string(path));
            }
        }
    }
    /* spec.dcgm.enabled=true is accepted but deploys nothing: say so once. */
    json_t *dcgm_en = json_object_get(json_object_get(spec, "dcgm"), "enabled");
    if (json_is_true(dcgm_en))
        json_array_append_new(p->unimplemented, json_string("spec.dcgm"));

    json_t *drv = json_object_get(spec, "driver");
    p->driver_repository = dup_or(jstr(drv, "repository"), "nvcr.io/nvidia");
    p->driver_image = dup_or(jstr(drv, "image"), "driver");
    /* No version: NVIDIA's operator falls back to the driver image its release ships with; a
     * bare repository/image would pull ":latest", which NVIDIA's driver images do not have. An
     * image given alone is a full reference (e.g. by digest): its version is unknown here. */
    const char *dimg = jstr(drv, "image"), *drepo = jstr(drv, "repository");
    bool full_ref =
        dimg && *dimg && !(drepo && *drepo) && !(jstr(drv, "version") && *jstr(drv, "version"));
    p->driver_version = dup_or(jstr(drv, "version"), full_ref ? "" : OP_DEFAULT_DRIVER_VERSION);

    p->use_nvidia_driver_crd = json_is_true(json_object_get(drv, "useNvidiaDriverCRD"));
    p->psa_enabled = json_is_true(json_object_get(json_object_get(spec, "psa"), "enabled"));
    if ((r = op_driver_settings_check(drv, spec, "spec", e)) < 0)
        return err_prefix(e, "ClusterPolicy \"%s\"", name);

    p->mig_strategy = dup_or(jstr(json_object_get(spec, "mig"), "strategy"), "single");
    p->runtime_class = dup_or(jstr(json_object_get(spec, "operator"), "runtimeClass"), "nvidia");
    json_t *ds = json_object_get(spec, "daemonsets");
    p->update_strategy = dup_or(jstr(ds, "updateStrategy"), "RollingUpdate");
    json_t *mu = json_object_get(json_object_get(ds, "rollingUpdate"), "maxUnavailable");
    /* The API server takes an int-or-string only as an integer or a percentage: "1" (as both
     * NVIDIA's sample and gpuop's write it) would make every DaemonSet create fail with 422. */
    if (mu && kobj_int_or_percent(mu, "spec.daemonsets.rollingUpdate.maxUnavailable",
                                  &p->max_unavailable, e) < 0)
        return err_prefix(e, "ClusterPolicy \"%s\"", name);
    /* gpuop renders no maxSurge (0), and the API server refuses both at 0. */
    if (p->max_unavailable && (json_is_integer(p->max_unavailable)
                                   ? json_integer_value(p->max_unavailable) == 0
                                   : strtol(json_string_value(p->max_unavailable), NULL, 10) == 0))
        return err_set(e, -EINVAL,
                       "ClusterPolicy \"%s\": spec.daemonsets.rollingUpdate.maxUnavailable: "
                       "Invalid value: may not be 0 when `maxSurge` is 0",
                       name);
    /* Quantities the API server would refuse in every DaemonSet of the component. */
    for (int c = 0; c < OP_N_COMPONENTS; c++) {
        json_t *res = json_object_get(p->operand[c].spec, "resources");
        static const char *const kinds[] = {"limits", "requests"};
        for (size_t k = 0; k < ARRAY_SIZE(kinds); k++) {
            const char *rk;
            json_t *q;
            json_object_foreach (json_object_get(res, kinds[k]), rk, q) {
                const char *qs = json_string_value(q);
                if (json_is_integer(q) && json_integer_value(q) >= 0)
                    continue;
                if (!qs || !op_quantity_valid(qs) || qs[0] == '-')
                    return err_set(e, -EINVAL,
                                   "ClusterPolicy \"%s\": spec.%s.resources.%s.%s: Invalid value: "
                                   "not a non-negative quantity (e.g. 100m, 64Mi, 2)",
                                   name, components[c].spec_key, kinds[k], rk);
            }
        }
    }
    /* absent: NVIDIA's all-disabled; "": no default layout (nodes are left unlabelled) */
    const char *mig_default =
        jstr(json_object_get(json_object_get(spec, "migManager"), "config"), "default");
    p->mig_config_default = xstrdup(mig_default ? mig_default : "all-disabled");

    /* Sandbox sections are inert unless sandbox workloads are on. */
    json_t *sw = json_object_get(spec, "sandboxWorkloads");
    bool sandbox = json_is_true(json_object_get(sw, "enabled"));
    _cleanup_json_ json_t *scan = json_deep_copy(spec);
    if (!sandbox) {
        for (const char *const *s = sandbox_sections; *s; s++)
            json_object_del(scan, *s);
        json_object_del(scan, "sandboxWorkloads");
    }
    for (int c = 0; c < OP_N_COMPONENTS; c++) {
        json_t *sec = json_object_get(scan, components[c].spec_key);
        /* reported above when they matter */
        json_object_del(sec, "repository");
        json_object_del(sec, "image");
        json_object_del(sec, "version");
    }
    json_object_del(scan, "dcgm");
    collect_unimplemented(scan, "", p->unimplemented);
    size_t k;
    json_t *ev;
    json_array_foreach (json_object_get(p->operand[OP_DCGM_EXPORTER].spec, "env"), k, ev) {
        if (op_nvidia_exporter_file(json_object_get(ev, "name"), json_object_get(ev, "value")))
            json_array_append_new(p->unimplemented,
                                  json_string("spec.dcgmExporter.env.DCGM_EXPORTER_COLLECTORS"));
    }
    gpu_access_check(p);
    *ret = steal_ptr(&p);
    return 0;
}
