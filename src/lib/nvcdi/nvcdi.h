/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nvcdi: the node's Container Device Interface spec for its GPUs (kind nvidia.com/gpu), as
 * `nvidia-ctk cdi generate` writes it (../shared/reference/notes/node-components.md §3). Used by
 * `gpuop toolkit`, the daemon that keeps it current, and by `gpuop mig-manager`, which writes it
 * again as soon as it changed the MIG layout.
 *
 *  - The driver lookup (nvcdi-lookup.c, file I/O only): the driver's files under a driver root
 *    (host "/" or the containerized driver's "/run/nvidia/driver"), found with the library
 *    search order of the notes: its versioned libraries (lib*.so.<version>, their directories'
 *    vdpau/ too) and the links the driver ships to them (libcuda.so.1), the GSP firmware, the
 *    binaries (nvidia-smi, persistenced, MPS) and the IPC sockets.
 *  - The spec (nvcdi-spec.c, pure): the GPU inventory and what the lookup found in, YAML text out,
 *    byte for byte the same for the same input. Every GPU by index and by UUID, every MIG device
 *    by "<gpu>:<mig>" and by MIG UUID, and "all"; the spec-level edits carry the control device
 *    nodes, the driver's files and the createContainer hooks (`gpuop cdi-hook`: the libcuda.so
 *    link, the loader cache with the driver's folders, CUDA forward compatibility); cdiVersion
 *    is the lowest the fields used need.
 *  - The generator (nvcdi-generate.c, the shell): the driver root (a flag, else driver-ready's),
 *    NVML, the lookup and the MIG capability minors read, the spec rendered and checked as every
 *    CDI consumer reads it.
 *
 * Paths: a driver file is named by its path inside the driver root ("/usr/lib/x86_64-linux-gnu/
 * libcuda.so.550.90.07"): that is where a container sees it; the spec's hostPath is the driver
 * root plus where the path leads inside the driver root (links followed there, never outside).
 * The lookup reads the files at <host_root><driver_root><path>, host_root being where this
 * process sees the host's filesystem ("/" on the host, "/host" in a container).
 */
#ifndef GPUOP_NVCDI_H
#define GPUOP_NVCDI_H

#include <stdbool.h>
#include <stddef.h>

#include "gpu.h"
#include "util.h"

#define NVCDI_CDI_KIND     "nvidia.com/gpu"
#define NVCDI_CDI_SPEC     "/var/run/cdi/nvidia.yaml"
#define NVCDI_GPU_MAJOR    195 /* /dev/nvidia<minor>: the driver's fixed character major */
#define NVCDI_SPEC_MAX     (4u << 20)
#define NVCDI_LOOKUP_MAX   1024 /* files the lookup returns at most */
#define NVCDI_MIG_MINORS   GPU_MIG_MINORS
#define NVCDI_HOOK_PATH    "/usr/local/nvidia/gpuop" /* the toolkit's default install */
#define NVCDI_HOOK_FOLDERS 32 /* library folders the ldcache hook names at most */

/* ---- the driver root ---------------------------------------------------------------------- */

enum nvcdi_file_kind {
    NVCDI_FILE_LIBRARY,  /* lib*.so.<version>, and those in <dir>/vdpau */
    NVCDI_FILE_LINK,     /* a link the driver ships to a versioned library: libcuda.so.1 */
    NVCDI_FILE_FIRMWARE, /* /lib/firmware/nvidia/<version>/gsp*.bin */
    NVCDI_FILE_BINARY,   /* nvidia-smi, nvidia-persistenced, MPS control and server, ... */
    NVCDI_FILE_IPC,      /* /run/nvidia-persistenced/socket, /tmp/nvidia-mps */
};

struct nvcdi_file {
    enum nvcdi_file_kind kind;
    char *path; /* inside the driver root, absolute: where the container sees it */
    /* Where it is inside the driver root once its links are followed there (the spec's hostPath
     * is the driver root plus this); NULL: path has no link on the way. */
    char *resolved;
};

/* A file of the driver the lookup left out: its links end outside the driver root, at what is
 * not there, or at what is not a library (a libX.so.<version> -> /etc/shadow). */
struct nvcdi_skipped {
    char *path;   /* inside the driver root, as found */
    char *reason; /* "resolves to \"/etc/shadow\" inside the driver root ..., not a library" */
};

/* What the lookup found, in a stable order: libraries directory by directory in search order
 * (names sorted), links after them, then firmware, binaries and IPC in the notes' order. */
struct nvcdi_driver {
    char version[GPU_VERSION_MAX];
    char *libcuda_dir; /* the directory of libcuda.so.<version>, inside the driver root */
    size_t n_files;
    struct nvcdi_file *files;
    size_t n_skipped; /* in the order met */
    struct nvcdi_skipped *skipped;
};
void nvcdi_driver_free(struct nvcdi_driver *d);
DEFINE_CLEANUP_FUNC(struct nvcdi_driver, nvcdi_driver_free)

/* <host_root><driver_root><path> without doubled slashes (malloc'ed): where this process reaches
 * a path of the host ("/host" + "/run/nvidia/driver" + "/usr/bin/nvidia-smi"). */
char *nvcdi_host_path(const char *host_root, const char *driver_root, const char *path);

/* Finds the driver of that version under <host_root><driver_root>, in nodestate's library and
 * binary folders (nodestate_lib_dirs, nodestate_bin_dirs). libnvidia-ml.so.<version> and
 * libcuda.so.<version> are required: without them the error names the driver root and the
 * directories searched (-ENOENT). Directories reached twice (/lib -> usr/lib) count once. Every
 * path is resolved inside the driver root (file_root_resolve); what resolves to nothing usable
 * there is left out and listed in skipped, never followed outside. */
int nvcdi_driver_lookup(const char *host_root, const char *driver_root, const char *version,
                        struct nvcdi_driver **ret, struct err *e);
/* The NVML library of the driver under <host_root><driver_root>: the first libnvidia-ml.so.1 in
 * the search order, resolved inside the driver root, as a path this process can open. -ENOENT
 * names the driver root. */
int nvcdi_driver_find_nvml(const char *host_root, const char *driver_root, char *buf, size_t n,
                           struct err *e);

/* ---- the spec (pure) ---------------------------------------------------------------------- */

struct nvcdi_cdi_input {
    const struct gpu_inventory *inv;
    const struct nvcdi_driver *driver;
    const char *driver_root; /* host view: "/" or "/run/nvidia/driver" */
    const char *dev_root;    /* host view of the device nodes' root; NULL: driver_root */
    /* /proc/driver/nvidia-caps/mig-minors text, NULL when absent: the MIG capability minors are
     * then computed as the driver lays them out (gpu_mig_cap_minor). */
    const char *mig_minors;
    /* Which of nvcdi_control_nodes the host has (the spec names only those); NULL: all. */
    const bool *control_present;
    /* The gpuop the spec's createContainer hooks run (a host path: "/usr/local/nvidia/gpuop");
     * NULL: no hooks. */
    const char *hook_path;
    /* The spec's kind ("vendor/class"); NULL: NVCDI_CDI_KIND. The DRA plugin writes the same
     * devices under a kind of its own, so its spec and the toolkit's never clash. */
    const char *kind;
};

/* The control device nodes every device needs, in the spec's order (NULL-terminated). */
extern const char *const nvcdi_control_nodes[];
#define NVCDI_N_CONTROL 4

/* The spec as YAML (malloc'ed, NUL-terminated). A GPU without a UUID (lost) is named by index
 * only. -EINVAL for an inventory without GPUs (a CDI spec needs a device). */
int nvcdi_cdi_render(const struct nvcdi_cdi_input *in, char **ret, struct err *e);

/* The device names the spec defines, in its order ("0", "GPU-...", "0:1", "MIG-...", "all"),
 * each with the kind NVCDI_CDI_KIND: "nvidia.com/gpu=0". Into out, one per line. */
int nvcdi_cdi_names(const struct gpu_inventory *inv, struct sbuf *out);

/* The lowest cdiVersion for the features a spec uses (the CDI library's rules). */
struct nvcdi_cdi_features {
    bool digit_names; /* a device name starting with a digit: 0.5.0 */
    bool host_paths;  /* hostPath on a device node: 0.5.0 */
    bool mount_types; /* a mount's type: 0.4.0 */
    bool annotations; /* spec or device annotations: 0.6.0 */
    bool extra_gids;  /* additionalGids: 0.7.0 */
};
const char *nvcdi_cdi_min_version(const struct nvcdi_cdi_features *f);

/* ---- the generator (the shell) ------------------------------------------------------------- */

struct nvcdi_gen_options {
    const char *host_root;   /* where this process sees the host's "/" ("/", "/host") */
    const char *driver_root; /* host view; NULL: driver-ready's NVIDIA_DRIVER_ROOT, else "/" */
    const char *dev_root;    /* host view; NULL: driver-ready's NVIDIA_DEV_ROOT, else driver root */
    const char *validations_dir; /* host view of driver-ready's folder */
    /* NVML: a library the caller has open (borrowed), else nvml_library, else the first
     * libnvidia-ml.so.1 under the driver root (opened here, again after a failed read) */
    struct gpu_lib *lib;
    const char *nvml_library;
    const char *mig_minors; /* NVCDI_MIG_MINORS path as this process sees it; NULL: none */
    const char *spec_path;  /* the spec's name in errors of the check (NVCDI_CDI_SPEC) */
    /* The gpuop the spec's hooks run, a host path; "": no hooks; NULL: <TOOLKIT_INSTALL_DIR of
     * .toolkit-ctr-ready>/gpuop, else NVCDI_HOOK_PATH. Hooks are left out (a warning) unless it
     * is an executable file on the host. */
    const char *hook_path;
    bool hook_unchecked; /* hook_path is not checked: the caller installs it with the spec */
    const char *kind;    /* the spec's kind; NULL: NVCDI_CDI_KIND */
};

/* What the last run left out of the spec: a driver file ("driver file left out of the CDI spec",
 * its path inside the driver root, why) or the hooks ("CDI hooks left out", the gpuop named). */
struct nvcdi_warning {
    const char *what;
    char *path;
    char *reason;
};

/* Copies the options' strings' pointers (they must outlive it). */
struct nvcdi_gen *nvcdi_gen_new(const struct nvcdi_gen_options *o);
void nvcdi_gen_free(struct nvcdi_gen *g);
DEFINE_CLEANUP_FUNC(struct nvcdi_gen, nvcdi_gen_free)

/* The spec for the GPUs as they are now (malloc'ed YAML), checked; ret_version (may be NULL):
 * the driver's version. Not thread-safe. */
int nvcdi_gen_spec(struct nvcdi_gen *g, char **ret, char *ret_version, size_t version_len,
                   struct err *e);
/* The last run's driver and device roots (host view). */
const char *nvcdi_gen_driver_root(const struct nvcdi_gen *g);
/* The last nvcdi_gen_spec's warnings (valid until the next run); their count. */
size_t nvcdi_gen_warnings(const struct nvcdi_gen *g, const struct nvcdi_warning **ret);
/* The GPU inventory through the generator's NVML (the driver root resolved as for a spec). */
int nvcdi_gen_inventory(struct nvcdi_gen *g, struct gpu_inventory **ret, struct err *e);

#endif
