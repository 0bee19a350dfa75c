/* SPDX-License-Identifier: Apache-2.0 */
/* The protobuf edge of the plugin: request bytes in, response bytes out, no I/O. */
#include <string.h>

#include "deviceplugin/v1beta1/api.pb-c.h"
#include "dp-internal.h"
#include "grpc.h"

static int bad_request(int *ret_status, struct err *e, const char *what)
{
    *ret_status = GRPC_STATUS_INVALID_ARGUMENT;
    return err_prefix(e, "%s", what);
}

/* ---- Allocate ----------------------------------------------------------------------------- */

/* Owns everything the packed response points to. */
struct alloc_resp {
    size_t n;
    struct dp_container_alloc *a;
    V1beta1__ContainerAllocateResponse *cr;
    V1beta1__ContainerAllocateResponse **crp;
};

static void alloc_resp_free(struct alloc_resp *ar)
{
    for (size_t i = 0; i < ar->n; i++) {
        V1beta1__ContainerAllocateResponse *c = &ar->cr[i];
        for (size_t k = 0; k < c->n_envs; k++)
            free(c->envs[k]);
        for (size_t k = 0; k < c->n_annotations; k++)
            free(c->annotations[k]);
        for (size_t k = 0; k < c->n_mounts; k++)
            free(c->mounts[k]);
        for (size_t k = 0; k < c->n_devices; k++)
            free(c->devices[k]);
        for (size_t k = 0; k < c->n_cdi_devices; k++)
            free(c->cdi_devices[k]);
        free(c->envs);
        free(c->annotations);
        free(c->mounts);
        free(c->devices);
        free(c->cdi_devices);
        dp_container_alloc_clear(&ar->a[i]);
    }
    free(ar->a);
    free(ar->cr);
    free(ar->crp);
}

static void fill_container(V1beta1__ContainerAllocateResponse *c,
                           const struct dp_container_alloc *a)
{
    v1beta1__container_allocate_response__init(c);
    c->n_envs = a->n_envs;
    c->envs = xcalloc(a->n_envs + 1, sizeof(*c->envs));
    for (size_t k = 0; k < a->n_envs; k++) {
        V1beta1__ContainerAllocateResponse__EnvsEntry *en = xmalloc(sizeof(*en));
        v1beta1__container_allocate_response__envs_entry__init(en);
        en->key = a->envs[k].key;
        en->value = a->envs[k].value;
        c->envs[k] = en;
    }
    c->n_annotations = a->n_annotations;
    c->annotations = xcalloc(a->n_annotations + 1, sizeof(*c->annotations));
    for (size_t k = 0; k < a->n_annotations; k++) {
        V1beta1__ContainerAllocateResponse__AnnotationsEntry *an = xmalloc(sizeof(*an));
        v1beta1__container_allocate_response__annotations_entry__init(an);
        an->key = a->annotations[k].key;
        an->value = a->annotations[k].value;
        c->annotations[k] = an;
    }
    c->n_mounts = a->n_mounts;
    c->mounts = xcalloc(a->n_mounts + 1, sizeof(*c->mounts));
    for (size_t k = 0; k < a->n_mounts; k++) {
        V1beta1__Mount *m = xmalloc(sizeof(*m));
        v1beta1__mount__init(m);
        m->container_path = a->mounts[k].container_path;
        m->host_path = a->mounts[k].host_path;
        m->read_only = a->mounts[k].read_only;
        c->mounts[k] = m;
    }
    c->n_devices = a->n_devspecs;
    c->devices = xcalloc(a->n_devspecs + 1, sizeof(*c->devices));
    for (size_t k = 0; k < a->n_devspecs; k++) {
        V1beta1__DeviceSpec *d = xmalloc(sizeof(*d));
        v1beta1__device_spec__init(d);
        d->container_path = a->devspecs[k].container_path;
        d->host_path = a->devspecs[k].host_path;
        d->permissions = a->devspecs[k].permissions;
        c->devices[k] = d;
    }
    c->n_cdi_devices = a->n_cdi;
    c->cdi_devices = xcalloc(a->n_cdi + 1, sizeof(*c->cdi_devices));
    for (size_t k = 0; k < a->n_cdi; k++) {
        V1beta1__CDIDevice *d = xmalloc(sizeof(*d));
        v1beta1__cdidevice__init(d);
        d->name = a->cdi[k];
        c->cdi_devices[k] = d;
    }
}

int dp_proto_allocate(const struct dp_plan *p, const struct dp_resource *r, const uint8_t *req,
                      size_t len, dp_uuid_fn uuid, dp_exists_fn exists, void *userdata,
                      uint8_t **ret, size_t *ret_len, int *ret_status, struct err *e)
{
    ProtobufCMessage *m = NULL;
    if (grpc_pb_unpack(&v1beta1__allocate_request__descriptor, req, len, DP_MAX_MSG, &m, e) < 0)
        return bad_request(ret_status, e, "AllocateRequest");
    V1beta1__AllocateRequest *rq = (V1beta1__AllocateRequest *)m;
    int rc = 0;
    struct alloc_resp ar = {0};
    if (rq->n_container_requests > DP_MAX_CONTAINERS) {
        rc = err_set(e, -E2BIG, "AllocateRequest: %zu container requests (limit %d)",
                     rq->n_container_requests, DP_MAX_CONTAINERS);
        *ret_status = GRPC_STATUS_INVALID_ARGUMENT;
        goto out;
    }
    ar.a = xcalloc(rq->n_container_requests + 1, sizeof(*ar.a));
    ar.cr = xcalloc(rq->n_container_requests + 1, sizeof(*ar.cr));
    ar.crp = xcalloc(rq->n_container_requests + 1, sizeof(*ar.crp));
    for (size_t i = 0; i < rq->n_container_requests; i++) {
        const V1beta1__ContainerAllocateRequest *c = rq->container_requests[i];
        if (c->n_devices_ids > DP_MAX_REQ_IDS) {
            rc = err_set(e, -E2BIG, "AllocateRequest: %zu device IDs (limit %d)", c->n_devices_ids,
                         DP_MAX_REQ_IDS);
            *ret_status = GRPC_STATUS_INVALID_ARGUMENT;
            goto out;
        }
        char rid[37] = "00000000-0000-0000-0000-000000000000";
        if (uuid)
            uuid(rid);
        else
            snprintf(rid + 24, 13, "%012u", (unsigned)(i % 1000000));
        rc = dp_allocate(p, r, (const char *const *)c->devices_ids, c->n_devices_ids, rid, exists,
                         userdata, &ar.a[i], e);
        if (rc < 0) {
            *ret_status = GRPC_STATUS_UNKNOWN;
            goto out;
        }
        fill_container(&ar.cr[i], &ar.a[i]);
        ar.crp[i] = &ar.cr[i];
        ar.n = i + 1;
    }
    V1beta1__AllocateResponse resp = V1BETA1__ALLOCATE_RESPONSE__INIT;
    resp.n_container_responses = ar.n;
    resp.container_responses = ar.crp;
    rc = grpc_pb_pack(&resp.base, DP_MAX_MSG, ret, ret_len, e);
    if (rc < 0)
        *ret_status = GRPC_STATUS_RESOURCE_EXHAUSTED;
out:
    alloc_resp_free(&ar);
    protobuf_c_message_free_unpacked(m, NULL);
    return rc;
}

/* ---- GetPreferredAllocation --------------------------------------------------------------- */

int dp_proto_preferred(const struct dp_plan *p, const struct dp_resource *r, const uint8_t *req,
                       size_t len, uint8_t **ret, size_t *ret_len, int *ret_status, struct err *e)
{
    ProtobufCMessage *m = NULL;
    if (grpc_pb_unpack(&v1beta1__preferred_allocation_request__descriptor, req, len, DP_MAX_MSG, &m,
                       e) < 0)
        return bad_request(ret_status, e, "PreferredAllocationRequest");
    V1beta1__PreferredAllocationRequest *rq = (V1beta1__PreferredAllocationRequest *)m;
    int rc = 0;
    size_t n = rq->n_container_requests;
    V1beta1__ContainerPreferredAllocationResponse *cr = NULL, **crp = NULL;
    const char ***ids = NULL;
    if (n > DP_MAX_CONTAINERS) {
        rc = err_set(e, -E2BIG, "PreferredAllocationRequest: %zu container requests (limit %d)", n,
                     DP_MAX_CONTAINERS);
        *ret_status = GRPC_STATUS_INVALID_ARGUMENT;
        goto out;
    }
    uint64_t budget = DP_BE_BUDGET; /* for the whole request */
    cr = xcalloc(n + 1, sizeof(*cr));
    crp = xcalloc(n + 1, sizeof(*crp));
    ids = xcalloc(n + 1, sizeof(*ids));
    for (size_t i = 0; i < n; i++) {
        const V1beta1__ContainerPreferredAllocationRequest *c = rq->container_requests[i];
        v1beta1__container_preferred_allocation_response__init(&cr[i]);
        crp[i] = &cr[i];
        if (c->n_available_deviceids > DP_MAX_REQ_IDS ||
            c->n_must_include_deviceids > DP_MAX_REQ_IDS) {
            rc = err_set(e, -E2BIG, "PreferredAllocationRequest: too many device IDs (limit %d)",
                         DP_MAX_REQ_IDS);
            *ret_status = GRPC_STATUS_INVALID_ARGUMENT;
            goto out;
        }
        if (c->allocation_size <= 0 || (size_t)c->allocation_size > r->n_devices) {
            rc = err_set(e, -EINVAL, "PreferredAllocationRequest: allocation_size %d out of range",
                         (int)c->allocation_size);
            *ret_status = GRPC_STATUS_INVALID_ARGUMENT;
            goto out;
        }
        ids[i] = xcalloc((size_t)c->allocation_size, sizeof(char *));
        size_t got = 0;
        rc = dp_preferred_budget(
            p, r, (const char *const *)c->available_deviceids, c->n_available_deviceids,
            (const char *const *)c->must_include_deviceids, c->n_must_include_deviceids,
            c->allocation_size, &budget, ids[i], &got, e);
        if (rc < 0) {
            *ret_status = GRPC_STATUS_UNKNOWN;
            goto out;
        }
        cr[i].n_deviceids = got;
        cr[i].deviceids = (char **)ids[i];
    }
    V1beta1__PreferredAllocationResponse resp = V1BETA1__PREFERRED_ALLOCATION_RESPONSE__INIT;
    resp.n_container_responses = n;
    resp.container_responses = crp;
    rc = grpc_pb_pack(&resp.base, DP_MAX_MSG, ret, ret_len, e);
    if (rc < 0)
        *ret_status = GRPC_STATUS_RESOURCE_EXHAUSTED;
out:
    for (size_t i = 0; ids && i < n; i++)
        free(ids[i]);
    free(ids);
    free(cr);
    free(crp);
    protobuf_c_message_free_unpacked(m, NULL);
    return rc;
}

/* ---- ListAndWatch, options ---------------------------------------------------------------- */

int dp_proto_list(const struct dp_resource *r, uint8_t **ret, size_t *ret_len, struct err *e)
{
    size_t n = r->n_devices;
    _cleanup_free_ V1beta1__Device *dev = xcalloc(n + 1, sizeof(*dev));
    _cleanup_free_ V1beta1__Device **devp = xcalloc(n + 1, sizeof(*devp));
    _cleanup_free_ V1beta1__TopologyInfo *topo = xcalloc(n + 1, sizeof(*topo));
    _cleanup_free_ V1beta1__NUMANode *numa = xcalloc(n + 1, sizeof(*numa));
    _cleanup_free_ V1beta1__NUMANode **numap = xcalloc(n + 1, sizeof(*numap));
    for (size_t i = 0; i < n; i++) {
        const struct dp_device *d = &r->devices[i];
        v1beta1__device__init(&dev[i]);
        dev[i].id = (char *)d->id;
        dev[i].health = (char *)(d->healthy ? "Healthy" : "Unhealthy");
        if (d->numa_node >= 0) {
            v1beta1__topology_info__init(&topo[i]);
            v1beta1__numanode__init(&numa[i]);
            numa[i].id = d->numa_node;
            numap[i] = &numa[i];
            topo[i].n_nodes = 1;
            topo[i].nodes = &numap[i];
            dev[i].topology = &topo[i];
        }
        devp[i] = &dev[i];
    }
    V1beta1__ListAndWatchResponse resp = V1BETA1__LIST_AND_WATCH_RESPONSE__INIT;
    resp.n_devices = n;
    resp.devices = devp;
    return grpc_pb_pack(&resp.base, DP_MAX_MSG, ret, ret_len, e);
}

int dp_proto_options(uint8_t **ret, size_t *ret_len, struct err *e)
{
    V1beta1__DevicePluginOptions o = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;
    o.get_preferred_allocation_available = true;
    return grpc_pb_pack(&o.base, 0, ret, ret_len, e);
}

/* ---- config ------------------------------------------------------------------------------- */

int dp_options_from_config(const struct dpconfig *c, struct dp_options *o, struct err *e)
{
    struct dp_options t;
    dp_options_defaults(&t);
    t.mig_strategy = c->mig_strategy;
    t.list_strategies =
        c->plugin.device_list_strategy ? c->plugin.device_list_strategy : DPCONFIG_LIST_DEFAULT;
    t.id_strategy = c->plugin.device_id_strategy;
    t.pass_device_specs = c->plugin.pass_device_specs;
    const char *dev_root = c->nvidia_dev_root ? c->nvidia_dev_root : c->nvidia_driver_root;
    if (dev_root && strlcpy_s(t.dev_root, dev_root, sizeof(t.dev_root)) >= sizeof(t.dev_root))
        return err_set(e, -ENAMETOOLONG, "flags.nvidiaDevRoot: path too long");
    if (c->mps_root && strlcpy_s(t.mps_root, c->mps_root, sizeof(t.mps_root)) >= sizeof(t.mps_root))
        return err_set(e, -ENAMETOOLONG, "flags.mpsRoot: path too long");
    if (c->plugin.cdi_annotation_prefix &&
        strlcpy_s(t.cdi_annotation_prefix, c->plugin.cdi_annotation_prefix,
                  sizeof(t.cdi_annotation_prefix)) >= sizeof(t.cdi_annotation_prefix))
        return err_set(e, -ENAMETOOLONG, "flags.plugin.cdiAnnotationPrefix: too long");
    t.shared_policy = c->plugin.shared_devices_allocation_policy;
    t.gdrcopy = c->gdrcopy_enabled;
    t.gds = c->gds_enabled;
    t.mofed = c->mofed_enabled;
    t.n_imex = c->imex.n_channel_ids > 0 ? 1 : 0;
    t.imex_channels[0] = c->imex.channel_ids[0];
    t.sharing = dpconfig_sharing_strategy(c);
    if (t.sharing != DPCONFIG_SHARING_NONE) {
        const struct dpconfig_sharing *sh = dpconfig_active_sharing(c);
        t.rename_by_default = sh->rename_by_default;
        t.fail_requests_gt_one = sh->fail_requests_greater_than_one;
        for (size_t i = 0; i < sh->n_resources; i++) {
            if (sh->resources[i].replicas < 2)
                continue;
            if (t.n_shared == DP_MAX_SHARED)
                return err_set(e, -E2BIG, "sharing: more than %d shared resources", DP_MAX_SHARED);
            struct dp_shared_resource *dst = &t.shared[t.n_shared++];
            strlcpy_s(dst->name, sh->resources[i].name, sizeof(dst->name));
            dst->replicas = sh->resources[i].replicas;
        }
    }
    *o = t;
    return 0;
}
