/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The simulator's mutable state, shared between processes through a directory:
 *
 *   <dir>/state.json   MIG mode and instances, lost GPUs, ECC counters, the event counter;
 *                      replaced atomically (temp file + rename) under an exclusive flock on
 *   <dir>/lock         and re-read by the others when its inode, size or mtime changed;
 *   <dir>/events.log   one line per event, "seq gpu type data gi ci unix_ms", appended in the
 *                      same critical section as the state update that made the event.
 *
 * A state file written for another fleet (its hash differs) is replaced by a fresh state.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>

#include "nvml-abi.h"
#include "simnvml.h"
#include "yamlcfg.h"

#define STATE_MAX_BYTES  (4u << 20)
#define EVENTS_MAX_BYTES (4u << 20)
#define EVENT_CACHE      1024
#define UPDATE_EVENTS    16

struct sim_update {
    size_t n;
    struct sim_event ev[UPDATE_EVENTS];
};

struct sim_store {
    const struct sim_fleet *fleet;
    char *dir, *state_path, *events_path, *lock_path;
    int lock_fd;
    struct sim_state st;
    /* identity of the state file last read */
    bool seen_valid;
    int held_fd; /* the version last read or written, held open so its inode number cannot be
                    reused by a later version: an unchanged inode means an unchanged state */
    dev_t seen_dev;
    ino_t seen_ino;
    off_t seen_size;
    struct timespec seen_mtime;
    /* events read so far */
    off_t ev_offset;
    size_t ev_n, ev_head; /* ring */
    struct sim_event *ev;
};

static void state_init(const struct sim_fleet *f, struct sim_state *st)
{
    for (size_t i = 0; i < f->n_gpus; i++)
        sim_gpu_state_init(&f->gpus[i], &st->gpus[i]);
}

const char *sim_store_dir(const struct sim_store *s)
{
    return s->dir;
}

const char *sim_store_events_path(const struct sim_store *s)
{
    return s->events_path;
}

const struct sim_state *sim_store_state(const struct sim_store *s)
{
    return &s->st;
}

void sim_store_free(struct sim_store *s)
{
    if (!s)
        return;
    if (s->lock_fd >= 0)
        close(s->lock_fd);
    if (s->held_fd >= 0)
        close(s->held_fd);
    free(s->dir);
    free(s->state_path);
    free(s->events_path);
    free(s->lock_path);
    free(s->st.gpus);
    free(s->ev);
    free(s);
}

/* ---- JSON ------------------------------------------------------------------------------- */

/* A load in thousandths, as integers: the state file stays exact. */
static json_t *load_to_json(const struct sim_load *l)
{
    return json_pack("{s:I, s:I, s:I}", "sm_milli", (json_int_t)l->sm, "tensor_milli",
                     (json_int_t)l->tensor, "dram_milli", (json_int_t)l->dram);
}

static json_t *state_to_json(const struct sim_fleet *f, const struct sim_state *st)
{
    json_t *gpus = json_array();
    for (size_t i = 0; i < st->n_gpus; i++) {
        const struct sim_gpu_state *g = &st->gpus[i];
        json_t *gis = json_array();
        for (unsigned k = 0; k < g->n_gi; k++) {
            const struct sim_gi *gi = &g->gi[k];
            json_t *cis = json_array();
            for (unsigned c = 0; c < gi->n_ci; c++)
                json_array_append_new(cis, json_pack("{s:I, s:I, s:I, s:I}", "id",
                                                     (json_int_t)gi->ci[c].id, "profile",
                                                     (json_int_t)gi->ci[c].profile_index, "start",
                                                     (json_int_t)gi->ci[c].start, "size",
                                                     (json_int_t)gi->ci[c].size));
            json_array_append_new(
                gis, json_pack("{s:I, s:I, s:I, s:I, s:o}", "id", (json_int_t)gi->id, "profile_id",
                               (json_int_t)gi->profile_id, "start", (json_int_t)gi->start, "size",
                               (json_int_t)gi->size, "compute", cis));
        }
        json_array_append_new(
            gpus,
            json_pack("{s:s, s:b, s:b, s:{s:I, s:I, s:I, s:I}, s:{s:I, s:I, s:b}, "
                      "s:{s:I, s:I, s:b, s:b}, s:I, s:o}",
                      "uuid", f->gpus[i].uuid, "mig", g->mig_mode, "lost", g->lost, "ecc",
                      "sbe_vol", (json_int_t)g->ecc_sbe_vol, "dbe_vol", (json_int_t)g->ecc_dbe_vol,
                      "sbe_agg", (json_int_t)g->ecc_sbe_agg, "dbe_agg", (json_int_t)g->ecc_dbe_agg,
                      "retired", "sbe", (json_int_t)g->retired_sbe, "dbe",
                      (json_int_t)g->retired_dbe, "pending", g->retired_pending, "remapped", "cor",
                      (json_int_t)g->remapped_cor, "unc", (json_int_t)g->remapped_unc, "pending",
                      g->remap_pending, "failure", g->remap_failure, "last_xid",
                      (json_int_t)g->last_xid, "instances", gis));
        json_t *last = json_array_get(gpus, json_array_size(gpus) - 1);
        if (g->mig_fail_in)
            json_object_set_new(last, "mig_fail_in", json_integer(g->mig_fail_in));
        if (g->mig_change_pending)
            json_object_set_new(last, "mig_change_pending", json_true());
        if (g->mig_reset_required)
            json_object_set_new(last, "mig_reset_required", json_true());
        if (g->has_load)
            json_object_set_new(last, "load", load_to_json(&g->load));
        if (g->nvlink_recovery || g->nvlink_replay)
            json_object_set_new(last, "nvlink",
                                json_pack("{s:I, s:I}", "recovery", (json_int_t)g->nvlink_recovery,
                                          "replay", (json_int_t)g->nvlink_replay));
        if (g->throttle)
            json_object_set_new(last, "throttle", json_integer((json_int_t)g->throttle));
        if (g->timeslice)
            json_object_set_new(last, "timeslice", json_integer(g->timeslice));
    }
    json_t *procs = json_array();
    for (size_t i = 0; i < st->n_procs; i++) {
        const struct sim_proc *p = &st->procs[i];
        json_t *o = json_pack("{s:I, s:I, s:I}", "pid", (json_int_t)p->pid, "gpu",
                              (json_int_t)p->gpu, "used_mib", (json_int_t)p->used_mib);
        if (o && p->gi_id != SIM_NO_ID) {
            json_object_set_new(o, "gi", json_integer(p->gi_id));
            json_object_set_new(o, "ci", json_integer(p->ci_id));
        }
        if (o && p->has_load)
            json_object_set_new(o, "load", load_to_json(&p->load));
        json_array_append_new(procs, o);
    }
    char hash[24];
    snprintf(hash, sizeof(hash), "%016" PRIx64, f->hash);
    json_t *doc = json_pack("{s:i, s:s, s:I, s:I, s:o, s:o}", "version", 1, "fleet", hash,
                            "generation", (json_int_t)st->generation, "next_seq",
                            (json_int_t)st->next_seq, "gpus", gpus, "processes", procs);
    if (doc && st->boots)
        json_object_set_new(doc, "boots", json_integer((json_int_t)st->boots));
    return doc;
}

static int get_u(json_t *o, const char *key, const char *ctx, int64_t max, unsigned *ret,
                 struct err *e)
{
    int64_t v = 0;
    int r = cfg_int64(o, key, ctx, false, 0, max, &v, e);
    if (r > 0)
        *ret = (unsigned)v;
    return r;
}

static int get_u64(json_t *o, const char *key, const char *ctx, uint64_t *ret, struct err *e)
{
    int64_t v = 0;
    int r = cfg_int64(o, key, ctx, false, 0, INT64_MAX, &v, e);
    if (r > 0)
        *ret = (uint64_t)v;
    return r;
}

/* "load": optional; *ret_has set when present. */
static int load_from_json(json_t *o, const char *ctx, bool *ret_has, struct sim_load *ret,
                          struct err *e)
{
    json_t *x = NULL;
    int r = cfg_object(o, "load", ctx, false, &x, e);
    if (r <= 0) {
        *ret_has = false;
        return r;
    }
    char c2[520];
    snprintf(c2, sizeof(c2), "%.500s.load", ctx);
    struct sim_load l = {0};
    if ((r = get_u(x, "sm_milli", c2, SIM_LOAD_MAX, &l.sm, e)) < 0 ||
        (r = get_u(x, "tensor_milli", c2, SIM_LOAD_MAX, &l.tensor, e)) < 0 ||
        (r = get_u(x, "dram_milli", c2, SIM_LOAD_MAX, &l.dram, e)) < 0)
        return r;
    *ret_has = true;
    *ret = l;
    return 0;
}

/* "processes": optional (a state written before processes were simulated has none). */
static int procs_from_json(json_t *doc, const char *ctx, size_t n_gpus, struct sim_state *st,
                           struct err *e)
{
    json_t *procs = NULL;
    int r = cfg_array(doc, "processes", ctx, false, &procs, e);
    if (r < 0)
        return r;
    st->n_procs = 0;
    size_t i;
    json_t *v;
    json_array_foreach (procs, i, v) {
        char c2[512];
        snprintf(c2, sizeof(c2), "%.400s.processes[%zu]", ctx, i);
        if (st->n_procs >= SIM_MAX_PROCS)
            return err_set(e, -EINVAL, "%s: more than %d processes", c2, SIM_MAX_PROCS);
        struct sim_proc p = {.gi_id = SIM_NO_ID, .ci_id = SIM_NO_ID};
        unsigned pid = 0;
        if ((r = get_u(v, "pid", c2, INT32_MAX, &pid, e)) < 0 ||
            (r = get_u(v, "gpu", c2, (int64_t)n_gpus - 1, &p.gpu, e)) < 0 ||
            (r = get_u64(v, "used_mib", c2, &p.used_mib, e)) < 0)
            return r;
        int has_gi = get_u(v, "gi", c2, SIM_GI_IDS - 1, &p.gi_id, e);
        if (has_gi < 0)
            return has_gi;
        int has_ci = get_u(v, "ci", c2, SIM_CI_IDS - 1, &p.ci_id, e);
        if (has_ci < 0)
            return has_ci;
        if ((has_gi > 0) != (has_ci > 0))
            return err_set(e, -EINVAL, "%s: \"gi\" and \"ci\" go together", c2);
        if ((r = load_from_json(v, c2, &p.has_load, &p.load, e)) < 0)
            return r;
        p.pid = pid;
        st->procs[st->n_procs++] = p;
    }
    return 0;
}

static int gpu_from_json(json_t *o, const char *ctx, struct sim_gpu_state *g, struct err *e)
{
    char c2[512];
    int r;
    json_t *x = NULL;
    memset(g, 0, sizeof(*g));
    if ((r = cfg_bool(o, "mig", ctx, false, &g->mig_mode, e)) < 0 ||
        (r = cfg_bool(o, "lost", ctx, false, &g->lost, e)) < 0 ||
        (r = get_u(o, "last_xid", ctx, UINT32_MAX, &g->last_xid, e)) < 0 ||
        (r = get_u(o, "mig_fail_in", ctx, UINT32_MAX, &g->mig_fail_in, e)) < 0 ||
        (r = get_u(o, "timeslice", ctx, 3, &g->timeslice, e)) < 0 ||
        (r = cfg_bool(o, "mig_change_pending", ctx, false, &g->mig_change_pending, e)) < 0 ||
        (r = cfg_bool(o, "mig_reset_required", ctx, false, &g->mig_reset_required, e)) < 0 ||
        (r = load_from_json(o, ctx, &g->has_load, &g->load, e)) < 0)
        return r;
    int64_t throttle = 0;
    if ((r = cfg_int64(o, "throttle", ctx, false, 0, INT64_MAX, &throttle, e)) < 0)
        return r;
    g->throttle = (uint64_t)throttle;
    if ((r = cfg_object(o, "nvlink", ctx, false, &x, e)) < 0)
        return r;
    if (x) {
        snprintf(c2, sizeof(c2), "%.400s.nvlink", ctx);
        if ((r = get_u(x, "recovery", c2, UINT32_MAX, &g->nvlink_recovery, e)) < 0 ||
            (r = get_u(x, "replay", c2, UINT32_MAX, &g->nvlink_replay, e)) < 0)
            return r;
    }
    x = NULL;
    if ((r = cfg_object(o, "ecc", ctx, false, &x, e)) < 0)
        return r;
    if (x) {
        snprintf(c2, sizeof(c2), "%.400s.ecc", ctx);
        if ((r = get_u64(x, "sbe_vol", c2, &g->ecc_sbe_vol, e)) < 0 ||
            (r = get_u64(x, "dbe_vol", c2, &g->ecc_dbe_vol, e)) < 0 ||
            (r = get_u64(x, "sbe_agg", c2, &g->ecc_sbe_agg, e)) < 0 ||
            (r = get_u64(x, "dbe_agg", c2, &g->ecc_dbe_agg, e)) < 0)
            return r;
    }
    x = NULL;
    if ((r = cfg_object(o, "retired", ctx, false, &x, e)) < 0)
        return r;
    if (x) {
        snprintf(c2, sizeof(c2), "%.400s.retired", ctx);
        if ((r = get_u(x, "sbe", c2, UINT32_MAX, &g->retired_sbe, e)) < 0 ||
            (r = get_u(x, "dbe", c2, UINT32_MAX, &g->retired_dbe, e)) < 0 ||
            (r = cfg_bool(x, "pending", c2, false, &g->retired_pending, e)) < 0)
            return r;
    }
    x = NULL;
    if ((r = cfg_object(o, "remapped", ctx, false, &x, e)) < 0)
        return r;
    if (x) {
        snprintf(c2, sizeof(c2), "%.400s.remapped", ctx);
        if ((r = get_u(x, "cor", c2, UINT32_MAX, &g->remapped_cor, e)) < 0 ||
            (r = get_u(x, "unc", c2, UINT32_MAX, &g->remapped_unc, e)) < 0 ||
            (r = cfg_bool(x, "pending", c2, false, &g->remap_pending, e)) < 0 ||
            (r = cfg_bool(x, "failure", c2, false, &g->remap_failure, e)) < 0)
            return r;
    }
    json_t *gis = NULL;
    if ((r = cfg_array(o, "instances", ctx, false, &gis, e)) < 0)
        return r;
    size_t i;
    json_t *v;
    json_array_foreach (gis, i, v) {
        snprintf(c2, sizeof(c2), "%.400s.instances[%zu]", ctx, i);
        if (g->n_gi >= SIM_GI_IDS)
            return err_set(e, -EINVAL, "%s: more than %d GPU instances", c2, SIM_GI_IDS);
        struct sim_gi *gi = &g->gi[g->n_gi++];
        if ((r = get_u(v, "id", c2, SIM_GI_IDS - 1, &gi->id, e)) < 0 ||
            (r = get_u(v, "profile_id", c2, 1000, &gi->profile_id, e)) < 0 ||
            (r = get_u(v, "start", c2, SIM_MEM_SLICES - 1, &gi->start, e)) < 0 ||
            (r = get_u(v, "size", c2, SIM_MEM_SLICES, &gi->size, e)) < 0)
            return r;
        json_t *cis = NULL;
        if ((r = cfg_array(v, "compute", c2, false, &cis, e)) < 0)
            return r;
        size_t k;
        json_t *cv;
        json_array_foreach (cis, k, cv) {
            char c3[600];
            snprintf(c3, sizeof(c3), "%.500s.compute[%zu]", c2, k);
            if (gi->n_ci >= SIM_CI_IDS)
                return err_set(e, -EINVAL, "%s: more than %d compute instances", c3, SIM_CI_IDS);
            struct sim_ci *ci = &gi->ci[gi->n_ci++];
            if ((r = get_u(cv, "id", c3, SIM_CI_IDS - 1, &ci->id, e)) < 0 ||
                (r = get_u(cv, "profile", c3, 8, &ci->profile_index, e)) < 0 ||
                (r = get_u(cv, "start", c3, SIM_COMPUTE_SLICES, &ci->start, e)) < 0 ||
                (r = get_u(cv, "size", c3, SIM_COMPUTE_SLICES, &ci->size, e)) < 0)
                return r;
        }
    }
    return 0;
}

/* 1: parsed; 0: absent or written for another fleet; <0: unreadable. */
static int state_read(struct sim_store *s, struct sim_state *st, struct err *e)
{
    struct stat sb;
    _cleanup_close_ int fd = open(s->state_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            return 0;
        return err_errno(e, -errno, "open \"%s\"", s->state_path);
    }
    if (fstat(fd, &sb) < 0)
        return err_errno(e, -errno, "stat \"%s\"", s->state_path);
    if (sb.st_size > (off_t)STATE_MAX_BYTES)
        return err_set(e, -EFBIG, "%s: larger than %u bytes", s->state_path, STATE_MAX_BYTES);
    size_t len = (size_t)sb.st_size;
    char *buf _cleanup_free_ = xmalloc(len + 1);
    size_t have = 0;
    while (have < len) {
        ssize_t n = pread(fd, buf + have, len - have, (off_t)have);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return err_errno(e, -errno, "read \"%s\"", s->state_path);
        if (n == 0)
            break;
        have += (size_t)n;
    }
    len = have;
    buf[len] = '\0';
    int r;
    json_error_t jerr;
    json_t *doc _cleanup_json_ = json_loadb(buf, len, 0, &jerr);
    if (!doc)
        return err_set(e, -EINVAL, "%s:%d: %s (run `gpuop-sim reset`)", s->state_path, jerr.line,
                       jerr.text);
    char ctx[400];
    snprintf(ctx, sizeof(ctx), "%.300s: state", s->state_path);
    const char *hash = NULL;
    if ((r = cfg_string(doc, "fleet", ctx, true, &hash, e)) < 0)
        return r;
    char want[24];
    snprintf(want, sizeof(want), "%016" PRIx64, s->fleet->hash);
    json_t *gpus = NULL;
    if ((r = cfg_array(doc, "gpus", ctx, true, &gpus, e)) < 0)
        return r;
    if (strcmp(hash, want) != 0 || json_array_size(gpus) != s->fleet->n_gpus)
        return 0;
    if ((r = get_u64(doc, "boots", ctx, &st->boots, e)) < 0 ||
        (r = get_u64(doc, "generation", ctx, &st->generation, e)) < 0 ||
        (r = get_u64(doc, "next_seq", ctx, &st->next_seq, e)) < 0 ||
        (r = procs_from_json(doc, ctx, s->fleet->n_gpus, st, e)) < 0)
        return r;
    size_t i;
    json_t *v;
    json_array_foreach (gpus, i, v) {
        char c2[400];
        snprintf(c2, sizeof(c2), "%.300s: gpus[%zu]", s->state_path, i);
        if ((r = gpu_from_json(v, c2, &st->gpus[i], e)) < 0)
            return r;
    }
    s->seen_valid = true;
    s->seen_dev = sb.st_dev;
    s->seen_ino = sb.st_ino;
    s->seen_size = sb.st_size;
    s->seen_mtime = sb.st_mtim;
    if (s->held_fd >= 0)
        close(s->held_fd);
    s->held_fd = steal_fd(&fd);
    return 1;
}

/* Temp file + rename, without fsync: readers must never see a torn file, but the simulated
 * state need not survive a power cut, and an fsync per MIG call is slow on a busy disk. The
 * caller holds the store lock, so the temp name cannot collide. */
static int write_replace(const char *path, const char *data, size_t len, struct err *e)
{
    _cleanup_free_ char *tmp = xasprintf("%s.tmp", path);
    _cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return err_errno(e, -errno, "create \"%s\"", tmp);
    while (len) {
        ssize_t n = write(fd, data, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int r = err_errno(e, -errno, "write \"%s\"", tmp);
            unlink(tmp);
            return r;
        }
        data += n;
        len -= (size_t)n;
    }
    if (rename(tmp, path) < 0) {
        int r = err_errno(e, -errno, "rename \"%s\" to \"%s\"", tmp, path);
        unlink(tmp);
        return r;
    }
    return 0;
}

static int state_write(struct sim_store *s, const struct sim_state *st, struct err *e)
{
    json_t *doc _cleanup_json_ = state_to_json(s->fleet, st);
    if (!doc)
        return err_set(e, -ENOMEM, "%s: cannot encode the state", s->state_path);
    char *data _cleanup_free_ = json_dumps(doc, JSON_INDENT(1));
    if (!data)
        return err_set(e, -ENOMEM, "%s: cannot encode the state", s->state_path);
    int r = write_replace(s->state_path, data, strlen(data), e);
    if (r < 0)
        return r;
    struct stat sb;
    int fd = open(s->state_path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0 && fstat(fd, &sb) == 0) {
        if (s->held_fd >= 0)
            close(s->held_fd);
        s->held_fd = steal_fd(&fd);
        s->seen_valid = true;
        s->seen_dev = sb.st_dev;
        s->seen_ino = sb.st_ino;
        s->seen_size = sb.st_size;
        s->seen_mtime = sb.st_mtim;
    }
    if (fd >= 0)
        close(fd);
    return 0;
}

/* The lock file is opened for each critical section, so a process that forked after opening
 * the store does not share its lock (flock locks belong to the open file description). */
static int lock_fd(struct sim_store *s, int op, struct err *e)
{
    s->lock_fd = open(s->lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (s->lock_fd < 0)
        return err_errno(e, -errno, "open \"%s\"", s->lock_path);
    while (flock(s->lock_fd, op) < 0) {
        if (errno != EINTR) {
            int r = err_errno(e, -errno, "lock \"%s\"", s->lock_path);
            close(s->lock_fd);
            s->lock_fd = -1;
            return r;
        }
    }
    return 0;
}

static void unlock_fd(struct sim_store *s)
{
    if (s->lock_fd >= 0)
        close(s->lock_fd); /* releases the lock */
    s->lock_fd = -1;
}

static void state_alloc(struct sim_state *st, size_t n)
{
    st->n_gpus = n;
    st->gpus = xcalloc(n ? n : 1, sizeof(*st->gpus));
}

static void state_copy(struct sim_state *dst, const struct sim_state *src)
{
    dst->generation = src->generation;
    dst->boots = src->boots;
    dst->next_seq = src->next_seq;
    memcpy(dst->gpus, src->gpus, src->n_gpus * sizeof(*src->gpus));
    dst->n_procs = src->n_procs;
    memcpy(dst->procs, src->procs, src->n_procs * sizeof(src->procs[0]));
}

int sim_store_open(const struct sim_fleet *fleet, const char *dir, unsigned flags,
                   struct sim_store **ret, struct err *e)
{
    struct sim_store *s _cleanup_(sim_store_freep) = xcalloc(1, sizeof(*s));
    s->fleet = fleet;
    s->lock_fd = -1;
    s->held_fd = -1;
    state_alloc(&s->st, fleet->n_gpus);
    s->st.next_seq = 1;
    state_init(fleet, &s->st);
    s->ev = xcalloc(EVENT_CACHE, sizeof(*s->ev));
    if (!dir) {
        *ret = steal_ptr(&s);
        return 0;
    }
    s->dir = xstrdup(dir);
    s->state_path = xasprintf("%s/state.json", dir);
    s->events_path = xasprintf("%s/events.log", dir);
    s->lock_path = xasprintf("%s/lock", dir);
    int r = mkdir_p(dir, 0755);
    if (r < 0)
        return err_errno(e, r, "create state directory \"%s\"", dir);
    if ((r = lock_fd(s, LOCK_EX, e)) < 0)
        return r;
    struct sim_state tmp = {0};
    state_alloc(&tmp, fleet->n_gpus);
    r = (flags & SIM_STORE_RESET) ? 0 : state_read(s, &tmp, e);
    if (r > 0)
        state_copy(&s->st, &tmp);
    else if (r == 0) {
        /* fresh (or reset, or another fleet's): the fleet's initial layout; keep the event
         * numbering going past what the events log already holds */
        uint64_t last = sim_store_last_seq(s);
        s->st.next_seq = last + 1;
        r = state_write(s, &s->st, e);
    }
    free(tmp.gpus);
    unlock_fd(s);
    if (r < 0)
        return r;
    *ret = steal_ptr(&s);
    return 0;
}

int sim_store_refresh(struct sim_store *s, struct err *e)
{
    if (!s->dir)
        return 0;
    struct stat sb;
    if (stat(s->state_path, &sb) == 0 && s->seen_valid && sb.st_dev == s->seen_dev &&
        sb.st_ino == s->seen_ino && sb.st_size == s->seen_size &&
        sb.st_mtim.tv_sec == s->seen_mtime.tv_sec && sb.st_mtim.tv_nsec == s->seen_mtime.tv_nsec)
        return 0;
    int r = lock_fd(s, LOCK_SH, e);
    if (r < 0)
        return r;
    struct sim_state tmp = {0};
    state_alloc(&tmp, s->fleet->n_gpus);
    r = state_read(s, &tmp, e);
    unlock_fd(s);
    if (r > 0)
        state_copy(&s->st, &tmp);
    else if (r == 0)
        r = err_set(e, -ENOENT, "%s: missing, or written for another fleet", s->state_path);
    free(tmp.gpus);
    return r < 0 ? r : 0;
}

void sim_update_event(struct sim_update *u, unsigned gpu, uint64_t type, uint64_t data,
                      unsigned gi_id, unsigned ci_id)
{
    if (u->n >= UPDATE_EVENTS)
        return;
    u->ev[u->n++] = (struct sim_event){.gpu = gpu,
                                       .type = type,
                                       .data = data,
                                       .gi_id = gi_id,
                                       .ci_id = ci_id,
                                       .unix_ms = sim_now_ms()};
}

/* Appends the update's events, numbered from first (reserved in the state by the caller). */
static int events_append(struct sim_store *s, struct sim_update *u, uint64_t first, struct err *e)
{
    if (u->n == 0)
        return 0;
    struct stat sb;
    bool truncate = stat(s->events_path, &sb) == 0 && sb.st_size > (off_t)EVENTS_MAX_BYTES;
    _cleanup_close_ int fd = open(
        s->events_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | (truncate ? O_TRUNC : 0), 0644);
    if (fd < 0)
        return err_errno(e, -errno, "open \"%s\"", s->events_path);
    struct sbuf b _cleanup_sbuf_;
    sbuf_init(&b, 64 * 1024);
    for (size_t i = 0; i < u->n; i++) {
        u->ev[i].seq = first + i;
        sbuf_addf(&b, "%" PRIu64 " %u 0x%" PRIx64 " %" PRIu64 " %u %u %" PRIu64 "\n", u->ev[i].seq,
                  u->ev[i].gpu, u->ev[i].type, u->ev[i].data, u->ev[i].gi_id, u->ev[i].ci_id,
                  u->ev[i].unix_ms);
    }
    int r = sbuf_check_err(&b, e, "events for \"%s\"", s->events_path);
    if (r < 0)
        return r;
    const char *p = b.data;
    size_t left = b.len;
    while (left) {
        ssize_t n = write(fd, p, left);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return err_errno(e, -errno, "write \"%s\"", s->events_path);
        }
        p += n;
        left -= (size_t)n;
    }
    return 0;
}

int sim_store_update(struct sim_store *s, sim_update_fn fn, void *arg, struct err *e)
{
    struct sim_state tmp = {0};
    state_alloc(&tmp, s->fleet->n_gpus);
    struct sim_update u = {0};
    int r;
    if (!s->dir) {
        state_copy(&tmp, &s->st);
        r = fn(&u, &tmp, arg, e);
        if (r == 0) {
            tmp.generation++;
            tmp.next_seq += u.n; /* process-local: no events log */
            state_copy(&s->st, &tmp);
        }
        free(tmp.gpus);
        return r;
    }
    if ((r = lock_fd(s, LOCK_EX, e)) < 0) {
        free(tmp.gpus);
        return r;
    }
    r = state_read(s, &tmp, e);
    if (r == 0)
        r = err_set(e, -ENOENT, "%s: missing, or written for another fleet", s->state_path);
    if (r > 0) {
        state_copy(&s->st, &tmp);
        r = fn(&u, &tmp, arg, e);
    }
    if (r == 0) {
        tmp.generation++;
        /* the state first, then its events, as NVML shows a count before the event that
         * announces it: a reader woken by an event finds the state it announces (readers check
         * the state file without the lock) */
        uint64_t first = tmp.next_seq;
        tmp.next_seq += u.n;
        r = state_write(s, &tmp, e);
        if (r == 0)
            r = events_append(s, &u, first, e);
        if (r == 0)
            state_copy(&s->st, &tmp);
    }
    unlock_fd(s);
    free(tmp.gpus);
    return r;
}

static int reset_fn(struct sim_update *u, struct sim_state *st, void *arg, struct err *e)
{
    (void)u;
    (void)e;
    const struct sim_fleet *f = arg;
    state_init(f, st);
    return 0;
}

int sim_store_reset(struct sim_store *s, struct err *e)
{
    return sim_store_update(s, reset_fn, (void *)s->fleet, e);
}

/* ---- events ----------------------------------------------------------------------------- */

static void cache_push(struct sim_store *s, const struct sim_event *ev)
{
    size_t pos = (s->ev_head + s->ev_n) % EVENT_CACHE;
    s->ev[pos] = *ev;
    if (s->ev_n < EVENT_CACHE)
        s->ev_n++;
    else
        s->ev_head = (s->ev_head + 1) % EVENT_CACHE;
}

static int events_sync(struct sim_store *s, struct err *e)
{
    if (!s->dir)
        return 0;
    _cleanup_close_ int fd = open(s->events_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : err_errno(e, -errno, "open \"%s\"", s->events_path);
    struct stat sb;
    if (fstat(fd, &sb) < 0)
        return err_errno(e, -errno, "stat \"%s\"", s->events_path);
    if (sb.st_size < s->ev_offset)
        s->ev_offset = 0; /* truncated: sequence numbers keep us from repeating events */
    if (sb.st_size == s->ev_offset)
        return 0;
    uint64_t newest = s->ev_n ? s->ev[(s->ev_head + s->ev_n - 1) % EVENT_CACHE].seq : 0;
    char buf[16384];
    size_t have = 0;
    off_t pos = s->ev_offset;
    for (;;) {
        ssize_t n = pread(fd, buf + have, sizeof(buf) - have - 1, pos + (off_t)have);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return err_errno(e, -errno, "read \"%s\"", s->events_path);
        }
        if (n == 0)
            break;
        have += (size_t)n;
        buf[have] = '\0';
        char *line = buf;
        char *nl;
        while ((nl = memchr(line, '\n', have - (size_t)(line - buf)))) {
            *nl = '\0';
            struct sim_event ev = {0};
            unsigned long long seq, type, data, ms;
            if (sscanf(line, "%llu %u %llx %llu %u %u %llu", &seq, &ev.gpu, &type, &data, &ev.gi_id,
                       &ev.ci_id, &ms) == 7 &&
                seq > newest) {
                ev.seq = seq;
                ev.type = type;
                ev.data = data;
                ev.unix_ms = ms;
                cache_push(s, &ev);
                newest = seq;
            }
            line = nl + 1;
        }
        size_t consumed = (size_t)(line - buf);
        if (consumed == 0 && have == sizeof(buf) - 1) {
            consumed = have; /* an absurdly long line: skip it */
        }
        pos += (off_t)consumed;
        memmove(buf, buf + consumed, have - consumed);
        have -= consumed;
    }
    s->ev_offset = pos; /* a partial last line is read again next time */
    return 0;
}

int sim_store_events(struct sim_store *s, uint64_t after, struct sim_event *ret, size_t max,
                     size_t *ret_n, struct err *e)
{
    int r = events_sync(s, e);
    if (r < 0)
        return r;
    size_t n = 0;
    for (size_t i = 0; i < s->ev_n && n < max; i++) {
        const struct sim_event *ev = &s->ev[(s->ev_head + i) % EVENT_CACHE];
        if (ev->seq > after)
            ret[n++] = *ev;
    }
    *ret_n = n;
    return 0;
}

uint64_t sim_store_last_seq(struct sim_store *s)
{
    struct err e = {0};
    events_sync(s, &e);
    uint64_t last = s->ev_n ? s->ev[(s->ev_head + s->ev_n - 1) % EVENT_CACHE].seq : 0;
    return s->st.next_seq > last + 1 ? s->st.next_seq - 1 : last;
}
