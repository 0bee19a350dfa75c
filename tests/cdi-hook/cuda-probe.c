/* SPDX-License-Identifier: Apache-2.0 */
/* The program of the container test (cdi-hook-container): linked against libcuda.so.1, so it
 * starts only where the loader finds one; prints the driver API version and the file the
 * loader took. */
#include <stdio.h>
#include <string.h>

int cuDriverGetVersion(int *version);

int main(void)
{
    int v = 0;
    if (cuDriverGetVersion(&v) != 0)
        return 1;
    printf("cuda-probe: driver API %d\n", v);
    FILE *f = fopen("/proc/self/maps", "r");
    char line[4096];
    while (f && fgets(line, sizeof(line), f)) {
        const char *p = strchr(line, '/');
        if (p && strstr(p, "libcuda")) {
            printf("cuda-probe: loaded %s", p);
            break;
        }
    }
    if (f)
        fclose(f);
    return 0;
}
