/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ks-cel: the subset of CEL that Dynamic Resource Allocation's device selectors need, compiled and
 * evaluated as the API server and kube-scheduler do (k8s.io/dynamic-resource-allocation/cel): one
 * variable, `device`, with `driver` (string), `attributes` (domain -> name -> value; an
 * unqualified name is in the driver's domain; a missing domain is an empty map) and `capacity`
 * (domain -> name -> Quantity). The expression must be bool.
 *
 * Supported: literals (int, uint, double, string with escapes and raw strings, bool, null,
 * lists), `device.driver|attributes|capacity`, field selection and `[]` on maps and lists,
 * `!`, unary `-`, `&&` and `||` (commutative with errors, as CEL), `?:`, `== != < <= > >=` (with
 * CEL's cross-type numeric comparisons), `+ - * / %`, `in` (lists and maps), `has()`, `size`,
 * `contains`, `startsWith`, `endsWith`, `int`, `uint`, `double`, `string`, `bool`, `dyn`, the
 * Kubernetes quantity library (`quantity`, `isQuantity`, `compareTo`, `isGreaterThan`,
 * `isLessThan`, `isInteger`, `asInteger`, `asApproximateFloat`, `sign`, `add`, `sub`) and
 * semver library (`semver`, `isSemver`, `major`, `minor`, `patch`, `compareTo`,
 * `isGreaterThan`, `isLessThan`); attributes of kind version are Semver values.
 *
 * What CEL itself refuses is refused with CEL's message in the API server's form
 * ("compilation failed: ERROR: <input>:1:8: undeclared reference to 'x' (in container '')" and
 * the caret line; "found no matching overload for '_>_' applied to '(kubernetes.Quantity,
 * kubernetes.Quantity)'"; "must evaluate to bool or the unknown type, not string"). CEL
 * functions and macros outside the subset (all, exists, map, filter, matches, cel.bind, the
 * string extensions, ...) are refused at compile time with a message saying kubesim does not
 * implement them. Syntax errors carry CEL's "Syntax error:" form; the parser generator's
 * wording of what was expected is approximated.
 *
 * Pure: no I/O, no global state; a compiled expression is immutable and may be evaluated from
 * several threads.
 */
#ifndef GPUOP_KS_CEL_H
#define GPUOP_KS_CEL_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

/* resource.CELSelectorExpressionMaxLength */
#define KS_CEL_MAX_LEN 10240

struct ks_cel;

/* Compiles expr (len bytes, at most KS_CEL_MAX_LEN; not NUL-terminated necessarily). 0 with
 * *ret; -EINVAL with *ret_err (malloc'd): the detail the API server puts in its validation
 * error, e.g. "compilation failed: ERROR: <input>:1:1: undeclared reference to 'x' (in
 * container '')\n | x\n | ^". */
int ks_cel_compile(const char *expr, size_t len, struct ks_cel **ret, char **ret_err);
void ks_cel_free(struct ks_cel *c);

/* Evaluates c against one device: driver, and attributes and capacity as a ResourceSlice's
 * device lists them ({"productName": {"string": "..."}}, {"memory": {"value": "80Gi"}}; NULL:
 * none). 0 with *ret_match; -EINVAL with *ret_err (malloc'd), CEL's runtime error ("no such
 * key: productName", "no such overload", "division by zero", ...). */
int ks_cel_match(const struct ks_cel *c, const char *driver, json_t *attributes, json_t *capacity,
                 bool *ret_match, char **ret_err);

#endif
