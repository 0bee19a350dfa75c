/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gfd: the node labels NVIDIA's GPU Feature Discovery produces, computed by a pure function
 * from plain inputs (the GPU inventory, the resolved device-plugin config, the machine type and
 * an optional timestamp). `gpuop feature-discovery` writes them to NFD's features file; the
 * operator can write the same labels onto the Node object.
 *
 * Label names and value formats follow NVIDIA's GFD: nvidia.com/gpu.{count,product,memory,
 * family,compute.major,compute.minor,replicas,sharing-strategy,machine,mode},
 * nvidia.com/cuda.{driver-version,runtime-version}.* and the deprecated cuda.{driver,runtime}.*,
 * nvidia.com/mig.{capable,strategy}, nvidia.com/mps.capable, nvidia.com/mig-<profile>.* under
 * the mixed strategy, and nvidia.com/gfd.timestamp.
 *
 * Differences from NVIDIA's GFD: GPUs marked lost are left out; vGPU and clique labels are not
 * produced.
 */
#ifndef GPUOP_GFD_H
#define GPUOP_GFD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dpconfig.h"
#include "gpu.h"
#include "util.h"

#define GFD_LABEL_PREFIX "nvidia.com/"

struct gfd_label {
    char *key; /* "nvidia.com/gpu.count" */
    char *value;
};

/* Labels sorted by key, each key once. */
struct gfd_labels {
    size_t n;
    struct gfd_label *items;
    /* Why the single strategy was found invalid (labels then carry "-MIG-INVALID"), else NULL;
     * for the caller to log. */
    char *warning;
    /* While computing only: the first key or value too long for its buffer, which fails the
     * compute (a cut label would be a wrong one). */
    struct err overflow;
};

struct gfd_input {
    /* NULL when NVML could not be initialised (and failOnInitError is false): only the
     * timestamp is produced then. */
    const struct gpu_inventory *inventory;
    /* MIG strategy and sharing; NULL means NVIDIA's defaults (none, no sharing). */
    const struct dpconfig *config;
    /* Contents of the machine type file, NULL when it does not exist ("unknown"). */
    const char *machine_type;
    /* vGPU from the PCI devices; NULL when they could not be listed (no vgpu.* labels). */
    const struct gpu_vgpu_info *vgpu;
    bool with_timestamp;
    int64_t timestamp; /* Unix seconds, used when with_timestamp */
};

/*
 * Computes the label set. Fails (-EINVAL, naming the reason) where NVIDIA's GFD fails: a driver
 * version that is not X.Y[.Z], or MPS sharing with a MIG-enabled GPU. Pure: no I/O, no clock.
 */
int gfd_labels_compute(const struct gfd_input *in, struct gfd_labels **ret, struct err *e);
void gfd_labels_free(struct gfd_labels *l); /* accepts NULL */
DEFINE_CLEANUP_FUNC(struct gfd_labels, gfd_labels_free)

/* The labels of NFD's features file: with_timestamp adds nvidia.com/gfd.timestamp, the time the
 * labels last changed. stamp keeps the last labels (their text, without the timestamp) and that
 * time between calls: the first call, and one whose labels differ, set it to now_s. Their text
 * is at most GFD_FILE_MAX bytes (-ENOBUFS). */
#define GFD_FILE_MAX (1u << 20)
struct gfd_stamp {
    char *last;
    int64_t at;
};
void gfd_stamp_clear(struct gfd_stamp *s); /* frees last: the next call sets the time anew */
int gfd_labels_stamped(const struct gfd_input *in, bool with_timestamp, int64_t now_s,
                       struct gfd_stamp *stamp, struct gfd_labels **ret, struct err *e);

/* The value of key, or NULL. */
const char *gfd_labels_get(const struct gfd_labels *l, const char *key);
/* Appends "key=value\n" for each label (NFD's local feature file format). */
GPUOP_WUR int gfd_labels_format(const struct gfd_labels *l, struct sbuf *out);

/* NVIDIA's sanitiser: drops every character outside [A-Za-z0-9-_. ], then joins the
 * whitespace-separated fields with '-'. Caller frees. */
char *gfd_sanitise(const char *s);
/* The GPU family for a CUDA compute capability: "ampere", "hopper", ..., "undefined". */
const char *gfd_arch_family(int major, int minor);

#endif
