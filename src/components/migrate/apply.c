/* SPDX-License-Identifier: Apache-2.0 */
/* `gpuop migrate`'s writes and waits (migrate-shell.h): requests made as the core planned them,
 * waits on what the cluster reports. Decides nothing. */
#include <stdio.h>
#include <string.h>

#include "kobj.h"
#include "migrate-shell.h"
#include "yamlcfg.h"

#define COMPONENT "migrate"

int mig_do_write(struct kube_client *kc, const struct mig_write *w, struct err *e)
{
    struct mig_request rq;
    int rc = mig_request_of(w, &rq, e);
    if (rc < 0)
        return rc;
    _cleanup_json_ json_t *out = NULL;
    switch (rq.verb) {
    case MIG_VERB_DELETE:
        rc = kube_delete(kc, rq.res, w->ns, w->name,
                         &(struct kube_delete_opts){.propagation = rq.propagation}, e);
        break;
    case MIG_VERB_PATCH:
        rc = kube_patch(kc, rq.res, w->ns, w->name, &(struct kube_patch_opts){.type = rq.patch},
                        w->body, &out, e);
        break;
    case MIG_VERB_UPDATE:
        rc = kube_update(kc, rq.res, w->ns, w->body, &out, e);
        break;
    case MIG_VERB_CREATE:
        rc = kube_create(kc, rq.res, w->ns, w->body, &out, e);
        break;
    }
    if (rc < 0 && rc == rq.done_code) {
        err_clear(e);
        rc = 0;
    }
    if (rc < 0)
        return err_prefix(e, "%s %s%s%s", w->res_kind, w->ns ? w->ns : "", w->ns ? "/" : "",
                          w->name);
    log_info(COMPONENT, "done", "kind=%s name=%s%s%s", w->res_kind, w->ns ? w->ns : "",
             w->ns ? "/" : "", w->name);
    return 0;
}

int mig_wait_rollout(struct svc *s, struct kube_client *kc, const struct mig_options *m,
                     const char *ds_name, struct err *e)
{
    uint64_t deadline = deadline_after(m->timeout_ms);
    for (;;) {
        _cleanup_json_ json_t *ds = NULL;
        int r = kube_get(kc, &KUBE_DAEMONSETS, m->ns, ds_name, &ds, e);
        if (r < 0)
            return err_prefix(e, "DaemonSet %s/%s", m->ns, ds_name);
        char why[128];
        if (adopt_ds_rolled_out(ds, why, sizeof(why))) {
            log_info(COMPONENT, "the toolkit's cleanup runs on every node", "daemonset=%s/%s",
                     m->ns, ds_name);
            return 0;
        }
        if (deadline_left_ms(deadline) == 0)
            return err_set(e, -ETIMEDOUT,
                           "DaemonSet %s/%s: the toolkit's cleanup did not roll out in %llu s (%s)",
                           m->ns, ds_name, (unsigned long long)(m->timeout_ms / 1000), why);
        if (svc_wait(s, 1000) == SVC_STOP)
            return err_set(e, -ECANCELED, "stopped while waiting for %s", ds_name);
    }
}

/* Until the n surge device plugin pods are Ready, and then ADOPT_SURGE_SETTLE_MS more (their
 * registration with the kubelet follows their start): only then may NVIDIA's plugin replace
 * gpuop's. */
int mig_wait_surge(struct svc *s, struct kube_client *kc, const struct mig_options *m, size_t n,
                   struct err *e)
{
    uint64_t deadline = deadline_after(m->timeout_ms);
    for (;;) {
        struct kube_list_opts lo = {.label_selector = "app=" ADOPT_SURGE_APP};
        _cleanup_json_ json_t *pods = NULL;
        int r = kube_list(kc, &KUBE_PODS, m->ns, &lo, &pods, e);
        if (r < 0)
            return err_prefix(e, "list pods app=%s", ADOPT_SURGE_APP);
        size_t ready = mig_pods_ready(pods);
        if (ready >= n) {
            log_info(COMPONENT, "the surge device plugins run on every node", "pods=%zu", ready);
            return svc_wait(s, ADOPT_SURGE_SETTLE_MS) == SVC_STOP
                       ? err_set(e, -ECANCELED, "stopped while the surge plugins register")
                       : 0;
        }
        if (deadline_left_ms(deadline) == 0)
            return err_set(e, -ETIMEDOUT,
                           "%zu of %zu surge device plugin pod(s) (app=%s) Ready in %llu s", ready,
                           n, ADOPT_SURGE_APP, (unsigned long long)(m->timeout_ms / 1000));
        if (svc_wait(s, 1000) == SVC_STOP)
            return err_set(e, -ECANCELED, "stopped while waiting for the surge plugins");
    }
}

static int list_items(struct kube_client *kc, const struct kube_resource *res, const char *ns,
                      json_t **ret, struct err *e)
{
    _cleanup_json_ json_t *list = NULL;
    int r = kube_list(kc, res, ns, &(struct kube_list_opts){0}, &list, e);
    if (r < 0)
        return err_prefix(e, "list %s", res->plural);
    *ret = json_incref(json_object_get(list, "items"));
    return *ret ? 0 : err_set(e, -EPROTO, "list %s: no items", res->plural);
}

/* One step: read, plan, write. *ret_done when the roll is done. */
static int roll_step(struct kube_client *kc, const struct mig_options *m, bool *ret_done,
                     char **ret_waiting, struct err *e)
{
    _cleanup_json_ json_t *pods = NULL, *dss = NULL, *nodes = NULL, *cps = NULL;
    int r;
    if ((r = list_items(kc, &KUBE_PODS, m->ns, &pods, e)) < 0 ||
        (r = list_items(kc, &KUBE_DAEMONSETS, m->ns, &dss, e)) < 0 ||
        (r = list_items(kc, &KUBE_NODES, NULL, &nodes, e)) < 0 ||
        (r = list_items(kc, &KUBE_CLUSTERPOLICIES, NULL, &cps, e)) < 0)
        return r;
    long long max = m->max_unavailable;
    if (max == 0 && json_array_size(cps) == 1 &&
        (r = adopt_max_unavailable(json_array_get(cps, 0), nodes, &max, e)) < 0)
        return r;
    struct mig_roll_input in = {.ns = m->ns,
                                .pods = pods,
                                .daemonsets = dss,
                                .nodes = nodes,
                                .max_unavailable = max,
                                .now_ms = now_ms_real(),
                                .policy = json_array_size(cps) == 1 ? json_array_get(cps, 0) : NULL,
                                .nvidia_release = m->nvidia_release};
    struct mig_roll plan;
    if ((r = mig_roll_plan(&in, &plan, e)) < 0)
        return r;
    for (size_t i = 0; i < plan.n_writes && r == 0; i++) {
        printf("  %s %s %s: %s\n", plan.writes[i].kind == MIG_DELETE ? "delete" : "patch",
               plan.writes[i].res_kind, plan.writes[i].name, plan.writes[i].why);
        r = mig_do_write(kc, &plan.writes[i], e);
    }
    fflush(stdout);
    if (r == 0) {
        *ret_done = plan.done;
        if (plan.restore)
            printf("next: %s\n", plan.restore);
        free(*ret_waiting);
        *ret_waiting =
            xasprintf("%zu node(s) to do, %zu in flight, %zu done (%lld at once)%s%s",
                      plan.nodes_todo, plan.nodes_in_flight, plan.nodes_done, max,
                      plan.waiting ? "; waiting for " : "", plan.waiting ? plan.waiting : "");
    }
    mig_roll_done(&plan);
    return r;
}

int mig_roll_run(struct svc *s, struct kube_client *kc, const struct mig_options *m, struct err *e)
{
    uint64_t deadline = deadline_after(m->timeout_ms);
    _cleanup_free_ char *status = NULL;
    for (;;) {
        bool done = false;
        int r = roll_step(kc, m, &done, &status, e);
        if (r < 0)
            return r;
        if (done) {
            printf("done: every node runs NVIDIA's operands (%s)\n", status);
            return 0;
        }
        if (deadline_left_ms(deadline) == 0)
            return err_set(e, -ETIMEDOUT,
                           "the roll did not finish in %llu s: %s (run it again "
                           "to go on)",
                           (unsigned long long)(m->timeout_ms / 1000), status);
        if (svc_wait(s, 1000) == SVC_STOP)
            return err_set(e, -ECANCELED, "stopped: %s (run it again to go on)", status);
    }
}
