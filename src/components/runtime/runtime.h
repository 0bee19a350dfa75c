/* SPDX-License-Identifier: Apache-2.0 */
/*
 * runtime: `gpuop runtime`, the `nvidia` runtime handler. An OCI runtime wrapper: it takes
 * runc's command line verbatim, and for `create` and `run` reads the bundle's config.json, finds
 * the devices the container was given (the device plugin's volume mounts and CDI annotations;
 * NVIDIA_VISIBLE_DEVICES only for a privileged container unless configured otherwise), applies
 * their CDI edits (src/edge/cdi) and writes config.json back atomically; then it executes the
 * low-level runtime (runc, crun) with the same arguments.
 * Every other command passes straight through. docs/runtime.md tells the whole story.
 *
 * This header is the pure core: the command line, the policy's inputs, the device request, the
 * edit. The shell: runtime-main.c (the options, the run), bundle.c (config.json and the CDI
 * directories read, config.json written) and runc-log.c (errors in runc's --log file).
 */
#ifndef GPUOP_RUNTIME_H
#define GPUOP_RUNTIME_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cdi.h"
#include "util.h"

/* ---- the command line --------------------------------------------------------------------- */

/* runc's argv split: the wrapper's own flags (recognized only before the command, with two
 * dashes: --runtime-path, --cdi-spec-dirs, --default-kind, --cdi-annotation-keys, the switches
 * --accept-nvidia-visible-devices-envvar-when-unprivileged and
 * --accept-nvidia-visible-devices-as-volume-mounts, and --help alone) go to own[]; everything
 * else, in order, to pass[] (pass[0] is left for the runtime's path). Pointers into argv. */
struct runtime_cmdline {
    const char **own; /* own[0] = "runtime", then the wrapper's flags; NULL-terminated */
    int n_own;
    const char **pass; /* pass[0] = NULL (the caller sets it), then runc's args; NULL-terminated */
    int n_pass;
    const char *command;    /* "create", "run", "start", ...; NULL when none */
    const char *bundle;     /* --bundle / -b of create and run; NULL: the working directory */
    const char *log_path;   /* runc's --log */
    const char *log_format; /* runc's --log-format ("text", "json") */
    bool help;              /* `gpuop runtime --help` */
};
/* argv[0] is the component name (or the binary's); argv[1..] runc's. */
int runtime_cmdline_parse(int argc, char **argv, struct runtime_cmdline *ret, struct err *e);
void runtime_cmdline_clear(struct runtime_cmdline *c);
/* Whether the command gets the edit: create and run. */
bool runtime_command_edits(const char *command);

/* ---- the request -------------------------------------------------------------------------- */

#define RUNTIME_VISIBLE_DEVICES     "NVIDIA_VISIBLE_DEVICES"
#define RUNTIME_VOLUME_MOUNTS_ROOT  "/var/run/nvidia-container-devices"
#define RUNTIME_PLUGIN_ANNOTATION   "cdi.k8s.io/nvidia-device-plugin_"
#define RUNTIME_CAP_LAST_KNOWN      40 /* CAP_CHECKPOINT_RESTORE, the last name the wrapper knows */
#define RUNTIME_MAX_ANNOTATION_KEYS 16

/* What the wrapper believes a container asks for (docs/runtime.md, "Who gets which GPUs"). The
 * defaults are closed: only what the kubelet passes for the device plugin counts. */
struct runtime_policy {
    const char *default_kind; /* the CDI kind of bare names ("nvidia.com/gpu") */
    /* accept-nvidia-visible-devices-envvar-when-unprivileged: NVIDIA_VISIBLE_DEVICES counts for
     * a container that is not privileged (false: only a privileged container's does). */
    bool accept_envvar_unprivileged;
    /* accept-nvidia-visible-devices-as-volume-mounts: the device plugin's volume-mount list
     * (mounts of /dev/null at RUNTIME_VOLUME_MOUNTS_ROOT/<device>) counts. */
    bool accept_volume_mounts;
    /* The annotation keys whose values are CDI names the wrapper applies: a key counts when it
     * starts with one of these (RUNTIME_PLUGIN_ANNOTATION: the device plugin's). */
    const char *annotation_keys[RUNTIME_MAX_ANNOTATION_KEYS];
    size_t n_annotation_keys;
    /* The capabilities a privileged container holds, one bit per number (bit 21:
     * CAP_SYS_ADMIN): the wrapper's own bounding set, which the container runtime that started
     * it gives a privileged container. A container is privileged when its bounding set holds
     * every one of them. */
    uint64_t privileged_caps;
};

/* --cdi-annotation-keys: a comma-separated list of key prefixes, each non-empty, printable and
 * without blanks, at most RUNTIME_MAX_ANNOTATION_KEYS; split in place into p->annotation_keys
 * (pointers into list). -EINVAL naming the list and what is wrong; p is then unchanged. */
int runtime_policy_annotation_keys(struct runtime_policy *p, char *list, struct err *e);
/* The bounding set (CapBnd) of a /proc/<pid>/status text, for privileged_caps; every
 * capability the wrapper knows (RUNTIME_CAPS_KNOWN) when the text does not say it. */
uint64_t runtime_status_bounding_set(const char *status_text);

/* What became of the container's own NVIDIA_VISIBLE_DEVICES. */
enum runtime_env {
    RUNTIME_ENV_NONE,    /* unset, empty, none, void, or the volume-mount marker: no device */
    RUNTIME_ENV_USED,    /* privileged or accepted: its devices are requested */
    RUNTIME_ENV_IGNORED, /* it names devices, but the container is not allowed to ask so */
};

struct runtime_request {
    char **names; /* qualified CDI names in order, without repeats; NULL-terminated */
    size_t n;
    bool privileged;
    enum runtime_env env;
    size_t n_ignored_annotations; /* cdi.k8s.io/ annotations whose keys are not trusted */
};
void runtime_request_clear(struct runtime_request *r);

/* Whether process.capabilities.bounding holds every capability of caps (bits, by OCI name).
 * Only the capabilities the wrapper has names for count (0..RUNTIME_CAP_LAST_KNOWN); a set
 * without CAP_SYS_ADMIN stands for all of those, so that no set too small to mean "privileged"
 * makes every container privileged. */
bool runtime_privileged(const json_t *oci, uint64_t caps);
/* Every capability the wrapper has a name for, as bits. */
#define RUNTIME_CAPS_KNOWN ((UINT64_C(1) << (RUNTIME_CAP_LAST_KNOWN + 1)) - 1)

/* The devices config.json asks for under policy p, in order, without repeats:
 *  1. NVIDIA_VISIBLE_DEVICES of process.env (the last one set wins), when the container is
 *     privileged or p accepts it: "all", indices, UUIDs and MIG names become default_kind=<name>,
 *     a qualified name is taken as is; none, void, empty or RUNTIME_VOLUME_MOUNTS_ROOT ask for
 *     nothing. Otherwise it asks for nothing and ret->env says whether it was ignored;
 *  2. with p->accept_volume_mounts, each mount of source /dev/null at
 *     RUNTIME_VOLUME_MOUNTS_ROOT/<device>, in mounts order;
 *  3. the values of the annotations whose keys p trusts, in key order ("vendor/class=name,...").
 * A malformed name from a source that counts is an error naming it and where it came from;
 * what does not count is never parsed. */
int runtime_request_read(const json_t *oci, const struct runtime_policy *p,
                         struct runtime_request *ret, struct err *e);

/* Replaces every NVIDIA_VISIBLE_DEVICES of process.env with "void", so that nothing after the
 * wrapper (a legacy hook) reads devices into a variable the wrapper ignored. */
void runtime_env_void(json_t *oci);

/* Resolves names against reg and applies their edits to oci (on a copy: oci is unchanged on
 * error). stat_fn as cdi_oci_apply. */
int runtime_edit_config(json_t *oci, const struct cdi_registry *reg, const char *const *names,
                        size_t n_names, cdi_stat_fn stat_fn, void *stat_ud, struct err *e);

#endif
