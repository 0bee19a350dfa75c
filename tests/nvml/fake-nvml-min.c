/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A test-only libnvidia-ml with just enough to enumerate GPUs, like a very old or stripped
 * driver: nvmlInit_v2, nvmlShutdown, nvmlDeviceGetCount_v2, nvmlDeviceGetHandleByIndex_v2,
 * nvmlDeviceGetName, nvmlDeviceGetUUID, nvmlSystemGetDriverVersion. Two GPUs.
 * FAKE_NVML_INIT_RETURN=<n> makes nvmlInit_v2 return n.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvml-abi.h"

#define EXPORT    __attribute__((visibility("default")))
#define FAKE_GPUS 2

struct nvmlDevice_st {
    unsigned index;
};
static struct nvmlDevice_st devices[FAKE_GPUS] = {{0}, {1}};
static int initialised;

static nvmlReturn_t copy_out(const char *s, char *buf, unsigned len)
{
    if (!buf)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(s) + 1 > len)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(buf, s, strlen(s) + 1);
    return NVML_SUCCESS;
}

static nvmlReturn_t check_dev(nvmlDevice_t d)
{
    if (!initialised)
        return NVML_ERROR_UNINITIALIZED;
    if (d != &devices[0] && d != &devices[1])
        return NVML_ERROR_INVALID_ARGUMENT;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlInit_v2(void)
{
    const char *forced = getenv("FAKE_NVML_INIT_RETURN");
    if (forced)
        return (nvmlReturn_t)atoi(forced);
    initialised++;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlShutdown(void)
{
    if (!initialised)
        return NVML_ERROR_UNINITIALIZED;
    initialised--;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
    return initialised ? copy_out("418.40.04", version, length) : NVML_ERROR_UNINITIALIZED;
}

EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count)
{
    if (!initialised)
        return NVML_ERROR_UNINITIALIZED;
    *count = FAKE_GPUS;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    if (!initialised)
        return NVML_ERROR_UNINITIALIZED;
    if (index >= FAKE_GPUS || !device)
        return NVML_ERROR_INVALID_ARGUMENT;
    *device = &devices[index];
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
    nvmlReturn_t r = check_dev(device);
    return r ? r : copy_out("Tesla V100-SXM2-16GB", name, length);
}

EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
    nvmlReturn_t r = check_dev(device);
    if (r)
        return r;
    char s[64];
    snprintf(s, sizeof(s), "GPU-00000000-0000-0000-0000-00000000000%u", device->index);
    return copy_out(s, uuid, length);
}
