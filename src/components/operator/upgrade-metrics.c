/* SPDX-License-Identifier: Apache-2.0 */
/* What /metrics says of the driver upgrades (upgrade-ctl-internal.h): NVIDIA's
 * gpu_operator_nodes_upgrades_* and gpu_operator_auto_upgrade_enabled, gpuop's per pool, and the
 * planner's own time, from the last pass's figures. */
#include <pthread.h>
#include <stddef.h>

#include "upgrade-ctl-internal.h"

void op_upgrade_pool_counts_free(struct pool_counts *pc, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(pc[i].name);
    free(pc);
}

void op_upgrade_record(struct op_upgrade *u, const struct upg_plan *plan, bool auto_up,
                       uint64_t plan_us, uint64_t plan_cpu_us)
{
    struct pool_counts *pc = xcalloc(plan->n_pools + 1, sizeof(*pc));
    for (size_t i = 0; i < plan->n_pools; i++) {
        const struct upg_pool_report *r = &plan->pools[i];
        pc[i] = (struct pool_counts){xstrdup(r->name), (int)r->in_progress.n, r->upgraded,
                                     (int)r->failed.n, r->pending};
    }
    pthread_mutex_lock(&u->lock);
    u->plan_us_last = plan_us;
    if (plan_us > u->plan_us_max)
        u->plan_us_max = plan_us;
    u->plan_cpu_us_last = plan_cpu_us;
    if (plan_cpu_us > u->plan_cpu_us_max)
        u->plan_cpu_us_max = plan_cpu_us;
    u->passes++;
    u->have_counts = !plan->frozen;
    u->unseen_writes = upg_writes_pending(u->writes);
    u->auto_upgrade = auto_up;
    u->counts = plan->counts;
    op_upgrade_pool_counts_free(u->pools, u->n_pools);
    u->pools = pc;
    u->n_pools = plan->n_pools;
    pthread_mutex_unlock(&u->lock);
}

void op_upgrade_metrics(struct op_upgrade *u, struct prom_writer *w)
{
    if (!u)
        return;
    pthread_mutex_lock(&u->lock);
    bool have = u->have_counts, au = u->auto_upgrade;
    struct upg_counts c = u->counts;
    size_t np = u->n_pools;
    struct pool_counts *pc = xcalloc(np + 1, sizeof(*pc));
    for (size_t i = 0; i < np; i++) {
        pc[i] = u->pools[i];
        pc[i].name = xstrdup(u->pools[i].name);
    }
    uint64_t last = u->plan_us_last, max = u->plan_us_max, passes = u->passes;
    uint64_t clast = u->plan_cpu_us_last, cmax = u->plan_cpu_us_max;
    uint64_t conflicts = u->conflicts;
    size_t unseen = u->unseen_writes;
    pthread_mutex_unlock(&u->lock);
    prom_metric(w, "gpuop_driver_upgrade_plan_seconds", PROM_GAUGE,
                "Time the last upgrade planning pass took", (double)last / 1e6);
    prom_metric(w, "gpuop_driver_upgrade_plan_seconds_max", PROM_GAUGE,
                "Longest upgrade planning pass since start", (double)max / 1e6);
    prom_metric(w, "gpuop_driver_upgrade_plan_cpu_seconds", PROM_GAUGE,
                "CPU time the last upgrade planning pass used", (double)clast / 1e6);
    prom_metric(w, "gpuop_driver_upgrade_plan_cpu_seconds_max", PROM_GAUGE,
                "Most CPU time an upgrade planning pass used since start", (double)cmax / 1e6);
    prom_metric_u64(w, "gpuop_driver_upgrade_passes_total", PROM_COUNTER,
                    "Upgrade planning passes run", passes);
    prom_metric_u64(w, "gpuop_driver_upgrade_node_conflicts_total", PROM_COUNTER,
                    "Upgrade node patches refused because the node changed since the pass read it",
                    conflicts);
    prom_metric(w, "gpuop_driver_upgrade_unseen_writes", PROM_GAUGE,
                "Nodes planned from the controller's own last write, which its informer does not "
                "show yet",
                (double)unseen);
    prom_metric(w, "gpu_operator_auto_upgrade_enabled", PROM_GAUGE,
                "1 when driver.upgradePolicy.autoUpgrade is on", au ? 1 : 0);
    static const struct {
        const char *name, *key, *help;
        size_t off, pool_off; /* in struct upg_counts, struct pool_counts (0: none) */
    } m[] = {
        {"gpu_operator_nodes_upgrades_in_progress", "in_progress",
         "Nodes with a driver upgrade in progress", offsetof(struct upg_counts, in_progress),
         offsetof(struct pool_counts, in_progress)},
        {"gpu_operator_nodes_upgrades_done", "done", "Nodes whose driver is up to date",
         offsetof(struct upg_counts, done), offsetof(struct pool_counts, done)},
        {"gpu_operator_nodes_upgrades_failed", "failed", "Nodes whose driver upgrade failed",
         offsetof(struct upg_counts, failed), offsetof(struct pool_counts, failed)},
        {"gpu_operator_nodes_upgrades_available", NULL, "Driver upgrades that may start now",
         offsetof(struct upg_counts, available), 0},
        {"gpu_operator_nodes_upgrades_pending", "pending",
         "Nodes waiting to start a driver upgrade", offsetof(struct upg_counts, pending),
         offsetof(struct pool_counts, pending)},
    };
    for (size_t i = 0; i < ARRAY_SIZE(m); i++) {
        int v = have ? *(const int *)((const char *)&c + m[i].off) : 0;
        prom_metric(w, m[i].name, PROM_GAUGE, m[i].help, v);
    }
    /* per pool: gpuop's own family, so that sums over NVIDIA's stay right */
    prom_family(w, "gpuop_driver_upgrade_pool_nodes", PROM_GAUGE,
                "Driver-managed nodes per upgrade pool and state (in_progress, done, failed, "
                "pending)");
    for (size_t p = 0; p < np; p++) {
        for (size_t i = 0; i < ARRAY_SIZE(m); i++) {
            if (!m[i].key)
                continue;
            struct prom_label lab[2] = {{"pool", pc[p].name}, {"state", m[i].key}};
            prom_sample(w, "gpuop_driver_upgrade_pool_nodes", lab, 2,
                        (double)*(const int *)((const char *)&pc[p] + m[i].pool_off));
        }
    }
    op_upgrade_pool_counts_free(pc, np);
}
