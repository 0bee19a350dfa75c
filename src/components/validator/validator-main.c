/* SPDX-License-Identifier: Apache-2.0 */
/* `gpuop validator --component=...`: the shell around validator.h. It reads the node (files,
 * NVML, the CDI spec, the runtime config, the CUDA check, the Node object), asks the core, and
 * writes the status file, the node annotation validation.gpuop.dev/<component> and an Event. */
#include <dirent.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cdi.h"
#include "cuda.h"
#include "gpu.h"
#include "kobj.h"
#include "kube.h"
#include "nodestate.h"
#include "rtconfig.h"
#include "svc.h"
#include "validator.h"
#include "yamlcfg.h"

#define COMP           "validator"
#define STATUS_MAX     4096
#define CDI_SPEC_MAX   (16u << 20)
#define DRIVER_DS_SEL  "app.kubernetes.io/component=nvidia-driver"
#define TOOLKIT_DS_SEL "app=nvidia-container-toolkit-daemonset"
#define API_TIMEOUT_MS 10000

struct val {
    int component; /* enum val_component */
    bool wait;
    const char *host_root;
    const char *driver_root;
    const char *validations_dir;
    const char *node_name;
    const char *ns;
    const char *kubeconfig;
    const char *driver_version;
    const char *mig_strategy;
    const char *sysfs_root;
    uint64_t interval_ms;
    uint64_t timeout_ms;
    /* run state */
    struct kube_client *kc; /* NULL: no API server (no --node-name) */
    char sysfs[PATH_MAX];
};

static int check_abs_path(const void *dst, const char *source, struct err *e)
{
    const char *p = *(const char *const *)dst;
    if (!p || p[0] != '/')
        return err_set(e, -EINVAL, "%s: \"%s\" is not an absolute path", source, p ? p : "");
    return 0;
}

#define F(m) offsetof(struct val, m)
static const struct svc_option val_options[] = {
    {.flag = "component",
     .env = "COMPONENT",
     .kind = SVC_ENUM,
     .choices = val_component_names,
     .off = F(component),
     .metavar = "NAME",
     .help = "the check: driver, toolkit, cuda, plugin, all-done or toolkit-ready (required)"},
    {.flag = "wait",
     .env = "WITH_WAIT",
     .kind = SVC_BOOL,
     .off = F(wait),
     .help = "retry every --interval until the check passes"},
    {.flag = "host-root",
     .env = "HOST_ROOT_MOUNT",
     .kind = SVC_STRING,
     .off = F(host_root),
     .check = check_abs_path,
     .metavar = "DIR",
     .help = "where the host's file system is mounted (/host)"},
    {.flag = "driver-install-dir",
     .env = "DRIVER_INSTALL_DIR",
     .kind = SVC_STRING,
     .off = F(driver_root),
     .check = check_abs_path,
     .metavar = "DIR",
     .help = "the containerized driver's root (/run/nvidia/driver)"},
    {.flag = "validations-dir",
     .env = "OUTPUT_DIR",
     .kind = SVC_STRING,
     .off = F(validations_dir),
     .check = check_abs_path,
     .metavar = "DIR",
     .help = "the status files' folder (/run/nvidia/validations)"},
    {.kind = SVC_FRAGMENT,
     .fragment = svc_node_name_option,
     .off = F(node_name),
     .help = "this node, for Events and annotations (none: no API\n"
             "server; the plugin check needs it)"},
    {.flag = "namespace",
     .env = "OPERATOR_NAMESPACE",
     .kind = SVC_STRING,
     .off = F(ns),
     .metavar = "NS",
     .help = "the driver and toolkit DaemonSets' namespace\n(default: the client's)"},
    {.kind = SVC_FRAGMENT, .fragment = svc_kubeconfig_option, .off = F(kubeconfig)},
    {.flag = "interval",
     .env = "SLEEP_INTERVAL",
     .kind = SVC_DURATION,
     .min = 100,
     .max = 300000,
     .finite = true,
     .expect = "expected a duration from 100ms to 5m",
     .off = F(interval_ms),
     .metavar = "DUR",
     .help = "time between tries (5s; 100ms to 5m)"},
    {.flag = "timeout",
     .env = "GPU_RESOURCE_DISCOVERY_TIMEOUT",
     .kind = SVC_DURATION,
     .min = 1,
     .finite = true,
     .off = F(timeout_ms),
     .metavar = "DUR",
     .help = "how long the plugin check waits for the node to\nadvertise its GPUs (150s)"},
    {.flag = "driver-version",
     .env = "DRIVER_VERSION",
     .kind = SVC_STRING,
     .off = F(driver_version),
     .metavar = "VERSION",
     .help = "the driver version the driver check expects (default: any)"},
    {.flag = "mig-strategy",
     .env = "MIG_STRATEGY",
     .kind = SVC_STRING,
     .off = F(mig_strategy),
     .metavar = "S",
     .help = "none, single or mixed when the node has no\nnvidia.com/mig.strategy label"},
    {.flag = "sysfs-root",
     .env = "GPUOP_SYSFS_ROOT",
     .kind = SVC_STRING,
     .off = F(sysfs_root),
     .check = check_abs_path,
     .metavar = "DIR",
     .help = "sysfs, where the node's PCI devices are counted (<host-root>/sys)"},
    {0},
};
#undef F

static void val_defaults(void *state)
{
    struct val *v = state;
    v->component = -1;
    v->host_root = "/host";
    v->driver_root = "/run/nvidia/driver";
    v->validations_dir = NODESTATE_VALIDATIONS_DIR;
    v->interval_ms = 5000;
    v->timeout_ms = 150000;
}

/* The error message made safe inside a quoted key="value" log field. */
static const char *quoted(char *s)
{
    for (char *p = s; *p; p++)
        if (*p == '"')
            *p = '\'';
    return s;
}

static int val_configure(struct svc *s, struct err *e)
{
    struct val *v = svc_state(s);
    if (v->component < 0)
        return err_set(e, -EINVAL,
                       "--component: required (driver, toolkit, cuda, plugin, "
                       "all-done, toolkit-ready)");
    struct stat st;
    /* The checks read the host; all-done and the toolkit-ready wait read only status files. */
    bool reads_host = v->component < VAL_ALL_DONE;
    if (reads_host && stat(v->host_root, &st) < 0)
        return err_errno(e, -errno, "--host-root \"%s\"", v->host_root);
    if (reads_host && !S_ISDIR(st.st_mode))
        return err_set(e, -ENOTDIR, "--host-root \"%s\": not a directory", v->host_root);
    /* The status folder: created when absent (the hostPath is DirectoryOrCreate); anything
     * else that cannot be listed is bad input. */
    if (stat(v->validations_dir, &st) < 0) {
        int r = mkdir_p(v->validations_dir, 0755);
        if (r < 0)
            return err_errno(e, r, "--validations-dir \"%s\"", v->validations_dir);
    } else if (!S_ISDIR(st.st_mode)) {
        return err_set(e, -ENOTDIR, "--validations-dir \"%s\": not a directory",
                       v->validations_dir);
    }
    _cleanup_(closedirp) DIR *d = opendir(v->validations_dir);
    if (!d)
        return err_errno(e, -errno, "--validations-dir \"%s\"", v->validations_dir);
    if (v->component == VAL_PLUGIN && !v->node_name)
        return err_set(e, -EINVAL, "--node-name (NODE_NAME): required by the plugin check");
    enum nodestate_mig_strategy ms;
    if (v->mig_strategy && nodestate_mig_strategy_parse(v->mig_strategy, &ms) < 0)
        return err_set(e, -EINVAL, "--mig-strategy: \"%s\" is not none, single or mixed",
                       v->mig_strategy);
    int w = v->sysfs_root ? snprintf(v->sysfs, sizeof(v->sysfs), "%s", v->sysfs_root)
                          : snprintf(v->sysfs, sizeof(v->sysfs), "%s/sys",
                                     strcmp(v->host_root, "/") == 0 ? "" : v->host_root);
    if (w < 0 || (size_t)w >= sizeof(v->sysfs))
        return err_set(e, -ENAMETOOLONG, "--sysfs-root: path too long");
    return 0;
}

/* ---- the API server: Events and annotations on the node ----------------------------------- */

static json_t *node_ref(struct val *v)
{
    return json_pack("{s:s,s:s,s:{s:s,s:s}}", "kind", "Node", "apiVersion", "v1", "metadata",
                     "name", v->node_name, "uid", v->node_name);
}

static void post_event(struct val *v, const char *type, const char *reason, const char *msg)
{
    if (!v->kc)
        return;
    _cleanup_json_ json_t *ref = node_ref(v);
    struct kube_event ev = {.involved = ref,
                            .type = type,
                            .reason = reason,
                            .message = msg,
                            .component = "gpuop-validator",
                            .host = v->node_name};
    struct err e = {0};
    if (kube_event_create(v->kc, &ev, &e) < 0)
        log_warn(COMP, "cannot post the Event", "node=%s reason=%s error=\"%s\"", v->node_name,
                 reason, quoted(e.msg));
}

static void annotate(struct val *v, enum nodestate_vstate state, const char *reason)
{
    enum nodestate_component nc;
    if (!v->kc || val_component_ns((enum val_component)v->component, &nc) < 0)
        return;
    struct nodestate_validation nv = {.state = state};
    strlcpy_s(nv.reason, reason ? reason : "", sizeof(nv.reason));
    time_rfc3339(now_ms_real(), nv.time, sizeof(nv.time));
    _cleanup_free_ char *text = NULL;
    char key[128];
    nodestate_validation_key(nc, key, sizeof(key));
    if (nodestate_validation_render(&nv, &text) < 0)
        return;
    _cleanup_json_ json_t *patch = json_pack("{s:{s:{s:s}}}", "metadata", "annotations", key, text);
    struct kube_patch_opts po = {.type = KUBE_PATCH_MERGE};
    struct err e = {0};
    if (kube_patch(v->kc, &KUBE_NODES, NULL, v->node_name, &po, patch, NULL, &e) < 0)
        log_warn(COMP, "cannot annotate the node", "node=%s key=%s error=\"%s\"", v->node_name, key,
                 quoted(e.msg));
}

/* A passed driver check records the owner it verified, with the version NVML reports (the
 * driver manager records the owner before a containerized driver is loaded, without one). */
static void annotate_owner(struct val *v, enum val_driver_source src, const char *version,
                           const char *found)
{
    if (!v->kc || !v->node_name)
        return;
    struct nodestate_driver_owner o = {.owner = src == VAL_SRC_HOST ? NODESTATE_OWNER_HOST
                                                                    : NODESTATE_OWNER_CONTAINER};
    strlcpy_s(o.version, version ? version : "", sizeof(o.version));
    val_say(o.source, sizeof(o.source), "validated: %s", found);
    time_rfc3339(now_ms_real(), o.time, sizeof(o.time));
    _cleanup_free_ char *text = NULL;
    if (nodestate_driver_owner_render(&o, &text) < 0)
        return;
    _cleanup_json_ json_t *patch =
        json_pack("{s:{s:{s:s}}}", "metadata", "annotations", NODESTATE_ANN_DRIVER_OWNER, text);
    struct kube_patch_opts po = {.type = KUBE_PATCH_MERGE};
    struct err e = {0};
    if (kube_patch(v->kc, &KUBE_NODES, NULL, v->node_name, &po, patch, NULL, &e) < 0)
        log_warn(COMP, "cannot annotate the node", "node=%s key=%s error=\"%s\"", v->node_name,
                 NODESTATE_ANN_DRIVER_OWNER, quoted(e.msg));
}

/* Whether a DaemonSet matching sel runs in the operator's namespace. An API error counts as
 * no (logged): the check then goes by the node's files alone. */
static bool daemonset_exists(struct val *v, const char *sel)
{
    if (!v->kc)
        return false;
    const char *ns = v->ns ? v->ns : kube_client_namespace(v->kc);
    struct kube_list_opts lo = {.label_selector = sel};
    _cleanup_json_ json_t *list = NULL;
    struct err e = {0};
    if (kube_list(v->kc, &KUBE_DAEMONSETS, ns, &lo, &list, &e) < 0) {
        log_warn(COMP, "cannot list DaemonSets", "namespace=%s selector=%s error=\"%s\"", ns, sel,
                 quoted(e.msg));
        return false;
    }
    return json_array_size(json_object_get(list, "items")) > 0;
}

/* What the driver pod on this node says of why the driver is not ready (appended to reason):
 * the pods of the driver DaemonSets (their selectors) bound to this node. Nothing on an API
 * error or without a pod. */
static void driver_pod_reason(struct val *v, char *reason, size_t rn)
{
    if (!v->kc || !v->node_name)
        return;
    const char *ns = v->ns ? v->ns : kube_client_namespace(v->kc);
    struct kube_list_opts lo = {.label_selector = DRIVER_DS_SEL};
    _cleanup_json_ json_t *dss = NULL;
    struct err e = {0};
    if (kube_list(v->kc, &KUBE_DAEMONSETS, ns, &lo, &dss, &e) < 0)
        return;
    _cleanup_free_ char *field = xasprintf("spec.nodeName=%s", v->node_name);
    size_t i;
    json_t *ds;
    json_array_foreach (json_object_get(dss, "items"), i, ds) {
        _cleanup_free_ char *sel = kobj_selector_string(kobj_path(ds, "spec.selector.matchLabels"));
        if (!sel || !*sel)
            continue;
        struct kube_list_opts po = {.label_selector = sel, .field_selector = field};
        _cleanup_json_ json_t *pods = NULL;
        if (kube_list(v->kc, &KUBE_PODS, ns, &po, &pods, &e) < 0) {
            log_warn(COMP, "cannot list the driver's pods", "namespace=%s error=\"%s\"", ns,
                     quoted(e.msg));
            return;
        }
        json_t *pod = json_array_get(json_object_get(pods, "items"), 0);
        char why[NODESTATE_REASON_MAX];
        if (!pod)
            continue;
        val_driver_pod_reason(pod, why, sizeof(why));
        size_t used = strlen(reason);
        val_say(reason + used, rn - used, "; driver pod %s: %s",
                kobj_path_str(pod, "metadata.name"), why[0] ? why : "no container status yet");
        return;
    }
}

/* ---- shared steps ------------------------------------------------------------------------- */

/* driver-ready, parsed. 1 with reason when it is not there (the driver check has not passed). */
static int read_driver_ready(struct val *v, struct nodestate_driver_ready *ret, char *reason,
                             size_t rn, struct err *e)
{
    char path[PATH_MAX];
    if (nodestate_file_path(v->validations_dir, NODESTATE_DRIVER_READY, path, sizeof(path)) < 0)
        return err_set(e, -ENAMETOOLONG, "--validations-dir: path too long");
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    struct err fe = {0};
    int r = file_read_all(path, STATUS_MAX, &text, &len, &fe);
    if (r == -ENOENT) {
        val_say(reason, rn, "%s is missing: the driver check has not passed", path);
        return 1;
    }
    if (r < 0 || (r = nodestate_driver_ready_parse(path, text, len, ret, &fe)) < 0) {
        val_say(reason, rn, "%s", fe.msg);
        return 1;
    }
    return 0;
}

/* NVML of the driver root driver-ready names ($GPUOP_NVML_LIBRARY overrides). */
static int open_nvml(const struct nodestate_driver_ready *dr, struct gpu_lib **ret, char *reason,
                     size_t rn)
{
    char lib[PATH_MAX] = "";
    if (!env_get("GPUOP_NVML_LIBRARY"))
        (void)nodestate_root_find(dr->driver_root_ctr, nodestate_lib_dirs, "libnvidia-ml.so.1",
                                  false, lib, sizeof(lib));
    struct err e = {0};
    if (gpu_lib_open(lib[0] ? lib : NULL, ret, &e) < 0) {
        val_say(reason, rn, "NVML does not initialise: %s", e.msg);
        return 1;
    }
    return 0;
}

/* The inventory as nodestate's plain GPUs; the arrays point into inv. */
struct gpus {
    struct nodestate_gpu *v;
    const char **names; /* every MIG device's profile then uuid, 2 per MIG device */
    char (*ids)[32];    /* "GPU 2 (no UUID)" for a GPU NVML could not read the UUID of */
    size_t n;
};

static void gpus_free(struct gpus *g)
{
    free(g->v);
    free(g->names);
    free(g->ids);
}

static void gpus_from(const struct gpu_inventory *inv, struct gpus *ret)
{
    size_t n_mig = 0;
    for (size_t i = 0; i < inv->n_gpus; i++)
        n_mig += inv->gpus[i].mig_enabled ? inv->gpus[i].n_mig : 0;
    ret->n = inv->n_gpus;
    ret->v = xcalloc(inv->n_gpus ? inv->n_gpus : 1, sizeof(*ret->v));
    ret->names = xcalloc(2 * n_mig + 1, sizeof(*ret->names));
    ret->ids = xcalloc(inv->n_gpus ? inv->n_gpus : 1, sizeof(*ret->ids));
    size_t k = 0;
    for (size_t i = 0; i < inv->n_gpus; i++) {
        const struct gpu_device *d = &inv->gpus[i];
        struct nodestate_gpu *g = &ret->v[i];
        g->uuid = d->uuid;
        if (!d->uuid[0] || strcmp(d->uuid, "-") == 0) { /* a lost GPU may not tell it */
            snprintf(ret->ids[i], sizeof(ret->ids[i]), "GPU %u (no UUID)", d->index);
            g->uuid = ret->ids[i];
        }
        g->lost = d->lost;
        g->mig_enabled = d->mig_enabled;
        if (!d->mig_enabled)
            continue;
        g->n_mig = d->n_mig;
        g->mig_profiles = ret->names + k;
        for (size_t m = 0; m < d->n_mig; m++)
            ret->names[k++] = d->mig[m].profile;
        g->mig_uuids = ret->names + k;
        for (size_t m = 0; m < d->n_mig; m++)
            ret->names[k++] = d->mig[m].uuid;
    }
}

/* NVIDIA display and 3D controllers (vendor 0x10de, class 0x03xxxx) under sysfs; -1 when the
 * PCI devices cannot be listed (a simulated node, sysfs not mounted). */
static int count_pci_gpus(const char *sysfs)
{
    _cleanup_free_ char *dir = xasprintf("%s/bus/pci/devices", sysfs);
    _cleanup_(closedirp) DIR *d = opendir(dir);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char *attr[2] = {NULL, NULL};
        static const char *const names[] = {"vendor", "class"};
        bool ok = true;
        for (size_t i = 0; i < 2 && ok; i++) {
            _cleanup_free_ char *p = xasprintf("%s/%s/%s", dir, de->d_name, names[i]);
            size_t len;
            struct err e = {0};
            ok = file_read_all(p, 64, &attr[i], &len, &e) == 0;
        }
        if (ok && str_has_prefix(attr[0], "0x10de") && str_has_prefix(attr[1], "0x03"))
            n++;
        free(attr[0]);
        free(attr[1]);
    }
    return n;
}

/* ---- the checks: 0 passed (status file written), 1 not yet (reason), <0 an error ---------- */

static int check_driver(struct val *v, char *reason, size_t rn, struct err *e)
{
    struct val_paths p = {v->host_root, v->driver_root, v->validations_dir};
    struct nodestate_driver_facts f;
    int r = nodestate_driver_probe(p.host_root, p.driver_root, p.validations_dir, &f, e);
    if (r < 0)
        return r;
    bool managed = daemonset_exists(v, DRIVER_DS_SEL);
    struct val_driver_plan pl;
    val_driver_plan(&p, &f, managed, &pl);
    if (!pl.check) {
        val_say(reason, rn, "%s", pl.reason);
        if (managed)
            driver_pod_reason(v, reason, rn);
        return 1;
    }
    const char *lib = env_get("GPUOP_NVML_LIBRARY") || !pl.nvml[0] ? NULL : pl.nvml;
    _cleanup_(gpu_lib_freep) struct gpu_lib *nv = NULL;
    _cleanup_(gpu_inventory_freep) struct gpu_inventory *inv = NULL;
    struct err ne = {0};
    struct val_driver_seen seen = {.expected_version = v->driver_version};
    if (gpu_lib_open(lib, &nv, &ne) < 0 || gpu_inventory_read(nv, &inv, &ne) < 0) {
        seen.nvml_error = ne.msg;
    } else {
        seen.n_gpus = inv->n_gpus;
        for (size_t i = 0; i < inv->n_gpus; i++)
            seen.n_lost += inv->gpus[i].lost;
        seen.version = inv->driver_version;
    }
    seen.pci_gpus = count_pci_gpus(v->sysfs);
    if (val_driver_verify(&seen, reason, rn) < 0) {
        size_t used = strlen(reason);
        val_say(reason + used, rn - used, " (%s driver: %s)", val_driver_source_name(pl.source),
                pl.found);
        return 1;
    }
    _cleanup_free_ char *text = NULL;
    if ((r = nodestate_driver_ready_render(&pl.ready, &text, e)) < 0 ||
        (r = nodestate_file_write(v->validations_dir, NODESTATE_DRIVER_READY, text, e)) < 0)
        return r;
    annotate_owner(v, pl.source, seen.version, pl.found);
    log_info(COMP, "driver validated", "source=%s found=\"%s\" version=%s gpus=%zu pci=%d",
             val_driver_source_name(pl.source), quoted(pl.found), seen.version, seen.n_gpus,
             seen.pci_gpus);
    return 0;
}

static bool spec_has(void *ud, const char *name)
{
    return cdi_spec_has_device(ud, name);
}

static int check_toolkit(struct val *v, char *reason, size_t rn, struct err *e)
{
    struct nodestate_driver_ready dr;
    int r = read_driver_ready(v, &dr, reason, rn, e);
    if (r != 0)
        return r;
    /* The toolkit daemon's marker: required when gpuop's toolkit runs on the cluster. */
    char mpath[PATH_MAX];
    if (nodestate_file_path(v->validations_dir, NODESTATE_TOOLKIT_CTR_READY, mpath, sizeof(mpath)) <
        0)
        return err_set(e, -ENAMETOOLONG, "--validations-dir: path too long");
    _cleanup_free_ char *mtext = NULL;
    size_t mlen = 0;
    struct err fe = {0};
    r = file_read_all(mpath, STATUS_MAX, &mtext, &mlen, &fe);
    if (r == -ENOENT && daemonset_exists(v, TOOLKIT_DS_SEL)) {
        val_say(reason, rn, "waiting for the toolkit: %s is not there yet", mpath);
        return 1;
    }
    if (r < 0 && r != -ENOENT) {
        val_say(reason, rn, "%s", fe.msg);
        return 1;
    }
    struct nodestate_toolkit_marker tm;
    if (nodestate_toolkit_marker_parse(mpath, r == 0 ? mtext : NULL, mlen, &tm, &fe) < 0) {
        val_say(reason, rn, "%s", fe.msg);
        return 1;
    }
    /* The node's CDI spec names every GPU and MIG device. */
    char spath[PATH_MAX];
    if (nodestate_root_resolve(v->host_root, tm.cdi_spec, spath, sizeof(spath)) < 0) {
        val_say(reason, rn, "CDI spec %s under %s: cannot resolve its path", tm.cdi_spec,
                v->host_root);
        return 1;
    }
    _cleanup_free_ char *stext = NULL;
    size_t slen = 0;
    if (file_read_all(spath, CDI_SPEC_MAX, &stext, &slen, &fe) < 0) {
        val_say(reason, rn, "CDI spec: %s", fe.msg);
        return 1;
    }
    _cleanup_(cdi_spec_freep) struct cdi_spec *spec = NULL;
    if (cdi_spec_parse(spath, stext, slen, &spec, &fe) < 0) {
        val_say(reason, rn, "CDI spec \"%s\" does not parse: %s", spath, fe.msg);
        return 1;
    }
    _cleanup_(gpu_lib_freep) struct gpu_lib *nv = NULL;
    if ((r = open_nvml(&dr, &nv, reason, rn)) != 0)
        return r;
    _cleanup_(gpu_inventory_freep) struct gpu_inventory *inv = NULL;
    if (gpu_inventory_read(nv, &inv, &fe) < 0) {
        val_say(reason, rn, "read the GPUs: %s", fe.msg);
        return 1;
    }
    struct gpus g _cleanup_(gpus_free) = {0};
    gpus_from(inv, &g);
    char missing[NODESTATE_REASON_MAX];
    size_t nm = val_cdi_missing(g.v, g.n, spec_has, spec, missing, sizeof(missing));
    if (nm > 0) {
        val_say(reason, rn, "CDI spec \"%s\" lacks %zu device%s: %s", spath, nm, nm == 1 ? "" : "s",
                missing);
        return 1;
    }
    /* The runtime the node runs is configured for GPUs (unless the toolkit left it alone). */
    const char *rt_name = "none";
    if (tm.check_runtime) {
        const char *rtv = NULL;
        _cleanup_json_ json_t *node = NULL;
        if (v->kc && kube_get(v->kc, &KUBE_NODES, NULL, v->node_name, &node, &fe) == 0)
            rtv = kobj_path_str(node, "status.nodeInfo.containerRuntimeVersion");
        enum rtconfig_kind kind;
        if (rtconfig_detect(v->host_root, rtv, tm.runtime[0] ? tm.runtime : NULL, &kind, &fe) < 0) {
            val_say(reason, rn, "container runtime: %s", fe.msg);
            return 1;
        }
        struct rtconfig_options ro = {.runtime_name = tm.runtime_name,
                                      .runtime_path = tm.runtime_path,
                                      .enable_cdi = tm.cdi_enabled,
                                      .config_path =
                                          tm.runtime_config[0] ? tm.runtime_config : NULL};
        if (rtconfig_check(v->host_root, kind, &ro, &fe) < 0) {
            val_say(reason, rn, "%s is not configured for GPUs: %s", rtconfig_kind_name(kind),
                    fe.msg);
            return 1;
        }
        rt_name = rtconfig_kind_name(kind);
    }
    if ((r = nodestate_file_write(v->validations_dir, NODESTATE_TOOLKIT_READY, NULL, e)) < 0)
        return r;
    log_info(COMP, "toolkit validated", "runtime=%s cdi-spec=%s devices=%zu", rt_name, spath,
             cdi_spec_n_devices(spec));
    return 0;
}

static int check_cuda(struct val *v, char *reason, size_t rn, struct err *e)
{
    struct nodestate_driver_ready dr;
    int r = read_driver_ready(v, &dr, reason, rn, e);
    if (r != 0)
        return r;
    char lib[PATH_MAX] = "";
    if (!env_get("GPUOP_CUDA_LIBRARY") &&
        nodestate_root_find(dr.driver_root_ctr, nodestate_lib_dirs, "libcuda.so.1", false, lib,
                            sizeof(lib)) < 0) {
        val_say(reason, rn,
                "libcuda.so.1 is not under the driver root %s (searched its lib "
                "folders)",
                dr.driver_root_ctr);
        return 1;
    }
    struct cuda_check_result *res _cleanup_free_ = xcalloc(1, sizeof(*res));
    struct err ce = {0};
    if (cuda_check_run(lib[0] ? lib : NULL, 0, res, &ce) < 0) {
        val_say(reason, rn, "CUDA check: %s", ce.msg);
        return 1;
    }
    if ((r = nodestate_file_write(v->validations_dir, NODESTATE_CUDA_READY, NULL, e)) < 0)
        return r;
    log_info(COMP, "cuda validated", "devices=%d driver=%d", res->n_devices, res->driver_version);
    return 0;
}

static int check_plugin(struct val *v, char *reason, size_t rn, struct err *e)
{
    struct nodestate_driver_ready dr;
    int r = read_driver_ready(v, &dr, reason, rn, e);
    if (r != 0)
        return r;
    _cleanup_(gpu_lib_freep) struct gpu_lib *nv = NULL;
    if ((r = open_nvml(&dr, &nv, reason, rn)) != 0)
        return r;
    struct err fe = {0};
    _cleanup_(gpu_inventory_freep) struct gpu_inventory *inv = NULL;
    if (gpu_inventory_read(nv, &inv, &fe) < 0) {
        val_say(reason, rn, "read the GPUs: %s", fe.msg);
        return 1;
    }
    _cleanup_json_ json_t *node = NULL;
    if (kube_get(v->kc, &KUBE_NODES, NULL, v->node_name, &node, &fe) < 0) {
        val_say(reason, rn, "get the node: %s", fe.msg);
        return 1;
    }
    const char *label = kobj_label(node, "nvidia.com/mig.strategy");
    enum nodestate_mig_strategy ms = NODESTATE_MIG_NONE;
    if (nodestate_mig_strategy_parse(label ? label : v->mig_strategy, &ms) < 0) {
        val_say(reason, rn,
                "node label nvidia.com/mig.strategy: \"%s\" is not none, single or "
                "mixed",
                label);
        return 1;
    }
    _cleanup_free_ char *alloc = NULL;
    json_t *a = kobj_path(node, "status.allocatable");
    if (a)
        alloc = json_dumps(a, JSON_COMPACT);
    struct gpus g _cleanup_(gpus_free) = {0};
    gpus_from(inv, &g);
    struct nodestate_gpu_count *c _cleanup_free_ = xcalloc(1, sizeof(*c));
    if ((r = nodestate_gpu_count_compare(g.v, g.n, ms, alloc, c, &fe)) < 0) {
        val_say(reason, rn, "compare the GPUs: %s", fe.msg);
        return 1;
    }
    if (c->short_) {
        char why[NODESTATE_REASON_MAX];
        val_plugin_reason(c, why, sizeof(why));
        val_say(reason, rn, "the node advertises fewer GPUs than it has: %s", why);
        return 1;
    }
    if ((r = nodestate_file_write(v->validations_dir, NODESTATE_PLUGIN_READY, NULL, e)) < 0)
        return r;
    log_info(COMP, "plugin validated", "physical=%lld strategy=%s", (long long)c->physical,
             label ? label : "none");
    return 0;
}

static int check_all_done(struct val *v, char *reason, size_t rn, struct err *e)
{
    (void)e;
    char missing[256];
    if (val_status_missing(v->validations_dir, missing, sizeof(missing)) > 0) {
        val_say(reason, rn, "not validated yet: %s missing in %s", missing, v->validations_dir);
        return 1;
    }
    return 0;
}

static int check_toolkit_ready(struct val *v, char *reason, size_t rn, struct err *e)
{
    (void)e;
    if (!nodestate_file_exists(v->validations_dir, NODESTATE_TOOLKIT_READY)) {
        val_say(reason, rn, "waiting for %s in %s", nodestate_file_name(NODESTATE_TOOLKIT_READY),
                v->validations_dir);
        return 1;
    }
    return 0;
}

typedef int (*check_fn)(struct val *v, char *reason, size_t rn, struct err *e);

/* An inotify descriptor on the status folder, for the checks that read only status files
 * (all-done, the toolkit-ready wait): a file written there wakes the wait at once, where
 * --interval alone would leave an operand's init container up to that long behind the toolkit.
 * -1 when inotify is not available: the wait then polls every --interval alone. */
static int status_dir_watch(const struct val *v)
{
    if (v->component < VAL_ALL_DONE)
        return -1;
    int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (fd < 0)
        return -1;
    if (inotify_add_watch(fd, v->validations_dir,
                          IN_CREATE | IN_MOVED_TO | IN_CLOSE_WRITE | IN_DELETE | IN_ATTRIB) < 0) {
        log_warn(COMP, "cannot watch the status folder, polling it", "dir=%s error=\"%s\"",
                 v->validations_dir, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

/* Sleeps up to ms, or until the status folder changes (ifd >= 0), a stop or a reload. */
static enum svc_wake status_wait(struct svc *s, int ifd, uint64_t ms)
{
    if (ifd < 0)
        return svc_wait(s, ms);
    uint64_t end = deadline_after(ms);
    for (;;) {
        struct pollfd p[2] = {{.fd = svc_event_fd(s), .events = POLLIN},
                              {.fd = ifd, .events = POLLIN}};
        uint64_t left = deadline_left_ms(end);
        int r = poll(p, 2, left > INT32_MAX ? INT32_MAX : (int)left);
        if (r < 0 && errno != EINTR)
            return svc_wait(s, left);
        if (r > 0 && (p[0].revents & POLLIN)) {
            enum svc_wake w = svc_dispatch(s);
            if (w != SVC_TIMEOUT)
                return w;
        }
        if (r > 0 && (p[1].revents & POLLIN)) {
            _Alignas(struct inotify_event) char buf[4096];
            while (read(ifd, buf, sizeof(buf)) > 0)
                ;
            return SVC_TIMEOUT; /* look again */
        }
        if (deadline_left_ms(end) == 0)
            return SVC_TIMEOUT;
    }
}

static int val_run(struct svc *s, struct err *e)
{
    struct val *v = svc_state(s);
    static const check_fn checks[] = {check_driver, check_toolkit,  check_cuda,
                                      check_plugin, check_all_done, check_toolkit_ready};
    const char *name = val_component_names[v->component];
    enum nodestate_component nc;
    bool has_file = val_component_ns((enum val_component)v->component, &nc) == 0;
    _cleanup_(kube_client_freep) struct kube_client *kc = NULL;
    if (v->node_name) {
        struct kube_options ko = {.kubeconfig = v->kubeconfig,
                                  .stop = svc_stop(s),
                                  .timeout_ms = API_TIMEOUT_MS,
                                  .call_timeout_ms = 2 * API_TIMEOUT_MS};
        struct err ke = {0};
        if (kube_client_new(&ko, &kc, &ke) < 0) {
            if (v->component == VAL_PLUGIN)
                return err_set(e, ke.code, "API client: %s", ke.msg);
            log_warn(COMP, "no API server: no Events or annotations", "error=\"%s\"",
                     quoted(ke.msg));
        }
    }
    v->kc = kc;
    /* The plugin check always waits up to --timeout (the kubelet needs the plugin's first
     * update); the others try once, or forever with --wait. */
    bool polls = v->wait || v->component == VAL_PLUGIN;
    uint64_t deadline =
        v->component == VAL_PLUGIN ? deadline_after(v->timeout_ms) : (v->wait ? DEADLINE_NEVER : 0);
    char reason[NODESTATE_REASON_MAX] = "", last[NODESTATE_REASON_MAX] = "";
    _cleanup_close_ int ifd = polls ? status_dir_watch(v) : -1;
    for (;;) {
        reason[0] = '\0';
        int r = checks[v->component](v, reason, sizeof(reason), e);
        if (r < 0)
            strlcpy_s(reason, e->msg, sizeof(reason));
        bool more = polls && (deadline == DEADLINE_NEVER || deadline_left_ms(deadline) > 0);
        struct val_report rep;
        val_report_plan((enum val_component)v->component,
                        r == 0  ? VAL_PASSED
                        : r > 0 ? VAL_NOT_YET
                                : VAL_ERROR,
                        reason, last, more, &rep);
        struct err re = {0};
        if (rep.remove_file && has_file &&
            nodestate_file_remove(v->validations_dir, nodestate_component_file(nc), &re) < 0)
            log_warn(COMP, "cannot remove the status file", "error=\"%s\"", quoted(re.msg));
        if (rep.log_retry)
            log_warn(COMP, "not validated yet, retrying", "component=%s reason=\"%s\" every=%llums",
                     name, quoted(reason), (unsigned long long)v->interval_ms);
        if (rep.annotate)
            annotate(v, rep.state, rep.state == NODESTATE_V_OK ? NULL : reason);
        if (rep.event)
            post_event(v, rep.warning ? "Warning" : "Normal", rep.event_reason, rep.message);
        if (rep.next == VAL_NEXT_FAIL)
            return r < 0 ? err_set(e, r, "%s", rep.message)
                         : err_set(e, -ENODEV, "%s", rep.message);
        if (rep.next == VAL_NEXT_DONE)
            break;
        memcpy(last, reason, sizeof(last));
        uint64_t nap = v->interval_ms;
        if (deadline != DEADLINE_NEVER && deadline_left_ms(deadline) < nap)
            nap = deadline_left_ms(deadline);
        if (status_wait(s, ifd, nap) == SVC_STOP) {
            log_info(COMP, "stopped before the check passed", "component=%s", name);
            return 0;
        }
    }
    if (v->component != VAL_ALL_DONE)
        return 0;
    log_info(COMP, "all validations are successful", "dir=%s", v->validations_dir);
    while (svc_wait(s, DEADLINE_NEVER) != SVC_STOP)
        ;
    return 0;
}

const struct svc_component validator_component = {
    .name = COMP,
    .usage = "Usage: gpuop validator --component=driver|toolkit|cuda|plugin|all-done|toolkit-ready"
             " [flags]\n\n"
             "Validates one layer of the node's GPU stack, as NVIDIA's operator validator does,\n"
             "and writes its status file in /run/nvidia/validations (driver-ready, toolkit-ready,\n"
             "cuda-ready, plugin-ready) only when it passes. all-done checks every status file,\n"
             "then waits for a signal. toolkit-ready (with --wait) waits for toolkit-ready: the\n"
             "init container of the operands that need the toolkit.\n",
    .flags_title = "Flags (each also set by the environment variable shown; flag > env > "
                   "default):",
    .options = {val_options},
    .epilogue = "Other environment:\n"
                "  GPUOP_NVML_LIBRARY   libnvidia-ml.so.1 to load (default: the driver root's)\n"
                "  GPUOP_CUDA_LIBRARY   libcuda.so.1 to load (default: the driver root's)\n\n"
                "A failure is one line, an Event on the node (ValidationFailed) and the node\n"
                "annotation validation.gpuop.dev/<component>.\n"
                "Exit status: 0 when the check passed (or a signal stopped it), 1 when it failed,\n"
                "2 on bad usage (an unknown component, a missing host root, a status folder that\n"
                "cannot be listed).\n",
    .state_size = sizeof(struct val),
    .defaults = val_defaults,
    .configure = val_configure,
    .run = val_run,
};
