/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ABI layout of nvml-abi.h against numbers worked out by hand from NVML's published nvml.h for
 * LP64 (x86-64, aarch64: natural alignment, 8-byte pointers and long long). A wrong size or
 * offset would make the real driver write past or beside gpuop's structs. The test also reads
 * nvml-abi.h and fails for a struct or union it does not know, so new ones get checked too.
 */
#include <regex.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "nvml-abi.h"
#include "util.h"

static int failures;
static int checks;

static void check(const char *what, unsigned long long got, unsigned long long want)
{
    checks++;
    if (got != want) {
        failures++;
        fprintf(stderr, "FAIL %s: got %llu, want %llu\n", what, got, want);
    }
}

#define SIZE(t, n)     check("sizeof(" #t ")", sizeof(t), n)
#define OFF(t, f, n)   check("offsetof(" #t ", " #f ")", offsetof(t, f), n)
#define FSIZE(t, f, n) check("sizeof(" #t "." #f ")", sizeof(((t *)0)->f), n)
#define VAL(x, n)      check(#x, (unsigned long long)(x), n)

/* Every struct/union typedef name this test checks; compared with the header's list. */
static const char *const checked[] = {
    "nvmlPciInfo_t",
    "nvmlMemory_t",
    "nvmlMemory_v2_t",
    "nvmlBAR1Memory_t",
    "nvmlUtilization_t",
    "nvmlProcessInfo_v1_t",
    "nvmlProcessInfo_v2_t",
    "nvmlEventData_t",
    "nvmlViolationTime_t",
    "nvmlDeviceAttributes_t",
    "nvmlGpuInstancePlacement_t",
    "nvmlGpuInstanceProfileInfo_t",
    "nvmlGpuInstanceProfileInfo_v2_t",
    "nvmlGpuInstanceProfileInfo_v3_t",
    "nvmlGpuInstanceInfo_t",
    "nvmlComputeInstancePlacement_t",
    "nvmlComputeInstanceProfileInfo_t",
    "nvmlComputeInstanceProfileInfo_v2_t",
    "nvmlComputeInstanceInfo_t",
    "nvmlValue_t",
    "nvmlFieldValue_t",
    "nvmlGpmMetricMetricInfo_t",
    "nvmlGpmMetric_t",
    "nvmlGpmMetricsGet_t",
    "nvmlGpmSupport_t",
    "nvmlC2cModeInfo_v1_t",
    "nvmlDeviceAddressingMode_v1_t",
};

static void structs(void)
{
    /* char busIdLegacy[16]; 5 x unsigned; char busId[32] */
    SIZE(nvmlPciInfo_t, 68);
    OFF(nvmlPciInfo_t, busIdLegacy, 0);
    FSIZE(nvmlPciInfo_t, busIdLegacy, 16);
    OFF(nvmlPciInfo_t, domain, 16);
    OFF(nvmlPciInfo_t, bus, 20);
    OFF(nvmlPciInfo_t, device, 24);
    OFF(nvmlPciInfo_t, pciDeviceId, 28);
    OFF(nvmlPciInfo_t, pciSubSystemId, 32);
    OFF(nvmlPciInfo_t, busId, 36);
    FSIZE(nvmlPciInfo_t, busId, 32);

    SIZE(nvmlMemory_t, 24);
    OFF(nvmlMemory_t, total, 0);
    OFF(nvmlMemory_t, free, 8);
    OFF(nvmlMemory_t, used, 16);

    /* unsigned version; 4 bytes padding; 4 x ull */
    SIZE(nvmlMemory_v2_t, 40);
    OFF(nvmlMemory_v2_t, version, 0);
    OFF(nvmlMemory_v2_t, total, 8);
    OFF(nvmlMemory_v2_t, reserved, 16);
    OFF(nvmlMemory_v2_t, free, 24);
    OFF(nvmlMemory_v2_t, used, 32);

    SIZE(nvmlBAR1Memory_t, 24);
    OFF(nvmlBAR1Memory_t, bar1Total, 0);
    OFF(nvmlBAR1Memory_t, bar1Free, 8);
    OFF(nvmlBAR1Memory_t, bar1Used, 16);

    SIZE(nvmlUtilization_t, 8);
    OFF(nvmlUtilization_t, gpu, 0);
    OFF(nvmlUtilization_t, memory, 4);

    SIZE(nvmlProcessInfo_v1_t, 16);
    OFF(nvmlProcessInfo_v1_t, pid, 0);
    OFF(nvmlProcessInfo_v1_t, usedGpuMemory, 8);

    SIZE(nvmlProcessInfo_v2_t, 24);
    OFF(nvmlProcessInfo_v2_t, pid, 0);
    OFF(nvmlProcessInfo_v2_t, usedGpuMemory, 8);
    OFF(nvmlProcessInfo_v2_t, gpuInstanceId, 16);
    OFF(nvmlProcessInfo_v2_t, computeInstanceId, 20);
    SIZE(nvmlProcessInfo_t, 24);

    SIZE(nvmlEventData_t, 32);
    OFF(nvmlEventData_t, device, 0);
    OFF(nvmlEventData_t, eventType, 8);
    OFF(nvmlEventData_t, eventData, 16);
    OFF(nvmlEventData_t, gpuInstanceId, 24);
    OFF(nvmlEventData_t, computeInstanceId, 28);

    SIZE(nvmlViolationTime_t, 16);
    OFF(nvmlViolationTime_t, referenceTime, 0);
    OFF(nvmlViolationTime_t, violationTime, 8);

    /* 8 x unsigned, then ull */
    SIZE(nvmlDeviceAttributes_t, 40);
    OFF(nvmlDeviceAttributes_t, multiprocessorCount, 0);
    OFF(nvmlDeviceAttributes_t, sharedCopyEngineCount, 4);
    OFF(nvmlDeviceAttributes_t, sharedDecoderCount, 8);
    OFF(nvmlDeviceAttributes_t, sharedEncoderCount, 12);
    OFF(nvmlDeviceAttributes_t, sharedJpegCount, 16);
    OFF(nvmlDeviceAttributes_t, sharedOfaCount, 20);
    OFF(nvmlDeviceAttributes_t, gpuInstanceSliceCount, 24);
    OFF(nvmlDeviceAttributes_t, computeInstanceSliceCount, 28);
    OFF(nvmlDeviceAttributes_t, memorySizeMB, 32);

    SIZE(nvmlGpuInstancePlacement_t, 8);
    OFF(nvmlGpuInstancePlacement_t, start, 0);
    OFF(nvmlGpuInstancePlacement_t, size, 4);

    /* 10 x unsigned, ull */
    SIZE(nvmlGpuInstanceProfileInfo_t, 48);
    OFF(nvmlGpuInstanceProfileInfo_t, id, 0);
    OFF(nvmlGpuInstanceProfileInfo_t, isP2pSupported, 4);
    OFF(nvmlGpuInstanceProfileInfo_t, sliceCount, 8);
    OFF(nvmlGpuInstanceProfileInfo_t, instanceCount, 12);
    OFF(nvmlGpuInstanceProfileInfo_t, multiprocessorCount, 16);
    OFF(nvmlGpuInstanceProfileInfo_t, copyEngineCount, 20);
    OFF(nvmlGpuInstanceProfileInfo_t, decoderCount, 24);
    OFF(nvmlGpuInstanceProfileInfo_t, encoderCount, 28);
    OFF(nvmlGpuInstanceProfileInfo_t, jpegCount, 32);
    OFF(nvmlGpuInstanceProfileInfo_t, ofaCount, 36);
    OFF(nvmlGpuInstanceProfileInfo_t, memorySizeMB, 40);

    /* version + the 10 above = 11 x unsigned (44), pad to 48, ull, char[96]: 152 */
    SIZE(nvmlGpuInstanceProfileInfo_v2_t, 152);
    OFF(nvmlGpuInstanceProfileInfo_v2_t, version, 0);
    OFF(nvmlGpuInstanceProfileInfo_v2_t, id, 4);
    OFF(nvmlGpuInstanceProfileInfo_v2_t, isP2pSupported, 8);
    OFF(nvmlGpuInstanceProfileInfo_v2_t, sliceCount, 12);
    OFF(nvmlGpuInstanceProfileInfo_v2_t, instanceCount, 16);
    OFF(nvmlGpuInstanceProfileInfo_v2_t, multiprocessorCount, 20);
    OFF(nvmlGpuInstanceProfileInfo_v2_t, copyEngineCount, 24);
    OFF(nvmlGpuInstanceProfileInfo_v2_t, decoderCount, 28);
    OFF(nvmlGpuInstanceProfileInfo_v2_t, encoderCount, 32);
    OFF(nvmlGpuInstanceProfileInfo_v2_t, jpegCount, 36);
    OFF(nvmlGpuInstanceProfileInfo_v2_t, ofaCount, 40);
    OFF(nvmlGpuInstanceProfileInfo_v2_t, memorySizeMB, 48);
    OFF(nvmlGpuInstanceProfileInfo_v2_t, name, 56);
    FSIZE(nvmlGpuInstanceProfileInfo_v2_t, name, 96);

    /* 10 x unsigned (40), ull, char[96], unsigned (148), padded to 8: 152 */
    SIZE(nvmlGpuInstanceProfileInfo_v3_t, 152);
    OFF(nvmlGpuInstanceProfileInfo_v3_t, version, 0);
    OFF(nvmlGpuInstanceProfileInfo_v3_t, id, 4);
    OFF(nvmlGpuInstanceProfileInfo_v3_t, sliceCount, 8);
    OFF(nvmlGpuInstanceProfileInfo_v3_t, instanceCount, 12);
    OFF(nvmlGpuInstanceProfileInfo_v3_t, multiprocessorCount, 16);
    OFF(nvmlGpuInstanceProfileInfo_v3_t, copyEngineCount, 20);
    OFF(nvmlGpuInstanceProfileInfo_v3_t, decoderCount, 24);
    OFF(nvmlGpuInstanceProfileInfo_v3_t, encoderCount, 28);
    OFF(nvmlGpuInstanceProfileInfo_v3_t, jpegCount, 32);
    OFF(nvmlGpuInstanceProfileInfo_v3_t, ofaCount, 36);
    OFF(nvmlGpuInstanceProfileInfo_v3_t, memorySizeMB, 40);
    OFF(nvmlGpuInstanceProfileInfo_v3_t, name, 48);
    OFF(nvmlGpuInstanceProfileInfo_v3_t, capabilities, 144);

    SIZE(nvmlGpuInstanceInfo_t, 24);
    OFF(nvmlGpuInstanceInfo_t, device, 0);
    OFF(nvmlGpuInstanceInfo_t, id, 8);
    OFF(nvmlGpuInstanceInfo_t, profileId, 12);
    OFF(nvmlGpuInstanceInfo_t, placement, 16);

    SIZE(nvmlComputeInstancePlacement_t, 8);
    OFF(nvmlComputeInstancePlacement_t, start, 0);
    OFF(nvmlComputeInstancePlacement_t, size, 4);

    SIZE(nvmlComputeInstanceProfileInfo_t, 36);
    OFF(nvmlComputeInstanceProfileInfo_t, id, 0);
    OFF(nvmlComputeInstanceProfileInfo_t, sliceCount, 4);
    OFF(nvmlComputeInstanceProfileInfo_t, instanceCount, 8);
    OFF(nvmlComputeInstanceProfileInfo_t, multiprocessorCount, 12);
    OFF(nvmlComputeInstanceProfileInfo_t, sharedCopyEngineCount, 16);
    OFF(nvmlComputeInstanceProfileInfo_t, sharedDecoderCount, 20);
    OFF(nvmlComputeInstanceProfileInfo_t, sharedEncoderCount, 24);
    OFF(nvmlComputeInstanceProfileInfo_t, sharedJpegCount, 28);
    OFF(nvmlComputeInstanceProfileInfo_t, sharedOfaCount, 32);

    /* 10 x unsigned, char[96]: 136 */
    SIZE(nvmlComputeInstanceProfileInfo_v2_t, 136);
    OFF(nvmlComputeInstanceProfileInfo_v2_t, version, 0);
    OFF(nvmlComputeInstanceProfileInfo_v2_t, id, 4);
    OFF(nvmlComputeInstanceProfileInfo_v2_t, sliceCount, 8);
    OFF(nvmlComputeInstanceProfileInfo_v2_t, instanceCount, 12);
    OFF(nvmlComputeInstanceProfileInfo_v2_t, multiprocessorCount, 16);
    OFF(nvmlComputeInstanceProfileInfo_v2_t, sharedCopyEngineCount, 20);
    OFF(nvmlComputeInstanceProfileInfo_v2_t, sharedDecoderCount, 24);
    OFF(nvmlComputeInstanceProfileInfo_v2_t, sharedEncoderCount, 28);
    OFF(nvmlComputeInstanceProfileInfo_v2_t, sharedJpegCount, 32);
    OFF(nvmlComputeInstanceProfileInfo_v2_t, sharedOfaCount, 36);
    OFF(nvmlComputeInstanceProfileInfo_v2_t, name, 40);
    FSIZE(nvmlComputeInstanceProfileInfo_v2_t, name, 96);

    SIZE(nvmlComputeInstanceInfo_t, 32);
    OFF(nvmlComputeInstanceInfo_t, device, 0);
    OFF(nvmlComputeInstanceInfo_t, gpuInstance, 8);
    OFF(nvmlComputeInstanceInfo_t, id, 16);
    OFF(nvmlComputeInstanceInfo_t, profileId, 20);
    OFF(nvmlComputeInstanceInfo_t, placement, 24);

    SIZE(nvmlValue_t, 8);
    OFF(nvmlValue_t, dVal, 0);
    OFF(nvmlValue_t, siVal, 0);
    OFF(nvmlValue_t, uiVal, 0);
    OFF(nvmlValue_t, ulVal, 0);
    OFF(nvmlValue_t, ullVal, 0);
    OFF(nvmlValue_t, sllVal, 0);
    OFF(nvmlValue_t, usVal, 0);

    SIZE(nvmlFieldValue_t, 40);
    OFF(nvmlFieldValue_t, fieldId, 0);
    OFF(nvmlFieldValue_t, scopeId, 4);
    OFF(nvmlFieldValue_t, timestamp, 8);
    OFF(nvmlFieldValue_t, latencyUsec, 16);
    OFF(nvmlFieldValue_t, valueType, 24);
    OFF(nvmlFieldValue_t, nvmlReturn, 28);
    OFF(nvmlFieldValue_t, value, 32);

    /* Enums travel as C int; handles as pointers. */
    SIZE(nvmlReturn_t, 4);
    SIZE(nvmlEnableState_t, 4);
    SIZE(nvmlGpuTopologyLevel_t, 4);
    SIZE(nvmlBrandType_t, 4);
    SIZE(nvmlDeviceArchitecture_t, 4);
    SIZE(nvmlDevice_t, 8);
    SIZE(nvmlEventSet_t, 8);

    /* GPM. A sample is a handle (a pointer). */
    SIZE(nvmlGpmSample_t, 8);
    SIZE(nvmlGpmMetricId_t, 4);
    /* three char pointers */
    SIZE(nvmlGpmMetricMetricInfo_t, 24);
    OFF(nvmlGpmMetricMetricInfo_t, shortName, 0);
    OFF(nvmlGpmMetricMetricInfo_t, longName, 8);
    OFF(nvmlGpmMetricMetricInfo_t, unit, 16);
    /* unsigned metricId; nvmlReturn_t; double (8-aligned, no padding); the info */
    SIZE(nvmlGpmMetric_t, 40);
    OFF(nvmlGpmMetric_t, metricId, 0);
    OFF(nvmlGpmMetric_t, nvmlReturn, 4);
    OFF(nvmlGpmMetric_t, value, 8);
    OFF(nvmlGpmMetric_t, metricInfo, 16);
    /* version, numMetrics, two handles, then NVML_GPM_METRIC_MAX (333) metrics of 40 bytes */
    SIZE(nvmlGpmMetricsGet_t, 24 + 40 * 333);
    SIZE(nvmlGpmMetricsGet_t, 13344);
    OFF(nvmlGpmMetricsGet_t, version, 0);
    OFF(nvmlGpmMetricsGet_t, numMetrics, 4);
    OFF(nvmlGpmMetricsGet_t, sample1, 8);
    OFF(nvmlGpmMetricsGet_t, sample2, 16);
    OFF(nvmlGpmMetricsGet_t, metrics, 24);
    OFF(nvmlGpmMetricsGet_t, metrics[1], 64);
    FSIZE(nvmlGpmMetricsGet_t, metrics, 13320);
    /* the prefix a library built with NVML 11.8 to 12.8's header (98 metrics) reads */
    OFF(nvmlGpmMetricsGet_t, metrics[98], 3944);
    SIZE(nvmlGpmSupport_t, 8);
    OFF(nvmlGpmSupport_t, version, 0);
    OFF(nvmlGpmSupport_t, isSupportedDevice, 4);

    /* unsigned isC2cEnabled */
    SIZE(nvmlC2cModeInfo_v1_t, 4);
    OFF(nvmlC2cModeInfo_v1_t, isC2cEnabled, 0);
    /* unsigned version, value; version 1 of 8 bytes */
    SIZE(nvmlDeviceAddressingMode_v1_t, 8);
    OFF(nvmlDeviceAddressingMode_v1_t, version, 0);
    OFF(nvmlDeviceAddressingMode_v1_t, value, 4);
    VAL(nvmlDeviceAddressingMode_v1, 0x1000008);
    VAL(NVML_DEVICE_ADDRESSING_MODE_NONE, 0);
    VAL(NVML_DEVICE_ADDRESSING_MODE_HMM, 1);
    VAL(NVML_DEVICE_ADDRESSING_MODE_ATS, 2);
}

static void versions(void)
{
    VAL(nvmlMemory_v2, 40u | 2u << 24);
    VAL(nvmlMemory_v2, 0x02000028);
    VAL(nvmlGpuInstanceProfileInfo_v2, 152u | 2u << 24);
    VAL(nvmlGpuInstanceProfileInfo_v3, 152u | 3u << 24);
    VAL(nvmlComputeInstanceProfileInfo_v2, 136u | 2u << 24);
    /* GPM's versions are plain 1, not NVML_STRUCT_VERSION(...) */
    VAL(NVML_GPM_METRICS_GET_VERSION, 1);
    VAL(NVML_GPM_SUPPORT_VERSION, 1);
}

static void values(void)
{
    VAL(NVML_SUCCESS, 0);
    VAL(NVML_ERROR_UNINITIALIZED, 1);
    VAL(NVML_ERROR_INVALID_ARGUMENT, 2);
    VAL(NVML_ERROR_NOT_SUPPORTED, 3);
    VAL(NVML_ERROR_NO_PERMISSION, 4);
    VAL(NVML_ERROR_ALREADY_INITIALIZED, 5);
    VAL(NVML_ERROR_NOT_FOUND, 6);
    VAL(NVML_ERROR_INSUFFICIENT_SIZE, 7);
    VAL(NVML_ERROR_INSUFFICIENT_POWER, 8);
    VAL(NVML_ERROR_DRIVER_NOT_LOADED, 9);
    VAL(NVML_ERROR_TIMEOUT, 10);
    VAL(NVML_ERROR_IRQ_ISSUE, 11);
    VAL(NVML_ERROR_LIBRARY_NOT_FOUND, 12);
    VAL(NVML_ERROR_FUNCTION_NOT_FOUND, 13);
    VAL(NVML_ERROR_CORRUPTED_INFOROM, 14);
    VAL(NVML_ERROR_GPU_IS_LOST, 15);
    VAL(NVML_ERROR_RESET_REQUIRED, 16);
    VAL(NVML_ERROR_OPERATING_SYSTEM, 17);
    VAL(NVML_ERROR_LIB_RM_VERSION_MISMATCH, 18);
    VAL(NVML_ERROR_IN_USE, 19);
    VAL(NVML_ERROR_MEMORY, 20);
    VAL(NVML_ERROR_NO_DATA, 21);
    VAL(NVML_ERROR_VGPU_ECC_NOT_SUPPORTED, 22);
    VAL(NVML_ERROR_INSUFFICIENT_RESOURCES, 23);
    VAL(NVML_ERROR_FREQ_NOT_SUPPORTED, 24);
    VAL(NVML_ERROR_ARGUMENT_VERSION_MISMATCH, 25);
    VAL(NVML_ERROR_DEPRECATED, 26);
    VAL(NVML_ERROR_NOT_READY, 27);
    VAL(NVML_ERROR_GPU_NOT_FOUND, 28);
    VAL(NVML_ERROR_INVALID_STATE, 29);
    VAL(NVML_ERROR_RESET_TYPE_NOT_SUPPORTED, 30);
    VAL(NVML_ERROR_UNKNOWN, 999);

    VAL(NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE, 32);
    VAL(NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE, 16);
    VAL(NVML_DEVICE_UUID_BUFFER_SIZE, 80);
    VAL(NVML_DEVICE_UUID_V2_BUFFER_SIZE, 96);
    VAL(NVML_DEVICE_NAME_BUFFER_SIZE, 64);
    VAL(NVML_DEVICE_NAME_V2_BUFFER_SIZE, 96);
    VAL(NVML_DEVICE_SERIAL_BUFFER_SIZE, 30);
    VAL(NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE, 80);
    VAL(NVML_NVLINK_MAX_LINKS, 36);
    VAL(NVML_INIT_FLAG_NO_GPUS, 1);
    VAL(NVML_INIT_FLAG_NO_ATTACH, 2);

    VAL(NVML_TEMPERATURE_GPU, 0);
    VAL(NVML_CLOCK_GRAPHICS, 0);
    VAL(NVML_CLOCK_SM, 1);
    VAL(NVML_CLOCK_MEM, 2);
    VAL(NVML_CLOCK_VIDEO, 3);
    VAL(NVML_DEVICE_ARCH_KEPLER, 2);
    VAL(NVML_DEVICE_ARCH_MAXWELL, 3);
    VAL(NVML_DEVICE_ARCH_PASCAL, 4);
    VAL(NVML_DEVICE_ARCH_VOLTA, 5);
    VAL(NVML_DEVICE_ARCH_TURING, 6);
    VAL(NVML_DEVICE_ARCH_AMPERE, 7);
    VAL(NVML_DEVICE_ARCH_ADA, 8);
    VAL(NVML_DEVICE_ARCH_HOPPER, 9);
    VAL(NVML_DEVICE_ARCH_BLACKWELL, 10);
    VAL(NVML_DEVICE_ARCH_RUBIN, 13);
    VAL(NVML_DEVICE_ARCH_UNKNOWN, 0xffffffffu);
    VAL(NVML_BRAND_UNKNOWN, 0);
    VAL(NVML_BRAND_TESLA, 2);
    VAL(NVML_BRAND_GEFORCE, 5);
    VAL(NVML_BRAND_NVIDIA_RTX, 13);
    VAL(NVML_BRAND_NVIDIA, 14);
    VAL(NVML_BRAND_TITAN_RTX, 16);
    VAL(NVML_FEATURE_DISABLED, 0);
    VAL(NVML_FEATURE_ENABLED, 1);
    VAL(NVML_MEMORY_ERROR_TYPE_CORRECTED, 0);
    VAL(NVML_MEMORY_ERROR_TYPE_UNCORRECTED, 1);
    VAL(NVML_VOLATILE_ECC, 0);
    VAL(NVML_AGGREGATE_ECC, 1);
    VAL(NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS, 0);
    VAL(NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR, 1);
    VAL(NVML_MEMORY_LOCATION_DEVICE_MEMORY, 2);
    VAL(NVML_TOPOLOGY_INTERNAL, 0);
    VAL(NVML_TOPOLOGY_SINGLE, 10);
    VAL(NVML_TOPOLOGY_MULTIPLE, 20);
    VAL(NVML_TOPOLOGY_HOSTBRIDGE, 30);
    VAL(NVML_TOPOLOGY_NODE, 40);
    VAL(NVML_TOPOLOGY_SYSTEM, 50);
    VAL(NVML_P2P_CAPS_INDEX_READ, 0);
    VAL(NVML_P2P_CAPS_INDEX_NVLINK, 2);
    VAL(NVML_P2P_CAPS_INDEX_PCI, 4);
    VAL(NVML_P2P_STATUS_OK, 0);
    VAL(NVML_P2P_STATUS_NOT_SUPPORTED, 5);
    VAL(NVML_P2P_STATUS_UNKNOWN, 6);
    VAL(NVML_COMPUTEMODE_EXCLUSIVE_PROCESS, 3);
    VAL(NVML_PCIE_UTIL_TX_BYTES, 0);
    VAL(NVML_PCIE_UTIL_RX_BYTES, 1);
    VAL(NVML_PERF_POLICY_POWER, 0);
    VAL(NVML_PERF_POLICY_THERMAL, 1);
    VAL(NVML_PERF_POLICY_SYNC_BOOST, 2);
    VAL(NVML_PERF_POLICY_BOARD_LIMIT, 3);
    VAL(NVML_PERF_POLICY_LOW_UTILIZATION, 4);
    VAL(NVML_PERF_POLICY_RELIABILITY, 5);
    VAL(NVML_VALUE_TYPE_DOUBLE, 0);
    VAL(NVML_VALUE_TYPE_UNSIGNED_INT, 1);
    VAL(NVML_VALUE_TYPE_UNSIGNED_LONG, 2);
    VAL(NVML_VALUE_TYPE_UNSIGNED_LONG_LONG, 3);
    VAL(NVML_VALUE_TYPE_SIGNED_LONG_LONG, 4);
    VAL(NVML_VALUE_TYPE_SIGNED_INT, 5);
    VAL(NVML_VALUE_TYPE_UNSIGNED_SHORT, 6);

    VAL(NVML_DEVICE_MIG_DISABLE, 0);
    VAL(NVML_DEVICE_MIG_ENABLE, 1);
    VAL(NVML_GPU_INSTANCE_PROFILE_1_SLICE, 0);
    VAL(NVML_GPU_INSTANCE_PROFILE_2_SLICE, 1);
    VAL(NVML_GPU_INSTANCE_PROFILE_3_SLICE, 2);
    VAL(NVML_GPU_INSTANCE_PROFILE_4_SLICE, 3);
    VAL(NVML_GPU_INSTANCE_PROFILE_7_SLICE, 4);
    VAL(NVML_GPU_INSTANCE_PROFILE_8_SLICE, 5);
    VAL(NVML_GPU_INSTANCE_PROFILE_6_SLICE, 6);
    VAL(NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, 7);
    VAL(NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1, 8);
    VAL(NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2, 9);
    VAL(NVML_GPU_INSTANCE_PROFILE_1_SLICE_GFX, 10);
    VAL(NVML_GPU_INSTANCE_PROFILE_2_SLICE_GFX, 11);
    VAL(NVML_GPU_INSTANCE_PROFILE_4_SLICE_GFX, 12);
    VAL(NVML_GPU_INSTANCE_PROFILE_1_SLICE_NO_ME, 13);
    VAL(NVML_GPU_INSTANCE_PROFILE_2_SLICE_NO_ME, 14);
    VAL(NVML_GPU_INSTANCE_PROFILE_1_SLICE_ALL_ME, 15);
    VAL(NVML_GPU_INSTANCE_PROFILE_2_SLICE_ALL_ME, 16);
    VAL(NVML_GPU_INSTANCE_PROFILE_3_SLICE_GFX, 17);
    VAL(NVML_GPU_INSTANCE_PROFILE_COUNT, 18);
    VAL(NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE, 0);
    VAL(NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE, 4);
    VAL(NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE_REV1, 7);
    VAL(NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, 0);
    VAL(NVML_GPU_INSTANCE_PROFILE_CAPS_P2P, 1);
    VAL(NVML_GPU_INSTANCE_PROFILE_CAPS_GFX, 2);

    VAL(nvmlEventTypeSingleBitEccError, 0x1);
    VAL(nvmlEventTypeDoubleBitEccError, 0x2);
    VAL(nvmlEventTypePState, 0x4);
    VAL(nvmlEventTypeXidCriticalError, 0x8);
    VAL(nvmlEventTypeClock, 0x10);
    VAL(nvmlEventTypePowerSourceChange, 0x80);
    VAL(nvmlEventMigConfigChange, 0x100);
    VAL(nvmlEventTypeSingleBitEccErrorStorm, 0x200);
    VAL(nvmlEventTypeDramRetirementEvent, 0x400);
    VAL(nvmlEventTypeDramRetirementFailure, 0x800);
    VAL(nvmlEventTypeNonFatalPoisonError, 0x1000);
    VAL(nvmlEventTypeFatalPoisonError, 0x2000);
    VAL(nvmlEventTypeGpuUnavailableError, 0x4000);
    VAL(nvmlEventTypeGpuRecoveryAction, 0x8000);

    VAL(nvmlClocksEventReasonGpuIdle, 0x1);
    VAL(nvmlClocksEventReasonApplicationsClocksSetting, 0x2);
    VAL(nvmlClocksEventReasonSwPowerCap, 0x4);
    VAL(nvmlClocksThrottleReasonHwSlowdown, 0x8);
    VAL(nvmlClocksEventReasonSyncBoost, 0x10);
    VAL(nvmlClocksEventReasonSwThermalSlowdown, 0x20);
    VAL(nvmlClocksThrottleReasonHwThermalSlowdown, 0x40);
    VAL(nvmlClocksThrottleReasonHwPowerBrakeSlowdown, 0x80);
    VAL(nvmlClocksEventReasonDisplayClockSetting, 0x100);

    VAL(NVML_FI_DEV_ECC_CURRENT, 1);
    VAL(NVML_FI_DEV_ECC_SBE_VOL_TOTAL, 3);
    VAL(NVML_FI_DEV_ECC_DBE_VOL_TOTAL, 4);
    VAL(NVML_FI_DEV_ECC_SBE_AGG_TOTAL, 5);
    VAL(NVML_FI_DEV_ECC_DBE_AGG_TOTAL, 6);
    VAL(NVML_FI_DEV_RETIRED_SBE, 29);
    VAL(NVML_FI_DEV_RETIRED_DBE, 30);
    VAL(NVML_FI_DEV_RETIRED_PENDING, 31);
    VAL(NVML_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL, 38);
    VAL(NVML_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL, 45);
    VAL(NVML_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL, 52);
    VAL(NVML_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL, 59);
    VAL(NVML_FI_DEV_NVLINK_BANDWIDTH_C0_TOTAL, 66);
    VAL(NVML_FI_DEV_MEMORY_TEMP, 82);
    VAL(NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION, 83);
    VAL(NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON, 90);
    VAL(NVML_FI_DEV_NVLINK_LINK_COUNT, 91);
    VAL(NVML_FI_DEV_PCIE_REPLAY_COUNTER, 94);
    VAL(NVML_FI_DEV_REMAPPED_COR, 142);
    VAL(NVML_FI_DEV_REMAPPED_UNC, 143);
    VAL(NVML_FI_DEV_REMAPPED_PENDING, 144);
    VAL(NVML_FI_DEV_REMAPPED_FAILURE, 145);
    VAL(NVML_FI_DEV_POWER_AVERAGE, 185);
    VAL(NVML_FI_DEV_POWER_INSTANT, 186);

    VAL(NVML_GPM_METRIC_GRAPHICS_UTIL, 1);
    VAL(NVML_GPM_METRIC_SM_UTIL, 2);
    VAL(NVML_GPM_METRIC_SM_OCCUPANCY, 3);
    VAL(NVML_GPM_METRIC_INTEGER_UTIL, 4);
    VAL(NVML_GPM_METRIC_ANY_TENSOR_UTIL, 5);
    VAL(NVML_GPM_METRIC_DFMA_TENSOR_UTIL, 6);
    VAL(NVML_GPM_METRIC_HMMA_TENSOR_UTIL, 7);
    VAL(NVML_GPM_METRIC_IMMA_TENSOR_UTIL, 9);
    VAL(NVML_GPM_METRIC_DRAM_BW_UTIL, 10);
    VAL(NVML_GPM_METRIC_FP64_UTIL, 11);
    VAL(NVML_GPM_METRIC_FP32_UTIL, 12);
    VAL(NVML_GPM_METRIC_FP16_UTIL, 13);
    VAL(NVML_GPM_METRIC_PCIE_TX_PER_SEC, 20);
    VAL(NVML_GPM_METRIC_PCIE_RX_PER_SEC, 21);
    VAL(NVML_GPM_METRIC_NVDEC_0_UTIL, 30);
    VAL(NVML_GPM_METRIC_NVJPG_0_UTIL, 40);
    VAL(NVML_GPM_METRIC_NVOFA_0_UTIL, 50);
    VAL(NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC, 60);
    VAL(NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC, 61);
    VAL(NVML_GPM_METRIC_NVLINK_L0_RX_PER_SEC, 62);
    VAL(NVML_GPM_METRIC_NVLINK_L0_TX_PER_SEC, 63);
    VAL(NVML_GPM_METRIC_NVLINK_L17_RX_PER_SEC, 96);
    VAL(NVML_GPM_METRIC_NVLINK_L17_TX_PER_SEC, 97);
    VAL(NVML_GPM_METRIC_NVLINK_L18_RX_PER_SEC, 212);
    VAL(NVML_GPM_METRIC_NVLINK_L18_TX_PER_SEC, 213);
    VAL(NVML_GPM_METRIC_NVLINK_L35_RX_PER_SEC, 246);
    VAL(NVML_GPM_METRIC_NVLINK_L35_TX_PER_SEC, 247);
    VAL(NVML_GPM_METRIC_MAX, 333);
}

/* Every "} name_t;" that closes a typedef struct/union in nvml-abi.h must be in checked[]. */
static void header_coverage(void)
{
    const char *root = env_get("GPUOP_SOURCE_ROOT");
    if (!root) {
        fprintf(stderr, "FAIL GPUOP_SOURCE_ROOT is not set; cannot read nvml-abi.h\n");
        failures++;
        return;
    }
    _cleanup_free_ char *path = xasprintf("%s/src/edge/nvml/abi/nvml-abi.h", root);
    _cleanup_free_ char *text = NULL;
    struct err e = {0};
    if (file_read_all(path, 1 << 20, &text, NULL, &e) < 0) {
        fprintf(stderr, "FAIL %s\n", err_msg(&e));
        failures++;
        return;
    }
    regex_t re;
    if (regcomp(&re, "^} (nvml[A-Za-z0-9_]+_t);", REG_EXTENDED | REG_NEWLINE) != 0) {
        failures++;
        return;
    }
    size_t found = 0;
    const char *p = text;
    regmatch_t m[2];
    while (regexec(&re, p, 2, m, 0) == 0) {
        char name[128];
        size_t len = (size_t)(m[1].rm_eo - m[1].rm_so);
        snprintf(name, sizeof(name), "%.*s", (int)len, p + m[1].rm_so);
        /* Enum typedefs close the same way; only structs and unions carry a layout. */
        const char *open = p + m[0].rm_so;
        while (open > text && strncmp(open, "typedef ", 8) != 0)
            open--;
        bool layout =
            str_has_prefix(open, "typedef struct") || str_has_prefix(open, "typedef union");
        bool known = false;
        for (size_t i = 0; i < ARRAY_SIZE(checked); i++)
            known |= strcmp(checked[i], name) == 0;
        if (layout) {
            found++;
            if (!known) {
                fprintf(stderr, "FAIL %s is declared in nvml-abi.h but its layout is not checked\n",
                        name);
                failures++;
            }
        }
        p += m[0].rm_eo;
    }
    regfree(&re);
    check("structs and unions found in nvml-abi.h", found, ARRAY_SIZE(checked));
}

int main(void)
{
    structs();
    versions();
    values();
    header_coverage();
    printf("%d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
