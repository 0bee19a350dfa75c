/* SPDX-License-Identifier: Apache-2.0 */
/* `gpuop gather` (also `kubectl gpuop gather`): reads the cluster (gather-collect.c,
 * gather-doctor.c), puts what the core says into the bundle (gather.h) and writes it atomically.
 * What it could not read is said in the bundle's index, never fatal: an API server that cannot be
 * reached still gives the local facts. */
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gather-internal.h"
#include "kube.h"
#include "yamlcfg.h"

#define COMPONENT GATHER_COMPONENT

static const struct svc_option gather_options[] = {
    {.kind = SVC_FRAGMENT,
     .fragment = svc_kubeconfig_option,
     .off = offsetof(struct gather_options, kubeconfig)},
    {.kind = SVC_FRAGMENT,
     .fragment = svc_context_option,
     .off = offsetof(struct gather_options, context)},
    {.flag = "output",
     .short_flag = 'o',
     .kind = SVC_STRING,
     .off = offsetof(struct gather_options, output),
     .metavar = "FILE",
     .help = "the bundle (default gpuop-gather-<UTC time>.tar.gz here;\n"
             "a folder: that name in it)"},
    {.flag = "namespace",
     .short_flag = 'n',
     .kind = SVC_STRING,
     .off = offsetof(struct gather_options, ns),
     .metavar = "NS",
     .help = "the operator's and operands' namespace (default gpu-operator)"},
    {.flag = "since",
     .kind = SVC_DURATION,
     .min = 1000,
     .finite = true,
     .off = offsetof(struct gather_options, since_ms),
     .metavar = "DUR",
     .help = "only the logs and Events of the last DUR (default: every\n"
             "Event, each log's --tail)"},
    {.flag = "tail",
     .kind = SVC_UINT,
     .min = 1,
     .max = 1000000,
     .off = offsetof(struct gather_options, tail),
     .metavar = "LINES",
     .help = "the last LINES lines of each container's log (default 1000)"},
    {.flag = "log-bytes",
     .kind = SVC_STRING,
     .off = offsetof(struct gather_options, log_bytes_s),
     .metavar = "SIZE",
     .help = "at most SIZE of each container's log, its end kept (default 1Mi,\n"
             "at most 32Mi)"},
    {.flag = "max-size",
     .kind = SVC_STRING,
     .off = offsetof(struct gather_options, max_size_s),
     .metavar = "SIZE",
     .help = "the bundle's bound (default 64Mi, 256Ki to 4Gi): what would\n"
             "pass it is left out and said so in its index"},
    {.flag = "doctor",
     .kind = SVC_FLAG,
     .off = offsetof(struct gather_options, doctor),
     .help = "also `gpuop doctor --json` on every GPU node (a short-lived\n"
             "privileged pod each, in --namespace)"},
    {.flag = "doctor-image",
     .kind = SVC_STRING,
     .off = offsetof(struct gather_options, doctor_image),
     .metavar = "IMAGE",
     .help = "with --doctor: the pods' image (default the operator\n"
             "Deployment's, else gpuop:" GPUOP_VERSION ")"},
    {.flag = "doctor-timeout",
     .kind = SVC_DURATION,
     .min = 1000,
     .finite = true,
     .off = offsetof(struct gather_options, doctor_timeout_ms),
     .metavar = "DUR",
     .help = "with --doctor: how long the pods may take (default 2m)"},
    {0},
};

static void gather_defaults(void *state)
{
    gather_options_defaults(state);
}

static int gather_configure(struct svc *s, struct err *e)
{
    return gather_options_check(svc_state(s), e);
}

static bool is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The bundle from a client (crc: its creation's result, ce its error), written to path. */
static int bundle(struct gather_run *r, int crc, const struct err *ce, const char *path,
                  const char *root, struct err *e)
{
    const struct gather_options *g = r->g;
    char server[512] = "unknown";
    if (r->kc)
        gather_redact_url(kube_client_server(r->kc), server, sizeof(server));
    _cleanup_(json_decrefp) json_t *facts = gather_facts(g, server, r->now_ms);
    struct gather_bundle_opts bo = {
        .root = root, .max_size = g->max_size, .now_ms = r->now_ms, .facts = facts};
    int rc = gather_bundle_new(&bo, &r->b, e);
    if (rc < 0)
        return rc;
    struct sbuf y _cleanup_sbuf_;
    sbuf_init(&y, 1 << 20);
    if ((rc = yaml_emit(facts, &y, e)) < 0 ||
        (rc = gather_run_add(r, "local.yaml", y.data, y.len,
                             "gpuop's version, the command, the API server (no credentials)", 0,
                             e)) < 0)
        return rc;
    if (crc < 0) {
        r->down = true;
        snprintf(r->down_why, sizeof(r->down_why), "not read: no API client (%s)", err_msg(ce));
        gather_bundle_missing(r->b, "the cluster", "no API client: %s", err_msg(ce));
        log_warn(COMPONENT, "no API client", "error=\"%s\"", err_msg(ce));
    } else if ((rc = gather_run_collect(r, e)) < 0) {
        return rc;
    } else if (r->down) {
        gather_bundle_missing(r->b, "the cluster", "%s", r->down_why);
    }
    size_t files = 0, missing = 0;
    gather_bundle_counts(r->b, &files, &missing);
    _cleanup_free_ char *data = NULL;
    size_t len = 0;
    if ((rc = gather_bundle_finish(r->b, &data, &len, e)) < 0 ||
        (rc = file_write_atomic(path, data, len, 0600, e)) < 0)
        return rc;
    log_info(COMPONENT, "bundle written", "path=%s bytes=%zu files=%zu not_collected=%zu", path,
             len, files, missing);
    printf("%s\n", path);
    if (fflush(stdout) != 0)
        return err_errno(e, -errno, "write to stdout");
    return 0;
}

static int gather_run(struct svc *s, struct err *e)
{
    struct gather_options *g = svc_state(s);
    struct gather_run r = {.s = s, .g = g, .now_ms = now_ms_real()};
    char path[PATH_MAX], root[96];
    gather_output_path(g->output, g->output && is_dir(g->output), r.now_ms, path, sizeof(path),
                       root, sizeof(root));
    /* a folder that cannot take the bundle fails now, not after the collection */
    char dir[PATH_MAX];
    gather_output_dir(path, dir, sizeof(dir));
    if (access(dir, W_OK) < 0)
        return err_errno(e, -errno, "write the bundle into \"%s\"", dir);

    struct err ce = {0};
    struct kube_options ko =
        kube_options_for(KUBE_CALLER_COMMAND, g->kubeconfig, g->context, svc_stop(s));
    ko.max_retries = 2; /* an API server that does not answer is said, not waited for long */
    int crc = kube_client_new(&ko, &r.kc, &ce);
    if (crc == 0 && g->doctor) {
        struct kube_options ko2 = ko;
        ko2.stop = NULL; /* the doctor pods' removal outlives a stop */
        crc = kube_client_new(&ko2, &r.kc2, &ce);
    }
    r.nodes = json_array();
    r.policies = json_array();
    r.drivers = json_array();
    r.pods = json_array();
    r.deployments = json_array();
    int rc = bundle(&r, crc, &ce, path, root, e);
    gather_bundle_free(r.b);
    kube_client_free(r.kc);
    kube_client_free(r.kc2);
    json_decref(r.nodes);
    json_decref(r.policies);
    json_decref(r.drivers);
    json_decref(r.pods);
    json_decref(r.deployments);
    return rc;
}

const struct svc_component gather_component = {
    .name = "gather",
    .usage =
        "Usage: gpuop gather [--output FILE] [--doctor] [--namespace NS] [--since DUR]\n"
        "                    [--max-size SIZE] [flags]\n"
        "       kubectl gpuop gather [...]\n\n"
        "One support bundle (a .tar.gz) to attach to a bug report: gpuop status -o json, the\n"
        "ClusterPolicies and NVIDIADrivers, every gpuop object in YAML, each GPU node's labels,\n"
        "annotations and conditions, the namespace's Events and its pods' recent logs, and with\n"
        "--doctor `gpuop doctor --json` from every GPU node. Secrets are never read; credentials\n"
        "are replaced by <redacted>. The bundle stays under --max-size; its MANIFEST lists what\n"
        "it holds and what it could not collect, and why. It prints the bundle's path.\n",
    .epilogue = "Exit: 0 the bundle was written (even partial: an API server that cannot be\n"
                "reached still gives the local facts), 1 nothing could be written, 2 bad flags.\n",
    .options = {gather_options},
    .state_size = sizeof(struct gather_options),
    .defaults = gather_defaults,
    .configure = gather_configure,
    .run = gather_run,
};
