/* SPDX-License-Identifier: Apache-2.0 */
/* MIG profile names as real drivers word them ("MIG 1g.10gb"), the computed fallback, and bus
 * id parsing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "nvml-internal.h"

static void name_of(const char *nvml_name, unsigned slices, unsigned long long mem_mb,
                    const char *want)
{
    nvmlGpuInstanceProfileInfo_v2_t info = {
        .version = nvmlGpuInstanceProfileInfo_v2, .sliceCount = slices, .memorySizeMB = mem_mb};
    snprintf(info.name, sizeof(info.name), "%s", nvml_name);
    char buf[GPU_PROFILE_MAX];
    nv_profile_name(&info, buf, sizeof(buf));
    assert_string_equal(buf, want);
}

static void profile_names(void **state)
{
    (void)state;
    name_of("MIG 1g.10gb", 1, 9856, "1g.10gb");       /* real driver wording */
    name_of("MIG 1g.10gb+me", 1, 9856, "1g.10gb+me"); /* the variant survives */
    name_of("MIG 1g.24gb+gfx", 1, 24064, "1g.24gb+gfx");
    name_of("1g.18gb", 1, 16384, "1g.18gb"); /* no prefix: taken as is */
    name_of("MIG 7g.80gb", 7, 80896, "7g.80gb");
    /* No name from the driver (v1 struct): <slices>g.<ceil(MiB/1024)>gb. */
    name_of("", 1, 4864, "1g.5gb");
    name_of("", 3, 40192, "3g.40gb");
    name_of("", 2, 2048, "2g.2gb");
}

static void name_not_terminated(void **state)
{
    (void)state;
    nvmlGpuInstanceProfileInfo_v2_t info = {.sliceCount = 1, .memorySizeMB = 1024};
    memset(info.name, 'x', sizeof(info.name)); /* a driver that fills the buffer */
    char buf[GPU_PROFILE_MAX];
    nv_profile_name(&info, buf, sizeof(buf));
    assert_int_equal(strlen(buf), GPU_PROFILE_MAX - 1);
}

static void bus_ids(void **state)
{
    (void)state;
    unsigned d, b, v, f;
    assert_int_equal(gpu_bus_id_parse("00000000:18:00.0", &d, &b, &v, &f), 0);
    assert_int_equal(d, 0);
    assert_int_equal(b, 0x18);
    assert_int_equal(gpu_bus_id_parse("00010000:C1:1F.7", &d, &b, &v, &f), 0);
    assert_int_equal(d, 0x10000);
    assert_int_equal(b, 0xc1);
    assert_int_equal(v, 0x1f);
    assert_int_equal(f, 7);
    assert_int_equal(gpu_bus_id_parse("0000:18:00.0", &d, &b, &v, &f), 0);
    assert_int_equal(gpu_bus_id_parse(NULL, &d, &b, &v, &f), -EINVAL);
    assert_int_equal(gpu_bus_id_parse("", &d, &b, &v, &f), -EINVAL);
    assert_int_equal(gpu_bus_id_parse("000000000:18:00.0", &d, &b, &v, &f), -EINVAL);
    assert_int_equal(gpu_bus_id_parse("0000:18:00.0x", &d, &b, &v, &f), -EINVAL);
    assert_int_equal(gpu_bus_id_parse("0000::00.0", &d, &b, &v, &f), -EINVAL);
    assert_int_equal(gpu_bus_id_parse("0000:18:20.0", &d, &b, &v, &f), -EINVAL); /* device > 0x1f */
}

/* gpu.h's vocabulary is converted from NVML's by name, every value. */
static void vocabulary(void **state)
{
    (void)state;
    assert_int_equal(nv_topo_level(NVML_TOPOLOGY_INTERNAL), GPU_TOPO_INTERNAL);
    assert_int_equal(nv_topo_level(NVML_TOPOLOGY_SINGLE), GPU_TOPO_SINGLE);
    assert_int_equal(nv_topo_level(NVML_TOPOLOGY_MULTIPLE), GPU_TOPO_MULTIPLE);
    assert_int_equal(nv_topo_level(NVML_TOPOLOGY_HOSTBRIDGE), GPU_TOPO_HOSTBRIDGE);
    assert_int_equal(nv_topo_level(NVML_TOPOLOGY_NODE), GPU_TOPO_NODE);
    assert_int_equal(nv_topo_level(NVML_TOPOLOGY_SYSTEM), GPU_TOPO_SYSTEM);
    assert_int_equal(nv_topo_level((nvmlGpuTopologyLevel_t)35), GPU_TOPO_SYSTEM); /* unknown */

    assert_int_equal(nv_event_mask(GPU_EVENT_XID | GPU_EVENT_ECC_DBE),
                     nvmlEventTypeXidCriticalError | nvmlEventTypeDoubleBitEccError);
    assert_int_equal(nv_event_mask(GPU_EVENT_ECC_SBE), nvmlEventTypeSingleBitEccError);
    assert_int_equal(nv_event_mask(1ULL << 40), 0);
    assert_int_equal(nv_event_kind(nvmlEventTypeXidCriticalError), GPU_EVENT_XID);
    assert_int_equal(nv_event_kind(nvmlEventTypeDoubleBitEccError), GPU_EVENT_ECC_DBE);
    assert_int_equal(nv_event_kind(nvmlEventTypeSingleBitEccError), GPU_EVENT_ECC_SBE);
    assert_int_equal(nv_event_kind(nvmlEventTypePState), 0);

    assert_int_equal(nv_clock_events(nvmlClocksEventReasonGpuIdle), GPU_CLOCK_EVENT_GPU_IDLE);
    assert_int_equal(nv_clock_events(nvmlClocksThrottleReasonHwPowerBrakeSlowdown |
                                     nvmlClocksEventReasonSwThermalSlowdown),
                     GPU_CLOCK_EVENT_HW_POWER_BRAKE | GPU_CLOCK_EVENT_SW_THERMAL);
    assert_int_equal(nv_clock_events(nvmlClocksEventReasonDisplayClockSetting),
                     GPU_CLOCK_EVENT_DISPLAY_CLOCK);
    assert_int_equal(nv_clock_events(~0ULL), GPU_CLOCK_EVENTS_ALL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(profile_names),
        cmocka_unit_test(name_not_terminated),
        cmocka_unit_test(bus_ids),
        cmocka_unit_test(vocabulary),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
