/* SPDX-License-Identifier: Apache-2.0 */
/*
 * toolkit: the node's Container Device Interface spec for its GPUs (kind nvidia.com/gpu), as
 * `nvidia-ctk cdi generate` writes it (../shared/reference/notes/node-components.md §3), and the
 * pieces of `gpuop toolkit`, the daemon that keeps it current.
 *
 *  - The driver lookup (tk-lookup.c, file I/O only): the driver's files under a driver root
 *    (host "/" or the containerized driver's "/run/nvidia/driver"), found with the library
 *    search order of the notes: its versioned libraries (lib*.so.<version>, their directories'
 *    vdpau/ too) and the links the driver ships to them (libcuda.so.1), the GSP firmware, the
 *    binaries (nvidia-smi, persistenced, MPS) and the IPC sockets.
 *  - The spec (tk-cdi.c, pure): the GPU inventory and what the lookup found in, YAML text out,
 *    byte for byte the same for the same input. Every GPU by index and by UUID, every MIG device
 *    by "<gpu>:<mig>" and by MIG UUID, and "all"; the spec-level edits carry the control device
 *    nodes and the driver's files; cdiVersion is the lowest the fields used need.
 *
 * Paths: a driver file is named by its path inside the driver root ("/usr/lib/x86_64-linux-gnu/
 * libcuda.so.550.90.07"): that is where a container sees it; the spec's hostPath puts the driver
 * root in front. The lookup reads the files at <host_root><driver_root><path>, host_root being
 * where this process sees the host's filesystem ("/" on the host, "/host" in a container).
 */
#ifndef GPUOP_TOOLKIT_H
#define GPUOP_TOOLKIT_H

#include <stdbool.h>
#include <stddef.h>

#include "gpu.h"
#include "util.h"

#define TK_CDI_KIND   "nvidia.com/gpu"
#define TK_CDI_SPEC   "/var/run/cdi/nvidia.yaml"
#define TK_GPU_MAJOR  195 /* /dev/nvidia<minor>: the driver's fixed character major */
#define TK_SPEC_MAX   (4u << 20)
#define TK_LOOKUP_MAX 1024 /* files the lookup returns at most */
#define TK_MIG_MINORS "/proc/driver/nvidia-caps/mig-minors"

/* ---- the driver root ---------------------------------------------------------------------- */

enum tk_file_kind {
    TK_FILE_LIBRARY,  /* lib*.so.<version>, and those in <dir>/vdpau */
    TK_FILE_LINK,     /* a link the driver ships to a versioned library: libcuda.so.1 */
    TK_FILE_FIRMWARE, /* /lib/firmware/nvidia/<version>/gsp*.bin */
    TK_FILE_BINARY,   /* nvidia-smi, nvidia-persistenced, MPS control and server, ... */
    TK_FILE_IPC,      /* /run/nvidia-persistenced/socket, /tmp/nvidia-mps */
};

struct tk_file {
    enum tk_file_kind kind;
    char *path; /* inside the driver root, absolute */
};

/* What the lookup found, in a stable order: libraries directory by directory in search order
 * (names sorted), links after them, then firmware, binaries and IPC in the notes' order. */
struct tk_driver {
    char version[GPU_VERSION_MAX];
    char *libcuda_dir; /* the directory of libcuda.so.<version>, inside the driver root */
    size_t n_files;
    struct tk_file *files;
};
void tk_driver_free(struct tk_driver *d);
DEFINE_CLEANUP_FUNC(struct tk_driver, tk_driver_free)

/* The directories searched for libraries, in order, inside the driver root (NULL-terminated). */
extern const char *const tk_library_dirs[];

/* Finds the driver of that version under <host_root><driver_root>. libnvidia-ml.so.<version>
 * and libcuda.so.<version> are required: without them the error names the driver root and the
 * directories searched (-ENOENT). Directories reached twice (/lib -> usr/lib) count once. */
int tk_driver_lookup(const char *host_root, const char *driver_root, const char *version,
                     struct tk_driver **ret, struct err *e);
/* The NVML library of the driver under <host_root><driver_root>: the first libnvidia-ml.so.1 in
 * the search order, as a path this process can open. -ENOENT names the driver root. */
int tk_driver_find_nvml(const char *host_root, const char *driver_root, char *buf, size_t n,
                        struct err *e);

/* ---- the spec (pure) ---------------------------------------------------------------------- */

struct tk_cdi_input {
    const struct gpu_inventory *inv;
    const struct tk_driver *driver;
    const char *driver_root; /* host view: "/" or "/run/nvidia/driver" */
    const char *dev_root;    /* host view of the device nodes' root; NULL: driver_root */
    /* /proc/driver/nvidia-caps/mig-minors text, NULL when absent: the MIG capability minors are
     * then computed as the driver lays them out (tk_mig_cap_minor). */
    const char *mig_minors;
    /* Which of tk_control_nodes the host has (the spec names only those); NULL: all. */
    const bool *control_present;
};

/* The control device nodes every device needs, in the spec's order (NULL-terminated). */
extern const char *const tk_control_nodes[];
#define TK_N_CONTROL 4

/* The spec as YAML (malloc'ed, NUL-terminated). A GPU without a UUID (lost) is named by index
 * only. -EINVAL for an inventory without GPUs (a CDI spec needs a device). */
int tk_cdi_render(const struct tk_cdi_input *in, char **ret, struct err *e);

/* The device names the spec defines, in its order ("0", "GPU-...", "0:1", "MIG-...", "all"),
 * each with the kind: "nvidia.com/gpu=0". Into out, one per line. */
int tk_cdi_names(const struct gpu_inventory *inv, struct sbuf *out);

/* The lowest cdiVersion for the features a spec uses (the CDI library's rules). */
struct tk_cdi_features {
    bool digit_names; /* a device name starting with a digit: 0.5.0 */
    bool host_paths;  /* hostPath on a device node: 0.5.0 */
    bool mount_types; /* a mount's type: 0.4.0 */
    bool annotations; /* spec or device annotations: 0.6.0 */
    bool extra_gids;  /* additionalGids: 0.7.0 */
};
const char *tk_cdi_min_version(const struct tk_cdi_features *f);

/* The /dev/nvidia-caps/nvidia-cap<N> minor of a MIG GPU instance (ci < 0) or compute instance
 * on the GPU with that minor: from mig_minors text when it lists it, else the driver's layout
 * ("config" 1, "monitor" 2, then per GPU minor 15 GPU instances of 9 minors each: the GI's
 * access, then its 8 compute instances'). */
unsigned tk_mig_cap_minor(const char *mig_minors, unsigned gpu_minor, unsigned gi, int ci);

#endif
