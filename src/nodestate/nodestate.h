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
 * ns_file_write/ns_file_remove/ns_file_exists and the node root probe (file I/O). Every decoder
 * bounds its input and names the annotation or file and the field in its errors.
 */
#ifndef GPUOP_NODESTATE_H
#define GPUOP_NODESTATE_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "util.h"

/* ---- status files ------------------------------------------------------------------------- */

#define NS_VALIDATIONS_DIR "/run/nvidia/validations"

enum ns_file {
    NS_DRIVER_CTR_READY,  /* ".driver-ctr-ready": the driver container's startup probe */
    NS_TOOLKIT_CTR_READY, /* ".toolkit-ctr-ready": the toolkit daemon, once configured */
    NS_DRIVER_READY,      /* "driver-ready": validator --component=driver */
    NS_TOOLKIT_READY,     /* "toolkit-ready" */
    NS_CUDA_READY,        /* "cuda-ready" */
    NS_PLUGIN_READY,      /* "plugin-ready" */
    NS_FILE_COUNT,
};

/* The file's name within the validations folder. */
const char *ns_file_name(enum ns_file f);
/* "<dir>/<name>" into buf; -ENAMETOOLONG when it does not fit. dir NULL: NS_VALIDATIONS_DIR. */
int ns_file_path(const char *dir, enum ns_file f, char *buf, size_t n);

/* The env-file format of the status files ("KEY=value" lines, as NVIDIA's validator writes
 * them and shell `source`s them). Values are written bare; a value with a byte outside
 * [A-Za-z0-9_./:@%+,=-] is refused (-EINVAL), so a file always sources as written. */
struct ns_kv {
    const char *key;
    const char *value;
};
/* Renders n pairs into a malloc'ed NUL-terminated text; -EINVAL names the bad key or value. */
int ns_env_render(const struct ns_kv *kv, size_t n, char **ret, struct err *e);
/* Looks key up in an env-file text (what ns_env_render writes; blank lines and '#' comments
 * skipped, surrounding quotes dropped). Copies the value into buf; -ENOENT when absent,
 * -ENAMETOOLONG when it does not fit. */
int ns_env_get(const char *text, size_t len, const char *key, char *buf, size_t n);

/* What driver-ready says, NVIDIA's variables. */
struct ns_driver_ready {
    bool is_host_driver;       /* IS_HOST_DRIVER */
    char driver_root[256];     /* NVIDIA_DRIVER_ROOT: "/" or "/run/nvidia/driver" (host view) */
    char driver_root_ctr[256]; /* DRIVER_ROOT_CTR_PATH: where the validator saw it */
    char dev_root[256];        /* NVIDIA_DEV_ROOT */
    char dev_root_ctr[256];    /* DEV_ROOT_CTR_PATH */
};
int ns_driver_ready_render(const struct ns_driver_ready *d, char **ret, struct err *e);
/* path names the file in errors; a missing IS_HOST_DRIVER or NVIDIA_DRIVER_ROOT is -EINVAL. */
int ns_driver_ready_parse(const char *path, const char *text, size_t len,
                          struct ns_driver_ready *ret, struct err *e);

/* Writes the file atomically (mode 0644; the folder is created). text NULL writes an empty
 * file. dir NULL: NS_VALIDATIONS_DIR. */
int ns_file_write(const char *dir, enum ns_file f, const char *text, struct err *e);
/* Removes it; a missing file is success. */
int ns_file_remove(const char *dir, enum ns_file f, struct err *e);
/* true when the file exists (any type but a directory). */
bool ns_file_exists(const char *dir, enum ns_file f);

/* ---- node annotations --------------------------------------------------------------------- */

#define NS_ANN_DRIVER_OWNER "gpuop.dev/driver-owner"
#define NS_ANN_GPU_COUNT    "gpuop.dev/gpu-count"
/* validation.gpuop.dev/<component> */
#define NS_ANN_VALIDATION_PREFIX "validation.gpuop.dev/"
#define NS_ANN_MAX               16384 /* longest annotation value a decoder accepts */
#define NS_REASON_MAX            512
#define NS_TIME_MAX              32 /* RFC 3339 UTC */

enum ns_owner {
    NS_OWNER_NONE,      /* no driver anywhere */
    NS_OWNER_HOST,      /* a driver pre-installed on the host */
    NS_OWNER_CONTAINER, /* the containerized driver (gpuop's or NVIDIA's driver pod) */
};
const char *ns_owner_name(enum ns_owner o); /* "none", "host", "container" */
int ns_owner_parse(const char *s, enum ns_owner *ret);

/* gpuop.dev/driver-owner: {"owner":"host","version":"550.127.05","source":"...","time":"..."} */
struct ns_driver_owner {
    enum ns_owner owner;
    char version[64];           /* "" when unknown */
    char source[NS_REASON_MAX]; /* how it was found: "module nvidia loaded (/host/sys/...)" */
    char time[NS_TIME_MAX];
};
int ns_driver_owner_render(const struct ns_driver_owner *o, char **ret);
int ns_driver_owner_parse(const char *text, struct ns_driver_owner *ret, struct err *e);

/* The validator's components, in chain order. */
enum ns_component {
    NS_COMP_DRIVER,
    NS_COMP_TOOLKIT,
    NS_COMP_CUDA,
    NS_COMP_PLUGIN,
    NS_COMP_COUNT,
};
const char *ns_component_name(enum ns_component c); /* "driver", "toolkit", "cuda", "plugin" */
int ns_component_parse(const char *s, enum ns_component *ret);
/* The component's status file (NS_DRIVER_READY, ...). */
enum ns_file ns_component_file(enum ns_component c);
/* "validation.gpuop.dev/<component>" into buf (>= 64 bytes). */
void ns_validation_key(enum ns_component c, char *buf, size_t n);

enum ns_vstate {
    NS_V_WAITING, /* "waiting": retrying within --wait (the reason says on what) */
    NS_V_OK,      /* "ok" */
    NS_V_FAILED,  /* "failed": the check exited non-zero */
};
const char *ns_vstate_name(enum ns_vstate s);
int ns_vstate_parse(const char *s, enum ns_vstate *ret);

/* validation.gpuop.dev/<c>: {"state":"failed","reason":"...","time":"..."} */
struct ns_validation {
    enum ns_vstate state;
    char reason[NS_REASON_MAX]; /* one line; "" when ok */
    char time[NS_TIME_MAX];
};
int ns_validation_render(const struct ns_validation *v, char **ret);
int ns_validation_parse(const char *text, struct ns_validation *ret, struct err *e);

/* ---- expected vs advertised GPUs ---------------------------------------------------------- */

#define NS_RESOURCE_MAX  64 /* "nvidia.com/mig-1g.10gb" */
#define NS_RESOURCES_MAX 32 /* distinct resources one node reports */
#define NS_MISSING_MAX   64 /* GPUs or MIG devices named as not advertised */

enum ns_mig_strategy { NS_MIG_NONE, NS_MIG_SINGLE, NS_MIG_MIXED };
/* "none", "single", "mixed" (nvidia.com/mig.strategy's values); NULL or "" is none. */
int ns_mig_strategy_parse(const char *s, enum ns_mig_strategy *ret);

/* One physical GPU as the agents see it through NVML (plain data: no NVML types here). */
struct ns_gpu {
    const char *uuid;
    bool lost;                       /* NVML_ERROR_GPU_IS_LOST */
    bool mig_enabled;                /* current MIG mode */
    size_t n_mig;                    /* MIG devices, when mig_enabled */
    const char *const *mig_profiles; /* n_mig canonical names: "1g.10gb" */
    const char *const *mig_uuids;    /* n_mig "MIG-..." (may be NULL) */
};

struct ns_resource_count {
    char name[NS_RESOURCE_MAX];
    int64_t count;
};

/* What the node should advertise, as the device plugin under that strategy does: none, every
 * GPU as nvidia.com/gpu (MIG mode or not); single, nvidia.com/gpu counts each MIG-enabled GPU's
 * MIG devices and each other GPU once; mixed, nvidia.com/gpu for GPUs without MIG and
 * nvidia.com/mig-<profile> per MIG device. Lost GPUs count (they are what is missing). Sorted by
 * name; -E2BIG past NS_RESOURCES_MAX. */
int ns_expected_resources(const struct ns_gpu *gpus, size_t n, enum ns_mig_strategy s,
                          struct ns_resource_count *ret, size_t *ret_n, struct err *e);

/* What the node has, beside what it should have. */
struct ns_gpu_count {
    int64_t physical;                /* GPUs NVML lists */
    size_t n_expected, n_advertised; /* sorted by name */
    struct ns_resource_count expected[NS_RESOURCES_MAX];
    struct ns_resource_count advertised[NS_RESOURCES_MAX]; /* allocatable, nvidia.com/ only */
    bool short_; /* some expected resource has fewer allocatable */
    /* Named shortfalls, "GPU-... (lost)", "nvidia.com/mig-1g.10gb: 2 of 7": at most
     * NS_MISSING_MAX, one line each. */
    size_t n_missing;
    char missing[NS_MISSING_MAX][128];
    /* Set by the writer (node status exporter): when the shortfall was first seen, and whether
     * it has lasted past the grace period (the incident the operator reports). */
    char since[NS_TIME_MAX];
    bool mismatch;
};

/* Compares expected with the node's allocatable (allocatable: status.allocatable, a JSON
 * object text or NULL; only nvidia.com/ resources are read). A resource renamed by a sharing
 * config (nvidia.com/gpu.shared) counts for its base name; replicas make more, never fewer.
 * Lost GPUs are named. Fills everything but since and mismatch. */
int ns_gpu_count_compare(const struct ns_gpu *gpus, size_t n, enum ns_mig_strategy s,
                         const char *allocatable_json, struct ns_gpu_count *ret, struct err *e);

/* gpuop.dev/gpu-count: {"physical":8,"expected":{...},"advertised":{...},"missing":[...],
 * "short":true,"since":"...","mismatch":true} */
int ns_gpu_count_render(const struct ns_gpu_count *c, char **ret);
int ns_gpu_count_parse(const char *text, struct ns_gpu_count *ret, struct err *e);

/* ---- the toolkit's marker ---------------------------------------------------------------- */

#define NS_CDI_SPEC_DEFAULT "/var/run/cdi/nvidia.yaml"

/* The handler binary gpuop's toolkit installs in its install folder (TOOLKIT_INSTALL_DIR). */
#define NS_TOOLKIT_WRAPPER "gpuop-runtime"
/* The handler of a toolkit gpuop does not manage (NVIDIA's package). */
#define NS_RUNTIME_PATH_DEFAULT "/usr/bin/nvidia-container-runtime"

/* .toolkit-ctr-ready, an env file the toolkit daemon writes once the node is configured. Keys
 * read (each optional): RUNTIME (containerd, cri-o, docker, or none when it left the runtime
 * alone), RUNTIME_CONFIG (the runtime's main config, a host path), RUNTIME_NAME (the handler,
 * default "nvidia"), RUNTIME_PATH (the binary it runs; default TOOLKIT_INSTALL_DIR/
 * NS_TOOLKIT_WRAPPER, else NS_RUNTIME_PATH_DEFAULT), CDI_SPEC (the spec, a host path; default
 * NS_CDI_SPEC_DEFAULT), CDI_ENABLED (true/false, default true). */
struct ns_toolkit_marker {
    bool check_runtime; /* false when RUNTIME=none */
    char runtime[32];   /* "" : detect */
    char runtime_config[PATH_MAX];
    char runtime_name[64];
    char runtime_path[PATH_MAX];
    char cdi_spec[PATH_MAX];
    bool cdi_enabled;
};
/* text NULL: the defaults (a toolkit not managed by gpuop). path names the file in errors. */
int ns_toolkit_marker_parse(const char *path, const char *text, size_t len,
                            struct ns_toolkit_marker *ret, struct err *e);

/* ---- the last drain ----------------------------------------------------------------------- */

/* gpuop.dev/last-drain, on the node drained: {"time":"...","reason":"...","by":"driver-manager"}.
 * Written when a drain of the node starts (cordon, then evictions), so `gpuop status` can say
 * which node was drained last, when and why. */
#define NS_ANN_LAST_DRAIN "gpuop.dev/last-drain"
struct ns_drain {
    char time[NS_TIME_MAX];
    char reason[NS_REASON_MAX];
    char by[64]; /* the component: "driver-manager", "operator" */
};
int ns_drain_render(const struct ns_drain *d, char **ret);
int ns_drain_parse(const char *text, struct ns_drain *ret, struct err *e);

/* ---- the driver on a node root ------------------------------------------------------------ */

/* The kernel modules, in unload order (dependants first). */
enum ns_module {
    NS_MOD_NVIDIA_DRM,
    NS_MOD_NVIDIA_MODESET,
    NS_MOD_NVIDIA_UVM,
    NS_MOD_NVIDIA_PEERMEM,
    NS_MOD_NVIDIA,
    NS_MOD_COUNT,
};
const char *ns_module_name(enum ns_module m); /* "nvidia_drm", ... */

#define NS_VERSION_MAX 64

/* The folders, relative to a root, where the driver's libraries are looked for, in the order
 * NVIDIA's toolkit searches them ("" is the root itself); NULL-terminated. */
extern const char *const ns_lib_dirs[];
/* The folders where nvidia-smi is looked for; NULL-terminated. */
extern const char *const ns_bin_dirs[];

/* Resolves path (as the host sees it: "/var/run/cdi/nvidia.yaml") under root, following every
 * symbolic link inside root as the host would (an absolute target starts again at root; ".."
 * stops at it); a missing component ends the resolution, the rest taken as it is. Writes root
 * plus the resolved path into buf. -ELOOP past 40 links; -ENAMETOOLONG. */
int ns_root_resolve(const char *root, const char *path, char *buf, size_t n);
/* Finds `name` in root/<dir> for the dirs given (a regular, non-empty file once resolved inside
 * root, or else as this process sees the path; executable when want_exec). Writes the resolved
 * path (root included) into buf. -ENOENT when none has it; -ENAMETOOLONG when a path does not
 * fit. */
int ns_root_find(const char *root, const char *const *dirs, const char *name, bool want_exec,
                 char *buf, size_t n);
/* "550.127.05": digits and dots, at least one dot, shorter than NS_VERSION_MAX. */
bool ns_version_like(const char *s, size_t n);
/* Calls fn(path, version) for each <stem>.so.<version> in root's library folders (ns_lib_dirs
 * order); a non-zero return from fn stops the walk and is returned. */
typedef int (*ns_versioned_fn)(const char *path, const char *version, void *ud);
int ns_root_versioned_libs(const char *root, const char *stem, ns_versioned_fn fn, void *ud);

/* What a node root shows about the NVIDIA driver. Paths include the root they were found under. */
struct ns_driver_facts {
    bool module[NS_MOD_COUNT];           /* <host>/sys/module/<name> exists */
    char module_version[NS_VERSION_MAX]; /* the loaded nvidia's; "" when unknown */
    char host_smi[PATH_MAX];             /* nvidia-smi in the host's bin folders, "" none */
    char host_nvml[PATH_MAX];            /* libnvidia-ml.so.1 in the host's lib folders */
    char host_lib[PATH_MAX];             /* a libnvidia-ml.so.<version> on the host; the
                                            loaded version's when there is one */
    char host_lib_version[NS_VERSION_MAX];
    /* the containerized driver's root (/run/nvidia/driver) */
    bool root_used; /* it holds anything: a driver container laid it out */
    char root_smi[PATH_MAX];
    char root_nvml[PATH_MAX];
    char root_lib[PATH_MAX];
    char root_lib_version[NS_VERSION_MAX];
    bool root_dev;        /* <driver root>/dev/nvidiactl */
    bool root_mountpoint; /* the driver root is a mount point (of this mount namespace) */
    bool ctr_ready;       /* .driver-ctr-ready in the validations folder */
};

/* Reads host_root (the node's root as mounted here: sys/module, proc/driver/nvidia/version, the
 * usual bin and lib folders), driver_root (where the containerized driver lays out its root; a
 * missing one is no driver root) and validations_dir (NULL: NS_VALIDATIONS_DIR). A host root
 * that is not a readable folder is -ENOENT/-ENOTDIR/-EACCES naming it. */
int ns_driver_probe(const char *host_root, const char *driver_root, const char *validations_dir,
                    struct ns_driver_facts *ret, struct err *e);

/* ---- Node Feature Discovery's labels ------------------------------------------------------ */

/* What nfd-worker's pci, kernel and system sources label, computed for kubelet-sim's simulated
 * nodes and by `gpuop node-discovery` on clusters without NFD. */
#define NS_NFD_PREFIX     "feature.node.kubernetes.io/"
#define NS_NFD_LABELS_ANN "nfd.node.kubernetes.io/feature-labels" /* nfd-master's owned set */
#define NS_NFD_WORKER_ANN "nfd.node.kubernetes.io/worker.version"
#define NS_DISCOVERY_ANN  "gpuop.dev/node-discovery-labels" /* gpuop's owned set */

struct ns_nfd_input {
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
json_t *ns_nfd_labels(const struct ns_nfd_input *in);
/* Puts nfd_labels into labels as their owner: the labels named in the annotation ann (the set
 * written last time, names without NFD's prefix, sorted, comma-separated, as nfd-master keeps
 * it) that nfd_labels no longer has are removed, and only those; ann is rewritten. Pure. */
void ns_nfd_apply(json_t *labels, json_t *annotations, const json_t *nfd_labels, const char *ann);
/* Whether Node Feature Discovery runs for the node: nfd-master's annotations on it. */
bool ns_nfd_present(const json_t *node);
/* The class and subclass ("0302") of each NVIDIA display function (vendor 0x10de, class 0x03xxxx)
 * under sysfs/bus/pci/devices, sorted; *ret NULL-terminated (ns_strv_free). An error when the
 * folder cannot be listed. */
int ns_pci_nvidia_gpu_classes(const char *sysfs, char ***ret, size_t *ret_n, struct err *e);
void ns_strv_free(char **v);
/* ID and VERSION_ID of an os-release file (unquoted); -ENOENT without an ID. Pure. */
int ns_os_release(const char *text, size_t len, char *id, size_t id_n, char *version_id,
                  size_t version_n);

#endif
