/* SPDX-License-Identifier: Apache-2.0 */
/*
 * simimage: the simulated images kubelet-sim runs in place of NVIDIA's (build/sim-image, one
 * program dispatched on argv[0]'s name; build/sim-image-bin/ holds the names as symlinks):
 *
 *   nvidia-driver  NVIDIA's driver container (nvcr.io/nvidia/driver:<version>-<os>): `init`
 *                  refuses while another driver is loaded, resolves the kernel's headers,
 *                  "builds", loads the modules into the node root (GPUOP_SIM_ROOT), lays out the
 *                  driver root <root>/run/nvidia/driver, then waits for SIGTERM and unloads
 *                  (refused while a process holds a GPU, as rmmod refuses). A precompiled image
 *                  (<branch>-<kernel>-<os>) builds nothing and refuses another kernel.
 *   nvidia-smi     the table, `-L` and `--query-gpu`, through NVML (src/edge/nvml); exit 9 without
 * a driver, as the real one. cuda-sample    CUDA's vectorAdd sample
 * (nvcr.io/nvidia/k8s/cuda-sample, nvcr.io/nvidia/cuda): opens the GPUs of NVIDIA_VISIBLE_DEVICES,
 * shows in NVML's running processes for SIM_WORKLOAD_SECONDS, exits 0; CUDA's error text and 1
 * without a driver or a device. rmmod          kmod's rmmod on the node root's <root>/sys/module:
 * refuses nvidia while a module using it is loaded or a process holds a GPU, as the kernel does.
 *
 * These programs stand in for NVIDIA's, so they keep those programs' command lines, output and
 * exit codes rather than the component runtime's (src/lib/svc). This header is their pure part:
 * parsing the image reference and NVIDIA_VISIBLE_DEVICES, resolving devices against an
 * inventory, and rendering nvidia-smi's output and the kernel module's files.
 */
#ifndef GPUOP_SIMIMAGE_H
#define GPUOP_SIMIMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpu.h"
#include "simnvml.h"
#include "util.h"

/* ---- the driver image ------------------------------------------------------------------ */

struct simimg_driver_ref {
    char version[64]; /* "550.127.05"; a precompiled image's branch ("595") until completed */
    char os[64];      /* "ubuntu22.04"; "" when the tag names none */
    /* A precompiled image (tag <branch>-<kernel>-<os>): the kernel its modules were built for
     * ("5.15.0-69-generic"); "" for an image that compiles them on the node. */
    char kernel[128];
};

/* The driver version and OS of a driver image ("nvcr.io/nvidia/driver:550.127.05-ubuntu22.04",
 * a digest after '@' ignored); env_version (DRIVER_VERSION), when not NULL or empty, wins over
 * the tag's. Fails when neither names a version (digits and dots). image may be NULL. NVIDIA's
 * precompiled tag, <branch>-<kernel>-<os> ("595-5.15.0-69-generic-ubuntu22.04": a branch without
 * a dot, a kernel, an OS after the last '-'), sets kernel and leaves the branch as the version;
 * an env_version of another branch is then refused. */
int simimg_driver_ref_parse(const char *image, const char *env_version,
                            struct simimg_driver_ref *ret, struct err *e);
/* A precompiled image's full version: the branch its tag names is completed with the simulated
 * fleet's driver version (fleet_version, NULL: none) when that is of the branch; otherwise
 * refused, saying to set DRIVER_VERSION. A ref with a full version is left as it is. */
int simimg_driver_ref_complete(struct simimg_driver_ref *ref, const char *fleet_version,
                               struct err *e);

/* The kernel release of a /proc/version text ("Linux version 5.15.0-127-generic (...) ..."). */
int simimg_kernel_from_proc_version(const char *text, char *buf, size_t n, struct err *e);

/* /proc/driver/nvidia/version as the loaded module writes it (the open modules name
 * themselves "Open Kernel Module"). */
int simimg_proc_version_text(const char *version, const char *kernel, bool open, struct sbuf *out);

/* The kernel modules NVIDIA's driver container loads: KERNEL_MODULE_TYPE (`kmt`: auto, open or
 * proprietary), else the older OPEN_KERNEL_MODULES_ENABLED (`open_enabled`, "true"). Under auto
 * (or neither set) the open modules where a GPU needs them (`any_open_only`: Blackwell and
 * newer) or, from driver branch 560 on, where every GPU can run them (`all_gsp`: Turing and
 * newer); else the proprietary ones. A kmt of another value is refused, naming it. */
int simimg_module_type(const char *kmt, const char *open_enabled, bool all_gsp, bool any_open_only,
                       unsigned branch, bool *ret_open, struct err *e);

/* The kernel's lines when a GPU refuses the modules loaded (open: a GPU without a GSP, before
 * Turing; proprietary: a GPU that needs the open modules, Blackwell and newer), as the real
 * modules log them; bus_id "0000:18:00.0", pci_device_id NVML's (device << 16 | 0x10de). */
void simimg_nvrm_refusal(bool open, const char *bus_id, uint32_t pci_device_id, struct sbuf *out);

/* ---- the devices a container sees ------------------------------------------------------ */

/* One device CUDA would enumerate: a GPU (mig false) or a MIG device (gi, ci) of GPU gpu. */
struct simimg_device {
    unsigned gpu;
    bool mig;
    unsigned gi_id, ci_id;
    char uuid[GPU_UUID_MAX];
    char name[GPU_NAME_MAX + GPU_PROFILE_MAX + 8];
};

/* Resolves NVIDIA_VISIBLE_DEVICES (value NULL: unset) against the inventory, as the NVIDIA
 * container runtime does: "all", "none", "void", "" or unset (none), or a comma-separated list
 * of GPU indices ("0"), MIG indices ("0:1", GPU 0's MIG device 1), GPU-... and MIG-... UUIDs.
 * "all" gives every GPU with MIG off and every MIG device of the others. Unknown entries fail
 * (-ENOENT, naming the entry), as the runtime fails the container. Duplicates are listed once.
 * *ret (free) and *ret_n are set; none visible is 0 entries. */
int simimg_visible_devices(const struct gpu_inventory *inv, const char *value,
                           struct simimg_device **ret, size_t *ret_n, struct err *e);

/* ---- device nodes ---------------------------------------------------------------------- */

/* The devices CUDA enumerates from device nodes (sim_dev_read), as under CDI
 * (NVIDIA_VISIBLE_DEVICES unset or void): none without the control node; each GPU whose node is
 * there, and for a GPU with MIG on, instead, each of its MIG devices whose GPU-instance and
 * compute-instance capability nodes are both there (its GPU node needed too). Lost GPUs are left
 * out. *ret (free) and *ret_n set. */
void simimg_devices_from_nodes(const struct gpu_inventory *inv, const struct sim_dev_nodes *v,
                               struct simimg_device **ret, size_t *ret_n);

/* ---- nvidia-smi ------------------------------------------------------------------------- */

struct simimg_smi_proc {
    unsigned gpu;
    unsigned gi_id, ci_id; /* UINT32_MAX: none */
    uint32_t pid;
    uint64_t used_mib;
    char name[64];
};

struct simimg_smi_input {
    const struct gpu_inventory *inv;
    const struct gpu_sample *samples; /* inv->n_gpus, or NULL */
    const struct simimg_smi_proc *procs;
    size_t n_procs;
    uint64_t now_unix_ms;
};

/* The default table ("nvidia-smi" without arguments). */
int simimg_smi_table(const struct simimg_smi_input *in, struct sbuf *out);
/* `nvidia-smi -L`: "GPU 0: NAME (UUID: GPU-...)" and the MIG devices under it. */
int simimg_smi_list(const struct gpu_inventory *inv, struct sbuf *out);
/* `--query-gpu=F1,F2 --format=csv[,noheader][,nounits]`. Unknown fields fail (-EINVAL) with
 * nvidia-smi's message. */
int simimg_smi_query(const struct simimg_smi_input *in, const char *fields, const char *format,
                     struct sbuf *out, struct err *e);

#endif
