/* SPDX-License-Identifier: Apache-2.0 */
/* Controllers: stub replaced below. */
#include "kubesim-internal.h"

bool ks_controllers(struct ksim *ks)
{
    ks->dirty = false;
    return false;
}

int ks_evict(struct ksim *ks, json_t *pod, struct ksim_response *resp)
{
    struct ks_type *t = ks_type_find(ks, "", "v1", "pods");
    ks_delete_obj(ks, t, pod, NULL);
    ks_status(resp, 201, "", "", NULL);
    return 0;
}
