/* SPDX-License-Identifier: Apache-2.0 */
/* Persistence (--data-dir), as etcd behind an API server: every change the store commits is one
 * JSON line appended to DIR/journal.jsonl with write() before the request is answered (no fsync:
 * the fault simulated is a killed process, not a lost machine); at start the last snapshot
 * (DIR/snapshot.jsonl) and the journal are replayed, then written again as one snapshot (temp
 * file + rename) and the journal emptied. The same happens at run time once the journal is much
 * larger than the snapshot.
 *
 * Lines: a snapshot starts with {"kubesim":"snapshot","version":1,"rv":N,"u":M} (the
 * resourceVersion and UID counters), has one {"t":"GROUP/VERSION/PLURAL","o":OBJECT} per object
 * (CustomResourceDefinitions first, so their types are served before their objects) and
 * {"tok":TOKEN,"rec":{...}} per ServiceAccount token, and ends with {"end":RECORDS}. A journal
 * line is {"rv":N,"u":M,"t":...,"o":OBJECT} (created or changed), {"rv":N,"u":M,"t":...,
 * "d":KEY} (removed) or a token line. Journal lines at or below the snapshot's rv are skipped:
 * a kill between the snapshot's rename and the journal's truncation replays nothing twice.
 *
 * Store layer: called by ks_commit and ks_remove (and the TokenRequest handler); calls only the
 * type registry. Runs under ks->lock. */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kubesim-internal.h"

#define KS_JOURNAL_COMPONENT "kubesim"
#define SNAPSHOT_NAME        "snapshot.jsonl"
#define JOURNAL_NAME         "journal.jsonl"
/* The journal is compacted into a snapshot once past this (ksim_opts.journal_compact_bytes
 * when set) and twice the snapshot's size. */
#define JOURNAL_COMPACT_BYTES (64u << 20)

struct ks_journal {
    char *dir;
    char *snapshot_path;
    char *journal_path;
    int fd;      /* the journal, O_APPEND */
    int lock_fd; /* DIR/lock, flock()ed while this process lives */
    uint64_t bytes;
    uint64_t snapshot_bytes;
    bool failed; /* a write failed: logged once, the data dir is no longer complete */
};

static char *type_id(const struct ks_type *t)
{
    return xasprintf("%s/%s/%s", t->group, t->version, t->plural);
}

static void journal_write(struct ks_journal *j, const char *line, size_t len)
{
    size_t off = 0;
    while (off < len) {
        ssize_t n = write(j->fd, line + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (!j->failed)
                log_error(KS_JOURNAL_COMPONENT, "journal write failed",
                          "file=\"%s\" error=\"%s\" detail=\"later changes are not persisted\"",
                          j->journal_path, strerror(n < 0 ? errno : EIO));
            j->failed = true;
            return;
        }
        off += (size_t)n;
    }
    j->bytes += len;
}

static void journal_record(struct ksim *ks, struct ks_type *t, json_t *obj, const char *del_key)
{
    struct ks_journal *j = ks->journal;
    if (!j || j->failed)
        return;
    _cleanup_free_ char *tid = type_id(t);
    _cleanup_json_ json_t *key = del_key ? json_string(del_key) : NULL;
    _cleanup_free_ char *body = json_dumps(del_key ? key : obj, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!body)
        return;
    _cleanup_free_ char *line =
        xasprintf("{\"rv\":%" PRIu64 ",\"u\":%" PRIu64 ",\"t\":\"%s\",\"%s\":%s}\n", ks->rv,
                  ks->uid_counter, tid, del_key ? "d" : "o", body);
    journal_write(j, line, strlen(line));
}

void ks_journal_put(struct ksim *ks, struct ks_type *t, json_t *obj)
{
    journal_record(ks, t, obj, NULL);
}

void ks_journal_del(struct ksim *ks, struct ks_type *t, const char *key)
{
    journal_record(ks, t, NULL, key);
}

void ks_journal_token(struct ksim *ks, const char *token, json_t *rec)
{
    struct ks_journal *j = ks->journal;
    if (!j || j->failed)
        return;
    _cleanup_json_ json_t *l = json_pack("{s:s,s:O}", "tok", token, "rec", rec);
    _cleanup_free_ char *s = json_dumps(l, JSON_COMPACT);
    if (!s)
        return;
    _cleanup_free_ char *line = xasprintf("%s\n", s);
    journal_write(j, line, strlen(line));
}

/* ---- replay ------------------------------------------------------------------------------- */

static struct ks_type *type_of_id(struct ksim *ks, const char *id)
{
    const char *a = strchr(id, '/');
    const char *b = a ? strchr(a + 1, '/') : NULL;
    if (!a || !b)
        return NULL;
    _cleanup_free_ char *g = xstrndup(id, (size_t)(a - id));
    _cleanup_free_ char *v = xstrndup(a + 1, (size_t)(b - a - 1));
    return ks_type_find(ks, g, v, b + 1);
}

static bool is_crd_type(const struct ks_type *t)
{
    return !t->crd && streq(t->plural, "customresourcedefinitions");
}

static void put_object(struct ksim *ks, struct ks_type *t, json_t *obj)
{
    _cleanup_free_ char *key = ks_key(t->namespaced ? ks_obj_ns(obj) : "", ks_obj_name(obj));
    json_t *old = json_object_get(t->objs, key);
    const char *old_uid = old ? kobj_uid(old) : NULL;
    if (old_uid && !streq_ptr(old_uid, kobj_uid(obj)))
        json_object_del(ks->uids, old_uid);
    json_object_set(t->objs, key, obj);
    const char *uid = kobj_uid(obj);
    if (uid)
        json_object_set_new(ks->uids, uid, json_pack("[Is]", (json_int_t)(intptr_t)t, key));
    if (is_crd_type(t))
        ks_types_serve_crd(ks, obj, true);
}

static void del_object(struct ksim *ks, struct ks_type *t, const char *key)
{
    json_t *old = json_object_get(t->objs, key);
    if (!old)
        return;
    if (is_crd_type(t))
        ks_types_serve_crd(ks, old, false);
    const char *uid = kobj_uid(old);
    if (uid)
        json_object_del(ks->uids, uid);
    json_object_del(t->objs, key);
}

static uint64_t u64_of(json_t *v)
{
    return json_is_integer(v) && json_integer_value(v) > 0 ? (uint64_t)json_integer_value(v) : 0;
}

/* One record of a snapshot (in_snapshot) or the journal applied to the store: 0, or -EBADMSG
 * with the reason (the caller names the file and line). */
static int apply_record(struct ksim *ks, json_t *rec, bool in_snapshot, uint64_t snapshot_rv,
                        struct err *e)
{
    if (!json_is_object(rec))
        return err_set(e, -EBADMSG, "not a JSON object");
    json_t *tok = json_object_get(rec, "tok");
    if (tok) {
        json_t *r = json_object_get(rec, "rec");
        if (!json_is_string(tok) || !json_is_object(r))
            return err_set(e, -EBADMSG, "a token record without a token string and a \"rec\"");
        json_object_set(ks->sa_tokens, json_string_value(tok), r);
        return 0;
    }
    const char *tid = kobj_str(rec, "t");
    if (!tid)
        return err_set(e, -EBADMSG, "no \"t\" (the resource)");
    struct ks_type *t = type_of_id(ks, tid);
    if (!t)
        return err_set(e, -EBADMSG, "unknown resource \"%s\"", tid);
    json_t *obj = json_object_get(rec, "o");
    json_t *del = json_object_get(rec, "d");
    if (!in_snapshot) {
        uint64_t rv = u64_of(json_object_get(rec, "rv"));
        if (!rv)
            return err_set(e, -EBADMSG, "no \"rv\"");
        if (rv <= snapshot_rv)
            return 0; /* in the snapshot already */
        if (rv > ks->rv)
            ks->rv = rv;
        uint64_t u = u64_of(json_object_get(rec, "u"));
        if (u > ks->uid_counter)
            ks->uid_counter = u;
    }
    if (json_is_object(obj)) {
        const char *name = kobj_name(obj);
        if (!name || !name[0])
            return err_set(e, -EBADMSG, "a %s object without metadata.name", tid);
        put_object(ks, t, obj);
        return 0;
    }
    if (!in_snapshot && json_is_string(del)) {
        del_object(ks, t, json_string_value(del));
        return 0;
    }
    return err_set(e, -EBADMSG, "neither an object (\"o\") nor a removal (\"d\")");
}

/* Applies every line of path. A snapshot must start with its header and end with its "end" line
 * (anything else is -EBADMSG naming the file); a journal's last line without its newline is a
 * write the kill cut short: dropped and logged. A missing file is empty. */
static int replay_file(struct ksim *ks, const char *path, bool snapshot, uint64_t *snapshot_rv,
                       size_t *ret_records, struct err *e)
{
    _cleanup_fclose_ FILE *f = fopen(path, "re");
    if (!f) {
        if (errno == ENOENT)
            return 0;
        return err_set(e, -errno, "open \"%s\": %s", path, strerror(errno));
    }
    _cleanup_free_ char *line = NULL;
    size_t cap = 0, lineno = 0, records = 0;
    bool ended = false;
    ssize_t n;
    while ((n = getline(&line, &cap, f)) > 0) {
        lineno++;
        bool complete = line[n - 1] == '\n';
        if (!complete && snapshot)
            return err_set(e, -EBADMSG, "\"%s\": truncated (line %zu is cut short)", path, lineno);
        if (!complete) {
            log_warn(KS_JOURNAL_COMPONENT, "journal: dropped a torn last line",
                     "file=\"%s\" line=%zu bytes=%zd detail=\"a write cut short by the kill\"",
                     path, lineno, n);
            break;
        }
        if (ended)
            return err_set(e, -EBADMSG, "\"%s\" line %zu: data after the end line", path, lineno);
        json_error_t je;
        _cleanup_json_ json_t *rec = json_loadb(line, (size_t)n, 0, &je);
        if (!rec)
            return err_set(e, -EBADMSG, "\"%s\" line %zu: not JSON: %s", path, lineno, je.text);
        if (snapshot && lineno == 1) {
            if (!streq_ptr(kobj_str(rec, "kubesim"), "snapshot") ||
                json_integer_value(json_object_get(rec, "version")) != 1)
                return err_set(e, -EBADMSG,
                               "\"%s\" line 1: not a kubesim snapshot (version 1) header", path);
            *snapshot_rv = u64_of(json_object_get(rec, "rv"));
            ks->rv = *snapshot_rv;
            ks->uid_counter = u64_of(json_object_get(rec, "u"));
            continue;
        }
        if (snapshot && json_object_get(rec, "end")) {
            if (u64_of(json_object_get(rec, "end")) != records)
                return err_set(e, -EBADMSG,
                               "\"%s\" line %zu: the end line counts %" PRIu64
                               " records, the file has %zu",
                               path, lineno, u64_of(json_object_get(rec, "end")), records);
            ended = true;
            continue;
        }
        int r = apply_record(ks, rec, snapshot, *snapshot_rv, e);
        if (r < 0)
            return err_prefix(e, "\"%s\" line %zu", path, lineno);
        records++;
    }
    if (ferror(f))
        return err_set(e, -EIO, "read \"%s\": %s", path, strerror(errno));
    if (snapshot && lineno == 0)
        return err_set(e, -EBADMSG, "\"%s\": empty, not a kubesim snapshot", path);
    if (snapshot && !ended)
        return err_set(e, -EBADMSG, "\"%s\": truncated (no end line after line %zu)", path, lineno);
    *ret_records = records;
    return 0;
}

/* ---- snapshot ----------------------------------------------------------------------------- */

static int write_record(FILE *f, const char *tid, json_t *obj)
{
    if (fprintf(f, "{\"t\":\"%s\",\"o\":", tid) < 0 || json_dumpf(obj, f, JSON_COMPACT) < 0 ||
        fputs("}\n", f) < 0)
        return -EIO;
    return 0;
}

/* Objects of the served types (a CRD version no longer served keeps objects no request reaches;
 * a snapshot leaves them out, as its type would not be served when it loads). */
static int snapshot_objects(struct ksim *ks, FILE *f, bool crds, size_t *records)
{
    for (struct ks_type *t = ks->types; t; t = t->next) {
        if (!t->served || is_crd_type(t) != crds || !json_object_size(t->objs))
            continue;
        _cleanup_free_ char *tid = type_id(t);
        const char *k;
        json_t *o;
        json_object_foreach (t->objs, k, o) {
            if (write_record(f, tid, o) < 0)
                return -EIO;
            (*records)++;
        }
    }
    return 0;
}

/* The store as a snapshot: written to a temp file, then renamed over the last one. */
static int snapshot_write(struct ksim *ks, struct ks_journal *j, struct err *e)
{
    _cleanup_free_ char *tmp = xasprintf("%s.tmp", j->snapshot_path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return err_set(e, -errno, "create \"%s\": %s", tmp, strerror(errno));
    FILE *f = fdopen(fd, "w");
    if (!f) {
        close(fd);
        return err_set(e, -ENOMEM, "fdopen \"%s\"", tmp);
    }
    size_t records = 0;
    int r =
        fprintf(f,
                "{\"kubesim\":\"snapshot\",\"version\":1,\"rv\":%" PRIu64 ",\"u\":%" PRIu64 "}\n",
                ks->rv, ks->uid_counter) < 0
            ? -EIO
            : 0;
    if (r == 0)
        r = snapshot_objects(ks, f, true, &records);
    if (r == 0)
        r = snapshot_objects(ks, f, false, &records);
    const char *tok;
    json_t *rec;
    json_object_foreach (ks->sa_tokens, tok, rec) {
        if (r < 0)
            break;
        _cleanup_json_ json_t *l = json_pack("{s:s,s:O}", "tok", tok, "rec", rec);
        if (json_dumpf(l, f, JSON_COMPACT) < 0 || fputc('\n', f) == EOF)
            r = -EIO;
        records++;
    }
    if (r == 0 && fprintf(f, "{\"end\":%zu}\n", records) < 0)
        r = -EIO;
    long size = r == 0 ? ftell(f) : 0;
    if (fclose(f) != 0 && r == 0)
        r = -EIO;
    if (r == 0 && rename(tmp, j->snapshot_path) < 0)
        r = -errno;
    if (r < 0) {
        unlink(tmp);
        return err_set(e, r, "write \"%s\": %s", j->snapshot_path, strerror(-r));
    }
    j->snapshot_bytes = size > 0 ? (uint64_t)size : 0;
    return 0;
}

static int journal_truncate(struct ks_journal *j, struct err *e)
{
    if (j->fd < 0) {
        j->fd = open(j->journal_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        if (j->fd < 0)
            return err_set(e, -errno, "open \"%s\": %s", j->journal_path, strerror(errno));
    }
    if (ftruncate(j->fd, 0) < 0)
        return err_set(e, -errno, "truncate \"%s\": %s", j->journal_path, strerror(errno));
    j->bytes = 0;
    return 0;
}

void ks_journal_maybe_compact(struct ksim *ks)
{
    struct ks_journal *j = ks->journal;
    size_t limit =
        ks->opts.journal_compact_bytes ? ks->opts.journal_compact_bytes : JOURNAL_COMPACT_BYTES;
    if (!j || j->failed || j->bytes < limit || j->bytes < 2 * j->snapshot_bytes)
        return;
    struct err e = {0};
    if (snapshot_write(ks, j, &e) < 0 || journal_truncate(j, &e) < 0) {
        /* the journal stays complete: it only grows */
        log_warn(KS_JOURNAL_COMPONENT, "journal compaction failed", "error=\"%s\"", e.msg);
        return;
    }
    log_info(KS_JOURNAL_COMPONENT, "journal compacted",
             "snapshot=\"%s\" bytes=%" PRIu64 " rv=%" PRIu64, j->snapshot_path, j->snapshot_bytes,
             ks->rv);
}

void ks_journal_free(struct ks_journal *j)
{
    if (!j)
        return;
    if (j->fd >= 0)
        close(j->fd);
    if (j->lock_fd >= 0)
        close(j->lock_fd);
    free(j->dir);
    free(j->snapshot_path);
    free(j->journal_path);
    free(j);
}

static bool file_nonempty(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && st.st_size > 0;
}

/* After a load: the simulated kubelet's timers for pods that were terminating (it removes them
 * as if their grace had passed now), and every controller to look at the loaded objects. */
static void resume_controllers(struct ksim *ks)
{
    struct ks_type *pt = ks_type_find(ks, "", "v1", "pods");
    uint64_t now = ks_now(ks);
    const char *k;
    json_t *p;
    json_object_foreach (pt->objs, k, p) {
        const char *uid = kobj_uid(p);
        if (uid && ks_is_deleting(p) && kobj_path_str(p, "spec.nodeName"))
            json_object_set_new(ks->pod_dying, uid,
                                json_integer((json_int_t)(now + ks->opts.pod_ready_delay_ms)));
    }
    ks->next_due = now;
    ks->dirty = true;
    ks->gc_full = true;
    /* the store was replaced: the controllers that follow the event log look at everything */
    ks->taints_cursor = ks->kubelet_cursor = ks->orphans_cursor = ks->adopt_cursor = 0;
    json_decref(ks->ds_index);
    ks->ds_index = NULL;
    json_object_clear(ks->kubelet_waiting);
}

int ksim_persist_open(struct ksim *ks, const char *dir, struct ksim_persist_info *ret,
                      struct err *e)
{
    struct ksim_persist_info info = {0};
    if (mkdir_p(dir, 0700) < 0)
        return err_set(e, -errno, "--data-dir \"%s\": %s", dir, strerror(errno));
    _cleanup_(ks_journal_freep) struct ks_journal *j = xcalloc(1, sizeof(*j));
    j->fd = -1;
    j->dir = xstrdup(dir);
    j->snapshot_path = xasprintf("%s/%s", dir, SNAPSHOT_NAME);
    j->journal_path = xasprintf("%s/%s", dir, JOURNAL_NAME);
    _cleanup_free_ char *lock_path = xasprintf("%s/lock", dir);
    j->lock_fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (j->lock_fd < 0)
        return err_set(e, -errno, "--data-dir: open \"%s\": %s", lock_path, strerror(errno));
    if (flock(j->lock_fd, LOCK_EX | LOCK_NB) < 0)
        return err_set(e, -EBUSY, "--data-dir \"%s\": in use by another kubesim (\"%s\" locked)",
                       dir, lock_path);
    pthread_mutex_lock(&ks->lock);
    int r = 0;
    if (file_nonempty(j->snapshot_path) || file_nonempty(j->journal_path)) {
        /* the stored state replaces what ksim_new made */
        for (struct ks_type *t = ks->types; t; t = t->next)
            json_object_clear(t->objs);
        json_object_clear(ks->uids);
        ks_store_free(ks);
        uint64_t snap_rv = 0;
        size_t snap_records = 0;
        r = replay_file(ks, j->snapshot_path, true, &snap_rv, &snap_records, e);
        if (r == 0)
            r = replay_file(ks, j->journal_path, false, &snap_rv, &info.journal_records, e);
        if (r == 0) {
            info.loaded = true;
            info.objects = json_object_size(ks->uids);
            ks->compacted_rv = ks->rv;
            resume_controllers(ks);
        }
    }
    info.rv = ks->rv;
    /* nothing is written before the whole state read back */
    if (r == 0)
        r = snapshot_write(ks, j, e);
    if (r == 0)
        r = journal_truncate(j, e);
    if (r == 0)
        ks->journal = steal_ptr(&j);
    pthread_mutex_unlock(&ks->lock);
    if (r < 0)
        return r;
    if (ret)
        *ret = info;
    return 0;
}
