/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubesim's object layer: validation, defaults and the lifecycle of objects (create, update,
 * patch, apply, delete, bind, scale, evict) over the store. Every operation returns 0 or a
 * negative errno and describes its outcome in a struct ks_status, which the HTTP layer renders
 * as a Kubernetes Status and controllers may ignore. Runs under ks->lock; knows nothing of
 * requests or responses.
 */
#ifndef GPUOP_KS_OBJECTS_H
#define GPUOP_KS_OBJECTS_H

#include "kubesim-internal.h"

/* ---- status ------------------------------------------------------------------------------- */

struct ks_status {
    int code;           /* HTTP status code: 2xx on success */
    const char *reason; /* static string: "NotFound", "Invalid", "" on success */
    char *message;      /* "" or NULL: none */
    json_t *details;    /* Status details (name, group, kind, uid, causes), or NULL */
};

void ks_status_clear(struct ks_status *st);
#define _cleanup_status_ _cleanup_(ks_status_clear)
/* Replaces st; details is stolen. Returns the negative errno matching code (0 for 2xx). */
int ks_status_set(struct ks_status *st, int code, const char *reason, json_t *details,
                  const char *fmt, ...) GPUOP_PRINTF(5, 6);
int ks_status_vset(struct ks_status *st, int code, const char *reason, json_t *details,
                   const char *fmt, va_list ap);
int ks_status_ok(struct ks_status *st, int code, json_t *details);
json_t *ks_status_details(struct ks_type *t, const char *name);
int ks_not_found(struct ks_status *st, struct ks_type *t, const char *name);
int ks_not_found_resource(struct ks_status *st);
int ks_bad_request(struct ks_status *st, const char *msg);
int ks_method_not_allowed(struct ks_status *st);
int ks_conflict(struct ks_status *st, struct ks_type *t, const char *name);
/* 422 from causes [{reason, message, field}] (stolen). */
int ks_invalid(struct ks_status *st, struct ks_type *t, const char *name, json_t *causes);

/* ---- validation and defaults -------------------------------------------------------------- */

void ks_add_cause(json_t *causes, const char *reason, const char *field, const char *fmt, ...)
    GPUOP_PRINTF(4, 5);
/* The decoder's type checks of a built-in object (metadata maps and lists, int32 and
 * int-or-string fields, quantities): 400 with Go's message. */
int ks_decode_check(struct ks_type *t, json_t *obj, struct ks_status *st);
/* The API server's texts for names that are not DNS-1123 labels or subdomains. */
extern const char ks_msg_dns_label[], ks_msg_dns_subdomain[];
void ks_validate_name(struct ks_type *t, const char *name, json_t *causes);
void ks_validate_labels(json_t *obj, json_t *causes);
void ks_validate_type(struct ksim *ks, struct ks_type *t, json_t *obj, json_t *causes);
/* Fields an update may not change; also keeps a Service's allocated clusterIP in res. */
void ks_validate_immutable(struct ks_type *t, json_t *old, json_t *res, json_t *causes);

/* validate-dra.c: resource.k8s.io/v1 (Dynamic Resource Allocation). */
bool ks_dra_type(struct ks_type *t);
/* The decoder's defaults of a write (allocationMode ExactCount, count 1, ...). */
void ks_dra_defaults(struct ks_type *t, json_t *obj);
void ks_dra_validate(struct ks_type *t, json_t *obj, json_t *causes);
/* What an update may not change (a claim's or template's spec; a slice's driver, pool, node). */
void ks_dra_validate_update(struct ks_type *t, json_t *old, json_t *res, json_t *causes);
/* A ResourceClaim's /status write (reservations, the allocation). */
void ks_dra_validate_status(struct ks_type *t, json_t *old, json_t *res, json_t *causes);
/* A pod's spec.resourceClaims and its containers' resources.claims. */
void ks_dra_validate_pod(json_t *pod, json_t *causes);

void ks_random_suffix(struct ksim *ks, char *buf); /* buf >= 6 bytes */
/* Secrets: stringData merged into data (base64) and dropped. */
void ks_secret_string_data(json_t *obj);
void ks_defaults_on_create(struct ksim *ks, struct ks_type *t, json_t *obj);

/* ---- lifecycle ---------------------------------------------------------------------------- */

/* Creates obj (stolen) in ns as a POST would; dry: validate and default only. On success
 * *ret_obj (may be NULL) gets a new reference to the created object. */
int ks_obj_create(struct ksim *ks, struct ks_type *t, const char *ns, json_t *obj, bool dry,
                  json_t **ret_obj, struct ks_status *st);
/* Creates a copy of obj by its apiVersion and kind, making its namespace when missing. */
int ks_obj_create_any(struct ksim *ks, json_t *obj, struct err *e);
/* The same with obj itself (stolen): a controller's new object, nobody else's. */
int ks_obj_create_own(struct ksim *ks, json_t *obj, struct err *e);
/* obj (stolen) replaces old under the subresource's rules (sub: NULL, "status", "finalize"). */
int ks_obj_update(struct ksim *ks, struct ks_type *t, json_t *old, json_t *obj, const char *sub,
                  bool dry, json_t **ret_obj, struct ks_status *st);
/* A controller's update: the outcome is not reported. */
void ks_update(struct ksim *ks, struct ks_type *t, json_t *old, json_t *obj, const char *sub);
/* A PUT: name and resourceVersion checked against cur (NULL: not found), then an update. */
int ks_obj_replace(struct ksim *ks, struct ks_type *t, const char *name, json_t *cur, json_t *obj,
                   const char *sub, bool dry, json_t **ret_obj, struct ks_status *st);

enum ks_patch_kind { KS_PATCH_MERGE, KS_PATCH_JSON, KS_PATCH_STRATEGIC };
/* patch stolen; old NULL: not found. */
int ks_obj_patch(struct ksim *ks, struct ks_type *t, const char *name, json_t *old,
                 enum ks_patch_kind kind, json_t *patch, const char *sub, bool dry,
                 json_t **ret_obj, struct ks_status *st);
/* Server-side apply of cfg (stolen) by manager; old NULL creates. */
int ks_obj_apply(struct ksim *ks, struct ks_type *t, const char *ns, const char *name, json_t *old,
                 json_t *cfg, const char *manager, bool force, bool dry, json_t **ret_obj,
                 struct ks_status *st);

/* managedFields of a write other than apply (objects-managed.c): res gets ks->write_manager's
 * "Update" entry (subresource sub) for the fields it changes from old (NULL: a create); nothing
 * when ks->write_manager is NULL (a controller's write) or nothing changed. */
void ks_managed_record(struct ksim *ks, struct ks_type *t, json_t *old, json_t *res,
                       const char *sub);

struct ks_delete_opts {
    const char *propagation; /* NULL, Foreground, Background or Orphan */
    int64_t grace;           /* < 0: the object's own */
    const char *uid;         /* preconditions, NULL: none */
    const char *rv;
    bool dry;
};
/* A DELETE. On success *ret_obj is the object as it is now (marked for deletion, or a pod's
 * last state) or NULL when gone (st then has the Success details). */
int ks_obj_delete(struct ksim *ks, struct ks_type *t, json_t *obj, const struct ks_delete_opts *o,
                  json_t **ret_obj, struct ks_status *st);
/* Deletes obj as a DELETE without options would: marks it when it has finalizers. */
void ks_delete_obj(struct ksim *ks, struct ks_type *t, json_t *obj, const char *propagation);
void ks_delete_obj_grace(struct ksim *ks, struct ks_type *t, json_t *obj, const char *propagation,
                         int64_t grace);
/* The binding subresource: pod (current) to node. */
int ks_obj_bind(struct ksim *ks, struct ks_type *t, json_t *pod, const char *node,
                struct ks_status *st);
/* The autoscaling/v1 Scale of obj. */
json_t *ks_obj_scale_of(struct ks_type *t, json_t *obj);
/* Sets spec.replicas from want (a Scale); *ret_scale is the new Scale. */
int ks_obj_scale_set(struct ksim *ks, struct ks_type *t, json_t *cur, json_t *want, bool dry,
                     json_t **ret_scale, struct ks_status *st);

/* ---- eviction and disruption budgets ------------------------------------------------------ */

struct ks_pdb_math {
    int64_t expected, healthy, desired, allowed;
};
struct ks_pdb_math ks_pdb_compute(struct ksim *ks, json_t *pdb);
/* The eviction subresource: deletes pod unless a PodDisruptionBudget forbids it (429). */
int ks_obj_evict(struct ksim *ks, json_t *pod, struct ks_status *st);

/* ---- quota.c: ResourceQuota admission and usage -------------------------------------------- */

/* What a pod charges quotas, resource name -> thousandths (a new object): count/pods always;
 * pods, compute requests and limits and requests.<extended resource> while it has not finished. */
json_t *ks_quota_pod_usage(struct ksim *ks, json_t *pod);
/* The quota admission of a create of obj in ns: 403 with the API server's message when a quota
 * of ns would be passed; else (unless dry) each quota's status.used is charged at once. */
int ks_quota_admit(struct ksim *ks, struct ks_type *t, const char *ns, json_t *obj, bool dry,
                   struct ks_status *st);
/* A quota's status as the quota controller computes it from the store (a new object). */
json_t *ks_quota_status(struct ksim *ks, json_t *quota);
/* spec.hard names and values (422 causes). */
void ks_quota_validate(json_t *obj, json_t *causes);

#endif
