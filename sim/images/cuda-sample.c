/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cuda-sample: CUDA's vectorAdd sample as NVIDIA's workload images run it, simulated. It opens
 * the GPUs NVIDIA_VISIBLE_DEVICES names through NVML, registers itself as a running process on
 * each (the simulated NVML's shared state, GPUOP_SIM_STATE) for SIM_WORKLOAD_SECONDS (default 0),
 * with the load SIM_WORKLOAD_LOAD names ("sm=0.8,tensor=0.5,dram=0.3"; unset: its GPU's), and
 * prints the sample's output. Without a driver, or without a device, it fails as the sample
 * does, with CUDA's error text. SIGTERM ends it as it ends the real one (killed by the signal),
 * after it left the process list.
 */
#include <string.h>

#include "images-shell.h"
#include "simimage.h"

#define SAMPLE_USED_MIB 256 /* a CUDA context and the three vectors */

static int cuda_fail(const char *why)
{
    fflush(stdout);
    fprintf(stderr, "Failed to allocate device vector A (error code %s)!\n", why);
    return 1;
}

/* The devices of the node files in /dev, as CUDA finds them in a CDI container. */
static void devices_from_dev(const struct gpu_inventory *inv, struct simimg_device **ret,
                             size_t *ret_n)
{
    static struct sim_dev_nodes nodes;
    sim_dev_read("/dev", &nodes);
    simimg_devices_from_nodes(inv, &nodes, ret, ret_n);
}

int simimg_cuda_sample_main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    struct err e = {0};
    uint64_t run_ms = 0;
    if (simimg_env_seconds("SIM_WORKLOAD_SECONDS", 0, &run_ms, &e) < 0) {
        fprintf(stderr, "cuda-sample: %s\n", err_msg(&e));
        return 1;
    }
    struct sim_load load = {0};
    const char *load_spec = env_get("SIM_WORKLOAD_LOAD");
    if (load_spec && sim_load_parse(load_spec, &load, &e) < 0) {
        fprintf(stderr, "cuda-sample: SIM_WORKLOAD_LOAD: %s\n", err_msg(&e));
        return 1;
    }
    int sigfd _cleanup_close_ = simimg_signals_open();
    printf("[Vector addition of 50000 elements]\n");
    fflush(stdout);

    struct gpu_lib *lib _cleanup_(gpu_lib_freep) = NULL;
    if (gpu_lib_open(NULL, &lib, &e) < 0)
        return cuda_fail("CUDA driver version is insufficient for CUDA runtime version");
    struct gpu_inventory *inv _cleanup_(gpu_inventory_freep) = NULL;
    if (gpu_inventory_read(lib, &inv, &e) < 0)
        return cuda_fail("unknown error");
    struct simimg_device *devs _cleanup_free_ = NULL;
    size_t n = 0;
    /* Under CDI the runtime gave the container device nodes and NVIDIA_VISIBLE_DEVICES=void (or
     * nothing): the GPUs are the nodes in /dev, as the real driver finds them. Otherwise the
     * variable names them, as the container toolkit's hook would have. */
    const char *want = getenv("NVIDIA_VISIBLE_DEVICES");
    if (!want || strcmp(want, "void") == 0)
        devices_from_dev(inv, &devs, &n);
    else if (simimg_visible_devices(inv, want, &devs, &n, &e) < 0)
        n = 0;
    if (n == 0)
        return cuda_fail("no CUDA-capable device is detected");

    struct sim_fleet *fleet _cleanup_(sim_fleet_freep) = NULL;
    struct sim_store *store _cleanup_(sim_store_freep) = NULL;
    if (simimg_state_open(&fleet, &store, &e) < 0) {
        fprintf(stderr, "cuda-sample: %s\n", err_msg(&e));
        return 1;
    }
    uint32_t pid = (uint32_t)getpid();
    if (store) {
        struct sim_proc procs[SIM_MAX_PROCS];
        size_t k = 0;
        for (size_t i = 0; i < n && k < ARRAY_SIZE(procs); i++)
            procs[k++] = (struct sim_proc){.pid = pid,
                                           .gpu = devs[i].gpu,
                                           .gi_id = devs[i].mig ? devs[i].gi_id : SIM_NO_ID,
                                           .ci_id = devs[i].mig ? devs[i].ci_id : SIM_NO_ID,
                                           .used_mib = SAMPLE_USED_MIB,
                                           .has_load = load_spec != NULL,
                                           .load = load};
        if (sim_procs_register(store, procs, k, &e) < 0) {
            fprintf(stderr, "cuda-sample: %s\n", err_msg(&e));
            return cuda_fail("out of memory");
        }
    }
    printf("Copy input data from the host memory to the CUDA device\n");
    printf("CUDA kernel launch with 196 blocks of 256 threads\n");
    fflush(stdout);
    int sig = 0;
    bool stopped = sigfd >= 0 && simimg_signal_wait(sigfd, run_ms, &sig);
    if (sigfd < 0 && run_ms)
        sleep((unsigned)((run_ms + 999) / 1000));
    if (store && sim_procs_unregister(store, pid, &e) < 0)
        fprintf(stderr, "cuda-sample: %s\n", err_msg(&e));
    if (stopped) {
        /* as the real program: the signal's default action ends it */
        signal(sig, SIG_DFL);
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, sig);
        sigprocmask(SIG_UNBLOCK, &set, NULL);
        raise(sig);
        return 128 + sig;
    }
    printf("Copy output data from the CUDA device to the host memory\n");
    printf("Test PASSED\n");
    printf("Done\n");
    return fflush(stdout) == 0 ? 0 : 1;
}
