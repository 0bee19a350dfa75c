/* SPDX-License-Identifier: Apache-2.0 */
/* kubesim's OpenAPI documents and field validation (openapi.c, the HTTP layer): /openapi/v2 and
 * /openapi/v3 (the index and one document per group-version) for every kind served, built-in
 * kinds from a table of the fields kubesim knows, custom resources from their CRD's
 * openAPIV3Schema; and the fieldValidation directive (Strict, Warn, Ignore) checked against the
 * same schemas. Runs under ks->lock. */
#ifndef GPUOP_KS_OPENAPI_H
#define GPUOP_KS_OPENAPI_H

#include "ks-http.h"

/* GET /openapi/v2, /openapi/v3, /openapi/v3/api/v1, /openapi/v3/apis/<g>/<v>: true when the
 * path was one of these (resp filled). */
bool ks_openapi(struct ksim *ks, const struct ksim_request *req, struct ksim_response *resp);

/* The OpenAPI v3 schema of t's kind, $refs resolved against *ret_components (both new
 * references, NULL when kubesim knows no schema): a built-in kind's from kubesim's table, a
 * custom resource's openAPIV3Schema from its CRD's served version. Read only: a built-in kind's
 * are made once and shared. */
json_t *ks_openapi_schema_for(struct ksim *ks, struct ks_type *t, json_t **ret_components);

/* The paths of obj's fields that t's schema does not declare ("spec.x",
 * "spec.template.spec.containers[0].imagex"), in document order; a new array. Nested parts the
 * schema leaves open (no properties, x-kubernetes-preserve-unknown-fields) are not looked into. */
json_t *ks_openapi_unknown_fields(struct ksim *ks, struct ks_type *t, json_t *obj);

enum ks_field_validation { KS_FV_IGNORE, KS_FV_WARN, KS_FV_STRICT };
/* The request's fieldValidation (absent: Warn, the API server's default); -EINVAL with a 400 in
 * st for another value. */
int ks_field_validation_of(json_t *q, enum ks_field_validation *ret, struct ks_status *st);
/* Applies the directive to obj (a body, or a patch: keys starting with '$' and null values are
 * skipped): Strict is 400 BadRequest with the decoder's `strict decoding error: unknown field
 * "spec.x"`, Warn adds one Warning per unknown field to resp and Ignore does nothing. apply:
 * the server-side apply wording (`.spec.x: field not declared in schema`). */
int ks_field_validate(struct ksim *ks, struct ks_type *t, json_t *obj, enum ks_field_validation fv,
                      bool apply, struct ksim_response *resp, struct ks_status *st);

#endif
