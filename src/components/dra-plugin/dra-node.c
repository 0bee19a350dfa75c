/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The plugin's shell (dra-plugin-internal.h): reading the node (NVML, sysfs), publishing the
 * slices the core renders, the node's CDI spec, and NVML's health events.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "dra-plugin-internal.h"
#include "kobj.h"
#include "nvcdi.h"

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

void dra_node_view_clear(struct dra_node_view *v)
{
    dra_model_free(v->model);
    for (size_t i = 0; v->profiles && v->inv && i < v->inv->n_gpus; i++)
        free(v->profiles[i]);
    free(v->profiles);
    free(v->extra);
    gpu_inventory_free(v->inv);
    memset(v, 0, sizeof(*v));
}

int dra_node_read(struct gpu_lib *lib, const struct dra_flags *f, const struct dra_faults *faults,
                  const struct dra_claims *claims, struct dra_node_view *ret, struct err *e)
{
    struct dra_node_view v = {0};
    int r = gpu_inventory_read(lib, &v.inv, e);
    if (r < 0)
        return err_prefix(e, "GPU inventory");
    v.extra = xcalloc(v.inv->n_gpus + 1, sizeof(*v.extra));
    v.profiles = xcalloc(v.inv->n_gpus + 1, sizeof(*v.profiles));
    for (size_t i = 0; i < v.inv->n_gpus; i++) {
        const struct gpu_device *g = &v.inv->gpus[i];
        pcie_root_of(g->bus_id, v.extra[i].pcie_root, sizeof(v.extra[i].pcie_root));
        /* a GPU NVML lost, or with a fault the health policy counts, is withdrawn */
        v.extra[i].unhealthy = dra_gpu_withdrawn(g->lost, dra_faults_at(faults, g->uuid),
                                                 now_ms_mono(), f->recovery_ms);
        if (f->partitionable && g->mig_enabled && !g->lost) {
            struct err pe = {0};
            if (gpu_mig_profiles(lib, g->index, &v.profiles[i], &v.extra[i].n_profiles, &pe) < 0)
                log_warn(DRA_COMP, "MIG profiles not read", "gpu=%u error=\"%s\"", g->index,
                         err_msg(&pe));
            v.extra[i].profiles = v.profiles[i];
        }
    }
    size_t n_owned = 0;
    _cleanup_free_ struct dra_owned_slice *owned =
        claims ? dra_claims_owned(claims, &n_owned) : NULL;
    struct dra_model_input in = {.inv = v.inv,
                                 .extra = v.extra,
                                 .partitionable = f->partitionable,
                                 .owned = owned,
                                 .n_owned = n_owned};
    if ((r = dra_model_build(&in, &v.model, e)) < 0) {
        dra_node_view_clear(&v);
        return r;
    }
    for (size_t i = 0; i < v.model->n_warnings; i++)
        log_warn(DRA_COMP, "device left out", "reason=\"%s\"", v.model->warnings[i]);
    *ret = v;
    return 0;
}

static int publish(struct dra_plugin *pl, struct kube_client *kc, const struct dra_model *m,
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
    if ((r = kube_list(kc, &KUBE_RESOURCESLICES, NULL, &lo, &list, e)) < 0) {
        json_decref(desired);
        return err_prefix(e, "ResourceSlices");
    }
    /* the plugin's own: this driver's, on this node */
    json_t *existing = dra_slices_own(list, pl->f->node_name);
    size_t i;
    json_t *v;
    json_decref(list);
    struct dra_publish p = {0};
    r = dra_publish_plan(desired, existing, &p, e);
    json_decref(desired);
    json_decref(existing);
    if (r < 0)
        return r;
    json_array_foreach (p.create, i, v) {
        if ((r = kube_create(kc, &KUBE_RESOURCESLICES, NULL, v, NULL, e)) < 0)
            goto out;
    }
    json_array_foreach (p.update, i, v) {
        if ((r = kube_update(kc, &KUBE_RESOURCESLICES, NULL, v, NULL, e)) < 0)
            goto out;
    }
    json_array_foreach (p.remove, i, v) {
        if ((r = kube_delete(kc, &KUBE_RESOURCESLICES, NULL, json_string_value(v), NULL, e)) < 0 &&
            r != -ENOENT)
            goto out;
        r = 0;
    }
    if (!dra_publish_empty(&p))
        log_info(DRA_COMP, "ResourceSlices published",
                 "created=%zu updated=%zu deleted=%zu generation=%lld", json_array_size(p.create),
                 json_array_size(p.update), json_array_size(p.remove), (long long)p.generation);
out:
    dra_publish_clear(&p);
    return r;
}

void dra_cdi_base_write(struct dra_plugin *pl)
{
    struct nvcdi_gen_options o = {
        .host_root = pl->f->host_root,
        .driver_root = pl->f->driver_root,
        .lib = pl->lib,
        .hook_path = "",
        .kind = DRA_CDI_BASE_KIND,
    };
    _cleanup_(nvcdi_gen_freep) struct nvcdi_gen *g = nvcdi_gen_new(&o);
    _cleanup_free_ char *spec = NULL, *old = NULL;
    _cleanup_free_ char *path = xasprintf("%s/%s-device.yaml", pl->cdi_dir, DRA_CDI_VENDOR);
    struct err e = {0};
    if (nvcdi_gen_spec(g, &spec, NULL, 0, &e) < 0) {
        log_warn(DRA_COMP, "CDI spec not written", "path=%s error=\"%s\"", path, err_msg(&e));
        return;
    }
    if (file_read_all(path, 16u << 20, &old, NULL, &e) == 0 && strcmp(old, spec) == 0)
        return;
    err_clear(&e);
    if (file_write_atomic(path, spec, strlen(spec), 0644, &e) < 0) {
        log_warn(DRA_COMP, "CDI spec not written", "path=%s error=\"%s\"", path, err_msg(&e));
        return;
    }
    log_info(DRA_COMP, "CDI spec written", "path=%s", path);
}

void dra_resync(struct dra_plugin *pl, struct kube_client *kc)
{
    struct err e = {0};
    struct dra_node_view v = {0};
    /* read with the lock held: a MIG slice being made for a claim is never seen without it */
    pthread_mutex_lock(&pl->mu);
    int r = dra_node_read(pl->lib, pl->f, &pl->faults, &pl->claims, &v, &e);
    struct dra_node_view old = pl->view;
    if (r == 0)
        pl->view = v;
    pthread_mutex_unlock(&pl->mu);
    if (r < 0) {
        log_warn(DRA_COMP, "GPUs not read", "error=\"%s\"", err_msg(&e));
        return;
    }
    dra_node_view_clear(&old);
    /* the main thread alone replaces the view: reading it here without the lock is safe */
    if (publish(pl, kc, pl->view.model, &e) < 0)
        log_warn(DRA_COMP, "ResourceSlices not published", "error=\"%s\"", err_msg(&e));
    pthread_mutex_lock(&pl->mu); /* prepare writes it too */
    dra_cdi_base_write(pl);
    dra_mps_supervise(pl); /* the daemons of the prepared MPS claims, after a restart too */
    pthread_mutex_unlock(&pl->mu);
}

/* NVML's XID and ECC events: a GPU with one the policy counts is withdrawn at the next pass. */
void *dra_health_main(void *arg)
{
    struct dra_plugin *pl = arg;
    struct err e = {0};
    _cleanup_(gpu_events_freep) struct gpu_events *ev = NULL;
    if (gpu_events_open(pl->lib, GPU_EVENT_XID | GPU_EVENT_ECC_DBE, &ev, &e) < 0) {
        log_warn(DRA_COMP, "GPU events not watched: only lost GPUs are withdrawn", "error=\"%s\"",
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
                log_warn(DRA_COMP, "waiting for GPU events failed", "error=\"%s\"", err_msg(&e));
            last_err = now_ms_mono();
            if (stop_wait(pl->stop, 500))
                break;
            continue;
        }
        if (!gh_policy_event_critical(&pl->hp, &event)) {
            log_info(DRA_COMP, "GPU event ignored by the health policy", "gpu=%u xid=%llu",
                     event.gpu_index, (unsigned long long)event.data);
            continue;
        }
        log_warn(DRA_COMP, "GPU error: its devices are withdrawn from the slices",
                 "gpu=%u uuid=%s type=0x%llx xid=%llu", event.gpu_index, event.uuid,
                 (unsigned long long)event.type, (unsigned long long)event.data);
        pthread_mutex_lock(&pl->mu);
        (void)dra_faults_note(&pl->faults, event.uuid, now_ms_mono());
        pthread_mutex_unlock(&pl->mu);
    }
    return NULL;
}
