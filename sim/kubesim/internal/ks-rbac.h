/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The RBAC authorizer, as the API server's evaluates it: request attributes in, a decision and
 * a reason out, over the stored Roles, ClusterRoles and their bindings (plain JSON, as the store
 * keeps them). Pure: no store, no lock, no I/O; table-tested.
 *
 * Before the stored policy: system:masters may do anything (the API server's privileged-group
 * authorizer), and three of the cluster's bootstrap ClusterRoles are built in, bound as a real
 * cluster binds them: system:basic-user and system:discovery to system:authenticated,
 * system:public-info-viewer to system:authenticated and system:unauthenticated.
 */
#ifndef GPUOP_KS_RBAC_H
#define GPUOP_KS_RBAC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* Who asks and what for (authorizer.Attributes). */
struct ks_authz_attrs {
    const char *user;
    json_t *groups; /* array of strings, may be NULL */
    const char *verb;
    bool resource_request;
    /* resource requests */
    const char *api_group; /* "" for the core group */
    const char *resource;
    const char *sub;  /* NULL or "": none */
    const char *name; /* NULL or "": none */
    const char *ns;   /* NULL or "": cluster scope */
    /* non-resource requests */
    const char *path;
};

/* The stored policy, each as the store keeps a type's objects ("ns/name", or "/name" when
 * cluster-scoped, -> object); any may be NULL (none). */
struct ks_rbac_policy {
    json_t *roles;
    json_t *cluster_roles;
    json_t *role_bindings;
    json_t *cluster_role_bindings;
};

/* true when allowed. ret_reason (may be NULL) gets the authorizer's reason, malloc'ed: on a
 * denial "" or "RBAC: <the bindings' dangling role references>", on an allowance which binding
 * allowed it ("" for system:masters). */
bool ks_rbac_authorize(const struct ks_rbac_policy *p, const struct ks_authz_attrs *a,
                       char **ret_reason);

/* The API server's 403 message for a denied request, reason appended when not empty:
 * `pods "x" is forbidden: User "u" cannot get resource "pods" in API group "" in the namespace
 * "ns"`. malloc'ed. */
char *ks_rbac_forbidden_message(const struct ks_authz_attrs *a, const char *reason);

/* One PolicyRule allows the request (the rbac/v1 helpers' VerbMatches, APIGroupMatches,
 * ResourceMatches, ResourceNameMatches, NonResourceURLMatches). */
bool ks_rbac_rule_allows(json_t *rule, const struct ks_authz_attrs *a);

#endif
