/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The GPU health core: the catalog entry by entry (against a table written here from NVIDIA's
 * catalog, independently of the module's), the classes, the annotation's codec, and the
 * tracker's observations with time passed in (latched and live faults, slowdowns held over a
 * window, NVLink counters, the acknowledgement, a restart that continues from the annotation).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpuhealth.h"

#define T0 1767225600000LL /* 2026-01-01T00:00:00Z */

/* ---- the catalog ---------------------------------------------------------------------------- */

/* Every XID the catalog lists for the A100 or the H100 that gpuop keeps, with NVIDIA's immediate
 * bucket and the action gpuop takes (docs/remediation.md). */
static const struct {
    unsigned xid;
    const char *bucket;
    enum gh_action action;
} want_xids[] = {
    {8, "RESTART_APP", GH_ACT_RESTART_WORKLOAD},
    {11, "RESTART_APP", GH_ACT_RESTART_WORKLOAD},
    {13, "RESTART_APP", GH_ACT_RESTART_WORKLOAD},
    {14, "IGNORE", GH_ACT_NONE},
    {25, "RESTART_APP", GH_ACT_RESTART_WORKLOAD},
    {31, "RESTART_APP", GH_ACT_RESTART_WORKLOAD},
    {32, "RESTART_APP", GH_ACT_RESTART_WORKLOAD},
    {37, "IGNORE", GH_ACT_NONE},
    {38, "IGNORE", GH_ACT_NONE},
    {39, "RESTART_APP", GH_ACT_RESTART_WORKLOAD},
    {40, "RESTART_APP", GH_ACT_RESTART_WORKLOAD},
    {41, "RESTART_APP", GH_ACT_RESTART_WORKLOAD},
    {43, "IGNORE", GH_ACT_NONE},
    {44, "IGNORE", GH_ACT_NONE},
    {45, "WORKFLOW_XID_45", GH_ACT_NONE},
    {46, "RESET_GPU", GH_ACT_RESET_GPU},
    {48, "WORKFLOW_XID_48", GH_ACT_RESET_GPU},
    {54, "CHECK_MECHANICALS", GH_ACT_REPLACE_HW},
    {60, "RESTART_APP", GH_ACT_RESTART_WORKLOAD},
    {62, "RESET_GPU", GH_ACT_RESET_GPU},
    {63, "IGNORE", GH_ACT_NONE},
    {64, "RESET_GPU", GH_ACT_RESET_GPU},
    {66, "IGNORE", GH_ACT_NONE},
    {67, "IGNORE", GH_ACT_NONE},
    {68, "RESTART_APP", GH_ACT_RESTART_WORKLOAD},
    {69, "RESTART_APP", GH_ACT_RESTART_WORKLOAD},
    {70, "RESTART_APP", GH_ACT_RESTART_WORKLOAD},
    {71, "RESTART_APP", GH_ACT_RESTART_WORKLOAD},
    {72, "RESTART_APP", GH_ACT_RESTART_WORKLOAD},
    {74, "WORKFLOW_NVLINK_ERR", GH_ACT_RESET_GPU},
    {75, "RESTART_APP", GH_ACT_RESTART_WORKLOAD},
    {76, "RESTART_APP", GH_ACT_RESTART_WORKLOAD},
    {77, "RESTART_APP", GH_ACT_RESTART_WORKLOAD},
    {79, "RESTART_BM", GH_ACT_REBOOT_NODE},
    {80, "RESTART_APP", GH_ACT_RESTART_WORKLOAD},
    {82, "RESTART_APP", GH_ACT_RESTART_WORKLOAD},
    {83, "RESTART_APP", GH_ACT_RESTART_WORKLOAD},
    {84, "RESTART_APP", GH_ACT_RESTART_WORKLOAD},
    {85, "RESTART_APP", GH_ACT_RESTART_WORKLOAD},
    {86, "RESTART_APP", GH_ACT_RESTART_WORKLOAD},
    {88, "RESTART_APP", GH_ACT_RESTART_WORKLOAD},
    {89, "RESTART_APP", GH_ACT_RESTART_WORKLOAD},
    {92, "IGNORE", GH_ACT_NONE},
    {93, "IGNORE", GH_ACT_NONE},
    {94, "RESTART_APP", GH_ACT_RESTART_WORKLOAD},
    {95, "RESET_GPU", GH_ACT_RESET_GPU},
    {96, "RESTART_APP", GH_ACT_RESTART_WORKLOAD},
    {97, "RESTART_APP", GH_ACT_RESTART_WORKLOAD},
    {98, "RESTART_APP", GH_ACT_RESTART_WORKLOAD},
    {99, "RESTART_APP", GH_ACT_RESTART_WORKLOAD},
    {100, "RESTART_APP", GH_ACT_RESTART_WORKLOAD},
    {101, "RESTART_APP", GH_ACT_RESTART_WORKLOAD},
    {102, "RESTART_APP", GH_ACT_RESTART_WORKLOAD},
    {103, "RESTART_APP", GH_ACT_RESTART_WORKLOAD},
    {104, "RESTART_APP", GH_ACT_RESTART_WORKLOAD},
    {105, "RESTART_APP", GH_ACT_RESTART_WORKLOAD},
    {106, "IGNORE", GH_ACT_NONE},
    {107, "IGNORE", GH_ACT_NONE},
    {109, "RESET_GPU", GH_ACT_RESET_GPU},
    {110, "RESET_GPU", GH_ACT_RESET_GPU},
    {119, "RESET_GPU", GH_ACT_RESET_GPU},
    {120, "RESET_GPU", GH_ACT_RESET_GPU},
    {136, "RESET_GPU", GH_ACT_RESET_GPU},
    {137, "IGNORE", GH_ACT_NONE},
    {140, "RESET_GPU", GH_ACT_RESET_GPU},
    {141, "IGNORE", GH_ACT_NONE},
    {143, "RESET_GPU", GH_ACT_RESET_GPU},
    {151, "RESTART_VM", GH_ACT_REBOOT_NODE},
    {154, "XID_154", GH_ACT_NONE},
    {156, "RESET_GPU", GH_ACT_RESET_GPU},
    {157, "IGNORE", GH_ACT_NONE},
    {158, "RESET_GPU", GH_ACT_RESET_GPU},
};

static void test_catalog_entries(void **state)
{
    (void)state;
    size_t n;
    const struct gh_xid_entry *c = gh_xid_catalog(&n);
    assert_int_equal(n, ARRAY_SIZE(want_xids));
    for (size_t i = 0; i < n; i++) {
        /* sorted (the lookup is a binary search), each entry as the table says */
        if (i)
            assert_true(c[i - 1].xid < c[i].xid);
        assert_int_equal(c[i].xid, want_xids[i].xid);
        assert_string_equal(c[i].bucket, want_xids[i].bucket);
        if (c[i].action != want_xids[i].action)
            fail_msg("XID %u: action %s, want %s", c[i].xid, gh_action_name(c[i].action),
                     gh_action_name(want_xids[i].action));
        /* the action is the bucket's */
        assert_int_equal(gh_bucket_action(c[i].bucket), (int)c[i].action);
        assert_non_null(c[i].mnemonic);
        assert_ptr_equal(gh_xid_lookup(c[i].xid), &c[i]);
    }
    assert_string_equal(gh_xid_lookup(79)->mnemonic, "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS");
    assert_string_equal(gh_xid_lookup(48)->mnemonic, "ROBUST_CHANNEL_GPU_ECC_DBE");
    /* not listed: unused in the catalog, or GPUs gpuop does not list */
    assert_null(gh_xid_lookup(0));
    assert_null(gh_xid_lookup(1));
    assert_null(gh_xid_lookup(78));
    assert_null(gh_xid_lookup(159));
    assert_null(gh_xid_lookup(65535));
}

static void test_buckets_and_names(void **state)
{
    (void)state;
    assert_int_equal(gh_bucket_action("RESTART_BM"), GH_ACT_REBOOT_NODE);
    assert_int_equal(gh_bucket_action("CONTACT_SUPPORT"), GH_ACT_REPLACE_HW);
    assert_int_equal(gh_bucket_action("UPDATE_SWFW"), -1);
    assert_int_equal(gh_bucket_action(NULL), -1);
    for (int a = 0; a < GH_ACT_COUNT; a++) {
        assert_int_equal(gh_action_parse(gh_action_name((enum gh_action)a)), a);
        assert_int_equal(gh_action_quarantines((enum gh_action)a), a >= GH_ACT_RESET_GPU);
    }
    assert_int_equal(gh_action_parse("reboot"), -1);
    assert_int_equal(gh_action_parse(NULL), -1);
    for (int c = 0; c < GH_CLS_COUNT; c++) {
        assert_int_equal(gh_class_parse(gh_class_name((enum gh_class)c)), c);
        assert_int_equal(gh_class_info((enum gh_class)c)->cls, c);
    }
    assert_int_equal(gh_class_parse("ecc"), -1);
}

/* The classes without an XID: action and kind, one by one. */
static void test_classes(void **state)
{
    (void)state;
    static const struct {
        enum gh_class c;
        enum gh_action a;
        bool live;
        const char *reason;
    } want[] = {
        {GH_CLS_ECC_DBE, GH_ACT_RESET_GPU, true, "UncorrectableECC"},
        {GH_CLS_REMAP_PENDING, GH_ACT_RESET_GPU, true, "RowRemapPending"},
        {GH_CLS_REMAP_FAILURE, GH_ACT_REPLACE_HW, true, "RowRemapFailure"},
        {GH_CLS_RETIRED_PENDING, GH_ACT_RELOAD_DRIVER, true, "PageRetirementPending"},
        {GH_CLS_LOST, GH_ACT_REBOOT_NODE, true, "GPULost"},
        {GH_CLS_NVLINK, GH_ACT_RESET_GPU, false, "NVLinkError"},
        {GH_CLS_THERMAL, GH_ACT_REPLACE_HW, true, "ThermalSlowdown"},
        {GH_CLS_POWER, GH_ACT_REPLACE_HW, true, "PowerBrakeSlowdown"},
        {GH_CLS_PLUGIN, GH_ACT_NONE, true, "DevicePluginDisagrees"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(want); i++) {
        const struct gh_class_entry *c = gh_class_info(want[i].c);
        assert_int_equal(c->action, want[i].a);
        assert_int_equal(c->live, want[i].live);
        assert_string_equal(c->reason, want[i].reason);
        struct gh_fault f = {.cls = want[i].c, .code = 0};
        char r[48];
        gh_fault_reason(&f, r, sizeof(r));
        assert_string_equal(r, want[i].reason);
    }
    struct gh_fault x = {.cls = GH_CLS_XID, .code = 79};
    char r[48];
    gh_fault_reason(&x, r, sizeof(r));
    assert_string_equal(r, "Xid79");
}

/* ---- the tracker ---------------------------------------------------------------------------- */

#define N_GPUS 8
struct node {
    struct gh_state st;
    struct gh_gpu_obs gpus[N_GPUS];
    char uuids[N_GPUS][40];
    struct gh_event_obs ev[8];
    size_t n_ev;
    char *annotation; /* what the Node carries */
    const char *ack;
    int plugin;
    bool nvml_ok;
    uint64_t window_ms;
};

static void node_init(struct node *n)
{
    memset(n, 0, sizeof(*n));
    n->nvml_ok = true;
    n->window_ms = 60000;
    for (unsigned i = 0; i < N_GPUS; i++) {
        snprintf(n->uuids[i], sizeof(n->uuids[i]), "GPU-0000000%u", i);
        n->gpus[i] = (struct gh_gpu_obs){.index = i,
                                         .uuid = n->uuids[i],
                                         .ecc_ok = true,
                                         .remap_ok = true,
                                         .nvlink_ok = true,
                                         .clocks_ok = true};
    }
}

static void node_done(struct node *n)
{
    free(n->annotation);
}

static void xid(struct node *n, unsigned gpu, unsigned code)
{
    n->ev[n->n_ev++] =
        (struct gh_event_obs){.kind = GH_EV_XID, .gpu = gpu, .uuid = n->uuids[gpu], .xid = code};
}

/* One observation at T0 + s seconds; the annotation written lands on the Node. */
static void observe(struct node *n, int64_t s, struct gh_report *r)
{
    struct gh_observation o = {.now_ms = T0 + s * 1000,
                               .nvml_ok = n->nvml_ok,
                               .gpus = n->gpus,
                               .n_gpus = N_GPUS,
                               .events = n->ev,
                               .n_events = n->n_ev,
                               .plugin_held_back = n->plugin,
                               .annotation = n->annotation,
                               .ack = n->ack,
                               .slowdown_window_ms = n->window_ms};
    struct err e = {0};
    assert_int_equal(gh_observe(&n->st, &o, r, &e), 0);
    n->n_ev = 0;
    if (r->annotation) {
        free(n->annotation);
        n->annotation = xstrdup(r->annotation);
        /* what is written reads back as it was */
        struct gh_health back;
        assert_int_equal(gh_health_parse(r->annotation, strlen(r->annotation), &back, &e), 0);
        assert_int_equal(back.seq, r->health.seq);
        assert_int_equal(back.n_faults, r->health.n_faults);
        assert_int_equal(back.healthy, r->health.healthy);
    }
}

static void test_healthy_node(void **state)
{
    (void)state;
    struct node n;
    node_init(&n);
    struct gh_report r;
    observe(&n, 0, &r);
    assert_true(r.health.healthy);
    assert_int_equal(r.health.n_faults, 0);
    assert_true(r.condition_status);
    assert_string_equal(r.condition_reason, "GPUsHealthy");
    assert_non_null(r.annotation); /* the first one */
    gh_report_clear(&r);
    observe(&n, 30, &r);
    assert_null(r.annotation); /* nothing changed: no write */
    gh_report_clear(&r);
    node_done(&n);
}

/* A GPU falls off the bus: XID 79 (latched) and the lost GPU (live), reboot-node; after the
 * reboot the GPU is back and the live fault goes, the XID stays until acknowledged. */
static void test_lost_gpu_and_ack(void **state)
{
    (void)state;
    struct node n;
    node_init(&n);
    struct gh_report r;
    observe(&n, 0, &r);
    gh_report_clear(&r);
    n.gpus[3].lost = true;
    n.gpus[3].uuid = NULL; /* a lost GPU no longer answers for its UUID */
    xid(&n, 3, 79);
    observe(&n, 1, &r);
    assert_false(r.health.healthy);
    assert_int_equal(r.health.action, GH_ACT_REBOOT_NODE);
    assert_int_equal(r.health.n_faults, 2);
    assert_int_equal(r.n_new, 2);
    assert_int_equal(r.health.faults[0].cls, GH_CLS_LOST); /* seen first: older */
    assert_true(r.health.faults[0].live);
    assert_int_equal(r.health.faults[1].cls, GH_CLS_XID);
    assert_int_equal(r.health.faults[1].code, 79);
    assert_false(r.condition_status);
    assert_string_equal(r.condition_reason, "GPULost");
    assert_non_null(
        strstr(r.condition_message, "XID 79 ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS"));
    assert_non_null(r.annotation);
    uint64_t xid_seq = r.health.faults[1].seq;
    gh_report_clear(&r);

    /* the reboot: the GPU answers again */
    n.gpus[3].lost = false;
    n.gpus[3].uuid = n.uuids[3];
    observe(&n, 60, &r);
    assert_int_equal(r.health.n_faults, 1);
    assert_int_equal(r.health.faults[0].code, 79);
    assert_false(r.health.healthy);
    assert_int_equal(r.n_cleared, 1);
    gh_report_clear(&r);

    /* an acknowledgement below it changes nothing; one at it clears it */
    char ack[32];
    snprintf(ack, sizeof(ack), "%llu", (unsigned long long)(xid_seq - 1));
    n.ack = ack;
    observe(&n, 61, &r);
    assert_int_equal(r.health.n_faults, 1);
    gh_report_clear(&r);
    snprintf(ack, sizeof(ack), "%llu", (unsigned long long)xid_seq);
    observe(&n, 62, &r);
    assert_int_equal(r.health.n_faults, 0);
    assert_true(r.health.healthy);
    assert_int_equal(r.health.acked, xid_seq);
    assert_true(r.health.has_last); /* the last event stays on record */
    assert_int_equal(r.health.last.code, 79);
    gh_report_clear(&r);
    node_done(&n);
}

/* An uncorrectable ECC error: the event and the volatile count (rows pending remapping too on
 * Ampere and later); a GPU reset clears both counts, and the node is healthy without an
 * acknowledgement. */
static void test_ecc_cleared_by_reset(void **state)
{
    (void)state;
    struct node n;
    node_init(&n);
    struct gh_report r;
    observe(&n, 0, &r);
    gh_report_clear(&r);
    n.gpus[1].dbe_volatile = 1;
    n.gpus[1].remap_pending = true;
    n.ev[n.n_ev++] = (struct gh_event_obs){.kind = GH_EV_DBE, .gpu = 1, .uuid = n.uuids[1]};
    observe(&n, 2, &r);
    assert_false(r.health.healthy);
    assert_int_equal(r.health.action, GH_ACT_RESET_GPU);
    assert_int_equal(r.health.n_faults, 2); /* the event is covered by the live count */
    assert_int_equal(r.health.faults[0].cls, GH_CLS_ECC_DBE);
    assert_true(r.health.faults[0].live);
    assert_int_equal(r.health.faults[1].cls, GH_CLS_REMAP_PENDING);
    assert_string_equal(r.condition_reason, "UncorrectableECC");
    gh_report_clear(&r);
    /* the same state again: the same faults, no write */
    observe(&n, 7, &r);
    assert_null(r.annotation);
    assert_int_equal(r.n_new, 0);
    gh_report_clear(&r);
    n.gpus[1].dbe_volatile = 0;
    n.gpus[1].remap_pending = false;
    observe(&n, 20, &r);
    assert_true(r.health.healthy);
    assert_int_equal(r.n_cleared, 2);
    assert_non_null(r.annotation);
    gh_report_clear(&r);
    node_done(&n);
}

/* A DBE event where the count cannot be read is latched. XIDs the application handles (13) are
 * reported and kept as the last event, never as a fault; an XID not in the catalog likewise. */
static void test_events_latched_or_reported(void **state)
{
    (void)state;
    struct node n;
    node_init(&n);
    n.gpus[2].ecc_ok = false;
    struct gh_report r;
    n.ev[n.n_ev++] = (struct gh_event_obs){.kind = GH_EV_DBE, .gpu = 2, .uuid = n.uuids[2]};
    observe(&n, 0, &r);
    assert_int_equal(r.health.n_faults, 1);
    assert_false(r.health.faults[0].live);
    assert_int_equal(r.health.faults[0].cls, GH_CLS_ECC_DBE);
    gh_report_clear(&r);
    /* the count shows afterwards: it is the fault now (cleared by a reset), the same number */
    uint64_t ev_seq = n.st.h.faults[0].seq;
    n.gpus[2].ecc_ok = true;
    n.gpus[2].dbe_volatile = 1;
    observe(&n, 0, &r);
    assert_int_equal(r.health.n_faults, 1);
    assert_true(r.health.faults[0].live);
    assert_int_equal(r.health.faults[0].seq, ev_seq);
    assert_int_equal(r.n_new, 0);
    gh_report_clear(&r);
    n.gpus[2].dbe_volatile = 0;
    observe(&n, 0, &r);
    assert_int_equal(r.health.n_faults, 0);
    gh_report_clear(&r);
    n.gpus[2].ecc_ok = false;
    n.ev[n.n_ev++] = (struct gh_event_obs){.kind = GH_EV_DBE, .gpu = 2, .uuid = n.uuids[2]};
    observe(&n, 0, &r);
    gh_report_clear(&r);
    xid(&n, 4, 13);
    xid(&n, 4, 999);
    observe(&n, 1, &r);
    assert_int_equal(r.health.n_faults, 1);
    assert_int_equal(r.n_new, 2);
    assert_int_equal(r.new_faults[0].action, GH_ACT_RESTART_WORKLOAD);
    assert_int_equal(r.new_faults[1].action, GH_ACT_NONE);
    assert_non_null(strstr(r.new_faults[1].message, "not in the catalog"));
    assert_int_equal(r.health.last.code, 999);
    gh_report_clear(&r);
    /* the same XID on the same GPU twice is one fault; on another GPU another */
    xid(&n, 5, 95);
    xid(&n, 5, 95);
    xid(&n, 6, 95);
    observe(&n, 2, &r);
    assert_int_equal(r.health.n_faults, 3);
    assert_int_equal(r.n_new, 2);
    gh_report_clear(&r);
    node_done(&n);
}

/* Slowdowns count once held for the window; they go when the bit does. */
static void test_slowdowns_held(void **state)
{
    (void)state;
    struct node n;
    node_init(&n);
    struct gh_report r;
    n.gpus[0].clock_event_reasons = GH_CLOCKS_HW_SLOWDOWN | GH_CLOCKS_HW_THERMAL;
    n.gpus[7].clock_event_reasons = GH_CLOCKS_HW_SLOWDOWN | GH_CLOCKS_HW_POWER_BRAKE;
    observe(&n, 0, &r);
    assert_int_equal(r.health.n_faults, 0);
    gh_report_clear(&r);
    observe(&n, 59, &r);
    assert_int_equal(r.health.n_faults, 0);
    gh_report_clear(&r);
    observe(&n, 60, &r);
    assert_int_equal(r.health.n_faults, 2);
    assert_int_equal(r.health.action, GH_ACT_REPLACE_HW);
    assert_int_equal(r.health.faults[0].cls, GH_CLS_THERMAL);
    assert_int_equal(r.health.faults[1].cls, GH_CLS_POWER);
    assert_non_null(strstr(r.health.faults[0].message, "for 60s"));
    gh_report_clear(&r);
    /* the thermal one eases: gone; the power brake stays */
    n.gpus[0].clock_event_reasons = 0;
    observe(&n, 61, &r);
    assert_int_equal(r.health.n_faults, 1);
    assert_int_equal(r.health.faults[0].cls, GH_CLS_POWER);
    gh_report_clear(&r);
    /* interrupted: the window starts over */
    n.gpus[0].clock_event_reasons = GH_CLOCKS_HW_THERMAL;
    observe(&n, 62, &r);
    gh_report_clear(&r);
    observe(&n, 100, &r);
    assert_int_equal(r.health.n_faults, 1);
    gh_report_clear(&r);
    /* a window of 0: never a fault */
    n.window_ms = 0;
    n.gpus[7].clock_event_reasons = 0;
    observe(&n, 200, &r);
    assert_int_equal(r.health.n_faults, 0);
    gh_report_clear(&r);
    node_done(&n);
}

static void test_nvlink_counter(void **state)
{
    (void)state;
    struct node n;
    node_init(&n);
    struct gh_report r;
    n.gpus[2].nvlink_errors = 40; /* errors from before the agent started: the baseline */
    observe(&n, 0, &r);
    assert_int_equal(r.health.n_faults, 0);
    gh_report_clear(&r);
    n.gpus[2].nvlink_errors = 41;
    observe(&n, 5, &r);
    assert_int_equal(r.health.n_faults, 1);
    assert_int_equal(r.health.faults[0].cls, GH_CLS_NVLINK);
    assert_false(r.health.faults[0].live);
    assert_non_null(strstr(r.health.faults[0].message, "1 more"));
    gh_report_clear(&r);
    /* the counters reset (a GPU reset): a new baseline, the latched fault stays */
    n.gpus[2].nvlink_errors = 0;
    observe(&n, 10, &r);
    assert_int_equal(r.health.n_faults, 1);
    gh_report_clear(&r);
    node_done(&n);
}

static void test_plugin_disagrees(void **state)
{
    (void)state;
    struct node n;
    node_init(&n);
    struct gh_report r;
    n.plugin = 1;
    observe(&n, 0, &r);
    assert_true(r.health.healthy); /* reported, not a reason to quarantine */
    assert_int_equal(r.health.n_faults, 1);
    assert_int_equal(r.health.faults[0].cls, GH_CLS_PLUGIN);
    assert_int_equal(r.health.faults[0].gpu, -1);
    assert_true(r.condition_status);
    assert_non_null(strstr(r.condition_message, "device plugin holds back"));
    gh_report_clear(&r);
    n.plugin = 0;
    observe(&n, 1, &r);
    assert_int_equal(r.health.n_faults, 0);
    gh_report_clear(&r);
    /* a GPU NVML reports faulty is held back for its fault: no second report */
    n.plugin = 1;
    xid(&n, 2, 48);
    observe(&n, 2, &r);
    gh_report_clear(&r);
    observe(&n, 3, &r);
    assert_int_equal(r.health.n_faults, 1);
    assert_int_equal(r.health.faults[0].code, 48);
    gh_report_clear(&r);
    node_done(&n);
}

/* A restarted agent continues from the Node: the same numbers, latched faults kept, live ones
 * seen again under their number, nothing written when nothing changed; NVML unreadable at the
 * start keeps the live ones the Node carries. */
static void test_restart_continues(void **state)
{
    (void)state;
    struct node n;
    node_init(&n);
    struct gh_report r;
    xid(&n, 0, 48);
    n.gpus[6].remap_failure = true;
    observe(&n, 0, &r);
    struct gh_health before = r.health;
    gh_report_clear(&r);
    assert_int_equal(before.n_faults, 2);

    struct gh_state fresh = {0};
    n.st = fresh;
    observe(&n, 30, &r);
    assert_null(r.annotation); /* the same health: no write */
    assert_int_equal(r.n_new, 0);
    assert_int_equal(r.health.seq, before.seq);
    assert_int_equal(r.health.n_faults, 2);
    for (size_t i = 0; i < 2; i++)
        assert_int_equal(r.health.faults[i].seq, before.faults[i].seq);
    gh_report_clear(&r);

    n.st = fresh;
    n.nvml_ok = false;
    observe(&n, 40, &r);
    assert_int_equal(r.health.n_faults, 2);
    gh_report_clear(&r);
    node_done(&n);
}

/* An agent restarted by a reboot before the driver is back (NVML unread): the GPU lost before
 * the reboot stays in its report, and it does not apply the remediation's acknowledgement, so
 * the remediation does not take that report for the GPUs after the reboot; once NVML reads the
 * GPU back, the acknowledgement is applied with no fault left. */
static void test_ack_waits_for_nvml(void **state)
{
    (void)state;
    struct node n;
    node_init(&n);
    struct gh_report r;
    n.gpus[3].lost = true;
    observe(&n, 0, &r);
    assert_int_equal(r.health.n_faults, 1);
    uint64_t seq = r.health.seq;
    gh_report_clear(&r);
    char ack[24];
    snprintf(ack, sizeof(ack), "%llu", (unsigned long long)seq);
    n.ack = ack;
    struct gh_state fresh = {0};
    n.st = fresh; /* the agent restarted */
    n.nvml_ok = false;
    observe(&n, 10, &r);
    assert_int_equal(r.health.acked, 0);
    assert_int_equal(r.health.n_faults, 1);
    assert_false(r.health.healthy);
    gh_report_clear(&r);
    n.nvml_ok = true;
    n.gpus[3].lost = false;
    observe(&n, 12, &r);
    assert_int_equal(r.health.acked, seq);
    assert_int_equal(r.health.n_faults, 0);
    assert_true(r.health.healthy);
    gh_report_clear(&r);
    node_done(&n);
}

/* Bad input on the Node: reported, ignored; a lost annotation starts over above the
 * acknowledgement. */
static void test_bad_node_input(void **state)
{
    (void)state;
    struct node n;
    node_init(&n);
    n.annotation = xstrdup("{\"seq\":\"x\"}");
    n.ack = "12";
    struct gh_report r;
    xid(&n, 0, 46);
    observe(&n, 0, &r);
    assert_non_null(strstr(r.input_error, GH_ANN_HEALTH));
    assert_int_equal(r.health.faults[0].seq, 13);
    gh_report_clear(&r);
    n.ack = "twelve";
    observe(&n, 1, &r);
    assert_non_null(strstr(r.input_error, GH_ANN_ACK));
    assert_int_equal(r.health.n_faults, 1);
    gh_report_clear(&r);
    struct gh_observation o = {0};
    struct err e = {0};
    assert_int_equal(gh_observe(&n.st, &o, &r, &e), -EINVAL);
    node_done(&n);
}

/* At most GH_FAULTS_MAX faults are kept: the worst. */
static void test_faults_bounded(void **state)
{
    (void)state;
    struct node n;
    node_init(&n);
    struct gh_report r;
    static const unsigned reset_xids[] = {46, 62, 64, 95, 109, 110, 119, 120, 136, 140, 143, 156};
    for (unsigned g = 0; g < 2; g++) {
        for (size_t i = 0; i < ARRAY_SIZE(reset_xids); i++) {
            n.ev[n.n_ev++] =
                (struct gh_event_obs){.kind = GH_EV_XID, .gpu = g, .xid = reset_xids[i]};
            if (n.n_ev == ARRAY_SIZE(n.ev)) {
                observe(&n, 0, &r);
                gh_report_clear(&r);
            }
        }
    }
    xid(&n, 7, 79);
    observe(&n, 1, &r);
    assert_int_equal(r.health.n_faults, GH_FAULTS_MAX);
    assert_int_equal(r.health.faults[0].code, 79); /* the worst is kept */
    gh_report_clear(&r);
    node_done(&n);
}

static void test_codec_errors(void **state)
{
    (void)state;
    static const struct {
        const char *text, *want;
    } cases[] = {
        {"", "not JSON"},
        {"[]", "expected an object"},
        {"{\"healthy\":true}", "seq"},
        {"{\"seq\":1}", "healthy"},
        {"{\"seq\":1,\"healthy\":true,\"action\":\"explode\"}", "action"},
        {"{\"seq\":1,\"healthy\":true,\"faults\":[{\"seq\":1,\"class\":\"xid\"}]}",
         "faults[0].action"},
        {"{\"seq\":1,\"healthy\":true,\"faults\":[{\"seq\":1,\"class\":\"bad\",\"action\":\"none\"}"
         "]}",
         "faults[0].class"},
        {"{\"seq\":1,\"healthy\":true,\"faults\":[{\"seq\":1,\"class\":\"xid\",\"action\":\"none\","
         "\"since\":\"yesterday\"}]}",
         "since"},
        {"{\"seq\":1,\"healthy\":true,\"faults\":[{\"seq\":1,\"class\":\"xid\",\"action\":\"none\","
         "\"gpu\":64}]}",
         "gpu"},
        {"{\"seq\":1,\"healthy\":true,\"seq\":2}", "not JSON"},
        {"{\"seq\":1,\"healthy\":true,\"last\":[]}", "last"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        struct gh_health h;
        struct err e = {0};
        assert_true(gh_health_parse(cases[i].text, strlen(cases[i].text), &h, &e) < 0);
        if (!strstr(err_msg(&e), cases[i].want) || !strstr(err_msg(&e), GH_ANN_HEALTH))
            fail_msg("case %zu: \"%s\" does not name %s", i, err_msg(&e), cases[i].want);
    }
    /* too many faults, too long */
    char *big = xmalloc(GH_ANNOTATION_MAX + 2);
    memset(big, ' ', GH_ANNOTATION_MAX + 1);
    big[GH_ANNOTATION_MAX + 1] = '\0';
    struct gh_health h;
    struct err e = {0};
    assert_int_equal(gh_health_parse(big, strlen(big), &h, &e), -E2BIG);
    free(big);
    /* a newer agent's keys are ignored */
    const char *ok = "{\"seq\":3,\"acked\":1,\"healthy\":true,\"action\":\"none\",\"faults\":[],"
                     "\"future\":1}";
    assert_int_equal(gh_health_parse(ok, strlen(ok), &h, &e), 0);
    assert_int_equal(h.seq, 3);
    assert_int_equal(h.acked, 1);
}

/* ---- the plugins' policy: NVIDIA's ignored XIDs, the two lists ---- */

static void test_plugin_policy(void **state)
{
    (void)state;
    struct gh_policy hp;
    static const struct {
        const char *disable, *enable;
        uint64_t xid;
        bool critical;
    } cases[] = {
        {NULL, NULL, 79, true},
        {NULL, NULL, 13, false},
        {NULL, NULL, 31, false},
        {NULL, NULL, 43, false},
        {NULL, NULL, 45, false},
        {NULL, NULL, 68, false},
        {NULL, NULL, 109, false},
        {NULL, NULL, 94, true},
        {" 94 , 48", NULL, 94, false},
        {" 94 , 48", NULL, 48, false},
        {" 94 , 48", NULL, 79, true},
        {"ALL", NULL, 79, false},
        {"xids", NULL, 48, false},
        {"all", "48", 48, true},
        {"all", "48", 79, false},
        {NULL, "109", 109, true},
        {NULL, "all", 13, true},
        {"abc,-5,12x,,63", NULL, 63, false},
        {"abc,-5,12x,,63", NULL, 12, true},
        {NULL, "xids", 13, false}, /* only "all" enables */
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        gh_policy_init(&hp, cases[i].disable, cases[i].enable);
        if (gh_policy_xid_critical(&hp, cases[i].xid) != cases[i].critical)
            fail_msg("case %zu: disable=%s enable=%s xid=%llu: want critical=%d", i,
                     cases[i].disable ? cases[i].disable : "(unset)",
                     cases[i].enable ? cases[i].enable : "(unset)",
                     (unsigned long long)cases[i].xid, cases[i].critical);
    }
    gh_policy_init(&hp, NULL, NULL);
    struct gpu_event ev = {.type = GPU_EVENT_ECC_DBE};
    assert_true(gh_policy_event_critical(&hp, &ev));
    ev.type = GPU_EVENT_ECC_SBE;
    assert_false(gh_policy_event_critical(&hp, &ev));
    ev.type = GPU_EVENT_XID;
    ev.data = 13;
    assert_false(gh_policy_event_critical(&hp, &ev));
    ev.data = 79;
    assert_true(gh_policy_event_critical(&hp, &ev));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_catalog_entries),
        cmocka_unit_test(test_buckets_and_names),
        cmocka_unit_test(test_classes),
        cmocka_unit_test(test_healthy_node),
        cmocka_unit_test(test_lost_gpu_and_ack),
        cmocka_unit_test(test_ecc_cleared_by_reset),
        cmocka_unit_test(test_events_latched_or_reported),
        cmocka_unit_test(test_slowdowns_held),
        cmocka_unit_test(test_nvlink_counter),
        cmocka_unit_test(test_plugin_disagrees),
        cmocka_unit_test(test_restart_continues),
        cmocka_unit_test(test_bad_node_input),
        cmocka_unit_test(test_ack_waits_for_nvml),
        cmocka_unit_test(test_faults_bounded),
        cmocka_unit_test(test_codec_errors),
        cmocka_unit_test(test_plugin_policy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
