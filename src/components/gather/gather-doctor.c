/* SPDX-License-Identifier: Apache-2.0 */
/* gather --doctor (gather-internal.h): `gpuop doctor --json` on every GPU node through a
 * short-lived pod each (src/lib/doctorpod), DOCTOR_PARALLEL at once, each read into the bundle and
 * removed, also when the run stops. */
#include <stdio.h>
#include <string.h>

#include "doctorpod.h"
#include "gather-internal.h"
#include "kobj.h"
#include "kube.h"
#include "statusview.h"

#define COMPONENT       GATHER_COMPONENT
#define DOCTOR_PARALLEL 16 /* doctor pods at once */
#define DOCTOR_POLL_MS  500
#define DOCTOR_LOG_MAX  (1u << 20)

struct doc {
    const char *node;
    char *pod;
    bool done;
};

static int doctor_finish(struct gather_run *r, struct doc *d, const json_t *pod, struct err *e)
{
    struct doctorpod_result res = {.exit_code = -1};
    doctorpod_read(r->kc, r->g->ns, d->pod, pod, DOCTOR_LOG_MAX, &res);
    int code = res.exit_code, rc = 0;
    bool report = gather_doctor_report(code);
    char path[300], what[512];
    gather_doctor_path(d->node, report, path, sizeof(path));
    if (res.log) {
        snprintf(what, sizeof(what), "gpuop doctor --json on node %s (pod %s/%s: %s, exit %d)",
                 d->node, r->g->ns, d->pod, res.phase, code);
        rc = gather_run_add_text(r, path, res.log, res.log_len, what, e);
    } else {
        gather_bundle_missing(r->b, path, "the log of pod %s/%s (exit %d): %s", r->g->ns, d->pod,
                              code, err_msg(&res.log_err));
    }
    doctorpod_result_clear(&res);
    doctorpod_delete(r->kc2, r->g->ns, d->pod, COMPONENT);
    d->done = true;
    return rc;
}

static int doctor_batch(struct gather_run *r, struct doc *docs, size_t n, const char *image,
                        struct err *e)
{
    const struct gather_options *g = r->g;
    for (size_t i = 0; i < n; i++) {
        char path[300];
        gather_doctor_path(docs[i].node, true, path, sizeof(path));
        if (gather_run_skipped(r, path)) {
            docs[i].done = true;
            continue;
        }
        struct doctorpod_opts po = {.node = docs[i].node,
                                    .ns = g->ns,
                                    .image = image,
                                    .json = true,
                                    .deadline_s = (unsigned)(g->doctor_timeout_ms / 1000) + 30};
        struct err ee = {0};
        if (doctorpod_start(r->kc, &po, COMPONENT, &docs[i].pod, &ee) < 0) {
            gather_run_failed(r, path, &ee, false);
            docs[i].done = true;
        }
    }
    uint64_t deadline = deadline_after(g->doctor_timeout_ms);
    int rc = 0;
    for (;;) {
        size_t left = 0;
        for (size_t i = 0; i < n && rc == 0; i++) {
            if (docs[i].done)
                continue;
            json_t *pod = NULL;
            char phase[32] = "";
            struct err ee = {0};
            int p = doctorpod_poll(r->kc, g->ns, docs[i].pod, &pod, phase, sizeof(phase), &ee);
            if (p == 1) {
                rc = doctor_finish(r, &docs[i], pod, e);
                json_decref(pod);
                continue;
            }
            char path[300];
            gather_doctor_path(docs[i].node, true, path, sizeof(path));
            if (p < 0) {
                gather_run_failed(r, path, &ee, false);
            } else if (deadline_left_ms(deadline) == 0) {
                gather_bundle_missing(
                    r->b, path, "pod %s/%s did not finish within %llus (phase %s)", g->ns,
                    docs[i].pod, (unsigned long long)(g->doctor_timeout_ms / 1000),
                    phase[0] ? phase : "none");
            } else {
                left++;
                continue;
            }
            doctorpod_delete(r->kc2, g->ns, docs[i].pod, COMPONENT);
            docs[i].done = true;
        }
        if (rc < 0 || left == 0)
            break;
        if (svc_wait(r->s, DOCTOR_POLL_MS) == SVC_STOP)
            break;
    }
    /* a stop or a failure: the pods still running go too */
    for (size_t i = 0; i < n; i++) {
        if (docs[i].done)
            continue;
        char path[300];
        gather_doctor_path(docs[i].node, true, path, sizeof(path));
        gather_bundle_missing(r->b, path, "not read: stopped");
        doctorpod_delete(r->kc2, g->ns, docs[i].pod, COMPONENT);
    }
    return rc;
}

int gather_run_doctor(struct gather_run *r, struct err *e)
{
    const char *image = r->g->doctor_image;
    if (!image)
        image = gather_doctor_image(r->deployments, "gpuop:" GPUOP_VERSION);
    size_t n = 0;
    struct doc *docs = xcalloc(json_array_size(r->nodes) + 1, sizeof(*docs));
    size_t i;
    json_t *node;
    json_array_foreach (r->nodes, i, node)
        if (st_gpu_node(node) && kobj_name(node))
            docs[n++].node = kobj_name(node);
    log_info(COMPONENT, "doctor on GPU nodes", "nodes=%zu image=%s namespace=%s", n, image,
             r->g->ns);
    int rc = 0;
    for (size_t at = 0; at < n && rc == 0; at += DOCTOR_PARALLEL)
        rc = doctor_batch(r, docs + at, n - at < DOCTOR_PARALLEL ? n - at : DOCTOR_PARALLEL, image,
                          e);
    for (size_t k = 0; k < n; k++)
        free(docs[k].pod);
    free(docs);
    return rc;
}
