/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target: the counters CSV parser, then rendering with what it accepted. */
#include <stdint.h>
#include <string.h>

#include "exporter.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct exp_counters *c = NULL;
    struct err e = {0};
    if (exp_counters_parse((const char *)data, size, "fuzz", &c, &e) < 0)
        return 0;
    struct gpu_device dev = {.index = 0, .uuid = "GPU-1", .name = "n\"x", .bus_id = "b"};
    struct gpu_inventory inv = {.driver_version = "1.0", .n_gpus = 1, .gpus = &dev};
    struct exp_gpu_state st = {.ok = true};
    st.sample.valid = 0xFFFFFFFFu;
    struct exp_prof prof = {.ok = true, .gpu = {.valid = (1u << GPU_PROF_COUNT) - 1}};
    st.prof = &prof; /* the profiling fields' series too */
    struct exp_render_input in = {.counters = c, .inv = &inv, .gpus = &st, .hostname = "h"};
    struct sbuf b;
    sbuf_init(&b, 1 << 20);
    /* a page over the limit is a valid outcome here: only crashes count */
    int r = exp_render(&in, PROM_FORMAT_OPENMETRICS, &b);
    sbuf_reset(&b);
    r |= exp_render(&in, PROM_FORMAT_TEXT, &b); /* help text is escaped differently there */
    (void)r;
    sbuf_free(&b);
    exp_counters_free(c);
    return 0;
}
