/* SPDX-License-Identifier: Apache-2.0 */
/* The shell: libcuda.so.1 loaded at run time (never linked), its entry points resolved. */
#include <dlfcn.h>
#include <string.h>

#include "cuda-internal.h"

int cuda_api_load(const char *lib_path, struct cuda_api *ret, struct err *e)
{
    const char *path = lib_path ? lib_path : env_get("GPUOP_CUDA_LIBRARY");
    if (!path || !*path)
        path = CUDA_DEFAULT_LIBRARY;
    struct cuda_api api = {0};
    if (strlcpy_s(api.path, path, sizeof(api.path)) >= sizeof(api.path))
        return err_set(e, -ENAMETOOLONG, "CUDA driver library path too long: \"%s\"", path);
    dlerror();
    api.dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!api.dl) {
        const char *why = dlerror();
        return err_set(e, -ENODEV, "load the CUDA driver \"%s\": %s", path,
                       why ? why : "unknown dlopen error");
    }
#define CUDA_RESOLVE(name, r, params)                                            \
    *(void **)&api.name = dlsym(api.dl, #name);                                  \
    if (!api.name) {                                                             \
        dlclose(api.dl);                                                         \
        return err_set(e, -ENOSYS, "CUDA driver \"%s\" has no %s", path, #name); \
    }
    CUDA_FUNCS(CUDA_RESOLVE)
#undef CUDA_RESOLVE
#define CUDA_RESOLVE_OPT(name, r, params) *(void **)&api.name = dlsym(api.dl, #name);
    CUDA_OPTIONAL_FUNCS(CUDA_RESOLVE_OPT)
#undef CUDA_RESOLVE_OPT
    *ret = api;
    return 0;
}

void cuda_api_unload(struct cuda_api *api)
{
    if (api && api->dl) {
        dlclose(api->dl);
        api->dl = NULL;
    }
}

int cuda_check_run(const char *lib_path, size_t n_elements, struct cuda_check_result *ret,
                   struct err *e)
{
    memset(ret, 0, sizeof(*ret));
    struct cuda_api api;
    int r = cuda_api_load(lib_path, &api, e);
    if (r < 0)
        return r;
    /* The library stays loaded: a driver that ran cuInit keeps threads of its own, and unloading
     * it under them is not safe. A later call's dlopen finds the same library. */
    return cuda_check_api(&api, n_elements, ret, e);
}
