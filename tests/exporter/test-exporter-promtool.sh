#!/bin/bash
# `promtool check metrics` (Debian's prometheus package) on the exporter's output for every
# sample fleet, MIG included, with the default counters and with every supported field.
# The output must parse; lint findings are allowed only where they come from dcgm-exporter's
# own naming, which gpuop keeps on purpose so dashboards keep working:
#   - "<DCGM counter> counter metrics should have "_total" suffix": dcgm-exporter's counter
#     names (DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION, DCGM_FI_DEV_PCIE_REPLAY_COUNTER, ...);
#   - "DCGM_FI_DEV_PCIE_REPLAY_COUNTER metric name should not include type 'counter'":
#     dcgm-exporter's name for the PCIe replay counter;
#   - "<metric> label names should be written in 'snake_case' not 'camelCase'": dcgm-exporter's
#     `modelName` label, which every GPU series (and gpuop_exporter_gpu_*) carries.
# Anything else fails the test.
# $1: build/gpuop  $2: simulated libnvidia-ml.so.1  $3: sim/fleets
set -u
gpuop=$1
. "$(dirname "$0")/lib.sh"
[ -x /usr/bin/promtool ] || skip "promtool not installed (Debian package prometheus)"
[ -f "$2" ] || skip "simulated libnvidia-ml not built: $2"
export GPUOP_NVML_LIBRARY=$2
fleets=$(ls "$3"/*.yaml 2>/dev/null)
[ -n "$fleets" ] || fail "no fleets in $3"

# Every field gpuop can export, with the types dcgm-exporter's CSVs give them.
cat >"$T/all.csv" <<'CSV'
DCGM_FI_DEV_SM_CLOCK, gauge, SM clock frequency (in MHz).
DCGM_FI_DEV_MEM_CLOCK, gauge, Memory clock frequency (in MHz).
DCGM_FI_DEV_MAX_SM_CLOCK, gauge, Maximum SM clock (in MHz).
DCGM_FI_DEV_MAX_MEM_CLOCK, gauge, Maximum memory clock (in MHz).
DCGM_FI_DEV_MEMORY_TEMP, gauge, Memory temperature (in C).
DCGM_FI_DEV_GPU_TEMP, gauge, GPU temperature (in C).
DCGM_FI_DEV_POWER_USAGE, gauge, Power draw (in W).
DCGM_FI_DEV_POWER_MGMT_LIMIT, gauge, Power management limit (in W).
DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION, counter, Total energy consumption since boot (in mJ).
DCGM_FI_DEV_PCIE_REPLAY_COUNTER, counter, Total number of PCIe retries.
DCGM_FI_DEV_GPU_UTIL, gauge, GPU utilization (in %).
DCGM_FI_DEV_MEM_COPY_UTIL, gauge, Memory utilization (in %).
DCGM_FI_DEV_ENC_UTIL, gauge, Encoder utilization (in %).
DCGM_FI_DEV_DEC_UTIL, gauge, Decoder utilization (in %).
DCGM_FI_DEV_XID_ERRORS, gauge, Value of the last XID error encountered.
DCGM_FI_DEV_FB_TOTAL, gauge, Framebuffer memory total (in MiB).
DCGM_FI_DEV_FB_FREE, gauge, Framebuffer memory free (in MiB).
DCGM_FI_DEV_FB_USED, gauge, Framebuffer memory used (in MiB).
DCGM_FI_DEV_FB_RESERVED, gauge, Framebuffer memory reserved (in MiB).
DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS, counter, Number of remapped rows for uncorrectable errors
DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS, counter, Number of remapped rows for correctable errors
DCGM_FI_DEV_ROW_REMAP_FAILURE, gauge, Whether remapping of rows has failed
DCGM_FI_DEV_ROW_REMAP_PENDING, gauge, Whether remapping of rows is pending
DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL, counter, Total number of NVLink bandwidth counters for all lanes.
DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL, counter, Total number of NVLink flow-control CRC errors.
DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL, counter, Total number of NVLink data CRC errors.
DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL, counter, Total number of NVLink retries.
DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL, counter, Total number of NVLink recovery errors.
DCGM_FI_DEV_ECC_SBE_VOL_TOTAL, counter, Total number of single-bit volatile ECC errors.
DCGM_FI_DEV_ECC_DBE_VOL_TOTAL, counter, Total number of double-bit volatile ECC errors.
DCGM_FI_DEV_ECC_SBE_AGG_TOTAL, counter, Total number of single-bit persistent ECC errors.
DCGM_FI_DEV_ECC_DBE_AGG_TOTAL, counter, Total number of double-bit persistent ECC errors.
DCGM_FI_DEV_RETIRED_SBE, counter, Total number of retired pages due to single-bit errors.
DCGM_FI_DEV_RETIRED_DBE, counter, Total number of retired pages due to double-bit errors.
DCGM_FI_DEV_RETIRED_PENDING, counter, Total number of pages pending retirement.
DCGM_FI_DEV_POWER_VIOLATION, counter, Throttling duration due to power constraints (in ns).
DCGM_FI_DEV_THERMAL_VIOLATION, counter, Throttling duration due to thermal constraints (in ns).
DCGM_FI_DEV_SYNC_BOOST_VIOLATION, counter, Throttling duration due to sync-boost constraints (in ns).
DCGM_FI_DEV_BOARD_LIMIT_VIOLATION, counter, Throttling duration due to board limit constraints (in ns).
DCGM_FI_DEV_LOW_UTIL_VIOLATION, counter, Throttling duration due to low utilization (in ns).
DCGM_FI_DEV_RELIABILITY_VIOLATION, counter, Throttling duration due to reliability constraints (in ns).
DCGM_FI_DEV_CLOCKS_EVENT_REASONS, gauge, Current clock event reasons (bit mask).
DCGM_EXP_CLOCK_EVENTS_COUNT, counter, reported clock events
DCGM_FI_PROF_GR_ENGINE_ACTIVE, gauge, Ratio of time the graphics engine is active.
DCGM_FI_PROF_SM_ACTIVE, gauge, The ratio of cycles an SM has at least 1 warp assigned.
DCGM_FI_PROF_SM_OCCUPANCY, gauge, The ratio of number of warps resident on an SM.
DCGM_FI_PROF_PIPE_TENSOR_ACTIVE, gauge, Ratio of cycles the tensor (HMMA) pipe is active.
DCGM_FI_PROF_DRAM_ACTIVE, gauge, Ratio of cycles the device memory interface is active sending or receiving data.
DCGM_FI_PROF_PIPE_FP64_ACTIVE, gauge, Ratio of cycles the fp64 pipes are active.
DCGM_FI_PROF_PIPE_FP32_ACTIVE, gauge, Ratio of cycles the fp32 pipes are active.
DCGM_FI_PROF_PIPE_FP16_ACTIVE, gauge, Ratio of cycles the fp16 pipes are active.
DCGM_FI_PROF_PCIE_TX_BYTES, gauge, The rate of data transmitted over the PCIe bus - including both protocol headers and data payloads - in bytes per second.
DCGM_FI_PROF_PCIE_RX_BYTES, gauge, The rate of data received over the PCIe bus - including both protocol headers and data payloads - in bytes per second.
DCGM_FI_PROF_NVLINK_TX_BYTES, gauge, The rate of data transmitted over NVLink, in bytes per second.
DCGM_FI_PROF_NVLINK_RX_BYTES, gauge, The rate of data received over NVLink, in bytes per second.
DCGM_FI_DRIVER_VERSION, label, Driver Version
DCGM_FI_DEV_SERIAL, label, Device Serial Number
CSV

allowed='^(DCGM_[A-Z0-9_]+ counter metrics should have "_total" suffix|DCGM_FI_DEV_PCIE_REPLAY_COUNTER metric name should not include type .counter.|[A-Za-z0-9_]+ label names should be written in .snake_case. not .camelCase.)$'
checked=0
mig_seen=0
for fleet in $fleets; do
    for set in default all; do
        args=()
        [ $set = all ] && args=(-f "$T/all.csv")
        out="$T/$(basename "$fleet" .yaml)-$set.prom"
        for k in "" -k; do
            GPUOP_SIM_FLEET=$fleet NODE_NAME=node-1 "$gpuop" exporter --once $k \
                --pod-resources-socket "$T/none.sock" "${args[@]}" >"$out" 2>"$T/err" ||
                fail "$fleet ($set $k): exit $?: $(tail -3 "$T/err")"
            grep -q '^DCGM_FI_DEV_GPU_TEMP{' "$out" || fail "$fleet ($set): no GPU_TEMP series"
            promtool check metrics <"$out" >"$T/lint" 2>&1
            rc=$?
            # 0: clean; 3: lint findings only; anything else: the text did not parse.
            [ $rc = 0 ] || [ $rc = 3 ] || fail "$fleet ($set $k): promtool exit $rc: $(head -5 "$T/lint")"
            if grep -Ev "$allowed" "$T/lint" | grep -q .; then
                fail "$fleet ($set $k): unexpected promtool findings: $(grep -Ev "$allowed" "$T/lint" | sort -u | head -5)"
            fi
            grep -q 'GPU_I_PROFILE=' "$out" && mig_seen=1
            # The profiling fields on the fleets with GPM (Hopper and Blackwell), none elsewhere.
            if [ $set = all ]; then
                case $(basename "$fleet") in
                dgx-h100.yaml | hgx-h200.yaml | dgx-b200.yaml | gh200.yaml | gb200.yaml) grep -q '^DCGM_FI_PROF_SM_ACTIVE{' "$out" ||
                    fail "$fleet: no DCGM_FI_PROF_SM_ACTIVE" ;;
                *) ! grep -q '^DCGM_FI_PROF_' "$out" || fail "$fleet: profiling fields without GPM" ;;
                esac
            fi
            checked=$((checked + 1))
        done
    done
    echo "ok $(basename "$fleet"): $(grep -c '^DCGM_' "$out") DCGM samples"
done
[ $mig_seen = 1 ] || fail "no fleet produced MIG series (GPU_I_PROFILE); MIG not covered"
echo "PASS ($checked outputs)"
