/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nodestate: what the node agents report, in the places others read it.
 *
 *  - The status files in /run/nvidia/validations, with NVIDIA's names and contents, so NVIDIA's
 *    operand containers and gpuop's wait on the same files: `.driver-ctr-ready` (the driver
 *    container's startup probe), `driver-ready` (an env file: IS_HOST_DRIVER, NVIDIA_DRIVER_ROOT,
 *    DRIVER_ROOT_CTR_PATH, NVIDIA_DEV_ROOT, DEV_ROOT_CTR_PATH), `toolkit-ready`, `cuda-ready`,
 *    `plugin-ready`; and gpuop's `.toolkit-ctr-ready`, the toolkit daemon's counterpart of
 *    `.driver-ctr-ready` (the runtime it configured and the CDI spec it wrote, as an env file).
 *    Written atomically (util's temp file and rename), so a reader never sees half a file.
 *  - The node annotations gpuop's agents write and the operator (and `gpuop status`) read, each
 *    a JSON object in one annotation value, one writer per key:
 *      gpuop.dev/driver-owner            the driver manager: who owns the driver on this node
 *                                        (the validator's driver check: the owner it verified,
 *                                        with NVML's version)
 *      validation.gpuop.dev/<component>  the validator: driver, toolkit, cuda, plugin
 *      gpuop.dev/gpu-count               the node status exporter: physical vs advertised GPUs
 *  - The expected extended resources of a node's GPUs under a MIG strategy, and their comparison
 *    with what the node advertises (the validator's plugin check and the node status exporter
 *    share it): "advertised GPUs silently fewer than physical ones" is an incident.
 *
 *  - The driver on a node root (nodestate-root.c): the one probe of what a node's files show
 *    about the NVIDIA driver (kernel modules, nvidia-smi and libnvidia-ml on the host and under
 *    the containerized driver's root, the driver container's startup marker), which the driver
 *    manager, the validator and `gpuop doctor` each decide from.
 *
 * Layer: beside kube (it reads quantities with kobj). Pure but for
 * nodestate_file_write/nodestate_file_remove/nodestate_file_exists and the node root probe (file
 * I/O). Every decoder bounds its input and names the annotation or file and the field in its
 * errors.
 */
#ifndef GPUOP_NODESTATE_H
#define GPUOP_NODESTATE_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "gpu.h"
#include "util.h"

/* ---- status files ------------------------------------------------------------------------- */

#define NODESTATE_VALIDATIONS_DIR "/run/nvidia/validations"

enum nodestate_file {
    NODESTATE_DRIVER_CTR_READY,  /* ".driver-ctr-ready": the driver container's startup probe */
    NODESTATE_TOOLKIT_CTR_READY, /* ".toolkit-ctr-ready": the toolkit daemon, once configured */
    NODESTATE_DRIVER_READY,      /* "driver-ready": validator --component=driver */
    NODESTATE_TOOLKIT_READY,     /* "toolkit-ready" */
    NODESTATE_CUDA_READY,        /* "cuda-ready" */
    NODESTATE_PLUGIN_READY,      /* "plugin-ready" */
    /* the driver check, for each module the driver container enabled (.driver-ctr-ready) */
    NODESTATE_PEERMEM_READY,   /* "nvidia-peermem-ready": GPU_DIRECT_RDMA_ENABLED */
    NODESTATE_NVIDIA_FS_READY, /* "nvidia-fs-ready": GDS_ENABLED */
    NODESTATE_GDRCOPY_READY,   /* "gdrcopy-ready": GDRCOPY_ENABLED */
    NODESTATE_FILE_COUNT,
};

/* The file's name within the validations folder. */
const char *nodestate_file_name(enum nodestate_file f);
/* "<dir>/<name>" into buf; -ENAMETOOLONG when it does not fit. dir NULL: NODESTATE_VALIDATIONS_DIR.
 */
int nodestate_file_path(const char *dir, enum nodestate_file f, char *buf, size_t n);

/* The env-file format of the status files ("KEY=value" lines, as NVIDIA's validator writes
 * them and shell `source`s them). Values are written bare; a value with a byte outside
 * [A-Za-z0-9_./:@%+,=-] is refused (-EINVAL), so a file always sources as written. */
struct nodestate_kv {
    const char *key;
    const char *value;
};
/* Renders n pairs into a malloc'ed NUL-terminated text; -EINVAL names the bad key or value. */
int nodestate_env_render(const struct nodestate_kv *kv, size_t n, char **ret, struct err *e);
/* Looks key up in an env-file text (what nodestate_env_render writes; blank lines and '#' comments
 * skipped, surrounding quotes dropped). Copies the value into buf; -ENOENT when absent,
 * -ENAMETOOLONG when it does not fit. */
int nodestate_env_get(const char *text, size_t len, const char *key, char *buf, size_t n);

/* What driver-ready says, NVIDIA's variables. */
struct nodestate_driver_ready {
    bool is_host_driver;       /* IS_HOST_DRIVER */
    char driver_root[256];     /* NVIDIA_DRIVER_ROOT: "/" or "/run/nvidia/driver" (host view) */
    char driver_root_ctr[256]; /* DRIVER_ROOT_CTR_PATH: where the validator saw it */
    char dev_root[256];        /* NVIDIA_DEV_ROOT */
    char dev_root_ctr[256];    /* DEV_ROOT_CTR_PATH */
};
int nodestate_driver_ready_render(const struct nodestate_driver_ready *d, char **ret,
                                  struct err *e);
/* path names the file in errors; a missing IS_HOST_DRIVER or NVIDIA_DRIVER_ROOT is -EINVAL. */
int nodestate_driver_ready_parse(const char *path, const char *text, size_t len,
                                 struct nodestate_driver_ready *ret, struct err *e);

/* Writes the file atomically (mode 0644; the folder is created). text NULL writes an empty
 * file. dir NULL: NODESTATE_VALIDATIONS_DIR. */
int nodestate_file_write(const char *dir, enum nodestate_file f, const char *text, struct err *e);
/* Removes it; a missing file is success. */
int nodestate_file_remove(const char *dir, enum nodestate_file f, struct err *e);
/* true when the file exists (any type but a directory). */
bool nodestate_file_exists(const char *dir, enum nodestate_file f);

/* ---- node annotations --------------------------------------------------------------------- */

#define NODESTATE_ANN_DRIVER_OWNER "gpuop.dev/driver-owner"
#define NODESTATE_ANN_GPU_COUNT    "gpuop.dev/gpu-count"
/* validation.gpuop.dev/<component> */
#define NODESTATE_ANN_VALIDATION_PREFIX "validation.gpuop.dev/"
#define NODESTATE_ANN_MAX               16384 /* longest annotation value a decoder accepts */
#define NODESTATE_REASON_MAX            512
#define NODESTATE_TIME_MAX              32 /* RFC 3339 UTC */

enum nodestate_owner {
    NODESTATE_OWNER_NONE,      /* no driver anywhere */
    NODESTATE_OWNER_HOST,      /* a driver pre-installed on the host */
    NODESTATE_OWNER_CONTAINER, /* the containerized driver (gpuop's or NVIDIA's driver pod) */
};
const char *nodestate_owner_name(enum nodestate_owner o); /* "none", "host", "container" */
int nodestate_owner_parse(const char *s, enum nodestate_owner *ret);

/* gpuop.dev/driver-owner: {"owner":"host","version":"550.127.05","source":"...","time":"..."} */
struct nodestate_driver_owner {
    enum nodestate_owner owner;
    char version[64]; /* "" when unknown */
    char
        source[NODESTATE_REASON_MAX]; /* how it was found: "module nvidia loaded (/host/sys/...)" */
    char time[NODESTATE_TIME_MAX];
};
int nodestate_driver_owner_render(const struct nodestate_driver_owner *o, char **ret);
int nodestate_driver_owner_parse(const char *text, struct nodestate_driver_owner *ret,
                                 struct err *e);

/* The validator's components, in chain order. */
enum nodestate_component {
    NODESTATE_COMP_DRIVER,
    NODESTATE_COMP_TOOLKIT,
    NODESTATE_COMP_CUDA,
    NODESTATE_COMP_PLUGIN,
    NODESTATE_COMP_COUNT,
};
const char *nodestate_component_name(
    enum nodestate_component c); /* "driver", "toolkit", "cuda", "plugin" */
int nodestate_component_parse(const char *s, enum nodestate_component *ret);
/* The component's status file (NODESTATE_DRIVER_READY, ...). */
enum nodestate_file nodestate_component_file(enum nodestate_component c);
/* "validation.gpuop.dev/<component>" into buf (>= 64 bytes). */
void nodestate_validation_key(enum nodestate_component c, char *buf, size_t n);

enum nodestate_vstate {
    NODESTATE_V_WAITING, /* "waiting": retrying within --wait (the reason says on what) */
    NODESTATE_V_OK,      /* "ok" */
    NODESTATE_V_FAILED,  /* "failed": the check exited non-zero */
};
const char *nodestate_vstate_name(enum nodestate_vstate s);
int nodestate_vstate_parse(const char *s, enum nodestate_vstate *ret);

/* validation.gpuop.dev/<c>: {"state":"failed","reason":"...","time":"..."} */
struct nodestate_validation {
    enum nodestate_vstate state;
    char reason[NODESTATE_REASON_MAX]; /* one line; "" when ok */
    char time[NODESTATE_TIME_MAX];
};
int nodestate_validation_render(const struct nodestate_validation *v, char **ret);
int nodestate_validation_parse(const char *text, struct nodestate_validation *ret, struct err *e);

/* ---- expected vs advertised GPUs ---------------------------------------------------------- */

#define NODESTATE_RESOURCE_MAX  64           /* "nvidia.com/mig-1g.10gb" */
#define NODESTATE_RESOURCES_MAX 32           /* distinct resources one node reports */
#define NODESTATE_MISSING_MAX   64           /* GPUs or MIG devices named as not advertised */
#define NODESTATE_GPU_NAME_MAX  GPU_UUID_MAX /* a GPU's name: its UUID, or "GPU 3 (no UUID)" */

enum nodestate_mig_strategy { NODESTATE_MIG_NONE, NODESTATE_MIG_SINGLE, NODESTATE_MIG_MIXED };
/* "none", "single", "mixed" (nvidia.com/mig.strategy's values); NULL or "" is none. */
int nodestate_mig_strategy_parse(const char *s, enum nodestate_mig_strategy *ret);

/* One physical GPU as the agents see it through NVML (plain data: no NVML types here). */
struct nodestate_gpu {
    const char *uuid;
    bool lost;                       /* NVML_ERROR_GPU_IS_LOST */
    bool mig_enabled;                /* current MIG mode */
    size_t n_mig;                    /* MIG devices, when mig_enabled */
    const char *const *mig_profiles; /* n_mig canonical names: "1g.10gb" */
    const char *const *mig_uuids;    /* n_mig "MIG-..." (may be NULL) */
};

/* NVML's inventory as nodestate's plain GPUs (the validator's and the node status exporter's
 * view of it). The arrays point into the inventory and into names, which the struct owns. */
struct nodestate_gpus {
    struct nodestate_gpu *g;
    size_t n;
    const char **mig_names;                /* every MIG device's profile, then its UUID */
    char (*names)[NODESTATE_GPU_NAME_MAX]; /* the names of GPUs without a UUID */
};
/* A GPU is named by its UUID. One NVML could not read the UUID of ("" or "-": a lost GPU may not
 * tell it) is named by known[its index] where that holds the UUID last read there, else "GPU
 * <index> (no UUID)". known (may be NULL; n_known entries by GPU index) is updated with every
 * UUID read. MIG devices only of GPUs in MIG mode. Clear with nodestate_gpus_clear. */
void nodestate_gpus_from(const struct gpu_inventory *inv, char (*known)[GPU_UUID_MAX],
                         size_t n_known, struct nodestate_gpus *ret);
void nodestate_gpus_clear(struct nodestate_gpus *g);

struct nodestate_resource_count {
    char name[NODESTATE_RESOURCE_MAX];
    int64_t count;
};

/* What the node should advertise, as the device plugin under that strategy does: none, every
 * GPU as nvidia.com/gpu (MIG mode or not); single, nvidia.com/gpu counts each MIG-enabled GPU's
 * MIG devices and each other GPU once; mixed, nvidia.com/gpu for GPUs without MIG and
 * nvidia.com/mig-<profile> per MIG device. Lost GPUs count (they are what is missing). Sorted by
 * name; -E2BIG past NODESTATE_RESOURCES_MAX. */
int nodestate_expected_resources(const struct nodestate_gpu *gpus, size_t n,
                                 enum nodestate_mig_strategy s,
                                 struct nodestate_resource_count *ret, size_t *ret_n,
                                 struct err *e);

/* What the node has, beside what it should have. */
struct nodestate_gpu_count {
    int64_t physical;                /* GPUs NVML lists */
    size_t n_expected, n_advertised; /* sorted by name */
    struct nodestate_resource_count expected[NODESTATE_RESOURCES_MAX];
    struct nodestate_resource_count
        advertised[NODESTATE_RESOURCES_MAX]; /* allocatable, nvidia.com/ only */
    bool short_;                             /* some expected resource has fewer allocatable */
    /* Named shortfalls, "GPU-... (lost)", "nvidia.com/mig-1g.10gb: 2 of 7": at most
     * NODESTATE_MISSING_MAX, one line each. */
    size_t n_missing;
    char missing[NODESTATE_MISSING_MAX][128];
    /* Set by the writer (node status exporter): when the shortfall was first seen, and whether
     * it has lasted past the grace period (the incident the operator reports). */
    char since[NODESTATE_TIME_MAX];
    bool mismatch;
};

/* Compares expected with the node's allocatable (allocatable: status.allocatable, a JSON
 * object text or NULL; only nvidia.com/ resources are read). A resource renamed by a sharing
 * config (nvidia.com/gpu.shared) counts for its base name; replicas make more, never fewer.
 * Lost GPUs are named. Fills everything but since and mismatch. */
int nodestate_gpu_count_compare(const struct nodestate_gpu *gpus, size_t n,
                                enum nodestate_mig_strategy s, const char *allocatable_json,
                                struct nodestate_gpu_count *ret, struct err *e);

/* gpuop.dev/gpu-count: {"physical":8,"expected":{...},"advertised":{...},"missing":[...],
 * "short":true,"since":"...","mismatch":true} */
int nodestate_gpu_count_render(const struct nodestate_gpu_count *c, char **ret);
int nodestate_gpu_count_parse(const char *text, struct nodestate_gpu_count *ret, struct err *e);

/* ---- the toolkit's marker ---------------------------------------------------------------- */

#define NODESTATE_CDI_SPEC_DEFAULT "/var/run/cdi/nvidia.yaml"

/* The handler binary gpuop's toolkit installs in its install folder (TOOLKIT_INSTALL_DIR). */
#define NODESTATE_TOOLKIT_WRAPPER "gpuop-runtime"
/* The handler of a toolkit gpuop does not manage (NVIDIA's package). */
#define NODESTATE_RUNTIME_PATH_DEFAULT "/usr/bin/nvidia-container-runtime"

/* .toolkit-ctr-ready, an env file the toolkit daemon writes once the node is configured. Keys
 * read (each optional): RUNTIME (containerd, cri-o, docker, or none when it left the runtime
 * alone), RUNTIME_CONFIG (the runtime's main config, a host path), RUNTIME_NAME (the handler,
 * default "nvidia"), RUNTIME_PATH (the binary it runs; default TOOLKIT_INSTALL_DIR/
 * NODESTATE_TOOLKIT_WRAPPER, else NODESTATE_RUNTIME_PATH_DEFAULT), CDI_SPEC (the spec, a host path;
 * default NODESTATE_CDI_SPEC_DEFAULT), CDI_ENABLED (true/false, default true), TOOLKIT_INSTALL_DIR
 * (gpuop installed there: the CDI spec's hooks run <dir>/gpuop). */
struct nodestate_toolkit_marker {
    bool check_runtime; /* false when RUNTIME=none */
    char runtime[32];   /* "" : detect */
    char runtime_config[PATH_MAX];
    char runtime_name[64];
    char runtime_path[PATH_MAX];
    char cdi_spec[PATH_MAX];
    char install_dir[PATH_MAX]; /* TOOLKIT_INSTALL_DIR: where gpuop is installed; "" when absent */
    bool cdi_enabled;
};
/* text NULL: the defaults (a toolkit not managed by gpuop). path names the file in errors. */
int nodestate_toolkit_marker_parse(const char *path, const char *text, size_t len,
                                   struct nodestate_toolkit_marker *ret, struct err *e);

/* ---- the last drain ----------------------------------------------------------------------- */

/* gpuop.dev/last-drain, on the node drained: {"time":"...","reason":"...","by":"driver-manager"}.
 * Written when a drain of the node starts (cordon, then evictions), so `gpuop status` can say
 * which node was drained last, when and why. */
#define NODESTATE_ANN_LAST_DRAIN "gpuop.dev/last-drain"
struct nodestate_drain {
    char time[NODESTATE_TIME_MAX];
    char reason[NODESTATE_REASON_MAX];
    char by[64]; /* the component: "driver-manager", "operator" */
};
int nodestate_drain_render(const struct nodestate_drain *d, char **ret);
int nodestate_drain_parse(const char *text, struct nodestate_drain *ret, struct err *e);

/* ---- the driver on a node root ------------------------------------------------------------ */

/* The kernel modules, in unload order (dependants first). */
enum nodestate_module {
    NODESTATE_MOD_NVIDIA_DRM,
    NODESTATE_MOD_NVIDIA_MODESET,
    NODESTATE_MOD_NVIDIA_UVM,
    NODESTATE_MOD_NVIDIA_PEERMEM,
    NODESTATE_MOD_NVIDIA_FS, /* GPUDirect Storage (the driver pod's nvidia-fs-ctr) */
    NODESTATE_MOD_GDRDRV,    /* GDRCopy (nvidia-gdrcopy-ctr) */
    NODESTATE_MOD_NVIDIA,
    NODESTATE_MOD_COUNT,
};
const char *nodestate_module_name(enum nodestate_module m); /* "nvidia_drm", ... */

#define NODESTATE_VERSION_MAX 64

/* The driver's library folders relative to a root, in the order NVIDIA's toolkit searches a
 * driver root ("" is the root itself; x86_64's and aarch64's folders, their nvidia/current, then
 * /usr/lib); NULL-terminated. The one list: the CDI spec's driver lookup (nvcdi), the driver
 * probe, the validator and `gpuop doctor` all read a node's driver through it. */
extern const char *const nodestate_lib_dirs[];
/* The folders of the driver's binaries (nvidia-smi, ...), in the executable locator's order
 * (/usr/local/sbin ... /bin), then /opt/bin; NULL-terminated. The same users. */
extern const char *const nodestate_bin_dirs[];

/* Finds `name` in root/<dir> for the dirs given (a regular, non-empty file once resolved inside
 * root, or else as this process sees the path; executable when want_exec). Writes the resolved
 * path (root included) into buf. -ENOENT when none has it; -ENAMETOOLONG when a path does not
 * fit. */
int nodestate_root_find(const char *root, const char *const *dirs, const char *name, bool want_exec,
                        char *buf, size_t n);
/* "550.127.05": digits and dots, at least one dot, shorter than NODESTATE_VERSION_MAX. */
bool nodestate_version_like(const char *s, size_t n);
/* Calls fn(path, version) for each <stem>.so.<version> in root's library folders
 * (nodestate_lib_dirs order); a non-zero return from fn stops the walk and is returned. */
typedef int (*nodestate_versioned_fn)(const char *path, const char *version, void *ud);
int nodestate_root_versioned_libs(const char *root, const char *stem, nodestate_versioned_fn fn,
                                  void *ud);

/* What a node root shows about the NVIDIA driver. Paths include the root they were found under. */
struct nodestate_driver_facts {
    bool module[NODESTATE_MOD_COUNT];           /* <host>/sys/module/<name> exists */
    char module_version[NODESTATE_VERSION_MAX]; /* the loaded nvidia's; "" when unknown */
    char host_smi[PATH_MAX];                    /* nvidia-smi in the host's bin folders, "" none */
    char host_nvml[PATH_MAX];                   /* libnvidia-ml.so.1 in the host's lib folders */
    char host_lib[PATH_MAX];                    /* a libnvidia-ml.so.<version> on the host; the
                                                   loaded version's when there is one */
    char host_lib_version[NODESTATE_VERSION_MAX];
    /* the containerized driver's root (/run/nvidia/driver) */
    bool root_used; /* it holds anything: a driver container laid it out */
    char root_smi[PATH_MAX];
    char root_nvml[PATH_MAX];
    char root_lib[PATH_MAX];
    char root_lib_version[NODESTATE_VERSION_MAX];
    bool root_dev;        /* <driver root>/dev/nvidiactl */
    bool root_mountpoint; /* the driver root is a mount point (of this mount namespace) */
    bool ctr_ready;       /* .driver-ctr-ready in the validations folder */
};

/* Reads host_root (the node's root as mounted here: sys/module, proc/driver/nvidia/version, the
 * usual bin and lib folders), driver_root (where the containerized driver lays out its root; a
 * missing one is no driver root) and validations_dir (NULL: NODESTATE_VALIDATIONS_DIR). A host root
 * that is not a readable folder is -ENOENT/-ENOTDIR/-EACCES naming it. */
int nodestate_driver_probe(const char *host_root, const char *driver_root,
                           const char *validations_dir, struct nodestate_driver_facts *ret,
                           struct err *e);

/* ---- Node Feature Discovery's labels ------------------------------------------------------ */

/* What nfd-worker's pci, kernel and system sources label, computed for kubelet-sim's simulated
 * nodes and by `gpuop node-discovery` on clusters without NFD. */
#define NODESTATE_NFD_PREFIX "feature.node.kubernetes.io/"
#define NODESTATE_NFD_LABELS_ANN \
    "nfd.node.kubernetes.io/feature-labels" /* nfd-master's owned set */
#define NODESTATE_NFD_WORKER_ANN "nfd.node.kubernetes.io/worker.version"
#define NODESTATE_DISCOVERY_ANN  "gpuop.dev/node-discovery-labels" /* gpuop's owned set */

struct nodestate_nfd_input {
    const char *const *pci_classes; /* NVIDIA display functions' class and subclass ("0302") */
    size_t n_pci;
    const char *os_id, *os_version_id; /* os-release ID and VERSION_ID; NULL: no label */
    const char *kernel;                /* "5.15.0-127-generic"; NULL: no kernel labels */
};
/* pci-10de.present (the GPU operator chart's NFD setting, deviceLabelFields [vendor]) and
 * pci-<class>_10de.present (NFD's default [class, vendor]) when any NVIDIA function is listed;
 * kernel-version.{full,major,minor,revision}; system-os_release.{ID,VERSION_ID,
 * VERSION_ID.major,VERSION_ID.minor}. A value that is not a valid label value is left out. A new
 * object. Pure. */
json_t *nodestate_nfd_labels(const struct nodestate_nfd_input *in);
/* Puts nfd_labels into labels as their owner: the labels named in the annotation ann (the set
 * written last time, names without NFD's prefix, sorted, comma-separated, as nfd-master keeps
 * it) that nfd_labels no longer has are removed, and only those; ann is rewritten. Pure. */
void nodestate_nfd_apply(json_t *labels, json_t *annotations, const json_t *nfd_labels,
                         const char *ann);
/* Whether Node Feature Discovery runs for the node: nfd-master's annotations on it. */
bool nodestate_nfd_present(const json_t *node);
/* The class and subclass ("0302") of each NVIDIA display function (vendor 0x10de, class 0x03xxxx)
 * under sysfs/bus/pci/devices, sorted; *ret NULL-terminated (nodestate_strv_free). An error when
 * the folder cannot be listed. */
int nodestate_pci_nvidia_gpu_classes(const char *sysfs, char ***ret, size_t *ret_n, struct err *e);
void nodestate_strv_free(char **v);
/* ID and VERSION_ID of an os-release file (unquoted); -ENOENT without an ID. Pure. */
int nodestate_os_release(const char *text, size_t len, char *id, size_t id_n, char *version_id,
                         size_t version_n);

#endif
