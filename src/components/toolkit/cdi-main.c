/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpuop toolkit cdi generate [--output FILE]` (the spec, to stdout or FILE) and `gpuop toolkit
 * cdi list` (the device names it defines), and what they share with the daemon: the spec's
 * options, the state's defaults and the spec's generator (toolkit-internal.h).
 */
#include <stdio.h>
#include <string.h>

#include "toolkit-internal.h"

/* The path options: absolute; the install dir, also plain path bytes only (toolkit.h). */
static int check_abs(const void *dst, const char *source, struct err *e)
{
    const char *v = *(const char *const *)dst;
    if (v && v[0] != '/')
        return err_set(e, -EINVAL, "%s: \"%s\" is not an absolute path", source, v);
    return 0;
}

static int check_install_dir(const void *dst, const char *source, struct err *e)
{
    const char *v = *(const char *const *)dst;
    int r = v ? toolkit_install_dir_check(v, e) : 0;
    return r < 0 ? err_prefix(e, "%s", source) : 0;
}

/* The spec's inputs: the daemon's and the cdi commands'. */
const struct svc_option tk_spec_options[] = {
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

void tk_defaults(void *state)
{
    struct tk *t = state;
    t->install_dir = "/usr/local/nvidia";
    t->runtime_class = "nvidia";
    t->runtime = TOOLKIT_RUNTIME_AUTO;
    t->restart_mode = "signal";
    t->host_root = "/";
    t->cdi_spec = NVCDI_CDI_SPEC;
    t->validations_dir = NODESTATE_VALIDATIONS_DIR;
    t->mig_minors = NVCDI_MIG_MINORS;
    t->interval_ms = 10000;
    t->accept_envvar_unprivileged = false;
    t->accept_volume_mounts = true;
}

void tk_cleanup(void *state)
{
    struct tk *t = state;
    nvcdi_gen_free(t->gen);
    free(t->spec_host);
    free(t->last_spec);
    free(t->hook_path);
    free(t->last_warnings);
}

int tk_spec_configure(struct svc *s, struct err *e)
{
    (void)e;
    struct tk *t = svc_state(s);
    t->spec_host = tk_on_host(t, t->cdi_spec);
    t->hook_path = toolkit_hook_path(t->install_dir);
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

static int write_stdout(const char *data, size_t len, struct err *e)
{
    if (fwrite(data, 1, len, stdout) != len || fflush(stdout) != 0)
        return err_errno(e, -EIO, "write to stdout");
    return 0;
}

static int run_generate(struct svc *s, struct err *e)
{
    struct tk *t = svc_state(s);
    _cleanup_free_ char *spec = NULL;
    int r = tk_generate(t, &spec, NULL, 0, e);
    if (r < 0)
        return r;
    if (!t->output || !*t->output || strcmp(t->output, "-") == 0)
        return write_stdout(spec, strlen(spec), e);
    return tk_write_file(t->output, "CDI spec", spec, strlen(spec), 0644, e);
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

const struct svc_component tk_cdi = {
    .name = "cdi",
    .summary = "The node's CDI spec: generate, list",
    .verbs = {&tk_cdi_generate, &tk_cdi_list},
};
