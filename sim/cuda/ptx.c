/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The simulated driver's PTX loader: a tokenizer and a parser of a module's structure (see
 * simcuda.h for what it checks and what it does not). Pure: bytes in, a module description out.
 */
#include <string.h>

#include "simcuda.h"

enum tok_kind { T_EOF, T_IDENT, T_NUM, T_STR, T_PUNCT };

struct tok {
    enum tok_kind kind;
    const char *s;
    size_t n;
    unsigned line;
};

struct lex {
    const char *p, *end;
    unsigned line;
    struct tok cur;
    struct err *e;
};

static bool is_ident_start(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '$' || c == '%' ||
           c == '.';
}

static bool is_ident_char(char c)
{
    return is_ident_start(c) || (c >= '0' && c <= '9');
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static int lex_fail(struct lex *l, const char *what)
{
    return err_set(l->e, -EINVAL, "line %u: %s", l->cur.line ? l->cur.line : l->line, what);
}

/* Reads the next token into l->cur. */
static int lex_next(struct lex *l)
{
    for (;;) {
        while (l->p < l->end && (*l->p == ' ' || *l->p == '\t' || *l->p == '\r' || *l->p == '\n' ||
                                 *l->p == '\f' || *l->p == '\v')) {
            if (*l->p == '\n')
                l->line++;
            l->p++;
        }
        if (l->end - l->p >= 2 && l->p[0] == '/' && l->p[1] == '/') {
            while (l->p < l->end && *l->p != '\n')
                l->p++;
            continue;
        }
        if (l->end - l->p >= 2 && l->p[0] == '/' && l->p[1] == '*') {
            const char *q = l->p + 2;
            while (q + 1 < l->end && !(q[0] == '*' && q[1] == '/')) {
                if (*q == '\n')
                    l->line++;
                q++;
            }
            if (q + 1 >= l->end) {
                l->cur.line = l->line;
                return lex_fail(l, "unterminated comment");
            }
            l->p = q + 2;
            continue;
        }
        break;
    }
    struct tok t = {.s = l->p, .line = l->line};
    if (l->p >= l->end || *l->p == '\0') {
        t.kind = T_EOF;
        l->cur = t;
        return 0;
    }
    char c = *l->p;
    if (is_digit(c)) {
        t.kind = T_NUM;
        while (l->p < l->end && (is_ident_char(*l->p) && *l->p != '%' && *l->p != '$'))
            l->p++;
    } else if (is_ident_start(c)) {
        t.kind = T_IDENT;
        l->p++;
        while (l->p < l->end && is_ident_char(*l->p) && *l->p != '%')
            l->p++;
        if (l->p - t.s == 1 && (c == '.' || c == '%' || c == '$')) {
            l->cur = t;
            return lex_fail(l, "a lone '.', '%' or '$'");
        }
    } else if (c == '"') {
        t.kind = T_STR;
        l->p++;
        while (l->p < l->end && *l->p != '"' && *l->p != '\n')
            l->p++;
        if (l->p >= l->end || *l->p != '"') {
            l->cur = t;
            return lex_fail(l, "unterminated string");
        }
        l->p++;
    } else if (strchr("(){}[],;:<>@!+-*/=|&^~?", c)) {
        t.kind = T_PUNCT;
        l->p++;
    } else {
        l->cur = t;
        return lex_fail(l, (c >= 0x20 && c < 0x7f) ? "unexpected character"
                                                   : "a byte that is not "
                                                     "PTX text");
    }
    t.n = (size_t)(l->p - t.s);
    l->cur = t;
    return 0;
}

static bool tok_is(const struct tok *t, const char *s)
{
    return t->kind != T_EOF && t->n == strlen(s) && memcmp(t->s, s, t->n) == 0;
}

static bool tok_punct(const struct tok *t, char c)
{
    return t->kind == T_PUNCT && t->s[0] == c;
}

/* An unsigned decimal (or 0x hex) number token. */
static int tok_uint(const struct tok *t, unsigned *ret)
{
    if (t->kind != T_NUM || t->n > 20)
        return -EINVAL;
    char buf[24];
    memcpy(buf, t->s, t->n);
    buf[t->n] = '\0';
    return parse_uint(buf, ret);
}

static int expect_punct(struct lex *l, char c, const char *ctx)
{
    if (!tok_punct(&l->cur, c)) {
        char msg[160];
        snprintf(msg, sizeof(msg), "expected '%c' %s", c, ctx);
        return lex_fail(l, msg);
    }
    return lex_next(l);
}

static const struct {
    const char *name;
    enum simcuda_ptx_type type;
    size_t size;
} ptx_types[] = {
    {".b8", SIMCUDA_B8, 1},     {".b16", SIMCUDA_B16, 2}, {".b32", SIMCUDA_B32, 4},
    {".b64", SIMCUDA_B64, 8},   {".u8", SIMCUDA_U8, 1},   {".u16", SIMCUDA_U16, 2},
    {".u32", SIMCUDA_U32, 4},   {".u64", SIMCUDA_U64, 8}, {".s8", SIMCUDA_S8, 1},
    {".s16", SIMCUDA_S16, 2},   {".s32", SIMCUDA_S32, 4}, {".s64", SIMCUDA_S64, 8},
    {".f16", SIMCUDA_F16, 2},   {".f32", SIMCUDA_F32, 4}, {".f64", SIMCUDA_F64, 8},
    {".pred", SIMCUDA_PRED, 1},
};

/* Opcodes of the PTX ISA (the part before the first '.'). */
static const char *const ptx_opcodes[] = {
    "abs",           "activemask", "add",
    "addc",          "alloca",     "and",
    "applypriority", "atom",       "bar",
    "barrier",       "bfe",        "bfi",
    "bfind",         "bmsk",       "bra",
    "brev",          "brkpt",      "brx",
    "call",          "clz",        "cnot",
    "copysign",      "cos",        "cp",
    "createpolicy",  "cvt",        "cvta",
    "discard",       "div",        "dp2a",
    "dp4a",          "elect",      "ex2",
    "exit",          "fence",      "fma",
    "fns",           "getctarank", "griddepcontrol",
    "isspacep",      "istypep",    "ld",
    "ldmatrix",      "ldu",        "lg2",
    "lop3",          "mad",        "mad24",
    "madc",          "mapa",       "match",
    "max",           "mbarrier",   "membar",
    "min",           "mma",        "mov",
    "movmatrix",     "mul",        "mul24",
    "multimem",      "nanosleep",  "neg",
    "not",           "or",         "pmevent",
    "popc",          "prefetch",   "prefetchu",
    "prmt",          "rcp",        "red",
    "redux",         "rem",        "ret",
    "rsqrt",         "sad",        "selp",
    "set",           "setmaxnreg", "setp",
    "shf",           "shfl",       "shl",
    "shr",           "sin",        "slct",
    "sqrt",          "st",         "stackrestore",
    "stacksave",     "stmatrix",   "sub",
    "subc",          "suld",       "suq",
    "sured",         "sust",       "szext",
    "tanh",          "tcgen05",    "testp",
    "tex",           "tld4",       "trap",
    "txq",           "vabsdiff",   "vadd",
    "vmad",          "vmax",       "vmin",
    "vote",          "vshl",       "vshr",
    "vsub",          "wgmma",      "wmma",
    "xor",
};

static bool known_opcode(const struct tok *t)
{
    size_t base = 0;
    while (base < t->n && t->s[base] != '.')
        base++;
    for (size_t i = 0; i < ARRAY_SIZE(ptx_opcodes); i++)
        if (strlen(ptx_opcodes[i]) == base && memcmp(ptx_opcodes[i], t->s, base) == 0)
            return true;
    return false;
}

/* One parameter: [.align N] [.ptr [.space] [.align N]] .type [.align N] name [ '[' N ']' ]. */
static int parse_param(struct lex *l, bool is_func, struct simcuda_ptx_param *ret)
{
    if (!tok_is(&l->cur, ".param") && !(is_func && tok_is(&l->cur, ".reg")))
        return lex_fail(l, "expected .param in a parameter list");
    int r = lex_next(l);
    bool have_type = false;
    while (r == 0 && l->cur.kind == T_IDENT && l->cur.s[0] == '.') {
        bool matched = false;
        for (size_t i = 0; i < ARRAY_SIZE(ptx_types); i++) {
            if (tok_is(&l->cur, ptx_types[i].name)) {
                if (have_type)
                    return lex_fail(l, "a parameter with two types");
                ret->type = ptx_types[i].type;
                ret->size = ptx_types[i].size;
                have_type = matched = true;
            }
        }
        if (tok_is(&l->cur, ".align")) {
            unsigned a;
            if ((r = lex_next(l)) < 0)
                return r;
            if (tok_uint(&l->cur, &a) < 0 || a == 0 || (a & (a - 1)) != 0)
                return lex_fail(l, ".align needs a power of two");
            matched = true;
        } else if (tok_is(&l->cur, ".ptr") || tok_is(&l->cur, ".global") ||
                   tok_is(&l->cur, ".const") || tok_is(&l->cur, ".local") ||
                   tok_is(&l->cur, ".shared")) {
            matched = true;
        }
        if (!matched)
            return lex_fail(l, "unknown parameter qualifier or type");
        r = lex_next(l);
    }
    if (r < 0)
        return r;
    if (!have_type)
        return lex_fail(l, "a parameter without a type");
    if (l->cur.kind != T_IDENT || l->cur.s[0] == '.' || l->cur.s[0] == '%')
        return lex_fail(l, "expected a parameter name");
    ret->count = 1;
    if ((r = lex_next(l)) < 0)
        return r;
    if (tok_punct(&l->cur, '[')) {
        unsigned n;
        if ((r = lex_next(l)) < 0)
            return r;
        if (tok_uint(&l->cur, &n) < 0 || n == 0 || n > 65536)
            return lex_fail(l, "a parameter array needs a length");
        ret->count = n;
        if ((r = lex_next(l)) < 0)
            return r;
        return expect_punct(l, ']', "after a parameter array length");
    }
    return 0;
}

/* '(' [param {',' param}] ')' */
static int parse_param_list(struct lex *l, bool is_func, struct simcuda_ptx_entry *ent, bool keep)
{
    int r = expect_punct(l, '(', "to open a parameter list");
    if (r < 0)
        return r;
    if (tok_punct(&l->cur, ')'))
        return lex_next(l);
    for (;;) {
        struct simcuda_ptx_param p = {0};
        if ((r = parse_param(l, is_func, &p)) < 0)
            return r;
        if (keep) {
            if (ent->n_params >= SIMCUDA_PTX_MAX_PARAMS)
                return lex_fail(l, "more parameters than the simulated driver takes (32)");
            ent->params[ent->n_params++] = p;
        }
        if (tok_punct(&l->cur, ','))
            r = lex_next(l);
        else
            return expect_punct(l, ')', "to close a parameter list");
        if (r < 0)
            return r;
    }
}

/* Tokens up to and including ';', braces balanced (initializers, vector operands). */
static int skip_statement(struct lex *l)
{
    unsigned depth = 0;
    for (;;) {
        if (l->cur.kind == T_EOF)
            return lex_fail(l, "statement without ';' at the end of the module");
        if (tok_punct(&l->cur, '{')) {
            depth++;
        } else if (tok_punct(&l->cur, '}')) {
            if (depth == 0)
                return lex_fail(l, "'}' before the statement's ';'");
            depth--;
        } else if (tok_punct(&l->cur, ';') && depth == 0) {
            return lex_next(l);
        }
        int r = lex_next(l);
        if (r < 0)
            return r;
    }
}

/* A function body, l->cur on its '{'. */
static int parse_body(struct lex *l)
{
    unsigned depth = 1;
    int r = lex_next(l);
    while (r == 0) {
        const struct tok t = l->cur;
        if (t.kind == T_EOF)
            return lex_fail(l, "function body not closed with '}'");
        if (tok_punct(&t, '{')) {
            if (++depth > 64)
                return lex_fail(l, "blocks nested too deep");
            r = lex_next(l);
        } else if (tok_punct(&t, '}')) {
            r = lex_next(l);
            if (--depth == 0)
                return r;
        } else if (t.kind == T_IDENT && t.s[0] == '.') {
            r = skip_statement(l); /* .reg, .local, .shared, .param, .loc, .pragma ... */
        } else if (tok_punct(&t, '@')) {
            if ((r = lex_next(l)) < 0)
                return r;
            if (tok_punct(&l->cur, '!') && (r = lex_next(l)) < 0)
                return r;
            if (l->cur.kind != T_IDENT || l->cur.s[0] == '.')
                return lex_fail(l, "expected a predicate after '@'");
            if ((r = lex_next(l)) < 0)
                return r;
            if (l->cur.kind != T_IDENT || !known_opcode(&l->cur))
                return lex_fail(l, "expected an instruction after a guard");
            r = skip_statement(l);
        } else if (t.kind == T_IDENT && t.s[0] != '%') {
            if ((r = lex_next(l)) < 0)
                return r;
            if (tok_punct(&l->cur, ':') && t.s[0] != '.') {
                r = lex_next(l); /* a label */
            } else if (!known_opcode(&t)) {
                l->cur = t;
                return lex_fail(l, "unknown instruction");
            } else {
                r = skip_statement(l);
            }
        } else {
            return lex_fail(l, "expected an instruction, a directive or a label");
        }
    }
    return r;
}

static int add_function(struct lex *l, struct simcuda_ptx_module *m, bool kernel,
                        struct simcuda_ptx_entry **ret)
{
    if (l->cur.kind != T_IDENT || l->cur.s[0] == '.' || l->cur.s[0] == '%')
        return lex_fail(l, kernel ? "expected the .entry's name" : "expected the .func's name");
    if (l->cur.n >= SIMCUDA_PTX_NAME_MAX)
        return lex_fail(l, "function name too long");
    if (m->n_entries >= SIMCUDA_PTX_MAX_ENTRIES)
        return lex_fail(l, "more functions than the simulated driver takes (32)");
    struct simcuda_ptx_entry *ent = &m->entries[m->n_entries++];
    memset(ent, 0, sizeof(*ent));
    memcpy(ent->name, l->cur.s, l->cur.n);
    ent->kernel = kernel;
    *ret = ent;
    return lex_next(l);
}

/* .entry NAME [(params)] {tuning} (body | ;)  or  .func [(ret)] NAME [(params)] ... */
static int parse_function(struct lex *l, struct simcuda_ptx_module *m, bool kernel)
{
    int r = lex_next(l);
    if (r < 0)
        return r;
    if (!kernel && tok_punct(&l->cur, '(') && (r = parse_param_list(l, true, NULL, false)) < 0)
        return r;
    struct simcuda_ptx_entry *ent = NULL;
    if ((r = add_function(l, m, kernel, &ent)) < 0)
        return r;
    if (tok_punct(&l->cur, '(') && (r = parse_param_list(l, !kernel, ent, true)) < 0)
        return r;
    /* performance-tuning directives: .maxntid 256,1,1 .minnctapersm 4 .noreturn ... */
    while (l->cur.kind == T_IDENT && l->cur.s[0] == '.') {
        bool pragma = tok_is(&l->cur, ".pragma");
        if ((r = lex_next(l)) < 0)
            return r;
        if (pragma) {
            if (l->cur.kind != T_STR)
                return lex_fail(l, ".pragma needs a string");
            if ((r = lex_next(l)) < 0 || (r = expect_punct(l, ';', "after .pragma")) < 0)
                return r;
            continue;
        }
        while (l->cur.kind == T_NUM) {
            if ((r = lex_next(l)) < 0)
                return r;
            if (!tok_punct(&l->cur, ','))
                break;
            if ((r = lex_next(l)) < 0)
                return r;
        }
    }
    if (tok_punct(&l->cur, ';'))
        return lex_next(l);
    if (!tok_punct(&l->cur, '{'))
        return lex_fail(l, "expected the function's body or ';'");
    for (size_t i = 0; i + 1 < m->n_entries; i++)
        if (m->entries[i].defined && strcmp(m->entries[i].name, ent->name) == 0)
            return lex_fail(l, "a function defined twice");
    ent->defined = true;
    return parse_body(l);
}

static int parse_header(struct lex *l, struct simcuda_ptx_module *m)
{
    if (!tok_is(&l->cur, ".version"))
        return lex_fail(l, "a PTX module starts with .version");
    int r = lex_next(l);
    if (r < 0)
        return r;
    const struct tok v = l->cur;
    const char *dot = v.kind == T_NUM ? memchr(v.s, '.', v.n) : NULL;
    unsigned major = 0, minor = 0;
    if (!dot || dot == v.s || (size_t)(dot - v.s) + 1 >= v.n || (size_t)(dot - v.s) > 2 ||
        v.n - (size_t)(dot - v.s) - 1 > 2)
        return lex_fail(l, ".version needs MAJOR.MINOR");
    for (const char *p = v.s; p < v.s + v.n; p++) {
        if (p == dot)
            continue;
        if (!is_digit(*p))
            return lex_fail(l, ".version needs MAJOR.MINOR");
        if (p < dot)
            major = major * 10 + (unsigned)(*p - '0');
        else
            minor = minor * 10 + (unsigned)(*p - '0');
    }
    if (major == 0)
        return lex_fail(l, ".version: no PTX ISA 0.x");
    m->version_major = major;
    m->version_minor = minor;
    if ((r = lex_next(l)) < 0)
        return r;
    if (!tok_is(&l->cur, ".target"))
        return lex_fail(l, ".version is followed by .target");
    bool arch = false;
    do {
        if ((r = lex_next(l)) < 0)
            return r;
        const struct tok t = l->cur;
        unsigned sm = 0;
        size_t k = 0;
        if (t.kind == T_IDENT && t.n > 3 && memcmp(t.s, "sm_", 3) == 0)
            k = 3;
        else if (t.kind == T_IDENT && t.n > 8 && memcmp(t.s, "compute_", 8) == 0)
            k = 8;
        if (k) {
            size_t digits = 0;
            while (k < t.n && is_digit(t.s[k]) && digits < 4) {
                sm = sm * 10 + (unsigned)(t.s[k++] - '0');
                digits++;
            }
            if (digits < 2 || (k < t.n && !(k + 1 == t.n && (t.s[k] == 'a' || t.s[k] == 'f'))))
                return lex_fail(l, ".target: not an architecture (sm_NN)");
            arch = true;
            if (sm > m->target_sm)
                m->target_sm = sm;
        } else if (!(tok_is(&t, "texmode_unified") || tok_is(&t, "texmode_independent") ||
                     tok_is(&t, "debug") || tok_is(&t, "map_f64_to_f32"))) {
            return lex_fail(l, ".target: unknown target");
        }
        if ((r = lex_next(l)) < 0)
            return r;
    } while (tok_punct(&l->cur, ','));
    if (!arch)
        return lex_fail(l, ".target names no architecture");
    m->address_size = 32;
    if (tok_is(&l->cur, ".address_size")) {
        if ((r = lex_next(l)) < 0)
            return r;
        if (tok_uint(&l->cur, &m->address_size) < 0 ||
            (m->address_size != 32 && m->address_size != 64))
            return lex_fail(l, ".address_size is 32 or 64");
        return lex_next(l);
    }
    return 0;
}

int simcuda_ptx_parse(const char *text, size_t len, struct simcuda_ptx_module *ret, struct err *e)
{
    struct lex l = {.p = text, .end = text + len, .line = 1, .e = e};
    memset(ret, 0, sizeof(*ret));
    int r = lex_next(&l);
    if (r == 0)
        r = parse_header(&l, ret);
    if (r < 0)
        return r;
    if (ret->version_major > SIMCUDA_PTX_ISA_MAX_MAJOR)
        return err_set(e, -EPROTONOSUPPORT,
                       "PTX ISA %u.%u is newer than the simulated driver compiles (%u.x)",
                       ret->version_major, ret->version_minor, SIMCUDA_PTX_ISA_MAX_MAJOR);
    while (l.cur.kind != T_EOF) {
        while (tok_is(&l.cur, ".visible") || tok_is(&l.cur, ".extern") || tok_is(&l.cur, ".weak") ||
               tok_is(&l.cur, ".common"))
            if ((r = lex_next(&l)) < 0)
                return r;
        if (tok_is(&l.cur, ".entry") || tok_is(&l.cur, ".func")) {
            r = parse_function(&l, ret, tok_is(&l.cur, ".entry"));
        } else if (tok_is(&l.cur, ".global") || tok_is(&l.cur, ".const") ||
                   tok_is(&l.cur, ".shared") || tok_is(&l.cur, ".texref") ||
                   tok_is(&l.cur, ".surfref") || tok_is(&l.cur, ".samplerref") ||
                   tok_is(&l.cur, ".pragma")) {
            r = skip_statement(&l);
        } else if (tok_is(&l.cur, ".file")) {
            /* .file N "name" [, timestamp, size] */
            if ((r = lex_next(&l)) < 0)
                return r;
            if (l.cur.kind != T_NUM)
                return lex_fail(&l, ".file needs a number");
            if ((r = lex_next(&l)) < 0)
                return r;
            if (l.cur.kind != T_STR)
                return lex_fail(&l, ".file needs a file name");
            r = lex_next(&l);
            while (r == 0 && tok_punct(&l.cur, ',')) {
                if ((r = lex_next(&l)) < 0)
                    return r;
                if (l.cur.kind != T_NUM)
                    return lex_fail(&l, ".file: expected a number");
                r = lex_next(&l);
            }
        } else if (tok_is(&l.cur, ".section")) {
            /* debug sections: .section NAME { ... } */
            if ((r = lex_next(&l)) < 0 || (r = lex_next(&l)) < 0)
                return r;
            if (!tok_punct(&l.cur, '{'))
                return lex_fail(&l, ".section needs a '{'");
            unsigned depth = 0;
            do {
                if (l.cur.kind == T_EOF)
                    return lex_fail(&l, ".section not closed with '}'");
                if (tok_punct(&l.cur, '{'))
                    depth++;
                else if (tok_punct(&l.cur, '}'))
                    depth--;
                r = lex_next(&l);
            } while (r == 0 && depth > 0);
        } else if (l.cur.kind == T_EOF) {
            return lex_fail(&l, "a linkage directive with nothing after it");
        } else {
            return lex_fail(&l, "expected .entry, .func or a module-level declaration");
        }
        if (r < 0)
            return r;
    }
    return 0;
}

const struct simcuda_ptx_entry *simcuda_ptx_find(const struct simcuda_ptx_module *m,
                                                 const char *name)
{
    const struct simcuda_ptx_entry *decl = NULL;
    for (size_t i = 0; i < m->n_entries; i++) {
        if (strcmp(m->entries[i].name, name) != 0)
            continue;
        if (m->entries[i].defined)
            return &m->entries[i];
        decl = &m->entries[i];
    }
    return decl;
}
