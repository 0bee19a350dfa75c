/* SPDX-License-Identifier: Apache-2.0 */
/*
 * doctorpod: `gpuop doctor` on a node through the API server (docs/status-and-doctor.md). A
 * short-lived privileged pod pinned to the node runs `gpuop doctor --host-root=/host` on the
 * node's / (read-only); its log is the report and its container's exit code the verdict. The pod
 * is pure (doctorpod_render); the run goes through src/edge/kube in steps, so that one caller runs
 * one pod (doctorpod_run: `gpuop doctor NODE`) and another many at once (`gpuop gather --doctor`):
 *
 *     doctorpod_start -> doctorpod_poll until finished -> doctorpod_read -> doctorpod_delete
 *
 * Logs name the caller's component. Thread-compatible (one run per thread).
 */
#ifndef GPUOP_DOCTORPOD_H
#define GPUOP_DOCTORPOD_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kube.h"
#include "util.h"

struct doctorpod_opts {
    const char *node;
    const char *ns;
    const char *image;
    bool json;                   /* pass --json */
    unsigned deadline_s;         /* activeDeadlineSeconds; 0: 120 */
    const char *service_account; /* NULL: the namespace's default */
};

/* The doctor's pod: pinned to the node, privileged, the node's / read-only at /host, running
 * `gpuop doctor --host-root=/host`, never restarted, tolerating every taint, no service-account
 * token mounted. A new object (NULL when out of memory). */
json_t *doctorpod_render(const struct doctorpod_opts *o);

/* The first container's exit code in a pod's status, or -1 while none has one. */
int doctorpod_exit_code(const json_t *pod);

/* Creates the pod (component: the caller's log component). *ret_name: its generated name, the
 * caller frees it. */
int doctorpod_start(struct kube_client *kc, const struct doctorpod_opts *o, const char *component,
                    char **ret_name, struct err *e);
/* 1 with *ret_pod (the pod, the caller's) once it finished (Succeeded or Failed), 0 while it
 * runs; *phase (>= 32 bytes, may be NULL) gets its phase either way. */
int doctorpod_poll(struct kube_client *kc, const char *ns, const char *name, json_t **ret_pod,
                   char *phase, size_t phase_n, struct err *e);

/* What a finished pod left. */
struct doctorpod_result {
    char name[256];     /* the pod's (doctorpod_run fills it once created) */
    int exit_code;      /* the container's; -1 none */
    char phase[32];     /* Succeeded, Failed */
    char *log;          /* the report (NUL-terminated); NULL when it could not be read */
    size_t log_len;     /* its bytes */
    struct err log_err; /* why it could not be read */
};
void doctorpod_result_clear(struct doctorpod_result *r);

/* The finished pod's exit code and phase, and its log (at most log_max bytes: more is an error
 * in log_err, never a cut report). Fills *ret whatever the log did. */
void doctorpod_read(struct kube_client *kc, const char *ns, const char *name, const json_t *pod,
                    size_t log_max, struct doctorpod_result *ret);

/* Deletes the pod at once (grace 0), logging what happened; a pod already gone is fine. Give it
 * a client without the caller's stop token, so that a stopped run still removes its pod. */
void doctorpod_delete(struct kube_client *kc, const char *ns, const char *name,
                      const char *component);

/* The whole run of one pod: start, poll every poll_ms until it finishes (at most timeout_ms;
 * -ETIMEDOUT "pod NS/NAME did not finish within Ns (phase P)") or stop (-ECANCELED; stop is
 * required), read, and delete with kc_cleanup whatever happened. 0 with *ret filled once the pod
 * finished. */
int doctorpod_run(struct kube_client *kc, struct kube_client *kc_cleanup,
                  const struct doctorpod_opts *o, const char *component, uint64_t timeout_ms,
                  uint64_t poll_ms, struct stop_token *stop, size_t log_max,
                  struct doctorpod_result *ret, struct err *e);

#endif
