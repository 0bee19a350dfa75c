/* SPDX-License-Identifier: Apache-2.0 */
/*
 * doctor: `gpuop doctor`, the runbook's first step on a node (docs/status-and-doctor.md). It
 * reads a node root (doctor_probe: the driver through nodestate's probe, DKMS trees, NVIDIA
 * libraries, the persistence daemon's unit, the kubelet's device-plugin sockets, NVML, the
 * container runtime's configuration, kernel headers, IOMMU, the clock) into plain facts, and
 * the checks (doctor_check, pure) turn the facts into results: pass, warn or fail, each with one
 * line of evidence and one line of remedy. The exit status is the worst result's.
 *
 * `kubectl gpuop doctor NODE` runs the same in a short-lived privileged pod on that node
 * (src/lib/doctorpod: the pod, created, waited for, its log printed, deleted).
 *
 * Pure but for doctor_probe. Thread-compatible.
 */
#ifndef GPUOP_DOCTOR_H
#define GPUOP_DOCTOR_H

#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#include "nodestate.h"
#include "util.h"

#define DOCTOR_LINE_MAX 512
#define DOCTOR_ITEMS    16 /* DKMS modules, libraries, sockets, GPUs kept (more are counted) */

enum doctor_level { DOCTOR_PASS, DOCTOR_WARN, DOCTOR_FAIL };
const char *doctor_level_name(enum doctor_level l); /* "pass", "warn", "fail" */
/* The exit status of a worst result: 0 pass, 3 warn, 4 fail (1 and 2 are the runtime's). */
int doctor_exit_status(enum doctor_level worst);

enum doctor_owner {
    DOCTOR_OWNER_NONE,
    DOCTOR_OWNER_HOST,
    DOCTOR_OWNER_CONTAINER,
    DOCTOR_OWNER_BOTH
};
const char *doctor_owner_name(enum doctor_owner o); /* "none", "host", "container", "both" */

struct doctor_lib {
    char path[PATH_MAX];
    char version[NODESTATE_VERSION_MAX];
};

struct doctor_socket {
    char name[128];     /* "nvidia-gpu.sock" */
    char resource[128]; /* "nvidia.com/gpu"; "" when the name says nothing */
    bool live;          /* a Unix socket something listens on */
};

struct doctor_gpu {
    char name[96];
    char vbios[32];
};

/* What a node root showed. */
struct doctor_facts {
    char host_root[PATH_MAX];
    char driver_root[PATH_MAX];
    struct nodestate_driver_facts drv;
    char kernel[128]; /* the running kernel's release */

    size_t n_dkms;                        /* DKMS trees and modules of nvidia */
    char dkms[DOCTOR_ITEMS][PATH_MAX];    /* paths found */
    size_t n_libs;                        /* versioned NVIDIA libraries in the host's lib folders */
    struct doctor_lib libs[DOCTOR_ITEMS]; /* the first DOCTOR_ITEMS */
    char persistenced_unit[PATH_MAX];     /* the unit file, "" none */
    bool persistenced_enabled;            /* linked from a *.wants folder */

    bool plugin_dir;  /* <root>/var/lib/kubelet/device-plugins exists */
    size_t n_sockets; /* sockets there but kubelet.sock */
    struct doctor_socket sockets[DOCTOR_ITEMS];
    bool plugin_ready; /* the validator's plugin-ready status file */

    char nvml_lib[PATH_MAX]; /* the libnvidia-ml.so.1 loaded ("" the default) */
    bool nvml_ok;            /* nvmlInit succeeded and the inventory was read */
    char nvml_error[DOCTOR_LINE_MAX];
    char nvml_version[NODESTATE_VERSION_MAX]; /* the driver version NVML reports */
    size_t n_gpus;
    struct doctor_gpu gpus[DOCTOR_ITEMS];

    bool have_marker; /* .toolkit-ctr-ready */
    char marker_error[DOCTOR_LINE_MAX];
    struct nodestate_toolkit_marker marker;
    char runtime[32];                     /* the runtime in use, "" unknown */
    char runtime_error[DOCTOR_LINE_MAX];  /* detection against the marker's runtime failed */
    bool runtime_checked;                 /* the configuration was checked */
    char runtime_config[DOCTOR_LINE_MAX]; /* "" configured as the marker says, else why not */

    char headers[PATH_MAX]; /* the running kernel's headers, "" none */
    int iommu_groups;       /* <root>/sys/kernel/iommu_groups entries; -1 unreadable */
    char cmdline[1024];     /* <root>/proc/cmdline */
    int clock_synced;       /* 1 synchronised, 0 not, -1 unknown */
    char clock_source[128]; /* how it was told */
};

/* Reads the node root (host_root: the node's / as mounted here; driver_root: the containerized
 * driver's root as the node sees it, under host_root). A host root that is not a readable
 * folder is an error naming it; anything else unreadable is a fact (named in the evidence). */
int doctor_probe(const char *host_root, const char *driver_root, struct doctor_facts *ret,
                 struct err *e);

/* Who owns the driver, and one line saying why. */
enum doctor_owner doctor_owner_decide(const struct doctor_facts *f, char *why, size_t n);

#define DOCTOR_CHECKS 12

struct doctor_result {
    const char *id;    /* "driver-owner", "dkms", ... */
    const char *title; /* "what owns the driver" */
    enum doctor_level level;
    char evidence[DOCTOR_LINE_MAX];
    char remedy[DOCTOR_LINE_MAX]; /* what to do; for a pass, "" */
};

/* Every check, in the runbook's order; returns how many (DOCTOR_CHECKS). */
size_t doctor_check(const struct doctor_facts *f, struct doctor_result *ret);
enum doctor_level doctor_worst(const struct doctor_result *r, size_t n);

/* The report: text (one line per check, the remedy under a warn or fail) or JSON. */
int doctor_render_text(const struct doctor_facts *f, const struct doctor_result *r, size_t n,
                       struct sbuf *out);
json_t *doctor_render_json(const struct doctor_facts *f, const struct doctor_result *r, size_t n);

#endif
