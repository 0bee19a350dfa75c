/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzzes the load of kubesim's --data-dir: the input is a snapshot (first byte 'S') or a journal
 * (anything else) written into a scratch directory and loaded by ksim_persist_open. A load that
 * succeeds wrote a snapshot of what it loaded; that snapshot must load again to the same
 * resourceVersion (kubesim reads back what it writes). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "kubesim.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[] = "/tmp/fuzz-kubesim-journal-XXXXXX";

static void scratch_remove(void)
{
    static const char *const names[] = {"snapshot.jsonl", "snapshot.jsonl.tmp", "journal.jsonl",
                                        "lock"};
    char path[256];
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        unlink(path);
    }
    rmdir(dir);
}

static const char *scratch(void)
{
    static bool made;
    if (!made) {
        if (!mkdtemp(dir))
            abort();
        atexit(scratch_remove);
        made = true;
    }
    return dir;
}

static void put(const char *dir, const char *name, const uint8_t *data, size_t size)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0)
        abort();
}

static struct ksim *load(const char *dir, struct ksim_persist_info *info, int *ret)
{
    struct ksim_opts o;
    ksim_opts_default(&o);
    o.initial_rv = 1;
    struct ksim *ks = ksim_new(&o);
    struct err e = {0};
    *ret = ksim_persist_open(ks, dir, info, &e);
    return ks;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *dir = scratch();
    bool snapshot = size && data[0] == 'S';
    put(dir, "snapshot.jsonl", snapshot ? data + 1 : NULL, snapshot ? size - 1 : 0);
    put(dir, "journal.jsonl", snapshot ? NULL : data, snapshot ? 0 : size);
    struct ksim_persist_info a, b;
    int r;
    struct ksim *ks = load(dir, &a, &r);
    ksim_free(ks);
    if (r < 0)
        return 0;
    ks = load(dir, &b, &r);
    if (r < 0 || b.rv != a.rv)
        abort();
    ksim_free(ks);
    return 0;
}
