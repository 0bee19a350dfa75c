/* SPDX-License-Identifier: Apache-2.0 */
/* `gpuop status` (also `kubectl gpuop status`): lists what the API server holds, hands it to the
 * core (status.h) and prints the text or the JSON. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "kube.h"
#include "statusview.h"
#include "svc.h"

#define TEXT_MAX (16u << 20)
/* What the lists keep, decoded, together (kube_list_budget). With the client's own bounds on
 * one page being read and decoded (64 MiB on the wire, 128 MiB decoded), gpuop status stays
 * under 512 MiB whatever the API server sends (docs/kube-client.md; tests/kube/hostile.py). */
#define LISTS_MAX (256u << 20)

enum output { OUT_TEXT, OUT_WIDE, OUT_JSON };
static const char *const output_names[] = {"text", "wide", "json", NULL};
enum color { COLOR_AUTO, COLOR_ALWAYS, COLOR_NEVER };
static const char *const color_names[] = {"auto", "always", "never", NULL};

struct status {
    const char *kubeconfig, *context;
    int output, color;
    struct svc_strings gpu_pools;
    const char *overcommit_ratio;
    struct cap_pool_def pools[CAP_POOLS_MAX];
    size_t n_pools;
    double ratio;
};

static const struct svc_option status_options[] = {
    {.kind = SVC_FRAGMENT,
     .fragment = svc_kubeconfig_option,
     .off = offsetof(struct status, kubeconfig)},
    {.kind = SVC_FRAGMENT, .fragment = svc_context_option, .off = offsetof(struct status, context)},
    {.flag = "output",
     .short_flag = 'o',
     .kind = SVC_ENUM,
     .choices = output_names,
     .off = offsetof(struct status, output),
     .metavar = "FORMAT",
     .help = "text (default), wide (every column, nothing cut) or json (the view model)"},
    {.flag = "color",
     .env = "GPUOP_COLOR",
     .kind = SVC_ENUM,
     .choices = color_names,
     .off = offsetof(struct status, color),
     .metavar = "WHEN",
     .help = "auto (default: on a terminal, unless NO_COLOR is set or TERM=dumb), always, never"},
    {.flag = "gpu-pool",
     .kind = SVC_STRINGS,
     .off = offsetof(struct status, gpu_pools),
     .metavar = "NAME:K=V[,K=V]",
     .help = "a GPU pool of the capacity view: the nodes with these labels (repeatable; as\n"
             "the operator's flag; default: one pool per nvidia.com/gpu.product)"},
    {.flag = "gpu-quota-overcommit-ratio",
     .env = "GPUOP_GPU_QUOTA_OVERCOMMIT_RATIO",
     .kind = SVC_STRING,
     .off = offsetof(struct status, overcommit_ratio),
     .metavar = "R",
     .help = "flag quotas promising more than R times the GPUs advertised (default 1.0)"},
    {0},
};

static int status_configure(struct svc *s, struct err *e)
{
    struct status *st = svc_state(s);
    return cap_settings_parse((const char *const *)st->gpu_pools.v, st->gpu_pools.n,
                              st->overcommit_ratio, st->pools, &st->n_pools, &st->ratio, e);
}

/* A list that may be absent: a CRD not installed (404) or not readable (403) is empty. */
static int list_optional(struct kube_client *kc, const struct kube_resource *r,
                         struct kube_list_budget *budget, const struct kube_list_opts *o,
                         json_t **ret, struct err *e)
{
    json_t *l = NULL;
    struct err ee = {0};
    struct kube_list_opts lo = o ? *o : (struct kube_list_opts){0};
    lo.budget = budget;
    int rc = kube_list(kc, r, NULL, &lo, &l, &ee);
    if (rc == -ENOENT || rc == -EPERM || rc == -EACCES) {
        log_debug("status", "list skipped", "resource=%s error=\"%s\"", r->plural, err_msg(&ee));
        *ret = json_array();
        return 0;
    }
    if (rc < 0) {
        *e = ee;
        return rc;
    }
    *ret = json_incref(json_object_get(l, "items"));
    json_decref(l);
    if (!json_is_array(*ret)) {
        json_decref(*ret);
        *ret = json_array();
    }
    return 0;
}

static void view_of(const struct status *st, struct st_view *v)
{
    bool tty = isatty(STDOUT_FILENO);
    const char *term = env_get("TERM");
    v->color = st->color == COLOR_ALWAYS ||
               (st->color == COLOR_AUTO && tty && !env_get("NO_COLOR") && !streq_ptr(term, "dumb"));
    v->wide = st->output == OUT_WIDE;
    v->width = 0;
    struct winsize ws;
    if (tty && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        v->width = ws.ws_col;
    v->now_ms = now_ms_real();
}

static void status_cleanup(void *state)
{
    struct status *st = state;
    for (size_t i = 0; i < st->n_pools; i++)
        cap_pool_def_clear(&st->pools[i]);
}

static int status_run(struct svc *s, struct err *e)
{
    struct status *st = svc_state(s);
    _cleanup_(kube_client_freep) struct kube_client *kc = NULL;
    int r = kube_client_open(KUBE_CALLER_COMMAND, st->kubeconfig, st->context, svc_stop(s), &kc, e);
    if (r < 0)
        return r;
    _cleanup_(json_decrefp) json_t *policies = NULL, *drivers = NULL, *nodes = NULL, *events = NULL,
                                   *pods = NULL, *quotas = NULL, *upgrade_pools = NULL,
                                   *slices = NULL, *claims = NULL, *classes = NULL;
    _cleanup_(json_decrefp) json_t *node_list = NULL;
    /* one budget for every list: what they keep together is bounded, whatever the server sends */
    struct kube_list_budget lists = {.limit = LISTS_MAX};
    struct kube_list_opts lo = {.budget = &lists};
    if ((r = kube_list(kc, &KUBE_NODES, NULL, &lo, &node_list, e)) < 0)
        return r;
    nodes = json_incref(json_object_get(node_list, "items"));
    if (!json_is_array(nodes)) {
        json_decref(nodes);
        nodes = json_array();
    }
    struct kube_list_opts drains = {.field_selector = "involvedObject.kind=Node,reason=NodeDrain"};
    if ((r = list_optional(kc, &KUBE_CLUSTERPOLICIES, &lists, NULL, &policies, e)) < 0 ||
        (r = list_optional(kc, &KUBE_NVIDIADRIVERS, &lists, NULL, &drivers, e)) < 0 ||
        (r = list_optional(kc, &KUBE_EVENTS, &lists, &drains, &events, e)) < 0 ||
        (r = list_optional(kc, &KUBE_PODS, &lists, NULL, &pods, e)) < 0 ||
        (r = list_optional(kc, &KUBE_RESOURCEQUOTAS, &lists, NULL, &quotas, e)) < 0 ||
        (r = list_optional(kc, &KUBE_DRIVERUPGRADEPOOLS, &lists, NULL, &upgrade_pools, e)) < 0 ||
        (r = list_optional(kc, &KUBE_RESOURCESLICES, &lists, NULL, &slices, e)) < 0 ||
        (r = list_optional(kc, &KUBE_RESOURCECLAIMS, &lists, NULL, &claims, e)) < 0 ||
        (r = list_optional(kc, &KUBE_DEVICECLASSES, &lists, NULL, &classes, e)) < 0)
        return r;
    struct st_view v;
    view_of(st, &v);
    struct st_objects in = {.policies = policies,
                            .drivers = drivers,
                            .nodes = nodes,
                            .events = events,
                            .pods = pods,
                            .quotas = quotas,
                            .upgrade_pools = upgrade_pools,
                            .slices = slices,
                            .claims = claims,
                            .classes = classes,
                            .now_ms = v.now_ms,
                            .pools = st->pools,
                            .n_pools = st->n_pools,
                            .overcommit_ratio = st->ratio};
    _cleanup_(json_decrefp) json_t *model = st_model(&in, st_sections);
    if (st->output == OUT_JSON) {
        _cleanup_free_ char *text = json_dumps(model, JSON_INDENT(2) | JSON_SORT_KEYS);
        if (!text)
            return err_set(e, -ENOMEM, "render JSON");
        printf("%s\n", text);
    } else {
        _cleanup_free_ char *text = NULL;
        if ((r = st_render_text(model, st_sections, &v, TEXT_MAX, &text, e)) < 0)
            return r;
        fputs(text, stdout);
    }
    if (fflush(stdout) != 0)
        return err_errno(e, -errno, "write to stdout");
    return 0;
}

const struct svc_component status_component = {
    .name = "status",
    .usage =
        "Usage: gpuop status [-o text|wide|json] [flags]\n"
        "       kubectl gpuop status [-o text|wide|json]\n\n"
        "The GPU cluster at a glance, from the API server alone: the operator's version, who\n"
        "last changed the ClusterPolicy and when, the last node drain; then per driver pool\n"
        "the driver versions and the upgrade's progress, and per GPU node the driver's owner\n"
        "and version, the validations, physical vs advertised GPUs (a shortfall flagged),\n"
        "the MIG layout's state and the node's health; then per node the DRA devices published\n"
        "and the claims allocated on them; then the GPUs each resource and pool\n"
        "offers (the device plugin's and DRA's) against what namespace quotas promise\n"
        "(over-commit and short pools flagged).\n",
    .options = {status_options},
    .state_size = sizeof(struct status),
    .configure = status_configure,
    .run = status_run,
    .cleanup = status_cleanup,
};
