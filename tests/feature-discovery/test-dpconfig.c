/* SPDX-License-Identifier: Apache-2.0 */
/* Table tests of the device-plugin config: parsing, validation errors, warnings, precedence. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dpconfig.h"

static struct dpconfig *parse_ok(const char *text)
{
    struct dpconfig *c = NULL;
    struct err e = {0};
    int r = dpconfig_parse(text, strlen(text), "cfg.yaml", &c, &e);
    if (r < 0)
        fail_msg("parse failed: %s\n--- input:\n%s", err_msg(&e), text);
    return c;
}

/* Parsing fails and the message contains every fragment. */
static void parse_fails(const char *text, const char *frag1, const char *frag2)
{
    struct dpconfig *c = NULL;
    struct err e = {0};
    int r = dpconfig_parse(text, strlen(text), "cfg.yaml", &c, &e);
    if (r == 0) {
        dpconfig_free(c);
        fail_msg("parse of\n%s\nsucceeded, want an error with \"%s\"", text, frag1);
    }
    assert_null(c);
    const char *m = err_msg(&e);
    if (!str_has_prefix(m, "cfg.yaml"))
        fail_msg("error \"%s\" does not name the file", m);
    if (frag1 && !strstr(m, frag1))
        fail_msg("error \"%s\" lacks \"%s\"", m, frag1);
    if (frag2 && !strstr(m, frag2))
        fail_msg("error \"%s\" lacks \"%s\"", m, frag2);
}

static bool has_warning(const struct dpconfig *c, const char *frag)
{
    for (size_t i = 0; i < c->n_warnings; i++)
        if (strstr(c->warnings[i], frag))
            return true;
    return false;
}

static void test_defaults(void **state)
{
    (void)state;
    struct dpconfig *c = dpconfig_new();
    assert_int_equal(c->mig_strategy, DPCONFIG_MIG_NONE);
    assert_true(c->fail_on_init_error);
    assert_string_equal(c->nvidia_driver_root, "/");
    assert_null(c->nvidia_dev_root);
    assert_null(c->mps_root);
    assert_false(c->gdrcopy_enabled || c->gds_enabled || c->mofed_enabled);
    assert_int_equal(c->device_discovery_strategy, DPCONFIG_DISCOVERY_AUTO);
    assert_false(c->plugin.pass_device_specs);
    assert_int_equal(c->plugin.device_list_strategy, DPCONFIG_LIST_VOLUME_MOUNTS);
    assert_int_equal(c->plugin.device_id_strategy, DPCONFIG_DEVICE_ID_UUID);
    assert_string_equal(c->plugin.cdi_annotation_prefix, "cdi.k8s.io/");
    assert_string_equal(c->plugin.nvidia_ctk_path, "/usr/bin/nvidia-ctk");
    assert_string_equal(c->plugin.container_driver_root, "/driver-root");
    assert_int_equal(c->plugin.shared_devices_allocation_policy, DPCONFIG_ALLOC_DISTRIBUTED);
    assert_false(c->gfd.oneshot);
    assert_false(c->gfd.no_timestamp);
    assert_int_equal(c->gfd.sleep_interval_ms, 60000);
    assert_string_equal(c->gfd.output_file,
                        "/etc/kubernetes/node-feature-discovery/features.d/gfd");
    assert_string_equal(c->gfd.machine_type_file, "/sys/class/dmi/id/product_name");
    assert_int_equal(dpconfig_sharing_strategy(c), DPCONFIG_SHARING_NONE);
    assert_int_equal(dpconfig_replica_count(c, "nvidia.com/gpu"), 1);
    assert_int_equal(c->n_warnings, 0);
    dpconfig_free(c);
    dpconfig_free(NULL);

    /* an empty file, a bare version, and null sections are the defaults too */
    static const char *const empties[] = {"", "version: v1\n", "flags:\nsharing:\n", "{}",
                                          "# nothing\n"};
    for (size_t i = 0; i < ARRAY_SIZE(empties); i++) {
        c = parse_ok(empties[i]);
        assert_int_equal(c->mig_strategy, DPCONFIG_MIG_NONE);
        assert_true(c->fail_on_init_error);
        dpconfig_free(c);
    }
}

static void test_full_yaml(void **state)
{
    (void)state;
    struct dpconfig *c = parse_ok("version: v1\n"
                                  "flags:\n"
                                  "  migStrategy: mixed\n"
                                  "  failOnInitError: false\n"
                                  "  nvidiaDriverRoot: /run/nvidia/driver\n"
                                  "  nvidiaDevRoot: /dev-root\n"
                                  "  mpsRoot: /run/nvidia/mps\n"
                                  "  gdrcopyEnabled: true\n"
                                  "  gdsEnabled: true\n"
                                  "  mofedEnabled: true\n"
                                  "  useNodeFeatureAPI: true\n"
                                  "  deviceDiscoveryStrategy: nvml\n"
                                  "  plugin:\n"
                                  "    passDeviceSpecs: true\n"
                                  "    deviceListStrategy: [envvar, cdi-cri]\n"
                                  "    deviceIDStrategy: index\n"
                                  "    cdiAnnotationPrefix: cdi.example.com/\n"
                                  "    nvidiaCTKPath: /opt/nvidia-ctk\n"
                                  "    containerDriverRoot: /drv\n"
                                  "    sharedDevicesAllocationPolicy: packed\n"
                                  "  gfd:\n"
                                  "    oneshot: true\n"
                                  "    noTimestamp: true\n"
                                  "    sleepInterval: 30s\n"
                                  "    outputFile: /tmp/out\n"
                                  "    machineTypeFile: /tmp/machine\n"
                                  "sharing:\n"
                                  "  timeSlicing:\n"
                                  "    failRequestsGreaterThanOne: true\n"
                                  "    resources:\n"
                                  "    - name: nvidia.com/gpu\n"
                                  "      replicas: 4\n"
                                  "    - name: mig-1g.10gb\n"
                                  "      replicas: 2\n"
                                  "imex:\n"
                                  "  channelIDs: [0]\n"
                                  "  required: true\n");
    assert_int_equal(c->mig_strategy, DPCONFIG_MIG_MIXED);
    assert_false(c->fail_on_init_error);
    assert_string_equal(c->nvidia_driver_root, "/run/nvidia/driver");
    assert_string_equal(c->nvidia_dev_root, "/dev-root");
    assert_string_equal(c->mps_root, "/run/nvidia/mps");
    assert_true(c->gdrcopy_enabled && c->gds_enabled && c->mofed_enabled);
    assert_true(c->use_node_feature_api);
    assert_int_equal(c->device_discovery_strategy, DPCONFIG_DISCOVERY_NVML);
    assert_true(c->plugin.pass_device_specs);
    assert_int_equal(c->plugin.device_list_strategy, DPCONFIG_LIST_ENVVAR | DPCONFIG_LIST_CDI_CRI);
    assert_int_equal(c->plugin.device_id_strategy, DPCONFIG_DEVICE_ID_INDEX);
    assert_string_equal(c->plugin.cdi_annotation_prefix, "cdi.example.com/");
    assert_string_equal(c->plugin.nvidia_ctk_path, "/opt/nvidia-ctk");
    assert_string_equal(c->plugin.container_driver_root, "/drv");
    assert_int_equal(c->plugin.shared_devices_allocation_policy, DPCONFIG_ALLOC_PACKED);
    assert_true(c->gfd.oneshot && c->gfd.no_timestamp);
    assert_int_equal(c->gfd.sleep_interval_ms, 30000);
    assert_string_equal(c->gfd.output_file, "/tmp/out");
    assert_string_equal(c->gfd.machine_type_file, "/tmp/machine");
    assert_true(c->time_slicing.present);
    assert_false(c->mps.present);
    assert_true(c->time_slicing.fail_requests_greater_than_one);
    assert_int_equal(c->time_slicing.n_resources, 2);
    assert_string_equal(c->time_slicing.resources[0].name, "nvidia.com/gpu");
    assert_int_equal(c->time_slicing.resources[0].replicas, 4);
    assert_null(c->time_slicing.resources[0].rename);
    assert_string_equal(c->time_slicing.resources[1].name, "nvidia.com/mig-1g.10gb");
    assert_int_equal(c->imex.n_channel_ids, 1);
    assert_int_equal(c->imex.channel_ids[0], 0);
    assert_true(c->imex.required);
    assert_int_equal(c->n_warnings, 0);
    assert_int_equal(dpconfig_sharing_strategy(c), DPCONFIG_SHARING_TIME_SLICING);
    assert_int_equal(dpconfig_replica_count(c, "nvidia.com/gpu"), 4);
    assert_int_equal(dpconfig_replica_count(c, "gpu"), 4);
    assert_int_equal(dpconfig_replica_count(c, "nvidia.com/mig-1g.10gb"), 2);
    assert_int_equal(dpconfig_replica_count(c, "nvidia.com/mig-2g.20gb"), 1);
    dpconfig_free(c);
}

static void test_json_and_list_forms(void **state)
{
    (void)state;
    struct dpconfig *c = parse_ok(
        "{\"version\": \"v1\", \"flags\": {\"migStrategy\": \"single\", \"plugin\": "
        "{\"deviceListStrategy\": \"volume-mounts\"}, \"gfd\": {\"sleepInterval\": "
        "\"infinite\"}}, \"sharing\": {\"mps\": {\"resources\": [{\"name\": \"nvidia.com/gpu\", "
        "\"replicas\": 3}]}}}");
    assert_int_equal(c->mig_strategy, DPCONFIG_MIG_SINGLE);
    assert_int_equal(c->plugin.device_list_strategy, DPCONFIG_LIST_VOLUME_MOUNTS);
    assert_int_equal(c->gfd.sleep_interval_ms, UINT64_MAX);
    /* MPS: failRequestsGreaterThanOne defaults to true */
    assert_true(c->mps.fail_requests_greater_than_one);
    assert_int_equal(dpconfig_sharing_strategy(c), DPCONFIG_SHARING_MPS);
    assert_string_equal(dpconfig_sharing_strategy_name(dpconfig_sharing_strategy(c)), "mps");
    dpconfig_free(c);

    c = parse_ok("flags:\n  plugin:\n    deviceListStrategy:\n    - cdi-annotations\n"
                 "    - envvar\n  gfd:\n    sleepInterval: 5000000000\n");
    assert_int_equal(c->plugin.device_list_strategy,
                     DPCONFIG_LIST_CDI_ANNOTATIONS | DPCONFIG_LIST_ENVVAR);
    assert_int_equal(c->gfd.sleep_interval_ms, 5000); /* plain numbers are nanoseconds */
    dpconfig_free(c);

    /* time-slicing's failRequestsGreaterThanOne defaults to false; MPS's may be turned off */
    c = parse_ok("sharing:\n  timeSlicing:\n    resources: [{name: gpu, replicas: 2}]\n"
                 "  mps:\n    failRequestsGreaterThanOne: false\n"
                 "    resources: [{name: gpu, replicas: 2}]\n");
    assert_false(c->time_slicing.fail_requests_greater_than_one);
    assert_false(c->mps.fail_requests_greater_than_one);
    assert_int_equal(dpconfig_sharing_strategy(c), DPCONFIG_SHARING_MPS); /* MPS wins */
    assert_ptr_equal(dpconfig_active_sharing(c), &c->mps);
    dpconfig_free(c);
}

static void test_version(void **state)
{
    (void)state;
    parse_fails("version: v2\n", "version", "unknown version");
    parse_fails("version: 1\n", "version", "expected a string");
    struct dpconfig *c = parse_ok("version: v1\nflags: {migStrategy: single}\n");
    assert_int_equal(c->mig_strategy, DPCONFIG_MIG_SINGLE);
    dpconfig_free(c);
}

static void test_unknown_keys(void **state)
{
    (void)state;
    static const char *const table[][2] = {
        {"bogus: 1\n", "bogus: unknown field"},
        {"flags:\n  migStratgy: single\n", "flags.migStratgy: unknown field"},
        {"flags:\n  plugin:\n    passDevSpecs: true\n", "flags.plugin.passDevSpecs: unknown"},
        {"flags:\n  gfd:\n    oneShot: true\n", "flags.gfd.oneShot: unknown field"},
        {"sharing:\n  timeslicing: {}\n", "sharing.timeslicing: unknown field"},
        {"sharing:\n  mps:\n    resources:\n    - {name: gpu, replicas: 2, foo: 1}\n",
         "sharing.mps.resources[0].foo: unknown field"},
        {"sharing:\n  timeSlicing:\n    renameDefault: true\n    resources: []\n",
         "sharing.timeSlicing.renameDefault: unknown field"},
        {"resources:\n  gpu: []\n", "resources.gpu: unknown field"},
        {"imex:\n  channels: [0]\n", "imex.channels: unknown field"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(table); i++)
        parse_fails(table[i][0], table[i][1], NULL);
}

static void test_bad_values(void **state)
{
    (void)state;
    static const char *const table[][3] = {
        {"flags: {migStrategy: bogus}\n", "flags.migStrategy", "unknown MIG strategy \"bogus\""},
        {"flags: {migStrategy: 1}\n", "flags.migStrategy", "expected a string"},
        {"flags: {failOnInitError: maybe}\n", "flags.failOnInitError", "not a boolean"},
        {"flags: {failOnInitError: 3}\n", "flags.failOnInitError", "expected true or false"},
        {"flags: {nvidiaDriverRoot: [a]}\n", "flags.nvidiaDriverRoot", "expected a string"},
        {"flags: {deviceDiscoveryStrategy: gpu}\n", "flags.deviceDiscoveryStrategy",
         "auto|nvml|tegra"},
        {"flags: {plugin: {deviceIDStrategy: serial}}\n", "flags.plugin.deviceIDStrategy",
         "uuid|index"},
        {"flags: {plugin: {deviceListStrategy: nope}}\n", "flags.plugin.deviceListStrategy",
         "invalid device list strategy \"nope\""},
        {"flags: {plugin: {deviceListStrategy: [envvar, nope]}}\n",
         "flags.plugin.deviceListStrategy[1]", "nope"},
        {"flags: {plugin: {deviceListStrategy: [envvar, 3]}}\n",
         "flags.plugin.deviceListStrategy[1]", "expected a string"},
        {"flags: {plugin: {deviceListStrategy: []}}\n", "flags.plugin.deviceListStrategy",
         "no device list strategy"},
        {"flags: {plugin: {deviceListStrategy: {a: b}}}\n", "flags.plugin.deviceListStrategy",
         "a string or a list"},
        {"flags: {plugin: {sharedDevicesAllocationPolicy: spread}}\n",
         "flags.plugin.sharedDevicesAllocationPolicy", "distributed|packed"},
        {"flags: {plugin: 3}\n", "flags.plugin", "expected a mapping"},
        {"flags: [1]\n", "flags", "expected a mapping"},
        {"flags: {gfd: {sleepInterval: soon}}\n", "flags.gfd.sleepInterval", "not a duration"},
        {"flags: {gfd: {sleepInterval: 0s}}\n", "flags.gfd.sleepInterval", "positive"},
        {"flags: {gfd: {sleepInterval: 10}}\n", "flags.gfd.sleepInterval", "nanoseconds"},
        {"flags: {gfd: {sleepInterval: -5}}\n", "flags.gfd.sleepInterval", "positive"},
        {"flags: {gfd: {oneshot: yes please}}\n", "flags.gfd.oneshot", "not a boolean"},
        {"imex: {channelIDs: [1]}\n", "imex.channelIDs", "[] or [0]"},
        {"imex: {channelIDs: [0, 1]}\n", "imex.channelIDs", "[] or [0]"},
        {"imex: {channelIDs: 0}\n", "imex.channelIDs", "expected a list"},
        {"imex: {required: 2}\n", "imex.required", "expected true or false"},
        {"- a\n- b\n", "(top level)", "expected a mapping"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(table); i++)
        parse_fails(table[i][0], table[i][1], table[i][2]);
}

static void test_sharing_errors(void **state)
{
    (void)state;
    static const char *const table[][3] = {
        {"sharing:\n  timeSlicing: {}\n", "sharing.timeSlicing.resources",
         "no resources specified"},
        {"sharing:\n  mps:\n    resources: []\n", "sharing.mps.resources",
         "no resources specified"},
        {"sharing:\n  timeSlicing:\n    resources: {name: gpu}\n", "sharing.timeSlicing.resources",
         "expected a list"},
        {"sharing:\n  timeSlicing:\n    resources:\n    - name: gpu\n      replicas: 1\n",
         "sharing.timeSlicing.resources[0].replicas", "number of replicas must be >= 2"},
        {"sharing:\n  timeSlicing:\n    resources:\n    - name: gpu\n      replicas: 0\n",
         "resources[0].replicas", "number of replicas must be >= 2"},
        {"sharing:\n  timeSlicing:\n    resources:\n    - name: gpu\n      replicas: -3\n",
         "resources[0].replicas", "number of replicas must be >= 2"},
        {"sharing:\n  timeSlicing:\n    resources:\n    - name: gpu\n      replicas: many\n",
         "resources[0].replicas", "expected an integer"},
        {"sharing:\n  timeSlicing:\n    resources:\n    - name: gpu\n      replicas: 100000\n",
         "resources[0].replicas", "more than gpuop supports"},
        {"sharing:\n  timeSlicing:\n    resources:\n    - name: gpu\n", "resources[0].replicas",
         "missing required field 'replicas'"},
        {"sharing:\n  timeSlicing:\n    resources:\n    - replicas: 2\n", "resources[0].name",
         "missing required field 'name'"},
        {"sharing:\n  timeSlicing:\n    resources:\n    - {name: 5, replicas: 2}\n",
         "resources[0].name", "expected a string"},
        {"sharing:\n  timeSlicing:\n    resources:\n    - {name: \"bad name!\", replicas: 2}\n",
         "resources[0].name", "invalid resource name"},
        {"sharing:\n  timeSlicing:\n    resources:\n"
         "    - {name: "
         "a-very-long-resource-name-that-goes-on-and-on-past-the-limit-xyz, replicas: 2}\n",
         "resources[0].name", "63 characters or less"},
        {"sharing:\n  timeSlicing:\n    resources:\n    - {name: gpu, replicas: 2, devices: "
         "some}\n",
         "resources[0].devices", "\"all\", a device count or a list"},
        {"sharing:\n  timeSlicing:\n    resources:\n    - {name: gpu, replicas: 2, devices: 0}\n",
         "resources[0].devices", "> 0"},
        {"sharing:\n  timeSlicing:\n    resources:\n    - {name: gpu, replicas: 2, devices: "
         "[\"0\", \"x:y\"]}\n",
         "resources[0].devices[1]", "unsupported device reference \"x:y\""},
        {"sharing:\n  timeSlicing:\n    resources:\n    - {name: gpu, replicas: 2, devices: "
         "[1]}\n",
         "resources[0].devices[0]", "an integer"},
        {"sharing:\n  timeSlicing:\n    resources:\n    - {name: gpu, replicas: 2, rename: 7}\n",
         "resources[0].rename", "expected a string"},
        {"sharing:\n  timeSlicing:\n    renameByDefault: yes-ish\n    resources: [{name: gpu, "
         "replicas: 2}]\n",
         "sharing.timeSlicing.renameByDefault", "expected true or false"},
        {"sharing:\n  mps:\n    failRequestsGreaterThanOne: 1\n    resources: [{name: gpu, "
         "replicas: 2}]\n",
         "sharing.mps.failRequestsGreaterThanOne", "expected true or false"},
        {"sharing:\n  timeSlicing:\n    resources:\n    - {name: gpu, replicas: 2}\n"
         "    - {name: nvidia.com/gpu, replicas: 4}\n",
         "sharing.timeSlicing.resources[1].name: resource \"nvidia.com/gpu\"",
         "is already given by sharing.timeSlicing.resources[0].name"},
        {"sharing:\n  mps:\n    resources:\n    - {name: gpu, replicas: 2}\n"
         "    - {name: other, replicas: 2}\n    - {name: gpu, replicas: 3}\n",
         "sharing.mps.resources[2].name", "already given by sharing.mps.resources[0].name"},
        {"sharing: 5\n", "sharing", "expected a mapping"},
        {"sharing:\n  timeSlicing:\n    resources:\n    - 3\n", "resources[0]",
         "expected a mapping"},
        {"resources:\n  gpus:\n  - {pattern: \"*\"}\n", "resources.gpus[0].name",
         "required field is missing"},
        {"resources:\n  mig:\n  - {pattern: 1, name: x}\n", "resources.mig[0].pattern",
         "expected a string"},
        {"resources:\n  gpus: {}\n", "resources.gpus", "expected a list"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(table); i++)
        parse_fails(table[i][0], table[i][1], table[i][2]);
}

static void test_forced_fields_and_warnings(void **state)
{
    (void)state;
    /* rename without renameByDefault: dropped, with NVIDIA's warning */
    struct dpconfig *c = parse_ok("sharing:\n  timeSlicing:\n    resources:\n"
                                  "    - {name: nvidia.com/gpu, replicas: 2, rename: "
                                  "nvidia.com/gpu.shared}\n");
    assert_null(c->time_slicing.resources[0].rename);
    assert_true(has_warning(c, "Setting the 'rename' field in sharing.timeSlicing.resources is "
                               "not yet supported in the config. Ignoring..."));
    dpconfig_free(c);

    /* renameByDefault gives <name>.shared, no warning */
    c = parse_ok("sharing:\n  mps:\n    renameByDefault: true\n    resources:\n"
                 "    - {name: gpu, replicas: 2}\n    - {name: mig-1g.10gb, replicas: 3}\n");
    assert_string_equal(c->mps.resources[0].rename, "nvidia.com/gpu.shared");
    assert_string_equal(c->mps.resources[1].rename, "nvidia.com/mig-1g.10gb.shared");
    assert_int_equal(c->n_warnings, 0);
    assert_string_equal(dpconfig_replicas_for(c, "nvidia.com/gpu")->rename,
                        "nvidia.com/gpu.shared");
    dpconfig_free(c);

    /* renameByDefault with a different rename: forced to .shared, warned */
    c = parse_ok("sharing:\n  mps:\n    renameByDefault: true\n    resources:\n"
                 "    - {name: gpu, replicas: 2, rename: gpu-other}\n");
    assert_string_equal(c->mps.resources[0].rename, "nvidia.com/gpu.shared");
    assert_true(has_warning(c, "sharing.mps.resources"));
    dpconfig_free(c);

    /* renameByDefault with the default rename spelled out: no warning */
    c = parse_ok("sharing:\n  mps:\n    renameByDefault: true\n    resources:\n"
                 "    - {name: gpu, replicas: 2, rename: gpu.shared}\n");
    assert_int_equal(c->n_warnings, 0);
    dpconfig_free(c);

    /* devices other than all: forced to all, warned; "all" alone is silent */
    c = parse_ok("sharing:\n  timeSlicing:\n    resources:\n"
                 "    - {name: gpu, replicas: 2, devices: [\"0\", \"1:0\", GPU-abc, "
                 "MIG-GPU-abc/1/0]}\n");
    assert_true(has_warning(c, "Customizing the 'devices' field in sharing.timeSlicing.resources "
                               "is not yet supported in the config. Ignoring..."));
    dpconfig_free(c);
    c = parse_ok("sharing:\n  timeSlicing:\n    resources:\n"
                 "    - {name: gpu, replicas: 2, devices: 3}\n");
    assert_int_equal(c->n_warnings, 1);
    dpconfig_free(c);
    c = parse_ok("sharing:\n  timeSlicing:\n    resources:\n"
                 "    - {name: gpu, replicas: 2, devices: all}\n");
    assert_int_equal(c->n_warnings, 0);
    dpconfig_free(c);

    /* resources: accepted, ignored, warned */
    c = parse_ok("resources:\n  gpus:\n  - {pattern: \"*\", name: gpu}\n"
                 "  mig:\n  - {pattern: \"1g.10gb\", name: mig-small}\n");
    assert_true(has_warning(c, "Customizing the 'resources' field is not yet supported in the "
                               "config. Ignoring..."));
    dpconfig_free(c);
    c = parse_ok("resources:\n  gpus: []\n");
    assert_int_equal(c->n_warnings, 0);
    dpconfig_free(c);
}

static void test_malformed_and_files(void **state)
{
    (void)state;
    parse_fails("flags: [unclosed\n", NULL, NULL);
    parse_fails("flags:\n  migStrategy: single\n bad-indent: x\n", NULL, NULL);

    struct dpconfig *c = NULL;
    struct err e = {0};
    assert_true(dpconfig_load_file("/nonexistent/dp.yaml", &c, &e) < 0);
    assert_null(c);
    assert_non_null(strstr(err_msg(&e), "/nonexistent/dp.yaml"));

    char path[] = "/tmp/gpuop-dpconfig-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    static const char body[] = "flags:\n  migStrategy: nonsense\n";
    assert_int_equal(write(fd, body, strlen(body)), (ssize_t)strlen(body));
    close(fd);
    assert_true(dpconfig_load_file(path, &c, &e) < 0);
    assert_true(str_has_prefix(err_msg(&e), path));
    assert_non_null(strstr(err_msg(&e), "flags.migStrategy"));
    unlink(path);
}

static void test_set(void **state)
{
    (void)state;
    struct dpconfig *c = dpconfig_new();
    struct err e = {0};
    assert_int_equal(dpconfig_set(c, "flags.migStrategy", "mixed", "--mig-strategy", &e), 0);
    assert_int_equal(c->mig_strategy, DPCONFIG_MIG_MIXED);
    assert_int_equal(dpconfig_set(c, "flags.migStrategy", "bogus", "--mig-strategy", &e), -EINVAL);
    assert_string_equal(err_msg(&e),
                        "--mig-strategy: unknown MIG strategy \"bogus\" (none|single|mixed)");
    assert_int_equal(c->mig_strategy, DPCONFIG_MIG_MIXED); /* unchanged */
    assert_int_equal(dpconfig_set(c, "flags.failOnInitError", "false", "X", &e), 0);
    assert_false(c->fail_on_init_error);
    assert_int_equal(dpconfig_set(c, "flags.failOnInitError", "nah", "X", &e), -EINVAL);
    assert_false(c->fail_on_init_error);
    assert_int_equal(dpconfig_set(c, "flags.plugin.deviceListStrategy", "envvar, cdi-cri", "X", &e),
                     0);
    assert_int_equal(c->plugin.device_list_strategy, DPCONFIG_LIST_ENVVAR | DPCONFIG_LIST_CDI_CRI);
    assert_int_equal(dpconfig_set(c, "flags.plugin.deviceListStrategy", "envvar,x", "X", &e),
                     -EINVAL);
    assert_int_equal(dpconfig_set(c, "flags.plugin.deviceListStrategy", ",", "X", &e), -EINVAL);
    assert_int_equal(c->plugin.device_list_strategy, DPCONFIG_LIST_ENVVAR | DPCONFIG_LIST_CDI_CRI);
    assert_int_equal(dpconfig_set(c, "flags.gfd.sleepInterval", "1m30s", "X", &e), 0);
    assert_int_equal(c->gfd.sleep_interval_ms, 90000);
    assert_int_equal(dpconfig_set(c, "flags.gfd.sleepInterval", "infinite", "X", &e), 0);
    assert_int_equal(c->gfd.sleep_interval_ms, UINT64_MAX);
    assert_int_equal(dpconfig_set(c, "flags.gfd.sleepInterval", "0", "X", &e), -EINVAL);
    assert_int_equal(dpconfig_set(c, "flags.gfd.sleepInterval", "", "X", &e), -EINVAL);
    assert_int_equal(dpconfig_set(c, "imex.channelIDs", "0", "X", &e), 0);
    assert_int_equal(c->imex.n_channel_ids, 1);
    assert_int_equal(dpconfig_set(c, "imex.channelIDs", "", "X", &e), 0);
    assert_int_equal(c->imex.n_channel_ids, 0);
    assert_int_equal(dpconfig_set(c, "imex.channelIDs", "0,1", "X", &e), -EINVAL);
    assert_int_equal(dpconfig_set(c, "imex.channelIDs", "z", "X", &e), -EINVAL);
    assert_int_equal(dpconfig_set(c, "flags.nope", "1", "--nope", &e), -EINVAL);
    assert_non_null(strstr(err_msg(&e), "unknown config field"));
    assert_int_equal(dpconfig_set(c, "flags.mpsRoot", NULL, "X", &e), -EINVAL);
    assert_int_equal(dpconfig_set(c, "flags.mpsRoot", "/mps", "X", &e), 0);
    assert_string_equal(c->mps_root, "/mps");
    dpconfig_free(c);

    enum dpconfig_mig_strategy s;
    assert_int_equal(dpconfig_parse_mig_strategy("single", &s), 0);
    assert_int_equal(s, DPCONFIG_MIG_SINGLE);
    assert_int_equal(dpconfig_parse_mig_strategy("Single", &s), -EINVAL);
    assert_string_equal(dpconfig_mig_strategy_name(DPCONFIG_MIG_MIXED), "mixed");
    assert_string_equal(dpconfig_device_id_strategy_name(DPCONFIG_DEVICE_ID_INDEX), "index");
    assert_string_equal(dpconfig_alloc_policy_name(DPCONFIG_ALLOC_PACKED), "packed");
    assert_string_equal(dpconfig_discovery_strategy_name(DPCONFIG_DISCOVERY_TEGRA), "tegra");
    assert_string_equal(dpconfig_sharing_strategy_name(DPCONFIG_SHARING_TIME_SLICING),
                        "time-slicing");
}

/* ---- precedence --------------------------------------------------------------------------- */

static const char *fake_env[16][2];

static const char *fake_getenv(const char *name)
{
    for (size_t i = 0; i < ARRAY_SIZE(fake_env) && fake_env[i][0]; i++)
        if (strcmp(fake_env[i][0], name) == 0)
            return fake_env[i][1];
    return NULL;
}

static size_t opt_index(const struct svc_option *opts, const char *flag)
{
    for (size_t i = 0; opts[i].field; i++)
        if (opts[i].flag && strcmp(opts[i].flag, flag) == 0)
            return i;
    fail_msg("no option --%s", flag);
    return 0;
}

static void test_precedence(void **state)
{
    (void)state;
    char path[] = "/tmp/gpuop-dpconfig-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    static const char body[] = "flags:\n"
                               "  migStrategy: single\n"
                               "  failOnInitError: false\n"
                               "  nvidiaDriverRoot: /file-root\n"
                               "  plugin:\n"
                               "    deviceIDStrategy: index\n"
                               "    passDeviceSpecs: true\n"
                               "  gfd:\n"
                               "    sleepInterval: 10s\n"
                               "    oneshot: false\n";
    assert_int_equal(write(fd, body, strlen(body)), (ssize_t)strlen(body));
    close(fd);

    const struct svc_option *po = dpconfig_plugin_options;
    const char *cli[64] = {0};
    memset(fake_env, 0, sizeof(fake_env));

    /* file only (named by the env var) */
    fake_env[0][0] = "CONFIG_FILE";
    fake_env[0][1] = path;
    struct dpconfig *c = NULL;
    struct err e = {0};
    const char *used = NULL;
    assert_int_equal(dpconfig_resolve(po, cli, fake_getenv, &c, &used, &e), 0);
    assert_string_equal(used, path);
    assert_int_equal(c->mig_strategy, DPCONFIG_MIG_SINGLE);
    assert_false(c->fail_on_init_error);
    assert_string_equal(c->nvidia_driver_root, "/file-root");
    assert_string_equal(c->nvidia_dev_root, "/file-root"); /* derived default */
    assert_int_equal(c->plugin.device_id_strategy, DPCONFIG_DEVICE_ID_INDEX);
    dpconfig_free(c);

    /* env over file */
    fake_env[1][0] = "MIG_STRATEGY";
    fake_env[1][1] = "mixed";
    fake_env[2][0] = "PASS_DEVICE_SPECS";
    fake_env[2][1] = "false";
    fake_env[3][0] = "NVIDIA_DRIVER_ROOT";
    fake_env[3][1] = "/env-root";
    assert_int_equal(dpconfig_resolve(po, cli, fake_getenv, &c, NULL, &e), 0);
    assert_int_equal(c->mig_strategy, DPCONFIG_MIG_MIXED);
    assert_false(c->plugin.pass_device_specs);
    assert_string_equal(c->nvidia_driver_root, "/env-root");
    assert_string_equal(c->nvidia_dev_root, "/env-root");
    assert_int_equal(c->plugin.device_id_strategy, DPCONFIG_DEVICE_ID_INDEX); /* file */
    dpconfig_free(c);

    /* CLI over env over file; --driver-root is an alias */
    cli[opt_index(po, "mig-strategy")] = "none";
    cli[opt_index(po, "driver-root")] = "/cli-root";
    cli[opt_index(po, "device-list-strategy")] = "cdi-cri";
    cli[opt_index(po, "dev-root")] = "/cli-dev";
    assert_int_equal(dpconfig_resolve(po, cli, fake_getenv, &c, NULL, &e), 0);
    assert_int_equal(c->mig_strategy, DPCONFIG_MIG_NONE);
    assert_string_equal(c->nvidia_driver_root, "/cli-root");
    assert_string_equal(c->nvidia_dev_root, "/cli-dev");
    assert_int_equal(c->plugin.device_list_strategy, DPCONFIG_LIST_CDI_CRI);
    assert_false(c->fail_on_init_error); /* still the file's */
    dpconfig_free(c);

    /* the CLI's config file beats the env's; a bad one is an error naming it */
    cli[opt_index(po, "config-file")] = "/nonexistent/cli.yaml";
    assert_true(dpconfig_resolve(po, cli, fake_getenv, &c, NULL, &e) < 0);
    assert_non_null(strstr(err_msg(&e), "/nonexistent/cli.yaml"));
    cli[opt_index(po, "config-file")] = NULL;

    /* a bad env value names the variable, a bad flag value names the flag */
    fake_env[4][0] = "DEVICE_ID_STRATEGY";
    fake_env[4][1] = "serial";
    assert_true(dpconfig_resolve(po, cli, fake_getenv, &c, NULL, &e) < 0);
    assert_true(str_has_prefix(err_msg(&e), "DEVICE_ID_STRATEGY: "));
    fake_env[4][0] = NULL;
    cli[opt_index(po, "fail-on-init-error")] = "perhaps";
    assert_true(dpconfig_resolve(po, cli, fake_getenv, &c, NULL, &e) < 0);
    assert_true(str_has_prefix(err_msg(&e), "--fail-on-init-error: "));
    cli[opt_index(po, "fail-on-init-error")] = NULL;

    /* option_value reports CLI > env */
    const char *src = NULL;
    assert_string_equal(dpconfig_option_value(po, cli, fake_getenv, "flags.migStrategy", &src),
                        "none");
    assert_string_equal(src, "mig-strategy");
    memset(cli, 0, sizeof(cli));
    assert_string_equal(dpconfig_option_value(po, cli, fake_getenv, "flags.migStrategy", &src),
                        "mixed");
    assert_string_equal(src, "MIG_STRATEGY");

    /* GFD's names */
    const struct svc_option *go = dpconfig_gfd_options;
    memset(fake_env, 0, sizeof(fake_env));
    fake_env[0][0] = "GFD_CONFIG_FILE";
    fake_env[0][1] = path;
    fake_env[1][0] = "GFD_ONESHOT";
    fake_env[1][1] = "true";
    fake_env[2][0] = "MIG_STRATEGY"; /* NVIDIA's GFD reads it after GFD_MIG_STRATEGY */
    fake_env[2][1] = "mixed";
    fake_env[3][0] = "GFD_SLEEP_INTERVAL";
    fake_env[3][1] = "2m";
    cli[opt_index(go, "output")] = "-";
    cli[opt_index(go, "no-timestamp")] = "true";
    assert_int_equal(dpconfig_resolve(go, cli, fake_getenv, &c, NULL, &e), 0);
    assert_true(c->gfd.oneshot);
    assert_true(c->gfd.no_timestamp);
    assert_int_equal(c->mig_strategy, DPCONFIG_MIG_MIXED); /* MIG_STRATEGY over the file */
    assert_int_equal(c->gfd.sleep_interval_ms, 120000);
    assert_string_equal(c->gfd.output_file, "-");
    dpconfig_free(c);
    fake_env[4][0] = "GFD_MIG_STRATEGY"; /* the GFD_ name wins over MIG_STRATEGY */
    fake_env[4][1] = "none";
    assert_int_equal(dpconfig_resolve(go, cli, fake_getenv, &c, NULL, &e), 0);
    assert_int_equal(c->mig_strategy, DPCONFIG_MIG_NONE);
    dpconfig_free(c);
    assert_string_equal(dpconfig_option_value(go, NULL, fake_getenv, "flags.migStrategy", &src),
                        "none");
    assert_string_equal(src, "GFD_MIG_STRATEGY");
    fake_env[4][0] = NULL;
    cli[opt_index(go, "sleep-interval")] = "5s";
    assert_int_equal(dpconfig_resolve(go, cli, fake_getenv, &c, NULL, &e), 0);
    assert_int_equal(c->gfd.sleep_interval_ms, 5000);
    dpconfig_free(c);

    /* no config file anywhere: defaults plus overrides */
    memset(fake_env, 0, sizeof(fake_env));
    memset(cli, 0, sizeof(cli));
    assert_int_equal(dpconfig_resolve(go, NULL, fake_getenv, &c, &used, &e), 0);
    assert_null(used);
    assert_int_equal(c->gfd.sleep_interval_ms, 60000);
    assert_string_equal(c->nvidia_dev_root, "/");
    dpconfig_free(c);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_full_yaml),
        cmocka_unit_test(test_json_and_list_forms),
        cmocka_unit_test(test_version),
        cmocka_unit_test(test_unknown_keys),
        cmocka_unit_test(test_bad_values),
        cmocka_unit_test(test_sharing_errors),
        cmocka_unit_test(test_forced_fields_and_warnings),
        cmocka_unit_test(test_malformed_and_files),
        cmocka_unit_test(test_set),
        cmocka_unit_test(test_precedence),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
