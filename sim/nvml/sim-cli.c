/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpuop-sim`: drives the simulated GPU fleet shared by every process that loads
 * build/libnvidia-ml.so.1 with the same GPUOP_SIM_FLEET and GPUOP_SIM_STATE.
 */
#include <inttypes.h>
#include <string.h>

#include "nvml-abi.h"
#include "simnvml.h"
#include "svc.h"

#define FAULTS                                                                  \
    "xid, lost, ecc, nvlink, thermal, power, cool, remap-failure, mig-fail or " \
    "mig-reset-required"

struct inject {
    enum {
        INJ_XID,
        INJ_LOST,
        INJ_ECC,
        INJ_MIG_FAIL,
        INJ_MIG_RESET,
        INJ_NVLINK,
        INJ_THERMAL,
        INJ_POWER,
        INJ_COOL,
        INJ_REMAP_FAILURE,
        GPU_RESET,
    } kind;
    unsigned gpu, code, gi, ci, dbe, sbe, after;
    const struct sim_fleet *fleet;
};

static int inject_apply(struct sim_update *u, struct sim_state *st, void *arg, struct err *e)
{
    struct inject *in = arg;
    struct sim_gpu_state *g = &st->gpus[in->gpu];
    switch (in->kind) {
    case INJ_XID:
        if (in->gi != SIM_NO_ID && (!g->mig_mode || !sim_gpu_find_gi(g, in->gi)))
            return err_set(e, -ENOENT, "--gi %u: GPU %u has no GPU instance %u", in->gi, in->gpu,
                           in->gi);
        if (in->ci != SIM_NO_ID) {
            const struct sim_gi *gi = sim_gpu_find_gi(g, in->gi);
            bool found = false;
            for (unsigned i = 0; i < gi->n_ci; i++)
                found |= gi->ci[i].id == in->ci;
            if (!found)
                return err_set(e, -ENOENT,
                               "--ci %u: GPU instance %u of GPU %u has no compute "
                               "instance %u",
                               in->ci, in->gi, in->gpu, in->ci);
        }
        g->last_xid = in->code;
        sim_update_event(u, in->gpu, nvmlEventTypeXidCriticalError, in->code, in->gi, in->ci);
        return 0;
    case INJ_LOST:
        if (!g->lost) {
            g->lost = true;
            g->last_xid = 79;
            sim_update_event(u, in->gpu, nvmlEventTypeXidCriticalError, 79, SIM_NO_ID, SIM_NO_ID);
        }
        return 0;
    case INJ_ECC: {
        const struct sim_gpu_spec *spec = &in->fleet->gpus[in->gpu];
        if (!spec->ecc)
            return err_set(e, -EOPNOTSUPP, "--gpu %u: ECC is off on this GPU (ecc: false)",
                           in->gpu);
        g->ecc_sbe_vol += in->sbe;
        g->ecc_sbe_agg += in->sbe;
        g->ecc_dbe_vol += in->dbe;
        g->ecc_dbe_agg += in->dbe;
        if (in->dbe) {
            if (spec->arch >= NVML_DEVICE_ARCH_AMPERE) {
                g->remapped_unc += in->dbe;
                g->remap_pending = true;
            } else {
                g->retired_dbe += in->dbe;
                g->retired_pending = true;
            }
            sim_update_event(u, in->gpu, nvmlEventTypeDoubleBitEccError, 0, SIM_NO_ID, SIM_NO_ID);
        }
        if (in->sbe)
            sim_update_event(u, in->gpu, nvmlEventTypeSingleBitEccError, 0, SIM_NO_ID, SIM_NO_ID);
        return 0;
    }
    case INJ_MIG_FAIL:
        if (!in->fleet->gpus[in->gpu].mig_capable)
            return err_set(e, -EOPNOTSUPP, "--gpu %u: not MIG capable", in->gpu);
        g->mig_fail_in = in->after + 1;
        return 0;
    case INJ_MIG_RESET:
        if (!in->fleet->gpus[in->gpu].mig_capable)
            return err_set(e, -EOPNOTSUPP, "--gpu %u: not MIG capable", in->gpu);
        g->mig_reset_required = true;
        return 0;
    case INJ_NVLINK:
        if (!in->fleet->gpus[in->gpu].n_links)
            return err_set(e, -EOPNOTSUPP, "--gpu %u: has no NVLinks", in->gpu);
        g->nvlink_recovery++;
        g->nvlink_replay++;
        g->last_xid = 74;
        sim_update_event(u, in->gpu, nvmlEventTypeXidCriticalError, 74, SIM_NO_ID, SIM_NO_ID);
        return 0;
    case INJ_THERMAL:
        g->throttle |=
            nvmlClocksThrottleReasonHwSlowdown | nvmlClocksThrottleReasonHwThermalSlowdown;
        return 0;
    case INJ_POWER:
        g->throttle |=
            nvmlClocksThrottleReasonHwSlowdown | nvmlClocksThrottleReasonHwPowerBrakeSlowdown;
        return 0;
    case INJ_COOL:
        g->throttle = 0;
        return 0;
    case INJ_REMAP_FAILURE:
        if (in->fleet->gpus[in->gpu].arch < NVML_DEVICE_ARCH_AMPERE)
            return err_set(e, -EOPNOTSUPP, "--gpu %u: no row remapping before Ampere", in->gpu);
        g->remap_failure = true;
        g->last_xid = 64;
        sim_update_event(u, in->gpu, nvmlEventTypeXidCriticalError, 64, SIM_NO_ID, SIM_NO_ID);
        return 0;
    case GPU_RESET: {
        struct sim_proc procs[SIM_MAX_PROCS];
        if (sim_procs_live(st, in->gpu, procs, ARRAY_SIZE(procs)) > 0)
            return err_set(e, -EBUSY, "--gpu %u: processes run on it (NVML_ERROR_IN_USE)", in->gpu);
        if (sim_gpu_reset(g) != NVML_SUCCESS)
            return err_set(e, -ENODEV,
                           "--gpu %u: the GPU is lost (NVML_ERROR_GPU_IS_LOST): only a reboot "
                           "brings it back",
                           in->gpu);
        return 0;
    }
    }
    return -EINVAL;
}

struct sim_cli {
    unsigned gpu, code, gi, ci, dbe, sbe, after, pid;
    const char *sm, *tensor, *dram;
    bool clear;
    const char *fleet, *state_dir;
};

#define C(member) offsetof(struct sim_cli, member)
static const struct svc_option sim_options[] = {
    {.flag = "gpu",
     .kind = SVC_UINT,
     .max = SIM_MAX_GPUS,
     .off = C(gpu),
     .metavar = "N",
     .help = "GPU index (NVML order)"},
    {.flag = "code",
     .kind = SVC_UINT,
     .max = 65535,
     .off = C(code),
     .metavar = "C",
     .help = "XID number, 1..65535"},
    {.flag = "gi",
     .kind = SVC_UINT,
     .max = SIM_GI_IDS - 1,
     .off = C(gi),
     .metavar = "G",
     .help = "GPU instance id of the XID (MIG GPUs)"},
    {.flag = "ci",
     .kind = SVC_UINT,
     .max = SIM_CI_IDS - 1,
     .off = C(ci),
     .metavar = "C",
     .help = "compute instance id of the XID (MIG GPUs; needs --gi)"},
    {.flag = "dbe",
     .kind = SVC_UINT,
     .max = 1000000,
     .off = C(dbe),
     .metavar = "K",
     .help = "number of double-bit ECC errors"},
    {.flag = "sbe",
     .kind = SVC_UINT,
     .max = 1000000,
     .off = C(sbe),
     .metavar = "K",
     .help = "number of single-bit ECC errors"},
    {.flag = "after",
     .kind = SVC_UINT,
     .max = 1000,
     .off = C(after),
     .metavar = "K",
     .help = "mig-fail: GPU-instance creations that still succeed before the failing one (0)"},
    {.flag = "pid",
     .kind = SVC_UINT,
     .max = INT32_MAX,
     .off = C(pid),
     .metavar = "P",
     .help = "set-load: the process (one holding a simulated GPU)"},
    {.flag = "sm",
     .kind = SVC_STRING,
     .off = C(sm),
     .metavar = "R",
     .help = "set-load: SM activity, a ratio 0..1 (0 when left out)"},
    {.flag = "tensor",
     .kind = SVC_STRING,
     .off = C(tensor),
     .metavar = "R",
     .help = "set-load: tensor-pipe activity, a ratio 0..1 (0 when left out)"},
    {.flag = "dram",
     .kind = SVC_STRING,
     .off = C(dram),
     .metavar = "R",
     .help = "set-load: DRAM bandwidth, a ratio 0..1 (0 when left out)"},
    {.flag = "clear",
     .kind = SVC_FLAG,
     .off = C(clear),
     .help = "set-load: drop the load set before (back to the GPU's, the fleet's or the default)"},
    {.env = "GPUOP_SIM_FLEET",
     .kind = SVC_STRING,
     .off = C(fleet),
     .help = "the fleet file (required; see sim/fleets/README.md)"},
    {.env = "GPUOP_SIM_STATE",
     .kind = SVC_STRING,
     .off = C(state_dir),
     .help = "the state directory shared by the simulator's users (required)"},
    {0},
};
#undef C

static void sim_defaults(void *state)
{
    struct sim_cli *c = state;
    c->gpu = c->code = c->gi = c->ci = c->dbe = c->after = c->pid = SIM_NO_ID;
}

/* set-load's flags, checked before any file is read. */
struct load_cmd {
    unsigned gpu, pid; /* one of them; the other SIM_NO_ID */
    bool clear;
    struct sim_load load;
};

static int load_check(const struct sim_cli *c, struct load_cmd *ret, struct err *e)
{
    if (c->code != SIM_NO_ID || c->gi != SIM_NO_ID || c->ci != SIM_NO_ID || c->dbe != SIM_NO_ID ||
        c->sbe || c->after != SIM_NO_ID)
        return err_set(e, -EINVAL,
                       "set-load: --code, --gi, --ci, --dbe, --sbe and --after belong to inject");
    if ((c->gpu == SIM_NO_ID) == (c->pid == SIM_NO_ID))
        return err_set(e, -EINVAL, "set-load: give one of --gpu N and --pid P");
    bool any = c->sm || c->tensor || c->dram;
    if (c->clear && any)
        return err_set(e, -EINVAL, "set-load: --clear takes no --sm, --tensor or --dram");
    if (!c->clear && !any)
        return err_set(e, -EINVAL,
                       "set-load: give --sm, --tensor or --dram (ratios 0..1), or "
                       "--clear");
    struct load_cmd l = {.gpu = c->gpu, .pid = c->pid, .clear = c->clear};
    const char *const vals[] = {c->sm, c->tensor, c->dram};
    const char *const names[] = {"sm", "tensor", "dram"};
    unsigned *slot[] = {&l.load.sm, &l.load.tensor, &l.load.dram};
    for (size_t i = 0; i < ARRAY_SIZE(vals); i++)
        if (vals[i] && sim_ratio_parse(vals[i], slot[i]) < 0)
            return err_set(e, -EINVAL,
                           "set-load: --%s \"%s\": not a ratio from 0 to 1 (at most 3 decimals)",
                           names[i], vals[i]);
    *ret = l;
    return 0;
}

static int load_apply(struct sim_update *u, struct sim_state *st, void *arg, struct err *e)
{
    (void)u;
    (void)e;
    const struct load_cmd *l = arg;
    struct sim_gpu_state *g = &st->gpus[l->gpu];
    g->has_load = !l->clear;
    g->load = l->clear ? (struct sim_load){0} : l->load;
    return 0;
}

/* The flags against the fault kind (before any file is read). */
static int inject_check(const struct sim_cli *c, const char *what, struct inject *in, struct err *e)
{
    if (strcmp(what, "xid") == 0)
        in->kind = INJ_XID;
    else if (strcmp(what, "lost") == 0)
        in->kind = INJ_LOST;
    else if (strcmp(what, "ecc") == 0)
        in->kind = INJ_ECC;
    else if (strcmp(what, "mig-fail") == 0)
        in->kind = INJ_MIG_FAIL;
    else if (strcmp(what, "mig-reset-required") == 0)
        in->kind = INJ_MIG_RESET;
    else if (strcmp(what, "nvlink") == 0)
        in->kind = INJ_NVLINK;
    else if (strcmp(what, "thermal") == 0)
        in->kind = INJ_THERMAL;
    else if (strcmp(what, "power") == 0)
        in->kind = INJ_POWER;
    else if (strcmp(what, "cool") == 0)
        in->kind = INJ_COOL;
    else if (strcmp(what, "remap-failure") == 0)
        in->kind = INJ_REMAP_FAILURE;
    else if (strcmp(what, "gpu-reset") == 0) /* the command, checked as a fault is */
        in->kind = GPU_RESET;
    else
        return err_set(e, -EINVAL, "inject: unknown fault \"%s\" (%s)", what, FAULTS);
    *in = (struct inject){.kind = in->kind,
                          .gpu = c->gpu,
                          .code = c->code,
                          .gi = c->gi,
                          .ci = c->ci,
                          .dbe = c->dbe,
                          .sbe = c->sbe == SIM_NO_ID ? 0 : c->sbe,
                          .after = c->after == SIM_NO_ID ? 0 : c->after};
    const char *pre = in->kind == GPU_RESET ? "" : "inject ";
    if (c->pid != SIM_NO_ID || c->sm || c->tensor || c->dram || c->clear)
        return err_set(e, -EINVAL,
                       "%s%s: --pid, --sm, --tensor, --dram and --clear belong to "
                       "set-load",
                       pre, what);
    if (in->kind != INJ_MIG_FAIL && c->after != SIM_NO_ID)
        return err_set(e, -EINVAL, "%s%s: --after belongs to inject mig-fail", pre, what);
    if (in->gpu == SIM_NO_ID)
        return err_set(e, -EINVAL, "%s%s: --gpu is required", pre, what);
    if (in->kind == INJ_XID) {
        if (in->code == SIM_NO_ID || in->code == 0)
            return err_set(e, -EINVAL, "inject xid: --code (an XID, 1..65535) is required");
        if (in->ci != SIM_NO_ID && in->gi == SIM_NO_ID)
            return err_set(e, -EINVAL, "inject xid: --ci needs --gi");
    } else if (in->code != SIM_NO_ID || in->gi != SIM_NO_ID || in->ci != SIM_NO_ID) {
        return err_set(e, -EINVAL, "%s%s: --code, --gi and --ci belong to inject xid", pre, what);
    }
    if (in->kind == INJ_ECC) {
        if (in->dbe == SIM_NO_ID)
            return err_set(e, -EINVAL, "inject ecc: --dbe is required");
        if (in->dbe == 0 && in->sbe == 0)
            return err_set(e, -EINVAL, "inject ecc: --dbe and --sbe are both 0: nothing to do");
    } else if (in->dbe != SIM_NO_ID || in->sbe) {
        return err_set(e, -EINVAL, "%s%s: --dbe and --sbe belong to inject ecc", pre, what);
    }
    if (in->dbe == SIM_NO_ID)
        in->dbe = 0;
    return 0;
}

static const char *event_name(uint64_t type)
{
    switch (type) {
    case nvmlEventTypeXidCriticalError:
        return "XidCriticalError";
    case nvmlEventTypeDoubleBitEccError:
        return "DoubleBitEccError";
    case nvmlEventTypeSingleBitEccError:
        return "SingleBitEccError";
    default:
        return "event";
    }
}

static int cmd_show(const struct sim_fleet *f, struct sim_store *s)
{
    const struct sim_state *st = sim_store_state(s);
    uint64_t now = sim_now_ms();
    printf("fleet  %s: driver %s, CUDA %d.%d, seed %" PRIu64 ", %zu GPUs\n", f->path,
           f->driver_version, f->cuda_driver_version / 1000, f->cuda_driver_version % 1000 / 10,
           f->seed, f->n_gpus);
    printf("state  %s (generation %" PRIu64 ", %" PRIu64 " events so far, %" PRIu64 " reboots)\n",
           sim_store_dir(s), st->generation, st->next_seq - 1, st->boots);
    for (unsigned i = 0; i < f->n_gpus; i++) {
        const struct sim_gpu_spec *g = &f->gpus[i];
        const struct sim_gpu_state *gs = &st->gpus[i];
        struct sim_sample smp;
        sim_telemetry(f, i, now, &smp);
        printf("\nGPU %u  %s  %s  %s  %s\n", i, g->model, g->uuid, g->bus_id,
               gs->lost ? "LOST (NVML_ERROR_GPU_IS_LOST)" : "ok");
        printf("  %" PRIu64 " MiB, %s, compute %d.%d, %u W limit", g->memory_mib,
               sim_arch_name(g->arch), g->cc_major, g->cc_minor, g->power_limit_w);
        if (g->n_links)
            printf(", %u NVLinks", g->n_links);
        printf("\n");
        if (!gs->lost)
            printf("  now: %u C, %.1f W, GPU util %u %%, SM %u MHz, %" PRIu64 " MiB used\n",
                   smp.temp_c, smp.power_mw / 1000.0, smp.util_gpu, smp.sm_clock_mhz,
                   smp.mem_used_mib);
        if (g->mig_capable) {
            printf("  MIG %s", gs->mig_mode ? "enabled" : "disabled");
            if (gs->mig_mode)
                printf(", %u GPU instance%s", gs->n_gi, gs->n_gi == 1 ? "" : "s");
            printf("\n");
            for (unsigned k = 0; k < gs->n_gi; k++) {
                const struct sim_gi *gi = &gs->gi[k];
                const struct sim_gi_profile *p =
                    sim_mig_profile_by_id(g->mig_table, gi->profile_id);
                printf("    GI %-2u %-12s placement %u:%u\n", gi->id, p ? p->name : "?", gi->start,
                       gi->size);
                for (unsigned c = 0; c < gi->n_ci; c++) {
                    struct sim_ci_profile cp;
                    char uuid[96];
                    sim_mig_uuid(g, gi->id, gi->ci[c].id, uuid, sizeof(uuid));
                    bool ok = sim_mig_ci_profile(p, gi->ci[c].profile_index, &cp);
                    printf("      CI %u %-14s %s\n", gi->ci[c].id, ok ? cp.name : "?", uuid);
                }
            }
        }
        if (gs->ecc_sbe_agg || gs->ecc_dbe_agg)
            printf("  ECC errors: single-bit %" PRIu64 " (volatile %" PRIu64
                   "), double-bit %" PRIu64 " (volatile %" PRIu64 ")\n",
                   gs->ecc_sbe_agg, gs->ecc_sbe_vol, gs->ecc_dbe_agg, gs->ecc_dbe_vol);
        struct sim_proc procs[SIM_MAX_PROCS];
        size_t n_procs = sim_procs_live(st, i, procs, ARRAY_SIZE(procs));
        for (size_t k = 0; k < n_procs && k < ARRAY_SIZE(procs); k++) {
            struct sim_load l = sim_proc_load(g, gs, &procs[k]);
            printf("  process %u, %" PRIu64 " MiB", procs[k].pid, procs[k].used_mib);
            if (procs[k].gi_id != SIM_NO_ID)
                printf(", GI %u CI %u", procs[k].gi_id, procs[k].ci_id);
            printf("\n    load: sm %u.%03u tensor %u.%03u dram %u.%03u%s\n", l.sm / 1000,
                   l.sm % 1000, l.tensor / 1000, l.tensor % 1000, l.dram / 1000, l.dram % 1000,
                   procs[k].has_load ? " (its own)" : "");
        }
        if (gs->has_load)
            printf("  set-load: a process drives sm %u.%03u tensor %u.%03u dram %u.%03u\n",
                   gs->load.sm / 1000, gs->load.sm % 1000, gs->load.tensor / 1000,
                   gs->load.tensor % 1000, gs->load.dram / 1000, gs->load.dram % 1000);
        struct sim_gpm_rates rates;
        if (!gs->lost && sim_gpm_supported(g) &&
            sim_gpm_rates(g, gs, procs, n_procs < ARRAY_SIZE(procs) ? n_procs : ARRAY_SIZE(procs),
                          SIM_NO_ID, SIM_NO_ID, &rates) == NVML_SUCCESS)
            printf("  GPM now: SM %.1f %%, tensor %.1f %%, DRAM %.1f %%\n",
                   100 * rates.active[SIM_GPM_SM], 100 * rates.active[SIM_GPM_TENSOR],
                   100 * rates.active[SIM_GPM_DRAM]);
        if (gs->remapped_unc || gs->remapped_cor)
            printf("  remapped rows: %u uncorrectable, %u correctable%s\n", gs->remapped_unc,
                   gs->remapped_cor, gs->remap_pending ? ", remap pending" : "");
        if (gs->retired_dbe || gs->retired_sbe)
            printf("  retired pages: %u double-bit, %u single-bit%s\n", gs->retired_dbe,
                   gs->retired_sbe, gs->retired_pending ? ", retirement pending" : "");
        if (gs->last_xid)
            printf("  last XID: %u\n", gs->last_xid);
        if (gs->nvlink_recovery || gs->nvlink_replay)
            printf("  NVLink errors: %u recovery, %u replay\n", gs->nvlink_recovery,
                   gs->nvlink_replay);
        if (gs->throttle)
            printf("  slowdown held: clock event reasons 0x%llx\n",
                   (unsigned long long)gs->throttle);
        if (gs->mig_fail_in)
            printf("  injected MIG fault: GPU-instance creation %u from now fails\n",
                   gs->mig_fail_in);
        if (gs->mig_change_pending)
            printf("  MIG mode change pending: %s after a GPU reset\n",
                   gs->mig_mode ? "disabled" : "enabled");
        else if (gs->mig_reset_required)
            printf("  MIG mode changes wait for a GPU reset\n");
    }
    struct sim_event ev[8];
    size_t n = 0;
    uint64_t last = sim_store_last_seq(s);
    struct err e = {0};
    if (sim_store_events(s, last > ARRAY_SIZE(ev) ? last - ARRAY_SIZE(ev) : 0, ev, ARRAY_SIZE(ev),
                         &n, &e) == 0 &&
        n > 0) {
        printf("\nrecent events:\n");
        for (size_t i = 0; i < n; i++) {
            char ts[40];
            time_rfc3339(ev[i].unix_ms, ts, sizeof(ts));
            printf("  #%" PRIu64 " %s GPU %u %s", ev[i].seq, ts, ev[i].gpu, event_name(ev[i].type));
            if (ev[i].type == nvmlEventTypeXidCriticalError)
                printf(" %" PRIu64, ev[i].data);
            if (ev[i].gi_id != SIM_NO_ID)
                printf(" (GI %u", ev[i].gi_id);
            if (ev[i].gi_id != SIM_NO_ID && ev[i].ci_id != SIM_NO_ID)
                printf(", CI %u", ev[i].ci_id);
            if (ev[i].gi_id != SIM_NO_ID)
                printf(")");
            printf("\n");
        }
    }
    return 0;
}

/* A driver reload: refused while a process holds a GPU (the module is in use). */
static int driver_reload_apply(struct sim_update *u, struct sim_state *st, void *arg, struct err *e)
{
    (void)u;
    (void)arg;
    if (sim_procs_live(st, SIM_NO_ID, NULL, 0) > 0)
        return err_set(e, -EBUSY, "processes hold the GPUs (Module nvidia is in use)");
    for (size_t i = 0; i < st->n_gpus; i++)
        sim_gpu_driver_reload(&st->gpus[i]);
    return 0;
}

/* The command and its flags: bad usage (exit 2) before any file is read. */
static int sim_configure(struct svc *s, struct err *e)
{
    struct sim_cli *c = svc_state(s);
    size_t n;
    const char *const *args = svc_args(s, &n);
    if (n == 0)
        return err_set(
            e, -EINVAL,
            "a command is required: inject, gpu-reset, driver-reload, reboot, set-load, reset "
            "or show (see --help)");
    const char *cmd = args[0];
    if (strcmp(cmd, "inject") == 0) {
        if (n < 2)
            return err_set(e, -EINVAL, "inject: what? (%s; see gpuop-sim --help)", FAULTS);
        if (strcmp(args[1], "gpu-reset") == 0)
            return err_set(e, -EINVAL, "inject: unknown fault \"gpu-reset\" (a command)");
        struct inject in;
        return inject_check(c, args[1], &in, e);
    }
    if (strcmp(cmd, "gpu-reset") == 0) {
        if (n > 1)
            return err_set(e, -EINVAL, "%s: unexpected argument \"%s\"", cmd, args[1]);
        struct inject in;
        return inject_check(c, cmd, &in, e);
    }
    if (strcmp(cmd, "set-load") == 0) {
        if (n > 1)
            return err_set(e, -EINVAL, "%s: unexpected argument \"%s\"", cmd, args[1]);
        struct load_cmd l;
        return load_check(c, &l, e);
    }
    if (strcmp(cmd, "reset") != 0 && strcmp(cmd, "show") != 0 && strcmp(cmd, "reboot") != 0 &&
        strcmp(cmd, "driver-reload") != 0)
        return err_set(e, -EINVAL,
                       "unknown command \"%s\" (inject, gpu-reset, driver-reload, reboot, "
                       "set-load, reset, show; see --help)",
                       cmd);
    if (n > 1)
        return err_set(e, -EINVAL, "%s: unexpected argument \"%s\"", cmd, args[1]);
    return 0;
}

static int sim_run(struct svc *s, struct err *e)
{
    struct sim_cli *c = svc_state(s);
    size_t n;
    const char *const *args = svc_args(s, &n);
    const char *cmd = args[0];
    if (!c->fleet)
        return err_set(e, -EINVAL,
                       "GPUOP_SIM_FLEET is not set: it names the fleet file (e.g. "
                       "sim/fleets/dgx-h100.yaml)");
    if (!c->state_dir)
        return err_set(e, -EINVAL,
                       "GPUOP_SIM_STATE is not set: it names the state directory the "
                       "simulator's users share (faults injected without it would reach no one)");
    struct sim_fleet *f _cleanup_(sim_fleet_freep) = NULL;
    int r = sim_fleet_load(c->fleet, &f, e);
    if (r < 0)
        return r;
    bool reset = strcmp(cmd, "reset") == 0;
    struct sim_store *st _cleanup_(sim_store_freep) = NULL;
    if ((r = sim_store_open(f, c->state_dir, reset ? SIM_STORE_RESET : 0, &st, e)) < 0)
        return r;
    if (reset) {
        printf("gpuop-sim: %s reset to the fleet's initial state\n", c->state_dir);
        return 0;
    }
    if (strcmp(cmd, "show") == 0)
        return cmd_show(f, st) == 0 ? 0 : err_set(e, -EIO, "show failed");
    if (strcmp(cmd, "reboot") == 0 || strcmp(cmd, "driver-reload") == 0) {
        bool reboot = cmd[0] == 'r';
        if (reboot ? (r = sim_store_reboot(st, e)) != 0
                   : (r = sim_store_update(st, driver_reload_apply, NULL, e)) != 0)
            return err_prefix(e, "%s", cmd);
        return 0;
    }
    if (strcmp(cmd, "set-load") == 0) {
        struct load_cmd l;
        if ((r = load_check(c, &l, e)) < 0)
            return svc_bad_input(s, r);
        if (l.pid != SIM_NO_ID) {
            r = sim_procs_set_load(st, l.pid, l.clear ? NULL : &l.load, e);
            if (r == -ENOENT)
                return svc_bad_input(s, err_prefix(e, "set-load --pid"));
            return r < 0 ? err_prefix(e, "set-load") : 0;
        }
        if (l.gpu >= f->n_gpus)
            return svc_bad_input(s, err_set(e, -EINVAL,
                                            "set-load: --gpu %u: the fleet %s has %zu "
                                            "GPUs",
                                            l.gpu, f->path, f->n_gpus));
        if ((r = sim_store_update(st, load_apply, &l, e)) != 0)
            return err_prefix(e, "set-load");
        return 0;
    }
    const char *what = strcmp(cmd, "gpu-reset") == 0 ? cmd : args[1];
    struct inject in;
    if ((r = inject_check(c, what, &in, e)) < 0)
        return svc_bad_input(s, r);
    in.fleet = f;
    if (in.gpu >= f->n_gpus)
        return svc_bad_input(s, err_set(e, -EINVAL, "%s: --gpu %u: the fleet %s has %zu GPUs", what,
                                        in.gpu, f->path, f->n_gpus));
    if ((r = sim_store_update(st, inject_apply, &in, e)) != 0)
        return err_prefix(e, "%s", what);
    return 0;
}

const struct svc_component sim_component = {
    .name = "gpuop-sim",
    .usage =
        "Usage: gpuop-sim <command> [flags]\n"
        "\n"
        "Drives the simulated GPU fleet (build/libnvidia-ml.so.1): every process that loads\n"
        "the simulator with the same GPUOP_SIM_FLEET and GPUOP_SIM_STATE sees the change.\n"
        "\n"
        "Commands:\n"
        "  inject xid --gpu N --code C [--gi G [--ci C]]\n"
        "                      deliver an XidCriticalError event with XID C on GPU N (to the\n"
        "                      GPU instance G / compute instance C of a MIG GPU) to every\n"
        "                      process waiting in nvmlEventSetWait\n"
        "  inject lost --gpu N every call on GPU N then fails with NVML_ERROR_GPU_IS_LOST\n"
        "                      (the other GPUs keep working); also delivers XID 79 (the GPU\n"
        "                      has fallen off the bus)\n"
        "  inject ecc --gpu N --dbe K [--sbe K]\n"
        "                      add K double-bit (and single-bit) ECC errors to GPU N's\n"
        "                      volatile and aggregate counters (row remapping on Ampere and\n"
        "                      later, retired pages before) and deliver DoubleBitEccError /\n"
        "                      SingleBitEccError events\n"
        "  inject mig-fail --gpu N [--after K]\n"
        "                      the GPU-instance creation on GPU N after K more successful\n"
        "                      ones fails with NVML_ERROR_UNKNOWN (once)\n"
        "  inject mig-reset-required --gpu N\n"
        "                      from now on a MIG mode change on GPU N stays pending until the\n"
        "                      GPU is reset (nvmlDeviceSetMigMode: activation status\n"
        "                      NVML_ERROR_RESET_REQUIRED; nvmlDeviceGetMigMode: current and\n"
        "                      pending differ), as where the node cannot reset it live\n"
        "  inject nvlink --gpu N\n"
        "                      count an NVLink recovery and replay error on GPU N's links and\n"
        "                      deliver XID 74 (NVLINK_ERROR)\n"
        "  inject thermal|power --gpu N\n"
        "                      hold GPU N's clocks down: a hardware thermal or power brake\n"
        "                      slowdown (NVML's clock event reasons) until inject cool\n"
        "  inject cool --gpu N end GPU N's slowdowns\n"
        "  inject remap-failure --gpu N\n"
        "                      a row remapping failed on GPU N (Ampere and later); XID 64\n"
        "  gpu-reset --gpu N   reset GPU N: a pending MIG mode change takes effect, rows\n"
        "                      pending remapping are remapped, the volatile ECC and NVLink\n"
        "                      error counts clear; refused while processes run on it, and for\n"
        "                      a lost GPU (only a reboot brings it back)\n"
        "  driver-reload       as a driver reload: what a reset does on every GPU, and pages\n"
        "                      pending retirement retired; refused while processes hold GPUs\n"
        "  reboot              as a node reboot: lost GPUs back, every GPU reset, processes\n"
        "                      gone, MIG instances gone (the mode stays); slowdowns stay\n"
        "  set-load --gpu N|--pid P [--sm R] [--tensor R] [--dram R] | --clear\n"
        "                      the load (ratios 0..1) a process on GPU N, or process P,\n"
        "                      drives: the simulated GPU Performance Monitoring counts it\n"
        "                      while the process runs (--clear: back to the fleet's workload)\n"
        "  reset               back to the fleet's initial state (MIG layout from the fleet,\n"
        "                      no lost GPUs, zero ECC counters, no loads set)\n"
        "  show                print the fleet and its current state\n",
    .options = {sim_options},
    .epilogue = "Also read by the simulator:\n"
                "  GPUOP_SIM_CLOCK     freeze the simulated clock at this unix time (seconds)\n",
    .max_args = 2,
    .state_size = sizeof(struct sim_cli),
    .defaults = sim_defaults,
    .configure = sim_configure,
    .run = sim_run,
};
