/* SPDX-License-Identifier: Apache-2.0 */
#include "util.h"

#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* ---- errors ------------------------------------------------------------------------------- */

int err_set(struct err *e, int code, const char *fmt, ...)
{
    if (code >= 0)
        code = -EINVAL;
    if (!e)
        return code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
    va_end(ap);
    e->code = code;
    return code;
}

int err_errno(struct err *e, int code, const char *fmt, ...)
{
    if (code > 0)
        code = -code;
    if (code == 0)
        code = -EIO;
    if (!e)
        return code;
    char head[ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(head, sizeof(head), fmt, ap);
    va_end(ap);
    /* Through an sbuf rather than snprintf into msg: the message is cut to ERR_MSG_MAX on
     * purpose, and a bounded err message is not an output anyone parses. */
    struct sbuf b;
    sbuf_init(&b, SIZE_MAX / 2);
    int r = sbuf_printf(&b, "%s: %s", head, strerror(-code));
    strlcpy_s(e->msg, r == 0 && b.data ? b.data : head, sizeof(e->msg));
    sbuf_free(&b);
    e->code = code;
    return code;
}

int err_prefix(struct err *e, const char *fmt, ...)
{
    if (!e)
        return -EINVAL;
    char head[ERR_MSG_MAX];
    char old[ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(head, sizeof(head), fmt, ap);
    va_end(ap);
    memcpy(old, e->msg, sizeof(old));
    old[sizeof(old) - 1] = '\0';
    struct sbuf b;
    sbuf_init(&b, SIZE_MAX / 2);
    int r = old[0] ? sbuf_printf(&b, "%s: %s", head, old) : sbuf_puts(&b, head);
    strlcpy_s(e->msg, r == 0 && b.data ? b.data : head, sizeof(e->msg));
    sbuf_free(&b);
    if (e->code >= 0)
        e->code = -EINVAL;
    return e->code;
}

void err_clear(struct err *e)
{
    if (!e)
        return;
    e->code = 0;
    e->msg[0] = '\0';
}

const char *err_msg(const struct err *e)
{
    if (!e || !e->msg[0])
        return "(no error)";
    return e->msg;
}

/* ---- allocation --------------------------------------------------------------------------- */

static void oom(void)
{
    static const char m[] = "gpuop: out of memory\n";
    ssize_t r = write(STDERR_FILENO, m, sizeof(m) - 1);
    (void)r;
    _exit(70);
}

void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        oom();
    return p;
}

void *xcalloc(size_t n, size_t m)
{
    void *p = calloc(n ? n : 1, m ? m : 1);
    if (!p)
        oom();
    return p;
}

void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q)
        oom();
    return q;
}

char *xstrdup(const char *s)
{
    char *p = strdup(s ? s : "");
    if (!p)
        oom();
    return p;
}

char *xstrndup(const char *s, size_t n)
{
    char *p = strndup(s ? s : "", n);
    if (!p)
        oom();
    return p;
}

char *xasprintf(const char *fmt, ...)
{
    char *p = NULL;
    va_list ap;
    va_start(ap, fmt);
    int r = vasprintf(&p, fmt, ap);
    va_end(ap);
    if (r < 0)
        oom();
    return p;
}

/* ---- sbuf --------------------------------------------------------------------------------- */

void sbuf_init(struct sbuf *b, size_t limit)
{
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->limit = limit;
    b->error = 0;
}

void sbuf_free(struct sbuf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
    b->error = 0;
}

void sbuf_reset(struct sbuf *b)
{
    b->len = 0;
    b->error = 0;
    if (b->data)
        b->data[0] = '\0';
}

int sbuf_fail(struct sbuf *b, int code)
{
    if (code < 0 && b->error == 0)
        b->error = code;
    return b->error;
}

size_t sbuf_cap_after(const struct sbuf *b, size_t extra)
{
    if (b->error || extra > b->limit || b->len > b->limit - extra)
        return b->cap; /* the append fails: nothing is allocated */
    size_t need = b->len + extra + 1;
    if (need <= b->cap)
        return b->cap;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need)
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    if (cap > b->limit + 1)
        cap = b->limit + 1;
    if (cap < need)
        cap = need;
    return cap;
}

void sbuf_expect(struct sbuf *b, size_t total)
{
    if (b->error || total > b->limit || total < b->cap)
        return;
    b->data = xrealloc(b->data, total + 1);
    b->cap = total + 1;
}

static int sbuf_reserve(struct sbuf *b, size_t extra)
{
    if (b->error)
        return b->error;
    if (extra > b->limit || b->len > b->limit - extra)
        return sbuf_fail(b, -ENOBUFS);
    size_t cap = sbuf_cap_after(b, extra);
    if (cap == b->cap)
        return 0;
    b->data = xrealloc(b->data, cap);
    b->cap = cap;
    return 0;
}

int sbuf_append(struct sbuf *b, const void *data, size_t n)
{
    int r = sbuf_reserve(b, n);
    if (r < 0)
        return r;
    if (n)
        memcpy(b->data + b->len, data, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

int sbuf_puts(struct sbuf *b, const char *s)
{
    return sbuf_append(b, s, strlen(s));
}

int sbuf_vprintf(struct sbuf *b, const char *fmt, va_list ap)
{
    if (b->error)
        return b->error;
    va_list aq;
    va_copy(aq, ap);
    int n = vsnprintf(NULL, 0, fmt, aq);
    va_end(aq);
    if (n < 0)
        return sbuf_fail(b, -EINVAL);
    int r = sbuf_reserve(b, (size_t)n);
    if (r < 0)
        return r;
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
    return 0;
}

int sbuf_printf(struct sbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = sbuf_vprintf(b, fmt, ap);
    va_end(ap);
    return r;
}

/* The sticky forms drop the result here on purpose: it stays in b->error for sbuf_check. */
void sbuf_add(struct sbuf *b, const void *data, size_t n)
{
    if (sbuf_append(b, data, n) < 0)
        return;
}

void sbuf_adds(struct sbuf *b, const char *s)
{
    sbuf_add(b, s, strlen(s));
}

void sbuf_vaddf(struct sbuf *b, const char *fmt, va_list ap)
{
    if (sbuf_vprintf(b, fmt, ap) < 0)
        return;
}

void sbuf_addf(struct sbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sbuf_vaddf(b, fmt, ap);
    va_end(ap);
}

int sbuf_check(const struct sbuf *b)
{
    return b->error;
}

int sbuf_check_err(const struct sbuf *b, struct err *e, const char *what_fmt, ...)
{
    if (b->error == 0)
        return 0;
    char what[ERR_MSG_MAX];
    va_list ap;
    va_start(ap, what_fmt);
    vsnprintf(what, sizeof(what), what_fmt, ap);
    va_end(ap);
    if (b->error == -ENOBUFS)
        return err_set(e, b->error, "%s: larger than the limit of %zu bytes", what, b->limit);
    return err_errno(e, b->error, "%s", what);
}

char *sbuf_steal(struct sbuf *b)
{
    char *p = b->data ? b->data : xstrdup("");
    b->data = NULL;
    b->len = b->cap = 0;
    b->error = 0;
    return p;
}

/* ---- parsers ------------------------------------------------------------------------------ */

int parse_u64(const char *s, uint64_t *ret)
{
    if (!s || !*s || isspace((unsigned char)*s) || *s == '-' || *s == '+')
        return -EINVAL;
    int base = 10;
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        base = 16;
        s += 2;
        if (!*s)
            return -EINVAL;
    }
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, base);
    if (errno == ERANGE)
        return -ERANGE;
    if (errno || !end || *end)
        return -EINVAL;
    *ret = (uint64_t)v;
    return 0;
}

int parse_i64(const char *s, int64_t *ret)
{
    if (!s || !*s || isspace((unsigned char)*s))
        return -EINVAL;
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno == ERANGE)
        return -ERANGE;
    if (errno || !end || *end)
        return -EINVAL;
    *ret = (int64_t)v;
    return 0;
}

int parse_uint(const char *s, unsigned *ret)
{
    uint64_t v;
    int r = parse_u64(s, &v);
    if (r < 0)
        return r;
    if (v > UINT_MAX)
        return -ERANGE;
    *ret = (unsigned)v;
    return 0;
}

int parse_int(const char *s, int *ret)
{
    int64_t v;
    int r = parse_i64(s, &v);
    if (r < 0)
        return r;
    if (v > INT_MAX || v < INT_MIN)
        return -ERANGE;
    *ret = (int)v;
    return 0;
}

int parse_bool(const char *s, bool *ret)
{
    if (!s)
        return -EINVAL;
    static const char *const yes[] = {"true", "1", "yes", "on", "y", "t"};
    static const char *const no[] = {"false", "0", "no", "off", "n", "f"};
    for (size_t i = 0; i < ARRAY_SIZE(yes); i++)
        if (strcasecmp(s, yes[i]) == 0) {
            *ret = true;
            return 0;
        }
    for (size_t i = 0; i < ARRAY_SIZE(no); i++)
        if (strcasecmp(s, no[i]) == 0) {
            *ret = false;
            return 0;
        }
    return -EINVAL;
}

int parse_duration_ms(const char *s, uint64_t *ret_ms)
{
    if (!s || !*s)
        return -EINVAL;
    if (strcasecmp(s, "infinite") == 0) {
        *ret_ms = UINT64_MAX;
        return 0;
    }
    /* A bare number is seconds. */
    bool digits_only = true;
    for (const char *p = s; *p; p++)
        if (!isdigit((unsigned char)*p))
            digits_only = false;
    if (digits_only) {
        uint64_t v;
        int r = parse_u64(s, &v);
        if (r < 0)
            return r;
        if (v > UINT64_MAX / 1000)
            return -ERANGE;
        *ret_ms = v * 1000;
        return 0;
    }
    uint64_t total = 0;
    const char *p = s;
    while (*p) {
        if (!isdigit((unsigned char)*p))
            return -EINVAL;
        errno = 0;
        char *end;
        unsigned long long v = strtoull(p, &end, 10);
        if (errno)
            return -ERANGE;
        /* A fraction: digits only (strtod would take exponents, "1.5e400s", and a cast of
         * its result out of range is undefined). Kept as numerator/denominator, at most 9
         * digits so neither overflows. */
        uint64_t frac_num = 0, frac_den = 1;
        if (*end == '.') {
            end++;
            if (!isdigit((unsigned char)*end))
                return -EINVAL;
            for (; isdigit((unsigned char)*end); end++)
                if (frac_den < 1000000000ull) {
                    frac_num = frac_num * 10 + (uint64_t)(*end - '0');
                    frac_den *= 10;
                }
        }
        uint64_t mul;
        if (strncmp(end, "ms", 2) == 0) {
            mul = 1;
            end += 2;
        } else if (*end == 's') {
            mul = 1000;
            end += 1;
        } else if (*end == 'm') {
            mul = 60 * 1000;
            end += 1;
        } else if (*end == 'h') {
            mul = 3600 * 1000;
            end += 1;
        } else {
            return -EINVAL;
        }
        if (v > UINT64_MAX / mul)
            return -ERANGE;
        uint64_t add = v * mul;
        uint64_t frac_ms = frac_num * mul / frac_den; /* < mul, and frac_num * mul < 2^64 */
        if (add > UINT64_MAX - frac_ms)
            return -ERANGE;
        add += frac_ms;
        if (total > UINT64_MAX - add)
            return -ERANGE;
        total += add;
        p = end;
    }
    *ret_ms = total;
    return 0;
}

bool str_has_prefix(const char *s, const char *prefix)
{
    return s && prefix && strncmp(s, prefix, strlen(prefix)) == 0;
}

bool str_has_suffix(const char *s, const char *suffix)
{
    if (!s || !suffix)
        return false;
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && memcmp(s + a - b, suffix, b) == 0;
}

bool streq_ptr(const char *a, const char *b)
{
    if (!a || !b)
        return a == b;
    return strcmp(a, b) == 0;
}

size_t strlcpy_s(char *dst, const char *src, size_t n)
{
    size_t l = strlen(src);
    if (n) {
        size_t c = l < n - 1 ? l : n - 1;
        memcpy(dst, src, c);
        dst[c] = '\0';
    }
    return l;
}

void str_printf_cut(char *buf, size_t n, const char *fmt, ...)
{
    if (n == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(buf, n, fmt, ap);
    va_end(ap);
    if (w >= 0 && (size_t)w >= n && n > 4)
        memcpy(buf + n - 4, "...", 4);
}

/* ---- files -------------------------------------------------------------------------------- */

static const char *file_type_name(mode_t m)
{
    if (S_ISDIR(m))
        return "a directory";
    if (S_ISFIFO(m))
        return "a FIFO";
    if (S_ISCHR(m))
        return "a character device";
    if (S_ISBLK(m))
        return "a block device";
    if (S_ISSOCK(m))
        return "a socket";
    return "an unknown kind";
}

int file_read_all(const char *path, size_t limit, char **ret, size_t *ret_len, struct err *e)
{
    return file_read_all_stat(path, limit, ret, ret_len, NULL, e);
}

int file_read_all_stat(const char *path, size_t limit, char **ret, size_t *ret_len,
                       struct stat *ret_st, struct err *e)
{
    /* O_NONBLOCK so that opening a FIFO nobody writes to cannot hang; then anything but a
     * regular file is refused: a FIFO, a device or a directory given as a config once read as
     * an empty one (or blocked). */
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return err_errno(e, -errno, "open \"%s\"", path);
    struct stat st;
    if (fstat(fd, &st) < 0)
        return err_errno(e, -errno, "stat \"%s\"", path);
    if (!S_ISREG(st.st_mode))
        return err_set(e, S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL,
                       "read \"%s\": not a regular file (%s)", path, file_type_name(st.st_mode));
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0)
        return err_errno(e, -errno, "open \"%s\"", path);
    int r = fd_read_all(fd, path, limit, ret, ret_len, e);
    if (r == 0 && ret_st)
        *ret_st = st;
    return r;
}

int fd_read_all(int fd, const char *what, size_t limit, char **ret, size_t *ret_len, struct err *e)
{
    struct sbuf b _cleanup_sbuf_;
    sbuf_init(&b, limit);
    char chunk[16384];
    for (;;) {
        ssize_t n = read(fd, chunk, sizeof(chunk));
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return err_errno(e, -errno, "read \"%s\"", what);
        }
        if (n == 0)
            break;
        if (sbuf_append(&b, chunk, (size_t)n) < 0)
            return err_set(e, -EFBIG, "read \"%s\": larger than the limit of %zu bytes", what,
                           limit);
    }
    if (ret_len)
        *ret_len = b.len;
    *ret = sbuf_steal(&b);
    return 0;
}

/* "<dir>/" and "<base>" of path ("" and path itself without a slash). */
static void path_split(const char *path, char **ret_dir, const char **ret_base)
{
    const char *slash = strrchr(path, '/');
    *ret_dir = slash ? xstrndup(path, (size_t)(slash - path + 1)) : xstrdup("");
    *ret_base = slash ? slash + 1 : path;
}

int fd_write_all(int fd, const void *data, size_t len)
{
    const char *p = data;
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

#define TEMP_SUFFIX "XXXXXX"

int file_write_atomic(const char *path, const void *data, size_t len, unsigned mode, struct err *e)
{
    return file_write_atomic_owned(path, data, len, mode, (uid_t)-1, (gid_t)-1, e);
}

int file_write_atomic_owned(const char *path, const void *data, size_t len, unsigned mode,
                            uid_t uid, gid_t gid, struct err *e)
{
    /* A temp name unique per call (not per process), so two threads writing one path never
     * share, truncate or rename each other's half-written temp file. Dot-prefixed: a program
     * that reads every visible file of the directory (Node Feature Discovery's features.d)
     * never reads a half-written or abandoned one. */
    _cleanup_free_ char *dir = NULL;
    const char *base;
    path_split(path, &dir, &base);
    if (!*base)
        return err_set(e, -EISDIR, "write \"%s\": not a file name", path);
    _cleanup_free_ char *tmp = xasprintf("%s.%s.tmp." TEMP_SUFFIX, dir, base);
    _cleanup_close_ int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0)
        return err_errno(e, -errno, "create a temporary file for \"%s\"", path);
    int r = fd_write_all(fd, data, len);
    if (r < 0) {
        unlink(tmp);
        return err_errno(e, r, "write \"%s\" (as \"%s\")", path, tmp);
    }
    /* The owner before the mode (a chown may clear set-id bits), both before the rename: the
     * file never appears under path with another owner or mode. */
    if ((uid != (uid_t)-1 || gid != (gid_t)-1) && fchown(fd, uid, gid) < 0) {
        r = -errno;
        unlink(tmp);
        return err_errno(e, r, "give \"%s\" (as \"%s\") the owner %d:%d", path, tmp, (int)uid,
                         (int)gid);
    }
    if (fchmod(fd, mode) < 0 || fsync(fd) < 0) {
        r = -errno;
        unlink(tmp);
        return err_errno(e, r, "sync \"%s\" (as \"%s\")", path, tmp);
    }
    if (rename(tmp, path) < 0) {
        r = -errno;
        unlink(tmp);
        return err_errno(e, r, "rename \"%s\" to \"%s\"", tmp, path);
    }
    return 0;
}

int file_copy(const char *src, const char *dst, size_t limit, unsigned mode, struct err *e)
{
    _cleanup_free_ char *data = NULL;
    size_t len = 0;
    int r = file_read_all(src, limit, &data, &len, e);
    if (r < 0)
        return r;
    return file_write_atomic(dst, data, len, mode, e);
}

/* A temp name of file_write_atomic for base: ".<base>.tmp.XXXXXX", or, as versions before the
 * dot prefix wrote them, "<base>.tmp.XXXXXX". */
static bool is_temp_of(const char *name, const char *base)
{
    if (name[0] == '.' && strncmp(name + 1, base, strlen(base)) == 0)
        name += 1;
    else if (strncmp(name, base, strlen(base)) != 0)
        return false;
    const char *rest = name + strlen(base);
    if (!str_has_prefix(rest, ".tmp."))
        return false;
    rest += strlen(".tmp.");
    if (strlen(rest) != strlen(TEMP_SUFFIX))
        return false;
    for (; *rest; rest++)
        if (!isalnum((unsigned char)*rest))
            return false;
    return true;
}

int file_remove_stale_temps(const char *path, struct err *e)
{
    _cleanup_free_ char *dir = NULL;
    const char *base;
    path_split(path, &dir, &base);
    if (!*base)
        return err_set(e, -EISDIR, "remove temporaries of \"%s\": not a file name", path);
    _cleanup_close_ int dfd =
        open(*dir ? dir : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (dfd < 0) {
        if (errno == ENOENT)
            return 0; /* no directory, no temporaries */
        return err_errno(e, -errno, "open directory \"%s\"", *dir ? dir : ".");
    }
    int dup_fd = fcntl(dfd, F_DUPFD_CLOEXEC, 0);
    if (dup_fd < 0)
        return err_errno(e, -errno, "open directory \"%s\"", *dir ? dir : ".");
    DIR *d = fdopendir(dup_fd);
    if (!d) {
        int r = -errno;
        close(dup_fd);
        return err_errno(e, r, "read directory \"%s\"", *dir ? dir : ".");
    }
    int removed = 0, first_err = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!is_temp_of(de->d_name, base))
            continue;
        struct stat st;
        if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
            continue;
        if (unlinkat(dfd, de->d_name, 0) == 0)
            removed++;
        else if (errno != ENOENT && !first_err)
            first_err = err_errno(e, -errno, "remove \"%s%s\"", dir, de->d_name);
    }
    closedir(d);
    return first_err ? first_err : removed;
}

int mkdir_p(const char *path, unsigned mode)
{
    if (!path || !*path)
        return -ENOENT;
    _cleanup_free_ char *p = xstrdup(path);
    for (char *s = p + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        if (mkdir(p, mode) < 0 && errno != EEXIST)
            return -errno;
        *s = '/';
    }
    if (mkdir(p, mode) < 0 && errno != EEXIST)
        return -errno;
    return 0;
}

#define FILE_ROOT_HOPS 40

int file_root_resolve(const char *root, const char *path, char *buf, size_t n)
{
    const char *r = strcmp(root, "/") == 0 ? "" : root;
    char done[PATH_MAX] = ""; /* resolved so far, as the host sees it ("/usr/lib") */
    char todo[PATH_MAX];      /* what is left ("x86_64-linux-gnu/libcuda.so.1") */
    if (strlcpy_s(todo, path, sizeof(todo)) >= sizeof(todo))
        return -ENAMETOOLONG;
    int hops = 0;
    char *p = todo;
    while (*p) {
        while (*p == '/')
            p++;
        if (!*p)
            break;
        char *slash = strchr(p, '/');
        size_t cl = slash ? (size_t)(slash - p) : strlen(p);
        char *rest = slash ? slash + 1 : p + cl;
        if (cl == 1 && p[0] == '.') {
            p = rest;
            continue;
        }
        if (cl == 2 && p[0] == '.' && p[1] == '.') {
            char *last = strrchr(done, '/');
            if (last)
                *last = '\0';
            p = rest;
            continue;
        }
        size_t dl = strlen(done);
        if (dl + 1 + cl >= sizeof(done))
            return -ENAMETOOLONG;
        char cand[PATH_MAX];
        memcpy(cand, done, dl);
        cand[dl] = '/';
        memcpy(cand + dl + 1, p, cl);
        cand[dl + 1 + cl] = '\0';
        char full[PATH_MAX];
        int w = snprintf(full, sizeof(full), "%s%s", r, cand);
        if (w < 0 || (size_t)w >= sizeof(full))
            return -ENAMETOOLONG;
        struct stat st;
        if (lstat(full, &st) < 0 || !S_ISLNK(st.st_mode)) {
            /* a plain component, or a missing one (the rest is taken as it is) */
            memcpy(done, cand, strlen(cand) + 1);
            p = rest;
            continue;
        }
        if (++hops > FILE_ROOT_HOPS)
            return -ELOOP;
        char target[PATH_MAX];
        ssize_t k = readlink(full, target, sizeof(target) - 1);
        if (k < 0)
            return -errno;
        if ((size_t)k >= sizeof(target) - 1)
            return -ENAMETOOLONG;
        target[k] = '\0';
        if (target[0] == '/')
            done[0] = '\0'; /* absolute: from the root again */
        char next[PATH_MAX];
        w = snprintf(next, sizeof(next), "%s/%s", target, rest);
        if (w < 0 || (size_t)w >= sizeof(next))
            return -ENAMETOOLONG;
        memcpy(todo, next, (size_t)w + 1);
        p = todo;
    }
    int w = snprintf(buf, n, "%s%s", r, done[0] ? done : "/");
    if (w < 0 || (size_t)w >= n)
        return -ENAMETOOLONG;
    return 0;
}

/* ---- time --------------------------------------------------------------------------------- */

uint64_t now_ms_mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

uint64_t now_us_mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

uint64_t now_ms_real(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void time_rfc3339(uint64_t unix_ms, char *buf, size_t n)
{
    time_t t = (time_t)(unix_ms / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

void time_rfc3339_us(uint64_t unix_us, char *buf, size_t n)
{
    time_t s = (time_t)(unix_us / 1000000);
    struct tm tm;
    gmtime_r(&s, &tm);
    snprintf(buf, n, "%04d-%02d-%02dT%02d:%02d:%02d.%06uZ", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (unsigned)(unix_us % 1000000));
}

int time_parse_rfc3339(const char *s, uint64_t *ret_ms)
{
    if (!s)
        return -EINVAL;
    struct tm tm = {0};
    const char *p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
    if (!p)
        return -EINVAL;
    uint64_t ms = 0;
    if (*p == '.') {
        unsigned digits = 0;
        for (p++; *p >= '0' && *p <= '9'; p++, digits++)
            if (digits < 3)
                ms = ms * 10 + (uint64_t)(*p - '0');
        if (digits == 0)
            return -EINVAL;
        for (; digits < 3; digits++)
            ms *= 10;
    }
    if (strcmp(p, "Z") != 0)
        return -EINVAL;
    time_t t = timegm(&tm);
    if (t < 0)
        return -EINVAL;
    *ret_ms = (uint64_t)t * 1000 + ms;
    return 0;
}

/* ---- logging ------------------------------------------------------------------------------ */

static enum log_level g_level = LOG_INFO;
static enum log_format g_format = LOG_FORMAT_TEXT;
static pthread_mutex_t g_log_lock = PTHREAD_MUTEX_INITIALIZER;
static const char *const level_names[] = {"debug", "info", "warn", "error"};

void log_set_level(enum log_level lvl)
{
    g_level = lvl;
}

void log_set_format(enum log_format fmt)
{
    g_format = fmt;
}

int log_parse_level(const char *s, enum log_level *ret)
{
    for (size_t i = 0; i < ARRAY_SIZE(level_names); i++)
        if (s && strcasecmp(s, level_names[i]) == 0) {
            *ret = (enum log_level)i;
            return 0;
        }
    if (s && strcasecmp(s, "warning") == 0) {
        *ret = LOG_WARN;
        return 0;
    }
    return -EINVAL;
}

int log_parse_format(const char *s, enum log_format *ret)
{
    if (s && strcmp(s, "text") == 0) {
        *ret = LOG_FORMAT_TEXT;
        return 0;
    }
    if (s && strcmp(s, "json") == 0) {
        *ret = LOG_FORMAT_JSON;
        return 0;
    }
    return -EINVAL;
}

bool log_enabled(enum log_level lvl)
{
    return lvl >= g_level;
}

static void json_escape(struct sbuf *b, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '"':
            sbuf_adds(b, "\\\"");
            break;
        case '\\':
            sbuf_adds(b, "\\\\");
            break;
        case '\n':
            sbuf_adds(b, "\\n");
            break;
        case '\t':
            sbuf_adds(b, "\\t");
            break;
        case '\r':
            sbuf_adds(b, "\\r");
            break;
        default:
            if (c < 0x20)
                sbuf_addf(b, "\\u%04x", c);
            else
                sbuf_add(b, &s[i], 1);
        }
    }
}

/* Whether the '"' at q closes a quoted value: it ends the line or is followed by " key=". Values
 * are often error messages that hold quotes of their own (`reason="open "/x": No such file"`). */
static bool kv_closing_quote(const char *q)
{
    if (q[1] == '\0')
        return true;
    if (q[1] != ' ')
        return false;
    const char *k = q + 2;
    while (*k == ' ')
        k++;
    const char *start = k;
    while (*k && (isalnum((unsigned char)*k) || *k == '_' || *k == '-' || *k == '.'))
        k++;
    return k > start && *k == '=';
}

/* Turns `a=1 b="x y" c=z` into `,"a":"1","b":"x y","c":"z"`. */
static void kv_to_json(struct sbuf *b, const char *kv)
{
    const char *p = kv;
    while (*p) {
        while (*p == ' ')
            p++;
        if (!*p)
            break;
        const char *k = p;
        while (*p && *p != '=' && *p != ' ')
            p++;
        size_t klen = (size_t)(p - k);
        const char *v = "";
        size_t vlen = 0;
        if (*p == '=') {
            p++;
            if (*p == '"') {
                p++;
                v = p;
                while (*p && !(*p == '"' && p[-1] != '\\' && kv_closing_quote(p)))
                    p++;
                vlen = (size_t)(p - v);
                if (*p == '"')
                    p++;
            } else {
                v = p;
                while (*p && *p != ' ')
                    p++;
                vlen = (size_t)(p - v);
            }
        }
        sbuf_adds(b, ",\"");
        json_escape(b, k, klen);
        sbuf_adds(b, "\":\"");
        json_escape(b, v, vlen);
        sbuf_adds(b, "\"");
    }
}

#define LOG_LINE_MAX 8192

/* One record into b; the sticky error says whether it fitted. */
static void log_format(struct sbuf *b, const char *ts, const char *lname, const char *component,
                       const char *msg, const char *kv)
{
    if (g_format == LOG_FORMAT_JSON) {
        sbuf_addf(b, "{\"ts\":\"%s\",\"level\":\"%s\",\"component\":\"", ts, lname);
        json_escape(b, component, strlen(component));
        sbuf_adds(b, "\",\"msg\":\"");
        json_escape(b, msg, strlen(msg));
        sbuf_adds(b, "\"");
        kv_to_json(b, kv);
        sbuf_adds(b, "}\n");
    } else {
        sbuf_addf(b, "%s %-5s %s %s", ts, lname, component, msg);
        if (kv[0])
            sbuf_addf(b, " %s", kv);
        /* one line, always */
        for (size_t i = 0; i < b->len; i++)
            if (b->data[i] == '\n')
                b->data[i] = ' ';
        sbuf_adds(b, "\n");
    }
}

void log_emit(enum log_level lvl, const char *component, const char *msg, const char *kv_fmt, ...)
{
    if (lvl < g_level)
        return;
    char ts[40];
    time_rfc3339(now_ms_real(), ts, sizeof(ts));
    /* The fields go through a buffer of the line's limit: fields that do not fit make the
     * record too long (below), rather than being cut where a fixed array ends. */
    struct sbuf kv _cleanup_sbuf_;
    sbuf_init(&kv, LOG_LINE_MAX);
    sbuf_adds(&kv, "");
    if (kv_fmt) {
        va_list ap;
        va_start(ap, kv_fmt);
        sbuf_vaddf(&kv, kv_fmt, ap);
        va_end(ap);
    }
    struct sbuf b _cleanup_sbuf_;
    sbuf_init(&b, LOG_LINE_MAX);
    const char *lname = level_names[lvl <= LOG_ERROR ? lvl : LOG_ERROR];
    if (sbuf_check(&kv) == 0)
        log_format(&b, ts, lname, component, msg, kv.data);
    if (sbuf_check(&kv) < 0 || sbuf_check(&b) < 0) {
        /* Too long for one line: say so in a line that fits (the start of msg, no fields)
         * rather than writing a cut or malformed record. */
        char head[512];
        strlcpy_s(head, msg, sizeof(head));
        sbuf_reset(&b);
        log_format(&b, ts, lname, component, head, "log_truncated=true");
        if (sbuf_check(&b) < 0)
            return;
    }
    pthread_mutex_lock(&g_log_lock);
    fwrite(b.data, 1, b.len, stderr);
    fflush(stderr);
    pthread_mutex_unlock(&g_log_lock);
}

char *log_kv_quote(char *s)
{
    for (char *p = s; *p; p++)
        if (*p == '"')
            *p = '\'';
    return s;
}

const char *env_get(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}
