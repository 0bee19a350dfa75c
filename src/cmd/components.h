/* SPDX-License-Identifier: Apache-2.0 */
/* The components `gpuop <name>` dispatches to; the table is generated at build time. */
#ifndef GPUOP_COMPONENTS_H
#define GPUOP_COMPONENTS_H

struct svc_component;

/* A component is on the runtime (svc: options, verbs, signals, exit code by svc_main) or a plain
 * main: only `gpuop runtime`, whose command line is runc's (flags it passes through unparsed). */
struct gpuop_component {
    const char *name;
    int (*main)(int argc, char **argv); /* argv[0] is the component name; NULL when svc */
    const char *summary;
    const struct svc_component *svc;
};

extern const struct gpuop_component gpuop_components[]; /* ends with a NULL name */

#endif
