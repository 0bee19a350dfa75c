/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzzes kubesim's CEL subset (ks-cel.h): the input is a selector. It must compile or fail with a
 * message; what compiles is evaluated against two devices (a GPU of the selector's driver, and a
 * device of another driver with attributes of every kind) and must match, not match, or fail
 * with a message. */
#include <stdint.h>
#include <stdlib.h>

#include "ks-cel.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char attrs_text[] =
    "{\"type\": {\"string\": \"gpu\"}, \"productName\": {\"string\": \"NVIDIA H100 80GB HBM3\"},"
    " \"driverVersion\": {\"version\": \"550.127.5\"}, \"cc\": {\"version\": \"9.0.0-rc.1+b\"},"
    " \"index\": {\"int\": -3}, \"mig\": {\"bool\": true},"
    " \"resource.kubernetes.io/pcieRoot\": {\"string\": \"pci0000:00\"}}";
static const char caps_text[] = "{\"memory\": {\"value\": \"81559Mi\"}, \"slices\": {\"value\": 7},"
                                " \"example.com/bw\": {\"value\": \"1.5k\"}}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > KS_CEL_MAX_LEN)
        return 0;
    struct ks_cel *c = NULL;
    char *err = NULL;
    if (ks_cel_compile((const char *)data, size, &c, &err) < 0) {
        if (!err || !err[0])
            abort();
        free(err);
        return 0;
    }
    json_t *attrs = json_loads(attrs_text, 0, NULL), *caps = json_loads(caps_text, 0, NULL);
    const char *drivers[] = {"gpu.nvidia.com", "example.com"};
    for (size_t i = 0; i < 2; i++) {
        bool m = false;
        err = NULL;
        if (ks_cel_match(c, drivers[i], attrs, caps, &m, &err) < 0) {
            if (!err || !err[0])
                abort();
            free(err);
        }
    }
    json_decref(attrs);
    json_decref(caps);
    ks_cel_free(c);
    return 0;
}
