/* SPDX-License-Identifier: Apache-2.0 */
/* Prints the metric names `gpuop exporter` can serve, one a line, from its own tables: every
 * catalogue field that reads something (not those it names unsupported, not the label fields),
 * and the families of its own health as its core renders them. tests/monitoring checks the
 * dashboard's queries against this list. */
#include <stdio.h>
#include <string.h>

#include "exporter.h"

int main(void)
{
    /* The catalogue, through its list of names. */
    char *names = xstrdup(exp_field_known_names());
    for (char *save = NULL, *n = strtok_r(names, ", ", &save); n; n = strtok_r(NULL, ", ", &save)) {
        const struct exp_field *f = exp_field_lookup(n);
        if (f && f->src != EXP_SRC_UNSUPPORTED && !f->label)
            printf("%s\n", f->name);
    }
    free(names);
    /* The exporter's own families: a page of one GPU with every optional part on. */
    struct gpu_device d = {.name = "x", .uuid = "GPU-x"};
    struct gpu_inventory inv = {.n_gpus = 1, .gpus = &d};
    struct exp_gpu_state st = {.ok = true};
    struct exp_self self = {.kubernetes = true};
    struct exp_counters none = {0};
    struct exp_render_input in = {
        .counters = &none, .inv = &inv, .gpus = &st, .kubernetes = true, .self = &self};
    struct sbuf b;
    sbuf_init(&b, 1 << 20);
    if (exp_render(&in, PROM_FORMAT_TEXT, &b) < 0 || exp_render_tail(0, PROM_FORMAT_TEXT, &b) < 0) {
        fprintf(stderr, "exp-served: rendering failed\n");
        return 1;
    }
    for (char *save = NULL, *l = strtok_r(b.data, "\n", &save); l;
         l = strtok_r(NULL, "\n", &save)) {
        char name[128];
        if (sscanf(l, "# TYPE %127s", name) == 1)
            printf("%s\n", name);
    }
    sbuf_free(&b);
    return 0;
}
