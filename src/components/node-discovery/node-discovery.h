/* SPDX-License-Identifier: Apache-2.0 */
/*
 * discovery: `gpuop node-discovery`, the Node Feature Discovery labels GPU nodes are found by, on
 * clusters without NFD: the PCI labels of NVIDIA display functions (pci-10de.present and the
 * class-qualified pci-03xx_10de.present) and the os_release labels (ID, VERSION_ID and its major
 * and minor), computed by nodestate (the same code kubelet-sim's NFD emulation uses), and nothing
 * else. The set it wrote is kept in the node annotation gpuop.dev/node-discovery-labels, so a
 * label it no longer produces (a GPU gone) is removed and no other label is touched. Where NFD
 * runs (nfd-master's annotations on the node), it stays away: it writes no label, and only drops
 * its own annotation (the labels of the same names are NFD's from then on).
 *
 * disc_plan is the pure core: the Node and what the node root shows in, a merge patch out.
 */
#ifndef GPUOP_DISCOVERY_H
#define GPUOP_DISCOVERY_H

#include <jansson.h>

#include "nodestate.h"
#include "util.h"

enum disc_action {
    DISC_NOTHING,   /* the node already carries what it should */
    DISC_LABEL,     /* write the labels (patch) */
    DISC_STAY_AWAY, /* NFD runs here: nothing written but dropping gpuop's annotation (patch) */
};

/* node: the Node object; in: what the node root shows (its kernel field is ignored: no kernel
 * labels). *ret_patch: a JSON merge patch of metadata.labels and metadata.annotations (NULL for
 * DISC_NOTHING). Pure. */
enum disc_action disc_plan(const json_t *node, const struct nodestate_nfd_input *in,
                           json_t **ret_patch);
const char *disc_action_name(enum disc_action a);

#endif
