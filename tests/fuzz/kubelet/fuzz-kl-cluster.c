/* SPDX-License-Identifier: Apache-2.0 */
/* kubelet-sim's cluster file parser: any bytes give a cluster or an error, never a crash. */
#include <stdint.h>
#include <string.h>

#include "kubelet-sim.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct kl_cluster *c = NULL;
    struct err e = {0};
    if (kl_cluster_parse("/fuzz/cluster.yaml", (const char *)data, size, &c, &e) == 0)
        kl_cluster_free(c);
    return 0;
}
