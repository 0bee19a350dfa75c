/* SPDX-License-Identifier: Apache-2.0 */
/* The components `gpuop <name>` dispatches to; the table is generated at build time. */
#ifndef GPUOP_COMPONENTS_H
#define GPUOP_COMPONENTS_H

struct svc_component;

/* A component is either on the runtime (svc: options, signals, exit code by svc_main) or, until
 * it moves, a plain main. */
struct gpuop_component {
    const char *name;
    int (*main)(int argc, char **argv); /* argv[0] is the component name; NULL when svc */
    const char *summary;
    const struct svc_component *svc;
};

extern const struct gpuop_component gpuop_components[]; /* ends with a NULL name */

#endif
