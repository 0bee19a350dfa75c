/* SPDX-License-Identifier: Apache-2.0 */
/*
 * simcuda: the pure parts of the simulated libcuda (build/libcuda.so.1).
 *
 *  - PTX: simcuda_ptx_parse reads a PTX module's text the way the driver's loader must before
 *    it compiles anything: the header directives (.version, .target, .address_size), the
 *    module-level declarations, each .entry and .func with its parameter list, and the bodies'
 *    statements (balanced braces, ';'-terminated statements, labels, known opcodes). It does not
 *    type-check instructions or registers. Bytes in, a module description out; fuzzed.
 *  - visible devices: NVIDIA_VISIBLE_DEVICES (the devices a container was given) and
 *    CUDA_VISIBLE_DEVICES (the driver's own filter) applied to a fleet's GPUs.
 */
#ifndef GPUOP_SIMCUDA_H
#define GPUOP_SIMCUDA_H

#include <stdbool.h>
#include <stddef.h>

#include "util.h"

#define SIMCUDA_PTX_MAX_ENTRIES 32
#define SIMCUDA_PTX_MAX_PARAMS  32
#define SIMCUDA_PTX_NAME_MAX    128

enum simcuda_ptx_type {
    SIMCUDA_B8,
    SIMCUDA_B16,
    SIMCUDA_B32,
    SIMCUDA_B64,
    SIMCUDA_U8,
    SIMCUDA_U16,
    SIMCUDA_U32,
    SIMCUDA_U64,
    SIMCUDA_S8,
    SIMCUDA_S16,
    SIMCUDA_S32,
    SIMCUDA_S64,
    SIMCUDA_F16,
    SIMCUDA_F32,
    SIMCUDA_F64,
    SIMCUDA_PRED,
};

struct simcuda_ptx_param {
    enum simcuda_ptx_type type;
    size_t size;  /* bytes of one element */
    size_t count; /* array length; 1 for a scalar */
};

struct simcuda_ptx_entry {
    char name[SIMCUDA_PTX_NAME_MAX];
    bool kernel;  /* .entry (launchable); false: a .func */
    bool defined; /* has a body (false: a declaration) */
    size_t n_params;
    struct simcuda_ptx_param params[SIMCUDA_PTX_MAX_PARAMS];
};

struct simcuda_ptx_module {
    unsigned version_major, version_minor; /* .version */
    unsigned target_sm;                    /* the highest sm_NN of .target */
    unsigned address_size;                 /* 32 or 64 (default 32) */
    size_t n_entries;
    struct simcuda_ptx_entry entries[SIMCUDA_PTX_MAX_ENTRIES];
};

/* The newest PTX ISA the simulated driver compiles. */
#define SIMCUDA_PTX_ISA_MAX_MAJOR 9

/* Parses PTX text (len bytes, no NUL needed). -EINVAL with e naming the line and the reason
 * when the text is not a PTX module; -EPROTONOSUPPORT when its .version is newer than
 * SIMCUDA_PTX_ISA_MAX_MAJOR. */
int simcuda_ptx_parse(const char *text, size_t len, struct simcuda_ptx_module *ret, struct err *e);
const struct simcuda_ptx_entry *simcuda_ptx_find(const struct simcuda_ptx_module *m,
                                                 const char *name);

/* The device nodes a process has, by minor (GPU i has minor i): ctl, /dev/nvidiactl. */
struct simcuda_nodes {
    bool ctl;
    const unsigned *minors;
    size_t n;
};

/* The fleet GPUs a process sees, in CUDA's ordinal order: ret[0..*ret_n) are fleet indices.
 * nvidia_visible NULL or "void" with the control node among nodes (NULL: none read): the GPUs
 * whose node is there, as the driver finds them in a container given device nodes (CDI);
 * otherwise NULL: every GPU (a host process, whose nodes the simulation does not make); "all";
 * "none", "void" or "": none; else a comma list of indices and GPU- UUIDs (MIG devices are not
 * modelled: skipped). cuda_visible
 * NULL: no filter; else CUDA's rule: a comma list of ordinals (into the list so far) or unique
 * GPU- UUID prefixes, read up to the first entry that is invalid, unknown or repeated.
 * uuids[i] is fleet GPU i's UUID. */
void simcuda_visible(const char *const *uuids, size_t n_gpus, const struct simcuda_nodes *nodes,
                     const char *nvidia_visible, const char *cuda_visible, unsigned *ret,
                     size_t *ret_n);

#endif
