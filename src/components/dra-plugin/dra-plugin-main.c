/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpuop dra-plugin`: the component. It reads the checkpoint, opens NVML and the API server,
 * starts the health thread and the kubelet's services (dra-serve.c) and publishes every --resync
 * (dra-node.c); the decisions are the core's (dra-plugin.h). `gpuop dra-plugin slices` prints the
 * slices once.
 */
#include <limits.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dra-plugin-internal.h"
#include "nvcdi.h"
#include "svc.h"

#define CHECKPOINT_FILE "checkpoint.json"

/* ---- `gpuop dra-plugin slices` -----------------------------------------------------------------
 */

static int slices_run(struct svc *s, struct err *e)
{
    struct dra_flags *f = svc_state(s);
    int r = dra_flags_check(f, false, e);
    if (r < 0)
        return svc_bad_input(s, r);
    _cleanup_(gpu_lib_freep) struct gpu_lib *lib = NULL;
    r = gpu_lib_open(f->library, &lib, e);
    if (r < 0)
        return r;
    struct dra_node_view v = {0};
    if ((r = dra_node_read(lib, f, NULL, NULL, &v, e)) < 0)
        return r;
    struct dra_slice_meta meta = {.node_name = f->node_name, .generation = 0};
    json_t *slices = NULL;
    r = dra_slices_render(v.model, &meta, &slices, e);
    dra_node_view_clear(&v);
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

static int dra_run(struct svc *s, struct err *e)
{
    struct dra_flags *f = svc_state(s);
    int r = dra_flags_check(f, true, e);
    if (r < 0)
        return svc_bad_input(s, r);
    /* One malloc arena: the plugin's threads (the claims' watch, the DRA server, publication)
     * are I/O bound, and an arena each kept each one's peak (bench/dra, 56 MIG devices and 200
     * claims: VmHWM 10.5 MiB with an arena per thread, 9.6 MiB with one). */
    mallopt(M_ARENA_MAX, 1);
    struct dra_plugin pl = {.f = f, .stop = svc_stop(s)};
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
    snprintf(pl.mps_root, sizeof(pl.mps_root), "%s/mps", plugin_dir);
    snprintf(pl.mps_root_host, sizeof(pl.mps_root_host), "%s/mps", f->plugin_dir);
    if (mkdir_p(plugin_dir, 0750) < 0 || mkdir_p(registry_dir, 0755) < 0 ||
        mkdir_p(pl.cdi_dir, 0755) < 0)
        return err_set(e, -errno, "folders under %s: %s", f->host_root, strerror(errno));

    /* the claims prepared before a restart */
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    r = file_read_all(pl.checkpoint, DRA_CHECKPOINT_MAX, &text, &len, e);
    if (r == -ENOENT) {
        err_clear(e);
    } else if (r < 0) {
        return err_prefix(e, "checkpoint");
    } else if ((r = dra_checkpoint_decode(text, len, pl.checkpoint, &pl.claims, e)) < 0) {
        /* a damaged checkpoint is kept for a person to read; nothing is deleted */
        return r;
    }
    log_info(DRA_COMP, "checkpoint read", "path=%s claims=%zu", pl.checkpoint, pl.claims.n);

    _cleanup_(gpu_lib_freep) struct gpu_lib *lib = NULL;
    _cleanup_(kube_client_freep) struct kube_client *kc = NULL;
    _cleanup_(grpc_server_freep) struct grpc_server *dra = NULL;
    _cleanup_(grpc_server_freep) struct grpc_server *reg = NULL;
    if ((r = gpu_lib_open(f->library, &lib, e)) < 0 ||
        (r = kube_client_open(KUBE_CALLER_AGENT, f->kubeconfig, NULL, svc_stop(s), &kc, e)) < 0)
        goto out;
    pl.lib = lib;
    if (pthread_create(&health, NULL, dra_health_main, &pl) != 0) {
        r = err_set(e, -EAGAIN, "the health thread: %s", strerror(errno));
        goto out;
    }
    health_started = true;
    struct kube_informer_opts io = {.project = dra_claim_project};
    if ((r = kube_informer_new(kc, &KUBE_RESOURCECLAIMS, &io, &pl.claims_inf, e)) < 0)
        goto out;
    dra_resync(&pl, kc);

    if ((r = dra_serve(&pl, dra_sock, reg_sock, &dra, &reg, e)) < 0)
        goto out;
    log_info(DRA_COMP, "serving", "node=%s endpoint=%s registration=%s", f->node_name, dra_sock,
             reg_sock);
    while (svc_wait(s, f->resync_ms) != SVC_STOP)
        dra_resync(&pl, kc);
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
    dra_node_view_clear(&pl.view);
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
    .defaults = dra_flags_defaults,
    .run = dra_run,
    .verbs = {&dra_slices_component},
};
