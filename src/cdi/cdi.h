/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cdi: the Container Device Interface spec as a model (https://github.com/cncf-tags/
 * container-device-interface, the schema in ../shared/reference/upstream/cdi_schema_*.json):
 * parse (JSON or YAML) and check a spec as the CDI library does, look devices up by name, and
 * apply a device's and its spec's containerEdits. Pure and fuzzed. Its users: the toolkit (the
 * spec it generates is checked with it), the validator (the node's spec names every GPU), the
 * OCI runtime wrapper (`gpuop runtime` applies the edits to config.json), and kubelet-sim.
 *
 * This header starts as the contract between those users; the module's owner extends it.
 */
#ifndef GPUOP_CDI_H
#define GPUOP_CDI_H

#include <stdbool.h>
#include <stddef.h>

#include "util.h"

struct cdi_spec;

/* path names the file in errors. Checks cdiVersion (a known version), kind (vendor/class),
 * device names and the edits' shapes. */
int cdi_spec_parse(const char *path, const char *text, size_t len, struct cdi_spec **ret,
                   struct err *e);
void cdi_spec_free(struct cdi_spec *s);
DEFINE_CLEANUP_FUNC(struct cdi_spec, cdi_spec_free)

const char *cdi_spec_kind(const struct cdi_spec *s);    /* "nvidia.com/gpu" */
const char *cdi_spec_version(const struct cdi_spec *s); /* "0.5.0" */
size_t cdi_spec_n_devices(const struct cdi_spec *s);
const char *cdi_spec_device_name(const struct cdi_spec *s, size_t i); /* "0", "GPU-...", "all" */
bool cdi_spec_has_device(const struct cdi_spec *s, const char *name);

#endif
