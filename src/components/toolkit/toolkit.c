/* SPDX-License-Identifier: Apache-2.0 */
/* toolkit's pure core (toolkit.h). */
#include <stdio.h>
#include <string.h>

#include "nodestate.h"
#include "toolkit.h"

int toolkit_runtime_choose(const char *runtime, const char *default_runtime,
                           const char *restart_mode, const char *runtime_class,
                           struct toolkit_runtime *ret, struct err *e)
{
    struct toolkit_runtime rt = {0};
    if (!runtime || strcmp(runtime, TOOLKIT_RUNTIME_NONE) != 0) {
        rt.configure = true;
        if (runtime && strcmp(runtime, TOOLKIT_RUNTIME_AUTO) != 0) {
            if (rtconfig_kind_parse(runtime, &rt.kind) < 0)
                return err_set(e, -EINVAL,
                               "--runtime: unknown runtime \"%s\" (auto, containerd, cri-o, "
                               "docker, none)",
                               runtime);
            rt.known = true;
        }
    }
    bool policy = default_runtime && *default_runtime;
    enum rtconfig_kind want = RTCONFIG_CONTAINERD;
    if (policy && rtconfig_kind_parse(default_runtime, &want) < 0)
        return err_set(e, -EINVAL,
                       "--default-runtime: unknown runtime \"%s\" (containerd, cri-o, docker)",
                       default_runtime);
    if (rt.known && policy && want != rt.kind)
        return err_set(e, -EINVAL, "--runtime is %s but the policy's default runtime is %s",
                       rtconfig_kind_name(rt.kind), rtconfig_kind_name(want));
    if (rtconfig_restart_mode_parse(restart_mode, &rt.restart) < 0)
        return err_set(e, -EINVAL, "--restart-mode: unknown mode \"%s\" (signal, systemd, none)",
                       restart_mode ? restart_mode : "");
    if (!runtime_class || !*runtime_class)
        return err_set(e, -EINVAL, "--runtime-class: empty");
    *ret = rt;
    return 0;
}

int toolkit_install_dir_check(const char *dir, struct err *e)
{
    if (!dir || dir[0] != '/')
        return err_set(e, -EINVAL, "\"%s\" is not an absolute path", dir ? dir : "");
    for (const char *p = dir; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              strchr("/._+-", *p)))
            return err_set(e, -EINVAL, "\"%s\": only letters, digits and /._+- are allowed", dir);
    return 0;
}

char *toolkit_hook_path(const char *install_dir)
{
    return xasprintf("%s/%s", strcmp(install_dir, "/") == 0 ? "" : install_dir,
                     TOOLKIT_BINARY_NAME);
}

char *toolkit_wrapper_script(const char *bin, bool accept_envvar_unprivileged,
                             bool accept_volume_mounts)
{
    return xasprintf(
        "#!/bin/sh\n# gpuop's OCI runtime wrapper (written by gpuop toolkit)\n"
        "exec '%s' runtime %s%s\"$@\"\n",
        bin,
        accept_envvar_unprivileged ? "--accept-nvidia-visible-devices-envvar-when-unprivileged "
                                   : "",
        accept_volume_mounts ? "" : "--accept-nvidia-visible-devices-as-volume-mounts=false ");
}

void toolkit_rt_options(const char *runtime_class, const char *install_dir, bool set_as_default,
                        enum rtconfig_restart_mode restart, char *path, size_t n,
                        struct rtconfig_options *ret)
{
    snprintf(path, n, "%s/%s", install_dir, TOOLKIT_WRAPPER_NAME);
    *ret = (struct rtconfig_options){.runtime_name = runtime_class,
                                     .runtime_path = path,
                                     .set_as_default = set_as_default,
                                     .enable_cdi = true,
                                     .restart_mode = restart};
}

int toolkit_marker_render(const struct toolkit_runtime *rt, const struct rtconfig_options *o,
                          const char *cdi_spec, const char *install_dir, char **ret, struct err *e)
{
    struct nodestate_kv kv[4];
    size_t n = 0;
    kv[n++] = (struct nodestate_kv){"RUNTIME", rt->configure ? rtconfig_kind_name(rt->kind)
                                                             : TOOLKIT_RUNTIME_NONE};
    if (rt->configure)
        kv[n++] = (struct nodestate_kv){"RUNTIME_CONFIG", rtconfig_config_path(rt->kind, o)};
    kv[n++] = (struct nodestate_kv){"CDI_SPEC", cdi_spec};
    kv[n++] = (struct nodestate_kv){"TOOLKIT_INSTALL_DIR", install_dir};
    return nodestate_env_render(kv, n, ret, e);
}
