/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A ClusterPolicy as YAML or JSON bytes: parsed, validated against the CRD schema, and when
 * valid planned for one GPU node (which renders every operand). Any input must end in a value
 * or a clear error, never a crash or a leak.
 */
#include <stdint.h>
#include <string.h>

#include "operator.h"
#include "yamlcfg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct op_templates *templates;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct err e = {0};
    if (!templates && op_templates_builtin(&templates, &e) < 0)
        return 0;
    _cleanup_json_ json_t *cp = NULL;
    if (yaml_parse_one((const char *)data, size, "fuzz", &cp, &e) < 0)
        return 0;
    const json_t *spec_schema =
        json_object_get(json_object_get(op_clusterpolicy_schema(), "properties"), "spec");
    struct err se = {0};
    (void)op_schema_validate(spec_schema, json_object_get(cp, "spec"), "spec", &se);

    static const struct op_defaults d = {"gpu-operator", "gpuop:fuzz"};
    _cleanup_(op_policy_freep) struct op_policy *p = NULL;
    struct err pe = {0};
    if (op_policy_parse(cp, &d, &p, &pe) < 0)
        return 0;
    _cleanup_json_ json_t *policies = json_pack("[O]", cp);
    _cleanup_json_ json_t *nodes =
        json_pack("[{s:{s:s,s:{s:s,s:s,s:s}}}]", "metadata", "name", "gpu-1", "labels",
                  "feature.node.kubernetes.io/pci-10de.present", "true",
                  "feature.node.kubernetes.io/system-os_release.ID", "ubuntu",
                  "feature.node.kubernetes.io/system-os_release.VERSION_ID", "22.04");
    _cleanup_json_ json_t *owned = json_array();
    struct op_snapshot snap = {.policies = policies,
                               .nodes = nodes,
                               .owned = owned,
                               .defaults = &d,
                               .templates = templates,
                               .now_ms = 1767225600000ull};
    _cleanup_(op_plan_freep) struct op_plan *plan = NULL;
    struct err le = {0};
    (void)op_plan(&snap, &plan, &le);
    return 0;
}
