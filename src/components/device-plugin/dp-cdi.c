/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The CDI spec that defines every device name Allocate hands out under a CDI device-list
 * strategy (k8s.device-plugin.nvidia.com/gpu=<UUID|MIG-UUID|index>), so a CDI-enabled runtime
 * resolves them: each device's own nodes (/dev/nvidiaN, a MIG device's capability nodes) and, for
 * every device, the control nodes the host has. Pure but for the injected existence check: the
 * plan in, JSON text out. Driver libraries are not in it: the container toolkit's spec
 * (management.nvidia.com/gpu) or runtime hook brings those.
 */
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "device-plugin.h"

/* optional: a control node, left out when exists says the host lacks it */
static void node_add(json_t *nodes, const char *dev_root, const char *path, bool optional,
                     dp_exists_fn exists, void *userdata)
{
    size_t rl = strlen(dev_root);
    while (rl > 0 && dev_root[rl - 1] == '/')
        rl--;
    char *host = xasprintf("%.*s%s", (int)rl, dev_root, path);
    if (optional && exists && !exists(host, userdata)) {
        free(host);
        return;
    }
    json_t *n = json_object();
    json_object_set_new(n, "path", json_string(path));
    json_object_set_new(n, "hostPath", json_string(host));
    free(host);
    json_array_append_new(nodes, n);
}

int dp_cdi_spec_render(const struct dp_plan *p, dp_exists_fn exists, void *userdata, char **ret,
                       struct err *e)
{
    const struct dp_options *o = &p->opts;
    json_t *spec = json_object();
    /* 0.5.0: hostPath on device nodes, and names that start with a digit (index IDs) */
    json_object_set_new(spec, "cdiVersion", json_string("0.5.0"));
    json_object_set_new(spec, "kind", json_string(DP_CDI_VENDOR_CLASS));
    json_t *devices = json_array(), *seen = json_object();
    for (size_t k = 0; k < p->n_resources; k++) {
        const struct dp_resource *r = &p->resources[k];
        for (size_t i = 0; i < r->n_devices; i++) {
            const struct dp_device *d = &r->devices[i];
            const char *name = o->id_strategy == DPCONFIG_DEVICE_ID_INDEX ? d->index : d->base_id;
            if (json_object_get(seen, name))
                continue; /* replicas share their GPU's name */
            json_object_set_new(seen, name, json_true());
            json_t *nodes = json_array();
            char path[64];
            snprintf(path, sizeof(path), "/dev/nvidia%u", d->minor);
            node_add(nodes, o->dev_root, path, false, NULL, NULL);
            if (d->is_mig && d->gi_cap >= 0 && d->ci_cap >= 0) {
                snprintf(path, sizeof(path), "/dev/nvidia-caps/nvidia-cap%d", d->gi_cap);
                node_add(nodes, o->dev_root, path, false, NULL, NULL);
                snprintf(path, sizeof(path), "/dev/nvidia-caps/nvidia-cap%d", d->ci_cap);
                node_add(nodes, o->dev_root, path, false, NULL, NULL);
            }
            json_t *dev = json_object();
            json_object_set_new(dev, "name", json_string(name));
            json_t *edits = json_object();
            json_object_set_new(edits, "deviceNodes", nodes);
            json_object_set_new(dev, "containerEdits", edits);
            json_array_append_new(devices, dev);
        }
    }
    json_decref(seen);
    if (json_array_size(devices) == 0) {
        json_decref(devices);
        json_decref(spec);
        *ret = NULL;
        return 0; /* no GPUs: no spec (CDI wants at least one device) */
    }
    json_object_set_new(spec, "devices", devices);
    json_t *common = json_array();
    static const char *const ctl[] = {"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools",
                                      "/dev/nvidia-modeset"};
    for (size_t i = 0; i < ARRAY_SIZE(ctl); i++)
        node_add(common, o->dev_root, ctl[i], true, exists, userdata);
    json_t *edits = json_object();
    json_object_set_new(edits, "deviceNodes", common);
    json_object_set_new(spec, "containerEdits", edits);
    char *text = json_dumps(spec, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(spec);
    if (!text)
        return err_set(e, -ENOMEM, "CDI spec: cannot serialise");
    *ret = text;
    return 0;
}
