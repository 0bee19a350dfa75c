/* SPDX-License-Identifier: Apache-2.0 */
/* kl_cdi_spec_parse over arbitrary bytes: a spec or an error naming the file, never a crash. */
#include <stdint.h>
#include <string.h>

#include "kl-cdi.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct kl_cdi_spec *s = NULL;
    struct err e = {0};
    if (kl_cdi_spec_parse("fuzz.yaml", (const char *)data, size, &s, &e) == 0)
        kl_cdi_spec_free(s);
    else if (!strstr(err_msg(&e), "fuzz.yaml"))
        __builtin_trap(); /* every error names the file */
    return 0;
}
