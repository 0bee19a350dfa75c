/* SPDX-License-Identifier: Apache-2.0 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "util.h"

static void test_err(void **state)
{
    (void)state;
    struct err e = {0};
    assert_int_equal(err_set(&e, -ENOENT, "open \"%s\"", "/x"), -ENOENT);
    assert_string_equal(err_msg(&e), "open \"/x\"");
    err_prefix(&e, "load fleet");
    assert_string_equal(err_msg(&e), "load fleet: open \"/x\"");
    assert_int_equal(e.code, -ENOENT);
    assert_int_equal(err_errno(&e, ENOENT, "stat \"%s\"", "/y"), -ENOENT);
    assert_string_equal(err_msg(&e), "stat \"/y\": No such file or directory");
    assert_string_equal(err_msg(NULL), "(no error)");
}

static void test_sbuf_limit(void **state)
{
    (void)state;
    struct sbuf b _cleanup_sbuf_;
    sbuf_init(&b, 10);
    assert_int_equal(sbuf_puts(&b, "0123456789"), 0);
    assert_int_equal(sbuf_puts(&b, "x"), -ENOBUFS);
    assert_int_equal(b.len, 10);
    assert_string_equal(b.data, "0123456789");
    sbuf_reset(&b);
    assert_int_equal(sbuf_printf(&b, "%d-%s", 42, "ab"), 0);
    assert_string_equal(b.data, "42-ab");
    assert_int_equal(sbuf_printf(&b, "%s", "too long string"), -ENOBUFS);
    assert_string_equal(b.data, "42-ab");
}

/* sbuf_cap_after says what an append is about to allocate: what the append then leaves. */
static void test_sbuf_cap_after(void **state)
{
    (void)state;
    struct sbuf b _cleanup_sbuf_;
    sbuf_init(&b, 5000);
    assert_int_equal(sbuf_cap_after(&b, 0), 256); /* even an empty append makes the buffer */
    static const size_t steps[] = {1, 200, 55, 1, 700, 1000, 2000, 1043};
    for (size_t i = 0; i < ARRAY_SIZE(steps); i++) {
        char chunk[2048];
        memset(chunk, 'x', sizeof(chunk));
        size_t want = sbuf_cap_after(&b, steps[i]);
        assert_int_equal(sbuf_append(&b, chunk, steps[i]), 0);
        assert_int_equal(b.cap, want);
        assert_int_equal(sbuf_cap_after(&b, 0), b.cap); /* nothing more for nothing */
    }
    assert_int_equal(b.len, 5000);
    assert_int_equal(b.cap, 5001); /* at most the limit and its NUL */
    /* an append over the limit allocates nothing */
    assert_int_equal(sbuf_cap_after(&b, 1), b.cap);
    assert_int_equal(sbuf_append(&b, "y", 1), -ENOBUFS);
    assert_int_equal(b.cap, 5001);
}

/* sbuf_expect sizes the buffer to a known total at once: the appends up to it allocate
 * nothing more; a total over the limit, or one that already fits, changes nothing. */
static void test_sbuf_expect(void **state)
{
    (void)state;
    struct sbuf b _cleanup_sbuf_;
    sbuf_init(&b, 10000);
    sbuf_expect(&b, 20000); /* over the limit: nothing */
    assert_int_equal(b.cap, 0);
    sbuf_expect(&b, 3000);
    assert_int_equal(b.cap, 3001);
    char chunk[1000];
    memset(chunk, 'x', sizeof(chunk));
    for (int i = 0; i < 3; i++) {
        assert_int_equal(sbuf_cap_after(&b, sizeof(chunk)), 3001);
        assert_int_equal(sbuf_append(&b, chunk, sizeof(chunk)), 0);
        assert_int_equal(b.cap, 3001);
    }
    sbuf_expect(&b, 100); /* fits already */
    assert_int_equal(b.cap, 3001);
    assert_int_equal(sbuf_append(&b, "y", 1), 0); /* past it: grows as before */
    assert_true(b.cap > 3001);
    assert_int_equal(b.len, 3001);
}

/* The first failure sticks: later appends, even small ones, do nothing and report it. */
static void test_sbuf_sticky(void **state)
{
    (void)state;
    struct sbuf b _cleanup_sbuf_;
    sbuf_init(&b, 8);
    sbuf_adds(&b, "abc");
    assert_int_equal(sbuf_check(&b), 0);
    sbuf_addf(&b, "%s", "defghi");
    assert_int_equal(sbuf_check(&b), -ENOBUFS);
    sbuf_adds(&b, "d");
    assert_int_equal(sbuf_puts(&b, "d"), -ENOBUFS);
    assert_int_equal(sbuf_append(&b, "d", 1), -ENOBUFS);
    assert_string_equal(b.data, "abc");
    struct err e = {0};
    assert_int_equal(sbuf_check_err(&b, &e, "the %s list", "device"), -ENOBUFS);
    assert_int_equal(e.code, -ENOBUFS);
    assert_string_equal(err_msg(&e), "the device list: larger than the limit of 8 bytes");
    /* reset starts over */
    sbuf_reset(&b);
    assert_int_equal(sbuf_check(&b), 0);
    sbuf_addf(&b, "%d", 1234567);
    assert_int_equal(sbuf_check_err(&b, &e, "unused"), 0);
    assert_string_equal(b.data, "1234567");
    /* a failure of the caller's own sticks too, and only the first one counts */
    assert_int_equal(sbuf_fail(&b, -EINVAL), -EINVAL);
    assert_int_equal(sbuf_fail(&b, -EIO), -EINVAL);
    assert_int_equal(sbuf_puts(&b, "x"), -EINVAL);
    assert_int_equal(sbuf_check_err(&b, &e, "page"), -EINVAL);
    assert_string_equal(err_msg(&e), "page: Invalid argument");
    assert_int_equal(sbuf_fail(&b, 0), -EINVAL);
    /* steal hands the data out and clears the error with it */
    free(sbuf_steal(&b));
    assert_int_equal(sbuf_check(&b), 0);
    assert_int_equal(sbuf_puts(&b, "ok"), 0);
    assert_string_equal(b.data, "ok");
}

/* FNV-1a 64's published values. */
static void test_hash_fnv1a64(void **state)
{
    (void)state;
    assert_true(hash_fnv1a64("", 0) == 0xcbf29ce484222325ULL);
    assert_true(hash_fnv1a64("a", 1) == 0xaf63dc4c8601ec8cULL);
    assert_true(hash_fnv1a64("foobar", 6) == 0x85944171f73967e8ULL);
    assert_true(hash_fnv1a64("a\0b", 3) != hash_fnv1a64("a", 1)); /* n bytes, NULs included */
}

static void test_parse_numbers(void **state)
{
    (void)state;
    uint64_t u;
    assert_int_equal(parse_u64("42", &u), 0);
    assert_int_equal(u, 42);
    assert_int_equal(parse_u64("0x233010de", &u), 0);
    assert_int_equal(u, 0x233010de);
    assert_int_equal(parse_u64("-1", &u), -EINVAL);
    assert_int_equal(parse_u64("12a", &u), -EINVAL);
    assert_int_equal(parse_u64("", &u), -EINVAL);
    assert_int_equal(parse_u64("99999999999999999999999", &u), -ERANGE);
    int i;
    assert_int_equal(parse_int("-7", &i), 0);
    assert_int_equal(i, -7);
    assert_int_equal(parse_int("3000000000", &i), -ERANGE);
    unsigned x;
    assert_int_equal(parse_uint(" 1", &x), -EINVAL);
    bool b;
    assert_int_equal(parse_bool("TRUE", &b), 0);
    assert_true(b);
    assert_int_equal(parse_bool("off", &b), 0);
    assert_false(b);
    assert_int_equal(parse_bool("maybe", &b), -EINVAL);
}

static void test_parse_duration(void **state)
{
    (void)state;
    uint64_t ms;
    assert_int_equal(parse_duration_ms("30s", &ms), 0);
    assert_int_equal(ms, 30000);
    assert_int_equal(parse_duration_ms("250ms", &ms), 0);
    assert_int_equal(ms, 250);
    assert_int_equal(parse_duration_ms("1m30s", &ms), 0);
    assert_int_equal(ms, 90000);
    assert_int_equal(parse_duration_ms("60", &ms), 0);
    assert_int_equal(ms, 60000);
    assert_int_equal(parse_duration_ms("1.5s", &ms), 0);
    assert_int_equal(ms, 1500);
    assert_int_equal(parse_duration_ms("infinite", &ms), 0);
    assert_true(ms == UINT64_MAX);
    assert_int_equal(parse_duration_ms("5x", &ms), -EINVAL);
    assert_int_equal(parse_duration_ms("", &ms), -EINVAL);
    assert_int_equal(parse_duration_ms("s", &ms), -EINVAL);
    /* fractions are digits only: no exponent (an infinite fraction once cast to an integer),
     * no empty fraction */
    assert_int_equal(parse_duration_ms("0.25s", &ms), 0);
    assert_int_equal(ms, 250);
    assert_int_equal(parse_duration_ms("1.5h", &ms), 0);
    assert_int_equal(ms, 5400000);
    assert_int_equal(parse_duration_ms("1.0000000000001s", &ms), 0);
    assert_int_equal(ms, 1000);
    assert_int_equal(parse_duration_ms("1.5e400s", &ms), -EINVAL);
    assert_int_equal(parse_duration_ms("1.5e3s", &ms), -EINVAL);
    assert_int_equal(parse_duration_ms("1.s", &ms), -EINVAL);
    assert_int_equal(parse_duration_ms("99999999999999999999h", &ms), -ERANGE);
}

#define RACE_THREADS 4
#define RACE_ROUNDS  40
#define RACE_SIZE    (32 * 1024)

struct race_arg {
    const char *path;
    char fill;
    int failures;
};

/* Each writer replaces the file with RACE_SIZE copies of its own letter; whatever a reader sees
 * must be one writer's whole file. */
static void *race_writer(void *p)
{
    struct race_arg *a = p;
    _cleanup_free_ char *data = xmalloc(RACE_SIZE);
    memset(data, a->fill, RACE_SIZE);
    for (int i = 0; i < RACE_ROUNDS; i++) {
        struct err e = {0};
        if (file_write_atomic(a->path, data, RACE_SIZE, 0644, &e) < 0) {
            fprintf(stderr, "writer %c: %s\n", a->fill, err_msg(&e));
            a->failures++;
            continue;
        }
        _cleanup_free_ char *back = NULL;
        size_t len = 0;
        if (file_read_all(a->path, RACE_SIZE * 2, &back, &len, &e) < 0 || len != RACE_SIZE) {
            fprintf(stderr, "writer %c: read back %zu bytes\n", a->fill, len);
            a->failures++;
            continue;
        }
        for (size_t k = 1; k < len; k++)
            if (back[k] != back[0]) {
                fprintf(stderr, "writer %c: mixed contents at %zu\n", a->fill, k);
                a->failures++;
                break;
            }
    }
    return NULL;
}

static void test_atomic_write_threads(void **state)
{
    (void)state;
    char dir[] = "/tmp/gpuop-test-XXXXXX";
    assert_non_null(mkdtemp(dir));
    _cleanup_free_ char *path = xasprintf("%s/shared", dir);
    pthread_t t[RACE_THREADS];
    struct race_arg a[RACE_THREADS];
    for (int i = 0; i < RACE_THREADS; i++) {
        a[i] = (struct race_arg){.path = path, .fill = (char)('A' + i)};
        assert_int_equal(pthread_create(&t[i], NULL, race_writer, &a[i]), 0);
    }
    int failures = 0;
    for (int i = 0; i < RACE_THREADS; i++) {
        pthread_join(t[i], NULL);
        failures += a[i].failures;
    }
    assert_int_equal(failures, 0);
    /* no temp file is left behind */
    _cleanup_free_ char *cmd = xasprintf("test \"$(ls %s)\" = shared", dir);
    assert_int_equal(system(cmd), 0);
    _cleanup_free_ char *rm = xasprintf("rm -rf %s", dir);
    assert_int_equal(system(rm), 0);
}

static void test_files(void **state)
{
    (void)state;
    char dir[] = "/tmp/gpuop-test-XXXXXX";
    assert_non_null(mkdtemp(dir));
    _cleanup_free_ char *sub = xasprintf("%s/a/b/c", dir);
    assert_int_equal(mkdir_p(sub, 0755), 0);
    assert_int_equal(mkdir_p("", 0755), -ENOENT); /* once read past the end of "" */
    _cleanup_free_ char *path = xasprintf("%s/f.txt", sub);
    struct err e = {0};
    assert_int_equal(file_write_atomic(path, "hello", 5, 0644, &e), 0);
    char *buf = NULL;
    size_t len = 0;
    assert_int_equal(file_read_all(path, 100, &buf, &len, &e), 0);
    assert_int_equal(len, 5);
    assert_string_equal(buf, "hello");
    free(buf);
    assert_int_equal(file_read_all(path, 3, &buf, &len, &e), -EFBIG);
    assert_non_null(strstr(err_msg(&e), "limit"));
    _cleanup_free_ char *missing = xasprintf("%s/missing", dir);
    assert_int_equal(file_read_all(missing, 3, &buf, &len, &e), -ENOENT);
    assert_non_null(strstr(err_msg(&e), "No such file"));
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0644);
    /* An owner of the caller's choosing (root only: others cannot give a file away). */
    assert_int_equal(file_write_atomic_owned(path, "hi", 2, 0640, (uid_t)-1, (gid_t)-1, &e), 0);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0640);
    assert_int_equal(st.st_uid, geteuid());
    if (geteuid() == 0) {
        assert_int_equal(file_write_atomic_owned(path, "hi", 2, 0600, 1000, 1001, &e), 0);
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_uid, 1000);
        assert_int_equal(st.st_gid, 1001);
        assert_int_equal(st.st_mode & 0777, 0600);
    }
    _cleanup_free_ char *cmd = xasprintf("rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* A writer killed mid-write leaves its temp file; the next start removes it (and the visible
 * ones older versions left), nothing else. */
static void test_stale_temps(void **state)
{
    (void)state;
    char dir[] = "/tmp/gpuop-test-XXXXXX";
    assert_non_null(mkdtemp(dir));
    _cleanup_free_ char *path = xasprintf("%s/gfd", dir);
    struct err e = {0};
    assert_int_equal(file_write_atomic(path, "a=b\n", 4, 0644, &e), 0);
    const char *stale[] = {".gfd.tmp.AbC123", "gfd.tmp.x1y2z3"};
    const char *kept[] = {"gfd.tmp.toolong1", "other.tmp.abcdef", ".gfd.tmp.ab", "gfdx.tmp.abcdef",
                          "gfd.tmp.abc-de"};
    for (size_t i = 0; i < ARRAY_SIZE(stale); i++) {
        _cleanup_free_ char *p = xasprintf("%s/%s", dir, stale[i]);
        assert_int_equal(file_write_atomic(p, "x", 1, 0644, &e), 0);
    }
    for (size_t i = 0; i < ARRAY_SIZE(kept); i++) {
        _cleanup_free_ char *p = xasprintf("%s/%s", dir, kept[i]);
        assert_int_equal(file_write_atomic(p, "x", 1, 0644, &e), 0);
    }
    _cleanup_free_ char *subdir = xasprintf("%s/.gfd.tmp.dir123", dir); /* not a regular file */
    assert_int_equal(mkdir(subdir, 0755), 0);
    assert_int_equal(file_remove_stale_temps(path, &e), 2);
    for (size_t i = 0; i < ARRAY_SIZE(stale); i++) {
        _cleanup_free_ char *p = xasprintf("%s/%s", dir, stale[i]);
        assert_int_equal(access(p, F_OK), -1);
    }
    for (size_t i = 0; i < ARRAY_SIZE(kept); i++) {
        _cleanup_free_ char *p = xasprintf("%s/%s", dir, kept[i]);
        assert_int_equal(access(p, F_OK), 0);
    }
    assert_int_equal(access(path, F_OK), 0);
    assert_int_equal(access(subdir, F_OK), 0);
    assert_int_equal(file_remove_stale_temps(path, &e), 0);
    _cleanup_free_ char *nodir = xasprintf("%s/missing/gfd", dir);
    assert_int_equal(file_remove_stale_temps(nodir, &e), 0);
    _cleanup_free_ char *rm = xasprintf("rm -rf %s", dir);
    assert_int_equal(system(rm), 0);
}

/* A FIFO nobody writes to once made open() block forever, and then read as an empty file: a
 * config pointing at one loaded as an empty config with exit 0. It is refused, naming the file,
 * without blocking; so are a directory and a device. The read runs in a child under alarm() so a
 * regression fails instead of hanging the suite. */
static void test_read_non_regular(void **state)
{
    (void)state;
    char dir[] = "/tmp/gpuop-test-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char fifo[sizeof(dir) + 8]; /* not malloc'ed: the child _exits without freeing */
    snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        alarm(5);
        struct err e = {0};
        char *buf = NULL;
        int r = file_read_all(fifo, 100, &buf, NULL, &e);
        _exit(r == -EINVAL && !buf && strstr(err_msg(&e), "not a regular file (a FIFO)") &&
                      strstr(err_msg(&e), fifo)
                  ? 0
                  : 1);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    struct err e = {0};
    char *buf = NULL;
    assert_int_equal(file_read_all(dir, 100, &buf, NULL, &e), -EISDIR);
    assert_null(buf);
    assert_non_null(strstr(err_msg(&e), "not a regular file (a directory)"));
    assert_non_null(strstr(err_msg(&e), dir));
    assert_int_equal(file_read_all("/dev/null", 100, &buf, NULL, &e), -EINVAL);
    assert_null(buf);
    assert_non_null(strstr(err_msg(&e), "\"/dev/null\": not a regular file (a character device)"));
    _cleanup_free_ char *rm = xasprintf("rm -rf %s", dir);
    assert_int_equal(system(rm), 0);
}

/* JSON logs keep a quoted value whole when it holds quotes of its own (error messages do:
 * `reason="open "/x": No such file"` once came out as fields "open ", "/x\":" and so on). */
static void test_log_json_quoted_values(void **state)
{
    (void)state;
    char path[] = "/tmp/gpuop-log-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    assert_true(saved >= 0);
    assert_true(dup2(fd, STDERR_FILENO) >= 0);
    log_set_format(LOG_FORMAT_JSON);
    log_emit(LOG_WARN, "comp", "msg", "gpu=%u reason=\"%s\" next=%s", 3u,
             "open \"/sys/x y\": No such file", "z");
    log_emit(LOG_WARN, "comp", "msg", "%s", "a=\"b c\" d=e");
    fflush(stderr);
    log_set_format(LOG_FORMAT_TEXT);
    dup2(saved, STDERR_FILENO);
    close(saved);
    close(fd);
    _cleanup_free_ char *out = NULL;
    struct err e = {0};
    assert_int_equal(file_read_all(path, 4096, &out, NULL, &e), 0);
    unlink(path);
    assert_non_null(
        strstr(out, "\"reason\":\"open \\\"/sys/x y\\\": No such file\",\"next\":\"z\""));
    assert_non_null(strstr(out, "\"gpu\":\"3\""));
    assert_non_null(strstr(out, "\"a\":\"b c\",\"d\":\"e\""));
}

/* A record too long for one line is replaced by a short one saying so, never cut mid-record. */
static void test_log_line_over_limit(void **state)
{
    (void)state;
    char path[] = "/tmp/gpuop-log-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    size_t n = 20000;
    _cleanup_free_ char *big = xmalloc(n + 1);
    memset(big, 'm', n);
    big[n] = '\0';
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    assert_true(saved >= 0);
    assert_true(dup2(fd, STDERR_FILENO) >= 0);
    log_set_format(LOG_FORMAT_JSON);
    log_emit(LOG_WARN, "comp", big, "k=v");
    log_set_format(LOG_FORMAT_TEXT);
    log_emit(LOG_WARN, "comp", big, "k=v");
    log_emit(LOG_WARN, "comp", "short", "k=%s", big); /* the fields alone are too long */
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    close(fd);
    _cleanup_free_ char *out = NULL;
    size_t len = 0;
    struct err e = {0};
    assert_int_equal(file_read_all(path, 1 << 20, &out, &len, &e), 0);
    unlink(path);
    /* three complete lines, each with the marker and without the dropped field */
    char *nl = strchr(out, '\n');
    assert_non_null(nl);
    char *nl2 = strchr(nl + 1, '\n');
    assert_non_null(nl2);
    assert_ptr_equal(strchr(nl2 + 1, '\n'), out + len - 1);
    *nl = *nl2 = '\0';
    assert_true(str_has_suffix(out, ",\"log_truncated\":\"true\"}"));
    assert_null(strstr(out, "\"k\""));
    assert_true(strlen(out) < 1024);
    assert_true(str_has_suffix(nl + 1, " log_truncated=true"));
    assert_null(strstr(nl + 1, "k="));
    assert_true(str_has_suffix(nl2 + 1, " comp short log_truncated=true\n"));
}

static void test_strings(void **state)
{
    (void)state;
    assert_true(str_has_prefix("nvidia.com/gpu", "nvidia.com/"));
    assert_false(str_has_prefix("nv", "nvidia"));
    assert_true(str_has_suffix("a.sock", ".sock"));
    char small[4];
    assert_int_equal(strlcpy_s(small, "abcdef", sizeof(small)), 6);
    assert_string_equal(small, "abc");
    assert_true(streq_ptr(NULL, NULL));
    assert_false(streq_ptr("a", NULL));
}

/* ---- deadlines and the stop token ---------------------------------------------------------- */

static void test_deadline_table(void **state)
{
    (void)state;
    assert_true(deadline_after(DEADLINE_NEVER) == DEADLINE_NEVER);
    assert_true(deadline_left_ms(DEADLINE_NEVER) == UINT64_MAX);
    assert_int_equal(deadline_poll_ms(DEADLINE_NEVER), -1);
    assert_int_equal(deadline_left_ms(0), 0); /* long past */
    assert_int_equal(deadline_poll_ms(0), 0);
    uint64_t d = deadline_after(10000);
    assert_true(deadline_left_ms(d) <= 10000 && deadline_left_ms(d) > 9000);
    assert_true(deadline_poll_ms(d) <= 10000 && deadline_poll_ms(d) > 9000);
    /* saturates instead of wrapping */
    assert_true(deadline_after(UINT64_MAX - 1) > now_ms_mono());
    assert_true(deadline_after(UINT64_MAX - 1) != DEADLINE_NEVER);
    struct timespec ts = deadline_timespec(1500);
    assert_int_equal(ts.tv_sec, 1);
    assert_int_equal(ts.tv_nsec, 500000000L);
    ts = deadline_timespec(DEADLINE_NEVER);
    assert_true((uint64_t)ts.tv_sec > now_ms_mono() / 1000 + 300 * 24 * 3600);
}

static void test_cond_nap_times_out(void **state)
{
    (void)state;
    pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t cond;
    assert_int_equal(cond_init_monotonic(&cond), 0);
    volatile int flag = 0;
    uint64_t t0 = now_ms_mono();
    assert_false(cond_nap(&lock, &cond, &flag, 50));
    uint64_t took = now_ms_mono() - t0;
    assert_true(took >= 50 && took < 2000);
    flag = 1;
    t0 = now_ms_mono();
    assert_true(cond_nap(&lock, &cond, &flag, 10000)); /* already set: no wait */
    assert_true(now_ms_mono() - t0 < 1000);
    pthread_mutex_lock(&lock);
    assert_int_equal(cond_wait_deadline(&cond, &lock, now_ms_mono() - 1), -ETIMEDOUT);
    pthread_mutex_unlock(&lock);
    pthread_cond_destroy(&cond);
}

struct stopper {
    struct stop_token *s;
    unsigned delay_ms;
};

static void *stop_later(void *arg)
{
    struct stopper *st = arg;
    usleep(st->delay_ms * 1000);
    stop_request(st->s);
    return NULL;
}

static void test_stop_token(void **state)
{
    (void)state;
    struct err e = {0};
    _cleanup_(stop_token_freep) struct stop_token *s = NULL;
    assert_int_equal(stop_token_new(&s, &e), 0);
    assert_false(stop_requested(s));
    assert_false(stop_requested(NULL));
    const volatile int *flag = stop_flag(s);
    assert_int_equal(*flag, 0);
    struct pollfd pfd = {.fd = stop_fd(s), .events = POLLIN};
    assert_int_equal(poll(&pfd, 1, 0), 0);
    uint64_t t0 = now_ms_mono();
    assert_false(stop_wait(s, 30)); /* a plain timed sleep */
    assert_true(now_ms_mono() - t0 >= 30);

    /* A waiter forever and a poller both wake on stop, well before their timeouts. */
    struct stopper st = {s, 50};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, stop_later, &st), 0);
    t0 = now_ms_mono();
    assert_true(stop_wait(s, DEADLINE_NEVER));
    assert_true(now_ms_mono() - t0 < 5000);
    pthread_join(t, NULL);
    assert_true(stop_requested(s));
    assert_int_not_equal(*flag, 0);
    assert_int_equal(poll(&pfd, 1, 1000), 1);
    assert_true(pfd.revents & POLLIN);
    stop_request(s); /* idempotent; the fd stays readable */
    assert_int_equal(poll(&pfd, 1, 0), 1);
    assert_true(stop_wait_until(s, 0));
}

/* file_root_resolve: links followed inside the root only (absolute targets start again at the
 * root, ".." stops at it), a missing tail kept, loops and the root "/" */
static void test_root_resolve(void **state)
{
    (void)state;
    char root[] = "/tmp/gpuop-util-root.XXXXXX";
    assert_non_null(mkdtemp(root));
    char p[PATH_MAX], buf[PATH_MAX];
    snprintf(p, sizeof(p), "%s/usr/lib", root);
    assert_int_equal(mkdir_p(p, 0755), 0);
    snprintf(p, sizeof(p), "%s/lib", root);
    assert_int_equal(symlink("/usr/lib", p), 0); /* absolute: inside the root */
    snprintf(p, sizeof(p), "%s/usr/lib/shadow", root);
    assert_int_equal(symlink("../../../../../../etc/shadow", p), 0); /* ".." past the root */
    snprintf(p, sizeof(p), "%s/usr/lib/loop", root);
    assert_int_equal(symlink("loop", p), 0);
    struct {
        const char *path, *want; /* want: inside the root; NULL: an error */
    } cases[] = {
        {"/lib/libcuda.so.1", "/usr/lib/libcuda.so.1"},
        {"/usr/lib/shadow", "/etc/shadow"},
        {"/../../usr/./lib/../lib", "/usr/lib"},
        {"/usr/lib/missing/x/..", "/usr/lib/missing"},
        {"/", "/"},
        {"/usr/lib/loop", NULL},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        int r = file_root_resolve(root, cases[i].path, buf, sizeof(buf));
        if (!cases[i].want) {
            assert_int_equal(r, -ELOOP);
            continue;
        }
        assert_int_equal(r, 0);
        char want[PATH_MAX];
        snprintf(want, sizeof(want), "%s%s", root, cases[i].want);
        assert_string_equal(buf, want);
    }
    assert_int_equal(file_root_resolve(root, "/lib/x", buf, 8), -ENAMETOOLONG);
    assert_int_equal(file_root_resolve("/", "/proc/self/..", buf, sizeof(buf)), 0);
    assert_string_equal(buf, "/proc");
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    assert_int_equal(system(cmd), 0);
}

/* fd_read_all on a pipe (stdin's kind), bounded; proc_run's exit statuses */
static void test_fd_read_and_proc_run(void **state)
{
    (void)state;
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    assert_int_equal(write(fds[1], "{\"bundle\":\"/b\"}", 15), 15);
    close(fds[1]);
    struct err e = {0};
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(fd_read_all(fds[0], "stdin", 64, &text, &len, &e), 0);
    assert_int_equal(len, 15);
    assert_string_equal(text, "{\"bundle\":\"/b\"}");
    free(text);
    close(fds[0]);
    assert_int_equal(pipe(fds), 0);
    assert_int_equal(write(fds[1], "0123456789", 10), 10);
    close(fds[1]);
    assert_int_equal(fd_read_all(fds[0], "stdin", 4, &text, &len, &e), -EFBIG);
    assert_non_null(strstr(err_msg(&e), "\"stdin\""));
    close(fds[0]);

    const char *ok[] = {"/bin/sh", "-c", "exit 0", NULL};
    assert_int_equal(proc_run(ok, NULL, &e), 0);
    const char *three[] = {"/bin/sh", "-c", "exit 3", NULL};
    assert_int_equal(proc_run(three, NULL, &e), -EIO);
    assert_string_equal(err_msg(&e), "\"/bin/sh\" exited with status 3");
    /* the environment is the one given, nothing else */
    const char *env[] = {"ONLY=1", NULL};
    const char *check[] = {"/bin/sh", "-c", "[ \"$ONLY\" = 1 ] && [ -z \"${HOME:-}\" ]", NULL};
    assert_int_equal(proc_run(check, env, &e), 0);
    const char *rel[] = {"sh", NULL};
    assert_int_equal(proc_run(rel, NULL, &e), -EINVAL);
    const char *none[] = {"/nonexistent/x", NULL};
    assert_int_equal(proc_run(none, NULL, &e), -ENOENT);
    assert_non_null(strstr(err_msg(&e), "/nonexistent/x"));
    /* proc_run_input: the input is stdin, then end of file; bounded */
    const char *lines[] = {"/bin/sh", "-c",
                           "read a && read b && [ \"$a $b\" = \"x y\" ] && ! read c", NULL};
    assert_int_equal(proc_run_input(lines, NULL, "x\ny\n", &e), 0);
    assert_int_equal(proc_run_input(lines, NULL, "x\nz\n", &e), -EIO);
    assert_int_equal(proc_run(lines, NULL, &e), -EIO); /* proc_run's stdin is empty */
    char *big = xcalloc(PROC_INPUT_MAX + 2, 1);
    memset(big, 'x', PROC_INPUT_MAX + 1);
    assert_int_equal(proc_run_input(lines, NULL, big, &e), -E2BIG);
    free(big);
}

/* proc_find: a name with a '/' as it is, else the first executable of PATH's folders */
static void test_proc_find(void **state)
{
    (void)state;
    char dir[] = "/tmp/gpuop-proc-find.XXXXXX";
    assert_non_null(mkdtemp(dir));
    char a[PATH_MAX], b[PATH_MAX], path[2 * PATH_MAX + 32];
    snprintf(a, sizeof(a), "%s/a", dir);
    snprintf(b, sizeof(b), "%s/b", dir);
    assert_int_equal(mkdir(a, 0755), 0);
    assert_int_equal(mkdir(b, 0755), 0);
    struct err e = {0};
    char f[PATH_MAX + 16];
    snprintf(f, sizeof(f), "%s/tool", a); /* not executable: passed over */
    assert_int_equal(file_write_atomic(f, "x", 1, 0644, &e), 0);
    snprintf(f, sizeof(f), "%s/tool", b);
    assert_int_equal(file_write_atomic(f, "#!/bin/sh\n", 10, 0755, &e), 0);
    const char *old = getenv("PATH");
    char *saved = old ? strdup(old) : NULL;
    snprintf(path, sizeof(path), "%s:%s", a, b);
    setenv("PATH", path, 1);
    char *found = NULL;
    assert_int_equal(proc_find("tool", &found, &e), 0);
    assert_string_equal(found, f);
    free(found);
    assert_int_equal(proc_find("./relative/tool", &found, &e), 0);
    assert_string_equal(found, "./relative/tool");
    free(found);
    assert_int_equal(proc_find("missing-tool", &found, &e), -ENOENT);
    assert_string_equal(err_msg(&e), "\"missing-tool\": not found in PATH");
    assert_int_equal(proc_find("", &found, &e), -EINVAL);
    if (saved)
        setenv("PATH", saved, 1);
    else
        unsetenv("PATH");
    free(saved);
    snprintf(path, sizeof(path), "rm -rf '%s'", dir);
    assert_int_equal(system(path), 0);
}

/* str_printf_cut: what fits as snprintf writes it, what does not ends in "..."; log_kv_quote */
static void test_cut_and_quote(void **state)
{
    (void)state;
    static const struct {
        size_t n;
        const char *arg, *want;
    } cases[] = {
        {16, "short", "say short"}, {10, "short", "say short"}, {9, "short", "say s..."},
        {5, "short", "s..."},       {4, "short", "say"}, /* too small for "...": cut as snprintf
                                                            cuts */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char buf[32];
        str_printf_cut(buf, cases[i].n, "say %s", cases[i].arg);
        assert_string_equal(buf, cases[i].want);
    }
    char q[] = "open \"/x\": \"no\"";
    assert_string_equal(log_kv_quote(q), "open '/x': 'no'");
    char empty[] = "";
    assert_string_equal(log_kv_quote(empty), "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_err),
        cmocka_unit_test(test_sbuf_limit),
        cmocka_unit_test(test_sbuf_cap_after),
        cmocka_unit_test(test_sbuf_expect),
        cmocka_unit_test(test_sbuf_sticky),
        cmocka_unit_test(test_hash_fnv1a64),
        cmocka_unit_test(test_parse_numbers),
        cmocka_unit_test(test_parse_duration),
        cmocka_unit_test(test_files),
        cmocka_unit_test(test_stale_temps),
        cmocka_unit_test(test_strings),
        cmocka_unit_test(test_atomic_write_threads),
        cmocka_unit_test(test_read_non_regular),
        cmocka_unit_test(test_log_json_quoted_values),
        cmocka_unit_test(test_log_line_over_limit),
        cmocka_unit_test(test_deadline_table),
        cmocka_unit_test(test_cond_nap_times_out),
        cmocka_unit_test(test_stop_token),
        cmocka_unit_test(test_root_resolve),
        cmocka_unit_test(test_fd_read_and_proc_run),
        cmocka_unit_test(test_proc_find),
        cmocka_unit_test(test_cut_and_quote),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
