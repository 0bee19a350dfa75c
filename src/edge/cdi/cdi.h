/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cdi: the Container Device Interface spec as a model (https://github.com/cncf-tags/
 * container-device-interface, the schema in ../shared/reference/upstream/cdi_schema_*.json):
 * parse (JSON or YAML) and check a spec as the CDI library does, look devices up by name, and
 * apply a device's and its spec's containerEdits. Pure and fuzzed. Its users: the toolkit (the
 * spec it generates is checked with it), the validator (the node's spec names every GPU), the
 * OCI runtime wrapper (`gpuop runtime` applies the edits to config.json), and kubelet-sim.
 *
 * Three parts:
 *  - a spec (cdi_spec_*): one file, parsed and checked; its edits as plain read-only structs
 *    whose strings live as long as the spec;
 *  - a registry (cdi_registry_*): the specs of a list of directories (/etc/cdi, /var/run/cdi),
 *    resolving qualified names ("nvidia.com/gpu=0") to the edits to apply, in CDI's order;
 *  - the OCI edit (cdi_oci_apply): those edits applied to an OCI runtime spec (config.json).
 * Everything is thread-compatible: a spec or registry is read-only once built.
 */
#ifndef GPUOP_CDI_H
#define GPUOP_CDI_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

#define CDI_MAX_BYTES (4u << 20) /* one spec file */
#define CDI_NAME_MAX  256        /* a device name */

struct cdi_spec;

/* ---- a spec --------------------------------------------------------------------------------- */

/* path names the file in errors ("<path>: devices[1].containerEdits.mounts[0].containerPath:
 * required"). Accepted: cdiVersion 0.3.0 to 0.8.0, 1.0.0 and 1.1.0, and at least 0.5.0 when a
 * device node has hostPath or a device name starts with a digit; kind "vendor/class" with the
 * CDI library's name rules; devices with unique valid names and non-empty containerEdits;
 * edits' shapes (env NAME=value; deviceNodes path absolute, type b/c/u/p, permissions of
 * r, w, m; mounts hostPath and containerPath; hooks a known hookName and a path; additionalGids
 * uint32; netDevices names; intelRdt an object, otherwise ignored). JSON when the text starts
 * with '{', else YAML. */
int cdi_spec_parse(const char *path, const char *text, size_t len, struct cdi_spec **ret,
                   struct err *e);
/* Reads (bounded) and parses a file. */
int cdi_spec_load(const char *path, struct cdi_spec **ret, struct err *e);
void cdi_spec_free(struct cdi_spec *s);
DEFINE_CLEANUP_FUNC(struct cdi_spec, cdi_spec_free)

const char *cdi_spec_path(const struct cdi_spec *s);
const char *cdi_spec_kind(const struct cdi_spec *s);    /* "nvidia.com/gpu" */
const char *cdi_spec_version(const struct cdi_spec *s); /* "0.5.0" */
size_t cdi_spec_n_devices(const struct cdi_spec *s);
const char *cdi_spec_device_name(const struct cdi_spec *s, size_t i); /* "0", "GPU-...", "all" */
bool cdi_spec_has_device(const struct cdi_spec *s, const char *name);

/* The edits. Unset numbers have their has_* false; unset strings are NULL. */
struct cdi_device_node {
    const char *path;        /* in the container */
    const char *host_path;   /* NULL: path */
    const char *type;        /* "c", "b", "u", "p"; NULL: the host's */
    const char *permissions; /* cgroup access, NULL: "rwm" */
    int64_t major, minor;
    uint32_t file_mode, uid, gid;
    bool has_major, has_minor, has_file_mode, has_uid, has_gid;
};
struct cdi_mount {
    const char *host_path, *container_path, *type; /* type may be NULL */
    const char *const *options;
    size_t n_options;
};
struct cdi_hook {
    const char *hook_name; /* prestart, createRuntime, createContainer, startContainer,
                              poststart, poststop */
    const char *path;
    const char *const *args;
    size_t n_args;
    const char *const *env;
    size_t n_env;
    int64_t timeout;
    bool has_timeout;
};
struct cdi_edits {
    const char *const *env; /* "NAME=value" */
    size_t n_env;
    const struct cdi_device_node *device_nodes;
    size_t n_device_nodes;
    const struct cdi_mount *mounts;
    size_t n_mounts;
    const struct cdi_hook *hooks;
    size_t n_hooks;
    const uint32_t *additional_gids;
    size_t n_additional_gids;
};
/* The spec-level edits (never NULL; may be empty) and a device's (NULL: no such device). */
const struct cdi_edits *cdi_spec_edits(const struct cdi_spec *s);
const struct cdi_edits *cdi_spec_device_edits(const struct cdi_spec *s, const char *name);

/* ---- names ---------------------------------------------------------------------------------- */

bool cdi_kind_valid(const char *kind);        /* "vendor/class" */
bool cdi_device_name_valid(const char *name); /* "0", "GPU-x", "0:1", "all" */
/* Splits "vendor/class=name" (each part checked) into kind (its length) and name. */
int cdi_qualified_split(const char *qname, size_t *ret_kind_len, const char **ret_name,
                        struct err *e);

/* ---- a registry: the specs of some directories ---------------------------------------------- */

struct cdi_registry;

/* Reads each directory's *.json, *.yaml and *.yml in name order (bytes, strcmp); a later
 * directory's (then a later file's) device wins for the same qualified name, as the CDI cache
 * orders them. A missing directory is empty. A spec is used only as the toolkit requires it:
 * the file (as read: the stat is of the descriptor read) and its directory owned by root (or
 * by this process's user) and writable by neither group nor others. A spec refused so, or that
 * does not parse, is skipped, its path and why kept for cdi_registry_resolve's message and
 * cdi_registry_errors. At most 1024 files per directory are read, the first by name; the rest
 * are named there ("not read: ..."). */
int cdi_registry_load(const char *const *dirs, size_t n_dirs, struct cdi_registry **ret,
                      struct err *e);
void cdi_registry_free(struct cdi_registry *r);
DEFINE_CLEANUP_FUNC(struct cdi_registry, cdi_registry_free)
size_t cdi_registry_n_specs(const struct cdi_registry *r);
const struct cdi_spec *cdi_registry_spec(const struct cdi_registry *r, size_t i);
/* "<error>; <error>" of the specs not used (refused, not parsed, not read), "" when none. */
const char *cdi_registry_errors(const struct cdi_registry *r);
/* The spec defining a qualified name, or NULL. */
const struct cdi_spec *cdi_registry_lookup(const struct cdi_registry *r, const char *qname);

/* The edits for qualified names, in the order CDI applies them: each spec's own edits once (in
 * the order its devices were first named), then each named device's once. An unknown or
 * malformed name: -ENOENT, "unresolvable CDI devices A, B" (every one named, plus "; specs not
 * used: " and cdi_registry_errors). *ret (caller frees the array, not the edits) points into the
 * registry. */
int cdi_registry_resolve(const struct cdi_registry *r, const char *const *names, size_t n_names,
                         const struct cdi_edits ***ret, size_t *ret_n, struct err *e);

/* ---- the OCI edit --------------------------------------------------------------------------- */

/* What a device node is on the host, for the fields a spec leaves out. */
struct cdi_host_node {
    char type; /* 'c', 'b', 'p' */
    int64_t major, minor;
    uint32_t file_mode; /* permission bits */
    uint32_t uid, gid;
};
/* Reads the host; the default is stat(2). Returns 0 or a negative errno with e naming path. */
typedef int (*cdi_stat_fn)(void *ud, const char *path, struct cdi_host_node *ret, struct err *e);
int cdi_stat_host(void *ud, const char *path, struct cdi_host_node *ret, struct err *e);

/* Applies edits[0..n) to an OCI runtime spec (config.json as jansson), as the CDI library does:
 * process.env set by name (a new name appended), linux.devices (replacing one with the same
 * path) with linux.resources.devices allow rules for c/b nodes (permissions, default rwm),
 * type/major/minor/fileMode from stat_fn when the spec leaves them out, mounts (replacing one with
 * the same destination; then ordered parents first, stably), hooks appended to
 * hooks.<hookName>, additionalGids added to process.user. A rule or hook already there is not
 * added again, so applying the same edits twice changes nothing more. On error oci may be partly
 * edited: apply to a copy. stat_fn NULL: cdi_stat_host. */
int cdi_oci_apply(json_t *oci, const struct cdi_edits *const *edits, size_t n, cdi_stat_fn stat_fn,
                  void *stat_ud, struct err *e);

#endif
