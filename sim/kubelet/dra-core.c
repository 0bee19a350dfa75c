/* SPDX-License-Identifier: Apache-2.0 */
/* kl-dra's pure parts (kl-dra.h): which claims a pod uses, which CDI devices a container gets
 * from them, and the check of a plugin's registration. */
#include <errno.h>
#include <string.h>

#include "kl-dra.h"
#include "kobj.h"

#define DRA_SERVICE_V1 "v1.DRAPlugin"

int kl_dra_pod_claims(const json_t *pod, json_t **ret, struct err *e)
{
    json_t *out = json_array();
    size_t i;
    json_t *pc;
    json_array_foreach (kobj_path(pod, "spec.resourceClaims"), i, pc) {
        const char *name = kobj_str(pc, "name");
        const char *claim = kobj_str(pc, "resourceClaimName");
        if (!name)
            continue;
        if (!claim && kobj_str(pc, "resourceClaimTemplateName")) {
            bool found = false;
            size_t k;
            json_t *st;
            json_array_foreach (kobj_path(pod, "status.resourceClaimStatuses"), k, st)
                if (streq_ptr(kobj_str(st, "name"), name)) {
                    found = true;
                    claim = kobj_str(st, "resourceClaimName");
                }
            if (!found) {
                json_decref(out);
                return err_set(e, -EAGAIN,
                               "prepare resource claim: pod \"%s/%s\": ResourceClaim not created "
                               "yet",
                               kobj_namespace(pod) ?: "", kobj_name(pod) ?: "");
            }
            if (!claim)
                continue; /* no claim needed for this entry */
        }
        if (!claim)
            continue;
        json_array_append_new(out, json_pack("{s:s,s:s}", "podClaim", name, "claim", claim));
    }
    const char *ext = kobj_path_str(pod, "status.extendedResourceClaimStatus.resourceClaimName");
    if (ext)
        json_array_append_new(out, json_pack("{s:b,s:s}", "extended", 1, "claim", ext));
    *ret = out;
    return 0;
}

static bool names_request(json_t *device, const char *request)
{
    json_t *names = json_object_get(device, "requestNames");
    if (!request || json_array_size(names) == 0)
        return true;
    size_t rl = strlen(request), i;
    json_t *n;
    json_array_foreach (names, i, n) {
        const char *s = json_string_value(n);
        if (!s)
            continue;
        /* a subrequest's result "req/sub" answers to its request "req" */
        if (!strncmp(s, request, rl) && (s[rl] == '\0' || s[rl] == '/'))
            return true;
    }
    return false;
}

static void add_ids(json_t *out, json_t *seen, json_t *device)
{
    size_t i;
    json_t *id;
    json_array_foreach (json_object_get(device, "cdiDeviceIDs"), i, id) {
        const char *s = json_string_value(id);
        if (!s || json_object_get(seen, s))
            continue;
        json_object_set_new(seen, s, json_true());
        json_array_append(out, id);
    }
}

static const json_t *container_spec(const json_t *pod, const char *name)
{
    static const char *const lists[] = {"initContainers", "containers"};
    for (size_t l = 0; l < ARRAY_SIZE(lists); l++) {
        size_t i;
        json_t *c;
        json_array_foreach (json_object_get(json_object_get(pod, "spec"), lists[l]), i, c)
            if (streq_ptr(kobj_str(c, "name"), name))
                return c;
    }
    return NULL;
}

json_t *kl_dra_container_cdi(const json_t *pod, const char *container, const json_t *claims,
                             const char *ext_uid, const json_t *prepared)
{
    json_t *out = json_array(), *seen = json_object();
    const json_t *c = container_spec(pod, container);
    size_t i;
    json_t *rc;
    json_array_foreach (kobj_path(c, "resources.claims"), i, rc) {
        const char *uid = json_string_value(json_object_get(claims, kobj_str(rc, "name") ?: ""));
        if (!uid)
            continue;
        const char *req = kobj_str(rc, "request");
        if (req && !req[0])
            req = NULL;
        size_t k;
        json_t *dev;
        json_array_foreach (json_object_get(prepared, uid), k, dev)
            if (names_request(dev, req))
                add_ids(out, seen, dev);
    }
    if (ext_uid) {
        json_array_foreach (kobj_path(pod, "status.extendedResourceClaimStatus.requestMappings"), i,
                            rc) {
            if (!streq_ptr(kobj_str(rc, "containerName"), container))
                continue;
            const char *req = kobj_str(rc, "requestName");
            size_t k;
            json_t *dev;
            json_array_foreach (json_object_get(prepared, ext_uid), k, dev)
                if (req && names_request(dev, req))
                    add_ids(out, seen, dev);
        }
    }
    json_decref(seen);
    return out;
}

int kl_dra_check_plugin(const char *socket_path, const char *type, const char *name,
                        const char *endpoint, const char *const *versions, size_t n_versions,
                        struct err *e)
{
    if (!streq_ptr(type, "DRAPlugin"))
        return err_set(e, -EINVAL,
                       "RegisterPlugin error -- no handler registered for plugin type: %s at "
                       "socket %s",
                       type ? type : "", socket_path);
    if (!name || !name[0])
        return err_set(e, -EINVAL, "RegisterPlugin error -- plugin name is empty at socket %s",
                       socket_path);
    if (n_versions == 0)
        return err_set(e, -EINVAL,
                       "invalid versions of plugin %s: empty list of supported versions", name);
    bool ok = false;
    for (size_t i = 0; i < n_versions; i++)
        ok |= streq_ptr(versions[i], DRA_SERVICE_V1);
    if (!ok) {
        struct sbuf b;
        sbuf_init(&b, 4096);
        for (size_t i = 0; i < n_versions; i++)
            sbuf_addf(&b, "%s%s", i ? " " : "", versions[i] ? versions[i] : "");
        int r = err_set(e, -EINVAL,
                        "invalid versions of plugin %s: none of the supported services [%s] is "
                        "implemented by this kubelet [%s]",
                        name, sbuf_check(&b) == 0 ? b.data : "...", DRA_SERVICE_V1);
        sbuf_free(&b);
        return r;
    }
    if (!endpoint || endpoint[0] != '/')
        return err_set(e, -EINVAL,
                       "RegisterPlugin error -- plugin %s: endpoint \"%s\" is not an absolute path",
                       name, endpoint ? endpoint : "");
    return 0;
}
