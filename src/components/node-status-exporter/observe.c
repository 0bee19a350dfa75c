/* SPDX-License-Identifier: Apache-2.0 */
/* What the node status exporter reads of its node (the status files, the PCI functions, NVML,
 * the Node) and writes to it (the gpu-count annotation). */
#include <dirent.h>
#include <string.h>

#include "kube.h"
#include "node-status-exporter-internal.h"
#include "yamlcfg.h"

#define COMP "node-status-exporter"

void nse_reading_clear(struct nse_reading *r)
{
    gpu_inventory_free(r->inv);
    nodestate_gpus_clear(&r->gpus);
    json_decref(r->node);
    memset(r, 0, sizeof(*r));
}

static void read_files(struct nse *x, struct nst_observation *o)
{
    _cleanup_(closedirp) DIR *d = opendir(x->dir);
    o->files_ok = d != NULL;
    for (int f = 0; f < NODESTATE_FILE_COUNT; f++)
        o->file[f] = d && nodestate_file_exists(x->dir, f);
}

/* NVIDIA PCI functions (vendor 0x10de: GPUs, their audio functions, NVSwitches) under the sysfs
 * root; -1 when it cannot be read. */
static int64_t count_pci(const char *sysfs)
{
    _cleanup_free_ char *dir = xasprintf("%s/bus/pci/devices", sysfs);
    _cleanup_(closedirp) DIR *d = opendir(dir);
    if (!d)
        return -1;
    int64_t n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        _cleanup_free_ char *p = xasprintf("%s/%s/vendor", dir, de->d_name);
        _cleanup_free_ char *v = NULL;
        struct err e = {0};
        if (file_read_all(p, 64, &v, NULL, &e) == 0 && str_has_prefix(v, "0x10de"))
            n++;
    }
    return n;
}

static void read_gpus(struct nse *x, struct nse_reading *r)
{
    struct err ne = {0};
    if (!x->lib && gpu_lib_open(NULL, &x->lib, &ne) < 0)
        x->lib = NULL;
    if (x->lib && gpu_inventory_read(x->lib, &r->inv, &ne) < 0)
        r->inv = NULL;
    if (r->inv) {
        x->n_gpus = r->inv->n_gpus;
        nodestate_gpus_from(r->inv, x->st.known_uuid, NST_GPUS_MAX, &r->gpus);
        r->o.nvml_ok = true;
        r->o.gpus = r->gpus.g;
        r->o.n_gpus = r->gpus.n;
        r->o.driver_version = r->inv->driver_version;
    } else if (!x->nvml_logged) {
        log_warn(COMP, "NVML unavailable; retrying every interval", "error=\"%s\"", err_msg(&ne));
    }
    x->nvml_logged = !r->inv;
}

void nse_read(struct nse *x, struct nse_reading *r)
{
    r->o = (struct nst_observation){.now_ms = now_ms_real(),
                                    .pci_devices = count_pci(x->sysfs),
                                    .default_strategy = x->strategy};
    read_files(x, &r->o);
    read_gpus(x, r);
    struct err ne = {0};
    if (kube_get(x->kc, &KUBE_NODES, NULL, x->node, &r->node, &ne) < 0) {
        r->node = NULL;
        if (!x->node_logged)
            log_warn(COMP, "node unreadable; retrying every interval", "node=%s error=\"%s\"",
                     x->node, err_msg(&ne));
    }
    x->node_logged = !r->node;
    r->o.node = r->node;
}

void nse_write_annotation(struct nse *x)
{
    if (!x->report.annotation)
        return;
    _cleanup_json_ json_t *patch = json_pack("{s:{s:{s:s}}}", "metadata", "annotations",
                                             NODESTATE_ANN_GPU_COUNT, x->report.annotation);
    struct kube_patch_opts po = {.type = KUBE_PATCH_MERGE, .field_manager = "gpuop-node-status"};
    struct err e = {0};
    if (kube_patch(x->kc, &KUBE_NODES, NULL, x->node, &po, patch, NULL, &e) < 0) {
        x->st.errors[NST_ERR_ANNOTATION]++;
        log_warn(COMP, "annotation not written; retrying", "node=%s key=%s error=\"%s\"", x->node,
                 NODESTATE_ANN_GPU_COUNT, err_msg(&e));
        return;
    }
    log_info(COMP, "annotation written", "node=%s key=%s value=%s", x->node,
             NODESTATE_ANN_GPU_COUNT, x->report.annotation);
}
