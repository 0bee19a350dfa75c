/* SPDX-License-Identifier: Apache-2.0 */
/* gpuop node-discovery: the shell. Reads the node root (PCI functions under sysfs, os-release),
 * reads its Node, asks disc_plan and writes the merge patch. */
#include <errno.h>
#include <stddef.h>

#include "node-discovery.h"
#include "kobj.h"
#include "kube.h"
#include "svc.h"
#include "yamlcfg.h"

#define COMP           "node-discovery"
#define OS_RELEASE_MAX (64u << 10)
#define OS_FIELD_MAX   128

struct disc {
    const char *node, *kubeconfig, *host_root, *sysfs;
    uint64_t interval_ms;
    bool oneshot;
    struct kube_client *kc;
};

#define X(f) offsetof(struct disc, f)
static const struct svc_option disc_options[] = {
    {.kind = SVC_FRAGMENT, .fragment = svc_node_name_option, .off = X(node)},
    {.kind = SVC_FRAGMENT, .fragment = svc_kubeconfig_option, .off = X(kubeconfig)},
    {.flag = "host-root",
     .env = "HOST_ROOT_MOUNT",
     .kind = SVC_STRING,
     .off = X(host_root),
     .metavar = "DIR",
     .help = "where the host's file system is mounted (/host): os-release"},
    {.flag = "sysfs-root",
     .env = "GPUOP_SYSFS_ROOT",
     .kind = SVC_STRING,
     .off = X(sysfs),
     .metavar = "DIR",
     .help = "sysfs, where the PCI functions are listed (<host-root>/sys)"},
    {.flag = "sleep-interval",
     .env = "SLEEP_INTERVAL",
     .kind = SVC_DURATION,
     .min = 1000,
     .finite = true,
     .off = X(interval_ms),
     .metavar = "DUR",
     .help = "time between passes (60s)"},
    {.flag = "oneshot",
     .env = "ONESHOT",
     .kind = SVC_FLAG,
     .off = X(oneshot),
     .help = "one pass, then exit (non-zero when it failed)"},
    {0},
};
#undef X

static void disc_defaults(void *state)
{
    struct disc *d = state;
    d->host_root = "/host";
    d->interval_ms = 60000;
}

static int disc_configure(struct svc *s, struct err *e)
{
    struct disc *d = svc_state(s);
    if (!d->node || !*d->node)
        return err_set(e, -EINVAL, "no node name: give --node-name or NODE_NAME");
    return 0;
}

static void disc_cleanup(void *state)
{
    struct disc *d = state;
    kube_client_free(d->kc);
}

/* The host's os-release: etc/os-release, else usr/lib/os-release (as systemd reads it). */
static int read_os_release(const char *root, char *id, char *version, struct err *e)
{
    static const char *const paths[] = {"etc/os-release", "usr/lib/os-release"};
    for (size_t i = 0; i < ARRAY_SIZE(paths); i++) {
        _cleanup_free_ char *path = xasprintf("%s/%s", root, paths[i]);
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        struct err fe = {0};
        int r = file_read_all(path, OS_RELEASE_MAX, &text, &len, &fe);
        if (r == -ENOENT)
            continue;
        if (r < 0)
            return err_set(e, r, "%s", err_msg(&fe));
        if (nodestate_os_release(text, len, id, OS_FIELD_MAX, version, OS_FIELD_MAX) < 0)
            return err_set(e, -EINVAL, "%s: no ID= line", path);
        return 0;
    }
    return err_set(e, -ENOENT, "%s: neither etc/os-release nor usr/lib/os-release exists", root);
}

static int pass(struct disc *d, struct err *e)
{
    _cleanup_free_ char *sysfs_default = xasprintf("%s/sys", d->host_root);
    const char *sysfs = d->sysfs ? d->sysfs : sysfs_default;
    char **classes = NULL;
    size_t n = 0;
    int r = nodestate_pci_nvidia_gpu_classes(sysfs, &classes, &n, e);
    if (r < 0)
        return r;
    char id[OS_FIELD_MAX] = "", version[OS_FIELD_MAX] = "";
    if ((r = read_os_release(d->host_root, id, version, e)) < 0) {
        nodestate_strv_free(classes);
        return err_prefix(e, "os-release");
    }
    struct nodestate_nfd_input in = {.pci_classes = (const char *const *)classes,
                                     .n_pci = n,
                                     .os_id = id,
                                     .os_version_id = version[0] ? version : NULL};
    _cleanup_json_ json_t *node = NULL;
    r = kube_get(d->kc, &KUBE_NODES, NULL, d->node, &node, e);
    if (r < 0) {
        nodestate_strv_free(classes);
        return r;
    }
    _cleanup_json_ json_t *patch = NULL;
    enum disc_action a = disc_plan(node, &in, &patch);
    nodestate_strv_free(classes);
    if (!patch) {
        log_debug(COMP, "labels up to date", "node=%s gpus=%zu", d->node, n);
        return 0;
    }
    struct kube_patch_opts po = {.type = KUBE_PATCH_MERGE, .field_manager = "gpuop-node-discovery"};
    if ((r = kube_patch(d->kc, &KUBE_NODES, NULL, d->node, &po, patch, NULL, e)) < 0)
        return r;
    _cleanup_free_ char *text = json_dumps(patch, JSON_COMPACT | JSON_SORT_KEYS);
    if (a == DISC_STAY_AWAY)
        log_info(COMP, "Node Feature Discovery runs on this node: staying away", "node=%s patch=%s",
                 d->node, text);
    else
        log_info(COMP, "labels written", "node=%s gpus=%zu patch=%s", d->node, n, text);
    return 0;
}

static int disc_run(struct svc *s, struct err *e)
{
    struct disc *d = svc_state(s);
    struct kube_options ko = kube_options_for(KUBE_CALLER_AGENT, d->kubeconfig, NULL, svc_stop(s));
    /* A failed pass is tried again next interval (or the pod restarts, with --oneshot): one
     * retry within a pass is enough. */
    ko.max_retries = 1;
    int r = kube_client_new(&ko, &d->kc, e);
    if (r < 0)
        return r;
    while (!svc_stopped(s)) {
        r = pass(d, e);
        if (d->oneshot)
            return r < 0 ? err_prefix(e, "node %s", d->node) : 0;
        if (r < 0) {
            log_warn(COMP, "pass failed; retrying", "node=%s error=\"%s\"", d->node, err_msg(e));
            err_clear(e);
        }
        if (svc_wait(s, d->interval_ms) == SVC_STOP)
            break;
    }
    return 0;
}

const struct svc_component discovery_component = {
    .name = "node-discovery",
    .usage = "Usage: gpuop node-discovery --node-name NAME [flags]\n\n"
             "Labels this node with the Node Feature Discovery labels GPU nodes are found by, on\n"
             "clusters without NFD: feature.node.kubernetes.io/pci-10de.present, the\n"
             "class-qualified pci-<class>_10de.present and the system-os_release labels, and\n"
             "nothing else. Where NFD runs on the node, it writes nothing.\n",
    .options = {disc_options},
    .epilogue = "Signals: SIGTERM, SIGINT and SIGQUIT exit 0; SIGHUP is logged and ignored.\n",
    .state_size = sizeof(struct disc),
    .defaults = disc_defaults,
    .configure = disc_configure,
    .run = disc_run,
    .cleanup = disc_cleanup,
};
