/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gather: `gpuop gather`, one support bundle to attach to a bug report (docs/gather.md). The
 * shell (gather-main.c) reads the cluster; this core decides what goes in and how it is made
 * safe and bounded:
 *
 *  - what is collected (gather-plan.c): the kinds and which of their objects (gather_sources,
 *    gather_wanted), a GPU node's facts (gather_node_view), the Events of a window
 *    (gather_events_since), the logs to read and in what order (gather_log_plan), the image the
 *    doctor's pods run (gather_doctor_image), safe names inside the bundle (gather_path_part);
 *  - what is never collected (gather-redact.c): no Secret, ever; credentials replaced by
 *    "<redacted>" in objects (env values whose names say TOKEN, PASSWORD, SECRET, KEY, ...;
 *    fields named token, password, ...) and in any text (Authorization headers, bearer tokens,
 *    JWTs, private keys, passwords in URLs, key=value pairs), each replacement counted;
 *  - the bundle (gather-bundle.c): a tar (POSIX ustar, pax names where ustar's are too short)
 *    compressed with gzip (zlib) into a buffer that never passes the size bound: an entry that
 *    would is left out and said so, and the index (MANIFEST, manifest.json) lists what was
 *    collected and what was not, and why.
 *
 * Pure: no I/O, no clock (times come in). Thread-compatible.
 */
#ifndef GPUOP_GATHER_H
#define GPUOP_GATHER_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kube.h"
#include "util.h"

#define GATHER_REDACTED "<redacted>"

/* ---- what is collected -------------------------------------------------------------------- */

enum gather_select {
    GATHER_ALL,   /* every object of the kind (in the namespace, or a gpuop CRD's) */
    GATHER_GPUOP, /* only gpuop's: gather_wanted decides (cluster-wide RBAC, RuntimeClasses) */
};

struct gather_source {
    const struct kube_resource *res;
    const char *dir; /* its folder in the bundle: "cluster/<dir>/" or "namespace/<dir>/" */
    enum gather_select select;
    bool optional; /* a CRD that may not be installed: a 404 says "not installed" */
};

/* The kinds collected, in the bundle's order, ended by {0}: the cluster-scoped ones (the gpuop
 * CRDs' objects, RBAC and RuntimeClasses) and the operand namespace's. No Secret is listed. */
extern const struct gather_source gather_sources[];

/* Whether an object of a GATHER_GPUOP source is gpuop's: labelled
 * app.kubernetes.io/managed-by=gpuop (what the operator renders) or app.kubernetes.io/name=gpuop
 * (what the chart installs), or named for the operator (gpu-operator*, gpuop*, nvidia-*). */
bool gather_wanted(const struct gather_source *src, const json_t *obj);

/* A GPU node's facts: name, labels, annotations, conditions, taints, unschedulable, capacity,
 * allocatable, addresses and nodeInfo. A new object. */
json_t *gather_node_view(const json_t *node);

/* The Events (items of an EventList) whose last time (lastTimestamp, else eventTime, else
 * firstTimestamp, else creationTimestamp) is within since_ms of now_ms (since_ms 0: all), oldest
 * first: {"items": [...], "since": RFC 3339 or null}. A new object. */
json_t *gather_events_since(const json_t *items, uint64_t now_ms, uint64_t since_ms);

/* One log to read. */
struct gather_log {
    char pod[254];
    char container[64];
    bool previous;  /* the instance before the last restart */
    char path[512]; /* "logs/<pod>/<container>.log" or ".previous.log" */
};
/* The logs of the namespace's pods (items of a PodList): the operator's pods first (labelled
 * app.kubernetes.io/component=operator or app=gpu-operator), then the others by name; in each,
 * the init containers then the containers, in the spec's order; a container that restarted
 * also gives its previous instance's. At most max logs (the rest counted in *ret_more).
 * *ret: malloc'ed array (the caller frees), *ret_n entries. */
void gather_log_plan(const json_t *pods, size_t max, struct gather_log **ret, size_t *ret_n,
                     size_t *ret_more);

/* The image the doctor's pods run: the operator's own (the first container of a Deployment
 * labelled app.kubernetes.io/component=operator or app=gpu-operator, items of a
 * DeploymentList), else fallback. Borrowed from deployments or fallback. */
const char *gather_doctor_image(const json_t *deployments, const char *fallback);

/* A name from the API as one path component of the bundle: [A-Za-z0-9._-] kept, anything else
 * '_', "", "." and ".." become "_", at most n-1 bytes (n >= 2). */
void gather_path_part(const char *name, char *buf, size_t n);

/* Whether an API error says the API server cannot be used at all (unreachable, a refused TLS
 * certificate, refused credentials, a deadline), so the remaining calls are skipped. */
bool gather_api_down(int code);

/* ---- the run (gather-config.c) -------------------------------------------------------------- */

/* --log-bytes' largest: well under the API client's limit on one response (64 MiB), so that a
 * kubelet which ignores limitBytes still answers within it */
#define GATHER_LOG_BYTES_MAX (32u << 20)

/* The options, as the shell's option table fills them. */
struct gather_options {
    const char *kubeconfig, *context, *output, *ns, *max_size_s, *log_bytes_s, *doctor_image;
    uint64_t since_ms, doctor_timeout_ms;
    unsigned tail;
    bool doctor;
    uint64_t max_size, log_bytes; /* parsed by gather_options_check */
};
void gather_options_defaults(struct gather_options *o);
/* --max-size (GATHER_MIN_SIZE..GATHER_MAX_SIZE) and --log-bytes (1Ki..GATHER_LOG_BYTES_MAX) as
 * quantities into max_size and log_bytes (written only on success), --namespace a name,
 * --output not empty. The error names the flag. */
int gather_options_check(struct gather_options *o, struct err *e);

/* The file to write (output: the option, NULL for the default gpuop-gather-<UTC time>.tar.gz
 * here; a folder, output_is_dir: that name in it) and the bundle's root folder (the file's base
 * name without .tar.gz, .tgz or .gz, a safe path part). */
void gather_output_path(const char *output, bool output_is_dir, uint64_t now_ms, char *path,
                        size_t pn, char *root, size_t rn);
/* The folder a path is written into ("." for a bare name, "/" for one at the root). */
void gather_output_dir(const char *path, char *buf, size_t n);

/* The index's header: gpuop's version, the time, the command as given (no credential), the
 * kubeconfig and context, the server (already redacted), the namespace and the bound. New. */
json_t *gather_facts(const struct gather_options *o, const char *server, uint64_t now_ms);

/* A source's line in the index ("clusterroles", "pods in namespace NS") and its folder in the
 * bundle ("cluster/<dir>", "namespaces/NS/<dir>"). */
void gather_source_names(const struct gather_source *src, const char *ns, char *what, size_t wn,
                         char *dir, size_t dn);
/* One object's file ("<dir>/<name>.yaml", a safe name) and line ("<Kind> <name>"). */
void gather_object_names(const char *dir, const char *kind, const json_t *obj, char *path,
                         size_t pn, char *desc, size_t dn);

/* The lists a run keeps for what follows the sources: the status view and the doctor's image. */
enum gather_keep {
    GATHER_KEEP_NONE,
    GATHER_KEEP_POLICIES,
    GATHER_KEEP_DRIVERS,
    GATHER_KEEP_PODS,
    GATHER_KEEP_DEPLOYMENTS,
};
enum gather_keep gather_keep_of(const struct gather_source *src);

/* What status.json is made of (items, borrowed; NULL: could not be read, counted as empty). */
struct gather_status_in {
    json_t *policies, *drivers, *nodes, *events, *pods, *quotas;
    uint64_t now_ms;
};
/* `gpuop status -o json` (src/lib/statusview) of those lists, redacted: *ret malloc'ed text
 * ending in a newline, *ret_redactions the replacements made. */
int gather_status_json(const struct gather_status_in *in, char **ret, size_t *ret_redactions,
                       struct err *e);

/* The doctor's file for a node: "doctor/<node>.json" for its report, ".log" for anything else. */
void gather_doctor_path(const char *node, bool report, char *buf, size_t n);
/* Whether a doctor pod's exit says its log is the JSON report: 0 pass, 3 warn, 4 fail. */
bool gather_doctor_report(int exit_code);

/* Where the end of a log cut to max bytes starts: at a line's start where one is near. */
size_t gather_log_tail_start(const char *log, size_t len, size_t max);

/* ---- what is never collected -------------------------------------------------------------- */

/* An environment variable whose value is a credential by its name: TOKEN, PASSWORD, PASSWD,
 * SECRET, KEY, CREDENTIAL or AUTH in it, in any case. */
bool gather_env_name_secret(const char *name);
/* A field or parameter whose value is a credential by its name: its letters and digits (case,
 * '-', '_' and '.' ignored) are or end with token, password, passwd, secret, apikey, accesskey,
 * secretkey, privatekey, clientkeydata, credential(s), passphrase, authorization or cookie. */
bool gather_key_secret(const char *key, size_t len);

/* Appends text to out with credentials replaced by GATHER_REDACTED: the value of an
 * Authorization / Proxy-Authorization / Cookie header (to the end of the line or the closing
 * quote), a bearer token, a JWT, a PEM private key's body, a URL's user:password@, and the value
 * of `key: v`, `key=v`, `"key":"v"` where gather_key_secret(key). Returns the replacements
 * made; out's sticky error says whether it all fitted. */
size_t gather_redact_text(const char *text, size_t len, struct sbuf *out);

/* Redacts a Kubernetes object in place: metadata.managedFields dropped; in every {name, value}
 * pair (env) whose name gather_env_name_secret says, the value; every string field that
 * gather_key_secret names; last-applied-configuration annotations as objects; every other
 * string through gather_redact_text. Returns the replacements made. */
size_t gather_redact_object(json_t *obj);

/* A server URL without what may carry a credential: scheme://host[:port][/path], the user
 * information, query and fragment dropped. buf >= 16 bytes. */
void gather_redact_url(const char *url, char *buf, size_t n);

/* An object as it goes into the bundle: refused when it is a Secret (-EPERM, never collected),
 * else redacted (gather_redact_object, on a copy) and written as YAML into out. *ret_redactions:
 * the replacements made. */
int gather_object_yaml(const json_t *obj, struct sbuf *out, size_t *ret_redactions, struct err *e);

/* ---- the bundle --------------------------------------------------------------------------- */

#define GATHER_MIN_SIZE (256u << 10)
#define GATHER_MAX_SIZE (4ull << 30)

struct gather_bundle_opts {
    const char *root;  /* the folder every entry sits in ("gpuop-gather-20260101T000000Z") */
    uint64_t max_size; /* the .tar.gz's bound, GATHER_MIN_SIZE..GATHER_MAX_SIZE */
    uint64_t now_ms;   /* entries' modification time; the index's "created" */
    json_t *facts;     /* borrowed: the index's header (version, command, server, ...) */
};

struct gather_bundle;

int gather_bundle_new(const struct gather_bundle_opts *o, struct gather_bundle **ret,
                      struct err *e);
void gather_bundle_free(struct gather_bundle *b); /* accepts NULL */
DEFINE_CLEANUP_FUNC(struct gather_bundle, gather_bundle_free)

/* Adds a file (path relative to the root, from safe parts) with what it is (one line) and the
 * redactions made in it. 0 added; 1 left out: it would pass the size bound (recorded in the
 * index as not collected, "the size bound"); a negative code when the bundle cannot go on
 * (compression failed, a path that cannot be named). */
int gather_bundle_add(struct gather_bundle *b, const char *path, const void *data, size_t len,
                      const char *what, size_t redactions, struct err *e);
/* Records something that could not be collected and why (one line each). */
void gather_bundle_missing(struct gather_bundle *b, const char *what, const char *why_fmt, ...)
    GPUOP_PRINTF(3, 4);
/* Whether the size bound has already left something out. */
bool gather_bundle_full(const struct gather_bundle *b);
/* What the index holds so far: files added, things not collected. */
void gather_bundle_counts(const struct gather_bundle *b, size_t *ret_files, size_t *ret_missing);

/* Ends the bundle: the index (MANIFEST, then manifest.json; its listings shortened, and the
 * count of entries left unlisted said, where the whole would pass the bound), the tar's end and
 * gzip's. *ret: the .tar.gz (the caller frees), *ret_len its bytes, never above max_size. The
 * bundle takes no more entries. */
int gather_bundle_finish(struct gather_bundle *b, char **ret, size_t *ret_len, struct err *e);

/* ---- pieces, exposed for the tests -------------------------------------------------------- */

/* One ustar header block for a regular file (mode 0644, owner 0:0, mtime in seconds): 0, or
 * -ENAMETOOLONG when the name fits neither ustar's name field nor its prefix/name split (the
 * bundle then writes a pax header first). */
int gather_tar_header(const char *name, uint64_t size, uint64_t mtime_s, char block[512]);
/* The index as text and JSON from its records, listing at most n_listed entries of each list
 * (the rest counted). Exposed so the tests read what the bundle writes. */
int gather_index_render(const json_t *facts, const json_t *collected, const json_t *missing,
                        size_t n_listed, struct sbuf *text, struct sbuf *js);

#endif
