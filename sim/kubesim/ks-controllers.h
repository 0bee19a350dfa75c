/* SPDX-License-Identifier: Apache-2.0 */
/* kubesim's controllers, one per file, over the object layer. Each returns true when it changed
 * something; ks_controllers() runs them until nothing changes. All run under ks->lock. */
#ifndef GPUOP_KS_CONTROLLERS_H
#define GPUOP_KS_CONTROLLERS_H

#include "ks-objects.h"

#define T_UNSCHED "node.kubernetes.io/unschedulable"

/* ctl-common.c */
struct ks_type *ctl_core(struct ksim *ks, const char *plural);
/* A snapshot of a map's values: controllers change the map while walking it. */
json_t *ctl_values(json_t *objs);
/* The objects of t added or changed since cursor (a resourceVersion), as they are now, each once
 * (a new array; ret_changed NULL: not collected), and how many of t were deleted; false when the
 * event log no longer reaches back to cursor (the caller looks at every object). */
bool ctl_changed_since(struct ksim *ks, struct ks_type *t, uint64_t cursor, json_t **ret_changed,
                       size_t *ret_deleted);
bool ctl_node_term_matches(json_t *term, json_t *node);
bool ctl_tolerates(json_t *tols, json_t *taint);
bool ctl_should_run(json_t *podspec, json_t *tols, json_t *node);
bool ctl_should_continue_running(json_t *podspec, json_t *tols, json_t *node);
bool ctl_node_affinity_matches(json_t *podspec, json_t *node);
/* The first NoSchedule/NoExecute taint of node that tols do not tolerate (borrowed), or NULL. */
json_t *ctl_untolerated_taint(json_t *tols, json_t *node);
json_t *ctl_ds_tolerations(json_t *podspec);
char *ctl_template_hash(json_t *tmpl, json_int_t collisions);
json_t *ctl_owner_ref(json_t *owner, const char *api_version, const char *kind);
bool ctl_controlled_by(json_t *obj, const char *uid);
json_t *ctl_pods_by_controller(struct ksim *ks, const char *kind);
bool ctl_set_status(struct ksim *ks, struct ks_type *t, json_t *obj, json_t *st);
/* A core/v1 Event about obj (type "Normal" or "Warning"). */
void ctl_event(struct ksim *ks, json_t *obj, const char *kind, const char *type, const char *reason,
               const char *message);

/* ctl-dra.c: Dynamic Resource Allocation. The resourceclaim controller: */
bool ks_ctl_resourceclaims(struct ksim *ks);
/* The scheduler's DynamicResources plugin, for one scheduling pass (ctl-scheduler.c). */
struct ks_dra_sched;
struct ks_dra_pod;
struct ks_dra_sched *ks_dra_sched_new(struct ksim *ks);
void ks_dra_sched_free(struct ks_dra_sched *s);
void ks_dra_pod_free(struct ks_dra_pod *p);
enum {
    KS_DRA_OK,            /* go on (with *ret, which may have nothing to allocate) */
    KS_DRA_WAIT,          /* PreEnqueue: a claim is not there yet; the pod waits unmarked */
    KS_DRA_UNSCHEDULABLE, /* PreFilter: unschedulable on every node, *ret_msg says why */
};
int ks_dra_prefilter(struct ks_dra_sched *s, json_t *pod, struct ks_dra_pod **ret, char **ret_msg);
/* The pod lists spec.resourceClaims (PostFilter speaks for it). */
bool ks_dra_pod_has_claims(const struct ks_dra_pod *p);
/* NodeResourcesFit leaves this extended resource to DRA on this node. */
bool ks_dra_extended_delegated(const struct ks_dra_pod *p, json_t *node, const char *resource);
/* Filter: 0 with *ret_reason NULL (fits; the allocation is kept for bind), or a reason ("cannot
 * allocate all claims", "resourceclaim not available on the node"); -EINVAL with *ret_err when
 * scheduling must stop (a CEL runtime error, ...). */
int ks_dra_filter(struct ks_dra_sched *s, struct ks_dra_pod *p, json_t *node,
                  const char **ret_reason, char **ret_err);
/* PreBind on the chosen node: the claims' allocations and the pod's reservations written, the
 * special claim of extended resources made; bound (the pod about to be committed) gets
 * status.extendedResourceClaimStatus. */
void ks_dra_bind(struct ks_dra_sched *s, struct ks_dra_pod *p, json_t *node, json_t *bound);

bool ks_ctl_daemonsets(struct ksim *ks);
bool ks_ctl_deployments(struct ksim *ks);
bool ks_ctl_replicasets(struct ksim *ks);
/* ctl-job.c */
bool ks_ctl_jobs(struct ksim *ks);
bool ks_ctl_kubelet(struct ksim *ks);
bool ks_ctl_schedule(struct ksim *ks);
bool ks_ctl_orphan_pods(struct ksim *ks);
bool ks_ctl_node_taints(struct ksim *ks);
bool ks_ctl_pdbs(struct ksim *ks);
bool ks_ctl_namespaces(struct ksim *ks);
bool ks_ctl_gc(struct ksim *ks);
/* quota.c: each ResourceQuota's status.hard and status.used, recomputed from the store. */
bool ks_ctl_quotas(struct ksim *ks);

/* controller.c: every controller until nothing changes (at most a few rounds). */
bool ks_controllers(struct ksim *ks);

#endif
