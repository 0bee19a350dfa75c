/* SPDX-License-Identifier: Apache-2.0 */
/* `gpuop doctor` on a node root, and `gpuop doctor NODE` (`kubectl gpuop doctor NODE`): the same
 * in a short-lived privileged pod on that node, its log printed, the pod deleted. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "doctor.h"
#include "doctorpod.h"
#include "kube.h"
#include "svc.h"

#define COMPONENT "doctor"
#define POLL_MS   500
#define LOG_MAX   (1u << 20)

struct doctor {
    const char *host_root, *driver_root;
    bool json;
    /* remote */
    const char *kubeconfig, *context, *ns, *image, *service_account;
    uint64_t timeout_ms;
};

static const struct svc_option doctor_options[] = {
    {.flag = "host-root",
     .env = "HOST_ROOT",
     .kind = SVC_STRING,
     .off = offsetof(struct doctor, host_root),
     .metavar = "PATH",
     .help = "the node's / as mounted here (default /)"},
    {.flag = "driver-root",
     .kind = SVC_STRING,
     .off = offsetof(struct doctor, driver_root),
     .metavar = "PATH",
     .help = "the containerized driver's root as the node sees it (/run/nvidia/driver)"},
    {.flag = "json",
     .kind = SVC_FLAG,
     .off = offsetof(struct doctor, json),
     .help = "the report as JSON"},
    {.kind = SVC_FRAGMENT,
     .fragment = svc_kubeconfig_option,
     .off = offsetof(struct doctor, kubeconfig)},
    {.kind = SVC_FRAGMENT, .fragment = svc_context_option, .off = offsetof(struct doctor, context)},
    {.flag = "namespace",
     .short_flag = 'n',
     .kind = SVC_STRING,
     .off = offsetof(struct doctor, ns),
     .metavar = "NS",
     .help = "with NODE: where the doctor's pod runs (default gpu-operator: it must allow\n"
             "privileged pods)"},
    {.flag = "image",
     .kind = SVC_STRING,
     .off = offsetof(struct doctor, image),
     .metavar = "IMAGE",
     .help = "with NODE: the gpuop image (default gpuop:" GPUOP_VERSION ")"},
    {.flag = "service-account",
     .kind = SVC_STRING,
     .off = offsetof(struct doctor, service_account),
     .metavar = "NAME",
     .help = "with NODE: the pod's ServiceAccount (default: the namespace's default)"},
    {.flag = "timeout",
     .kind = SVC_DURATION,
     .min = 1000,
     .finite = true,
     .off = offsetof(struct doctor, timeout_ms),
     .metavar = "DUR",
     .help = "with NODE: how long the pod may take (default 2m)"},
    {0},
};

static void doctor_defaults(void *state)
{
    struct doctor *d = state;
    d->host_root = "/";
    d->driver_root = "/run/nvidia/driver";
    d->ns = "gpu-operator";
    d->image = "gpuop:" GPUOP_VERSION;
    d->timeout_ms = 120000;
}

static int local_run(struct svc *s, struct doctor *d, struct err *e)
{
    struct doctor_facts *f = xcalloc(1, sizeof(*f));
    int r = doctor_probe(d->host_root, d->driver_root, f, e);
    if (r < 0) {
        free(f);
        return r;
    }
    struct doctor_result res[DOCTOR_CHECKS + 1];
    size_t n = doctor_check(f, res);
    if (d->json) {
        json_t *j = doctor_render_json(f, res, n);
        char *text = j ? json_dumps(j, JSON_INDENT(2)) : NULL;
        json_decref(j);
        if (!text) {
            free(f);
            return err_set(e, -ENOMEM, "render the report");
        }
        printf("%s\n", text);
        free(text);
    } else {
        struct sbuf out _cleanup_sbuf_;
        sbuf_init(&out, 1u << 20);
        if ((r = doctor_render_text(f, res, n, &out)) < 0) {
            free(f);
            return err_set(e, r, "render the report");
        }
        fputs(out.data, stdout);
    }
    free(f);
    if (fflush(stdout) != 0)
        return err_errno(e, -errno, "write the report");
    svc_verdict(s, doctor_exit_status(doctor_worst(res, n)));
    return 0;
}

static int remote_run(struct svc *s, struct doctor *d, const char *node, struct err *e)
{
    _cleanup_(kube_client_freep) struct kube_client *kc = NULL, *kc2 = NULL;
    int r = kube_client_open(KUBE_CALLER_COMMAND, d->kubeconfig, d->context, svc_stop(s), &kc, e);
    if (r < 0)
        return r;
    /* the pod's removal uses a client without the stop token: a stop still removes it */
    if ((r = kube_client_open(KUBE_CALLER_COMMAND, d->kubeconfig, d->context, NULL, &kc2, e)) < 0)
        return r;
    _cleanup_(json_decrefp) json_t *nodeobj = NULL;
    if ((r = kube_get(kc, &KUBE_NODES, NULL, node, &nodeobj, e)) < 0)
        return err_prefix(e, "node %s", node);
    struct doctorpod_opts po = {.node = node,
                                .ns = d->ns,
                                .image = d->image,
                                .json = d->json,
                                .deadline_s = (unsigned)(d->timeout_ms / 1000) + 30,
                                .service_account = d->service_account};
    struct doctorpod_result res = {.exit_code = -1};
    r = doctorpod_run(kc, kc2, &po, COMPONENT, d->timeout_ms, POLL_MS, svc_stop(s), LOG_MAX, &res,
                      e);
    if (r < 0) {
        doctorpod_result_clear(&res);
        return r;
    }
    /* the verdict is the container's exit code; a log that cannot be read is said, not fatal */
    if (res.log) {
        fwrite(res.log, 1, res.log_len, stdout);
        fflush(stdout);
    } else {
        log_warn(COMPONENT, "the doctor's log could not be read", "pod=%s/%s error=\"%s\"", d->ns,
                 res.name, err_msg(&res.log_err));
    }
    doctorpod_result_clear(&res);
    int code = res.exit_code;
    if (code == 0 || code == 3 || code == 4) {
        svc_verdict(s, code);
        return 0;
    }
    return err_set(e, -EIO, "the doctor on node %s could not run (pod %s/%s: %s, exit %d)", node,
                   d->ns, res.name, res.phase[0] ? res.phase : "?", code);
}

static int doctor_run(struct svc *s, struct err *e)
{
    struct doctor *d = svc_state(s);
    size_t n = 0;
    const char *const *args = svc_args(s, &n);
    if (n == 1)
        return remote_run(s, d, args[0], e);
    return local_run(s, d, e);
}

const struct svc_component doctor_component = {
    .name = "doctor",
    .usage = "Usage: gpuop doctor [--host-root=PATH] [--json]\n"
             "       gpuop doctor NODE [--json] (also: kubectl gpuop doctor NODE)\n\n"
             "The runbook's first step on a node: what owns the driver (host, container, both,\n"
             "none), leftovers of a host install (DKMS modules, libraries of another version, a\n"
             "persistence daemon unit), a second device plugin for the same resource, a plugin\n"
             "healthy while NVML fails, the runtime's GPU configuration vs the runtime in use,\n"
             "driver vs firmware versions, kernel headers, IOMMU and the clock. Each check says\n"
             "pass, warn or fail with one line of evidence and one of remedy.\n"
             "With NODE it runs in a short-lived privileged pod on that node (the node's / at\n"
             "/host), prints the pod's log and deletes the pod.\n",
    .epilogue = "Exit: 0 every check passed, 3 a warning, 4 a failure; 1 the doctor could not run\n"
                "(an unreadable node root, an API error), 2 bad flags.\n",
    .options = {doctor_options},
    .max_args = 1,
    .state_size = sizeof(struct doctor),
    .defaults = doctor_defaults,
    .run = doctor_run,
};
