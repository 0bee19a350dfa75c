/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The catalog (gpuhealth.h): what NVML reports, classified into an action.
 *
 * XIDs: NVIDIA's XID catalog for Ampere and later GPUs ("Analyzing Xid Errors with the Xid
 * Catalog", docs.nvidia.com/deploy/xid-errors), the XIDs it marks as applying to the A100 or the
 * H100, each with the catalog's immediate resolution bucket. gpuop's action is the bucket's
 * (gh_bucket_action); the catalog's buckets that name a workflow are read from the catalog's own
 * text for that XID (48 and 74: "a GPU reset or node reboot is needed to clear this error"; 45:
 * follows the other XIDs it comes with). docs/remediation.md lists the table.
 *
 * Classes without an XID: docs/remediation.md, "The catalog", cites each one's source.
 */
#include <stdio.h>
#include <string.h>

#include "gpuhealth.h"

static const char *const action_names[GH_ACT_COUNT] = {
    "none", "restart-workload", "reset-gpu", "reload-driver", "reboot-node", "replace-hw",
};

const char *gh_action_name(enum gh_action a)
{
    return (unsigned)a < GH_ACT_COUNT ? action_names[a] : "unknown";
}

int gh_action_parse(const char *s)
{
    for (int i = 0; s && i < GH_ACT_COUNT; i++)
        if (strcmp(s, action_names[i]) == 0)
            return i;
    return -1;
}

bool gh_action_quarantines(enum gh_action a)
{
    return a >= GH_ACT_RESET_GPU && a < GH_ACT_COUNT;
}

/* NVIDIA's immediate resolution buckets gpuop acts on. */
static const struct {
    const char *bucket;
    enum gh_action action;
} buckets[] = {
    {"IGNORE", GH_ACT_NONE},
    {"RESTART_APP", GH_ACT_RESTART_WORKLOAD},
    {"RESET_GPU", GH_ACT_RESET_GPU},
    {"RESTART_BM", GH_ACT_REBOOT_NODE}, /* restart the bare-metal node */
    {"RESTART_VM", GH_ACT_REBOOT_NODE}, /* the node is the VM */
    {"CHECK_MECHANICALS", GH_ACT_REPLACE_HW},
    {"CONTACT_SUPPORT", GH_ACT_REPLACE_HW},
    {"WORKFLOW_XID_45", GH_ACT_NONE},          /* follows the XIDs it comes with */
    {"WORKFLOW_XID_48", GH_ACT_RESET_GPU},     /* reset or reboot clears it */
    {"WORKFLOW_NVLINK_ERR", GH_ACT_RESET_GPU}, /* reset or reboot clears it */
    {"XID_154", GH_ACT_NONE},                  /* summarises other XIDs' action */
};

int gh_bucket_action(const char *bucket)
{
    for (size_t i = 0; bucket && i < ARRAY_SIZE(buckets); i++)
        if (strcmp(bucket, buckets[i].bucket) == 0)
            return (int)buckets[i].action;
    return -1;
}

/* The catalog, sorted by XID. The action column is the bucket's (checked entry by entry by
 * tests/gpuhealth against gh_bucket_action and against a table of its own). */
#define X(n, mn, b, a)       \
    {                        \
        n, mn, b, GH_ACT_##a \
    }
static const struct gh_xid_entry catalog[] = {
    X(8, "ROBUST_CHANNEL_FIFO_ERROR_IDLE_TIMEOUT", "RESTART_APP", RESTART_WORKLOAD),
    X(11, "ROBUST_CHANNEL_GR_ERROR_MISSING_HW", "RESTART_APP", RESTART_WORKLOAD),
    X(13, "ROBUST_CHANNEL_GR_EXCEPTION", "RESTART_APP", RESTART_WORKLOAD),
    X(14, "ROBUST_CHANNEL_FAKE_ERROR", "IGNORE", NONE),
    X(25, "ROBUST_CHANNEL_GR_ILLEGAL_NOTIFY", "RESTART_APP", RESTART_WORKLOAD),
    X(31, "ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT", "RESTART_APP", RESTART_WORKLOAD),
    X(32, "ROBUST_CHANNEL_PBDMA_ERROR", "RESTART_APP", RESTART_WORKLOAD),
    X(37, "ROBUST_CHANNEL_FECS_ERR_UNIMP_FIRMWARE_METHOD", "IGNORE", NONE),
    X(38, "ROBUST_CHANNEL_FECS_ERR_WATCHDOG_TIMEOUT", "IGNORE", NONE),
    X(39, "ROBUST_CHANNEL_CE0_ERROR", "RESTART_APP", RESTART_WORKLOAD),
    X(40, "ROBUST_CHANNEL_CE1_ERROR", "RESTART_APP", RESTART_WORKLOAD),
    X(41, "ROBUST_CHANNEL_CE2_ERROR", "RESTART_APP", RESTART_WORKLOAD),
    X(43, "ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR", "IGNORE", NONE),
    X(44, "ROBUST_CHANNEL_GR_FAULT_DURING_CTXSW", "IGNORE", NONE),
    X(45, "ROBUST_CHANNEL_PREEMPTIVE_REMOVAL", "WORKFLOW_XID_45", NONE),
    X(46, "ROBUST_CHANNEL_GPU_TIMEOUT_ERROR", "RESET_GPU", RESET_GPU),
    X(48, "ROBUST_CHANNEL_GPU_ECC_DBE", "WORKFLOW_XID_48", RESET_GPU),
    X(54, "SILENT_RUNNING_PWR_REDUCED_CLOCKING", "CHECK_MECHANICALS", REPLACE_HW),
    X(60, "ROBUST_CHANNEL_SEC2_ERROR", "RESTART_APP", RESTART_WORKLOAD),
    X(62, "PMU_HALT_ERROR", "RESET_GPU", RESET_GPU),
    X(63, "INFOROM_DRAM_RETIREMENT_EVENT", "IGNORE", NONE),
    X(64, "INFOROM_DRAM_RETIREMENT_FAILURE", "RESET_GPU", RESET_GPU),
    X(66, "ROBUST_CHANNEL_FECS_ERR_REG_ACCESS_VIOLATION", "IGNORE", NONE),
    X(67, "ROBUST_CHANNEL_FECS_ERR_VERIF_VIOLATION", "IGNORE", NONE),
    X(68, "ROBUST_CHANNEL_NVDEC0_ERROR", "RESTART_APP", RESTART_WORKLOAD),
    X(69, "ROBUST_CHANNEL_GR_CLASS_ERROR", "RESTART_APP", RESTART_WORKLOAD),
    X(70, "ROBUST_CHANNEL_CE3_ERROR", "RESTART_APP", RESTART_WORKLOAD),
    X(71, "ROBUST_CHANNEL_CE4_ERROR", "RESTART_APP", RESTART_WORKLOAD),
    X(72, "ROBUST_CHANNEL_CE5_ERROR", "RESTART_APP", RESTART_WORKLOAD),
    X(74, "NVLINK_ERROR", "WORKFLOW_NVLINK_ERR", RESET_GPU),
    X(75, "ROBUST_CHANNEL_CE6_ERROR", "RESTART_APP", RESTART_WORKLOAD),
    X(76, "ROBUST_CHANNEL_CE7_ERROR", "RESTART_APP", RESTART_WORKLOAD),
    X(77, "ROBUST_CHANNEL_CE8_ERROR", "RESTART_APP", RESTART_WORKLOAD),
    X(79, "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS", "RESTART_BM", REBOOT_NODE),
    X(80, "PBDMA_PUSHBUFFER_CRC_MISMATCH", "RESTART_APP", RESTART_WORKLOAD),
    X(82, "ROBUST_CHANNEL_NVJPG0_ERROR", "RESTART_APP", RESTART_WORKLOAD),
    X(83, "ROBUST_CHANNEL_NVDEC1_ERROR", "RESTART_APP", RESTART_WORKLOAD),
    X(84, "ROBUST_CHANNEL_NVDEC2_ERROR", "RESTART_APP", RESTART_WORKLOAD),
    X(85, "ROBUST_CHANNEL_CE9_ERROR", "RESTART_APP", RESTART_WORKLOAD),
    X(86, "ROBUST_CHANNEL_OFA0_ERROR", "RESTART_APP", RESTART_WORKLOAD),
    X(88, "ROBUST_CHANNEL_NVDEC3_ERROR", "RESTART_APP", RESTART_WORKLOAD),
    X(89, "ROBUST_CHANNEL_NVDEC4_ERROR", "RESTART_APP", RESTART_WORKLOAD),
    X(92, "EXCESSIVE_SBE_INTERRUPTS", "IGNORE", NONE),
    X(93, "INFOROM_ERASE_LIMIT_EXCEEDED", "IGNORE", NONE),
    X(94, "ROBUST_CHANNEL_CONTAINED_ERROR", "RESTART_APP", RESTART_WORKLOAD),
    X(95, "ROBUST_CHANNEL_UNCONTAINED_ERROR", "RESET_GPU", RESET_GPU),
    X(96, "ROBUST_CHANNEL_NVDEC5_ERROR", "RESTART_APP", RESTART_WORKLOAD),
    X(97, "ROBUST_CHANNEL_NVDEC6_ERROR", "RESTART_APP", RESTART_WORKLOAD),
    X(98, "ROBUST_CHANNEL_NVDEC7_ERROR", "RESTART_APP", RESTART_WORKLOAD),
    X(99, "ROBUST_CHANNEL_NVJPG1_ERROR", "RESTART_APP", RESTART_WORKLOAD),
    X(100, "ROBUST_CHANNEL_NVJPG2_ERROR", "RESTART_APP", RESTART_WORKLOAD),
    X(101, "ROBUST_CHANNEL_NVJPG3_ERROR", "RESTART_APP", RESTART_WORKLOAD),
    X(102, "ROBUST_CHANNEL_NVJPG4_ERROR", "RESTART_APP", RESTART_WORKLOAD),
    X(103, "ROBUST_CHANNEL_NVJPG5_ERROR", "RESTART_APP", RESTART_WORKLOAD),
    X(104, "ROBUST_CHANNEL_NVJPG6_ERROR", "RESTART_APP", RESTART_WORKLOAD),
    X(105, "ROBUST_CHANNEL_NVJPG7_ERROR", "RESTART_APP", RESTART_WORKLOAD),
    X(106, "SMBPBI_TEST_MESSAGE", "IGNORE", NONE),
    X(107, "SMBPBI_TEST_MESSAGE_SILENT", "IGNORE", NONE),
    X(109, "ROBUST_CHANNEL_CTXSW_TIMEOUT_ERROR", "RESET_GPU", RESET_GPU),
    X(110, "SEC_FAULT_ERROR", "RESET_GPU", RESET_GPU),
    X(119, "GSP_RPC_TIMEOUT", "RESET_GPU", RESET_GPU),
    X(120, "GSP_ERROR", "RESET_GPU", RESET_GPU),
    X(136, "ALI_TRAINING_FAIL", "RESET_GPU", RESET_GPU),
    X(137, "NVLINK_PRIV_ERR", "IGNORE", NONE),
    X(140, "UNRECOVERABLE_ECC_ERROR_ESCAPE", "RESET_GPU", RESET_GPU),
    X(141, "ROBUST_CHANNEL_FAST_PATH_ERROR", "IGNORE", NONE),
    X(143, "GPU_INIT_ERROR", "RESET_GPU", RESET_GPU),
    X(151, "ROBUST_CHANNEL_KEY_ROTATION_ERROR", "RESTART_VM", REBOOT_NODE),
    X(154, "GPU_RECOVERY_ACTION_CHANGED", "XID_154", NONE),
    X(156, "RESOURCE_RETIREMENT_EVENT", "RESET_GPU", RESET_GPU),
    X(157, "RESOURCE_RETIREMENT_FAILURE", "IGNORE", NONE),
    X(158, "GPU_FATAL_TIMEOUT", "RESET_GPU", RESET_GPU),
};
#undef X

const struct gh_xid_entry *gh_xid_catalog(size_t *ret_n)
{
    *ret_n = ARRAY_SIZE(catalog);
    return catalog;
}

const struct gh_xid_entry *gh_xid_lookup(unsigned xid)
{
    size_t lo = 0, hi = ARRAY_SIZE(catalog);
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (catalog[mid].xid == xid)
            return &catalog[mid];
        if (catalog[mid].xid < xid)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* The classes without an XID, in enum order (docs/remediation.md cites each). */
static const struct gh_class_entry classes[GH_CLS_COUNT] = {
    {GH_CLS_XID, GH_ACT_NONE, false, "Xid", "XID"},
    {GH_CLS_ECC_DBE, GH_ACT_RESET_GPU, true, "UncorrectableECC", "uncorrectable ECC errors"},
    {GH_CLS_REMAP_PENDING, GH_ACT_RESET_GPU, true, "RowRemapPending",
     "rows pending remapping (applied at the next GPU reset)"},
    {GH_CLS_REMAP_FAILURE, GH_ACT_REPLACE_HW, true, "RowRemapFailure",
     "a row remapping failed (the GPU's memory is out of spare rows)"},
    {GH_CLS_RETIRED_PENDING, GH_ACT_RELOAD_DRIVER, true, "PageRetirementPending",
     "pages pending retirement (applied when the driver reloads)"},
    {GH_CLS_LOST, GH_ACT_REBOOT_NODE, true, "GPULost", "the GPU has fallen off the bus"},
    {GH_CLS_NVLINK, GH_ACT_RESET_GPU, false, "NVLinkError", "NVLink recovery or replay errors"},
    {GH_CLS_THERMAL, GH_ACT_REPLACE_HW, true, "ThermalSlowdown",
     "a hardware thermal slowdown held beyond the window (check the cooling)"},
    {GH_CLS_POWER, GH_ACT_REPLACE_HW, true, "PowerBrakeSlowdown",
     "a hardware power brake slowdown held beyond the window (check the power supply)"},
    {GH_CLS_PLUGIN, GH_ACT_NONE, true, "DevicePluginDisagrees",
     "the device plugin holds back GPUs NVML reports healthy"},
};

static const char *const class_names[GH_CLS_COUNT] = {
    "xid",  "ecc-dbe", "remap-pending", "remap-failure", "retired-pending",
    "lost", "nvlink",  "thermal",       "power",         "plugin",
};

const char *gh_class_name(enum gh_class c)
{
    return (unsigned)c < GH_CLS_COUNT ? class_names[c] : "unknown";
}

int gh_class_parse(const char *s)
{
    for (int i = 0; s && i < GH_CLS_COUNT; i++)
        if (strcmp(s, class_names[i]) == 0)
            return i;
    return -1;
}

const struct gh_class_entry *gh_class_info(enum gh_class c)
{
    return (unsigned)c < GH_CLS_COUNT ? &classes[c] : NULL;
}

void gh_fault_reason(const struct gh_fault *f, char *buf, size_t n)
{
    if (f->cls == GH_CLS_XID)
        snprintf(buf, n, "Xid%u", f->code);
    else
        snprintf(buf, n, "%s", gh_class_info(f->cls) ? gh_class_info(f->cls)->reason : "Unknown");
}
