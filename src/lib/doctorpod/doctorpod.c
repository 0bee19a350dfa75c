/* SPDX-License-Identifier: Apache-2.0 */
/* The doctor's pod (doctorpod.h): rendered, created, waited for, read and deleted. */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doctorpod.h"
#include "kobj.h"

json_t *doctorpod_render(const struct doctorpod_opts *o)
{
    json_t *cmd = json_pack("[s,s,s]", "gpuop", "doctor", "--host-root=/host");
    if (cmd && o->json)
        json_array_append_new(cmd, json_string("--json"));
    json_t *pod = json_pack(
        "{s:s,s:s,s:{s:s,s:s,s:{s:s,s:s}},s:{s:s,s:s,s:I,s:b,s:[{s:s}],s:[{s:s,s:s,s:o,"
        "s:{s:b},s:[{s:s,s:s,s:b,s:s}]}],s:[{s:s,s:{s:s,s:s}}]}}",
        "apiVersion", "v1", "kind", "Pod", "metadata", "generateName", "gpuop-doctor-", "namespace",
        o->ns, "labels", "app.kubernetes.io/name", "gpuop-doctor", "app.kubernetes.io/managed-by",
        "gpuop", "spec", "nodeName", o->node, "restartPolicy", "Never", "activeDeadlineSeconds",
        (json_int_t)(o->deadline_s ? o->deadline_s : 120), "automountServiceAccountToken", 0,
        "tolerations", "operator", "Exists", "containers", "name", "doctor", "image", o->image,
        "command", cmd, "securityContext", "privileged", 1, "volumeMounts", "name", "host",
        "mountPath", "/host", "readOnly", 1, "mountPropagation", "HostToContainer", "volumes",
        "name", "host", "hostPath", "path", "/", "type", "Directory");
    if (pod && o->service_account)
        json_object_set_new(json_object_get(pod, "spec"), "serviceAccountName",
                            json_string(o->service_account));
    return pod;
}

int doctorpod_exit_code(const json_t *pod)
{
    size_t i;
    json_t *cs;
    json_array_foreach (kobj_path(pod, "status.containerStatuses"), i, cs) {
        json_t *code = kobj_path(cs, "state.terminated.exitCode");
        if (json_is_integer(code))
            return (int)json_integer_value(code);
    }
    return -1;
}

int doctorpod_start(struct kube_client *kc, const struct doctorpod_opts *o, const char *component,
                    char **ret_name, struct err *e)
{
    _cleanup_(json_decrefp) json_t *pod = doctorpod_render(o);
    _cleanup_(json_decrefp) json_t *created = NULL;
    if (!pod)
        return err_set(e, -ENOMEM, "render the doctor's pod");
    int r = kube_create(kc, &KUBE_PODS, o->ns, pod, &created, e);
    if (r < 0)
        return err_prefix(e, "create the doctor's pod on node %s", o->node);
    const char *name = kobj_name(created);
    if (!name || !name[0])
        return err_set(e, -EBADMSG,
                       "create the doctor's pod on node %s: the API server named no pod", o->node);
    log_info(component, "doctor pod created", "pod=%s/%s node=%s", o->ns, name, o->node);
    *ret_name = xstrdup(name);
    return 0;
}

int doctorpod_poll(struct kube_client *kc, const char *ns, const char *name, json_t **ret_pod,
                   char *phase, size_t phase_n, struct err *e)
{
    json_t *pod = NULL;
    int r = kube_get(kc, &KUBE_PODS, ns, name, &pod, e);
    if (r < 0)
        return r;
    const char *p = kobj_path_str(pod, "status.phase");
    if (phase)
        strlcpy_s(phase, p ? p : "", phase_n);
    if (streq_ptr(p, "Succeeded") || streq_ptr(p, "Failed")) {
        *ret_pod = pod;
        return 1;
    }
    json_decref(pod);
    return 0;
}

void doctorpod_result_clear(struct doctorpod_result *r)
{
    free(r->log);
    r->log = NULL;
    r->log_len = 0;
}

void doctorpod_read(struct kube_client *kc, const char *ns, const char *name, const json_t *pod,
                    size_t log_max, struct doctorpod_result *ret)
{
    ret->exit_code = doctorpod_exit_code(pod);
    strlcpy_s(ret->phase, kobj_path_str(pod, "status.phase") ?: "", sizeof(ret->phase));
    free(ret->log);
    ret->log = NULL;
    ret->log_len = 0;
    ret->log_err = (struct err){0};
    struct kube_log_opts lo = {.container = "doctor", .limit_bytes = log_max};
    char *log = NULL;
    size_t len = 0;
    if (kube_pod_log_opts(kc, ns, name, &lo, &log, &len, &ret->log_err) < 0)
        return;
    if (len > log_max) { /* a server that ignores limitBytes: a cut report is no report */
        free(log);
        err_set(&ret->log_err, -EFBIG, "log of pod %s/%s: larger than %zu bytes", ns, name,
                log_max);
        return;
    }
    ret->log = log;
    ret->log_len = len;
}

void doctorpod_delete(struct kube_client *kc, const char *ns, const char *name,
                      const char *component)
{
    struct err de = {0};
    struct kube_delete_opts dopt = {.has_grace = true, .grace_period_seconds = 0};
    if (kube_delete(kc, &KUBE_PODS, ns, name, &dopt, &de) < 0 && de.code != -ENOENT)
        log_warn(component, "doctor pod not deleted", "pod=%s/%s error=\"%s\"", ns, name,
                 err_msg(&de));
    else
        log_info(component, "doctor pod deleted", "pod=%s/%s", ns, name);
}

int doctorpod_run(struct kube_client *kc, struct kube_client *kc_cleanup,
                  const struct doctorpod_opts *o, const char *component, uint64_t timeout_ms,
                  uint64_t poll_ms, struct stop_token *stop, size_t log_max,
                  struct doctorpod_result *ret, struct err *e)
{
    assert(stop);
    _cleanup_free_ char *name = NULL;
    int r = doctorpod_start(kc, o, component, &name, e);
    if (r < 0)
        return r;
    strlcpy_s(ret->name, name, sizeof(ret->name));
    uint64_t deadline = deadline_after(timeout_ms);
    _cleanup_(json_decrefp) json_t *done = NULL;
    for (;;) {
        char phase[32];
        r = doctorpod_poll(kc, o->ns, name, &done, phase, sizeof(phase), e);
        if (r != 0)
            break;
        if (deadline_left_ms(deadline) == 0) {
            r = err_set(e, -ETIMEDOUT, "pod %s/%s did not finish within %llus (phase %s)", o->ns,
                        name, (unsigned long long)(timeout_ms / 1000), phase[0] ? phase : "none");
            break;
        }
        if (stop_wait(stop, poll_ms)) {
            r = err_set(e, -ECANCELED, "stopped while waiting for pod %s/%s", o->ns, name);
            break;
        }
    }
    if (r > 0) {
        doctorpod_read(kc, o->ns, name, done, log_max, ret);
        r = 0;
    }
    /* the pod goes whatever happened; a stop still removes it (a client without the stop) */
    doctorpod_delete(kc_cleanup, o->ns, name, component);
    return r;
}
