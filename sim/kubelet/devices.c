/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kl-devices: the kubelet's device manager for one node (kl-devices.h).
 *
 * Threads: the Registration and PodResources servers run on their grpc loop threads (handlers
 * only take mu briefly and start a plugin thread); each registered plugin has a thread that
 * dials it, reads its options and follows ListAndWatch; kl_devices_allocate runs on the
 * caller's thread with a grpc client of its own per call. Lock order: alloc_mu, then mu.
 *
 * Checkpoint: <dir>/kubelet_internal_checkpoint, the real kubelet's shape
 *   {"Data":{"PodDeviceEntries":[{"PodUID","ContainerName","ResourceName",
 *            "DeviceIDs":{"<numa>":[ids]},"AllocResp":"<base64>"}],
 *            "RegisteredDevices":{"<resource>":[ids]}},
 *    "Checksum":N}
 * with two differences, both documented here: each entry also carries "PodNamespace" and
 * "PodName" (the real kubelet takes them from its pod manager; PodResources needs them after a
 * restart), and Checksum is our own: FNV-1a 32 over the Data object serialised as compact JSON
 * with sorted keys (the kubelet's is FNV-32a over Go's printing of the struct, which C cannot
 * reproduce). AllocResp is the packed ContainerAllocateResponse, as the kubelet stores it.
 * A checkpoint whose checksum or shape is wrong is ignored with a warning (the kubelet, too,
 * starts without it).
 */
#include <dirent.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "deviceplugin/v1beta1/api.pb-c.h"
#include "grpc.h"
#include "kl-devices-internal.h"
#include "kl-devices.h"

#define COMP "kl-devices"

#define KL_API_VERSION   "v1beta1"
#define KL_CKPT_NAME     "kubelet_internal_checkpoint"
#define KL_CKPT_MAX      (16u << 20)
#define KL_DIAL_MS       10000 /* the kubelet dials a plugin for 10 s */
#define KL_CALL_MS       10000
#define KL_MAX_DEVICES   4096 /* per resource: bounds a plugin's list */
#define KL_MAX_RESOURCES 256
#define KL_MAX_ENTRIES   65536
#define KL_MAX_RESP      (4u << 20)
#define KL_RESOURCE_MAX  253
#define KL_ENDPOINT_MAX  200

struct kl_plugin {
    struct kl_devices *d;
    char *resource;
    char *endpoint; /* absolute socket path */
    bool preferred, prestart;
    struct stop_token *stop;
    pthread_t thread;
    bool started;
    bool done; /* the thread has finished (set last, under mu) */
    struct kl_plugin *next;
};

/* ---- small helpers -------------------------------------------------------------------------- */

static void notify(struct kl_devices *d)
{
    if (d->on_change)
        d->on_change(d->userdata);
}

static void devs_free(struct kl_dev *devs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(devs[i].id);
    free(devs);
}

static void entry_free(struct kl_entry *en)
{
    if (!en)
        return;
    free(en->pod_uid);
    free(en->pod_namespace);
    free(en->pod_name);
    free(en->container);
    free(en->resource);
    for (size_t i = 0; i < en->n_ids; i++)
        free(en->ids[i]);
    free(en->ids);
    free(en->numa);
    free(en->resp);
    free(en);
}
DEFINE_CLEANUP_FUNC(struct kl_entry, entry_free)

static void plugin_free(struct kl_plugin *p)
{
    if (!p)
        return;
    free(p->resource);
    free(p->endpoint);
    stop_token_free(p->stop);
    free(p);
}

static struct kl_res *res_find(struct kl_devices *d, const char *name)
{
    for (size_t i = 0; i < d->n_res; i++)
        if (strcmp(d->res[i]->name, name) == 0)
            return d->res[i];
    return NULL;
}

static const struct kl_dev *res_dev(const struct kl_res *r, const char *id)
{
    for (size_t i = 0; i < r->n_devs; i++)
        if (strcmp(r->devs[i].id, id) == 0)
            return &r->devs[i];
    return NULL;
}

static bool id_in_use(struct kl_devices *d, const char *resource, const char *id)
{
    for (size_t i = 0; i < d->n_entries; i++) {
        const struct kl_entry *en = d->entries[i];
        if (strcmp(en->resource, resource) != 0)
            continue;
        for (size_t k = 0; k < en->n_ids; k++)
            if (strcmp(en->ids[k], id) == 0)
                return true;
    }
    return false;
}

static struct kl_entry *entry_find(struct kl_devices *d, const char *uid, const char *ctr,
                                   const char *resource)
{
    for (size_t i = 0; i < d->n_entries; i++) {
        struct kl_entry *en = d->entries[i];
        if (strcmp(en->pod_uid, uid) == 0 && strcmp(en->container, ctr) == 0 &&
            strcmp(en->resource, resource) == 0)
            return en;
    }
    return NULL;
}

static void entry_remove_at(struct kl_devices *d, size_t i)
{
    entry_free(d->entries[i]);
    memmove(&d->entries[i], &d->entries[i + 1], (d->n_entries - i - 1) * sizeof(*d->entries));
    d->n_entries--;
}

static void entry_remove(struct kl_devices *d, struct kl_entry *en)
{
    for (size_t i = 0; i < d->n_entries; i++)
        if (d->entries[i] == en) {
            entry_remove_at(d, i);
            return;
        }
}

/* FNV-1a 32: the checkpoint's checksum (see the top of the file). */
static uint32_t fnv1a32(const char *s, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 16777619u;
    }
    return h;
}

static int data_checksum(json_t *data, uint32_t *ret, struct err *e)
{
    _cleanup_free_ char *s = json_dumps(data, JSON_COMPACT | JSON_SORT_KEYS);
    if (!s)
        return err_set(e, -ENOMEM, "cannot serialise the checkpoint");
    *ret = fnv1a32(s, strlen(s));
    return 0;
}

/* ---- checkpoint ----------------------------------------------------------------------------- */

/* With mu held: the checkpoint's JSON. */
static json_t *ckpt_build(struct kl_devices *d)
{
    json_t *entries = json_array();
    for (size_t i = 0; i < d->n_entries; i++) {
        const struct kl_entry *en = d->entries[i];
        json_t *ids = json_object();
        for (size_t k = 0; k < en->n_ids; k++) {
            char key[32];
            snprintf(key, sizeof(key), "%lld", (long long)en->numa[k]);
            json_t *arr = json_object_get(ids, key);
            if (!arr) {
                arr = json_array();
                json_object_set_new(ids, key, arr);
            }
            json_array_append_new(arr, json_string(en->ids[k]));
        }
        _cleanup_free_ char *b64 = base64_encode(en->resp, en->resp_len);
        json_array_append_new(entries, json_pack("{s:s, s:s, s:s, s:s, s:s, s:o, s:s}", "PodUID",
                                                 en->pod_uid, "PodNamespace", en->pod_namespace,
                                                 "PodName", en->pod_name, "ContainerName",
                                                 en->container, "ResourceName", en->resource,
                                                 "DeviceIDs", ids, "AllocResp", b64));
    }
    json_t *data =
        json_pack("{s:o, s:O}", "PodDeviceEntries", entries, "RegisteredDevices", d->registered);
    uint32_t sum = 0;
    struct err e = {0};
    if (!data || data_checksum(data, &sum, &e) < 0) {
        json_decref(data);
        return NULL;
    }
    return json_pack("{s:o, s:I}", "Data", data, "Checksum", (json_int_t)sum);
}

/* With mu held. A failed write is logged: the allocation stands (the kubelet, too, only logs). */
static void ckpt_write(struct kl_devices *d)
{
    json_t *j = ckpt_build(d);
    _cleanup_free_ char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    struct err e = {0};
    if (!s)
        log_error(COMP, "cannot build the checkpoint", "node=%s", d->node_name);
    else if (file_write_atomic(d->ckpt_path, s, strlen(s), 0600, &e) < 0)
        log_error(COMP, "cannot write the checkpoint", "node=%s error=\"%s\"", d->node_name,
                  err_msg(&e));
}

static int ckpt_entry_parse(json_t *je, size_t idx, struct kl_entry **ret, struct err *e)
{
    _cleanup_(entry_freep) struct kl_entry *en = xcalloc(1, sizeof(*en));
    const char *uid = json_string_value(json_object_get(je, "PodUID"));
    const char *ctr = json_string_value(json_object_get(je, "ContainerName"));
    const char *res = json_string_value(json_object_get(je, "ResourceName"));
    const char *ns = json_string_value(json_object_get(je, "PodNamespace"));
    const char *name = json_string_value(json_object_get(je, "PodName"));
    const char *b64 = json_string_value(json_object_get(je, "AllocResp"));
    json_t *ids = json_object_get(je, "DeviceIDs");
    if (!uid || !ctr || !res || !json_is_object(ids))
        return err_set(e, -EINVAL,
                       "PodDeviceEntries[%zu]: PodUID, ContainerName, ResourceName "
                       "and DeviceIDs are required",
                       idx);
    en->pod_uid = xstrdup(uid);
    en->container = xstrdup(ctr);
    en->resource = xstrdup(res);
    en->pod_namespace = xstrdup(ns ? ns : "");
    en->pod_name = xstrdup(name ? name : "");
    const char *key;
    json_t *arr;
    json_object_foreach (ids, key, arr) {
        int64_t numa = 0;
        if (parse_i64(key, &numa) < 0 || !json_is_array(arr))
            return err_set(e, -EINVAL,
                           "PodDeviceEntries[%zu].DeviceIDs.%s: not a NUMA node "
                           "with a list",
                           idx, key);
        size_t k;
        json_t *v;
        json_array_foreach (arr, k, v) {
            if (!json_is_string(v) || en->n_ids >= KL_MAX_DEVICES)
                return err_set(e, -EINVAL, "PodDeviceEntries[%zu].DeviceIDs.%s[%zu]: bad ID", idx,
                               key, k);
            en->ids = xrealloc(en->ids, (en->n_ids + 1) * sizeof(*en->ids));
            en->numa = xrealloc(en->numa, (en->n_ids + 1) * sizeof(*en->numa));
            en->ids[en->n_ids] = xstrdup(json_string_value(v));
            en->numa[en->n_ids++] = numa;
        }
    }
    if (b64 && *b64) {
        char *raw = NULL;
        size_t n = 0;
        if (base64_decode(b64, strlen(b64), &raw, &n) < 0)
            return err_set(e, -EINVAL, "PodDeviceEntries[%zu].AllocResp: not base64", idx);
        en->resp = (uint8_t *)raw;
        en->resp_len = n;
    }
    *ret = steal_ptr(&en);
    return 0;
}

/* Loads the checkpoint into d (empty d). A missing file is no error. */
static int ckpt_load(struct kl_devices *d, struct err *e)
{
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    int r = file_read_all(d->ckpt_path, KL_CKPT_MAX, &text, &len, e);
    if (r == -ENOENT) {
        err_clear(e);
        return 0;
    }
    if (r < 0)
        return r;
    json_error_t je;
    _cleanup_(json_decrefp) json_t *root = json_loadb(text, len, 0, &je);
    if (!root)
        return err_set(e, -EINVAL, "%s: %s (line %d)", d->ckpt_path, je.text, je.line);
    json_t *data = json_object_get(root, "Data");
    json_t *sum = json_object_get(root, "Checksum");
    uint32_t want = 0;
    if (!json_is_object(data) || !json_is_integer(sum))
        return err_set(e, -EINVAL, "%s: Data and Checksum are required", d->ckpt_path);
    if ((r = data_checksum(data, &want, e)) < 0)
        return r;
    if ((json_int_t)want != json_integer_value(sum))
        return err_set(e, -EINVAL, "%s: checksum mismatch (the file is corrupt)", d->ckpt_path);
    json_t *entries = json_object_get(data, "PodDeviceEntries");
    json_t *reg = json_object_get(data, "RegisteredDevices");
    if ((entries && !json_is_array(entries) && !json_is_null(entries)) ||
        (reg && !json_is_object(reg) && !json_is_null(reg)))
        return err_set(e, -EINVAL, "%s: PodDeviceEntries must be a list, RegisteredDevices a map",
                       d->ckpt_path);
    size_t n = json_is_array(entries) ? json_array_size(entries) : 0;
    if (n > KL_MAX_ENTRIES)
        return err_set(e, -E2BIG, "%s: more than %u entries", d->ckpt_path, KL_MAX_ENTRIES);
    struct kl_entry **list = xcalloc(n + 1, sizeof(*list));
    for (size_t i = 0; i < n; i++)
        if ((r = ckpt_entry_parse(json_array_get(entries, i), i, &list[i], e)) < 0) {
            for (size_t k = 0; k < i; k++)
                entry_free(list[k]);
            free(list);
            return err_prefix(e, "%s", d->ckpt_path);
        }
    d->entries = list;
    d->n_entries = n;
    if (json_is_object(reg))
        json_object_update(d->registered, reg);
    return 0;
}

/* ---- plugin calls --------------------------------------------------------------------------- */

static int plugin_unary(struct kl_devices *d, const char *endpoint, const char *method,
                        const ProtobufCMessage *req, const ProtobufCMessageDescriptor *desc,
                        ProtobufCMessage **ret, struct err *e)
{
    struct grpc_options go = {.stop = d->stop, .max_recv_msg = KL_MAX_RESP};
    _cleanup_(grpc_client_freep) struct grpc_client *c = NULL;
    int r = grpc_client_connect(endpoint, 5000, &go, &c, e);
    if (r < 0)
        return r;
    int code = 0;
    return grpc_client_unary_pb(c, method, req, desc, KL_CALL_MS, ret, &code, e);
}

/* ---- plugin threads ------------------------------------------------------------------------- */

/* With mu held: replaces r's device list from a ListAndWatch update. True when anything an
 * observer sees changed (IDs, health); *ids_changed when the ID set did. */
static bool apply_update(struct kl_res *r, const V1beta1__ListAndWatchResponse *u,
                         bool *ids_changed)
{
    size_t n = u->n_devices < KL_MAX_DEVICES ? u->n_devices : KL_MAX_DEVICES;
    struct kl_dev *devs = xcalloc(n + 1, sizeof(*devs));
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        const V1beta1__Device *dv = u->devices[i];
        if (!dv || !dv->id || !*dv->id)
            continue;
        bool dup = false;
        for (size_t k = 0; k < m && !dup; k++)
            dup = strcmp(devs[k].id, dv->id) == 0;
        if (dup)
            continue;
        devs[m].id = xstrdup(dv->id);
        devs[m].healthy = dv->health && strcmp(dv->health, "Healthy") == 0;
        devs[m].numa = KL_NUMA_NONE;
        if (dv->topology && dv->topology->n_nodes && dv->topology->nodes[0])
            devs[m].numa = dv->topology->nodes[0]->id;
        m++;
    }
    bool changed = m != r->n_devs;
    *ids_changed = changed;
    for (size_t i = 0; i < m && !changed; i++)
        changed = strcmp(devs[i].id, r->devs[i].id) != 0 || devs[i].healthy != r->devs[i].healthy;
    for (size_t i = 0; i < m && !*ids_changed; i++)
        *ids_changed = !res_dev(r, devs[i].id);
    devs_free(r->devs, r->n_devs);
    r->devs = devs;
    r->n_devs = m;
    return changed;
}

/* With mu held: RegisteredDevices[r] from the current list. */
static void registered_set(struct kl_devices *d, const struct kl_res *r)
{
    json_t *arr = json_array();
    for (size_t i = 0; i < r->n_devs; i++)
        json_array_append_new(arr, json_string(r->devs[i].id));
    json_object_set_new(d->registered, r->name, arr);
}

static void *plugin_main(void *arg)
{
    struct kl_plugin *p = arg;
    struct kl_devices *d = p->d;
    struct grpc_options go = {.stop = p->stop, .max_recv_msg = KL_MAX_RESP};
    _cleanup_(grpc_client_freep) struct grpc_client *c = NULL;
    _cleanup_(grpc_client_stream_freep) struct grpc_client_stream *st = NULL;
    struct err e = {0};
    uint64_t deadline = deadline_after(KL_DIAL_MS);
    int r;
    /* A plugin may register a moment before its server accepts: dial until the deadline. */
    while ((r = grpc_client_connect(p->endpoint, 2000, &go, &c, &e)) < 0 &&
           deadline_left_ms(deadline) && !stop_requested(p->stop))
        stop_wait(p->stop, 100);
    if (r >= 0) {
        V1beta1__Empty empty = V1BETA1__EMPTY__INIT;
        ProtobufCMessage *resp = NULL;
        int code = 0;
        if (grpc_client_unary_pb(c, "/v1beta1.DevicePlugin/GetDevicePluginOptions", &empty.base,
                                 &v1beta1__device_plugin_options__descriptor, KL_CALL_MS, &resp,
                                 &code, &e) == 0) {
            const V1beta1__DevicePluginOptions *o = (const V1beta1__DevicePluginOptions *)resp;
            pthread_mutex_lock(&d->mu);
            p->preferred = o->get_preferred_allocation_available;
            p->prestart = o->pre_start_required;
            pthread_mutex_unlock(&d->mu);
        } else {
            /* The registration's options stand (the kubelet uses only those). */
            log_warn(COMP, "GetDevicePluginOptions failed", "node=%s resource=%s error=\"%s\"",
                     d->node_name, p->resource, err_msg(&e));
            err_clear(&e);
        }
        if (resp)
            protobuf_c_message_free_unpacked(resp, NULL);
        r = grpc_client_stream_open_pb(c, "/v1beta1.DevicePlugin/ListAndWatch", &empty.base, 0, &st,
                                       &e);
    }
    if (r < 0)
        log_warn(COMP, "cannot follow the device plugin", "node=%s resource=%s error=\"%s\"",
                 d->node_name, p->resource, err_msg(&e));
    while (r >= 0) {
        ProtobufCMessage *msg = NULL;
        r = grpc_client_stream_next_pb(st, &v1beta1__list_and_watch_response__descriptor,
                                       UINT64_MAX, &msg, NULL, &e);
        if (r <= 0)
            break;
        bool changed = false, ids_changed = false;
        pthread_mutex_lock(&d->mu);
        struct kl_res *res = res_find(d, p->resource);
        if (res && res->plugin == p && !d->stopping) {
            res->streaming = true;
            changed = apply_update(res, (const V1beta1__ListAndWatchResponse *)msg, &ids_changed);
            if (ids_changed) {
                registered_set(d, res);
                ckpt_write(d);
            }
        }
        pthread_mutex_unlock(&d->mu);
        protobuf_c_message_free_unpacked(msg, NULL);
        if (changed) {
            log_info(COMP, "devices updated", "node=%s resource=%s", d->node_name, p->resource);
            notify(d);
        }
    }
    if (r < 0 && !stop_requested(p->stop))
        log_warn(COMP, "device plugin stream ended", "node=%s resource=%s error=\"%s\"",
                 d->node_name, p->resource, err_msg(&e));
    /* The stream ended: until the plugin registers again its devices are unhealthy. */
    bool changed = false;
    pthread_mutex_lock(&d->mu);
    struct kl_res *res = res_find(d, p->resource);
    if (res && res->plugin == p && !d->stopping) {
        res->streaming = false;
        for (size_t i = 0; i < res->n_devs; i++) {
            changed |= res->devs[i].healthy;
            res->devs[i].healthy = false;
        }
    }
    pthread_mutex_unlock(&d->mu);
    if (changed)
        notify(d);
    pthread_mutex_lock(&d->mu);
    p->done = true;
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

/* With mu held: joins and frees the plugins whose threads finished and that are no longer
 * current. A finished thread has released mu for good, so the join does not wait on us. */
static void plugins_reap(struct kl_devices *d)
{
    struct kl_plugin **pp = &d->plugins;
    while (*pp) {
        struct kl_plugin *p = *pp;
        struct kl_res *r = res_find(d, p->resource);
        if (p->done && (!r || r->plugin != p)) {
            *pp = p->next;
            if (p->started)
                pthread_join(p->thread, NULL);
            plugin_free(p);
        } else {
            pp = &p->next;
        }
    }
}

/* ---- Registration --------------------------------------------------------------------------- */

static bool dns_label_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
}

/* An extended resource name as the kubelet's IsExtendedResourceName checks it: "domain/name",
 * a DNS subdomain prefix outside kubernetes.io, a qualified name (<= 63, alphanumeric at both
 * ends, '-', '_', '.' inside). */
static bool resource_name_valid(const char *s)
{
    const char *slash = strchr(s, '/');
    if (!slash || strchr(slash + 1, '/') || slash == s || strlen(s) > KL_RESOURCE_MAX)
        return false;
    size_t plen = (size_t)(slash - s);
    for (size_t i = 0; i < plen; i++) {
        char c = s[i];
        bool edge = i == 0 || i == plen - 1 || s[i - 1] == '.' || s[i + 1] == '.';
        if (c == '.' ? edge : !dns_label_char(c) || (edge && c == '-'))
            return false;
    }
    if ((plen == 13 && strncmp(s, "kubernetes.io", 13) == 0) ||
        (plen > 14 && strncmp(slash - 14, ".kubernetes.io", 14) == 0))
        return false;
    const char *n = slash + 1;
    size_t nlen = strlen(n);
    if (!nlen || nlen > 63)
        return false;
    for (size_t i = 0; i < nlen; i++) {
        char c = n[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        if (!alnum && ((i == 0 || i == nlen - 1) || (c != '-' && c != '_' && c != '.')))
            return false;
    }
    return true;
}

static void h_register(struct grpc_call *call, const ProtobufCMessage *req, void *ud)
{
    struct kl_devices *d = ud;
    const V1beta1__RegisterRequest *rq = (const V1beta1__RegisterRequest *)req;
    const char *ver = rq->version ? rq->version : "";
    const char *name = rq->resource_name ? rq->resource_name : "";
    const char *ep = rq->endpoint ? rq->endpoint : "";
    /* The kubelet's texts; a Go handler's plain error reaches the client as UNKNOWN. */
    if (strcmp(ver, KL_API_VERSION) != 0) {
        grpc_call_fail(call, GRPC_STATUS_UNKNOWN,
                       "requested API version \"%s\" is not supported by kubelet. Supported "
                       "versions are [\"%s\"]",
                       ver, KL_API_VERSION);
        return;
    }
    if (!resource_name_valid(name)) {
        grpc_call_fail(call, GRPC_STATUS_UNKNOWN, "the ResourceName \"%s\" is invalid", name);
        return;
    }
    if (!*ep || strchr(ep, '/') || strcmp(ep, ".") == 0 || strcmp(ep, "..") == 0 ||
        strcmp(ep, "kubelet.sock") == 0 || strlen(ep) > KL_ENDPOINT_MAX) {
        grpc_call_fail(call, GRPC_STATUS_UNKNOWN,
                       "the endpoint \"%s\" is invalid: a socket file name in %s", ep, d->dir);
        return;
    }
    struct kl_plugin *p = xcalloc(1, sizeof(*p));
    struct err e = {0};
    if (stop_token_new(&p->stop, &e) < 0) {
        free(p);
        grpc_call_fail(call, GRPC_STATUS_INTERNAL, "%s", err_msg(&e));
        return;
    }
    p->d = d;
    p->resource = xstrdup(name);
    p->endpoint = xasprintf("%s/%s", d->dir, ep);
    p->preferred = rq->options && rq->options->get_preferred_allocation_available;
    p->prestart = rq->options && rq->options->pre_start_required;

    pthread_mutex_lock(&d->mu);
    plugins_reap(d);
    struct kl_res *r = res_find(d, name);
    if (!r && d->n_res >= KL_MAX_RESOURCES) {
        pthread_mutex_unlock(&d->mu);
        plugin_free(p);
        grpc_call_fail(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "more than %u resources",
                       KL_MAX_RESOURCES);
        return;
    }
    if (!r) {
        r = xcalloc(1, sizeof(*r));
        r->name = xstrdup(name);
        d->res = xrealloc(d->res, (d->n_res + 1) * sizeof(*d->res));
        d->res[d->n_res++] = r;
    }
    if (r->plugin)
        stop_request(r->plugin->stop); /* replaced: its thread ends, it is reaped later */
    r->plugin = p;
    r->streaming = false;
    p->next = d->plugins;
    d->plugins = p;
    if (pthread_create(&p->thread, NULL, plugin_main, p) == 0)
        p->started = true;
    else
        p->done = true;
    pthread_mutex_unlock(&d->mu);
    log_info(COMP, "device plugin registered", "node=%s resource=%s endpoint=%s", d->node_name,
             name, ep);
    V1beta1__Empty out = V1BETA1__EMPTY__INIT;
    grpc_call_reply_pb(call, &out.base);
}

/* ---- new / free ----------------------------------------------------------------------------- */

/* The kubelet removes the sockets it finds in its directory at start, so plugins (which watch
 * the directory) notice the restart and register again. Only sockets go; the checkpoint stays. */
static void remove_stale_sockets(const struct kl_devices *d)
{
    DIR *dir = opendir(d->dir);
    if (!dir)
        return;
    struct dirent *de;
    while ((de = readdir(dir))) {
        struct stat st;
        if (fstatat(dirfd(dir), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            S_ISSOCK(st.st_mode) && unlinkat(dirfd(dir), de->d_name, 0) == 0)
            log_debug(COMP, "removed a stale socket", "node=%s name=%s", d->node_name, de->d_name);
    }
    closedir(dir);
}

int kl_devices_new(const struct kl_devices_config *cfg, struct kl_devices **ret, struct err *e)
{
    if (!cfg || !cfg->root || !*cfg->root)
        return err_set(e, -EINVAL, "kl-devices: a node root is required");
    struct kl_devices *d = xcalloc(1, sizeof(*d));
    d->root = xstrdup(cfg->root);
    d->node_name = xstrdup(cfg->node_name ? cfg->node_name : "");
    d->on_change = cfg->on_change;
    d->userdata = cfg->userdata;
    d->dir = xasprintf("%s/var/lib/kubelet/device-plugins", cfg->root);
    d->ckpt_path = xasprintf("%s/" KL_CKPT_NAME, d->dir);
    d->podres_sock = xasprintf("%s/var/lib/kubelet/pod-resources/kubelet.sock", cfg->root);
    d->registered = json_object();
    pthread_mutex_init(&d->alloc_mu, NULL);
    pthread_mutex_init(&d->mu, NULL);
    _cleanup_free_ char *podres_dir = xasprintf("%s/var/lib/kubelet/pod-resources", cfg->root);
    _cleanup_free_ char *sock = xasprintf("%s/kubelet.sock", d->dir);
    int r;
    if ((r = stop_token_new(&d->stop, e)) < 0)
        goto fail;
    if ((r = mkdir_p(d->dir, 0750)) < 0 || (r = mkdir_p(podres_dir, 0750)) < 0) {
        r = err_errno(e, r, "create %s", d->dir);
        goto fail;
    }
    file_remove_stale_temps(d->ckpt_path, e);
    err_clear(e);
    if ((r = ckpt_load(d, e)) < 0) {
        log_warn(COMP, "checkpoint ignored", "node=%s error=\"%s\"", d->node_name, err_msg(e));
        err_clear(e);
    }
    remove_stale_sockets(d);
    struct grpc_options go = {.socket_mode = 0600};
    if ((r = grpc_server_new(&go, &d->reg_srv, e)) < 0 ||
        (r = grpc_server_add_unary_pb(d->reg_srv, "/v1beta1.Registration/Register",
                                      &v1beta1__register_request__descriptor, h_register, d, e)) <
            0 ||
        (r = grpc_server_start(d->reg_srv, sock, e)) < 0)
        goto fail;
    if ((r = grpc_server_new(&go, &d->podres_srv, e)) < 0 ||
        (r = kl_podres_register(d, d->podres_srv, e)) < 0 ||
        (r = grpc_server_start(d->podres_srv, d->podres_sock, e)) < 0)
        goto fail;
    log_info(COMP, "device manager started", "node=%s socket=%s entries=%zu", d->node_name, sock,
             d->n_entries);
    *ret = d;
    return 0;
fail:
    kl_devices_free(d);
    return err_prefix(e, "kl-devices %s", cfg->node_name ? cfg->node_name : cfg->root);
}

void kl_devices_free(struct kl_devices *d)
{
    if (!d)
        return;
    grpc_server_free(d->reg_srv); /* no handler runs after these */
    grpc_server_free(d->podres_srv);
    if (d->stop)
        stop_request(d->stop);
    pthread_mutex_lock(&d->mu);
    d->stopping = true;
    for (struct kl_plugin *p = d->plugins; p; p = p->next)
        stop_request(p->stop);
    pthread_mutex_unlock(&d->mu);
    while (d->plugins) {
        struct kl_plugin *p = d->plugins;
        d->plugins = p->next;
        if (p->started)
            pthread_join(p->thread, NULL);
        plugin_free(p);
    }
    for (size_t i = 0; i < d->n_res; i++) {
        devs_free(d->res[i]->devs, d->res[i]->n_devs);
        free(d->res[i]->name);
        free(d->res[i]);
    }
    free(d->res);
    for (size_t i = 0; i < d->n_entries; i++)
        entry_free(d->entries[i]);
    free(d->entries);
    json_decref(d->registered);
    stop_token_free(d->stop);
    pthread_mutex_destroy(&d->mu);
    pthread_mutex_destroy(&d->alloc_mu);
    free(d->root);
    free(d->node_name);
    free(d->dir);
    free(d->ckpt_path);
    free(d->podres_sock);
    free(d);
}

json_t *kl_devices_resources(struct kl_devices *d)
{
    json_t *out = json_object();
    pthread_mutex_lock(&d->mu);
    for (size_t i = 0; i < d->n_res; i++) {
        const struct kl_res *r = d->res[i];
        size_t healthy = 0;
        for (size_t k = 0; k < r->n_devs; k++)
            healthy += r->devs[k].healthy;
        json_object_set_new(out, r->name,
                            json_pack("{s:I, s:I}", "capacity", (json_int_t)r->n_devs,
                                      "allocatable", (json_int_t)healthy));
    }
    pthread_mutex_unlock(&d->mu);
    return out;
}

/* ---- allocation ----------------------------------------------------------------------------- */

void kl_alloc_free(struct kl_alloc *a)
{
    if (!a)
        return;
    for (char **p = a->envs; p && *p; p++)
        free(*p);
    free(a->envs);
    for (size_t i = 0; i < a->n_mounts; i++) {
        free((char *)a->mounts[i].source);
        free((char *)a->mounts[i].target);
    }
    free(a->mounts);
    for (size_t i = 0; i < a->n_devices; i++) {
        free(a->devices[i].path);
        free(a->devices[i].host_path);
    }
    free(a->devices);
    for (char **p = a->cdi_devices; p && *p; p++)
        free(*p);
    free(a->cdi_devices);
    json_decref(a->annotations);
    free(a);
}
DEFINE_CLEANUP_FUNC(struct kl_alloc, kl_alloc_free)

static size_t strv_len(char **v)
{
    size_t n = 0;
    while (v && v[n])
        n++;
    return n;
}

/* Appends s (owned) to a NULL-terminated list unless an equal string is there. */
static void strv_add_unique(char ***v, char *s)
{
    size_t n = strv_len(*v);
    for (size_t i = 0; i < n; i++)
        if (strcmp((*v)[i], s) == 0) {
            free(s);
            return;
        }
    *v = xrealloc(*v, (n + 2) * sizeof(**v));
    (*v)[n] = s;
    (*v)[n + 1] = NULL;
}

void kl_alloc_setenv(struct kl_alloc *a, const char *name, const char *value)
{
    size_t nl = strlen(name), n = strv_len(a->envs);
    char *kv = xasprintf("%s=%s", name, value);
    for (size_t i = 0; i < n; i++)
        if (strncmp(a->envs[i], name, nl) == 0 && a->envs[i][nl] == '=') {
            free(a->envs[i]);
            a->envs[i] = kv;
            return;
        }
    strv_add_unique(&a->envs, kv);
}

void kl_alloc_add_mount(struct kl_alloc *a, char *source, char *target, bool read_only)
{
    a->mounts = xrealloc(a->mounts, (a->n_mounts + 1) * sizeof(*a->mounts));
    a->mounts[a->n_mounts++] =
        (struct kl_mount){.source = source, .target = target, .read_only = read_only};
}

char *kl_host_path(const char *root, const char *p)
{
    bool no_root = !root || !*root || strcmp(root, "/") == 0;
    return no_root ? xstrdup(p) : xasprintf("%s%s%s", root, p[0] == '/' ? "" : "/", p);
}

void kl_alloc_add_device(struct kl_alloc *a, struct kl_alloc_device *d)
{
    for (size_t i = 0; i < a->n_devices; i++)
        if (strcmp(a->devices[i].path, d->path) == 0) {
            free(d->path);
            free(d->host_path);
            return;
        }
    a->devices = xrealloc(a->devices, (a->n_devices + 1) * sizeof(*a->devices));
    a->devices[a->n_devices++] = *d;
}

int kl_device_resolve(const struct kl_alloc_device *d, const struct stat *host, int host_errno,
                      struct kl_device *ret, struct err *e)
{
    if (d->type && d->type != 'c' && d->type != 'b')
        return err_set(e, -EINVAL, "device \"%s\": type '%c' is not c or b", d->path, d->type);
    /* a type and numbers given: the host's node is not read (CDI's rule); else it must be one */
    if (d->type && d->has_numbers)
        host = NULL;
    else if (!host)
        return err_errno(e, host_errno ? -host_errno : -ENOENT,
                         "error gathering device information while adding custom device \"%s\"",
                         d->host_path);
    else if (!S_ISCHR(host->st_mode) && !S_ISBLK(host->st_mode))
        return err_set(e, -ENODEV, "device \"%s\": \"%s\" is not a device node", d->path,
                       d->host_path);
    struct kl_device v = {.path = d->path};
    v.type = host ? (S_ISCHR(host->st_mode) ? 'c' : 'b') : d->type;
    v.major = host ? major(host->st_rdev) : d->major;
    v.minor = host ? minor(host->st_rdev) : d->minor;
    /* runc's default mode is 0666, its default owner root */
    v.file_mode = d->has_mode ? d->file_mode & 07777 : host ? host->st_mode & 07777 : 0666;
    v.uid = d->has_uid ? d->uid : host ? host->st_uid : 0;
    v.gid = d->has_gid ? d->gid : host ? host->st_gid : 0;
    *ret = v;
    return 0;
}

#define CDI_ANNOTATION_PREFIX "cdi.k8s.io/"

/* Merges one packed ContainerAllocateResponse into a. CDI devices come from cdi_devices and,
 * as containerd reads them, from the values of cdi.k8s.io/ annotations (comma lists). */
static int alloc_merge(const char *root, struct kl_alloc *a, const uint8_t *resp, size_t len,
                       struct err *e)
{
    ProtobufCMessage *m = NULL;
    int r = grpc_pb_unpack(&v1beta1__container_allocate_response__descriptor, resp, len,
                           KL_MAX_RESP, &m, e);
    if (r < 0)
        return r;
    const V1beta1__ContainerAllocateResponse *c = (const V1beta1__ContainerAllocateResponse *)m;
    for (size_t i = 0; i < c->n_envs; i++)
        if (c->envs[i] && c->envs[i]->key && *c->envs[i]->key)
            kl_alloc_setenv(a, c->envs[i]->key, c->envs[i]->value ? c->envs[i]->value : "");
    for (size_t i = 0; i < c->n_mounts; i++) {
        const V1beta1__Mount *mt = c->mounts[i];
        if (!mt || !mt->host_path || !mt->container_path)
            continue;
        kl_alloc_add_mount(a, xstrdup(mt->host_path), xstrdup(mt->container_path), mt->read_only);
    }
    for (size_t i = 0; i < c->n_devices; i++) {
        const V1beta1__DeviceSpec *ds = c->devices[i];
        if (!ds || !ds->host_path || !*ds->host_path)
            continue;
        const char *in =
            ds->container_path && *ds->container_path ? ds->container_path : ds->host_path;
        struct kl_alloc_device dev = {.path = xstrdup(in),
                                      .host_path = kl_host_path(root, ds->host_path)};
        kl_alloc_add_device(a, &dev);
    }
    for (size_t i = 0; i < c->n_cdi_devices; i++)
        if (c->cdi_devices[i] && c->cdi_devices[i]->name && *c->cdi_devices[i]->name)
            strv_add_unique(&a->cdi_devices, xstrdup(c->cdi_devices[i]->name));
    for (size_t i = 0; i < c->n_annotations; i++) {
        const V1beta1__ContainerAllocateResponse__AnnotationsEntry *an = c->annotations[i];
        if (!an || !an->key || !an->value)
            continue;
        json_object_set_new(a->annotations, an->key, json_string(an->value));
        if (!str_has_prefix(an->key, CDI_ANNOTATION_PREFIX))
            continue;
        for (const char *p = an->value; *p;) {
            size_t n = strcspn(p, ",");
            if (n)
                strv_add_unique(&a->cdi_devices, xstrndup(p, n));
            p += n + (p[n] == ',');
        }
    }
    protobuf_c_message_free_unpacked(m, NULL);
    return 0;
}

struct alloc_plan {
    char *endpoint;
    bool preferred, prestart;
    char **free_ids; /* free healthy devices, the plugin's order */
    size_t n_free;
};

static void alloc_plan_clear(struct alloc_plan *p)
{
    free(p->endpoint);
    for (size_t i = 0; i < p->n_free; i++)
        free(p->free_ids[i]);
    free(p->free_ids);
}

/* GetPreferredAllocation: the plugin's choice when it is a valid one, else NULL. */
static char **preferred_ids(struct kl_devices *d, const struct alloc_plan *pl, size_t count,
                            const char *resource)
{
    V1beta1__ContainerPreferredAllocationRequest cr =
        V1BETA1__CONTAINER_PREFERRED_ALLOCATION_REQUEST__INIT;
    cr.n_available_deviceids = pl->n_free;
    cr.available_deviceids = pl->free_ids;
    cr.allocation_size = (int32_t)count;
    V1beta1__ContainerPreferredAllocationRequest *crp = &cr;
    V1beta1__PreferredAllocationRequest rq = V1BETA1__PREFERRED_ALLOCATION_REQUEST__INIT;
    rq.n_container_requests = 1;
    rq.container_requests = &crp;
    ProtobufCMessage *m = NULL;
    struct err e = {0};
    if (plugin_unary(d, pl->endpoint, "/v1beta1.DevicePlugin/GetPreferredAllocation", &rq.base,
                     &v1beta1__preferred_allocation_response__descriptor, &m, &e) < 0) {
        log_warn(COMP, "GetPreferredAllocation failed; taking the first free devices",
                 "node=%s resource=%s error=\"%s\"", d->node_name, resource, err_msg(&e));
        return NULL;
    }
    const V1beta1__PreferredAllocationResponse *resp =
        (const V1beta1__PreferredAllocationResponse *)m;
    char **out = NULL;
    if (resp->n_container_responses == 1 && resp->container_responses[0] &&
        resp->container_responses[0]->n_deviceids == count) {
        const V1beta1__ContainerPreferredAllocationResponse *c = resp->container_responses[0];
        out = xcalloc(count + 1, sizeof(*out));
        for (size_t i = 0; i < count && out; i++) {
            bool ok = false;
            for (size_t k = 0; k < pl->n_free && !ok; k++)
                ok = c->deviceids[i] && strcmp(c->deviceids[i], pl->free_ids[k]) == 0;
            for (size_t k = 0; k < i && ok; k++)
                ok = strcmp(out[k], c->deviceids[i]) != 0;
            if (ok) {
                out[i] = xstrdup(c->deviceids[i]);
            } else {
                for (size_t k = 0; k < i; k++)
                    free(out[k]);
                free(out);
                out = NULL;
            }
        }
    }
    if (!out)
        log_warn(COMP, "GetPreferredAllocation answered an unusable set; taking the first free",
                 "node=%s resource=%s", d->node_name, resource);
    protobuf_c_message_free_unpacked(m, NULL);
    return out;
}

/* Allocate (and PreStartContainer when the plugin asks for it) for ids: the packed response. */
static int call_allocate(struct kl_devices *d, const char *endpoint, bool prestart,
                         char *const *ids, size_t n, uint8_t **ret, size_t *ret_len, struct err *e)
{
    V1beta1__ContainerAllocateRequest cr = V1BETA1__CONTAINER_ALLOCATE_REQUEST__INIT;
    cr.n_devices_ids = n;
    cr.devices_ids = (char **)ids;
    V1beta1__ContainerAllocateRequest *crp = &cr;
    V1beta1__AllocateRequest rq = V1BETA1__ALLOCATE_REQUEST__INIT;
    rq.n_container_requests = 1;
    rq.container_requests = &crp;
    ProtobufCMessage *m = NULL;
    int r = plugin_unary(d, endpoint, "/v1beta1.DevicePlugin/Allocate", &rq.base,
                         &v1beta1__allocate_response__descriptor, &m, e);
    if (r < 0)
        return err_prefix(e, "Allocate");
    const V1beta1__AllocateResponse *resp = (const V1beta1__AllocateResponse *)m;
    if (resp->n_container_responses != 1 || !resp->container_responses[0]) {
        protobuf_c_message_free_unpacked(m, NULL);
        return err_set(e, -EPROTO, "Allocate: %zu container responses for 1 request",
                       resp->n_container_responses);
    }
    r = grpc_pb_pack(&resp->container_responses[0]->base, KL_MAX_RESP, ret, ret_len, e);
    protobuf_c_message_free_unpacked(m, NULL);
    if (r < 0 || !prestart)
        return r;
    V1beta1__PreStartContainerRequest ps = V1BETA1__PRE_START_CONTAINER_REQUEST__INIT;
    ps.n_devices_ids = n;
    ps.devices_ids = (char **)ids;
    if ((r = plugin_unary(d, endpoint, "/v1beta1.DevicePlugin/PreStartContainer", &ps.base,
                          &v1beta1__pre_start_container_response__descriptor, &m, e)) < 0) {
        free(*ret);
        *ret = NULL;
        return err_prefix(e, "PreStartContainer");
    }
    protobuf_c_message_free_unpacked(m, NULL);
    return 0;
}

/* One resource of one container, with alloc_mu held (not mu). */
static int allocate_one(struct kl_devices *d, const char *uid, const char *ns, const char *name,
                        const char *ctr, const char *resource, size_t count, struct kl_alloc *a,
                        struct kl_entry **ret_added, struct err *e)
{
    _cleanup_(alloc_plan_clear) struct alloc_plan pl = {0};
    _cleanup_free_ uint8_t *resp = NULL;
    size_t resp_len = 0;
    int r;

    pthread_mutex_lock(&d->mu);
    struct kl_res *res = res_find(d, resource);
    bool known = res || json_object_get(d->registered, resource);
    struct kl_entry *en = entry_find(d, uid, ctr, resource);
    if (!known && !en) {
        pthread_mutex_unlock(&d->mu);
        return 0; /* not a device resource: the kubelet ignores it */
    }
    bool live = res && res->plugin && res->streaming;
    if (live) {
        pl.endpoint = xstrdup(res->plugin->endpoint);
        pl.preferred = res->plugin->preferred;
        pl.prestart = res->plugin->prestart;
    }
    if (en) {
        /* Recorded: Allocate again with the same IDs (a restarted container); without the
         * plugin, the recorded response. */
        _cleanup_free_ char **ids = xcalloc(en->n_ids + 1, sizeof(*ids));
        for (size_t i = 0; i < en->n_ids; i++)
            ids[i] = xstrdup(en->ids[i]);
        size_t n_ids = en->n_ids;
        pthread_mutex_unlock(&d->mu);
        if (live &&
            (r = call_allocate(d, pl.endpoint, pl.prestart, ids, n_ids, &resp, &resp_len, e)) < 0) {
            log_warn(COMP, "Allocate again failed; using the recorded response",
                     "node=%s resource=%s pod=%s error=\"%s\"", d->node_name, resource, uid,
                     err_msg(e));
            err_clear(e);
        }
        for (size_t i = 0; i < n_ids; i++)
            free(ids[i]);
        pthread_mutex_lock(&d->mu);
        en = entry_find(d, uid, ctr, resource); /* release may have raced us */
        if (en && resp) {
            free(en->resp);
            en->resp = steal_ptr(&resp);
            en->resp_len = resp_len;
            ckpt_write(d);
        }
        r = en ? alloc_merge(d->root, a, en->resp, en->resp_len, e) : 0;
        pthread_mutex_unlock(&d->mu);
        return r < 0 ? err_prefix(e, "%s: recorded response", resource) : 0;
    }
    if (!live) {
        pthread_mutex_unlock(&d->mu);
        return err_set(e, -EAGAIN, "%s: the device plugin is not registered", resource);
    }
    pl.free_ids = xcalloc(res->n_devs + 1, sizeof(*pl.free_ids));
    for (size_t i = 0; i < res->n_devs; i++)
        if (res->devs[i].healthy && !id_in_use(d, resource, res->devs[i].id))
            pl.free_ids[pl.n_free++] = xstrdup(res->devs[i].id);
    pthread_mutex_unlock(&d->mu);
    if (pl.n_free < count)
        return err_set(e, -ENOSPC,
                       "requested number of devices unavailable for %s. Requested: %zu, "
                       "Available: %zu",
                       resource, count, pl.n_free);

    char **chosen = pl.preferred ? preferred_ids(d, &pl, count, resource) : NULL;
    if (!chosen) {
        chosen = xcalloc(count + 1, sizeof(*chosen));
        for (size_t i = 0; i < count; i++)
            chosen[i] = xstrdup(pl.free_ids[i]);
    }
    r = call_allocate(d, pl.endpoint, pl.prestart, chosen, count, &resp, &resp_len, e);
    if (r >= 0)
        r = alloc_merge(d->root, a, resp, resp_len, e);
    if (r < 0) {
        for (size_t i = 0; i < count; i++)
            free(chosen[i]);
        free(chosen);
        return err_prefix(e, "%s", resource);
    }
    struct kl_entry *ne = xcalloc(1, sizeof(*ne));
    ne->pod_uid = xstrdup(uid);
    ne->pod_namespace = xstrdup(ns);
    ne->pod_name = xstrdup(name);
    ne->container = xstrdup(ctr);
    ne->resource = xstrdup(resource);
    ne->ids = chosen;
    ne->n_ids = count;
    ne->numa = xcalloc(count + 1, sizeof(*ne->numa));
    ne->resp = steal_ptr(&resp);
    ne->resp_len = resp_len;
    pthread_mutex_lock(&d->mu);
    res = res_find(d, resource);
    for (size_t i = 0; i < count; i++) {
        const struct kl_dev *dv = res ? res_dev(res, chosen[i]) : NULL;
        ne->numa[i] = dv ? dv->numa : KL_NUMA_NONE;
    }
    d->entries = xrealloc(d->entries, (d->n_entries + 1) * sizeof(*d->entries));
    d->entries[d->n_entries++] = ne;
    pthread_mutex_unlock(&d->mu);
    *ret_added = ne;
    log_info(COMP, "devices allocated", "node=%s pod=%s/%s container=%s resource=%s count=%zu",
             d->node_name, ns, name, ctr, resource, count);
    return 0;
}

int kl_devices_allocate(struct kl_devices *d, const char *pod_uid, const char *pod_namespace,
                        const char *pod_name, const char *container, json_t *requests,
                        struct kl_alloc **ret, struct err *e)
{
    if (!pod_uid || !*pod_uid || !container || !*container)
        return err_set(e, -EINVAL, "allocate: a pod UID and a container name are required");
    if (requests && !json_is_object(requests))
        return err_set(e, -EINVAL, "allocate: requests must be an object");
    _cleanup_(kl_alloc_freep) struct kl_alloc *a = xcalloc(1, sizeof(*a));
    a->annotations = json_object();
    a->envs = xcalloc(1, sizeof(*a->envs));
    a->cdi_devices = xcalloc(1, sizeof(*a->cdi_devices));
    const char *ns = pod_namespace ? pod_namespace : "";
    const char *name = pod_name ? pod_name : "";
    pthread_mutex_lock(&d->alloc_mu);
    const char *resource;
    json_t *v;
    _cleanup_free_ struct kl_entry **added =
        xcalloc(json_object_size(requests) + 1, sizeof(*added));
    size_t n_added = 0;
    int r = 0;
    json_object_foreach (requests, resource, v) {
        int64_t count = 0;
        if (json_is_integer(v))
            count = json_integer_value(v);
        else if (json_is_string(v) && parse_i64(json_string_value(v), &count) < 0)
            count = -1;
        if (count < 0 || count > KL_MAX_DEVICES || (!json_is_integer(v) && !json_is_string(v))) {
            r = err_set(e, -EINVAL, "allocate: %s: not a device count", resource);
            break;
        }
        if (count == 0 || !strchr(resource, '/'))
            continue;
        if ((r = allocate_one(d, pod_uid, ns, name, container, resource, (size_t)count, a,
                              &added[n_added], e)) < 0)
            break;
        n_added += added[n_added] != NULL;
    }
    pthread_mutex_lock(&d->mu);
    /* All or nothing: a failure drops this call's new records (recorded ones stay). */
    for (size_t i = 0; r < 0 && i < n_added; i++)
        entry_remove(d, added[i]);
    if (n_added)
        ckpt_write(d);
    pthread_mutex_unlock(&d->mu);
    pthread_mutex_unlock(&d->alloc_mu);
    if (r < 0)
        return err_prefix(e, "pod %s/%s container %s", ns, name, container);
    *ret = steal_ptr(&a);
    return 0;
}

void kl_devices_release(struct kl_devices *d, const char *pod_uid)
{
    if (!pod_uid)
        return;
    pthread_mutex_lock(&d->mu);
    bool removed = false;
    for (size_t i = d->n_entries; i-- > 0;)
        if (strcmp(d->entries[i]->pod_uid, pod_uid) == 0) {
            entry_remove_at(d, i);
            removed = true;
        }
    if (removed) {
        ckpt_write(d);
        log_info(COMP, "devices released", "node=%s pod=%s", d->node_name, pod_uid);
    }
    pthread_mutex_unlock(&d->mu);
}

static bool uid_live(json_t *live, const char *uid)
{
    size_t i;
    json_t *v;
    json_array_foreach (live, i, v)
        if (json_is_string(v) && strcmp(json_string_value(v), uid) == 0)
            return true;
    return false;
}

void kl_devices_retain(struct kl_devices *d, json_t *live_uids)
{
    if (!json_is_array(live_uids))
        return;
    pthread_mutex_lock(&d->mu);
    bool removed = false;
    for (size_t i = d->n_entries; i-- > 0;)
        if (!uid_live(live_uids, d->entries[i]->pod_uid)) {
            log_info(COMP, "devices released (pod gone)", "node=%s pod=%s", d->node_name,
                     d->entries[i]->pod_uid);
            entry_remove_at(d, i);
            removed = true;
        }
    if (removed)
        ckpt_write(d);
    pthread_mutex_unlock(&d->mu);
}
