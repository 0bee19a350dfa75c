/* SPDX-License-Identifier: Apache-2.0 */
/* The simulated images' pure part (simimage.h): no I/O, no clock. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "simimage.h"

/* ---- the driver image ------------------------------------------------------------------ */

static bool is_version(const char *s, size_t n)
{
    if (n == 0 || s[0] < '0' || s[0] > '9' || s[n - 1] == '.')
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || s[i] == '.'))
            return false;
    return true;
}

int simimg_driver_ref_parse(const char *image, const char *env_version,
                            struct simimg_driver_ref *ret, struct err *e)
{
    struct simimg_driver_ref r = {0};
    if (image && *image) {
        size_t len = strcspn(image, "@"); /* a digest names no version */
        const char *slash = NULL;
        for (size_t i = 0; i < len; i++)
            if (image[i] == '/')
                slash = image + i;
        const char *tag =
            memchr(slash ? slash : image, ':', len - (size_t)((slash ? slash : image) - image));
        if (tag) {
            tag++;
            size_t tlen = len - (size_t)(tag - image);
            size_t vlen = strcspn(tag, "-@");
            if (vlen > tlen)
                vlen = tlen;
            if (is_version(tag, vlen) && vlen < sizeof(r.version)) {
                memcpy(r.version, tag, vlen);
                const char *rest = tag + vlen + 1;
                size_t rlen = vlen < tlen && tag[vlen] == '-' ? tlen - vlen - 1 : 0;
                const char *last = rlen ? memrchr(rest, '-', rlen) : NULL;
                if (!memchr(tag, '.', vlen) && last && last > rest && last + 1 < rest + rlen &&
                    (size_t)(last - rest) < sizeof(r.kernel) &&
                    (size_t)(rest + rlen - last - 1) < sizeof(r.os)) {
                    /* precompiled: <branch>-<kernel>-<os> */
                    memcpy(r.kernel, rest, (size_t)(last - rest));
                    memcpy(r.os, last + 1, (size_t)(rest + rlen - last - 1));
                } else if (rlen && rlen < sizeof(r.os)) {
                    memcpy(r.os, rest, rlen);
                }
            }
        }
    }
    if (env_version && *env_version) {
        size_t n = strlen(env_version);
        if (!is_version(env_version, n) || n >= sizeof(r.version))
            return err_set(e, -EINVAL, "DRIVER_VERSION \"%s\" is not a driver version",
                           env_version);
        size_t bl = strcspn(env_version, ".");
        if (r.kernel[0] && (bl != strlen(r.version) || memcmp(env_version, r.version, bl) != 0))
            return err_set(e, -EINVAL,
                           "DRIVER_VERSION \"%s\" is not of branch %s, the precompiled image's "
                           "(image \"%s\")",
                           env_version, r.version, image);
        memcpy(r.version, env_version, n + 1);
    }
    if (!r.version[0])
        return err_set(e, -EINVAL,
                       "no driver version: set DRIVER_VERSION or use an image tagged "
                       "<version>-<os> (image \"%s\")",
                       image ? image : "");
    *ret = r;
    return 0;
}

int simimg_driver_ref_complete(struct simimg_driver_ref *ref, const char *fleet_version,
                               struct err *e)
{
    if (!ref->kernel[0] || strchr(ref->version, '.'))
        return 0;
    size_t bl = strlen(ref->version);
    if (fleet_version && strlen(fleet_version) < sizeof(ref->version) &&
        is_version(fleet_version, strlen(fleet_version)) &&
        strncmp(fleet_version, ref->version, bl) == 0 && fleet_version[bl] == '.') {
        strlcpy_s(ref->version, fleet_version, sizeof(ref->version));
        return 0;
    }
    return err_set(e, -EINVAL,
                   "the precompiled image names driver branch %s only, and the simulated node's "
                   "driver (%s) is not of it: set DRIVER_VERSION",
                   ref->version, fleet_version ? fleet_version : "none");
}

int simimg_kernel_from_proc_version(const char *text, char *buf, size_t n, struct err *e)
{
    static const char head[] = "Linux version ";
    const char *p = strstr(text, head);
    if (!p)
        return err_set(e, -EINVAL, "no \"Linux version\" in the text");
    p += sizeof(head) - 1;
    size_t len = strcspn(p, " \t\n");
    if (len == 0 || len >= n)
        return err_set(e, -EINVAL, "no kernel release after \"Linux version\"");
    memcpy(buf, p, len);
    buf[len] = '\0';
    return 0;
}

int simimg_proc_version_text(const char *version, const char *kernel, bool open, struct sbuf *out)
{
    sbuf_addf(out,
              "NVRM version: NVIDIA UNIX %s  %s  (simulated build for Linux "
              "kernel %s)\nGCC version:  gcc version 12.3.0 (simulated)\n",
              open ? "Open Kernel Module for x86_64" : "x86_64 Kernel Module", version, kernel);
    return sbuf_check(out);
}

int simimg_module_type(const char *kmt, const char *open_enabled, bool all_gsp, bool any_open_only,
                       unsigned branch, bool *ret_open, struct err *e)
{
    if (kmt && strcmp(kmt, "open") == 0) {
        *ret_open = true;
        return 0;
    }
    if (kmt && strcmp(kmt, "proprietary") == 0) {
        *ret_open = false;
        return 0;
    }
    if (kmt && *kmt && strcmp(kmt, "auto") != 0)
        return err_set(e, -EINVAL, "KERNEL_MODULE_TYPE \"%s\": expected auto, open or proprietary",
                       kmt);
    if ((!kmt || !*kmt) && open_enabled && strcmp(open_enabled, "true") == 0) {
        *ret_open = true;
        return 0;
    }
    *ret_open = any_open_only || (all_gsp && branch >= 560);
    return 0;
}

void simimg_nvrm_refusal(bool open, const char *bus_id, uint32_t pci_device_id, struct sbuf *out)
{
    sbuf_addf(out, "NVRM: The NVIDIA GPU %s (PCI ID: 10de:%04x)\n", bus_id,
              (unsigned)(pci_device_id >> 16));
    if (open)
        sbuf_adds(out, "NVRM: installed in this system is not supported by open\n"
                       "NVRM: nvidia.ko because it does not include the required GPU\n"
                       "NVRM: System Processor (GSP).\n"
                       "NVRM: Please see the 'Open Linux Kernel Modules' and 'GSP\n"
                       "NVRM: Firmware' sections in the driver README, available on\n"
                       "NVRM: the Linux graphics driver download page at\n"
                       "NVRM: www.nvidia.com.\n");
    else
        sbuf_adds(out, "NVRM: installed in this system requires use of the NVIDIA open kernel "
                       "modules.\n");
}

/* ---- NVIDIA_VISIBLE_DEVICES ------------------------------------------------------------ */

static void add_device(struct simimg_device **v, size_t *n, const struct gpu_device *g,
                       const struct gpu_mig_device *m)
{
    const char *uuid = m ? m->uuid : g->uuid;
    for (size_t i = 0; i < *n; i++)
        if (strcmp((*v)[i].uuid, uuid) == 0)
            return;
    *v = xrealloc(*v, (*n + 1) * sizeof(**v));
    struct simimg_device *d = &(*v)[(*n)++];
    memset(d, 0, sizeof(*d));
    d->gpu = g->index;
    d->mig = m != NULL;
    d->gi_id = m ? m->gi_id : UINT32_MAX;
    d->ci_id = m ? m->ci_id : UINT32_MAX;
    snprintf(d->uuid, sizeof(d->uuid), "%s", uuid);
    if (m)
        snprintf(d->name, sizeof(d->name), "%s MIG %s", g->name, m->profile);
    else
        snprintf(d->name, sizeof(d->name), "%s", g->name);
}

static const struct gpu_device *gpu_by_index(const struct gpu_inventory *inv, unsigned index)
{
    for (size_t i = 0; i < inv->n_gpus; i++)
        if (inv->gpus[i].index == index)
            return &inv->gpus[i];
    return NULL;
}

static int visible_entry(const struct gpu_inventory *inv, const char *tok, struct simimg_device **v,
                         size_t *n, struct err *e)
{
    if (str_has_prefix(tok, "GPU-") || str_has_prefix(tok, "MIG-")) {
        const struct gpu_mig_device *m = NULL;
        const struct gpu_device *g = gpu_inventory_find(inv, tok, &m);
        if (!g)
            return err_set(e, -ENOENT, "unknown device %s", tok);
        add_device(v, n, g, m);
        return 0;
    }
    char buf[64];
    snprintf(buf, sizeof(buf), "%s", tok);
    char *colon = strchr(buf, ':');
    if (colon)
        *colon = '\0';
    unsigned gi = 0, mi = 0;
    if (parse_uint(buf, &gi) < 0 || (colon && parse_uint(colon + 1, &mi) < 0))
        return err_set(e, -EINVAL, "unknown device %s", tok);
    const struct gpu_device *g = gpu_by_index(inv, gi);
    if (!g)
        return err_set(e, -ENOENT, "unknown device %s", tok);
    if (!colon) {
        add_device(v, n, g, NULL);
        return 0;
    }
    for (size_t k = 0; k < g->n_mig; k++)
        if (g->mig[k].index == mi) {
            add_device(v, n, g, &g->mig[k]);
            return 0;
        }
    return err_set(e, -ENOENT, "unknown device %s", tok);
}

int simimg_visible_devices(const struct gpu_inventory *inv, const char *value,
                           struct simimg_device **ret, size_t *ret_n, struct err *e)
{
    struct simimg_device *v _cleanup_free_ = NULL;
    size_t n = 0;
    if (!value)
        value = "";
    _cleanup_free_ char *copy = xstrdup(value);
    char *save = NULL;
    bool all = false;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ')
            tok++;
        size_t len = strlen(tok);
        while (len && tok[len - 1] == ' ')
            tok[--len] = '\0';
        if (!*tok || strcmp(tok, "none") == 0 || strcmp(tok, "void") == 0)
            continue;
        if (strcmp(tok, "all") == 0) {
            all = true;
            continue;
        }
        int r = visible_entry(inv, tok, &v, &n, e);
        if (r < 0)
            return r;
    }
    if (all) {
        n = 0;
        for (size_t i = 0; i < inv->n_gpus; i++) {
            const struct gpu_device *g = &inv->gpus[i];
            if (g->lost)
                continue;
            if (!g->mig_enabled)
                add_device(&v, &n, g, NULL);
            for (size_t k = 0; g->mig_enabled && k < g->n_mig; k++)
                add_device(&v, &n, g, &g->mig[k]);
        }
    }
    *ret = steal_ptr(&v);
    *ret_n = n;
    return 0;
}

/* ---- device nodes ---------------------------------------------------------------------- */

static bool has_minor(const unsigned *v, size_t n, unsigned m)
{
    for (size_t i = 0; i < n; i++)
        if (v[i] == m)
            return true;
    return false;
}

void simimg_devices_from_nodes(const struct gpu_inventory *inv, const struct sim_dev_nodes *v,
                               struct simimg_device **ret, size_t *ret_n)
{
    struct simimg_device *out = NULL;
    size_t n = 0;
    for (size_t i = 0; v->ctl && i < inv->n_gpus; i++) {
        const struct gpu_device *g = &inv->gpus[i];
        if (g->lost || !has_minor(v->gpu_minors, v->n_gpu, g->minor))
            continue;
        if (!g->mig_enabled) {
            add_device(&out, &n, g, NULL);
            continue;
        }
        for (size_t k = 0; k < g->n_mig; k++) {
            const struct gpu_mig_device *m = &g->mig[k];
            if (has_minor(v->cap_minors, v->n_cap, sim_mig_cap_minor(g->minor, m->gi_id, -1)) &&
                has_minor(v->cap_minors, v->n_cap,
                          sim_mig_cap_minor(g->minor, m->gi_id, (int)m->ci_id)))
                add_device(&out, &n, g, m);
        }
    }
    *ret = out;
    *ret_n = n;
}

/* ---- nvidia-smi ------------------------------------------------------------------------- */

#define SMI_WIDTH 89 /* between the outer bars */

/* text, cut or padded with spaces to width */
static void cell(struct sbuf *out, const char *text, size_t width)
{
    size_t len = strlen(text);
    if (len > width)
        len = width;
    sbuf_add(out, text, len);
    for (size_t i = len; i < width; i++)
        sbuf_add(out, " ", 1);
}

/* left and right, with the space between */
static void cell2(struct sbuf *out, const char *left, const char *right, size_t width)
{
    size_t l = strlen(left), r = strlen(right);
    char buf[256];
    if (l + r > width || width >= sizeof(buf)) {
        cell(out, left, width);
        return;
    }
    memset(buf, ' ', width);
    memcpy(buf, left, l);
    memcpy(buf + width - r, right, r);
    buf[width] = '\0';
    sbuf_adds(out, buf);
}

static void gpu_row(struct sbuf *out, const char *c1l, const char *c1r, const char *c2,
                    const char *c3)
{
    sbuf_adds(out, "|");
    cell2(out, c1l, c1r, 41);
    sbuf_adds(out, "|");
    cell2(out, "", c2, 24);
    sbuf_adds(out, "|");
    cell2(out, "", c3, 22);
    sbuf_adds(out, "|\n");
}

static void full_row(struct sbuf *out, const char *text)
{
    sbuf_adds(out, "|");
    cell(out, text, SMI_WIDTH);
    sbuf_adds(out, "|\n");
}

static void cuda_text(int cuda, char *buf, size_t n)
{
    snprintf(buf, n, "%d.%d", cuda / 1000, (cuda % 1000) / 10);
}

int simimg_smi_table(const struct simimg_smi_input *in, struct sbuf *out)
{
    const struct gpu_inventory *inv = in->inv;
    char line[256], a[128], b[128], c[128];
    time_t t = (time_t)(in->now_unix_ms / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(line, sizeof(line), "%a %b %e %H:%M:%S %Y", &tm);
    sbuf_addf(out, "%s       \n", line);
    static const char sep_top[] =
        "+-----------------------------------------------------------------"
        "------------------------+\n";
    static const char sep_mid[] =
        "|-----------------------------------------+------------------------+"
        "----------------------+\n";
    static const char sep_gpu[] =
        "+-----------------------------------------+------------------------+"
        "----------------------+\n";
    sbuf_adds(out, sep_top);
    char cuda[16];
    cuda_text(inv->cuda_driver_version, cuda, sizeof(cuda));
    snprintf(line, sizeof(line), " NVIDIA-SMI %-22s Driver Version: %-14s CUDA Version: %s",
             inv->driver_version, inv->driver_version, cuda);
    full_row(out, line);
    sbuf_adds(out, sep_mid);
    gpu_row(out, " GPU  Name                 Persistence-M", "", "Bus-Id          Disp.A ",
            "Volatile Uncorr. ECC ");
    gpu_row(out, " Fan  Temp   Perf          Pwr:Usage/Cap", "", "Memory-Usage ",
            "GPU-Util  Compute M. ");
    gpu_row(out, "", "", "", "MIG M. ");
    sbuf_adds(out, "|=========================================+========================+"
                   "======================|\n");
    for (size_t i = 0; i < inv->n_gpus; i++) {
        const struct gpu_device *g = &inv->gpus[i];
        const struct gpu_sample *s = in->samples ? &in->samples[i] : NULL;
        snprintf(a, sizeof(a), " %3u  %s", g->index, g->name);
        snprintf(b, sizeof(b), "%s Off ", g->bus_id);
        if (s && (s->valid & GPU_SAMPLE_ECC))
            snprintf(c, sizeof(c), "%llu ", (unsigned long long)s->ecc_dbe_vol);
        else
            snprintf(c, sizeof(c), "N/A ");
        gpu_row(out, a, "On  ", b, c);
        char temp[16] = "N/A", pwr[16] = "N/A", util[16] = "N/A";
        uint64_t used = 0, total = g->memory_total_bytes >> 20;
        if (s && (s->valid & GPU_SAMPLE_TEMP))
            snprintf(temp, sizeof(temp), "%uC", s->temp_c);
        if (s && (s->valid & GPU_SAMPLE_POWER))
            snprintf(pwr, sizeof(pwr), "%uW", s->power_mw / 1000);
        if (s && (s->valid & GPU_SAMPLE_UTIL))
            snprintf(util, sizeof(util), "%u%%", s->util_gpu);
        if (s && (s->valid & GPU_SAMPLE_MEMORY))
            used = s->fb_used_mib;
        for (size_t k = 0; k < in->n_procs; k++)
            if (in->procs[k].gpu == g->index)
                used += in->procs[k].used_mib;
        snprintf(a, sizeof(a), " N/A  %5s    P0", temp);
        snprintf(line, sizeof(line), "%6s / %5uW ", pwr, g->power_limit_mw / 1000);
        snprintf(b, sizeof(b), "%lluMiB / %6lluMiB ", (unsigned long long)used,
                 (unsigned long long)total);
        snprintf(c, sizeof(c), "%4s      Default ", util);
        gpu_row(out, a, line, b, c);
        gpu_row(out, "", "", "",
                !g->mig_capable  ? "N/A "
                : g->mig_enabled ? "Enabled "
                                 : "Disabled ");
        sbuf_adds(out, sep_gpu);
    }
    sbuf_addf(out, "%*s\n", SMI_WIDTH + 2, "");
    sbuf_adds(out, sep_top);
    full_row(out, " Processes:");
    full_row(out, "  GPU   GI   CI        PID   Type   Process name                            "
                  "GPU Memory");
    full_row(out, "        ID   ID                                                             "
                  "Usage");
    sbuf_adds(out, "|=================================================================="
                   "=======================|\n");
    if (in->n_procs == 0)
        full_row(out, "  No running processes found");
    for (size_t k = 0; k < in->n_procs; k++) {
        const struct simimg_smi_proc *p = &in->procs[k];
        char gi[16] = "N/A", ci[16] = "N/A", mem[32];
        if (p->gi_id != UINT32_MAX) {
            snprintf(gi, sizeof(gi), "%u", p->gi_id);
            snprintf(ci, sizeof(ci), "%u", p->ci_id);
        }
        snprintf(mem, sizeof(mem), "%lluMiB", (unsigned long long)p->used_mib);
        snprintf(line, sizeof(line), "  %3u   %3s  %3s  %9u      C   %-38.38s %12s", p->gpu, gi, ci,
                 p->pid, p->name, mem);
        full_row(out, line);
    }
    sbuf_adds(out, sep_top);
    return sbuf_check(out);
}

int simimg_smi_list(const struct gpu_inventory *inv, struct sbuf *out)
{
    for (size_t i = 0; i < inv->n_gpus; i++) {
        const struct gpu_device *g = &inv->gpus[i];
        sbuf_addf(out, "GPU %u: %s (UUID: %s)\n", g->index, g->name, g->uuid);
        for (size_t k = 0; g->mig_enabled && k < g->n_mig; k++)
            sbuf_addf(out, "  MIG %-12s Device %2u: (UUID: %s)\n", g->mig[k].profile,
                      g->mig[k].index, g->mig[k].uuid);
    }
    return sbuf_check(out);
}

enum {
    Q_DRIVER,
    Q_NAME,
    Q_UUID,
    Q_INDEX,
    Q_MEM_TOTAL,
    Q_MEM_USED,
    Q_MEM_FREE,
    Q_BUS,
    Q_CC,
    Q_MIG,
    Q_COUNT,
    Q_SERIAL
};
static const struct {
    const char *name, *unit;
} query_fields[] = {
    [Q_DRIVER] = {"driver_version", NULL},
    [Q_NAME] = {"name", NULL},
    [Q_UUID] = {"uuid", NULL},
    [Q_INDEX] = {"index", NULL},
    [Q_MEM_TOTAL] = {"memory.total", "MiB"},
    [Q_MEM_USED] = {"memory.used", "MiB"},
    [Q_MEM_FREE] = {"memory.free", "MiB"},
    [Q_BUS] = {"pci.bus_id", NULL},
    [Q_CC] = {"compute_cap", NULL},
    [Q_MIG] = {"mig.mode.current", NULL},
    [Q_COUNT] = {"count", NULL},
    [Q_SERIAL] = {"serial", NULL},
};

static int query_field(const char *name)
{
    for (size_t i = 0; i < ARRAY_SIZE(query_fields); i++)
        if (strcmp(query_fields[i].name, name) == 0)
            return (int)i;
    if (strcmp(name, "gpu_name") == 0)
        return Q_NAME;
    if (strcmp(name, "gpu_uuid") == 0)
        return Q_UUID;
    if (strcmp(name, "gpu_bus_id") == 0)
        return Q_BUS;
    return -1;
}

int simimg_smi_query(const struct simimg_smi_input *in, const char *fields, const char *format,
                     struct sbuf *out, struct err *e)
{
    const struct gpu_inventory *inv = in->inv;
    int ids[32];
    size_t n = 0;
    _cleanup_free_ char *copy = xstrdup(fields);
    char *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ')
            tok++;
        int id = query_field(tok);
        if (id < 0)
            return err_set(e, -EINVAL, "Field \"%s\" is not a valid field to query.", tok);
        if (n == ARRAY_SIZE(ids))
            return err_set(e, -EINVAL, "too many fields to query");
        ids[n++] = id;
    }
    if (n == 0)
        return err_set(e, -EINVAL, "Field \"\" is not a valid field to query.");
    bool csv = false, header = true, units = true;
    _cleanup_free_ char *fcopy = xstrdup(format ? format : "");
    for (char *tok = strtok_r(fcopy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (strcmp(tok, "csv") == 0)
            csv = true;
        else if (strcmp(tok, "noheader") == 0)
            header = false;
        else if (strcmp(tok, "nounits") == 0)
            units = false;
        else
            return err_set(e, -EINVAL, "\"%s\" is not a valid format option.", tok);
    }
    if (!csv)
        return err_set(e, -EINVAL, "--format=csv is required with --query-gpu");
    if (header) {
        for (size_t k = 0; k < n; k++) {
            const char *unit = query_fields[ids[k]].unit;
            sbuf_addf(out, "%s%s%s%s%s", k ? ", " : "", query_fields[ids[k]].name, unit ? " [" : "",
                      unit ? unit : "", unit ? "]" : "");
        }
        sbuf_adds(out, "\n");
    }
    for (size_t i = 0; i < inv->n_gpus; i++) {
        const struct gpu_device *g = &inv->gpus[i];
        uint64_t total = g->memory_total_bytes >> 20, used = 0;
        if (in->samples && (in->samples[i].valid & GPU_SAMPLE_MEMORY))
            used = in->samples[i].fb_used_mib;
        for (size_t k = 0; k < in->n_procs; k++)
            if (in->procs[k].gpu == g->index)
                used += in->procs[k].used_mib;
        if (used > total)
            used = total;
        for (size_t k = 0; k < n; k++) {
            const char *unit = query_fields[ids[k]].unit && units ? " MiB" : "";
            sbuf_adds(out, k ? ", " : "");
            switch (ids[k]) {
            case Q_DRIVER:
                sbuf_adds(out, inv->driver_version);
                break;
            case Q_NAME:
                sbuf_adds(out, g->name);
                break;
            case Q_UUID:
                sbuf_adds(out, g->uuid);
                break;
            case Q_INDEX:
                sbuf_addf(out, "%u", g->index);
                break;
            case Q_MEM_TOTAL:
                sbuf_addf(out, "%llu%s", (unsigned long long)total, unit);
                break;
            case Q_MEM_USED:
                sbuf_addf(out, "%llu%s", (unsigned long long)used, unit);
                break;
            case Q_MEM_FREE:
                sbuf_addf(out, "%llu%s", (unsigned long long)(total - used), unit);
                break;
            case Q_BUS:
                sbuf_adds(out, g->bus_id);
                break;
            case Q_CC:
                sbuf_addf(out, "%d.%d", g->cc_major, g->cc_minor);
                break;
            case Q_MIG:
                sbuf_adds(out, !g->mig_capable ? "[N/A]" : g->mig_enabled ? "Enabled" : "Disabled");
                break;
            case Q_COUNT:
                sbuf_addf(out, "%zu", inv->n_gpus);
                break;
            case Q_SERIAL:
                sbuf_adds(out, g->serial);
                break;
            }
        }
        sbuf_adds(out, "\n");
    }
    return sbuf_check(out);
}
