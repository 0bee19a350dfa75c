/* SPDX-License-Identifier: Apache-2.0 */
/* Runs a fuzz target over every file of a corpus directory: the regression half of fuzzing,
 * for builds without libFuzzer. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
        return 2;
    }
    DIR *d = opendir(argv[1]);
    if (!d) {
        fprintf(stderr, "open corpus \"%s\": %s\n", argv[1], strerror(errno));
        return 1;
    }
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", argv[1], de->d_name);
        char *buf = NULL;
        size_t len = 0;
        struct err e = {0};
        if (file_read_all(path, 64u << 20, &buf, &len, &e) < 0) {
            fprintf(stderr, "%s\n", err_msg(&e));
            closedir(d);
            return 1;
        }
        LLVMFuzzerTestOneInput((const uint8_t *)buf, len);
        free(buf);
        n++;
    }
    closedir(d);
    printf("replayed %d inputs\n", n);
    return n > 0 ? 0 : 1;
}
