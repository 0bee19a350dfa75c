/* SPDX-License-Identifier: Apache-2.0 */
/* kl-dra's shell (kl-dra.h): the plugin watcher's thread, the DRA plugins' gRPC calls and the
 * prepared claims of the node. What to prepare and which devices a container gets are
 * dra-core.c's. */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>

#include "dra/v1/api.pb-c.h"
#include "grpc.h"
#include "kl-cdi.h"
#include "kl-devices-internal.h"
#include "kl-dra.h"
#include "kobj.h"
#include "pluginregistration/v1/api.pb-c.h"
#include "yamlcfg.h"

#define COMP         "kubelet-sim"
#define CALL_MS      30000 /* a DRA call's deadline */
#define INFO_MS      5000
#define MAX_RESP     (4u << 20)
#define SCAN_MS      500
#define REGISTRY_DIR "/var/lib/kubelet/plugins_registry"
#define PLUGINS_DIR  "/var/lib/kubelet/plugins"

#define DRA_PREPARE   "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources"
#define DRA_UNPREPARE "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodeUnprepareResources"
#define REG_INFO      "/pluginregistration.Registration/GetInfo"
#define REG_NOTIFY    "/pluginregistration.Registration/NotifyRegistrationStatus"

typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Claim DraClaim;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesRequest PrepareReq;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesResponse PrepareResp;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesRequest UnprepareReq;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesResponse UnprepareResp;

struct kl_dra {
    char *root, *node_name;
    char *registry; /* <root>/var/lib/kubelet/plugins_registry */
    struct kube_client *kc;
    uint64_t scan_ms;
    struct stop_token *stop;
    pthread_t thread;
    bool thread_started;
    pthread_mutex_t mu;   /* plugins, sockets */
    json_t *plugins;      /* driver -> {"endpoint": host path, "socket": registration socket} */
    json_t *sockets;      /* registration socket -> {"ino": n, "driver": name or null,
                           * "answered": whether GetInfo was answered} */
    pthread_mutex_t prep; /* claims, pods; held across prepare and unprepare calls */
    json_t *claims;       /* claim UID -> {name, namespace, drivers: [], pods: {uid: true},
                           *               devices: [{requestNames, cdiDeviceIDs}]} */
    json_t *pods;         /* pod UID -> {"claims": {pod claim: UID}, "ext": UID or null} */
};

/* ---- the plugin watcher ------------------------------------------------------------------- */

static int unary(struct kl_dra *d, const char *socket, const char *method,
                 const ProtobufCMessage *req, const ProtobufCMessageDescriptor *desc,
                 uint64_t timeout_ms, ProtobufCMessage **ret, struct err *e)
{
    struct grpc_options go = {.stop = d->stop, .max_recv_msg = MAX_RESP};
    _cleanup_(grpc_client_freep) struct grpc_client *c = NULL;
    int r = grpc_client_connect(socket, timeout_ms < 5000 ? timeout_ms : 5000, &go, &c, e);
    if (r < 0)
        return r;
    int code = 0;
    return grpc_client_unary_pb(c, method, req, desc, timeout_ms, ret, &code, e);
}

static void notify(struct kl_dra *d, const char *socket, bool ok, const char *why)
{
    Pluginregistration__RegistrationStatus st = PLUGINREGISTRATION__REGISTRATION_STATUS__INIT;
    st.plugin_registered = ok;
    st.error = (char *)(why ? why : "");
    ProtobufCMessage *resp = NULL;
    struct err e = {0};
    if (unary(d, socket, REG_NOTIFY, &st.base,
              &pluginregistration__registration_status_response__descriptor, INFO_MS, &resp,
              &e) < 0)
        log_warn(COMP, "NotifyRegistrationStatus failed", "node=%s socket=%s err=\"%s\"",
                 d->node_name, socket, err_msg(&e));
    if (resp)
        protobuf_c_message_free_unpacked(resp, NULL);
}

/* A new socket in plugins_registry: GetInfo, check, register, notify. The driver's name, or
 * NULL when the plugin was refused or did not answer (*ret_answered false: it is asked again at
 * the next scan, as the kubelet's reconciler retries a registration that failed). */
static char *register_socket(struct kl_dra *d, const char *socket, bool *ret_answered)
{
    *ret_answered = false;
    Pluginregistration__InfoRequest rq = PLUGINREGISTRATION__INFO_REQUEST__INIT;
    ProtobufCMessage *resp = NULL;
    struct err e = {0};
    if (unary(d, socket, REG_INFO, &rq.base, &pluginregistration__plugin_info__descriptor, INFO_MS,
              &resp, &e) < 0) {
        log_debug(COMP, "plugin GetInfo failed", "node=%s socket=%s err=\"%s\"", d->node_name,
                  socket, err_msg(&e));
        return NULL;
    }
    *ret_answered = true;
    Pluginregistration__PluginInfo *pi = (Pluginregistration__PluginInfo *)resp;
    char *driver = NULL;
    if (kl_dra_check_plugin(socket, pi->type, pi->name, pi->endpoint,
                            (const char *const *)pi->supported_versions, pi->n_supported_versions,
                            &e) < 0) {
        log_warn(COMP, "plugin refused", "node=%s socket=%s err=\"%s\"", d->node_name, socket,
                 err_msg(&e));
        notify(d, socket, false, err_msg(&e));
    } else {
        _cleanup_free_ char *endpoint = kl_host_path(d->root, pi->endpoint);
        pthread_mutex_lock(&d->mu);
        json_object_set_new(d->plugins, pi->name,
                            json_pack("{s:s,s:s}", "endpoint", endpoint, "socket", socket));
        pthread_mutex_unlock(&d->mu);
        driver = xstrdup(pi->name);
        log_info(COMP, "DRA plugin registered", "node=%s driver=%s endpoint=%s", d->node_name,
                 pi->name, pi->endpoint);
        notify(d, socket, true, NULL);
    }
    protobuf_c_message_free_unpacked(resp, NULL);
    return driver;
}

static void scan(struct kl_dra *d)
{
    DIR *dir = opendir(d->registry);
    if (!dir)
        return;
    json_t *seen = json_object();
    struct dirent *de;
    while ((de = readdir(dir))) {
        if (de->d_name[0] == '.')
            continue;
        _cleanup_free_ char *path = xasprintf("%s/%s", d->registry, de->d_name);
        struct stat st;
        if (lstat(path, &st) < 0 || !S_ISSOCK(st.st_mode))
            continue;
        json_object_set_new(seen, path, json_true());
        pthread_mutex_lock(&d->mu);
        json_t *known = json_object_get(d->sockets, path);
        bool same = known &&
                    json_integer_value(json_object_get(known, "ino")) == (json_int_t)st.st_ino &&
                    json_is_true(json_object_get(known, "answered"));
        pthread_mutex_unlock(&d->mu);
        if (same)
            continue;
        bool answered = false;
        char *driver = register_socket(d, path, &answered);
        pthread_mutex_lock(&d->mu);
        json_object_set_new(d->sockets, path,
                            json_pack("{s:I,s:s?,s:b}", "ino", (json_int_t)st.st_ino, "driver",
                                      driver, "answered", answered));
        pthread_mutex_unlock(&d->mu);
        free(driver);
    }
    closedir(dir);
    /* sockets that went: their plugins deregister */
    pthread_mutex_lock(&d->mu);
    json_t *gone = json_array();
    const char *k;
    json_t *v;
    json_object_foreach (d->sockets, k, v)
        if (!json_object_get(seen, k))
            json_array_append_new(gone, json_string(k));
    size_t i;
    json_array_foreach (gone, i, v) {
        const char *path = json_string_value(v);
        const char *driver = kobj_str(json_object_get(d->sockets, path), "driver");
        json_t *p = driver ? json_object_get(d->plugins, driver) : NULL;
        if (p && streq_ptr(kobj_str(p, "socket"), path)) {
            log_info(COMP, "DRA plugin deregistered", "node=%s driver=%s", d->node_name, driver);
            json_object_del(d->plugins, driver);
        }
        json_object_del(d->sockets, path);
    }
    pthread_mutex_unlock(&d->mu);
    json_decref(gone);
    json_decref(seen);
}

static void *watcher_main(void *arg)
{
    struct kl_dra *d = arg;
    while (!stop_requested(d->stop)) {
        scan(d);
        stop_wait(d->stop, d->scan_ms);
    }
    return NULL;
}

int kl_dra_new(const struct kl_dra_config *cfg, struct kl_dra **ret, struct err *e)
{
    struct kl_dra *d = xcalloc(1, sizeof(*d));
    d->root = xstrdup(cfg->root);
    d->node_name = xstrdup(cfg->node_name ? cfg->node_name : "");
    d->registry = kl_host_path(cfg->root, REGISTRY_DIR);
    d->kc = cfg->kc;
    d->scan_ms = cfg->scan_ms ? cfg->scan_ms : SCAN_MS;
    d->plugins = json_object();
    d->sockets = json_object();
    d->claims = json_object();
    d->pods = json_object();
    pthread_mutex_init(&d->mu, NULL);
    pthread_mutex_init(&d->prep, NULL);
    _cleanup_free_ char *plugins = kl_host_path(cfg->root, PLUGINS_DIR);
    int r;
    if ((r = mkdir_p(d->registry, 0750)) < 0 || (r = mkdir_p(plugins, 0750)) < 0) {
        kl_dra_free(d);
        return err_errno(e, r, "mkdir \"%s\"", d->registry);
    }
    if ((r = stop_token_new(&d->stop, e)) < 0) {
        kl_dra_free(d);
        return r;
    }
    if ((r = -pthread_create(&d->thread, NULL, watcher_main, d)) < 0) {
        kl_dra_free(d);
        return err_errno(e, r, "DRA plugin watcher thread");
    }
    d->thread_started = true;
    *ret = d;
    return 0;
}

void kl_dra_free(struct kl_dra *d)
{
    if (!d)
        return;
    if (d->stop)
        stop_request(d->stop);
    if (d->thread_started)
        pthread_join(d->thread, NULL);
    stop_token_free(d->stop);
    json_decref(d->plugins);
    json_decref(d->sockets);
    json_decref(d->claims);
    json_decref(d->pods);
    pthread_mutex_destroy(&d->mu);
    pthread_mutex_destroy(&d->prep);
    free(d->registry);
    free(d->root);
    free(d->node_name);
    free(d);
}

json_t *kl_dra_plugins(struct kl_dra *d)
{
    json_t *out = json_object();
    pthread_mutex_lock(&d->mu);
    const char *k;
    json_t *v;
    json_object_foreach (d->plugins, k, v)
        json_object_set(out, k, json_object_get(v, "endpoint"));
    pthread_mutex_unlock(&d->mu);
    return out;
}

/* ---- prepare and unprepare ---------------------------------------------------------------- */

static char *plugin_endpoint(struct kl_dra *d, const char *driver)
{
    pthread_mutex_lock(&d->mu);
    const char *ep = kobj_str(json_object_get(d->plugins, driver), "endpoint");
    char *r = ep ? xstrdup(ep) : NULL;
    pthread_mutex_unlock(&d->mu);
    return r;
}

/* The claims (objects) of one driver, as the request's Claim list. */
static DraClaim **claim_list(json_t *claims, size_t *ret_n)
{
    size_t n = json_array_size(claims), i;
    DraClaim **out = xcalloc(n ? n : 1, sizeof(*out));
    json_t *c;
    json_array_foreach (claims, i, c) {
        out[i] = xcalloc(1, sizeof(**out));
        k8s__io__kubelet__pkg__apis__dra__v1__claim__init(out[i]);
        out[i]->namespace_ = (char *)(kobj_namespace(c) ?: "");
        out[i]->uid = (char *)(kobj_uid(c) ?: "");
        out[i]->name = (char *)(kobj_name(c) ?: "");
    }
    *ret_n = n;
    return out;
}

static void claim_list_free(DraClaim **l, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(l[i]);
    free(l);
}

/* NodePrepareResources of one driver for claims; their devices (with the driver) appended to
 * devices[uid]. */
static int prepare_driver(struct kl_dra *d, const char *driver, json_t *claims, json_t *devices,
                          struct err *e)
{
    _cleanup_free_ char *ep = plugin_endpoint(d, driver);
    if (!ep)
        return err_set(e, -EAGAIN,
                       "failed to get gRPC client for driver %s: plugin name %s not found in the "
                       "list of registered DRA plugins",
                       driver, driver);
    PrepareReq rq = K8S__IO__KUBELET__PKG__APIS__DRA__V1__NODE_PREPARE_RESOURCES_REQUEST__INIT;
    rq.claims = claim_list(claims, &rq.n_claims);
    ProtobufCMessage *resp = NULL;
    int r =
        unary(d, ep, DRA_PREPARE, &rq.base,
              &k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_response__descriptor,
              CALL_MS, &resp, e);
    claim_list_free(rq.claims, rq.n_claims);
    if (r < 0)
        return err_prefix(e, "NodePrepareResources failed");
    PrepareResp *pr = (PrepareResp *)resp;
    size_t missing = 0, i;
    json_t *c;
    json_array_foreach (claims, i, c) {
        const char *uid = kobj_uid(c) ?: "";
        const K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourceResponse *one = NULL;
        for (size_t k = 0; k < pr->n_claims; k++)
            if (pr->claims[k] && streq_ptr(pr->claims[k]->key, uid))
                one = pr->claims[k]->value;
        if (!one) {
            missing++;
            continue;
        }
        if (one->error && one->error[0]) {
            r = err_set(e, -EIO, "NodePrepareResources failed for claim %s/%s: %s",
                        kobj_namespace(c) ?: "", kobj_name(c) ?: "", one->error);
            break;
        }
        json_t *list = json_object_get(devices, uid);
        for (size_t k = 0; k < one->n_devices; k++) {
            const K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Device *dv = one->devices[k];
            json_t *names = json_array(), *ids = json_array();
            for (size_t j = 0; j < dv->n_request_names; j++)
                json_array_append_new(names, json_string(dv->request_names[j]));
            for (size_t j = 0; j < dv->n_cdi_device_ids; j++)
                json_array_append_new(ids, json_string(dv->cdi_device_ids[j]));
            json_array_append_new(list,
                                  json_pack("{s:s,s:s,s:s,s:o,s:o}", "driver", driver, "pool",
                                            dv->pool_name ?: "", "device", dv->device_name ?: "",
                                            "requestNames", names, "cdiDeviceIDs", ids));
        }
    }
    if (r == 0 && missing)
        r = err_set(e, -EIO, "NodePrepareResources left out %zu claims", missing);
    protobuf_c_message_free_unpacked(resp, NULL);
    return r;
}

static bool reserved_for(json_t *claim, const char *pod_uid)
{
    size_t i;
    json_t *r;
    json_array_foreach (kobj_path(claim, "status.reservedFor"), i, r)
        if (streq_ptr(kobj_str(r, "uid"), pod_uid))
            return true;
    return false;
}

static bool owned_by(json_t *claim, const char *pod_uid)
{
    size_t i;
    json_t *r;
    json_array_foreach (kobj_path(claim, "metadata.ownerReferences"), i, r)
        if (json_is_true(json_object_get(r, "controller")) &&
            streq_ptr(kobj_str(r, "uid"), pod_uid))
            return true;
    return false;
}

int kl_dra_prepare(struct kl_dra *d, const json_t *pod, struct err *e)
{
    _cleanup_json_ json_t *list = NULL;
    int r = kl_dra_pod_claims(pod, &list, e);
    if (r < 0)
        return r;
    const char *pod_uid = kobj_uid(pod) ?: "", *ns = kobj_namespace(pod) ?: "";
    pthread_mutex_lock(&d->prep);
    if (json_array_size(list) == 0 || json_object_get(d->pods, pod_uid)) {
        pthread_mutex_unlock(&d->prep);
        return 0;
    }
    json_t *pod_claims = json_object();
    json_t *by_driver = json_object(); /* driver -> [claims to prepare] */
    json_t *fresh = json_object();     /* uid -> claim, newly prepared */
    size_t i;
    json_t *ent;
    json_array_foreach (list, i, ent) {
        const char *name = kobj_str(ent, "claim");
        json_t *claim = NULL;
        if ((r = kube_get(d->kc, &KUBE_RESOURCECLAIMS, ns, name, &claim, e)) < 0) {
            err_prefix(e, "failed to fetch ResourceClaim %s referenced by pod %s", name,
                       kobj_name(pod) ?: "");
            break;
        }
        const char *uid = kobj_uid(claim) ?: "";
        /* a template's claim and the extended resource claim must be the pod's own */
        bool must_own = json_is_true(json_object_get(ent, "extended"));
        size_t k;
        json_t *pc;
        json_array_foreach (kobj_path(pod, "spec.resourceClaims"), k, pc)
            if (streq_ptr(kobj_str(pc, "name"), kobj_str(ent, "podClaim")) &&
                kobj_str(pc, "resourceClaimTemplateName"))
                must_own = true;
        if (must_own && !owned_by(claim, pod_uid)) {
            r = err_set(e, -EPERM,
                        "ResourceClaim %s/%s was not created for pod %s/%s (pod is not owner)", ns,
                        name, ns, kobj_name(pod) ?: "");
            json_decref(claim);
            break;
        }
        if (!reserved_for(claim, pod_uid)) {
            r = err_set(e, -EPERM, "pod %s (%s) is not allowed to use resource claim %s (%s)",
                        kobj_name(pod) ?: "", pod_uid, name, uid);
            json_decref(claim);
            break;
        }
        /* the extended resource claim is kept under "" (no pod claim has an empty name) */
        if (json_is_true(json_object_get(ent, "extended")))
            json_object_set_new(pod_claims, "", json_string(uid));
        else
            json_object_set_new(pod_claims, kobj_str(ent, "podClaim"), json_string(uid));
        if (!json_object_get(d->claims, uid) && !json_object_get(fresh, uid)) {
            json_object_set(fresh, uid, claim);
            json_t *seen = json_object();
            json_t *res;
            json_array_foreach (kobj_path(claim, "status.allocation.devices.results"), k, res) {
                const char *drv = kobj_str(res, "driver");
                if (!drv || json_object_get(seen, drv))
                    continue;
                json_object_set_new(seen, drv, json_true());
                json_t *l = json_object_get(by_driver, drv);
                if (!l) {
                    l = json_array();
                    json_object_set_new(by_driver, drv, l);
                }
                json_array_append(l, claim);
            }
            json_decref(seen);
        }
        json_decref(claim);
    }
    json_t *devices = json_object(); /* uid -> devices of the fresh claims */
    const char *k;
    json_t *v;
    json_object_foreach (fresh, k, v)
        json_object_set_new(devices, k, json_array());
    if (r == 0) {
        const char *drv;
        json_t *claims;
        json_object_foreach (by_driver, drv, claims)
            if ((r = prepare_driver(d, drv, claims, devices, e)) < 0)
                break;
    }
    if (r == 0) {
        json_object_foreach (fresh, k, v) {
            json_t *drivers = json_array();
            const char *drv;
            json_t *claims;
            json_object_foreach (by_driver, drv, claims) {
                size_t j;
                json_t *c;
                json_array_foreach (claims, j, c)
                    if (streq_ptr(kobj_uid(c), k))
                        json_array_append_new(drivers, json_string(drv));
            }
            json_object_set_new(d->claims, k,
                                json_pack("{s:s,s:s,s:o,s:{},s:O}", "name", kobj_name(v) ?: "",
                                          "namespace", kobj_namespace(v) ?: "", "drivers", drivers,
                                          "pods", "devices", json_object_get(devices, k)));
            log_info(COMP, "ResourceClaim prepared", "node=%s claim=%s/%s", d->node_name,
                     kobj_namespace(v) ?: "", kobj_name(v) ?: "");
        }
        json_object_foreach (pod_claims, k, v)
            json_object_set_new(
                json_object_get(json_object_get(d->claims, json_string_value(v)), "pods"), pod_uid,
                json_true());
        json_t *ext = json_object_get(pod_claims, "");
        json_t *named = json_deep_copy(pod_claims);
        json_object_del(named, "");
        json_object_set_new(
            d->pods, pod_uid,
            json_pack("{s:o,s:O}", "claims", named, "ext", ext ? ext : json_null()));
    }
    pthread_mutex_unlock(&d->prep);
    json_decref(pod_claims);
    json_decref(by_driver);
    json_decref(fresh);
    json_decref(devices);
    return r;
}

int kl_dra_container_alloc(struct kl_dra *d, const json_t *pod, const char *container,
                           struct kl_alloc **alloc, struct err *e)
{
    const char *pod_uid = kobj_uid(pod) ?: "";
    pthread_mutex_lock(&d->prep);
    json_t *pe = json_object_get(d->pods, pod_uid);
    if (!pe) {
        pthread_mutex_unlock(&d->prep);
        return 0;
    }
    json_t *prepared = json_object();
    const char *k;
    json_t *v;
    json_object_foreach (d->claims, k, v)
        json_object_set(prepared, k, json_object_get(v, "devices"));
    json_t *ids = kl_dra_container_cdi(pod, container, json_object_get(pe, "claims"),
                                       json_string_value(json_object_get(pe, "ext")), prepared);
    pthread_mutex_unlock(&d->prep);
    json_decref(prepared);
    int r = 0;
    if (json_array_size(ids)) {
        size_t n = json_array_size(ids), i;
        const char **names = xcalloc(n + 1, sizeof(*names));
        json_array_foreach (ids, i, v)
            names[i] = json_string_value(v);
        if (!*alloc)
            *alloc = xcalloc(1, sizeof(**alloc));
        r = kl_cdi_resolve(d->root, names, *alloc, e);
        free(names);
    }
    json_decref(ids);
    return r;
}

/* NodeUnprepareResources of one driver; false when it failed (logged). */
static bool unprepare_driver(struct kl_dra *d, const char *driver, json_t *claims)
{
    _cleanup_free_ char *ep = plugin_endpoint(d, driver);
    struct err e = {0};
    if (!ep) {
        log_warn(COMP, "claims not unprepared", "node=%s driver=%s err=\"driver not registered\"",
                 d->node_name, driver);
        return false;
    }
    UnprepareReq rq = K8S__IO__KUBELET__PKG__APIS__DRA__V1__NODE_UNPREPARE_RESOURCES_REQUEST__INIT;
    rq.claims = claim_list(claims, &rq.n_claims);
    ProtobufCMessage *resp = NULL;
    int r =
        unary(d, ep, DRA_UNPREPARE, &rq.base,
              &k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resources_response__descriptor,
              CALL_MS, &resp, &e);
    claim_list_free(rq.claims, rq.n_claims);
    bool ok = r == 0;
    if (ok) {
        UnprepareResp *ur = (UnprepareResp *)resp;
        for (size_t k = 0; k < ur->n_claims; k++)
            if (ur->claims[k] && ur->claims[k]->value && ur->claims[k]->value->error &&
                ur->claims[k]->value->error[0]) {
                log_warn(COMP, "claim not unprepared", "node=%s claim=%s err=\"%s\"", d->node_name,
                         ur->claims[k]->key, ur->claims[k]->value->error);
                ok = false;
            }
        protobuf_c_message_free_unpacked(resp, NULL);
    } else {
        log_warn(COMP, "NodeUnprepareResources failed", "node=%s driver=%s err=\"%s\"",
                 d->node_name, driver, err_msg(&e));
    }
    return ok;
}

void kl_dra_unprepare(struct kl_dra *d, const char *pod_uid)
{
    pthread_mutex_lock(&d->prep);
    json_t *pe = json_object_get(d->pods, pod_uid);
    if (!pe) {
        pthread_mutex_unlock(&d->prep);
        return;
    }
    json_t *uids = json_array();
    const char *k;
    json_t *v;
    json_object_foreach (json_object_get(pe, "claims"), k, v)
        json_array_append(uids, v);
    if (json_is_string(json_object_get(pe, "ext")))
        json_array_append(uids, json_object_get(pe, "ext"));
    json_t *by_driver = json_object(), *done = json_array();
    size_t i;
    json_array_foreach (uids, i, v) {
        const char *uid = json_string_value(v);
        json_t *c = json_object_get(d->claims, uid);
        if (!c)
            continue;
        json_t *pods = json_object_get(c, "pods");
        json_object_del(pods, pod_uid);
        if (json_object_size(pods))
            continue; /* another pod of the node still uses it */
        json_t *ref =
            json_pack("{s:{s:s,s:s,s:s}}", "metadata", "namespace", kobj_str(c, "namespace") ?: "",
                      "name", kobj_str(c, "name") ?: "", "uid", uid);
        size_t j;
        json_t *drv;
        json_array_foreach (json_object_get(c, "drivers"), j, drv) {
            json_t *l = json_object_get(by_driver, json_string_value(drv));
            if (!l) {
                l = json_array();
                json_object_set_new(by_driver, json_string_value(drv), l);
            }
            json_array_append(l, ref);
        }
        json_array_append_new(done, json_pack("{s:s,s:o}", "uid", uid, "ref", ref));
    }
    json_t *failed = json_object();
    json_t *claims;
    json_object_foreach (by_driver, k, claims)
        if (!unprepare_driver(d, k, claims)) {
            size_t j;
            json_t *c;
            json_array_foreach (claims, j, c)
                json_object_set_new(failed, kobj_uid(c) ?: "", json_true());
        }
    json_array_foreach (done, i, v) {
        const char *uid = kobj_str(v, "uid");
        json_t *c = json_object_get(d->claims, uid);
        log_info(COMP,
                 json_object_get(failed, uid) ? "ResourceClaim unprepare failed, dropped"
                                              : "ResourceClaim unprepared",
                 "node=%s claim=%s/%s", d->node_name, kobj_str(c, "namespace") ?: "",
                 kobj_str(c, "name") ?: "");
        json_object_del(d->claims, uid);
    }
    json_object_del(d->pods, pod_uid);
    pthread_mutex_unlock(&d->prep);
    json_decref(failed);
    json_decref(done);
    json_decref(by_driver);
    json_decref(uids);
}
