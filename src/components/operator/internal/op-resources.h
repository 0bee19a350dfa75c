/* SPDX-License-Identifier: Apache-2.0 */
/* The API resources the operator's shell reads and writes beyond kube.h's list. */
#ifndef GPUOP_OP_RESOURCES_H
#define GPUOP_OP_RESOURCES_H

#include "kube.h"

static const struct kube_resource RES_CLUSTERPOLICIES = {"nvidia.com", "v1", "clusterpolicies",
                                                         "ClusterPolicy", false};
static const struct kube_resource RES_NVIDIADRIVERS = {"nvidia.com", "v1alpha1", "nvidiadrivers",
                                                       "NVIDIADriver", false};
static const struct kube_resource RES_CLUSTERROLES = {"rbac.authorization.k8s.io", "v1",
                                                      "clusterroles", "ClusterRole", false};
static const struct kube_resource RES_CLUSTERROLEBINDINGS = {
    "rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", false};
static const struct kube_resource RES_ROLES = {"rbac.authorization.k8s.io", "v1", "roles", "Role",
                                               true};
static const struct kube_resource RES_ROLEBINDINGS = {"rbac.authorization.k8s.io", "v1",
                                                      "rolebindings", "RoleBinding", true};

/* The Prometheus Operator's kind: served only where its CRD is installed. */
static const struct kube_resource RES_SERVICEMONITORS = {"monitoring.coreos.com", "v1",
                                                         "servicemonitors", "ServiceMonitor", true};

static const struct kube_resource RES_POOLS = {"upgrade.gpuop.dev", "v1alpha1",
                                               "driverupgradepools", "DriverUpgradePool", false};

#endif
