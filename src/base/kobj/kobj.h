/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kobj: reading Kubernetes objects and other JSON documents held as jansson values.
 *
 * One home for what the API client, the informer, the operator and kubesim each wrote for
 * themselves: a dotted-path lookup ("metadata.labels", "spec.template.spec.containers.0"), the
 * metadata accessors (name, namespace, uid, resourceVersion, labels, annotations, ...) and a few
 * questions asked of every object (its store key, an owner, a finalizer).
 * It also owns the API server's syntax rules (names, label keys and values, quantities) that
 * kubesim enforces and the operator checks on what it renders (kval.c).
 *
 * Pure: jansson only, no I/O, no HTTP client, so kubesim and the operator's pure core link it.
 * Getters return borrowed references (valid while the object is) and NULL when the path is
 * absent or has another type; they accept a NULL object. Nothing here allocates except
 * kobj_key(), kobj_merge_patch(), kobj_condition(), the label set builders and the setters,
 * which say so. Labels come in two forms, an object or a compact array (klabels.c); every
 * reader of labels reads both through the label set accessors.
 * Thread-safety: as for the jansson values passed in (readers may share an object that no one
 * modifies).
 */
#ifndef GPUOP_KOBJ_H
#define GPUOP_KOBJ_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

struct err; /* util.h */

/* ---- JSON paths ----------------------------------------------------------------------------- */

/*
 * The value at a dotted path: each segment is an object key, or, on an array, a decimal index.
 * "" is the value itself. A key that itself holds dots (a label key) cannot be named this way:
 * use kobj_keys() or kobj_label(). A segment longer than 255 bytes never matches.
 */
json_t *kobj_path(const json_t *v, const char *dotted);
/* The string at a dotted path, or NULL when absent or not a string. */
const char *kobj_path_str(const json_t *v, const char *dotted);
/* The value under a NULL-terminated list of object keys (keys may hold dots). */
json_t *kobj_keys(const json_t *v, const char *const *keys);
#define kobj_at(v, ...) kobj_keys((v), (const char *const[]){__VA_ARGS__, NULL})
/* The string member `key` of an object (a label or annotation map, a container, ...); of a
 * compact label set (below), its label `key`. */
const char *kobj_str(const json_t *obj, const char *key);

/* The object member `key` of obj, created (replacing a non-object) when missing. Borrowed. */
json_t *kobj_ensure_object(json_t *obj, const char *key);
/* The same along a NULL-terminated list of keys: root.k1.k2... as objects, created as needed. */
json_t *kobj_ensure_keys(json_t *root, const char *const *keys);
/* Copies the value at `dotted` from src into dst at the same path, creating the objects on the
 * way (the value itself is shared, not deep-copied). Nothing happens when src lacks the path. */
void kobj_path_copy(json_t *dst, const json_t *src, const char *dotted);
/* RFC 7386 JSON merge patch: `patch` applied to `target` (NULL: none), as a new value; neither
 * is changed. An object patch merges key by key (null removes), anything else replaces. */
json_t *kobj_merge_patch(const json_t *target, const json_t *patch);
/* Equal values held once: `v` (a new reference, taken) or, when `table` already holds a value
 * of the same content (its sorted compact JSON text, the table's key), that one; a new
 * reference either way. A value handed out is shared by everyone who interned its equal, so
 * it is read-only from then on (kobj_intern_check finds one changed). NULL table: v as is.
 * The caller serialises use of the table; freeing the table keeps the values handed out. */
json_t *kobj_intern(json_t *table, json_t *v);
/* Whether every value of an intern table still reads as its key (nothing changed it). */
bool kobj_intern_check(const json_t *table);

/* ---- object metadata ------------------------------------------------------------------------ */

const char *kobj_name(const json_t *obj);             /* metadata.name */
const char *kobj_namespace(const json_t *obj);        /* metadata.namespace */
const char *kobj_uid(const json_t *obj);              /* metadata.uid */
const char *kobj_resource_version(const json_t *obj); /* metadata.resourceVersion */
const char *kobj_creation_timestamp(const json_t *obj);
const char *kobj_deletion_timestamp(const json_t *obj);
const char *kobj_kind(const json_t *obj);        /* kind */
const char *kobj_api_version(const json_t *obj); /* apiVersion */
/* Any string field of metadata ("generateName", ...). */
const char *kobj_meta_str(const json_t *obj, const char *field);
/* metadata.generation, or 0 when absent. */
long long kobj_generation(const json_t *obj);

/* metadata.labels, a label set in either form (below), or NULL */
json_t *kobj_labels(const json_t *obj);
json_t *kobj_annotations(const json_t *obj); /* metadata.annotations (an object) or NULL */
const char *kobj_label(const json_t *obj, const char *key); /* either form of label set */
/* A matchLabels map as a label selector string, "k1=v1,k2=v2" in key order (what list calls
 * take); "" for an empty map, NULL when a value is not a string. Free with free(). */
char *kobj_selector_string(const json_t *match_labels);
const char *kobj_annotation(const json_t *obj, const char *key);

/* Annotation edits staged for a merge patch: `edits` is NULL or an object of new values (JSON
 * null: removed) over `obj`'s annotations. kobj_ann_staged reads a key as the patch will leave
 * it; kobj_ann_stage records key=value (NULL: removed) unless that is already so, making
 * `*edits` on first use; kobj_ann_staged_i64 reads a whole number >= `min`, else `dflt`. */
const char *kobj_ann_staged(const json_t *obj, const json_t *edits, const char *key);
void kobj_ann_stage(const json_t *obj, json_t **edits, const char *key, const char *value);
void kobj_ann_stage_i64(const json_t *obj, json_t **edits, const char *key, int64_t value);
int64_t kobj_ann_staged_i64(const json_t *obj, const json_t *edits, const char *key, int64_t min,
                            int64_t dflt);

/* "namespace/name", or "name" for a cluster-scoped object (malloc'd); NULL without a name. */
char *kobj_key(const json_t *obj);
/* Whether metadata.ownerReferences lists an owner of `kind` (NULL: any kind) and `uid` (NULL:
 * any uid). */
bool kobj_owned_by(const json_t *obj, const char *kind, const char *uid);
/* Whether metadata.finalizers holds f. */
bool kobj_has_finalizer(const json_t *obj, const char *f);

/* ---- the API server's syntax rules ---------------------------------------------------------- */

/*
 * One owner for the rules that kubesim enforces and the operator checks on what it renders.
 * Predicates over a NUL-terminated string; the callers word the messages.
 */
/* RFC 1123 label: 1-63 of [a-z0-9-], alphanumeric at both ends (namespaces, container names). */
bool kobj_valid_dns_label(const char *s);
/* RFC 1123 subdomain: dot-separated labels, at most 253 bytes (most object names). */
bool kobj_valid_dns_subdomain(const char *s);
/* A label value: empty, or 1-63 of [A-Za-z0-9_.-] alphanumeric at both ends. */
bool kobj_valid_label_value(const char *s);
/* A label or annotation key: [prefix/]name, the prefix a DNS subdomain, the name as a non-empty
 * label value. */
bool kobj_valid_qualified_name(const char *s);
/* IANA_SVC_NAME (a named port): 1-15 of [a-z0-9-], a letter among them, no "--", no '-' at the
 * ends. */
bool kobj_valid_iana_svc_name(const char *s);
/* resource.Quantity syntax: [+-]? decimal, then one binary or decimal SI suffix or an exponent.
 * *ret_negative (may be NULL), on success: whether the value is below zero ("-0" is not). */
bool kobj_valid_quantity(const char *s, bool *ret_negative);
/* A quantity string in thousandths, rounded up ("100m" -> 100, "1Gi" -> 1073741824000, "-2" ->
 * -2000), saturating at the int64 range. -EINVAL for what kobj_valid_quantity refuses. */
int kobj_quantity_milli(const char *s, int64_t *ret);
/* A quantity in thousandths written as the API server writes a computed one: "500m", "4", "2k",
 * or with binary set, "2Gi" where it divides exactly (decimal otherwise). buf of 32 bytes fits
 * every value. */
void kobj_quantity_format(int64_t milli, bool binary, char *buf, size_t n);
/* A percent string of an int-or-string field: [0-9]+%. */
bool kobj_valid_percent(const char *s);

/* An int-or-string as the API server takes it: a non-negative integer, or a percentage up to
 * 100% ("25%"). A string of digits ("1") becomes the integer. Anything else fails naming
 * `field`. *ret: a new reference. */
int kobj_int_or_percent(const json_t *v, const char *field, json_t **ret, struct err *e);
/* An int-or-percent already checked by kobj_int_or_percent, resolved against `total`: a
 * percentage scaled with rounding up (or down when !round_up), an integer as is. */
long long kobj_int_or_percent_scaled(const json_t *v, long long total, bool round_up);

/* ---- label sets (klabels.c) ----------------------------------------------------------------- */

/*
 * A label set is metadata.labels in one of two forms: an object of strings, as the API gives
 * it, or the compact form an informer keeps instead (kobj_labels_compact): the labels as
 * "key=value" strings sorted by key, the set an array of items, each a chunk (an array of 2 to
 * 16 of those strings, about 8) or a single string. Each string is shared by every set holding
 * that label, and each chunk by every set holding those labels alike: the nodes of a pool share
 * all their chunks and hold what is their own (a hostname) as single strings, about 8 bytes a
 * chunk or label of their own per node. A chunk ends where its last key says (a hash of the
 * key), so a label added, removed or changed changes one or two chunks, not every chunk after
 * it. metadata.labels is a map in the API, so an array there whose first item is "key=value" or
 * a chunk starting with one (or an empty array) is the compact form; any other array reads as
 * no labels, and within a compact set what is no item or no entry reads as absent. Every reader
 * of labels that may meet either form reads through these (and kobj_label(), the selectors
 * below, which take both); NULL is the empty set. A compact set is read-only: writers build an
 * object (kobj_labels_object) and write that. Lookups are binary searches, over the items by
 * their first keys, then within one chunk.
 */
#define KOBJ_LABEL_KEY_MAX 317 /* a 253-byte prefix, '/', a 63-byte name */
/* The value of `key`, or NULL when the set lacks it (or, in object form, it is not a string). */
const char *kobj_labels_get(const json_t *labels, const char *key);
/* Whether the set has `key` at all (in object form: with any value). */
bool kobj_labels_has(const json_t *labels, const char *key);
size_t kobj_labels_count(const json_t *labels);
bool kobj_labels_is_compact(const json_t *labels);
/* Iteration: key order for a compact set, the object's order otherwise; a value that is not a
 * string (object form only) comes as NULL. The key is valid until the next call. */
struct kobj_labels_iter {
    const json_t *labels;
    size_t i, j; /* compact: the chunk, the entry in it; object: how many came */
    void *iter;
    char key[KOBJ_LABEL_KEY_MAX + 1];
};
bool kobj_labels_next(struct kobj_labels_iter *it, const char **ret_key, const char **ret_value);
#define kobj_labels_foreach(set, it, k, v) \
    for (struct kobj_labels_iter it = {.labels = (set)}; kobj_labels_next(&it, &(k), &(v));)
/* The set as a new object of strings (a copy of an object form). */
json_t *kobj_labels_object(const json_t *labels);
/* The compact form of an object of labels (a new reference; a compact set is returned as
 * is), its strings and chunks taken from or added to `intern` ("key=value" -> the one string;
 * "\x01" and a hash of a chunk's keys -> the first chunk made with those keys, which later
 * sets with other values there split against: klabels.c). NULL when the set holds what the API
 * never gives (a value not a string, a key with '=' or too long): such a set stays an object. The
 * caller serialises use of `intern`; the set made is read-only and may be shared between threads
 * (jansson's reference counts are atomic). */
json_t *kobj_labels_compact(const json_t *labels, json_t *intern);
/* Drops the values of an intern table (text -> shared value) that only the table still holds,
 * once it has grown past 2 * *pruned + slack entries since the last sweep (so a table holds at
 * most about twice what its objects use, however often values change); *pruned becomes the
 * size left. Arrays and objects go first, then what only they held (a label set's chunks, then
 * their strings), in one call. Returns how many were dropped. */
size_t kobj_intern_prune(json_t *intern, size_t *pruned, size_t slack);

/* ---- label selectors ------------------------------------------------------------------------ */

/*
 * Does `labels` (a label set in either form; NULL: none) satisfy the label selector string `sel`
 * ("app=x,tier!=db,gpu,!skip,zone in (a,b),env notin (dev)")? An empty or NULL selector
 * matches everything. A selector that does not parse fails naming the offending requirement.
 */
int kobj_selector_match(const char *sel, const json_t *labels, bool *ret_match, struct err *e);
/* A selector's syntax alone (what kobj_selector_match refuses). */
int kobj_selector_check(const char *sel, struct err *e);
/* matchLabels semantics: every key of `match` (an object of strings) has that value in
 * `labels`. NULL or {} matches everything. */
bool kobj_labels_match(const json_t *match, const json_t *labels);
/* One requirement of matchExpressions ({key, operator, values}: a node selector term's or a
 * label selector's) against `labels`: In, NotIn (a missing label is not in any set: a match),
 * Exists, DoesNotExist, and a node selector's Gt and Lt (decimal integers; a missing label or
 * limit does not match). An unknown operator does not match. */
bool kobj_match_expression(const json_t *expr, const json_t *labels);

/* ---- status conditions (kcond.c) ------------------------------------------------------------ */

/*
 * A status condition {type, status: "True"|"False", reason, message, lastTransitionTime,
 * observedGeneration}, new. The rule every status gpuop writes follows: a condition keeps its
 * lastTransitionTime while its status does not change, so the time is that of the last condition
 * of `type` with the same status in `old` (the stored conditions, an array or NULL), else `now`
 * (RFC 3339). observedGeneration is left out when `generation` is negative.
 */
json_t *kobj_condition(const json_t *old, const char *type, bool status, const char *reason,
                       const char *message, const char *now, long long generation);
/* The message of the first condition of `type` (and `status`, "True"/"False", unless NULL) in
 * `conditions`, or NULL: what a status reported, so a restarted controller repeats nothing. */
const char *kobj_condition_message(const json_t *conditions, const char *type, const char *status);
/* The first condition of `type` in `obj`'s status.conditions, or NULL. */
json_t *kobj_condition_find(const json_t *obj, const char *type);
/* Whether `obj` (a node, a pod) has a condition of `type` whose status is "True". */
bool kobj_condition_true(const json_t *obj, const char *type);
/* A pod that serves: phase Running, not being deleted, condition Ready True. */
bool kobj_pod_ready(const json_t *pod);
/* Puts `cond` (stolen) into the array `conditions` in place of the one of its type, or last. */
void kobj_conditions_put(json_t *conditions, json_t *cond);

#endif
