/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The NVML layer on a library with only the seven basic symbols (fake-nvml-min.c): inventory
 * reads, every missing feature reads as not supported, nothing crashes. And the ways loading
 * fails: no such library, not an NVML library, nvmlInit failing.
 * argv[1]: the minimal library's path.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "gpu.h"
#include "nvml-abi.h"

static const char *minimal_lib;

static void inventory_reads(void **state)
{
    (void)state;
    struct err e = {0};
    _cleanup_(gpu_lib_freep) struct gpu_lib *lib = NULL;
    assert_int_equal(gpu_lib_open(minimal_lib, &lib, &e), 0);
    assert_non_null(strstr(gpu_lib_path(lib), "fake-nvml-min"));
    _cleanup_(gpu_inventory_freep) struct gpu_inventory *inv = NULL;
    assert_int_equal(gpu_inventory_read(lib, &inv, &e), 0);
    assert_string_equal(inv->driver_version, "418.40.04");
    assert_int_equal(inv->cuda_driver_version, 0); /* both CUDA version symbols missing */
    assert_int_equal(inv->n_gpus, 2);
    for (unsigned i = 0; i < 2; i++) {
        const struct gpu_device *g = &inv->gpus[i];
        char uuid[64];
        snprintf(uuid, sizeof(uuid), "GPU-00000000-0000-0000-0000-00000000000%u", i);
        assert_int_equal(g->index, i);
        assert_string_equal(g->name, "Tesla V100-SXM2-16GB");
        assert_string_equal(g->uuid, uuid);
        assert_false(g->lost);
        /* Everything else is "not supported": defaults, no garbage. */
        assert_string_equal(g->serial, "");
        assert_string_equal(g->bus_id, "");
        assert_int_equal(g->numa_node, -1);
        assert_int_equal(g->pci_class, 0);
        assert_int_equal(g->memory_total_bytes, 0);
        assert_int_equal(g->arch, NVML_DEVICE_ARCH_UNKNOWN);
        assert_string_equal(gpu_arch_name(g->arch), "unknown");
        assert_int_equal(g->power_limit_mw, 0);
        assert_false(g->mig_capable);
        assert_false(g->mig_enabled);
        assert_int_equal(g->n_mig, 0);
        assert_ptr_equal(gpu_inventory_find(inv, uuid, NULL), g);
    }
    assert_int_equal(inv->topo_level[0], NVML_TOPOLOGY_INTERNAL);
    assert_int_equal(inv->topo_level[1], NVML_TOPOLOGY_SYSTEM); /* unknown reads as farthest */
    assert_int_equal(inv->nvlinks[1], 0);
    assert_null(gpu_inventory_find(inv, "GPU-nope", NULL));
}

static void features_not_supported(void **state)
{
    (void)state;
    struct err e = {0};
    _cleanup_(gpu_lib_freep) struct gpu_lib *lib = NULL;
    assert_int_equal(gpu_lib_open(minimal_lib, &lib, &e), 0);

    struct gpu_sample s;
    memset(&s, 0xa5, sizeof(s));
    assert_int_equal(gpu_sample_read(lib, 1, &s, &e), 0);
    assert_int_equal(s.valid, 0);
    assert_false(s.lost);
    assert_int_equal(s.temp_c, 0);

    /* A GPU index that does not exist is an error that names the call and the GPU. */
    assert_int_equal(gpu_sample_read(lib, 7, &s, &e), -EINVAL);
    assert_non_null(strstr(err_msg(&e), "nvmlDeviceGetHandleByIndex_v2(gpu 7)"));
    assert_non_null(strstr(err_msg(&e), "Invalid Argument")); /* gpuop's own wording */

    struct gpu_events *ev = NULL;
    err_clear(&e);
    assert_int_equal(gpu_events_open(lib, nvmlEventTypeXidCriticalError, &ev, &e),
                     GPU_ERR_NOT_SUPPORTED);
    assert_null(ev);
    assert_non_null(strstr(err_msg(&e), "nvmlEventSetCreate"));

    struct gpu_mig_mode mode;
    assert_int_equal(gpu_mig_set_mode(lib, 0, true, &mode, &e), GPU_ERR_NOT_SUPPORTED);
    assert_non_null(strstr(err_msg(&e), "nvmlDeviceSetMigMode(gpu 0, enable)"));
    struct gpu_mig_profile *p = NULL;
    size_t n = 0;
    assert_int_equal(gpu_mig_profiles(lib, 0, &p, &n, &e), GPU_ERR_NOT_SUPPORTED);
    assert_null(p);
    assert_int_equal(gpu_mig_create(lib, 0, "1g.10gb", NULL, NULL, &e), GPU_ERR_NOT_SUPPORTED);
    assert_int_equal(gpu_mig_destroy_all(lib, 0, &e), GPU_ERR_NOT_SUPPORTED);
}

/* A driver older than NVML 11.8 has no GPM symbols: no GPM, said once, nothing crashes. */
static void gpm_not_there(void **state)
{
    (void)state;
    struct err e = {0};
    _cleanup_(gpu_lib_freep) struct gpu_lib *lib = NULL;
    assert_int_equal(gpu_lib_open(minimal_lib, &lib, &e), 0);
    _cleanup_(gpu_inventory_freep) struct gpu_inventory *inv = NULL;
    assert_int_equal(gpu_inventory_read(lib, &inv, &e), 0);
    assert_int_equal(gpu_gpm_support(lib, 0, &e), 0);
    struct gpu_gpm_sampler *s = NULL;
    assert_int_equal(gpu_gpm_sampler_new(lib, &inv->gpus[0], 0, &s, &e), GPU_ERR_NOT_SUPPORTED);
    assert_null(s);
    assert_non_null(strstr(err_msg(&e), "gpu 0 (Tesla V100-SXM2-16GB, unknown): no GPU "
                                        "Performance Monitoring"));
    /* a GPU that is not there is an error, not "unsupported" */
    assert_int_equal(gpu_gpm_support(lib, 7, &e), -EINVAL);
    assert_non_null(strstr(err_msg(&e), "gpu 7"));
}

static void env_selects_library(void **state)
{
    (void)state;
    struct err e = {0};
    setenv("GPUOP_NVML_LIBRARY", minimal_lib, 1);
    _cleanup_(gpu_lib_freep) struct gpu_lib *lib = NULL;
    int r = gpu_lib_open(NULL, &lib, &e);
    unsetenv("GPUOP_NVML_LIBRARY");
    assert_int_equal(r, 0);
    assert_non_null(strstr(gpu_lib_path(lib), "fake-nvml-min"));
}

static void missing_library(void **state)
{
    (void)state;
    struct err e = {0};
    struct gpu_lib *lib = NULL;
    assert_int_equal(gpu_lib_open("/nonexistent/libnvidia-ml.so.1", &lib, &e), -ENOENT);
    assert_null(lib);
    assert_non_null(strstr(err_msg(&e), "\"/nonexistent/libnvidia-ml.so.1\""));
    assert_non_null(strstr(err_msg(&e), "No such file"));
    assert_non_null(strstr(err_msg(&e), "GPUOP_NVML_LIBRARY"));
    assert_null(strchr(err_msg(&e), '\n'));
}

static void not_nvml(void **state)
{
    (void)state;
    struct err e = {0};
    struct gpu_lib *lib = NULL;
    assert_int_equal(gpu_lib_open("libm.so.6", &lib, &e), -ENOEXEC);
    assert_null(lib);
    assert_non_null(strstr(err_msg(&e), "nvmlInit_v2"));
}

static void init_fails(void **state)
{
    (void)state;
    struct err e = {0};
    struct gpu_lib *lib = NULL;
    setenv("FAKE_NVML_INIT_RETURN", "9", 1); /* NVML_ERROR_DRIVER_NOT_LOADED */
    int r = gpu_lib_open(minimal_lib, &lib, &e);
    unsetenv("FAKE_NVML_INIT_RETURN");
    assert_int_equal(r, -ENODEV);
    assert_null(lib);
    assert_non_null(strstr(err_msg(&e), "failed to initialise: nvmlInit_v2: Driver Not Loaded"));
}

static void codes(void **state)
{
    (void)state;
    assert_int_equal(gpu_nvml_code(NVML_SUCCESS), 0);
    assert_int_equal(gpu_nvml_code(NVML_ERROR_GPU_IS_LOST), GPU_ERR_LOST);
    assert_int_equal(gpu_nvml_code(NVML_ERROR_NOT_SUPPORTED), GPU_ERR_NOT_SUPPORTED);
    assert_int_equal(gpu_nvml_code(NVML_ERROR_FUNCTION_NOT_FOUND), GPU_ERR_NOT_SUPPORTED);
    assert_int_equal(gpu_nvml_code(NVML_ERROR_NO_PERMISSION), -EPERM);
    assert_int_equal(gpu_nvml_code(NVML_ERROR_TIMEOUT), -ETIMEDOUT);
    assert_int_equal(gpu_nvml_code(NVML_ERROR_IN_USE), -EBUSY);
    assert_int_equal(gpu_nvml_code(NVML_ERROR_INSUFFICIENT_RESOURCES), -ENOSPC);
    assert_int_equal(gpu_nvml_code(12345), -EIO);
    assert_string_equal(gpu_nvml_string(NULL, NVML_ERROR_GPU_IS_LOST), "GPU is lost");
    assert_string_equal(gpu_nvml_string(NULL, 12345), "Unknown Error");
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s <fake libnvidia-ml>\n", argv[0]);
        return 2;
    }
    minimal_lib = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(inventory_reads), cmocka_unit_test(features_not_supported),
        cmocka_unit_test(gpm_not_there),   cmocka_unit_test(env_selects_library),
        cmocka_unit_test(missing_library), cmocka_unit_test(not_nvml),
        cmocka_unit_test(init_fails),      cmocka_unit_test(codes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
