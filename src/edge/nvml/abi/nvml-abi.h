/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nvml-abi: gpuop's own declarations of the NVML subset it uses, written to NVML's published
 * ABI (x86-64 and aarch64 LP64: natural alignment). Names, values and layouts must match the
 * real libnvidia-ml.so.1 exactly: the same gpuop binary runs on a real driver or on the
 * simulator (sim/nvml), which implements these same prototypes. tests/nvml checks every struct
 * size and field offset.
 *
 * The product never links against these symbols: src/edge/nvml loads them with dlopen/dlsym (the
 * NVML_FUNCS list below) and treats a missing symbol as "not supported".
 */
#ifndef GPUOP_NVML_ABI_H
#define GPUOP_NVML_ABI_H

#ifdef __cplusplus
extern "C" {
#endif

/* ---- return codes ------------------------------------------------------------------------- */

typedef enum nvmlReturn_enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NO_PERMISSION = 4,
    NVML_ERROR_ALREADY_INITIALIZED = 5,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_INSUFFICIENT_POWER = 8,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_TIMEOUT = 10,
    NVML_ERROR_IRQ_ISSUE = 11,
    NVML_ERROR_LIBRARY_NOT_FOUND = 12,
    NVML_ERROR_FUNCTION_NOT_FOUND = 13,
    NVML_ERROR_CORRUPTED_INFOROM = 14,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_RESET_REQUIRED = 16,
    NVML_ERROR_OPERATING_SYSTEM = 17,
    NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
    NVML_ERROR_IN_USE = 19,
    NVML_ERROR_MEMORY = 20,
    NVML_ERROR_NO_DATA = 21,
    NVML_ERROR_VGPU_ECC_NOT_SUPPORTED = 22,
    NVML_ERROR_INSUFFICIENT_RESOURCES = 23,
    NVML_ERROR_FREQ_NOT_SUPPORTED = 24,
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
    NVML_ERROR_DEPRECATED = 26,
    NVML_ERROR_NOT_READY = 27,
    NVML_ERROR_GPU_NOT_FOUND = 28,
    NVML_ERROR_INVALID_STATE = 29,
    NVML_ERROR_RESET_TYPE_NOT_SUPPORTED = 30,
    NVML_ERROR_UNKNOWN = 999
} nvmlReturn_t;

/* ---- handles ------------------------------------------------------------------------------ */

typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct nvmlGpuInstance_st *nvmlGpuInstance_t;
typedef struct nvmlComputeInstance_st *nvmlComputeInstance_t;
typedef struct nvmlEventSet_st *nvmlEventSet_t;

/* ---- buffer sizes ------------------------------------------------------------------------- */

#define NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE     32
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE  16
#define NVML_DEVICE_UUID_BUFFER_SIZE           80
#define NVML_DEVICE_UUID_V2_BUFFER_SIZE        96
#define NVML_DEVICE_NAME_BUFFER_SIZE           64
#define NVML_DEVICE_NAME_V2_BUFFER_SIZE        96
#define NVML_DEVICE_SERIAL_BUFFER_SIZE         30
#define NVML_DEVICE_PART_NUMBER_BUFFER_SIZE    80
#define NVML_DEVICE_VBIOS_VERSION_BUFFER_SIZE  32
#define NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE 80
#define NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE   80
#define NVML_NVLINK_MAX_LINKS                  36
#define NVML_MAX_PHYSICAL_BRIDGE               128

#define NVML_STRUCT_VERSION(data, ver) \
    (unsigned int)(sizeof(nvml##data##_v##ver##_t) | ((ver) << 24U))

/* nvmlInitWithFlags */
#define NVML_INIT_FLAG_NO_GPUS    1
#define NVML_INIT_FLAG_NO_ATTACH  2
#define NVML_INIT_FLAG_FORCE_INIT 4

/* ---- structs ------------------------------------------------------------------------------ */

typedef struct nvmlPciInfo_st {
    char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE]; /* "%04X:%02X:%02X.0" */
    unsigned int domain;
    unsigned int bus;
    unsigned int device;
    unsigned int pciDeviceId;    /* (device id << 16) | vendor id, e.g. 0x233010DE */
    unsigned int pciSubSystemId; /* (subsystem id << 16) | subsystem vendor */
    char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE]; /* "%08X:%02X:%02X.0" */
} nvmlPciInfo_t;

typedef struct nvmlMemory_st {
    unsigned long long total; /* bytes */
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_t;

typedef struct nvmlMemory_v2_st {
    unsigned int version; /* nvmlMemory_v2 */
    unsigned long long total;
    unsigned long long reserved;
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_v2_t;
#define nvmlMemory_v2 NVML_STRUCT_VERSION(Memory, 2)

typedef struct nvmlBAR1Memory_st {
    unsigned long long bar1Total;
    unsigned long long bar1Free;
    unsigned long long bar1Used;
} nvmlBAR1Memory_t;

typedef struct nvmlUtilization_st {
    unsigned int gpu;    /* percent */
    unsigned int memory; /* percent */
} nvmlUtilization_t;

typedef struct nvmlProcessInfo_v1_st {
    unsigned int pid;
    unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;

typedef struct nvmlProcessInfo_v2_st {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId;     /* 0xFFFFFFFF when not MIG */
    unsigned int computeInstanceId; /* 0xFFFFFFFF when not MIG */
} nvmlProcessInfo_v2_t;
typedef nvmlProcessInfo_v2_t nvmlProcessInfo_t;

typedef struct nvmlEventData_st {
    nvmlDevice_t device;
    unsigned long long eventType;
    unsigned long long eventData; /* the XID for XidCriticalError; 999 unknown */
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
} nvmlEventData_t;

typedef struct nvmlViolationTime_st {
    unsigned long long referenceTime; /* us */
    unsigned long long violationTime; /* ns */
} nvmlViolationTime_t;

typedef struct nvmlDeviceAttributes_st {
    unsigned int multiprocessorCount;
    unsigned int sharedCopyEngineCount;
    unsigned int sharedDecoderCount;
    unsigned int sharedEncoderCount;
    unsigned int sharedJpegCount;
    unsigned int sharedOfaCount;
    unsigned int gpuInstanceSliceCount;
    unsigned int computeInstanceSliceCount;
    unsigned long long memorySizeMB;
} nvmlDeviceAttributes_t;

typedef struct nvmlGpuInstancePlacement_st {
    unsigned int start;
    unsigned int size;
} nvmlGpuInstancePlacement_t;

typedef struct nvmlGpuInstanceProfileInfo_st {
    unsigned int id; /* hardware profile id, passed to Create / GetGpuInstances */
    unsigned int isP2pSupported;
    unsigned int sliceCount;
    unsigned int instanceCount;
    unsigned int multiprocessorCount;
    unsigned int copyEngineCount;
    unsigned int decoderCount;
    unsigned int encoderCount;
    unsigned int jpegCount;
    unsigned int ofaCount;
    unsigned long long memorySizeMB;
} nvmlGpuInstanceProfileInfo_t;

typedef struct nvmlGpuInstanceProfileInfo_v2_st {
    unsigned int version;
    unsigned int id;
    unsigned int isP2pSupported;
    unsigned int sliceCount;
    unsigned int instanceCount;
    unsigned int multiprocessorCount;
    unsigned int copyEngineCount;
    unsigned int decoderCount;
    unsigned int encoderCount;
    unsigned int jpegCount;
    unsigned int ofaCount;
    unsigned long long memorySizeMB;
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
} nvmlGpuInstanceProfileInfo_v2_t;
#define nvmlGpuInstanceProfileInfo_v2 NVML_STRUCT_VERSION(GpuInstanceProfileInfo, 2)

typedef struct nvmlGpuInstanceProfileInfo_v3_st {
    unsigned int version;
    unsigned int id;
    unsigned int sliceCount;
    unsigned int instanceCount;
    unsigned int multiprocessorCount;
    unsigned int copyEngineCount;
    unsigned int decoderCount;
    unsigned int encoderCount;
    unsigned int jpegCount;
    unsigned int ofaCount;
    unsigned long long memorySizeMB;
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
    unsigned int capabilities; /* NVML_GPU_INSTANCE_PROFILE_CAPS_* */
} nvmlGpuInstanceProfileInfo_v3_t;
#define nvmlGpuInstanceProfileInfo_v3      NVML_STRUCT_VERSION(GpuInstanceProfileInfo, 3)
#define NVML_GPU_INSTANCE_PROFILE_CAPS_P2P 0x1
#define NVML_GPU_INSTANCE_PROFILE_CAPS_GFX 0x2

typedef struct nvmlGpuInstanceInfo_st {
    nvmlDevice_t device;
    unsigned int id;
    unsigned int profileId;
    nvmlGpuInstancePlacement_t placement;
} nvmlGpuInstanceInfo_t;

typedef struct nvmlComputeInstancePlacement_st {
    unsigned int start;
    unsigned int size;
} nvmlComputeInstancePlacement_t;

typedef struct nvmlComputeInstanceProfileInfo_st {
    unsigned int id;
    unsigned int sliceCount;
    unsigned int instanceCount;
    unsigned int multiprocessorCount;
    unsigned int sharedCopyEngineCount;
    unsigned int sharedDecoderCount;
    unsigned int sharedEncoderCount;
    unsigned int sharedJpegCount;
    unsigned int sharedOfaCount;
} nvmlComputeInstanceProfileInfo_t;

typedef struct nvmlComputeInstanceProfileInfo_v2_st {
    unsigned int version;
    unsigned int id;
    unsigned int sliceCount;
    unsigned int instanceCount;
    unsigned int multiprocessorCount;
    unsigned int sharedCopyEngineCount;
    unsigned int sharedDecoderCount;
    unsigned int sharedEncoderCount;
    unsigned int sharedJpegCount;
    unsigned int sharedOfaCount;
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
} nvmlComputeInstanceProfileInfo_v2_t;
#define nvmlComputeInstanceProfileInfo_v2 NVML_STRUCT_VERSION(ComputeInstanceProfileInfo, 2)

typedef struct nvmlComputeInstanceInfo_st {
    nvmlDevice_t device;
    nvmlGpuInstance_t gpuInstance;
    unsigned int id;
    unsigned int profileId;
    nvmlComputeInstancePlacement_t placement;
} nvmlComputeInstanceInfo_t;

typedef enum nvmlValueType_enum {
    NVML_VALUE_TYPE_DOUBLE = 0,
    NVML_VALUE_TYPE_UNSIGNED_INT = 1,
    NVML_VALUE_TYPE_UNSIGNED_LONG = 2,
    NVML_VALUE_TYPE_UNSIGNED_LONG_LONG = 3,
    NVML_VALUE_TYPE_SIGNED_LONG_LONG = 4,
    NVML_VALUE_TYPE_SIGNED_INT = 5,
    NVML_VALUE_TYPE_UNSIGNED_SHORT = 6,
    NVML_VALUE_TYPE_COUNT
} nvmlValueType_t;

typedef union nvmlValue_st {
    double dVal;
    int siVal;
    unsigned int uiVal;
    unsigned long ulVal;
    unsigned long long ullVal;
    signed long long sllVal;
    unsigned short usVal;
} nvmlValue_t;

typedef struct nvmlFieldValue_st {
    unsigned int fieldId;
    unsigned int scopeId; /* e.g. the NVLink index for per-link fields */
    long long timestamp;  /* us since epoch */
    long long latencyUsec;
    nvmlValueType_t valueType;
    nvmlReturn_t nvmlReturn;
    nvmlValue_t value;
} nvmlFieldValue_t;

/* ---- enums -------------------------------------------------------------------------------- */

typedef enum nvmlEnableState_enum {
    NVML_FEATURE_DISABLED = 0,
    NVML_FEATURE_ENABLED = 1
} nvmlEnableState_t;

typedef enum nvmlTemperatureSensors_enum {
    NVML_TEMPERATURE_GPU = 0,
    NVML_TEMPERATURE_COUNT
} nvmlTemperatureSensors_t;

typedef enum nvmlClockType_enum {
    NVML_CLOCK_GRAPHICS = 0,
    NVML_CLOCK_SM = 1,
    NVML_CLOCK_MEM = 2,
    NVML_CLOCK_VIDEO = 3,
    NVML_CLOCK_COUNT
} nvmlClockType_t;

typedef unsigned int nvmlDeviceArchitecture_t;
#define NVML_DEVICE_ARCH_KEPLER    2
#define NVML_DEVICE_ARCH_MAXWELL   3
#define NVML_DEVICE_ARCH_PASCAL    4
#define NVML_DEVICE_ARCH_VOLTA     5
#define NVML_DEVICE_ARCH_TURING    6
#define NVML_DEVICE_ARCH_AMPERE    7
#define NVML_DEVICE_ARCH_ADA       8
#define NVML_DEVICE_ARCH_HOPPER    9
#define NVML_DEVICE_ARCH_BLACKWELL 10
#define NVML_DEVICE_ARCH_RUBIN     13
#define NVML_DEVICE_ARCH_UNKNOWN   0xffffffff

typedef enum nvmlBrandType_enum {
    NVML_BRAND_UNKNOWN = 0,
    NVML_BRAND_QUADRO = 1,
    NVML_BRAND_TESLA = 2,
    NVML_BRAND_NVS = 3,
    NVML_BRAND_GRID = 4,
    NVML_BRAND_GEFORCE = 5,
    NVML_BRAND_TITAN = 6,
    NVML_BRAND_NVIDIA_VAPPS = 7,
    NVML_BRAND_NVIDIA_VPC = 8,
    NVML_BRAND_NVIDIA_VCS = 9,
    NVML_BRAND_NVIDIA_VWS = 10,
    NVML_BRAND_NVIDIA_CLOUD_GAMING = 11,
    NVML_BRAND_QUADRO_RTX = 12,
    NVML_BRAND_NVIDIA_RTX = 13,
    NVML_BRAND_NVIDIA = 14,
    NVML_BRAND_GEFORCE_RTX = 15,
    NVML_BRAND_TITAN_RTX = 16,
    NVML_BRAND_COUNT
} nvmlBrandType_t;

typedef enum nvmlMemoryErrorType_enum {
    NVML_MEMORY_ERROR_TYPE_CORRECTED = 0,
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1,
    NVML_MEMORY_ERROR_TYPE_COUNT
} nvmlMemoryErrorType_t;

typedef enum nvmlEccCounterType_enum {
    NVML_VOLATILE_ECC = 0,
    NVML_AGGREGATE_ECC = 1,
    NVML_ECC_COUNTER_TYPE_COUNT
} nvmlEccCounterType_t;

typedef enum nvmlMemoryLocation_enum {
    NVML_MEMORY_LOCATION_L1_CACHE = 0,
    NVML_MEMORY_LOCATION_L2_CACHE = 1,
    NVML_MEMORY_LOCATION_DRAM = 2,
    NVML_MEMORY_LOCATION_DEVICE_MEMORY = 2,
    NVML_MEMORY_LOCATION_REGISTER_FILE = 3,
    NVML_MEMORY_LOCATION_TEXTURE_MEMORY = 4,
    NVML_MEMORY_LOCATION_TEXTURE_SHM = 5,
    NVML_MEMORY_LOCATION_CBU = 6,
    NVML_MEMORY_LOCATION_SRAM = 7,
    NVML_MEMORY_LOCATION_COUNT
} nvmlMemoryLocation_t;

typedef enum nvmlPageRetirementCause_enum {
    NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS = 0,
    NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR = 1,
    NVML_PAGE_RETIREMENT_CAUSE_COUNT
} nvmlPageRetirementCause_t;

typedef enum nvmlGpuLevel_enum {
    NVML_TOPOLOGY_INTERNAL = 0,
    NVML_TOPOLOGY_SINGLE = 10,
    NVML_TOPOLOGY_MULTIPLE = 20,
    NVML_TOPOLOGY_HOSTBRIDGE = 30,
    NVML_TOPOLOGY_NODE = 40,
    NVML_TOPOLOGY_SYSTEM = 50
} nvmlGpuTopologyLevel_t;

typedef enum nvmlGpuP2PCapsIndex_enum {
    NVML_P2P_CAPS_INDEX_READ = 0,
    NVML_P2P_CAPS_INDEX_WRITE = 1,
    NVML_P2P_CAPS_INDEX_NVLINK = 2,
    NVML_P2P_CAPS_INDEX_ATOMICS = 3,
    NVML_P2P_CAPS_INDEX_PCI = 4,
    NVML_P2P_CAPS_INDEX_UNKNOWN = 5
} nvmlGpuP2PCapsIndex_t;

typedef enum nvmlGpuP2PStatus_enum {
    NVML_P2P_STATUS_OK = 0,
    NVML_P2P_STATUS_CHIPSET_NOT_SUPPORTED = 1,
    NVML_P2P_STATUS_GPU_NOT_SUPPORTED = 2,
    NVML_P2P_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED = 3,
    NVML_P2P_STATUS_DISABLED_BY_REGKEY = 4,
    NVML_P2P_STATUS_NOT_SUPPORTED = 5,
    NVML_P2P_STATUS_UNKNOWN = 6
} nvmlGpuP2PStatus_t;

typedef enum nvmlComputeMode_enum {
    NVML_COMPUTEMODE_DEFAULT = 0,
    NVML_COMPUTEMODE_EXCLUSIVE_THREAD = 1,
    NVML_COMPUTEMODE_PROHIBITED = 2,
    NVML_COMPUTEMODE_EXCLUSIVE_PROCESS = 3,
    NVML_COMPUTEMODE_COUNT
} nvmlComputeMode_t;

typedef enum nvmlPStates_enum {
    NVML_PSTATE_0 = 0,
    NVML_PSTATE_15 = 15,
    NVML_PSTATE_UNKNOWN = 32
} nvmlPstates_t;

typedef enum nvmlPcieUtilCounter_enum {
    NVML_PCIE_UTIL_TX_BYTES = 0,
    NVML_PCIE_UTIL_RX_BYTES = 1,
    NVML_PCIE_UTIL_COUNT
} nvmlPcieUtilCounter_t;

typedef enum nvmlPerfPolicyType_enum {
    NVML_PERF_POLICY_POWER = 0,
    NVML_PERF_POLICY_THERMAL = 1,
    NVML_PERF_POLICY_SYNC_BOOST = 2,
    NVML_PERF_POLICY_BOARD_LIMIT = 3,
    NVML_PERF_POLICY_LOW_UTILIZATION = 4,
    NVML_PERF_POLICY_RELIABILITY = 5,
    NVML_PERF_POLICY_TOTAL_APP_CLOCKS = 10,
    NVML_PERF_POLICY_TOTAL_BASE_CLOCKS = 11,
    NVML_PERF_POLICY_COUNT
} nvmlPerfPolicyType_t;

/* MIG mode */
#define NVML_DEVICE_MIG_DISABLE 0x0
#define NVML_DEVICE_MIG_ENABLE  0x1

/* GPU instance profile indices (what GetGpuInstanceProfileInfo takes). */
#define NVML_GPU_INSTANCE_PROFILE_1_SLICE        0x0
#define NVML_GPU_INSTANCE_PROFILE_2_SLICE        0x1
#define NVML_GPU_INSTANCE_PROFILE_3_SLICE        0x2
#define NVML_GPU_INSTANCE_PROFILE_4_SLICE        0x3
#define NVML_GPU_INSTANCE_PROFILE_7_SLICE        0x4
#define NVML_GPU_INSTANCE_PROFILE_8_SLICE        0x5
#define NVML_GPU_INSTANCE_PROFILE_6_SLICE        0x6
#define NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1   0x7
#define NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1   0x8
#define NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2   0x9
#define NVML_GPU_INSTANCE_PROFILE_1_SLICE_GFX    0xA
#define NVML_GPU_INSTANCE_PROFILE_2_SLICE_GFX    0xB
#define NVML_GPU_INSTANCE_PROFILE_4_SLICE_GFX    0xC
#define NVML_GPU_INSTANCE_PROFILE_1_SLICE_NO_ME  0xD
#define NVML_GPU_INSTANCE_PROFILE_2_SLICE_NO_ME  0xE
#define NVML_GPU_INSTANCE_PROFILE_1_SLICE_ALL_ME 0xF
#define NVML_GPU_INSTANCE_PROFILE_2_SLICE_ALL_ME 0x10
#define NVML_GPU_INSTANCE_PROFILE_3_SLICE_GFX    0x11
#define NVML_GPU_INSTANCE_PROFILE_COUNT          0x12

/* Compute instance profile indices. */
#define NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE       0x0
#define NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE       0x1
#define NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE       0x2
#define NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE       0x3
#define NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE       0x4
#define NVML_COMPUTE_INSTANCE_PROFILE_8_SLICE       0x5
#define NVML_COMPUTE_INSTANCE_PROFILE_6_SLICE       0x6
#define NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE_REV1  0x7
#define NVML_COMPUTE_INSTANCE_PROFILE_COUNT         0x8
#define NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED 0x0

/* Event type bits. */
#define nvmlEventTypeSingleBitEccError      0x0000000000000001ULL
#define nvmlEventTypeDoubleBitEccError      0x0000000000000002ULL
#define nvmlEventTypePState                 0x0000000000000004ULL
#define nvmlEventTypeXidCriticalError       0x0000000000000008ULL
#define nvmlEventTypeClock                  0x0000000000000010ULL
#define nvmlEventTypePowerSourceChange      0x0000000000000080ULL
#define nvmlEventMigConfigChange            0x0000000000000100ULL
#define nvmlEventTypeSingleBitEccErrorStorm 0x0000000000000200ULL
#define nvmlEventTypeDramRetirementEvent    0x0000000000000400ULL
#define nvmlEventTypeDramRetirementFailure  0x0000000000000800ULL
#define nvmlEventTypeNonFatalPoisonError    0x0000000000001000ULL
#define nvmlEventTypeFatalPoisonError       0x0000000000002000ULL
#define nvmlEventTypeGpuUnavailableError    0x0000000000004000ULL
#define nvmlEventTypeGpuRecoveryAction      0x0000000000008000ULL
#define nvmlEventTypeNone                   0x0000000000000000ULL

/* Clock event (throttle) reason bits. */
#define nvmlClocksEventReasonGpuIdle                   0x0000000000000001ULL
#define nvmlClocksEventReasonApplicationsClocksSetting 0x0000000000000002ULL
#define nvmlClocksEventReasonSwPowerCap                0x0000000000000004ULL
#define nvmlClocksThrottleReasonHwSlowdown             0x0000000000000008ULL
#define nvmlClocksEventReasonSyncBoost                 0x0000000000000010ULL
#define nvmlClocksEventReasonSwThermalSlowdown         0x0000000000000020ULL
#define nvmlClocksThrottleReasonHwThermalSlowdown      0x0000000000000040ULL
#define nvmlClocksThrottleReasonHwPowerBrakeSlowdown   0x0000000000000080ULL
#define nvmlClocksEventReasonDisplayClockSetting       0x0000000000000100ULL
#define nvmlClocksEventReasonNone                      0x0000000000000000ULL

/* Field ids for nvmlDeviceGetFieldValues. */
#define NVML_FI_DEV_ECC_CURRENT                       1
#define NVML_FI_DEV_ECC_SBE_VOL_TOTAL                 3
#define NVML_FI_DEV_ECC_DBE_VOL_TOTAL                 4
#define NVML_FI_DEV_ECC_SBE_AGG_TOTAL                 5
#define NVML_FI_DEV_ECC_DBE_AGG_TOTAL                 6
#define NVML_FI_DEV_RETIRED_SBE                       29
#define NVML_FI_DEV_RETIRED_DBE                       30
#define NVML_FI_DEV_RETIRED_PENDING                   31
#define NVML_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL 38
#define NVML_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL 45
#define NVML_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL   52
#define NVML_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL 59
#define NVML_FI_DEV_NVLINK_BANDWIDTH_C0_TOTAL         66
#define NVML_FI_DEV_MEMORY_TEMP                       82
#define NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION          83
#define NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON          90
#define NVML_FI_DEV_NVLINK_LINK_COUNT                 91
#define NVML_FI_DEV_PCIE_REPLAY_COUNTER               94
#define NVML_FI_DEV_REMAPPED_COR                      142
#define NVML_FI_DEV_REMAPPED_UNC                      143
#define NVML_FI_DEV_REMAPPED_PENDING                  144
#define NVML_FI_DEV_REMAPPED_FAILURE                  145
#define NVML_FI_DEV_POWER_AVERAGE                     185
#define NVML_FI_DEV_POWER_INSTANT                     186
#define NVML_FI_MAX                                   303

/* ---- GPU Performance Monitoring (GPM) ------------------------------------------------------
 *
 * Hopper and newer GPUs count SM, tensor, memory, PCIe and NVLink activity in hardware; a client
 * takes two samples of the counters (nvmlGpmSampleGet, or nvmlGpmMigSampleGet for one MIG GPU
 * instance) and asks nvmlGpmMetricsGet for the metrics over the interval between them. The
 * facts below come from NVIDIA's nvml.h as published in NVIDIA/go-nvml (gen/nvml/nvml.h, the
 * unmodified header of CUDA 13.3; pkg/nvml/nvml.h as its commits synced NVML 11.8 to 13.3):
 *
 *  - The API appeared with NVML 11.8 (driver branch R520), nvmlGpmMigSampleGet with NVML 12.0
 *    (R525); older libraries lack the symbols.
 *  - nvmlGpmSample_t is an opaque pointer (struct nvmlGpmSample_st *); samples are allocated and
 *    freed by the library (nvmlGpmSampleAlloc, nvmlGpmSampleFree).
 *  - NVML_GPM_METRICS_GET_VERSION and NVML_GPM_SUPPORT_VERSION are the literal 1, not
 *    NVML_STRUCT_VERSION(...): go-nvml's issue #168 / PR #176 is a client that sent the latter and
 *    got NVML_ERROR_ARGUMENT_VERSION_MISMATCH.
 *  - nvmlGpmMetricsGet_t ends in metrics[NVML_GPM_METRIC_MAX], and NVML_GPM_METRIC_MAX grew
 *    (98 from NVML 11.8 to 12.8, 210 in 12.9 to 13.1, 333 since 13.2) while the version stayed 1:
 *    the library reads numMetrics entries. gpuop declares the largest array (333), so a library
 *    of any of those releases finds at least the struct it was built with.
 *  - Units: the *_UTIL metrics are percentages, 0.0 - 100.0; PCIE_*_PER_SEC and NVLINK_*_PER_SEC
 *    are MiB per second (nvml.h's comment on each id). DCGM, whose DCGM_FI_PROF_* fields
 *    dcgm-exporter serves, gives ratios 0.0 - 1.0 and bytes per second: NVIDIA/DCGM's
 *    dcgmlib/src/dcgm_fields.cpp maps each PROF field to its GPM metric and marks the percentage
 *    ones, DcgmCacheManager.cpp multiplies the MiB/s ones by 1024 * 1024 (docs/profiling-metrics.md
 *    lists each field).
 *  - The interval between two samples should exceed 100 ms (the counters' refresh), per nvml.h.
 *  - Each metric carries its own nvmlReturn; value is valid only where it is NVML_SUCCESS.
 */
#define NVML_GPM_METRICS_GET_VERSION 1
#define NVML_GPM_SUPPORT_VERSION     1

typedef enum nvmlGpmMetricId_enum {
    NVML_GPM_METRIC_GRAPHICS_UTIL = 1,    /* % of time any compute/graphics work was active */
    NVML_GPM_METRIC_SM_UTIL = 2,          /* % of SMs busy */
    NVML_GPM_METRIC_SM_OCCUPANCY = 3,     /* % of warps active vs the theoretical maximum */
    NVML_GPM_METRIC_INTEGER_UTIL = 4,     /* % of time SMs did integer operations */
    NVML_GPM_METRIC_ANY_TENSOR_UTIL = 5,  /* % of time SMs did any tensor operation */
    NVML_GPM_METRIC_DFMA_TENSOR_UTIL = 6, /* % ... DFMA tensor operations */
    NVML_GPM_METRIC_HMMA_TENSOR_UTIL = 7, /* % ... HMMA tensor operations */
    NVML_GPM_METRIC_IMMA_TENSOR_UTIL = 9, /* % ... IMMA tensor operations */
    NVML_GPM_METRIC_DRAM_BW_UTIL = 10,    /* % of DRAM bandwidth vs the theoretical maximum */
    NVML_GPM_METRIC_FP64_UTIL = 11,       /* % of time SMs did non-tensor FP64 math */
    NVML_GPM_METRIC_FP32_UTIL = 12,       /* % ... non-tensor FP32 */
    NVML_GPM_METRIC_FP16_UTIL = 13,       /* % ... non-tensor FP16 */
    NVML_GPM_METRIC_PCIE_TX_PER_SEC = 20, /* PCIe traffic from the GPU, MiB/s */
    NVML_GPM_METRIC_PCIE_RX_PER_SEC = 21, /* PCIe traffic to the GPU, MiB/s */
    NVML_GPM_METRIC_NVDEC_0_UTIL = 30,    /* NVDEC 0..7: 30..37, % */
    NVML_GPM_METRIC_NVJPG_0_UTIL = 40,    /* NVJPG 0..7: 40..47, % */
    NVML_GPM_METRIC_NVOFA_0_UTIL = 50,    /* NVOFA 0..1: 50..51, % */
    NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC = 60, /* NVLink reads, every link, MiB/s */
    NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC = 61, /* NVLink writes, every link, MiB/s */
    NVML_GPM_METRIC_NVLINK_L0_RX_PER_SEC = 62,    /* link l: RX 62 + 2l, TX 63 + 2l (l < 18) */
    NVML_GPM_METRIC_NVLINK_L0_TX_PER_SEC = 63,
    NVML_GPM_METRIC_NVLINK_L17_RX_PER_SEC = 96,
    NVML_GPM_METRIC_NVLINK_L17_TX_PER_SEC = 97,
    NVML_GPM_METRIC_NVLINK_L18_RX_PER_SEC = 212, /* links 18..35: RX 212 + 2(l-18), TX + 1 */
    NVML_GPM_METRIC_NVLINK_L18_TX_PER_SEC = 213,
    NVML_GPM_METRIC_NVLINK_L35_RX_PER_SEC = 246,
    NVML_GPM_METRIC_NVLINK_L35_TX_PER_SEC = 247,
    NVML_GPM_METRIC_MAX = 333 /* one above the largest id (NVML 13.2 and later) */
} nvmlGpmMetricId_t;

typedef struct nvmlGpmSample_st *nvmlGpmSample_t;

typedef struct nvmlGpmMetricMetricInfo_st {
    char *shortName; /* may be NULL */
    char *longName;
    char *unit;
} nvmlGpmMetricMetricInfo_t;

typedef struct nvmlGpmMetric_st {
    unsigned int metricId;   /* in: NVML_GPM_METRIC_* */
    nvmlReturn_t nvmlReturn; /* out: this metric's status; value is valid only on NVML_SUCCESS */
    double value;            /* out */
    nvmlGpmMetricMetricInfo_t metricInfo; /* out: names and unit, NULL where undefined */
} nvmlGpmMetric_t;

typedef struct nvmlGpmMetricsGet_st {
    unsigned int version;    /* in: NVML_GPM_METRICS_GET_VERSION */
    unsigned int numMetrics; /* in: entries of metrics[] to compute */
    nvmlGpmSample_t sample1; /* in: the older sample */
    nvmlGpmSample_t sample2; /* in: the newer sample */
    nvmlGpmMetric_t metrics[NVML_GPM_METRIC_MAX];
} nvmlGpmMetricsGet_t;

typedef struct nvmlGpmSupport_st {
    unsigned int version;           /* in: NVML_GPM_SUPPORT_VERSION */
    unsigned int isSupportedDevice; /* out: non-zero where the device supports GPM */
} nvmlGpmSupport_t;

/* NVLink-C2C, the GPU's coherent link to a Grace CPU (nvmlDeviceGetC2cModeInfoV). No version
 * field: the V names the call, the struct is v1. */
typedef struct nvmlC2cModeInfo_v1_st {
    unsigned int isC2cEnabled; /* out: non-zero when the GPU's C2C link is enabled */
} nvmlC2cModeInfo_v1_t;

/* How the GPU addresses system memory (nvmlDeviceGetAddressingMode). */
typedef enum nvmlDeviceAddressingModeType_enum {
    NVML_DEVICE_ADDRESSING_MODE_NONE = 0,
    NVML_DEVICE_ADDRESSING_MODE_HMM = 1, /* the kernel's Heterogeneous Memory Management */
    NVML_DEVICE_ADDRESSING_MODE_ATS = 2, /* Address Translation Services (Grace: over C2C) */
} nvmlDeviceAddressingModeType_t;

typedef struct nvmlDeviceAddressingMode_v1_st {
    unsigned int version; /* in: nvmlDeviceAddressingMode_v1 */
    unsigned int value;   /* out: nvmlDeviceAddressingModeType_t */
} nvmlDeviceAddressingMode_v1_t;
#define nvmlDeviceAddressingMode_v1 NVML_STRUCT_VERSION(DeviceAddressingMode, 1)

/* ---- functions ---------------------------------------------------------------------------- */

nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlInitWithFlags(unsigned int flags);
nvmlReturn_t nvmlShutdown(void);
const char *nvmlErrorString(nvmlReturn_t result);

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length);
nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length);
nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *cudaDriverVersion);
nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *cudaDriverVersion);

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount);
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, nvmlDevice_t *device);

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length);
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length);
nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t device, char *serial, unsigned int length);
nvmlReturn_t nvmlDeviceGetBoardPartNumber(nvmlDevice_t device, char *partNumber,
                                          unsigned int length);
nvmlReturn_t nvmlDeviceGetVbiosVersion(nvmlDevice_t device, char *version, unsigned int length);
nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index);
nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minorNumber);
nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci);
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory);
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory);
nvmlReturn_t nvmlDeviceGetBAR1MemoryInfo(nvmlDevice_t device, nvmlBAR1Memory_t *bar1Memory);
nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor);
nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t device, nvmlDeviceArchitecture_t *arch);
nvmlReturn_t nvmlDeviceGetBrand(nvmlDevice_t device, nvmlBrandType_t *type);
nvmlReturn_t nvmlDeviceGetNumGpuCores(nvmlDevice_t device, unsigned int *numCores);
nvmlReturn_t nvmlDeviceGetAttributes_v2(nvmlDevice_t device, nvmlDeviceAttributes_t *attributes);
nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t device, nvmlEnableState_t *mode);
nvmlReturn_t nvmlDeviceGetC2cModeInfoV(nvmlDevice_t device, nvmlC2cModeInfo_v1_t *c2cModeInfo);
nvmlReturn_t nvmlDeviceGetAddressingMode(nvmlDevice_t device, nvmlDeviceAddressingMode_v1_t *mode);
nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t device, nvmlComputeMode_t *mode);
nvmlReturn_t nvmlDeviceGetPerformanceState(nvmlDevice_t device, nvmlPstates_t *pState);

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, nvmlTemperatureSensors_t sensorType,
                                      unsigned int *temp);
nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *power);
nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int *limit);
nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t device, unsigned int *limit);
nvmlReturn_t nvmlDeviceGetPowerManagementDefaultLimit(nvmlDevice_t device,
                                                      unsigned int *defaultLimit);
nvmlReturn_t nvmlDeviceGetPowerManagementLimitConstraints(nvmlDevice_t device,
                                                          unsigned int *minLimit,
                                                          unsigned int *maxLimit);
nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device, unsigned long long *energy);
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *utilization);
nvmlReturn_t nvmlDeviceGetEncoderUtilization(nvmlDevice_t device, unsigned int *utilization,
                                             unsigned int *samplingPeriodUs);
nvmlReturn_t nvmlDeviceGetDecoderUtilization(nvmlDevice_t device, unsigned int *utilization,
                                             unsigned int *samplingPeriodUs);
nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, nvmlClockType_t type, unsigned int *clock);
nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t device, nvmlClockType_t type,
                                       unsigned int *clock);
nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device,
                                                    unsigned long long *clocksEventReasons);
nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device,
                                                       unsigned long long *clocksThrottleReasons);
nvmlReturn_t nvmlDeviceGetViolationStatus(nvmlDevice_t device, nvmlPerfPolicyType_t perfPolicyType,
                                          nvmlViolationTime_t *violTime);
nvmlReturn_t nvmlDeviceGetPcieReplayCounter(nvmlDevice_t device, unsigned int *value);
nvmlReturn_t nvmlDeviceGetPcieThroughput(nvmlDevice_t device, nvmlPcieUtilCounter_t counter,
                                         unsigned int *value);
nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t device, unsigned int *currLinkGen);
nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t device, unsigned int *currLinkWidth);

nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t device, nvmlEnableState_t *current,
                                  nvmlEnableState_t *pending);
nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, nvmlMemoryErrorType_t errorType,
                                         nvmlEccCounterType_t counterType,
                                         unsigned long long *eccCounts);
nvmlReturn_t nvmlDeviceGetMemoryErrorCounter(nvmlDevice_t device, nvmlMemoryErrorType_t errorType,
                                             nvmlEccCounterType_t counterType,
                                             nvmlMemoryLocation_t locationType,
                                             unsigned long long *count);
nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t device, nvmlPageRetirementCause_t cause,
                                       unsigned int *pageCount, unsigned long long *addresses);
nvmlReturn_t nvmlDeviceGetRetiredPages_v2(nvmlDevice_t device, nvmlPageRetirementCause_t cause,
                                          unsigned int *pageCount, unsigned long long *addresses,
                                          unsigned long long *timestamps);
nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t device,
                                                    nvmlEnableState_t *isPending);
nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned int *corrRows,
                                       unsigned int *uncRows, unsigned int *isPending,
                                       unsigned int *failureOccurred);
nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int valuesCount,
                                      nvmlFieldValue_t *values);

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *currentMode,
                                  unsigned int *pendingMode);
nvmlReturn_t nvmlDeviceSetMigMode(nvmlDevice_t device, unsigned int mode,
                                  nvmlReturn_t *activationStatus);
nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfo(nvmlDevice_t device, unsigned int profile,
                                                 nvmlGpuInstanceProfileInfo_t *info);
nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfoV(nvmlDevice_t device, unsigned int profile,
                                                  nvmlGpuInstanceProfileInfo_v2_t *info);
nvmlReturn_t nvmlDeviceGetGpuInstancePossiblePlacements_v2(nvmlDevice_t device,
                                                           unsigned int profileId,
                                                           nvmlGpuInstancePlacement_t *placements,
                                                           unsigned int *count);
nvmlReturn_t nvmlDeviceGetGpuInstanceRemainingCapacity(nvmlDevice_t device, unsigned int profileId,
                                                       unsigned int *count);
nvmlReturn_t nvmlDeviceCreateGpuInstance(nvmlDevice_t device, unsigned int profileId,
                                         nvmlGpuInstance_t *gpuInstance);
nvmlReturn_t nvmlDeviceCreateGpuInstanceWithPlacement(nvmlDevice_t device, unsigned int profileId,
                                                      const nvmlGpuInstancePlacement_t *placement,
                                                      nvmlGpuInstance_t *gpuInstance);
nvmlReturn_t nvmlDeviceGetGpuInstances(nvmlDevice_t device, unsigned int profileId,
                                       nvmlGpuInstance_t *gpuInstances, unsigned int *count);
nvmlReturn_t nvmlDeviceGetGpuInstanceById(nvmlDevice_t device, unsigned int id,
                                          nvmlGpuInstance_t *gpuInstance);
nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t gpuInstance, nvmlGpuInstanceInfo_t *info);
nvmlReturn_t nvmlGpuInstanceDestroy(nvmlGpuInstance_t gpuInstance);
nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfo(nvmlGpuInstance_t gpuInstance,
                                                          unsigned int profile,
                                                          unsigned int engProfile,
                                                          nvmlComputeInstanceProfileInfo_t *info);
nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfoV(
    nvmlGpuInstance_t gpuInstance, unsigned int profile, unsigned int engProfile,
    nvmlComputeInstanceProfileInfo_v2_t *info);
nvmlReturn_t nvmlGpuInstanceGetComputeInstanceRemainingCapacity(nvmlGpuInstance_t gpuInstance,
                                                                unsigned int profileId,
                                                                unsigned int *count);
nvmlReturn_t nvmlGpuInstanceCreateComputeInstance(nvmlGpuInstance_t gpuInstance,
                                                  unsigned int profileId,
                                                  nvmlComputeInstance_t *computeInstance);
nvmlReturn_t nvmlGpuInstanceGetComputeInstances(nvmlGpuInstance_t gpuInstance,
                                                unsigned int profileId,
                                                nvmlComputeInstance_t *computeInstances,
                                                unsigned int *count);
nvmlReturn_t nvmlGpuInstanceGetComputeInstanceById(nvmlGpuInstance_t gpuInstance, unsigned int id,
                                                   nvmlComputeInstance_t *computeInstance);
nvmlReturn_t nvmlComputeInstanceDestroy(nvmlComputeInstance_t computeInstance);
nvmlReturn_t nvmlComputeInstanceGetInfo_v2(nvmlComputeInstance_t computeInstance,
                                           nvmlComputeInstanceInfo_t *info);
nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int *count);
nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index,
                                                 nvmlDevice_t *migDevice);
nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int *isMigDevice);
nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t migDevice,
                                                          nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int *id);
nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int *id);

nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t device1, nvmlDevice_t device2,
                                                 nvmlGpuTopologyLevel_t *pathInfo);
nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t device1, nvmlDevice_t device2,
                                    nvmlGpuP2PCapsIndex_t p2pIndex, nvmlGpuP2PStatus_t *p2pStatus);
nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link,
                                      nvmlEnableState_t *isActive);
nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link,
                                                 nvmlPciInfo_t *pci);

nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set);
nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set);
nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long eventTypes,
                                      nvmlEventSet_t set);
nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device, unsigned long long *eventTypes);
nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms);

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount,
                                                     nvmlProcessInfo_t *infos);

nvmlReturn_t nvmlGpmQueryDeviceSupport(nvmlDevice_t device, nvmlGpmSupport_t *gpmSupport);
nvmlReturn_t nvmlGpmSampleAlloc(nvmlGpmSample_t *gpmSample);
nvmlReturn_t nvmlGpmSampleFree(nvmlGpmSample_t gpmSample);
nvmlReturn_t nvmlGpmSampleGet(nvmlDevice_t device, nvmlGpmSample_t gpmSample);
nvmlReturn_t nvmlGpmMigSampleGet(nvmlDevice_t device, unsigned int gpuInstanceId,
                                 nvmlGpmSample_t gpmSample);
nvmlReturn_t nvmlGpmMetricsGet(nvmlGpmMetricsGet_t *metricsGet);

/*
 * Every function above, for the loader: X(name). A symbol absent from the loaded library is
 * NULL in the loader's table and its feature reads as NVML_ERROR_FUNCTION_NOT_FOUND.
 */
#define NVML_FUNCS(X)                                     \
    X(nvmlInit_v2)                                        \
    X(nvmlInitWithFlags)                                  \
    X(nvmlShutdown)                                       \
    X(nvmlErrorString)                                    \
    X(nvmlSystemGetDriverVersion)                         \
    X(nvmlSystemGetNVMLVersion)                           \
    X(nvmlSystemGetCudaDriverVersion)                     \
    X(nvmlSystemGetCudaDriverVersion_v2)                  \
    X(nvmlDeviceGetCount_v2)                              \
    X(nvmlDeviceGetHandleByIndex_v2)                      \
    X(nvmlDeviceGetHandleByUUID)                          \
    X(nvmlDeviceGetHandleByPciBusId_v2)                   \
    X(nvmlDeviceGetName)                                  \
    X(nvmlDeviceGetUUID)                                  \
    X(nvmlDeviceGetSerial)                                \
    X(nvmlDeviceGetBoardPartNumber)                       \
    X(nvmlDeviceGetVbiosVersion)                          \
    X(nvmlDeviceGetIndex)                                 \
    X(nvmlDeviceGetMinorNumber)                           \
    X(nvmlDeviceGetPciInfo_v3)                            \
    X(nvmlDeviceGetMemoryInfo)                            \
    X(nvmlDeviceGetMemoryInfo_v2)                         \
    X(nvmlDeviceGetBAR1MemoryInfo)                        \
    X(nvmlDeviceGetCudaComputeCapability)                 \
    X(nvmlDeviceGetArchitecture)                          \
    X(nvmlDeviceGetBrand)                                 \
    X(nvmlDeviceGetNumGpuCores)                           \
    X(nvmlDeviceGetAttributes_v2)                         \
    X(nvmlDeviceGetPersistenceMode)                       \
    X(nvmlDeviceGetC2cModeInfoV)                          \
    X(nvmlDeviceGetAddressingMode)                        \
    X(nvmlDeviceGetComputeMode)                           \
    X(nvmlDeviceGetPerformanceState)                      \
    X(nvmlDeviceGetTemperature)                           \
    X(nvmlDeviceGetPowerUsage)                            \
    X(nvmlDeviceGetEnforcedPowerLimit)                    \
    X(nvmlDeviceGetPowerManagementLimit)                  \
    X(nvmlDeviceGetPowerManagementDefaultLimit)           \
    X(nvmlDeviceGetPowerManagementLimitConstraints)       \
    X(nvmlDeviceGetTotalEnergyConsumption)                \
    X(nvmlDeviceGetUtilizationRates)                      \
    X(nvmlDeviceGetEncoderUtilization)                    \
    X(nvmlDeviceGetDecoderUtilization)                    \
    X(nvmlDeviceGetClockInfo)                             \
    X(nvmlDeviceGetMaxClockInfo)                          \
    X(nvmlDeviceGetCurrentClocksEventReasons)             \
    X(nvmlDeviceGetCurrentClocksThrottleReasons)          \
    X(nvmlDeviceGetViolationStatus)                       \
    X(nvmlDeviceGetPcieReplayCounter)                     \
    X(nvmlDeviceGetPcieThroughput)                        \
    X(nvmlDeviceGetCurrPcieLinkGeneration)                \
    X(nvmlDeviceGetCurrPcieLinkWidth)                     \
    X(nvmlDeviceGetEccMode)                               \
    X(nvmlDeviceGetTotalEccErrors)                        \
    X(nvmlDeviceGetMemoryErrorCounter)                    \
    X(nvmlDeviceGetRetiredPages)                          \
    X(nvmlDeviceGetRetiredPages_v2)                       \
    X(nvmlDeviceGetRetiredPagesPendingStatus)             \
    X(nvmlDeviceGetRemappedRows)                          \
    X(nvmlDeviceGetFieldValues)                           \
    X(nvmlDeviceGetMigMode)                               \
    X(nvmlDeviceSetMigMode)                               \
    X(nvmlDeviceGetGpuInstanceProfileInfo)                \
    X(nvmlDeviceGetGpuInstanceProfileInfoV)               \
    X(nvmlDeviceGetGpuInstancePossiblePlacements_v2)      \
    X(nvmlDeviceGetGpuInstanceRemainingCapacity)          \
    X(nvmlDeviceCreateGpuInstance)                        \
    X(nvmlDeviceCreateGpuInstanceWithPlacement)           \
    X(nvmlDeviceGetGpuInstances)                          \
    X(nvmlDeviceGetGpuInstanceById)                       \
    X(nvmlGpuInstanceGetInfo)                             \
    X(nvmlGpuInstanceDestroy)                             \
    X(nvmlGpuInstanceGetComputeInstanceProfileInfo)       \
    X(nvmlGpuInstanceGetComputeInstanceProfileInfoV)      \
    X(nvmlGpuInstanceGetComputeInstanceRemainingCapacity) \
    X(nvmlGpuInstanceCreateComputeInstance)               \
    X(nvmlGpuInstanceGetComputeInstances)                 \
    X(nvmlGpuInstanceGetComputeInstanceById)              \
    X(nvmlComputeInstanceDestroy)                         \
    X(nvmlComputeInstanceGetInfo_v2)                      \
    X(nvmlDeviceGetMaxMigDeviceCount)                     \
    X(nvmlDeviceGetMigDeviceHandleByIndex)                \
    X(nvmlDeviceIsMigDeviceHandle)                        \
    X(nvmlDeviceGetDeviceHandleFromMigDeviceHandle)       \
    X(nvmlDeviceGetGpuInstanceId)                         \
    X(nvmlDeviceGetComputeInstanceId)                     \
    X(nvmlDeviceGetTopologyCommonAncestor)                \
    X(nvmlDeviceGetP2PStatus)                             \
    X(nvmlDeviceGetNvLinkState)                           \
    X(nvmlDeviceGetNvLinkRemotePciInfo_v2)                \
    X(nvmlEventSetCreate)                                 \
    X(nvmlEventSetFree)                                   \
    X(nvmlDeviceRegisterEvents)                           \
    X(nvmlDeviceGetSupportedEventTypes)                   \
    X(nvmlEventSetWait_v2)                                \
    X(nvmlDeviceGetComputeRunningProcesses_v3)            \
    X(nvmlGpmQueryDeviceSupport)                          \
    X(nvmlGpmSampleAlloc)                                 \
    X(nvmlGpmSampleFree)                                  \
    X(nvmlGpmSampleGet)                                   \
    X(nvmlGpmMigSampleGet)                                \
    X(nvmlGpmMetricsGet)

#ifdef __cplusplus
}
#endif

#endif
