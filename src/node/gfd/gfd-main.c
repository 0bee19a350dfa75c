/* SPDX-License-Identifier: Apache-2.0 */
/* `gpuop feature-discovery`: the thin shell around the label computation (NVML, files, signals,
 * the relabel loop). */
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "dpconfig.h"
#include "gfd.h"
#include "gpu.h"

#define COMP             "feature-discovery"
#define MACHINE_FILE_MAX 4096
#define OUTPUT_MAX       (1u << 20)
#define GFD_MIG_ENV      "GFD_MIG_STRATEGY"
#define MIG_ENV          "MIG_STRATEGY"
#define MIG_FIELD        "flags.migStrategy"

int gfd_main(int argc, char **argv);

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: gpuop feature-discovery [flags]\n\n"
            "Labels the node with its GPUs, as NVIDIA's GPU Feature Discovery does: writes\n"
            "nvidia.com/* labels (key=value lines) to Node Feature Discovery's local feature "
            "file.\n\n"
            "Flags (each also set by the environment variable shown; flag > env > config file "
            "> default):\n"
            "  --oneshot[=BOOL]            label once and exit                  GFD_ONESHOT\n"
            "  --no-timestamp[=BOOL]       omit nvidia.com/gfd.timestamp        "
            "GFD_NO_TIMESTAMP\n"
            "  --sleep-interval DURATION   time between relabels (60s; 'infinite' labels once\n"
            "                              and keeps running)                   "
            "GFD_SLEEP_INTERVAL\n"
            "  -o, --output FILE           where the labels go; '-' is stdout (default\n"
            "      --output-file FILE      /etc/kubernetes/node-feature-discovery/features.d/"
            "gfd,\n"
            "                              written atomically)                  GFD_OUTPUT_FILE\n"
            "  --mig-strategy STRATEGY     none (default), single or mixed      "
            "GFD_MIG_STRATEGY\n"
            "                                                  (or MIG_STRATEGY)\n"
            "  --config-file FILE          NVIDIA device-plugin config (v1, YAML or JSON): "
            "flags,\n"
            "                              flags.gfd and sharing (time-slicing, MPS)  "
            "GFD_CONFIG_FILE\n"
            "  --machine-type-file FILE    source of nvidia.com/gpu.machine (default\n"
            "                              /sys/class/dmi/id/product_name; missing: unknown)\n"
            "                                                                   "
            "GFD_MACHINE_TYPE_FILE\n"
            "  --fail-on-init-error[=BOOL] fail when NVML cannot be initialised (default "
            "true);\n"
            "                              false: keep running with no GPU labels\n"
            "                                                                   "
            "GFD_FAIL_ON_INIT_ERROR\n"
            "                                                  (or FAIL_ON_INIT_ERROR)\n"
            "  --use-node-feature-api[=BOOL] accepted for compatibility; labels go to the file\n"
            "                                                                   "
            "GFD_USE_NODE_FEATURE_API\n"
            "  --device-discovery-strategy S auto (default), nvml or tegra      "
            "GFD_DEVICE_DISCOVERY_STRATEGY\n"
            "  -h, --help                  this text\n\n"
            "Other environment:\n"
            "  GPUOP_NVML_LIBRARY          path of libnvidia-ml.so.1 to load\n\n"
            "Signals: SIGHUP reloads the config and relabels; SIGTERM/SIGINT exit (removing the\n"
            "output file unless the sleep interval is infinite).\n"
            "Exit status: 0 on success, 1 when labelling fails, 2 on bad usage or config.\n");
}

/* The error message made safe inside a quoted key="value" log field (its own double quotes become
 * single ones). Rewrites e's buffer, which is only logged afterwards. */
static const char *kv_quote(struct err *e)
{
    for (char *p = e->msg; *p; p++)
        if (*p == '"')
            *p = '\'';
    return e->msg;
}

/* Hides the MIG strategy variables from dpconfig: the strategy is validated only once NVML is
 * up, so a bad strategy with failOnInitError=false and no NVML is not an error (NVIDIA's
 * matrix). A fallback name (FAIL_ON_INIT_ERROR) is not read at all when its GFD_ name is set, as
 * NVIDIA takes the first variable present. */
static const char *getenv_without_mig(const char *name)
{
    if (strcmp(name, GFD_MIG_ENV) == 0 || strcmp(name, MIG_ENV) == 0)
        return NULL;
    if (strcmp(name, "FAIL_ON_INIT_ERROR") == 0 && env_get("GFD_FAIL_ON_INIT_ERROR"))
        return NULL;
    return env_get(name);
}

struct gfd_state {
    struct dpconfig *config;
    const char *config_file;
    const char *mig_value;  /* from --mig-strategy / GFD_MIG_STRATEGY, or NULL */
    const char *mig_source; /* where it came from */
};

static size_t n_options(void)
{
    size_t n = 0;
    while (dpconfig_gfd_options[n].field)
        n++;
    return n;
}

/* Resolves the config; keeps *st unchanged on failure. */
static int load_config(struct gfd_state *st, const char *const *cli, struct err *e)
{
    size_t n = n_options();
    _cleanup_free_ const char **cli_nomig = xcalloc(n + 1, sizeof(char *));
    for (size_t i = 0; i < n; i++)
        cli_nomig[i] = strcmp(dpconfig_gfd_options[i].field, MIG_FIELD) == 0 ? NULL : cli[i];
    struct dpconfig *c = NULL;
    const char *path = NULL;
    int r = dpconfig_resolve(dpconfig_gfd_options, cli_nomig, getenv_without_mig, &c, &path, e);
    if (r < 0)
        return r;
    for (size_t i = 0; i < c->n_warnings; i++)
        log_warn(COMP, c->warnings[i], "config=%s", path ? path : "(none)");
    if (c->use_node_feature_api)
        log_warn(COMP, "the NodeFeature API is not supported; writing the features file", NULL);
    if (c->device_discovery_strategy == DPCONFIG_DISCOVERY_TEGRA)
        log_warn(COMP, "Tegra device discovery is not supported; using NVML", NULL);
    dpconfig_free(st->config);
    st->config = c;
    st->config_file = path;
    st->mig_value =
        dpconfig_option_value(dpconfig_gfd_options, cli, NULL, MIG_FIELD, &st->mig_source);
    return 0;
}

/* Applies the deferred MIG strategy; called once NVML is known to work. */
static int apply_mig_strategy(struct gfd_state *st, struct err *e)
{
    if (!st->mig_value)
        return 0;
    char src[96];
    bool is_env = st->mig_source && (strcmp(st->mig_source, GFD_MIG_ENV) == 0 ||
                                     strcmp(st->mig_source, MIG_ENV) == 0);
    snprintf(src, sizeof(src), "%s%s", is_env ? "" : "--", st->mig_source ? st->mig_source : "");
    return dpconfig_set(st->config, MIG_FIELD, st->mig_value, src, e);
}

/* The machine type file's contents; NULL (unknown) when it does not exist. */
static int read_machine_type(const char *path, char **ret, struct err *e)
{
    *ret = NULL;
    if (!path || !*path)
        return 0;
    size_t len;
    int r = file_read_all(path, MACHINE_FILE_MAX, ret, &len, e);
    if (r == -ENOENT) {
        err_clear(e);
        *ret = NULL;
        return 0;
    }
    if (r < 0)
        return err_prefix(e, "machine type file");
    return 0;
}

static bool output_is_stdout(const char *path)
{
    return !path || !*path || strcmp(path, "-") == 0;
}

static int write_output(const char *path, const char *data, size_t len, struct err *e)
{
    if (output_is_stdout(path)) {
        if (fwrite(data, 1, len, stdout) != len || fflush(stdout) != 0)
            return err_errno(e, -EIO, "write labels to stdout");
        return 0;
    }
    /* A device or FIFO (/dev/null, a pipe) is written in place: renaming a temp file over it
     * would replace the device node. */
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        if (S_ISDIR(st.st_mode))
            return err_set(e, -EISDIR, "output file \"%s\": is a directory", path);
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
            return err_errno(e, -errno, "output file \"%s\"", path);
        for (size_t off = 0; off < len;) {
            ssize_t n = write(fd, data + off, len - off);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0)
                return err_errno(e, -errno, "write output file \"%s\"", path);
            off += (size_t)n;
        }
        return 0;
    }
    _cleanup_free_ char *dir = xstrdup(path);
    (void)mkdir_p(dirname(dir), 0755);
    int r = file_write_atomic(path, data, len, 0644, e);
    if (r < 0)
        return err_prefix(e, "output file");
    return 0;
}

/* On exit the labels go away with the process, as NVIDIA's GFD does; only a regular file is
 * removed (never a device such as /dev/null). */
static void remove_output(const char *path)
{
    struct stat st;
    if (output_is_stdout(path) || lstat(path, &st) < 0 || !S_ISREG(st.st_mode))
        return;
    if (unlink(path) < 0)
        log_warn(COMP, "cannot remove the output file", "path=%s errno=%d", path, errno);
}

/* One labelling pass: inventory, machine type, labels, output. *last holds the previous output
 * (without timestamp) so the timestamp moves only when the labels change. */
static int label_once(struct gfd_state *st, struct gpu_lib *lib, int64_t *stamp, char **last,
                      struct err *e)
{
    _cleanup_(gpu_inventory_freep) struct gpu_inventory *inv = NULL;
    if (lib) {
        int r = gpu_inventory_read(lib, &inv, e);
        if (r < 0)
            return err_prefix(e, "read GPU inventory");
    }
    _cleanup_free_ char *machine = NULL;
    int r = read_machine_type(st->config->gfd.machine_type_file, &machine, e);
    if (r < 0)
        return r;

    struct gfd_input in = {
        .inventory = inv,
        .config = st->config,
        .machine_type = machine,
    };
    _cleanup_(gfd_labels_freep) struct gfd_labels *plain = NULL;
    r = gfd_labels_compute(&in, &plain, e);
    if (r < 0)
        return err_prefix(e, "compute labels");
    if (plain->warning)
        log_warn(COMP, plain->warning, NULL);
    struct sbuf b _cleanup_sbuf_;
    sbuf_init(&b, OUTPUT_MAX);
    if (gfd_labels_format(plain, &b) < 0)
        return err_set(e, -ENOBUFS, "labels exceed %u bytes", OUTPUT_MAX);
    const char *body = b.data ? b.data : "";
    if (!*last || strcmp(*last, body) != 0) {
        *stamp = (int64_t)(now_ms_real() / 1000);
        free(*last);
        *last = xstrdup(body);
    }

    _cleanup_(gfd_labels_freep) struct gfd_labels *labels = NULL;
    in.with_timestamp = !st->config->gfd.no_timestamp;
    in.timestamp = *stamp;
    r = gfd_labels_compute(&in, &labels, e);
    if (r < 0)
        return err_prefix(e, "compute labels");
    sbuf_reset(&b);
    if (gfd_labels_format(labels, &b) < 0)
        return err_set(e, -ENOBUFS, "labels exceed %u bytes", OUTPUT_MAX);
    r = write_output(st->config->gfd.output_file, b.data ? b.data : "", b.len, e);
    if (r < 0)
        return r;
    log_info(COMP, "labels written", "count=%zu output=%s", labels->n,
             output_is_stdout(st->config->gfd.output_file) ? "-" : st->config->gfd.output_file);
    return 0;
}

/* Opens NVML per failOnInitError and validates the deferred MIG strategy.
 * 0 with *ret NULL: NVML is unusable and that is allowed. */
static int open_nvml(struct gfd_state *st, struct gpu_lib **ret, struct err *e)
{
    *ret = NULL;
    struct gpu_lib *lib = NULL;
    int r = gpu_lib_open(NULL, &lib, e);
    if (r < 0) {
        if (st->config->fail_on_init_error)
            return err_prefix(e, "initialise NVML");
        log_warn(COMP, "NVML could not be initialised; labelling without GPU labels",
                 "reason=\"%s\" fail-on-init-error=false", kv_quote(e));
        err_clear(e);
        return 0;
    }
    r = apply_mig_strategy(st, e);
    if (r < 0) {
        gpu_lib_free(lib);
        return r;
    }
    *ret = lib;
    return 0;
}

enum { OPT_HELP = 1000 };

int gfd_main(int argc, char **argv)
{
    size_t n = n_options();
    _cleanup_free_ const char **cli = xcalloc(n + 1, sizeof(char *));
    _cleanup_free_ struct option *longopts = xcalloc(n + 2, sizeof(struct option));
    for (size_t i = 0; i < n; i++) {
        const struct dpconfig_option *o = &dpconfig_gfd_options[i];
        bool is_bool = strcmp(o->field, "flags.gfd.oneshot") == 0 ||
                       strcmp(o->field, "flags.gfd.noTimestamp") == 0 ||
                       strcmp(o->field, "flags.failOnInitError") == 0 ||
                       strcmp(o->field, "flags.useNodeFeatureAPI") == 0;
        longopts[i] =
            (struct option){o->flag, is_bool ? optional_argument : required_argument, NULL, (int)i};
    }
    longopts[n] = (struct option){"help", no_argument, NULL, OPT_HELP};

    opterr = 0;
    optind = 1;
    int ch;
    while ((ch = getopt_long(argc, argv, ":ho:", longopts, NULL)) != -1) {
        if (ch == 'h' || ch == OPT_HELP) {
            usage(stdout);
            return 0;
        }
        if (ch == 'o') {
            for (size_t i = 0; i < n; i++)
                if (strcmp(dpconfig_gfd_options[i].flag, "output") == 0)
                    cli[i] = optarg;
            continue;
        }
        if (ch >= 0 && (size_t)ch < n) {
            cli[ch] = optarg ? optarg : "true";
            continue;
        }
        if (ch == ':') {
            log_error(COMP, "missing value for a flag; see gpuop feature-discovery --help",
                      "flag=%s", argv[optind - 1]);
            return 2;
        }
        log_error(COMP, "unknown flag; see gpuop feature-discovery --help", "flag=%s",
                  argv[optind - 1]);
        return 2;
    }
    if (optind < argc) {
        log_error(COMP, "unexpected argument (boolean flags take --flag=false)", "arg=%s",
                  argv[optind]);
        return 2;
    }

    struct err e = {0};
    struct gfd_state st = {0};
    if (load_config(&st, cli, &e) < 0) {
        log_error(COMP, err_msg(&e), NULL);
        return 2;
    }

    /* Signals are taken synchronously; the waits below double as the sleep. */
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGHUP);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigprocmask(SIG_BLOCK, &mask, NULL);

    /* A run killed mid-write left its temp file beside the output: NFD must not read it. */
    if (!output_is_stdout(st.config->gfd.output_file) &&
        file_remove_stale_temps(st.config->gfd.output_file, &e) < 0)
        log_warn(COMP, "cannot remove stale temporary files", "reason=\"%s\"", kv_quote(&e));
    int rc = 0;
    _cleanup_free_ char *last = NULL;
    int64_t stamp = 0;
    for (;;) { /* one (re)start: NVML opened, then the relabel loop */
        struct gpu_lib *lib = NULL;
        if (open_nvml(&st, &lib, &e) < 0) {
            log_error(COMP, err_msg(&e), NULL);
            rc = 1;
            break;
        }
        free(last);
        last = NULL;
        bool restart = false, stop = false;
        for (;;) {
            if (label_once(&st, lib, &stamp, &last, &e) < 0) {
                log_error(COMP, err_msg(&e), NULL);
                rc = 1;
                stop = true;
                break;
            }
            if (st.config->gfd.oneshot) {
                stop = true;
                break;
            }
            int sig;
            if (st.config->gfd.sleep_interval_ms == UINT64_MAX) {
                sig = sigwaitinfo(&mask, NULL);
            } else {
                uint64_t ms = st.config->gfd.sleep_interval_ms;
                struct timespec ts = {.tv_sec = (time_t)(ms / 1000),
                                      .tv_nsec = (long)(ms % 1000) * 1000000L};
                sig = sigtimedwait(&mask, NULL, &ts);
            }
            if (sig == SIGHUP) {
                log_info(COMP, "SIGHUP: reloading the config", NULL);
                if (load_config(&st, cli, &e) < 0)
                    log_error(COMP, "reload failed; keeping the last good config", "reason=\"%s\"",
                              kv_quote(&e));
                restart = true;
                break;
            }
            if (sig == SIGTERM || sig == SIGINT) {
                log_info(COMP, "exiting on signal", "signal=%d", sig);
                stop = true;
                break;
            }
            /* timeout (or EINTR): relabel */
        }
        gpu_lib_free(lib);
        if (stop || !restart)
            break;
    }
    /* Labels of a process that is gone would be stale: a looping run (not oneshot, not an
     * infinite interval) takes its file with it, on a signal or an error alike. */
    if (!st.config->gfd.oneshot && st.config->gfd.sleep_interval_ms != UINT64_MAX)
        remove_output(st.config->gfd.output_file);
    dpconfig_free(st.config);
    return rc;
}
