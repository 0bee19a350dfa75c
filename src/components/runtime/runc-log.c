/* SPDX-License-Identifier: Apache-2.0 */
/* `gpuop runtime`'s errors where runc's caller looks (runtime-internal.h): stderr and runc's
 * --log file, in runc's format. */
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "runtime-internal.h"

/* containerd's shim reads runc's --log file to report why create failed. */
void runtime_log_line(const struct runtime_cmdline *c, const char *level, const char *msg)
{
    if (!c->log_path)
        return;
    _cleanup_close_ int fd =
        open(c->log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0644);
    if (fd < 0)
        return;
    char ts[40];
    time_rfc3339(now_ms_real(), ts, sizeof(ts));
    _cleanup_free_ char *line = NULL;
    if (streq_ptr(c->log_format, "json")) {
        _cleanup_(json_decrefp) json_t *o =
            json_pack("{s:s, s:s, s:s}", "level", level, "msg", msg, "time", ts);
        _cleanup_free_ char *s = json_dumps(o, JSON_COMPACT);
        line = xasprintf("%s\n", s ? s : "{}");
    } else {
        _cleanup_(json_decrefp) json_t *q = json_string(msg);
        _cleanup_free_ char *s = json_dumps(q, JSON_ENCODE_ANY);
        line = xasprintf("time=\"%s\" level=%s msg=%s\n", ts, level, s ? s : "\"\"");
    }
    if (write(fd, line, strlen(line)) < 0)
        return; /* nowhere left to say it */
}

void runtime_report(const struct runtime_cmdline *c, const char *msg)
{
    fprintf(stderr, "gpuop runtime: %s\n", msg);
    runtime_log_line(c, "error", msg);
}
