/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the node informer's compact label sets cost a node, alone: N nodes of one pool (the
 * labels of bench/operator/node-template.yaml plus the operator's, as JSON in argv[1]), each
 * node's set made, then made again with one more label while its previous set still lives (an
 * informer's update), the intern table pruned as the informer does. Prints the heap held per
 * node (malloc'd bytes with the allocator's overhead, the shared strings, chunks and table
 * included), the items of a set, and the CPU time of all the kobj_labels_compact calls.
 */
#include <jansson.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "kobj.h"

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: labels-mem LABELS.json NODES\n");
        return 2;
    }
    json_t *base = json_load_file(argv[1], 0, NULL);
    int n = atoi(argv[2]);
    if (!json_is_object(base) || n < 1)
        return 2;
    json_t *intern = json_object();
    json_t **sets = calloc((size_t)n, sizeof(*sets));
    size_t pruned = 0;
    double cpu = 0;
    struct mallinfo2 a = mallinfo2();
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < n; i++) {
            char host[32];
            snprintf(host, sizeof(host), "gpu-node-%05d", i);
            json_object_set_new(base, "kubernetes.io/hostname", json_string(host));
            if (pass == 1)
                json_object_set_new(base, "nvidia.com/gpu-driver-upgrade-state",
                                    json_string("upgrade-done"));
            struct timespec t0, t1;
            clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
            json_t *s = kobj_labels_compact(base, intern);
            clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t1);
            cpu += (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
            json_decref(sets[i]);
            sets[i] = s;
            kobj_intern_prune(intern, &pruned, 1024);
        }
    }
    pruned = 0;
    kobj_intern_prune(intern, &pruned, 0);
    struct mallinfo2 b = mallinfo2();
    printf("%zu labels, %zu items a set, %.0f bytes a node, %.1f us a set made\n",
           json_object_size(base), json_array_size(sets[n / 2]),
           (double)(b.uordblks - a.uordblks) / n, cpu * 1e6 / (2.0 * n));
    for (int i = 0; i < n; i++)
        json_decref(sets[i]);
    free(sets);
    json_decref(intern);
    json_decref(base);
    return 0;
}
