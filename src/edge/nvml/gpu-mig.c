/* SPDX-License-Identifier: Apache-2.0 */
/* MIG management: mode, GPU-instance profiles, create and destroy instances. */
#include <ctype.h>
#include <string.h>

#include "nvml-internal.h"

#define MIG_INSTANCES_MAX 64

int gpu_mig_set_mode(struct gpu_lib *lib, unsigned gpu, bool enable, struct gpu_mig_mode *ret,
                     struct err *e)
{
    nvmlDevice_t dev;
    int k = nv_handle(lib, gpu, &dev, e);
    if (k < 0)
        return k;
    nvmlReturn_t activation = NVML_SUCCESS;
    nvmlReturn_t r = NV(lib, nvmlDeviceSetMigMode, dev,
                        enable ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE, &activation);
    if (r != NVML_SUCCESS)
        return nv_err(lib, r, e, "nvmlDeviceSetMigMode(gpu %u, %s)", gpu,
                      enable ? "enable" : "disable");
    unsigned cur = 0, pend = 0;
    r = NV(lib, nvmlDeviceGetMigMode, dev, &cur, &pend);
    if (r != NVML_SUCCESS)
        return nv_err(lib, r, e, "nvmlDeviceGetMigMode(gpu %u)", gpu);
    *ret = (struct gpu_mig_mode){
        .current = cur == NVML_DEVICE_MIG_ENABLE,
        .pending = pend == NVML_DEVICE_MIG_ENABLE,
        .reset_required = cur != pend || activation == NVML_ERROR_RESET_REQUIRED,
    };
    return 0;
}

static void profile_fill(struct gpu_lib *lib, nvmlDevice_t dev, const struct nv_gi_profile *p,
                         struct gpu_mig_profile *out)
{
    const nvmlGpuInstanceProfileInfo_v2_t *i = &p->info;
    *out = (struct gpu_mig_profile){
        .index = p->index,
        .id = i->id,
        .slices = i->sliceCount,
        .memory_mib = i->memorySizeMB,
        .max_count = i->instanceCount,
        .multiprocessors = i->multiprocessorCount,
        .copy_engines = i->copyEngineCount,
        .decoders = i->decoderCount,
        .encoders = i->encoderCount,
        .jpegs = i->jpegCount,
        .ofas = i->ofaCount,
    };
    nv_profile_name(i, out->name, sizeof(out->name));
    nvmlGpuInstancePlacement_t pl[GPU_MIG_PLACEMENTS_MAX];
    unsigned n = GPU_MIG_PLACEMENTS_MAX;
    if (NV(lib, nvmlDeviceGetGpuInstancePossiblePlacements_v2, dev, i->id, pl, &n) != NVML_SUCCESS)
        return;
    if (n > GPU_MIG_PLACEMENTS_MAX)
        n = GPU_MIG_PLACEMENTS_MAX;
    for (unsigned k = 0; k < n; k++)
        out->placements[k] = (struct gpu_mig_placement){pl[k].start, pl[k].size};
    out->n_placements = n;
}

/* Profiles of a GPU; -EOPNOTSUPP when it offers none (not MIG capable, or MIG disabled). */
static int profiles_read(struct gpu_lib *lib, unsigned gpu, nvmlDevice_t *ret_dev,
                         struct gpu_mig_profile **ret, size_t *ret_n, struct err *e)
{
    nvmlDevice_t dev;
    int k = nv_handle(lib, gpu, &dev, e);
    if (k < 0)
        return k;
    _cleanup_free_ struct nv_gi_profile *p = xcalloc(NVML_GPU_INSTANCE_PROFILE_COUNT, sizeof(*p));
    nv_gi_profiles_read(lib, dev, p);
    _cleanup_free_ struct gpu_mig_profile *out =
        xcalloc(NVML_GPU_INSTANCE_PROFILE_COUNT, sizeof(*out));
    size_t n = 0;
    for (unsigned i = 0; i < NVML_GPU_INSTANCE_PROFILE_COUNT; i++)
        if (p[i].ok)
            profile_fill(lib, dev, &p[i], &out[n++]);
    if (n == 0)
        return err_set(e, GPU_ERR_NOT_SUPPORTED,
                       "GPU %u offers no MIG GPU-instance profiles (not MIG capable, or MIG mode "
                       "is disabled)",
                       gpu);
    if (ret_dev)
        *ret_dev = dev;
    *ret = steal_ptr(&out);
    *ret_n = n;
    return 0;
}

int gpu_mig_profiles(struct gpu_lib *lib, unsigned gpu, struct gpu_mig_profile **ret, size_t *ret_n,
                     struct err *e)
{
    return profiles_read(lib, gpu, NULL, ret, ret_n, e);
}

/* "1c.3g.40gb" -> ci 1, gi "3g.40gb"; "3g.40gb" -> ci 0 (full size). */
static int profile_split(const char *s, unsigned *ret_ci, const char **ret_gi)
{
    const char *c = s;
    while (isdigit((unsigned char)*c))
        c++;
    if (c != s && c[0] == 'c' && c[1] == '.') {
        char num[8];
        size_t len = (size_t)(c - s);
        if (len >= sizeof(num))
            return -EINVAL;
        memcpy(num, s, len);
        num[len] = '\0';
        if (parse_uint(num, ret_ci) < 0 || *ret_ci == 0)
            return -EINVAL;
        *ret_gi = c + 2;
        return 0;
    }
    *ret_ci = 0;
    *ret_gi = s;
    return 0;
}

/* The compute-instance profile id with `slices` slices (shared engines), on GI gi. */
static int ci_profile_find(struct gpu_lib *lib, nvmlGpuInstance_t gi, unsigned slices,
                           unsigned *ret_id)
{
    for (unsigned i = 0; i < NVML_COMPUTE_INSTANCE_PROFILE_COUNT; i++) {
        nvmlComputeInstanceProfileInfo_t info = {0};
        if (NV(lib, nvmlGpuInstanceGetComputeInstanceProfileInfo, gi, i,
               NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, &info) != NVML_SUCCESS)
            continue;
        if (info.sliceCount == slices) {
            *ret_id = info.id;
            return 0;
        }
    }
    return -ENOENT;
}

static int ci_create(struct gpu_lib *lib, unsigned gpu, nvmlGpuInstance_t gi, unsigned slices,
                     const char *profile, unsigned *ret_ci_id, struct err *e)
{
    unsigned ci_profile = 0;
    if (ci_profile_find(lib, gi, slices, &ci_profile) < 0)
        return err_set(e, -ENOENT, "GPU %u: no %u-slice compute-instance profile for \"%s\"", gpu,
                       slices, profile);
    nvmlComputeInstance_t ci = NULL;
    nvmlReturn_t r = NV(lib, nvmlGpuInstanceCreateComputeInstance, gi, ci_profile, &ci);
    if (r != NVML_SUCCESS)
        return nv_err(lib, r, e, "nvmlGpuInstanceCreateComputeInstance(gpu %u, \"%s\")", gpu,
                      profile);
    nvmlComputeInstanceInfo_t info = {0};
    r = NV(lib, nvmlComputeInstanceGetInfo_v2, ci, &info);
    if (r != NVML_SUCCESS)
        return nv_err(lib, r, e, "nvmlComputeInstanceGetInfo_v2(gpu %u)", gpu);
    *ret_ci_id = info.id;
    return 0;
}

int gpu_mig_create(struct gpu_lib *lib, unsigned gpu, const char *profile, unsigned *ret_gi_id,
                   unsigned *ret_ci_id, struct err *e)
{
    return gpu_mig_create_at(lib, gpu, profile, GPU_MIG_ANY_PLACEMENT, ret_gi_id, ret_ci_id, e);
}

int gpu_mig_create_at(struct gpu_lib *lib, unsigned gpu, const char *profile, unsigned start,
                      unsigned *ret_gi_id, unsigned *ret_ci_id, struct err *e)
{
    unsigned ci_slices = 0;
    const char *gi_name = NULL;
    if (!profile || profile_split(profile, &ci_slices, &gi_name) < 0)
        return err_set(e, -EINVAL,
                       "MIG profile \"%s\": not of the form <g>g.<mem>gb[+...] or "
                       "<c>c.<g>g.<mem>gb",
                       profile ? profile : "(null)");
    nvmlDevice_t dev = NULL;
    _cleanup_free_ struct gpu_mig_profile *p = NULL;
    size_t n = 0;
    int k = profiles_read(lib, gpu, &dev, &p, &n, e);
    if (k < 0)
        return k;
    const struct gpu_mig_profile *want = NULL;
    for (size_t i = 0; i < n && !want; i++)
        if (strcmp(p[i].name, gi_name) == 0)
            want = &p[i];
    if (!want)
        return err_set(e, -ENOENT, "GPU %u: unknown MIG profile \"%s\"", gpu, profile);
    if (ci_slices == 0)
        ci_slices = want->slices;
    if (ci_slices > want->slices)
        return err_set(e, -EINVAL, "MIG profile \"%s\": %u compute slices exceed the %u of %s",
                       profile, ci_slices, want->slices, want->name);
    nvmlGpuInstance_t gi = NULL;
    nvmlReturn_t r;
    if (start == GPU_MIG_ANY_PLACEMENT) {
        r = NV(lib, nvmlDeviceCreateGpuInstance, dev, want->id, &gi);
        if (r != NVML_SUCCESS)
            return nv_err(lib, r, e, "nvmlDeviceCreateGpuInstance(gpu %u, \"%s\")", gpu,
                          want->name);
    } else {
        unsigned size = 0;
        for (size_t i = 0; i < want->n_placements; i++)
            if (want->placements[i].start == start)
                size = want->placements[i].size;
        if (size == 0)
            return err_set(e, -EINVAL, "GPU %u: %s has no placement starting at slice %u", gpu,
                           want->name, start);
        nvmlGpuInstancePlacement_t pl = {.start = start, .size = size};
        r = NV(lib, nvmlDeviceCreateGpuInstanceWithPlacement, dev, want->id, &pl, &gi);
        if (r != NVML_SUCCESS)
            return nv_err(lib, r, e,
                          "nvmlDeviceCreateGpuInstanceWithPlacement(gpu %u, \"%s\", %u:%u)", gpu,
                          want->name, start, size);
    }
    nvmlGpuInstanceInfo_t gi_info = {0};
    r = NV(lib, nvmlGpuInstanceGetInfo, gi, &gi_info);
    unsigned ci_id = 0;
    k = r == NVML_SUCCESS ? ci_create(lib, gpu, gi, ci_slices, profile, &ci_id, e)
                          : nv_err(lib, r, e, "nvmlGpuInstanceGetInfo(gpu %u)", gpu);
    if (k < 0) {
        /* Leave no half-made instance behind. */
        NV(lib, nvmlGpuInstanceDestroy, gi);
        return k;
    }
    if (ret_gi_id)
        *ret_gi_id = gi_info.id;
    if (ret_ci_id)
        *ret_ci_id = ci_id;
    return 0;
}

static int gi_destroy(struct gpu_lib *lib, unsigned gpu, nvmlGpuInstance_t gi, struct err *e)
{
    for (unsigned i = 0; i < NVML_COMPUTE_INSTANCE_PROFILE_COUNT; i++) {
        nvmlComputeInstanceProfileInfo_t info = {0};
        if (NV(lib, nvmlGpuInstanceGetComputeInstanceProfileInfo, gi, i,
               NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, &info) != NVML_SUCCESS)
            continue;
        nvmlComputeInstance_t cis[MIG_INSTANCES_MAX];
        unsigned n = 0;
        nvmlReturn_t r = NV(lib, nvmlGpuInstanceGetComputeInstances, gi, info.id, cis, &n);
        if (r != NVML_SUCCESS)
            continue;
        for (unsigned c = 0; c < n && c < MIG_INSTANCES_MAX; c++) {
            r = NV(lib, nvmlComputeInstanceDestroy, cis[c]);
            if (r != NVML_SUCCESS)
                return nv_err(lib, r, e, "nvmlComputeInstanceDestroy(gpu %u)", gpu);
        }
    }
    nvmlReturn_t r = NV(lib, nvmlGpuInstanceDestroy, gi);
    if (r != NVML_SUCCESS)
        return nv_err(lib, r, e, "nvmlGpuInstanceDestroy(gpu %u)", gpu);
    return 0;
}

int gpu_mig_destroy_all(struct gpu_lib *lib, unsigned gpu, struct err *e)
{
    nvmlDevice_t dev = NULL;
    _cleanup_free_ struct gpu_mig_profile *p = NULL;
    size_t n = 0;
    int k = profiles_read(lib, gpu, &dev, &p, &n, e);
    if (k < 0)
        return k;
    for (size_t i = 0; i < n; i++) {
        nvmlGpuInstance_t gis[MIG_INSTANCES_MAX];
        unsigned count = 0;
        nvmlReturn_t r = NV(lib, nvmlDeviceGetGpuInstances, dev, p[i].id, gis, &count);
        if (r != NVML_SUCCESS)
            return nv_err(lib, r, e, "nvmlDeviceGetGpuInstances(gpu %u, \"%s\")", gpu, p[i].name);
        for (unsigned g = 0; g < count && g < MIG_INSTANCES_MAX; g++)
            if ((k = gi_destroy(lib, gpu, gis[g], e)) < 0)
                return k;
    }
    return 0;
}

int gpu_mig_destroy(struct gpu_lib *lib, unsigned gpu, unsigned gi_id, struct err *e)
{
    nvmlDevice_t dev;
    int k = nv_handle(lib, gpu, &dev, e);
    if (k < 0)
        return k;
    nvmlGpuInstance_t gi = NULL;
    nvmlReturn_t r = NV(lib, nvmlDeviceGetGpuInstanceById, dev, gi_id, &gi);
    if (r == NVML_ERROR_NOT_FOUND || r == NVML_ERROR_INVALID_ARGUMENT)
        return err_set(e, -ENOENT, "GPU %u has no GPU instance %u", gpu, gi_id);
    if (r != NVML_SUCCESS)
        return nv_err(lib, r, e, "nvmlDeviceGetGpuInstanceById(gpu %u, %u)", gpu, gi_id);
    return gi_destroy(lib, gpu, gi, e);
}
