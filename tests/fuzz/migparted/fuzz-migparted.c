/* SPDX-License-Identifier: Apache-2.0 */
/* mig-parted v1 configs: parse, and every config parsed is planned on an H100-shaped GPU and a
 * GPU without MIG, compared and exported (the export must parse again). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "migparted.h"

static void h100(struct gpu_mig_profile *p)
{
    static const struct {
        const char *name;
        unsigned id, slices, max, size, n;
        unsigned starts[7];
    } t[] = {
        {"1g.10gb", 19, 1, 7, 1, 7, {0, 1, 2, 3, 4, 5, 6}},
        {"2g.20gb", 14, 2, 3, 2, 3, {0, 2, 4}},
        {"3g.40gb", 9, 3, 2, 4, 2, {0, 4}},
        {"4g.40gb", 5, 4, 1, 4, 1, {0}},
        {"7g.80gb", 0, 7, 1, 8, 1, {0}},
        {"1g.10gb+me", 20, 1, 1, 1, 7, {0, 1, 2, 3, 4, 5, 6}},
        {"1g.20gb", 15, 1, 4, 2, 4, {0, 2, 4, 6}},
    };
    for (size_t i = 0; i < 7; i++) {
        memset(&p[i], 0, sizeof(p[i]));
        strlcpy_s(p[i].name, t[i].name, sizeof(p[i].name));
        p[i].id = t[i].id;
        p[i].slices = t[i].slices;
        p[i].max_count = t[i].max;
        p[i].n_placements = t[i].n;
        for (size_t k = 0; k < t[i].n; k++)
            p[i].placements[k] = (struct gpu_mig_placement){t[i].starts[k], t[i].size};
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct err e = {0};
    struct mp_spec *s = NULL;
    if (mp_spec_parse((const char *)data, size, "fuzz", &s, &e) < 0)
        return 0;
    struct gpu_mig_profile prof[7];
    h100(prof);
    struct mp_gpu gpus[2] = {
        {.index = 0,
         .model = "H100",
         .pci_device_id = 0x233010de,
         .mig_capable = true,
         .n_profiles = 7,
         .profiles = prof},
        {.index = 1, .model = "L4", .pci_device_id = 0x27b810de},
    };
    for (size_t i = 0; i < s->n_configs; i++) {
        struct mp_plan *p = NULL;
        if (mp_plan_make(&s->configs[i], gpus, 2, &p, &e) < 0)
            continue;
        struct mp_gpu as = gpus[0];
        as.mig_enabled = p->gpus[0].mig_enabled;
        as.instances = p->gpus[0].instances;
        as.n_instances = p->gpus[0].n_instances;
        mp_plan_matches(p, gpus, 2, false, &e);
        char *text = mp_export(&as, 1, "current");
        struct mp_spec *back = NULL;
        if (text && mp_spec_parse(text, strlen(text), "export", &back, &e) < 0)
            __builtin_trap(); /* an export always parses */
        mp_spec_free(back);
        free(text);
        mp_plan_free(p);
    }
    mp_spec_free(s);
    return 0;
}
