/* SPDX-License-Identifier: Apache-2.0 */
/*
 * util: the small things every gpuop module uses.
 *
 *  - struct err: errors as values. A failing function returns a negative errno-style code and
 *    fills an err with a message naming the thing and the reason; callers prefix context as the
 *    error travels up and only the top (main, a request boundary, a reconcile) logs it.
 *  - cleanup attributes (_cleanup_free_, _cleanup_close_, ...) and ownership hand-off (steal_ptr).
 *  - struct sbuf: a growable byte buffer with a hard limit fixed at creation.
 *  - strict parsers for numbers, booleans and durations.
 *  - files: bounded reads, atomic writes (temp file + rename), O_CLOEXEC everywhere.
 *  - one-line structured logging, text or JSON (--log-format json).
 *  - monotonic deadlines, an interruptible timed wait, and the stop token every long-running
 *    loop watches (stop.c).
 *
 * Everything here is thread-safe except the log configuration setters, which main calls once.
 */
#ifndef GPUOP_UTIL_H
#define GPUOP_UTIL_H

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <dirent.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define GPUOP_PRINTF(a, b) __attribute__((format(printf, a, b)))
/* The result must be used: a (void) cast does not silence it under GCC, on purpose. */
#define GPUOP_WUR     __attribute__((warn_unused_result))
#define ARRAY_SIZE(x) (sizeof(x) / sizeof((x)[0]))
#define UNUSED        __attribute__((unused))

/* ---- errors ------------------------------------------------------------------------------- */

#define ERR_MSG_MAX 512

struct err {
    int code;              /* negative errno-style code, 0 when unset */
    char msg[ERR_MSG_MAX]; /* "open \"/etc/x.yaml\": No such file or directory" */
};

/* Sets the error (code is negative, e.g. -EINVAL) and returns code, so `return err_set(...)`. */
int err_set(struct err *e, int code, const char *fmt, ...) GPUOP_PRINTF(3, 4);
/* Sets the error from errno-style code with strerror appended: "<fmt>: <strerror(-code)>". */
int err_errno(struct err *e, int code, const char *fmt, ...) GPUOP_PRINTF(3, 4);
/* Prepends context: "<fmt>: <old message>". Returns e->code. */
int err_prefix(struct err *e, const char *fmt, ...) GPUOP_PRINTF(2, 3);
void err_clear(struct err *e);
/* The message, or "(no error)"; never NULL. Accepts NULL. */
const char *err_msg(const struct err *e);

/* ---- cleanup ------------------------------------------------------------------------------ */

static inline void freep(void *p)
{
    free(*(void **)p);
}
static inline void closep(int *fd)
{
    if (*fd >= 0) {
        int saved = errno;
        close(*fd);
        errno = saved;
    }
}
static inline void fclosep(FILE **f)
{
    if (*f)
        fclose(*f);
}

#define _cleanup_(f)     __attribute__((cleanup(f)))
#define _cleanup_free_   _cleanup_(freep)
#define _cleanup_close_  _cleanup_(closep)
#define _cleanup_fclose_ _cleanup_(fclosep)

/* Defines `static inline void <func>p(type **p)` calling func(*p) when non-NULL. */
#define DEFINE_CLEANUP_FUNC(type, func)  \
    static inline void func##p(type **p) \
    {                                    \
        if (*p)                          \
            func(*p);                    \
    }

DEFINE_CLEANUP_FUNC(DIR, closedir) /* _cleanup_(closedirp) DIR *d */

/* Hands ownership out: returns *pp and sets *pp = NULL. */
#define steal_ptr(pp)                   \
    ({                                  \
        __typeof__(*(pp)) _tmp = *(pp); \
        *(pp) = NULL;                   \
        _tmp;                           \
    })
static inline int steal_fd(int *fd)
{
    int r = *fd;
    *fd = -1;
    return r;
}

/* Allocation that cannot silently fail: on OOM the process has no sane way on; prints and exits.
 * Use for small bookkeeping allocations only; sizes driven by input go through bounded paths. */
void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t m);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
char *xasprintf(const char *fmt, ...) GPUOP_PRINTF(1, 2);

/* ---- bounded buffer ----------------------------------------------------------------------- */

/*
 * A truncated buffer is an error, never silent output. Two ways to write:
 *  - checked: sbuf_append/puts/printf/vprintf return 0 or a negative code (-ENOBUFS when the
 *    limit would be passed) and the result must be used (GPUOP_WUR);
 *  - sticky, for code that writes many pieces: sbuf_add/adds/addf/vaddf return nothing, and
 *    sbuf_check() (or sbuf_check_err()) must be called once before the content is used.
 * Either way the first failure is kept in the buffer (sticky): later appends are no-ops that
 * return it, and the content stays what it was before the failing append. sbuf_reset, sbuf_free
 * and sbuf_steal clear it.
 */
struct sbuf {
    char *data; /* always NUL-terminated when non-NULL */
    size_t len;
    size_t cap;
    size_t limit; /* hard limit on len, fixed at creation */
    int error;    /* first failure (negative), 0 while every append succeeded */
};

void sbuf_init(struct sbuf *b, size_t limit);
void sbuf_free(struct sbuf *b);
void sbuf_reset(struct sbuf *b);
/* -ENOBUFS when the limit would be passed (the buffer is unchanged then), or the error of an
 * earlier failure. */
GPUOP_WUR int sbuf_append(struct sbuf *b, const void *data, size_t n);
GPUOP_WUR int sbuf_puts(struct sbuf *b, const char *s);
GPUOP_WUR int sbuf_printf(struct sbuf *b, const char *fmt, ...) GPUOP_PRINTF(2, 3);
GPUOP_WUR int sbuf_vprintf(struct sbuf *b, const char *fmt, va_list ap);
/* Sticky forms: a failure is only recorded in b; check it once with sbuf_check*(). */
void sbuf_add(struct sbuf *b, const void *data, size_t n);
void sbuf_adds(struct sbuf *b, const char *s);
void sbuf_addf(struct sbuf *b, const char *fmt, ...) GPUOP_PRINTF(2, 3);
void sbuf_vaddf(struct sbuf *b, const char *fmt, va_list ap);
/* Records a failure of the caller's own (code < 0) as the sticky error, unless one is already
 * there, so a writer layered on sbuf keeps one error for the whole output. Returns b->error. */
int sbuf_fail(struct sbuf *b, int code);
/* The sticky error: 0 when everything written so far is in the buffer. */
GPUOP_WUR int sbuf_check(const struct sbuf *b);
/* The same, and on failure sets e to "<what>: larger than the limit of N bytes" (or the
 * failure's strerror), what being the thing the buffer was building. */
GPUOP_WUR int sbuf_check_err(const struct sbuf *b, struct err *e, const char *what_fmt, ...)
    GPUOP_PRINTF(3, 4);
/* The capacity b will have once extra more bytes are appended (b->cap when they fit, or when
 * the append would fail): what an append is about to allocate, for callers that account for
 * their memory before it is spent. */
size_t sbuf_cap_after(const struct sbuf *b, size_t extra);
/* The buffer is to hold `total` bytes in all (a body's Content-Length): its capacity becomes
 * exactly that (and the NUL), so the appends up to it neither reallocate nor leave a buffer up
 * to twice the size. Nothing happens when it already has room or `total` passes the limit (an
 * append will fail then). */
void sbuf_expect(struct sbuf *b, size_t total);
/* Takes the data out (caller frees); the buffer is reset. Never NULL. Check the buffer first:
 * after a failure the data is whatever fitted. */
char *sbuf_steal(struct sbuf *b);
static inline void sbuf_freep(struct sbuf *b)
{
    sbuf_free(b);
}
#define _cleanup_sbuf_ _cleanup_(sbuf_freep)

/* ---- strict parsers (0 or -EINVAL / -ERANGE; *ret written only on success) ----------------- */

int parse_u64(const char *s, uint64_t *ret); /* decimal, or 0x hex */
int parse_i64(const char *s, int64_t *ret);
int parse_uint(const char *s, unsigned *ret);
int parse_int(const char *s, int *ret);
int parse_bool(const char *s, bool *ret); /* true/false, 1/0, yes/no, on/off; any case */
/* "250ms", "30s", "5m", "1h", "1m30s", plain "30" (seconds). "infinite" gives UINT64_MAX. */
int parse_duration_ms(const char *s, uint64_t *ret_ms);
bool str_has_prefix(const char *s, const char *prefix);
bool str_has_suffix(const char *s, const char *suffix);
bool streq_ptr(const char *a, const char *b); /* NULL-safe */
/* Copies with truncation into dst of size n; always terminates; returns strlen(src). */
size_t strlcpy_s(char *dst, const char *src, size_t n);
/* One line of text into buf (snprintf's rules); a line too long for buf ends in "..." rather
 * than being cut silently. */
void str_printf_cut(char *buf, size_t n, const char *fmt, ...) GPUOP_PRINTF(3, 4);

/* ---- codecs (codec.c): hex digits, base64, URL percent-encoding, a hash --------------------- */

/* FNV-1a, 64 bits, of n bytes: a stable hash for names and cut points (not for adversaries;
 * its high bits are better mixed than its low ones). */
uint64_t hash_fnv1a64(const void *data, size_t n);

/* The value of one hex digit (either case), or -1. */
int hex_digit(char c);
/* Exactly n hex digits (1 to 16) into *ret; -EINVAL on anything else. */
int hex_parse(const char *s, size_t n, uint64_t *ret);
/* Standard base64 with padding; malloc'ed, NUL-terminated. */
char *base64_encode(const void *data, size_t n);
/* Standard or URL-safe alphabet, padding optional, whitespace skipped. The result is malloc'ed
 * and NUL-terminated (binary safe through *ret_len). -EINVAL on bad input. */
int base64_decode(const char *in, size_t n, char **ret, size_t *ret_len);
/* Decodes %XX escapes (a malformed one is kept as is); with plus_space '+' becomes ' ', as in a
 * query string. malloc'ed, NUL-terminated. */
char *url_decode(const char *s, size_t n, bool plus_space);
/* Appends s percent-encoded: every byte but RFC 3986's unreserved ones becomes %XX. Returns 0, or
 * sbuf's error when out is full. */
GPUOP_WUR int url_encode(struct sbuf *out, const char *s);

/* ---- files -------------------------------------------------------------------------------- */

/* Reads a whole file (at most limit bytes; larger is -EFBIG). *ret is NUL-terminated. Anything
 * but a regular file (a FIFO, a device, a socket: -EINVAL; a directory: -EISDIR) is refused,
 * "not a regular file", without blocking in open. */
int file_read_all(const char *path, size_t limit, char **ret, size_t *ret_len, struct err *e);
/* The same, and *ret_st (may be NULL) is the fstat of the file read: what was checked is what
 * was read (an owner or mode check after the read has no window between the two). */
struct stat;
int file_read_all_stat(const char *path, size_t limit, char **ret, size_t *ret_len,
                       struct stat *ret_st, struct err *e);
/* Reads fd to its end (at most limit bytes; more is -EFBIG), what naming it in errors ("stdin").
 * *ret is NUL-terminated, "" for nothing. */
int fd_read_all(int fd, const char *what, size_t limit, char **ret, size_t *ret_len, struct err *e);
/* Writes all len bytes to fd (a short write is retried, EINTR too). 0 or -errno. */
GPUOP_WUR int fd_write_all(int fd, const void *data, size_t len);
/* Writes via temp file in the same directory + fsync + rename. The temp file is named
 * ".<name>.tmp.XXXXXX": hidden from programs that read every visible file of the directory. */
int file_write_atomic(const char *path, const void *data, size_t len, unsigned mode, struct err *e);
/* file_write_atomic, the new file owned by uid:gid (set on the temp file before the rename, as
 * the mode is); (uid_t)-1 and (gid_t)-1 leave that part as the file was created. */
int file_write_atomic_owned(const char *path, const void *data, size_t len, unsigned mode,
                            uid_t uid, gid_t gid, struct err *e);
/* Copies the regular file src (at most limit bytes) to dst with file_write_atomic. */
int file_copy(const char *src, const char *dst, size_t limit, unsigned mode, struct err *e);
/* Removes the temp files file_write_atomic leaves for path when killed mid-write (and those of
 * older versions, "<name>.tmp.XXXXXX"): regular files only. Returns how many were removed, or a
 * negative code. Call at start, while no other process writes path. */
int file_remove_stale_temps(const char *path, struct err *e);
/* mkdir -p */
int mkdir_p(const char *path, unsigned mode);
/* Resolves path (as seen from inside root: "/var/run/cdi/nvidia.yaml") under root, following
 * every symbolic link inside root as the root's own system would: an absolute target starts
 * again at root, ".." stops at it, so nothing resolves outside root. A missing component ends
 * the resolution, the rest taken as it is. Writes root plus the resolved path into buf (root
 * "/" adds nothing). -ELOOP past 40 links; -ENAMETOOLONG; another negative errno when a link
 * cannot be read. The one resolver for driver roots, host roots and container roots. */
int file_root_resolve(const char *root, const char *path, char *buf, size_t n);

/* ---- processes (proc.c) ------------------------------------------------------------------- */

/* Runs the program argv[0] (an absolute path: no PATH search) with argv and envp (NULL: an empty
 * environment), stdin from /dev/null, stdout and stderr this process's, no signal blocked or
 * ignored, and waits for it. 0 when it exits 0; -EIO with e saying how it ended ("exited with
 * status 1", "ended by signal 9"); another negative errno when it cannot be started. */
int proc_run(const char *const *argv, const char *const *envp, struct err *e);
/* The same with input as the program's stdin (at most PROC_INPUT_MAX bytes: a pipe's buffer,
 * written before the program starts; the program sees end of file after it). */
#define PROC_INPUT_MAX 4096
int proc_run_input(const char *const *argv, const char *const *envp, const char *input,
                   struct err *e);
/* The executable a command name means, as a shell finds it: name itself when it holds a '/',
 * else the first executable <dir>/name of PATH (unset or empty: the usual system folders).
 * *ret is malloc'ed. -ENOENT naming the command when there is none. */
int proc_find(const char *name, char **ret, struct err *e);
/* This process's environment with LD_LIBRARY_PATH led by lib_dir (NULL or "": unchanged), for a
 * driver's own tool run from its root (nvidia-smi beside its libnvidia-ml). The array (NULL-
 * terminated) and the one string it adds (*ret_added, NULL when none) are malloc'ed; the other
 * strings are environ's. */
const char **proc_env_lib_first(const char *lib_dir, char **ret_added);

/* ---- time --------------------------------------------------------------------------------- */

uint64_t now_ms_mono(void);
uint64_t now_us_mono(void);
uint64_t now_ms_real(void);
/* RFC 3339 UTC, e.g. 2026-11-29T21:30:00Z, into buf (>= 32 bytes). */
void time_rfc3339(uint64_t unix_ms, char *buf, size_t n);
/* The same with microseconds ("2026-01-02T03:04:05.123456Z"): Kubernetes' MicroTime. */
void time_rfc3339_us(uint64_t unix_us, char *buf, size_t n);
/* "2026-01-01T00:00:00Z" (or with fractional seconds) to ms since the epoch; -EINVAL. */
int time_parse_rfc3339(const char *s, uint64_t *ret_ms);

/* ---- deadlines and waits (stop.c) --------------------------------------------------------- */

/* A deadline is a CLOCK_MONOTONIC instant in milliseconds (now_ms_mono's clock); DEADLINE_NEVER
 * never passes. Nothing here reads the wall clock, so a clock step never shortens a wait. */
#define DEADLINE_NEVER UINT64_MAX

/* now_ms_mono() + ms, saturating; ms == DEADLINE_NEVER gives DEADLINE_NEVER. */
uint64_t deadline_after(uint64_t ms);
/* Milliseconds left until the deadline, 0 once it has passed (DEADLINE_NEVER: UINT64_MAX). */
uint64_t deadline_left_ms(uint64_t deadline);
/* The time left as a poll() timeout: -1 for DEADLINE_NEVER, else clamped to [0, INT_MAX]. */
int deadline_poll_ms(uint64_t deadline);
/* An absolute CLOCK_MONOTONIC timespec for a deadline (DEADLINE_NEVER: far in the future). */
struct timespec deadline_timespec(uint64_t deadline);

/* pthread_cond_init on CLOCK_MONOTONIC: the only kind cond_wait_deadline accepts. */
int cond_init_monotonic(pthread_cond_t *cond);
/* With lock held: waits on cond until signalled or the deadline. 0 when woken (perhaps
 * spuriously: callers loop on their own predicate), -ETIMEDOUT once the deadline has passed. */
int cond_wait_deadline(pthread_cond_t *cond, pthread_mutex_t *lock, uint64_t deadline);
/* The interruptible nap over a caller's own lock and monotonic cond: sleeps up to ms, or until
 * *flag is nonzero (the waker sets it under lock, then broadcasts cond). Takes and releases lock.
 * Returns true when *flag was set. */
bool cond_nap(pthread_mutex_t *lock, pthread_cond_t *cond, const volatile int *flag, uint64_t ms);

/*
 * The stop token: the one "please stop" of a process or a subsystem. Requested once (by the
 * signal handler thread, or an error path), never cleared. Loops either wait on it
 * (stop_wait, a timed sleep that ends early on stop) or poll() its fd, which turns readable on
 * stop and stays readable. Thread-safe; stop_request is not async-signal-safe (signals go
 * through signalfd, see src/lib/svc).
 */
struct stop_token;
int stop_token_new(struct stop_token **ret, struct err *e);
void stop_token_free(struct stop_token *s); /* accepts NULL */
DEFINE_CLEANUP_FUNC(struct stop_token, stop_token_free)
void stop_request(struct stop_token *s);
bool stop_requested(const struct stop_token *s);
/* Sleeps up to ms (DEADLINE_NEVER: until stopped); true when stop was requested. */
bool stop_wait(struct stop_token *s, uint64_t ms);
/* Sleeps until the monotonic deadline; true when stop was requested. */
bool stop_wait_until(struct stop_token *s, uint64_t deadline);
/* An fd that polls readable (POLLIN) once stop is requested. Owned by the token. */
int stop_fd(const struct stop_token *s);
/* A flag that turns nonzero once stop is requested, for APIs that take a `const volatile int *`
 * stop (kube_watch_opts.stop, cond_nap). Owned by the token. */
const volatile int *stop_flag(const struct stop_token *s);
/* Calls fn(ud) once when stop is requested (at once when it already was), from the requesting
 * thread, without the token's lock held: for waits on other condition variables (a work
 * queue). At most STOP_MAX_HOOKS hooks; -ENOBUFS beyond. Remove a hook before freeing ud. */
#define STOP_MAX_HOOKS 8
int stop_hook_add(struct stop_token *s, void (*fn)(void *ud), void *ud);
void stop_hook_remove(struct stop_token *s, void (*fn)(void *ud), void *ud);

/* ---- logging ------------------------------------------------------------------------------ */

enum log_level { LOG_DEBUG = 0, LOG_INFO, LOG_WARN, LOG_ERROR };
enum log_format { LOG_FORMAT_TEXT = 0, LOG_FORMAT_JSON };

void log_set_level(enum log_level lvl);
void log_set_format(enum log_format fmt);
/* Parses "debug|info|warn|error" and "text|json"; -EINVAL otherwise. */
int log_parse_level(const char *s, enum log_level *ret);
int log_parse_format(const char *s, enum log_format *ret);
bool log_enabled(enum log_level lvl);

/*
 * One line to stderr: `<ts> <level> <component> <msg> key=value ...` or the JSON equivalent.
 * kv_fmt formats space-separated key=value pairs; quote values that hold spaces: key="a b".
 * Pass NULL for no fields.
 */
void log_emit(enum log_level lvl, const char *component, const char *msg, const char *kv_fmt, ...)
    GPUOP_PRINTF(4, 5);

#define log_debug(comp, msg, ...) log_emit(LOG_DEBUG, comp, msg, __VA_ARGS__)
#define log_info(comp, msg, ...)  log_emit(LOG_INFO, comp, msg, __VA_ARGS__)
#define log_warn(comp, msg, ...)  log_emit(LOG_WARN, comp, msg, __VA_ARGS__)
#define log_error(comp, msg, ...) log_emit(LOG_ERROR, comp, msg, __VA_ARGS__)

/* s made fit for a quoted value (key="%s"): every '"' becomes '\''. In place; returns s. */
char *log_kv_quote(char *s);

/* ---- gpuop's own shared modules (module.c) ------------------------------------------------ */

/* Parts of gpuop built apart (shared_module in meson) so that only the components that use them
 * map their libraries: src/lib/rtconfig's gpuop-tomlx.so, which brings libstdc++ and toml++.
 * Installed in <prefix>/MODULE_LIBDIR; in the build tree they sit beside build/gpuop. */
#define MODULE_LIBDIR "lib/gpuop"
/* dlopen()s gpuop's module `name` (RTLD_NOW | RTLD_LOCAL; never closed): the path in the
 * environment variable env_name when it is set (that path only; env_name may be NULL), else
 * `name` beside the running executable, else <the executable's folder>/../MODULE_LIBDIR/name.
 * *ret_path (may be NULL; malloc'ed) is the path loaded. -ELIBACC with e naming every path tried
 * and why it did not load. Thread-safe. */
int module_open(const char *name, const char *env_name, void **ret, char **ret_path, struct err *e);

/* ---- misc --------------------------------------------------------------------------------- */

/* The env var's value when set and non-empty, else NULL. */
const char *env_get(const char *name);

#endif
