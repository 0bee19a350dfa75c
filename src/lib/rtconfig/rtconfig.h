/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rtconfig: a node's container runtime configured for GPUs, as `nvidia-ctk runtime configure`
 * does it (../shared/reference/notes/node-components.md §3): containerd (config versions 1, 2
 * and 3; a drop-in and an `imports` entry where supported), CRI-O (a drop-in), docker
 * (daemon.json). The runtime is detected from the node (its containerRuntimeVersion and the
 * sockets and config files under the host root), never assumed. Existing settings are kept byte
 * for byte outside what changes; the original is backed up; configuring twice changes nothing;
 * uninstall takes gpuop's changes out of the files as they are then, keeping every later edit. The
 * editing cores are pure (bytes in, bytes out) and fuzzed; the functions below taking host_root do
 * the file I/O. Every path is the host's: it is resolved under host_root as the host resolves it
 * (a link to an absolute path is followed from host_root, never from this container's /), and a
 * link stays a link (what it points at is edited), with its owner and mode.
 *
 * TOML is parsed with toml++ (Debian's libtomlplusplus; Debian 12 has no C TOML library) behind
 * a small C interface, in a module of gpuop's (gpuop-tomlx.so) loaded on first use. It validates
 * and locates; the user's files change only by splices it located (containerd: one `imports`
 * entry), checked by parsing the result again, and everything else goes into drop-ins gpuop owns.
 * docker's daemon.json: jansson validates, the edit is a splice. README.md says why and how.
 *
 * This header is the contract between the toolkit daemon (src/components/toolkit) and the
 * validator's toolkit check; everything added to the first version is compatible (new fields
 * default to 0).
 */
#ifndef GPUOP_RTCONFIG_H
#define GPUOP_RTCONFIG_H

#include <stdbool.h>
#include <stddef.h>

#include "util.h"

enum rtconfig_kind {
    RTCONFIG_CONTAINERD,
    RTCONFIG_CRIO,
    RTCONFIG_DOCKER,
};
const char *rtconfig_kind_name(enum rtconfig_kind k); /* "containerd", "cri-o", "docker" */
/* Accepts "containerd", "cri-o"/"crio", "docker" and a containerRuntimeVersion
 * ("containerd://1.7.24"). */
int rtconfig_kind_parse(const char *s, enum rtconfig_kind *ret);

/* How the runtime is told to load its new configuration (see README.md). Every request is also
 * recorded, one line, in reload.log in the state dir (under the host root). */
enum rtconfig_restart_mode {
    RTCONFIG_RESTART_NONE,    /* only recorded */
    RTCONFIG_RESTART_SIGNAL,  /* SIGHUP to the process serving the runtime's socket (SO_PEERCRED) */
    RTCONFIG_RESTART_SYSTEMD, /* systemctl restart <unit> */
};
const char *rtconfig_restart_mode_name(
    enum rtconfig_restart_mode m); /* "none", "signal", "systemd" */
int rtconfig_restart_mode_parse(const char *s, enum rtconfig_restart_mode *ret);

struct rtconfig_options {
    const char *runtime_name; /* the handler: "nvidia" */
    const char *runtime_path; /* the wrapper binary the handler runs (gpuop runtime) */
    bool set_as_default;
    bool enable_cdi;
    /* Added by the module (zero means the default, so older initializers keep working): */
    enum rtconfig_restart_mode restart_mode;
    const char *config_path; /* host path of the main config; NULL: the runtime's default */
    const char *dropin_path; /* host path of the drop-in; NULL: the runtime's default */
    const char *state_dir;   /* host path of the backups; NULL: RTCONFIG_STATE_DIR */
};

#define RTCONFIG_STATE_DIR         "/var/lib/gpuop/rtconfig"
#define RTCONFIG_CONTAINERD_CONFIG "/etc/containerd/config.toml"
#define RTCONFIG_CONTAINERD_DROPIN "/etc/containerd/conf.d/99-nvidia.toml"
#define RTCONFIG_CRIO_CONFIG       "/etc/crio/crio.conf"
#define RTCONFIG_CRIO_DROPIN       "/etc/crio/crio.conf.d/99-nvidia.toml"
#define RTCONFIG_DOCKER_CONFIG     "/etc/docker/daemon.json"
#define RTCONFIG_CONFIG_MAX        (4u << 20) /* a runtime config larger than this is refused */

/* The config files in force for k under o (defaults filled in): host paths, not under a root. */
const char *rtconfig_config_path(enum rtconfig_kind k, const struct rtconfig_options *o);
const char *rtconfig_dropin_path(enum rtconfig_kind k,
                                 const struct rtconfig_options *o); /* NULL: docker */

/* ---- the pure editing cores: bytes in, bytes out, no I/O (fuzzed) ---------------------------
 * A file's text is (data, len); data NULL means the file does not exist. Output goes to the
 * caller's bounded buffers. A text that does not parse is -EINVAL with e naming the line
 * ("line 3, column 7: ..."); the caller adds the file name. */
struct rtconfig_text {
    const char *data;
    size_t len;
};

/* containerd: the main config in; out the main config (the original plus an `imports` entry for
 * the drop-in, and `version = 2` when it was empty) and the drop-in (the CRI plugin's section of
 * the main config, which containerd replaces as a whole when an imported file names it, with
 * the handler cloned from runc, BinaryName, CDI). */
int rtconfig_containerd_edit(struct rtconfig_text main, const struct rtconfig_options *o,
                             struct sbuf *ret_main, struct sbuf *ret_dropin, struct err *e);
/* CRI-O: the configs in force (the main file, then the other drop-ins in name order; n may be
 * 0) in; out the drop-in (the handler with the runc or crun entry's keys). On a parse error
 * *ret_bad (may be NULL) is the index of the text at fault. */
int rtconfig_crio_edit(const struct rtconfig_text *configs, size_t n,
                       const struct rtconfig_options *o, struct sbuf *ret_dropin, size_t *ret_bad,
                       struct err *e);
/* docker: daemon.json in, daemon.json out; bytes outside the members set stay as they were. */
int rtconfig_docker_edit(struct rtconfig_text config, const struct rtconfig_options *o,
                         struct sbuf *ret_config, struct err *e);

/* ---- the pure undoing cores: what uninstall does to a file ---------------------------------
 * base is the file before gpuop first changed it (the backup; data NULL: there was none), cur the
 * file now (data NULL: gone). Only gpuop's own changes are taken out; every edit made since stays.
 * When the file holds nothing but the original plus gpuop's changes, the original comes back byte
 * for byte; a file gpuop created goes only when it holds nothing else. */
enum rtconfig_undo {
    RTCONFIG_UNDO_NONE,     /* nothing of gpuop's in it (or it is gone): left as it is */
    RTCONFIG_UNDO_ORIGINAL, /* only gpuop's changes since: the original back, byte for byte */
    RTCONFIG_UNDO_EDIT,     /* edited since: gpuop's changes taken out, the rest kept */
    RTCONFIG_UNDO_REMOVE,   /* gpuop created it and it holds nothing else: removed */
    RTCONFIG_UNDO_LEFT,     /* gpuop cannot tell its changes from later ones: left, and said */
};
const char *rtconfig_undo_name(enum rtconfig_undo u); /* "none", "original", "edit", ... */

/* What uninstall does (or did) to one file; why says it for NONE and LEFT. */
struct rtconfig_undo_file {
    const char *path; /* the host path (the caller's, or a default): set by rtconfig_restore */
    enum rtconfig_undo what;
    char why[256];
};

/* containerd's main config: gpuop's `imports` entry taken out (the line too when gpuop added it),
 * and the `version = 2` gpuop gave a file that had no key when nothing else is left. For EDIT the
 * new text goes to ret_main (ORIGINAL means base). A cur that does not parse is -EINVAL, as for
 * the edit. */
int rtconfig_containerd_unedit(struct rtconfig_text base, struct rtconfig_text cur,
                               const struct rtconfig_options *o, struct sbuf *ret_main,
                               struct rtconfig_undo_file *ret, struct err *e);
/* docker's daemon.json: each member gpuop set (runtimes.<name>, features.cdi, default-runtime)
 * that still has the value gpuop gave it gets its original value back (or goes, with the objects
 * gpuop created for it when they are empty); one changed since is LEFT for the whole file. The
 * text for EDIT goes to ret_config. */
int rtconfig_docker_unedit(struct rtconfig_text base, struct rtconfig_text cur,
                           const struct rtconfig_options *o, struct sbuf *ret_config,
                           struct rtconfig_undo_file *ret, struct err *e);
/* A file gpuop owns (a drop-in): it goes (or base comes back) when it holds what gpuop last wrote
 * (written; data NULL: not recorded) or would write now (fresh; data NULL: unknown); else LEFT. */
void rtconfig_owned_unedit(struct rtconfig_text base, struct rtconfig_text cur,
                           struct rtconfig_text written, struct rtconfig_text fresh,
                           struct rtconfig_undo_file *ret);

/* Detects the node's runtime: node_runtime_version (status.nodeInfo.containerRuntimeVersion,
 * NULL when unknown) first, then the sockets and config files under host_root. A node whose
 * runtime differs from want (NULL: no expectation) is an error naming both. */
int rtconfig_detect(const char *host_root, const char *node_runtime_version, const char *want,
                    enum rtconfig_kind *ret, struct err *e);

/* Loads what reading k's config takes: gpuop's TOML parser (the module gpuop-tomlx.so, loaded once
 * per process) for containerd and CRI-O, nothing for docker. The calls below load it when they
 * first need it; a caller that writes files of its own before them calls this first, so a
 * missing module fails before anything is written. -ELIBACC with e naming the paths tried. */
int rtconfig_prepare(enum rtconfig_kind k, struct err *e);

/* Configures it: *ret_changed (may be NULL) says whether a file was written; then the runtime is
 * told to reload (o->restart_mode). Originals are backed up under the state dir once (a file
 * that did not exist is recorded as absent), and what gpuop wrote to a drop-in is kept beside
 * them. A file is replaced atomically (a temp file in its folder, then rename) with its owner and
 * mode; a link's target is what is written. Idempotent. A config that does not parse: nothing
 * written, e names the file and line. */
int rtconfig_configure(const char *host_root, enum rtconfig_kind k,
                       const struct rtconfig_options *o, bool *ret_changed, struct err *e);
/* Tells the runtime to load its config as o->restart_mode says and records the request (why:
 * "configure", "restore", ...). rtconfig_configure and rtconfig_restore call it after a change; a
 * failed reload leaves the files written, and a later rtconfig_configure finds nothing to change,
 * so the caller retries with this. */
int rtconfig_reload(const char *host_root, enum rtconfig_kind k, const struct rtconfig_options *o,
                    const char *why, struct err *e);
/* What rtconfig_restore did: the main config (containerd, docker), then the drop-in (containerd,
 * CRI-O). */
struct rtconfig_restore_report {
    struct rtconfig_undo_file files[2];
    size_t n;
    bool left; /* a file was LEFT: its backups stay, so a later restore can finish */
};
/* Uninstall: takes gpuop's changes out of the files rtconfig_configure changed, as they are now
 * (the pure cores above decide, per file), drops the backups of the files done, writes the state
 * dir's `status` (one line per file) and tells the runtime to reload when a file changed.
 * containerd's main config and drop-in go together: one LEFT leaves both, so the config never
 * imports a file that is gone. A config that does not parse: -EINVAL naming the file, nothing
 * written or removed. ret_report (may be NULL) says what was done. Nothing to restore is not an
 * error. */
int rtconfig_restore(const char *host_root, enum rtconfig_kind k, const struct rtconfig_options *o,
                     struct rtconfig_restore_report *ret_report, struct err *e);
/* 0 when the runtime on host_root is configured for GPUs as o says (the handler exists and runs
 * o->runtime_path; CDI enabled when o->enable_cdi); -ENOENT with the reason in e otherwise. */
int rtconfig_check(const char *host_root, enum rtconfig_kind k, const struct rtconfig_options *o,
                   struct err *e);

#endif
