/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dpconfig: NVIDIA's device-plugin config file (api/config/v1; shared by the device plugin and
 * GPU feature discovery) read into a plain struct, with NVIDIA's validation, defaults and
 * warnings, and the CLI flag > env var > file > default precedence.
 *
 *   version: v1              # missing means v1; anything else is "unknown version"
 *   flags: {migStrategy, failOnInitError, nvidiaDriverRoot, nvidiaDevRoot, mpsRoot,
 *           gdrcopyEnabled, gdsEnabled, mofedEnabled, useNodeFeatureAPI,
 *           deviceDiscoveryStrategy,
 *           plugin: {passDeviceSpecs, deviceListStrategy, deviceIDStrategy,
 *                    cdiAnnotationPrefix, nvidiaCTKPath, containerDriverRoot,
 *                    sharedDevicesAllocationPolicy},
 *           gfd: {oneshot, noTimestamp, sleepInterval, outputFile, machineTypeFile}}
 *   resources: {gpus: [{pattern, name}], mig: [{pattern, name}]}   # accepted, then ignored
 *   sharing: {timeSlicing: {...}, mps: {...}}   # renameByDefault, failRequestsGreaterThanOne,
 *                                               # resources: [{name, replicas, rename, devices}]
 *   imex: {channelIDs: [] | [0], required}
 *
 * Unknown keys are errors naming the field path ("cfg.yaml: flags.plugin.foo: unknown field").
 * Things NVIDIA accepts but ignores (customised `resources`, `rename`, `devices`) are accepted,
 * forced to NVIDIA's values, and reported in `warnings` for the caller to log.
 *
 * Parsing is pure (no I/O besides dpconfig_load_file / dpconfig_resolve reading the file) and
 * the result is plain data owned by the caller: free it with dpconfig_free(). Thread-safe.
 */
#ifndef GPUOP_DPCONFIG_H
#define GPUOP_DPCONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "svc.h"
#include "util.h"

#define DPCONFIG_VERSION       "v1"
#define DPCONFIG_NAME_PREFIX   "nvidia.com/"
#define DPCONFIG_NAME_MAX      63   /* fully qualified resource name, as NVIDIA limits it */
#define DPCONFIG_MAX_REPLICAS  1024 /* gpuop's bound; NVIDIA has none */
#define DPCONFIG_MAX_RESOURCES 256  /* entries per sharing section */
#define DPCONFIG_MAX_BYTES     (1u << 20)

enum dpconfig_mig_strategy {
    DPCONFIG_MIG_NONE = 0,
    DPCONFIG_MIG_SINGLE,
    DPCONFIG_MIG_MIXED,
};

enum dpconfig_device_id_strategy {
    DPCONFIG_DEVICE_ID_UUID = 0,
    DPCONFIG_DEVICE_ID_INDEX,
};

/* deviceListStrategy is a set: a string or a list of these. */
enum {
    DPCONFIG_LIST_ENVVAR = 1u << 0,
    DPCONFIG_LIST_VOLUME_MOUNTS = 1u << 1,
    DPCONFIG_LIST_CDI_ANNOTATIONS = 1u << 2,
    DPCONFIG_LIST_CDI_CRI = 1u << 3,
};
/* gpuop's default: volume-mounts, which the nvidia runtime handler takes from the kubelet's
 * mounts and a container cannot set for itself (NVIDIA's plugin defaults to envvar, which any
 * container can write; docs/runtime.md). */
#define DPCONFIG_LIST_DEFAULT DPCONFIG_LIST_VOLUME_MOUNTS

enum dpconfig_alloc_policy {
    DPCONFIG_ALLOC_DISTRIBUTED = 0,
    DPCONFIG_ALLOC_PACKED,
};

enum dpconfig_discovery_strategy {
    DPCONFIG_DISCOVERY_AUTO = 0,
    DPCONFIG_DISCOVERY_NVML,
    DPCONFIG_DISCOVERY_TEGRA,
};

enum dpconfig_sharing_strategy {
    DPCONFIG_SHARING_NONE = 0,
    DPCONFIG_SHARING_TIME_SLICING,
    DPCONFIG_SHARING_MPS,
};

/* One entry of sharing.<strategy>.resources, after NVIDIA's normalisation. */
struct dpconfig_replicated_resource {
    char *name;        /* fully qualified: "nvidia.com/gpu", "nvidia.com/mig-1g.10gb" */
    char *rename;      /* NULL, or "<name>.shared" when renameByDefault (own renames ignored) */
    unsigned replicas; /* >= 2 */
};

/* sharing.timeSlicing or sharing.mps. `devices` is always "all" (NVIDIA forces it). */
struct dpconfig_sharing {
    bool present; /* the section appeared in the file */
    bool rename_by_default;
    bool fail_requests_greater_than_one; /* mps: true unless set to false */
    size_t n_resources;
    struct dpconfig_replicated_resource *resources;
};

struct dpconfig {
    /* flags */
    enum dpconfig_mig_strategy mig_strategy; /* none */
    bool fail_on_init_error;                 /* true */
    char *nvidia_driver_root;                /* "/" */
    char *nvidia_dev_root; /* NULL when unset; dpconfig_resolve makes it the driver root */
    char *mps_root;        /* NULL when unset (MPS needs it) */
    bool gdrcopy_enabled, gds_enabled, mofed_enabled;           /* false */
    bool use_node_feature_api;                                  /* false */
    enum dpconfig_discovery_strategy device_discovery_strategy; /* auto */

    struct {
        bool pass_device_specs;        /* false */
        unsigned device_list_strategy; /* DPCONFIG_LIST_* bits; volume-mounts */
        enum dpconfig_device_id_strategy device_id_strategy;         /* uuid */
        char *cdi_annotation_prefix;                                 /* "cdi.k8s.io/" */
        char *nvidia_ctk_path;                                       /* "/usr/bin/nvidia-ctk" */
        char *container_driver_root;                                 /* "/driver-root" */
        enum dpconfig_alloc_policy shared_devices_allocation_policy; /* distributed */
    } plugin;

    struct {
        bool oneshot;               /* false */
        bool no_timestamp;          /* false */
        uint64_t sleep_interval_ms; /* 60000; UINT64_MAX = infinite */
        char *output_file;          /* "/etc/kubernetes/node-feature-discovery/features.d/gfd" */
        char *machine_type_file;    /* "/sys/class/dmi/id/product_name" */
    } gfd;

    struct dpconfig_sharing time_slicing;
    struct dpconfig_sharing mps;

    struct {
        size_t n_channel_ids; /* 0 or 1 */
        unsigned channel_ids[1];
        bool required;
    } imex;

    /* Things NVIDIA accepts and ignores, worded as NVIDIA words them; the caller logs them. */
    size_t n_warnings;
    char **warnings;
};

/* A config holding NVIDIA's defaults. Never fails (allocation failure exits, as xmalloc). */
struct dpconfig *dpconfig_new(void);
void dpconfig_free(struct dpconfig *c); /* accepts NULL */
DEFINE_CLEANUP_FUNC(struct dpconfig, dpconfig_free)

/* Parses a YAML or JSON config. `name` (the file name) starts every error message:
 * "<name>: sharing.timeSlicing.resources[0].replicas: number of replicas must be >= 2". */
int dpconfig_parse(const char *buf, size_t len, const char *name, struct dpconfig **ret,
                   struct err *e);
int dpconfig_load_file(const char *path, struct dpconfig **ret, struct err *e);

/*
 * Sets one field from its string form, as a CLI flag or env var gives it. `field` is the
 * config path: "flags.migStrategy", "flags.failOnInitError", "flags.nvidiaDriverRoot",
 * "flags.plugin.deviceListStrategy" (comma-separated list), "flags.gfd.sleepInterval", ...,
 * "imex.channelIDs" (comma-separated), "imex.required". `source` names the origin for errors
 * ("--mig-strategy", "MIG_STRATEGY"). Booleans take parse_bool's forms. On error *c is unchanged.
 */
int dpconfig_set(struct dpconfig *c, const char *field, const char *value, const char *source,
                 struct err *e);

/* Precedence. The flags and env vars are svc option tables (src/lib/svc) whose `field` is the
 * config path: svc parses the command line and the environment and hands each value to the
 * config-file layer below (flag > env > file > default). Several entries may share a field
 * (--driver-root and --nvidia-driver-root); the pseudo-field "configFile" (kind
 * SVC_CONFIG_FILE) names the config file option itself. */

/* NVIDIA's device-plugin flags and env vars (MIG_STRATEGY, FAIL_ON_INIT_ERROR,
 * PASS_DEVICE_SPECS, DEVICE_LIST_STRATEGY, DEVICE_ID_STRATEGY, NVIDIA_DRIVER_ROOT, ...,
 * CONFIG_FILE) and GFD's (GFD_MIG_STRATEGY, GFD_ONESHOT, ..., GFD_CONFIG_FILE), with their
 * --help text. */
extern const struct svc_option dpconfig_plugin_options[];
extern const struct svc_option dpconfig_gfd_options[];

/* svc's config-file layer over a dpconfig. The component's svc state starts with this struct;
 * load builds `pending` afresh (defaults + file), set applies a flag or env value, finish fills
 * the derived defaults (nvidiaDevRoot). The caller takes `pending` when resolution succeeds. */
struct dpconfig_layer_state {
    struct dpconfig *pending;
    const char *path; /* the config file used, or NULL */
};
int dpconfig_layer_load(void *state, const char *path, struct err *e);
int dpconfig_layer_set(void *state, const char *field, const char *value, const char *source,
                       struct err *e);
int dpconfig_layer_finish(void *state, struct err *e);
extern const struct svc_layer dpconfig_layer;

typedef const char *(*dpconfig_getenv_fn)(const char *name);

/* Applies the env values of every option (getenv_fn NULL: env_get), then every CLI value
 * (cli_values[i] is the value given for opts[i] on the command line, NULL when not given;
 * cli_values may be NULL), so CLI > env > what *c already holds. "configFile" is skipped. */
int dpconfig_apply_overrides(struct dpconfig *c, const struct svc_option *opts,
                             const char *const *cli_values, dpconfig_getenv_fn getenv_fn,
                             struct err *e);

/* The whole resolution: the config file named by the "configFile" option (CLI > env; none:
 * defaults), then dpconfig_apply_overrides, then the derived defaults (nvidiaDevRoot).
 * *ret_config_file (optional) gets the path used, pointing into cli_values/env, or NULL. */
int dpconfig_resolve(const struct svc_option *opts, const char *const *cli_values,
                     dpconfig_getenv_fn getenv_fn, struct dpconfig **ret,
                     const char **ret_config_file, struct err *e);

/* The value an option table gives `field` (CLI > env), or NULL; ret_source (optional) gets
 * "--flag" or the env var name. */
const char *dpconfig_option_value(const struct svc_option *opts, const char *const *cli_values,
                                  dpconfig_getenv_fn getenv_fn, const char *field,
                                  const char **ret_source);

/* ---- sharing ------------------------------------------------------------------------------ */

/* MPS when sharing.mps has a resource with replicas > 1, else time-slicing when timeSlicing
 * has one, else none. The strategies are exclusive and apply to every GPU of the node. */
enum dpconfig_sharing_strategy dpconfig_sharing_strategy(const struct dpconfig *c);
/* The section in force: mps when MPS wins, else timeSlicing. Never NULL for non-NULL c. */
const struct dpconfig_sharing *dpconfig_active_sharing(const struct dpconfig *c);
/* The replicated entry of the section in force for a resource name ("nvidia.com/gpu"; a bare
 * "gpu" gets the nvidia.com/ prefix), or NULL. c may be NULL. */
const struct dpconfig_replicated_resource *dpconfig_replicas_for(const struct dpconfig *c,
                                                                 const char *resource);
/* Its replicas, or 1 when not shared. */
unsigned dpconfig_replica_count(const struct dpconfig *c, const char *resource);

/* ---- names -------------------------------------------------------------------------------- */

const char *dpconfig_mig_strategy_name(enum dpconfig_mig_strategy s); /* "none", ... */
int dpconfig_parse_mig_strategy(const char *s, enum dpconfig_mig_strategy *ret);
const char *dpconfig_sharing_strategy_name(enum dpconfig_sharing_strategy s); /* "time-slicing" */
const char *dpconfig_device_id_strategy_name(enum dpconfig_device_id_strategy s);
const char *dpconfig_alloc_policy_name(enum dpconfig_alloc_policy p);
const char *dpconfig_discovery_strategy_name(enum dpconfig_discovery_strategy s);
/* Parses "envvar", "volume-mounts", "cdi-annotations", "cdi-cri" into one DPCONFIG_LIST_* bit. */
int dpconfig_parse_list_strategy(const char *s, unsigned *ret_bit);

#endif
