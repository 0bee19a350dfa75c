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
 *
 * This file is the daemon's shell: its options, the start, the passes and the stop. What it
 * decides is toolkit.h's; the files it writes are node-files.c's and install.c's, the runtime's
 * configuration runtime-config.c's, the cdi commands cdi-main.c's.
 */
#include "toolkit-internal.h"

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

static int tk_configure(struct svc *s, struct err *e)
{
    struct tk *t = svc_state(s);
    int r = toolkit_runtime_choose(t->runtime, t->default_runtime, t->restart_mode,
                                   t->runtime_class, &t->rt, e);
    if (r < 0)
        return r;
    t->daemon = true;
    return tk_spec_configure(s, e);
}

/* Generated, the runtime detected, the spec written, gpuop installed, the runtime configured,
 * the marker written; a failure takes the spec away again. */
static int start(struct tk *t, struct err *e)
{
    struct err se = {0};
    if (file_remove_stale_temps(t->spec_host, &se) < 0)
        err_clear(&se);
    _cleanup_free_ char *spec = NULL;
    char version[GPU_VERSION_MAX];
    int r = tk_generate(t, &spec, version, sizeof(version), e);
    if (r < 0 || (r = tk_runtime_detect(t, e)) < 0 ||
        (r = tk_put_spec(t, steal_ptr(&spec), version, e)) < 0)
        return r;
    if ((r = tk_install(t, e)) < 0 || (r = tk_runtime_configure(t, e)) < 0 ||
        (r = tk_write_marker(t, e)) < 0)
        tk_remove_spec(t);
    return r;
}

static void stop(struct tk *t)
{
    tk_remove_marker(t);
    if (!t->cleanup)
        return;
    tk_runtime_restore(t);
    tk_remove_spec(t);
    log_info(TK_COMP, "cleaned up", "spec=%s", t->cdi_spec);
}

/* One pass: regenerate and rewrite the spec when it changed. A failure (the driver going away
 * during an upgrade) removes the spec and the marker, so nothing points at a driver that is
 * gone; the next good pass puts both back. */
static void refresh(struct tk *t)
{
    struct err e = {0};
    char *spec = NULL;
    char version[GPU_VERSION_MAX];
    int r = tk_generate(t, &spec, version, sizeof(version), &e);
    if (r == 0)
        r = tk_put_spec(t, spec, version, &e);
    if (r < 0) {
        if (t->last_spec)
            log_warn(TK_COMP, "cannot generate the CDI spec; removing it", "error=\"%s\"",
                     err_msg(&e));
        else
            log_debug(TK_COMP, "still cannot generate the CDI spec", "error=\"%s\"", err_msg(&e));
        if (t->last_spec) {
            tk_remove_marker(t);
            tk_remove_spec(t);
        }
        return;
    }
    if (!tk_marker_exists(t) && tk_write_marker(t, &e) < 0)
        log_warn(TK_COMP, "cannot write the ready marker", "error=\"%s\"", err_msg(&e));
    tk_runtime_follow(t);
}

static int tk_run(struct svc *s, struct err *e)
{
    struct tk *t = svc_state(s);
    if (t->accept_envvar_unprivileged)
        log_warn(TK_COMP,
                 "the runtime handler trusts NVIDIA_VISIBLE_DEVICES of unprivileged "
                 "containers: any pod of the runtime class can take any GPU",
                 "runtime_class=%s", t->runtime_class);
    int r = start(t, e);
    if (r < 0)
        return r;
    log_info(TK_COMP, "ready", "spec=%s runtime=%s install_dir=%s", t->cdi_spec,
             t->rt.configure ? rtconfig_kind_name(t->rt.kind) : TOOLKIT_RUNTIME_NONE,
             t->install_dir);
    while (svc_wait(s, t->interval_ms) != SVC_STOP)
        refresh(t);
    stop(t);
    return 0;
}

const struct svc_component toolkit_component = {
    .name = TK_COMP,
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
