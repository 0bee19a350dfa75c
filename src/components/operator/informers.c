/* SPDX-License-Identifier: Apache-2.0 */
/* The operator's informers (op-controller.h): the ClusterPolicies, the nodes (projected), the
 * NVIDIADrivers, everything gpuop owns, the GPU quota view's and the upgrade controller's; each
 * change marks the cluster dirty. Started, waited for and stopped together. */
#include <inttypes.h>
#include <pthread.h>
#include <string.h>

#include "op-controller.h"
#include "operator-internal.h"
#include "remediation-ctl.h"
#include "remediation.h"
#include "upgrade-ctl.h"
#include "upgrade.h"

/* The one work-queue key: a reconcile covers every ClusterPolicy and what they own. */
#define RECONCILE_KEY "cluster"
/* policies, nodes, owned, pods, quotas, nvidiadrivers, servicemonitors */
#define N_INFORMERS (11 + N_OWNED)

void op_mark_dirty(struct controller *c)
{
    svc_workqueue_add(c->queue, RECONCILE_KEY);
}

static int upg_may_write(void *u, struct err *e)
{
    return op_check_leader(u, e);
}
static void upg_wrote(void *u)
{
    op_count_write(u);
}
static void upg_dirty(void *u)
{
    op_mark_dirty(u);
}

static void h_add(json_t *obj, void *u)
{
    (void)obj;
    op_mark_dirty(u);
}
static void h_update(json_t *old, json_t *obj, void *u)
{
    (void)old;
    (void)obj;
    op_mark_dirty(u);
}
static void h_delete(json_t *obj, void *u)
{
    (void)obj;
    op_mark_dirty(u);
}

/* What the node informer keeps of a node: its labels (compact: the informer's option), the
 * node agents' annotations and what the GPU capacity view reads (allocatable, capacity,
 * cordon, Ready), so a heartbeat changes nothing kept (no reconcile) and an agent's finding
 * does (a reconcile). */
static json_t *project_node(json_t *obj, void *userdata)
{
    (void)userdata;
    static const char *const node_fields[] = {"metadata.labels", NULL};
    json_t *p = kube_project_fields(obj, node_fields);
    /* no reader of these nodes reads their kind or uid (the planners name a node by its name;
     * an Event about a node carries no uid): ~0.3 KiB a node less */
    json_object_del(p, "apiVersion");
    json_object_del(p, "kind");
    json_object_del(json_object_get(p, "metadata"), "uid");
    const char *k;
    json_t *v;
    json_object_foreach (kobj_annotations(obj), k, v) {
        if (op_node_annotation_watched(k))
            json_object_set(
                kobj_ensure_keys(p, (const char *const[]){"metadata", "annotations", NULL}), k, v);
    }
    op_gpuquota_project_node(obj, p);
    upg_project_node(obj, p); /* the upgrade controller reads this informer too */
    rem_project_node(obj, p); /* and the remediation controller */
    return p;
}

int op_informers_start(struct controller *c, struct err *e)
{
    struct kube_informer_handlers hh = {h_add, h_update, h_delete, c};
    struct kube_informer_opts po = {.handlers = hh};
    /* nothing queries nodes by label: no label index (about 2.5 KiB per node at NFD's labels) */
    static const char *const no_index[] = {NULL};
    /* what a node pool's nodes have alike is kept once (each ~1.5 KiB as a JSON object): the
     * projected spec (cordon, taints), the GPU resources, Ready, the kernel. Not status.nodeInfo:
     * its bootID is each node's own. */
    static const char *const node_shared[] = {"spec",
                                              "status.allocatable",
                                              "status.capacity",
                                              "status.conditions",
                                              "status.nodeInfo.kernelVersion",
                                              "status",
                                              NULL};
    /* ~77 labels a node (NFD's, the cloud's, gpuop's): ~0.7 KiB compact against ~8.7 KiB as a
     * JSON object; every reader of these nodes' labels reads through kobj's label sets */
    struct kube_informer_opts no = {.project = project_node,
                                    .index_label_keys = no_index,
                                    .share_paths = node_shared,
                                    .compact_labels = true,
                                    .handlers = hh};
    int r;
    if ((r = kube_informer_new(c->kc, &KUBE_CLUSTERPOLICIES, &po, &c->policies, e)) < 0 ||
        (r = kube_informer_new(c->kc, &KUBE_NODES, &no, &c->nodes, e)) < 0 ||
        (r = kube_informer_new(c->kc, &KUBE_NVIDIADRIVERS, &po, &c->nvds, e)) < 0)
        return r;
    for (size_t k = 0; k < N_OWNED; k++) {
        struct kube_informer_opts oo = {.ns = owned_kinds[k]->namespaced ? c->ns : NULL,
                                        .label_selector =
                                            "app.kubernetes.io/managed-by=" OP_MANAGED_BY,
                                        .handlers = hh};
        if ((r = kube_informer_new(c->kc, owned_kinds[k], &oo, &c->owned[k], e)) < 0)
            return r;
    }
    /* Like the owned kinds, but its list fails until the Prometheus Operator's CRD is served
     * (the informer retries): not waited for. */
    struct kube_informer_opts so = {.ns = c->ns,
                                    .label_selector = "app.kubernetes.io/managed-by=" OP_MANAGED_BY,
                                    .handlers = hh};
    if ((r = kube_informer_new(c->kc, &KUBE_SERVICEMONITORS, &so, &c->servicemonitors, e)) < 0)
        return r;
    /* The same for the DeviceClasses (resource.k8s.io/v1, Kubernetes 1.34) and for GPUClusters
     * (their CRD may be absent). */
    struct kube_informer_opts dco = {
        .label_selector = "app.kubernetes.io/managed-by=" OP_MANAGED_BY, .handlers = hh};
    if ((r = kube_informer_new(c->kc, &KUBE_DEVICECLASSES, &dco, &c->deviceclasses, e)) < 0 ||
        (r = kube_informer_new(c->kc, &KUBE_GPUCLUSTERS, &po, &c->gpuclusters, e)) < 0)
        return r;
    if ((r = op_gpuquota_start(&c->gq, c->kc, &hh, e)) < 0)
        return r;
    struct op_upgrade_hooks uh = {upg_may_write, upg_wrote, upg_dirty, c};
    if ((r = op_upgrade_new(c->kc, c->ns, c->nodes, &uh, &c->upg, e)) < 0)
        return r;
    return op_remediation_new(c->kc, c->ns, c->upg, &uh, &c->rem, e);
}

/* Lists stall after this long without an item (a server that answers nothing); a large list
 * that keeps handing over pages is waited for, however long it takes. */
#define SYNC_STALL_MS 60000

int op_informers_wait_synced(struct controller *c, struct svc *s, struct err *e)
{
    /* not the NVIDIADrivers', the ServiceMonitors', the DeviceClasses' nor the GPUClusters'
     * (their kinds may not be served), nor the quota view's DRA ones (not started yet) */
    struct kube_informer *all[N_INFORMERS - 7] = {c->policies, c->nodes};
    const char *names[N_INFORMERS - 7] = {"clusterpolicies", "nodes"};
    for (size_t k = 0; k < N_OWNED; k++) {
        all[2 + k] = c->owned[k];
        names[2 + k] = owned_kinds[k]->plural;
    }
    all[2 + N_OWNED] = c->gq.pods;
    names[2 + N_OWNED] = "pods";
    all[3 + N_OWNED] = c->gq.quotas;
    names[3 + N_OWNED] = "resourcequotas";
    struct kube_sync_progress progress = {0};
    for (size_t k = 0; k < ARRAY_SIZE(all); k++) {
        /* Short waits: the stop and the lists' progress are looked at between them. */
        while (kube_informer_wait_synced(all[k], 100) < 0) {
            if (svc_stopped(s))
                return 1;
            uint64_t listed = 0;
            for (size_t j = 0; j < ARRAY_SIZE(all); j++) {
                struct kube_informer_stats st;
                kube_informer_stats(all[j], &st);
                listed += st.listed;
            }
            if (kube_sync_stalled(&progress, listed, now_ms_mono(), SYNC_STALL_MS))
                return err_set(e, -ETIMEDOUT,
                               "informers did not sync: no list progress in %d s (%s not listed; "
                               "%" PRIu64 " objects listed in all)",
                               SYNC_STALL_MS / 1000, names[k], listed);
        }
    }
    return 0;
}

static void *informer_free_thread(void *inf)
{
    kube_informer_free(inf);
    return NULL;
}

/* Each informer takes up to a watch poll interval to stop; stopping them one after another made
 * shutdown take ~10 s. Stop them all at once. */
static void informers_free(struct kube_informer **infs, size_t n)
{
    pthread_t th[N_INFORMERS];
    bool started[N_INFORMERS];
    if (n > N_INFORMERS)
        n = N_INFORMERS;
    for (size_t k = 0; k < n; k++) {
        started[k] = infs[k] && pthread_create(&th[k], NULL, informer_free_thread, infs[k]) == 0;
        if (!started[k])
            kube_informer_free(infs[k]);
    }
    for (size_t k = 0; k < n; k++)
        if (started[k])
            pthread_join(th[k], NULL);
}

void op_informers_free(struct controller *c)
{
    struct kube_informer *infs[N_INFORMERS] = {c->nodes, c->policies};
    for (size_t k = 0; k < N_OWNED; k++)
        infs[2 + k] = c->owned[k];
    infs[2 + N_OWNED] = c->gq.pods;
    infs[3 + N_OWNED] = c->gq.quotas;
    infs[4 + N_OWNED] = c->nvds;
    infs[5 + N_OWNED] = c->servicemonitors;
    infs[6 + N_OWNED] = c->deviceclasses;
    infs[7 + N_OWNED] = c->gpuclusters;
    infs[8 + N_OWNED] = c->gq.slices;
    infs[9 + N_OWNED] = c->gq.claims;
    infs[10 + N_OWNED] = c->gq.classes;
    informers_free(infs, ARRAY_SIZE(infs));
}
