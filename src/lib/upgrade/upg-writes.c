/* SPDX-License-Identifier: Apache-2.0 */
/* Read-your-writes for the upgrade controller's node patches (upgrade.h states the rule). */
#include <stdlib.h>

#include "kobj.h"
#include "upgrade.h"
#include "yamlcfg.h"

#define REPLACED_MAX 32 /* versions remembered per node: a cache further behind plans from it */

struct upg_writes {
    /* node name -> {"replaced": [resourceVersions gpuop's writes replaced, oldest first],
     * "obj": the node the server returned for the last write} */
    json_t *by_node;
};

struct upg_writes *upg_writes_new(void)
{
    struct upg_writes *w = xcalloc(1, sizeof(*w));
    w->by_node = json_object();
    return w;
}

void upg_writes_free(struct upg_writes *w)
{
    if (!w)
        return;
    json_decref(w->by_node);
    free(w);
}

void upg_writes_record(struct upg_writes *w, const char *base_rv, json_t *written)
{
    const char *name = kobj_name(written), *rv = kobj_resource_version(written);
    if (!name || !base_rv || !rv || streq_ptr(base_rv, rv))
        return;
    json_t *e = json_object_get(w->by_node, name);
    json_t *replaced = json_array();
    /* a write on top of the previous one (planned from its copy): the chain goes on */
    if (e && streq_ptr(kobj_resource_version(json_object_get(e, "obj")), base_rv))
        json_array_extend(replaced, json_object_get(e, "replaced"));
    while (json_array_size(replaced) >= REPLACED_MAX)
        json_array_remove(replaced, 0);
    json_array_append_new(replaced, json_string(base_rv));
    json_object_set_new(w->by_node, name,
                        json_pack("{s:o,s:O}", "replaced", replaced, "obj", written));
}

static bool holds_string(const json_t *a, const char *s)
{
    size_t i;
    json_t *v;
    json_array_foreach ((json_t *)a, i, v) {
        if (streq_ptr(json_string_value(v), s))
            return true;
    }
    return false;
}

json_t *upg_writes_fresh(struct upg_writes *w, const json_t *cached)
{
    json_t *out = json_array();
    _cleanup_json_ json_t *keep = json_object();
    size_t i;
    json_t *n;
    json_array_foreach ((json_t *)cached, i, n) {
        const char *name = kobj_name(n);
        json_t *e = name ? json_object_get(w->by_node, name) : NULL;
        if (e && holds_string(json_object_get(e, "replaced"), kobj_resource_version(n))) {
            json_array_append(out, json_object_get(e, "obj"));
            json_object_set(keep, name, e);
        } else {
            json_array_append(out, n);
        }
    }
    json_object_clear(w->by_node);
    json_object_update(w->by_node, keep);
    return out;
}

size_t upg_writes_pending(const struct upg_writes *w)
{
    return w ? json_object_size(w->by_node) : 0;
}
