/* SPDX-License-Identifier: Apache-2.0 */
/* nodeops' pure part: the operand pause and restore, which pods hold GPUs. */
#include <string.h>

#include "kobj.h"
#include "nodeops.h"

bool nodeops_is_operand_label(const char *key)
{
    return key && str_has_prefix(key, NODEOPS_DEPLOY_PREFIX) &&
           strcmp(key, NODEOPS_LABEL_DRIVER) != 0 && strcmp(key, NODEOPS_LABEL_OPERANDS) != 0 &&
           key[sizeof(NODEOPS_DEPLOY_PREFIX) - 1] != '\0';
}

static bool covered(const struct nodeops_pause *p, const char *key)
{
    if (!p->labels)
        return nodeops_is_operand_label(key);
    for (const char *const *l = p->labels; *l; l++)
        if (strcmp(*l, key) == 0)
            return true;
    return false;
}

/* v is word, or ends in "_<word>" */
static bool is_paused(const char *v, const char *word)
{
    size_t len = strlen(v), wl = strlen(word);
    return strcmp(v, word) == 0 ||
           (len > wl + 1 && v[len - wl - 1] == '_' && strcmp(v + len - wl, word) == 0);
}

int nodeops_label_pause(const char *value, const char *word, char *buf, size_t n)
{
    const char *v = value ? value : "";
    if (strcmp(v, "false") == 0 || is_paused(v, word))
        return 0;
    int len = (v[0] == '\0' || strcmp(v, "true") == 0) ? snprintf(buf, n, "%s", word)
                                                       : snprintf(buf, n, "%s_%s", v, word);
    if (len < 0 || (size_t)len >= n || len > NODEOPS_LABEL_VALUE_MAX)
        return -E2BIG;
    return 1;
}

int nodeops_label_restore(const char *value, const char *word, char *buf, size_t n)
{
    const char *v = value ? value : "";
    size_t len = strlen(v), wl = strlen(word);
    int w;
    if (strcmp(v, word) == 0)
        w = snprintf(buf, n, "true");
    else if (is_paused(v, word))
        w = snprintf(buf, n, "%.*s", (int)(len - wl - 1), v);
    else
        return 0;
    return w < 0 || (size_t)w >= n ? -E2BIG : 1;
}

int nodeops_labels_patch(const json_t *labels, const struct nodeops_pause *p, bool restore,
                         json_t **ret, struct err *e)
{
    json_t *patch = json_object();
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *)labels, k, v) {
        if (!covered(p, k) || !json_is_string(v))
            continue;
        char buf[NODEOPS_LABEL_VALUE_MAX + 2 + 64];
        int r = restore ? nodeops_label_restore(json_string_value(v), p->word, buf, sizeof(buf))
                        : nodeops_label_pause(json_string_value(v), p->word, buf, sizeof(buf));
        if (r < 0) {
            json_decref(patch);
            return err_set(e, r, "label %s=%s: paused, \"%s\" would not be a label value", k,
                           json_string_value(v), json_string_value(v));
        }
        if (r > 0)
            json_object_set_new(patch, k, json_string(buf));
    }
    *ret = patch;
    return 0;
}

bool nodeops_labels_paused(const json_t *labels, const struct nodeops_pause *p)
{
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *)labels, k, v)
        if (covered(p, k) && json_is_string(v) && is_paused(json_string_value(v), p->word))
            return true;
    return false;
}

/* ---- pods --------------------------------------------------------------------------------- */

static bool resource_is_gpu(const char *name)
{
    return str_has_prefix(name, "nvidia.com/gpu") || str_has_prefix(name, "nvidia.com/mig-");
}

static bool container_requests_gpu(const json_t *c)
{
    static const char *const lists[] = {"resources.limits", "resources.requests"};
    for (size_t i = 0; i < ARRAY_SIZE(lists); i++) {
        const char *k;
        json_t *v;
        json_object_foreach (kobj_path(c, lists[i]), k, v)
            if (resource_is_gpu(k))
                return true;
    }
    return false;
}

static bool pod_requests_gpu(const json_t *pod)
{
    static const char *const kinds[] = {"spec.containers", "spec.initContainers"};
    for (size_t i = 0; i < ARRAY_SIZE(kinds); i++) {
        size_t j;
        json_t *c;
        json_array_foreach (kobj_path(pod, kinds[i]), j, c)
            if (container_requests_gpu(c))
                return true;
    }
    return false;
}

const json_t *nodeops_pod_controller(const json_t *pod)
{
    size_t i;
    json_t *o;
    json_array_foreach (kobj_path(pod, "metadata.ownerReferences"), i, o)
        if (json_is_true(json_object_get(o, "controller")))
            return o;
    return NULL;
}

enum nodeops_pod_kind nodeops_pod_classify(const json_t *pod, const json_t *node_labels)
{
    const char *phase = kobj_path_str(pod, "status.phase");
    if (streq_ptr(phase, "Succeeded") || streq_ptr(phase, "Failed"))
        return NODEOPS_POD_DONE;
    const char *k;
    json_t *v;
    json_object_foreach (kobj_path(pod, "spec.nodeSelector"), k, v) {
        if (!nodeops_is_operand_label(k))
            continue;
        const char *now = kobj_str(node_labels, k);
        if (!now || !streq_ptr(now, json_string_value(v)))
            return NODEOPS_POD_OPERAND; /* its DaemonSet takes it away */
    }
    if (pod_requests_gpu(pod))
        return NODEOPS_POD_GPU;
    if (kobj_annotation(pod, "kubernetes.io/config.mirror"))
        return NODEOPS_POD_MIRROR;
    const json_t *ctl = nodeops_pod_controller(pod);
    if (ctl && streq_ptr(kobj_str(ctl, "kind"), "DaemonSet"))
        return NODEOPS_POD_DAEMONSET;
    return NODEOPS_POD_OTHER;
}
