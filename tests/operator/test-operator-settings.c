/* SPDX-License-Identifier: Apache-2.0 */
/* The ClusterPolicy settings production clusters use, rendered as NVIDIA's operator renders them:
 * the driver pod's settings (a table: each row a setting, what NVIDIA's operator puts in the
 * driver DaemonSet for it, and what must not be there), the exporter's ServiceMonitor, the
 * namespace's Pod Security labels, hostNetwork; and a cross-check of the default driver
 * DaemonSet against the one NVIDIA's operator made (../shared/reference), where every
 * difference is named and justified below. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <string.h>
#include <unistd.h>

#include "kobj.h"
#include "operator-internal.h"
#include "operator.h"
#include "yamlcfg.h"

static const struct op_defaults defaults = {"gpu-operator", "gpuop:test"};

static json_t *load_yaml(const char *s)
{
    json_t *v = NULL;
    struct err e = {0};
    if (yaml_parse_one(s, strlen(s), "test", &v, &e) < 0)
        fail_msg("%s", err_msg(&e));
    return v;
}

/* A ClusterPolicy of the required sections, with the sections of `extra` (YAML lines under spec,
 * indented 2) in their place. */
static json_t *policy(const char *extra)
{
    json_t *cp = load_yaml("apiVersion: nvidia.com/v1\nkind: ClusterPolicy\n"
                           "metadata: {name: cluster-policy, uid: u1}\nspec:\n"
                           "  operator: {}\n  daemonsets: {}\n  toolkit: {}\n"
                           "  devicePlugin: {}\n  dcgm: {}\n  gfd: {}\n  driver: {}\n"
                           "  nodeStatusExporter: {}\n  dcgmExporter: {}\n");
    if (extra && *extra) {
        _cleanup_json_ json_t *over = load_yaml(extra);
        json_object_update(json_object_get(cp, "spec"), over);
    }
    return cp;
}

static const json_t *render_kmc; /* the kernel module ConfigMap render() passes */

static json_t *render(const char *extra, const char *os_tag, struct op_policy **ret_p)
{
    _cleanup_json_ json_t *cp = policy(extra);
    _cleanup_(op_templates_freep) struct op_templates *t = NULL;
    struct op_policy *p = NULL;
    struct err e = {0};
    if (op_policy_parse(cp, &defaults, &p, &e) < 0)
        fail_msg("parse: %s", err_msg(&e));
    assert_int_equal(op_templates_builtin(&t, &e), 0);
    struct op_render_ctx ctx = {.os_tag = os_tag, .kernel_module_config = render_kmc};
    json_t *objs = NULL;
    if (op_render(p, t, &ctx, &objs, &e) < 0)
        fail_msg("render: %s", err_msg(&e));
    /* everything rendered passes the API server's rules */
    size_t i;
    json_t *o;
    json_array_foreach (objs, i, o) {
        if (op_api_validate(o, &e) < 0)
            fail_msg("%s", err_msg(&e));
    }
    if (ret_p)
        *ret_p = p;
    else
        op_policy_free(p);
    return objs;
}

static json_t *find_obj(const json_t *objs, const char *kind, const char *name)
{
    size_t i;
    json_t *o;
    json_array_foreach (objs, i, o) {
        if (streq_ptr(kobj_kind(o), kind) && (!name || streq_ptr(kobj_name(o), name)))
            return o;
    }
    return NULL;
}

static json_t *named(const json_t *arr, const char *name)
{
    size_t i;
    json_t *v;
    json_array_foreach (arr, i, v) {
        if (streq_ptr(kobj_str(v, "name"), name))
            return v;
    }
    return NULL;
}

/* ---- the driver pod: one row per setting --------------------------------------------------- */

/* A fact about the driver DaemonSet's pod spec, as text:
 *   "env CTR NAME=VALUE"        the container has that env entry
 *   "noenv CTR NAME"            it has none of that name
 *   "ctr NAME" / "noctr NAME"   the container is there / is not
 *   "image CTR REF"             its image
 *   "mount CTR PATH VOLUME"     a mount of that volume at that path
 *   "nomount CTR PATH"          no mount at that path
 *   "vol NAME JSON"             a volume of that name whose source is the JSON (a subset)
 *   "novol NAME"                no volume of that name
 *   "envfrom CTR SECRET"        envFrom the Secret
 *   "pod KEY JSON"              the pod spec's KEY is the JSON value */
static void check_fact(const json_t *podspec, const char *fact, const char *row)
{
    _cleanup_free_ char *f = xstrdup(fact);
    char *save = NULL;
    const char *op = strtok_r(f, " ", &save);
    const char *a = strtok_r(NULL, " ", &save);
    const char *b = strtok_r(NULL, " ", &save);
    const char *c = save && *save ? save : NULL;
    json_t *ctrs = json_object_get(podspec, "containers");
    json_t *ctr = a ? named(ctrs, a) : NULL;
    if (streq_ptr(op, "ctr") || streq_ptr(op, "noctr")) {
        if ((ctr != NULL) != streq_ptr(op, "ctr"))
            fail_msg("%s: %s", row, fact);
        return;
    }
    if (streq_ptr(op, "vol") || streq_ptr(op, "novol")) {
        json_t *v = named(json_object_get(podspec, "volumes"), a);
        if (streq_ptr(op, "novol")) {
            if (v)
                fail_msg("%s: %s", row, fact);
            return;
        }
        if (!v)
            fail_msg("%s: %s: no such volume", row, fact);
        _cleanup_free_ char *want_s = xasprintf("%s%s%s", b, c ? " " : "", c ? c : "");
        _cleanup_json_ json_t *want = json_loads(want_s, 0, NULL);
        assert_non_null(want);
        const char *k;
        json_t *wv;
        json_object_foreach (want, k, wv) {
            if (!json_equal(json_object_get(v, k), wv)) {
                _cleanup_free_ char *got = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS);
                fail_msg("%s: %s: got %s", row, fact, got);
            }
        }
        return;
    }
    if (streq_ptr(op, "pod")) {
        _cleanup_json_ json_t *want = json_loads(b, JSON_DECODE_ANY, NULL);
        if (!json_equal(json_object_get(podspec, a), want))
            fail_msg("%s: %s", row, fact);
        return;
    }
    if (!ctr)
        fail_msg("%s: %s: no container %s", row, fact, a);
    if (streq_ptr(op, "env") || streq_ptr(op, "noenv")) {
        char *eq = b ? strchr(b, '=') : NULL;
        _cleanup_free_ char *name = eq ? xstrndup(b, (size_t)(eq - b)) : xstrdup(b);
        json_t *ev = named(json_object_get(ctr, "env"), name);
        if (streq_ptr(op, "noenv")) {
            if (ev)
                fail_msg("%s: %s", row, fact);
            return;
        }
        if (!ev || !streq_ptr(kobj_str(ev, "value"), eq + 1))
            fail_msg("%s: %s (got %s)", row, fact, ev ? kobj_str(ev, "value") : "none");
        return;
    }
    if (streq_ptr(op, "image")) {
        if (!streq_ptr(kobj_str(ctr, "image"), b))
            fail_msg("%s: %s (got %s)", row, fact, kobj_str(ctr, "image"));
        return;
    }
    if (streq_ptr(op, "envfrom")) {
        size_t i;
        json_t *ef;
        json_array_foreach (json_object_get(ctr, "envFrom"), i, ef) {
            if (streq_ptr(kobj_path_str(ef, "secretRef.name"), b))
                return;
        }
        fail_msg("%s: %s", row, fact);
    }
    if (streq_ptr(op, "mount") || streq_ptr(op, "nomount")) {
        size_t i;
        json_t *m;
        json_array_foreach (json_object_get(ctr, "volumeMounts"), i, m) {
            if (!streq_ptr(kobj_str(m, "mountPath"), b))
                continue;
            if (streq_ptr(op, "nomount") || !streq_ptr(kobj_str(m, "name"), c))
                fail_msg("%s: %s (volume %s)", row, fact, kobj_str(m, "name"));
            return;
        }
        if (streq_ptr(op, "mount"))
            fail_msg("%s: %s: no such mount", row, fact);
        return;
    }
    fail_msg("%s: unknown fact %s", row, fact);
}

struct driver_row {
    const char *name;
    const char *spec; /* YAML lines under spec */
    const char *os_tag;
    const char *facts[16];
};

/* What NVIDIA's operator renders for each setting (its driver state: the env it sets, the
 * containers it keeps, the volumes and mounts it adds). Differences are named in `name`. */
static const struct driver_row driver_rows[] = {
    {"defaults: no kernel module type, no module container",
     "",
     "ubuntu22.04",
     {"noenv nvidia-driver-ctr KERNEL_MODULE_TYPE", "noenv nvidia-driver-ctr GDS_ENABLED",
      "noctr nvidia-peermem-ctr", "noctr nvidia-fs-ctr", "noctr nvidia-gdrcopy-ctr",
      "novol run-mellanox-drivers", "novol licensing-config"}},
    {"kernelModuleType auto: passed through",
     "  driver: {kernelModuleType: auto}\n",
     "ubuntu22.04",
     {"env nvidia-driver-ctr KERNEL_MODULE_TYPE=auto",
      "noenv nvidia-driver-ctr OPEN_KERNEL_MODULES_ENABLED"}},
    {"kernelModuleType open: and the older images' switch",
     "  driver: {kernelModuleType: open}\n",
     "ubuntu22.04",
     {"env nvidia-driver-ctr KERNEL_MODULE_TYPE=open",
      "env nvidia-driver-ctr OPEN_KERNEL_MODULES_ENABLED=true"}},
    {"kernelModuleType proprietary",
     "  driver: {kernelModuleType: proprietary}\n",
     "ubuntu22.04",
     {"env nvidia-driver-ctr KERNEL_MODULE_TYPE=proprietary",
      "noenv nvidia-driver-ctr OPEN_KERNEL_MODULES_ENABLED"}},
    /* Difference: NVIDIA's v25+ operator ignores the deprecated useOpenKernelModules; v24.9
     * (the reference) turned it into OPEN_KERNEL_MODULES_ENABLED. gpuop keeps its meaning when
     * the type is unset or auto (the CRD's default), so an old policy keeps the open modules. */
    {"useOpenKernelModules true (v24.9's meaning) over auto",
     "  driver: {useOpenKernelModules: true, kernelModuleType: auto}\n",
     "ubuntu22.04",
     {"env nvidia-driver-ctr KERNEL_MODULE_TYPE=open",
      "env nvidia-driver-ctr OPEN_KERNEL_MODULES_ENABLED=true"}},
    {"useOpenKernelModules true does not override an explicit proprietary",
     "  driver: {useOpenKernelModules: true, kernelModuleType: proprietary}\n",
     "ubuntu22.04",
     {"env nvidia-driver-ctr KERNEL_MODULE_TYPE=proprietary",
      "noenv nvidia-driver-ctr OPEN_KERNEL_MODULES_ENABLED"}},
    /* Difference: NVIDIA mounts the MOFED volumes on every driver pod; gpuop only with RDMA on,
     * so nodes without it get no /run/mellanox directories created. */
    {"rdma: the peermem sidecar on the driver's image, MOFED's sources",
     "  driver: {rdma: {enabled: true}}\n",
     "ubuntu22.04",
     {"env nvidia-driver-ctr GPU_DIRECT_RDMA_ENABLED=true",
      "noenv nvidia-driver-ctr USE_HOST_MOFED", "ctr nvidia-peermem-ctr",
      "image nvidia-peermem-ctr nvcr.io/nvidia/driver:" OP_DEFAULT_DRIVER_VERSION "-ubuntu22.04",
      "noenv nvidia-peermem-ctr USE_HOST_MOFED",
      "mount nvidia-driver-ctr /run/mellanox/drivers/usr/src mlnx-ofed-usr-src",
      "mount nvidia-driver-ctr /run/mellanox/drivers run-mellanox-drivers",
      "vol mlnx-ofed-usr-src {\"hostPath\": {\"path\": \"/run/mellanox/drivers/usr/src\", "
      "\"type\": \"DirectoryOrCreate\"}}",
      "mount nvidia-peermem-ctr /run/mellanox/drivers run-mellanox-drivers"}},
    {"rdma with the host's MOFED: its /usr/src",
     "  driver: {rdma: {enabled: true, useHostMofed: true}}\n",
     "ubuntu22.04",
     {"env nvidia-driver-ctr GPU_DIRECT_RDMA_ENABLED=true",
      "env nvidia-driver-ctr USE_HOST_MOFED=true", "env nvidia-peermem-ctr USE_HOST_MOFED=true",
      "vol mlnx-ofed-usr-src {\"hostPath\": {\"path\": \"/usr/src\", \"type\": "
      "\"DirectoryOrCreate\"}}"}},
    {"useHostMofed without rdma: nothing",
     "  driver: {rdma: {enabled: false, useHostMofed: true}}\n",
     "ubuntu22.04",
     {"noenv nvidia-driver-ctr USE_HOST_MOFED", "noctr nvidia-peermem-ctr"}},
    {"gds: nvidia-fs from its own image, tagged for the OS",
     "  gds: {enabled: true, repository: nvcr.io/nvidia/cloud-native, image: nvidia-fs,\n"
     "        version: \"2.20.5\", imagePullPolicy: Always,\n"
     "        env: [{name: NVFS_DEBUG, value: \"1\"}]}\n",
     "rhel9.4",
     {"env nvidia-driver-ctr GDS_ENABLED=true", "ctr nvidia-fs-ctr",
      "image nvidia-fs-ctr nvcr.io/nvidia/cloud-native/nvidia-fs:2.20.5-rhel9.4",
      "env nvidia-fs-ctr NVFS_DEBUG=1", "noctr nvidia-gdrcopy-ctr"}},
    {"gdrcopy: gdrdrv from its own image",
     "  gdrcopy: {enabled: true, repository: nvcr.io/nvidia/cloud-native, image: gdrdrv,\n"
     "            version: v2.4.1-2}\n",
     "ubuntu22.04",
     {"env nvidia-driver-ctr GDRCOPY_ENABLED=true", "ctr nvidia-gdrcopy-ctr",
      "image nvidia-gdrcopy-ctr nvcr.io/nvidia/cloud-native/gdrdrv:v2.4.1-2-ubuntu22.04",
      "noctr nvidia-fs-ctr"}},
    /* Difference: NVIDIA reads the ConfigMap and mounts each key with a subPath; gpuop mounts
     * the ConfigMap on the directory (the operator reads no user ConfigMaps, and a directory
     * mount follows the ConfigMap's updates): files the image itself keeps there are hidden. */
    {"repoConfig and certConfig: the OS's directories, in every building container",
     "  driver: {repoConfig: {configMapName: mirror}, certConfig: {name: corp-ca}}\n"
     "  gds: {enabled: true, repository: r, image: nvidia-fs, version: \"1\"}\n",
     "ubuntu22.04",
     {"mount nvidia-driver-ctr /etc/apt/sources.list.d mirror",
      "mount nvidia-driver-ctr /usr/local/share/ca-certificates corp-ca",
      "mount nvidia-fs-ctr /etc/apt/sources.list.d mirror",
      "mount nvidia-fs-ctr /usr/local/share/ca-certificates corp-ca",
      "vol mirror {\"configMap\": {\"name\": \"mirror\"}}",
      "vol corp-ca {\"configMap\": {\"name\": \"corp-ca\"}}"}},
    {"repoConfig on RHEL and SLES",
     "  driver: {repoConfig: {configMapName: mirror}, certConfig: {name: corp-ca}}\n",
     "rhel9.4",
     {"mount nvidia-driver-ctr /etc/yum.repos.d mirror",
      "mount nvidia-driver-ctr /etc/pki/ca-trust/extracted/pem corp-ca"}},
    {"repoConfig on SLES",
     "  driver: {repoConfig: {configMapName: mirror}, certConfig: {name: corp-ca}}\n",
     "sles15.6",
     {"mount nvidia-driver-ctr /etc/zypp/repos.d mirror",
      "mount nvidia-driver-ctr /etc/pki/trust/anchors corp-ca"}},
    /* Difference: NVIDIA fails the driver state on an OS it has no directory for; gpuop mounts
     * nothing there (NVIDIA publishes no driver image for such an OS either). */
    {"repoConfig on an OS without a known directory, or unknown",
     "  driver: {repoConfig: {configMapName: mirror}}\n",
     "flatcar3975",
     {"novol mirror"}},
    {"one ConfigMap for both: one volume",
     "  driver: {repoConfig: {configMapName: both}, certConfig: {name: both}}\n",
     "ubuntu22.04",
     {"mount nvidia-driver-ctr /etc/apt/sources.list.d both",
      "mount nvidia-driver-ctr /usr/local/share/ca-certificates both",
      "vol both {\"configMap\": {\"name\": \"both\"}}"}},
    {"secretEnv: the Secret's keys as env of the driver and module containers",
     "  driver: {secretEnv: driver-secrets}\n"
     "  gdrcopy: {enabled: true, repository: r, image: gdrdrv, version: \"1\"}\n",
     "ubuntu22.04",
     {"envfrom nvidia-driver-ctr driver-secrets", "envfrom nvidia-gdrcopy-ctr driver-secrets"}},
    {"licensingConfig: gridd.conf from the Secret",
     "  driver: {licensingConfig: {secretName: lic}}\n",
     "ubuntu22.04",
     {"mount nvidia-driver-ctr /drivers/gridd.conf licensing-config",
      "nomount nvidia-driver-ctr /drivers/ClientConfigToken/client_configuration_token.tok",
      "vol licensing-config {\"secret\": {\"secretName\": \"lic\", \"items\": [{\"key\": "
      "\"gridd.conf\", \"path\": \"gridd.conf\"}]}}"}},
    {"licensingConfig with NLS: and the client token; the older configMapName",
     "  driver: {licensingConfig: {configMapName: lic, nlsEnabled: true}}\n",
     "ubuntu22.04",
     {"mount nvidia-driver-ctr /drivers/ClientConfigToken/client_configuration_token.tok "
      "licensing-config",
      "vol licensing-config {\"configMap\": {\"name\": \"lic\", \"items\": [{\"key\": "
      "\"gridd.conf\", \"path\": \"gridd.conf\"}, {\"key\": \"client_configuration_token.tok\", "
      "\"path\": \"client_configuration_token.tok\"}]}}"}},
    {"licensingConfig nlsEnabled alone (NVIDIA's sample): nothing",
     "  driver: {licensingConfig: {secretName: \"\", nlsEnabled: true}}\n",
     "ubuntu22.04",
     {"novol licensing-config"}},
    {"hostNetwork: with the DNS policy that keeps cluster names",
     "  driver: {hostNetwork: true}\n",
     "ubuntu22.04",
     {"pod hostNetwork true", "pod dnsPolicy \"ClusterFirstWithHostNet\""}},
    {"the driver's env and resources: env last, resources on the module containers too",
     "  driver: {kernelModuleType: open, env: [{name: KERNEL_MODULE_TYPE, value: proprietary}],\n"
     "           resources: {limits: {memory: 2Gi}}, rdma: {enabled: true}}\n",
     "ubuntu22.04",
     {"env nvidia-driver-ctr KERNEL_MODULE_TYPE=proprietary", "ctr nvidia-peermem-ctr"}},
};

static void test_driver_settings(void **state)
{
    (void)state;
    for (size_t i = 0; i < ARRAY_SIZE(driver_rows); i++) {
        const struct driver_row *r = &driver_rows[i];
        _cleanup_(op_policy_freep) struct op_policy *p = NULL;
        _cleanup_json_ json_t *objs = render(r->spec, r->os_tag, &p);
        json_t *ds = find_obj(objs, "DaemonSet", "nvidia-driver-daemonset");
        assert_non_null(ds);
        json_t *podspec = kobj_path(ds, "spec.template.spec");
        for (size_t k = 0; k < ARRAY_SIZE(r->facts) && r->facts[k]; k++)
            check_fact(podspec, r->facts[k], r->name);
        /* each setting of the row is acted on: none is reported as not */
        size_t j;
        json_t *u;
        json_array_foreach (p->unimplemented, j, u) {
            const char *path = json_string_value(u);
            if (str_has_prefix(path, "spec.driver") || str_has_prefix(path, "spec.gds") ||
                str_has_prefix(path, "spec.gdrcopy"))
                fail_msg("%s: %s reported as not acted on", r->name, path);
        }
    }
}

/* ---- the same settings on an NVIDIADriver ------------------------------------------------- */

/* An NVIDIADriver's DaemonSet for one GPU node of OS os_tag ("ubuntu22.04"), spec the
 * NVIDIADriver's (YAML); cms the ConfigMaps of the namespace (NULL: none). The DaemonSet and its
 * report's status are handed out; the NVIDIADriver is expected valid. */
static json_t *render_nvd(const char *spec, const char *os_tag, const json_t *cms,
                          json_t **ret_status)
{
    _cleanup_json_ json_t *cp = policy("  driver: {useNvidiaDriverCRD: true}\n");
    _cleanup_(op_policy_freep) struct op_policy *p = NULL;
    _cleanup_(op_templates_freep) struct op_templates *t = NULL;
    struct err e = {0};
    if (op_policy_parse(cp, &defaults, &p, &e) < 0)
        fail_msg("parse: %s", err_msg(&e));
    assert_int_equal(op_templates_builtin(&t, &e), 0);
    /* the OS tag is NFD's ID then VERSION_ID */
    size_t idn = strcspn(os_tag, "0123456789");
    _cleanup_free_ char *id = xstrndup(os_tag, idn);
    _cleanup_json_ json_t *nodes = json_pack(
        "[{s:s,s:s,s:{s:s,s:{s:s,s:s,s:s,s:s}}}]", "apiVersion", "v1", "kind", "Node", "metadata",
        "name", "n1", "labels", "feature.node.kubernetes.io/pci-10de.present", "true",
        "nvidia.com/gpu.present", "true", "feature.node.kubernetes.io/system-os_release.ID", id,
        "feature.node.kubernetes.io/system-os_release.VERSION_ID", os_tag + idn);
    _cleanup_json_ json_t *base =
        load_yaml("{apiVersion: nvidia.com/v1alpha1, kind: NVIDIADriver,\n"
                  " metadata: {name: pool, uid: u2},\n"
                  " spec: {driverType: gpu, repository: nvcr.io/nvidia, image: driver,\n"
                  "        version: \"" OP_DEFAULT_DRIVER_VERSION "\"}}\n");
    if (spec && *spec) {
        _cleanup_json_ json_t *over = load_yaml(spec);
        json_object_update(json_object_get(base, "spec"), over);
    }
    _cleanup_json_ json_t *nvds = json_pack("[O]", base);
    _cleanup_json_ json_t *owned = json_array();
    struct op_nvd_input in = {.nvidia_drivers = nvds,
                              .nodes = nodes,
                              .owned = owned,
                              .policy = p,
                              .templates = t,
                              .configmaps = cms,
                              .delegated = true,
                              .now_ms = 1700000000000ULL};
    struct op_nvd_result res = {0};
    if (op_nvd_plan(&in, &res, &e) < 0)
        fail_msg("nvd plan: %s", err_msg(&e));
    assert_int_equal(res.n_reports, 1);
    *ret_status = json_incref(res.reports[0].status);
    json_t *ds = NULL;
    if (json_array_size(res.objects) > 0)
        ds = json_incref(json_array_get(res.objects, 0));
    op_nvd_result_done(&res);
    return ds;
}

/* The driver's YAML of a ClusterPolicy row ("  driver: {...}\n  gds: {...}\n") as an
 * NVIDIADriver's spec: spec.driver's fields at the top, gds and gdrcopy its own sections. */
static char *row_as_nvd(const char *row_spec)
{
    if (!row_spec || !*row_spec)
        return xstrdup("");
    _cleanup_json_ json_t *sec = load_yaml(row_spec);
    json_t *out = json_object();
    json_object_update(out, json_object_get(sec, "driver"));
    if (json_object_get(sec, "gds"))
        json_object_set(out, "gds", json_object_get(sec, "gds"));
    if (json_object_get(sec, "gdrcopy"))
        json_object_set(out, "gdrcopy", json_object_get(sec, "gdrcopy"));
    char *s = json_dumps(out, JSON_COMPACT);
    json_decref(out);
    return s;
}

/* Every row of the ClusterPolicy's driver table, as an NVIDIADriver: the same facts in its
 * DaemonSet (rdma, gds, gdrcopy, kernelModuleType, useOpenKernelModules, repoConfig,
 * certConfig, licensingConfig, secretEnv, resources, hostNetwork), and none of those fields
 * reported as accepted, not acted on. */
static void test_nvidiadriver_settings(void **state)
{
    (void)state;
    for (size_t i = 0; i < ARRAY_SIZE(driver_rows); i++) {
        const struct driver_row *r = &driver_rows[i];
        _cleanup_free_ char *spec = row_as_nvd(r->spec);
        _cleanup_json_ json_t *status = NULL;
        _cleanup_json_ json_t *ds = render_nvd(spec, r->os_tag, NULL, &status);
        _cleanup_free_ char *row = xasprintf("NVIDIADriver: %s", r->name);
        if (!ds)
            fail_msg("%s: no DaemonSet (%s)", row, json_dumps(status, JSON_COMPACT));
        json_t *podspec = kobj_path(ds, "spec.template.spec");
        for (size_t k = 0; k < ARRAY_SIZE(r->facts) && r->facts[k]; k++)
            check_fact(podspec, r->facts[k], row);
        size_t j;
        json_t *c;
        json_array_foreach (json_object_get(status, "conditions"), j, c) {
            if (streq_ptr(kobj_str(c, "type"), "UnsupportedFields"))
                fail_msg("%s: %s", row, kobj_str(c, "message"));
        }
    }
    /* kernelModuleConfig: the ConfigMap's keys as /drivers/<key>, as for the ClusterPolicy */
    _cleanup_json_ json_t *cms =
        load_yaml("[{kind: ConfigMap, metadata: {name: kmc, namespace: gpu-operator},\n"
                  "  data: {nvidia.conf: \"NVreg_EnableGpuFirmware=0\"}},\n"
                  " {kind: ConfigMap, metadata: {name: kmc, namespace: elsewhere},\n"
                  "  data: {other.conf: x}}]\n");
    _cleanup_json_ json_t *status = NULL;
    _cleanup_json_ json_t *ds =
        render_nvd("{kernelModuleConfig: {name: kmc}}", "ubuntu22.04", cms, &status);
    assert_non_null(ds);
    json_t *podspec = kobj_path(ds, "spec.template.spec");
    check_fact(podspec, "mount nvidia-driver-ctr /drivers/nvidia.conf kmc", "NVIDIADriver kmc");
    check_fact(podspec, "nomount nvidia-driver-ctr /drivers/other.conf", "NVIDIADriver kmc");
    check_fact(podspec,
               "vol kmc {\"configMap\": {\"name\": \"kmc\", \"items\": [{\"key\": "
               "\"nvidia.conf\", \"path\": \"nvidia.conf\"}]}}",
               "NVIDIADriver kmc");
    assert_string_equal(kobj_str(status, "state"), "notReady"); /* not created yet */
    _cleanup_free_ char *sts = json_dumps(status, JSON_COMPACT);
    assert_null(strstr(sts, "UnsupportedFields"));
    /* the ConfigMap missing: nothing rendered (the live DaemonSets stay), the status says why */
    _cleanup_json_ json_t *st2 = NULL;
    _cleanup_json_ json_t *none =
        render_nvd("{kernelModuleConfig: {name: missing}}", "ubuntu22.04", cms, &st2);
    assert_null(none);
    assert_string_equal(kobj_str(st2, "state"), "notReady");
    json_t *ready = json_array_get(json_object_get(st2, "conditions"), 0);
    assert_string_equal(kobj_str(ready, "reason"), "KernelModuleConfigMissing");
    assert_string_equal(kobj_str(ready, "message"),
                        "NVIDIADriver pool: spec.kernelModuleConfig.name: ConfigMap "
                        "gpu-operator/missing not found; its driver DaemonSets are left as they "
                        "are until it exists");
    /* what gpuop does not act on for either is still named */
    _cleanup_json_ json_t *st3 = NULL;
    _cleanup_json_ json_t *ds3 =
        render_nvd("{virtualTopologyConfig: {config: vt}}", "ubuntu22.04", NULL, &st3);
    _cleanup_free_ char *st3s = json_dumps(st3, JSON_COMPACT);
    assert_non_null(
        strstr(st3s, "accepted, not acted on by gpuop: [\\\"spec.virtualTopologyConfig\\\"]"));
}

/* The module containers under the driver's resources, as NVIDIA's operator sets them. */
static void test_module_resources(void **state)
{
    (void)state;
    _cleanup_json_ json_t *objs =
        render("  driver: {resources: {limits: {memory: 2Gi}}, rdma: {enabled: true}}\n"
               "  gds: {enabled: true, repository: r, image: nvidia-fs, version: \"1\"}\n",
               "ubuntu22.04", NULL);
    json_t *podspec =
        kobj_path(find_obj(objs, "DaemonSet", "nvidia-driver-daemonset"), "spec.template.spec");
    static const char *const ctrs[] = {"nvidia-driver-ctr", "nvidia-peermem-ctr", "nvidia-fs-ctr"};
    for (size_t i = 0; i < ARRAY_SIZE(ctrs); i++) {
        json_t *c = named(json_object_get(podspec, "containers"), ctrs[i]);
        assert_non_null(c);
        assert_string_equal(kobj_path_str(c, "resources.limits.memory"), "2Gi");
    }
}

/* NVIDIA refuses GDS and GDRCopy with precompiled drivers; so does gpuop, naming the field. */
static void test_precompiled_refusals(void **state)
{
    (void)state;
    static const struct {
        const char *spec, *want;
    } rows[] = {
        {"  driver: {usePrecompiled: true}\n  gds: {enabled: true}\n", "spec.gds.enabled"},
        {"  driver: {usePrecompiled: true}\n  gdrcopy: {enabled: true}\n", "spec.gdrcopy.enabled"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
        _cleanup_json_ json_t *cp = policy(rows[i].spec);
        struct op_policy *p = NULL;
        struct err e = {0};
        assert_int_equal(op_policy_parse(cp, &defaults, &p, &e), -EINVAL);
        assert_non_null(strstr(err_msg(&e), rows[i].want));
        assert_non_null(strstr(err_msg(&e), "cluster-policy"));
        assert_null(p);
    }
    /* repoConfig, certConfig and secretEnv mean nothing to a precompiled image */
    _cleanup_json_ json_t *objs =
        render("  driver: {usePrecompiled: true, repoConfig: {configMapName: m},\n"
               "           secretEnv: s}\n",
               "ubuntu22.04", NULL);
    json_t *podspec =
        kobj_path(find_obj(objs, "DaemonSet", "nvidia-driver-daemonset"), "spec.template.spec");
    check_fact(podspec, "novol m", "precompiled");
    assert_null(json_object_get(named(json_object_get(podspec, "containers"), "nvidia-driver-ctr"),
                                "envFrom"));
}

/* ---- the exporter's ServiceMonitor ----------------------------------------------------------- */

static void test_service_monitor(void **state)
{
    (void)state;
    _cleanup_json_ json_t *off = render("", "ubuntu22.04", NULL);
    assert_null(find_obj(off, "ServiceMonitor", NULL));
    _cleanup_json_ json_t *off2 =
        render("  dcgmExporter: {serviceMonitor: {enabled: false, interval: 15s}}\n", NULL, NULL);
    assert_null(find_obj(off2, "ServiceMonitor", NULL));

    _cleanup_(op_policy_freep) struct op_policy *p = NULL;
    _cleanup_json_ json_t *objs =
        render("  dcgmExporter:\n"
               "    serviceMonitor:\n"
               "      enabled: true\n"
               "      interval: 30s\n"
               "      honorLabels: true\n"
               "      additionalLabels: {release: kube-prometheus-stack}\n"
               "      relabelings:\n"
               "      - {sourceLabels: [__meta_kubernetes_pod_node_name], targetLabel: instance,\n"
               "         regex: (.*), replacement: $1, action: replace}\n",
               NULL, &p);
    json_t *sm = find_obj(objs, "ServiceMonitor", "nvidia-dcgm-exporter");
    assert_non_null(sm);
    assert_string_equal(kobj_str(sm, "apiVersion"), "monitoring.coreos.com/v1");
    assert_string_equal(kobj_namespace(sm), "gpu-operator");
    json_t *labels = kobj_labels(sm);
    assert_string_equal(kobj_str(labels, "app"), "nvidia-dcgm-exporter");
    assert_string_equal(kobj_str(labels, "release"), "kube-prometheus-stack");
    assert_string_equal(kobj_str(labels, "app.kubernetes.io/managed-by"), OP_MANAGED_BY);
    /* it selects the exporter's Service, in its namespace, on the Service's port name */
    json_t *svc = find_obj(objs, "Service", "nvidia-dcgm-exporter");
    assert_non_null(svc);
    assert_true(kobj_labels_match(kobj_path(sm, "spec.selector.matchLabels"), kobj_labels(svc)));
    assert_string_equal(
        json_string_value(json_array_get(kobj_path(sm, "spec.namespaceSelector.matchNames"), 0)),
        "gpu-operator");
    json_t *ep = json_array_get(kobj_path(sm, "spec.endpoints"), 0);
    assert_string_equal(kobj_str(ep, "port"),
                        kobj_str(json_array_get(kobj_path(svc, "spec.ports"), 0), "name"));
    assert_string_equal(kobj_str(ep, "path"), "/metrics");
    assert_string_equal(kobj_str(ep, "interval"), "30s");
    assert_true(json_is_true(json_object_get(ep, "honorLabels")));
    json_t *rl = json_array_get(json_object_get(ep, "relabelings"), 0);
    assert_string_equal(kobj_str(rl, "targetLabel"), "instance");
    assert_string_equal(kobj_str(rl, "replacement"), "$1");
    assert_string_equal(kobj_path_str(sm, "metadata.ownerReferences.0.kind"), "ClusterPolicy");
    _cleanup_free_ char *u = json_dumps(p->unimplemented, JSON_COMPACT);
    assert_null(strstr(u, "serviceMonitor"));
}

/* The condition `type` of a planned status, or NULL. */
static const json_t *planned_condition(const struct op_plan *plan, const char *type)
{
    size_t i;
    const json_t *c;
    json_array_foreach (kobj_path(plan->active->r.status, "conditions"), i, c)
        if (streq_ptr(kobj_str(c, "type"), type))
            return c;
    return NULL;
}

/* The planner applies the ServiceMonitor only where its CRD is served; where it is not, the
 * status says why none was written (an Event once), and the shell is told to look again. When
 * turned off, the one gpuop wrote is pruned. */
static void test_service_monitor_plan(void **state)
{
    (void)state;
    _cleanup_json_ json_t *cp =
        policy("  dcgmExporter: {serviceMonitor: {enabled: true}}\n  psa: {enabled: true}\n");
    _cleanup_json_ json_t *policies = json_pack("[O]", cp);
    _cleanup_json_ json_t *nodes = json_array();
    _cleanup_json_ json_t *owned = json_array();
    _cleanup_(op_templates_freep) struct op_templates *t = NULL;
    struct err e = {0};
    assert_int_equal(op_templates_builtin(&t, &e), 0);
    _cleanup_json_ json_t *written = NULL; /* the ServiceMonitor as applied */
    for (int served = 0; served < 2; served++) {
        struct op_snapshot s = {.policies = policies,
                                .nodes = nodes,
                                .owned = owned,
                                .defaults = &defaults,
                                .templates = t,
                                .now_ms = 1700000000000ULL,
                                .servicemonitor_served = served};
        _cleanup_(op_plan_freep) struct op_plan *plan = NULL;
        if (op_plan(&s, &plan, &e) < 0)
            fail_msg("%s", err_msg(&e));
        assert_true((find_obj(plan->apply, "ServiceMonitor", NULL) != NULL) == served);
        assert_true((find_obj(plan->desired, "ServiceMonitor", NULL) != NULL) == served);
        assert_true(plan->servicemonitor_missing == !served);
        const json_t *c = planned_condition(plan, "ServiceMonitor");
        assert_non_null(c);
        assert_string_equal(kobj_str(c, "status"), served ? "True" : "False");
        assert_string_equal(kobj_str(c, "reason"), served ? "Applied" : "CRDNotInstalled");
        bool event = false;
        for (size_t i = 0; i < plan->active->r.n_events; i++)
            event |= streq_ptr(plan->active->r.events[i].reason, "ServiceMonitorCRDMissing");
        assert_true(event == !served);
        /* the namespace was not read: its Pod Security labels are left as they are */
        assert_null(plan->namespace_patch);
        if (served)
            written = json_deep_copy(find_obj(plan->apply, "ServiceMonitor", NULL));
    }
    /* turned off: the ServiceMonitor gpuop wrote is pruned; no condition is left */
    _cleanup_json_ json_t *off = policy("  dcgmExporter: {serviceMonitor: {enabled: false}}\n");
    _cleanup_json_ json_t *policies2 = json_pack("[O]", off);
    _cleanup_json_ json_t *owned2 = json_pack("[O]", written);
    struct op_snapshot s = {.policies = policies2,
                            .nodes = nodes,
                            .owned = owned2,
                            .defaults = &defaults,
                            .templates = t,
                            .now_ms = 1700000000000ULL,
                            .servicemonitor_served = true};
    _cleanup_(op_plan_freep) struct op_plan *plan = NULL;
    if (op_plan(&s, &plan, &e) < 0)
        fail_msg("%s", err_msg(&e));
    assert_int_equal(plan->n_prune, 1);
    assert_string_equal(plan->prune[0].kind, "ServiceMonitor");
    assert_string_equal(plan->prune[0].name, "nvidia-dcgm-exporter");
    assert_null(planned_condition(plan, "ServiceMonitor"));
    assert_false(plan->servicemonitor_missing);
}

/* ---- driver.kernelModuleConfig -----------------------------------------------------------------
 */

/* Each key of the ConfigMap a file of /drivers, mounted one by one with a subPath, the volume
 * named as the ConfigMap listing those keys (NVIDIA's operator's createConfigMapVolumeMounts). */
static void test_kernel_module_config(void **state)
{
    (void)state;
    _cleanup_json_ json_t *cm = load_yaml(
        "kind: ConfigMap\nmetadata: {name: kmc, namespace: gpu-operator}\n"
        "data: {nvidia.conf: \"NVreg_EnableGpuFirmware=0\", nvidia-uvm.conf: \"uvm_perf=1\"}\n"
        "binaryData: {nvidia-peermem.conf: \"\"}\n");
    static const struct {
        const char *spec;
        bool cm;
        const char *want_mounts; /* mountPath=subPath, in order; "" none */
    } rows[] = {
        {"  driver: {kernelModuleConfig: {name: kmc}}\n", true,
         "/drivers/nvidia-peermem.conf=nvidia-peermem.conf "
         "/drivers/nvidia-uvm.conf=nvidia-uvm.conf "
         "/drivers/nvidia.conf=nvidia.conf"},
        /* the ConfigMap not known (offline render, or not there): nothing mounted */
        {"  driver: {kernelModuleConfig: {name: kmc}}\n", false, ""},
        /* another ConfigMap than the one named: nothing */
        {"  driver: {kernelModuleConfig: {name: other}}\n", true, ""},
        {"", true, ""},
    };
    for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
        render_kmc = rows[i].cm ? cm : NULL;
        _cleanup_json_ json_t *objs = render(rows[i].spec, "ubuntu22.04", NULL);
        render_kmc = NULL;
        json_t *ps =
            kobj_path(find_obj(objs, "DaemonSet", "nvidia-driver-daemonset"), "spec.template.spec");
        json_t *ctr = named(json_object_get(ps, "containers"), "nvidia-driver-ctr");
        char got[512] = "";
        size_t j;
        json_t *m;
        json_array_foreach (json_object_get(ctr, "volumeMounts"), j, m) {
            if (!streq_ptr(kobj_str(m, "name"), "kmc"))
                continue;
            assert_true(json_is_true(json_object_get(m, "readOnly")));
            snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%s=%s", *got ? " " : "",
                     kobj_str(m, "mountPath"), kobj_str(m, "subPath"));
        }
        if (strcmp(got, rows[i].want_mounts) != 0)
            fail_msg("row %zu: mounts \"%s\"", i, got);
        json_t *vol = named(json_object_get(ps, "volumes"), "kmc");
        if (!*rows[i].want_mounts) {
            assert_null(vol);
            continue;
        }
        _cleanup_json_ json_t *want_vol =
            json_loads("{\"name\": \"kmc\", \"configMap\": {\"name\": \"kmc\", \"items\": ["
                       "{\"key\": \"nvidia-peermem.conf\", \"path\": \"nvidia-peermem.conf\"}, "
                       "{\"key\": \"nvidia-uvm.conf\", \"path\": \"nvidia-uvm.conf\"}, "
                       "{\"key\": \"nvidia.conf\", \"path\": \"nvidia.conf\"}]}}",
                       0, NULL);
        assert_true(json_equal(vol, want_vol));
    }
    /* acted on: not named as accepted and ignored */
    _cleanup_json_ json_t *cp = policy("  driver: {kernelModuleConfig: {name: kmc}}\n");
    _cleanup_(op_policy_freep) struct op_policy *p = NULL;
    struct err e = {0};
    assert_int_equal(op_policy_parse(cp, &defaults, &p, &e), 0);
    _cleanup_free_ char *u = json_dumps(p->unimplemented, JSON_COMPACT);
    assert_null(strstr(u, "kernelModuleConfig"));
}

/* The planner: the ConfigMap as the shell read it; missing, the driver DaemonSet is left as it
 * is (not applied) and the status says why. */
static void test_kernel_module_config_plan(void **state)
{
    (void)state;
    _cleanup_json_ json_t *cp = policy("  driver: {kernelModuleConfig: {name: kmc}}\n");
    _cleanup_json_ json_t *policies = json_pack("[O]", cp);
    _cleanup_json_ json_t *nodes = json_array();
    _cleanup_json_ json_t *owned = json_array();
    _cleanup_json_ json_t *cms =
        json_pack("[{s:s,s:{s:s,s:s},s:{s:s}}]", "kind", "ConfigMap", "metadata", "name", "kmc",
                  "namespace", "gpu-operator", "data", "nvidia.conf", "NVreg_EnableGpuFirmware=0");
    _cleanup_(op_templates_freep) struct op_templates *t = NULL;
    struct err e = {0};
    assert_int_equal(op_templates_builtin(&t, &e), 0);
    for (int found = 0; found < 2; found++) {
        struct op_snapshot s = {.policies = policies,
                                .nodes = nodes,
                                .owned = owned,
                                .defaults = &defaults,
                                .templates = t,
                                .now_ms = 1700000000000ULL,
                                .configmaps = found ? cms : NULL};
        _cleanup_(op_plan_freep) struct op_plan *plan = NULL;
        if (op_plan(&s, &plan, &e) < 0)
            fail_msg("%s", err_msg(&e));
        json_t *ds = find_obj(plan->apply, "DaemonSet", "nvidia-driver-daemonset");
        assert_true((ds != NULL) == found);
        assert_non_null(find_obj(plan->desired, "DaemonSet", "nvidia-driver-daemonset"));
        assert_int_equal(plan->n_prune, 0);
        const json_t *c = planned_condition(plan, "KernelModuleConfig");
        if (found) {
            assert_null(c);
            json_t *ctr =
                named(kobj_path(ds, "spec.template.spec.containers"), "nvidia-driver-ctr");
            assert_non_null(named(json_object_get(ctr, "volumeMounts"), "kmc"));
        } else {
            assert_non_null(c);
            assert_string_equal(kobj_str(c, "reason"), "ConfigMapNotFound");
            assert_non_null(strstr(kobj_str(c, "message"), "gpu-operator/kmc"));
        }
    }
}

/* ---- driver.usePrecompiled ------------------------------------------------------------------- */

/* A GPU node with NFD's OS labels, its kernel (nodeInfo) and kernel label (NULL: none). */
static json_t *precompiled_node(const char *name, const char *info, const char *label,
                                const char *deploy_driver)
{
    json_t *n = json_pack("{s:s,s:{s:s,s:{s:s,s:s,s:s}},s:{s:{}}}", "kind", "Node", "metadata",
                          "name", name, "labels", "feature.node.kubernetes.io/pci-10de.present",
                          "true", "feature.node.kubernetes.io/system-os_release.ID", "ubuntu",
                          "feature.node.kubernetes.io/system-os_release.VERSION_ID", "22.04",
                          "status", "nodeInfo");
    if (info)
        json_object_set_new(kobj_path(n, "status.nodeInfo"), "kernelVersion", json_string(info));
    if (label)
        json_object_set_new(kobj_labels(n), "feature.node.kubernetes.io/kernel-version.full",
                            json_string(label));
    if (deploy_driver)
        json_object_set_new(kobj_labels(n), "nvidia.com/gpu.deploy.driver",
                            json_string(deploy_driver));
    return n;
}

/* One driver DaemonSet per kernel among the nodes the driver targets, NVIDIA's precompiled tag,
 * selecting on the kernel label; nodes it cannot select named; a kernel gone, its DaemonSet
 * pruned with the single one. */
static void test_precompiled_plan(void **state)
{
    (void)state;
    _cleanup_json_ json_t *cp = policy("  driver: {usePrecompiled: true, version: 595.91.07}\n");
    _cleanup_json_ json_t *policies = json_pack("[O]", cp);
    _cleanup_json_ json_t *nodes = json_pack(
        "[o,o,o,o,o,o]", precompiled_node("a1", "5.15.0-69-generic", "5.15.0-69-generic", NULL),
        precompiled_node("a2", "5.15.0-69-generic", "5.15.0-69-generic", NULL),
        precompiled_node("b1", "6.8.0-40-generic", "6.8.0-40-generic", NULL),
        precompiled_node("nolabel", "6.8.0-40-generic", NULL, NULL),
        precompiled_node("stale", "6.8.0-41-generic", "6.8.0-40-generic", NULL),
        precompiled_node("host", "4.18.0-1-generic", "4.18.0-1-generic", "pre-installed"));
    _cleanup_(op_templates_freep) struct op_templates *t = NULL;
    struct err e = {0};
    assert_int_equal(op_templates_builtin(&t, &e), 0);
    _cleanup_json_ json_t *owned = json_array();
    struct op_snapshot s = {.policies = policies,
                            .nodes = nodes,
                            .owned = owned,
                            .defaults = &defaults,
                            .templates = t,
                            .now_ms = 1700000000000ULL};
    _cleanup_(op_plan_freep) struct op_plan *plan = NULL;
    if (op_plan(&s, &plan, &e) < 0)
        fail_msg("%s", err_msg(&e));
    static const struct {
        const char *name, *kernel, *image;
    } want[] = {
        {"nvidia-driver-daemonset-5.15.0-69-generic-ubuntu22.04", "5.15.0-69-generic",
         "nvcr.io/nvidia/driver:595-5.15.0-69-generic-ubuntu22.04"},
        {"nvidia-driver-daemonset-6.8.0-40-generic-ubuntu22.04", "6.8.0-40-generic",
         "nvcr.io/nvidia/driver:595-6.8.0-40-generic-ubuntu22.04"},
    };
    assert_null(find_obj(plan->desired, "DaemonSet", "nvidia-driver-daemonset"));
    size_t n_driver = 0, i;
    json_t *o;
    json_array_foreach (plan->desired, i, o)
        n_driver += streq_ptr(kobj_kind(o), "DaemonSet") &&
                    strncmp(kobj_name(o), "nvidia-driver-daemonset", 23) == 0;
    assert_int_equal(n_driver, ARRAY_SIZE(want));
    for (i = 0; i < ARRAY_SIZE(want); i++) {
        json_t *ds = find_obj(plan->desired, "DaemonSet", want[i].name);
        if (!ds)
            fail_msg("no DaemonSet %s", want[i].name);
        json_t *ps = kobj_path(ds, "spec.template.spec");
        assert_string_equal(
            kobj_str(named(json_object_get(ps, "containers"), "nvidia-driver-ctr"), "image"),
            want[i].image);
        json_t *sel = json_object_get(ps, "nodeSelector");
        assert_string_equal(kobj_str(sel, "feature.node.kubernetes.io/kernel-version.full"),
                            want[i].kernel);
        assert_string_equal(kobj_str(sel, "feature.node.kubernetes.io/system-os_release.ID"),
                            "ubuntu");
        /* its own selector: the DaemonSets' pods never overlap */
        assert_string_equal(
            kobj_str(kobj_path(ds, "spec.selector.matchLabels"), OP_LABEL_DRIVER_DS), want[i].name);
        assert_string_equal(
            kobj_str(kobj_path(ds, "spec.template.metadata.labels"), OP_LABEL_DRIVER_DS),
            want[i].name);
        assert_non_null(find_obj(plan->apply, "DaemonSet", want[i].name));
    }
    /* the nodes no DaemonSet can select, named; the pre-installed one is not a driver node */
    const json_t *c = planned_condition(plan, "PrecompiledDriver");
    assert_non_null(c);
    assert_string_equal(kobj_str(c, "reason"), "KernelLabelMissing");
    assert_non_null(strstr(kobj_str(c, "message"), "node nolabel: no "));
    assert_non_null(strstr(kobj_str(c, "message"), "node stale: its "));
    assert_null(strstr(kobj_str(c, "message"), "host"));
    c = planned_condition(plan, "DriverReady");
    assert_string_equal(kobj_str(c, "status"), "False");
    assert_non_null(strstr(kobj_str(c, "message"), "not created yet"));

    /* b1's kernel gone (upgraded to a1's): its DaemonSet is pruned, as is the single one */
    _cleanup_json_ json_t *owned2 = json_array();
    json_array_foreach (plan->desired, i, o)
        if (streq_ptr(kobj_kind(o), "DaemonSet") &&
            strncmp(kobj_name(o), "nvidia-driver-daemonset", 23) == 0)
            json_array_append_new(owned2, json_deep_copy(o));
    json_t *single = json_deep_copy(json_array_get(owned2, 0));
    json_object_set_new(json_object_get(single, "metadata"), "name",
                        json_string("nvidia-driver-daemonset"));
    json_array_append_new(owned2, single);
    _cleanup_json_ json_t *nodes2 =
        json_pack("[o]", precompiled_node("a1", "5.15.0-69-generic", "5.15.0-69-generic", NULL));
    s.owned = owned2;
    s.nodes = nodes2;
    _cleanup_(op_plan_freep) struct op_plan *plan2 = NULL;
    if (op_plan(&s, &plan2, &e) < 0)
        fail_msg("%s", err_msg(&e));
    assert_null(find_obj(plan2->apply, "DaemonSet", want[0].name)); /* current */
    bool pruned_b = false, pruned_single = false;
    for (i = 0; i < plan2->n_prune; i++) {
        pruned_b |= streq_ptr(plan2->prune[i].name, want[1].name);
        pruned_single |= streq_ptr(plan2->prune[i].name, "nvidia-driver-daemonset");
    }
    assert_true(pruned_b && pruned_single);
    assert_null(planned_condition(plan2, "PrecompiledDriver"));
    _cleanup_free_ char *u = NULL;
    {
        _cleanup_(op_policy_freep) struct op_policy *p = NULL;
        assert_int_equal(op_policy_parse(cp, &defaults, &p, &e), 0);
        u = json_dumps(p->unimplemented, JSON_COMPACT);
    }
    assert_null(strstr(u, "usePrecompiled"));
}

/* ---- Pod Security admission ------------------------------------------------------------------ */

#define PSA_E "pod-security.kubernetes.io/enforce"
#define PSA_A "pod-security.kubernetes.io/audit"
#define PSA_W "pod-security.kubernetes.io/warn"
#define REC   "gpuop.dev/pod-security-labels-set"

static void test_psa_patch(void **state)
{
    (void)state;
    static const struct {
        const char *spec, *ns_meta, *want;
    } rows[] = {
        {"", "{}", NULL},
        {"  psa: {enabled: false}\n", "{}", NULL},
        /* the namespace not read: nothing is written (what was there is unknown) */
        {"  psa: {enabled: true}\n", NULL, NULL},
        /* NVIDIA's three modes, all privileged (the operands are privileged node agents), and
         * what each replaced: nothing */
        {"  psa: {enabled: true}\n", "{}",
         "{\"metadata\": {\"labels\": {\"" PSA_A "\": \"privileged\", \"" PSA_E
         "\": \"privileged\", \"" PSA_W "\": \"privileged\"}, \"annotations\": {\"" REC
         "\": \"{\\\"" PSA_A "\\\":null,\\\"" PSA_E "\\\":null,\\\"" PSA_W "\\\":null}\"}}}"},
        /* only what differs; an administrator's privileged label is not recorded as gpuop's,
         * the baseline one it replaces is; other labels are left alone */
        {"  psa: {enabled: true}\n",
         "{\"labels\": {\"" PSA_E "\": \"privileged\", \"" PSA_A "\": \"baseline\", \"team\": "
         "\"ml\"}}",
         "{\"metadata\": {\"labels\": {\"" PSA_A "\": \"privileged\", \"" PSA_W
         "\": \"privileged\"}, \"annotations\": {\"" REC "\": \"{\\\"" PSA_A
         "\\\":\\\"baseline\\\",\\\"" PSA_W "\\\":null}\"}}}"},
        /* converged: nothing */
        {"  psa: {enabled: true}\n",
         "{\"labels\": {\"" PSA_E "\": \"privileged\", \"" PSA_A "\": \"privileged\", \"" PSA_W
         "\": \"privileged\"}, \"annotations\": {\"" REC "\": \"{\\\"" PSA_W "\\\":null}\"}}",
         NULL},
        /* someone lowered gpuop's label: set again, the first value it replaced stays recorded */
        {"  psa: {enabled: true}\n",
         "{\"labels\": {\"" PSA_E "\": \"privileged\", \"" PSA_A "\": \"privileged\", \"" PSA_W
         "\": \"restricted\"}, \"annotations\": {\"" REC "\": \"{\\\"" PSA_W "\\\":null}\"}}",
         "{\"metadata\": {\"labels\": {\"" PSA_W "\": \"privileged\"}}}"},
        /* turned off: what gpuop set goes back exactly (removed, or the value it replaced); the
         * administrator's own privileged label and other labels stay; the record goes */
        {"  psa: {enabled: false}\n",
         "{\"labels\": {\"" PSA_E "\": \"privileged\", \"" PSA_A "\": \"privileged\", \"" PSA_W
         "\": \"privileged\", \"team\": \"ml\"}, \"annotations\": {\"" REC "\": \"{\\\"" PSA_A
         "\\\":\\\"baseline\\\",\\\"" PSA_W "\\\":null}\"}}",
         "{\"metadata\": {\"labels\": {\"" PSA_A "\": \"baseline\", \"" PSA_W
         "\": null}, \"annotations\": {\"" REC "\": null}}}"},
        /* turned off after someone changed gpuop's label: that one is theirs now */
        {"  psa: {enabled: false}\n",
         "{\"labels\": {\"" PSA_W "\": \"baseline\"}, \"annotations\": {\"" REC "\": \"{\\\"" PSA_W
         "\\\":null}\"}}",
         "{\"metadata\": {\"annotations\": {\"" REC "\": null}}}"},
        /* an edited record naming another label: that label is not touched */
        {"  psa: {enabled: false}\n",
         "{\"labels\": {\"team\": \"privileged\"}, \"annotations\": {\"" REC
         "\": \"{\\\"team\\\":null}\"}}",
         "{\"metadata\": {\"annotations\": {\"" REC "\": null}}}"},
        /* a record that does not parse: nothing restored, the record goes */
        {"  psa: {enabled: false}\n",
         "{\"labels\": {\"" PSA_E "\": \"privileged\"}, \"annotations\": {\"" REC "\": \"{\"}}",
         "{\"metadata\": {\"annotations\": {\"" REC "\": null}}}"},
        /* off without a record: nothing gpuop set, nothing removed */
        {"  psa: {enabled: false}\n", "{\"labels\": {\"" PSA_E "\": \"privileged\"}}", NULL},
    };
    for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
        _cleanup_json_ json_t *cp = policy(rows[i].spec);
        _cleanup_(op_policy_freep) struct op_policy *p = NULL;
        struct err e = {0};
        assert_int_equal(op_policy_parse(cp, &defaults, &p, &e), 0);
        _cleanup_json_ json_t *ns = NULL;
        if (rows[i].ns_meta) {
            json_error_t je;
            json_t *meta = json_loads(rows[i].ns_meta, 0, &je);
            if (!meta)
                fail_msg("row %zu: %s", i, je.text);
            json_object_set_new(meta, "name", json_string("gpu-operator"));
            ns = json_pack("{s:s,s:o}", "kind", "Namespace", "metadata", meta);
        }
        _cleanup_json_ json_t *got = op_psa_patch(p, ns);
        json_error_t je;
        _cleanup_json_ json_t *want = rows[i].want ? json_loads(rows[i].want, 0, &je) : NULL;
        if (rows[i].want && !want)
            fail_msg("row %zu: want: %s", i, je.text);
        if (!(got == NULL && want == NULL) && !json_equal(got, want)) {
            _cleanup_free_ char *g = got ? json_dumps(got, JSON_SORT_KEYS) : xstrdup("null");
            fail_msg("row %zu: got %s", i, g);
        }
        _cleanup_free_ char *u = json_dumps(p->unimplemented, JSON_COMPACT);
        assert_null(strstr(u, "psa"));
    }
}

/* On, then off: the namespace is as it was before, whatever labels it had (the merge patches
 * applied as the API server applies them). */
static void merge_apply(json_t *target, const json_t *patch)
{
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *)patch, k, v) {
        if (json_is_null(v))
            json_object_del(target, k);
        else if (json_is_object(v)) {
            json_t *t = json_object_get(target, k);
            if (!json_is_object(t)) {
                t = json_object();
                json_object_set_new(target, k, t);
            }
            merge_apply(t, v);
        } else
            json_object_set(target, k, v);
    }
}

static void test_psa_round_trip(void **state)
{
    (void)state;
    static const char *const before[] = {
        "{}",
        "{\"labels\": {\"team\": \"ml\"}}",
        "{\"labels\": {\"" PSA_E "\": \"baseline\", \"" PSA_W "\": \"privileged\"}, "
        "\"annotations\": {\"owner\": \"x\"}}",
        "{\"labels\": {\"" PSA_E "\": \"restricted\", \"" PSA_A "\": \"restricted\", \"" PSA_W
        "\": \"restricted\"}}",
    };
    _cleanup_json_ json_t *on = policy("  psa: {enabled: true}\n");
    _cleanup_json_ json_t *off = policy("  psa: {enabled: false}\n");
    _cleanup_(op_policy_freep) struct op_policy *pon = NULL, *poff = NULL;
    struct err e = {0};
    assert_int_equal(op_policy_parse(on, &defaults, &pon, &e), 0);
    assert_int_equal(op_policy_parse(off, &defaults, &poff, &e), 0);
    for (size_t i = 0; i < ARRAY_SIZE(before); i++) {
        _cleanup_json_ json_t *orig =
            json_pack("{s:s,s:o}", "kind", "Namespace", "metadata", json_loads(before[i], 0, NULL));
        _cleanup_json_ json_t *ns = json_deep_copy(orig);
        for (int pass = 0; pass < 2; pass++) { /* a second pass writes nothing */
            _cleanup_json_ json_t *patch = op_psa_patch(pon, ns);
            assert_true((patch != NULL) == (pass == 0));
            if (patch)
                merge_apply(ns, patch);
        }
        for (int k = 0; k < 3; k++)
            assert_string_equal(kobj_str(kobj_labels(ns), k == 0   ? PSA_E
                                                          : k == 1 ? PSA_A
                                                                   : PSA_W),
                                "privileged");
        _cleanup_json_ json_t *patch = op_psa_patch(poff, ns);
        if (patch)
            merge_apply(ns, patch);
        /* an emptied labels or annotations object reads as none */
        const char *const keys[] = {"labels", "annotations"};
        for (size_t k = 0; k < 2; k++) {
            json_t *meta = json_object_get(ns, "metadata");
            if (json_object_size(json_object_get(meta, keys[k])) == 0 &&
                !json_object_get(json_object_get(orig, "metadata"), keys[k]))
                json_object_del(meta, keys[k]);
        }
        if (!json_equal(ns, orig)) {
            _cleanup_free_ char *g = json_dumps(ns, JSON_SORT_KEYS);
            fail_msg("row %zu: not restored: %s", i, g);
        }
        _cleanup_json_ json_t *again = op_psa_patch(poff, ns);
        assert_null(again);
    }
}

/* ---- hostNetwork on every operand -------------------------------------------------------------
 */

static void test_host_network(void **state)
{
    (void)state;
    _cleanup_(op_policy_freep) struct op_policy *p = NULL;
    _cleanup_json_ json_t *objs = render("  devicePlugin: {hostNetwork: true}\n"
                                         "  validator: {hostNetwork: true}\n",
                                         "ubuntu22.04", &p);
    static const struct {
        const char *ds;
        bool host;
    } rows[] = {{"nvidia-device-plugin-daemonset", true},
                {"nvidia-operator-validator", true},
                {"nvidia-dcgm-exporter", false},
                {"nvidia-driver-daemonset", false}};
    for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
        json_t *ps = kobj_path(find_obj(objs, "DaemonSet", rows[i].ds), "spec.template.spec");
        assert_non_null(ps);
        assert_true(json_is_true(json_object_get(ps, "hostNetwork")) == rows[i].host);
        assert_true(streq_ptr(kobj_str(ps, "dnsPolicy"), "ClusterFirstWithHostNet") ==
                    rows[i].host);
    }
    _cleanup_free_ char *u = json_dumps(p->unimplemented, JSON_COMPACT);
    assert_null(strstr(u, "hostNetwork"));
}

/* ---- the cross-check against what NVIDIA's operator rendered --------------------------------- */

/* Names in NVIDIA's driver DaemonSet (v24.9.2, the chart's default policy) that gpuop's lacks,
 * each with why; and gpuop's that NVIDIA's lacks. Anything else differing fails. */
static const char *const nvidia_only[][2] = {
    {"mount nvidia-driver-ctr /run/nvidia-topologyd",
     "vGPU's topology daemon: gpuop runs no vGPU manager"},
    {"mount nvidia-driver-ctr /run/mellanox/drivers/usr/src",
     "MOFED's sources are mounted only with driver.rdma.enabled (a row above)"},
    {"mount nvidia-driver-ctr /run/mellanox/drivers", "the same, with RDMA only"},
    {"mount nvidia-driver-ctr /sys/devices/system/memory/auto_online_blocks",
     "coherent-memory GPUs' onlining; not rendered by gpuop"},
    {"mount nvidia-driver-ctr /sys/module/firmware_class/parameters/path",
     "GSP firmware search path; not rendered by gpuop"},
    {"mount nvidia-driver-ctr /lib/firmware", "the same"},
    {"vol run-nvidia-topologyd", "as its mount"},
    {"vol mlnx-ofed-usr-src", "RDMA only"},
    {"vol run-mellanox-drivers", "RDMA only"},
    {"vol run-nvidia-validations", "mounted by no container of NVIDIA's either"},
    {"vol host-sys", "NVIDIA's driver manager's; gpuop's reads the host root"},
    {"vol firmware-search-path", "as its mount"},
    {"vol sysfs-memory-online", "as its mount"},
    {"vol nv-firmware", "as its mount"},
};
static const char *const gpuop_only[][2] = {
    {"nvidia-remediation-ctr",
     "gpuop's remediation executor (docs/remediation.md): NVIDIA's has none in the driver pod"},
    {"env nvidia-remediation-ctr NODE_NAME",
     "gpuop's remediation executor (docs/remediation.md): NVIDIA's has none in the driver pod"},
    {"env nvidia-remediation-ctr POD_NAME",
     "gpuop's remediation executor (docs/remediation.md): NVIDIA's has none in the driver pod"},
    {"env nvidia-remediation-ctr POD_NAMESPACE",
     "gpuop's remediation executor (docs/remediation.md): NVIDIA's has none in the driver pod"},
    {"mount nvidia-remediation-ctr /host",
     "gpuop's remediation executor (docs/remediation.md): NVIDIA's has none in the driver pod"},
    {"mount nvidia-remediation-ctr /run/nvidia",
     "gpuop's remediation executor (docs/remediation.md): NVIDIA's has none in the driver pod"},
};

static void names_of(const json_t *podspec, json_t *out)
{
    size_t i, j;
    json_t *c, *x;
    json_array_foreach (json_object_get(podspec, "containers"), i, c) {
        const char *cn = kobj_str(c, "name");
        json_object_set_new(out, kobj_str(c, "name"), json_true());
        json_array_foreach (json_object_get(c, "env"), j, x) {
            _cleanup_free_ char *k = xasprintf("env %s %s", cn, kobj_str(x, "name"));
            json_object_set_new(out, k, json_true());
        }
        json_array_foreach (json_object_get(c, "volumeMounts"), j, x) {
            _cleanup_free_ char *k = xasprintf("mount %s %s", cn, kobj_str(x, "mountPath"));
            json_object_set_new(out, k, json_true());
        }
    }
    json_array_foreach (json_object_get(podspec, "volumes"), i, x) {
        _cleanup_free_ char *k = xasprintf("vol %s", kobj_str(x, "name"));
        json_object_set_new(out, k, json_true());
    }
}

static bool listed(const char *const (*tab)[2], size_t n, const char *k)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(tab[i][0], k) == 0)
            return true;
    return false;
}

static void test_nvidia_reference(void **state)
{
    (void)state;
    const char *shared = getenv("GPUOP_SHARED");
    _cleanup_free_ char *dir =
        xasprintf("%s/reference/nvidia-operator-v24.9.2/cluster", shared ? shared : "/nonexistent");
    _cleanup_free_ char *dsf = xasprintf("%s/daemonsets.yaml", dir);
    _cleanup_free_ char *cpf = xasprintf("%s/clusterpolicy.yaml", dir);
    if (access(dsf, R_OK) != 0 || access(cpf, R_OK) != 0) {
        print_message("NVIDIA's reference under GPUOP_SHARED not found: skipped\n");
        /* skip() leaves by longjmp: no cleanup attribute runs */
        free(dir), dir = NULL;
        free(dsf), dsf = NULL;
        free(cpf), cpf = NULL;
        skip();
    }
    struct err e = {0};
    _cleanup_json_ json_t *dsl = NULL, *cpl = NULL;
    if (yaml_load_file(dsf, &dsl, &e) < 0 || yaml_load_file(cpf, &cpl, &e) < 0)
        fail_msg("%s", err_msg(&e));
    json_t *theirs = NULL;
    size_t i;
    json_t *o;
    json_array_foreach (json_object_get(dsl, "items"), i, o) {
        if (streq_ptr(kobj_name(o), "nvidia-driver-daemonset"))
            theirs = o;
    }
    assert_non_null(theirs);
    json_t *cp =
        json_object_get(cpl, "items") ? json_array_get(json_object_get(cpl, "items"), 0) : cpl;
    json_t *cpc = json_deep_copy(cp);
    json_object_del(cpc, "status");
    _cleanup_json_ json_t *cpref = cpc;
    _cleanup_(op_policy_freep) struct op_policy *p = NULL;
    _cleanup_(op_templates_freep) struct op_templates *t = NULL;
    if (op_policy_parse(cpref, &defaults, &p, &e) < 0)
        fail_msg("%s", err_msg(&e));
    assert_int_equal(op_templates_builtin(&t, &e), 0);
    struct op_render_ctx ctx = {.os_tag = "ubuntu22.04"};
    _cleanup_json_ json_t *objs = NULL;
    assert_int_equal(op_render(p, t, &ctx, &objs, &e), 0);
    json_t *ours = find_obj(objs, "DaemonSet", "nvidia-driver-daemonset");
    assert_non_null(ours);
    _cleanup_json_ json_t *a = json_object(), *b = json_object();
    names_of(kobj_path(theirs, "spec.template.spec"), a);
    names_of(kobj_path(ours, "spec.template.spec"), b);
    int bad = 0;
    const char *k;
    json_t *v;
    json_object_foreach (a, k, v) {
        if (!json_object_get(b, k) && !listed(nvidia_only, ARRAY_SIZE(nvidia_only), k)) {
            print_error("NVIDIA's has %s, gpuop's not (not named as a difference)\n", k);
            bad++;
        }
    }
    json_object_foreach (b, k, v) {
        if (!json_object_get(a, k) && !listed(gpuop_only, ARRAY_SIZE(gpuop_only), k)) {
            print_error("gpuop's has %s, NVIDIA's not (not named as a difference)\n", k);
            bad++;
        }
    }
    /* the same policy: the same image, and no setting left unreported */
    assert_string_equal(
        kobj_str(named(kobj_path(ours, "spec.template.spec.containers"), "nvidia-driver-ctr"),
                 "image"),
        kobj_str(named(kobj_path(theirs, "spec.template.spec.containers"), "nvidia-driver-ctr"),
                 "image"));
    assert_int_equal(bad, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_driver_settings),
        cmocka_unit_test(test_module_resources),
        cmocka_unit_test(test_nvidiadriver_settings),
        cmocka_unit_test(test_precompiled_refusals),
        cmocka_unit_test(test_service_monitor),
        cmocka_unit_test(test_service_monitor_plan),
        cmocka_unit_test(test_psa_patch),
        cmocka_unit_test(test_psa_round_trip),
        cmocka_unit_test(test_precompiled_plan),
        cmocka_unit_test(test_kernel_module_config),
        cmocka_unit_test(test_kernel_module_config_plan),
        cmocka_unit_test(test_host_network),
        cmocka_unit_test(test_nvidia_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
