/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kl-reboot: kubelet-sim as a node-reboot tool for its simulated nodes. A node asks for a reboot
 * with the remediation's annotation (REM_ANN_REBOOT, "<id>"; src/lib/remediation); kubelet-sim
 * reboots it as the host would come back: every pod's containers stop, the simulated NVML is
 * rebooted (sim_store_reboot: lost GPUs back, every GPU reset, no process), /run/nvidia's status
 * files are gone and a driver a container loaded is unloaded (the kernel boots without it), the
 * device plugins register again, the pods start again (the driver container loads the driver
 * again), the boot ID changes, and REM_ANN_REBOOT_DONE answers the request.
 */
#ifndef GPUOP_KL_REBOOT_H
#define GPUOP_KL_REBOOT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "kubelet-sim.h"
#include "util.h"

/* Pure: the reboot `node` asks for and has not had (its id into buf), or false. */
bool kl_reboot_wanted(const json_t *node, char *buf, size_t n);
/* The node's host state after a reboot: the simulated GPUs (its NVML state folder), the status
 * files, a driver a container loaded. */
int kl_reboot_host(const struct kl_node_spec *spec, struct err *e);

#endif
