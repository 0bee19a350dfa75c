/* SPDX-License-Identifier: Apache-2.0 */
/*
 * migparted: MIG partitioning as mig-parted v1 configs describe it, for `gpuop mig-parted` and
 * the MIG manager (docs/mig-manager.md).
 *
 *  - The config (mp-config.c, pure, fuzzed): `version: v1` and `mig-configs`, a map from a name
 *    to entries {devices, mig-enabled, mig-devices, device-filter}; every rule of the format is
 *    checked and an error names the file, the config, the entry and the field.
 *  - The plan (mp-plan.c, pure): a named config resolved against the node's GPUs as NVML
 *    describes them (struct mp_gpu: model, PCI ids, the GPU-instance profiles with their
 *    placements, the current instances): which GPUs an entry selects, and for each, the GPU
 *    instances with the placement each takes. A profile the GPU does not offer, more instances
 *    than a profile allows, or instances that cannot coexist in any placement are refused here,
 *    before anything changes. Also: whether a GPU's layout matches the plan (assert), and the
 *    node's layout as a config (export).
 *  - The shell (mp-apply.c): reads the GPUs through src/edge/nvml (struct mp_node) and applies a
 * plan GPU by GPU; when a step fails it puts every GPU it changed back to the layout it had (same
 * profiles at the same placements, same MIG mode).
 *
 * Plain data, owned by the caller; thread-compatible.
 */
#ifndef GPUOP_MIGPARTED_H
#define GPUOP_MIGPARTED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpu.h"
#include "util.h"

#define MP_CONFIG_MAX_BYTES (4u << 20) /* a config file or ConfigMap key */
#define MP_NAME_MAX         253        /* a config name (it goes into a label value too) */
#define MP_ENTRIES_MAX      64         /* entries of one named config */
#define MP_DEVICES_MAX      64         /* mig-devices of one entry, devices indices */
#define MP_COUNT_MAX        64         /* instances of one profile on one GPU */

/* ---- the config --------------------------------------------------------------------------- */

/* A mig-devices key: "[<c>c.]<g>g.<mem>gb[+me|+me.all|-me|+gfx|-gfx ...]". gi is the GPU-instance
 * profile ("3g.40gb+me"), ci_slices the compute instance's slices (0: it spans the instance). */
struct mp_profile_key {
    unsigned ci_slices;
    unsigned gi_slices;
    char gi[GPU_PROFILE_MAX];
};
/* -EINVAL with the reason when s is not a profile name. */
int mp_profile_key_parse(const char *s, struct mp_profile_key *ret, struct err *e);

struct mp_mig_device {
    char profile[GPU_PROFILE_MAX]; /* as written ("1c.3g.40gb") */
    struct mp_profile_key key;
    unsigned count;
};

/* A device-filter item: "0xDDDDVVVV" (device then vendor id), optionally ":0xSSSSVVVV". */
struct mp_filter {
    uint32_t device_id;
    uint32_t subsystem_id;
    bool has_subsystem;
};

struct mp_entry {
    bool all_devices; /* devices: all */
    size_t n_devices;
    unsigned *devices; /* devices: [indices] */
    size_t n_filters;
    struct mp_filter *filters; /* none: every device */
    bool mig_enabled;
    size_t n_mig_devices;
    struct mp_mig_device *mig_devices;
};

struct mp_config {
    char *name;
    size_t n_entries;
    struct mp_entry *entries;
};

struct mp_spec {
    size_t n_configs;
    struct mp_config *configs; /* in file order */
};

/* Parses a v1 config document (YAML or JSON). `name` (the file) prefixes every error. */
int mp_spec_parse(const char *buf, size_t len, const char *name, struct mp_spec **ret,
                  struct err *e);
int mp_spec_load(const char *path, struct mp_spec **ret, struct err *e);
void mp_spec_free(struct mp_spec *s);
DEFINE_CLEANUP_FUNC(struct mp_spec, mp_spec_free)
/* The named config, or NULL. */
const struct mp_config *mp_spec_find(const struct mp_spec *s, const char *name);

/* ---- the node's GPUs ---------------------------------------------------------------------- */

/* One MIG device (a compute instance) as it is on the GPU, or as the plan wants it. */
struct mp_instance {
    char gi[GPU_PROFILE_MAX]; /* GPU-instance profile name */
    unsigned ci_slices;       /* 0: the compute instance spans the GPU instance */
    unsigned start, size;     /* placement (memory slices) */
    unsigned gi_id;           /* current instances: the GPU instance id */
};

struct mp_gpu {
    unsigned index;
    char model[GPU_NAME_MAX];
    uint32_t pci_device_id, pci_subsystem_id;
    bool mig_capable, mig_enabled;
    bool mig_pending; /* the MIG mode after the next GPU reset (mig_enabled when none waits) */
    size_t n_profiles;
    struct gpu_mig_profile *profiles; /* empty when not MIG capable */
    size_t n_instances;
    struct mp_instance *instances; /* current layout */
};

/* The profile string of an instance as configs write it: "3g.40gb" or "1c.3g.40gb". */
void mp_instance_profile(const struct mp_instance *in, char *buf, size_t n);

/* ---- the plan ----------------------------------------------------------------------------- */

struct mp_gpu_plan {
    unsigned index;
    bool selected;    /* an entry of the config selects this GPU (else it is left alone) */
    bool mig_enabled; /* wanted mode */
    size_t n_instances;
    struct mp_instance *instances; /* wanted instances with their placements, in creation order */
};

struct mp_plan {
    char *config;
    size_t n_gpus;
    struct mp_gpu_plan *gpus; /* one per mp_gpu, same order */
};

/* Resolves config c on the GPUs: each GPU is selected by at most one entry (devices and
 * device-filter both match); a selected GPU that is not MIG capable may only be asked for
 * mig-enabled: false; the profiles must be offered by the GPU, their counts within the profile's
 * limit, and the instances must fit together in some choice of placements (memory slices) and in
 * the GPU's compute slices. A config that selects none of the GPUs is refused too. The error
 * names the config, the GPU (index and model) and the reason. */
int mp_plan_make(const struct mp_config *c, const struct mp_gpu *gpus, size_t n_gpus,
                 struct mp_plan **ret, struct err *e);
void mp_plan_free(struct mp_plan *p);
DEFINE_CLEANUP_FUNC(struct mp_plan, mp_plan_free)

/* Whether GPU g is as plan p wants it: 0, or -ESTALE with what differs in e. mode_only: only the
 * MIG mode. The instances are compared by profile and count, not by placement. */
int mp_gpu_matches(const struct mp_gpu *g, const struct mp_gpu_plan *p, bool mode_only,
                   struct err *e);
/* The whole node: 0 when every selected GPU matches. */
int mp_plan_matches(const struct mp_plan *p, const struct mp_gpu *gpus, size_t n_gpus,
                    bool mode_only, struct err *e);

/* Whether a MIG mode plan p wants waits for a GPU reset on some selected GPU (the driver took
 * the change but could not reset the GPU): 1 with the GPUs named in e, else 0. */
int mp_plan_reset_pending(const struct mp_plan *p, const struct mp_gpu *gpus, size_t n_gpus,
                          struct err *e);

/* The layout as a v1 config named `name`: GPUs with the same layout share an entry. Returns the
 * YAML text (caller frees), NULL when it would pass 1 MiB. */
char *mp_export(const struct mp_gpu *gpus, size_t n_gpus, const char *name);

/* ---- the shell: NVML ---------------------------------------------------------------------- */

struct mp_node {
    size_t n_gpus;
    struct mp_gpu *gpus;
};
/* Reads every GPU: identity, MIG mode, profiles (MIG-capable GPUs), current instances. */
int mp_node_read(struct gpu_lib *lib, struct mp_node **ret, struct err *e);
void mp_node_free(struct mp_node *n);
DEFINE_CLEANUP_FUNC(struct mp_node, mp_node_free)

/* What an apply did. */
struct mp_apply_result {
    unsigned gpus_changed;
    bool rolled_back;      /* a step failed and the changed GPUs were put back */
    bool reset_required;   /* a mode change waits for a GPU reset the driver could not do */
    unsigned gpus_pending; /* MP_APPLY_MODES_FIRST: GPUs left with a mode change pending */
    bool rollback_failed;  /* ... and putting them back failed too (e says which GPU) */
};

enum {
    MP_APPLY_MODE_ONLY = 1 << 0, /* only the MIG mode */
    /* Every GPU's MIG mode first, then the instances. A mode change that waits for a GPU
     * reset is left pending and the apply stops before any instance is touched: 0 with
     * reset_required and gpus_pending (the other GPUs' modes are set, so that one reset finishes
     * them all). What the MIG manager does; a failure rolls every GPU back, modes included. */
    MP_APPLY_MODES_FIRST = 1 << 1,
};

/* Applies plan p to the GPUs `before` describes (read just before: the layout a failure goes
 * back to). GPUs that already match are not touched. flags: MP_APPLY_*. On failure (negative, e
 * filled) every GPU changed so far is put back to its `before` layout first. Without
 * MP_APPLY_MODES_FIRST, a mode change that needs a GPU reset is such a failure: -EAGAIN with
 * reset_required set (the rollback cancels the pending change). */
int mp_apply(struct gpu_lib *lib, const struct mp_node *before, const struct mp_plan *p,
             unsigned flags, struct mp_apply_result *ret, struct err *e);

#endif
