/* SPDX-License-Identifier: Apache-2.0 */
/* svc: the option fragments several components share, each defined here once. svc owns them
 * (not src/edge/kube, below it, which knows no option tables); the kube client takes the
 * values as plain strings (kube_client_open). */
#include "svc.h"

const struct svc_option svc_kubeconfig_option[] = {
    {.flag = "kubeconfig",
     .env = "KUBECONFIG",
     .kind = SVC_STRING,
     .metavar = "PATH",
     .help = "kubeconfig (default: in-cluster, else ~/.kube/config)"},
    {0},
};

const struct svc_option svc_context_option[] = {
    {.flag = "context",
     .kind = SVC_STRING,
     .metavar = "NAME",
     .help = "kubeconfig context (default: the current one)"},
    {0},
};

const struct svc_option svc_node_name_option[] = {
    {.flag = "node-name",
     .env = "NODE_NAME",
     .kind = SVC_STRING,
     .metavar = "NAME",
     .help = "this node (required; in a pod: its spec.nodeName)"},
    {0},
};
