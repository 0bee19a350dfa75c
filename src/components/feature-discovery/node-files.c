/* SPDX-License-Identifier: Apache-2.0 */
/* The files feature discovery reads and writes: the machine type file and NFD's features file
 * (written atomically, or in place for a device; removed on exit). */
#include <fcntl.h>
#include <libgen.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "feature-discovery-internal.h"

#define COMP             "feature-discovery"
#define MACHINE_FILE_MAX 4096

int gfd_machine_type_read(const char *path, char **ret, struct err *e)
{
    *ret = NULL;
    if (!path || !*path)
        return 0;
    size_t len;
    int r = file_read_all(path, MACHINE_FILE_MAX, ret, &len, e);
    if (r == -ENOENT) {
        err_clear(e);
        *ret = NULL;
        return 0;
    }
    if (r < 0)
        return err_prefix(e, "machine type file");
    return 0;
}

bool gfd_output_is_stdout(const char *path)
{
    return !path || !*path || strcmp(path, "-") == 0;
}

int gfd_output_write(const char *path, const char *data, size_t len, struct err *e)
{
    if (gfd_output_is_stdout(path)) {
        if (fwrite(data, 1, len, stdout) != len || fflush(stdout) != 0)
            return err_errno(e, -EIO, "write labels to stdout");
        return 0;
    }
    /* A device or FIFO (/dev/null, a pipe) is written in place: renaming a temp file over it
     * would replace the device node. */
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        if (S_ISDIR(st.st_mode))
            return err_set(e, -EISDIR, "output file \"%s\": is a directory", path);
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
            return err_errno(e, -errno, "output file \"%s\"", path);
        int r = fd_write_all(fd, data, len);
        if (r < 0)
            return err_errno(e, r, "write output file \"%s\"", path);
        return 0;
    }
    _cleanup_free_ char *dir = xstrdup(path);
    (void)mkdir_p(dirname(dir), 0755);
    int r = file_write_atomic(path, data, len, 0644, e);
    if (r < 0)
        return err_prefix(e, "output file");
    return 0;
}

/* On exit the labels go away with the process, as NVIDIA's GFD does. */
void gfd_output_remove(const char *path)
{
    struct stat st;
    if (gfd_output_is_stdout(path) || lstat(path, &st) < 0 || !S_ISREG(st.st_mode))
        return;
    if (unlink(path) < 0)
        log_warn(COMP, "cannot remove the output file", "path=%s errno=%d", path, errno);
}

void gfd_output_clean(const char *path)
{
    struct err e = {0};
    if (!gfd_output_is_stdout(path) && file_remove_stale_temps(path, &e) < 0)
        log_warn(COMP, "cannot remove stale temporary files", "reason=\"%s\"", log_kv_quote(e.msg));
}
