/* SPDX-License-Identifier: Apache-2.0 */
#include "node-discovery.h"

#include "kobj.h"

const char *disc_action_name(enum disc_action a)
{
    switch (a) {
    case DISC_NOTHING:
        return "nothing";
    case DISC_LABEL:
        return "label";
    case DISC_STAY_AWAY:
        return "stay-away";
    }
    return "unknown";
}

/* A merge patch turning before into after (flat string maps): changed keys set, gone keys null. */
static json_t *map_patch(const json_t *before, const json_t *after)
{
    json_t *p = json_object();
    const char *k;
    json_t *v;
    json_object_foreach ((json_t *)after, k, v)
        if (!json_equal(json_object_get(before, k), v))
            json_object_set(p, k, v);
    json_object_foreach ((json_t *)before, k, v)
        if (!json_object_get(after, k))
            json_object_set_new(p, k, json_null());
    return p;
}

enum disc_action disc_plan(const json_t *node, const struct nodestate_nfd_input *in,
                           json_t **ret_patch)
{
    const json_t *labels = kobj_labels(node), *annotations = kobj_annotations(node);
    json_t *new_labels = labels ? json_deep_copy(labels) : json_object();
    json_t *new_ann = annotations ? json_deep_copy(annotations) : json_object();
    enum disc_action a = DISC_LABEL;
    if (nodestate_nfd_present(node)) {
        a = DISC_STAY_AWAY;
        json_object_del(new_ann, NODESTATE_DISCOVERY_ANN);
    } else {
        struct nodestate_nfd_input only = *in;
        only.kernel = NULL;
        json_t *want = nodestate_nfd_labels(&only);
        nodestate_nfd_apply(new_labels, new_ann, want, NODESTATE_DISCOVERY_ANN);
        json_decref(want);
    }
    json_t *empty = json_object();
    json_t *lp = map_patch(labels ? labels : empty, new_labels);
    json_t *ap = map_patch(annotations ? annotations : empty, new_ann);
    json_decref(empty);
    json_decref(new_labels);
    json_decref(new_ann);
    if (json_object_size(lp) == 0 && json_object_size(ap) == 0) {
        json_decref(lp);
        json_decref(ap);
        *ret_patch = NULL;
        return DISC_NOTHING;
    }
    json_t *meta = json_object();
    if (json_object_size(lp))
        json_object_set(meta, "labels", lp);
    if (json_object_size(ap))
        json_object_set(meta, "annotations", ap);
    json_decref(lp);
    json_decref(ap);
    *ret_patch = json_pack("{s:o}", "metadata", meta);
    return a;
}
