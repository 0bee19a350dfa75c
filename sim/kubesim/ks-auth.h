/* SPDX-License-Identifier: Apache-2.0 */
/* Authentication and authorization at the request boundary (HTTP layer): bearer tokens (the
 * static admin credential, ServiceAccount tokens from the TokenRequest API), impersonation, the
 * request's authorizer attributes and the RBAC decision (rbac.c), and the APIs that answer
 * about them: TokenRequest, TokenReview and the (Self|Local)SubjectAccessReviews. */
#ifndef GPUOP_KS_AUTH_H
#define GPUOP_KS_AUTH_H

#include "ks-http.h"
#include "ks-rbac.h"

/* An authenticated (or impersonated) user. */
struct ks_ident {
    char *user;
    char *uid;      /* may be NULL */
    json_t *groups; /* array of strings */
};
void ks_ident_clear(struct ks_ident *id);

/* The review and token APIs' types and the token store (at construction). */
void ks_auth_init(struct ksim *ks);

/* Authenticates, impersonates and authorizes req. true: go on, *ret the identity (clear it);
 * NULL groups in ret when authentication is off. false: the 401/403 rendered in resp. */
bool ks_auth_gate(struct ksim *ks, const struct ksim_request *req, struct ks_ident *ret,
                  struct ksim_response *resp);

/* The RBAC API's escalation prevention: a Role or ClusterRole created or replaced (POST, PUT)
 * only by a user who holds every permission it grants or may `escalate` it; a binding only by
 * one who holds the role's permissions or may `bind` it. true: go on; false: the 403 (or 404
 * for a binding's missing role) rendered. */
bool ks_auth_admit(struct ksim *ks, const struct ks_ident *who, const struct ksim_request *req,
                   struct ks_type *t, const char *ns, const char *sub, struct ksim_response *resp);

/* The request is one of the auth APIs (t and sub as routed): ks_auth_handle answers it. */
bool ks_auth_serves(struct ks_type *t, const char *sub);
void ks_auth_handle(struct ksim *ks, const struct ks_ident *who, const struct ksim_request *req,
                    struct ks_type *t, const char *ns, const char *name, const char *sub,
                    struct ksim_response *resp);

#endif
