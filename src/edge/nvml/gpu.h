/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpu: the typed GPU model every gpuop component consumes. It is the only code that calls NVML
 * (loaded at run time with dlopen; see nvml-abi.h): components never call NVML directly.
 *
 *   struct gpu_lib        the loaded libnvidia-ml.so.1 (GPUOP_NVML_LIBRARY overrides the path),
 *                         initialised; one per process; safe to use from several threads.
 *   struct gpu_inventory  a snapshot of what is on the node: driver and CUDA versions, GPUs,
 *                         their MIG devices, and the GPU-to-GPU topology (PCIe level, NVLinks).
 *                         Plain data, owned by the caller, freed with gpu_inventory_free().
 *   struct gpu_sample     one device's telemetry at one instant (see the valid bits).
 *   struct gpu_events     a subscription to XID / ECC events of every GPU.
 *   struct gpu_gpm_sampler  one GPU's GPU Performance Monitoring (Hopper and newer): two samples
 *                         at a time, the profiling metrics (DCGM_FI_PROF_*) between them.
 *
 * Topology levels, event kinds and clock-event reasons are gpu.h's own (below): components never
 * include nvml-abi.h; the binding in src/edge/nvml converts NVML's values explicitly. The numbers
 * are chosen equal to NVML's so raw values (`gpuop inventory --json`, logs) read the same as
 * before.
 *
 * A symbol missing from an older driver makes its feature read as not supported; a GPU that
 * fails with NVML_ERROR_GPU_IS_LOST is reported with lost=true, the others are unaffected.
 */
#ifndef GPUOP_GPU_H
#define GPUOP_GPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

#define GPU_UUID_MAX    96
#define GPU_NAME_MAX    96
#define GPU_BUSID_MAX   32
#define GPU_PROFILE_MAX 32
#define GPU_VERSION_MAX 80

struct gpu_lib;

/* Opens the library (path NULL: $GPUOP_NVML_LIBRARY, else "libnvidia-ml.so.1") and initialises
 * NVML. Errors name the library and NVML's reason. */
int gpu_lib_open(const char *path, struct gpu_lib **ret, struct err *e);
void gpu_lib_free(struct gpu_lib *lib); /* shuts NVML down; accepts NULL */
DEFINE_CLEANUP_FUNC(struct gpu_lib, gpu_lib_free)
/* The path actually loaded. */
const char *gpu_lib_path(const struct gpu_lib *lib);

/* Architectures as NVML numbers them (NVML_DEVICE_ARCH_*). */
const char *gpu_arch_name(unsigned arch); /* "hopper", "ampere", ..., "unknown" */

struct gpu_mig_device {
    char uuid[GPU_UUID_MAX];       /* "MIG-<uuid>" */
    unsigned index;                /* MIG device index within the parent */
    unsigned gi_id, ci_id;         /* GPU / compute instance ids */
    unsigned gi_profile_id;        /* hardware profile id (e.g. 19 for 1g.10gb) */
    char profile[GPU_PROFILE_MAX]; /* canonical name: "1g.10gb", "1g.10gb+me", "1c.2g.20gb" */
    unsigned gi_slices, ci_slices;
    unsigned multiprocessors;
    unsigned copy_engines, decoders, encoders, jpegs, ofas;
    uint64_t memory_mib; /* memorySizeMB as NVML reports it */
    unsigned gi_placement_start, gi_placement_size;
};

struct gpu_device {
    unsigned index;
    unsigned minor;          /* /dev/nvidia<minor> */
    char name[GPU_NAME_MAX]; /* "NVIDIA H100 80GB HBM3" */
    char uuid[GPU_UUID_MAX]; /* "GPU-<uuid>" */
    char serial[32];
    char vbios[32]; /* the VBIOS (firmware) version, "96.00.A5.00.01"; "" when unknown */
    char bus_id[GPU_BUSID_MAX]; /* "00000000:18:00.0" (NVML busId) */
    uint32_t pci_device_id;     /* (device << 16) | vendor, e.g. 0x233010DE */
    uint32_t pci_subsystem_id;
    unsigned pci_class; /* 0x0302 compute, 0x0300 display, 0 unknown (from sysfs) */
    int numa_node;      /* from sysfs ($GPUOP_SYSFS_ROOT) through the bus id; -1 unknown */
    uint64_t memory_total_bytes;
    uint64_t memory_reserved_bytes;
    int cc_major, cc_minor; /* CUDA compute capability */
    unsigned arch;          /* NVML_DEVICE_ARCH_* */
    unsigned brand;         /* nvmlBrandType_t */
    unsigned power_limit_mw;
    unsigned max_sm_clock_mhz, max_mem_clock_mhz;
    bool mig_capable; /* MIG mode can be queried on this GPU */
    bool mig_enabled; /* current MIG mode */
    bool mig_pending; /* pending MIG mode (differs from current until reset) */
    size_t n_mig;
    struct gpu_mig_device *mig; /* MIG devices, when mig_enabled */
    bool lost;                  /* NVML_ERROR_GPU_IS_LOST seen while reading */
    /* Grace systems: the NVLink-C2C link to the CPU (1 enabled, 0 not) and how the GPU addresses
     * system memory (GPU_ADDRESSING_*); -1 where the driver does not report it. */
    int c2c;
    int addressing_mode;
};

/* nvmlDeviceGetAddressingMode's values, and their names ("none", "hmm", "ats"; NULL for -1 or
 * a value this build does not know). */
enum { GPU_ADDRESSING_NONE = 0, GPU_ADDRESSING_HMM = 1, GPU_ADDRESSING_ATS = 2 };
const char *gpu_addressing_name(int mode);

/* How two GPUs connect, nearest first (the inverse order of a path's cost). */
enum gpu_topo_level {
    GPU_TOPO_INTERNAL = 0,    /* the same board (or a GPU with itself) */
    GPU_TOPO_SINGLE = 10,     /* one PCIe switch */
    GPU_TOPO_MULTIPLE = 20,   /* several PCIe switches, no host bridge */
    GPU_TOPO_HOSTBRIDGE = 30, /* one host bridge */
    GPU_TOPO_NODE = 40,       /* host bridges within one NUMA node */
    GPU_TOPO_SYSTEM = 50,     /* across NUMA nodes (SMP interconnect), or unknown */
};

struct gpu_inventory {
    char driver_version[GPU_VERSION_MAX]; /* "570.86.15" */
    int cuda_driver_version;              /* NVML integer, e.g. 12080 */
    size_t n_gpus;
    struct gpu_device *gpus;
    /* n_gpus x n_gpus, row-major [a * n_gpus + b]: topology level (enum gpu_topo_level,
     * GPU_TOPO_INTERNAL on the diagonal; GPU_TOPO_SYSTEM where unknown, e.g. for a lost GPU) and
     * the number of active NVLinks between a and b (links into an NVSwitch fabric count for every
     * pair NVML reports NVLink P2P for, as nvidia-smi topo -m shows them). */
    unsigned *topo_level;
    unsigned *nvlinks;
};

int gpu_inventory_read(struct gpu_lib *lib, struct gpu_inventory **ret, struct err *e);
void gpu_inventory_free(struct gpu_inventory *inv);
DEFINE_CLEANUP_FUNC(struct gpu_inventory, gpu_inventory_free)
/* Finds a GPU by "GPU-..." uuid, or the MIG device by "MIG-..." uuid (with its parent). */
const struct gpu_device *gpu_inventory_find(const struct gpu_inventory *inv, const char *uuid,
                                            const struct gpu_mig_device **ret_mig);

/* Telemetry. Fields are valid when their GPU_SAMPLE_* bit is set in `valid`. */
enum {
    GPU_SAMPLE_TEMP = 1u << 0,
    GPU_SAMPLE_MEM_TEMP = 1u << 1,
    GPU_SAMPLE_POWER = 1u << 2,
    GPU_SAMPLE_ENERGY = 1u << 3,
    GPU_SAMPLE_UTIL = 1u << 4,
    GPU_SAMPLE_ENC_DEC = 1u << 5,
    GPU_SAMPLE_CLOCKS = 1u << 6,
    GPU_SAMPLE_MEMORY = 1u << 7,
    GPU_SAMPLE_PCIE_REPLAY = 1u << 8,
    GPU_SAMPLE_CLOCK_EVENTS = 1u << 9,
    GPU_SAMPLE_ECC = 1u << 10,
    GPU_SAMPLE_RETIRED = 1u << 11,
    GPU_SAMPLE_REMAPPED = 1u << 12,
    GPU_SAMPLE_NVLINK_BW = 1u << 13,
    GPU_SAMPLE_VIOLATIONS = 1u << 14,
    GPU_SAMPLE_NVLINK_ERRORS = 1u << 15,
};

/* Why the clocks are held down (struct gpu_sample.clock_event_reasons), bit i as NVML's
 * nvmlClocksEventReason bit i. */
#define GPU_CLOCK_EVENT_GPU_IDLE       (1ULL << 0)
#define GPU_CLOCK_EVENT_APP_CLOCKS     (1ULL << 1) /* applications clocks setting */
#define GPU_CLOCK_EVENT_SW_POWER_CAP   (1ULL << 2)
#define GPU_CLOCK_EVENT_HW_SLOWDOWN    (1ULL << 3)
#define GPU_CLOCK_EVENT_SYNC_BOOST     (1ULL << 4)
#define GPU_CLOCK_EVENT_SW_THERMAL     (1ULL << 5)
#define GPU_CLOCK_EVENT_HW_THERMAL     (1ULL << 6)
#define GPU_CLOCK_EVENT_HW_POWER_BRAKE (1ULL << 7)
#define GPU_CLOCK_EVENT_DISPLAY_CLOCK  (1ULL << 8)
#define GPU_CLOCK_EVENTS_ALL           ((1ULL << 9) - 1)

struct gpu_sample {
    uint32_t valid;
    bool lost; /* the GPU answered NVML_ERROR_GPU_IS_LOST */
    unsigned temp_c, mem_temp_c;
    unsigned power_mw;
    uint64_t energy_mj;          /* total since driver load */
    unsigned util_gpu, util_mem; /* percent */
    unsigned util_enc, util_dec; /* percent */
    unsigned sm_clock_mhz, mem_clock_mhz;
    uint64_t fb_total_mib, fb_free_mib, fb_used_mib, fb_reserved_mib;
    unsigned pcie_replay;
    uint64_t clock_event_reasons; /* GPU_CLOCK_EVENT_* bits */
    uint64_t ecc_sbe_vol, ecc_dbe_vol, ecc_sbe_agg, ecc_dbe_agg;
    unsigned retired_sbe, retired_dbe;
    bool retired_pending;
    unsigned remapped_cor, remapped_unc;
    bool remap_pending, remap_failure;
    uint64_t nvlink_bw_total; /* NVML_FI_DEV_NVLINK_BANDWIDTH_C0_TOTAL */
    uint64_t nvlink_crc_flit, nvlink_crc_data, nvlink_replay, nvlink_recovery;
    uint64_t violation_ns[6]; /* power, thermal, sync boost, board limit, low util, reliability */
};

/* Reads telemetry of GPU `index`. A lost GPU gives 0 with sample->lost set; other per-field
 * failures just leave the field's valid bit clear. */
int gpu_sample_read(struct gpu_lib *lib, unsigned index, struct gpu_sample *ret, struct err *e);
/* How many compute processes run on GPU `index` (NVML's running processes, MIG instances' too):
 * a GPU reset needs none. A lost GPU is an error (-ENODEV with NVML's words). */
int gpu_process_count(struct gpu_lib *lib, unsigned index, unsigned *ret, struct err *e);

/* Events (XID critical errors, ECC): kinds as bits, for a subscription mask and an event. */
#define GPU_EVENT_ECC_SBE (1ULL << 0) /* single-bit ECC error */
#define GPU_EVENT_ECC_DBE (1ULL << 1) /* double-bit ECC error */
#define GPU_EVENT_XID     (1ULL << 3) /* XID critical error; the XID in gpu_event.data */

struct gpu_event {
    unsigned gpu_index;
    char uuid[GPU_UUID_MAX];
    uint64_t type;         /* one GPU_EVENT_* bit (0 for a kind gpu.h does not name) */
    uint64_t data;         /* the XID for XID events */
    unsigned gi_id, ci_id; /* 0xFFFFFFFF when the whole GPU */
};

struct gpu_events;
/* Subscribes every GPU to mask (GPU_EVENT_* bits) & supported types. GPUs that do not support
 * events are skipped (listed in the log), not an error. */
int gpu_events_open(struct gpu_lib *lib, uint64_t mask, struct gpu_events **ret, struct err *e);
/* 0 with *ret filled, -ETIMEDOUT when nothing arrived in timeout_ms, other negatives on error. */
int gpu_events_wait(struct gpu_events *ev, unsigned timeout_ms, struct gpu_event *ret,
                    struct err *e);
void gpu_events_free(struct gpu_events *ev);
DEFINE_CLEANUP_FUNC(struct gpu_events, gpu_events_free)

/* ---- profiling metrics: GPU Performance Monitoring (Hopper and newer) ---------------------- */

/* The profiling fields dcgm-exporter serves under DCGM's names (DCGM_FI_PROF_*), in DCGM's units:
 * activities are ratios 0..1 of the interval, traffic is bytes per second. docs/
 * profiling-metrics.md says where each comes from. */
enum gpu_prof_field {
    GPU_PROF_GR_ENGINE_ACTIVE,
    GPU_PROF_SM_ACTIVE,
    GPU_PROF_SM_OCCUPANCY,
    GPU_PROF_PIPE_TENSOR_ACTIVE,
    GPU_PROF_DRAM_ACTIVE,
    GPU_PROF_PIPE_FP64_ACTIVE,
    GPU_PROF_PIPE_FP32_ACTIVE,
    GPU_PROF_PIPE_FP16_ACTIVE,
    GPU_PROF_PCIE_TX_BYTES,
    GPU_PROF_PCIE_RX_BYTES,
    GPU_PROF_NVLINK_TX_BYTES,
    GPU_PROF_NVLINK_RX_BYTES,
    GPU_PROF_COUNT
};
/* DCGM's name ("DCGM_FI_PROF_SM_ACTIVE") and field id (1002); NULL and 0 outside the enum. */
const char *gpu_prof_name(enum gpu_prof_field f);
unsigned gpu_prof_dcgm_id(enum gpu_prof_field f);

/* One set of values: value[f] is valid where bit (1u << f) of valid is set (a metric the GPU, the
 * driver or a MIG instance does not count stays clear). */
struct gpu_prof {
    uint32_t valid;
    double value[GPU_PROF_COUNT];
};

#define GPU_GPM_GI_MAX 16 /* GPU instances of one GPU (NVML numbers them 0..14) */

struct gpu_gpm_metrics {
    uint64_t interval_ms; /* between the two samples, by the times gpu_gpm_sample was given */
    struct gpu_prof gpu;  /* the whole GPU */
    size_t n_gi;
    struct {
        unsigned gi_id; /* the MIG GPU instance (gpu_mig_device.gi_id) */
        int error;      /* 0, or why it has no values (negative errno; GPU_ERR_NOT_SUPPORTED
                         * where the driver cannot sample an instance) */
        struct gpu_prof prof;
    } gi[GPU_GPM_GI_MAX]; /* in the sampler's order: the inventory's, each GPU instance once */
};

/* 1 where GPU `gpu` (NVML index) supports GPM, 0 where it or the driver does not (a GPU before
 * Hopper; a libnvidia-ml older than NVML 11.8, without the symbols), GPU_ERR_LOST for a lost GPU,
 * another negative code on other failures. */
int gpu_gpm_support(struct gpu_lib *lib, unsigned gpu, struct err *e);

/* The sampler of one inventory GPU: the whole GPU and, when dev->mig_enabled, each of its MIG GPU
 * instances. Its NVML samples (two per target) and its request are allocated here, once; a
 * collection allocates nothing. GPU_ERR_NOT_SUPPORTED (the error says why) where GPM is not
 * there; a new MIG layout needs a new sampler. max_age_ms (0: none) is the oldest a previous
 * sample may be and still pair with the next (an interval longer than that is refused as stale).
 * Not thread-safe; free it before lib. */
struct gpu_gpm_sampler;
int gpu_gpm_sampler_new(struct gpu_lib *lib, const struct gpu_device *dev, uint64_t max_age_ms,
                        struct gpu_gpm_sampler **ret, struct err *e);
void gpu_gpm_sampler_free(struct gpu_gpm_sampler *s); /* accepts NULL */
DEFINE_CLEANUP_FUNC(struct gpu_gpm_sampler, gpu_gpm_sampler_free)
/* Takes a sample of every target at now_ms (the caller's clock, monotonic): it becomes the
 * latest, the one before it the previous. GPU_ERR_LOST or another error when the GPU's own
 * sample fails (the sampler starts over: two new samples make the next metrics); a GPU
 * instance's failure is kept for its metrics. */
int gpu_gpm_sample(struct gpu_gpm_sampler *s, uint64_t now_ms, struct err *e);
/* The metrics between the previous sample and the latest. -EAGAIN before two samples, or when
 * the latest is not later than the previous; -ESTALE when the previous is older than max_age_ms
 * before the latest (the next sample pairs with the latest again). */
int gpu_gpm_metrics(struct gpu_gpm_sampler *s, struct gpu_gpm_metrics *ret, struct err *e);

/* ---- errors and sysfs ----------------------------------------------------------------------- */

/* The code a call returns when NVML answered NVML_ERROR_GPU_IS_LOST. */
#define GPU_ERR_LOST (-ENXIO)
/* The code for a feature the driver or GPU does not support (NVML_ERROR_NOT_SUPPORTED, or a
 * symbol missing from an older libnvidia-ml: NVML_ERROR_FUNCTION_NOT_FOUND). */
#define GPU_ERR_NOT_SUPPORTED (-EOPNOTSUPP)

/* Maps an nvmlReturn_t to gpuop's negative errno-style code (0 for NVML_SUCCESS). */
int gpu_nvml_code(int nvml_return);
/* NVML's text for a return code as the loaded library words it, or gpuop's own; never NULL. */
const char *gpu_nvml_string(const struct gpu_lib *lib, int nvml_return);

/* NVML's bus id "00000000:18:00.0" (or "0000:18:00.0") in its parts; -EINVAL otherwise. */
int gpu_bus_id_parse(const char *s, unsigned *domain, unsigned *bus, unsigned *dev, unsigned *fn);
/* The sysfs name of a PCI device from NVML's bus id: "00000000:18:00.0" -> "0000:18:00.0".
 * -EINVAL for something that is not a bus id. */
int gpu_bus_id_sysfs(const char *bus_id, char *buf, size_t n);
/* NUMA node and PCI class (0x0302, 0x0300) of a GPU from
 * $GPUOP_SYSFS_ROOT (default /sys)/bus/pci/devices/<bus>/{numa_node,class}. Either output may
 * be NULL. A missing file is -ENOENT; garbage is -EINVAL; outputs are written only on success. */
int gpu_sysfs_pci(const char *bus_id, int *ret_numa_node, unsigned *ret_pci_class, struct err *e);

/* vGPU as the PCI configuration space tells it: NVIDIA's vendor-specific capability carrying the
 * "VF" signature marks a vGPU (a guest's virtual GPU), and its host-driver record names the
 * hypervisor's vGPU manager version and branch (empty when the record is absent). */
struct gpu_vgpu_info {
    bool present;
    char host_driver_version[11];
    char host_driver_branch[11];
};
/* Pure: one device's configuration space. 1 (ret filled) for a vGPU, 0 for another device,
 * -EINVAL when shorter than 256 bytes (what an unprivileged read of sysfs' config gets). */
int gpu_pci_vgpu_parse(const uint8_t *config, size_t len, struct gpu_vgpu_info *ret);
/* Every NVIDIA device (vendor 0x10de) under $GPUOP_SYSFS_ROOT (default /sys)/bus/pci/devices:
 * present is true, with the first vGPU's host driver, when any is a vGPU. An error when the
 * devices cannot be listed or one's vendor or whole configuration space cannot be read. */
int gpu_sysfs_vgpu(struct gpu_vgpu_info *ret, struct err *e);

/* ---- MIG management (for the MIG manager; needs root on a real driver) --------------------- */

#define GPU_MIG_PLACEMENTS_MAX 16

struct gpu_mig_placement {
    unsigned start, size;
};

/* One GPU-instance profile the GPU offers (nvidia-smi mig -lgip). */
struct gpu_mig_profile {
    char name[GPU_PROFILE_MAX]; /* "1g.10gb", "1g.10gb+me" */
    unsigned index;             /* NVML_GPU_INSTANCE_PROFILE_* index */
    unsigned id;                /* hardware profile id (what Create takes) */
    unsigned slices;
    uint64_t memory_mib;
    unsigned max_count; /* instanceCount */
    unsigned multiprocessors, copy_engines, decoders, encoders, jpegs, ofas;
    size_t n_placements;
    struct gpu_mig_placement placements[GPU_MIG_PLACEMENTS_MAX];
};

struct gpu_mig_mode {
    bool current, pending;
    bool reset_required; /* current != pending after the call: the GPU needs a reset */
};

/* Sets the MIG mode of GPU `gpu` (NVML index) and reports current/pending afterwards. */
int gpu_mig_set_mode(struct gpu_lib *lib, unsigned gpu, bool enable, struct gpu_mig_mode *ret,
                     struct err *e);
/* Lists the GPU-instance profiles of a GPU in MIG mode, in NVML index order (caller frees
 * *ret with free()). */
int gpu_mig_profiles(struct gpu_lib *lib, unsigned gpu, struct gpu_mig_profile **ret, size_t *ret_n,
                     struct err *e);
/* Creates a GPU instance of `profile` ("3g.40gb", "1g.10gb+me") with one compute instance
 * spanning it, or, for "<c>c.<profile>" ("1c.3g.40gb"), one compute instance of c slices.
 * A compute-instance failure destroys the new GPU instance again. Outputs may be NULL. */
int gpu_mig_create(struct gpu_lib *lib, unsigned gpu, const char *profile, unsigned *ret_gi_id,
                   unsigned *ret_ci_id, struct err *e);
/* The same at the placement starting at memory slice `start` (one of the profile's
 * placements), or where the driver chooses with GPU_MIG_ANY_PLACEMENT. A placement that is taken
 * or is not the profile's is NVML's error (-ENOSPC, -EINVAL), naming the placement. */
#define GPU_MIG_ANY_PLACEMENT 0xFFFFFFFFu
int gpu_mig_create_at(struct gpu_lib *lib, unsigned gpu, const char *profile, unsigned start,
                      unsigned *ret_gi_id, unsigned *ret_ci_id, struct err *e);
/* Destroys every compute instance and GPU instance on the GPU. */
int gpu_mig_destroy_all(struct gpu_lib *lib, unsigned gpu, struct err *e);
/* Destroys one GPU instance (its compute instances first), leaving the others as they are: what
 * a slice made on demand needs when its claim ends. -ENOENT when the GPU has no instance gi_id. */
int gpu_mig_destroy(struct gpu_lib *lib, unsigned gpu, unsigned gi_id, struct err *e);

/* ---- MIG capability device nodes (pure) ---------------------------------------------------- */

/* Where the driver lists the minors of /dev/nvidia-caps/nvidia-cap<N>. */
#define GPU_MIG_MINORS "/proc/driver/nvidia-caps/mig-minors"

/* The /dev/nvidia-caps/nvidia-cap<N> minor of a MIG GPU instance (ci < 0) or compute instance
 * on the GPU with device minor gpu_minor: from mig_minors (GPU_MIG_MINORS text) when it lists it
 * ("gpu<m>/gi<g>/access <N>", "gpu<m>/gi<g>/ci<c>/access <N>"), else the driver's layout
 * ("config" 1, "monitor" 2, then per GPU minor 15 GPU instances of 9 minors each: the GI's
 * access, then its 8 compute instances'). mig_minors may be NULL. */
unsigned gpu_mig_cap_minor(const char *mig_minors, unsigned gpu_minor, unsigned gi, int ci);

#endif
