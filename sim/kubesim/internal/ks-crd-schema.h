/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A CustomResourceDefinition version's structural schema (openAPIV3Schema), enforced on a custom
 * resource as kube-apiserver does: non-nullable nulls without a default dropped, `default:`
 * values applied (nested ones included), unknown fields pruned, then the value validations with
 * the apiserver's field errors (causes {reason, message, field}, as a 422 Invalid carries them).
 * Pure: JSON in, JSON (and causes) out; no I/O, no locks. A schema is read-only once made, so it
 * may be shared by callers that serialize their writes.
 */
#ifndef GPUOP_KS_CRD_SCHEMA_H
#define GPUOP_KS_CRD_SCHEMA_H

#include <jansson.h>

struct ks_crd_schema;

/* A schema over openapi (a reference is taken; NULL or a non-object: NULL, nothing enforced).
 * Patterns are compiled once here: Go's RE2 syntax is translated to POSIX extended regular
 * expressions (\d \w \s and their negations, (?:...), lazy quantifiers, \A \z); a pattern that
 * uses what POSIX cannot express (lookarounds are not RE2 either; \b, \p{..}, flags) is left
 * unchecked rather than rejecting valid objects. */
struct ks_crd_schema *ks_crd_schema_new(json_t *openapi);
void ks_crd_schema_free(struct ks_crd_schema *s);
void ks_crd_schema_freep(struct ks_crd_schema **s);

/* The decoding steps, in the apiserver's order, on obj in place: non-nullable nulls without a
 * default removed, defaults applied, unknown fields pruned (apiVersion, kind and metadata of the
 * root and of embedded resources are kept; x-kubernetes-preserve-unknown-fields keeps a
 * subtree's unknown fields). */
void ks_crd_schema_admit(const struct ks_crd_schema *s, json_t *obj);
/* Defaulting alone (as on a read of a stored object). */
void ks_crd_schema_default(const struct ks_crd_schema *s, json_t *obj);

/* Validates obj, appending the field errors to causes. old: the object an update replaces, or
 * NULL on create; with it, values unchanged since old are not re-validated (validation
 * ratcheting, on by default since Kubernetes 1.30) and transition rules (oldSelf) apply.
 * x-kubernetes-validations: only the transition rule `self == oldSelf` (immutability) is
 * evaluated; other CEL rules are not. */
void ks_crd_schema_validate(const struct ks_crd_schema *s, json_t *obj, json_t *old,
                            json_t *causes);

/* Number of patterns left unchecked because POSIX regcomp could not take them. */
size_t ks_crd_schema_unchecked_patterns(const struct ks_crd_schema *s);

#endif
