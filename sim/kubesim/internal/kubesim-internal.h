/* SPDX-License-Identifier: Apache-2.0 */
/* kubesim internals: the shared structs and the bottom layers (helpers, type registry, store,
 * selectors, JSON merging). Nothing here calls up into objects, controllers or HTTP. Everything
 * runs under ks->lock. Layers above: ks-objects.h, ks-controllers.h, ks-http.h. */
#ifndef GPUOP_KUBESIM_INTERNAL_H
#define GPUOP_KUBESIM_INTERNAL_H

#include <pthread.h>
#include <string.h>

#include "kobj.h"
#include "kubesim.h"
#include "yamlcfg.h"
#include "ks-crd-schema.h"

static inline bool streq(const char *a, const char *b)
{
    return strcmp(a, b) == 0;
}

/* One served resource type (built in, or from a CRD). Types are never freed before the ksim:
 * a deleted CRD's type is only marked not served, so events can keep pointing at it. */
struct ks_type {
    char *group; /* "" for the core group */
    char *version;
    char *plural;
    char *singular;
    char *kind;
    char *short_names; /* comma-separated, may be "" */
    char *categories;  /* comma-separated, may be "" */
    bool namespaced;
    bool has_status;     /* status subresource */
    bool has_generation; /* metadata.generation tracks spec changes */
    bool served;
    bool crd;
    /* a served CRD version's openAPIV3Schema, enforced on its objects; NULL: none */
    struct ks_crd_schema *schema;
    char *extra_sub;         /* extra subresources, comma-separated ("eviction,binding") */
    json_t *printer_columns; /* CRD additionalPrinterColumns, or NULL */
    json_t *objs;            /* "ns/name" or "name" -> object */
    json_t *last_added;      /* the object of this type made last (ks_commit shares with it) */
    /* a built-in kind's OpenAPI schema and its components, made once (openapi.c); read only */
    json_t *openapi_schema, *openapi_components;
    struct ks_type *next;
};

enum ks_ev { KS_ADDED, KS_MODIFIED, KS_DELETED };

struct ks_event {
    uint64_t rv;
    uint64_t t_ms;
    struct ks_type *type;
    enum ks_ev kind;
    json_t *obj; /* the object after the change (for DELETED: the last state) */
    json_t *old; /* before (MODIFIED only), for selector transitions */
    /* obj as compact JSON, made once for every JSON watcher that sends it (watch.c); NULL
     * until one does, or after it was dropped to keep the cache within its bytes */
    char *dump;
    size_t dump_len;
};
/* What the newest events' dumps may take together: watchers read near the head of the log. */
#define KS_EV_DUMP_BUDGET (32u << 20)

struct ksim_selector {
    size_t n;
    struct ks_req {
        char *key;
        int op; /* KS_OP_* */
        size_t nvals;
        char **vals;
    } * reqs;
    bool is_field;
};
enum { KS_OP_EQ, KS_OP_NEQ, KS_OP_IN, KS_OP_NOTIN, KS_OP_EXISTS, KS_OP_NOTEXISTS };

struct ksim_watch {
    struct ks_type *type;
    char *ns; /* NULL: all namespaces */
    struct ksim_selector *lsel;
    struct ksim_selector *fsel;
    uint64_t cursor;   /* last rv delivered */
    json_t *initial;   /* objects still to send as ADDED (resourceVersion "" or "0") */
    uint64_t deadline; /* wall ms; 0 = none */
    bool bookmarks;
    bool table;
    bool proto; /* events as length-prefixed protobuf WatchEvents (never with table) */
    uint64_t last_bookmark;
    bool ended;
    bool initial_end_bookmark;
    size_t initial_pos;  /* next index of initial to send */
    uint64_t expired_rv; /* nonzero: send a 410 ERROR event then end */
};

/* Pods the controllers create in one reconcile, as the ReplicaSet controller's burstReplicas: the
 * store lock is released between reconciles, so a huge scale-up never stalls requests. */
#define KS_POD_BURST          500
#define KS_MAX_PODS_PER_OWNER 10000
/* Daemon pods the DaemonSet controller creates, and pods the simulated kubelet starts, in one
 * reconcile (ksim_opts.daemon_burst): a fresh cluster of 10,000 nodes asks for 70,000 of each
 * at once, and the store lock is held while they are made (a Lease renewal waits for it). */
#define KS_DAEMON_BURST 10000

struct ksim {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    struct ksim_opts opts;
    struct ks_type *types; /* linked list, in discovery order */
    uint64_t rv;
    uint64_t compacted_rv; /* watches from below this get 410 */
    struct ks_event *ev;
    size_t ev_head, ev_len, ev_cap; /* events ev[ev_head..ev_len) */
    size_t ev_dump_bytes;           /* what the events' dumps hold */
    uint64_t ev_dump_low;           /* events below this resourceVersion hold no dump */
    json_t *uids;                   /* uid -> [type pointer as int, key] of every live object */
    bool dirty;                     /* something changed since the last reconcile */
    /* since the last garbage collection: an object's ownerReferences were set or changed (the
     * collector looks at the objects changed since gc_cursor), or something was deleted or
     * marked for deletion (it looks at every object) */
    bool gc_dirty;
    bool gc_full;
    uint64_t gc_cursor;
    /* the controllers that follow the event log from where they last looked (ks_ev_since):
     * what each saw last; 0 (before the log's start): a full pass */
    uint64_t taints_cursor, kubelet_cursor, orphans_cursor, adopt_cursor, ds_index_cursor;
    json_t *ds_index; /* the DaemonSet controller's pods: uid -> node -> [pods]; NULL: none yet */
    json_t *kubelet_waiting; /* "ns/name" -> true: pods bound and Pending, not yet due */
    bool shutdown;
    uint64_t watches_active;
    uint64_t watch_events_total;
    uint64_t uid_counter;
    json_t *pdb_disrupted; /* "ns/pdb" -> count of evictions not yet seen by the controller */
    json_t *pod_born;      /* pod uid -> ms it was scheduled (for --pod-ready-delay) */
    json_t *pod_dying;     /* pod uid -> wall ms the simulated kubelet removes it */
    json_t *dra_events;    /* "pod uid/reason/message" of DRA Events already sent */
    uint64_t next_due;     /* wall ms of the next timed controller action, 0 = none */
    size_t pod_budget;     /* pods the controllers may still create in this reconcile */
    size_t ds_pod_budget;  /* daemon pods the DaemonSet controller may still create in it */
    size_t kubelet_budget; /* pods the simulated kubelet may still start in it */
    bool more_work;        /* a controller stopped at its budget: reconcile again soon */
    char *admin_token;     /* NULL: none (opts.admin_token, copied) */
    json_t *sa_tokens;     /* ServiceAccount token -> {ns, name, uid, exp, podName, podUid} */
    /* The field manager of the create, update or patch being served (set by the HTTP layer
     * around the call); NULL for apply and for the controllers' own writes. */
    const char *write_manager;
    /* --data-dir: where committed changes go (journal.c); NULL: memory only */
    struct ks_journal *journal;
};

/* ---- helpers.c: pure predicates over objects (JSON paths and metadata: kobj.h) ------------- */

char *ks_lower_dup(const char *s);
/* Takes the text built in b (malloc'ed; b is reset). When an append failed, the text ends with
 * a note that it was cut at b's limit instead of stopping silently where the limit fell. */
char *ks_text_take(struct sbuf *b);
bool ks_is_deleting(json_t *obj);
/* Replaces o's value at key by a shallow copy of it (an empty object where it is not an
 * object) and returns the copy: an object made from a template or an
 * older version copies only the objects it changes, sharing the rest (stored objects are never
 * changed in place; ks_share only compares what has other holders). */
json_t *ks_own_member(json_t *o, const char *key);
bool ks_pod_ready(json_t *pod);
/* An int-or-string ("25%") against total; dflt when v is neither. */
int64_t ks_intstr_scaled(json_t *v, int64_t total, bool round_up, int64_t dflt);
/* A resource quantity (a string such as "500m", "32Gi", "1e3", or a JSON number) in thousandths,
 * rounded up as resource.Quantity's MilliValue, capped at INT64_MAX: 0, or -EINVAL. */
int ks_quantity_milli(json_t *v, int64_t *ret);
/* A node annotated so (by kubelet-sim when it registers the node) is served by a kubelet process:
 * kubesim's simulated kubelet leaves its pods alone and log requests are proxied to it. */
#define KS_EXTERNAL_KUBELET_ANNOTATION "kubelet.gpuop.dev/simulated"
bool ks_node_external(json_t *node);

/* ---- types.c: the type registry ----------------------------------------------------------- */

struct ks_type *ks_type_find(struct ksim *ks, const char *group, const char *version,
                             const char *plural);
struct ks_type *ks_type_by_kind(struct ksim *ks, const char *api_version, const char *kind);
void ks_types_init(struct ksim *ks);
struct ks_type *ks_type_add(struct ksim *ks, const char *group, const char *version,
                            const char *plural, const char *singular, const char *kind,
                            bool namespaced);
void ks_types_free(struct ksim *ks);
/* "apps/v1" or "v1" */
char *ks_type_gv(const struct ks_type *t);
/* "pods" or "daemonsets.apps" as messages name a resource */
char *ks_type_qualified(const struct ks_type *t);
/* Serves (or stops serving) the resources a CRD object declares. */
void ks_types_serve_crd(struct ksim *ks, json_t *crd, bool serve);

/* ---- store.c: objects, resourceVersions, uids, the event log ------------------------------ */

uint64_t ks_now(struct ksim *ks);
void ks_now_str(struct ksim *ks, char *buf, size_t n);
/* kobj_namespace / kobj_name, "" when absent (store keys, messages). */
const char *ks_obj_ns(json_t *obj);
const char *ks_obj_name(json_t *obj);
char *ks_key(const char *ns, const char *name);
json_t *ks_get(struct ks_type *t, const char *ns, const char *name);
/* obj is stolen; old (MODIFIED) is the state before. Appends an event and wakes watchers. What
 * obj has in common with old (or, when added, with the last object of t added) becomes shared
 * with it (ks_share): a caller must not keep pointers into obj's values across the call. */
void ks_commit(struct ksim *ks, struct ks_type *t, json_t *obj, enum ks_ev kind, json_t *old);
void ks_remove(struct ksim *ks, struct ks_type *t, json_t *obj);
/* Makes obj's values that are the same as ref's (same JSON, key order included; by key and
 * index) ref's own, so they are held once. Objects so shared must never be changed in place: a
 * write copies (json_deep_copy) what it changes, as every writer of a stored object does. */
void ks_share(json_t *obj, json_t *ref);
/* Frees e's dump (watch.c makes them). */
void ks_ev_drop_dump(struct ksim *ks, struct ks_event *e);
/* Index of the first event with rv > cursor (ev_len when none). */
size_t ks_ev_search(struct ksim *ks, uint64_t cursor);
/* The events after cursor, from *ret_index to ev_len: false when some were compacted away (the
 * caller looks at everything instead). A controller that follows the log keeps ks->rv as its
 * cursor once it has looked. */
bool ks_ev_since(struct ksim *ks, uint64_t cursor, size_t *ret_index);
char *ks_new_uid(struct ksim *ks);
void ks_set_rv(json_t *obj, uint64_t rv);
/* Waits on ks->changed (ks->lock held) up to ms. */
void ks_cond_wait(struct ksim *ks, uint64_t ms);
/* Drops events past the retention time or the cap. */
void ks_store_compact(struct ksim *ks);
void ks_store_free(struct ksim *ks);
bool ks_obj_visible(json_t *obj, const char *ns, const struct ksim_selector *ls,
                    const struct ksim_selector *fs);
/* Objects of t in key order, filtered, after the key `after`, at most limit (0: all); a new
 * array. *ret_last_key (malloc'ed) is the key of the last one, *ret_remaining how many more. */
json_t *ks_store_list(struct ks_type *t, const char *ns, const struct ksim_selector *ls,
                      const struct ksim_selector *fs, const char *after, size_t limit,
                      char **ret_last_key, size_t *ret_remaining);

/* ---- journal.c: persistence (--data-dir), below the store -------------------------------- */

struct ks_journal;
void ks_journal_free(struct ks_journal *j);
DEFINE_CLEANUP_FUNC(struct ks_journal, ks_journal_free)
/* A committed object (after ks->rv moved), a removal by store key, a new ServiceAccount token:
 * one line appended to the journal. Call only when ks->journal is set. */
void ks_journal_put(struct ksim *ks, struct ks_type *t, json_t *obj);
void ks_journal_del(struct ksim *ks, struct ks_type *t, const char *key);
void ks_journal_token(struct ksim *ks, const char *token, json_t *rec);
/* Rewrites the snapshot and empties the journal once the journal grew large. */
void ks_journal_maybe_compact(struct ksim *ks);

/* ---- selector.c --------------------------------------------------------------------------- */

struct ksim_selector *ks_field_selector_parse(const char *s, struct ks_type *t, struct err *e);
bool ks_field_matches(const struct ksim_selector *sel, json_t *obj);

/* ---- patch.c and apply.c: pure JSON merging ----------------------------------------------- */

const char *ks_merge_key(const char *field, json_t *sample);
json_t *ks_fieldset(json_t *v, const char *field);
int ks_apply_conflicts(json_t *mine, json_t *theirs, json_t *cfg, json_t *live, const char *path,
                       const char *manager, bool force, json_t *causes);
bool ks_apply_merge(json_t *live, json_t *config, json_t *prev_fs, json_t *others_fs, json_t **ret,
                    struct err *e);

#endif
