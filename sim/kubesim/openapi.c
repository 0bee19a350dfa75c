/* SPDX-License-Identifier: Apache-2.0 */
/* OpenAPI v2 and v3 documents for every kind kubesim serves, and field validation against them.
 * Built-in kinds come from a table of the fields kubesim knows (the top level, ObjectMeta, and
 * the specs of workloads, pods, containers and services); what the table leaves open is any
 * value, so every object the API server accepts is accepted. Custom resources carry their CRD's
 * openAPIV3Schema. The operations advertise the fieldValidation parameter as the API server's
 * do, so kubectl validates on the server (fieldValidation=Strict) instead of in the client. */
#include <inttypes.h>
#include <string.h>

#include "ks-openapi.h"

#define META      "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
#define POD_SPEC  "io.k8s.api.core.v1.PodSpec"
#define CONTAINER "io.k8s.api.core.v1.Container"
#define TEMPLATE  "io.k8s.api.core.v1.PodTemplateSpec"

/* A definition: its fields, comma-separated; "name=REF" is an object of that definition,
 * "name[]=REF" a list of them, a bare name any value. */
static const struct {
    const char *name, *fields;
} defs[] = {
    {META, "annotations,creationTimestamp,deletionGracePeriodSeconds,deletionTimestamp,"
           "finalizers,generateName,generation,labels,managedFields,name,namespace,"
           "ownerReferences,resourceVersion,selfLink,uid"},
    {TEMPLATE, "metadata=" META ",spec=" POD_SPEC},
    {POD_SPEC, "activeDeadlineSeconds,affinity,automountServiceAccountToken,containers[]=" CONTAINER
               ",dnsConfig,dnsPolicy,enableServiceLinks,ephemeralContainers,hostAliases,hostIPC,"
               "hostNetwork,hostPID,hostUsers,hostname,imagePullSecrets,initContainers[]=" CONTAINER
               ",nodeName,nodeSelector,os,overhead,preemptionPolicy,priority,priorityClassName,"
               "readinessGates,resourceClaims,resources,restartPolicy,runtimeClassName,"
               "schedulerName,schedulingGates,securityContext,serviceAccount,serviceAccountName,"
               "setHostnameAsFQDN,shareProcessNamespace,subdomain,terminationGracePeriodSeconds,"
               "tolerations,topologySpreadConstraints,volumes"},
    {CONTAINER, "args,command,env,envFrom,image,imagePullPolicy,lifecycle,livenessProbe,name,ports,"
                "readinessProbe,resizePolicy,resources,restartPolicy,securityContext,startupProbe,"
                "stdin,stdinOnce,terminationMessagePath,terminationMessagePolicy,tty,"
                "volumeDevices,volumeMounts,workingDir"},
    {"io.k8s.api.apps.v1.DeploymentSpec",
     "minReadySeconds,paused,progressDeadlineSeconds,replicas,"
     "revisionHistoryLimit,selector,strategy,template=" TEMPLATE},
    {"io.k8s.api.apps.v1.DaemonSetSpec",
     "minReadySeconds,revisionHistoryLimit,selector,template=" TEMPLATE ",updateStrategy"},
    {"io.k8s.api.apps.v1.ReplicaSetSpec", "minReadySeconds,replicas,selector,template=" TEMPLATE},
    {"io.k8s.api.batch.v1.JobSpec",
     "activeDeadlineSeconds,backoffLimit,backoffLimitPerIndex,completionMode,completions,"
     "managedBy,manualSelector,maxFailedIndexes,parallelism,podFailurePolicy,podReplacementPolicy,"
     "selector,successPolicy,suspend,template=" TEMPLATE ",ttlSecondsAfterFinished"},
    {"io.k8s.api.core.v1.ServiceSpec",
     "allocateLoadBalancerNodePorts,clusterIP,clusterIPs,externalIPs,externalName,"
     "externalTrafficPolicy,healthCheckNodePort,internalTrafficPolicy,ipFamilies,ipFamilyPolicy,"
     "loadBalancerClass,loadBalancerIP,loadBalancerSourceRanges,ports,publishNotReadyAddresses,"
     "selector,sessionAffinity,sessionAffinityConfig,trafficDistribution,type"},
    {"io.k8s.api.policy.v1.PodDisruptionBudgetSpec",
     "maxUnavailable,minAvailable,selector,unhealthyPodEvictionPolicy"},
};

/* The top-level fields of each built-in kind ("spec=REF" where kubesim knows the spec). */
static const struct {
    const char *group, *kind, *fields;
} kinds[] = {
    {"", "Namespace", "spec,status"},
    {"", "Node", "spec,status"},
    {"", "Pod", "spec=" POD_SPEC ",status"},
    {"", "ConfigMap", "binaryData,data,immutable"},
    {"", "Secret", "data,immutable,stringData,type"},
    {"", "ServiceAccount", "automountServiceAccountToken,imagePullSecrets,secrets"},
    {"", "Service", "spec=io.k8s.api.core.v1.ServiceSpec,status"},
    {"", "Endpoints", "subsets"},
    {"", "Event",
     "action,count,eventTime,firstTimestamp,involvedObject,lastTimestamp,message,"
     "reason,related,reportingComponent,reportingInstance,series,source,type"},
    {"apps", "DaemonSet", "spec=io.k8s.api.apps.v1.DaemonSetSpec,status"},
    {"apps", "Deployment", "spec=io.k8s.api.apps.v1.DeploymentSpec,status"},
    {"apps", "ReplicaSet", "spec=io.k8s.api.apps.v1.ReplicaSetSpec,status"},
    {"apps", "ControllerRevision", "data,revision"},
    {"batch", "Job", "spec=io.k8s.api.batch.v1.JobSpec,status"},
    {"rbac.authorization.k8s.io", "Role", "rules"},
    {"rbac.authorization.k8s.io", "ClusterRole", "aggregationRule,rules"},
    {"rbac.authorization.k8s.io", "RoleBinding", "roleRef,subjects"},
    {"rbac.authorization.k8s.io", "ClusterRoleBinding", "roleRef,subjects"},
    {"policy", "PodDisruptionBudget", "spec=io.k8s.api.policy.v1.PodDisruptionBudgetSpec,status"},
    {"coordination.k8s.io", "Lease", "spec"},
    {"events.k8s.io", "Event",
     "action,deprecatedCount,deprecatedFirstTimestamp,deprecatedLastTimestamp,deprecatedSource,"
     "eventTime,note,reason,regarding,related,reportingController,reportingInstance,series,type"},
    {"node.k8s.io", "RuntimeClass", "handler,overhead,scheduling"},
    {"apiextensions.k8s.io", "CustomResourceDefinition", "spec,status"},
};

static json_t *ref_to(const char *name, bool v2)
{
    _cleanup_free_ char *r = xasprintf("#/%s/%s", v2 ? "definitions" : "components/schemas", name);
    return json_pack("{s:s}", "$ref", r);
}

/* An object schema from a field list (see defs). */
static json_t *object_schema(const char *fields, bool v2)
{
    json_t *props = json_object();
    for (const char *p = fields; *p;) {
        const char *c = strchr(p, ',');
        size_t n = c ? (size_t)(c - p) : strlen(p);
        _cleanup_free_ char *f = xstrndup(p, n);
        char *eq = strchr(f, '=');
        json_t *s;
        if (eq) {
            *eq = '\0';
            size_t fl = strlen(f);
            bool list = fl > 2 && streq(f + fl - 2, "[]");
            if (list)
                f[fl - 2] = '\0';
            s = list ? json_pack("{s:s,s:o}", "type", "array", "items", ref_to(eq + 1, v2))
                     : ref_to(eq + 1, v2);
        } else if (streq(f, "apiVersion") || streq(f, "kind")) {
            s = json_pack("{s:s}", "type", "string");
        } else {
            /* any value: kubesim does not look into it (not an empty schema, which kubectl
             * explain cannot print) */
            s = json_pack("{s:s}", "description", "(not described by kubesim: any value)");
        }
        json_object_set_new(props, f, s);
        p += n + (c ? 1 : 0);
    }
    return json_pack("{s:s,s:o}", "type", "object", "properties", props);
}

/* io.k8s.api.apps.v1.Deployment and the like. */
static char *builtin_def_name(const char *group, const char *version, const char *kind)
{
    if (streq(group, "apiextensions.k8s.io"))
        return xasprintf("io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.%s.%s", version,
                         kind);
    size_t n = strcspn(group, ".");
    _cleanup_free_ char *pkg = group[0] ? xstrndup(group, n) : xstrdup("core");
    return xasprintf("io.k8s.api.%s.%s.%s", pkg, version, kind);
}

/* com.nvidia.v1.ClusterPolicy: the group reversed, as the API server names CRD schemas. */
static char *crd_def_name(const struct ks_type *t)
{
    struct sbuf b;
    sbuf_init(&b, strlen(t->group) + strlen(t->version) + strlen(t->kind) + 4);
    const char *end = t->group + strlen(t->group);
    while (end > t->group) {
        const char *dot = end;
        while (dot > t->group && dot[-1] != '.')
            dot--;
        sbuf_addf(&b, "%.*s.", (int)(end - dot), dot);
        end = dot > t->group ? dot - 1 : dot;
    }
    sbuf_addf(&b, "%s.%s", t->version, t->kind);
    return ks_text_take(&b);
}

static const char *builtin_fields(const struct ks_type *t)
{
    for (size_t i = 0; i < ARRAY_SIZE(kinds); i++)
        if (streq(kinds[i].group, t->group) && streq(kinds[i].kind, t->kind))
            return kinds[i].fields;
    return NULL;
}

static json_t *gvk_of(const struct ks_type *t)
{
    return json_pack("{s:s,s:s,s:s}", "group", t->group, "kind", t->kind, "version", t->version);
}

/* The CRD object that serves t, or NULL. */
static json_t *crd_of(struct ksim *ks, const struct ks_type *t)
{
    struct ks_type *crds =
        ks_type_find(ks, "apiextensions.k8s.io", "v1", "customresourcedefinitions");
    if (!crds)
        return NULL;
    _cleanup_free_ char *name = xasprintf("%s.%s", t->plural, t->group);
    return ks_get(crds, "", name);
}

static json_t *crd_version_schema(struct ksim *ks, const struct ks_type *t)
{
    json_t *crd = crd_of(ks, t);
    size_t i;
    json_t *v;
    json_array_foreach (kobj_path(crd, "spec.versions"), i, v)
        if (streq_ptr(kobj_str(v, "name"), t->version))
            return kobj_path(v, "schema.openAPIV3Schema");
    return NULL;
}

/* Adds t's kind schema (and what it refers to) to defs; returns its name. */
static char *add_kind_schema(struct ksim *ks, const struct ks_type *t, json_t *out, bool v2)
{
    char *name;
    json_t *s;
    if (t->crd) {
        name = crd_def_name(t);
        json_t *os = crd_version_schema(ks, t);
        s = os ? json_deep_copy(os)
               : json_pack("{s:s,s:b}", "type", "object", "x-kubernetes-preserve-unknown-fields",
                           1);
        if (!json_is_object(json_object_get(s, "properties")))
            json_object_set_new(s, "properties", json_object());
        json_t *props = json_object_get(s, "properties");
        if (!json_object_get(props, "apiVersion"))
            json_object_set_new(props, "apiVersion", json_pack("{s:s}", "type", "string"));
        if (!json_object_get(props, "kind"))
            json_object_set_new(props, "kind", json_pack("{s:s}", "type", "string"));
        json_object_set_new(props, "metadata", ref_to(META, v2));
    } else {
        const char *f = builtin_fields(t);
        name = builtin_def_name(t->group, t->version, t->kind);
        _cleanup_free_ char *all =
            xasprintf("apiVersion,kind,metadata=" META "%s%s", f && f[0] ? "," : "", f ? f : "");
        s = object_schema(all, v2);
        if (!f) /* a kind the table does not describe: anything goes */
            json_object_set_new(s, "x-kubernetes-preserve-unknown-fields", json_true());
    }
    json_object_set_new(s, "x-kubernetes-group-version-kind", json_pack("[o]", gvk_of(t)));
    json_object_set_new(out, name, s);
    return name;
}

static void add_defs(json_t *out, bool v2)
{
    for (size_t i = 0; i < ARRAY_SIZE(defs); i++)
        if (!json_object_get(out, defs[i].name))
            json_object_set_new(out, defs[i].name, object_schema(defs[i].fields, v2));
    if (!json_object_get(out, "io.k8s.apimachinery.pkg.apis.meta.v1.Patch"))
        json_object_set_new(out, "io.k8s.apimachinery.pkg.apis.meta.v1.Patch",
                            json_pack("{s:s,s:s}", "type", "object", "description",
                                      "Patch is provided to give a concrete name and type to the "
                                      "Kubernetes PATCH request body."));
}

json_t *ks_openapi_schema_for(struct ksim *ks, struct ks_type *t, json_t **ret_components)
{
    if (!t->crd && !builtin_fields(t))
        return NULL;
    /* a built-in kind's schema never changes: made once (every write's field validation reads
     * it); a custom resource's follows its CRD */
    if (!t->crd && t->openapi_schema) {
        *ret_components = json_incref(t->openapi_components);
        return json_incref(t->openapi_schema);
    }
    json_t *comp = json_object();
    add_defs(comp, false);
    _cleanup_free_ char *name = add_kind_schema(ks, t, comp, false);
    json_t *s = json_incref(json_object_get(comp, name));
    if (!t->crd) {
        t->openapi_schema = json_incref(s);
        t->openapi_components = json_incref(comp);
    }
    *ret_components = comp;
    return s;
}

/* ---- paths -------------------------------------------------------------------------------- */

static json_t *qparam(const char *name, const char *type, const char *desc, bool v2)
{
    json_t *p = json_pack("{s:s,s:s,s:s,s:b}", "name", name, "in", "query", "description", desc,
                          "uniqueItems", 1);
    if (v2)
        json_object_set_new(p, "type", json_string(type));
    else
        json_object_set_new(p, "schema", json_pack("{s:s,s:b}", "type", type, "uniqueItems", 1));
    return p;
}

static const char fv_desc[] =
    "fieldValidation instructs the server on how to handle objects in the request "
    "(POST/PUT/PATCH) containing unknown or duplicate fields. Valid values are: - Ignore: This "
    "will ignore any unknown fields that are silently dropped from the object, and will ignore "
    "all but the last duplicate field that the decoder encounters. - Warn: This will send a "
    "warning via the standard warning response header for each unknown field that is dropped "
    "from the object, and for each duplicate field that is encountered. The request will still "
    "succeed if there are no other errors, and will only persist the last of any duplicate "
    "fields. This is the default. - Strict: This will fail the request with a BadRequest error "
    "if any unknown fields would be dropped from the object, or if any duplicate fields are "
    "present. The error returned from the server will contain all unknown and duplicate fields "
    "encountered.";

static json_t *write_params(bool patch, bool v2)
{
    json_t *a = json_array();
    json_array_append_new(a, qparam("dryRun", "string",
                                    "When present, indicates that "
                                    "modifications should not be persisted.",
                                    v2));
    json_array_append_new(a, qparam("fieldManager", "string",
                                    "fieldManager is a name "
                                    "associated with the actor or entity that is making these "
                                    "changes.",
                                    v2));
    json_array_append_new(a, qparam("fieldValidation", "string", fv_desc, v2));
    if (patch)
        json_array_append_new(a, qparam("force", "boolean",
                                        "Force is going to \"force\" Apply "
                                        "requests.",
                                        v2));
    return a;
}

/* Patch operations do not list application/strategic-merge-patch+json, although kubesim takes
 * it for built-in kinds: kubectl apply computes a strategic merge patch from the OpenAPI schema
 * of a kind whose patch operation lists it, and kubesim's schemas lack the merge keys
 * (x-kubernetes-patch-merge-key) of the lists they leave open; without it kubectl falls back
 * to its compiled-in types, which carry every merge key, as the API server's full schemas do. */
static json_t *operation(const struct ks_type *t, const char *action, const char *def, bool v2)
{
    static const char *const patch_types[] = {
        "application/json-patch+json", "application/merge-patch+json",
        "application/strategic-merge-patch+json", "application/apply-patch+yaml"};
    bool patch = streq(action, "patch");
    bool write = patch || streq(action, "post") || streq(action, "put");
    json_t *op = json_pack("{s:s,s:o,s:s}", "x-kubernetes-action", action,
                           "x-kubernetes-group-version-kind", gvk_of(t), "description", action);
    json_t *resp_schema = ref_to(def, v2);
    if (v2) {
        json_object_set_new(
            op, "responses",
            json_pack("{s:{s:s,s:o}}", "200", "description", "OK", "schema", resp_schema));
        json_object_set_new(op, "produces",
                            json_pack("[ss]", "application/json", "application/yaml"));
    } else {
        json_object_set_new(op, "responses",
                            json_pack("{s:{s:s,s:{s:{s:o}}}}", "200", "description", "OK",
                                      "content", "application/json", "schema", resp_schema));
    }
    if (!write)
        return op;
    json_object_set_new(op, "parameters", write_params(patch, v2));
    json_t *types = json_array();
    if (patch) {
        for (size_t i = 0; i < ARRAY_SIZE(patch_types); i++)
            if (i != 2)
                json_array_append_new(types, json_string(patch_types[i]));
    } else {
        json_array_append_new(types, json_string("*/*"));
    }
    const char *body_def = patch ? "io.k8s.apimachinery.pkg.apis.meta.v1.Patch" : def;
    if (v2) {
        json_object_set_new(op, "consumes", types);
        json_array_append_new(json_object_get(op, "parameters"),
                              json_pack("{s:s,s:s,s:b,s:o}", "name", "body", "in", "body",
                                        "required", 1, "schema", ref_to(body_def, v2)));
    } else {
        json_t *content = json_object();
        size_t i;
        json_t *ct;
        json_array_foreach (types, i, ct)
            json_object_set_new(content, json_string_value(ct),
                                json_pack("{s:o}", "schema", ref_to(body_def, v2)));
        json_decref(types);
        json_object_set_new(op, "requestBody",
                            json_pack("{s:o,s:b}", "content", content, "required", 1));
    }
    return op;
}

static void add_paths(const struct ks_type *t, const char *def, json_t *paths, bool v2)
{
    _cleanup_free_ char *base =
        t->group[0] ? xasprintf("/apis/%s/%s", t->group, t->version) : xstrdup("/api/v1");
    _cleanup_free_ char *coll =
        xasprintf("%s%s/%s", base, t->namespaced ? "/namespaces/{namespace}" : "", t->plural);
    _cleanup_free_ char *item = xasprintf("%s/{name}", coll);
    json_object_set_new(paths, coll,
                        json_pack("{s:o,s:o}", "get", operation(t, "list", def, v2), "post",
                                  operation(t, "post", def, v2)));
    json_object_set_new(paths, item,
                        json_pack("{s:o,s:o,s:o,s:o}", "get", operation(t, "get", def, v2), "put",
                                  operation(t, "put", def, v2), "patch",
                                  operation(t, "patch", def, v2), "delete",
                                  operation(t, "delete", def, v2)));
    if (t->has_status) {
        _cleanup_free_ char *st = xasprintf("%s/status", item);
        json_object_set_new(paths, st,
                            json_pack("{s:o,s:o,s:o}", "get", operation(t, "get", def, v2), "put",
                                      operation(t, "put", def, v2), "patch",
                                      operation(t, "patch", def, v2)));
    }
}

/* The document for one group-version (group NULL: every one, the v2 document). */
static json_t *document(struct ksim *ks, const char *group, const char *version, bool v2)
{
    json_t *paths = json_object();
    json_t *schemas = json_object();
    add_defs(schemas, v2);
    for (struct ks_type *t = ks->types; t; t = t->next) {
        if (!t->served || (group && (!streq(t->group, group) || !streq(t->version, version))))
            continue;
        _cleanup_free_ char *def = add_kind_schema(ks, t, schemas, v2);
        add_paths(t, def, paths, v2);
    }
    json_t *info = json_pack("{s:s,s:s}", "title", "Kubernetes", "version", "v1.32.0");
    if (v2)
        return json_pack("{s:s,s:o,s:o,s:o}", "swagger", "2.0", "info", info, "paths", paths,
                         "definitions", schemas);
    return json_pack("{s:s,s:o,s:o,s:{s:o}}", "openapi", "3.0.0", "info", info, "paths", paths,
                     "components", "schemas", schemas);
}

/* A content hash for the index's URLs (clients cache a document by it). */
static char *doc_hash(json_t *doc)
{
    _cleanup_free_ char *s = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS);
    uint64_t h1 = 1469598103934665603ull, h2 = 1099511628211ull * 31;
    for (const char *p = s ? s : ""; *p; p++) {
        h1 = (h1 ^ (unsigned char)*p) * 1099511628211ull;
        h2 = (h2 ^ (unsigned char)*p) * 1099511628211ull + 0x9e3779b97f4a7c15ull;
    }
    return xasprintf("%016" PRIX64 "%016" PRIX64, h1, h2);
}

bool ks_openapi(struct ksim *ks, const struct ksim_request *req, struct ksim_response *resp)
{
    const char *p = req->path ? req->path : "";
    if (!str_has_prefix(p, "/openapi/") || !streq_ptr(req->method, "GET"))
        return false;
    strlcpy_s(resp->verb, "get", sizeof(resp->verb));
    strlcpy_s(resp->resource, "openapi", sizeof(resp->resource));
    if (streq(p, "/openapi/v2")) {
        /* JSON only: a client that accepts only the protobuf encoding (client-go's
         * OpenAPISchema) gets 406, as from a server that cannot produce it */
        const char *acc = req->accept ? req->accept : "";
        if (acc[0] && !strstr(acc, "json") && !strstr(acc, "*/*")) {
            _cleanup_status_ struct ks_status st = {0};
            ks_status_set(&st, 406, "NotAcceptable", NULL,
                          "the server was unable to respond with a content type that the client "
                          "supports (%s)",
                          acc);
            ks_render_status(resp, &st);
            return true;
        }
        ks_json_response(resp, 200, document(ks, NULL, NULL, true));
        return true;
    }
    if (streq(p, "/openapi/v3") || streq(p, "/openapi/v3/")) {
        json_t *idx = json_object();
        for (struct ks_type *t = ks->types; t; t = t->next) {
            if (!t->served)
                continue;
            _cleanup_free_ char *key =
                t->group[0] ? xasprintf("apis/%s/%s", t->group, t->version) : xstrdup("api/v1");
            if (json_object_get(idx, key))
                continue;
            _cleanup_json_ json_t *doc = document(ks, t->group, t->version, false);
            _cleanup_free_ char *h = doc_hash(doc);
            _cleanup_free_ char *url = xasprintf("/openapi/v3/%s?hash=%s", key, h);
            json_object_set_new(idx, key, json_pack("{s:s}", "serverRelativeURL", url));
        }
        ks_json_response(resp, 200, json_pack("{s:o}", "paths", idx));
        return true;
    }
    const char *rest = NULL;
    _cleanup_free_ char *group = NULL, *version = NULL;
    if (str_has_prefix(p, "/openapi/v3/api/")) {
        group = xstrdup("");
        version = xstrdup(p + strlen("/openapi/v3/api/"));
    } else if (str_has_prefix(p, "/openapi/v3/apis/")) {
        rest = p + strlen("/openapi/v3/apis/");
        const char *slash = strchr(rest, '/');
        if (slash) {
            group = xstrndup(rest, (size_t)(slash - rest));
            version = xstrdup(slash + 1);
        }
    }
    bool found = false;
    for (struct ks_type *t = ks->types; group && t; t = t->next)
        if (t->served && streq(t->group, group) && streq(t->version, version))
            found = true;
    if (!found) {
        _cleanup_status_ struct ks_status st = {0};
        ks_status_set(&st, 404, "NotFound", NULL,
                      "the server could not find the requested resource");
        ks_render_status(resp, &st);
        return true;
    }
    ks_json_response(resp, 200, document(ks, group, version, false));
    return true;
}

/* ---- field validation --------------------------------------------------------------------- */

static json_t *resolve(json_t *s, json_t *comp)
{
    for (int i = 0; i < 8 && s; i++) {
        const char *ref = kobj_str(s, "$ref");
        if (!ref) {
            /* allOf: [{$ref}] as CRD-less schemas wrap references */
            json_t *all = json_object_get(s, "allOf");
            if (json_array_size(all) == 1 && kobj_str(json_array_get(all, 0), "$ref")) {
                s = json_array_get(all, 0);
                continue;
            }
            return s;
        }
        const char *slash = strrchr(ref, '/');
        s = json_object_get(comp, slash ? slash + 1 : ref);
    }
    return s;
}

static void walk(json_t *v, json_t *s, json_t *comp, bool patch, bool crd, struct sbuf *path,
                 json_t *out)
{
    s = resolve(s, comp);
    if (!s || json_is_true(json_object_get(s, "x-kubernetes-preserve-unknown-fields")))
        return;
    size_t mark = path->len;
    if (json_is_array(v)) {
        json_t *items = json_object_get(s, "items");
        size_t i;
        json_t *e;
        json_array_foreach (v, i, e) {
            if (!items)
                break;
            sbuf_addf(path, "[%zu]", i);
            walk(e, items, comp, patch, crd, path, out);
            path->len = mark;
            path->data[mark] = '\0';
        }
        return;
    }
    if (!json_is_object(v))
        return;
    json_t *props = json_object_get(s, "properties");
    json_t *addl = json_object_get(s, "additionalProperties");
    if (!json_is_object(props))
        props = NULL;
    /* A built-in's open part is any value; a CRD's object without properties keeps nothing
     * (structural schemas prune it) unless it is a map or preserves unknown fields. */
    bool closed = props || (crd && !json_is_object(addl) && !json_is_true(addl) &&
                            streq_ptr(kobj_str(s, "type"), "object"));
    const char *k;
    json_t *x;
    json_object_foreach (v, k, x) {
        if (patch && (k[0] == '$' || json_is_null(x)))
            continue;
        json_t *sub = props ? json_object_get(props, k) : NULL;
        if (path->len)
            sbuf_addf(path, ".");
        sbuf_addf(path, "%s", k);
        if (sub)
            walk(x, sub, comp, patch, crd, path, out);
        else if (closed)
            json_array_append_new(out, json_string(path->data));
        else if (json_is_object(addl))
            walk(x, addl, comp, patch, crd, path, out);
        path->len = mark;
        if (path->data)
            path->data[mark] = '\0';
    }
}

/* A custom resource's schema for validation: the CRD's own (not copied: this runs on every
 * write) under a shallow top level that adds apiVersion, kind and metadata. */
static json_t *crd_check_schema(struct ksim *ks, struct ks_type *t)
{
    json_t *os = crd_version_schema(ks, t);
    if (!os)
        return NULL;
    json_t *top = json_copy(os);
    json_t *props = json_object_get(os, "properties");
    props = json_is_object(props) ? json_copy(props) : json_object();
    json_object_set_new(props, "apiVersion", json_pack("{s:s}", "type", "string"));
    json_object_set_new(props, "kind", json_pack("{s:s}", "type", "string"));
    json_object_set_new(props, "metadata", ref_to(META, false));
    json_object_set_new(top, "properties", props);
    return top;
}

static json_t *unknown_fields(struct ksim *ks, struct ks_type *t, json_t *obj, bool patch)
{
    json_t *out = json_array();
    _cleanup_json_ json_t *comp = NULL;
    _cleanup_json_ json_t *s = NULL;
    if (t->crd) {
        s = crd_check_schema(ks, t);
        comp = json_object();
        add_defs(comp, false);
    } else {
        s = ks_openapi_schema_for(ks, t, &comp);
    }
    if (!s)
        return out;
    struct sbuf path;
    sbuf_init(&path, 64 * 1024);
    sbuf_addf(&path, "%s", "");
    walk(obj, s, comp, patch, t->crd, &path, out);
    sbuf_free(&path);
    return out;
}

json_t *ks_openapi_unknown_fields(struct ksim *ks, struct ks_type *t, json_t *obj)
{
    return unknown_fields(ks, t, obj, false);
}

int ks_field_validation_of(json_t *q, enum ks_field_validation *ret, struct ks_status *st)
{
    const char *v = ks_qget(q, "fieldValidation");
    if (!v || !v[0] || streq(v, "Warn"))
        *ret = KS_FV_WARN;
    else if (streq(v, "Strict"))
        *ret = KS_FV_STRICT;
    else if (streq(v, "Ignore"))
        *ret = KS_FV_IGNORE;
    else
        return ks_status_set(st, 400, "BadRequest", NULL,
                             "fieldValidation: Invalid value: \"%s\": fieldValidation must be one "
                             "of Ignore, Warn, or Strict",
                             v);
    return 0;
}

int ks_field_validate(struct ksim *ks, struct ks_type *t, json_t *obj, enum ks_field_validation fv,
                      bool apply, struct ksim_response *resp, struct ks_status *st)
{
    if (fv == KS_FV_IGNORE || !json_is_object(obj))
        return 0;
    _cleanup_json_ json_t *unk = unknown_fields(ks, t, obj, true);
    if (!json_array_size(unk))
        return 0;
    size_t i;
    json_t *f;
    if (fv == KS_FV_WARN) {
        if (!resp->warnings)
            resp->warnings = json_array();
        json_array_foreach (unk, i, f) {
            const char *fmt = apply ? ".%s: field not declared in schema" : "unknown field \"%s\"";
            json_array_append_new(resp->warnings, json_sprintf(fmt, json_string_value(f)));
        }
        return 0;
    }
    struct sbuf m;
    sbuf_init(&m, 64 * 1024);
    if (apply) {
        json_array_foreach (unk, i, f)
            sbuf_addf(&m, "%s.%s: field not declared in schema", i ? ", " : "",
                      json_string_value(f));
    } else {
        sbuf_addf(&m, "%s in version \"%s\" cannot be handled as a %s: strict decoding error: ",
                  t->kind, t->version, t->kind);
        json_array_foreach (unk, i, f)
            sbuf_addf(&m, "%sunknown field \"%s\"", i ? ", " : "", json_string_value(f));
    }
    int r = ks_status_set(st, 400, "BadRequest", NULL, "%s", m.data ? m.data : "");
    sbuf_free(&m);
    return r;
}
