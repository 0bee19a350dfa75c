/* SPDX-License-Identifier: Apache-2.0 */
/* Protobuf bodies of the authentication.k8s.io/v1 and authorization.k8s.io/v1 kinds clients
 * create (kubectl auth can-i, kubectl create token, client-go's typed clients), decoded into
 * JSON by a field table taken from Kubernetes' generated.proto files. Bytes in, JSON out. */
#include <string.h>

#include "kubesim-internal.h"
#include "kubesim-pb.h"

enum pf_type { PF_STR, PF_STRS, PF_INT, PF_MSG, PF_META };

struct pf {
    const char *msg; /* the message the field belongs to */
    uint64_t no;
    const char *json;
    enum pf_type type;
    const char *sub; /* PF_MSG: the field's message */
};

static const struct pf fields[] = {
    /* authorization/v1 */
    {"SelfSubjectAccessReview", 1, "metadata", PF_META, NULL},
    {"SelfSubjectAccessReview", 2, "spec", PF_MSG, "SelfSubjectAccessReviewSpec"},
    {"SelfSubjectAccessReviewSpec", 1, "resourceAttributes", PF_MSG, "ResourceAttributes"},
    {"SelfSubjectAccessReviewSpec", 2, "nonResourceAttributes", PF_MSG, "NonResourceAttributes"},
    {"SubjectAccessReview", 1, "metadata", PF_META, NULL},
    {"SubjectAccessReview", 2, "spec", PF_MSG, "SubjectAccessReviewSpec"},
    {"SubjectAccessReviewSpec", 1, "resourceAttributes", PF_MSG, "ResourceAttributes"},
    {"SubjectAccessReviewSpec", 2, "nonResourceAttributes", PF_MSG, "NonResourceAttributes"},
    {"SubjectAccessReviewSpec", 3, "user", PF_STR, NULL},
    {"SubjectAccessReviewSpec", 4, "groups", PF_STRS, NULL},
    {"SubjectAccessReviewSpec", 6, "uid", PF_STR, NULL},
    {"ResourceAttributes", 1, "namespace", PF_STR, NULL},
    {"ResourceAttributes", 2, "verb", PF_STR, NULL},
    {"ResourceAttributes", 3, "group", PF_STR, NULL},
    {"ResourceAttributes", 4, "version", PF_STR, NULL},
    {"ResourceAttributes", 5, "resource", PF_STR, NULL},
    {"ResourceAttributes", 6, "subresource", PF_STR, NULL},
    {"ResourceAttributes", 7, "name", PF_STR, NULL},
    {"NonResourceAttributes", 1, "path", PF_STR, NULL},
    {"NonResourceAttributes", 2, "verb", PF_STR, NULL},
    {"SelfSubjectRulesReview", 1, "metadata", PF_META, NULL},
    {"SelfSubjectRulesReview", 2, "spec", PF_MSG, "SelfSubjectRulesReviewSpec"},
    {"SelfSubjectRulesReviewSpec", 1, "namespace", PF_STR, NULL},
    /* authentication/v1 */
    {"TokenRequest", 1, "metadata", PF_META, NULL},
    {"TokenRequest", 2, "spec", PF_MSG, "TokenRequestSpec"},
    {"TokenRequestSpec", 1, "audiences", PF_STRS, NULL},
    {"TokenRequestSpec", 3, "boundObjectRef", PF_MSG, "BoundObjectReference"},
    {"TokenRequestSpec", 4, "expirationSeconds", PF_INT, NULL},
    {"BoundObjectReference", 1, "kind", PF_STR, NULL},
    {"BoundObjectReference", 2, "apiVersion", PF_STR, NULL},
    {"BoundObjectReference", 3, "name", PF_STR, NULL},
    {"BoundObjectReference", 4, "uid", PF_STR, NULL},
    {"TokenReview", 1, "metadata", PF_META, NULL},
    {"TokenReview", 2, "spec", PF_MSG, "TokenReviewSpec"},
    {"TokenReviewSpec", 1, "token", PF_STR, NULL},
    {"TokenReviewSpec", 2, "audiences", PF_STRS, NULL},
    {"SelfSubjectReview", 1, "metadata", PF_META, NULL},
    {"ObjectMeta", 1, "name", PF_STR, NULL},
    {"ObjectMeta", 3, "namespace", PF_STR, NULL},
};

/* The kinds (LocalSubjectAccessReview has SubjectAccessReview's fields). */
static const char *const kinds[][2] = {
    {"SelfSubjectAccessReview", "SelfSubjectAccessReview"},
    {"SubjectAccessReview", "SubjectAccessReview"},
    {"LocalSubjectAccessReview", "SubjectAccessReview"},
    {"SelfSubjectRulesReview", "SelfSubjectRulesReview"},
    {"TokenRequest", "TokenRequest"},
    {"TokenReview", "TokenReview"},
    {"SelfSubjectReview", "SelfSubjectReview"},
};

static const struct pf *field_of(const char *msg, uint64_t no)
{
    for (size_t i = 0; i < ARRAY_SIZE(fields); i++)
        if (streq(fields[i].msg, msg) && fields[i].no == no)
            return &fields[i];
    return NULL;
}

/* The message's fields into obj: 0, or -1 when malformed. Unknown fields are skipped. */
static int decode_msg(const char *msg, const unsigned char *d, size_t n, json_t *obj, int depth)
{
    if (depth > 8)
        return -1;
    const unsigned char *p = d, *end = d + n, *data;
    size_t len;
    uint64_t f, v;
    int w, r;
    while ((r = ks_pb_next(&p, end, &f, &w, &data, &len, &v)) > 0) {
        const struct pf *pf = field_of(msg, f);
        if (!pf)
            continue;
        if (pf->type == PF_INT) {
            if (w != 0)
                return -1;
            json_object_set_new(obj, pf->json, json_integer((json_int_t)v));
            continue;
        }
        if (w != 2)
            return -1;
        if (pf->type == PF_STR || pf->type == PF_STRS) {
            json_t *s = json_stringn((const char *)data, len);
            if (!s)
                return -1;
            if (pf->type == PF_STR) {
                json_object_set_new(obj, pf->json, s);
            } else {
                json_t *a = json_object_get(obj, pf->json);
                if (!a) {
                    a = json_array();
                    json_object_set_new(obj, pf->json, a);
                }
                json_array_append_new(a, s);
            }
        } else if (pf->type == PF_META) {
            json_t *meta = kobj_ensure_object(obj, "metadata");
            if (decode_msg("ObjectMeta", data, len, meta, depth + 1) < 0)
                return -1;
        } else {
            if (decode_msg(pf->sub, data, len, kobj_ensure_object(obj, pf->json), depth + 1) < 0)
                return -1;
        }
    }
    return r;
}

json_t *ks_pb_decode_auth(const char *body, size_t blen)
{
    const unsigned char *b = (const unsigned char *)body;
    if (blen < 4 || memcmp(b, "k8s\0", 4) != 0)
        return NULL;
    const unsigned char *p = b + 4, *end = b + blen, *data, *tm = NULL, *raw = NULL;
    size_t len, tml = 0, rawl = 0;
    uint64_t f, v;
    int w, r;
    while ((r = ks_pb_next(&p, end, &f, &w, &data, &len, &v)) > 0) {
        if (w == 2 && f == 1)
            tm = data, tml = len;
        else if (w == 2 && f == 2)
            raw = data, rawl = len;
    }
    if (r < 0 || !tm || !raw)
        return NULL;
    json_t *av = NULL, *kind = NULL;
    p = tm;
    end = tm + tml;
    while ((r = ks_pb_next(&p, end, &f, &w, &data, &len, &v)) > 0) {
        json_t **slot = w == 2 && f == 1 ? &av : w == 2 && f == 2 ? &kind : NULL;
        if (slot) {
            json_decref(*slot);
            *slot = json_stringn((const char *)data, len);
        }
    }
    const char *msg = NULL;
    for (size_t i = 0; kind && i < ARRAY_SIZE(kinds); i++)
        if (streq(json_string_value(kind), kinds[i][0]))
            msg = kinds[i][1];
    const char *avs = json_string_value(av);
    if (r < 0 || !msg || !avs ||
        !(streq(avs, "authentication.k8s.io/v1") || streq(avs, "authorization.k8s.io/v1"))) {
        json_decref(av);
        json_decref(kind);
        return NULL;
    }
    json_t *obj = json_pack("{s:o,s:o,s:{}}", "apiVersion", av, "kind", kind, "metadata");
    if (decode_msg(msg, raw, rawl, obj, 0) < 0) {
        json_decref(obj);
        return NULL;
    }
    return obj;
}
