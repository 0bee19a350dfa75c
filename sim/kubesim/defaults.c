/* SPDX-License-Identifier: Apache-2.0 */
/* What the API server fills in on create: generated names, type defaults, Secret stringData. */
#include <string.h>

#include "ks-objects.h"

void ks_random_suffix(struct ksim *ks, char *buf)
{
    static const char alpha[] = "bcdfghjklmnpqrstvwxz2456789";
    uint64_t x = (++ks->uid_counter + ks_now(ks)) * 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < 5; i++) {
        buf[i] = alpha[x % 27];
        x /= 27;
    }
    buf[5] = '\0';
}

void ks_secret_string_data(json_t *obj)
{
    json_t *sd = json_object_get(obj, "stringData");
    if (!sd)
        return;
    const char *k;
    json_t *v;
    json_object_foreach (sd, k, v) {
        const char *s = json_string_value(v);
        if (!s)
            continue;
        char *b = base64_encode((const unsigned char *)s, strlen(s));
        json_object_set_new(kobj_ensure_object(obj, "data"), k, json_string(b));
        free(b);
    }
    json_object_del(obj, "stringData");
    if (!json_object_get(obj, "type"))
        json_object_set_new(obj, "type", json_string("Opaque"));
}

/* What a container's defaults add: requests at their limits where unset and, for containers
 * (pull), imagePullPolicy and terminationMessagePath. Copies only the containers it changes. */
static void default_containers(json_t *spec, const char *list, bool pull)
{
    json_t *arr = json_object_get(spec, list);
    bool copied = false;
    size_t i;
    json_t *c;
    json_array_foreach (arr, i, c) {
        if (!json_is_object(c))
            continue;
        json_t *limits = kobj_path(c, "resources.limits");
        bool add_req = false;
        if (json_is_object(limits)) {
            json_t *req = kobj_path(c, "resources.requests");
            const char *k;
            json_t *v;
            json_object_foreach (limits, k, v)
                if (!json_object_get(req, k))
                    add_req = true;
        }
        bool add_pull = pull && !json_object_get(c, "imagePullPolicy");
        bool add_msg = pull && !json_object_get(c, "terminationMessagePath");
        if (!add_req && !add_pull && !add_msg)
            continue;
        if (!copied) {
            arr = json_copy(arr);
            json_object_set_new(spec, list, arr);
            copied = true;
        }
        c = json_copy(c);
        json_array_set_new(arr, i, c);
        if (add_req) {
            /* a resource with a limit and no request is requested at its limit */
            json_t *res = ks_own_member(c, "resources");
            json_t *req = ks_own_member(res, "requests");
            const char *k;
            json_t *v;
            json_object_foreach (limits, k, v)
                if (!json_object_get(req, k))
                    json_object_set(req, k, v);
        }
        if (add_pull) {
            const char *img = kobj_str(c, "image");
            json_object_set_new(
                c, "imagePullPolicy",
                json_string(img && (str_has_suffix(img, ":latest") || !strchr(img, ':'))
                                ? "Always"
                                : "IfNotPresent"));
        }
        if (add_msg)
            json_object_set_new(c, "terminationMessagePath", json_string("/dev/termination-log"));
    }
}

/* Type-specific defaults on create, as the API server's strategies and defaulters set them. */
void ks_defaults_on_create(struct ksim *ks, struct ks_type *t, json_t *obj)
{
    char now[40];
    ks_now_str(ks, now, sizeof(now));
    if (t->crd) {
        if (t->has_status)
            json_object_del(obj, "status");
        return;
    }
    const char *p = t->plural;
    if (ks_dra_type(t) && streq(p, "resourceclaims")) {
        /* a claim starts unallocated: its status is the scheduler's and the drivers' */
        json_object_del(obj, "status");
        return;
    }
    if (!t->group[0] && streq(p, "namespaces")) {
        json_object_set_new(kobj_ensure_object(obj, "spec"), "finalizers",
                            json_pack("[s]", "kubernetes"));
        json_object_set_new(kobj_ensure_object(obj, "status"), "phase", json_string("Active"));
        json_object_set_new(kobj_ensure_object(kobj_ensure_object(obj, "metadata"), "labels"),
                            "kubernetes.io/metadata.name", json_string(ks_obj_name(obj)));
    } else if (!t->group[0] && streq(p, "pods")) {
        json_t *spec = kobj_ensure_object(obj, "spec");
        if (!json_object_get(spec, "restartPolicy"))
            json_object_set_new(spec, "restartPolicy", json_string("Always"));
        if (!json_object_get(spec, "terminationGracePeriodSeconds"))
            json_object_set_new(spec, "terminationGracePeriodSeconds", json_integer(30));
        if (!json_object_get(spec, "dnsPolicy"))
            json_object_set_new(spec, "dnsPolicy", json_string("ClusterFirst"));
        if (!json_object_get(spec, "schedulerName"))
            json_object_set_new(spec, "schedulerName", json_string("default-scheduler"));
        if (!json_object_get(spec, "serviceAccountName"))
            json_object_set_new(spec, "serviceAccountName", json_string("default"));
        static const char *const lists[] = {"initContainers", "containers"};
        for (size_t l = 0; l < ARRAY_SIZE(lists); l++)
            default_containers(spec, lists[l], l == 1);
        json_t *st = json_pack("{s:s,s:s}", "phase", "Pending", "qosClass", "BestEffort");
        if (kobj_path_str(obj, "spec.nodeName"))
            json_object_set_new(st, "conditions",
                                json_pack("[{s:s,s:s,s:n,s:s}]", "type", "PodScheduled", "status",
                                          "True", "lastProbeTime", "lastTransitionTime", now));
        json_object_set_new(obj, "status", st);
    } else if (!t->group[0] && streq(p, "secrets")) {
        ks_secret_string_data(obj);
        if (!json_object_get(obj, "type"))
            json_object_set_new(obj, "type", json_string("Opaque"));
    } else if (!t->group[0] && streq(p, "services")) {
        json_t *spec = kobj_ensure_object(obj, "spec");
        if (!json_object_get(spec, "type"))
            json_object_set_new(spec, "type", json_string("ClusterIP"));
        if (!json_object_get(spec, "clusterIP")) {
            char ip[32];
            snprintf(ip, sizeof(ip), "10.96.%u.%u", (unsigned)(ks->rv / 250 % 250),
                     (unsigned)(ks->rv % 250 + 2));
            json_object_set_new(spec, "clusterIP", json_string(ip));
            json_object_set_new(spec, "clusterIPs", json_pack("[s]", ip));
        }
        json_object_set_new(obj, "status", json_pack("{s:{}}", "loadBalancer"));
    } else if (streq(t->group, "apps") && streq(p, "daemonsets")) {
        json_t *spec = kobj_ensure_object(obj, "spec");
        if (!json_object_get(spec, "updateStrategy"))
            json_object_set_new(spec, "updateStrategy",
                                json_pack("{s:s,s:{s:i,s:i}}", "type", "RollingUpdate",
                                          "rollingUpdate", "maxUnavailable", 1, "maxSurge", 0));
        if (!json_object_get(spec, "revisionHistoryLimit"))
            json_object_set_new(spec, "revisionHistoryLimit", json_integer(10));
        json_object_set_new(obj, "status",
                            json_pack("{s:i,s:i,s:i,s:i}", "currentNumberScheduled", 0,
                                      "numberMisscheduled", 0, "desiredNumberScheduled", 0,
                                      "numberReady", 0));
    } else if (streq(t->group, "apps") && streq(p, "deployments")) {
        json_t *spec = kobj_ensure_object(obj, "spec");
        if (!json_object_get(spec, "replicas"))
            json_object_set_new(spec, "replicas", json_integer(1));
        /* As the API server's defaulting: a strategy without a type is RollingUpdate, and a
         * RollingUpdate without parameters gets 25%/25% (clients such as helm --wait read them). */
        json_t *strategy = kobj_ensure_object(spec, "strategy");
        if (!json_is_string(json_object_get(strategy, "type")))
            json_object_set_new(strategy, "type", json_string("RollingUpdate"));
        if (streq(json_string_value(json_object_get(strategy, "type")), "RollingUpdate") &&
            !json_object_get(strategy, "rollingUpdate"))
            json_object_set_new(strategy, "rollingUpdate",
                                json_pack("{s:s,s:s}", "maxUnavailable", "25%", "maxSurge", "25%"));
        if (!json_object_get(spec, "revisionHistoryLimit"))
            json_object_set_new(spec, "revisionHistoryLimit", json_integer(10));
        if (!json_object_get(spec, "progressDeadlineSeconds"))
            json_object_set_new(spec, "progressDeadlineSeconds", json_integer(600));
        json_object_set_new(obj, "status", json_object());
    } else if (streq(t->group, "policy")) {
        json_object_set_new(obj, "status",
                            json_pack("{s:i,s:i,s:i,s:i}", "disruptionsAllowed", 0,
                                      "currentHealthy", 0, "desiredHealthy", 0, "expectedPods", 0));
    } else if (streq(t->group, "apiextensions.k8s.io")) {
        json_t *names = json_deep_copy(kobj_path(obj, "spec.names"));
        if (json_is_object(names) && !json_object_get(names, "singular") && kobj_kind(names)) {
            char *s = ks_lower_dup(kobj_kind(names));
            json_object_set_new(names, "singular", json_string(s));
            free(s);
        }
        if (json_is_object(names) && !json_object_get(names, "listKind") && kobj_kind(names)) {
            _cleanup_free_ char *lk = xasprintf("%sList", kobj_kind(names));
            json_object_set_new(names, "listKind", json_string(lk));
        }
        json_t *stored = json_array();
        size_t i;
        json_t *v;
        json_array_foreach (kobj_path(obj, "spec.versions"), i, v)
            if (json_is_true(json_object_get(v, "storage")))
                json_array_append(stored, json_object_get(v, "name"));
        json_object_set_new(
            obj, "status",
            json_pack("{s:[{s:s,s:s,s:s,s:s,s:s},{s:s,s:s,s:s,s:s,s:s}],s:o,s:o}", "conditions",
                      "type", "NamesAccepted", "status", "True", "lastTransitionTime", now,
                      "reason", "NoConflicts", "message", "no conflicts found", "type",
                      "Established", "status", "True", "lastTransitionTime", now, "reason",
                      "InitialNamesAccepted", "message", "the initial names have been accepted",
                      "acceptedNames", names ? names : json_object(), "storedVersions", stored));
    }
}
