/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The plugin's shell (dra-plugin-internal.h): the kubelet's DRA service (prepare, unprepare:
 * the core's plans executed, MIG slices made and destroyed through NVML, time slices set with
 * nvidia-smi, CDI specs and the checkpoint written) and the plugin-registration service.
 */
#include <assert.h>
#include <malloc.h>
#include <string.h>
#include <unistd.h>

#include "dra-plugin-internal.h"
#include "dra/v1/api.pb-c.h"
#include "pluginregistration/v1/api.pb-c.h"

#define DRA_SERVICE "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/"
#define REG_SERVICE "/pluginregistration.Registration/"

int dra_checkpoint_save(struct dra_plugin *pl, struct err *e)
{
    _cleanup_free_ char *text = NULL;
    int r = dra_checkpoint_encode(&pl->claims, &text, e);
    if (r < 0)
        return r;
    return file_write_atomic(pl->checkpoint, text, strlen(text), 0600, e);
}

static char *claim_spec_path(const struct dra_plugin *pl, const char *uid)
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

static bool has_dynamic(const struct dra_claim *c)
{
    for (size_t i = 0; i < c->n_devices; i++)
        if (c->devices[i].type == DRA_MIG_DYNAMIC)
            return true;
    return false;
}

/* Makes the claim's MIG slices the core says are missing, recording each in the checkpoint as
 * soon as NVML made it, then takes their UUIDs from NVML's listing (pl->mu held). */
static int make_slices(struct dra_plugin *pl, struct dra_claim *c, bool resumed, struct err *e)
{
    if (!has_dynamic(c))
        return 0;
    struct dra_mig_create todo[DRA_CLAIM_DEVICES_MAX];
    for (int pass = 0;; pass++) {
        struct gpu_inventory *inv = NULL;
        size_t n = 0;
        int r = gpu_inventory_read(pl->lib, &inv, e);
        if (r < 0)
            return err_prefix(e, "GPU inventory");
        r = dra_mig_prepare_plan(c, resumed, inv, &pl->claims, todo, &n, e);
        gpu_inventory_free(inv);
        if (r < 0)
            return r;
        if (n == 0)
            break;
        if (pass > 0)
            return err_set(e, -EIO, "claim %s/%s: %zu MIG slices made but not listed by NVML",
                           c->ref.ns, c->ref.name, n);
        for (size_t k = 0; k < n; k++) {
            struct dra_prepared_device *d = &c->devices[todo[k].device];
            unsigned gi = 0, ci = 0;
            if ((r = gpu_mig_create_at(pl->lib, todo[k].gpu_index, todo[k].profile, todo[k].start,
                                       &gi, &ci, e)) < 0)
                return err_prefix(e, "claim %s/%s: device %s", c->ref.ns, c->ref.name, d->device);
            d->gi_id = gi;
            d->ci_id = ci;
            d->created = true;
            log_info(DRA_COMP, "MIG slice made", "claim=%s/%s device=%s gpu=%u gi=%u ci=%u",
                     c->ref.ns, c->ref.name, d->device, todo[k].gpu_index, gi, ci);
            if ((r = dra_checkpoint_save(pl, e)) < 0)
                return err_prefix(e, "checkpoint");
        }
    }
    dra_cdi_base_write(pl); /* the new slices' CDI devices */
    return 0;
}

/* Destroys the MIG slices the claim made (pl->mu held); afterwards it holds none. */
static int destroy_slices(struct dra_plugin *pl, struct dra_claim *c, struct err *e)
{
    if (!has_dynamic(c))
        return 0;
    struct gpu_inventory *inv = NULL;
    int r = gpu_inventory_read(pl->lib, &inv, e);
    if (r < 0)
        return err_prefix(e, "GPU inventory");
    struct dra_mig_destroy todo[DRA_CLAIM_DEVICES_MAX];
    size_t n = dra_mig_unprepare_plan(c, inv, &pl->claims, todo);
    gpu_inventory_free(inv);
    for (size_t k = 0; k < n; k++) {
        struct dra_prepared_device *d = &c->devices[todo[k].device];
        if ((r = gpu_mig_destroy(pl->lib, todo[k].gpu_index, todo[k].gi_id, e)) < 0 && r != -ENOENT)
            return err_prefix(e, "claim %s/%s: device %s", c->ref.ns, c->ref.name, d->device);
        log_info(DRA_COMP, "MIG slice destroyed", "claim=%s/%s device=%s gpu=%u gi=%u", c->ref.ns,
                 c->ref.name, d->device, todo[k].gpu_index, todo[k].gi_id);
    }
    /* nothing of it left to destroy, should the claim stay for a checkpoint that failed */
    for (size_t i = 0; i < c->n_devices; i++)
        if (c->devices[i].type == DRA_MIG_DYNAMIC) {
            c->devices[i].created = false;
            c->devices[i].uuid[0] = 0;
        }
    c->state = DRA_PREPARE_COMPLETED;
    if (n > 0)
        dra_cdi_base_write(pl);
    return 0;
}

/* Prepares one claim (pl->mu held): the checkpoint's answer again; a claim the checkpoint holds
 * as started resumed; else a plan from the claim the informer holds. */
static int prepare_claim(struct dra_plugin *pl, const struct dra_claim_ref *ref,
                         const struct dra_claim **ret, struct err *e)
{
    struct dra_claim *c = dra_claims_find(&pl->claims, ref->uid);
    if (c && c->state == DRA_PREPARE_COMPLETED) {
        /* the same answer; an MPS daemon that ended (a restart) started again first */
        int r = dra_mps_start(pl, c, e);
        if (r < 0)
            return r;
        *ret = c;
        return 0;
    }
    bool resumed = c != NULL;
    struct dra_timeslice ts[DRA_CLAIM_DEVICES_MAX];
    int r;
    if (!c) {
        if (!pl->view.model)
            return err_set(e, -EAGAIN, "claim %s/%s: the GPUs are not read yet", ref->ns,
                           ref->name);
        json_t *obj = kube_informer_get(pl->claims_inf, ref->ns, ref->name);
        if (!obj)
            return err_set(e, -ENOENT, "claim %s/%s: not in the API server (yet)", ref->ns,
                           ref->name);
        r = dra_claim_plan(pl->view.model, pl->f->node_name, ref, obj, &c, e);
        json_decref(obj);
        if (r < 0)
            return r;
        if ((r = dra_claims_put(&pl->claims, c, e)) < 0) {
            dra_claim_free(c);
            return r;
        }
        assert(c->n_devices <= DRA_CLAIM_DEVICES_MAX); /* the plan's bound */
        /* on disk as started before a slice is made, a time slice set or an MPS daemon started:
         * a restart resumes it or rolls it back */
        if ((has_dynamic(c) || dra_timeslice_prepare_plan(c, ts) > 0 || dra_claim_has_edits(c)) &&
            (r = dra_checkpoint_save(pl, e)) < 0) {
            dra_claim_free(dra_claims_take(&pl->claims, ref->uid));
            return err_prefix(e, "checkpoint");
        }
    }
    if ((r = make_slices(pl, c, resumed, e)) < 0)
        return r; /* kept as started: the kubelet's next prepare resumes, its unprepare cleans */
    assert(c->n_devices <= DRA_CLAIM_DEVICES_MAX); /* the plan's and the checkpoint's bound */
    if ((r = dra_timeslices_apply(pl, c, ts, dra_timeslice_prepare_plan(c, ts), e)) < 0)
        return r; /* kept as started, as above */
    if (dra_claim_has_edits(c)) {
        /* MPS: the claim's control daemon, then its own CDI devices (its client environment) */
        struct dra_cdi_paths paths = {.mps_root = pl->mps_root_host};
        _cleanup_free_ char *spec = NULL, *path = claim_spec_path(pl, ref->uid);
        if ((r = dra_mps_start(pl, c, e)) < 0 ||
            (r = dra_claim_cdi_spec(c, &paths, &spec, e)) < 0 ||
            (spec && (r = file_write_atomic(path, spec, strlen(spec), 0644, e)) < 0))
            return r;
    }
    c->state = DRA_PREPARE_COMPLETED;
    if ((r = dra_checkpoint_save(pl, e)) < 0) {
        c->state = DRA_PREPARE_STARTED;
        return err_prefix(e, "checkpoint");
    }
    log_info(DRA_COMP, "claim prepared", "claim=%s/%s uid=%s devices=%zu", ref->ns, ref->name,
             ref->uid, c->n_devices);
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
    struct dra_plugin *pl = ud;
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
            log_warn(DRA_COMP, "claim not prepared", "claim=%s/%s uid=%s error=\"%s\"", ref.ns,
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
    struct dra_plugin *pl = ud;
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
        struct dra_claim *c = dra_claims_find(&pl->claims, ref.uid);
        if (!c)
            continue;
        struct err e = {0};
        struct dra_timeslice ts[DRA_CLAIM_DEVICES_MAX];
        assert(c->n_devices <= DRA_CLAIM_DEVICES_MAX); /* the plan's and the checkpoint's bound */
        if (dra_mps_stop(pl, c, &e) < 0 || destroy_slices(pl, c, &e) < 0 ||
            dra_timeslices_apply(pl, c, ts, dra_timeslice_unprepare_plan(c, &pl->claims, ts), &e) <
                0) {
            /* kept: the next unprepare tries again */
            errors[i] = xstrdup(err_msg(&e));
            ones[i].error = errors[i];
            continue;
        }
        c = dra_claims_take(&pl->claims, ref.uid);
        _cleanup_free_ char *path = claim_spec_path(pl, ref.uid);
        if (unlink(path) < 0 && errno != ENOENT)
            log_warn(DRA_COMP, "claim's CDI spec not removed", "path=%s errno=%d", path, errno);
        if (dra_checkpoint_save(pl, &e) < 0) {
            /* keep it: the next unprepare tries again */
            (void)dra_claims_put(&pl->claims, c, &e);
            errors[i] = xasprintf("claim %s/%s: checkpoint: %s", ref.ns, ref.name, err_msg(&e));
            ones[i].error = errors[i];
            continue;
        }
        log_info(DRA_COMP, "claim unprepared", "claim=%s/%s uid=%s", ref.ns, ref.name, ref.uid);
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
    /* what the prepared claims and their checkpoint writes took goes back to the system (a
     * thread's malloc arena keeps freed pages otherwise) */
    malloc_trim(0);
}

static void on_get_info(struct grpc_call *call, const ProtobufCMessage *req, void *ud)
{
    (void)req;
    struct dra_plugin *pl = ud;
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
        log_info(DRA_COMP, "registered with the kubelet", "driver=%s", DRA_DRIVER_NAME);
    else
        log_error(DRA_COMP, "the kubelet refused the registration", "error=\"%s\"",
                  st->error ? st->error : "");
    Pluginregistration__RegistrationStatusResponse r =
        PLUGINREGISTRATION__REGISTRATION_STATUS_RESPONSE__INIT;
    grpc_call_reply_pb(call, &r.base);
}

int dra_serve(struct dra_plugin *pl, const char *dra_sock, const char *reg_sock,
              struct grpc_server **ret_dra, struct grpc_server **ret_reg, struct err *e)
{
    int r;
    if ((r = grpc_server_new(NULL, ret_dra, e)) < 0 ||
        (r = grpc_server_add_unary_pb(
             *ret_dra, DRA_SERVICE "NodePrepareResources",
             &k8s__io__kubelet__pkg__apis__dra__v1__node_prepare_resources_request__descriptor,
             on_prepare, pl, e)) < 0 ||
        (r = grpc_server_add_unary_pb(
             *ret_dra, DRA_SERVICE "NodeUnprepareResources",
             &k8s__io__kubelet__pkg__apis__dra__v1__node_unprepare_resources_request__descriptor,
             on_unprepare, pl, e)) < 0 ||
        (r = grpc_server_start(*ret_dra, dra_sock, e)) < 0)
        return r;
    /* registration last: the kubelet dials the endpoint as soon as it sees this socket */
    if ((r = grpc_server_new(NULL, ret_reg, e)) < 0 ||
        (r = grpc_server_add_unary_pb(*ret_reg, REG_SERVICE "GetInfo",
                                      &pluginregistration__info_request__descriptor, on_get_info,
                                      pl, e)) < 0 ||
        (r = grpc_server_add_unary_pb(*ret_reg, REG_SERVICE "NotifyRegistrationStatus",
                                      &pluginregistration__registration_status__descriptor,
                                      on_registration_status, pl, e)) < 0 ||
        (r = grpc_server_start(*ret_reg, reg_sock, e)) < 0)
        return r;
    return 0;
}
