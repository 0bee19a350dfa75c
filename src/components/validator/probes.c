/* SPDX-License-Identifier: Apache-2.0 */
/* The validator's probes: what a check asks for (val_check_step), read from the node's files,
 * NVML, the CDI spec, the container runtime's configuration, the CUDA check and the API server,
 * and recorded as facts; and the wait on the status folder between tries. */
#include <assert.h>
#include <poll.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "cdi.h"
#include "cuda.h"
#include "gpu.h"
#include "rtconfig.h"
#include "validator-internal.h"

#define COMP         "validator"
#define STATUS_MAX   4096
#define CDI_SPEC_MAX (16u << 20)

void val_gathered_clear(struct val_gathered *g)
{
    free(g->driver_ready);
    free(g->ctr_ready);
    free(g->marker);
    cdi_spec_free(g->spec);
    gpu_inventory_free(g->inv);
    nodestate_gpus_clear(&g->gpus);
    json_decref(g->driver_pod);
    json_decref(g->node);
    memset(g, 0, sizeof(*g));
}

static void fail(struct val_gathered *g, enum val_probe p, enum val_stage stage,
                 const struct err *e)
{
    g->f.fail[p].code = e->code < 0 ? e->code : -EIO;
    g->f.fail[p].stage = stage;
    strlcpy_s(g->f.fail[p].msg, e->msg, sizeof(g->f.fail[p].msg));
}

/* A status file's text; a missing one is -ENOENT. */
static void read_status(struct val *v, enum nodestate_file file, enum val_probe p, char **ret,
                        size_t *ret_len, struct val_gathered *g)
{
    char path[PATH_MAX];
    struct err e = {0};
    if (nodestate_file_path(v->validations_dir, file, path, sizeof(path)) < 0) {
        err_set(&e, -ENAMETOOLONG, "--validations-dir: path too long");
        fail(g, p, VAL_STAGE_READ, &e);
        return;
    }
    if (file_read_all(path, STATUS_MAX, ret, ret_len, &e) < 0)
        fail(g, p, VAL_STAGE_READ, &e);
}

static bool spec_has(void *spec, const char *name)
{
    return cdi_spec_has_device(spec, name);
}

static void read_spec(struct val *v, const char *host_path, struct val_gathered *g)
{
    struct err e = {0};
    if (file_root_resolve(v->host_root, host_path, g->f.spec_path, sizeof(g->f.spec_path)) < 0) {
        err_set(&e, -ENOENT, "cannot resolve");
        fail(g, VAL_PROBE_CDI_SPEC, VAL_STAGE_RESOLVE, &e);
        return;
    }
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    if (file_read_all(g->f.spec_path, CDI_SPEC_MAX, &text, &len, &e) < 0) {
        fail(g, VAL_PROBE_CDI_SPEC, VAL_STAGE_READ, &e);
        return;
    }
    if (cdi_spec_parse(g->f.spec_path, text, len, &g->spec, &e) < 0) {
        fail(g, VAL_PROBE_CDI_SPEC, VAL_STAGE_PARSE, &e);
        return;
    }
    g->f.spec = g->spec;
    g->f.spec_has = spec_has;
    g->f.spec_devices = cdi_spec_n_devices(g->spec);
}

static void read_gpus(const char *lib_path, struct val_gathered *g)
{
    struct err e = {0};
    _cleanup_(gpu_lib_freep) struct gpu_lib *nv = NULL;
    if (gpu_lib_open(lib_path[0] ? lib_path : NULL, &nv, &e) < 0) {
        fail(g, VAL_PROBE_GPUS, VAL_STAGE_OPEN, &e);
        return;
    }
    if (gpu_inventory_read(nv, &g->inv, &e) < 0) {
        fail(g, VAL_PROBE_GPUS, VAL_STAGE_READ, &e);
        return;
    }
    nodestate_gpus_from(g->inv, NULL, 0, &g->gpus);
    g->f.gpus = g->gpus.g;
    g->f.n_gpus = g->gpus.n;
    g->f.nvml_version = g->inv->driver_version;
}

static void check_runtime(struct val *v, const struct val_step *st, struct val_gathered *g)
{
    const struct nodestate_toolkit_marker *tm = &st->marker;
    struct err e = {0};
    enum rtconfig_kind kind;
    if (rtconfig_detect(v->host_root, st->runtime_version, tm->runtime[0] ? tm->runtime : NULL,
                        &kind, &e) < 0) {
        fail(g, VAL_PROBE_RUNTIME, VAL_STAGE_DETECT, &e);
        return;
    }
    g->f.runtime = rtconfig_kind_name(kind);
    struct rtconfig_options ro = {.runtime_name = tm->runtime_name,
                                  .runtime_path = tm->runtime_path,
                                  .enable_cdi = tm->cdi_enabled,
                                  .config_path = tm->runtime_config[0] ? tm->runtime_config : NULL};
    if (rtconfig_check(v->host_root, kind, &ro, &e) < 0)
        fail(g, VAL_PROBE_RUNTIME, VAL_STAGE_CHECK, &e);
}

static void run_cuda(const char *lib_path, struct val_gathered *g)
{
    struct cuda_check_result *res _cleanup_free_ = xcalloc(1, sizeof(*res));
    struct err e = {0};
    if (cuda_check_run(lib_path[0] ? lib_path : NULL, 0, res, &e) < 0) {
        fail(g, VAL_PROBE_CUDA, VAL_STAGE_NONE, &e);
        return;
    }
    g->f.cuda_devices = res->n_devices;
    g->f.cuda_driver = res->driver_version;
}

void val_probe_run(struct val *v, const struct val_step *st, struct val_gathered *g)
{
    struct val_facts *f = &g->f;
    struct err e = {0};
    assert(st->probe > VAL_PROBE_NONE && st->probe < VAL_PROBE_COUNT && !f->have[st->probe]);
    f->have[st->probe] = true;
    switch (st->probe) {
    case VAL_PROBE_DRIVER:
        if (nodestate_driver_probe(v->host_root, v->driver_root, v->validations_dir, &f->driver,
                                   &e) < 0)
            fail(g, VAL_PROBE_DRIVER, VAL_STAGE_NONE, &e);
        break;
    case VAL_PROBE_DRIVER_DS:
        f->driver_ds = val_api_daemonset_exists(v, st->selector);
        break;
    case VAL_PROBE_TOOLKIT_DS:
        f->toolkit_ds = val_api_daemonset_exists(v, st->selector);
        break;
    case VAL_PROBE_DRIVER_POD:
        f->driver_pod = g->driver_pod = val_api_driver_pod(v, st->selector);
        break;
    case VAL_PROBE_DRIVER_READY:
        read_status(v, NODESTATE_DRIVER_READY, st->probe, &g->driver_ready, &f->driver_ready_len,
                    g);
        f->driver_ready = g->driver_ready;
        break;
    case VAL_PROBE_CTR_READY:
        read_status(v, NODESTATE_DRIVER_CTR_READY, st->probe, &g->ctr_ready, &f->ctr_ready_len, g);
        f->ctr_ready = g->ctr_ready;
        break;
    case VAL_PROBE_MARKER:
        read_status(v, NODESTATE_TOOLKIT_CTR_READY, st->probe, &g->marker, &f->marker_len, g);
        f->marker = g->marker;
        break;
    case VAL_PROBE_CDI_SPEC:
        read_spec(v, st->path, g);
        break;
    case VAL_PROBE_FIND_LIB:
        if (nodestate_root_find(st->lib_root, nodestate_lib_dirs, st->lib_name, false, f->lib,
                                sizeof(f->lib)) < 0) {
            err_set(&e, -ENOENT, "%s is not under %s", st->lib_name, st->lib_root);
            fail(g, VAL_PROBE_FIND_LIB, VAL_STAGE_NONE, &e);
        }
        break;
    case VAL_PROBE_GPUS:
        read_gpus(st->path, g);
        break;
    case VAL_PROBE_PCI: {
        char **classes = NULL;
        size_t n = 0;
        f->pci_gpus =
            nodestate_pci_nvidia_gpu_classes(v->sysfs, &classes, &n, &e) < 0 ? -1 : (int)n;
        nodestate_strv_free(classes);
        break;
    }
    case VAL_PROBE_NODE:
        if (val_api_node(v, &g->node, &e) < 0)
            fail(g, VAL_PROBE_NODE, VAL_STAGE_NONE, &e);
        f->node = g->node;
        break;
    case VAL_PROBE_RUNTIME:
        check_runtime(v, st, g);
        break;
    case VAL_PROBE_CUDA:
        run_cuda(st->path, g);
        break;
    case VAL_PROBE_STATUS:
        for (int i = 0; i < NODESTATE_FILE_COUNT; i++)
            f->status[i] = nodestate_file_exists(v->validations_dir, (enum nodestate_file)i);
        break;
    case VAL_PROBE_NONE:
    case VAL_PROBE_COUNT:
        break;
    }
}

/* ---- the wait between tries --------------------------------------------------------------- */

int val_status_watch(const struct val *v)
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

enum svc_wake val_status_wait(struct svc *s, int ifd, uint64_t ms)
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
