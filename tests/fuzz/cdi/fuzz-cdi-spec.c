/* SPDX-License-Identifier: Apache-2.0 */
/* cdi_spec_parse over arbitrary bytes: a spec or an error naming the file, never a crash. A spec
 * that parses has every device's edits applied to a small OCI spec (the host read stubbed). */
#include <stdint.h>
#include <string.h>

#include "cdi.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int fake_stat(void *ud, const char *path, struct cdi_host_node *ret, struct err *e)
{
    (void)ud;
    if (strstr(path, "missing"))
        return err_set(e, -ENOENT, "stat \"%s\": No such file or directory", path);
    *ret = (struct cdi_host_node){.type = 'c', .major = 195, .minor = 0, .file_mode = 0666};
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct cdi_spec *s = NULL;
    struct err e = {0};
    if (cdi_spec_parse("fuzz.yaml", (const char *)data, size, &s, &e) < 0) {
        if (!strstr(err_msg(&e), "fuzz.yaml"))
            __builtin_trap(); /* every error names the file */
        return 0;
    }
    json_t *oci = json_pack("{s:{s:[s]}, s:[{s:s, s:s}]}", "process", "env", "PATH=/bin", "mounts",
                            "destination", "/proc", "source", "proc");
    size_t n = cdi_spec_n_devices(s);
    const struct cdi_edits **edits = xcalloc(n + 1, sizeof(*edits));
    edits[0] = cdi_spec_edits(s);
    for (size_t i = 0; i < n; i++)
        edits[i + 1] = cdi_spec_device_edits(s, cdi_spec_device_name(s, i));
    (void)cdi_oci_apply(oci, edits, n + 1, fake_stat, NULL, &e);
    free(edits);
    json_decref(oci);
    cdi_spec_free(s);
    return 0;
}
