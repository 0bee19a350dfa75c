/* SPDX-License-Identifier: Apache-2.0 */
/* nodeops' shell: a node's pods, the wait for the paused operands, evictions. */
#include <string.h>

#include "kobj.h"
#include "nodeops.h"

#define POLL_MS        1000
#define BACKOFF_MAX_MS 16000

int nodeops_node_pods(struct kube_client *kc, const char *node, const char *selector, json_t **ret,
                      struct err *e)
{
    _cleanup_free_ char *fs = xasprintf("spec.nodeName=%s", node);
    struct kube_list_opts o = {.field_selector = fs, .label_selector = selector};
    int r = kube_list(kc, &KUBE_PODS, NULL, &o, ret, e);
    return r < 0 ? err_prefix(e, "list pods on node %s", node) : 0;
}

static int nap(struct svc *s, uint64_t ms, struct err *e)
{
    if (svc_wait(s, ms) == SVC_STOP)
        return err_set(e, -ECANCELED, "stopped while waiting for pods to go");
    return 0;
}

int nodeops_wait_operands(struct svc *s, struct kube_client *kc, const char *node,
                          const json_t *node_labels, uint64_t timeout_ms, const char *component,
                          struct err *e)
{
    uint64_t deadline = deadline_after(timeout_ms);
    for (bool logged = false;; logged = true) {
        json_t *pods _cleanup_(json_decrefp) = NULL;
        int r = nodeops_node_pods(kc, node, NULL, &pods, e);
        if (r < 0)
            return r;
        struct sbuf names _cleanup_sbuf_;
        sbuf_init(&names, 2048);
        size_t i, n = 0;
        json_t *p;
        json_array_foreach (json_object_get(pods, "items"), i, p) {
            if (nodeops_pod_classify(p, node_labels) != NODEOPS_POD_OPERAND)
                continue;
            sbuf_addf(&names, "%s%s/%s", n++ ? "," : "", kobj_namespace(p), kobj_name(p));
        }
        if (n == 0) {
            log_info(component, "paused operands gone", "node=%s", node);
            return 0;
        }
        if (!logged)
            log_info(component, "waiting for the paused operands' pods to go", "pods=%s",
                     names.error ? "(many)" : names.data);
        if (deadline_left_ms(deadline) == 0)
            return err_set(e, -ETIMEDOUT, "operand pods still on node %s after %llus: %s", node,
                           (unsigned long long)(timeout_ms / 1000),
                           names.error ? "(many)" : names.data);
        if ((r = nap(s, POLL_MS, e)) < 0)
            return r;
    }
}

int nodeops_evict_pods(const struct nodeops_evict *o, char **ret_evicted, struct err *e)
{
    uint64_t deadline = o->timeout_ms ? deadline_after(o->timeout_ms) : DEADLINE_NEVER;
    uint64_t backoff = POLL_MS;
    struct sbuf evicted _cleanup_sbuf_;
    sbuf_init(&evicted, 16384);
    for (;;) {
        json_t *pods _cleanup_(json_decrefp) = NULL;
        int r = nodeops_node_pods(o->kc, o->node, o->selector, &pods, e);
        if (r < 0)
            return r;
        size_t i, waiting = 0, blocked = 0;
        json_t *p;
        _cleanup_free_ char *why = NULL;
        json_array_foreach (json_object_get(pods, "items"), i, p) {
            if ((r = o->select(p, o->ud, e)) < 0)
                return err_prefix(e, "%s refused", o->what);
            if (r == 0)
                continue;
            const char *ns = kobj_namespace(p), *name = kobj_name(p);
            if (kobj_deletion_timestamp(p)) {
                waiting++;
                continue;
            }
            struct err ee = {0};
            r = kube_evict(o->kc, ns, name, NULL, &ee);
            if (r == 0) {
                log_info(o->component, "evicted pod", "pod=%s/%s step=%s", ns, name, o->what);
                sbuf_addf(&evicted, "%s%s/%s", evicted.len ? "," : "", ns, name);
                waiting++;
            } else if (r == -ENOENT) {
                continue;
            } else if (r == KUBE_EBLOCKED || r == -EAGAIN) {
                blocked++;
                log_warn(o->component, "eviction refused by a disruption budget; waiting",
                         "pod=%s/%s reason=\"%s\" retry_in=%llums", ns, name, err_msg(&ee),
                         (unsigned long long)backoff);
                if (!why)
                    why = xasprintf("pod %s/%s: %s", ns, name, err_msg(&ee));
            } else {
                return err_set(e, r, "evict pod %s/%s: %s", ns, name, err_msg(&ee));
            }
        }
        if (waiting == 0 && blocked == 0) {
            log_info(o->component, "pods gone", "step=%s node=%s", o->what, o->node);
            if (ret_evicted)
                *ret_evicted = evicted.len && !evicted.error ? sbuf_steal(&evicted) : NULL;
            return 0;
        }
        if (why && o->blocked)
            o->blocked(o->ud, why);
        if (deadline_left_ms(deadline) == 0)
            return err_set(e, -ETIMEDOUT, "%s: %zu pods still on node %s after %llus%s%s", o->what,
                           waiting + blocked, o->node, (unsigned long long)(o->timeout_ms / 1000),
                           why ? "; " : "", why ? why : "");
        uint64_t ms = blocked ? backoff : POLL_MS;
        if (blocked)
            backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
        if ((r = nap(o->svc, ms, e)) < 0)
            return r;
    }
}
