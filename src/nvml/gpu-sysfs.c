/* SPDX-License-Identifier: Apache-2.0 */
/* PCI facts NVML does not give (NUMA node, PCI class), read from sysfs through the bus id. */
#include <ctype.h>
#include <string.h>

#include "nvml-internal.h"

#define SYSFS_VALUE_MAX 64

static int hex_field(const char *s, size_t len, unsigned max, unsigned *ret)
{
    uint64_t v;
    if (len > 8 || hex_parse(s, len, &v) < 0)
        return -EINVAL;
    if (v > max)
        return -ERANGE;
    *ret = (unsigned)v;
    return 0;
}

int nv_bus_id_parse(const char *s, unsigned *domain, unsigned *bus, unsigned *dev, unsigned *fn)
{
    if (!s)
        return -EINVAL;
    const char *c1 = strchr(s, ':');
    const char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    const char *dot = c2 ? strchr(c2 + 1, '.') : NULL;
    if (!dot)
        return -EINVAL;
    unsigned d, b, v, f;
    if (hex_field(s, (size_t)(c1 - s), UINT32_MAX, &d) < 0 ||
        hex_field(c1 + 1, (size_t)(c2 - c1 - 1), 0xff, &b) < 0 ||
        hex_field(c2 + 1, (size_t)(dot - c2 - 1), 0x1f, &v) < 0 ||
        hex_field(dot + 1, strlen(dot + 1), 7, &f) < 0)
        return -EINVAL;
    *domain = d;
    *bus = b;
    *dev = v;
    *fn = f;
    return 0;
}

int gpu_bus_id_sysfs(const char *bus_id, char *buf, size_t n)
{
    unsigned d, b, v, f;
    if (nv_bus_id_parse(bus_id, &d, &b, &v, &f) < 0)
        return -EINVAL;
    int w = snprintf(buf, n, "%04x:%02x:%02x.%x", d, b, v, f);
    return w < 0 || (size_t)w >= n ? -ENOBUFS : 0;
}

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
