/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Telemetry of the simulated GPUs: a pure function of (fleet seed, GPU, time). Each GPU runs a
 * load made of two slow sine waves with periods, phases and a load factor drawn from the seed;
 * power, temperature, clocks, memory and throughput follow the load between the fleet's idle
 * figures and its limits. The energy counter is the closed-form integral of the power since
 * 2026-01-01T00:00:00Z, so it grows with power x time and agrees between processes.
 */
#include <math.h>

#include "nvml-abi.h"
#include "simnvml.h"

#define SIM_EPOCH_S 1767225600.0 /* 2026-01-01T00:00:00Z */
#define TWO_PI      6.283185307179586

static uint64_t splitmix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

uint64_t sim_hash64(uint64_t a, uint64_t b)
{
    return splitmix(a ^ splitmix(b + 0x632be59bd9b4e019ULL));
}

/* A non-negative double as a counter: saturates at 2^64 - 1 (the cast past that is undefined;
 * a GPUOP_SIM_CLOCK far in the future gets there). */
static uint64_t counter(double v)
{
    if (!(v > 0))
        return 0;
    return v >= 18446744073709551616.0 ? UINT64_MAX : (uint64_t)v;
}

static double unit(uint64_t h)
{
    return (double)(h >> 11) * (1.0 / 9007199254740992.0);
}

uint64_t sim_now_ms(void)
{
    const char *c = env_get("GPUOP_SIM_CLOCK");
    uint64_t s;
    if (c && parse_u64(c, &s) == 0 && s < UINT64_MAX / 1000)
        return s * 1000;
    return now_ms_real();
}

struct wave {
    double load;   /* 0.25 .. 0.95 */
    double w1, w2; /* rad/s */
    double p1, p2; /* phases */
};

static struct wave wave_for(const struct sim_fleet *f, unsigned gpu)
{
    uint64_t h = sim_hash64(f->seed, gpu + 1);
    struct wave w;
    w.load = 0.25 + 0.7 * unit(sim_hash64(h, 1));
    w.w1 = TWO_PI / (240.0 + 360.0 * unit(sim_hash64(h, 2)));
    w.w2 = TWO_PI / (37.0 + 53.0 * unit(sim_hash64(h, 3)));
    w.p1 = TWO_PI * unit(sim_hash64(h, 4));
    w.p2 = TWO_PI * unit(sim_hash64(h, 5));
    return w;
}

/* s(t) in [0, 1] and its integral from 0 to t. */
static double wave_at(const struct wave *w, double t)
{
    return 0.5 + 0.3 * sin(w->w1 * t + w->p1) + 0.2 * sin(w->w2 * t + w->p2);
}

static double wave_integral(const struct wave *w, double t)
{
    return 0.5 * t - 0.3 / w->w1 * (cos(w->w1 * t + w->p1) - cos(w->p1)) -
           0.2 / w->w2 * (cos(w->w2 * t + w->p2) - cos(w->p2));
}

void sim_telemetry(const struct sim_fleet *f, unsigned gpu, uint64_t unix_ms,
                   struct sim_sample *ret)
{
    struct sim_sample r = {0};
    if (gpu >= f->n_gpus) {
        *ret = r;
        return;
    }
    const struct sim_gpu_spec *g = &f->gpus[gpu];
    struct wave w = wave_for(f, gpu);
    double t = (double)unix_ms / 1000.0 - SIM_EPOCH_S;
    if (t < 0)
        t = 0;
    double s = wave_at(&w, t);
    if (s < 0)
        s = 0;
    if (s > 1)
        s = 1;
    double load = w.load * s;
    double idle = g->idle_power_w, peak = 0.85 * g->power_limit_w;
    if (peak < idle)
        peak = idle;

    r.util_gpu = (unsigned)lround(100.0 * load);
    r.util_mem = (unsigned)lround(60.0 * load);
    r.util_enc = 0;
    r.util_dec = r.util_gpu / 8;
    double power = idle + (peak - idle) * load;
    r.power_mw = (unsigned)lround(power * 1000.0);
    double joules = idle * t + (peak - idle) * w.load * wave_integral(&w, t);
    r.energy_mj = counter(joules * 1000.0);
    double frac = g->power_limit_w > g->idle_power_w
                      ? (power - idle) / (double)(g->power_limit_w - g->idle_power_w)
                      : 0;
    r.temp_c = g->idle_temp_c + (unsigned)lround(45.0 * frac);
    r.mem_temp_c = r.temp_c + 6;

    unsigned idle_clk = g->max_sm_clock_mhz * 345 / 1980;
    if (r.util_gpu < 3) {
        r.sm_clock_mhz = idle_clk;
        r.clock_event_reasons = nvmlClocksEventReasonGpuIdle;
    } else {
        double c = idle_clk + (g->max_sm_clock_mhz - idle_clk) * fmin(1.0, load * 1.6);
        r.sm_clock_mhz = (unsigned)(c / 15.0) * 15;
        if (r.sm_clock_mhz > g->max_sm_clock_mhz)
            r.sm_clock_mhz = g->max_sm_clock_mhz;
        r.clock_event_reasons =
            power > 0.84 * g->power_limit_w ? nvmlClocksEventReasonSwPowerCap : 0;
    }
    r.video_clock_mhz = r.sm_clock_mhz * 1545 / 1980;
    r.mem_clock_mhz = g->max_mem_clock_mhz;
    r.mem_used_mib = (uint64_t)((double)(g->memory_mib - g->reserved_mib) * 0.7 * load);
    r.pcie_tx_kbps = (unsigned)(load * 1.5e6);
    r.pcie_rx_kbps = (unsigned)(load * 2.5e6);
    double kib = 25e6 * w.load * wave_integral(&w, t);
    r.nvlink_kib = counter(kib);
    *ret = r;
}
