/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpuop runtime`: the shell of the OCI runtime wrapper (runtime.h). It has runc's command line,
 * so it is a plain entry point (runtime_main) rather than an svc_main component; its own options
 * still come from an svc option table (flags before runc's command, then the environment). It
 * prints nothing on success: for `create` runc's stdio become the container's.
 */
#include <fcntl.h>
#include <stddef.h>
#include <string.h>
#include <sys/stat.h>

#include "runtime.h"
#include "svc.h"

#define COMP              "runtime"
#define OCI_CONFIG_MAX    (16u << 20)
#define DEFAULT_SPEC_DIRS "/etc/cdi:/var/run/cdi"
#define MAX_SPEC_DIRS     16

int runtime_main(int argc, char **argv);

struct runtime_opts {
    const char *runtime_path;
    const char *spec_dirs;
    const char *default_kind;
    bool accept_envvar_unprivileged;
    bool accept_volume_mounts;
    const char *annotation_keys;
};

static int check_kind(const void *dst, const char *source, struct err *e)
{
    const char *k = *(const char *const *)dst;
    if (!cdi_kind_valid(k))
        return err_set(e, -EINVAL, "%s: \"%s\" is not a CDI kind (vendor/class)", source, k);
    return 0;
}

/* Comma-separated key prefixes: each non-empty, printable, without blanks; at most
 * RUNTIME_MAX_ANNOTATION_KEYS. */
static int check_annotation_keys(const void *dst, const char *source, struct err *e)
{
    const char *v = *(const char *const *)dst;
    size_t n = 0;
    for (const char *p = v; p && *p;) {
        size_t len = strcspn(p, ",");
        if (len == 0)
            return err_set(e, -EINVAL, "%s: \"%s\": an empty key prefix", source, v);
        for (size_t i = 0; i < len; i++)
            if (p[i] <= ' ' || p[i] > '~')
                return err_set(e, -EINVAL,
                               "%s: \"%s\": a key prefix holds a blank or a control "
                               "character",
                               source, v);
        if (++n > RUNTIME_MAX_ANNOTATION_KEYS)
            return err_set(e, -EINVAL, "%s: more than %d key prefixes", source,
                           RUNTIME_MAX_ANNOTATION_KEYS);
        p += len + (p[len] == ',');
    }
    return 0;
}

static const struct svc_option runtime_options[] = {
    {.flag = "runtime-path",
     .env = "GPUOP_RUNTIME_PATH",
     .kind = SVC_STRING,
     .off = offsetof(struct runtime_opts, runtime_path),
     .metavar = "PATH",
     .help = "the low-level OCI runtime run after the edit: a path, or a name\n"
             "looked up in PATH (runc, crun)"},
    {.flag = "cdi-spec-dirs",
     .env = "GPUOP_CDI_SPEC_DIRS",
     .kind = SVC_STRING,
     .off = offsetof(struct runtime_opts, spec_dirs),
     .metavar = "DIRS",
     .help = "CDI spec directories, ':'-separated, later ones winning\n"
             "(" DEFAULT_SPEC_DIRS ")"},
    {.flag = "accept-nvidia-visible-devices-envvar-when-unprivileged",
     .env = "GPUOP_RUNTIME_ACCEPT_ENVVAR_WHEN_UNPRIVILEGED",
     .kind = SVC_BOOL,
     .off = offsetof(struct runtime_opts, accept_envvar_unprivileged),
     .help = "honour NVIDIA_VISIBLE_DEVICES of a container that is not privileged:\n"
             "any container of the runtime class can then use any GPU (false)"},
    {.flag = "accept-nvidia-visible-devices-as-volume-mounts",
     .env = "GPUOP_RUNTIME_ACCEPT_VOLUME_MOUNTS",
     .kind = SVC_BOOL,
     .off = offsetof(struct runtime_opts, accept_volume_mounts),
     .help = "take the device plugin's volume-mount list: /dev/null mounted at\n"
             "/var/run/nvidia-container-devices/<device> (true)"},
    {.flag = "cdi-annotation-keys",
     .env = "GPUOP_RUNTIME_CDI_ANNOTATION_KEYS",
     .kind = SVC_STRING,
     .off = offsetof(struct runtime_opts, annotation_keys),
     .metavar = "PREFIXES",
     .check = check_annotation_keys,
     .help = "annotations whose keys start with one of these comma-separated\n"
             "prefixes name CDI devices to apply; empty: none\n"
             "(" RUNTIME_PLUGIN_ANNOTATION ", the device plugin's)"},
    {.flag = "default-kind",
     .env = "GPUOP_RUNTIME_DEFAULT_KIND",
     .kind = SVC_STRING,
     .off = offsetof(struct runtime_opts, default_kind),
     .metavar = "KIND",
     .check = check_kind,
     .help = "the CDI kind of bare device names (nvidia.com/gpu)"},
    {0},
};

static void runtime_defaults(void *state)
{
    struct runtime_opts *o = state;
    o->runtime_path = "runc";
    o->spec_dirs = DEFAULT_SPEC_DIRS;
    o->default_kind = "nvidia.com/gpu";
    o->accept_envvar_unprivileged = false;
    o->accept_volume_mounts = true;
    o->annotation_keys = RUNTIME_PLUGIN_ANNOTATION;
}

static const struct svc_component runtime_component = {
    .name = "runtime",
    .usage = "Usage: gpuop runtime [--runtime-path PATH] [--cdi-spec-dirs DIRS] [--default-kind\n"
             "                     KIND] [--accept-...] [--cdi-annotation-keys PREFIXES]\n"
             "                     [runc's global flags] COMMAND [ARGS]\n\n"
             "The nvidia runtime handler: an OCI runtime wrapper with runc's command line. For\n"
             "create and run it applies the CDI edits of the devices the container was given\n"
             "(the device plugin's volume mounts and CDI annotations; NVIDIA_VISIBLE_DEVICES\n"
             "only for a privileged container, unless accepted below) to the bundle's\n"
             "config.json, then executes the low-level runtime with the same arguments; every\n"
             "other command passes straight through. The wrapper's flags are accepted only\n"
             "before runc's command.\n",
    .options = {runtime_options},
    .epilogue = "Exit: the low-level runtime's; 1 when a device cannot be resolved or config.json\n"
                "cannot be edited (config.json is then untouched), 2 on bad flags.\n",
    .state_size = sizeof(struct runtime_opts),
    .defaults = runtime_defaults,
};

/* One line in runc's --log file, in its format, as runc writes them: containerd's shim reads
 * that file to report why create failed. */
static void log_line(const struct runtime_cmdline *c, const char *level, const char *msg)
{
    if (!c->log_path)
        return;
    _cleanup_close_ int fd =
        open(c->log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0644);
    if (fd < 0)
        return;
    char ts[40];
    time_rfc3339(now_ms_real(), ts, sizeof(ts));
    _cleanup_free_ char *line = NULL;
    if (streq_ptr(c->log_format, "json")) {
        _cleanup_(json_decrefp) json_t *o =
            json_pack("{s:s, s:s, s:s}", "level", level, "msg", msg, "time", ts);
        _cleanup_free_ char *s = json_dumps(o, JSON_COMPACT);
        line = xasprintf("%s\n", s ? s : "{}");
    } else {
        _cleanup_(json_decrefp) json_t *q = json_string(msg);
        _cleanup_free_ char *s = json_dumps(q, JSON_ENCODE_ANY);
        line = xasprintf("time=\"%s\" level=%s msg=%s\n", ts, level, s ? s : "\"\"");
    }
    if (write(fd, line, strlen(line)) < 0)
        return; /* nowhere left to say it */
}

/* An error: one line to stderr and one to runc's --log file. */
static void report(const struct runtime_cmdline *c, const char *msg)
{
    fprintf(stderr, "gpuop runtime: %s\n", msg);
    log_line(c, "error", msg);
}

/* The wrapper's own bounding set (CapBnd of /proc/self/status): what the container runtime
 * that started it grants a privileged container. Unreadable: every capability it knows. */
static uint64_t own_bounding_set(void)
{
    _cleanup_free_ char *text = NULL;
    struct err ignored = {0};
    if (file_read_all("/proc/self/status", 1u << 16, &text, NULL, &ignored) < 0)
        return RUNTIME_CAPS_KNOWN;
    const char *p = strstr(text, "\nCapBnd:");
    if (!p)
        return RUNTIME_CAPS_KNOWN;
    p += strlen("\nCapBnd:");
    while (*p == ' ' || *p == '\t')
        p++;
    size_t n = strspn(p, "0123456789abcdefABCDEF");
    uint64_t v = 0;
    if (n == 0 || n > 16 || hex_parse(p, n, &v) < 0)
        return RUNTIME_CAPS_KNOWN;
    return v;
}

static void policy_from(const struct runtime_opts *o, char *keys_buf, struct runtime_policy *ret)
{
    struct runtime_policy p = {.default_kind = o->default_kind,
                               .accept_envvar_unprivileged = o->accept_envvar_unprivileged,
                               .accept_volume_mounts = o->accept_volume_mounts,
                               .privileged_caps = own_bounding_set()};
    char *save = NULL;
    for (char *k = strtok_r(keys_buf, ",", &save);
         k && p.n_annotation_keys < RUNTIME_MAX_ANNOTATION_KEYS; k = strtok_r(NULL, ",", &save))
        p.annotation_keys[p.n_annotation_keys++] = k;
    *ret = p;
}

/* The executable the name means: itself when it holds a '/', else the first in PATH. Never this
 * program again (a PATH naming the wrapper as runc would loop). */
static int find_runtime(const char *name, char **ret, struct err *e)
{
    _cleanup_free_ char *path = NULL;
    int r = proc_find(name, &path, e);
    if (r < 0)
        return err_prefix(e, "low-level runtime");
    struct stat self, st;
    if (stat(path, &st) < 0)
        return err_errno(e, -errno, "low-level runtime \"%s\"", path);
    if (stat("/proc/self/exe", &self) == 0 && self.st_dev == st.st_dev && self.st_ino == st.st_ino)
        return err_set(e, -ELOOP, "low-level runtime \"%s\" is this wrapper itself", path);
    *ret = steal_ptr(&path);
    return 0;
}

/* config.json of the bundle, edited for the devices it asks for. Nothing is written unless the
 * whole edit succeeded; then it is replaced atomically. */
static int edit_bundle(const struct runtime_cmdline *c, const struct runtime_opts *o, struct err *e)
{
    _cleanup_free_ char *config = xasprintf("%s/config.json", c->bundle ? c->bundle : ".");
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    int r = file_read_all(config, OCI_CONFIG_MAX, &text, &len, e);
    if (r < 0)
        return r;
    json_error_t je;
    _cleanup_(json_decrefp) json_t *oci = json_loadb(text, len, 0, &je);
    if (!oci)
        return err_set(e, -EINVAL, "%s:%d:%d: %s", config, je.line, je.column, je.text);
    _cleanup_free_ char *keys = xstrdup(o->annotation_keys ? o->annotation_keys : "");
    struct runtime_policy pol;
    policy_from(o, keys, &pol);
    _cleanup_(runtime_request_clear) struct runtime_request rq = {0};
    if ((r = runtime_request_read(oci, &pol, &rq, e)) < 0)
        return err_prefix(e, "%s", config);
    if (rq.n_ignored_annotations)
        log_debug(COMP, "cdi.k8s.io/ annotations not trusted", "config=%s count=%zu", config,
                  rq.n_ignored_annotations);
    if (rq.env == RUNTIME_ENV_IGNORED) {
        /* Said in runc's log, where the node's administrator looks, when the container gets no
         * GPU at all (one given GPUs by its allocation only hears it at debug level); the
         * container is created either way. */
        _cleanup_free_ char *msg =
            xasprintf("%s: NVIDIA_VISIBLE_DEVICES of a container that is not privileged is ignored "
                      "(set to void); GPUs come from the device plugin's allocation",
                      config);
        if (rq.n == 0)
            log_line(c, "warning", msg);
        else
            log_debug(COMP, "NVIDIA_VISIBLE_DEVICES ignored", "config=%s devices=%zu", config,
                      rq.n);
        runtime_env_void(oci);
    }
    if (rq.n == 0 && rq.env != RUNTIME_ENV_IGNORED) {
        log_debug(COMP, "no devices requested", "config=%s", config);
        return 0;
    }
    if (rq.n > 0) {
        _cleanup_free_ char *dirs_buf = xstrdup(o->spec_dirs);
        const char *dirs[MAX_SPEC_DIRS];
        size_t n_dirs = 0;
        char *save = NULL;
        for (char *d = strtok_r(dirs_buf, ":", &save); d && n_dirs < MAX_SPEC_DIRS;
             d = strtok_r(NULL, ":", &save))
            dirs[n_dirs++] = d;
        _cleanup_(cdi_registry_freep) struct cdi_registry *reg = NULL;
        if ((r = cdi_registry_load(dirs, n_dirs, &reg, e)) < 0 ||
            (r = runtime_edit_config(oci, reg, (const char *const *)rq.names, rq.n, NULL, NULL,
                                     e)) < 0)
            return err_prefix(e, "%s", config);
    }
    _cleanup_free_ char *out = json_dumps(oci, JSON_COMPACT);
    if (!out)
        return err_set(e, -ENOMEM, "%s: encoding the edited spec", config);
    struct stat st;
    unsigned mode = stat(config, &st) == 0 ? (st.st_mode & 07777) : 0644;
    if ((r = file_write_atomic(config, out, strlen(out), mode, e)) < 0)
        return r;
    log_debug(COMP, "config edited", "config=%s devices=%zu", config, rq.n);
    return 0;
}

int runtime_main(int argc, char **argv)
{
    struct err e = {0};
    struct runtime_cmdline c = {0};
    if (runtime_cmdline_parse(argc, argv, &c, &e) < 0) {
        fprintf(stderr, "gpuop runtime: %s\n", err_msg(&e));
        return 2;
    }
    struct runtime_opts o = {0};
    int r = svc_parse(&runtime_component, &o, c.n_own, (char **)c.own, stdout, &e);
    if (r == 1 || (r == 0 && c.help)) {
        if (r == 0)
            svc_usage(&runtime_component, stdout);
        runtime_cmdline_clear(&c);
        return 0;
    }
    if (r < 0) {
        report(&c, err_msg(&e));
        runtime_cmdline_clear(&c);
        return 2;
    }
    _cleanup_free_ char *path = NULL;
    /* The runtime first: config.json is not edited for a runtime that cannot run. */
    if ((r = find_runtime(o.runtime_path, &path, &e)) < 0 ||
        (runtime_command_edits(c.command) && (r = edit_bundle(&c, &o, &e)) < 0)) {
        report(&c, err_msg(&e));
        runtime_cmdline_clear(&c);
        return 1;
    }
    c.pass[0] = path;
    execv(path, (char *const *)c.pass);
    err_errno(&e, -errno, "exec \"%s\"", path);
    report(&c, err_msg(&e));
    runtime_cmdline_clear(&c);
    return 1;
}
