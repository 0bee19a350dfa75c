/* SPDX-License-Identifier: Apache-2.0 */
/* The driver pod's settings: spec.driver's kernel module type, RDMA, repository, certificate,
 * licensing and secret settings, and the GDS and GDRCopy module containers, rendered into the
 * driver DaemonSet as NVIDIA's operator renders them (docs/operator.md, "Driver settings"). */
#include <string.h>

#include "kobj.h"
#include "operator-internal.h"
#include "operator.h"
#include "yamlcfg.h"

static const char *jstr(const json_t *obj, const char *key)
{
    return json_string_value(json_object_get(obj, key));
}

static bool section_on(const json_t *sec)
{
    return json_is_true(json_object_get(sec, "enabled"));
}

int op_driver_settings_check(const json_t *drv, const json_t *spec, const char *path, struct err *e)
{
    const json_t *gds =
        json_object_get(drv, "gds") ? json_object_get(drv, "gds") : json_object_get(spec, "gds");
    const json_t *gdr = json_object_get(drv, "gdrcopy") ? json_object_get(drv, "gdrcopy")
                                                        : json_object_get(spec, "gdrcopy");
    bool precompiled = json_is_true(json_object_get(drv, "usePrecompiled"));
    /* NVIDIA's precompiled images carry no nvidia-fs or gdrdrv sources to build against. */
    if (precompiled && section_on(gds))
        return err_set(e, -EINVAL,
                       "%s.gds.enabled: Invalid value: GPUDirect Storage (nvidia-fs) is not "
                       "supported with precompiled drivers (%s.driver.usePrecompiled)",
                       path, path);
    if (precompiled && section_on(gdr))
        return err_set(e, -EINVAL,
                       "%s.gdrcopy.enabled: Invalid value: GDRCopy is not supported with "
                       "precompiled drivers (%s.driver.usePrecompiled)",
                       path, path);
    return 0;
}

const char *op_kernel_module_type(const json_t *drv)
{
    const char *t = jstr(drv, "kernelModuleType");
    /* The older switch meant the open modules; a stored policy reads kernelModuleType "auto"
     * (the CRD's default), which must not undo it. */
    if (json_is_true(json_object_get(drv, "useOpenKernelModules")) &&
        (!t || !*t || strcmp(t, "auto") == 0))
        return "open";
    return t && *t ? t : NULL;
}

static void set_env(json_t *container, const char *name, const char *value)
{
    _cleanup_json_ json_t *env = json_pack("[{s:s,s:s}]", "name", name, "value", value);
    op_merge_env(container, env);
}

static json_t *array_at(json_t *obj, const char *key)
{
    json_t *a = json_object_get(obj, key);
    if (!json_is_array(a)) {
        a = json_array();
        json_object_set_new(obj, key, a);
    }
    return a;
}

static bool has_named(const json_t *arr, const char *name)
{
    size_t i;
    json_t *v;
    json_array_foreach (arr, i, v) {
        if (streq_ptr(jstr(v, "name"), name))
            return true;
    }
    return false;
}

/* A volume, unless one of that name is there already (two settings may name one ConfigMap). */
static void add_volume(json_t *podspec, json_t *vol)
{
    json_t *vols = array_at(podspec, "volumes");
    if (has_named(vols, jstr(vol, "name")))
        json_decref(vol);
    else
        json_array_append_new(vols, vol);
}

static void add_mount(json_t *container, json_t *mount)
{
    json_array_append_new(array_at(container, "volumeMounts"), mount);
}

static void host_path_volume(json_t *podspec, const char *name, const char *path)
{
    add_volume(podspec, json_pack("{s:s,s:{s:s,s:s}}", "name", name, "hostPath", "path", path,
                                  "type", "DirectoryOrCreate"));
}

/* The OS's directory of package repository files and of CA certificates (NVIDIA's, for the
 * distributions its driver images are built for); NULL for any other. */
static const char *os_dir(const char *os_tag, bool certs)
{
    static const struct {
        const char *id, *repos, *certs;
    } dirs[] = {
        {"ubuntu", "/etc/apt/sources.list.d", "/usr/local/share/ca-certificates"},
        {"debian", "/etc/apt/sources.list.d", "/usr/local/share/ca-certificates"},
        {"rhel", "/etc/yum.repos.d", "/etc/pki/ca-trust/extracted/pem"},
        {"rhcos", "/etc/yum.repos.d", "/etc/pki/ca-trust/extracted/pem"},
        {"centos", "/etc/yum.repos.d", "/etc/pki/ca-trust/extracted/pem"},
        {"rocky", "/etc/yum.repos.d", "/etc/pki/ca-trust/extracted/pem"},
        {"ol", "/etc/yum.repos.d", "/etc/pki/ca-trust/extracted/pem"},
        {"sles", "/etc/zypp/repos.d", "/etc/pki/trust/anchors"},
        {"sl-micro", "/etc/zypp/repos.d", "/etc/pki/trust/anchors"},
    };
    if (!os_tag)
        return NULL;
    /* the tag is ID then VERSION_ID: "ubuntu22.04", "sl-micro6.0" */
    size_t n = strlen(os_tag);
    while (n > 0 && (strchr("0123456789.", os_tag[n - 1])))
        n--;
    for (size_t i = 0; i < ARRAY_SIZE(dirs); i++)
        if (strlen(dirs[i].id) == n && strncmp(dirs[i].id, os_tag, n) == 0)
            return certs ? dirs[i].certs : dirs[i].repos;
    return NULL;
}

/* A ConfigMap mounted read-only at `dir` in each container of `ctrs` (NULL-terminated). */
static void configmap_dir(json_t *podspec, const char *cm, const char *dir, json_t *const *ctrs)
{
    if (!cm || !*cm || !dir)
        return;
    add_volume(podspec, json_pack("{s:s,s:{s:s}}", "name", cm, "configMap", "name", cm));
    for (; *ctrs; ctrs++)
        add_mount(*ctrs, json_pack("{s:s,s:s,s:b}", "name", cm, "mountPath", dir, "readOnly", 1));
}

/* A module container's image: repository/image:version-<os>, as the driver's. */
static char *module_image(const json_t *sec, const char *os_tag)
{
    _cleanup_free_ char *ref = op_image_ref(sec);
    if (!ref)
        return NULL;
    const char *version = jstr(sec, "version");
    if (!os_tag || !*os_tag || !version || !*version || strstr(ref, "sha256:"))
        return steal_ptr(&ref);
    return xasprintf("%s-%s", ref, os_tag);
}

/* The nvidia-fs or gdrcopy container: its section's image, pull policy, secrets and env; or
 * removed when the section is off. Returns the container, or NULL. */
static json_t *module_container(json_t *podspec, const char *name, const json_t *sec,
                                const char *os_tag)
{
    json_t *ctrs = json_object_get(podspec, "containers");
    size_t i;
    json_t *c;
    json_array_foreach (ctrs, i, c) {
        if (!streq_ptr(jstr(c, "name"), name))
            continue;
        if (!section_on(sec)) {
            json_array_remove(ctrs, i);
            return NULL;
        }
        _cleanup_free_ char *image = module_image(sec, os_tag);
        if (image)
            json_object_set_new(c, "image", json_string(image));
        const char *pp = jstr(sec, "imagePullPolicy");
        if (pp && *pp)
            json_object_set_new(c, "imagePullPolicy", json_string(pp));
        op_apply_pull_secrets(podspec, json_object_get(sec, "imagePullSecrets"));
        op_merge_env(c, json_object_get(sec, "env"));
        return c;
    }
    return NULL;
}

/* driver.kernelModuleConfig: each key of the ConfigMap a file of /drivers (nvidia.conf,
 * nvidia-uvm.conf, ...: the module parameters the driver image passes to modprobe), mounted one
 * by one with a subPath as NVIDIA's operator mounts them, the volume named as the ConfigMap and
 * listing those keys. Keys that are no file name are left out (the API server allows "a.b",
 * never "/" or ".."). */
static void kernel_module_config(json_t *podspec, json_t *ctr, const json_t *drv, const json_t *cm)
{
    const char *name = jstr(json_object_get(drv, "kernelModuleConfig"), "name");
    if (!name || !*name || !cm || !streq_ptr(kobj_name(cm), name))
        return;
    const char *const sections[] = {"data", "binaryData"};
    _cleanup_json_ json_t *keys = json_object(); /* sorted below: a stable render */
    for (size_t s = 0; s < ARRAY_SIZE(sections); s++) {
        const char *k;
        json_t *v;
        json_object_foreach (json_object_get(cm, sections[s]), k, v)
            if (*k && !strchr(k, '/') && strcmp(k, ".") != 0 && strcmp(k, "..") != 0)
                json_object_set_new(keys, k, json_true());
    }
    if (json_object_size(keys) == 0)
        return;
    /* jansson keeps an object's keys in the order they were read */
    _cleanup_free_ char *sorted = json_dumps(keys, JSON_COMPACT | JSON_SORT_KEYS);
    _cleanup_json_ json_t *ordered = json_loads(sorted, 0, NULL);
    json_t *items = json_array();
    const char *k;
    json_t *v;
    json_object_foreach (ordered, k, v) {
        json_array_append_new(items, json_pack("{s:s,s:s}", "key", k, "path", k));
        _cleanup_free_ char *path = xasprintf("/drivers/%s", k);
        add_mount(ctr, json_pack("{s:s,s:b,s:s,s:s}", "name", name, "readOnly", 1, "mountPath",
                                 path, "subPath", k));
    }
    add_volume(podspec, json_pack("{s:s,s:{s:s,s:o}}", "name", name, "configMap", "name", name,
                                  "items", items));
}

void op_driver_settings_apply(json_t *podspec, const json_t *drv, const json_t *gds,
                              const json_t *gdrcopy, const struct op_render_ctx *rctx)
{
    const char *os_tag = rctx ? rctx->os_tag : NULL;
    json_t *ctr = op_find_container(podspec, "containers", "nvidia-driver-ctr");
    if (!ctr)
        return; /* an override template without NVIDIA's driver container */
    const char *kmt = op_kernel_module_type(drv);
    if (kmt) {
        set_env(ctr, "KERNEL_MODULE_TYPE", kmt);
        /* what driver images older than the kernelModuleType switch read */
        if (strcmp(kmt, "open") == 0)
            set_env(ctr, "OPEN_KERNEL_MODULES_ENABLED", "true");
    }
    if (section_on(gdrcopy))
        set_env(ctr, "GDRCOPY_ENABLED", "true");
    if (section_on(gds))
        set_env(ctr, "GDS_ENABLED", "true");

    /* GPUDirect RDMA: the driver builds nvidia-peermem against MOFED's sources (the network
     * operator's driver container's, or the host's), and a sidecar keeps it loaded. */
    const json_t *rdma = json_object_get(drv, "rdma");
    bool rdma_on = section_on(rdma);
    bool host_mofed = rdma_on && json_is_true(json_object_get(rdma, "useHostMofed"));
    json_t *peermem = NULL;
    json_t *ctrs = json_object_get(podspec, "containers");
    size_t i;
    json_t *c;
    json_array_foreach (ctrs, i, c) {
        if (!streq_ptr(jstr(c, "name"), "nvidia-peermem-ctr"))
            continue;
        if (!rdma_on) {
            json_array_remove(ctrs, i);
        } else {
            peermem = c;
            json_object_set(c, "image", json_object_get(ctr, "image"));
            json_object_set(c, "imagePullPolicy", json_object_get(ctr, "imagePullPolicy"));
        }
        break;
    }
    if (rdma_on) {
        set_env(ctr, "GPU_DIRECT_RDMA_ENABLED", "true");
        if (host_mofed) {
            set_env(ctr, "USE_HOST_MOFED", "true");
            if (peermem)
                set_env(peermem, "USE_HOST_MOFED", "true");
        }
        host_path_volume(podspec, "mlnx-ofed-usr-src",
                         host_mofed ? "/usr/src" : "/run/mellanox/drivers/usr/src");
        host_path_volume(podspec, "run-mellanox-drivers", "/run/mellanox/drivers");
        add_mount(ctr, json_pack("{s:s,s:s,s:s}", "name", "mlnx-ofed-usr-src", "mountPath",
                                 "/run/mellanox/drivers/usr/src", "mountPropagation",
                                 "HostToContainer"));
        add_mount(ctr, json_pack("{s:s,s:s,s:s}", "name", "run-mellanox-drivers", "mountPath",
                                 "/run/mellanox/drivers", "mountPropagation", "HostToContainer"));
    }

    json_t *fs = module_container(podspec, "nvidia-fs-ctr", gds, os_tag);
    json_t *gdr = module_container(podspec, "nvidia-gdrcopy-ctr", gdrcopy, os_tag);
    /* the module containers build and load under the driver's resources */
    json_t *res = json_object_get(drv, "resources");
    json_t *modules[] = {peermem, fs, gdr};
    for (size_t k = 0; json_is_object(res) && json_object_size(res) > 0 && k < 3; k++)
        if (modules[k])
            json_object_set(modules[k], "resources", res);

    kernel_module_config(podspec, ctr, drv, rctx ? rctx->kernel_module_config : NULL);

    /* vGPU licensing: gridd.conf (and the NLS client token) from a Secret or a ConfigMap. */
    const json_t *lic = json_object_get(drv, "licensingConfig");
    const char *lsecret = jstr(lic, "secretName"), *lcm = jstr(lic, "configMapName");
    if ((lsecret && *lsecret) || (lcm && *lcm)) {
        bool nls = json_is_true(json_object_get(lic, "nlsEnabled"));
        json_t *items = json_pack("[{s:s,s:s}]", "key", "gridd.conf", "path", "gridd.conf");
        add_mount(ctr, json_pack("{s:s,s:b,s:s,s:s}", "name", "licensing-config", "readOnly", 1,
                                 "mountPath", "/drivers/gridd.conf", "subPath", "gridd.conf"));
        if (nls) {
            json_array_append_new(items,
                                  json_pack("{s:s,s:s}", "key", "client_configuration_token.tok",
                                            "path", "client_configuration_token.tok"));
            add_mount(ctr, json_pack("{s:s,s:b,s:s,s:s}", "name", "licensing-config", "readOnly", 1,
                                     "mountPath",
                                     "/drivers/ClientConfigToken/client_configuration_token.tok",
                                     "subPath", "client_configuration_token.tok"));
        }
        json_t *src =
            lsecret && *lsecret
                ? json_pack("{s:{s:s,s:o}}", "secret", "secretName", lsecret, "items", items)
                : json_pack("{s:{s:s,s:o}}", "configMap", "name", lcm, "items", items);
        json_object_set_new(src, "name", json_string("licensing-config"));
        add_volume(podspec, src);
    }

    /* Package repositories and CA certificates for the build: the driver's and the module
     * containers' package manager reads them from the OS's own directories. */
    json_t *builders[] = {ctr, fs, gdr, NULL};
    json_t *list[4];
    size_t n = 0;
    for (size_t k = 0; k < 3; k++)
        if (builders[k])
            list[n++] = builders[k];
    list[n] = NULL;
    bool precompiled = json_is_true(json_object_get(drv, "usePrecompiled"));
    if (!precompiled) {
        configmap_dir(podspec, jstr(json_object_get(drv, "repoConfig"), "configMapName"),
                      os_dir(os_tag, false), list);
        configmap_dir(podspec, jstr(json_object_get(drv, "certConfig"), "name"),
                      os_dir(os_tag, true), list);
        const char *secret_env = jstr(drv, "secretEnv");
        for (size_t k = 0; secret_env && *secret_env && k < n; k++)
            json_array_append_new(array_at(list[k], "envFrom"),
                                  json_pack("{s:{s:s}}", "secretRef", "name", secret_env));
    }
}
