/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpuop: one binary for every component. `gpuop <component> [flags]`.
 *
 * Global flags, accepted before the component name (and by every component through the
 * environment): --log-format text|json (GPUOP_LOG_FORMAT), --log-level debug|info|warn|error
 * (GPUOP_LOG_LEVEL).
 */
#include <getopt.h>
#include <string.h>

#include "components.h"
#include "svc.h"
#include "util.h"

static void usage(FILE *out)
{
    fprintf(out,
            "gpuop %s: the GPU stack for Kubernetes in one small binary.\n\n"
            "Usage: gpuop [--log-format text|json] [--log-level LEVEL] <component> [flags]\n"
            "       gpuop <component> --help\n\nComponents:\n",
            GPUOP_VERSION);
    for (const struct gpuop_component *c = gpuop_components; c->name; c++)
        fprintf(out, "  %-20s %s\n", c->name, c->summary);
    fprintf(out, "  %-20s %s\n", "version", "Print the version and build information");
    fprintf(out, "\nGlobal flags:\n"
                 "  --log-format FMT     text (default) or json; env GPUOP_LOG_FORMAT\n"
                 "  --log-level LEVEL    debug, info (default), warn or error; env "
                 "GPUOP_LOG_LEVEL\n"
                 "  -h, --help           this text\n");
}

static int print_version(void)
{
    printf("gpuop %s\n", GPUOP_VERSION);
    printf("git: %s\n", GPUOP_GIT_REV);
    printf("compiler: %s\n", __VERSION__);
    printf("built: %s\n", __DATE__);
#if defined(__SANITIZE_ADDRESS__)
    printf("sanitizers: address\n");
#endif
    printf("nvml: loaded at run time (libnvidia-ml.so.1, or $GPUOP_NVML_LIBRARY)\n");
    return 0;
}

static int apply_log_env(void)
{
    const char *f = env_get("GPUOP_LOG_FORMAT");
    const char *l = env_get("GPUOP_LOG_LEVEL");
    enum log_format fmt;
    enum log_level lvl;
    if (f) {
        if (log_parse_format(f, &fmt) < 0) {
            fprintf(stderr, "gpuop: GPUOP_LOG_FORMAT: unknown format \"%s\" (text|json)\n", f);
            return -EINVAL;
        }
        log_set_format(fmt);
    }
    if (l) {
        if (log_parse_level(l, &lvl) < 0) {
            fprintf(stderr, "gpuop: GPUOP_LOG_LEVEL: unknown level \"%s\"\n", l);
            return -EINVAL;
        }
        log_set_level(lvl);
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (apply_log_env() < 0)
        return 2;
    int i = 1;
    while (i < argc && argv[i][0] == '-') {
        const char *a = argv[i];
        const char *val = NULL;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        }
        if (strcmp(a, "--version") == 0)
            return print_version();
        if (str_has_prefix(a, "--log-format") || str_has_prefix(a, "--log-level")) {
            const char *eq = strchr(a, '=');
            if (eq) {
                val = eq + 1;
            } else if (i + 1 < argc) {
                val = argv[++i];
            } else {
                fprintf(stderr, "gpuop: %s needs a value\n", a);
                return 2;
            }
            if (str_has_prefix(a, "--log-format")) {
                enum log_format fmt;
                if (log_parse_format(val, &fmt) < 0) {
                    fprintf(stderr, "gpuop: --log-format: unknown format \"%s\" (text|json)\n",
                            val);
                    return 2;
                }
                log_set_format(fmt);
                /* env-write-before-threads: main() reads the global flags before it hands over
                 * to a component; no thread exists yet (tests/build/env-writes.py) */
                setenv("GPUOP_LOG_FORMAT", val, 1);
            } else {
                enum log_level lvl;
                if (log_parse_level(val, &lvl) < 0) {
                    fprintf(stderr, "gpuop: --log-level: unknown level \"%s\"\n", val);
                    return 2;
                }
                log_set_level(lvl);
                /* env-write-before-threads: as above, before any component starts a thread */
                setenv("GPUOP_LOG_LEVEL", val, 1);
            }
            i++;
            continue;
        }
        fprintf(stderr, "gpuop: unknown flag \"%s\"; see gpuop --help\n", a);
        return 2;
    }
    if (i >= argc) {
        usage(stderr);
        return 2;
    }
    const char *name = argv[i];
    if (strcmp(name, "version") == 0)
        return print_version();
    if (strcmp(name, "help") == 0) {
        usage(stdout);
        return 0;
    }
    for (const struct gpuop_component *c = gpuop_components; c->name; c++)
        if (strcmp(c->name, name) == 0) {
            if (c->svc)
                return svc_main(c->svc, argc - i, argv + i);
            optind = 1;
            return c->main(argc - i, argv + i);
        }
    fprintf(stderr, "gpuop: unknown component \"%s\"; see gpuop --help\n", name);
    return 2;
}
