/* SPDX-License-Identifier: Apache-2.0 */
/* Readiness of what the operator deployed, by the rules NVIDIA's operator uses. */
#include <string.h>

#include "operator.h"

static json_int_t st_int(const json_t *status, const char *key)
{
    json_t *v = json_object_get(status, key);
    return json_is_integer(v) ? json_integer_value(v) : 0;
}

bool op_ds_ready(const json_t *ds, char *ret_reason, size_t reason_len)
{
    const json_t *status = json_object_get(ds, "status");
    json_int_t desired = st_int(status, "desiredNumberScheduled");
    json_int_t unavailable = st_int(status, "numberUnavailable");
    json_int_t available = st_int(status, "numberAvailable");
    json_int_t updated = st_int(status, "updatedNumberScheduled");
    json_int_t ready = st_int(status, "numberReady");
    json_int_t observed = st_int(status, "observedGeneration");
    json_t *g = json_object_get(json_object_get(ds, "metadata"), "generation");
    json_int_t generation = json_is_integer(g) ? json_integer_value(g) : 0;
    const char *strategy = json_string_value(
        json_object_get(json_object_get(json_object_get(ds, "spec"), "updateStrategy"), "type"));
    char tmp[1];
    if (!ret_reason) {
        ret_reason = tmp;
        reason_len = sizeof(tmp);
    }
    ret_reason[0] = '\0';
    if (!status) {
        snprintf(ret_reason, reason_len, "no status yet");
        return false;
    }
    if (desired == 0) {
        snprintf(ret_reason, reason_len, "no nodes to run on");
        return true;
    }
    if (unavailable != 0) {
        snprintf(ret_reason, reason_len, "%lld of %lld pods unavailable", (long long)unavailable,
                 (long long)desired);
        return false;
    }
    if (strategy && strcmp(strategy, "OnDelete") == 0) {
        /* Pods are replaced node by node by the upgrade flow; ready when all run and are ready. */
        if (ready != desired) {
            snprintf(ret_reason, reason_len, "%lld/%lld pods ready", (long long)ready,
                     (long long)desired);
            return false;
        }
        return true;
    }
    if (observed < generation) {
        snprintf(ret_reason, reason_len, "generation %lld not yet observed", (long long)generation);
        return false;
    }
    if (updated != desired || available != desired) {
        snprintf(ret_reason, reason_len, "%lld/%lld updated, %lld/%lld available",
                 (long long)updated, (long long)desired, (long long)available, (long long)desired);
        return false;
    }
    return true;
}
