/* SPDX-License-Identifier: Apache-2.0 */
/* `gpuop feature-discovery`: the thin shell around the label computation: the config, NVML,
 * signals, the relabel loop; the machine type and the features file are node-files.c's. */
#include <string.h>

#include "dpconfig.h"
#include "feature-discovery-internal.h"
#include "gpu.h"

#define COMP      "feature-discovery"
#define MIG_FIELD "flags.migStrategy"

struct gfd_state {
    struct dpconfig_layer_state layer; /* first: svc's config-file layer works on it */
    /* what the layer holds back: the MIG strategy is validated only once NVML is up, so a bad
     * strategy with failOnInitError=false and no NVML is not an error (NVIDIA's matrix) */
    const char *pending_mig_value;
    char pending_mig_source[64];
    /* in force */
    struct dpconfig *config;
    const char *config_file;
    const char *mig_value; /* from --mig-strategy / GFD_MIG_STRATEGY, or NULL */
    char mig_source[64];   /* "--mig-strategy" or the variable's name */
};

static int gfd_layer_load(void *state, const char *path, struct err *e)
{
    struct gfd_state *st = state;
    st->pending_mig_value = NULL;
    return dpconfig_layer_load(state, path, e);
}

/* The MIG strategy is kept aside (see gfd_state). A fallback name (FAIL_ON_INIT_ERROR) is not
 * read at all when its GFD_ name is set, as NVIDIA takes the first variable present. */
static int gfd_layer_set(void *state, const char *field, const char *value, const char *source,
                         struct err *e)
{
    struct gfd_state *st = state;
    if (strcmp(field, MIG_FIELD) == 0) {
        st->pending_mig_value = value;
        strlcpy_s(st->pending_mig_source, source, sizeof(st->pending_mig_source));
        return 0;
    }
    if (strcmp(source, "FAIL_ON_INIT_ERROR") == 0 && env_get("GFD_FAIL_ON_INIT_ERROR"))
        return 0;
    return dpconfig_layer_set(state, field, value, source, e);
}

static const struct svc_layer gfd_layer = {
    .load = gfd_layer_load,
    .set = gfd_layer_set,
    .finish = dpconfig_layer_finish,
};

/* Adopts what the layer resolved (svc_config_resolve succeeded); logs its warnings. */
static void adopt_config(struct gfd_state *st)
{
    struct dpconfig *c = steal_ptr(&st->layer.pending);
    for (size_t i = 0; i < c->n_warnings; i++)
        log_warn(COMP, c->warnings[i], "config=%s", st->layer.path ? st->layer.path : "(none)");
    if (c->use_node_feature_api)
        log_warn(COMP, "the NodeFeature API is not supported; writing the features file", NULL);
    if (c->device_discovery_strategy == DPCONFIG_DISCOVERY_TEGRA)
        log_warn(COMP, "Tegra device discovery is not supported; using NVML", NULL);
    dpconfig_free(st->config);
    st->config = c;
    st->config_file = st->layer.path;
    st->mig_value = st->pending_mig_value;
    memcpy(st->mig_source, st->pending_mig_source, sizeof(st->mig_source));
}

/* Applies the deferred MIG strategy; called once NVML is known to work. */
static int apply_mig_strategy(struct gfd_state *st, struct err *e)
{
    if (!st->mig_value)
        return 0;
    return dpconfig_set(st->config, MIG_FIELD, st->mig_value, st->mig_source, e);
}

/* One labelling pass: inventory, machine type, labels (the timestamp moved only when they
 * change: stamp), output. */
static int label_once(struct gfd_state *st, struct gpu_lib *lib, struct gfd_stamp *stamp,
                      struct err *e)
{
    _cleanup_(gpu_inventory_freep) struct gpu_inventory *inv = NULL;
    if (lib) {
        int r = gpu_inventory_read(lib, &inv, e);
        if (r < 0)
            return err_prefix(e, "read GPU inventory");
    }
    _cleanup_free_ char *machine = NULL;
    int r = gfd_machine_type_read(st->config->gfd.machine_type_file, &machine, e);
    if (r < 0)
        return r;

    /* vGPU from the PCI devices: a node whose devices cannot be read gets no vgpu.* labels */
    struct gpu_vgpu_info vgpu;
    struct err ve = {0};
    bool have_vgpu = gpu_sysfs_vgpu(&vgpu, &ve) == 0;
    if (!have_vgpu)
        log_warn(COMP, "no vGPU labels", "error=\"%s\"", ve.msg);
    struct gfd_input in = {
        .inventory = inv,
        .config = st->config,
        .machine_type = machine,
        .vgpu = have_vgpu ? &vgpu : NULL,
    };
    _cleanup_(gfd_labels_freep) struct gfd_labels *labels = NULL;
    r = gfd_labels_stamped(&in, !st->config->gfd.no_timestamp, (int64_t)(now_ms_real() / 1000),
                           stamp, &labels, e);
    if (r < 0)
        return err_prefix(e, "compute labels");
    if (labels->warning)
        log_warn(COMP, labels->warning, NULL);
    struct sbuf b _cleanup_sbuf_;
    sbuf_init(&b, GFD_FILE_MAX);
    if (gfd_labels_format(labels, &b) < 0)
        return err_set(e, -ENOBUFS, "labels exceed %u bytes", GFD_FILE_MAX);
    const char *out = st->config->gfd.output_file;
    if ((r = gfd_output_write(out, b.data ? b.data : "", b.len, e)) < 0)
        return r;
    log_info(COMP, "labels written", "count=%zu output=%s", labels->n,
             gfd_output_is_stdout(out) ? "-" : out);
    return 0;
}

/* Opens NVML per failOnInitError and validates the deferred MIG strategy.
 * 0 with *ret NULL: NVML is unusable and that is allowed. */
static int open_nvml(struct gfd_state *st, struct gpu_lib **ret, struct err *e)
{
    *ret = NULL;
    struct gpu_lib *lib = NULL;
    int r = gpu_lib_open(NULL, &lib, e);
    if (r < 0) {
        if (st->config->fail_on_init_error)
            return err_prefix(e, "initialise NVML");
        log_warn(COMP, "NVML could not be initialised; labelling without GPU labels",
                 "reason=\"%s\" fail-on-init-error=false", log_kv_quote(e->msg));
        err_clear(e);
        return 0;
    }
    r = apply_mig_strategy(st, e);
    if (r < 0) {
        gpu_lib_free(lib);
        return r;
    }
    *ret = lib;
    return 0;
}

static int gfd_configure(struct svc *s, struct err *e)
{
    (void)e;
    adopt_config(svc_state(s));
    return 0;
}

/* SIGHUP: the config again; a bad one is reported and the last good one stays. */
static int gfd_reload(struct svc *s, struct err *e)
{
    struct gfd_state *st = svc_state(s);
    log_info(COMP, "SIGHUP: reloading the config", NULL);
    int r = svc_config_resolve(s, e);
    if (r < 0) {
        dpconfig_free(steal_ptr(&st->layer.pending));
        return r;
    }
    adopt_config(st);
    return 0;
}

static int gfd_run(struct svc *s, struct err *e)
{
    struct gfd_state *st = svc_state(s);
    gfd_output_clean(st->config->gfd.output_file);
    int rc = 0;
    struct gfd_stamp stamp _cleanup_(gfd_stamp_clear) = {0};
    bool restart = true;
    while (restart && rc == 0) { /* one (re)start: NVML opened, then the relabel loop */
        restart = false;
        struct gpu_lib *lib = NULL;
        if ((rc = open_nvml(st, &lib, e)) < 0)
            break;
        gfd_stamp_clear(&stamp);
        for (;;) {
            if ((rc = label_once(st, lib, &stamp, e)) < 0 || st->config->gfd.oneshot)
                break;
            enum svc_wake w = svc_wait(s, st->config->gfd.sleep_interval_ms);
            if (w != SVC_TIMEOUT) {
                restart = w == SVC_RELOADED;
                break;
            }
        }
        gpu_lib_free(lib);
    }
    /* Labels of a process that is gone would be stale: a looping run (not oneshot, not an
     * infinite interval) takes its file with it, on a signal or an error alike. */
    if (!st->config->gfd.oneshot && st->config->gfd.sleep_interval_ms != UINT64_MAX)
        gfd_output_remove(st->config->gfd.output_file);
    return rc;
}

static void gfd_cleanup(void *state)
{
    struct gfd_state *st = state;
    dpconfig_free(st->layer.pending);
    dpconfig_free(st->config);
}

const struct svc_component gfd_component = {
    .name = COMP,
    .usage = "Usage: gpuop feature-discovery [flags]\n\n"
             "Labels the node with its GPUs, as NVIDIA's GPU Feature Discovery does: writes\n"
             "nvidia.com/* labels (key=value lines) to Node Feature Discovery's local feature "
             "file.\n",
    .flags_title = "Flags (each also set by the environment variable shown; flag > env > config "
                   "file > default):",
    .options = {dpconfig_gfd_options},
    .epilogue = "Other environment:\n"
                "  GPUOP_NVML_LIBRARY          path of libnvidia-ml.so.1 to load\n\n"
                "Signals: SIGHUP reloads the config and relabels; SIGTERM/SIGINT/SIGQUIT exit\n"
                "(removing the output file unless the sleep interval is infinite).\n"
                "Exit status: 0 on success, 1 when labelling fails, 2 on bad usage or config.\n",
    .state_size = sizeof(struct gfd_state),
    .layer = &gfd_layer,
    .configure = gfd_configure,
    .run = gfd_run,
    .reload = gfd_reload,
    .cleanup = gfd_cleanup,
};
