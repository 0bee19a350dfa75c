/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rtconfig-tool: drives rtconfig for the shell tests (the toolkit daemon is its product user).
 *   rtconfig-tool configure|restore|check ROOT KIND PATH [--default] [--no-cdi]
 *                 [--restart-mode none|signal|systemd] [--config P] [--dropin P] [--state P]
 *   rtconfig-tool detect ROOT [NODE-RUNTIME-VERSION|-] [WANT]
 * Prints "changed" or "unchanged" after configure, and one line per file after restore
 * ("PATH RESULT[: WHY]", RESULT as rtconfig_undo_name says); errors go to stderr, exit 1.
 */
#include <stdio.h>
#include <string.h>

#include "rtconfig.h"

int main(int argc, char **argv)
{
    struct err e = {0};
    if (argc >= 3 && strcmp(argv[1], "detect") == 0) {
        const char *ver = argc > 3 && strcmp(argv[3], "-") != 0 ? argv[3] : NULL;
        enum rtconfig_kind k;
        if (rtconfig_detect(argv[2], ver, argc > 4 ? argv[4] : NULL, &k, &e) < 0) {
            fprintf(stderr, "error: %s\n", err_msg(&e));
            return 1;
        }
        printf("%s\n", rtconfig_kind_name(k));
        return 0;
    }
    if (argc < 5) {
        fprintf(stderr, "usage: rtconfig-tool configure|restore|check ROOT KIND PATH [flags]\n");
        return 2;
    }
    enum rtconfig_kind k;
    if (rtconfig_kind_parse(argv[3], &k) < 0) {
        fprintf(stderr, "error: unknown container runtime \"%s\"\n", argv[3]);
        return 2;
    }
    struct rtconfig_options o = {
        .runtime_name = "nvidia", .runtime_path = argv[4], .enable_cdi = true};
    for (int i = 5; i < argc; i++) {
        if (strcmp(argv[i], "--default") == 0)
            o.set_as_default = true;
        else if (strcmp(argv[i], "--no-cdi") == 0)
            o.enable_cdi = false;
        else if (strcmp(argv[i], "--config") == 0 && i + 1 < argc)
            o.config_path = argv[++i];
        else if (strcmp(argv[i], "--dropin") == 0 && i + 1 < argc)
            o.dropin_path = argv[++i];
        else if (strcmp(argv[i], "--state") == 0 && i + 1 < argc)
            o.state_dir = argv[++i];
        else if (strcmp(argv[i], "--restart-mode") == 0 && i + 1 < argc &&
                 rtconfig_restart_mode_parse(argv[i + 1], &o.restart_mode) == 0)
            i++;
        else {
            fprintf(stderr, "error: bad argument \"%s\"\n", argv[i]);
            return 2;
        }
    }
    int r;
    bool changed = false;
    struct rtconfig_restore_report rep = {0};
    if (strcmp(argv[1], "configure") == 0)
        r = rtconfig_configure(argv[2], k, &o, &changed, &e);
    else if (strcmp(argv[1], "restore") == 0)
        r = rtconfig_restore(argv[2], k, &o, &rep, &e);
    else
        r = rtconfig_check(argv[2], k, &o, &e);
    if (r < 0) {
        fprintf(stderr, "error: %s\n", err_msg(&e));
        return 1;
    }
    if (strcmp(argv[1], "configure") == 0)
        printf("%s\n", changed ? "changed" : "unchanged");
    for (size_t i = 0; i < rep.n; i++)
        printf("%s %s%s%s\n", rep.files[i].path, rtconfig_undo_name(rep.files[i].what),
               rep.files[i].why[0] ? ": " : "", rep.files[i].why);
    return 0;
}
