/* SPDX-License-Identifier: Apache-2.0 */
/* The components `gpuop <name>` dispatches to; the table is generated at build time. */
#ifndef GPUOP_COMPONENTS_H
#define GPUOP_COMPONENTS_H

struct gpuop_component {
    const char *name;
    int (*main)(int argc, char **argv); /* argv[0] is the component name */
    const char *summary;
};

extern const struct gpuop_component gpuop_components[]; /* ends with a NULL name */

#endif
