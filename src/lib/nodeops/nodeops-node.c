/* SPDX-License-Identifier: Apache-2.0 */
/* nodeops' shell: the agent's own Node read and patched, and its Events. */
#include "kobj.h"
#include "nodeops.h"

int nodeops_node_read(struct kube_client *kc, const char *node, json_t **node_obj, struct err *e)
{
    json_t *n = NULL;
    int r = kube_get(kc, &KUBE_NODES, NULL, node, &n, e);
    if (r < 0)
        return err_prefix(e, "read node %s", node);
    json_decref(*node_obj);
    *node_obj = n;
    return 0;
}

int nodeops_node_patch(struct kube_client *kc, const char *node, json_t *patch, json_t **node_obj,
                       struct err *e)
{
    _cleanup_(json_decrefp) json_t *owned = patch;
    json_t *out = NULL;
    struct kube_patch_opts o = {.type = KUBE_PATCH_MERGE};
    int r = kube_patch(kc, &KUBE_NODES, NULL, node, &o, patch, &out, e);
    if (r < 0)
        return err_prefix(e, "patch node %s", node);
    json_decref(*node_obj);
    *node_obj = out;
    return 0;
}

void nodeops_node_event(struct kube_client *kc, const char *node, const json_t *node_obj,
                        const struct nodeops_event *ev)
{
    _cleanup_(json_decrefp) json_t *inv =
        json_pack("{s:s,s:s,s:{s:s,s:s?}}", "kind", "Node", "apiVersion", "v1", "metadata", "name",
                  node, "uid", kobj_uid(node_obj));
    struct kube_event ke = {.ns = ev->ns ? ev->ns : kube_client_namespace(kc),
                            .involved = inv,
                            .type = ev->type,
                            .reason = ev->reason,
                            .message = ev->message,
                            .component = ev->source,
                            .host = node};
    struct err e = {0};
    if (kube_event_create(kc, &ke, &e) < 0)
        log_warn(ev->component, "event not recorded", "reason=%s error=\"%s\"", ev->reason,
                 err_msg(&e));
}
