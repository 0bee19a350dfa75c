/* SPDX-License-Identifier: Apache-2.0 */
/* The Job controller, reduced to what Helm's hook Jobs need: one pod at a time from the
 * template (labelled job-name and controller-uid, owned by the Job), a new one after a failed
 * pod until spec.backoffLimit (6) failures, and the Complete or Failed condition at the end.
 * Pods on nodes a kubelet process serves run for real; kubesim's own simulated kubelet never
 * ends a pod, so there a Job completes only when someone writes its pod's phase. */
#include <string.h>

#include "ks-controllers.h"

static void create_job_pod(struct ksim *ks, json_t *job)
{
    json_t *tmpl = kobj_path(job, "spec.template");
    json_t *meta = json_deep_copy(json_object_get(tmpl, "metadata") ?: json_object());
    json_t *spec = json_deep_copy(json_object_get(tmpl, "spec") ?: json_object());
    json_t *pod = json_pack("{s:s,s:s,s:o,s:o}", "apiVersion", "v1", "kind", "Pod", "metadata",
                            meta, "spec", spec);
    json_object_del(meta, "name");
    _cleanup_free_ char *gen = xasprintf("%s-", ks_obj_name(job));
    json_object_set_new(meta, "generateName", json_string(gen));
    json_object_set_new(meta, "namespace", json_string(ks_obj_ns(job)));
    json_t *labels = kobj_ensure_object(meta, "labels");
    json_object_set_new(labels, "job-name", json_string(ks_obj_name(job)));
    json_object_set_new(labels, "batch.kubernetes.io/job-name", json_string(ks_obj_name(job)));
    json_object_set_new(labels, "controller-uid", json_string(kobj_uid(job) ?: ""));
    json_object_set_new(labels, "batch.kubernetes.io/controller-uid",
                        json_string(kobj_uid(job) ?: ""));
    json_object_set_new(meta, "ownerReferences",
                        json_pack("[o]", ctl_owner_ref(job, "batch/v1", "Job")));
    struct err e = {0};
    ks_obj_create_any(ks, pod, &e);
    json_decref(pod);
}

static bool job_finished(const json_t *job)
{
    size_t i;
    json_t *c;
    json_array_foreach (kobj_path(job, "status.conditions"), i, c) {
        if ((streq_ptr(kobj_str(c, "type"), "Complete") ||
             streq_ptr(kobj_str(c, "type"), "Failed")) &&
            streq_ptr(kobj_str(c, "status"), "True"))
            return true;
    }
    return false;
}

bool ks_ctl_jobs(struct ksim *ks)
{
    struct ks_type *jt = ks_type_find(ks, "batch", "v1", "jobs");
    if (!jt || json_object_size(jt->objs) == 0)
        return false;
    json_t *by = ctl_pods_by_controller(ks, "Job");
    json_t *all = ctl_values(jt->objs);
    bool changed = false;
    char now[40];
    ks_now_str(ks, now, sizeof(now));
    size_t i;
    json_t *job;
    json_array_foreach (all, i, job) {
        if (ks_is_deleting(job) || job_finished(job))
            continue;
        json_t *bl = kobj_path(job, "spec.backoffLimit");
        json_int_t backoff = json_is_integer(bl) ? json_integer_value(bl) : 6;
        json_int_t active = 0, succeeded = 0, failed = 0;
        size_t j;
        json_t *p;
        json_array_foreach (json_object_get(by, kobj_uid(job)), j, p) {
            const char *phase = kobj_path_str(p, "status.phase");
            if (streq_ptr(phase, "Succeeded"))
                succeeded++;
            else if (streq_ptr(phase, "Failed"))
                failed++;
            else if (!ks_is_deleting(p))
                active++;
        }
        json_t *st = json_deep_copy(json_object_get(job, "status"));
        if (!json_is_object(st)) {
            json_decref(st);
            st = json_object();
        }
        if (!json_object_get(st, "startTime"))
            json_object_set_new(st, "startTime", json_string(now));
        const char *cond = NULL, *reason = NULL, *msg = NULL;
        if (succeeded > 0) {
            cond = "Complete";
            json_object_set_new(st, "completionTime", json_string(now));
        } else if (failed > backoff) {
            cond = "Failed";
            reason = "BackoffLimitExceeded";
            msg = "Job has reached the specified backoff limit";
        } else if (active == 0 && ks->pod_budget > 0) {
            create_job_pod(ks, job);
            ks->pod_budget--;
            active++;
            changed = true;
        }
        if (cond) {
            json_t *c = json_pack("{s:s,s:s,s:s,s:s}", "type", cond, "status", "True",
                                  "lastProbeTime", now, "lastTransitionTime", now);
            if (reason)
                json_object_set_new(c, "reason", json_string(reason));
            if (msg)
                json_object_set_new(c, "message", json_string(msg));
            json_object_set_new(st, "conditions", json_pack("[o]", c));
            active = 0;
        }
        json_object_set_new(st, "active", json_integer(active));
        if (succeeded)
            json_object_set_new(st, "succeeded", json_integer(succeeded));
        if (failed)
            json_object_set_new(st, "failed", json_integer(failed));
        if (!active)
            json_object_del(st, "active");
        changed |= ctl_set_status(ks, jt, job, st);
    }
    json_decref(all);
    json_decref(by);
    return changed;
}
