/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The tracker (gpuhealth.h, gh_observe): events become latched faults, the GPUs' state live
 * ones, the remediation's acknowledgement clears latched ones. The node's health is the list of
 * active faults, the worst first.
 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "gpuhealth.h"

void gh_report_clear(struct gh_report *r)
{
    if (!r)
        return;
    free(r->annotation);
    memset(r, 0, sizeof(*r));
}

/* The worse of two faults comes first: the more disruptive action, then the older. */
static int fault_cmp(const void *a, const void *b)
{
    const struct gh_fault *x = a, *y = b;
    if (x->action != y->action)
        return x->action > y->action ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static bool same_fault(const struct gh_fault *f, enum gh_class cls, unsigned code, int gpu,
                       bool live)
{
    return f->cls == cls && f->code == code && f->gpu == gpu && f->live == live;
}

static struct gh_fault *find(struct gh_health *h, enum gh_class cls, unsigned code, int gpu,
                             bool live)
{
    for (size_t i = 0; i < h->n_faults; i++)
        if (same_fault(&h->faults[i], cls, code, gpu, live))
            return &h->faults[i];
    return NULL;
}

static void remove_at(struct gh_health *h, size_t i)
{
    assert(i < h->n_faults);
    memmove(&h->faults[i], &h->faults[i + 1], (h->n_faults - i - 1) * sizeof(h->faults[0]));
    h->n_faults--;
}

/* Adds f to the active faults; when they are full it takes the place of the least severe, if
 * it is worse. */
static void add_active(struct gh_health *h, const struct gh_fault *f)
{
    if (h->n_faults < GH_FAULTS_MAX) {
        h->faults[h->n_faults++] = *f;
    } else {
        qsort(h->faults, h->n_faults, sizeof(h->faults[0]), fault_cmp);
        if (fault_cmp(f, &h->faults[h->n_faults - 1]) < 0)
            h->faults[h->n_faults - 1] = *f;
    }
    qsort(h->faults, h->n_faults, sizeof(h->faults[0]), fault_cmp);
}

static void note_new(struct gh_state *st, struct gh_report *r, const struct gh_fault *f)
{
    st->events_total[f->cls]++;
    if (r->n_new < GH_FAULTS_MAX)
        r->new_faults[r->n_new++] = *f;
    st->h.last = *f;
    st->h.has_last = true;
}

static void fault_message(struct gh_fault *f, const char *detail)
{
    char who[GH_UUID_MAX + 32];
    if (f->gpu < 0)
        snprintf(who, sizeof(who), "node");
    else if (f->uuid[0])
        snprintf(who, sizeof(who), "GPU %d (%s)", f->gpu, f->uuid);
    else
        snprintf(who, sizeof(who), "GPU %d", f->gpu);
    if (f->cls == GH_CLS_XID) {
        const struct gh_xid_entry *x = gh_xid_lookup(f->code);
        snprintf(f->message, sizeof(f->message), "%s: XID %u %s: %s", who, f->code,
                 x ? x->mnemonic : "(not in the catalog)", gh_action_name(f->action));
    } else {
        snprintf(f->message, sizeof(f->message), "%s: %s%s%s: %s", who,
                 gh_class_info(f->cls)->summary, detail ? ", " : "", detail ? detail : "",
                 gh_action_name(f->action));
    }
}

static struct gh_fault mk_fault(struct gh_state *st, enum gh_class cls, unsigned code, int gpu,
                                const char *uuid, enum gh_action action, bool live, int64_t at,
                                const char *detail)
{
    struct gh_fault f = {.seq = ++st->h.seq,
                         .cls = cls,
                         .code = code,
                         .gpu = gpu,
                         .action = action,
                         .live = live,
                         .since_ms = at};
    snprintf(f.uuid, sizeof(f.uuid), "%s", uuid ? uuid : "");
    fault_message(&f, detail);
    return f;
}

/* ---- the acknowledgement and the node's annotation -------------------------------------- */

static void restore(struct gh_state *st, const struct gh_observation *o, struct gh_report *r,
                    struct gh_health *prev)
{
    if (!o->annotation)
        return;
    struct err e = {0};
    if (gh_health_parse(o->annotation, strlen(o->annotation), prev, &e) < 0) {
        snprintf(r->input_error, sizeof(r->input_error), "%s", err_msg(&e));
        memset(prev, 0, sizeof(*prev));
        return;
    }
    /* latched faults carry on; live ones are seen again (keeping their number, below) */
    st->h.seq = prev->seq;
    st->h.acked = prev->acked;
    st->h.last = prev->last;
    st->h.has_last = prev->has_last;
    for (size_t i = 0; i < prev->n_faults; i++)
        if (!prev->faults[i].live)
            add_active(&st->h, &prev->faults[i]);
}

static void apply_ack(struct gh_state *st, const struct gh_observation *o, struct gh_report *r)
{
    if (!o->ack)
        return;
    uint64_t ack;
    if (parse_u64(o->ack, &ack) < 0) {
        snprintf(r->input_error, sizeof(r->input_error), "%s: \"%.64s\" is not a sequence number",
                 GH_ANN_ACK, o->ack);
        return;
    }
    if (ack <= st->h.acked)
        return;
    st->h.acked = ack;
    for (size_t i = st->h.n_faults; i > 0; i--) {
        if (!st->h.faults[i - 1].live && st->h.faults[i - 1].seq <= ack) {
            remove_at(&st->h, i - 1);
            r->n_cleared++;
        }
    }
}

/* ---- live faults ---------------------------------------------------------------------------- */

struct want {
    enum gh_class cls;
    int gpu;
    const char *uuid;
    char detail[64];
};

static void want_add(struct want *w, size_t *n, enum gh_class cls, int gpu, const char *uuid,
                     const char *detail)
{
    if (*n >= GH_FAULTS_MAX)
        return;
    w[*n] = (struct want){.cls = cls, .gpu = gpu, .uuid = uuid};
    snprintf(w[*n].detail, sizeof(w[*n].detail), "%s", detail ? detail : "");
    (*n)++;
}

/* A slowdown that holds: since when (0: it does not), and whether the window has passed. */
static bool held(uint64_t *since, bool on, const struct gh_observation *o)
{
    if (!on) {
        *since = 0;
        return false;
    }
    if (!*since || *since > (uint64_t)o->now_ms) /* a clock set back starts it over */
        *since = (uint64_t)o->now_ms;
    return o->slowdown_window_ms > 0 && (uint64_t)o->now_ms - *since >= o->slowdown_window_ms;
}

/* The live faults the GPUs show now, and the NVLink errors counted since the last look. */
static size_t live_wanted(struct gh_state *st, const struct gh_observation *o, struct want *w,
                          struct gh_report *r)
{
    size_t n = 0;
    for (size_t i = 0; i < o->n_gpus; i++) {
        const struct gh_gpu_obs *g = &o->gpus[i];
        if (g->index >= GH_GPUS_MAX)
            continue;
        unsigned k = g->index;
        const char *uuid = g->uuid && g->uuid[0] ? g->uuid : NULL;
        char d[64];
        if (g->lost) {
            want_add(w, &n, GH_CLS_LOST, (int)k, uuid, NULL);
            continue; /* a lost GPU answers nothing else */
        }
        if (g->ecc_ok && g->dbe_volatile > 0) {
            snprintf(d, sizeof(d), "%llu since the last reset",
                     (unsigned long long)g->dbe_volatile);
            want_add(w, &n, GH_CLS_ECC_DBE, (int)k, uuid, d);
        }
        if (g->remap_ok && g->remap_pending)
            want_add(w, &n, GH_CLS_REMAP_PENDING, (int)k, uuid, NULL);
        if (g->remap_ok && g->remap_failure)
            want_add(w, &n, GH_CLS_REMAP_FAILURE, (int)k, uuid, NULL);
        if (g->retired_ok && g->retired_pending)
            want_add(w, &n, GH_CLS_RETIRED_PENDING, (int)k, uuid, NULL);
        uint64_t ce = g->clocks_ok ? g->clock_event_reasons : 0;
        bool thermal = (ce & GH_CLOCKS_HW_THERMAL) ||
                       ((ce & GH_CLOCKS_HW_SLOWDOWN) && !(ce & GH_CLOCKS_HW_POWER_BRAKE));
        if (g->clocks_ok && held(&st->thermal_since[k], thermal, o)) {
            snprintf(d, sizeof(d), "for %llus",
                     (unsigned long long)((uint64_t)o->now_ms - st->thermal_since[k]) / 1000);
            want_add(w, &n, GH_CLS_THERMAL, (int)k, uuid, d);
        }
        if (g->clocks_ok && held(&st->power_since[k], (ce & GH_CLOCKS_HW_POWER_BRAKE) != 0, o)) {
            snprintf(d, sizeof(d), "for %llus",
                     (unsigned long long)((uint64_t)o->now_ms - st->power_since[k]) / 1000);
            want_add(w, &n, GH_CLS_POWER, (int)k, uuid, d);
        }
        if (g->nvlink_ok) {
            /* a counter: growth is an event (latched); a drop is a reset of the counters */
            if (st->nvlink_known[k] && g->nvlink_errors > st->nvlink_seen[k] &&
                !find(&st->h, GH_CLS_NVLINK, 0, (int)k, false)) {
                snprintf(d, sizeof(d), "%llu more",
                         (unsigned long long)(g->nvlink_errors - st->nvlink_seen[k]));
                struct gh_fault f =
                    mk_fault(st, GH_CLS_NVLINK, 0, (int)k, uuid,
                             gh_class_info(GH_CLS_NVLINK)->action, false, o->now_ms, d);
                add_active(&st->h, &f);
                note_new(st, r, &f);
            }
            st->nvlink_seen[k] = g->nvlink_errors;
            st->nvlink_known[k] = true;
        }
    }
    /* the device plugin holding back GPUs is news only while NVML sees no fault: a faulty GPU
     * is held back for its fault */
    bool quiet = n == 0;
    for (size_t i = 0; i < st->h.n_faults; i++)
        quiet &= !gh_action_quarantines(st->h.faults[i].action);
    if (o->plugin_held_back > 0 && quiet) {
        char d[64];
        snprintf(d, sizeof(d), "%d GPU%s", o->plugin_held_back,
                 o->plugin_held_back == 1 ? "" : "s");
        want_add(w, &n, GH_CLS_PLUGIN, -1, NULL, d);
    }
    return n;
}

/* The live faults become what the GPUs show: those gone are removed, new ones added (with the
 * number they had before a restart, when the annotation had them). */
static void live_reconcile(struct gh_state *st, const struct gh_observation *o,
                           const struct want *w, size_t nw, const struct gh_health *prev,
                           struct gh_report *r)
{
    for (size_t i = st->h.n_faults; i > 0; i--) {
        const struct gh_fault *f = &st->h.faults[i - 1];
        if (!f->live)
            continue;
        bool still = false;
        for (size_t j = 0; j < nw && !still; j++)
            still = w[j].cls == f->cls && w[j].gpu == f->gpu;
        if (!still) {
            remove_at(&st->h, i - 1);
            r->n_cleared++;
        }
    }
    for (size_t j = 0; j < nw; j++) {
        struct gh_fault *cur = find(&st->h, w[j].cls, 0, w[j].gpu, true);
        if (cur) {
            fault_message(cur, w[j].detail[0] ? w[j].detail : NULL);
            continue;
        }
        const struct gh_fault *was = NULL;
        for (size_t i = 0; prev && i < prev->n_faults; i++)
            if (same_fault(&prev->faults[i], w[j].cls, 0, w[j].gpu, true))
                was = &prev->faults[i];
        struct gh_fault f;
        struct gh_fault *event =
            w[j].cls == GH_CLS_ECC_DBE ? find(&st->h, GH_CLS_ECC_DBE, 0, w[j].gpu, false) : NULL;
        if (was) {
            f = *was; /* seen before the restart: the same fault */
            fault_message(&f, w[j].detail[0] ? w[j].detail : NULL);
        } else if (event) {
            /* the event came before the count showed: the count is the fault now (it clears
             * with the reset that fixes it), under the event's number */
            f = *event;
            f.live = true;
            fault_message(&f, w[j].detail[0] ? w[j].detail : NULL);
            remove_at(&st->h, (size_t)(event - st->h.faults));
        } else {
            f = mk_fault(st, w[j].cls, 0, w[j].gpu, w[j].uuid, gh_class_info(w[j].cls)->action,
                         true, o->now_ms, w[j].detail[0] ? w[j].detail : NULL);
            note_new(st, r, &f);
        }
        add_active(&st->h, &f);
    }
}

/* ---- events --------------------------------------------------------------------------------- */

static void take_event(struct gh_state *st, const struct gh_observation *o,
                       const struct gh_event_obs *ev, struct gh_report *r)
{
    int gpu = ev->gpu < GH_GPUS_MAX ? (int)ev->gpu : -1;
    int64_t at = ev->at_ms > 0 ? ev->at_ms : o->now_ms;
    if (ev->kind == GH_EV_DBE) {
        /* the volatile count shows it as long as it lasts: the live fault covers the event,
         * which dates it (the count is read after it) */
        struct gh_fault *live = find(&st->h, GH_CLS_ECC_DBE, 0, gpu, true);
        if (live && at < live->since_ms)
            live->since_ms = at;
        if (live || find(&st->h, GH_CLS_ECC_DBE, 0, gpu, false))
            return;
        struct gh_fault f = mk_fault(st, GH_CLS_ECC_DBE, 0, gpu, ev->uuid,
                                     gh_class_info(GH_CLS_ECC_DBE)->action, false, at, "an event");
        add_active(&st->h, &f);
        note_new(st, r, &f);
        return;
    }
    const struct gh_xid_entry *x = gh_xid_lookup(ev->xid);
    enum gh_action a = x ? x->action : GH_ACT_NONE;
    if (gh_action_quarantines(a)) {
        if (find(&st->h, GH_CLS_XID, ev->xid, gpu, false))
            return; /* the same XID again on the same GPU: one fault */
        struct gh_fault f = mk_fault(st, GH_CLS_XID, ev->xid, gpu, ev->uuid, a, false, at, NULL);
        add_active(&st->h, &f);
        note_new(st, r, &f);
        return;
    }
    /* an XID the application handles, or benign: reported (the last event), not kept */
    struct gh_fault f = mk_fault(st, GH_CLS_XID, ev->xid, gpu, ev->uuid, a, false, at, NULL);
    note_new(st, r, &f);
}

/* ---- the result ----------------------------------------------------------------------------- */

static void condition(struct gh_report *r)
{
    const struct gh_health *h = &r->health;
    const struct gh_fault *worst = h->n_faults ? &h->faults[0] : NULL;
    r->condition_status = h->healthy;
    if (h->healthy) {
        snprintf(r->condition_reason, sizeof(r->condition_reason), "GPUsHealthy");
        if (worst)
            snprintf(r->condition_message, sizeof(r->condition_message), "no GPU fault; %s",
                     worst->message);
        else
            snprintf(r->condition_message, sizeof(r->condition_message), "no GPU fault");
        return;
    }
    gh_fault_reason(worst, r->condition_reason, sizeof(r->condition_reason));
    size_t len = 0;
    r->condition_message[0] = '\0';
    for (size_t i = 0; i < h->n_faults && gh_action_quarantines(h->faults[i].action); i++) {
        int w = snprintf(r->condition_message + len, sizeof(r->condition_message) - len, "%s%s",
                         i ? "; " : "", h->faults[i].message);
        if (w < 0 || (size_t)w >= sizeof(r->condition_message) - len) {
            /* bounded: the annotation has them all */
            r->condition_message[sizeof(r->condition_message) - 1] = '\0';
            break;
        }
        len += (size_t)w;
    }
}

int gh_observe(struct gh_state *st, const struct gh_observation *o, struct gh_report *ret,
               struct err *e)
{
    if (!o || o->now_ms <= 0)
        return err_set(e, -EINVAL, "GPU health: an observation without a time");
    struct gh_report r = {0};
    struct gh_health prev = {0};
    bool first = !st->started;
    if (first) {
        st->started = true;
        restore(st, o, &r, &prev);
    }
    /* The acknowledgement is applied with a reading of the GPUs: a report that says it applied
     * it describes the GPUs after the remediation. Unread (an agent restarted by a reboot before
     * the driver is back), the live faults it carries are the Node's old ones. */
    if (o->nvml_ok)
        apply_ack(st, o, &r);
    /* a fresh start (the annotation lost) never reuses a number the remediation acknowledged */
    if (st->h.seq < st->h.acked)
        st->h.seq = st->h.acked;
    if (o->nvml_ok) {
        struct want w[GH_FAULTS_MAX];
        size_t nw = live_wanted(st, o, w, &r);
        live_reconcile(st, o, w, nw, first ? &prev : NULL, &r);
    } else if (first) {
        /* the GPUs unread: the live faults the Node carries stand until they are read */
        for (size_t i = 0; i < prev.n_faults; i++)
            if (prev.faults[i].live)
                add_active(&st->h, &prev.faults[i]);
    }
    for (size_t i = 0; i < o->n_events; i++)
        take_event(st, o, &o->events[i], &r);

    struct gh_health *h = &st->h;
    h->healthy = true;
    h->action = GH_ACT_NONE;
    for (size_t i = 0; i < h->n_faults; i++) {
        if (gh_action_quarantines(h->faults[i].action))
            h->healthy = false;
        if (h->faults[i].action > h->action)
            h->action = h->faults[i].action;
    }
    r.health = *h;
    condition(&r);
    char *text = gh_health_format(h);
    uint64_t hash = hash_fnv1a64(text, strlen(text));
    if (first && o->annotation)
        st->written_hash = hash_fnv1a64(o->annotation, strlen(o->annotation));
    if (hash != st->written_hash) {
        r.annotation = text;
        st->written_hash = hash;
    } else {
        free(text);
    }
    *ret = r;
    return 0;
}

void gh_state_written(struct gh_state *st, bool ok)
{
    if (!ok)
        st->written_hash = 0; /* written again next time */
}
