/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The profiling fields' cost per collection: with GPM samplers made (once) for every GPU of a
 * fleet, a collection's GPM path (a sample, the metrics between it and the previous one, the
 * values the exporter takes from them) calls gpuop's allocator not once. Linked with
 * -Wl,--wrap for malloc, calloc and realloc, so the count covers gpuop's code (the GPU model,
 * the exporter's core and util), not the NVML library's own.
 * Run against the simulated libnvidia-ml.so.1 ($GPUOP_NVML_LIBRARY) and the fleet in
 * $GPUOP_SIM_FLEET (the bench's DGX H100 with 56 MIG instances).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exporter.h"

static bool counting;
static unsigned long allocs;

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t m);
void *__wrap_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n)
{
    allocs += counting;
    return __real_malloc(n);
}
void *__wrap_calloc(size_t n, size_t m)
{
    allocs += counting;
    return __real_calloc(n, m);
}
void *__wrap_realloc(void *p, size_t n)
{
    allocs += counting;
    return __real_realloc(p, n);
}

#define ROUNDS 5

int main(void)
{
    if (!getenv("GPUOP_NVML_LIBRARY") || !getenv("GPUOP_SIM_FLEET")) {
        printf("skipped: needs GPUOP_NVML_LIBRARY (the simulated NVML) and GPUOP_SIM_FLEET\n");
        return 77;
    }
    struct err e = {0};
    struct gpu_lib *lib = NULL;
    struct gpu_inventory *inv = NULL;
    if (gpu_lib_open(NULL, &lib, &e) < 0 || gpu_inventory_read(lib, &inv, &e) < 0) {
        fprintf(stderr, "FAIL: %s\n", err_msg(&e));
        return 1;
    }
    struct gpu_gpm_sampler *s[64] = {0};
    size_t n = inv->n_gpus < 64 ? inv->n_gpus : 64, targets = 0;
    for (size_t i = 0; i < n; i++) {
        if (gpu_gpm_sampler_new(lib, &inv->gpus[i], exp_gpm_max_age_ms(1000), &s[i], &e) < 0) {
            fprintf(stderr, "FAIL: sampler of gpu %zu: %s\n", i, err_msg(&e));
            return 1;
        }
        targets += 1 + inv->gpus[i].n_mig;
    }
    static struct exp_prof prof[64];
    unsigned long values = 0;
    uint64_t now = 1000;
    counting = true;
    for (int round = 0; round < ROUNDS; round++) {
        /* the simulated library stamps its samples with its own clock: let it move */
        nanosleep(&(struct timespec){.tv_nsec = 20 * 1000 * 1000}, NULL);
        now += 1000;
        for (size_t i = 0; i < n; i++) {
            struct gpu_gpm_metrics m;
            int r = gpu_gpm_sample(s[i], now, &e);
            if (r == 0)
                r = gpu_gpm_metrics(s[i], &m, &e);
            exp_prof_from_gpm(r, &m, exp_gpm_max_age_ms(1000), &prof[i]);
            if (round > 0 && r < 0) {
                counting = false;
                fprintf(stderr, "FAIL: gpu %zu round %d: %s\n", i, round, err_msg(&e));
                return 1;
            }
            double v;
            for (unsigned f = 0; f < GPU_PROF_COUNT; f++) {
                values += exp_prof_value(&prof[i], EXP_WHOLE_GPU, f, &v);
                for (size_t k = 0; k < prof[i].n_gi; k++)
                    values += exp_prof_value(&prof[i], prof[i].gi[k].gi_id, f, &v);
            }
        }
    }
    counting = false;
    printf("%zu GPUs, %zu GPM targets (GPUs and MIG devices), %d collections: %lu values, "
           "%lu allocations\n",
           n, targets, ROUNDS, values, allocs);
    for (size_t i = 0; i < n; i++)
        gpu_gpm_sampler_free(s[i]);
    gpu_inventory_free(inv);
    gpu_lib_free(lib);
    if (values == 0) {
        fprintf(stderr, "FAIL: no profiling values read: the test measured nothing\n");
        return 1;
    }
    if (allocs != 0) {
        fprintf(stderr, "FAIL: the GPM path allocated %lu times in %d collections\n", allocs,
                ROUNDS);
        return 1;
    }
    return 0;
}
