/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The node status exporter's decisions: what each metric says about one observation of the node,
 * when a shortfall of advertised GPUs becomes a mismatch, and what the gpu-count annotation
 * says. Pure (see node-status-exporter.h).
 */
#include <assert.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "kobj.h"
#include "node-status-exporter.h"

#define MIG_STRATEGY_LABEL "nvidia.com/mig.strategy"

const char *nst_error_name(enum nst_error k)
{
    static const char *const names[] = {"nvml", "node", "files", "annotation"};
    return k < NST_ERR_COUNT ? names[k] : "?";
}

const char *nst_vstate_name(enum nst_vstate s)
{
    static const char *const names[] = {"waiting", "ok", "failed", "unknown"};
    return s < NST_V_COUNT ? names[s] : "?";
}

void nst_report_clear(struct nst_report *r)
{
    if (!r)
        return;
    free(r->annotation);
    r->annotation = NULL;
}

/* NVIDIA's count of exposed devices: every capacity named nvidia.com/gpu* or nvidia.com/mig-*.
 * -1 when the node has no readable capacity. */
static int64_t devices_total(const json_t *node)
{
    json_t *cap = kobj_path(node, "status.capacity");
    if (!json_is_object(cap))
        return node ? 0 : -1;
    int64_t total = 0;
    const char *k;
    json_t *v;
    json_object_foreach (cap, k, v) {
        if (!str_has_prefix(k, "nvidia.com/gpu") && !str_has_prefix(k, "nvidia.com/mig-"))
            continue;
        int64_t milli = 0;
        if (!json_is_string(v) || kobj_quantity_milli(json_string_value(v), &milli) < 0)
            continue;
        total += milli / 1000;
    }
    return total;
}

static void read_validations(struct nst_state *st, const json_t *node, struct nst_report *r)
{
    for (int c = 0; c < NODESTATE_COMP_COUNT; c++) {
        char key[96];
        nodestate_validation_key(c, key, sizeof(key));
        const char *text = kobj_annotation(node, key);
        r->validation[c] = NST_V_UNKNOWN;
        if (!text)
            continue;
        struct nodestate_validation v;
        struct err e = {0};
        if (nodestate_validation_parse(text, &v, &e) < 0) {
            st->errors[NST_ERR_ANNOTATION]++;
            continue;
        }
        r->validation[c] = v.state == NODESTATE_V_OK       ? NST_V_OK
                           : v.state == NODESTATE_V_FAILED ? NST_V_FAILED
                                                           : NST_V_WAITING;
    }
}

static void read_owner(struct nst_state *st, const struct nst_observation *o, struct nst_report *r)
{
    strlcpy_s(r->owner, "unknown", sizeof(r->owner));
    strlcpy_s(r->owner_version, o->driver_version ? o->driver_version : "",
              sizeof(r->owner_version));
    const char *text = kobj_annotation(o->node, NODESTATE_ANN_DRIVER_OWNER);
    if (!text)
        return;
    struct nodestate_driver_owner d;
    struct err e = {0};
    if (nodestate_driver_owner_parse(text, &d, &e) < 0) {
        st->errors[NST_ERR_ANNOTATION]++;
        return;
    }
    strlcpy_s(r->owner, nodestate_owner_name(d.owner), sizeof(r->owner));
    if (d.version[0])
        strlcpy_s(r->owner_version, d.version, sizeof(r->owner_version));
}

/* When the shortfall started: kept from the previous observation, else from the node's current
 * annotation when it already reports one (the exporter restarted), else now. */
static uint64_t short_since(struct nst_state *st, const json_t *node, uint64_t now)
{
    if (st->short_since_ms)
        return st->short_since_ms;
    st->short_since_ms = now;
    const char *text = kobj_annotation(node, NODESTATE_ANN_GPU_COUNT);
    if (!text)
        return now;
    struct nodestate_gpu_count *prev = xcalloc(1, sizeof(*prev));
    struct err e = {0};
    uint64_t t = 0;
    if (nodestate_gpu_count_parse(text, prev, &e) == 0 && prev->short_ &&
        time_parse_rfc3339(prev->since, &t) == 0 && t <= now)
        st->short_since_ms = t;
    free(prev);
    return st->short_since_ms;
}

static int compare(struct nst_state *st, uint64_t grace_ms, const struct nst_observation *o,
                   struct nst_report *r, struct err *e)
{
    enum nodestate_mig_strategy strategy = o->default_strategy;
    const char *label = kobj_label(o->node, MIG_STRATEGY_LABEL);
    if (label && nodestate_mig_strategy_parse(label, &strategy) < 0)
        strategy = o->default_strategy;
    json_t *alloc = kobj_path(o->node, "status.allocatable");
    _cleanup_free_ char *alloc_text =
        json_is_object(alloc) ? json_dumps(alloc, JSON_COMPACT) : NULL;
    int rc = nodestate_gpu_count_compare(o->gpus, o->n_gpus, strategy, alloc_text, &r->count, e);
    if (rc < 0) /* what the node advertises does not read: the count is unknown */
        return err_prefix(e, "node %s", r->node);
    r->count_ok = true;
    for (size_t i = 0; i < o->n_gpus; i++)
        r->lost += o->gpus[i].lost;
    assert(r->lost <= (int64_t)o->n_gpus);
    if (r->count.short_) {
        uint64_t since = short_since(st, o->node, o->now_ms);
        assert(since <= o->now_ms); /* a shortfall starts no later than it is seen */
        time_rfc3339(since, r->count.since, sizeof(r->count.since));
        r->count.mismatch = o->now_ms - since >= grace_ms;
    } else {
        st->short_since_ms = 0;
        r->count.since[0] = '\0';
        r->count.mismatch = false;
    }
    _cleanup_free_ char *text = NULL;
    if ((rc = nodestate_gpu_count_render(&r->count, &text)) < 0)
        return err_set(e, rc, "node %s: rendering %s", r->node, NODESTATE_ANN_GPU_COUNT);
    if (!streq_ptr(text, kobj_annotation(o->node, NODESTATE_ANN_GPU_COUNT)))
        r->annotation = steal_ptr(&text);
    return 0;
}

int nst_observe(struct nst_state *st, const char *node, uint64_t grace_ms,
                const struct nst_observation *o, struct nst_report *ret, struct err *e)
{
    (void)e;
    nst_report_clear(ret);
    memset(ret, 0, sizeof(*ret));
    strlcpy_s(ret->node, node ? node : "", sizeof(ret->node));
    ret->now_ms = o->now_ms;
    ret->started_ms = st->started_ms;
    st->observations++;

    if (!o->files_ok)
        st->errors[NST_ERR_FILES]++;
    for (int c = 0; c < NODESTATE_COMP_COUNT; c++)
        ret->ready[c] = o->files_ok && o->file[nodestate_component_file(c)];

    ret->driver_validation = o->nvml_ok;
    if (o->nvml_ok)
        st->driver_ok_ms = o->now_ms;
    else
        st->errors[NST_ERR_NVML]++;

    ret->devices_total = o->node ? devices_total(o->node) : -1;
    if (!o->node)
        st->errors[NST_ERR_NODE]++;
    if (ret->devices_total > 0)
        st->plugin_ok_ms = o->now_ms;
    ret->pci_devices = o->pci_devices;

    read_validations(st, o->node, ret);
    read_owner(st, o, ret);
    if (o->nvml_ok && o->node) {
        struct err ce = {0};
        if (compare(st, grace_ms, o, ret, &ce) < 0) {
            memset(&ret->count, 0, sizeof(ret->count));
            ret->count_ok = false;
            st->errors[NST_ERR_NODE]++;
            strlcpy_s(ret->count_error, err_msg(&ce), sizeof(ret->count_error));
        }
    }
    ret->driver_ok_ms = st->driver_ok_ms;
    ret->plugin_ok_ms = st->plugin_ok_ms;
    memcpy(ret->errors, st->errors, sizeof(ret->errors));
    ret->observations = st->observations;
    /* a count is known only from both NVML and the node; a mismatch is a shortfall */
    assert(!ret->count_ok || (o->nvml_ok && o->node));
    assert(!ret->count.mismatch || ret->count.short_);
    return 0;
}

/* ---- rendering ---------------------------------------------------------------------------- */

static void gauge(struct prom_writer *w, const char *name, const char *help, const char *node,
                  double v)
{
    struct prom_label l[] = {{"node", node}};
    prom_family(w, name, PROM_GAUGE, help);
    prom_sample(w, name, l, ARRAY_SIZE(l), v);
}

static void render_nvidia(struct prom_writer *w, const struct nst_report *r)
{
    static const char *const ready_names[NODESTATE_COMP_COUNT] = {
        "gpu_operator_node_driver_ready", "gpu_operator_node_toolkit_ready",
        "gpu_operator_node_cuda_ready", "gpu_operator_node_plugin_ready"};
    static const char *const ready_help[NODESTATE_COMP_COUNT] = {
        "1 if the driver-ready status file is present on the node, 0 otherwise",
        "1 if the toolkit-ready status file is present on the node, 0 otherwise",
        "1 if the cuda-ready status file is present on the node, 0 otherwise",
        "1 if the plugin-ready status file is present on the node, 0 otherwise"};
    const char *n = r->node;
    gauge(w, "gpu_operator_node_metrics_ready_ts_seconds",
          "Start time of the node status exporter (seconds since the epoch)", n,
          (double)(r->started_ms / 1000));
    for (int c = 0; c < NODESTATE_COMP_COUNT; c++)
        gauge(w, ready_names[c], ready_help[c], n, r->ready[c]);
    gauge(w, "gpu_operator_node_driver_validation",
          "1 if NVML initialised and listed the GPUs at the last check, 0 otherwise", n,
          r->driver_validation);
    gauge(w, "gpu_operator_node_driver_validation_last_success_ts_seconds",
          "Time of the last successful driver check (seconds since the epoch; 0: never)", n,
          (double)(r->driver_ok_ms / 1000));
    gauge(w, "gpu_operator_node_device_plugin_devices_total",
          "GPU devices in the node's capacity (nvidia.com/gpu*, nvidia.com/mig-*); -1 if the "
          "node could not be read",
          n, (double)r->devices_total);
    gauge(w, "gpu_operator_node_device_plugin_validation_last_success_ts_seconds",
          "Time GPU devices were last found in the node's capacity (seconds since the epoch; 0: "
          "never)",
          n, (double)(r->plugin_ok_ms / 1000));
    gauge(w, "gpu_operator_nvidia_pci_devices_total",
          "NVIDIA PCI devices on the node; -1 if they could not be counted", n,
          (double)r->pci_devices);
}

static void render_validations(struct prom_writer *w, const struct nst_report *r)
{
    const char *name = "gpuop_node_validation_state";
    prom_family(w, name, PROM_GAUGE,
                "The validator's state per component (validation.gpuop.dev/<component>): 1 for "
                "the current state, 0 for the others");
    for (int c = 0; c < NODESTATE_COMP_COUNT; c++) {
        for (int s = 0; s < NST_V_COUNT; s++) {
            struct prom_label l[] = {{"node", r->node},
                                     {"component", nodestate_component_name(c)},
                                     {"state", nst_vstate_name(s)}};
            prom_sample(w, name, l, ARRAY_SIZE(l), r->validation[c] == (enum nst_vstate)s);
        }
    }
}

static void render_count(struct prom_writer *w, const struct nst_report *r)
{
    const char *n = r->node;
    struct prom_label l[] = {{"node", n}};
    gauge(w, "gpuop_node_gpus_physical", "GPUs NVML lists on the node (lost ones included)", n,
          (double)r->count.physical);
    gauge(w, "gpuop_node_gpus_lost", "GPUs NVML reports as lost", n, (double)r->lost);
    const char *exp = "gpuop_node_gpu_resources_expected";
    prom_family(w, exp, PROM_GAUGE,
                "Extended resources the node's GPUs should advertise under its MIG strategy");
    for (size_t i = 0; i < r->count.n_expected; i++) {
        struct prom_label rl[] = {{"node", n}, {"resource", r->count.expected[i].name}};
        prom_sample(w, exp, rl, ARRAY_SIZE(rl), (double)r->count.expected[i].count);
    }
    const char *adv = "gpuop_node_gpu_resources_advertised";
    prom_family(w, adv, PROM_GAUGE,
                "GPU extended resources in the node's allocatable (nvidia.com/ resources)");
    for (size_t i = 0; i < r->count.n_advertised; i++) {
        struct prom_label rl[] = {{"node", n}, {"resource", r->count.advertised[i].name}};
        prom_sample(w, adv, rl, ARRAY_SIZE(rl), (double)r->count.advertised[i].count);
    }
    gauge(w, "gpuop_node_gpu_advertised_short",
          "1 if some expected resource has fewer allocatable than expected now", n,
          r->count.short_);
    prom_family(w, "gpuop_node_gpu_advertised_mismatch", PROM_GAUGE,
                "1 if the node has advertised fewer GPUs than expected for longer than the "
                "grace period");
    prom_sample(w, "gpuop_node_gpu_advertised_mismatch", l, ARRAY_SIZE(l), r->count.mismatch);
}

int nst_render(const struct nst_report *r, enum prom_format f, struct sbuf *out)
{
    struct prom_writer w;
    prom_writer_init(&w, out, f);
    render_nvidia(&w, r);
    render_validations(&w, r);
    const char *info = "gpuop_node_driver_info";
    prom_family(&w, info, PROM_GAUGE,
                "Who owns the driver on the node (gpuop.dev/driver-owner: host, container, none; "
                "unknown without it) and its version");
    struct prom_label il[] = {
        {"node", r->node}, {"owner", r->owner}, {"version", r->owner_version}};
    prom_sample(&w, info, il, ARRAY_SIZE(il), 1);
    if (r->count_ok)
        render_count(&w, r);
    if (r->health_on)
        nst_render_health(&w, r);
    const char *errs = "gpuop_node_status_errors_total";
    prom_family(&w, errs, PROM_COUNTER,
                "Observations in which a source could not be read, by kind");
    for (int k = 0; k < NST_ERR_COUNT; k++) {
        struct prom_label el[] = {{"node", r->node}, {"kind", nst_error_name(k)}};
        prom_sample_u64(&w, errs, el, ARRAY_SIZE(el), r->errors[k]);
    }
    prom_family(&w, "gpuop_node_status_observations_total", PROM_COUNTER,
                "Observations of the node made since the start");
    struct prom_label l[] = {{"node", r->node}};
    prom_sample_u64(&w, "gpuop_node_status_observations_total", l, 1, r->observations);
    gauge(&w, "gpuop_node_status_last_observation_timestamp_seconds",
          "Time of the last observation (seconds since the epoch)", r->node,
          (double)r->now_ms / 1000.0);
    return prom_writer_finish(&w);
}

/* ---- the shell's decisions ------------------------------------------------------------------ */

int nst_config_check(const char *node, const char *mig_strategy,
                     enum nodestate_mig_strategy *ret_strategy, struct err *e)
{
    if (!node || !*node)
        return err_set(e, -EINVAL, "no node name: give --node-name or NODE_NAME");
    enum nodestate_mig_strategy st;
    if (nodestate_mig_strategy_parse(mig_strategy, &st) < 0)
        return err_set(e, -EINVAL, "--mig-strategy \"%s\": expected none, single or mixed",
                       mig_strategy);
    *ret_strategy = st;
    return 0;
}

int nst_render_pages(const struct nst_report *r, size_t limit, char **ret_text, char **ret_om,
                     struct err *e)
{
    _cleanup_sbuf_ struct sbuf text, om;
    sbuf_init(&text, limit);
    sbuf_init(&om, limit);
    if (nst_render(r, PROM_FORMAT_TEXT, &text) < 0 ||
        nst_render(r, PROM_FORMAT_OPENMETRICS, &om) < 0)
        return err_set(e, -ENOBUFS, "rendering the metrics: more than %zu bytes", limit);
    *ret_text = sbuf_steal(&text);
    *ret_om = sbuf_steal(&om);
    return 0;
}

enum nst_step nst_step_due(uint64_t now, bool health, bool woke, uint64_t next_obs,
                           uint64_t next_health)
{
    if (now >= next_obs)
        return NST_STEP_OBSERVE;
    if (health && (woke || now >= next_health))
        return NST_STEP_HEALTH;
    return NST_STEP_WAIT;
}

uint64_t nst_wake_at(bool health, uint64_t next_obs, uint64_t next_health)
{
    return health && next_health < next_obs ? next_health : next_obs;
}
