/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpuop toolkit`: the node's CDI spec and its container runtime, kept ready for GPU containers.
 *
 *   gpuop toolkit cdi generate [--output FILE]   the spec, to stdout or FILE
 *   gpuop toolkit cdi list                       the device names it defines
 *   gpuop toolkit                                the daemon (the toolkit DaemonSet's container)
 *
 * The daemon: generates the spec from NVML and the driver root, writes it atomically, installs
 * gpuop into the toolkit directory as the `nvidia` runtime handler, configures the node's
 * runtime (src/lib/rtconfig), writes .toolkit-ctr-ready, then regenerates the spec whenever
 * the GPUs, their MIG layout or the driver change. On SIGTERM it removes .toolkit-ctr-ready;
 * with --cleanup it also restores the runtime's config and removes the spec.
 *
 * Host paths (--cdi-spec, --install-dir, --validations-dir, the driver and device roots) are
 * the host's; this process reaches them under --host-root.
 */
#include <libgen.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gpu.h"
#include "nodestate.h"
#include "rtconfig.h"
#include "svc.h"
#include "nvcdi.h"

#define COMP         "toolkit"
#define SELF_MAX     (512u << 20)
#define WRAPPER_NAME "gpuop-runtime"
#define BINARY_NAME  "gpuop"
#define RUNTIME_NONE "none"
#define RUNTIME_AUTO "auto"

struct tk {
    /* options */
    const char *install_dir;
    const char *runtime_class;
    const char *runtime;
    const char *default_runtime;
    const char *node_runtime_version;
    bool set_as_default;
    const char *restart_mode;
    const char *host_root;
    const char *driver_root;
    const char *dev_root;
    const char *output;
    const char *cdi_spec;
    const char *validations_dir;
    const char *nvml_library;
    const char *mig_minors;
    uint64_t interval_ms;
    bool cleanup;
    bool accept_envvar_unprivileged; /* the runtime handler's settings (docs/runtime.md) */
    bool accept_volume_mounts;
    /* derived */
    bool configure_runtime; /* false with --runtime=none */
    bool runtime_known;     /* --runtime named one; else detected */
    enum rtconfig_kind kind;
    enum rtconfig_restart_mode restart;
    /* running */
    struct nvcdi_gen *gen;
    char *spec_host; /* <host_root><cdi_spec> */
    char *last_spec; /* what is on disk */
    char driver_root_now[256];
    bool runtime_failing; /* the last pass could not configure the runtime (said once) */
    bool daemon;          /* the daemon, not a cdi command: it installs gpuop after the spec */
    char *hook_path;      /* <install-dir>/gpuop: the spec's hooks run it */
    char *last_warnings;  /* the generator's warnings last logged */
};

static int check_abs(const void *dst, const char *source, struct err *e)
{
    const char *v = *(const char *const *)dst;
    if (v && v[0] != '/')
        return err_set(e, -EINVAL, "%s: \"%s\" is not an absolute path", source, v);
    return 0;
}

/* The install dir goes into a shell script and a runtime config: plain path bytes only. */
static int check_install_dir(const void *dst, const char *source, struct err *e)
{
    const char *v = *(const char *const *)dst;
    int r = check_abs(dst, source, e);
    if (r < 0)
        return r;
    for (const char *p = v; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              strchr("/._+-", *p)))
            return err_set(e, -EINVAL, "%s: \"%s\": only letters, digits and /._+- are allowed",
                           source, v);
    return 0;
}

static const struct svc_option tk_options[] = {
    {.flag = "runtime-class",
     .env = "RUNTIME_CLASS",
     .kind = SVC_STRING,
     .off = offsetof(struct tk, runtime_class),
     .metavar = "NAME",
     .help = "the runtime handler's name in the runtime's config (nvidia)"},
    {.flag = "runtime",
     .env = "RUNTIME",
     .kind = SVC_STRING,
     .off = offsetof(struct tk, runtime),
     .metavar = "NAME",
     .help = "the node's runtime: auto (detected), containerd, cri-o, docker, or none\n"
             "(write the spec only) (auto)"},
    {.flag = "default-runtime",
     .env = "DEFAULT_RUNTIME",
     .kind = SVC_STRING,
     .off = offsetof(struct tk, default_runtime),
     .metavar = "NAME",
     .help = "the runtime the policy expects (operator.defaultRuntime); a node running\n"
             "another is an error naming both"},
    {.flag = "node-runtime-version",
     .env = "NODE_RUNTIME_VERSION",
     .kind = SVC_STRING,
     .off = offsetof(struct tk, node_runtime_version),
     .metavar = "VER",
     .help = "the kubelet's containerRuntimeVersion (containerd://1.7.24), for detection"},
    {.flag = "set-as-default",
     .env = "SET_AS_DEFAULT_RUNTIME",
     .kind = SVC_BOOL,
     .off = offsetof(struct tk, set_as_default),
     .help = "make the handler the runtime's default (false)"},
    {.flag = "restart-mode",
     .env = "RUNTIME_RESTART_MODE",
     .kind = SVC_STRING,
     .off = offsetof(struct tk, restart_mode),
     .metavar = "MODE",
     .help = "how the runtime is told to reload its config: signal (SIGHUP to the process\n"
             "serving its socket), systemd, or none (only recorded) (signal)"},
    {0},
};

/* The spec's inputs: the daemon's and the cdi commands'. */
static const struct svc_option tk_spec_options[] = {
    {.flag = "install-dir",
     .env = "TOOLKIT_INSTALL_DIR",
     .kind = SVC_STRING,
     .off = offsetof(struct tk, install_dir),
     .check = check_install_dir,
     .metavar = "DIR",
     .help = "host directory gpuop installs itself into as the runtime handler; the\n"
             "spec's hooks run the gpuop there (/usr/local/nvidia)"},
    {.flag = "host-root",
     .env = "HOST_ROOT",
     .kind = SVC_STRING,
     .off = offsetof(struct tk, host_root),
     .check = check_abs,
     .metavar = "DIR",
     .help = "where this process sees the host's filesystem (/)"},
    {.flag = "driver-root",
     .env = "NVIDIA_DRIVER_ROOT",
     .kind = SVC_STRING,
     .off = offsetof(struct tk, driver_root),
     .check = check_abs,
     .metavar = "DIR",
     .help = "the driver's root on the host: / or /run/nvidia/driver (default: driver-ready's\n"
             "NVIDIA_DRIVER_ROOT, else /)"},
    {.flag = "dev-root",
     .env = "NVIDIA_DEV_ROOT",
     .kind = SVC_STRING,
     .off = offsetof(struct tk, dev_root),
     .check = check_abs,
     .metavar = "DIR",
     .help = "the device nodes' root on the host (default: the driver root)"},
    {.flag = "cdi-spec",
     .env = "CDI_SPEC",
     .kind = SVC_STRING,
     .off = offsetof(struct tk, cdi_spec),
     .check = check_abs,
     .metavar = "FILE",
     .help = "the daemon's spec on the host (" NVCDI_CDI_SPEC ")"},
    {.flag = "validations-dir",
     .kind = SVC_STRING,
     .off = offsetof(struct tk, validations_dir),
     .check = check_abs,
     .metavar = "DIR",
     .help = "the host's status files (" NODESTATE_VALIDATIONS_DIR ")"},
    {.flag = "nvml-library",
     .env = "GPUOP_NVML_LIBRARY",
     .kind = SVC_STRING,
     .off = offsetof(struct tk, nvml_library),
     .metavar = "PATH",
     .help = "the NVML to load (default: libnvidia-ml.so.1 found in the driver root)"},
    {.flag = "mig-minors",
     .kind = SVC_STRING,
     .off = offsetof(struct tk, mig_minors),
     .metavar = "FILE",
     .help = "the driver's MIG capability minors (" NVCDI_MIG_MINORS "); absent: computed"},
    {0},
};

static const struct svc_option tk_daemon_options[] = {
    {.flag = "interval",
     .env = "TOOLKIT_INTERVAL",
     .kind = SVC_DURATION,
     .min = 100,
     .finite = true,
     .off = offsetof(struct tk, interval_ms),
     .metavar = "DUR",
     .help = "how often the daemon looks for GPU, MIG and driver changes (10s)"},
    {.flag = "accept-nvidia-visible-devices-envvar-when-unprivileged",
     .env = "ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED",
     .kind = SVC_BOOL,
     .off = offsetof(struct tk, accept_envvar_unprivileged),
     .help = "the runtime handler honours an unprivileged container's own\n"
             "NVIDIA_VISIBLE_DEVICES: any pod of the runtime class can take any GPU (false)"},
    {.flag = "accept-nvidia-visible-devices-as-volume-mounts",
     .env = "ACCEPT_NVIDIA_VISIBLE_DEVICES_AS_VOLUME_MOUNTS",
     .kind = SVC_BOOL,
     .off = offsetof(struct tk, accept_volume_mounts),
     .help = "the runtime handler takes the device plugin's volume-mount list (true)"},
    {.flag = "cleanup",
     .env = "TOOLKIT_CLEANUP",
     .kind = SVC_BOOL,
     .off = offsetof(struct tk, cleanup),
     .help = "on SIGTERM restore the runtime's config and remove the spec (false)"},
    {0},
};

static void tk_defaults(void *state)
{
    struct tk *t = state;
    t->install_dir = "/usr/local/nvidia";
    t->runtime_class = "nvidia";
    t->runtime = RUNTIME_AUTO;
    t->restart_mode = "signal";
    t->host_root = "/";
    t->cdi_spec = NVCDI_CDI_SPEC;
    t->validations_dir = NODESTATE_VALIDATIONS_DIR;
    t->mig_minors = NVCDI_MIG_MINORS;
    t->interval_ms = 10000;
    t->accept_envvar_unprivileged = false;
    t->accept_volume_mounts = true;
}

static void tk_cleanup(void *state)
{
    struct tk *t = state;
    nvcdi_gen_free(t->gen);
    free(t->spec_host);
    free(t->last_spec);
    free(t->hook_path);
    free(t->last_warnings);
}

/* <host_root><path> */
static char *on_host(const struct tk *t, const char *path)
{
    return nvcdi_host_path(t->host_root, "/", path);
}

/* The spec's generator from the options (the daemon and the cdi commands). */
static int tk_spec_configure(struct svc *s, struct err *e)
{
    (void)e;
    struct tk *t = svc_state(s);
    t->spec_host = on_host(t, t->cdi_spec);
    t->hook_path =
        xasprintf("%s/%s", strcmp(t->install_dir, "/") == 0 ? "" : t->install_dir, BINARY_NAME);
    struct nvcdi_gen_options go = {.host_root = t->host_root,
                                   .driver_root = t->driver_root,
                                   .dev_root = t->dev_root,
                                   .validations_dir = t->validations_dir,
                                   .nvml_library = t->nvml_library,
                                   .mig_minors = t->mig_minors,
                                   .spec_path = t->cdi_spec,
                                   .hook_path = t->hook_path,
                                   /* the daemon installs it right after the spec */
                                   .hook_unchecked = t->daemon};
    t->gen = nvcdi_gen_new(&go);
    return 0;
}

static int tk_configure(struct svc *s, struct err *e)
{
    struct tk *t = svc_state(s);
    if (strcmp(t->runtime, RUNTIME_NONE) == 0) {
        t->configure_runtime = false;
    } else {
        t->configure_runtime = true;
        if (strcmp(t->runtime, RUNTIME_AUTO) != 0) {
            if (rtconfig_kind_parse(t->runtime, &t->kind) < 0)
                return err_set(e, -EINVAL,
                               "--runtime: unknown runtime \"%s\" (auto, containerd, cri-o, "
                               "docker, none)",
                               t->runtime);
            t->runtime_known = true;
        }
    }
    enum rtconfig_kind want;
    if (t->default_runtime && *t->default_runtime &&
        rtconfig_kind_parse(t->default_runtime, &want) < 0)
        return err_set(e, -EINVAL,
                       "--default-runtime: unknown runtime \"%s\" (containerd, cri-o, docker)",
                       t->default_runtime);
    if (t->runtime_known && t->default_runtime && *t->default_runtime && want != t->kind)
        return err_set(e, -EINVAL, "--runtime is %s but the policy's default runtime is %s",
                       rtconfig_kind_name(t->kind), rtconfig_kind_name(want));
    if (rtconfig_restart_mode_parse(t->restart_mode, &t->restart) < 0)
        return err_set(e, -EINVAL, "--restart-mode: unknown mode \"%s\" (signal, systemd, none)",
                       t->restart_mode);
    if (!*t->runtime_class)
        return err_set(e, -EINVAL, "--runtime-class: empty");
    t->daemon = true;
    return tk_spec_configure(s, e);
}

/* ---- generating the spec ------------------------------------------------------------------ */

/* What the generator left out of the spec (a driver file whose links lead outside the driver
 * root, the hooks without gpuop installed), logged once each time it changes. */
static void log_warnings(struct tk *t)
{
    const struct nvcdi_warning *w;
    size_t n = nvcdi_gen_warnings(t->gen, &w);
    _cleanup_sbuf_ struct sbuf b;
    sbuf_init(&b, 1u << 20);
    for (size_t i = 0; i < n; i++)
        sbuf_addf(&b, "%s|%s|%s\n", w[i].what, w[i].path, w[i].reason);
    const char *now = b.data ? b.data : "";
    if (t->last_warnings && strcmp(t->last_warnings, now) == 0)
        return;
    for (size_t i = 0; i < n; i++)
        log_warn(COMP, w[i].what, "path=%s reason=\"%s\"", w[i].path, w[i].reason);
    free(t->last_warnings);
    t->last_warnings = xstrdup(now);
}

static int generate(struct tk *t, char **ret, char *ret_version, size_t version_len, struct err *e)
{
    int r = nvcdi_gen_spec(t->gen, ret, ret_version, version_len, e);
    strlcpy_s(t->driver_root_now, nvcdi_gen_driver_root(t->gen), sizeof(t->driver_root_now));
    if (r == 0)
        log_warnings(t);
    return r;
}

static int write_stdout(const char *data, size_t len, struct err *e)
{
    if (fwrite(data, 1, len, stdout) != len || fflush(stdout) != 0)
        return err_errno(e, -EIO, "write to stdout");
    return 0;
}

/* Atomically, the directory created; errors name the directory or the file. */
static int write_file(const char *path, const char *what, const char *data, size_t len,
                      unsigned mode, struct err *e)
{
    _cleanup_free_ char *dir = xstrdup(path);
    char *d = dirname(dir);
    int r = mkdir_p(d, 0755);
    struct stat st;
    if (r < 0 || stat(d, &st) < 0 || !S_ISDIR(st.st_mode))
        return err_errno(e, r < 0 ? r : -ENOTDIR, "%s directory \"%s\"", what, d);
    if ((r = file_write_atomic(path, data, len, mode, e)) < 0)
        return err_prefix(e, "%s", what);
    return 0;
}

static int run_generate(struct svc *s, struct err *e)
{
    struct tk *t = svc_state(s);
    _cleanup_free_ char *spec = NULL;
    int r = generate(t, &spec, NULL, 0, e);
    if (r < 0)
        return r;
    if (!t->output || !*t->output || strcmp(t->output, "-") == 0)
        return write_stdout(spec, strlen(spec), e);
    return write_file(t->output, "CDI spec", spec, strlen(spec), 0644, e);
}

static int run_list(struct svc *s, struct err *e)
{
    struct tk *t = svc_state(s);
    _cleanup_(gpu_inventory_freep) struct gpu_inventory *inv = NULL;
    int r = nvcdi_gen_inventory(t->gen, &inv, e);
    if (r < 0)
        return r;
    _cleanup_sbuf_ struct sbuf b;
    sbuf_init(&b, NVCDI_SPEC_MAX);
    if ((r = nvcdi_cdi_names(inv, &b)) < 0)
        return err_set(e, r, "device names: larger than %u bytes", NVCDI_SPEC_MAX);
    return write_stdout(b.data ? b.data : "", b.len, e);
}

/* ---- the daemon --------------------------------------------------------------------------- */

/* gpuop itself as <install-dir>/gpuop, and <install-dir>/gpuop-runtime, the handler the runtime
 * runs: `gpuop runtime` with the runtime's arguments. Rewritten only when different. */
static int install(struct tk *t, struct err *e)
{
    _cleanup_free_ char *self = NULL;
    size_t len;
    int r = file_read_all("/proc/self/exe", SELF_MAX, &self, &len, e);
    if (r < 0)
        return err_prefix(e, "install gpuop");
    _cleanup_free_ char *bin_rel = xasprintf("%s/%s", t->install_dir, BINARY_NAME);
    _cleanup_free_ char *bin = on_host(t, bin_rel);
    _cleanup_free_ char *old = NULL;
    size_t old_len = 0;
    struct err ie = {0};
    if (file_read_all(bin, SELF_MAX, &old, &old_len, &ie) < 0 || old_len != len ||
        memcmp(old, self, len) != 0) {
        if ((r = write_file(bin, "toolkit install", self, len, 0755, e)) < 0)
            return r;
        log_info(COMP, "installed gpuop", "path=%s", bin_rel);
    }
    /* The handler's settings that differ from gpuop runtime's defaults, as its flags. */
    _cleanup_free_ char *script = xasprintf(
        "#!/bin/sh\n# gpuop's OCI runtime wrapper (written by gpuop toolkit)\n"
        "exec '%s' runtime %s%s\"$@\"\n",
        bin_rel,
        t->accept_envvar_unprivileged ? "--accept-nvidia-visible-devices-envvar-when-unprivileged "
                                      : "",
        t->accept_volume_mounts ? "" : "--accept-nvidia-visible-devices-as-volume-mounts=false ");
    _cleanup_free_ char *wrap_rel = xasprintf("%s/%s", t->install_dir, WRAPPER_NAME);
    _cleanup_free_ char *wrap = on_host(t, wrap_rel);
    free(old);
    old = NULL;
    if (file_read_all(wrap, 65536, &old, &old_len, &ie) < 0 || strcmp(old, script) != 0)
        return write_file(wrap, "toolkit install", script, strlen(script), 0755, e);
    return 0;
}

static void rt_opts(const struct tk *t, struct rtconfig_options *o, char *path, size_t n)
{
    snprintf(path, n, "%s/%s", t->install_dir, WRAPPER_NAME);
    *o = (struct rtconfig_options){.runtime_name = t->runtime_class,
                                   .runtime_path = path,
                                   .set_as_default = t->set_as_default,
                                   .enable_cdi = true,
                                   .restart_mode = t->restart};
}

static char *validations_host(const struct tk *t)
{
    return on_host(t, t->validations_dir);
}

static int write_marker(struct tk *t, struct err *e)
{
    struct nodestate_kv kv[4];
    size_t n = 0;
    kv[n++] = (struct nodestate_kv){"RUNTIME",
                                    t->configure_runtime ? rtconfig_kind_name(t->kind) : "none"};
    struct rtconfig_options o;
    char path[512];
    rt_opts(t, &o, path, sizeof(path));
    if (t->configure_runtime)
        kv[n++] = (struct nodestate_kv){"RUNTIME_CONFIG", rtconfig_config_path(t->kind, &o)};
    kv[n++] = (struct nodestate_kv){"CDI_SPEC", t->cdi_spec};
    kv[n++] = (struct nodestate_kv){"TOOLKIT_INSTALL_DIR", t->install_dir};
    _cleanup_free_ char *text = NULL;
    int r = nodestate_env_render(kv, n, &text, e);
    if (r < 0)
        return r;
    _cleanup_free_ char *dir = validations_host(t);
    return nodestate_file_write(dir, NODESTATE_TOOLKIT_CTR_READY, text, e);
}

static void remove_marker(struct tk *t)
{
    struct err e = {0};
    _cleanup_free_ char *dir = validations_host(t);
    if (nodestate_file_remove(dir, NODESTATE_TOOLKIT_CTR_READY, &e) < 0)
        log_warn(COMP, "cannot remove the ready marker", "error=\"%s\"", err_msg(&e));
}

static void remove_spec(struct tk *t)
{
    if (unlink(t->spec_host) < 0 && errno != ENOENT)
        log_warn(COMP, "cannot remove the CDI spec", "path=%s errno=%d", t->cdi_spec, errno);
    free(t->last_spec);
    t->last_spec = NULL;
}

/* Writes the spec when it differs from what is on disk. */
static int put_spec(struct tk *t, char *spec, const char *version, struct err *e)
{
    if (t->last_spec && strcmp(t->last_spec, spec) == 0) {
        free(spec);
        return 0;
    }
    int r = write_file(t->spec_host, "CDI spec", spec, strlen(spec), 0644, e);
    if (r < 0) {
        free(spec);
        return r;
    }
    log_info(COMP, "CDI spec written", "path=%s driver=%s driver_root=%s", t->cdi_spec, version,
             t->driver_root_now);
    free(t->last_spec);
    t->last_spec = spec;
    return 0;
}

static int detect_runtime(struct tk *t, struct err *e)
{
    if (!t->configure_runtime)
        return 0;
    const char *want = t->default_runtime && *t->default_runtime ? t->default_runtime : NULL;
    if (!t->runtime_known) {
        int r = rtconfig_detect(t->host_root, t->node_runtime_version, want, &t->kind, e);
        if (r < 0)
            return err_prefix(e, "container runtime");
    }
    /* The config's parser (a module) loads now: a missing one fails before anything is written. */
    int r = rtconfig_prepare(t->kind, e);
    if (r < 0)
        return err_prefix(e, "configure %s", rtconfig_kind_name(t->kind));
    return 0; /* logged with "ready", once it is configured */
}

static int start(struct tk *t, struct err *e)
{
    struct err se = {0};
    if (file_remove_stale_temps(t->spec_host, &se) < 0)
        err_clear(&se);
    _cleanup_free_ char *spec = NULL;
    char version[GPU_VERSION_MAX];
    int r = generate(t, &spec, version, sizeof(version), e);
    if (r < 0)
        return r;
    if ((r = detect_runtime(t, e)) < 0)
        return r;
    if ((r = put_spec(t, steal_ptr(&spec), version, e)) < 0)
        return r;
    if ((r = install(t, e)) < 0)
        goto undo;
    if (t->configure_runtime) {
        struct rtconfig_options o;
        char path[512];
        rt_opts(t, &o, path, sizeof(path));
        bool changed = false;
        if ((r = rtconfig_configure(t->host_root, t->kind, &o, &changed, e)) < 0) {
            err_prefix(e, "configure %s", rtconfig_kind_name(t->kind));
            goto undo;
        }
        log_info(COMP, changed ? "runtime configured" : "runtime already configured",
                 "runtime=%s handler=%s path=%s", rtconfig_kind_name(t->kind), t->runtime_class,
                 path);
    }
    if ((r = write_marker(t, e)) < 0)
        goto undo;
    return 0;
undo:
    remove_spec(t);
    return r;
}

static void stop(struct tk *t)
{
    remove_marker(t);
    if (!t->cleanup)
        return;
    if (t->configure_runtime) {
        struct rtconfig_options o;
        char path[512];
        rt_opts(t, &o, path, sizeof(path));
        struct err e = {0};
        struct rtconfig_restore_report rep = {0};
        if (rtconfig_restore(t->host_root, t->kind, &o, &rep, &e) < 0)
            log_error(COMP, "cannot restore the runtime's config", "runtime=%s error=\"%s\"",
                      rtconfig_kind_name(t->kind), err_msg(&e));
        for (size_t i = 0; i < rep.n; i++)
            if (rep.files[i].what == RTCONFIG_UNDO_LEFT)
                log_warn(COMP, "runtime config left as it is: gpuop cannot tell its changes apart",
                         "runtime=%s path=%s reason=\"%s\" status=%s/status",
                         rtconfig_kind_name(t->kind), rep.files[i].path, rep.files[i].why,
                         RTCONFIG_STATE_DIR);
            else
                log_info(COMP, "runtime config restored", "runtime=%s path=%s result=%s",
                         rtconfig_kind_name(t->kind), rep.files[i].path,
                         rtconfig_undo_name(rep.files[i].what));
    }
    remove_spec(t);
    log_info(COMP, "cleaned up", "spec=%s", t->cdi_spec);
}

/* The runtime's config kept as configured: an edit of the main config since is followed
 * (containerd's drop-in repeats its CRI section, which would otherwise hide the edit), and what
 * was undone by hand is written again; nothing changed, nothing written. */
static void follow_runtime(struct tk *t)
{
    if (!t->configure_runtime)
        return;
    struct rtconfig_options o;
    char path[512];
    rt_opts(t, &o, path, sizeof(path));
    struct err e = {0};
    bool changed = false;
    if (rtconfig_configure(t->host_root, t->kind, &o, &changed, &e) < 0) {
        if (!t->runtime_failing)
            log_warn(COMP, "cannot keep the runtime configured", "runtime=%s error=\"%s\"",
                     rtconfig_kind_name(t->kind), err_msg(&e));
        t->runtime_failing = true;
        return;
    }
    if (changed)
        log_info(COMP, "runtime config followed an edit", "runtime=%s",
                 rtconfig_kind_name(t->kind));
    else if (t->runtime_failing)
        log_info(COMP, "runtime config readable again", "runtime=%s", rtconfig_kind_name(t->kind));
    t->runtime_failing = false;
}

/* One pass: regenerate and rewrite the spec when it changed. A failure (the driver going away
 * during an upgrade) removes the spec and the marker, so nothing points at a driver that is
 * gone; the next good pass puts both back. */
static void refresh(struct tk *t)
{
    struct err e = {0};
    char *spec = NULL;
    char version[GPU_VERSION_MAX];
    int r = generate(t, &spec, version, sizeof(version), &e);
    if (r == 0)
        r = put_spec(t, spec, version, &e);
    if (r < 0) {
        if (t->last_spec)
            log_warn(COMP, "cannot generate the CDI spec; removing it", "error=\"%s\"",
                     err_msg(&e));
        else
            log_debug(COMP, "still cannot generate the CDI spec", "error=\"%s\"", err_msg(&e));
        if (t->last_spec) {
            remove_marker(t);
            remove_spec(t);
        }
        return;
    }
    _cleanup_free_ char *dir = validations_host(t);
    if (!nodestate_file_exists(dir, NODESTATE_TOOLKIT_CTR_READY) && write_marker(t, &e) < 0)
        log_warn(COMP, "cannot write the ready marker", "error=\"%s\"", err_msg(&e));
    follow_runtime(t);
}

static int tk_run(struct svc *s, struct err *e)
{
    struct tk *t = svc_state(s);
    if (t->accept_envvar_unprivileged)
        log_warn(COMP,
                 "the runtime handler trusts NVIDIA_VISIBLE_DEVICES of unprivileged "
                 "containers: any pod of the runtime class can take any GPU",
                 "runtime_class=%s", t->runtime_class);
    int r = start(t, e);
    if (r < 0)
        return r;
    log_info(COMP, "ready", "spec=%s runtime=%s install_dir=%s", t->cdi_spec,
             t->configure_runtime ? rtconfig_kind_name(t->kind) : "none", t->install_dir);
    while (svc_wait(s, t->interval_ms) != SVC_STOP)
        refresh(t);
    stop(t);
    return 0;
}

/* ---- the cdi commands ---------------------------------------------------------------------- */

static const struct svc_option tk_output_option[] = {
    {.flag = "output",
     .short_flag = 'o',
     .kind = SVC_STRING,
     .off = offsetof(struct tk, output),
     .metavar = "FILE",
     .help = "write the spec to FILE, atomically (stdout)"},
    {0},
};

static const struct svc_component tk_cdi_generate = {
    .name = "generate",
    .summary = "Print the node's CDI spec (or write it to --output FILE)",
    .options = {tk_spec_options, tk_output_option},
    .state_size = sizeof(struct tk),
    .defaults = tk_defaults,
    .configure = tk_spec_configure,
    .run = run_generate,
    .cleanup = tk_cleanup,
};

static const struct svc_component tk_cdi_list = {
    .name = "list",
    .summary = "Print the device names the node's CDI spec defines",
    .options = {tk_spec_options},
    .state_size = sizeof(struct tk),
    .defaults = tk_defaults,
    .configure = tk_spec_configure,
    .run = run_list,
    .cleanup = tk_cleanup,
};

static const struct svc_component tk_cdi = {
    .name = "cdi",
    .summary = "The node's CDI spec: generate, list",
    .verbs = {&tk_cdi_generate, &tk_cdi_list},
};

const struct svc_component toolkit_component = {
    .name = COMP,
    .usage =
        "Usage: gpuop toolkit [flags]                  the toolkit daemon\n"
        "       gpuop toolkit cdi COMMAND [flags]      the node's CDI spec\n\n"
        "The daemon keeps the node ready for GPU containers: a CDI spec (kind " NVCDI_CDI_KIND
        ")\nfor every GPU and MIG device with the driver's device nodes, libraries, binaries,\n"
        "firmware and IPC sockets, regenerated when the GPUs, their MIG layout or the\n"
        "driver change; gpuop installed as the runtime handler; the runtime configured;\n"
        "the .toolkit-ctr-ready status file.\n",
    .options = {tk_options, tk_spec_options, tk_daemon_options},
    .epilogue = "Signals: SIGTERM stops the daemon (removes .toolkit-ctr-ready; with --cleanup\n"
                "also restores the runtime's config and removes the spec).\n",
    .verbs = {&tk_cdi},
    .state_size = sizeof(struct tk),
    .defaults = tk_defaults,
    .configure = tk_configure,
    .run = tk_run,
    .cleanup = tk_cleanup,
};
