/* SPDX-License-Identifier: Apache-2.0 */
/* Operand rendering: deploy/operands templates + the ClusterPolicy -> Kubernetes objects. */
#include <dirent.h>
#include <string.h>

#include "operator-internal.h"
#include "operator.h"
#include "yamlcfg.h"

/* ---- templates ---------------------------------------------------------------------------- */

struct op_templates {
    json_t *files; /* name -> string */
};

void op_templates_free(struct op_templates *t)
{
    if (!t)
        return;
    json_decref(t->files);
    free(t);
}

int op_templates_builtin(struct op_templates **ret, struct err *e)
{
    (void)e;
    struct op_templates *t = xcalloc(1, sizeof(*t));
    t->files = json_object();
    for (const struct embedded_file *f = op_embedded_operands; f->name; f++)
        json_object_set_new(t->files, f->name, json_stringn(f->data, f->len));
    *ret = t;
    return 0;
}

int op_templates_load_dir(struct op_templates *t, const char *dir, struct err *e)
{
    DIR *d = opendir(dir);
    if (!d)
        return err_errno(e, -errno, "open operand templates \"%s\"", dir);
    struct dirent *de;
    int r = 0;
    while ((de = readdir(d))) {
        if (!str_has_suffix(de->d_name, ".yaml"))
            continue;
        _cleanup_free_ char *path = xasprintf("%s/%s", dir, de->d_name);
        _cleanup_free_ char *buf = NULL;
        size_t len = 0;
        r = file_read_all(path, 1u << 20, &buf, &len, e);
        if (r < 0)
            break;
        /* A template that does not parse is refused here, not at render time. */
        json_t *docs = NULL;
        r = yaml_parse_all(buf, len, path, &docs, e);
        if (r < 0)
            break;
        json_decref(docs);
        json_object_set_new(t->files, de->d_name, json_stringn(buf, len));
    }
    closedir(d);
    return r;
}

/* ---- variable substitution ---------------------------------------------------------------- */

/* Replaces ${NAME} in s from vars (string values). Unknown names are an error. */
static int subst_string(const char *s, const json_t *vars, const char *tname, char **ret,
                        struct err *e)
{
    struct sbuf b _cleanup_sbuf_;
    sbuf_init(&b, 1u << 20);
    const char *p = s;
    while (*p) {
        const char *start = strstr(p, "${");
        if (!start) {
            sbuf_adds(&b, p);
            break;
        }
        sbuf_add(&b, p, (size_t)(start - p));
        const char *end = strchr(start, '}');
        if (!end)
            return err_set(e, -EINVAL, "template %s: unterminated ${ in \"%s\"", tname, s);
        _cleanup_free_ char *name = xstrndup(start + 2, (size_t)(end - start - 2));
        json_t *v = json_object_get(vars, name);
        if (!json_is_string(v))
            return err_set(e, -EINVAL, "template %s: unknown variable ${%s}", tname, name);
        sbuf_adds(&b, json_string_value(v));
        p = end + 1;
    }
    int r = sbuf_check_err(&b, e, "template %s: \"%.64s\" after substitution", tname, s);
    if (r < 0)
        return r;
    *ret = sbuf_steal(&b);
    return 0;
}

static int subst(json_t *node, const json_t *vars, const char *tname, json_t **ret, struct err *e)
{
    if (json_is_string(node)) {
        _cleanup_free_ char *out = NULL;
        int r = subst_string(json_string_value(node), vars, tname, &out, e);
        if (r < 0)
            return r;
        *ret = json_string(out);
        return 0;
    }
    if (json_is_array(node)) {
        json_t *arr = json_array();
        size_t i;
        json_t *v;
        json_array_foreach (node, i, v) {
            json_t *nv = NULL;
            int r = subst(v, vars, tname, &nv, e);
            if (r < 0) {
                json_decref(arr);
                return r;
            }
            json_array_append_new(arr, nv);
        }
        *ret = arr;
        return 0;
    }
    if (json_is_object(node)) {
        json_t *obj = json_object();
        const char *k;
        json_t *v;
        json_object_foreach (node, k, v) {
            _cleanup_free_ char *nk = NULL;
            json_t *nv = NULL;
            int r = subst_string(k, vars, tname, &nk, e);
            if (r == 0)
                r = subst(v, vars, tname, &nv, e);
            if (r < 0) {
                json_decref(obj);
                return r;
            }
            json_object_set_new(obj, nk, nv);
        }
        *ret = obj;
        return 0;
    }
    *ret = json_incref(node);
    return 0;
}

/* ---- hashing ------------------------------------------------------------------------------ */

uint64_t op_fnv64(const char *s)
{
    return s ? hash_fnv1a64(s, strlen(s)) : hash_fnv1a64("", 0);
}

char *op_object_hash(const json_t *obj)
{
    _cleanup_json_ json_t *c = json_deep_copy(obj);
    json_object_del(c, "status");
    json_t *ann = json_object_get(json_object_get(c, "metadata"), "annotations");
    json_object_del(ann, OP_HASH_ANNOTATION);
    if (json_is_object(ann) && json_object_size(ann) == 0)
        json_object_del(json_object_get(c, "metadata"), "annotations");
    _cleanup_free_ char *s = json_dumps(c, JSON_COMPACT | JSON_SORT_KEYS);
    return xasprintf("%016llx", (unsigned long long)op_fnv64(s));
}

/* ---- structural overrides ------------------------------------------------------------------ */

static json_t *obj_path(json_t *root, const char *const *keys)
{
    json_t *cur = root;
    for (; *keys; keys++) {
        json_t *next = json_object_get(cur, *keys);
        if (!json_is_object(next)) {
            next = json_object();
            json_object_set_new(cur, *keys, next);
        }
        cur = next;
    }
    return cur;
}

static void merge_string_map(json_t *dst, const json_t *src)
{
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *)src, k, v) {
        if (json_is_string(v))
            json_object_set(dst, k, v);
    }
}

/* env lists merge by name: the policy's entries replace the template's of the same name. */
void op_merge_env(json_t *container, const json_t *env)
{
    if (!json_is_array(env) || json_array_size(env) == 0)
        return;
    json_t *cur = json_object_get(container, "env");
    if (!json_is_array(cur)) {
        cur = json_array();
        json_object_set_new(container, "env", cur);
    }
    size_t i;
    json_t *ev;
    json_array_foreach (env, i, ev) {
        const char *name = json_string_value(json_object_get(ev, "name"));
        if (!name)
            continue;
        bool replaced = false;
        size_t j;
        json_t *old;
        json_array_foreach (cur, j, old) {
            if (streq_ptr(json_string_value(json_object_get(old, "name")), name)) {
                json_array_set(cur, j, ev);
                replaced = true;
                break;
            }
        }
        if (!replaced)
            json_array_append(cur, ev);
    }
}

json_t *op_find_container(json_t *podspec, const char *list, const char *name)
{
    json_t *arr = json_object_get(podspec, list);
    size_t i;
    json_t *c;
    json_array_foreach (arr, i, c) {
        if (!name || streq_ptr(json_string_value(json_object_get(c, "name")), name))
            return c;
    }
    return NULL;
}

void op_apply_pull_secrets(json_t *podspec, const json_t *secrets)
{
    if (!json_is_array(secrets) || json_array_size(secrets) == 0)
        return;
    json_t *out = json_array();
    size_t i;
    json_t *s;
    json_array_foreach (secrets, i, s) {
        if (json_is_string(s))
            json_array_append_new(out, json_pack("{s:O}", "name", s));
        else if (json_is_object(s))
            json_array_append(out, s);
    }
    json_object_set_new(podspec, "imagePullSecrets", out);
}

/* Applies the ClusterPolicy's common and per-component settings to a DaemonSet. */
void op_daemonset_overrides(json_t *ds, const struct op_policy *p, enum op_component c,
                            const struct op_render_ctx *ctx)
{
    const json_t *spec = json_object_get(p->cp, "spec");
    const json_t *common = json_object_get(spec, "daemonsets");
    const json_t *sec = p->operand[c].spec;
    static const char *const podspec_path[] = {"spec", "template", "spec", NULL};
    static const char *const podmeta_path[] = {"spec", "template", "metadata", NULL};
    json_t *podspec = obj_path(ds, podspec_path);
    json_t *podmeta = obj_path(ds, podmeta_path);

    /* Update strategy: the driver always OnDelete (upgrades are driven node by node). */
    json_t *dsspec = json_object_get(ds, "spec");
    if (c == OP_DRIVER) {
        json_object_set_new(dsspec, "updateStrategy", json_pack("{s:s}", "type", "OnDelete"));
    } else if (strcmp(p->update_strategy, "OnDelete") == 0) {
        json_object_set_new(dsspec, "updateStrategy", json_pack("{s:s}", "type", "OnDelete"));
    } else {
        json_t *us = json_pack("{s:s}", "type", "RollingUpdate");
        if (p->max_unavailable)
            json_object_set_new(us, "rollingUpdate",
                                json_pack("{s:O}", "maxUnavailable", p->max_unavailable));
        json_object_set_new(dsspec, "updateStrategy", us);
    }

    /* Common labels/annotations on the pods; never over the selector label `app`. */
    json_t *labels = json_object_get(podmeta, "labels");
    const char *app = json_string_value(json_object_get(labels, "app"));
    _cleanup_free_ char *app_keep = xstrdup(app ? app : "");
    merge_string_map(obj_path(podmeta, (const char *const[]){"labels", NULL}),
                     json_object_get(common, "labels"));
    if (app)
        json_object_set_new(json_object_get(podmeta, "labels"), "app", json_string(app_keep));
    /* The pods say who manages them as the DaemonSet does: a policy written by NVIDIA's chart
     * sets app.kubernetes.io/managed-by=gpu-operator among daemonsets.labels, which would make
     * gpuop's pods look like NVIDIA's operator's (the takeover, src/lib/adopt, tells them apart
     * by it). A policy without that label keeps its templates as they were. */
    json_t *plabels = json_object_get(podmeta, "labels");
    if (json_object_get(plabels, "app.kubernetes.io/managed-by"))
        json_object_set_new(plabels, "app.kubernetes.io/managed-by", json_string(OP_MANAGED_BY));
    merge_string_map(obj_path(podmeta, (const char *const[]){"annotations", NULL}),
                     json_object_get(common, "annotations"));
    if (c == OP_DCGM_EXPORTER)
        merge_string_map(obj_path(podmeta, (const char *const[]){"annotations", NULL}),
                         json_object_get(sec, "annotations"));
    json_t *ann = json_object_get(podmeta, "annotations");
    if (json_is_object(ann) && json_object_size(ann) == 0)
        json_object_del(podmeta, "annotations");

    const char *pc = json_string_value(json_object_get(common, "priorityClassName"));
    if (pc && *pc)
        json_object_set_new(podspec, "priorityClassName", json_string(pc));
    json_t *tol = json_object_get(common, "tolerations");
    if (json_is_array(tol) && json_array_size(tol) > 0) {
        json_t *cur = json_object_get(podspec, "tolerations");
        if (!json_is_array(cur)) {
            cur = json_array();
            json_object_set_new(podspec, "tolerations", cur);
        }
        size_t i;
        json_t *t;
        json_array_foreach (tol, i, t) {
            bool dup = false;
            size_t j;
            json_t *o;
            json_array_foreach (cur, j, o) {
                if (json_equal(o, t))
                    dup = true;
            }
            if (!dup)
                json_array_append(cur, t);
        }
    }

    json_t *hn = json_object_get(sec, "hostNetwork");
    if (json_is_true(hn)) {
        json_object_set_new(podspec, "hostNetwork", json_true());
        /* cluster names still resolve from the host's network namespace */
        json_object_set_new(podspec, "dnsPolicy", json_string("ClusterFirstWithHostNet"));
    }
    op_apply_pull_secrets(podspec, json_object_get(sec, "imagePullSecrets"));
    if (c == OP_DRIVER) {
        /* an NVIDIADriver's spec carries its own gds and gdrcopy; the ClusterPolicy's are
         * top-level sections */
        const json_t *gds = json_object_get(sec, "gds") ? json_object_get(sec, "gds")
                                                        : json_object_get(spec, "gds");
        const json_t *gdr = json_object_get(sec, "gdrcopy") ? json_object_get(sec, "gdrcopy")
                                                            : json_object_get(spec, "gdrcopy");
        op_driver_settings_apply(podspec, sec, gds, gdr, ctx);
    }

    /* The main container: the first of `containers`. */
    json_t *main = op_find_container(podspec, "containers", NULL);
    if (main) {
        op_merge_env(main, json_object_get(sec, "env"));
        json_t *res = json_object_get(sec, "resources");
        if (json_is_object(res) && json_object_size(res) > 0)
            json_object_set(main, "resources", res);
        json_t *args = json_object_get(sec, "args");
        if (json_is_array(args) && json_array_size(args) > 0) {
            json_t *cur = json_object_get(main, "args");
            if (c == OP_DRIVER || !json_is_array(cur)) {
                json_object_set(main, "args", args); /* the driver image's own arguments */
            } else {
                size_t i;
                json_t *a;
                json_array_foreach (args, i, a) {
                    json_array_append(cur, a);
                }
            }
        }
    }
    /* The policy's probe timings (NVIDIA's driver.startupProbe, ...) on the probes the template
     * defines; the handler stays the template's. A probe the template lacks stays unsupported. */
    static const char *const probes[] = {"startupProbe", "livenessProbe", "readinessProbe"};
    static const char *const timings[] = {"initialDelaySeconds", "periodSeconds", "timeoutSeconds",
                                          "failureThreshold", "successThreshold"};
    for (size_t k = 0; main && k < ARRAY_SIZE(probes); k++) {
        json_t *want = json_object_get(sec, probes[k]);
        json_t *have = json_object_get(main, probes[k]);
        if (!json_is_object(want) || !json_is_object(have))
            continue;
        for (size_t t = 0; t < ARRAY_SIZE(timings); t++) {
            if (strcmp(timings[t], "successThreshold") == 0 && strcmp(probes[k], "readinessProbe"))
                continue; /* must be 1 on startup and liveness probes */
            json_t *v = json_object_get(want, timings[t]);
            if (json_is_integer(v))
                json_object_set(have, timings[t], v);
        }
    }
    /* The validator's per-check environment goes to that check's init container. */
    if (c == OP_VALIDATOR) {
        /* validator.env reaches every check; validator.<check>.env only that check. */
        size_t k;
        json_t *ic0;
        json_array_foreach (json_object_get(podspec, "initContainers"), k, ic0) {
            op_merge_env(ic0, json_object_get(sec, "env"));
        }
        static const char *const checks[][2] = {{"driver", "driver-validation"},
                                                {"toolkit", "toolkit-validation"},
                                                {"cuda", "cuda-validation"},
                                                {"plugin", "plugin-validation"}};
        for (size_t i = 0; i < ARRAY_SIZE(checks); i++) {
            json_t *ic = op_find_container(podspec, "initContainers", checks[i][1]);
            if (ic)
                op_merge_env(ic, json_object_get(json_object_get(sec, checks[i][0]), "env"));
        }
    }
    /* A counters file of NVIDIA's exporter image (NVIDIA's chart sets DCGM_EXPORTER_COLLECTORS
     * to /etc/dcgm-exporter/dcp-metrics-included.csv): gpuop's image has none, so its exporter
     * keeps its built-in set (dcgm-exporter's defaults; the DCP fields have no NVML counter). */
    if (c == OP_DCGM_EXPORTER && main) {
        json_t *env = json_object_get(main, "env");
        for (size_t k = json_array_size(env); k-- > 0;) {
            json_t *ev = json_array_get(env, k);
            if (op_nvidia_exporter_file(json_object_get(ev, "name"), json_object_get(ev, "value")))
                json_array_remove(env, k);
        }
    }
    /* Device plugin and exporter configuration from ConfigMaps the user names. */
    if (c == OP_DEVICE_PLUGIN || c == OP_DCGM_EXPORTER) {
        const char *cm = json_string_value(json_object_get(json_object_get(sec, "config"), "name"));
        if (cm && *cm && main) {
            json_t *vols = json_object_get(podspec, "volumes");
            json_t *mounts = json_object_get(main, "volumeMounts");
            const char *mpath = c == OP_DEVICE_PLUGIN ? "/config" : "/etc/dcgm-exporter/custom";
            json_array_append_new(
                vols, json_pack("{s:s,s:{s:s}}", "name", "config", "configMap", "name", cm));
            json_array_append_new(mounts, json_pack("{s:s,s:s,s:b}", "name", "config", "mountPath",
                                                    mpath, "readOnly", 1));
            if (c == OP_DCGM_EXPORTER) {
                _cleanup_json_ json_t *env =
                    json_pack("[{s:s,s:s}]", "name", "DCGM_EXPORTER_COLLECTORS", "value",
                              "/etc/dcgm-exporter/custom/dcgm-metrics.csv");
                op_merge_env(main, env);
            }
        }
    }
}

static void add_owner_and_labels(json_t *obj, const struct op_policy *p)
{
    json_t *meta = json_object_get(obj, "metadata");
    if (!json_is_object(meta)) {
        meta = json_object();
        json_object_set_new(obj, "metadata", meta);
    }
    json_t *labels = obj_path(meta, (const char *const[]){"labels", NULL});
    json_object_set_new(labels, "app.kubernetes.io/managed-by", json_string(OP_MANAGED_BY));
    json_object_set_new(meta, "ownerReferences",
                        json_pack("[{s:s,s:s,s:s,s:s,s:b,s:b}]", "apiVersion",
                                  p->gpucluster ? "nvidia.com/v1alpha1" : "nvidia.com/v1", "kind",
                                  op_policy_kind(p), "name", p->name, "uid", p->uid, "controller",
                                  1, "blockOwnerDeletion", 1));
}

char *op_driver_image(const struct op_policy *p, const char *os_tag)
{
    const json_t *drv = p->operand[OP_DRIVER].spec;
    _cleanup_free_ char *base = NULL;
    const char *image = json_string_value(json_object_get(drv, "image"));
    const char *repo = json_string_value(json_object_get(drv, "repository"));
    const char *version = json_string_value(json_object_get(drv, "version"));
    if (image && *image && !(repo && *repo) && !(version && *version))
        return xstrdup(image); /* a full reference (e.g. by digest) is used as is */
    base = xasprintf("%s/%s", p->driver_repository, p->driver_image);
    version = p->driver_version; /* the policy's, or OP_DEFAULT_DRIVER_VERSION */
    if (!version || !*version)
        return steal_ptr(&base);
    if (os_tag && *os_tag)
        return xasprintf("%s:%s-%s", base, version, os_tag);
    return xasprintf("%s:%s", base, version);
}

char *op_precompiled_image(const char *base, const char *version, const char *kernel,
                           const char *os_tag)
{
    if (!version || !*version)
        return xstrdup(base);
    size_t bl = strcspn(version, ".");
    return xasprintf("%s:%.*s-%s-%s", base, (int)bl, version, kernel, os_tag);
}

json_t *op_render_vars(const struct op_policy *p, enum op_component c,
                       const struct op_render_ctx *ctx)
{
    const json_t *spec = json_object_get(p->cp, "spec");
    const json_t *hp = json_object_get(spec, "hostPaths");
    const char *root = json_string_value(json_object_get(hp, "rootFS"));
    const char *did = json_string_value(json_object_get(hp, "driverInstallDir"));
    const char *krd = json_string_value(json_object_get(hp, "kubeletRootDir"));
    const char *tid =
        json_string_value(json_object_get(json_object_get(spec, "toolkit"), "installDir"));
    const char *mps = json_string_value(
        json_object_get(json_object_get(json_object_get(spec, "devicePlugin"), "mps"), "root"));
    const json_t *dpc = json_object_get(json_object_get(spec, "devicePlugin"), "config");
    const char *dpc_name = json_string_value(json_object_get(dpc, "name"));
    const char *dpc_default = json_string_value(json_object_get(dpc, "default"));
    _cleanup_free_ char *dp_config =
        dpc_name && *dpc_name
            ? xasprintf("/config/%s", dpc_default && *dpc_default ? dpc_default : "config.yaml")
            : xstrdup("");
    _cleanup_free_ char *image = c != OP_DRIVER ? xstrdup(p->operand[c].image)
                                 : ctx && ctx->driver_image
                                     ? xstrdup(ctx->driver_image)
                                     : op_driver_image(p, ctx ? ctx->os_tag : NULL);
    /* migManager.config.name: the user's mig-parted ConfigMap, else the default one. */
    const char *mig_cm = json_string_value(
        json_object_get(json_object_get(json_object_get(spec, "migManager"), "config"), "name"));
    /* The device plugin's CDI names (under a cdi-* strategy): the toolkit's spec, which brings
     * the driver's libraries too, where the toolkit runs; else the plugin's own. */
    const char *cdi_kind =
        p->operand[OP_TOOLKIT].enabled ? "nvidia.com/gpu" : "k8s.device-plugin.nvidia.com/gpu";
    return json_pack(
        "{s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s}", "NAMESPACE",
        p->namespace, "IMAGE", image, "OPERAND_IMAGE", p->operand_image, "PULL_POLICY",
        p->operand[c].pull_policy, "RUNTIME_CLASS", p->runtime_class, "DEPLOY_LABEL",
        op_component_def(c)->deploy_label, "DRIVER_INSTALL_DIR",
        did && *did ? did : "/run/nvidia/driver", "ROOT_FS", root && *root ? root : "/",
        "KUBELET_ROOT", krd && *krd ? krd : "/var/lib/kubelet", "TOOLKIT_INSTALL_DIR",
        tid && *tid ? tid : "/usr/local/nvidia", "MIG_STRATEGY", p->mig_strategy,
        "DRIVER_MANAGER_IMAGE", p->operand_image, "MPS_ROOT", mps && *mps ? mps : "/run/nvidia/mps",
        "DEVICE_PLUGIN_CONFIG", dp_config, "MIG_CONFIG_NAME",
        mig_cm && *mig_cm ? mig_cm : "default-mig-parted-config", "CDI_KIND", cdi_kind);
}

int op_render_file(const struct op_templates *t, const char *file, const json_t *vars,
                   json_t **ret_docs, struct err *e)
{
    const char *text = json_string_value(json_object_get(t->files, file));
    if (!text)
        return err_set(e, -ENOENT, "operand template \"%s\" not found", file);
    _cleanup_json_ json_t *docs = NULL;
    int r = yaml_parse_all(text, strlen(text), file, &docs, e);
    if (r < 0)
        return r;
    json_t *out = json_array();
    size_t i;
    json_t *doc;
    json_array_foreach (docs, i, doc) {
        if (json_is_null(doc))
            continue;
        json_t *nd = NULL;
        r = subst(doc, vars, file, &nd, e);
        if (r < 0) {
            json_decref(out);
            return r;
        }
        json_array_append_new(out, nd);
    }
    *ret_docs = out;
    return 0;
}

void op_finish_object(json_t *obj, const struct op_policy *p)
{
    add_owner_and_labels(obj, p);
    _cleanup_free_ char *h = op_object_hash(obj);
    json_t *meta = json_object_get(obj, "metadata");
    json_t *ann = obj_path(meta, (const char *const[]){"annotations", NULL});
    json_object_set_new(ann, OP_HASH_ANNOTATION, json_string(h));
}

/* The exporter's ServiceMonitor with the policy's dcgmExporter.serviceMonitor settings, as NVIDIA's
 * operator edits its own (labels added; the first endpoint's interval, scrapeTimeout, honorLabels
 * and relabelings); false when it is not enabled. */
static bool service_monitor(json_t *sm, const json_t *conf)
{
    if (!json_is_true(json_object_get(conf, "enabled")))
        return false;
    merge_string_map(obj_path(sm, (const char *const[]){"metadata", "labels", NULL}),
                     json_object_get(conf, "additionalLabels"));
    json_t *ep = json_array_get(kobj_path(sm, "spec.endpoints"), 0);
    if (!ep)
        return true; /* an override template without endpoints */
    static const char *const strs[] = {"interval", "scrapeTimeout"};
    for (size_t i = 0; i < ARRAY_SIZE(strs); i++) {
        const char *v = json_string_value(json_object_get(conf, strs[i]));
        if (v && *v)
            json_object_set_new(ep, strs[i], json_string(v));
    }
    json_t *hl = json_object_get(conf, "honorLabels");
    if (json_is_boolean(hl))
        json_object_set(ep, "honorLabels", hl);
    json_t *rl = json_object_get(conf, "relabelings");
    if (json_is_array(rl))
        json_object_set_new(ep, "relabelings", json_deep_copy(rl));
    return true;
}

int op_render(const struct op_policy *p, const struct op_templates *t,
              const struct op_render_ctx *ctx, json_t **ret_objects, struct err *e)
{
    _cleanup_json_ json_t *all = json_array();
    /* pre-requisites: the RuntimeClass operands run under */
    {
        _cleanup_json_ json_t *vars = op_render_vars(p, OP_VALIDATOR, ctx);
        _cleanup_json_ json_t *docs = NULL;
        int r = op_render_file(t, "runtimeclass.yaml", vars, &docs, e);
        if (r < 0)
            return r;
        json_array_extend(all, docs);
    }
    for (int c = 0; c < OP_N_COMPONENTS; c++) {
        const struct op_component_def *def = op_component_def(c);
        if (!p->operand[c].enabled || !def->template)
            continue;
        _cleanup_json_ json_t *vars = op_render_vars(p, c, ctx);
        _cleanup_json_ json_t *docs = NULL;
        int r = op_render_file(t, def->template, vars, &docs, e);
        if (r < 0)
            return err_prefix(e, "render %s", def->spec_key);
        size_t i;
        json_t *doc;
        for (i = json_array_size(docs); i-- > 0;) {
            json_t *sm = json_array_get(docs, i);
            if (streq_ptr(kobj_kind(sm), "ServiceMonitor") &&
                !service_monitor(sm, json_object_get(p->operand[c].spec, "serviceMonitor")))
                json_array_remove(docs, i);
        }
        json_array_foreach (docs, i, doc) {
            const char *kind = json_string_value(json_object_get(doc, "kind"));
            if (streq_ptr(kind, "DaemonSet"))
                op_daemonset_overrides(doc, p, c, ctx);
            if (c == OP_DCGM_EXPORTER && streq_ptr(kind, "Service")) {
                const char *type = json_string_value(
                    json_object_get(json_object_get(p->operand[c].spec, "service"), "type"));
                if (type && *type)
                    json_object_set_new(json_object_get(doc, "spec"), "type", json_string(type));
            }
        }
        json_array_extend(all, docs);
    }
    if (p->gpucluster || p->dra_nodes) {
        int r = op_render_dra(p, t, ctx, all, e);
        if (r < 0)
            return r;
    }
    size_t i;
    json_t *obj;
    json_array_foreach (all, i, obj) {
        op_finish_object(obj, p);
    }
    *ret_objects = steal_ptr(&all);
    return 0;
}

int op_render_driver_daemonset(const struct op_policy *p, const struct op_templates *t,
                               const struct op_render_ctx *ctx, json_t **ret_ds, struct err *e)
{
    const struct op_component_def *def = op_component_def(OP_DRIVER);
    _cleanup_json_ json_t *vars = op_render_vars(p, OP_DRIVER, ctx);
    _cleanup_json_ json_t *docs = NULL;
    int r = op_render_file(t, def->template, vars, &docs, e);
    if (r < 0)
        return err_prefix(e, "render %s", def->spec_key);
    size_t i;
    json_t *doc;
    json_array_foreach (docs, i, doc) {
        if (!streq_ptr(json_string_value(json_object_get(doc, "kind")), "DaemonSet"))
            continue;
        op_daemonset_overrides(doc, p, OP_DRIVER, ctx);
        *ret_ds = json_incref(doc);
        return 0;
    }
    return err_set(e, -EINVAL, "operand template \"%s\": no DaemonSet", def->template);
}
