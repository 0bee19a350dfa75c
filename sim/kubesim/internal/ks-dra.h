/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ks-dra: structured allocation of ResourceClaims for one node, as kube-scheduler's
 * DynamicResources plugin does it (k8s.io/dynamic-resource-allocation/structured): the node's
 * pools (slices with the node's name, all nodes, or a matching node selector; the newest
 * generation of each pool), each request's device class and CEL selectors (ks-cel.h),
 * ExactCount and All allocation modes, matchAttribute constraints, prioritized alternatives
 * (firstAvailable, tried in order), shared counters of partitionable devices (counter sets of
 * the pool, consumesCounters of its devices), and devices in use by other claims. The first
 * full solution of a depth-first search wins, as upstream (no scoring). Results carry the
 * class's and the claim's configuration and the allocation's node selector.
 *
 * Pure: JSON in, JSON out; the caller (ctl-dra.c) reads the store.
 */
#ifndef GPUOP_KS_DRA_H
#define GPUOP_KS_DRA_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

/* Compiled CEL selectors, by expression text, kept across calls (one scheduler pass). */
struct ks_dra_cel_cache;
struct ks_dra_cel_cache *ks_dra_cel_cache_new(void);
void ks_dra_cel_cache_free(struct ks_dra_cel_cache *c);

struct ks_dra_input {
    json_t *claims;    /* array: the claims to allocate together, in the pod's order */
    json_t *classes;   /* object: DeviceClass name -> object */
    json_t *slices;    /* array: every ResourceSlice */
    json_t *allocated; /* object: "driver/pool/device" -> true, devices other claims hold */
    json_t *node;      /* the Node */
    struct ks_dra_cel_cache *cel;
    /* device placements tried before the search gives up (0: 200000); a pathological claim
     * ends as "cannot allocate" instead of stalling the scheduler */
    size_t budget;
};

/* 0 with *ret_results: an array of AllocationResults, one per claim ({devices: {results,
 * config}, nodeSelector}); NULL when the claims cannot all be allocated on this node. -EINVAL
 * with *ret_err (malloc'd) for what stops scheduling, as the scheduler's allocator reports it:
 * "claim NS/NAME: selector #0: CEL runtime error: no such key: model", "class C: selector #0:
 * CEL runtime error: ...", "claim NS/NAME, request R: asks for all devices, but resource pool P
 * is currently being updated", ... */
int ks_dra_allocate(const struct ks_dra_input *in, json_t **ret_results, char **ret_err);

/* "driver/pool/device" of an allocation result entry (malloc'd). */
char *ks_dra_device_id(json_t *result);

#endif
