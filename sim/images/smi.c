/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nvidia-smi, simulated: through NVML (src/edge/nvml, the library GPUOP_NVML_LIBRARY names), the
 * default table, -L, --query-gpu, --version, -r -i ID (a GPU reset through the simulated
 * fleet's state: refused while a process runs on the GPU, or when the GPU is lost) and
 * `compute-policy` (--set-timeslice 0-3 and -l: the GPUs' compute time slice, kept in the
 * simulated fleet's state per GPU), with the real
 * program's failure texts and exit codes (9: the driver is not loaded; 12: no libnvidia-ml; 2: bad
 * arguments).
 */
#include <string.h>

#include "images-shell.h"
#include "simimage.h"

#define SMI_EXIT_BAD_ARGS  2
#define SMI_EXIT_NO_DRIVER 9
#define SMI_EXIT_NO_LIB    12
#define SMI_OUT_LIMIT      (1u << 20)

static void proc_name(uint32_t pid, char *buf, size_t n)
{
    _cleanup_free_ char *path = xasprintf("/proc/%u/comm", pid);
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    struct err e = {0};
    if (file_read_all(path, 256, &text, &len, &e) < 0) {
        snprintf(buf, n, "[unknown]");
        return;
    }
    while (len && text[len - 1] == '\n')
        text[--len] = '\0';
    snprintf(buf, n, "%s", text);
}

/* The processes registered on the node's GPUs (the simulated NVML's shared state). */
static size_t smi_procs(struct simimg_smi_proc *ret, size_t max)
{
    struct sim_fleet *f _cleanup_(sim_fleet_freep) = NULL;
    struct sim_store *s _cleanup_(sim_store_freep) = NULL;
    struct err e = {0};
    if (simimg_state_open(&f, &s, &e) < 0 || !s)
        return 0;
    struct sim_proc live[SIM_MAX_PROCS];
    size_t n = sim_procs_live(sim_store_state(s), SIM_NO_ID, live, ARRAY_SIZE(live));
    if (n > max)
        n = max;
    for (size_t i = 0; i < n; i++) {
        ret[i] = (struct simimg_smi_proc){.gpu = live[i].gpu,
                                          .gi_id = live[i].gi_id,
                                          .ci_id = live[i].ci_id,
                                          .pid = live[i].pid,
                                          .used_mib = live[i].used_mib};
        proc_name(live[i].pid, ret[i].name, sizeof(ret[i].name));
    }
    return n;
}

static int reset_apply(struct sim_update *u, struct sim_state *st, void *arg, struct err *e)
{
    (void)u;
    const unsigned *gpu = arg;
    if (sim_procs_live(st, *gpu, NULL, 0) > 0)
        return err_set(e, -EBUSY, "In use by another client");
    if (sim_gpu_reset(&st->gpus[*gpu]) != 0)
        return err_set(e, -ENODEV, "GPU is lost");
    return 0;
}

/* The GPU an -i value names (an index, a UUID or a PCI bus id), or NULL. */
static const struct gpu_device *smi_find(const struct gpu_inventory *inv, const char *id)
{
    for (size_t i = 0; i < inv->n_gpus; i++) {
        char idx[16];
        snprintf(idx, sizeof(idx), "%u", inv->gpus[i].index);
        if (strcmp(id, idx) == 0 || strcmp(id, inv->gpus[i].uuid) == 0 ||
            strcmp(id, inv->gpus[i].bus_id) == 0)
            return &inv->gpus[i];
    }
    return NULL;
}

/* nvidia-smi -r -i ID: ID an index or a GPU's UUID. */
static int smi_reset(const struct gpu_inventory *inv, const char *id)
{
    const struct gpu_device *g = smi_find(inv, id);
    if (!g) {
        printf("No devices were found\n");
        return 6;
    }
    struct err e = {0};
    struct sim_fleet *f _cleanup_(sim_fleet_freep) = NULL;
    struct sim_store *s _cleanup_(sim_store_freep) = NULL;
    unsigned gpu = g->index;
    if (simimg_state_open(&f, &s, &e) < 0 || !s || gpu >= sim_store_state(s)->n_gpus) {
        printf("Unable to reset this GPU: %s\n", s ? err_msg(&e) : "no simulated state");
        return 255;
    }
    if (sim_store_update(s, reset_apply, &gpu, &e) != 0) {
        printf("The following GPUs could not be reset:\n  GPU %s: %s\n\n", g->bus_id, err_msg(&e));
        return 255;
    }
    printf("GPU %s was successfully reset.\nAll done.\n", g->bus_id);
    return 0;
}

static const char *const timeslice_names[] = {"DEFAULT", "SHORT", "MEDIUM", "LONG"};

struct timeslice_set {
    unsigned gpu; /* SIM_NO_ID: every GPU */
    unsigned value;
};

static int timeslice_apply(struct sim_update *u, struct sim_state *st, void *arg, struct err *e)
{
    (void)u;
    const struct timeslice_set *t = arg;
    for (size_t i = 0; i < st->n_gpus; i++) {
        if (t->gpu != SIM_NO_ID && i != t->gpu)
            continue;
        if (st->gpus[i].lost)
            return err_set(e, -ENODEV, "GPU is lost");
        st->gpus[i].timeslice = t->value;
    }
    return 0;
}

/* nvidia-smi compute-policy [-i ID] (--set-timeslice N | -l): N 0 (default), 1 (short), 2
 * (medium) or 3 (long); without -i every GPU. */
static int smi_compute_policy(const struct gpu_inventory *inv, const char *id, int set)
{
    const struct gpu_device *g = NULL;
    if (id && !(g = smi_find(inv, id))) {
        printf("No devices were found\n");
        return 6;
    }
    struct err e = {0};
    struct sim_fleet *f _cleanup_(sim_fleet_freep) = NULL;
    struct sim_store *s _cleanup_(sim_store_freep) = NULL;
    if (simimg_state_open(&f, &s, &e) < 0 || !s) {
        printf("Failed to access compute policies: %s\n", s ? err_msg(&e) : "no simulated state");
        return 255;
    }
    if (set >= 0) {
        struct timeslice_set t = {.gpu = g ? g->index : SIM_NO_ID, .value = (unsigned)set};
        if (sim_store_update(s, timeslice_apply, &t, &e) != 0) {
            printf("Failed to set timeslice: %s\n", err_msg(&e));
            return 255;
        }
    }
    const struct sim_state *st = sim_store_state(s);
    for (size_t i = 0; i < inv->n_gpus; i++) {
        const struct gpu_device *d = &inv->gpus[i];
        if ((g && d != g) || d->index >= st->n_gpus)
            continue;
        unsigned v = st->gpus[d->index].timeslice;
        if (set >= 0)
            printf("Set timeslice to %s for GPU %s\n", timeslice_names[v], d->bus_id);
        else
            printf("GPU %u (%s): timeslice %s\n", d->index, d->uuid, timeslice_names[v]);
    }
    return 0;
}

static int bad_args(void)
{
    printf("Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n\n");
    return SMI_EXIT_BAD_ARGS;
}

int simimg_smi_main(int argc, char **argv)
{
    enum { TABLE, LIST, QUERY, VERSION, RESET, POLICY } mode = TABLE;
    const char *fields = NULL, *format = NULL, *id = NULL, *timeslice = NULL;
    bool policy_list = false;
    int first = 1;
    if (argc > 1 && strcmp(argv[1], "compute-policy") == 0)
        mode = POLICY, first = 2;
    for (int i = first; i < argc; i++) {
        const char *a = argv[i];
        if (mode == POLICY && (strcmp(a, "-l") == 0 || strcmp(a, "--list") == 0))
            policy_list = true;
        else if (mode == POLICY && strcmp(a, "--set-timeslice") == 0 && i + 1 < argc)
            timeslice = argv[++i];
        else if (mode == POLICY && str_has_prefix(a, "--set-timeslice="))
            timeslice = a + strlen("--set-timeslice=");
        else if (mode == POLICY && strcmp(a, "-i") != 0 && strcmp(a, "--id") != 0 &&
                 !str_has_prefix(a, "--id="))
            return bad_args();
        else if (strcmp(a, "-L") == 0 || strcmp(a, "--list-gpus") == 0)
            mode = LIST;
        else if (strcmp(a, "--version") == 0)
            mode = VERSION;
        else if (strcmp(a, "-r") == 0 || strcmp(a, "--gpu-reset") == 0)
            mode = RESET;
        else if ((strcmp(a, "-i") == 0 || strcmp(a, "--id") == 0) && i + 1 < argc)
            id = argv[++i];
        else if (str_has_prefix(a, "--id="))
            id = a + strlen("--id=");
        else if (str_has_prefix(a, "--query-gpu="))
            mode = QUERY, fields = a + strlen("--query-gpu=");
        else if (strcmp(a, "--query-gpu") == 0 && i + 1 < argc)
            mode = QUERY, fields = argv[++i];
        else if (str_has_prefix(a, "--format="))
            format = a + strlen("--format=");
        else if (strcmp(a, "--format") == 0 && i + 1 < argc)
            format = argv[++i];
        else
            return bad_args();
    }
    if ((mode == QUERY && !format) || (mode == RESET && !id) ||
        (id && mode != RESET && mode != POLICY))
        return bad_args();
    int set = -1;
    if (mode == POLICY) {
        if (policy_list == (timeslice != NULL))
            return bad_args();
        if (timeslice && (strlen(timeslice) != 1 || timeslice[0] < '0' || timeslice[0] > '3'))
            return bad_args();
        if (timeslice)
            set = timeslice[0] - '0';
    }

    struct err e = {0};
    struct gpu_lib *lib _cleanup_(gpu_lib_freep) = NULL;
    int r = gpu_lib_open(NULL, &lib, &e);
    if (r == -ENOENT && !lib && strstr(err_msg(&e), "cannot load")) {
        printf("NVIDIA-SMI couldn't find libnvidia-ml.so library in your system. Please make "
               "sure that the NVIDIA Display Driver is properly installed and present in your "
               "system.\nPlease also try adding directory that contains libnvidia-ml.so to your "
               "system PATH.\n\n");
        return SMI_EXIT_NO_LIB;
    }
    if (r < 0) {
        printf("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
               "Make sure that the latest NVIDIA driver is installed and running.\n\n");
        return SMI_EXIT_NO_DRIVER;
    }
    struct gpu_inventory *inv _cleanup_(gpu_inventory_freep) = NULL;
    if (gpu_inventory_read(lib, &inv, &e) < 0) {
        printf("Unable to determine the device handle for the GPUs: %s\n", err_msg(&e));
        return 255;
    }
    if (mode == RESET)
        return smi_reset(inv, id);
    if (mode == POLICY)
        return smi_compute_policy(inv, id, set);
    struct sbuf out _cleanup_sbuf_;
    sbuf_init(&out, SMI_OUT_LIMIT);
    if (mode == VERSION) {
        /* NVML's version is the driver's branch and minor: 550.127.05 -> 550.127 */
        int nvml_len = (int)strcspn(inv->driver_version, ".");
        if (inv->driver_version[nvml_len] == '.')
            nvml_len += 1 + (int)strcspn(inv->driver_version + nvml_len + 1, ".");
        sbuf_addf(&out,
                  "NVIDIA-SMI version  : %s\nNVML version        : %.*s\nDRIVER version      : "
                  "%s\nCUDA Version        : %d.%d\n",
                  inv->driver_version, nvml_len, inv->driver_version, inv->driver_version,
                  inv->cuda_driver_version / 1000, (inv->cuda_driver_version % 1000) / 10);
        r = sbuf_check(&out);
    } else if (mode == LIST) {
        r = simimg_smi_list(inv, &out);
    } else {
        struct gpu_sample *samples _cleanup_free_ = xcalloc(inv->n_gpus + 1, sizeof(*samples));
        for (size_t i = 0; i < inv->n_gpus; i++) {
            struct err se = {0};
            gpu_sample_read(lib, inv->gpus[i].index, &samples[i], &se);
        }
        struct simimg_smi_proc procs[SIM_MAX_PROCS];
        struct simimg_smi_input in = {.inv = inv,
                                      .samples = samples,
                                      .procs = procs,
                                      .n_procs = smi_procs(procs, ARRAY_SIZE(procs)),
                                      .now_unix_ms = now_ms_real()};
        if (mode == QUERY) {
            r = simimg_smi_query(&in, fields, format, &out, &e);
            if (r == -EINVAL) {
                printf("%s\n\n", err_msg(&e));
                return SMI_EXIT_BAD_ARGS;
            }
        } else {
            r = simimg_smi_table(&in, &out);
        }
    }
    if (r < 0) {
        fprintf(stderr, "nvidia-smi: output: %s\n", strerror(-r));
        return 255;
    }
    fwrite(out.data, 1, out.len, stdout);
    return fflush(stdout) == 0 ? 0 : 255;
}
