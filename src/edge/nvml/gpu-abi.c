/* SPDX-License-Identifier: Apache-2.0 */
/* gpu.h's topology levels, event kinds and clock-event reasons from NVML's. Each value is
 * converted by name, so gpu.h's numbers stay gpu.h's even where they equal NVML's today. */
#include "nvml-internal.h"

unsigned nv_topo_level(nvmlGpuTopologyLevel_t l)
{
    switch (l) {
    case NVML_TOPOLOGY_INTERNAL:
        return GPU_TOPO_INTERNAL;
    case NVML_TOPOLOGY_SINGLE:
        return GPU_TOPO_SINGLE;
    case NVML_TOPOLOGY_MULTIPLE:
        return GPU_TOPO_MULTIPLE;
    case NVML_TOPOLOGY_HOSTBRIDGE:
        return GPU_TOPO_HOSTBRIDGE;
    case NVML_TOPOLOGY_NODE:
        return GPU_TOPO_NODE;
    case NVML_TOPOLOGY_SYSTEM:
    default:
        return GPU_TOPO_SYSTEM;
    }
}

static const struct {
    uint64_t gpu;
    unsigned long long nvml;
} event_kinds[] = {
    {GPU_EVENT_ECC_SBE, nvmlEventTypeSingleBitEccError},
    {GPU_EVENT_ECC_DBE, nvmlEventTypeDoubleBitEccError},
    {GPU_EVENT_XID, nvmlEventTypeXidCriticalError},
};

unsigned long long nv_event_mask(uint64_t gpu_mask)
{
    unsigned long long m = 0;
    for (size_t i = 0; i < ARRAY_SIZE(event_kinds); i++)
        if (gpu_mask & event_kinds[i].gpu)
            m |= event_kinds[i].nvml;
    return m;
}

uint64_t nv_event_kind(unsigned long long nvml_type)
{
    for (size_t i = 0; i < ARRAY_SIZE(event_kinds); i++)
        if (nvml_type == event_kinds[i].nvml)
            return event_kinds[i].gpu;
    return 0;
}

uint64_t nv_clock_events(unsigned long long nvml_reasons)
{
    static const struct {
        uint64_t gpu;
        unsigned long long nvml;
    } reasons[] = {
        {GPU_CLOCK_EVENT_GPU_IDLE, nvmlClocksEventReasonGpuIdle},
        {GPU_CLOCK_EVENT_APP_CLOCKS, nvmlClocksEventReasonApplicationsClocksSetting},
        {GPU_CLOCK_EVENT_SW_POWER_CAP, nvmlClocksEventReasonSwPowerCap},
        {GPU_CLOCK_EVENT_HW_SLOWDOWN, nvmlClocksThrottleReasonHwSlowdown},
        {GPU_CLOCK_EVENT_SYNC_BOOST, nvmlClocksEventReasonSyncBoost},
        {GPU_CLOCK_EVENT_SW_THERMAL, nvmlClocksEventReasonSwThermalSlowdown},
        {GPU_CLOCK_EVENT_HW_THERMAL, nvmlClocksThrottleReasonHwThermalSlowdown},
        {GPU_CLOCK_EVENT_HW_POWER_BRAKE, nvmlClocksThrottleReasonHwPowerBrakeSlowdown},
        {GPU_CLOCK_EVENT_DISPLAY_CLOCK, nvmlClocksEventReasonDisplayClockSetting},
    };
    uint64_t out = 0;
    for (size_t i = 0; i < ARRAY_SIZE(reasons); i++)
        if (nvml_reasons & reasons[i].nvml)
            out |= reasons[i].gpu;
    return out;
}
