/* SPDX-License-Identifier: Apache-2.0 */
/* Allocate: validation and the per-container response for each deviceListStrategy. */
#include <string.h>

#include "device-plugin.h"

void dp_container_alloc_clear(struct dp_container_alloc *a)
{
    if (!a)
        return;
    for (size_t i = 0; i < a->n_envs; i++)
        free(a->envs[i].key), free(a->envs[i].value);
    for (size_t i = 0; i < a->n_annotations; i++)
        free(a->annotations[i].key), free(a->annotations[i].value);
    for (size_t i = 0; i < a->n_mounts; i++)
        free(a->mounts[i].container_path), free(a->mounts[i].host_path);
    for (size_t i = 0; i < a->n_devspecs; i++)
        free(a->devspecs[i].container_path), free(a->devspecs[i].host_path),
            free(a->devspecs[i].permissions);
    for (size_t i = 0; i < a->n_cdi; i++)
        free(a->cdi[i]);
    free(a->envs);
    free(a->annotations);
    free(a->mounts);
    free(a->devspecs);
    free(a->cdi);
    memset(a, 0, sizeof(*a));
}

/* Sets key=value, replacing an earlier value of the same key (as a Go map does). */
static void kv_set(struct dp_kv **list, size_t *n, const char *key, const char *value)
{
    for (size_t i = 0; i < *n; i++)
        if (strcmp((*list)[i].key, key) == 0) {
            free((*list)[i].value);
            (*list)[i].value = xstrdup(value);
            return;
        }
    *list = xrealloc(*list, (*n + 1) * sizeof(**list));
    (*list)[*n].key = xstrdup(key);
    (*list)[*n].value = xstrdup(value);
    (*n)++;
}

static void add_mount(struct dp_container_alloc *a, const char *container, const char *host,
                      bool ro)
{
    a->mounts = xrealloc(a->mounts, (a->n_mounts + 1) * sizeof(*a->mounts));
    a->mounts[a->n_mounts++] = (struct dp_mount){xstrdup(container), xstrdup(host), ro};
}

/* A device node for the container. Only an optional one (a control node the driver may not
 * have created) is checked for existence; a GPU's own nodes are always passed, since the
 * plugin's view of /dev may not be the host's. */
static void add_devspec(struct dp_container_alloc *a, const char *dev_root, const char *path,
                        bool optional, dp_exists_fn exists, void *userdata)
{
    size_t rl = strlen(dev_root);
    while (rl > 0 && dev_root[rl - 1] == '/')
        rl--;
    char *host = xasprintf("%.*s%s", (int)rl, dev_root, path);
    for (size_t i = 0; i < a->n_devspecs; i++)
        if (strcmp(a->devspecs[i].host_path, host) == 0) {
            free(host);
            return;
        }
    if (optional && exists && !exists(host, userdata)) {
        free(host);
        return;
    }
    a->devspecs = xrealloc(a->devspecs, (a->n_devspecs + 1) * sizeof(*a->devspecs));
    a->devspecs[a->n_devspecs++] = (struct dp_devspec){xstrdup(path), host, xstrdup("rw")};
}

/* One fully qualified CDI device name (taken): into the CRI field when cri, and into the
 * comma-separated list the annotation carries. */
static void cdi_device_add(struct dp_container_alloc *a, struct sbuf *joined, bool cri, char *name)
{
    if (cri) {
        a->cdi = xrealloc(a->cdi, (a->n_cdi + 1) * sizeof(*a->cdi));
        a->cdi[a->n_cdi++] = xstrdup(name);
    }
    if (joined->len)
        sbuf_adds(joined, ",");
    sbuf_adds(joined, name);
    free(name);
}

int dp_allocate(const struct dp_plan *p, const struct dp_resource *r, const char *const *ids,
                size_t n_ids, const char *response_id, dp_exists_fn exists, void *userdata,
                struct dp_container_alloc *ret, struct err *e)
{
    const struct dp_options *o = &p->opts;
    _cleanup_free_ const struct dp_device **devs = xcalloc(n_ids ? n_ids : 1, sizeof(*devs));
    for (size_t i = 0; i < n_ids; i++) {
        devs[i] = dp_resource_find(r, ids[i]);
        if (!devs[i])
            return err_set(e, -ENOENT, "invalid allocation request for '%s': unknown device: %s",
                           r->name, ids[i] ? ids[i] : "(null)");
        if (!devs[i]->healthy)
            return err_set(e, -EIO, "invalid allocation request for '%s': device %s is Unhealthy",
                           r->name, ids[i]);
    }
    if (r->replicas > 1 && r->fail_requests_gt_one && n_ids > 1)
        return err_set(e, -EINVAL,
                       "invalid request: maximum request size for shared resources is 1; found %zu",
                       n_ids);

    /* The base IDs (or indices), de-duplicated in request order. */
    _cleanup_free_ const char **vis = xcalloc(n_ids ? n_ids : 1, sizeof(*vis));
    _cleanup_free_ const struct dp_device **phys = xcalloc(n_ids ? n_ids : 1, sizeof(*phys));
    size_t n_vis = 0;
    for (size_t i = 0; i < n_ids; i++) {
        const char *v =
            o->id_strategy == DPCONFIG_DEVICE_ID_INDEX ? devs[i]->index : devs[i]->base_id;
        bool dup = false;
        for (size_t j = 0; j < n_vis && !dup; j++)
            dup = strcmp(vis[j], v) == 0;
        if (!dup) {
            phys[n_vis] = devs[i];
            vis[n_vis++] = v;
        }
    }

    struct dp_container_alloc a = {0};
    struct sbuf joined _cleanup_sbuf_;
    sbuf_init(&joined, 1u << 20);

    if (o->list_strategies & (DPCONFIG_LIST_CDI_ANNOTATIONS | DPCONFIG_LIST_CDI_CRI)) {
        for (size_t i = 0; i < n_vis; i++) {
            char *name = xasprintf("%s=%s", o->cdi_kind, vis[i]);
            cdi_device_add(&a, &joined, o->list_strategies & DPCONFIG_LIST_CDI_CRI, name);
        }
        /* The extra CDI devices NVIDIA's plugin adds for the optional features. */
        static const char *const feature_names[] = {"gdrcopy", "gds", "mofed"};
        const bool feature_on[] = {o->gdrcopy, o->gds, o->mofed};
        for (size_t i = 0; i < ARRAY_SIZE(feature_names) + o->n_imex; i++) {
            char *name;
            if (i < ARRAY_SIZE(feature_names)) {
                if (!feature_on[i])
                    continue;
                name = xasprintf("k8s.device-plugin.nvidia.com/%s=all", feature_names[i]);
            } else {
                name = xasprintf("k8s.device-plugin.nvidia.com/imex-channel=%u",
                                 o->imex_channels[i - ARRAY_SIZE(feature_names)]);
            }
            cdi_device_add(&a, &joined, o->list_strategies & DPCONFIG_LIST_CDI_CRI, name);
        }
        int err = sbuf_check_err(&joined, e, "allocate '%s': the CDI device list", r->name);
        if (err < 0) {
            dp_container_alloc_clear(&a);
            return err;
        }
        if (o->list_strategies & DPCONFIG_LIST_CDI_ANNOTATIONS) {
            _cleanup_free_ char *key =
                xasprintf("%snvidia-device-plugin_%s", o->cdi_annotation_prefix,
                          response_id ? response_id : "0");
            kv_set(&a.annotations, &a.n_annotations, key, joined.data ? joined.data : "");
        }
    }

    if (p->opts.sharing == DPCONFIG_SHARING_MPS && r->replicas > 1) {
        _cleanup_free_ char *pipe_c = xasprintf("/mps/%s/pipe", r->name);
        _cleanup_free_ char *pipe_h = xasprintf("%s/%s/pipe", o->mps_root, r->name);
        _cleanup_free_ char *shm_h = xasprintf("%s/%s/shm", o->mps_root, r->name);
        kv_set(&a.envs, &a.n_envs, "CUDA_MPS_PIPE_DIRECTORY", pipe_c);
        add_mount(&a, pipe_c, pipe_h, false);
        add_mount(&a, "/dev/shm", shm_h, false);
    }

    if (o->gdrcopy)
        kv_set(&a.envs, &a.n_envs, "NVIDIA_GDRCOPY", "enabled");
    if (o->gds)
        kv_set(&a.envs, &a.n_envs, "NVIDIA_GDS", "enabled");
    if (o->mofed)
        kv_set(&a.envs, &a.n_envs, "NVIDIA_MOFED", "enabled");

    if (o->list_strategies & (DPCONFIG_LIST_ENVVAR | DPCONFIG_LIST_VOLUME_MOUNTS)) {
        if ((o->list_strategies & DPCONFIG_LIST_ENVVAR) && o->n_imex) {
            char channel[32];
            snprintf(channel, sizeof(channel), "%u", o->imex_channels[0]);
            kv_set(&a.envs, &a.n_envs, "NVIDIA_IMEX_CHANNELS", channel);
        }
        if (o->list_strategies & DPCONFIG_LIST_ENVVAR) {
            sbuf_reset(&joined);
            for (size_t i = 0; i < n_vis; i++) {
                if (i)
                    sbuf_adds(&joined, ",");
                sbuf_adds(&joined, vis[i]);
            }
            int err = sbuf_check_err(&joined, e, "allocate '%s': NVIDIA_VISIBLE_DEVICES", r->name);
            if (err < 0) {
                dp_container_alloc_clear(&a);
                return err;
            }
            kv_set(&a.envs, &a.n_envs, "NVIDIA_VISIBLE_DEVICES", joined.data ? joined.data : "");
        }
        if (o->list_strategies & DPCONFIG_LIST_VOLUME_MOUNTS) {
            kv_set(&a.envs, &a.n_envs, "NVIDIA_VISIBLE_DEVICES", DP_VOLUME_MOUNTS_ROOT);
            for (size_t i = 0; i < n_vis; i++) {
                _cleanup_free_ char *c = xasprintf("%s/%s", DP_VOLUME_MOUNTS_ROOT, vis[i]);
                add_mount(&a, c, "/dev/null", false);
            }
        }
        if (o->pass_device_specs) {
            static const char *const ctl[] = {"/dev/nvidiactl", "/dev/nvidia-uvm",
                                              "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset"};
            for (size_t i = 0; i < ARRAY_SIZE(ctl); i++)
                add_devspec(&a, o->dev_root, ctl[i], true, exists, userdata);
            for (size_t i = 0; i < n_vis; i++) {
                char path[64];
                snprintf(path, sizeof(path), "/dev/nvidia%u", phys[i]->minor);
                add_devspec(&a, o->dev_root, path, false, exists, userdata);
                /* A MIG device also needs its GPU and compute instance capabilities. */
                if (phys[i]->is_mig && phys[i]->gi_cap >= 0 && phys[i]->ci_cap >= 0) {
                    snprintf(path, sizeof(path), "/dev/nvidia-caps/nvidia-cap%d", phys[i]->gi_cap);
                    add_devspec(&a, o->dev_root, path, false, exists, userdata);
                    snprintf(path, sizeof(path), "/dev/nvidia-caps/nvidia-cap%d", phys[i]->ci_cap);
                    add_devspec(&a, o->dev_root, path, false, exists, userdata);
                }
            }
        }
    }
    *ret = a;
    return 0;
}
