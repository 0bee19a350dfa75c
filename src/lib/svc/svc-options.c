/* SPDX-License-Identifier: Apache-2.0 */
/* svc: the option table: argv walking, env and config-layer precedence, --help. */
#include <assert.h>
#include <string.h>

#include "svc-internal.h"

#define HELP_COL   31 /* where help text starts in --help */
#define HELP_WIDTH 96 /* an env var name past this goes on a line of its own */

#define FRAGMENT_DEPTH 4 /* a fragment may hold fragments, this deep */

static bool opt_end(const struct svc_option *o)
{
    return o->kind == SVC_END;
}

/* Counts (out NULL) or copies the options of table t, fragments expanded, offsets from base. */
static size_t flatten(const struct svc_option *t, size_t base, unsigned depth,
                      struct svc_option *out)
{
    assert(depth < FRAGMENT_DEPTH); /* a fragment that includes itself */
    size_t n = 0;
    for (const struct svc_option *o = t; !opt_end(o); o++) {
        if (o->kind == SVC_FRAGMENT) {
            assert(o->fragment);
            size_t k = flatten(o->fragment, base + o->off, depth + 1, out ? out + n : NULL);
            assert(!o->help || k == 1); /* a help of its own: for a one-option fragment */
            if (out && o->help)
                out[n].help = o->help;
            n += k;
            continue;
        }
        if (out) {
            out[n] = *o;
            out[n].off = base + o->off;
        }
        n++;
    }
    return n;
}

void svc_opts_init(struct svc_opts *o, const struct svc_component *c)
{
    assert(!c->verbs[0] || !c->max_args); /* a word after the name is a verb or an argument */
    *o = (struct svc_opts){.c = c};
    for (size_t t = 0; t < SVC_MAX_TABLES && c->options[t]; t++)
        o->n += flatten(c->options[t], 0, 0, NULL);
    o->v = xcalloc(o->n + 1, sizeof(*o->v));
    size_t k = 0;
    for (size_t t = 0; t < SVC_MAX_TABLES && c->options[t]; t++)
        k += flatten(c->options[t], 0, 0, o->v + k);
    assert(k == o->n);
    /* One meaning per flag: a fragment listed beside an option of the same name is a bug. */
    for (size_t i = 0; i < o->n; i++)
        for (size_t j = i + 1; j < o->n; j++) {
            assert(!o->v[i].flag || !o->v[j].flag || o->v[i].field ||
                   strcmp(o->v[i].flag, o->v[j].flag) != 0);
            assert(!o->v[i].short_flag || o->v[i].short_flag != o->v[j].short_flag);
        }
}

void svc_opts_done(struct svc_opts *o)
{
    free(o->v);
    o->v = NULL;
    o->n = 0;
}

static bool takes_no_value(const struct svc_option *o)
{
    return o->kind == SVC_FLAG || o->kind == SVC_BOOL;
}

/* ---- values ------------------------------------------------------------------------------- */

static int bad_value(const struct svc_option *o, const char *src, const char *fallback,
                     struct err *e)
{
    return err_set(e, -EINVAL, "%s: %s", src, o->expect ? o->expect : fallback);
}

static int parse_enum(const struct svc_option *o, const char *v, const char *src, int *ret,
                      struct err *e)
{
    for (int i = 0; o->choices && o->choices[i]; i++)
        if (strcmp(o->choices[i], v) == 0) {
            *ret = i;
            return 0;
        }
    char known[256] = "expected one of ";
    size_t used = strlen(known);
    for (int i = 0; o->choices && o->choices[i]; i++) {
        int w = snprintf(known + used, sizeof(known) - used, "%s%s", i ? "|" : "", o->choices[i]);
        if (w < 0 || (size_t)w >= sizeof(known) - used)
            break;
        used += (size_t)w;
    }
    return bad_value(o, src, known, e);
}

/* Parses v into state per the option's kind; src is how errors name it (`--x "v"`, `X="v"`). */
static int set_value(const struct svc_option *o, void *state, const char *v, const char *src,
                     struct err *e)
{
    void *dst = (char *)state + o->off;
    uint64_t u = 0;
    int64_t i = 0;
    char minmsg[80];
    if (o->max)
        snprintf(minmsg, sizeof(minmsg), "expected an integer in [%llu, %llu]",
                 (unsigned long long)o->min, (unsigned long long)o->max);
    else
        snprintf(minmsg, sizeof(minmsg), "expected an integer >= %llu", (unsigned long long)o->min);
    switch (o->kind) {
    case SVC_STRING:
    case SVC_CONFIG_FILE:
        *(const char **)dst = v;
        break;
    case SVC_BOOL:
    case SVC_FLAG: {
        bool b;
        if (parse_bool(v, &b) < 0)
            return bad_value(o, src, "not a boolean", e);
        *(bool *)dst = b;
        break;
    }
    case SVC_INT:
        if (parse_i64(v, &i) < 0 || i < INT32_MIN || i > INT32_MAX ||
            (o->min && (i < 0 || (uint64_t)i < o->min)))
            return bad_value(o, src, o->min ? minmsg : "expected an integer", e);
        *(int *)dst = (int)i;
        break;
    case SVC_UINT:
    case SVC_U64:
        if (parse_u64(v, &u) < 0 || u < o->min || (o->kind == SVC_UINT && u > UINT32_MAX) ||
            (o->max && u > o->max))
            return bad_value(o, src, minmsg, e);
        if (o->kind == SVC_UINT)
            *(unsigned *)dst = (unsigned)u;
        else
            *(uint64_t *)dst = u;
        break;
    case SVC_DURATION:
        if (parse_duration_ms(v, &u) < 0 || u < o->min || (o->finite && u == UINT64_MAX))
            return bad_value(o, src, "expected a duration such as 30s or 500ms", e);
        *(uint64_t *)dst = u;
        break;
    case SVC_ENUM: {
        int k = 0;
        int r = parse_enum(o, v, src, &k, e);
        if (r < 0)
            return r;
        *(int *)dst = k;
        break;
    }
    case SVC_STRINGS: {
        struct svc_strings *l = dst;
        size_t max = o->max && o->max < SVC_STRINGS_MAX ? (size_t)o->max : SVC_STRINGS_MAX;
        if (l->n >= max)
            return err_set(e, -E2BIG, "%s: at most %zu of them", src, max);
        l->v[l->n++] = v;
        break;
    }
    case SVC_FRAGMENT: /* expanded by svc_opts_init */
    case SVC_END:
        return err_set(e, -EINVAL, "%s: option without a kind", src);
    }
    if (o->check)
        return o->check(dst, src, e);
    return 0;
}

/* ---- argv --------------------------------------------------------------------------------- */

static const struct svc_option *find_long(const struct svc_opts *opts, const char *name, size_t len,
                                          size_t *ret_i)
{
    for (size_t i = 0; i < opts->n; i++) {
        const struct svc_option *o = &opts->v[i];
        if (o->flag && strlen(o->flag) == len && strncmp(o->flag, name, len) == 0) {
            *ret_i = i;
            return o;
        }
    }
    return NULL;
}

static const struct svc_option *find_short(const struct svc_opts *opts, char ch, size_t *ret_i)
{
    for (size_t i = 0; i < opts->n; i++) {
        const struct svc_option *o = &opts->v[i];
        if (o->short_flag == ch) {
            *ret_i = i;
            return o;
        }
    }
    return NULL;
}

static void flag_source(const struct svc_option *o, const char *v, char *buf, size_t n);

/* A word after a flag, in a component with verbs: a verb comes first, before any flag. */
static int misplaced_verb(const struct svc_component *c, const char *word, struct err *e)
{
    char names[256];
    svc_verb_names(c, "", names, sizeof(names));
    if (svc_verb_find(c, word))
        return err_set(e, -EINVAL, "the command \"%s\" comes first, before the flags", word);
    return err_set(e, -EINVAL, "unknown command \"%s\" (%s)", word, names);
}

static int parse_argv(const struct svc_opts *opts, void *state, int argc, char **argv,
                      const char **cli, const char **args, size_t *n_args, struct err *e)
{
    const struct svc_component *c = opts->c;
    *n_args = 0;
    for (int a = 1; a < argc; a++) {
        const char *arg = argv[a];
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0)
            return 1;
        const struct svc_option *o = NULL;
        const char *val = NULL;
        size_t i = 0;
        if (str_has_prefix(arg, "--") && arg[2]) {
            const char *name = arg + 2;
            const char *eq = strchr(name, '=');
            size_t len = eq ? (size_t)(eq - name) : strlen(name);
            o = find_long(opts, name, len, &i);
            if (!o)
                return err_set(e, -EINVAL, "unknown flag \"--%.*s\" (see --help)", (int)len, name);
            if (eq)
                val = eq + 1;
        } else if (arg[0] == '-' && arg[1] && arg[1] != '-') {
            /* -kn: flags without a value may share a dash; -c30s: a value may be attached */
            for (const char *p = arg + 1;; p++) {
                o = find_short(opts, *p, &i);
                if (!o)
                    return err_set(e, -EINVAL, "unknown flag \"-%c\" (see --help)", *p);
                if (o->kind != SVC_FLAG || !p[1]) {
                    if (p[1])
                        val = p + 1;
                    break;
                }
                cli[i] = "true";
            }
        } else if (args && *n_args < c->max_args) {
            args[(*n_args)++] = arg;
            continue;
        } else if (c->verbs[0]) {
            return misplaced_verb(c, arg, e);
        } else {
            return err_set(e, -EINVAL, "unexpected argument \"%s\" (see --help)", arg);
        }
        if (!val && takes_no_value(o))
            val = "true";
        if (!val) {
            if (a + 1 >= argc)
                return err_set(e, -EINVAL, "flag --%s needs a value",
                               o->flag ? o->flag : (char[]){o->short_flag, 0});
            val = argv[++a];
        }
        if (o->kind == SVC_STRINGS) {
            char src[256];
            flag_source(o, val, src, sizeof(src));
            int r = set_value(o, state, val, src, e);
            if (r < 0)
                return r;
            continue;
        }
        cli[i] = val;
    }
    return 0;
}

int svc_parse_argv(const struct svc_opts *opts, void *state, int argc, char **argv,
                   const char **cli, const char **args, size_t *n_args, struct err *e)
{
    int r = parse_argv(opts, state, argc, argv, cli, args, n_args, e);
    /* `mig-parted -d apply`: the verb's flag, read as the parent's; say where it goes. */
    for (int a = 1; r < 0 && a < argc; a++)
        if (svc_verb_find(opts->c, argv[a]))
            return misplaced_verb(opts->c, argv[a], e);
    return r;
}

/* ---- precedence --------------------------------------------------------------------------- */

static void flag_source(const struct svc_option *o, const char *v, char *buf, size_t n)
{
    if (o->flag)
        snprintf(buf, n, "--%s \"%s\"", o->flag, v);
    else
        snprintf(buf, n, "-%c \"%s\"", o->short_flag, v);
}

/* Values in state: env (table order), then flags, over the defaults. */
int svc_resolve_state(const struct svc_opts *opts, void *state, const char *const *cli,
                      struct err *e)
{
    char src[256];
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < opts->n; i++) {
            const struct svc_option *o = &opts->v[i];
            if (o->field || o->kind == SVC_STRINGS)
                continue;
            const char *v = pass == 0 ? (o->env ? env_get(o->env) : NULL) : cli[i];
            if (!v)
                continue;
            if (pass == 0)
                snprintf(src, sizeof(src), "%s=\"%s\"", o->env, v);
            else
                flag_source(o, v, src, sizeof(src));
            int r = set_value(o, state, v, src, e);
            if (r < 0)
                return r;
        }
    return 0;
}

const char *svc_layer_value(const struct svc_opts *opts, const char *const *cli, const char *field,
                            const char **ret_source)
{
    const char *val = NULL, *src = NULL;
    for (size_t i = 0; i < opts->n; i++) {
        const struct svc_option *o = &opts->v[i];
        if (o->field && strcmp(o->field, field) == 0 && o->env && env_get(o->env)) {
            val = env_get(o->env);
            src = o->env;
        }
    }
    for (size_t i = 0; cli && i < opts->n; i++) {
        const struct svc_option *o = &opts->v[i];
        if (o->field && strcmp(o->field, field) == 0 && cli[i]) {
            val = cli[i];
            src = o->flag;
        }
    }
    if (ret_source)
        *ret_source = src;
    return val;
}

int svc_resolve_layer(const struct svc_opts *opts, void *state, const char *const *cli,
                      struct err *e)
{
    const struct svc_component *c = opts->c;
    if (!c->layer)
        return 0;
    const char *path = svc_layer_value(opts, cli, "configFile", NULL);
    int r = c->layer->load(state, path, e);
    if (r < 0)
        return r;
    char src[128];
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < opts->n; i++) {
            const struct svc_option *o = &opts->v[i];
            if (!o->field || o->kind == SVC_CONFIG_FILE)
                continue;
            const char *v = pass == 0 ? (o->env ? env_get(o->env) : NULL) : cli[i];
            if (!v)
                continue;
            if (pass == 0)
                snprintf(src, sizeof(src), "%s", o->env);
            else
                snprintf(src, sizeof(src), "--%s", o->flag ? o->flag : o->field);
            r = c->layer->set(state, o->field, v, src, e);
            if (r < 0)
                return r;
        }
    return c->layer->finish ? c->layer->finish(state, e) : 0;
}

int svc_parse(const struct svc_component *c, void *state, int argc, char **argv, FILE *out,
              struct err *e)
{
    _cleanup_(svc_opts_done) struct svc_opts opts;
    svc_opts_init(&opts, c);
    _cleanup_free_ const char **cli = xcalloc(opts.n + 1, sizeof(char *));
    _cleanup_free_ const char **args = xcalloc(c->max_args + 1, sizeof(char *));
    size_t n_args = 0;
    if (c->defaults)
        c->defaults(state);
    int r = svc_parse_argv(&opts, state, argc, argv, cli, args, &n_args, e);
    if (r == 1) {
        svc_usage(c, out ? out : stdout);
        return 1;
    }
    if (r < 0)
        return r;
    r = svc_resolve_state(&opts, state, cli, e);
    if (r < 0)
        return r;
    return svc_resolve_layer(&opts, state, cli, e);
}

/* ---- --help ------------------------------------------------------------------------------- */

static const char *default_metavar(enum svc_kind k)
{
    switch (k) {
    case SVC_STRING:
    case SVC_STRINGS:
        return "VALUE";
    case SVC_CONFIG_FILE:
        return "PATH";
    case SVC_BOOL:
        return "[=BOOL]";
    case SVC_INT:
    case SVC_UINT:
    case SVC_U64:
        return "N";
    case SVC_DURATION:
        return "DUR";
    case SVC_ENUM:
        return "NAME";
    case SVC_FLAG:
    case SVC_FRAGMENT:
    case SVC_END:
        break;
    }
    return "";
}

/* Help text, continuation lines indented to HELP_COL, then " [ENV]" when the option has one. */
static void print_help_text(FILE *out, const char *help, const char *env, int col)
{
    if (col >= HELP_COL) {
        fputc('\n', out);
        col = 0;
    }
    fprintf(out, "%*s", HELP_COL - col, "");
    size_t line = HELP_COL;
    for (const char *p = help; *p; p++) {
        fputc(*p, out);
        line++;
        if (*p == '\n') {
            fprintf(out, "%*s", HELP_COL, "");
            line = HELP_COL;
        }
    }
    if (env && line + strlen(env) + 3 > HELP_WIDTH)
        fprintf(out, "\n%*s[%s]", HELP_COL, "", env);
    else if (env)
        fprintf(out, " [%s]", env);
    fputc('\n', out);
}

/* ---- verbs -------------------------------------------------------------------------------- */

const struct svc_component *svc_verb_find(const struct svc_component *c, const char *word)
{
    for (size_t i = 0; i < SVC_MAX_VERBS && c->verbs[i]; i++)
        if (strcmp(c->verbs[i]->name, word) == 0)
            return c->verbs[i];
    return NULL;
}

void svc_verb_names(const struct svc_component *c, const char *prefix, char *buf, size_t n)
{
    assert(n >= 4);
    size_t used = 0;
    buf[0] = 0;
    for (size_t i = 0; i < SVC_MAX_VERBS && c->verbs[i]; i++) {
        int w = snprintf(buf + used, n - used, "%s%s%s", i ? ", " : "", prefix, c->verbs[i]->name);
        if (w < 0 || (size_t)w >= n - used) {
            memcpy(buf + n - 4, "...", 4);
            return;
        }
        used += (size_t)w;
    }
}

/* ---- --help ------------------------------------------------------------------------------- */

static void print_commands(const struct svc_component *c, const char *path, FILE *out)
{
    int width = 0;
    for (size_t i = 0; i < SVC_MAX_VERBS && c->verbs[i]; i++)
        if ((int)strlen(c->verbs[i]->name) > width)
            width = (int)strlen(c->verbs[i]->name);
    fputs("\nCommands:\n", out);
    for (size_t i = 0; i < SVC_MAX_VERBS && c->verbs[i]; i++) {
        const struct svc_component *v = c->verbs[i];
        fprintf(out, "  %-*s  %s\n", width, v->name, v->summary ? v->summary : "");
    }
    fprintf(out, "\n`gpuop %s COMMAND --help`: a command's own flags.\n", path);
}

void svc_usage_at(const struct svc_component *c, const char *path, FILE *out)
{
    if (c->usage) {
        fputs(c->usage, out);
    } else {
        const char *verb = !c->verbs[0] ? "" : c->run ? " [COMMAND]" : " COMMAND";
        fprintf(out, "Usage: gpuop %s%s [flags]\n", path, verb);
        if (c->summary)
            fprintf(out, "\n%s.\n", c->summary);
    }
    if (c->verbs[0])
        print_commands(c, path, out);
    _cleanup_(svc_opts_done) struct svc_opts opts;
    svc_opts_init(&opts, c);
    fprintf(out, "\n%s\n", c->flags_title ? c->flags_title : "Flags:");
    bool any_env_only = false;
    for (size_t i = 0; i < opts.n; i++) {
        const struct svc_option *o = &opts.v[i];
        if (!o->help)
            continue;
        if (!o->flag) {
            any_env_only = true;
            continue;
        }
        const char *mv = o->metavar ? o->metavar : default_metavar(o->kind);
        char head[128];
        int col;
        if (o->short_flag)
            col = snprintf(head, sizeof(head), "  -%c, --%s", o->short_flag, o->flag);
        else
            col = snprintf(head, sizeof(head), "      --%s", o->flag);
        if (*mv)
            col += snprintf(head + col, sizeof(head) - (size_t)col, "%s%s", mv[0] == '[' ? "" : " ",
                            mv);
        fputs(head, out);
        print_help_text(out, o->help, o->env, col);
    }
    fputs("  -h, --help", out);
    print_help_text(out, "this text", NULL, 12);
    if (any_env_only) {
        fputs("\nEnvironment:\n", out);
        for (size_t i = 0; i < opts.n; i++) {
            const struct svc_option *o = &opts.v[i];
            if (!o->help || o->flag)
                continue;
            int col = fprintf(out, "  %s", o->env);
            print_help_text(out, o->help, NULL, col);
        }
    }
    if (c->epilogue)
        fprintf(out, "\n%s", c->epilogue);
}

void svc_usage(const struct svc_component *c, FILE *out)
{
    svc_usage_at(c, c->name, out);
}
