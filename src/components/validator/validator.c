/* SPDX-License-Identifier: Apache-2.0 */
/* The validator's decisions (validator.h): the driver's owner and driver-ready, the toolkit
 * marker, the CDI spec's missing devices, the plugin's shortfall, all-done's missing files. */
#include <assert.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "kobj.h"
#include "validator.h"

const char *const val_component_names[] = {"driver",   "toolkit",       "cuda", "plugin",
                                           "all-done", "toolkit-ready", NULL};

int val_component_ns(enum val_component c, enum nodestate_component *ret)
{
    static const enum nodestate_component map[] = {NODESTATE_COMP_DRIVER, NODESTATE_COMP_TOOLKIT,
                                                   NODESTATE_COMP_CUDA, NODESTATE_COMP_PLUGIN};
    if ((unsigned)c >= ARRAY_SIZE(map))
        return -EINVAL;
    *ret = map[c];
    return 0;
}

const char *val_driver_source_name(enum val_driver_source s)
{
    switch (s) {
    case VAL_SRC_HOST:
        return "host";
    case VAL_SRC_CONTAINER:
        return "container";
    case VAL_SRC_NONE:
        break;
    }
    return "none";
}

/* A plan either checks a driver it found or says why there is none to check yet. */
static void plan_done(const struct val_driver_plan *pl, struct val_driver_plan *ret)
{
    assert(pl->check ? pl->found[0] && !pl->reason[0] : pl->reason[0] && !pl->nvml[0]);
    assert(!pl->check || pl->source != VAL_SRC_NONE);
    *ret = *pl;
}

void val_driver_plan(const struct val_paths *p, const struct nodestate_driver_facts *f,
                     bool driver_managed, struct val_driver_plan *ret)
{
    struct val_driver_plan pl = {0};
    bool host_files = f->host_smi[0] && f->host_nvml[0];
    bool host_module = f->module[NODESTATE_MOD_NVIDIA] && !f->root_used && !driver_managed;
    if (host_files || host_module) {
        pl.source = VAL_SRC_HOST;
        pl.check = true;
        strlcpy_s(pl.nvml, f->host_nvml, sizeof(pl.nvml));
        if (host_files)
            str_printf_cut(pl.found, sizeof(pl.found), "nvidia-smi %s and %s on the host",
                           f->host_smi, f->host_nvml);
        else
            str_printf_cut(pl.found, sizeof(pl.found),
                           "module nvidia loaded (%s/sys/module/nvidia)",
                           strcmp(p->host_root, "/") == 0 ? "" : p->host_root);
        pl.ready.is_host_driver = true;
        strlcpy_s(pl.ready.driver_root, "/", sizeof(pl.ready.driver_root));
        strlcpy_s(pl.ready.driver_root_ctr, p->host_root, sizeof(pl.ready.driver_root_ctr));
        strlcpy_s(pl.ready.dev_root, "/", sizeof(pl.ready.dev_root));
        strlcpy_s(pl.ready.dev_root_ctr, p->host_root, sizeof(pl.ready.dev_root_ctr));
        plan_done(&pl, ret);
        return;
    }
    pl.ready.is_host_driver = false;
    strlcpy_s(pl.ready.driver_root, p->driver_root, sizeof(pl.ready.driver_root));
    strlcpy_s(pl.ready.driver_root_ctr, p->driver_root, sizeof(pl.ready.driver_root_ctr));
    /* The driver container's devices when its root has them, else the host's. */
    strlcpy_s(pl.ready.dev_root, f->root_dev ? p->driver_root : "/", sizeof(pl.ready.dev_root));
    strlcpy_s(pl.ready.dev_root_ctr, f->root_dev ? p->driver_root : p->host_root,
              sizeof(pl.ready.dev_root_ctr));
    if (driver_managed && !f->ctr_ready) {
        pl.source = VAL_SRC_CONTAINER;
        str_printf_cut(pl.reason, sizeof(pl.reason),
                       "waiting for the driver container: %s is not there yet (its startup probe "
                       "writes it once the driver is loaded)",
                       nodestate_file_name(NODESTATE_DRIVER_CTR_READY));
        plan_done(&pl, ret);
        return;
    }
    if (f->root_nvml[0]) {
        pl.source = VAL_SRC_CONTAINER;
        pl.check = true;
        strlcpy_s(pl.nvml, f->root_nvml, sizeof(pl.nvml));
        str_printf_cut(pl.found, sizeof(pl.found), "the containerized driver under %s (%s)",
                       p->driver_root, f->root_nvml);
        plan_done(&pl, ret);
        return;
    }
    if (f->ctr_ready) {
        pl.source = VAL_SRC_CONTAINER;
        str_printf_cut(pl.reason, sizeof(pl.reason),
                       "%s is there but the driver root %s has no libnvidia-ml.so.1",
                       nodestate_file_name(NODESTATE_DRIVER_CTR_READY), p->driver_root);
        plan_done(&pl, ret);
        return;
    }
    pl.source = VAL_SRC_NONE;
    const char *left = "";
    if (f->host_nvml[0])
        left = "; only libraries are left on the host (an uninstalled driver?)";
    else if (f->host_smi[0])
        left = "; only nvidia-smi is on the host, without libnvidia-ml.so.1";
    str_printf_cut(pl.reason, sizeof(pl.reason),
                   "no driver: no nvidia module loaded (%s/sys/module/nvidia), no nvidia-smi with "
                   "libnvidia-ml.so.1 under %s, no containerized driver under %s%s",
                   strcmp(p->host_root, "/") == 0 ? "" : p->host_root, p->host_root, p->driver_root,
                   left);
    plan_done(&pl, ret);
}

/* ---- the driver's additional modules ------------------------------------------------------ */

static const struct {
    const char *var;     /* the variable in .driver-ctr-ready */
    const char *feature; /* what it enables */
    enum nodestate_module module;
    const char *container; /* the driver pod's container that loads it (or keeps it loaded) */
    enum nodestate_file file;
} val_modules[VAL_MOD_COUNT] = {
    [VAL_MOD_PEERMEM] = {"GPU_DIRECT_RDMA_ENABLED", "GPUDirect RDMA", NODESTATE_MOD_NVIDIA_PEERMEM,
                         "nvidia-peermem-ctr", NODESTATE_PEERMEM_READY},
    [VAL_MOD_NVIDIA_FS] = {"GDS_ENABLED", "GPUDirect Storage", NODESTATE_MOD_NVIDIA_FS,
                           "nvidia-fs-ctr", NODESTATE_NVIDIA_FS_READY},
    [VAL_MOD_GDRCOPY] = {"GDRCOPY_ENABLED", "GDRCopy", NODESTATE_MOD_GDRDRV, "nvidia-gdrcopy-ctr",
                         NODESTATE_GDRCOPY_READY},
};

enum nodestate_file val_module_file(enum val_module m)
{
    assert((unsigned)m < VAL_MOD_COUNT);
    return val_modules[m].file;
}

static bool blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r';
}

/* [s, e) without surrounding blanks and one pair of matching quotes. */
static void trim(const char **s, const char **e)
{
    while (*s < *e && blank(**s))
        (*s)++;
    while (*e > *s && blank((*e)[-1]))
        (*e)--;
    if (*e - *s >= 2 && (**s == '"' || **s == '\'') && (*e)[-1] == **s) {
        (*s)++;
        (*e)--;
    }
}

void val_modules_enabled(const char *text, size_t len, bool ret[VAL_MOD_COUNT])
{
    for (int m = 0; m < VAL_MOD_COUNT; m++)
        ret[m] = false;
    const char *end = text ? text + len : NULL;
    for (const char *line = text; line && line < end;) {
        const char *nl = memchr(line, '\n', (size_t)(end - line));
        const char *le = nl ? nl : end;
        const char *sep = NULL;
        for (const char *c = line; c < le && !sep; c++)
            if (*c == '=' || *c == ':')
                sep = c;
        if (sep) {
            const char *ks = line, *ke = sep, *vs = sep + 1, *ve = le;
            trim(&ks, &ke);
            trim(&vs, &ve);
            for (int m = 0; m < VAL_MOD_COUNT; m++)
                if ((size_t)(ke - ks) == strlen(val_modules[m].var) &&
                    memcmp(ks, val_modules[m].var, (size_t)(ke - ks)) == 0)
                    ret[m] = ve - vs == 4 && strncasecmp(vs, "true", 4) == 0;
        }
        line = nl ? nl + 1 : end;
    }
}

static bool describe_container(const json_t *cs, char *buf, size_t n);

/* The status of the pod's container named name, described; false when it has none. */
static bool container_reason(const json_t *pod, const char *name, char *buf, size_t n)
{
    size_t i;
    json_t *cs;
    json_array_foreach (kobj_path(pod, "status.containerStatuses"), i, cs)
        if (streq_ptr(kobj_str(cs, "name"), name))
            return describe_container(cs, buf, n);
    return false;
}

size_t val_modules_missing(const bool enabled[VAL_MOD_COUNT],
                           const bool module[NODESTATE_MOD_COUNT], const json_t *driver_pod,
                           char *buf, size_t n)
{
    size_t missing = 0, used = 0;
    if (n)
        buf[0] = '\0';
    for (int m = 0; m < VAL_MOD_COUNT; m++) {
        if (!enabled[m] || module[val_modules[m].module])
            continue;
        missing++;
        char why[NODESTATE_REASON_MAX];
        bool said =
            driver_pod && container_reason(driver_pod, val_modules[m].container, why, sizeof(why));
        if (used < n) {
            int w =
                snprintf(buf + used, n - used, "%smodule %s (%s, %s) is not loaded%s%s%s",
                         used ? "; " : "", nodestate_module_name(val_modules[m].module),
                         val_modules[m].feature, val_modules[m].var, said ? ": " : "",
                         said ? why : " (the driver pod's ", said ? "" : val_modules[m].container);
            used = w < 0 ? n : used + (size_t)w;
            if (!said && used < n) {
                w = snprintf(buf + used, n - used, "%s",
                             m == VAL_MOD_PEERMEM ? " keeps it loaded)" : " loads it)");
                used = w < 0 ? n : used + (size_t)w;
            }
        }
    }
    if (used >= n && n >= 4)
        memcpy(buf + n - 4, "...", 4);
    return missing;
}

int val_driver_verify(const struct val_driver_seen *s, char *buf, size_t n)
{
    buf[0] = '\0';
    if (s->nvml_error) {
        str_printf_cut(buf, n, "NVML does not initialise: %s", s->nvml_error);
        return -ENODEV;
    }
    if (s->n_gpus == 0) {
        str_printf_cut(buf, n, "NVML lists no GPU");
        return -ENODEV;
    }
    if (s->n_lost > 0) {
        str_printf_cut(buf, n, "%zu of %zu GPUs are lost (NVML_ERROR_GPU_IS_LOST)", s->n_lost,
                       s->n_gpus);
        return -ENODEV;
    }
    if (s->pci_gpus > 0 && (size_t)s->pci_gpus != s->n_gpus) {
        str_printf_cut(buf, n, "NVML lists %zu GPUs but the node has %d NVIDIA PCI devices",
                       s->n_gpus, s->pci_gpus);
        return -ENODEV;
    }
    if (s->expected_version && *s->expected_version &&
        !streq_ptr(s->version, s->expected_version)) {
        str_printf_cut(buf, n, "driver version %s, expected %s",
                       s->version ? s->version : "(unknown)", s->expected_version);
        return -ENODEV;
    }
    return 0;
}

/* ---- toolkit ------------------------------------------------------------------------------ */

#define MISSING_NAMED 8

static void add_missing(char *buf, size_t n, size_t *count, const char *name)
{
    if (*count < MISSING_NAMED) {
        size_t used = strlen(buf);
        str_printf_cut(buf + used, n - used, "%s%s", used ? ", " : "", name);
    }
    (*count)++;
}

size_t val_cdi_missing(const struct nodestate_gpu *gpus, size_t n,
                       bool (*has)(void *ud, const char *name), void *ud, char *buf, size_t bufn)
{
    size_t count = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        char name[64];
        snprintf(name, sizeof(name), "%zu", i);
        if (!has(ud, name))
            add_missing(buf, bufn, &count, name);
        if (gpus[i].uuid && *gpus[i].uuid && !has(ud, gpus[i].uuid))
            add_missing(buf, bufn, &count, gpus[i].uuid);
        if (!gpus[i].mig_enabled)
            continue;
        for (size_t m = 0; m < gpus[i].n_mig; m++) {
            snprintf(name, sizeof(name), "%zu:%zu", i, m);
            if (!has(ud, name))
                add_missing(buf, bufn, &count, name);
            const char *u = gpus[i].mig_uuids ? gpus[i].mig_uuids[m] : NULL;
            if (u && *u && !has(ud, u))
                add_missing(buf, bufn, &count, u);
        }
    }
    if (count > MISSING_NAMED) {
        size_t used = strlen(buf);
        str_printf_cut(buf + used, bufn - used, " and %zu more", count - MISSING_NAMED);
    }
    return count;
}

/* ---- plugin ------------------------------------------------------------------------------- */

static int64_t advertised_of(const struct nodestate_gpu_count *c, const char *name)
{
    for (size_t i = 0; i < c->n_advertised; i++)
        if (strcmp(c->advertised[i].name, name) == 0)
            return c->advertised[i].count;
    return 0;
}

void val_plugin_reason(const struct nodestate_gpu_count *c, char *buf, size_t n)
{
    buf[0] = '\0';
    if (!c->short_)
        return;
    /* nodestate names the short resources and the GPUs it knows why of; else the counts */
    for (size_t i = 0; i < c->n_missing; i++) {
        size_t used = strlen(buf);
        str_printf_cut(buf + used, n - used, "%s%s", i ? "; " : "", c->missing[i]);
    }
    for (size_t i = 0; c->n_missing == 0 && i < c->n_expected; i++) {
        int64_t have = advertised_of(c, c->expected[i].name);
        if (have >= c->expected[i].count)
            continue;
        size_t used = strlen(buf);
        str_printf_cut(buf + used, n - used, "%s%s: %lld of %lld advertised", used ? "; " : "",
                       c->expected[i].name, (long long)have, (long long)c->expected[i].count);
    }
}

/* ---- what a try leads to ------------------------------------------------------------------ */

uint64_t val_try_window_ms(enum val_component c, bool wait, uint64_t timeout_ms)
{
    if (c == VAL_PLUGIN)
        return timeout_ms;
    return wait ? UINT64_MAX : 0;
}

void val_report_plan(enum val_component c, enum val_outcome o, const char *reason,
                     const char *last_reason, bool more_time, struct val_report *ret)
{
    struct val_report r = {0};
    const char *name = (unsigned)c < VAL_COMPONENT_COUNT ? val_component_names[c] : "?";
    /* all-done and the toolkit-ready wait have no status file and no annotation */
    bool checks = c != VAL_ALL_DONE && c != VAL_TOOLKIT_READY;
    enum nodestate_component nc;
    if (checks && val_component_ns(c, &nc) == 0)
        r.file = nodestate_component_file(nc);
    if (o == VAL_PASSED) {
        r.next = VAL_NEXT_DONE;
        r.annotate = r.event = checks;
        r.state = NODESTATE_V_OK;
        r.event_reason = "ValidationSucceeded";
        str_printf_cut(r.message, sizeof(r.message), "%s validation passed", name);
        *ret = r;
        return;
    }
    /* A stale success must not stay for readers to see. */
    r.remove_file = checks;
    assert(!r.remove_file || r.file < NODESTATE_FILE_COUNT);
    r.annotate = checks;
    r.event = true;
    r.warning = true;
    r.event_reason = "ValidationFailed";
    if (o == VAL_NOT_YET && more_time) {
        r.next = VAL_NEXT_RETRY;
        r.state = NODESTATE_V_WAITING;
        bool fresh = !last_reason || strcmp(reason, last_reason) != 0;
        r.annotate = r.annotate && fresh;
        r.event = fresh && c != VAL_TOOLKIT_READY; /* every operand waits: no Event each */
        r.log_retry = fresh;
        str_printf_cut(r.message, sizeof(r.message), "%s: %s (retrying)", name, reason);
    } else {
        r.next = VAL_NEXT_FAIL;
        r.state = NODESTATE_V_FAILED;
        str_printf_cut(r.message, sizeof(r.message), "%s: %s", name, reason);
    }
    *ret = r;
}

/* ---- all-done ----------------------------------------------------------------------------- */

size_t val_status_missing(const bool present[NODESTATE_FILE_COUNT], bool without_plugin, char *buf,
                          size_t n)
{
    static const enum nodestate_file need[] = {NODESTATE_DRIVER_READY, NODESTATE_TOOLKIT_READY,
                                               NODESTATE_CUDA_READY, NODESTATE_PLUGIN_READY};
    size_t count = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < ARRAY_SIZE(need); i++) {
        if (present[need[i]] || (without_plugin && need[i] == NODESTATE_PLUGIN_READY))
            continue;
        size_t used = strlen(buf);
        str_printf_cut(buf + used, n - used, "%s%s", used ? ", " : "",
                       nodestate_file_name(need[i]));
        count++;
    }
    assert(count <= ARRAY_SIZE(need));
    return count;
}

bool val_status_cleared_on_stop(enum nodestate_file f)
{
    return f != NODESTATE_DRIVER_CTR_READY && f != NODESTATE_TOOLKIT_CTR_READY &&
           f < NODESTATE_FILE_COUNT;
}

/* The last non-empty line of a termination message (a log tail), into buf. */
static void last_line(const char *msg, char *buf, size_t n)
{
    size_t end = strlen(msg);
    while (end > 0 && (msg[end - 1] == '\n' || msg[end - 1] == '\r' || msg[end - 1] == ' '))
        end--;
    size_t start = end;
    while (start > 0 && msg[start - 1] != '\n')
        start--;
    str_printf_cut(buf, n, "%.*s", (int)(end - start), msg + start);
}

static bool describe_container(const json_t *cs, char *buf, size_t n)
{
    const char *name = kobj_str(cs, "name");
    const json_t *waiting = kobj_path(cs, "state.waiting");
    const json_t *term = kobj_path(cs, "state.terminated");
    const json_t *last = kobj_path(cs, "lastState.terminated");
    if (!name)
        name = "?";
    if (term && json_integer_value(json_object_get(term, "exitCode")) == 0)
        return false; /* an init container that finished */
    if (json_is_true(json_object_get(cs, "ready")))
        return false;
    /* A failure reads the same whether the container is down now or waiting to restart, so
     * the reason does not change with each restart (one Event per change). */
    const json_t *failed =
        term                                                                       ? term
        : waiting && last && json_integer_value(json_object_get(last, "exitCode")) ? last
                                                                                   : NULL;
    char msgbuf[NODESTATE_REASON_MAX] = "";
    const char *msg = failed    ? kobj_str(failed, "message")
                      : waiting ? kobj_str(waiting, "message")
                                : NULL;
    if (msg && *msg) {
        msgbuf[0] = ':';
        msgbuf[1] = ' ';
        last_line(msg, msgbuf + 2, sizeof(msgbuf) - 2);
    }
    if (failed) {
        str_printf_cut(buf, n, "%s failed (exit %lld)%s", name,
                       (long long)json_integer_value(json_object_get(failed, "exitCode")), msgbuf);
    } else if (waiting) {
        const char *why = kobj_str(waiting, "reason");
        str_printf_cut(buf, n, "%s: %s%s", name, why ? why : "waiting", msgbuf);
    } else if (kobj_path(cs, "state.running")) {
        str_printf_cut(buf, n, "%s: running, not ready yet", name);
    } else {
        return false;
    }
    return true;
}

void val_driver_pod_reason(const json_t *pod, char *buf, size_t n)
{
    if (n)
        buf[0] = '\0';
    static const char *const lists[] = {"status.initContainerStatuses", "status.containerStatuses"};
    for (size_t l = 0; l < 2; l++) {
        size_t i;
        json_t *cs;
        json_array_foreach (kobj_path(pod, lists[l]), i, cs) {
            if (describe_container(cs, buf, n))
                return;
        }
    }
}
