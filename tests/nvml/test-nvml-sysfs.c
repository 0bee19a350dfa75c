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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(bus_id_forms),
        cmocka_unit_test(reads_numa_and_class),
        cmocka_unit_test(bad_input),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
