/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kl-net: one network namespace per simulated node, each with a veth pair to a bridge on the
 * host, so every node has an address of its own and processes on the host (kubesim, Prometheus,
 * tests) reach each node's ports at that address. Only addresses of these test hosts are used:
 * the bridge holds the first address of the subnet, node i the (i + 2)th.
 *
 * Created at start, removed by kl_net_free (veths, namespaces, bridge); a bridge or namespace left
 * by a killed earlier run with the same names is removed and made anew. Needs root.
 */
#ifndef GPUOP_KL_NET_H
#define GPUOP_KL_NET_H

#include "util.h"

struct kl_net;

/* bridge: an interface name (at most 15 bytes); subnet: an IPv4 CIDR, /16 to /28. */
int kl_net_new(const char *bridge, const char *subnet, struct kl_net **ret, struct err *e);
void kl_net_free(struct kl_net *n);

/* Adds node number index (0-based): a namespace (a file under /run/netns) with loopback up and
 * a veth whose peer is on the bridge. ret_netns_path and ret_ip (dotted quad) are the caller's to
 * free. */
int kl_net_add_node(struct kl_net *n, const char *node, unsigned index, char **ret_netns_path,
                    char **ret_ip, struct err *e);

/* The bridge's own address (the host's side), e.g. for a server on the host that nodes reach. */
const char *kl_net_host_ip(const struct kl_net *n);

#endif
