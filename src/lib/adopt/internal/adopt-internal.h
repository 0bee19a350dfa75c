/* SPDX-License-Identifier: Apache-2.0 */
/* What adopt's files share. */
#ifndef GPUOP_ADOPT_INTERNAL_H
#define GPUOP_ADOPT_INTERNAL_H

#include "adopt.h"

/* Whether objects of `kind` live in a namespace (the kinds the takeover sees). */
bool adopt_kind_namespaced(const char *kind);
/* The ClusterPolicy section ("devicePlugin") of one of gpuop's operand DaemonSets, or NULL. */
const char *adopt_component_of_ds(const char *ds);

#endif
