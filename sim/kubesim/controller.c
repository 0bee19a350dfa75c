/* SPDX-License-Identifier: Apache-2.0 */
/* The control loops kubesim runs in place of kube-controller-manager, the scheduler's binding of
 * DaemonSet pods and the kubelet's pod status: DaemonSets (with ControllerRevisions), Jobs, pod
 * readiness, the node unschedulable taint, PodDisruptionBudget status and evictions, namespace
 * deletion, and garbage collection through ownerReferences. All run under ks->lock. */
#include "ks-controllers.h"

bool ks_controllers(struct ksim *ks)
{
    uint64_t now = ks_now(ks);
    bool timed = ks->next_due && now >= ks->next_due;
    if (!ks->dirty && !timed)
        return false;
    ks->dirty = false;
    ks->next_due = 0;
    ks->pod_budget = KS_POD_BURST;
    ks->ds_pod_budget = ks->opts.daemon_burst;
    ks->kubelet_budget = ks->opts.daemon_burst;
    ks->more_work = false;
    bool changed = false;
    for (int round = 0; round < 8; round++) {
        bool c = false;
        c |= ks_ctl_node_taints(ks);
        c |= ks_ctl_daemonsets(ks);
        c |= ks_ctl_deployments(ks);
        c |= ks_ctl_replicasets(ks);
        c |= ks_ctl_jobs(ks);
        c |= ks_ctl_resourceclaims(ks);
        c |= ks_ctl_schedule(ks);
        c |= ks_ctl_orphan_pods(ks);
        c |= ks_ctl_kubelet(ks);
        c |= ks_ctl_pdbs(ks);
        c |= ks_ctl_namespaces(ks);
        c |= ks_ctl_gc(ks);
        c |= ks_ctl_quotas(ks);
        changed |= c;
        /* out of pod budget: let requests in before the next reconcile */
        if (!c || ks->more_work)
            break;
    }
    ks->dirty = ks->more_work;
    return changed;
}
