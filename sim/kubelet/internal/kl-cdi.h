/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kl-cdi: resolves Container Device Interface names (vendor/class=name) against the specs in a
 * node's CDI directories (<root>/etc/cdi and <root>/var/run/cdi, JSON or YAML; a later
 * directory's spec wins for the same name, as containerd's CDI cache orders them), and turns the
 * named devices' and their specs' containerEdits into environment, mounts and device nodes.
 * An unknown name is an error naming it, as containerd fails the container
 * ("unresolvable CDI devices nvidia.com/gpu=X"). Specs are parsed and checked by src/edge/cdi.
 */
#ifndef GPUOP_KL_CDI_H
#define GPUOP_KL_CDI_H

#include <stddef.h>

#include "kl-devices.h"
#include "util.h"

/* Reads the node's CDI directories and appends to a (envs, mounts with host paths under root,
 * device nodes) the edits of every name in names (NULL-terminated). A spec file that does not
 * parse is skipped with a warning unless one of names needs it. */
int kl_cdi_resolve(const char *root, const char *const *names, struct kl_alloc *a, struct err *e);

#endif
