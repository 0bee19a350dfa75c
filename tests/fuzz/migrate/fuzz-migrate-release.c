/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Helm release records on untrusted bytes (a release Secret's data.release, what `gpuop migrate`
 * reads from the cluster): the first byte picks the form, the rest is the input. 'd' the Secret's
 * field as the API gives it (base64 of Helm's base64), decoded, then every object kept and the
 * delete hooks dropped, then encoded and decoded again; 'j' a release's JSON itself (its manifest
 * split and parsed document by document). Any input ends in a record or a clear error, never a
 * crash or a leak; a record kept decodes back to the same JSON.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "migrate.h"
#include "yamlcfg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void keep_and_back(json_t *rel)
{
    size_t docs = 0, hooks = 0;
    struct err e = {0};
    if (mig_release_keep_all(rel, &docs, &hooks, &e) < 0)
        return;
    char *enc = NULL;
    if (mig_release_encode(rel, &enc, &e) < 0)
        abort();
    json_t *back = NULL;
    if (mig_release_decode(enc, &back, &e) < 0 || !json_equal(back, rel))
        abort();
    json_decref(back);
    free(enc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > (1u << 20))
        return 0;
    char *in = malloc(size);
    memcpy(in, data + 1, size - 1);
    in[size - 1] = '\0';
    struct err e = {0};
    json_t *rel = NULL;
    if (data[0] == 'd') {
        if (mig_release_decode(in, &rel, &e) == 0)
            keep_and_back(rel);
    } else if (data[0] == 'j') {
        json_error_t je;
        rel = json_loadb(in, size - 1, 0, &je);
        if (json_is_object(rel))
            keep_and_back(rel);
    }
    json_decref(rel);
    free(in);
    return 0;
}
