/* SPDX-License-Identifier: Apache-2.0 */
/* NUMA node and PCI class through the bus id, from a fake sysfs tree (GPUOP_SYSFS_ROOT). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "gpu.h"

static char root[] = "/tmp/gpuop-sysfs-XXXXXX";

static void put(const char *dev, const char *file, const char *content)
{
    _cleanup_free_ char *dir = xasprintf("%s/bus/pci/devices/%s", root, dev);
    assert_int_equal(mkdir_p(dir, 0755), 0);
    _cleanup_free_ char *path = xasprintf("%s/%s", dir, file);
    struct err e = {0};
    assert_int_equal(file_write_atomic(path, content, strlen(content), 0644, &e), 0);
}

static int setup(void **state)
{
    (void)state;
    if (!mkdtemp(root))
        return -1;
    setenv("GPUOP_SYSFS_ROOT", root, 1);
    put("0000:18:00.0", "numa_node", "0\n");
    put("0000:18:00.0", "class", "0x030200\n");
    put("0000:c1:00.0", "numa_node", "1\n");
    put("0000:c1:00.0", "class", "0x030000\n");
    put("0001:0a:1f.3", "numa_node", "-1\n");
    put("0001:0a:1f.3", "class", "0x030200\n");
    put("0000:20:00.0", "numa_node", "north\n");
    put("0000:20:00.0", "class", "vga\n");
    put("0000:21:00.0", "class", "0x030200\n"); /* no numa_node */
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    _cleanup_free_ char *cmd = xasprintf("rm -rf '%s'", root);
    return system(cmd) == 0 ? 0 : -1;
}

static void bus_id_forms(void **state)
{
    (void)state;
    char buf[GPU_BUSID_MAX];
    assert_int_equal(gpu_bus_id_sysfs("00000000:18:00.0", buf, sizeof(buf)), 0);
    assert_string_equal(buf, "0000:18:00.0");
    assert_int_equal(gpu_bus_id_sysfs("00000000:C1:00.0", buf, sizeof(buf)), 0);
    assert_string_equal(buf, "0000:c1:00.0");
    assert_int_equal(gpu_bus_id_sysfs("0001:0A:1F.3", buf, sizeof(buf)), 0);
    assert_string_equal(buf, "0001:0a:1f.3");
    assert_int_equal(gpu_bus_id_sysfs("", buf, sizeof(buf)), -EINVAL);
    assert_int_equal(gpu_bus_id_sysfs("0000:18:00", buf, sizeof(buf)), -EINVAL);
    assert_int_equal(gpu_bus_id_sysfs("0000:1G:00.0", buf, sizeof(buf)), -EINVAL);
    assert_int_equal(gpu_bus_id_sysfs("0000:180:00.0", buf, sizeof(buf)), -EINVAL);
    assert_int_equal(gpu_bus_id_sysfs("0000:18:00.9", buf, sizeof(buf)), -EINVAL);
    assert_int_equal(gpu_bus_id_sysfs("0000:18:00.0", buf, 5), -ENOBUFS);
}

static void reads_numa_and_class(void **state)
{
    (void)state;
    struct err e = {0};
    int numa = 42;
    unsigned cls = 42;
    assert_int_equal(gpu_sysfs_pci("00000000:18:00.0", &numa, &cls, &e), 0);
    assert_int_equal(numa, 0);
    assert_int_equal(cls, 0x0302);
    assert_int_equal(gpu_sysfs_pci("00000000:C1:00.0", &numa, &cls, &e), 0);
    assert_int_equal(numa, 1);
    assert_int_equal(cls, 0x0300);
    assert_int_equal(gpu_sysfs_pci("00000001:0A:1F.3", &numa, NULL, &e), 0);
    assert_int_equal(numa, -1);
    assert_int_equal(gpu_sysfs_pci("00000000:21:00.0", NULL, &cls, &e), 0);
    assert_int_equal(cls, 0x0302);
}

static void bad_input(void **state)
{
    (void)state;
    struct err e = {0};
    int numa = 42;
    unsigned cls = 42;
    assert_int_equal(gpu_sysfs_pci("00000000:99:00.0", &numa, &cls, &e), -ENOENT);
    assert_non_null(strstr(err_msg(&e), "0000:99:00.0/numa_node"));
    assert_int_equal(gpu_sysfs_pci("00000000:20:00.0", &numa, NULL, &e), -EINVAL);
    assert_non_null(strstr(err_msg(&e), "\"north\" is not a NUMA node number"));
    assert_int_equal(gpu_sysfs_pci("00000000:20:00.0", NULL, &cls, &e), -EINVAL);
    assert_non_null(strstr(err_msg(&e), "class: \"vga\""));
    assert_int_equal(gpu_sysfs_pci("00000000:21:00.0", &numa, &cls, &e), -ENOENT);
    assert_int_equal(gpu_sysfs_pci("not-a-bus", &numa, &cls, &e), -EINVAL);
    assert_non_null(strstr(err_msg(&e), "\"not-a-bus\""));
    assert_int_equal(numa, 42); /* outputs untouched on failure */
    assert_int_equal(cls, 42);
}

/* A 256-byte configuration space with the capability list on, and at 0xd8 a vendor-specific
 * capability: "VF" and a host-driver record (id 0) when vgpu is true, else another vendor's. */
static void make_config(uint8_t *c, bool vgpu, bool with_record)
{
    memset(c, 0, 256);
    c[0] = 0xde, c[1] = 0x10; /* vendor */
    c[0x06] = 0x10;           /* status: capabilities list */
    c[0x34] = 0x60;
    c[0x60] = 0x01, c[0x61] = 0xd8, c[0x62] = 0x08; /* power management, then 0xd8 */
    uint8_t *v = c + 0xd8;
    v[0] = 0x09, v[1] = 0x00, v[2] = 0x1b;
    v[3] = vgpu ? 'V' : 'X', v[4] = vgpu ? 'F' : 'Y';
    if (with_record) {
        v[5] = 0x00, v[6] = 0x16;
        memcpy(v + 7, "535.161", 7);
        memcpy(v + 17, "r535_10", 7);
    } else {
        v[5] = 0x07, v[6] = 0x1b; /* a record of another kind spanning the rest */
    }
}

static void vgpu_parse(void **state)
{
    (void)state;
    uint8_t c[256];
    struct gpu_vgpu_info v;
    make_config(c, true, true);
    assert_int_equal(gpu_pci_vgpu_parse(c, sizeof(c), &v), 1);
    assert_true(v.present);
    assert_string_equal(v.host_driver_version, "535.161");
    assert_string_equal(v.host_driver_branch, "r535_10");
    make_config(c, true, false); /* a vGPU without the host driver record */
    assert_int_equal(gpu_pci_vgpu_parse(c, sizeof(c), &v), 1);
    assert_string_equal(v.host_driver_version, "");
    make_config(c, false, true); /* passthrough: another vendor-specific capability */
    assert_int_equal(gpu_pci_vgpu_parse(c, sizeof(c), &v), 0);
    make_config(c, true, true);
    c[0x06] = 0; /* no capability list */
    assert_int_equal(gpu_pci_vgpu_parse(c, sizeof(c), &v), 0);
    make_config(c, true, true);
    c[0x61] = 0x60; /* a chain that loops */
    assert_int_equal(gpu_pci_vgpu_parse(c, sizeof(c), &v), 0);
    make_config(c, true, true);
    c[0x34] = 0xfe; /* a capability at the very end */
    assert_int_equal(gpu_pci_vgpu_parse(c, sizeof(c), &v), 0);
    make_config(c, true, true);
    c[0xd8 + 2] = 0xff; /* a length past the end is cut at the end */
    assert_int_equal(gpu_pci_vgpu_parse(c, sizeof(c), &v), 1);
    make_config(c, true, false);
    c[0xd8 + 6] = 0; /* a zero-length record does not loop */
    assert_int_equal(gpu_pci_vgpu_parse(c, sizeof(c), &v), 1);
    assert_int_equal(gpu_pci_vgpu_parse(c, 64, &v), -EINVAL); /* unprivileged read */
}

static void put_bytes(const char *base, const char *dev, const char *file, const void *data,
                      size_t n)
{
    _cleanup_free_ char *dir = xasprintf("%s/bus/pci/devices/%s", base, dev);
    assert_int_equal(mkdir_p(dir, 0755), 0);
    _cleanup_free_ char *path = xasprintf("%s/%s", dir, file);
    struct err e = {0};
    assert_int_equal(file_write_atomic(path, data, n, 0644, &e), 0);
}

static void vgpu_sysfs(void **state)
{
    (void)state;
    _cleanup_free_ char *base = xasprintf("%s/vgpu", root);
    setenv("GPUOP_SYSFS_ROOT", base, 1);
    struct gpu_vgpu_info v;
    struct err e = {0};
    assert_int_equal(gpu_sysfs_vgpu(&v, &e), -ENOENT); /* nothing to list */
    assert_non_null(strstr(e.msg, "bus/pci/devices"));
    uint8_t c[256];
    make_config(c, false, true);
    put_bytes(base, "0000:00:01.0", "vendor", "0x8086\n", 7); /* not NVIDIA: not read further */
    put_bytes(base, "0000:18:00.0", "vendor", "0x10de\n", 7);
    put_bytes(base, "0000:18:00.0", "config", c, sizeof(c));
    assert_int_equal(gpu_sysfs_vgpu(&v, &e), 0);
    assert_false(v.present);
    make_config(c, true, true);
    put_bytes(base, "0000:19:00.0", "vendor", "0x10de\n", 7);
    put_bytes(base, "0000:19:00.0", "config", c, sizeof(c));
    assert_int_equal(gpu_sysfs_vgpu(&v, &e), 0);
    assert_true(v.present);
    assert_string_equal(v.host_driver_branch, "r535_10");
    put_bytes(base, "0000:1a:00.0", "vendor", "0x10de\n", 7);
    put_bytes(base, "0000:1a:00.0", "config", c, 64);
    assert_int_equal(gpu_sysfs_vgpu(&v, &e), -EINVAL);
    assert_non_null(strstr(e.msg, "0000:1a:00.0/config"));
    setenv("GPUOP_SYSFS_ROOT", root, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(bus_id_forms), cmocka_unit_test(reads_numa_and_class),
        cmocka_unit_test(bad_input),    cmocka_unit_test(vgpu_parse),
        cmocka_unit_test(vgpu_sysfs),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
