/* SPDX-License-Identifier: Apache-2.0 */
/* The checks as plans (validator.h, val_check_step): from the facts gathered so far, the next
 * probe or the verdict. Each check is a sequence of phases; a phase returns true when the check
 * goes on, false when it has set the step (a probe to run, or the verdict). */
#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "kobj.h"
#include "validator.h"

const char *val_probe_name(enum val_probe p)
{
    static const char *const n[] = {"none",         "driver",    "driver-ds", "driver-pod",
                                    "driver-ready", "ctr-ready", "marker",    "toolkit-ds",
                                    "cdi-spec",     "find-lib",  "gpus",      "pci",
                                    "node",         "runtime",   "cuda",      "status"};
    static_assert(ARRAY_SIZE(n) == VAL_PROBE_COUNT, "a name per probe");
    return (unsigned)p < ARRAY_SIZE(n) ? n[p] : "?";
}

void val_step_clear(struct val_step *st)
{
    free(st->text);
    memset(st, 0, sizeof(*st));
}

/* ---- the verdicts ------------------------------------------------------------------------- */

/* Asks for probe p when it has not run yet: true when the step now asks for it. */
static bool need(const struct val_facts *f, enum val_probe p, struct val_step *st)
{
    assert(p > VAL_PROBE_NONE && p < VAL_PROBE_COUNT);
    if (f->have[p])
        return false;
    st->probe = p;
    return true;
}

static void not_yet(struct val_step *st, const char *fmt, ...) GPUOP_PRINTF(2, 3);
static void not_yet(struct val_step *st, const char *fmt, ...)
{
    st->outcome = VAL_NOT_YET;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(st->reason, sizeof(st->reason), fmt, ap);
    va_end(ap);
    if (w >= 0 && (size_t)w >= sizeof(st->reason))
        memcpy(st->reason + sizeof(st->reason) - 4, "...", 4);
}

static void error(struct val_step *st, int code, const char *msg)
{
    assert(code < 0);
    st->outcome = VAL_ERROR;
    st->code = code;
    str_printf_cut(st->reason, sizeof(st->reason), "%s", msg);
}

/* Passed: file written (with text, NULL empty), log_msg logged with the key=value pairs. */
static void passed(struct val_step *st, bool write, enum nodestate_file file, const char *log_msg,
                   const char *kv_fmt, ...) GPUOP_PRINTF(5, 6);
static void passed(struct val_step *st, bool write, enum nodestate_file file, const char *log_msg,
                   const char *kv_fmt, ...)
{
    st->outcome = VAL_PASSED;
    st->write = write;
    st->file = file;
    st->log_msg = log_msg;
    va_list ap;
    va_start(ap, kv_fmt);
    vsnprintf(st->log_kv, sizeof(st->log_kv), kv_fmt, ap);
    va_end(ap);
}

/* ---- phases several checks share ---------------------------------------------------------- */

/* driver-ready, parsed into dr: the checks after the driver's need the root it names. */
static bool phase_driver_ready(const struct val_config *cfg, const struct val_facts *f,
                               struct val_step *st, struct nodestate_driver_ready *dr)
{
    char path[PATH_MAX];
    if (nodestate_file_path(cfg->paths.validations_dir, NODESTATE_DRIVER_READY, path,
                            sizeof(path)) < 0) {
        error(st, -ENAMETOOLONG, "--validations-dir: path too long");
        return false;
    }
    if (need(f, VAL_PROBE_DRIVER_READY, st))
        return false;
    const struct val_failure *x = &f->fail[VAL_PROBE_DRIVER_READY];
    if (x->code == -ENOENT) {
        not_yet(st, "%s is missing: the driver check has not passed", path);
        return false;
    }
    if (x->code < 0) {
        not_yet(st, "%s", x->msg);
        return false;
    }
    struct err pe = {0};
    if (nodestate_driver_ready_parse(path, f->driver_ready, f->driver_ready_len, dr, &pe) < 0) {
        not_yet(st, "%s", pe.msg);
        return false;
    }
    return true;
}

/* The GPUs, from the NVML of the driver root driver-ready names (GPUOP_NVML_LIBRARY wins). */
static bool phase_gpus(const struct val_config *cfg, const struct val_facts *f, struct val_step *st,
                       const struct nodestate_driver_ready *dr)
{
    if (!cfg->nvml_library && need(f, VAL_PROBE_FIND_LIB, st)) {
        strlcpy_s(st->lib_root, dr->driver_root_ctr, sizeof(st->lib_root));
        st->lib_name = "libnvidia-ml.so.1";
        return false;
    }
    if (need(f, VAL_PROBE_GPUS, st)) {
        /* not found under the root: the loader's default */
        const char *lib = cfg->nvml_library                       ? cfg->nvml_library
                          : f->fail[VAL_PROBE_FIND_LIB].code == 0 ? f->lib
                                                                  : "";
        strlcpy_s(st->path, lib, sizeof(st->path));
        return false;
    }
    const struct val_failure *x = &f->fail[VAL_PROBE_GPUS];
    if (x->code < 0) {
        if (x->stage == VAL_STAGE_OPEN)
            not_yet(st, "NVML does not initialise: %s", x->msg);
        else
            not_yet(st, "read the GPUs: %s", x->msg);
        return false;
    }
    return true;
}

/* ---- driver ------------------------------------------------------------------------------- */

static bool phase_driver_owner(const struct val_config *cfg, const struct val_facts *f,
                               struct val_step *st, struct val_driver_plan *pl)
{
    if (need(f, VAL_PROBE_DRIVER, st))
        return false;
    if (f->fail[VAL_PROBE_DRIVER].code < 0) {
        error(st, f->fail[VAL_PROBE_DRIVER].code, f->fail[VAL_PROBE_DRIVER].msg);
        return false;
    }
    if (need(f, VAL_PROBE_DRIVER_DS, st)) {
        st->selector = VAL_DRIVER_DS_SELECTOR;
        return false;
    }
    val_driver_plan(&cfg->paths, &f->driver, f->driver_ds, pl);
    if (pl->check)
        return true;
    /* nothing to check yet: what the driver pod says of why, when a DaemonSet manages it */
    if (f->driver_ds && need(f, VAL_PROBE_DRIVER_POD, st)) {
        st->selector = VAL_DRIVER_DS_SELECTOR;
        return false;
    }
    if (f->driver_pod) {
        char why[NODESTATE_REASON_MAX];
        val_driver_pod_reason(f->driver_pod, why, sizeof(why));
        not_yet(st, "%s; driver pod %s: %s", pl->reason,
                kobj_path_str(f->driver_pod, "metadata.name"),
                why[0] ? why : "no container status yet");
    } else {
        not_yet(st, "%s", pl->reason);
    }
    return false;
}

/* The modules the driver container enabled (its .driver-ctr-ready; a host driver's are the
 * host's business: none) are loaded; otherwise what the driver pod says of its module
 * containers joins the reason. */
static bool phase_driver_modules(const struct val_facts *f, struct val_step *st,
                                 const struct val_driver_plan *pl, bool enabled[VAL_MOD_COUNT])
{
    val_modules_enabled(NULL, 0, enabled);
    if (pl->source != VAL_SRC_CONTAINER)
        return true;
    if (need(f, VAL_PROBE_CTR_READY, st))
        return false;
    const struct val_failure *x = &f->fail[VAL_PROBE_CTR_READY];
    if (x->code < 0 && x->code != -ENOENT) {
        not_yet(st, "%s", x->msg);
        return false;
    }
    if (x->code == 0)
        val_modules_enabled(f->ctr_ready, f->ctr_ready_len, enabled);
    char missing[NODESTATE_REASON_MAX];
    if (val_modules_missing(enabled, f->driver.module, NULL, missing, sizeof(missing)) == 0)
        return true;
    /* what the driver pod says of the containers that load them */
    if (f->driver_ds && need(f, VAL_PROBE_DRIVER_POD, st)) {
        st->selector = VAL_DRIVER_DS_SELECTOR;
        return false;
    }
    val_modules_missing(enabled, f->driver.module, f->driver_pod, missing, sizeof(missing));
    if (f->driver_pod)
        not_yet(st, "%s (driver pod %s)", missing, kobj_path_str(f->driver_pod, "metadata.name"));
    else
        not_yet(st, "%s", missing);
    return false;
}

static void check_driver(const struct val_config *cfg, const struct val_facts *f,
                         struct val_step *st)
{
    struct val_driver_plan pl;
    if (!phase_driver_owner(cfg, f, st, &pl))
        return;
    if (need(f, VAL_PROBE_GPUS, st)) {
        strlcpy_s(st->path, cfg->nvml_library ? cfg->nvml_library : pl.nvml, sizeof(st->path));
        return;
    }
    const struct val_failure *x = &f->fail[VAL_PROBE_GPUS];
    struct val_driver_seen seen = {.expected_version = cfg->driver_version, .pci_gpus = -1};
    if (x->code < 0) {
        seen.nvml_error = x->msg;
    } else {
        if (need(f, VAL_PROBE_PCI, st))
            return;
        seen.n_gpus = f->n_gpus;
        for (size_t i = 0; i < f->n_gpus; i++)
            seen.n_lost += f->gpus[i].lost;
        seen.version = f->nvml_version;
        seen.pci_gpus = f->pci_gpus;
    }
    char why[NODESTATE_REASON_MAX];
    if (val_driver_verify(&seen, why, sizeof(why)) < 0) {
        not_yet(st, "%s (%s driver: %s)", why, val_driver_source_name(pl.source), pl.found);
        return;
    }
    bool enabled[VAL_MOD_COUNT];
    if (!phase_driver_modules(f, st, &pl, enabled))
        return;
    struct err re = {0};
    if (nodestate_driver_ready_render(&pl.ready, &st->text, &re) < 0) {
        error(st, re.code < 0 ? re.code : -EINVAL, re.msg);
        return;
    }
    /* the owner it verified, with the version NVML reports */
    st->record_owner = true;
    st->owner.owner = pl.source == VAL_SRC_HOST ? NODESTATE_OWNER_HOST : NODESTATE_OWNER_CONTAINER;
    strlcpy_s(st->owner.version, seen.version ? seen.version : "", sizeof(st->owner.version));
    str_printf_cut(st->owner.source, sizeof(st->owner.source), "validated: %s", pl.found);
    char q[NODESTATE_REASON_MAX];
    strlcpy_s(q, pl.found, sizeof(q));
    /* each enabled module's status file; a module switched off leaves none behind */
    for (int m = 0; m < VAL_MOD_COUNT; m++) {
        st->also[val_module_file((enum val_module)m)] = enabled[m];
        st->drop[val_module_file((enum val_module)m)] = !enabled[m];
    }
    passed(
        st, true, NODESTATE_DRIVER_READY, "driver validated",
        "source=%s found=\"%s\" version=%s gpus=%zu pci=%d rdma=%s gds=%s gdrcopy=%s",
        val_driver_source_name(pl.source), log_kv_quote(q), seen.version ? seen.version : "(null)",
        seen.n_gpus, seen.pci_gpus, enabled[VAL_MOD_PEERMEM] ? "true" : "false",
        enabled[VAL_MOD_NVIDIA_FS] ? "true" : "false", enabled[VAL_MOD_GDRCOPY] ? "true" : "false");
}

/* ---- toolkit ------------------------------------------------------------------------------ */

/* The toolkit's marker, parsed into tm: required while a toolkit DaemonSet runs, else its
 * defaults (a toolkit gpuop does not manage). */
static bool phase_marker(const struct val_config *cfg, const struct val_facts *f,
                         struct val_step *st, struct nodestate_toolkit_marker *tm)
{
    char path[PATH_MAX];
    if (nodestate_file_path(cfg->paths.validations_dir, NODESTATE_TOOLKIT_CTR_READY, path,
                            sizeof(path)) < 0) {
        error(st, -ENAMETOOLONG, "--validations-dir: path too long");
        return false;
    }
    if (need(f, VAL_PROBE_MARKER, st))
        return false;
    const struct val_failure *x = &f->fail[VAL_PROBE_MARKER];
    if (x->code == -ENOENT) {
        if (need(f, VAL_PROBE_TOOLKIT_DS, st)) {
            st->selector = VAL_TOOLKIT_DS_SELECTOR;
            return false;
        }
        if (f->toolkit_ds) {
            not_yet(st, "waiting for the toolkit: %s is not there yet", path);
            return false;
        }
    } else if (x->code < 0) {
        not_yet(st, "%s", x->msg);
        return false;
    }
    struct err pe = {0};
    if (nodestate_toolkit_marker_parse(path, x->code == 0 ? f->marker : NULL, f->marker_len, tm,
                                       &pe) < 0) {
        not_yet(st, "%s", pe.msg);
        return false;
    }
    return true;
}

/* The node's CDI spec, read and parsed where the marker says it is. */
static bool phase_spec(const struct val_config *cfg, const struct val_facts *f, struct val_step *st,
                       const struct nodestate_toolkit_marker *tm)
{
    if (need(f, VAL_PROBE_CDI_SPEC, st)) {
        strlcpy_s(st->path, tm->cdi_spec, sizeof(st->path));
        return false;
    }
    const struct val_failure *x = &f->fail[VAL_PROBE_CDI_SPEC];
    if (x->code == 0)
        return true;
    if (x->stage == VAL_STAGE_RESOLVE)
        not_yet(st, "CDI spec %s under %s: cannot resolve its path", tm->cdi_spec,
                cfg->paths.host_root);
    else if (x->stage == VAL_STAGE_PARSE)
        not_yet(st, "CDI spec \"%s\" does not parse: %s", f->spec_path, x->msg);
    else
        not_yet(st, "CDI spec: %s", x->msg);
    return false;
}

/* The spec names every GPU and MIG device NVML lists. */
static bool phase_spec_devices(const struct val_facts *f, struct val_step *st)
{
    char missing[NODESTATE_REASON_MAX];
    size_t nm = val_cdi_missing(f->gpus, f->n_gpus, f->spec_has, f->spec, missing, sizeof(missing));
    if (nm == 0)
        return true;
    not_yet(st, "CDI spec \"%s\" lacks %zu device%s: %s", f->spec_path, nm, nm == 1 ? "" : "s",
            missing);
    return false;
}

/* The runtime the node runs is configured for GPUs, unless the toolkit left it alone. */
static bool phase_runtime(const struct val_facts *f, struct val_step *st,
                          const struct nodestate_toolkit_marker *tm)
{
    if (!tm->check_runtime)
        return true;
    if (need(f, VAL_PROBE_NODE, st))
        return false;
    if (need(f, VAL_PROBE_RUNTIME, st)) {
        /* the Node unread: detected from the node root alone */
        st->runtime_version =
            f->fail[VAL_PROBE_NODE].code == 0 && f->node
                ? kobj_path_str(f->node, "status.nodeInfo.containerRuntimeVersion")
                : NULL;
        st->marker = *tm;
        return false;
    }
    const struct val_failure *x = &f->fail[VAL_PROBE_RUNTIME];
    if (x->code == 0)
        return true;
    if (x->stage == VAL_STAGE_DETECT)
        not_yet(st, "container runtime: %s", x->msg);
    else
        not_yet(st, "%s is not configured for GPUs: %s", f->runtime ? f->runtime : "?", x->msg);
    return false;
}

static void check_toolkit(const struct val_config *cfg, const struct val_facts *f,
                          struct val_step *st)
{
    struct nodestate_driver_ready dr;
    struct nodestate_toolkit_marker tm;
    if (!phase_driver_ready(cfg, f, st, &dr) || !phase_marker(cfg, f, st, &tm) ||
        !phase_spec(cfg, f, st, &tm) || !phase_gpus(cfg, f, st, &dr) ||
        !phase_spec_devices(f, st) || !phase_runtime(f, st, &tm))
        return;
    passed(st, true, NODESTATE_TOOLKIT_READY, "toolkit validated",
           "runtime=%s cdi-spec=%s devices=%zu", tm.check_runtime ? f->runtime : "none",
           f->spec_path, f->spec_devices);
}

/* ---- cuda --------------------------------------------------------------------------------- */

static void check_cuda(const struct val_config *cfg, const struct val_facts *f, struct val_step *st)
{
    struct nodestate_driver_ready dr;
    if (!phase_driver_ready(cfg, f, st, &dr))
        return;
    if (!cfg->cuda_library) {
        if (need(f, VAL_PROBE_FIND_LIB, st)) {
            strlcpy_s(st->lib_root, dr.driver_root_ctr, sizeof(st->lib_root));
            st->lib_name = "libcuda.so.1";
            return;
        }
        if (f->fail[VAL_PROBE_FIND_LIB].code < 0) {
            not_yet(st, "libcuda.so.1 is not under the driver root %s (searched its lib folders)",
                    dr.driver_root_ctr);
            return;
        }
    }
    if (need(f, VAL_PROBE_CUDA, st)) {
        strlcpy_s(st->path, cfg->cuda_library ? cfg->cuda_library : f->lib, sizeof(st->path));
        return;
    }
    if (f->fail[VAL_PROBE_CUDA].code < 0) {
        not_yet(st, "CUDA check: %s", f->fail[VAL_PROBE_CUDA].msg);
        return;
    }
    passed(st, true, NODESTATE_CUDA_READY, "cuda validated", "devices=%d driver=%d",
           f->cuda_devices, f->cuda_driver);
}

/* ---- plugin ------------------------------------------------------------------------------- */

#define VAL_LABEL_DEPLOY_PLUGIN "nvidia.com/gpu.deploy.device-plugin" /* NVIDIA's deploy label */

/* What the node advertises covers what NVML lists, under the node's MIG strategy. */
static bool phase_advertised(const struct val_config *cfg, const struct val_facts *f,
                             struct val_step *st, const char **ret_strategy,
                             struct nodestate_gpu_count *c)
{
    if (need(f, VAL_PROBE_NODE, st))
        return false;
    if (f->fail[VAL_PROBE_NODE].code < 0) {
        not_yet(st, "get the node: %s", f->fail[VAL_PROBE_NODE].msg);
        return false;
    }
    const char *label = kobj_label(f->node, "nvidia.com/mig.strategy");
    enum nodestate_mig_strategy ms = NODESTATE_MIG_NONE;
    if (nodestate_mig_strategy_parse(label ? label : cfg->mig_strategy, &ms) < 0) {
        not_yet(st, "node label nvidia.com/mig.strategy: \"%s\" is not none, single or mixed",
                label ? label : cfg->mig_strategy);
        return false;
    }
    *ret_strategy = label ? label : "none";
    _cleanup_free_ char *alloc = NULL;
    const json_t *a = kobj_path(f->node, "status.allocatable");
    if (a)
        alloc = json_dumps(a, JSON_COMPACT);
    struct err ce = {0};
    if (nodestate_gpu_count_compare(f->gpus, f->n_gpus, ms, alloc, c, &ce) < 0) {
        not_yet(st, "compare the GPUs: %s", ce.msg);
        return false;
    }
    if (!c->short_)
        return true;
    char why[NODESTATE_REASON_MAX];
    val_plugin_reason(c, why, sizeof(why));
    not_yet(st, "the node advertises fewer GPUs than it has: %s", why);
    return false;
}

static void check_plugin(const struct val_config *cfg, const struct val_facts *f,
                         struct val_step *st)
{
    struct nodestate_driver_ready dr;
    if (!phase_driver_ready(cfg, f, st, &dr) || !phase_gpus(cfg, f, st, &dr))
        return;
    /* A node whose device plugin is turned off (moved to DRA by its pool, docs/dra.md) hands
     * its GPUs out through ResourceSlices and advertises none: there is nothing to compare. */
    if (need(f, VAL_PROBE_NODE, st))
        return;
    if (f->fail[VAL_PROBE_NODE].code >= 0 &&
        streq_ptr(kobj_label(f->node, VAL_LABEL_DEPLOY_PLUGIN), "false")) {
        passed(st, true, NODESTATE_PLUGIN_READY, "plugin validated: no device plugin on this node",
               "label=%s=false", VAL_LABEL_DEPLOY_PLUGIN);
        return;
    }
    const char *strategy = "none";
    struct nodestate_gpu_count *c _cleanup_free_ = xcalloc(1, sizeof(*c));
    if (!phase_advertised(cfg, f, st, &strategy, c))
        return;
    passed(st, true, NODESTATE_PLUGIN_READY, "plugin validated", "physical=%lld strategy=%s",
           (long long)c->physical, strategy);
}

/* ---- the status files --------------------------------------------------------------------- */

static void check_all_done(const struct val_config *cfg, const struct val_facts *f,
                           struct val_step *st)
{
    if (need(f, VAL_PROBE_STATUS, st))
        return;
    char missing[256];
    if (val_status_missing(f->status, cfg->without_plugin, missing, sizeof(missing)) > 0) {
        not_yet(st, "not validated yet: %s missing in %s", missing, cfg->paths.validations_dir);
        return;
    }
    passed(st, false, NODESTATE_FILE_COUNT, "all validations are successful", "dir=%s",
           cfg->paths.validations_dir);
}

static void check_toolkit_ready(const struct val_config *cfg, const struct val_facts *f,
                                struct val_step *st)
{
    if (need(f, VAL_PROBE_STATUS, st))
        return;
    if (!f->status[NODESTATE_TOOLKIT_READY]) {
        not_yet(st, "waiting for %s in %s", nodestate_file_name(NODESTATE_TOOLKIT_READY),
                cfg->paths.validations_dir);
        return;
    }
    passed(st, false, NODESTATE_FILE_COUNT, NULL, "%s", "");
}

void val_check_step(enum val_component c, const struct val_config *cfg, const struct val_facts *f,
                    struct val_step *ret)
{
    typedef void (*check_fn)(const struct val_config *, const struct val_facts *,
                             struct val_step *);
    static const check_fn checks[] = {check_driver, check_toolkit,  check_cuda,
                                      check_plugin, check_all_done, check_toolkit_ready};
    static_assert(ARRAY_SIZE(checks) == VAL_COMPONENT_COUNT, "a plan per component");
    assert((unsigned)c < VAL_COMPONENT_COUNT);
    val_step_clear(ret);
    checks[c](cfg, f, ret);
    /* a probe asked for has not run yet; a verdict that writes names a status file */
    assert(ret->probe == VAL_PROBE_NONE || !f->have[ret->probe]);
    assert(ret->probe != VAL_PROBE_NONE || !ret->write || ret->file < NODESTATE_FILE_COUNT);
    assert(ret->probe != VAL_PROBE_NONE || ret->outcome == VAL_PASSED || ret->reason[0]);
}
