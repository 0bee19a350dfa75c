/* SPDX-License-Identifier: Apache-2.0 */
/* The simulated kubelet: pods turn Running and Ready, terminating pods go away. Pods on a node a
 * kubelet process serves (annotated KS_EXTERNAL_KUBELET_ANNOTATION: "external") are that
 * kubelet's: their status is what it reports and it deletes them when their containers stop. */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "ks-controllers.h"

bool ks_ctl_kubelet(struct ksim *ks)
{
    struct ks_type *pt = ctl_core(ks, "pods");
    struct ks_type *nt = ctl_core(ks, "nodes");
    uint64_t now = ks_now(ks);
    bool changed = false;
    /* the pods to look at: those waiting for their delay and those changed since the last
     * pass; all of them when the log does not reach back or a node was or became one a kubelet
     * process serves (its pods change hands) */
    json_t *look = NULL;
    size_t i0;
    bool since = ks_ev_since(ks, ks->kubelet_cursor, &i0);
    for (size_t i = i0; since && i < ks->ev_len; i++) {
        struct ks_event *e = &ks->ev[i];
        if (e->type == nt && (ks_node_external(e->obj) || ks_node_external(e->old)))
            since = false;
        else if (e->type == pt && e->kind == KS_DELETED && kobj_uid(e->obj) &&
                 !json_object_get(ks->uids, kobj_uid(e->obj)))
            json_object_del(ks->pod_born, kobj_uid(e->obj)); /* forget pods that are gone */
    }
    json_t *recent = NULL;
    if (since && ctl_changed_since(ks, pt, ks->kubelet_cursor, &recent, NULL)) {
        /* each once: store key -> pod */
        json_t *by_key = json_object();
        size_t ci;
        json_t *c;
        json_array_foreach (recent, ci, c) {
            _cleanup_free_ char *key = ks_key(ks_obj_ns(c), ks_obj_name(c));
            json_object_set(by_key, key, c);
        }
        json_decref(recent);
        const char *wk;
        json_t *wv;
        json_object_foreach (ks->kubelet_waiting, wk, wv) {
            json_t *cur = json_object_get(pt->objs, wk);
            if (cur && !json_object_get(by_key, wk))
                json_object_set(by_key, wk, cur);
        }
        look = ctl_values(by_key);
        json_decref(by_key);
    } else {
        json_decref(look);
        look = ctl_values(pt->objs);
        since = false;
    }
    ks->kubelet_cursor = ks->rv;
    json_object_clear(ks->kubelet_waiting);
    json_t *todo = json_array();
    const char *k;
    json_t *p;
    size_t li;
    json_array_foreach (look, li, p) {
        if (!kobj_path_str(p, "spec.nodeName") || ks_is_deleting(p) ||
            !streq_ptr(kobj_path_str(p, "status.phase"), "Pending"))
            continue;
        if (ks_node_external(ks_get(nt, "", kobj_path_str(p, "spec.nodeName"))))
            continue;
        const char *uid = kobj_uid(p);
        if (!uid)
            continue;
        json_t *born = json_object_get(ks->pod_born, uid);
        if (!born) {
            born = json_integer((json_int_t)now);
            json_object_set_new(ks->pod_born, uid, born);
        }
        uint64_t due = (uint64_t)json_integer_value(born) + ks->opts.pod_ready_delay_ms;
        if (due <= now && ks->kubelet_budget > 0) {
            json_array_append(todo, p);
            ks->kubelet_budget--;
        } else if (due <= now) {
            /* past this reconcile's budget: the next one starts it */
            _cleanup_free_ char *key = ks_key(ks_obj_ns(p), ks_obj_name(p));
            json_object_set_new(ks->kubelet_waiting, key, json_true());
            ks->more_work = true;
        } else {
            _cleanup_free_ char *key = ks_key(ks_obj_ns(p), ks_obj_name(p));
            json_object_set_new(ks->kubelet_waiting, key, json_true());
            if (!ks->next_due || due < ks->next_due)
                ks->next_due = due;
        }
    }
    json_decref(look);
    char ts[40];
    ks_now_str(ks, ts, sizeof(ts));
    size_t i;
    json_t *prev_st = NULL;
    json_array_foreach (todo, i, p) {
        /* a status write takes only the status of what it is given */
        json_t *st = json_deep_copy(json_object_get(p, "status"));
        if (!json_is_object(st)) {
            json_decref(st);
            st = json_object();
        }
        json_t *n = json_pack("{s:o}", "status", st);
        json_object_set_new(st, "phase", json_string("Running"));
        json_object_set_new(st, "startTime", json_string(ts));
        uint64_t h = 0;
        for (const char *s = ks_obj_name(p); *s; s++)
            h = h * 131 + (unsigned char)*s;
        char ip[32];
        snprintf(ip, sizeof(ip), "10.244.%u.%u", (unsigned)(h >> 8) % 250, (unsigned)h % 250 + 2);
        json_object_set_new(st, "podIP", json_string(ip));
        json_object_set_new(st, "podIPs", json_pack("[{s:s}]", "ip", ip));
        json_t *node = ks_get(nt, "", kobj_path_str(p, "spec.nodeName"));
        json_t *addr = json_array_get(kobj_path(node, "status.addresses"), 0);
        if (kobj_str(addr, "address"))
            json_object_set_new(st, "hostIP", json_string(kobj_str(addr, "address")));
        json_object_set_new(st, "conditions",
                            json_pack("[{s:s,s:s,s:s},{s:s,s:s,s:s},{s:s,s:s,s:s},{s:s,s:s,s:s}]",
                                      "type", "Initialized", "status", "True", "lastTransitionTime",
                                      ts, "type", "Ready", "status", "True", "lastTransitionTime",
                                      ts, "type", "ContainersReady", "status", "True",
                                      "lastTransitionTime", ts, "type", "PodScheduled", "status",
                                      "True", "lastTransitionTime", ts));
        json_t *cs = json_array();
        size_t j;
        json_t *c;
        json_array_foreach (kobj_path(p, "spec.containers"), j, c) {
            json_array_append_new(
                cs, json_pack("{s:s,s:s,s:s,s:b,s:b,s:i,s:{s:{s:s}},s:s}", "name",
                              kobj_str(c, "name") ?: "", "image", kobj_str(c, "image") ?: "",
                              "imageID", "", "ready", 1, "started", 1, "restartCount", 0, "state",
                              "running", "startedAt", ts, "containerID", "containerd://kubesim"));
        }
        json_object_set_new(st, "containerStatuses", cs);
        /* pods started together (a DaemonSet's) have statuses alike but for their addresses:
         * held once */
        ks_share(st, prev_st);
        json_decref(prev_st);
        prev_st = json_incref(st);
        ks_update(ks, ctl_core(ks, "pods"), p, n, "status");
        changed = true;
    }
    json_decref(prev_st);
    json_decref(todo);
    /* terminating pods whose containers have "stopped" are removed, as the kubelet does */
    json_t *dying = json_array();
    json_object_foreach (ks->pod_dying, k, p) {
        uint64_t due = (uint64_t)json_integer_value(p);
        if (due <= now)
            json_array_append_new(dying, json_string(k));
        else if (!ks->next_due || due < ks->next_due)
            ks->next_due = due;
    }
    json_array_foreach (dying, i, p) {
        const char *uid = json_string_value(p);
        json_t *where = json_object_get(ks->uids, uid);
        json_t *pod =
            where ? json_object_get(pt->objs, json_string_value(json_array_get(where, 1))) : NULL;
        if (pod && ks_is_deleting(pod) &&
            json_array_size(kobj_path(pod, "metadata.finalizers")) == 0 &&
            !ks_node_external(ks_get(nt, "", kobj_path_str(pod, "spec.nodeName")))) {
            ks_remove(ks, pt, pod);
            changed = true;
        }
        json_object_del(ks->pod_dying, uid);
    }
    json_decref(dying);
    /* forget pods that are gone (with the log followed: those its deletions named, above) */
    void *tmp;
    json_t *v;
    if (!since)
        json_object_foreach_safe (ks->pod_born, tmp, k, v) {
            if (!json_object_get(ks->uids, k))
                json_object_del(ks->pod_born, k);
        }
    return changed;
}
