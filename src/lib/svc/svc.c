/* SPDX-License-Identifier: Apache-2.0 */
/* svc: the process shell of a component: signals, stop, reload, the exit code. */
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>

#include "svc-internal.h"

struct svc {
    const struct svc_component *c;
    const char *name; /* the top component's: logs and errors */
    struct svc_opts opts;
    void *state;
    const char **cli;
    const char **args;
    size_t n_args;
    bool bad_input;
    int verdict; /* svc_verdict: the exit status of a run that returns 0 */
    struct stop_token *stop;
    /* reload requests from the signal thread to the component's thread */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    unsigned reload_pending;
    int event_fd; /* eventfd: readable while a reload is pending */
    int sig_fd;
    int quit_fd; /* eventfd: ends the signal thread */
    pthread_t sig_thread;
    bool sig_running;
    char *error_tail;
};

const char *const *svc_args(const struct svc *s, size_t *ret_n)
{
    *ret_n = s->n_args;
    return s->args;
}

int svc_bad_input(struct svc *s, int code)
{
    s->bad_input = true;
    return code;
}

void svc_verdict(struct svc *s, int status)
{
    s->verdict = status;
}

void svc_error_tail(struct svc *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    free(s->error_tail);
    if (vasprintf(&s->error_tail, fmt, ap) < 0)
        s->error_tail = NULL;
    va_end(ap);
}

void *svc_state(struct svc *s)
{
    return s->state;
}

const char *svc_name(const struct svc *s)
{
    return s->name;
}

struct stop_token *svc_stop(struct svc *s)
{
    return s->stop;
}

bool svc_stopped(const struct svc *s)
{
    return stop_requested(s->stop);
}

int svc_config_resolve(struct svc *s, struct err *e)
{
    return svc_resolve_layer(&s->opts, s->state, s->cli, e);
}

const char *svc_option_value(struct svc *s, const char *field, const char **ret_source)
{
    return svc_layer_value(&s->opts, s->cli, field, ret_source);
}

/* ---- signals ------------------------------------------------------------------------------ */

static void signal_set(sigset_t *m)
{
    sigemptyset(m);
    sigaddset(m, SIGTERM);
    sigaddset(m, SIGINT);
    sigaddset(m, SIGQUIT);
    sigaddset(m, SIGHUP);
}

static void *signal_thread(void *arg)
{
    struct svc *s = arg;
    for (;;) {
        struct pollfd pfd[2] = {{.fd = s->sig_fd, .events = POLLIN},
                                {.fd = s->quit_fd, .events = POLLIN}};
        if (poll(pfd, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            log_error(s->name, "signal thread: poll failed", "error=\"%s\"", strerror(errno));
            stop_request(s->stop);
            return NULL;
        }
        if (pfd[1].revents)
            return NULL;
        struct signalfd_siginfo si;
        while (read(s->sig_fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
            if (si.ssi_signo != SIGHUP) {
                log_info(s->name, "signal: stopping", "signal=%s", sigabbrev_np((int)si.ssi_signo));
                stop_request(s->stop);
                continue;
            }
            if (!s->c->reload) {
                log_info(s->name, "SIGHUP ignored: nothing to reload", NULL);
                continue;
            }
            pthread_mutex_lock(&s->lock);
            s->reload_pending++;
            pthread_cond_broadcast(&s->cond);
            pthread_mutex_unlock(&s->lock);
            uint64_t one = 1;
            ssize_t n = write(s->event_fd, &one, sizeof(one));
            (void)n;
        }
    }
}

/* ---- waits -------------------------------------------------------------------------------- */

static void wake_on_stop(void *ud)
{
    struct svc *s = ud;
    pthread_mutex_lock(&s->lock);
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
}

static enum svc_wake run_reload(struct svc *s)
{
    struct err e = {0};
    int r = s->c->reload(s, &e);
    if (r < 0)
        log_error(s->name, "reload failed; keeping the last good config", "error=\"%s\"",
                  err_msg(&e));
    return SVC_RELOADED;
}

/* Takes a pending reload (and drains the eventfd); true when there was one. */
static bool take_reload(struct svc *s)
{
    pthread_mutex_lock(&s->lock);
    bool pending = s->reload_pending > 0;
    s->reload_pending = 0;
    if (pending) {
        uint64_t v;
        ssize_t n = read(s->event_fd, &v, sizeof(v));
        (void)n;
    }
    pthread_mutex_unlock(&s->lock);
    return pending;
}

enum svc_wake svc_wait_until(struct svc *s, uint64_t deadline)
{
    pthread_mutex_lock(&s->lock);
    while (!stop_requested(s->stop) && !s->reload_pending)
        if (cond_wait_deadline(&s->cond, &s->lock, deadline) == -ETIMEDOUT)
            break;
    pthread_mutex_unlock(&s->lock);
    if (stop_requested(s->stop))
        return SVC_STOP;
    if (take_reload(s))
        return run_reload(s);
    return SVC_TIMEOUT;
}

enum svc_wake svc_wait(struct svc *s, uint64_t ms)
{
    return svc_wait_until(s, deadline_after(ms));
}

int svc_event_fd(const struct svc *s)
{
    return s->event_fd;
}

enum svc_wake svc_dispatch(struct svc *s)
{
    if (stop_requested(s->stop))
        return SVC_STOP;
    if (take_reload(s))
        return run_reload(s);
    return SVC_TIMEOUT;
}

/* ---- main --------------------------------------------------------------------------------- */

static void svc_teardown(struct svc *s)
{
    if (s->sig_running) {
        uint64_t one = 1;
        ssize_t n = write(s->quit_fd, &one, sizeof(one));
        (void)n;
        pthread_join(s->sig_thread, NULL);
    }
    /* The component's cleanup may still use the stop token (to end its own threads). */
    if (s->state && s->c->cleanup)
        s->c->cleanup(s->state);
    if (s->stop)
        stop_hook_remove(s->stop, wake_on_stop, s);
    stop_token_free(s->stop);
    if (s->sig_fd >= 0)
        close(s->sig_fd);
    if (s->event_fd >= 0)
        close(s->event_fd);
    if (s->quit_fd >= 0)
        close(s->quit_fd);
    pthread_cond_destroy(&s->cond);
    pthread_mutex_destroy(&s->lock);
    free(s->state);
    svc_opts_done(&s->opts);
    free(s->cli);
    free(s->args);
    free(s->error_tail);
}

/* The one place an error becomes a line and an exit code. */
static int fail(const char *name, int code, struct err *e, const char *tail)
{
    if (tail) {
        _cleanup_free_ char *line = xasprintf("%s%s", err_msg(e), tail);
        log_error(name, line, NULL);
    } else {
        log_error(name, err_msg(e), NULL);
    }
    return code;
}

/* Follows the verbs: each is the first word after its parent's. *ret_path: "toolkit cdi
 * generate" (the caller frees it). */
static int find_verb(const struct svc_component **c, int *argc, char ***argv, char **ret_path,
                     struct err *e)
{
    const struct svc_component *top = *c;
    _cleanup_free_ char *path = xstrdup(top->name);
    while ((*c)->verbs[0] && *argc > 1 && (*argv)[1][0] != '-') {
        const char *word = (*argv)[1];
        const char *rel = path + strlen(top->name); /* "" or " cdi" */
        const struct svc_component *v = svc_verb_find(*c, word);
        if (!v) {
            _cleanup_free_ char *prefix =
                xasprintf("%s%s", rel[0] ? rel + 1 : "", rel[0] ? " " : "");
            char names[256];
            svc_verb_names(*c, prefix, names, sizeof(names));
            return err_set(e, -EINVAL, "unknown command \"%s%s\" (%s)", prefix, word, names);
        }
        char *longer = xasprintf("%s %s", path, v->name);
        free(path);
        path = longer;
        *c = v;
        (*argc)--;
        (*argv)++;
    }
    *ret_path = steal_ptr(&path);
    return 0;
}

int svc_main(const struct svc_component *c, int argc, char **argv)
{
    /* Before anything else, and before any thread: the process signals are read from the
     * signalfd only; every thread started later inherits the mask. */
    sigset_t mask;
    signal_set(&mask);
    pthread_sigmask(SIG_BLOCK, &mask, NULL);
    signal(SIGPIPE, SIG_IGN);

    struct err e = {0};
    const char *name = c->name;
    _cleanup_free_ char *path = NULL;
    if (find_verb(&c, &argc, &argv, &path, &e) < 0)
        return fail(name, 2, &e, NULL);
    struct svc s = {.c = c, .name = name, .sig_fd = -1, .event_fd = -1, .quit_fd = -1};
    pthread_mutex_init(&s.lock, NULL);
    cond_init_monotonic(&s.cond);
    svc_opts_init(&s.opts, c);
    s.state = xcalloc(1, c->state_size ? c->state_size : 1);
    if (c->defaults)
        c->defaults(s.state); /* first: cleanup may rely on what it set up */
    s.cli = xcalloc(s.opts.n + 1, sizeof(char *));
    s.args = xcalloc(c->max_args + 1, sizeof(char *));
    int code = 2;

    int r = svc_parse_argv(&s.opts, s.state, argc, argv, s.cli, s.args, &s.n_args, &e);
    if (r == 1) {
        svc_usage_at(c, path, stdout);
        code = fflush(stdout) == 0 ? 0 : 1;
        goto out;
    }
    if (r == 0 && !c->run) {
        char names[256];
        svc_verb_names(c, "", names, sizeof(names));
        r = err_set(&e, -EINVAL, "a command is required: %s (see gpuop %s --help)", names, path);
    }
    if (r < 0) {
        code = fail(name, 2, &e, s.error_tail);
        goto out;
    }
    if (stop_token_new(&s.stop, &e) < 0) {
        code = fail(name, 1, &e, s.error_tail);
        goto out;
    }
    s.sig_fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    s.event_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    s.quit_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (s.sig_fd < 0 || s.event_fd < 0 || s.quit_fd < 0) {
        err_errno(&e, -errno, "signalfd/eventfd");
        code = fail(name, 1, &e, s.error_tail);
        goto out;
    }
    stop_hook_add(s.stop, wake_on_stop, &s);
    /* Signals are taken from now on: a SIGTERM while the config loads stops cleanly. */
    if (pthread_create(&s.sig_thread, NULL, signal_thread, &s) != 0) {
        err_set(&e, -EAGAIN, "cannot start the signal thread");
        code = fail(name, 1, &e, s.error_tail);
        goto out;
    }
    s.sig_running = true;

    r = svc_resolve_state(&s.opts, s.state, s.cli, &e);
    if (r == 0)
        r = svc_resolve_layer(&s.opts, s.state, s.cli, &e);
    if (r == 0 && c->configure)
        r = c->configure(&s, &e);
    if (r < 0) {
        code = fail(name, 2, &e, s.error_tail);
        goto out;
    }
    r = c->run(&s, &e);
    code = r < 0 ? fail(name, s.bad_input ? 2 : 1, &e, s.error_tail) : s.verdict;
out:
    svc_teardown(&s);
    return code;
}
