/* SPDX-License-Identifier: Apache-2.0 */
/* gpuop doctor's checks (doctor.h): facts in, results out; and the report. */
#include <stdio.h>
#include <string.h>

#include "doctor.h"

const char *doctor_level_name(enum doctor_level l)
{
    return l == DOCTOR_FAIL ? "fail" : l == DOCTOR_WARN ? "warn" : "pass";
}

int doctor_exit_status(enum doctor_level worst)
{
    return worst == DOCTOR_FAIL ? 4 : worst == DOCTOR_WARN ? 3 : 0;
}

const char *doctor_owner_name(enum doctor_owner o)
{
    static const char *const n[] = {"none", "host", "container", "both"};
    return (unsigned)o < ARRAY_SIZE(n) ? n[o] : "?";
}

static bool host_installed(const struct nodestate_driver_facts *d)
{
    return d->host_smi[0] && (d->host_nvml[0] || d->host_lib[0]);
}

static bool ctr_present(const struct nodestate_driver_facts *d)
{
    return d->root_nvml[0] || d->root_lib[0];
}

enum doctor_owner doctor_owner_decide(const struct doctor_facts *f, char *why, size_t n)
{
    const struct nodestate_driver_facts *d = &f->drv;
    const char *mv = d->module_version[0] ? d->module_version : "(version unknown)";
    char mod[128];
    if (d->module[NODESTATE_MOD_NVIDIA])
        str_printf_cut(mod, sizeof(mod), "module nvidia %s loaded", mv);
    else
        str_printf_cut(mod, sizeof(mod), "no nvidia module loaded");
    bool host = host_installed(d), ctr = ctr_present(d);
    if (host && ctr) {
        str_printf_cut(why, n, "a host install (%s, %s) and a containerized driver (%s); %s",
                       d->host_smi, d->host_nvml[0] ? d->host_nvml : d->host_lib,
                       d->root_lib[0] ? d->root_lib : d->root_nvml, mod);
        return DOCTOR_OWNER_BOTH;
    }
    if (ctr) {
        str_printf_cut(why, n, "the containerized driver under %s (%s); %s", f->driver_root,
                       d->root_lib[0] ? d->root_lib : d->root_nvml, mod);
        return DOCTOR_OWNER_CONTAINER;
    }
    if (host) {
        str_printf_cut(why, n, "the host's driver (%s, %s); %s", d->host_smi,
                       d->host_nvml[0] ? d->host_nvml : d->host_lib, mod);
        return DOCTOR_OWNER_HOST;
    }
    if (d->module[NODESTATE_MOD_NVIDIA]) {
        str_printf_cut(
            why, n,
            "%s, but neither nvidia-smi with libnvidia-ml on the host nor a driver root at %s", mod,
            f->driver_root);
        return DOCTOR_OWNER_HOST;
    }
    str_printf_cut(why, n,
                   "no driver: %s, no nvidia-smi with libnvidia-ml under %s, nothing under %s%s%s",
                   mod, f->host_root, f->driver_root,
                   d->host_lib[0] || d->host_nvml[0] ? "; libraries left on the host: " : "",
                   d->host_lib[0] ? d->host_lib : d->host_nvml);
    return DOCTOR_OWNER_NONE;
}

/* The driver version everything else is compared with: the loaded module's, else NVML's. */
static const char *driver_version(const struct doctor_facts *f)
{
    if (f->drv.module_version[0])
        return f->drv.module_version;
    return f->nvml_version[0] ? f->nvml_version : NULL;
}

static void set(struct doctor_result *r, const char *id, const char *title)
{
    memset(r, 0, sizeof(*r));
    r->id = id;
    r->title = title;
}

static void check_owner(const struct doctor_facts *f, struct doctor_result *r)
{
    set(r, "driver-owner", "what owns the driver");
    char why[DOCTOR_LINE_MAX];
    enum doctor_owner o = doctor_owner_decide(f, why, sizeof(why));
    str_printf_cut(r->evidence, sizeof(r->evidence), "%s: %s", doctor_owner_name(o), why);
    if (o == DOCTOR_OWNER_BOTH) {
        r->level = DOCTOR_FAIL;
        str_printf_cut(
            r->remedy, sizeof(r->remedy),
            "keep one driver: uninstall the host's packages (and reboot), or label the node "
            "nvidia.com/gpu.deploy.driver=false to keep the host's");
    } else if (o == DOCTOR_OWNER_NONE) {
        r->level = DOCTOR_WARN;
        str_printf_cut(
            r->remedy, sizeof(r->remedy),
            "enable the driver in the ClusterPolicy (driver.enabled) or install one on the host; "
            "then check the driver pod's logs on this node");
    }
}

static void check_dkms(const struct doctor_facts *f, enum doctor_owner o, struct doctor_result *r)
{
    set(r, "dkms", "kernel modules of a host install (DKMS)");
    if (f->n_dkms == 0) {
        str_printf_cut(r->evidence, sizeof(r->evidence), "no nvidia DKMS tree or module under %s",
                       f->host_root);
        return;
    }
    if (o == DOCTOR_OWNER_HOST) {
        str_printf_cut(r->evidence, sizeof(r->evidence),
                       "%zu DKMS item(s), e.g. %s: the host's driver", f->n_dkms, f->dkms[0]);
        return;
    }
    r->level = DOCTOR_WARN;
    str_printf_cut(
        r->evidence, sizeof(r->evidence),
        "%zu nvidia DKMS item(s) left by a host install, e.g. %s: the kernel may load them at boot "
        "before the driver container",
        f->n_dkms, f->dkms[0]);
    str_printf_cut(
        r->remedy, sizeof(r->remedy),
        "remove them: dkms remove nvidia/<version> --all, then the host's nvidia-dkms package");
}

static void check_libs(const struct doctor_facts *f, enum doctor_owner o, struct doctor_result *r)
{
    set(r, "host-libraries", "NVIDIA libraries of another version in the library path");
    const char *want = driver_version(f);
    if (f->n_libs == 0) {
        str_printf_cut(r->evidence, sizeof(r->evidence),
                       "no versioned NVIDIA library in the host's lib folders");
        return;
    }
    if (o == DOCTOR_OWNER_HOST || o == DOCTOR_OWNER_NONE) {
        for (size_t i = 0; i < f->n_libs && i < DOCTOR_ITEMS; i++) {
            if (want && strcmp(f->libs[i].version, want) != 0) {
                r->level = DOCTOR_FAIL;
                str_printf_cut(
                    r->evidence, sizeof(r->evidence),
                    "%s is version %s, the driver is %s: a driver/library version mismatch",
                    f->libs[i].path, f->libs[i].version, want);
                str_printf_cut(
                    r->remedy, sizeof(r->remedy),
                    "remove the old version's libraries (the previous driver's packages) and run "
                    "ldconfig");
                return;
            }
        }
        str_printf_cut(r->evidence, sizeof(r->evidence),
                       "%zu NVIDIA librar%s of the driver's version %s", f->n_libs,
                       f->n_libs == 1 ? "y" : "ies", want ? want : "(unknown)");
        return;
    }
    /* containerized (or both): anything on the host is a leftover of an old install */
    size_t other = 0, first = 0;
    for (size_t i = 0; i < f->n_libs && i < DOCTOR_ITEMS; i++)
        if (!want || strcmp(f->libs[i].version, want) != 0) {
            if (!other)
                first = i;
            other++;
        }
    r->level = DOCTOR_WARN;
    if (other)
        str_printf_cut(
            r->evidence, sizeof(r->evidence),
            "%zu NVIDIA librar%s on the host while the driver is containerized (%s), e.g. %s "
            "(version %s)",
            f->n_libs, f->n_libs == 1 ? "y" : "ies", want ? want : "version unknown",
            f->libs[first].path, f->libs[first].version);
    else
        str_printf_cut(r->evidence, sizeof(r->evidence),
                       "%zu NVIDIA librar%s on the host while the driver is containerized, e.g. %s",
                       f->n_libs, f->n_libs == 1 ? "y" : "ies", f->libs[0].path);
    str_printf_cut(
        r->remedy, sizeof(r->remedy),
        "uninstall the host's driver packages (libnvidia-*, nvidia-utils) and run ldconfig: "
        "containers that see the host's libraries may load the wrong version");
}

static void check_persistenced(const struct doctor_facts *f, enum doctor_owner o,
                               struct doctor_result *r)
{
    set(r, "persistenced", "a host persistence daemon unit");
    if (!f->persistenced_unit[0]) {
        str_printf_cut(r->evidence, sizeof(r->evidence), "no nvidia-persistenced unit under %s",
                       f->host_root);
        return;
    }
    if (o == DOCTOR_OWNER_HOST || o == DOCTOR_OWNER_NONE) {
        str_printf_cut(r->evidence, sizeof(r->evidence), "%s (%s): the host driver's",
                       f->persistenced_unit, f->persistenced_enabled ? "enabled" : "disabled");
        return;
    }
    r->level = DOCTOR_WARN;
    str_printf_cut(r->evidence, sizeof(r->evidence),
                   "%s is %s while the driver is containerized (the driver container runs its own)",
                   f->persistenced_unit, f->persistenced_enabled ? "enabled" : "present");
    str_printf_cut(r->remedy, sizeof(r->remedy),
                   "systemctl disable --now nvidia-persistenced and remove the host's package");
}

static void check_plugins(const struct doctor_facts *f, struct doctor_result *r)
{
    set(r, "device-plugins", "device plugins registered with the kubelet");
    if (!f->plugin_dir) {
        r->level = DOCTOR_WARN;
        str_printf_cut(r->evidence, sizeof(r->evidence), "no %s/var/lib/kubelet/device-plugins",
                       strcmp(f->host_root, "/") == 0 ? "" : f->host_root);
        str_printf_cut(r->remedy, sizeof(r->remedy),
                       "run the doctor on a Kubernetes node (--host-root)");
        return;
    }
    for (size_t i = 0; i < f->n_sockets && i < DOCTOR_ITEMS; i++) {
        const struct doctor_socket *a = &f->sockets[i];
        if (!a->live || !a->resource[0])
            continue;
        for (size_t j = i + 1; j < f->n_sockets && j < DOCTOR_ITEMS; j++) {
            const struct doctor_socket *b = &f->sockets[j];
            if (b->live && strcmp(a->resource, b->resource) == 0) {
                r->level = DOCTOR_FAIL;
                str_printf_cut(
                    r->evidence, sizeof(r->evidence),
                    "two device plugins serve %s: %s and %s (the kubelet keeps the last to "
                    "register)",
                    a->resource, a->name, b->name);
                str_printf_cut(
                    r->remedy, sizeof(r->remedy),
                    "remove the other plugin (a hand-installed NVIDIA device plugin DaemonSet or "
                    "static pod) or disable gpuop's (devicePlugin.enabled=false)");
                return;
            }
        }
    }
    size_t live = 0, stale = 0;
    const char *stale_name = NULL;
    struct sbuf b _cleanup_sbuf_;
    sbuf_init(&b, DOCTOR_LINE_MAX);
    for (size_t i = 0; i < f->n_sockets && i < DOCTOR_ITEMS; i++) {
        if (f->sockets[i].live) {
            sbuf_addf(&b, "%s%s (%s)", live++ ? ", " : "", f->sockets[i].name,
                      f->sockets[i].resource[0] ? f->sockets[i].resource : "unknown resource");
        } else {
            stale++;
            stale_name = f->sockets[i].name;
        }
    }
    bool ok = sbuf_check(&b) == 0;
    if (live == 0) {
        r->level = DOCTOR_WARN;
        str_printf_cut(r->evidence, sizeof(r->evidence), "no device plugin listening%s%s",
                       stale ? "; stale: " : "", stale ? stale_name : "");
        str_printf_cut(
            r->remedy, sizeof(r->remedy),
            "check the device plugin pod on this node (kubectl -n gpu-operator get pods -o wide)");
        return;
    }
    str_printf_cut(r->evidence, sizeof(r->evidence), "%s%s%s", ok && b.data ? b.data : "(many)",
                   stale ? "; stale socket " : "", stale ? stale_name : "");
    if (stale) {
        r->level = DOCTOR_WARN;
        str_printf_cut(r->remedy, sizeof(r->remedy),
                       "remove the stale socket (its plugin is gone)");
    }
}

static bool plugin_healthy(const struct doctor_facts *f, const char **ret_why)
{
    for (size_t i = 0; i < f->n_sockets && i < DOCTOR_ITEMS; i++)
        if (f->sockets[i].live && strncmp(f->sockets[i].resource, "nvidia.com/", 11) == 0) {
            *ret_why = f->sockets[i].name;
            return true;
        }
    if (f->plugin_ready) {
        *ret_why = "plugin-ready";
        return true;
    }
    return false;
}

static void check_nvml(const struct doctor_facts *f, struct doctor_result *r)
{
    set(r, "nvml", "NVML initialises and lists the GPUs");
    if (f->nvml_ok) {
        str_printf_cut(r->evidence, sizeof(r->evidence), "NVML %s (%s) lists %zu GPU%s",
                       f->nvml_version[0] ? f->nvml_version : "?",
                       f->nvml_lib[0] ? f->nvml_lib : "default", f->n_gpus,
                       f->n_gpus == 1 ? "" : "s");
        if (f->n_gpus == 0) {
            r->level = DOCTOR_FAIL;
            str_printf_cut(
                r->remedy, sizeof(r->remedy),
                "check that the GPUs are on the PCI bus (lspci -d 10de:) and the kernel log");
        }
        return;
    }
    r->level = DOCTOR_FAIL;
    str_printf_cut(r->evidence, sizeof(r->evidence), "NVML (%s) does not initialise: %s",
                   f->nvml_lib[0] ? f->nvml_lib : "default", f->nvml_error);
    str_printf_cut(
        r->remedy, sizeof(r->remedy),
        "check the driver pod's logs and dmesg for NVRM errors; a driver/library mismatch needs "
        "the driver reloaded (or the node rebooted)");
}

static void check_plugin_nvml(const struct doctor_facts *f, struct doctor_result *r)
{
    set(r, "plugin-vs-nvml", "a device plugin healthy while NVML fails");
    const char *why = NULL;
    bool healthy = plugin_healthy(f, &why);
    if (!healthy || f->nvml_ok) {
        str_printf_cut(r->evidence, sizeof(r->evidence), "%s",
                       f->nvml_ok ? "NVML initialises" : "no device plugin reports healthy");
        return;
    }
    r->level = DOCTOR_FAIL;
    str_printf_cut(
        r->evidence, sizeof(r->evidence),
        "the device plugin reports healthy (%s) but NVML does not initialise: %s: pods get GPUs "
        "that do not work",
        why, f->nvml_error);
    str_printf_cut(
        r->remedy, sizeof(r->remedy),
        "cordon the node, restart the device plugin pod after the driver is fixed (kubectl -n "
        "gpu-operator delete pod -l app=nvidia-device-plugin-daemonset --field-selector "
        "spec.nodeName=<node>)");
}

static void check_runtime(const struct doctor_facts *f, struct doctor_result *r)
{
    set(r, "runtime", "the container runtime's GPU configuration vs the runtime in use");
    if (f->marker_error[0]) {
        r->level = DOCTOR_FAIL;
        str_printf_cut(r->evidence, sizeof(r->evidence), "%s", f->marker_error);
        str_printf_cut(r->remedy, sizeof(r->remedy),
                       "restart the toolkit pod on this node: it rewrites it");
        return;
    }
    if (!f->have_marker) {
        r->level = DOCTOR_WARN;
        str_printf_cut(r->evidence, sizeof(r->evidence),
                       "no %s: the toolkit has not configured this node%s%s",
                       nodestate_file_name(NODESTATE_TOOLKIT_CTR_READY),
                       f->runtime[0] ? "; runtime in use: " : "", f->runtime);
        str_printf_cut(r->remedy, sizeof(r->remedy),
                       "check the toolkit pod on this node (toolkit.enabled in the ClusterPolicy)");
        return;
    }
    if (!f->marker.check_runtime) {
        str_printf_cut(r->evidence, sizeof(r->evidence),
                       "the toolkit left the runtime alone (RUNTIME=none)%s%s: CDI only",
                       f->runtime[0] ? "; runtime in use: " : "", f->runtime);
        return;
    }
    if (f->runtime_error[0]) {
        r->level = DOCTOR_FAIL;
        str_printf_cut(r->evidence, sizeof(r->evidence), "%s", f->runtime_error);
        str_printf_cut(
            r->remedy, sizeof(r->remedy),
            "set operator.defaultRuntime (or the toolkit's CONTAINER_RUNTIME) to the runtime the "
            "kubelet uses, and restart the toolkit pod");
        return;
    }
    if (f->runtime_checked && f->runtime_config[0]) {
        r->level = DOCTOR_FAIL;
        str_printf_cut(r->evidence, sizeof(r->evidence), "%s is not configured for GPUs: %s",
                       f->runtime, f->runtime_config);
        str_printf_cut(r->remedy, sizeof(r->remedy),
                       "restart the toolkit pod on this node; if it still fails, see its log");
        return;
    }
    str_printf_cut(r->evidence, sizeof(r->evidence), "%s in use and configured: handler %s runs %s",
                   f->runtime[0] ? f->runtime : "the runtime", f->marker.runtime_name,
                   f->marker.runtime_path);
}

static void check_firmware(const struct doctor_facts *f, struct doctor_result *r)
{
    set(r, "firmware", "driver vs GPU firmware version");
    if (!f->nvml_ok) {
        r->level = DOCTOR_WARN;
        str_printf_cut(r->evidence, sizeof(r->evidence), "not read: NVML does not initialise");
        str_printf_cut(r->remedy, sizeof(r->remedy), "fix the nvml check first");
        return;
    }
    const char *mv = f->drv.module_version;
    if (mv[0] && f->nvml_version[0] && strcmp(mv, f->nvml_version) != 0) {
        r->level = DOCTOR_FAIL;
        str_printf_cut(
            r->evidence, sizeof(r->evidence),
            "kernel module nvidia %s, user-space NVML %s: a driver/library version mismatch", mv,
            f->nvml_version);
        str_printf_cut(
            r->remedy, sizeof(r->remedy),
            "reload the driver (delete the driver pod) or reboot so module and libraries match");
        return;
    }
    const char *vb = NULL;
    for (size_t i = 0; i < f->n_gpus && i < DOCTOR_ITEMS; i++) {
        if (!f->gpus[i].vbios[0])
            continue;
        for (size_t j = 0; j < i; j++) {
            if (strcmp(f->gpus[i].name, f->gpus[j].name) == 0 && f->gpus[j].vbios[0] &&
                strcmp(f->gpus[i].vbios, f->gpus[j].vbios) != 0) {
                r->level = DOCTOR_WARN;
                str_printf_cut(
                    r->evidence, sizeof(r->evidence),
                    "GPUs %zu and %zu (%s) run different VBIOS versions: %s and %s (driver %s)", j,
                    i, f->gpus[i].name, f->gpus[j].vbios, f->gpus[i].vbios, f->nvml_version);
                str_printf_cut(
                    r->remedy, sizeof(r->remedy),
                    "update the GPUs' firmware to one version (the vendor's firmware bundle)");
                return;
            }
        }
        vb = f->gpus[i].vbios;
    }
    str_printf_cut(r->evidence, sizeof(r->evidence),
                   "driver %s (kernel module and NVML agree); VBIOS %s on %zu GPU%s",
                   f->nvml_version, vb ? vb : "unknown", f->n_gpus, f->n_gpus == 1 ? "" : "s");
}

static void check_headers(const struct doctor_facts *f, enum doctor_owner o,
                          struct doctor_result *r)
{
    set(r, "kernel-headers", "kernel headers for a containerized driver build");
    if (o == DOCTOR_OWNER_HOST) {
        str_printf_cut(r->evidence, sizeof(r->evidence),
                       "not needed: the host's driver (kernel %s)", f->kernel);
        return;
    }
    if (f->headers[0]) {
        str_printf_cut(r->evidence, sizeof(r->evidence), "kernel %s: headers at %s", f->kernel,
                       f->headers);
        return;
    }
    r->level = DOCTOR_WARN;
    str_printf_cut(r->evidence, sizeof(r->evidence),
                   "kernel %s: no headers under %s (lib/modules/%s/build, usr/src)", f->kernel,
                   f->host_root, f->kernel);
    str_printf_cut(
        r->remedy, sizeof(r->remedy),
        "install the headers (linux-headers-%s), give the driver container a package mirror, or "
        "use a precompiled driver image (driver.usePrecompiled)",
        f->kernel);
}

static bool cmdline_has(const char *cmdline, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = cmdline; (p = strstr(p, word)); p += n)
        if ((p == cmdline || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\n' || p[n] == '\0'))
            return true;
    return false;
}

static void check_iommu(const struct doctor_facts *f, struct doctor_result *r)
{
    set(r, "iommu", "IOMMU");
    const char *cl = f->cmdline;
    bool pt = cmdline_has(cl, "iommu=pt");
    bool off = cmdline_has(cl, "intel_iommu=off") || cmdline_has(cl, "amd_iommu=off") ||
               cmdline_has(cl, "iommu=off");
    if (f->iommu_groups < 0) {
        r->level = DOCTOR_WARN;
        str_printf_cut(r->evidence, sizeof(r->evidence), "%s/sys/kernel/iommu_groups unreadable",
                       strcmp(f->host_root, "/") == 0 ? "" : f->host_root);
        str_printf_cut(r->remedy, sizeof(r->remedy),
                       "run the doctor with the node's /sys under --host-root");
        return;
    }
    if (f->iommu_groups == 0 || pt || off) {
        str_printf_cut(r->evidence, sizeof(r->evidence), "%d IOMMU group%s%s", f->iommu_groups,
                       f->iommu_groups == 1 ? "" : "s",
                       pt    ? ", passthrough (iommu=pt)"
                       : off ? ", IOMMU off on the command line"
                             : "");
        return;
    }
    r->level = DOCTOR_WARN;
    str_printf_cut(
        r->evidence, sizeof(r->evidence),
        "%d IOMMU groups in translated mode (no iommu=pt on the kernel command line): GPU "
        "peer-to-peer and GPUDirect RDMA are slow or fail",
        f->iommu_groups);
    str_printf_cut(
        r->remedy, sizeof(r->remedy),
        "add iommu=pt to the kernel command line (unless the GPUs are passed to VMs) and reboot");
}

static void check_clock(const struct doctor_facts *f, struct doctor_result *r)
{
    set(r, "clock", "clock synchronisation");
    if (f->clock_synced == 1) {
        str_printf_cut(r->evidence, sizeof(r->evidence), "synchronised (%s)", f->clock_source);
        return;
    }
    r->level = DOCTOR_WARN;
    str_printf_cut(r->evidence, sizeof(r->evidence), "%s (%s)",
                   f->clock_synced == 0 ? "not synchronised" : "unknown", f->clock_source);
    str_printf_cut(
        r->remedy, sizeof(r->remedy),
        "run a time daemon (chrony, systemd-timesyncd): certificates, leases and the upgrade "
        "controller's timeouts need a right clock");
}

size_t doctor_check(const struct doctor_facts *f, struct doctor_result *ret)
{
    char why[DOCTOR_LINE_MAX];
    enum doctor_owner o = doctor_owner_decide(f, why, sizeof(why));
    size_t n = 0;
    check_owner(f, &ret[n++]);
    check_dkms(f, o, &ret[n++]);
    check_libs(f, o, &ret[n++]);
    check_persistenced(f, o, &ret[n++]);
    check_plugins(f, &ret[n++]);
    check_nvml(f, &ret[n++]);
    check_plugin_nvml(f, &ret[n++]);
    check_runtime(f, &ret[n++]);
    check_firmware(f, &ret[n++]);
    check_headers(f, o, &ret[n++]);
    check_iommu(f, &ret[n++]);
    check_clock(f, &ret[n++]);
    return n;
}

enum doctor_level doctor_worst(const struct doctor_result *r, size_t n)
{
    enum doctor_level w = DOCTOR_PASS;
    for (size_t i = 0; i < n; i++)
        if (r[i].level > w)
            w = r[i].level;
    return w;
}

int doctor_render_text(const struct doctor_facts *f, const struct doctor_result *r, size_t n,
                       struct sbuf *out)
{
    char why[DOCTOR_LINE_MAX];
    enum doctor_owner o = doctor_owner_decide(f, why, sizeof(why));
    sbuf_addf(out, "gpuop doctor: node root %s\n", f->host_root);
    sbuf_addf(out, "driver owner: %s\n\n", doctor_owner_name(o));
    for (size_t i = 0; i < n; i++) {
        static const char *const tag[] = {"PASS", "WARN", "FAIL"};
        sbuf_addf(out, "%s  %-15s %s\n", tag[r[i].level], r[i].id, r[i].evidence);
        if (r[i].level != DOCTOR_PASS && r[i].remedy[0])
            sbuf_addf(out, "      %-15s remedy: %s\n", "", r[i].remedy);
    }
    enum doctor_level w = doctor_worst(r, n);
    sbuf_addf(out, "\nworst: %s (exit %d)\n", doctor_level_name(w), doctor_exit_status(w));
    return sbuf_check(out);
}

json_t *doctor_render_json(const struct doctor_facts *f, const struct doctor_result *r, size_t n)
{
    char why[DOCTOR_LINE_MAX];
    enum doctor_owner o = doctor_owner_decide(f, why, sizeof(why));
    json_t *checks = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(checks, json_pack("{s:s,s:s,s:s,s:s,s:s}", "id", r[i].id, "title",
                                                r[i].title, "result", doctor_level_name(r[i].level),
                                                "evidence", r[i].evidence, "remedy", r[i].remedy));
    enum doctor_level w = doctor_worst(r, n);
    return json_pack("{s:s,s:{s:s,s:s},s:o,s:s,s:i}", "hostRoot", f->host_root, "driver", "owner",
                     doctor_owner_name(o), "evidence", why, "checks", checks, "worst",
                     doctor_level_name(w), "exitStatus", doctor_exit_status(w));
}
