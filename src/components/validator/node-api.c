/* SPDX-License-Identifier: Apache-2.0 */
/* The validator's side of the API server: Events and annotations on its node, whether the
 * driver and toolkit DaemonSets run, this node's driver pod and the Node itself. */
#include <string.h>

#include "kobj.h"
#include "kube.h"
#include "yamlcfg.h"
#include "validator-internal.h"

#define COMP           "validator"
#define API_TIMEOUT_MS 10000

int val_api_open(struct val *v, struct stop_token *stop, struct err *e)
{
    if (!v->node_name)
        return 0;
    struct kube_options ko = {.kubeconfig = v->kubeconfig,
                              .stop = stop,
                              .timeout_ms = API_TIMEOUT_MS,
                              .call_timeout_ms = 2 * API_TIMEOUT_MS};
    struct err ke = {0};
    if (kube_client_new(&ko, &v->kc, &ke) == 0)
        return 0;
    v->kc = NULL;
    /* the plugin check compares with what the Node advertises: no check without it */
    if (v->component == VAL_PLUGIN)
        return err_set(e, ke.code, "API client: %s", ke.msg);
    log_warn(COMP, "no API server: no Events or annotations", "error=\"%s\"", log_kv_quote(ke.msg));
    return 0;
}

void val_api_close(void *state)
{
    struct val *v = state;
    kube_client_free(v->kc);
    v->kc = NULL;
}

void val_api_event(struct val *v, bool warning, const char *reason, const char *msg)
{
    if (!v->kc)
        return;
    _cleanup_json_ json_t *ref =
        json_pack("{s:s,s:s,s:{s:s,s:s}}", "kind", "Node", "apiVersion", "v1", "metadata", "name",
                  v->node_name, "uid", v->node_name);
    struct kube_event ev = {.involved = ref,
                            .type = warning ? "Warning" : "Normal",
                            .reason = reason,
                            .message = msg,
                            .component = "gpuop-validator",
                            .host = v->node_name};
    struct err e = {0};
    if (kube_event_create(v->kc, &ev, &e) < 0)
        log_warn(COMP, "cannot post the Event", "node=%s reason=%s error=\"%s\"", v->node_name,
                 reason, log_kv_quote(e.msg));
}

static void annotate(struct val *v, const char *key, const char *text)
{
    _cleanup_json_ json_t *patch = json_pack("{s:{s:{s:s}}}", "metadata", "annotations", key, text);
    struct kube_patch_opts po = {.type = KUBE_PATCH_MERGE};
    struct err e = {0};
    if (kube_patch(v->kc, &KUBE_NODES, NULL, v->node_name, &po, patch, NULL, &e) < 0)
        log_warn(COMP, "cannot annotate the node", "node=%s key=%s error=\"%s\"", v->node_name, key,
                 log_kv_quote(e.msg));
}

void val_api_annotate(struct val *v, enum nodestate_vstate state, const char *reason)
{
    enum nodestate_component nc;
    if (!v->kc || val_component_ns((enum val_component)v->component, &nc) < 0)
        return;
    struct nodestate_validation nv = {.state = state};
    strlcpy_s(nv.reason, reason ? reason : "", sizeof(nv.reason));
    time_rfc3339(now_ms_real(), nv.time, sizeof(nv.time));
    _cleanup_free_ char *text = NULL;
    char key[128];
    nodestate_validation_key(nc, key, sizeof(key));
    if (nodestate_validation_render(&nv, &text) == 0)
        annotate(v, key, text);
}

void val_api_record_owner(struct val *v, struct nodestate_driver_owner *o)
{
    if (!v->kc || !v->node_name)
        return;
    time_rfc3339(now_ms_real(), o->time, sizeof(o->time));
    _cleanup_free_ char *text = NULL;
    if (nodestate_driver_owner_render(o, &text) == 0)
        annotate(v, NODESTATE_ANN_DRIVER_OWNER, text);
}

static const char *namespace_of(struct val *v)
{
    return v->ns ? v->ns : kube_client_namespace(v->kc);
}

/* An API error counts as no (logged): the check then goes by the node's files alone. */
bool val_api_daemonset_exists(struct val *v, const char *selector)
{
    if (!v->kc)
        return false;
    struct kube_list_opts lo = {.label_selector = selector};
    _cleanup_json_ json_t *list = NULL;
    struct err e = {0};
    if (kube_list(v->kc, &KUBE_DAEMONSETS, namespace_of(v), &lo, &list, &e) < 0) {
        log_warn(COMP, "cannot list DaemonSets", "namespace=%s selector=%s error=\"%s\"",
                 namespace_of(v), selector, log_kv_quote(e.msg));
        return false;
    }
    return json_array_size(json_object_get(list, "items")) > 0;
}

/* The pods of the DaemonSets (by their selectors) bound to this node: the first found. */
json_t *val_api_driver_pod(struct val *v, const char *selector)
{
    if (!v->kc || !v->node_name)
        return NULL;
    const char *ns = namespace_of(v);
    struct kube_list_opts lo = {.label_selector = selector};
    _cleanup_json_ json_t *dss = NULL;
    struct err e = {0};
    if (kube_list(v->kc, &KUBE_DAEMONSETS, ns, &lo, &dss, &e) < 0)
        return NULL;
    _cleanup_free_ char *field = xasprintf("spec.nodeName=%s", v->node_name);
    size_t i;
    json_t *ds;
    json_array_foreach (json_object_get(dss, "items"), i, ds) {
        _cleanup_free_ char *sel = kobj_selector_string(kobj_path(ds, "spec.selector.matchLabels"));
        if (!sel || !*sel)
            continue;
        struct kube_list_opts po = {.label_selector = sel, .field_selector = field};
        _cleanup_json_ json_t *pods = NULL;
        if (kube_list(v->kc, &KUBE_PODS, ns, &po, &pods, &e) < 0) {
            log_warn(COMP, "cannot list the driver's pods", "namespace=%s error=\"%s\"", ns,
                     log_kv_quote(e.msg));
            return NULL;
        }
        json_t *pod = json_array_get(json_object_get(pods, "items"), 0);
        if (pod)
            return json_incref(pod);
    }
    return NULL;
}

int val_api_node(struct val *v, json_t **ret, struct err *e)
{
    if (!v->kc)
        return err_set(e, -ENOTCONN, "no API server (no --node-name)");
    return kube_get(v->kc, &KUBE_NODES, NULL, v->node_name, ret, e);
}
