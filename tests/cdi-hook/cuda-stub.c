/* SPDX-License-Identifier: Apache-2.0 */
/* A libcuda.so.1 for the container test (cdi-hook-container): one driver API entry point,
 * answering the version it was built as, so the probe can tell the driver's from the image's
 * forward-compatible one. No other dependency than libc. */
int cuDriverGetVersion(int *version);

int cuDriverGetVersion(int *version)
{
    *version = STUB_VERSION;
    return 0;
}
