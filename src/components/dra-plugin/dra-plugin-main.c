/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpuop dra-plugin`: the shell around the core (dra-plugin.h). It reads NVML, publishes the
 * node's ResourceSlices, writes the node's CDI spec (nvcdi, kind k8s.gpu.nvidia.com/device),
 * serves the kubelet's DRA service and plugin registration, and keeps the prepared claims in
 * its checkpoint. `gpuop dra-plugin slices` prints the slices once.
 *
 * Threads: the component's own (publication every --resync), the health thread (NVML's XID and
 * ECC events through the device plugins' policy, gpuhealth.h), the DRA server's loop (prepare,
 * unprepare) and the registration server's loop. pl->mu guards the model, the inventory, the
 * claims and the GPUs' faults; the gRPC handlers read claims from the informer's store, never from
 * the network.
 */
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dra-plugin.h"
#include "dra/v1/api.pb-c.h"
#include "gpuhealth.h"
#include "grpc.h"
#include "kobj.h"
#include "kube.h"
#include "nvcdi.h"
#include "pluginregistration/v1/api.pb-c.h"
#include "svc.h"

#define COMP            "dra-plugin"
#define DRA_SERVICE     "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/"
#define REG_SERVICE     "/pluginregistration.Registration/"
#define CHECKPOINT_FILE "checkpoint.json"

static const struct kube_resource RESOURCE_SLICES = {"resource.k8s.io", "v1", "resourceslices",
                                                     "ResourceSlice", false};
static const struct kube_resource RESOURCE_CLAIMS = {"resource.k8s.io", "v1", "resourceclaims",
                                                     "ResourceClaim", true};

struct dra_flags {
    const char *node_name, *kubeconfig, *library;
    const char *host_root;    /* where this process sees the host's "/" */
    const char *registry_dir; /* host paths */
    const char *plugin_dir;
    const char *cdi_dir;
    const char *driver_root;
    uint64_t resync_ms;
    uint64_t recovery_ms;
};

static const struct svc_option dra_common_options[] = {
    {.kind = SVC_FRAGMENT,
     .fragment = svc_node_name_option,
     .off = offsetof(struct dra_flags, node_name)},
    {.flag = "library",
     .env = "GPUOP_NVML_LIBRARY",
     .kind = SVC_STRING,
     .off = offsetof(struct dra_flags, library),
     .metavar = "PATH",
     .help = "the NVML library to load (default: libnvidia-ml.so.1)"},
    {0},
};

static const struct svc_option dra_options[] = {
    {.kind = SVC_FRAGMENT,
     .fragment = svc_kubeconfig_option,
     .off = offsetof(struct dra_flags, kubeconfig)},
    {.flag = "host-root",
     .env = "DRA_HOST_ROOT",
     .kind = SVC_STRING,
     .off = offsetof(struct dra_flags, host_root),
     .metavar = "DIR",
     .help = "where this process sees the host's / (\"/\"); the other paths are the host's"},
    {.flag = "registry-dir",
     .env = "DRA_REGISTRY_DIR",
     .kind = SVC_STRING,
     .off = offsetof(struct dra_flags, registry_dir),
     .metavar = "DIR",
     .help = "the kubelet's plugin registration folder (/var/lib/kubelet/plugins_registry)"},
    {.flag = "plugin-dir",
     .env = "DRA_PLUGIN_DIR",
     .kind = SVC_STRING,
     .off = offsetof(struct dra_flags, plugin_dir),
     .metavar = "DIR",
     .help = "the plugin's socket and checkpoint folder (/var/lib/kubelet/plugins/gpu.nvidia.com)"},
    {.flag = "cdi-dir",
     .env = "DRA_CDI_DIR",
     .kind = SVC_STRING,
     .off = offsetof(struct dra_flags, cdi_dir),
     .metavar = "DIR",
     .help = "where the CDI specs are written (/var/run/cdi)"},
    {.flag = "driver-root",
     .env = "NVIDIA_DRIVER_ROOT",
     .kind = SVC_STRING,
     .off = offsetof(struct dra_flags, driver_root),
     .metavar = "DIR",
     .help = "the driver's root on the host, for the CDI spec (default: as driver-ready says)"},
    {.flag = "resync",
     .env = "DRA_RESYNC",
     .kind = SVC_DURATION,
     .min = 100,
     .finite = true,
     .off = offsetof(struct dra_flags, resync_ms),
     .metavar = "DUR",
     .help = "how often the GPUs are read again and the slices checked (10s)"},
    {.flag = "health-recovery-period",
     .env = "DRA_HEALTH_RECOVERY_PERIOD",
     .kind = SVC_DURATION,
     .finite = true,
     .off = offsetof(struct dra_flags, recovery_ms),
     .metavar = "DUR",
     .help = "a GPU withdrawn for an XID or ECC error is published again after DUR without\n"
             "one (0: not until the plugin restarts; a lost GPU never)"},
    {0},
};

static void dra_defaults(void *state)
{
    struct dra_flags *f = state;
    f->host_root = "/";
    f->registry_dir = "/var/lib/kubelet/plugins_registry";
    f->plugin_dir = "/var/lib/kubelet/plugins/" DRA_DRIVER_NAME;
    f->cdi_dir = "/var/run/cdi";
    f->resync_ms = 10000;
}

/* ---- reading the node -------------------------------------------------------------------------
 */

/* The PCIe root complex of a GPU: the "pci<domain>:<bus>" folder its sysfs device resolves
 * under; "" when unknown. */
static void pcie_root_of(const char *bus_id, char *buf, size_t n)
{
    buf[0] = 0;
    char name[GPU_BUSID_MAX];
    if (gpu_bus_id_sysfs(bus_id, name, sizeof(name)) < 0)
        return;
    const char *sys = getenv("GPUOP_SYSFS_ROOT");
    _cleanup_free_ char *link = xasprintf("%s/bus/pci/devices/%s", sys ? sys : "/sys", name);
    char real[PATH_MAX];
    if (!realpath(link, real))
        return;
    const char *p = strstr(real, "/devices/pci");
    if (!p)
        return;
    p += strlen("/devices/");
    size_t len = strcspn(p, "/");
    if (len < n)
        snprintf(buf, n, "%.*s", (int)len, p);
}

struct node_view {
    struct gpu_inventory *inv;
    struct dra_gpu_extra *extra;
    struct dra_model *model;
};

static void node_view_clear(struct node_view *v)
{
    dra_model_free(v->model);
    free(v->extra);
    gpu_inventory_free(v->inv);
    memset(v, 0, sizeof(*v));
}

#define FAULTS_MAX 64

/* The GPUs' last counted XID or ECC error (monotonic ms), by UUID. */
struct gpu_faults {
    size_t n;
    char uuid[FAULTS_MAX][GPU_UUID_MAX];
    uint64_t at_ms[FAULTS_MAX];
};

static uint64_t fault_of(const struct gpu_faults *fs, const char *uuid)
{
    for (size_t i = 0; fs && i < fs->n; i++)
        if (strcmp(fs->uuid[i], uuid) == 0)
            return fs->at_ms[i];
    return 0;
}

static void fault_note(struct gpu_faults *fs, const char *uuid, uint64_t now)
{
    size_t i = 0;
    while (i < fs->n && strcmp(fs->uuid[i], uuid) != 0)
        i++;
    if (i == fs->n) {
        if (fs->n == FAULTS_MAX)
            return;
        strlcpy_s(fs->uuid[fs->n++], uuid, GPU_UUID_MAX);
    }
    fs->at_ms[i] = now ? now : 1;
}

/* faults: a copy of the GPUs' faults (NULL: none known), recovery_ms as dra_gpu_withdrawn. */
static int node_read(struct gpu_lib *lib, const struct gpu_faults *faults, uint64_t recovery_ms,
                     struct node_view *ret, struct err *e)
{
    struct node_view v = {0};
    int r = gpu_inventory_read(lib, &v.inv, e);
    if (r < 0)
        return err_prefix(e, "GPU inventory");
    v.extra = xcalloc(v.inv->n_gpus + 1, sizeof(*v.extra));
    for (size_t i = 0; i < v.inv->n_gpus; i++) {
        pcie_root_of(v.inv->gpus[i].bus_id, v.extra[i].pcie_root, sizeof(v.extra[i].pcie_root));
        /* a GPU NVML lost, or with a fault the health policy counts, is withdrawn */
        v.extra[i].unhealthy = dra_gpu_withdrawn(
            v.inv->gpus[i].lost, fault_of(faults, v.inv->gpus[i].uuid), now_ms_mono(), recovery_ms);
    }
    struct dra_model_input in = {.inv = v.inv, .extra = v.extra};
    if ((r = dra_model_build(&in, &v.model, e)) < 0) {
        node_view_clear(&v);
        return r;
    }
    for (size_t i = 0; i < v.model->n_warnings; i++)
        log_warn(COMP, "device left out", "reason=\"%s\"", v.model->warnings[i]);
    *ret = v;
    return 0;
}

/* ---- `gpuop dra-plugin slices` -----------------------------------------------------------------
 */

static int slices_run(struct svc *s, struct err *e)
{
    struct dra_flags *f = svc_state(s);
    if (!f->node_name || !f->node_name[0])
        return svc_bad_input(s, err_set(e, -EINVAL, "--node-name (NODE_NAME) is required"));
    _cleanup_(gpu_lib_freep) struct gpu_lib *lib = NULL;
    int r = gpu_lib_open(f->library, &lib, e);
    if (r < 0)
        return r;
    struct node_view v = {0};
    if ((r = node_read(lib, NULL, 0, &v, e)) < 0)
        return r;
    struct dra_slice_meta meta = {.node_name = f->node_name, .generation = 0};
    json_t *slices = NULL;
    r = dra_slices_render(v.model, &meta, &slices, e);
    node_view_clear(&v);
    if (r < 0)
        return r;
    char *text = json_dumps(slices, JSON_INDENT(2) | JSON_SORT_KEYS);
    json_decref(slices);
    if (!text)
        return err_set(e, -ENOMEM, "ResourceSlices: JSON");
    printf("%s\n", text);
    free(text);
    return 0;
}

static const struct svc_component dra_slices_component = {
    .name = "slices",
    .summary = "Print the node's ResourceSlices as JSON, once",
    .options = {dra_common_options},
    .state_size = sizeof(struct dra_flags),
    .run = slices_run,
};

/* ---- the plugin --------------------------------------------------------------------------------
 */

struct plugin {
    struct dra_flags *f;
    pthread_mutex_t mu;
    struct node_view view;
    struct dra_claims claims;
    struct kube_informer *claims_inf;
    struct gpu_lib *lib;
    struct stop_token *stop;
    struct gh_policy hp;
    struct gpu_faults faults;
    char checkpoint[PATH_MAX];
    char cdi_dir[PATH_MAX]; /* this process's view */
};

static int checkpoint_save(struct plugin *pl, struct err *e)
{
    _cleanup_free_ char *text = NULL;
    int r = dra_checkpoint_encode(&pl->claims, &text, e);
    if (r < 0)
        return r;
    return file_write_atomic(pl->checkpoint, text, strlen(text), 0600, e);
}

static char *claim_spec_path(const struct plugin *pl, const char *uid)
{
    return xasprintf("%s/%s-claim_%s.json", pl->cdi_dir, DRA_CDI_VENDOR, uid);
}

typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourceResponse PrepOne;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Device PrepDevice;

/* What one claim's answer holds, freed after the reply. */
struct prep_scratch {
    PrepDevice *devices;
    PrepDevice **device_ptrs;
    char **request_ptrs;
    char (*ids)[2][DRA_CDI_ID_MAX];
    char **id_ptrs;
    char *error;
};

static void prep_scratch_free(struct prep_scratch *s)
{
    free(s->devices);
    free(s->device_ptrs);
    free(s->request_ptrs);
    free(s->ids);
    free(s->id_ptrs);
    free(s->error);
}

/* The answer for a prepared claim (pointers into c and s; valid while pl->mu is held). */
static void prep_answer(const struct dra_claim *c, PrepOne *one, struct prep_scratch *s)
{
    size_t n = c->n_devices;
    s->devices = xcalloc(n + 1, sizeof(*s->devices));
    s->device_ptrs = xcalloc(n + 1, sizeof(*s->device_ptrs));
    s->request_ptrs = xcalloc(n + 1, sizeof(*s->request_ptrs));
    s->ids = xcalloc(n + 1, sizeof(*s->ids));
    s->id_ptrs = xcalloc(2 * n + 1, sizeof(*s->id_ptrs));
    for (size_t i = 0; i < n; i++) {
        PrepDevice *d = &s->devices[i];
        k8s__io__kubelet__pkg__apis__dra__v1__device__init(d);
        /* the request the scheduler allocated it for: "req" of "req/sub" names the container's */
        s->request_ptrs[i] = (char *)c->devices[i].request;
        d->n_request_names = 1;
        d->request_names = &s->request_ptrs[i];
        d->pool_name = (char *)c->devices[i].pool;
        d->device_name = (char *)c->devices[i].device;
        size_t k = dra_claim_cdi_ids(c, i, s->ids[i]);
        for (size_t j = 0; j < k; j++)
            s->id_ptrs[2 * i + j] = s->ids[i][j];
        d->n_cdi_device_ids = k;
        d->cdi_device_ids = &s->id_ptrs[2 * i];
        s->device_ptrs[i] = d;
    }
    one->n_devices = n;
    one->devices = s->device_ptrs;
}

/* Prepares one claim (pl->mu held): the checkpoint's answer again, else a plan from the claim
 * the informer holds. */
static int prepare_claim(struct plugin *pl, const struct dra_claim_ref *ref,
                         const struct dra_claim **ret, struct err *e)
{
    const struct dra_claim *have = dra_claims_find(&pl->claims, ref->uid);
    if (have && have->state == DRA_PREPARE_COMPLETED) {
        *ret = have;
        return 0;
    }
    if (!pl->view.model)
        return err_set(e, -EAGAIN, "claim %s/%s: the GPUs are not read yet", ref->ns, ref->name);
    json_t *obj = kube_informer_get(pl->claims_inf, ref->ns, ref->name);
    if (!obj)
        return err_set(e, -ENOENT, "claim %s/%s: not in the API server (yet)", ref->ns, ref->name);
    struct dra_claim *c = NULL;
    int r = dra_claim_plan(pl->view.model, pl->f->node_name, ref, obj, &c, e);
    json_decref(obj);
    if (r < 0)
        return r;
    for (size_t i = 0; i < c->n_devices; i++)
        if (c->devices[i].sharing.strategy == DRA_SHARE_MPS) {
            r = err_set(e, -EOPNOTSUPP,
                        "claim %s/%s: device %s: MPS sharing is not served by this plugin "
                        "(its control daemon is not implemented); use TimeSlicing",
                        ref->ns, ref->name, c->devices[i].device);
            dra_claim_free(c);
            return r;
        }
    if (dra_claim_has_edits(c)) {
        /* the claim's own CDI devices (none today: MPS is refused above) */
        struct dra_cdi_paths paths = {.mps_root = NULL};
        _cleanup_free_ char *spec = NULL, *path = claim_spec_path(pl, ref->uid);
        if ((r = dra_claim_cdi_spec(c, &paths, &spec, e)) < 0 ||
            (spec && (r = file_write_atomic(path, spec, strlen(spec), 0644, e)) < 0)) {
            dra_claim_free(c);
            return r;
        }
    }
    c->state = DRA_PREPARE_COMPLETED;
    if ((r = dra_claims_put(&pl->claims, c, e)) < 0) {
        dra_claim_free(c);
        return r;
    }
    if ((r = checkpoint_save(pl, e)) < 0) {
        dra_claim_free(dra_claims_take(&pl->claims, ref->uid));
        return err_prefix(e, "checkpoint");
    }
    log_info(COMP, "claim prepared", "claim=%s/%s uid=%s devices=%zu", ref->ns, ref->name, ref->uid,
             c->n_devices);
    *ret = c;
    return 0;
}

static void copy_ref(struct dra_claim_ref *ref,
                     const K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Claim *c)
{
    memset(ref, 0, sizeof(*ref));
    strlcpy_s(ref->uid, c->uid ? c->uid : "", sizeof(ref->uid));
    strlcpy_s(ref->ns, c->namespace_ ? c->namespace_ : "", sizeof(ref->ns));
    strlcpy_s(ref->name, c->name ? c->name : "", sizeof(ref->name));
}

static void on_prepare(struct grpc_call *call, const ProtobufCMessage *req, void *ud)
{
    struct plugin *pl = ud;
    const K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesRequest *rq = (const void *)req;
    size_t n = rq->n_claims;
    K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesResponse resp =
        K8S__IO__KUBELET__PKG__APIS__DRA__V1__NODE_PREPARE_RESOURCES_RESPONSE__INIT;
    K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesResponse__ClaimsEntry *entries =
        xcalloc(n + 1, sizeof(*entries));
    K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesResponse__ClaimsEntry **eptrs =
        xcalloc(n + 1, sizeof(*eptrs));
    PrepOne *ones = xcalloc(n + 1, sizeof(*ones));
    struct prep_scratch *scratch = xcalloc(n + 1, sizeof(*scratch));
    pthread_mutex_lock(&pl->mu);
    for (size_t i = 0; i < n; i++) {
        k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_response__claims_entry__init(
            &entries[i]);
        k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resource_response__init(&ones[i]);
        struct dra_claim_ref ref;
        copy_ref(&ref, rq->claims[i]);
        entries[i].key = rq->claims[i]->uid;
        entries[i].value = &ones[i];
        eptrs[i] = &entries[i];
        struct err e = {0};
        const struct dra_claim *c = NULL;
        if (prepare_claim(pl, &ref, &c, &e) < 0) {
            log_warn(COMP, "claim not prepared", "claim=%s/%s uid=%s error=\"%s\"", ref.ns,
                     ref.name, ref.uid, err_msg(&e));
            scratch[i].error = xstrdup(err_msg(&e));
            ones[i].error = scratch[i].error;
            continue;
        }
        prep_answer(c, &ones[i], &scratch[i]);
    }
    resp.n_claims = n;
    resp.claims = eptrs;
    grpc_call_reply_pb(call, &resp.base);
    pthread_mutex_unlock(&pl->mu);
    for (size_t i = 0; i < n; i++)
        prep_scratch_free(&scratch[i]);
    free(scratch);
    free(ones);
    free(eptrs);
    free(entries);
}

static void on_unprepare(struct grpc_call *call, const ProtobufCMessage *req, void *ud)
{
    struct plugin *pl = ud;
    const K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesRequest *rq =
        (const void *)req;
    size_t n = rq->n_claims;
    K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesResponse resp =
        K8S__IO__KUBELET__PKG__APIS__DRA__V1__NODE_UNPREPARE_RESOURCES_RESPONSE__INIT;
    K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesResponse__ClaimsEntry *entries =
        xcalloc(n + 1, sizeof(*entries));
    K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesResponse__ClaimsEntry **eptrs =
        xcalloc(n + 1, sizeof(*eptrs));
    K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourceResponse *ones =
        xcalloc(n + 1, sizeof(*ones));
    char **errors = xcalloc(n + 1, sizeof(*errors));
    pthread_mutex_lock(&pl->mu);
    for (size_t i = 0; i < n; i++) {
        k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resources_response__claims_entry__init(
            &entries[i]);
        k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resource_response__init(&ones[i]);
        struct dra_claim_ref ref;
        copy_ref(&ref, rq->claims[i]);
        entries[i].key = rq->claims[i]->uid;
        entries[i].value = &ones[i];
        eptrs[i] = &entries[i];
        /* a claim the plugin does not hold was unprepared already: nothing to do */
        struct dra_claim *c = dra_claims_take(&pl->claims, ref.uid);
        if (!c)
            continue;
        _cleanup_free_ char *path = claim_spec_path(pl, ref.uid);
        if (unlink(path) < 0 && errno != ENOENT)
            log_warn(COMP, "claim's CDI spec not removed", "path=%s errno=%d", path, errno);
        struct err e = {0};
        if (checkpoint_save(pl, &e) < 0) {
            /* keep it: the next unprepare tries again */
            (void)dra_claims_put(&pl->claims, c, &e);
            errors[i] = xasprintf("claim %s/%s: checkpoint: %s", ref.ns, ref.name, err_msg(&e));
            ones[i].error = errors[i];
            continue;
        }
        log_info(COMP, "claim unprepared", "claim=%s/%s uid=%s", ref.ns, ref.name, ref.uid);
        dra_claim_free(c);
    }
    resp.n_claims = n;
    resp.claims = eptrs;
    grpc_call_reply_pb(call, &resp.base);
    pthread_mutex_unlock(&pl->mu);
    for (size_t i = 0; i < n; i++)
        free(errors[i]);
    free(errors);
    free(ones);
    free(eptrs);
    free(entries);
}

static void on_get_info(struct grpc_call *call, const ProtobufCMessage *req, void *ud)
{
    (void)req;
    struct plugin *pl = ud;
    _cleanup_free_ char *endpoint = xasprintf("%s/dra.sock", pl->f->plugin_dir);
    char *versions[] = {(char *)"v1.DRAPlugin"};
    Pluginregistration__PluginInfo info = PLUGINREGISTRATION__PLUGIN_INFO__INIT;
    info.type = (char *)"DRAPlugin";
    info.name = (char *)DRA_DRIVER_NAME;
    info.endpoint = endpoint;
    info.n_supported_versions = 1;
    info.supported_versions = versions;
    grpc_call_reply_pb(call, &info.base);
}

static void on_registration_status(struct grpc_call *call, const ProtobufCMessage *req, void *ud)
{
    (void)ud;
    const Pluginregistration__RegistrationStatus *st = (const void *)req;
    if (st->plugin_registered)
        log_info(COMP, "registered with the kubelet", "driver=%s", DRA_DRIVER_NAME);
    else
        log_error(COMP, "the kubelet refused the registration", "error=\"%s\"",
                  st->error ? st->error : "");
    Pluginregistration__RegistrationStatusResponse r =
        PLUGINREGISTRATION__REGISTRATION_STATUS_RESPONSE__INIT;
    grpc_call_reply_pb(call, &r.base);
}

/* ---- publication -------------------------------------------------------------------------------
 */

static int publish(struct plugin *pl, struct kube_client *kc, const struct dra_model *m,
                   struct err *e)
{
    json_t *node = NULL;
    int r = kube_get(kc, &KUBE_NODES, NULL, pl->f->node_name, &node, e);
    if (r < 0)
        return err_prefix(e, "node %s", pl->f->node_name);
    struct dra_slice_meta meta = {.node_name = pl->f->node_name, .node_uid = kobj_uid(node)};
    json_t *desired = NULL, *list = NULL;
    r = dra_slices_render(m, &meta, &desired, e);
    json_decref(node);
    if (r < 0)
        return r;
    _cleanup_free_ char *sel = xasprintf("gpuop.dev/dra-node=%s", pl->f->node_name);
    struct kube_list_opts lo = {.label_selector = sel};
    if ((r = kube_list(kc, &RESOURCE_SLICES, NULL, &lo, &list, e)) < 0) {
        json_decref(desired);
        return err_prefix(e, "ResourceSlices");
    }
    /* the plugin's own: this driver's, on this node */
    json_t *existing = json_array();
    size_t i;
    json_t *v;
    json_array_foreach (json_object_get(list, "items"), i, v) {
        if (streq_ptr(kobj_str(kobj_path(v, "spec"), "driver"), DRA_DRIVER_NAME) &&
            streq_ptr(kobj_str(kobj_path(v, "spec"), "nodeName"), pl->f->node_name))
            json_array_append(existing, v);
    }
    json_decref(list);
    struct dra_publish p = {0};
    r = dra_publish_plan(desired, existing, &p, e);
    json_decref(desired);
    json_decref(existing);
    if (r < 0)
        return r;
    json_array_foreach (p.create, i, v) {
        if ((r = kube_create(kc, &RESOURCE_SLICES, NULL, v, NULL, e)) < 0)
            goto out;
    }
    json_array_foreach (p.update, i, v) {
        if ((r = kube_update(kc, &RESOURCE_SLICES, NULL, v, NULL, e)) < 0)
            goto out;
    }
    json_array_foreach (p.remove, i, v) {
        if ((r = kube_delete(kc, &RESOURCE_SLICES, NULL, json_string_value(v), NULL, e)) < 0 &&
            r != -ENOENT)
            goto out;
        r = 0;
    }
    if (!dra_publish_empty(&p))
        log_info(COMP, "ResourceSlices published",
                 "created=%zu updated=%zu deleted=%zu generation=%lld", json_array_size(p.create),
                 json_array_size(p.update), json_array_size(p.remove), (long long)p.generation);
out:
    dra_publish_clear(&p);
    return r;
}

/* The node's devices as CDI devices of kind k8s.gpu.nvidia.com/device (by UUID), through the
 * toolkit's generator; written when it changed. */
static void cdi_base_write(struct plugin *pl, struct gpu_lib *lib)
{
    struct nvcdi_gen_options o = {
        .host_root = pl->f->host_root,
        .driver_root = pl->f->driver_root,
        .lib = lib,
        .hook_path = "",
        .kind = DRA_CDI_BASE_KIND,
    };
    _cleanup_(nvcdi_gen_freep) struct nvcdi_gen *g = nvcdi_gen_new(&o);
    _cleanup_free_ char *spec = NULL, *old = NULL;
    _cleanup_free_ char *path = xasprintf("%s/%s-device.yaml", pl->cdi_dir, DRA_CDI_VENDOR);
    struct err e = {0};
    if (nvcdi_gen_spec(g, &spec, NULL, 0, &e) < 0) {
        log_warn(COMP, "CDI spec not written", "path=%s error=\"%s\"", path, err_msg(&e));
        return;
    }
    if (file_read_all(path, 16u << 20, &old, NULL, &e) == 0 && strcmp(old, spec) == 0)
        return;
    err_clear(&e);
    if (file_write_atomic(path, spec, strlen(spec), 0644, &e) < 0) {
        log_warn(COMP, "CDI spec not written", "path=%s error=\"%s\"", path, err_msg(&e));
        return;
    }
    log_info(COMP, "CDI spec written", "path=%s", path);
}

/* Reads the GPUs, swaps the model in, publishes. Errors are logged: the next pass tries again. */
static void resync(struct plugin *pl, struct gpu_lib *lib, struct kube_client *kc)
{
    struct err e = {0};
    struct node_view v = {0};
    struct gpu_faults faults;
    pthread_mutex_lock(&pl->mu);
    faults = pl->faults;
    pthread_mutex_unlock(&pl->mu);
    if (node_read(lib, &faults, pl->f->recovery_ms, &v, &e) < 0) {
        log_warn(COMP, "GPUs not read", "error=\"%s\"", err_msg(&e));
        return;
    }
    pthread_mutex_lock(&pl->mu);
    struct node_view old = pl->view;
    pl->view = v;
    pthread_mutex_unlock(&pl->mu);
    node_view_clear(&old);
    /* the main thread alone replaces the view: reading it here without the lock is safe */
    if (publish(pl, kc, pl->view.model, &e) < 0)
        log_warn(COMP, "ResourceSlices not published", "error=\"%s\"", err_msg(&e));
    cdi_base_write(pl, lib);
}

/* NVML's XID and ECC events: a GPU with one the policy counts is withdrawn at the next pass. */
static void *health_main(void *arg)
{
    struct plugin *pl = arg;
    struct err e = {0};
    _cleanup_(gpu_events_freep) struct gpu_events *ev = NULL;
    if (gpu_events_open(pl->lib, GPU_EVENT_XID | GPU_EVENT_ECC_DBE, &ev, &e) < 0) {
        log_warn(COMP, "GPU events not watched: only lost GPUs are withdrawn", "error=\"%s\"",
                 err_msg(&e));
        return NULL;
    }
    uint64_t last_err = 0;
    while (!stop_requested(pl->stop)) {
        struct gpu_event event;
        int r = gpu_events_wait(ev, 200, &event, &e);
        if (r == -ETIMEDOUT)
            continue;
        if (r < 0) {
            if (now_ms_mono() - last_err > 10000)
                log_warn(COMP, "waiting for GPU events failed", "error=\"%s\"", err_msg(&e));
            last_err = now_ms_mono();
            if (stop_wait(pl->stop, 500))
                break;
            continue;
        }
        if (!gh_policy_event_critical(&pl->hp, &event)) {
            log_info(COMP, "GPU event ignored by the health policy", "gpu=%u xid=%llu",
                     event.gpu_index, (unsigned long long)event.data);
            continue;
        }
        log_warn(COMP, "GPU error: its devices are withdrawn from the slices",
                 "gpu=%u uuid=%s type=0x%llx xid=%llu", event.gpu_index, event.uuid,
                 (unsigned long long)event.type, (unsigned long long)event.data);
        pthread_mutex_lock(&pl->mu);
        fault_note(&pl->faults, event.uuid, now_ms_mono());
        pthread_mutex_unlock(&pl->mu);
    }
    return NULL;
}

static json_t *claim_project(json_t *obj, void *ud)
{
    (void)ud;
    /* what a plan reads: the identity and the allocation */
    json_t *out =
        json_pack("{s:O?,s:O?,s:O?}", "apiVersion", json_object_get(obj, "apiVersion"), "kind",
                  json_object_get(obj, "kind"), "metadata", json_object_get(obj, "metadata"));
    const json_t *alloc = kobj_path(obj, "status.allocation");
    if (out && alloc)
        json_object_set_new(out, "status", json_pack("{s:O}", "allocation", alloc));
    return out;
}

static int dra_run(struct svc *s, struct err *e)
{
    struct dra_flags *f = svc_state(s);
    if (!f->node_name || !f->node_name[0])
        return svc_bad_input(s, err_set(e, -EINVAL, "--node-name (NODE_NAME) is required"));
    struct plugin pl = {.f = f, .stop = svc_stop(s)};
    pthread_mutex_init(&pl.mu, NULL);
    gh_policy_init(&pl.hp, NULL, NULL);
    pthread_t health;
    bool health_started = false;
    _cleanup_free_ char *plugin_dir = nvcdi_host_path(f->host_root, "/", f->plugin_dir);
    _cleanup_free_ char *registry_dir = nvcdi_host_path(f->host_root, "/", f->registry_dir);
    _cleanup_free_ char *cdi_dir = nvcdi_host_path(f->host_root, "/", f->cdi_dir);
    _cleanup_free_ char *dra_sock = xasprintf("%s/dra.sock", plugin_dir);
    _cleanup_free_ char *reg_sock = xasprintf("%s/%s-reg.sock", registry_dir, DRA_DRIVER_NAME);
    snprintf(pl.cdi_dir, sizeof(pl.cdi_dir), "%s", cdi_dir);
    snprintf(pl.checkpoint, sizeof(pl.checkpoint), "%s/%s", plugin_dir, CHECKPOINT_FILE);
    if (mkdir_p(plugin_dir, 0750) < 0 || mkdir_p(registry_dir, 0755) < 0 ||
        mkdir_p(pl.cdi_dir, 0755) < 0)
        return err_set(e, -errno, "folders under %s: %s", f->host_root, strerror(errno));

    /* the claims prepared before a restart */
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    int r = file_read_all(pl.checkpoint, DRA_CHECKPOINT_MAX, &text, &len, e);
    if (r == -ENOENT) {
        err_clear(e);
    } else if (r < 0) {
        return err_prefix(e, "checkpoint");
    } else if ((r = dra_checkpoint_decode(text, len, pl.checkpoint, &pl.claims, e)) < 0) {
        /* a damaged checkpoint is kept for a person to read; nothing is deleted */
        return r;
    }
    log_info(COMP, "checkpoint read", "path=%s claims=%zu", pl.checkpoint, pl.claims.n);

    _cleanup_(gpu_lib_freep) struct gpu_lib *lib = NULL;
    _cleanup_(kube_client_freep) struct kube_client *kc = NULL;
    _cleanup_(grpc_server_freep) struct grpc_server *dra = NULL;
    _cleanup_(grpc_server_freep) struct grpc_server *reg = NULL;
    if ((r = gpu_lib_open(f->library, &lib, e)) < 0 ||
        (r = kube_client_open(KUBE_CALLER_AGENT, f->kubeconfig, NULL, svc_stop(s), &kc, e)) < 0)
        goto out;
    pl.lib = lib;
    if (pthread_create(&health, NULL, health_main, &pl) != 0) {
        r = err_set(e, -EAGAIN, "the health thread: %s", strerror(errno));
        goto out;
    }
    health_started = true;
    struct kube_informer_opts io = {.project = claim_project};
    if ((r = kube_informer_new(kc, &RESOURCE_CLAIMS, &io, &pl.claims_inf, e)) < 0)
        goto out;
    resync(&pl, lib, kc);

    if ((r = grpc_server_new(NULL, &dra, e)) < 0 ||
        (r = grpc_server_add_unary_pb(
             dra, DRA_SERVICE "NodePrepareResources",
             &k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_request__descriptor,
             on_prepare, &pl, e)) < 0 ||
        (r = grpc_server_add_unary_pb(
             dra, DRA_SERVICE "NodeUnprepareResources",
             &k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resources_request__descriptor,
             on_unprepare, &pl, e)) < 0 ||
        (r = grpc_server_start(dra, dra_sock, e)) < 0)
        goto out;
    /* registration last: the kubelet dials the endpoint as soon as it sees this socket */
    if ((r = grpc_server_new(NULL, &reg, e)) < 0 ||
        (r = grpc_server_add_unary_pb(reg, REG_SERVICE "GetInfo",
                                      &pluginregistration__info_request__descriptor, on_get_info,
                                      &pl, e)) < 0 ||
        (r = grpc_server_add_unary_pb(reg, REG_SERVICE "NotifyRegistrationStatus",
                                      &pluginregistration__registration_status__descriptor,
                                      on_registration_status, &pl, e)) < 0 ||
        (r = grpc_server_start(reg, reg_sock, e)) < 0)
        goto out;
    log_info(COMP, "serving", "node=%s endpoint=%s registration=%s", f->node_name, dra_sock,
             reg_sock);
    while (svc_wait(s, f->resync_ms) != SVC_STOP)
        resync(&pl, lib, kc);
    r = 0;
out:
    if (health_started) {
        stop_request(svc_stop(s));
        pthread_join(health, NULL);
    }
    /* the servers stop before what their handlers use goes */
    grpc_server_free(reg);
    reg = NULL;
    grpc_server_free(dra);
    dra = NULL;
    kube_informer_free(pl.claims_inf);
    node_view_clear(&pl.view);
    dra_claims_clear(&pl.claims);
    pthread_mutex_destroy(&pl.mu);
    return r;
}

const struct svc_component dra_plugin_component = {
    .name = "dra-plugin",
    .usage =
        "Usage: gpuop dra-plugin [flags]\n\n"
        "NVIDIA's GPUs through Dynamic Resource Allocation (resource.k8s.io/v1) as the\n"
        "gpu.nvidia.com driver: publishes the node's ResourceSlices, serves the kubelet's DRA\n"
        "service and prepares claims as CDI devices.\n",
    .options = {dra_common_options, dra_options},
    .state_size = sizeof(struct dra_flags),
    .defaults = dra_defaults,
    .run = dra_run,
    .verbs = {&dra_slices_component},
};
