/* SPDX-License-Identifier: Apache-2.0 */
/* PCI facts NVML does not give (NUMA node, PCI class), read from sysfs through the bus id. */
#include <ctype.h>
#include <string.h>

#include "nvml-internal.h"

#define SYSFS_VALUE_MAX 64

static int read_attr(const char *dir, const char *name, char *buf, size_t n, struct err *e)
{
    _cleanup_free_ char *path = xasprintf("%s/%s", dir, name);
    _cleanup_free_ char *data = NULL;
    size_t len = 0;
    int r = file_read_all(path, SYSFS_VALUE_MAX, &data, &len, e);
    if (r < 0)
        return r;
    while (len > 0 && isspace((unsigned char)data[len - 1]))
        data[--len] = '\0';
    strlcpy_s(buf, data, n);
    return 0;
}

int gpu_sysfs_pci(const char *bus_id, int *ret_numa_node, unsigned *ret_pci_class, struct err *e)
{
    char name[GPU_BUSID_MAX];
    if (gpu_bus_id_sysfs(bus_id, name, sizeof(name)) < 0)
        return err_set(e, -EINVAL, "PCI bus id \"%s\": not of the form dddd:bb:dd.f",
                       bus_id ? bus_id : "(null)");
    const char *root = env_get("GPUOP_SYSFS_ROOT");
    _cleanup_free_ char *dir = xasprintf("%s/bus/pci/devices/%s", root ? root : "/sys", name);
    char v[SYSFS_VALUE_MAX + 1];
    int numa = -1;
    unsigned cls = 0;
    if (ret_numa_node) {
        int r = read_attr(dir, "numa_node", v, sizeof(v), e);
        if (r < 0)
            return r;
        if (parse_int(v, &numa) < 0 || numa < -1)
            return err_set(e, -EINVAL, "%s/numa_node: \"%s\" is not a NUMA node number", dir, v);
    }
    if (ret_pci_class) {
        int r = read_attr(dir, "class", v, sizeof(v), e);
        if (r < 0)
            return r;
        uint64_t c;
        if (parse_u64(v, &c) < 0 || c > 0xffffff)
            return err_set(e, -EINVAL, "%s/class: \"%s\" is not a PCI class code", dir, v);
        cls = (unsigned)(c >> 8); /* 0x030200: class 03, subclass 02, prog-if 00 */
    }
    if (ret_numa_node)
        *ret_numa_node = numa;
    if (ret_pci_class)
        *ret_pci_class = cls;
    return 0;
}

/* ---- vGPU: NVIDIA's vendor-specific PCI capability ----------------------------------------- */

#define PCI_STATUS          0x06
#define PCI_STATUS_CAP_LIST 0x10
#define PCI_CAPABILITY_LIST 0x34
#define PCI_CAP_ID_VNDR     0x09
#define PCI_CONFIG_MIN      256 /* what an unprivileged read of config misses */
#define VGPU_RECORDS        5   /* after id, next, length and the "VF" signature */
#define VGPU_FIELD          10  /* host driver version, then branch: 10 bytes each, NUL-padded */

static void vgpu_field(const uint8_t *p, char *out)
{
    size_t n = 0;
    for (size_t i = 0; i < VGPU_FIELD; i++)
        if (p[i] != 0 && isprint(p[i]))
            out[n++] = (char)p[i];
    out[n] = '\0';
}

int gpu_pci_vgpu_parse(const uint8_t *config, size_t len, struct gpu_vgpu_info *ret)
{
    if (len < PCI_CONFIG_MIN)
        return -EINVAL;
    if (!(config[PCI_STATUS] & PCI_STATUS_CAP_LIST))
        return 0;
    bool seen[PCI_CONFIG_MIN] = {false};
    size_t pos = config[PCI_CAPABILITY_LIST];
    const uint8_t *cap = NULL;
    size_t cap_len = 0;
    while (pos != 0 && pos + 3 <= len && !seen[pos % PCI_CONFIG_MIN]) {
        seen[pos % PCI_CONFIG_MIN] = true;
        uint8_t id = config[pos], next = config[pos + 1], clen = config[pos + 2];
        if (id == 0xff)
            break;
        if (id == PCI_CAP_ID_VNDR) {
            cap = config + pos;
            cap_len = pos + clen <= len ? clen : len - pos;
            break;
        }
        pos = next;
    }
    if (!cap || cap_len < VGPU_RECORDS || cap[3] != 'V' || cap[4] != 'F')
        return 0;
    struct gpu_vgpu_info v = {.present = true};
    /* records of (id, length, data); the host driver record has id 0 */
    size_t at = VGPU_RECORDS;
    while (at < cap_len && cap[at] != 0) {
        if (at + 1 >= cap_len || cap[at + 1] == 0)
            break;
        at += cap[at + 1];
    }
    if (at < cap_len && cap[at] == 0 && at + 2 + 2 * VGPU_FIELD <= cap_len) {
        vgpu_field(cap + at + 2, v.host_driver_version);
        vgpu_field(cap + at + 2 + VGPU_FIELD, v.host_driver_branch);
    }
    *ret = v;
    return 1;
}

#define PCI_CONFIG_MAX 4096

int gpu_sysfs_vgpu(struct gpu_vgpu_info *ret, struct err *e)
{
    const char *root = env_get("GPUOP_SYSFS_ROOT");
    _cleanup_free_ char *dir = xasprintf("%s/bus/pci/devices", root ? root : "/sys");
    _cleanup_(closedirp) DIR *d = opendir(dir);
    if (!d)
        return err_errno(e, -errno, "list PCI devices \"%s\"", dir);
    struct gpu_vgpu_info found = {0};
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        _cleanup_free_ char *dev = xasprintf("%s/%s", dir, de->d_name);
        char vendor[SYSFS_VALUE_MAX + 1];
        int r = read_attr(dev, "vendor", vendor, sizeof(vendor), e);
        if (r < 0)
            return r;
        if (strcasecmp(vendor, "0x10de") != 0)
            continue;
        _cleanup_free_ char *path = xasprintf("%s/config", dev);
        _cleanup_free_ char *config = NULL;
        size_t len = 0;
        if ((r = file_read_all(path, PCI_CONFIG_MAX, &config, &len, e)) < 0)
            return r;
        struct gpu_vgpu_info v;
        r = gpu_pci_vgpu_parse((const uint8_t *)config, len, &v);
        if (r < 0)
            return err_set(e, r,
                           "%s: %zu bytes of PCI configuration space, not the whole (at least %d): "
                           "reading it needs privileges",
                           path, len, PCI_CONFIG_MIN);
        if (r > 0 && !found.present)
            found = v;
    }
    *ret = found;
    return 0;
}
