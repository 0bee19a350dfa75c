/* SPDX-License-Identifier: Apache-2.0 */
/* cdi_oci_apply over an arbitrary config.json: a fixed spec's edits applied, or an error naming
 * the field of the wrong type, never a crash. */
#include <stdint.h>
#include <string.h>

#include "cdi.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char spec_text[] =
    "cdiVersion: 0.7.0\nkind: nvidia.com/gpu\n"
    "containerEdits:\n"
    "  env: [NVIDIA_VISIBLE_DEVICES=void, PATH=/usr/bin]\n"
    "  deviceNodes: [{path: /dev/nvidiactl}, {path: /dev/fifo, type: p}]\n"
    "  mounts:\n"
    "  - {hostPath: /lib/libcuda.so.1, containerPath: /lib/libcuda.so.1, options: [ro, bind]}\n"
    "  - {hostPath: /run/x, containerPath: /run, type: tmpfs}\n"
    "  hooks: [{hookName: createContainer, path: /bin/hook, args: [hook, a], env: [A=1], "
    "timeout: 5}]\n"
    "  additionalGids: [0, 44, 44]\n"
    "devices:\n"
    "- name: \"0\"\n"
    "  containerEdits:\n"
    "    deviceNodes: [{path: /dev/nvidia0, hostPath: /dev/nvidia0, type: c, major: 195, "
    "minor: 0, fileMode: 0666, permissions: rw, uid: 0, gid: 0}]\n";

static int fake_stat(void *ud, const char *path, struct cdi_host_node *ret, struct err *e)
{
    (void)ud, (void)e, (void)path;
    *ret = (struct cdi_host_node){.type = 'c', .major = 195, .minor = 255, .file_mode = 0666};
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct cdi_spec *s;
    struct err e = {0};
    if (!s && cdi_spec_parse("fixed.yaml", spec_text, strlen(spec_text), &s, &e) < 0)
        __builtin_trap();
    json_t *oci = json_loadb((const char *)data, size, 0, NULL);
    if (!oci)
        return 0;
    const struct cdi_edits *edits[] = {cdi_spec_edits(s), cdi_spec_device_edits(s, "0")};
    if (cdi_oci_apply(oci, edits, ARRAY_SIZE(edits), fake_stat, NULL, &e) < 0 &&
        !strstr(err_msg(&e), "config.json"))
        __builtin_trap();
    json_decref(oci);
    return 0;
}
