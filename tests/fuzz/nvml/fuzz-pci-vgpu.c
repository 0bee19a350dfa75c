/* SPDX-License-Identifier: Apache-2.0 */
/* gpu_pci_vgpu_parse over arbitrary PCI configuration spaces: never reads out of bounds, always
 * terminates (capability chains may loop), and fills NUL-terminated printable strings. */
#include <string.h>

#include "gpu.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096)
        return 0;
    /* a copy of exactly size bytes, so ASan sees any read past the end */
    uint8_t *c = malloc(size ? size : 1);
    if (!c)
        return 0;
    memcpy(c, data, size);
    struct gpu_vgpu_info v;
    int r = gpu_pci_vgpu_parse(c, size, &v);
    if (r == 1 && (strlen(v.host_driver_version) >= sizeof(v.host_driver_version) ||
                   strlen(v.host_driver_branch) >= sizeof(v.host_driver_branch)))
        __builtin_trap();
    free(c);
    return 0;
}
