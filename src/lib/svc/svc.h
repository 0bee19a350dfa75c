/* SPDX-License-Identifier: Apache-2.0 */
/*
 * svc: the component runtime. Every `gpuop <component>` is a struct svc_component: a declarative
 * option table, optional configure/reload hooks and a run function. svc parses the flags, reads
 * the environment and the config-file layer (precedence flag > env > config file > default),
 * prints --help, blocks the process signals before any thread starts and turns them into the
 * stop token (SIGTERM, SIGINT, SIGQUIT) or a reload (SIGHUP; logged and ignored by a component
 * without a reload hook, never fatal), and hands the result to src/cmd, which prints the error
 * and picks the exit code in one place:
 *
 *   0  run returned 0 (or --help)
 *   2  bad input: an unknown flag or command, a missing command, a missing or malformed value,
 *      an env var or config file that does not parse or validate (everything up to and
 *      including configure; in run, what it marks with svc_bad_input)
 *   1  a runtime failure: run (or the start of run) returned a negative errno
 *
 * A new component, in full (src/components/foo/foo-main.c; registered in its meson.build with
 * `gpuop_svc_components += [['foo', 'foo_component', 'One-line summary']]`):
 *
 *   struct foo {                                    // options land here; svc allocates it
 *       const char *listen, *kubeconfig;
 *       uint64_t interval_ms;
 *       bool once;
 *   };
 *   static const struct svc_option foo_options[] = {
 *       {.flag = "listen", .short_flag = 'a', .env = "FOO_LISTEN", .kind = SVC_STRING,
 *        .off = offsetof(struct foo, listen), .metavar = "ADDR", .help = "listen address"},
 *       {.kind = SVC_FRAGMENT, .fragment = svc_kubeconfig_option,   // a shared flag
 *        .off = offsetof(struct foo, kubeconfig)},
 *       {.flag = "interval", .env = "FOO_INTERVAL", .kind = SVC_DURATION, .min = 1,
 *        .off = offsetof(struct foo, interval_ms), .metavar = "DUR", .help = "period (30s)"},
 *       {.flag = "once", .kind = SVC_FLAG, .off = offsetof(struct foo, once),
 *        .help = "one pass, then exit"},
 *       {0},
 *   };
 *   static void foo_defaults(void *state)          // before env and flags
 *   {
 *       struct foo *f = state;
 *       f->listen = ":9500";
 *       f->interval_ms = 30000;
 *   }
 *   static int foo_run(struct svc *s, struct err *e)
 *   {
 *       struct foo *f = svc_state(s);
 *       while (!svc_stopped(s)) {
 *           int r = do_work(f, e);                  // an error ends the process with exit 1
 *           if (r < 0)
 *               return err_prefix(e, "work");
 *           if (f->once || svc_wait(s, f->interval_ms) == SVC_STOP)
 *               break;
 *       }
 *       return 0;                                   // SIGTERM: exit 0
 *   }
 *   static int foo_check_run(struct svc *s, struct err *e); // `gpuop foo check`
 *   static const struct svc_component foo_check = {  // a verb: a component of its own
 *       .name = "check", .summary = "Check foo once",  // generated: Usage: gpuop foo check ...
 *       .options = {foo_check_options}, .state_size = sizeof(struct foo_check_state),
 *       .run = foo_check_run,
 *   };
 *   const struct svc_component foo_component = {
 *       .name = "foo", .usage = "Usage: gpuop foo [flags]\n\nDoes foo.\n",
 *       .options = {foo_options}, .state_size = sizeof(struct foo),
 *       .defaults = foo_defaults, .run = foo_run,
 *       .verbs = {&foo_check},                      // --help lists it under "Commands:"
 *   };
 *
 * Verbs: `gpuop foo check` runs foo_check (its flags, env, configure and run; foo's are not
 * read); `gpuop foo` runs foo; `gpuop foo bogus` is bad input naming the valid commands; a
 * component without run (mig-parted) needs one. A new command anywhere, `gpuop migrate --from
 * nvidia` included, is a component and one registration: a verb in its parent's .verbs, or at
 * the top a line in a module's meson.build (gpuop_svc_components); nothing parses argv by hand.
 *
 * A controller (the operator) adds: svc_workqueue_new(NULL, svc_stop(s), &q, e) and workers
 * looping on svc_workqueue_get (-ECANCELED once stopped); watches take stop_flag(svc_stop(s))
 * as their `const volatile int *stop`; API calls take a deadline (deadline_after).
 *
 * Threads: svc_main blocks SIGTERM, SIGINT, SIGHUP and SIGQUIT (and ignores SIGPIPE) in the
 * calling thread before anything else, so every thread the component starts inherits the mask;
 * a dedicated thread reads them from a signalfd. The reload hook runs in the component's own
 * thread, inside svc_wait / svc_dispatch, never concurrently with it.
 */
#ifndef GPUOP_SVC_H
#define GPUOP_SVC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

/* ---- options ------------------------------------------------------------------------------ */

enum svc_kind {
    SVC_END = 0,
    SVC_STRING,      /* const char *: points into argv or the environment */
    SVC_BOOL,        /* bool: --flag means true, --flag=false; env takes parse_bool's forms */
    SVC_FLAG,        /* bool: --flag takes no value (sets true); env takes parse_bool's forms */
    SVC_INT,         /* int */
    SVC_UINT,        /* unsigned */
    SVC_U64,         /* uint64_t, decimal or 0x hex */
    SVC_DURATION,    /* uint64_t milliseconds: 250ms, 30s, 5m, 1h30m; "infinite" = UINT64_MAX */
    SVC_ENUM,        /* int: index into choices */
    SVC_CONFIG_FILE, /* const char *: the config file the layer loads (flag > env) */
    SVC_STRINGS,     /* struct svc_strings: a repeatable flag, every occurrence in argv order;
                        flags only (env is not read); more than max (0: SVC_STRINGS_MAX) is bad
                        input; check runs after each occurrence, on the whole list */
    SVC_FRAGMENT,    /* not an option: the options of `fragment` stand here, their off counted
                        from this entry's off (a shared fragment, below) */
};

#define SVC_STRINGS_MAX 64
struct svc_strings {
    const char *v[SVC_STRINGS_MAX]; /* point into argv */
    size_t n;
};

struct svc_option {
    const char *field;  /* non-NULL: a config-layer field ("flags.migStrategy"): the value goes
                           to svc_layer.set instead of state; "configFile" for SVC_CONFIG_FILE */
    const char *flag;   /* long flag without "--", or NULL (environment only) */
    const char *env;    /* environment variable, or NULL */
    enum svc_kind kind; /* SVC_END ends a table */
    char short_flag;    /* -x alias, or 0 */
    size_t off;         /* offsetof(state, member) of the destination (field == NULL) */
    const char *const *choices; /* SVC_ENUM: NULL-terminated names */
    uint64_t min;               /* numbers and durations: the smallest accepted value */
    uint64_t max;               /* SVC_UINT, SVC_U64: the largest accepted value; 0: none */
    bool finite;                /* SVC_DURATION: refuse "infinite" */
    const char *expect;         /* error wording of a bad value: "expected milliseconds > 0" */
    /* Extra validation after parsing; dst points at the parsed value (in state). */
    int (*check)(const void *dst, const char *source, struct err *e);
    const char *metavar; /* --help: the value's name ("PATH"); NULL: derived from kind */
    const char *help;    /* --help text ('\n' continues the line); NULL: not listed */
    /* SVC_FRAGMENT: the table that stands here (help, when set, replaces the help of a
     * one-option fragment: what the option means to this component) */
    const struct svc_option *fragment;
};

/*
 * Shared option fragments: an option several components take, defined once. A component lists
 * one in its table where the flag should stand, with the offset of the member that receives it:
 *
 *   {.kind = SVC_FRAGMENT, .fragment = svc_kubeconfig_option, .off = offsetof(struct foo, kc)},
 *
 * Each of these is one option whose value is a `const char *` at offset 0 of the fragment. A
 * component's own fragment (options several of its verbs share) is written the same way: a
 * table whose offsets are relative to a struct the verbs' states embed.
 */
/* --kubeconfig PATH [KUBECONFIG]: the API client's kubeconfig; NULL: in-cluster, then
 * ~/.kube/config (what kube_client_open does with NULL). */
extern const struct svc_option svc_kubeconfig_option[];
/* --context NAME: the kubeconfig context; NULL: its current context. */
extern const struct svc_option svc_context_option[];
/* --node-name NAME [NODE_NAME]: this node, as a node agent's pod learns it (the downward API's
 * spec.nodeName). Its help says it is required, which the component checks (one that can do
 * without it gives the fragment entry a help of its own). */
extern const struct svc_option svc_node_name_option[];

/* The config-file layer (dpconfig's, for the device plugin and feature discovery): load starts
 * from defaults plus the file (path NULL: no file), set applies one field given as a string (a
 * flag or env var), finish derives what depends on the rest. Called in that order, at start and
 * on every svc_config_resolve; the layer keeps its result pending until the caller adopts it.
 * `value` lives as long as the process (argv, environ); `source` ("--flag", "ENV") only
 * during the call. */
struct svc_layer {
    int (*load)(void *state, const char *path, struct err *e);
    int (*set)(void *state, const char *field, const char *value, const char *source,
               struct err *e);
    int (*finish)(void *state, struct err *e);
};

#define SVC_MAX_TABLES 4
#define SVC_MAX_VERBS  8

struct svc;

struct svc_component {
    const char *name;    /* "exporter": the command's word; a component's log component */
    const char *summary; /* one line, for a parent's "Commands:" list (a verb) */
    /* --help head: "Usage: gpuop x [flags]\n\nWhat it does.\n"; NULL: a Usage line from the
     * command's words, then the summary */
    const char *usage;
    const char *flags_title;                          /* NULL: "Flags:" */
    const struct svc_option *options[SVC_MAX_TABLES]; /* tables, each ended by SVC_END */
    const char *epilogue; /* --help tail: other environment, signals, exit */
    unsigned max_args;    /* arguments besides flags; 0: none (not with verbs) */
    /* Verbs (`gpuop mig-parted apply`, `gpuop toolkit cdi generate`): each a component of its
     * own, with its own options, state, configure and run, and maybe verbs of its own. The verb
     * is the first word after its parent's; the parent's options are not read. A component
     * with verbs and no run needs one (bad input without); one with a run runs it without.
     * --help lists them under "Commands:". Logs and errors name the top component. */
    const struct svc_component *verbs[SVC_MAX_VERBS];
    size_t state_size;             /* svc allocates (zeroed) and frees it */
    void (*defaults)(void *state); /* before env and flags */
    const struct svc_layer *layer; /* NULL: no config file */
    /* After the options: derived checks and loads. An error here is bad input (exit 2). */
    int (*configure)(struct svc *s, struct err *e);
    /* The component. 0: exit 0; negative errno with e filled: exit 1. */
    int (*run)(struct svc *s, struct err *e);
    /* SIGHUP. NULL: SIGHUP is logged and ignored. An error is logged; the component keeps its
     * last good state (that is the hook's job) and runs on. */
    int (*reload)(struct svc *s, struct err *e);
    /* Frees what run/configure left in state (optional). */
    void (*cleanup)(void *state);
};

/* The process entry: argv[0] is the component name. Returns the exit code (0, 1, 2) after
 * printing the error line (`<ts> error <name> <message>`, the structured log line). */
int svc_main(const struct svc_component *c, int argc, char **argv);

/* The whole option resolution of c's own options (verbs are not followed: pass the verb's
 * component), without signals or run: for tests and for tools. 1 for --help (printed to out),
 * 0, or a negative errno (bad input). */
int svc_parse(const struct svc_component *c, void *state, int argc, char **argv, FILE *out,
              struct err *e);
/* --help as generated from the component. */
void svc_usage(const struct svc_component *c, FILE *out);

/* ---- inside run --------------------------------------------------------------------------- */

void *svc_state(struct svc *s);
/* The top component's name ("toolkit" in `gpuop toolkit cdi list` too): the log component. */
const char *svc_name(const struct svc *s);
struct stop_token *svc_stop(struct svc *s);
bool svc_stopped(const struct svc *s);
/* The config-file layer again (flag > env > file > default), as at start: for reload hooks. */
int svc_config_resolve(struct svc *s, struct err *e);
/* Whether the source of a layer field or option was given ("--x", "ENV") and its value. */
const char *svc_option_value(struct svc *s, const char *field, const char **ret_source);

/* The arguments besides flags, in order (at most max_args). */
const char *const *svc_args(const struct svc *s, size_t *ret_n);
/* Marks the error run is about to return as bad input (exit 2), for input that can only be
 * checked once running (a GPU index against the loaded fleet). Returns code. */
int svc_bad_input(struct svc *s, int code);

/* The exit status of a run that returns 0, for a component whose answer is its status (a
 * check's verdict: gpuop doctor exits 3 on a warning, 4 on a failure). Use values above 2 so
 * they never read as a runtime failure (1) or bad input (2). */
void svc_verdict(struct svc *s, int status);

/* A tail for the error line run is about to return, for what does not fit struct err (a list of
 * the valid values): printed as "<message><tail>". */
void svc_error_tail(struct svc *s, const char *fmt, ...) GPUOP_PRINTF(2, 3);

enum svc_wake {
    SVC_TIMEOUT = 0,
    SVC_STOP,
    SVC_RELOADED, /* SIGHUP arrived and the reload hook ran */
};
/* Sleeps up to ms (DEADLINE_NEVER: until an event); runs a pending reload in this thread. */
enum svc_wake svc_wait(struct svc *s, uint64_t ms);
enum svc_wake svc_wait_until(struct svc *s, uint64_t deadline);
/* For poll() loops: readable when stop or a reload is pending. After it polls readable, call
 * svc_dispatch, which runs a pending reload and says whether to stop. */
int svc_event_fd(const struct svc *s);
enum svc_wake svc_dispatch(struct svc *s);

/* ---- work queue (controllers) ------------------------------------------------------------- */

/*
 * Keys (object names) to reconcile, as client-go's rate-limited delaying queue: a key is queued
 * at most once (dedup); a key added while a worker holds it is queued again when the worker
 * calls done; add_after queues it later (the earliest time wins); add_rate_limited queues it
 * after base * 2^failures (capped at max), forget resets its failures. Getters block until a
 * key is due or the stop token fires. The clock is injectable so tests are instant.
 * Thread-safe.
 */
struct svc_workqueue;
struct svc_workqueue_config {
    uint64_t base_delay_ms;             /* 0: 5 ms */
    uint64_t max_delay_ms;              /* 0: 1000 s */
    size_t max_keys;                    /* 0: 65536; more is -ENOBUFS */
    uint64_t (*now_ms)(void *clock_ud); /* NULL: now_ms_mono */
    void *clock_ud;
};
int svc_workqueue_new(const struct svc_workqueue_config *cfg, struct stop_token *stop,
                      struct svc_workqueue **ret, struct err *e);
void svc_workqueue_free(struct svc_workqueue *q); /* accepts NULL */
DEFINE_CLEANUP_FUNC(struct svc_workqueue, svc_workqueue_free)
int svc_workqueue_add(struct svc_workqueue *q, const char *key);
int svc_workqueue_add_after(struct svc_workqueue *q, const char *key, uint64_t delay_ms);
int svc_workqueue_add_rate_limited(struct svc_workqueue *q, const char *key);
void svc_workqueue_forget(struct svc_workqueue *q, const char *key);
unsigned svc_workqueue_failures(struct svc_workqueue *q, const char *key);
/* The next due key without blocking: 0 with *ret_key (caller frees, then calls done), or
 * -EAGAIN with *ret_next_ms the ms until the next delayed key (UINT64_MAX: none). */
int svc_workqueue_try_get(struct svc_workqueue *q, char **ret_key, uint64_t *ret_next_ms);
/* Blocks until a key is due (0), the stop token fires (-ECANCELED) or timeout_ms passes
 * (-ETIMEDOUT; DEADLINE_NEVER waits without limit). Uses the real monotonic clock to sleep. */
int svc_workqueue_get(struct svc_workqueue *q, uint64_t timeout_ms, char **ret_key);
void svc_workqueue_done(struct svc_workqueue *q, const char *key);
/* Keys due now plus keys waiting for their time. */
size_t svc_workqueue_len(struct svc_workqueue *q);
/* The delay add_rate_limited would use after `failures` failures (pure). */
uint64_t svc_backoff_ms(uint64_t base_ms, uint64_t max_ms, unsigned failures);

#endif
