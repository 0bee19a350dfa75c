/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpuop runtime`: the shell of the OCI runtime wrapper (runtime.h). It has runc's command line,
 * so it is a plain entry point (runtime_main) rather than an svc_main component; its own options
 * still come from an svc option table (flags before runc's command, then the environment). It
 * prints nothing on success: for `create` runc's stdio become the container's. The bundle's edit
 * is bundle.c's; errors go where runc's caller reads them (runc-log.c).
 */
#include <stddef.h>
#include <string.h>
#include <sys/stat.h>

#include "runtime-internal.h"
#include "svc.h"

#define DEFAULT_SPEC_DIRS "/etc/cdi:/var/run/cdi"

int runtime_main(int argc, char **argv);

static int check_kind(const void *dst, const char *source, struct err *e)
{
    const char *k = *(const char *const *)dst;
    if (!cdi_kind_valid(k))
        return err_set(e, -EINVAL, "%s: \"%s\" is not a CDI kind (vendor/class)", source, k);
    return 0;
}

/* --cdi-annotation-keys: runtime_policy_annotation_keys' rules. */
static int check_annotation_keys(const void *dst, const char *source, struct err *e)
{
    const char *v = *(const char *const *)dst;
    _cleanup_free_ char *copy = xstrdup(v ? v : "");
    struct runtime_policy p = {0};
    int r = runtime_policy_annotation_keys(&p, copy, e);
    return r < 0 ? err_prefix(e, "%s", source) : 0;
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
        runtime_report(&c, err_msg(&e));
        runtime_cmdline_clear(&c);
        return 2;
    }
    _cleanup_free_ char *path = NULL;
    /* The runtime first: config.json is not edited for a runtime that cannot run. */
    if ((r = find_runtime(o.runtime_path, &path, &e)) < 0 ||
        (runtime_command_edits(c.command) && (r = runtime_bundle_edit(&c, &o, &e)) < 0)) {
        runtime_report(&c, err_msg(&e));
        runtime_cmdline_clear(&c);
        return 1;
    }
    c.pass[0] = path;
    execv(path, (char *const *)c.pass);
    err_errno(&e, -errno, "exec \"%s\"", path);
    runtime_report(&c, err_msg(&e));
    runtime_cmdline_clear(&c);
    return 1;
}
