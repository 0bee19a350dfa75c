/* SPDX-License-Identifier: Apache-2.0 */
/* The CEL subset of DRA device selectors (ks-cel.h): a lexer, a recursive-descent parser into an
 * array of nodes, CEL's type checker over the DRA environment (the `device` variable) with its
 * error texts, and an evaluator with CEL's runtime semantics (commutative && and ||, heterogeneous
 * equality, cross-type numeric comparison, overflow checks). Pure. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ks-cel.h"
#include "kubesim-internal.h"

#define MAX_DEPTH    250        /* cel-go's default parser recursion limit */
#define MAX_NODES    8192       /* far above what 10 KiB of expression makes */
#define ARENA_LIMIT  (4u << 20) /* bytes one evaluation may allocate */
#define ERR_TEXT_MAX (64u << 10)

/* ==== types ================================================================================= */

enum tk {
    TY_ERR,
    TY_DYN,
    TY_ANY, /* google.protobuf.Any: an attribute's value; checked as dyn */
    TY_NULL,
    TY_BOOL,
    TY_INT,
    TY_UINT,
    TY_DOUBLE,
    TY_STRING,
    TY_LIST,
    TY_MAP,
    TY_QUANTITY,
    TY_SEMVER,
    TY_DEVICE,
};

struct ty {
    enum tk k;
    const struct ty *a, *b; /* list(a), map(a, b) */
};

static const struct ty ty_err = {TY_ERR, NULL, NULL}, ty_dyn = {TY_DYN, NULL, NULL},
                       ty_any = {TY_ANY, NULL, NULL}, ty_null = {TY_NULL, NULL, NULL},
                       ty_bool = {TY_BOOL, NULL, NULL}, ty_int = {TY_INT, NULL, NULL},
                       ty_uint = {TY_UINT, NULL, NULL}, ty_double = {TY_DOUBLE, NULL, NULL},
                       ty_string = {TY_STRING, NULL, NULL}, ty_quantity = {TY_QUANTITY, NULL, NULL},
                       ty_semver = {TY_SEMVER, NULL, NULL}, ty_device = {TY_DEVICE, NULL, NULL};
static const struct ty ty_list_dyn = {TY_LIST, &ty_dyn, NULL};
static const struct ty ty_attr_ids = {TY_MAP, &ty_string, &ty_any};
static const struct ty ty_attrs = {TY_MAP, &ty_string, &ty_attr_ids};
static const struct ty ty_cap_ids = {TY_MAP, &ty_string, &ty_quantity};
static const struct ty ty_caps = {TY_MAP, &ty_string, &ty_cap_ids};

static const struct ty *ty_of_kind(enum tk k)
{
    switch (k) {
    case TY_DYN:
        return &ty_dyn;
    case TY_ANY:
        return &ty_any;
    case TY_NULL:
        return &ty_null;
    case TY_BOOL:
        return &ty_bool;
    case TY_INT:
        return &ty_int;
    case TY_UINT:
        return &ty_uint;
    case TY_DOUBLE:
        return &ty_double;
    case TY_STRING:
        return &ty_string;
    case TY_QUANTITY:
        return &ty_quantity;
    case TY_SEMVER:
        return &ty_semver;
    case TY_DEVICE:
        return &ty_device;
    default:
        return &ty_err;
    }
}

static bool ty_dynlike(const struct ty *t)
{
    return t->k == TY_DYN || t->k == TY_ANY;
}

static void ty_format(struct sbuf *b, const struct ty *t)
{
    static const char *const names[] = {
        [TY_ERR] = "*error*",
        [TY_DYN] = "dyn",
        [TY_ANY] = "google.protobuf.Any",
        [TY_NULL] = "null_type",
        [TY_BOOL] = "bool",
        [TY_INT] = "int",
        [TY_UINT] = "uint",
        [TY_DOUBLE] = "double",
        [TY_STRING] = "string",
        [TY_QUANTITY] = "kubernetes.Quantity",
        [TY_SEMVER] = "kubernetes.Semver",
        [TY_DEVICE] = "kubernetes.DRADevice",
    };
    if (t->k == TY_LIST) {
        sbuf_adds(b, "list(");
        ty_format(b, t->a);
        sbuf_adds(b, ")");
    } else if (t->k == TY_MAP) {
        sbuf_adds(b, "map(");
        ty_format(b, t->a);
        sbuf_adds(b, ", ");
        ty_format(b, t->b);
        sbuf_adds(b, ")");
    } else {
        sbuf_adds(b, names[t->k]);
    }
}

/* Two types that may stand for the same value: dyn matches anything. */
static bool ty_equiv(const struct ty *x, const struct ty *y)
{
    if (x->k == TY_ERR || y->k == TY_ERR || ty_dynlike(x) || ty_dynlike(y))
        return true;
    if (x->k != y->k)
        return false;
    if (x->k == TY_LIST)
        return ty_equiv(x->a, y->a);
    if (x->k == TY_MAP)
        return ty_equiv(x->a, y->a) && ty_equiv(x->b, y->b);
    return true;
}

/* ==== the program: nodes, types, errors ===================================================== */

enum nk {
    N_NULL,
    N_BOOL,
    N_INT,
    N_UINT,
    N_DOUBLE,
    N_STRING,
    N_IDENT,
    N_SELECT, /* a.name; has(a.name) when test */
    N_INDEX,  /* a[b] */
    N_CALL,   /* name(args...), or target.name(args...) when member */
    N_UNARY,  /* op: '!' or '-' */
    N_BINARY, /* op: an enum bop */
    N_COND,   /* a ? b : c */
    N_LIST,
};

enum bop {
    B_OR,
    B_AND,
    B_EQ,
    B_NE,
    B_LT,
    B_LE,
    B_GT,
    B_GE,
    B_IN,
    B_ADD,
    B_SUB,
    B_MUL,
    B_DIV,
    B_MOD
};
static const char *const bop_fn[] = {"_||_", "_&&_", "_==_", "_!=_", "_<_", "_<=_", "_>_",
                                     "_>=_", "@in",  "_+_",  "_-_",  "_*_", "_/_",  "_%_"};

struct node {
    enum nk k;
    int op;      /* N_UNARY, N_BINARY */
    bool member; /* N_CALL */
    bool test;   /* N_SELECT under has() */
    size_t pos;  /* byte offset in the expression */
    int a, b, c; /* children: operand/target, second, third; -1 none */
    int *args;   /* N_CALL arguments, N_LIST elements */
    size_t nargs;
    char *str; /* N_STRING value, N_IDENT/N_SELECT/N_CALL name */
    size_t slen;
    int64_t i;
    uint64_t u;
    double d;
    bool bv;
    const struct ty *type; /* set by the checker */
};

struct cel_err {
    size_t pos;
    char *msg;
};

struct ks_cel {
    char *src;
    size_t len;
    struct node *nodes;
    size_t n_nodes, cap_nodes;
    int root;
    struct ty **tys; /* list types made by the checker */
    size_t n_tys;
};

struct compile {
    struct ks_cel *c;
    /* lexer */
    size_t at;   /* next byte */
    int tok;     /* current token */
    size_t tpos; /* its offset */
    size_t tend; /* offset after it */
    int depth;
    bool failed;      /* a syntax error: stop parsing */
    bool neg_literal; /* the number next is after a single '-': -9223372036854775808 fits */
    struct cel_err *errs;
    size_t n_errs;
};

static void add_err(struct compile *cp, size_t pos, const char *fmt, ...) GPUOP_PRINTF(3, 4);
static void add_err(struct compile *cp, size_t pos, const char *fmt, ...)
{
    if (cp->n_errs >= 100)
        return;
    va_list ap;
    va_start(ap, fmt);
    struct sbuf b;
    sbuf_init(&b, 4096);
    sbuf_vaddf(&b, fmt, ap);
    va_end(ap);
    cp->errs = xrealloc(cp->errs, (cp->n_errs + 1) * sizeof(*cp->errs));
    cp->errs[cp->n_errs++] = (struct cel_err){pos, ks_text_take(&b)};
}

static int new_node(struct compile *cp, enum nk k, size_t pos)
{
    struct ks_cel *c = cp->c;
    if (c->n_nodes >= MAX_NODES) {
        if (!cp->failed)
            add_err(cp, pos, "expression too large");
        cp->failed = true;
        return -1;
    }
    if (c->n_nodes == c->cap_nodes) {
        c->cap_nodes = c->cap_nodes ? c->cap_nodes * 2 : 32;
        c->nodes = xrealloc(c->nodes, c->cap_nodes * sizeof(*c->nodes));
    }
    struct node *n = &c->nodes[c->n_nodes];
    memset(n, 0, sizeof(*n));
    n->k = k;
    n->pos = pos;
    n->a = n->b = n->c = -1;
    return (int)c->n_nodes++;
}

static struct node *N(struct ks_cel *c, int i)
{
    return &c->nodes[i];
}

void ks_cel_free(struct ks_cel *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->n_nodes; i++) {
        free(c->nodes[i].args);
        free(c->nodes[i].str);
    }
    free(c->nodes);
    for (size_t i = 0; i < c->n_tys; i++)
        free(c->tys[i]);
    free(c->tys);
    free(c->src);
    free(c);
}

static const struct ty *mk_list(struct ks_cel *c, const struct ty *elem)
{
    if (elem->k == TY_DYN)
        return &ty_list_dyn;
    struct ty *t = xcalloc(1, sizeof(*t));
    t->k = TY_LIST;
    t->a = elem;
    c->tys = xrealloc(c->tys, (c->n_tys + 1) * sizeof(*c->tys));
    c->tys[c->n_tys++] = t;
    return t;
}

/* ==== lexer ================================================================================= */

enum tok {
    T_EOF,
    T_IDENT,
    T_INT,
    T_UINT,
    T_DOUBLE,
    T_STRING,
    T_BYTES,
    T_TRUE,
    T_FALSE,
    T_NULLLIT,
    T_IN,
    T_LPAREN,
    T_RPAREN,
    T_LBRACK,
    T_RBRACK,
    T_LBRACE,
    T_RBRACE,
    T_DOT,
    T_COMMA,
    T_COLON,
    T_QUESTION,
    T_AND,
    T_OR,
    T_NOT,
    T_EQ,
    T_NE,
    T_LT,
    T_LE,
    T_GT,
    T_GE,
    T_PLUS,
    T_MINUS,
    T_STAR,
    T_SLASH,
    T_PERCENT,
    T_BAD, /* a character no token starts with */
};

static bool is_ident_start(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_';
}

static bool is_digit(char ch)
{
    return ch >= '0' && ch <= '9';
}

/* The source text of the current token, as ANTLR quotes it in messages. */
static void tok_text(struct compile *cp, struct sbuf *b)
{
    if (cp->tok == T_EOF) {
        sbuf_adds(b, "<EOF>");
        return;
    }
    sbuf_add(b, cp->c->src + cp->tpos, cp->tend - cp->tpos);
}

/* Skips a string literal starting at cp->at (after any r/b prefix); false when unterminated. */
static bool skip_string(struct compile *cp, bool raw)
{
    const char *s = cp->c->src;
    size_t n = cp->c->len, i = cp->at;
    char q = s[i];
    bool triple = i + 2 < n && s[i + 1] == q && s[i + 2] == q;
    i += triple ? 3 : 1;
    while (i < n) {
        if (!raw && s[i] == '\\') {
            i += 2;
            continue;
        }
        if (triple) {
            if (i + 2 < n && s[i] == q && s[i + 1] == q && s[i + 2] == q) {
                cp->at = i + 3;
                return true;
            }
        } else {
            if (s[i] == '\n' || s[i] == '\r')
                break;
            if (s[i] == q) {
                cp->at = i + 1;
                return true;
            }
        }
        i++;
    }
    cp->at = i > n ? n : i;
    return false;
}

static void next(struct compile *cp)
{
    const char *s = cp->c->src;
    size_t n = cp->c->len;
    for (;;) {
        while (cp->at < n && (s[cp->at] == ' ' || s[cp->at] == '\t' || s[cp->at] == '\n' ||
                              s[cp->at] == '\r' || s[cp->at] == '\f'))
            cp->at++;
        if (cp->at + 1 < n && s[cp->at] == '/' && s[cp->at + 1] == '/') {
            while (cp->at < n && s[cp->at] != '\n')
                cp->at++;
            continue;
        }
        break;
    }
    cp->tpos = cp->at;
    if (cp->at >= n) {
        cp->tok = T_EOF;
        cp->tend = cp->at;
        return;
    }
    char ch = s[cp->at];
    char nx = cp->at + 1 < n ? s[cp->at + 1] : 0;
    /* strings, with r/R (raw) and b/B (bytes) prefixes */
    bool raw = false, bytes = false;
    size_t p = cp->at;
    for (int k = 0; k < 2 && p < n; k++) {
        if ((s[p] == 'r' || s[p] == 'R') && !raw)
            raw = true, p++;
        else if ((s[p] == 'b' || s[p] == 'B') && !bytes)
            bytes = true, p++;
        else
            break;
    }
    if (p < n && (s[p] == '"' || s[p] == '\'') && (p == cp->at || raw || bytes)) {
        cp->at = p;
        if (!skip_string(cp, raw)) {
            struct sbuf b;
            sbuf_init(&b, 4096);
            sbuf_add(&b, s + cp->tpos, cp->at - cp->tpos);
            _cleanup_free_ char *t = ks_text_take(&b);
            add_err(cp, cp->tpos, "Syntax error: token recognition error at: '%s'", t);
            cp->failed = true;
            cp->tok = T_EOF;
            cp->tend = cp->at;
            return;
        }
        cp->tok = bytes ? T_BYTES : T_STRING;
        cp->tend = cp->at;
        return;
    }
    if (is_ident_start(ch)) {
        size_t e = cp->at;
        while (e < n && (is_ident_start(s[e]) || is_digit(s[e])))
            e++;
        size_t len = e - cp->at;
        cp->tok = T_IDENT;
        if (len == 4 && !memcmp(s + cp->at, "true", 4))
            cp->tok = T_TRUE;
        else if (len == 5 && !memcmp(s + cp->at, "false", 5))
            cp->tok = T_FALSE;
        else if (len == 4 && !memcmp(s + cp->at, "null", 4))
            cp->tok = T_NULLLIT;
        else if (len == 2 && !memcmp(s + cp->at, "in", 2))
            cp->tok = T_IN;
        cp->at = e;
        cp->tend = e;
        return;
    }
    if (is_digit(ch) || (ch == '.' && is_digit(nx))) {
        size_t e = cp->at;
        bool is_double = false;
        if (ch == '0' && (nx == 'x' || nx == 'X')) {
            e += 2;
            while (e < n && hex_digit(s[e]) >= 0)
                e++;
        } else {
            while (e < n && is_digit(s[e]))
                e++;
            if (e + 1 < n && s[e] == '.' && is_digit(s[e + 1])) {
                is_double = true;
                e++;
                while (e < n && is_digit(s[e]))
                    e++;
            }
            if (e < n && (s[e] == 'e' || s[e] == 'E')) {
                size_t f = e + 1;
                if (f < n && (s[f] == '+' || s[f] == '-'))
                    f++;
                if (f < n && is_digit(s[f])) {
                    is_double = true;
                    e = f;
                    while (e < n && is_digit(s[e]))
                        e++;
                }
            }
        }
        cp->tok = is_double ? T_DOUBLE : T_INT;
        if (!is_double && e < n && (s[e] == 'u' || s[e] == 'U')) {
            cp->tok = T_UINT;
            e++;
        }
        cp->at = e;
        cp->tend = e;
        return;
    }
    static const struct {
        const char *text;
        int tok;
    } ops[] = {{"&&", T_AND},   {"||", T_OR},    {"==", T_EQ},    {"!=", T_NE},
               {"<=", T_LE},    {">=", T_GE},    {"(", T_LPAREN}, {")", T_RPAREN},
               {"[", T_LBRACK}, {"]", T_RBRACK}, {"{", T_LBRACE}, {"}", T_RBRACE},
               {".", T_DOT},    {",", T_COMMA},  {":", T_COLON},  {"?", T_QUESTION},
               {"!", T_NOT},    {"<", T_LT},     {">", T_GT},     {"+", T_PLUS},
               {"-", T_MINUS},  {"*", T_STAR},   {"/", T_SLASH},  {"%", T_PERCENT}};
    for (size_t i = 0; i < ARRAY_SIZE(ops); i++) {
        size_t l = strlen(ops[i].text);
        if (cp->at + l <= n && !memcmp(s + cp->at, ops[i].text, l)) {
            cp->tok = ops[i].tok;
            cp->at += l;
            cp->tend = cp->at;
            return;
        }
    }
    /* one UTF-8 character */
    size_t e = cp->at + 1;
    while (e < n && ((unsigned char)s[e] & 0xC0) == 0x80)
        e++;
    cp->tok = T_BAD;
    cp->at = e;
    cp->tend = e;
}

/* ==== parser ================================================================================ */

static const char expect_primary[] =
    "{'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, "
    "BYTES, IDENTIFIER}";

static void syntax_error(struct compile *cp, const char *expecting)
{
    if (cp->failed)
        return;
    struct sbuf t;
    sbuf_init(&t, 4096);
    tok_text(cp, &t);
    _cleanup_free_ char *text = ks_text_take(&t);
    if (cp->tok == T_BAD)
        add_err(cp, cp->tpos, "Syntax error: token recognition error at: '%s'", text);
    else
        add_err(cp, cp->tpos, "Syntax error: mismatched input '%s' expecting %s", text, expecting);
    cp->failed = true;
}

static int parse_expr(struct compile *cp);

static bool enter(struct compile *cp)
{
    if (++cp->depth > MAX_DEPTH) {
        if (!cp->failed)
            add_err(cp, cp->tpos, "Syntax error: max recursion depth exceeded");
        cp->failed = true;
        return false;
    }
    return true;
}

/* Decodes a string literal token's text (quotes, prefix) into *ret; false on a bad escape. */
static bool unescape(const char *s, size_t n, bool raw, char **ret, size_t *ret_len, char *why,
                     size_t why_n)
{
    char q = s[0];
    bool triple = n >= 6 && s[1] == q && s[2] == q;
    size_t b = triple ? 3 : 1, e = n - (triple ? 3 : 1);
    struct sbuf out;
    sbuf_init(&out, n + 16);
    for (size_t i = b; i < e; i++) {
        if (raw || s[i] != '\\') {
            sbuf_add(&out, &s[i], 1);
            continue;
        }
        if (++i >= e)
            break;
        char ch = s[i];
        uint32_t cpv = 0;
        int digits = 0;
        switch (ch) {
        case 'a':
            sbuf_adds(&out, "\a");
            break;
        case 'b':
            sbuf_adds(&out, "\b");
            break;
        case 'f':
            sbuf_adds(&out, "\f");
            break;
        case 'n':
            sbuf_adds(&out, "\n");
            break;
        case 'r':
            sbuf_adds(&out, "\r");
            break;
        case 't':
            sbuf_adds(&out, "\t");
            break;
        case 'v':
            sbuf_adds(&out, "\v");
            break;
        case '\\':
        case '\'':
        case '"':
        case '`':
        case '?':
            sbuf_add(&out, &ch, 1);
            break;
        case 'x':
        case 'X':
            digits = 2;
            break;
        case 'u':
            digits = 4;
            break;
        case 'U':
            digits = 8;
            break;
        default:
            if (ch >= '0' && ch <= '3' && i + 2 < e && s[i + 1] >= '0' && s[i + 1] <= '7' &&
                s[i + 2] >= '0' && s[i + 2] <= '7') {
                char o = (char)((ch - '0') * 64 + (s[i + 1] - '0') * 8 + (s[i + 2] - '0'));
                sbuf_add(&out, &o, 1);
                i += 2;
                break;
            }
            snprintf(why, why_n, "invalid escape sequence");
            sbuf_free(&out);
            return false;
        }
        if (digits) {
            for (int k = 0; k < digits; k++) {
                if (i + 1 >= e || hex_digit(s[i + 1]) < 0) {
                    snprintf(why, why_n, "invalid escape sequence");
                    sbuf_free(&out);
                    return false;
                }
                cpv = cpv * 16 + (uint32_t)hex_digit(s[++i]);
            }
            if (digits == 2) {
                char o = (char)cpv;
                sbuf_add(&out, &o, 1);
            } else {
                if (cpv > 0x10FFFF || (cpv >= 0xD800 && cpv <= 0xDFFF)) {
                    snprintf(why, why_n, "invalid unicode code point");
                    sbuf_free(&out);
                    return false;
                }
                char u[4];
                size_t l;
                if (cpv < 0x80) {
                    u[0] = (char)cpv;
                    l = 1;
                } else if (cpv < 0x800) {
                    u[0] = (char)(0xC0 | (cpv >> 6));
                    u[1] = (char)(0x80 | (cpv & 0x3F));
                    l = 2;
                } else if (cpv < 0x10000) {
                    u[0] = (char)(0xE0 | (cpv >> 12));
                    u[1] = (char)(0x80 | ((cpv >> 6) & 0x3F));
                    u[2] = (char)(0x80 | (cpv & 0x3F));
                    l = 3;
                } else {
                    u[0] = (char)(0xF0 | (cpv >> 18));
                    u[1] = (char)(0x80 | ((cpv >> 12) & 0x3F));
                    u[2] = (char)(0x80 | ((cpv >> 6) & 0x3F));
                    u[3] = (char)(0x80 | (cpv & 0x3F));
                    l = 4;
                }
                sbuf_add(&out, u, l);
            }
        }
    }
    *ret_len = out.len;
    *ret = ks_text_take(&out);
    return true;
}

static char *xmemdup(const char *s, size_t n)
{
    char *r = xmalloc(n + 1);
    memcpy(r, s, n);
    r[n] = '\0';
    return r;
}

static const char *const reserved[] = {
    "as",  "break", "const",   "continue",  "else",   "for", "function", "if",   "import",
    "let", "loop",  "package", "namespace", "return", "var", "void",     "while"};

static int parse_args(struct compile *cp, int call, int close_tok)
{
    /* at the token after '(' or '[' */
    struct node *n;
    while (cp->tok != close_tok && !cp->failed) {
        int a = parse_expr(cp);
        if (a < 0)
            return -1;
        n = N(cp->c, call);
        n->args = xrealloc(n->args, (n->nargs + 1) * sizeof(*n->args));
        n->args[n->nargs++] = a;
        if (cp->tok == T_COMMA) {
            next(cp);
            if (close_tok == T_RBRACK && cp->tok == T_RBRACK)
                break; /* a trailing comma in a list */
            continue;
        }
        if (cp->tok != close_tok) {
            syntax_error(cp, close_tok == T_RPAREN ? "{')', ','}" : "{']', ','}");
            return -1;
        }
    }
    if (cp->failed)
        return -1;
    next(cp);
    return call;
}

static int parse_primary(struct compile *cp)
{
    struct ks_cel *c = cp->c;
    size_t pos = cp->tpos;
    int r = -1;
    switch (cp->tok) {
    case T_DOT:
    case T_IDENT: {
        bool leading_dot = cp->tok == T_DOT;
        if (leading_dot) {
            next(cp);
            if (cp->tok != T_IDENT) {
                syntax_error(cp, "IDENTIFIER");
                return -1;
            }
        }
        size_t ipos = cp->tpos;
        char *name = xmemdup(c->src + cp->tpos, cp->tend - cp->tpos);
        for (size_t i = 0; i < ARRAY_SIZE(reserved); i++)
            if (streq_ptr(name, reserved[i])) {
                add_err(cp, ipos, "reserved identifier: %s", name);
                break;
            }
        next(cp);
        if (cp->tok == T_LPAREN) {
            size_t ppos = cp->tpos;
            r = new_node(cp, N_CALL, ppos);
            if (r < 0) {
                free(name);
                return -1;
            }
            N(c, r)->str = name;
            next(cp);
            return parse_args(cp, r, T_RPAREN);
        }
        r = new_node(cp, N_IDENT, ipos);
        if (r < 0) {
            free(name);
            return -1;
        }
        N(c, r)->str = name;
        return r;
    }
    case T_LPAREN:
        next(cp);
        r = parse_expr(cp);
        if (r < 0)
            return -1;
        if (cp->tok != T_RPAREN) {
            syntax_error(cp, "')'");
            return -1;
        }
        next(cp);
        return r;
    case T_LBRACK:
        r = new_node(cp, N_LIST, pos);
        if (r < 0)
            return -1;
        next(cp);
        return parse_args(cp, r, T_RBRACK);
    case T_LBRACE:
        add_err(cp, pos, "kubesim does not implement CEL map literals");
        cp->failed = true;
        return -1;
    case T_TRUE:
    case T_FALSE:
        r = new_node(cp, N_BOOL, pos);
        if (r < 0)
            return -1;
        N(c, r)->bv = cp->tok == T_TRUE;
        next(cp);
        return r;
    case T_NULLLIT:
        r = new_node(cp, N_NULL, pos);
        next(cp);
        return r;
    case T_STRING:
    case T_BYTES: {
        if (cp->tok == T_BYTES) {
            add_err(cp, pos, "kubesim does not implement CEL bytes literals");
            cp->failed = true;
            return -1;
        }
        const char *s = c->src + cp->tpos;
        size_t n = cp->tend - cp->tpos;
        bool raw = false;
        while (n && s[0] != '"' && s[0] != '\'') {
            raw |= s[0] == 'r' || s[0] == 'R';
            s++;
            n--;
        }
        char why[64];
        char *val = NULL;
        size_t vlen = 0;
        if (!unescape(s, n, raw, &val, &vlen, why, sizeof(why))) {
            add_err(cp, pos, "Syntax error: %s", why);
            cp->failed = true;
            return -1;
        }
        r = new_node(cp, N_STRING, pos);
        if (r < 0) {
            free(val);
            return -1;
        }
        N(c, r)->str = val;
        N(c, r)->slen = vlen;
        next(cp);
        return r;
    }
    case T_INT:
    case T_UINT:
    case T_DOUBLE: {
        _cleanup_free_ char *text = xmemdup(c->src + cp->tpos, cp->tend - cp->tpos);
        r = new_node(cp, cp->tok == T_INT ? N_INT : cp->tok == T_UINT ? N_UINT : N_DOUBLE, pos);
        if (r < 0)
            return -1;
        struct node *nd = N(c, r);
        errno = 0;
        if (cp->tok == T_DOUBLE) {
            nd->d = strtod(text, NULL);
        } else {
            char *end = NULL;
            bool hex = text[0] == '0' && (text[1] == 'x' || text[1] == 'X');
            unsigned long long v = strtoull(hex ? text + 2 : text, &end, hex ? 16 : 10);
            bool bad = errno != 0 || (hex && end == text + 2);
            if (cp->tok == T_INT && v > (unsigned long long)INT64_MAX &&
                !(cp->neg_literal && v == (unsigned long long)INT64_MAX + 1))
                bad = true;
            if (bad) {
                add_err(cp, pos, "invalid %s literal", cp->tok == T_INT ? "int" : "uint");
                nd->k = N_NULL;
            }
            nd->i = (int64_t)v;
            nd->u = (uint64_t)v;
        }
        next(cp);
        return r;
    }
    default:
        syntax_error(cp, expect_primary);
        return -1;
    }
}

static int parse_member(struct compile *cp)
{
    struct ks_cel *c = cp->c;
    int r = parse_primary(cp);
    while (r >= 0 && !cp->failed) {
        if (cp->tok == T_DOT) {
            size_t dpos = cp->tpos;
            next(cp);
            if (cp->tok != T_IDENT) {
                syntax_error(cp, "IDENTIFIER");
                return -1;
            }
            char *name = xmemdup(c->src + cp->tpos, cp->tend - cp->tpos);
            next(cp);
            if (cp->tok == T_LPAREN) {
                int call = new_node(cp, N_CALL, cp->tpos);
                if (call < 0) {
                    free(name);
                    return -1;
                }
                N(c, call)->str = name;
                N(c, call)->member = true;
                N(c, call)->a = r;
                next(cp);
                r = parse_args(cp, call, T_RPAREN);
                continue;
            }
            int sel = new_node(cp, N_SELECT, dpos);
            if (sel < 0) {
                free(name);
                return -1;
            }
            N(c, sel)->str = name;
            N(c, sel)->a = r;
            r = sel;
        } else if (cp->tok == T_LBRACK) {
            int ix = new_node(cp, N_INDEX, cp->tpos);
            if (ix < 0)
                return -1;
            next(cp);
            int k = parse_expr(cp);
            if (k < 0)
                return -1;
            if (cp->tok != T_RBRACK) {
                syntax_error(cp, "']'");
                return -1;
            }
            next(cp);
            N(c, ix)->a = r;
            N(c, ix)->b = k;
            r = ix;
        } else {
            break;
        }
    }
    return r;
}

static int parse_unary(struct compile *cp)
{
    struct ks_cel *c = cp->c;
    if (cp->tok != T_NOT && cp->tok != T_MINUS)
        return parse_member(cp);
    int op = cp->tok;
    size_t pos = cp->tpos;
    size_t count = 0;
    while (cp->tok == op) {
        count++;
        next(cp);
    }
    /* a single minus before a number is a negative literal, as CEL's grammar has it */
    if (op == T_MINUS && count == 1 && (cp->tok == T_INT || cp->tok == T_DOUBLE)) {
        _cleanup_free_ char *text = xmemdup(c->src + cp->tpos, cp->tend - cp->tpos);
        cp->neg_literal = true;
        int lit = parse_member(cp);
        cp->neg_literal = false;
        if (lit < 0)
            return -1;
        struct node *nd = N(c, lit);
        if (nd->k == N_INT && !nd->member) {
            bool hex = text[0] == '0' && (text[1] == 'x' || text[1] == 'X');
            unsigned long long v = strtoull(hex ? text + 2 : text, NULL, hex ? 16 : 10);
            nd->i = v == (unsigned long long)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v;
            nd->pos = pos;
            return lit;
        }
        if (nd->k == N_DOUBLE) {
            nd->d = -nd->d;
            nd->pos = pos;
            return lit;
        }
        int u = new_node(cp, N_UNARY, pos);
        if (u < 0)
            return -1;
        N(c, u)->op = '-';
        N(c, u)->a = lit;
        return u;
    }
    int operand = parse_member(cp);
    if (operand < 0)
        return -1;
    if (count % 2 == 0)
        return operand; /* !!x and --x are x, as CEL parses them */
    int u = new_node(cp, N_UNARY, pos);
    if (u < 0)
        return -1;
    N(c, u)->op = op == T_NOT ? '!' : '-';
    N(c, u)->a = operand;
    return u;
}

static int binary(struct compile *cp, enum bop op, size_t pos, int l, int r)
{
    if (l < 0 || r < 0)
        return -1;
    int b = new_node(cp, N_BINARY, pos);
    if (b < 0)
        return -1;
    N(cp->c, b)->op = op;
    N(cp->c, b)->a = l;
    N(cp->c, b)->b = r;
    return b;
}

static int parse_mul(struct compile *cp)
{
    int l = parse_unary(cp);
    while (l >= 0 && !cp->failed &&
           (cp->tok == T_STAR || cp->tok == T_SLASH || cp->tok == T_PERCENT)) {
        enum bop op = cp->tok == T_STAR ? B_MUL : cp->tok == T_SLASH ? B_DIV : B_MOD;
        size_t pos = cp->tpos;
        next(cp);
        l = binary(cp, op, pos, l, parse_unary(cp));
    }
    return l;
}

static int parse_add(struct compile *cp)
{
    int l = parse_mul(cp);
    while (l >= 0 && !cp->failed && (cp->tok == T_PLUS || cp->tok == T_MINUS)) {
        enum bop op = cp->tok == T_PLUS ? B_ADD : B_SUB;
        size_t pos = cp->tpos;
        next(cp);
        l = binary(cp, op, pos, l, parse_mul(cp));
    }
    return l;
}

static int parse_rel(struct compile *cp)
{
    int l = parse_add(cp);
    for (;;) {
        if (l < 0 || cp->failed)
            return l;
        enum bop op;
        switch (cp->tok) {
        case T_EQ:
            op = B_EQ;
            break;
        case T_NE:
            op = B_NE;
            break;
        case T_LT:
            op = B_LT;
            break;
        case T_LE:
            op = B_LE;
            break;
        case T_GT:
            op = B_GT;
            break;
        case T_GE:
            op = B_GE;
            break;
        case T_IN:
            op = B_IN;
            break;
        default:
            return l;
        }
        size_t pos = cp->tpos;
        next(cp);
        l = binary(cp, op, pos, l, parse_add(cp));
    }
}

static int parse_and(struct compile *cp)
{
    int l = parse_rel(cp);
    while (l >= 0 && !cp->failed && cp->tok == T_AND) {
        size_t pos = cp->tpos;
        next(cp);
        l = binary(cp, B_AND, pos, l, parse_rel(cp));
    }
    return l;
}

static int parse_or(struct compile *cp)
{
    int l = parse_and(cp);
    while (l >= 0 && !cp->failed && cp->tok == T_OR) {
        size_t pos = cp->tpos;
        next(cp);
        l = binary(cp, B_OR, pos, l, parse_and(cp));
    }
    return l;
}

static int parse_expr(struct compile *cp)
{
    if (!enter(cp))
        return -1;
    int r = parse_or(cp);
    if (r >= 0 && !cp->failed && cp->tok == T_QUESTION) {
        size_t pos = cp->tpos;
        next(cp);
        int t = parse_or(cp);
        if (t < 0) {
            cp->depth--;
            return -1;
        }
        if (cp->tok != T_COLON) {
            syntax_error(cp, "':'");
            cp->depth--;
            return -1;
        }
        next(cp);
        int f = parse_expr(cp);
        if (f < 0) {
            cp->depth--;
            return -1;
        }
        int cnd = new_node(cp, N_COND, pos);
        if (cnd >= 0) {
            N(cp->c, cnd)->a = r;
            N(cp->c, cnd)->b = t;
            N(cp->c, cnd)->c = f;
        }
        r = cnd;
    }
    cp->depth--;
    return r;
}

/* ==== checker =============================================================================== */

/* Parameter and result codes of an overload: a concrete kind, or a type parameter. */
enum { P_A = 100, P_B, P_LIST_A, P_MAP_AB };

struct ovl {
    const char *name;
    bool member; /* receiver style: params[0] is the receiver */
    int n;       /* parameters, receiver included */
    int params[3];
    int result;
};

static const struct ovl overloads[] = {
    {"_==_", false, 2, {P_A, P_A}, TY_BOOL},
    {"_!=_", false, 2, {P_A, P_A}, TY_BOOL},
#define CMP(op)                                                                                   \
    {op, false, 2, {TY_INT, TY_INT}, TY_BOOL}, {op, false, 2, {TY_UINT, TY_UINT}, TY_BOOL},       \
        {op, false, 2, {TY_DOUBLE, TY_DOUBLE}, TY_BOOL},                                          \
        {op, false, 2, {TY_STRING, TY_STRING}, TY_BOOL},                                          \
        {op, false, 2, {TY_BOOL, TY_BOOL}, TY_BOOL}, {op, false, 2, {TY_INT, TY_UINT}, TY_BOOL},  \
        {op, false, 2, {TY_INT, TY_DOUBLE}, TY_BOOL}, {op, false, 2, {TY_UINT, TY_INT}, TY_BOOL}, \
        {op, false, 2, {TY_UINT, TY_DOUBLE}, TY_BOOL},                                            \
        {op, false, 2, {TY_DOUBLE, TY_INT}, TY_BOOL},                                             \
    {                                                                                             \
        op, false, 2, {TY_DOUBLE, TY_UINT}, TY_BOOL                                               \
    }
    CMP("_<_"),
    CMP("_<=_"),
    CMP("_>_"),
    CMP("_>=_"),
#undef CMP
    {"_+_", false, 2, {TY_INT, TY_INT}, TY_INT},
    {"_+_", false, 2, {TY_UINT, TY_UINT}, TY_UINT},
    {"_+_", false, 2, {TY_DOUBLE, TY_DOUBLE}, TY_DOUBLE},
    {"_+_", false, 2, {TY_STRING, TY_STRING}, TY_STRING},
    {"_+_", false, 2, {P_LIST_A, P_LIST_A}, P_LIST_A},
#define ARITH(op)                                                                          \
    {op, false, 2, {TY_INT, TY_INT}, TY_INT}, {op, false, 2, {TY_UINT, TY_UINT}, TY_UINT}, \
    {                                                                                      \
        op, false, 2, {TY_DOUBLE, TY_DOUBLE}, TY_DOUBLE                                    \
    }
    ARITH("_-_"),
    ARITH("_*_"),
    ARITH("_/_"),
#undef ARITH
    {"_%_", false, 2, {TY_INT, TY_INT}, TY_INT},
    {"_%_", false, 2, {TY_UINT, TY_UINT}, TY_UINT},
    {"-_", false, 1, {TY_INT}, TY_INT},
    {"-_", false, 1, {TY_DOUBLE}, TY_DOUBLE},
    {"!_", false, 1, {TY_BOOL}, TY_BOOL},
    {"_&&_", false, 2, {TY_BOOL, TY_BOOL}, TY_BOOL},
    {"_||_", false, 2, {TY_BOOL, TY_BOOL}, TY_BOOL},
    {"@in", false, 2, {P_A, P_LIST_A}, TY_BOOL},
    {"@in", false, 2, {P_A, P_MAP_AB}, TY_BOOL},
    {"_[_]", false, 2, {P_LIST_A, TY_INT}, P_A},
    {"_[_]", false, 2, {P_MAP_AB, P_A}, P_B},
    {"_?_:_", false, 3, {TY_BOOL, P_A, P_A}, P_A},
    {"size", false, 1, {TY_STRING}, TY_INT},
    {"size", false, 1, {P_LIST_A}, TY_INT},
    {"size", false, 1, {P_MAP_AB}, TY_INT},
    {"size", true, 1, {TY_STRING}, TY_INT},
    {"size", true, 1, {P_LIST_A}, TY_INT},
    {"size", true, 1, {P_MAP_AB}, TY_INT},
    {"contains", true, 2, {TY_STRING, TY_STRING}, TY_BOOL},
    {"startsWith", true, 2, {TY_STRING, TY_STRING}, TY_BOOL},
    {"endsWith", true, 2, {TY_STRING, TY_STRING}, TY_BOOL},
    {"int", false, 1, {TY_INT}, TY_INT},
    {"int", false, 1, {TY_UINT}, TY_INT},
    {"int", false, 1, {TY_DOUBLE}, TY_INT},
    {"int", false, 1, {TY_STRING}, TY_INT},
    {"uint", false, 1, {TY_INT}, TY_UINT},
    {"uint", false, 1, {TY_UINT}, TY_UINT},
    {"uint", false, 1, {TY_DOUBLE}, TY_UINT},
    {"uint", false, 1, {TY_STRING}, TY_UINT},
    {"double", false, 1, {TY_INT}, TY_DOUBLE},
    {"double", false, 1, {TY_UINT}, TY_DOUBLE},
    {"double", false, 1, {TY_DOUBLE}, TY_DOUBLE},
    {"double", false, 1, {TY_STRING}, TY_DOUBLE},
    {"string", false, 1, {TY_INT}, TY_STRING},
    {"string", false, 1, {TY_UINT}, TY_STRING},
    {"string", false, 1, {TY_DOUBLE}, TY_STRING},
    {"string", false, 1, {TY_STRING}, TY_STRING},
    {"string", false, 1, {TY_BOOL}, TY_STRING},
    {"bool", false, 1, {TY_BOOL}, TY_BOOL},
    {"bool", false, 1, {TY_STRING}, TY_BOOL},
    {"dyn", false, 1, {P_A}, TY_DYN},
    {"quantity", false, 1, {TY_STRING}, TY_QUANTITY},
    {"isQuantity", false, 1, {TY_STRING}, TY_BOOL},
    {"isInteger", true, 1, {TY_QUANTITY}, TY_BOOL},
    {"asInteger", true, 1, {TY_QUANTITY}, TY_INT},
    {"asApproximateFloat", true, 1, {TY_QUANTITY}, TY_DOUBLE},
    {"sign", true, 1, {TY_QUANTITY}, TY_INT},
    {"compareTo", true, 2, {TY_QUANTITY, TY_QUANTITY}, TY_INT},
    {"isGreaterThan", true, 2, {TY_QUANTITY, TY_QUANTITY}, TY_BOOL},
    {"isLessThan", true, 2, {TY_QUANTITY, TY_QUANTITY}, TY_BOOL},
    {"add", true, 2, {TY_QUANTITY, TY_QUANTITY}, TY_QUANTITY},
    {"add", true, 2, {TY_QUANTITY, TY_INT}, TY_QUANTITY},
    {"sub", true, 2, {TY_QUANTITY, TY_QUANTITY}, TY_QUANTITY},
    {"sub", true, 2, {TY_QUANTITY, TY_INT}, TY_QUANTITY},
    {"semver", false, 1, {TY_STRING}, TY_SEMVER},
    {"semver", false, 2, {TY_STRING, TY_BOOL}, TY_SEMVER},
    {"isSemver", false, 1, {TY_STRING}, TY_BOOL},
    {"isSemver", false, 2, {TY_STRING, TY_BOOL}, TY_BOOL},
    {"major", true, 1, {TY_SEMVER}, TY_INT},
    {"minor", true, 1, {TY_SEMVER}, TY_INT},
    {"patch", true, 1, {TY_SEMVER}, TY_INT},
    {"compareTo", true, 2, {TY_SEMVER, TY_SEMVER}, TY_INT},
    {"isGreaterThan", true, 2, {TY_SEMVER, TY_SEMVER}, TY_BOOL},
    {"isLessThan", true, 2, {TY_SEMVER, TY_SEMVER}, TY_BOOL},
};

/* Functions and macros the API server's CEL environment has and this subset does not. */
static const char *const unsupported[] = {
    "all",
    "exists",
    "exists_one",
    "map",
    "filter",
    "matches",
    "bind",
    "lowerAscii",
    "upperAscii",
    "trim",
    "split",
    "replace",
    "indexOf",
    "lastIndexOf",
    "join",
    "substring",
    "charAt",
    "format",
    "quote",
    "reverse",
    "timestamp",
    "duration",
    "type",
    "bytes",
    "isSorted",
    "sum",
    "min",
    "max",
    "url",
    "isURL",
    "ip",
    "isIP",
    "cidr",
    "find",
    "findAll",
    "getField",
    "optMap",
    "optFlatMap",
    "or",
    "orValue",
    "hasValue",
    "value",
    "sort",
    "sortBy",
    "flatten",
    "distinct",
    "range",
    "slice",
    "first",
    "last",
    "base64",
    "strings",
    "math",
    "sets",
    "isNaN",
    "isInf",
    "abs",
    "ceil",
    "floor",
    "round",
    "getDate",
    "getDayOfMonth",
    "getDayOfWeek",
    "getDayOfYear",
    "getFullYear",
    "getHours",
    "getMilliseconds",
    "getMinutes",
    "getMonth",
    "getSeconds",
    "transformList",
    "transformMap",
};

static bool is_unsupported(const char *name)
{
    for (size_t i = 0; i < ARRAY_SIZE(unsupported); i++)
        if (streq(name, unsupported[i]))
            return true;
    return false;
}

static bool name_known(const char *name)
{
    for (size_t i = 0; i < ARRAY_SIZE(overloads); i++)
        if (streq(overloads[i].name, name))
            return true;
    return false;
}

struct bind {
    const struct ty *a, *b;
};

static bool bind_param(struct bind *bd, const struct ty **slot, const struct ty *t)
{
    if (t->k == TY_ERR)
        return true;
    if (!*slot || ty_dynlike(*slot)) {
        if (!*slot || !ty_dynlike(t))
            *slot = t;
        return true;
    }
    (void)bd;
    return ty_equiv(*slot, t);
}

static bool param_matches(struct bind *bd, int p, const struct ty *t)
{
    if (t->k == TY_ERR)
        return true;
    switch (p) {
    case P_A:
        return bind_param(bd, &bd->a, t);
    case P_B:
        return bind_param(bd, &bd->b, t);
    case P_LIST_A:
        if (ty_dynlike(t))
            return true;
        return t->k == TY_LIST && bind_param(bd, &bd->a, t->a);
    case P_MAP_AB:
        if (ty_dynlike(t))
            return true;
        return t->k == TY_MAP && bind_param(bd, &bd->a, t->a) && bind_param(bd, &bd->b, t->b);
    default:
        return ty_dynlike(t) || (int)t->k == p;
    }
}

static const struct ty *result_of(struct ks_cel *c, int r, const struct bind *bd)
{
    switch (r) {
    case P_A:
        return bd->a ? bd->a : &ty_dyn;
    case P_B:
        return bd->b ? bd->b : &ty_dyn;
    case P_LIST_A:
        return mk_list(c, bd->a ? bd->a : &ty_dyn);
    default:
        return ty_of_kind((enum tk)r);
    }
}

static bool same_type(const struct ty *x, const struct ty *y)
{
    if (x->k != y->k)
        return false;
    if (x->k == TY_LIST)
        return same_type(x->a, y->a);
    if (x->k == TY_MAP)
        return same_type(x->a, y->a) && same_type(x->b, y->b);
    return true;
}

/* CEL's overload resolution: every overload whose parameters accept the argument types; the
 * result is their common result type, dyn when they differ. NULL when none matches. */
static const struct ty *resolve(struct ks_cel *c, const char *name, bool member,
                                const struct ty *const *args, size_t n)
{
    const struct ty *res = NULL;
    for (size_t i = 0; i < ARRAY_SIZE(overloads); i++) {
        const struct ovl *o = &overloads[i];
        if (!streq(o->name, name) || o->member != member || (size_t)o->n != n)
            continue;
        struct bind bd = {0};
        bool ok = true;
        for (size_t k = 0; k < n && ok; k++)
            ok = param_matches(&bd, o->params[k], args[k]);
        if (!ok)
            continue;
        const struct ty *r = result_of(c, o->result, &bd);
        if (!res)
            res = r;
        else if (!same_type(res, r))
            res = &ty_dyn;
    }
    return res;
}

static void no_overload(struct compile *cp, size_t pos, const char *name, bool member,
                        const struct ty *const *args, size_t n)
{
    struct sbuf b;
    sbuf_init(&b, 4096);
    size_t k = 0;
    if (member && n) {
        ty_format(&b, args[0]);
        sbuf_adds(&b, ".");
        k = 1;
    }
    sbuf_adds(&b, "(");
    for (size_t i = k; i < n; i++) {
        if (i > k)
            sbuf_adds(&b, ", ");
        ty_format(&b, args[i]);
    }
    sbuf_adds(&b, ")");
    _cleanup_free_ char *sig = ks_text_take(&b);
    add_err(cp, pos, "found no matching overload for '%s' applied to '%s'", name, sig);
}

static const struct ty *check(struct compile *cp, int i);

static const struct ty *check_call_named(struct compile *cp, size_t pos, const char *name,
                                         bool member, const struct ty *const *args, size_t n)
{
    bool any_err = false;
    for (size_t k = 0; k < n; k++)
        any_err |= args[k]->k == TY_ERR;
    const struct ty *r = resolve(cp->c, name, member, args, n);
    if (r)
        return r;
    if (!any_err)
        no_overload(cp, pos, name, member, args, n);
    return &ty_err;
}

/* The type a field selection on t gives, reporting what CEL reports when there is none. */
static const struct ty *select_type(struct compile *cp, struct node *nd, const struct ty *t)
{
    if (t->k == TY_ERR)
        return &ty_err;
    if (ty_dynlike(t))
        return &ty_dyn;
    if (t->k == TY_DEVICE) {
        if (streq(nd->str, "driver"))
            return &ty_string;
        if (streq(nd->str, "attributes"))
            return &ty_attrs;
        if (streq(nd->str, "capacity"))
            return &ty_caps;
        add_err(cp, nd->pos, "undefined field '%s'", nd->str);
        return &ty_err;
    }
    if (t->k == TY_MAP && (t->a->k == TY_STRING || ty_dynlike(t->a)))
        return t->b;
    struct sbuf b;
    sbuf_init(&b, 4096);
    ty_format(&b, t);
    _cleanup_free_ char *tn = ks_text_take(&b);
    add_err(cp, nd->pos, "type '%s' does not support field selection", tn);
    return &ty_err;
}

static const struct ty *check_inner(struct compile *cp, int i)
{
    struct ks_cel *c = cp->c;
    struct node *nd = N(c, i);
    switch (nd->k) {
    case N_NULL:
        return &ty_null;
    case N_BOOL:
        return &ty_bool;
    case N_INT:
        return &ty_int;
    case N_UINT:
        return &ty_uint;
    case N_DOUBLE:
        return &ty_double;
    case N_STRING:
        return &ty_string;
    case N_IDENT:
        if (streq(nd->str, "device"))
            return &ty_device;
        add_err(cp, nd->pos, "undeclared reference to '%s' (in container '')", nd->str);
        return &ty_err;
    case N_SELECT: {
        const struct ty *t = check(cp, nd->a);
        const struct ty *r = select_type(cp, N(c, i), t);
        return N(c, i)->test && r->k != TY_ERR ? &ty_bool : r;
    }
    case N_INDEX: {
        const struct ty *args[2] = {check(cp, nd->a), check(cp, N(c, i)->b)};
        return check_call_named(cp, N(c, i)->pos, "_[_]", false, args, 2);
    }
    case N_UNARY: {
        const struct ty *args[1] = {check(cp, nd->a)};
        return check_call_named(cp, N(c, i)->pos, N(c, i)->op == '!' ? "!_" : "-_", false, args, 1);
    }
    case N_BINARY: {
        const struct ty *args[2] = {check(cp, nd->a), check(cp, N(c, i)->b)};
        nd = N(c, i);
        return check_call_named(cp, nd->pos, bop_fn[nd->op], false, args, 2);
    }
    case N_COND: {
        const struct ty *args[3] = {check(cp, nd->a), check(cp, N(c, i)->b), check(cp, N(c, i)->c)};
        return check_call_named(cp, N(c, i)->pos, "_?_:_", false, args, 3);
    }
    case N_LIST: {
        const struct ty *elem = NULL;
        for (size_t k = 0; k < N(c, i)->nargs; k++) {
            const struct ty *t = check(cp, N(c, i)->args[k]);
            if (t->k == TY_ERR)
                continue;
            if (!elem)
                elem = t;
            else if (!same_type(elem, t))
                elem = &ty_dyn;
        }
        return mk_list(c, elem ? elem : &ty_dyn);
    }
    case N_CALL: {
        /* has(): the presence test of a field */
        if (!nd->member && streq(nd->str, "has")) {
            if (nd->nargs != 1 || N(c, nd->args[0])->k != N_SELECT) {
                add_err(cp, nd->nargs ? N(c, nd->args[0])->pos : nd->pos,
                        "invalid argument to has() macro");
                return &ty_err;
            }
            N(c, nd->args[0])->test = true;
            return check(cp, N(c, i)->args[0]);
        }
        bool member = nd->member;
        size_t n = nd->nargs + (member ? 1 : 0);
        if (is_unsupported(nd->str)) {
            /* the arguments are not looked at: a macro's may name its loop variables */
            add_err(cp, nd->pos,
                    "kubesim does not implement the CEL function '%s' (see sim/kubesim/README.md, "
                    "Dynamic Resource Allocation)",
                    nd->str);
            return &ty_err;
        }
        const struct ty **args = xcalloc(n + 1, sizeof(*args));
        size_t k = 0;
        if (member) {
            /* cel.bind(...) is a macro of the namespace "cel" */
            struct node *tn = N(c, nd->a);
            if (tn->k == N_IDENT && streq(tn->str, "cel") && streq(nd->str, "bind")) {
                add_err(cp, nd->pos, "kubesim does not implement the CEL macro 'cel.bind'");
                free(args);
                return &ty_err;
            }
            args[k++] = check(cp, nd->a);
        }
        for (size_t a = 0; a < N(c, i)->nargs; a++)
            args[k++] = check(cp, N(c, i)->args[a]);
        nd = N(c, i);
        const struct ty *r;
        if (!name_known(nd->str)) {
            add_err(cp, nd->pos, "undeclared reference to '%s' (in container '')", nd->str);
            r = &ty_err;
        } else {
            r = check_call_named(cp, nd->pos, nd->str, member, args, n);
        }
        free(args);
        return r;
    }
    }
    return &ty_err;
}

static const struct ty *check(struct compile *cp, int i)
{
    const struct ty *t = check_inner(cp, i);
    N(cp->c, i)->type = t;
    return t;
}

/* ==== compile =============================================================================== */

/* The depth of the tree, found without recursion (an operator chain makes a deep tree from a
 * flat text): the first node deeper than MAX_DEPTH, or -1. The checker and the evaluator
 * recurse, so they only see trees this allows. */
static int too_deep(const struct ks_cel *c, int root)
{
    size_t n = c->n_nodes;
    int *depth = xcalloc(n, sizeof(*depth));
    int *stack = xcalloc(n + 1, sizeof(*stack));
    size_t sp = 0;
    int bad = -1;
    depth[root] = 1;
    stack[sp++] = root;
    while (sp && bad < 0) {
        int i = stack[--sp];
        const struct node *nd = &c->nodes[i];
        if (depth[i] > MAX_DEPTH) {
            bad = i;
            break;
        }
        int kids[3] = {nd->a, nd->b, nd->c};
        for (int k = 0; k < 3; k++)
            if (kids[k] >= 0 && sp < n) {
                depth[kids[k]] = depth[i] + 1;
                stack[sp++] = kids[k];
            }
        for (size_t k = 0; k < nd->nargs && sp < n; k++) {
            depth[nd->args[k]] = depth[i] + 1;
            stack[sp++] = nd->args[k];
        }
    }
    free(stack);
    free(depth);
    return bad;
}

static int cmp_err(const void *x, const void *y)
{
    const struct cel_err *a = x, *b = y;
    return a->pos < b->pos ? -1 : a->pos > b->pos ? 1 : 0;
}

/* CEL's display of errors: "ERROR: <input>:LINE:COL: MSG", the source line and a caret under the
 * column (columns count code points; a wide character is shown as a wide dot). */
static char *format_errors(const struct compile *cp)
{
    const char *src = cp->c->src;
    size_t len = cp->c->len;
    struct sbuf b;
    sbuf_init(&b, ERR_TEXT_MAX);
    for (size_t e = 0; e < cp->n_errs; e++) {
        size_t pos = cp->errs[e].pos > len ? len : cp->errs[e].pos;
        size_t line = 1, ls = 0;
        for (size_t i = 0; i < pos; i++)
            if (src[i] == '\n') {
                line++;
                ls = i + 1;
            }
        size_t col = 0;
        for (size_t i = ls; i < pos; i++)
            if (((unsigned char)src[i] & 0xC0) != 0x80)
                col++;
        size_t le = ls;
        while (le < len && src[le] != '\n')
            le++;
        if (e)
            sbuf_adds(&b, "\n");
        sbuf_addf(&b, "ERROR: <input>:%zu:%zu: %s", line, col + 1, cp->errs[e].msg);
        sbuf_adds(&b, "\n | ");
        for (size_t i = ls; i < le; i++)
            sbuf_add(&b, src[i] == '\t' ? " " : &src[i], 1);
        sbuf_adds(&b, "\n | ");
        for (size_t i = ls; i < pos; i++) {
            unsigned char ch = (unsigned char)src[i];
            if ((ch & 0xC0) == 0x80)
                continue;
            sbuf_adds(&b, ch >= 0x80 ? "\xef\xbc\x8e" : ".");
        }
        sbuf_adds(&b, pos < le && ((unsigned char)src[pos] >= 0x80) ? "\xef\xbc\xbe" : "^");
    }
    return ks_text_take(&b);
}

int ks_cel_compile(const char *expr, size_t len, struct ks_cel **ret, char **ret_err)
{
    if (len > KS_CEL_MAX_LEN) {
        *ret_err = xasprintf("expression longer than %d bytes", KS_CEL_MAX_LEN);
        return -EINVAL;
    }
    struct ks_cel *c = xcalloc(1, sizeof(*c));
    c->src = xmemdup(expr, len);
    c->len = len;
    struct compile cp = {.c = c};
    next(&cp);
    int root = parse_expr(&cp);
    if (root >= 0 && !cp.failed && cp.tok != T_EOF)
        syntax_error(&cp, "<EOF>");
    int r = 0;
    if (cp.n_errs == 0) {
        int deep = too_deep(c, root);
        if (deep >= 0)
            add_err(&cp, N(c, deep)->pos, "max recursion depth exceeded");
    }
    if (cp.n_errs == 0) {
        c->root = root;
        check(&cp, root);
    }
    if (cp.n_errs) {
        qsort(cp.errs, cp.n_errs, sizeof(*cp.errs), cmp_err);
        _cleanup_free_ char *text = format_errors(&cp);
        *ret_err = xasprintf("compilation failed: %s", text);
        r = -EINVAL;
    } else {
        const struct ty *t = N(c, root)->type;
        if (t->k != TY_BOOL && t->k != TY_ANY) {
            struct sbuf b;
            sbuf_init(&b, 4096);
            ty_format(&b, t);
            _cleanup_free_ char *tn = ks_text_take(&b);
            *ret_err = xasprintf("must evaluate to bool or the unknown type, not %s", tn);
            r = -EINVAL;
        }
    }
    for (size_t i = 0; i < cp.n_errs; i++)
        free(cp.errs[i].msg);
    free(cp.errs);
    if (r < 0) {
        ks_cel_free(c);
        return r;
    }
    *ret = c;
    return 0;
}

/* ==== values ================================================================================ */

enum vk {
    V_ERR,
    V_NULL,
    V_BOOL,
    V_INT,
    V_UINT,
    V_DOUBLE,
    V_STRING,
    V_LIST,
    V_ATTRS,    /* device.attributes: domain -> V_ATTR_IDS */
    V_ATTR_IDS, /* one domain's attributes: name -> value */
    V_CAPS,
    V_CAP_IDS,
    V_QUANTITY,
    V_SEMVER,
    V_DEVICE,
};

struct semver {
    uint64_t major, minor, patch;
    const char *pre; /* prerelease identifiers, dot-separated, "" none */
    size_t pre_len;
};

struct val {
    enum vk k;
    bool b;
    int64_t i; /* V_INT; V_QUANTITY in thousandths */
    uint64_t u;
    double d;
    const char *s; /* V_STRING (s, n); V_ERR message; V_*_IDS domain */
    size_t n;
    struct val *items; /* V_LIST */
    struct semver *sv;
};

struct eval {
    const struct ks_cel *c;
    const char *driver;
    json_t *attributes, *capacity;
    char **blocks;
    size_t n_blocks, used;
    bool over;
};

static void *eval_alloc(struct eval *ev, size_t n)
{
    if (ev->used + n > ARENA_LIMIT) {
        ev->over = true;
        return NULL;
    }
    ev->used += n;
    void *p = xcalloc(1, n ? n : 1);
    ev->blocks = xrealloc(ev->blocks, (ev->n_blocks + 1) * sizeof(*ev->blocks));
    ev->blocks[ev->n_blocks++] = p;
    return p;
}

static struct val verr(struct eval *ev, const char *fmt, ...) GPUOP_PRINTF(2, 3);
static struct val verr(struct eval *ev, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    size_t n = strlen(buf);
    char *m = eval_alloc(ev, n + 1);
    if (!m)
        return (struct val){.k = V_ERR, .s = "operation cancelled: actual cost limit exceeded"};
    memcpy(m, buf, n + 1);
    return (struct val){.k = V_ERR, .s = m};
}

static struct val no_overload_rt(struct eval *ev)
{
    return verr(ev, "no such overload");
}

static struct val vbool(bool b)
{
    return (struct val){.k = V_BOOL, .b = b};
}

static struct val vint(int64_t i)
{
    return (struct val){.k = V_INT, .i = i};
}

static struct val vstr(const char *s, size_t n)
{
    return (struct val){.k = V_STRING, .s = s, .n = n};
}

static bool is_num(const struct val *v)
{
    return v->k == V_INT || v->k == V_UINT || v->k == V_DOUBLE;
}

/* Numeric comparison across int, uint and double: -1, 0, 1; 2 when unordered (NaN). */
static int num_cmp(const struct val *a, const struct val *b)
{
    if (a->k == V_DOUBLE || b->k == V_DOUBLE) {
        double x = a->k == V_DOUBLE ? a->d : a->k == V_INT ? (double)a->i : (double)a->u;
        double y = b->k == V_DOUBLE ? b->d : b->k == V_INT ? (double)b->i : (double)b->u;
        if (isnan(x) || isnan(y))
            return 2;
        return x < y ? -1 : x > y ? 1 : 0;
    }
    if (a->k == V_INT && b->k == V_INT)
        return a->i < b->i ? -1 : a->i > b->i ? 1 : 0;
    if (a->k == V_UINT && b->k == V_UINT)
        return a->u < b->u ? -1 : a->u > b->u ? 1 : 0;
    if (a->k == V_INT) /* int vs uint */
        return a->i < 0 ? -1 : (uint64_t)a->i < b->u ? -1 : (uint64_t)a->i > b->u ? 1 : 0;
    return b->i < 0 ? 1 : a->u < (uint64_t)b->i ? -1 : a->u > (uint64_t)b->i ? 1 : 0;
}

static int str_cmp(const struct val *a, const struct val *b)
{
    size_t n = a->n < b->n ? a->n : b->n;
    int r = memcmp(a->s, b->s, n);
    if (r)
        return r < 0 ? -1 : 1;
    return a->n < b->n ? -1 : a->n > b->n ? 1 : 0;
}

static bool pre_numeric(const char *s, size_t n)
{
    if (!n)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!is_digit(s[i]))
            return false;
    return true;
}

/* Semantic version precedence (semver.org 11). */
static int semver_cmp(const struct semver *a, const struct semver *b)
{
    if (a->major != b->major)
        return a->major < b->major ? -1 : 1;
    if (a->minor != b->minor)
        return a->minor < b->minor ? -1 : 1;
    if (a->patch != b->patch)
        return a->patch < b->patch ? -1 : 1;
    if (!a->pre_len || !b->pre_len)
        return a->pre_len == b->pre_len ? 0 : a->pre_len ? -1 : 1;
    const char *x = a->pre, *xe = a->pre + a->pre_len, *y = b->pre, *ye = b->pre + b->pre_len;
    while (x < xe && y < ye) {
        const char *xd = memchr(x, '.', (size_t)(xe - x)), *yd = memchr(y, '.', (size_t)(ye - y));
        size_t xn = xd ? (size_t)(xd - x) : (size_t)(xe - x);
        size_t yn = yd ? (size_t)(yd - y) : (size_t)(ye - y);
        bool xnum = pre_numeric(x, xn), ynum = pre_numeric(y, yn);
        int r;
        if (xnum && ynum)
            r = xn != yn ? (xn < yn ? -1 : 1) : memcmp(x, y, xn);
        else if (xnum || ynum)
            r = xnum ? -1 : 1;
        else {
            r = memcmp(x, y, xn < yn ? xn : yn);
            if (!r)
                r = xn < yn ? -1 : xn > yn ? 1 : 0;
        }
        if (r)
            return r < 0 ? -1 : 1;
        x += xn + (xd ? 1 : 0);
        y += yn + (yd ? 1 : 0);
        if (!xd)
            x = xe;
        if (!yd)
            y = ye;
    }
    return x < xe ? 1 : y < ye ? -1 : 0;
}

/* A semantic version as blang/semver parses it (Major.Minor.Patch[-pre][+build]); NULL with
 * *why on failure. */
static struct semver *semver_parse(struct eval *ev, const char *s, size_t n, const char **why)
{
    if (!n) {
        *why = "Version string empty";
        return NULL;
    }
    const char *end = s + n;
    const char *plus = memchr(s, '+', n);
    const char *core_end = plus ? plus : end;
    const char *dash = memchr(s, '-', (size_t)(core_end - s));
    const char *num_end = dash ? dash : core_end;
    uint64_t parts[3];
    const char *p = s;
    for (int k = 0; k < 3; k++) {
        const char *dot = k < 2 ? memchr(p, '.', (size_t)(num_end - p)) : NULL;
        const char *pe = k < 2 ? dot : num_end;
        if (!pe) {
            *why = "No Major.Minor.Patch elements found";
            return NULL;
        }
        size_t pn = (size_t)(pe - p);
        if (!pn || !pre_numeric(p, pn)) {
            *why = k == 0   ? "Invalid character(s) found in major number"
                   : k == 1 ? "Invalid character(s) found in minor number"
                            : "Invalid character(s) found in patch number";
            return NULL;
        }
        if (pn > 1 && p[0] == '0') {
            *why = k == 0   ? "Major number must not contain leading zeroes"
                   : k == 1 ? "Minor number must not contain leading zeroes"
                            : "Patch number must not contain leading zeroes";
            return NULL;
        }
        uint64_t v = 0;
        for (size_t i = 0; i < pn; i++) {
            if (v > (UINT64_MAX - 9) / 10) {
                *why = "Invalid character(s) found in major number";
                return NULL;
            }
            v = v * 10 + (uint64_t)(p[i] - '0');
        }
        parts[k] = v;
        p = pe + 1;
    }
    struct semver *sv = eval_alloc(ev, sizeof(*sv));
    if (!sv) {
        *why = "operation cancelled: actual cost limit exceeded";
        return NULL;
    }
    sv->major = parts[0];
    sv->minor = parts[1];
    sv->patch = parts[2];
    sv->pre = dash ? dash + 1 : "";
    sv->pre_len = dash ? (size_t)(core_end - dash - 1) : 0;
    if (dash && !sv->pre_len) {
        *why = "Prerelease is empty";
        return NULL;
    }
    for (size_t i = 0; i < sv->pre_len; i++) {
        char ch = sv->pre[i];
        if (!(is_digit(ch) || is_ident_start(ch) || ch == '-' || ch == '.') || ch == '_') {
            *why = "Invalid character(s) found in prerelease";
            return NULL;
        }
    }
    return sv;
}

/* The value of an attribute ({"string": ...}, {"int": ...}, {"bool": ...}, {"version": ...}). */
static struct val attr_value(struct eval *ev, const char *name, json_t *a)
{
    json_t *v;
    if ((v = json_object_get(a, "string")) && json_is_string(v))
        return vstr(json_string_value(v), json_string_length(v));
    if ((v = json_object_get(a, "int")) && json_is_integer(v))
        return vint(json_integer_value(v));
    if ((v = json_object_get(a, "bool")) && json_is_boolean(v))
        return vbool(json_is_true(v));
    if ((v = json_object_get(a, "version")) && json_is_string(v)) {
        const char *why = NULL;
        struct semver *sv = semver_parse(ev, json_string_value(v), json_string_length(v), &why);
        if (!sv)
            return verr(ev, "attribute %s: parse semantic version: %s", name, why);
        return (struct val){.k = V_SEMVER, .sv = sv};
    }
    return verr(ev, "attribute %s: unsupported attribute value", name);
}

/* Looks an attribute or capacity up by domain and name: an unqualified name in the slice is in
 * the driver's domain. NULL when absent. */
static json_t *lookup_qualified(struct eval *ev, json_t *map, const char *domain, size_t dlen,
                                const char *id, size_t ilen)
{
    const char *k;
    json_t *v;
    json_object_foreach (map, k, v) {
        const char *slash = strchr(k, '/');
        if (slash) {
            if ((size_t)(slash - k) == dlen && !memcmp(k, domain, dlen) &&
                strlen(slash + 1) == ilen && !memcmp(slash + 1, id, ilen))
                return v;
        } else if (strlen(ev->driver) == dlen && !memcmp(ev->driver, domain, dlen) &&
                   strlen(k) == ilen && !memcmp(k, id, ilen)) {
            return v;
        }
    }
    return NULL;
}

static size_t domain_size(struct eval *ev, json_t *map, const char *domain, size_t dlen)
{
    size_t n = 0;
    const char *k;
    json_t *v;
    json_object_foreach (map, k, v) {
        const char *slash = strchr(k, '/');
        if (slash ? ((size_t)(slash - k) == dlen && !memcmp(k, domain, dlen))
                  : (strlen(ev->driver) == dlen && !memcmp(ev->driver, domain, dlen)))
            n++;
    }
    return n;
}

static bool domain_present(struct eval *ev, json_t *map, const char *domain, size_t dlen)
{
    return domain_size(ev, map, domain, dlen) > 0;
}

static struct val quantity_of(struct eval *ev, const char *s, size_t n)
{
    char buf[128];
    if (n >= sizeof(buf))
        return verr(ev, "quantities must match the regular expression "
                        "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'");
    memcpy(buf, s, n);
    buf[n] = '\0';
    int64_t m = 0;
    if (kobj_quantity_milli(buf, &m) < 0)
        return verr(ev, "quantities must match the regular expression "
                        "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'");
    return (struct val){.k = V_QUANTITY, .i = m};
}

/* Map lookup: map[key] (or map.key); *found false when the key is absent. */
static struct val map_get(struct eval *ev, const struct val *m, const struct val *key, bool *found)
{
    *found = false;
    if (key->k != V_STRING)
        return no_overload_rt(ev);
    switch (m->k) {
    case V_ATTRS:
    case V_CAPS:
        /* a domain without entries is an empty map, as the scheduler's CEL environment makes it */
        *found =
            domain_present(ev, m->k == V_ATTRS ? ev->attributes : ev->capacity, key->s, key->n);
        return (struct val){
            .k = m->k == V_ATTRS ? V_ATTR_IDS : V_CAP_IDS, .s = key->s, .n = key->n};
    case V_ATTR_IDS: {
        json_t *a = lookup_qualified(ev, ev->attributes, m->s, m->n, key->s, key->n);
        if (!a)
            return (struct val){.k = V_NULL};
        *found = true;
        char name[320];
        snprintf(name, sizeof(name), "%.*s/%.*s", (int)m->n, m->s, (int)key->n, key->s);
        return attr_value(ev, name, a);
    }
    case V_CAP_IDS: {
        json_t *cv = lookup_qualified(ev, ev->capacity, m->s, m->n, key->s, key->n);
        if (!cv)
            return (struct val){.k = V_NULL};
        *found = true;
        json_t *q = json_object_get(cv, "value");
        if (json_is_string(q))
            return quantity_of(ev, json_string_value(q), json_string_length(q));
        if (json_is_integer(q))
            return (struct val){.k = V_QUANTITY,
                                .i = json_integer_value(q) > INT64_MAX / 1000
                                         ? INT64_MAX
                                         : json_integer_value(q) * 1000};
        return verr(ev, "capacity %.*s: no value", (int)key->n, key->s);
    }
    default:
        return no_overload_rt(ev);
    }
}

static bool is_map(const struct val *v)
{
    return v->k == V_ATTRS || v->k == V_ATTR_IDS || v->k == V_CAPS || v->k == V_CAP_IDS;
}

static struct val no_such_key(struct eval *ev, const struct val *key)
{
    if (key->k == V_STRING)
        return verr(ev, "no such key: %.*s", (int)(key->n > 256 ? 256 : key->n), key->s);
    return verr(ev, "no such key");
}

/* CEL's heterogeneous equality: *ret; an error value when a comparison inside fails. */
static struct val equals(struct eval *ev, const struct val *a, const struct val *b)
{
    if (is_num(a) && is_num(b))
        return vbool(num_cmp(a, b) == 0);
    if (a->k != b->k) {
        if (is_map(a) && is_map(b))
            return vbool(false);
        return vbool(false);
    }
    switch (a->k) {
    case V_NULL:
        return vbool(true);
    case V_BOOL:
        return vbool(a->b == b->b);
    case V_STRING:
        return vbool(a->n == b->n && !memcmp(a->s, b->s, a->n));
    case V_QUANTITY:
        return vbool(a->i == b->i);
    case V_SEMVER:
        return vbool(semver_cmp(a->sv, b->sv) == 0);
    case V_LIST: {
        if (a->n != b->n)
            return vbool(false);
        for (size_t i = 0; i < a->n; i++) {
            struct val e = equals(ev, &a->items[i], &b->items[i]);
            if (e.k == V_ERR || !e.b)
                return e;
        }
        return vbool(true);
    }
    case V_DEVICE:
        return vbool(true);
    default:
        /* maps of a device: the same domain of the same device */
        return vbool(a->n == b->n && (a->n == 0 || !memcmp(a->s, b->s, a->n)));
    }
}

static struct val eval(struct eval *ev, int i);

static struct val arith(struct eval *ev, enum bop op, struct val a, struct val b)
{
    if (a.k == V_INT && b.k == V_INT) {
        int64_t r;
        switch (op) {
        case B_ADD:
            if (__builtin_add_overflow(a.i, b.i, &r))
                return verr(ev, "integer overflow");
            return vint(r);
        case B_SUB:
            if (__builtin_sub_overflow(a.i, b.i, &r))
                return verr(ev, "integer overflow");
            return vint(r);
        case B_MUL:
            if (__builtin_mul_overflow(a.i, b.i, &r))
                return verr(ev, "integer overflow");
            return vint(r);
        case B_DIV:
            if (b.i == 0)
                return verr(ev, "division by zero");
            if (a.i == INT64_MIN && b.i == -1)
                return verr(ev, "integer overflow");
            return vint(a.i / b.i);
        case B_MOD:
            if (b.i == 0)
                return verr(ev, "modulus by zero");
            if (a.i == INT64_MIN && b.i == -1)
                return verr(ev, "integer overflow");
            return vint(a.i % b.i);
        default:
            break;
        }
    } else if (a.k == V_UINT && b.k == V_UINT) {
        uint64_t r;
        struct val v = {.k = V_UINT};
        switch (op) {
        case B_ADD:
            if (__builtin_add_overflow(a.u, b.u, &r))
                return verr(ev, "unsigned integer overflow");
            break;
        case B_SUB:
            if (__builtin_sub_overflow(a.u, b.u, &r))
                return verr(ev, "unsigned integer overflow");
            break;
        case B_MUL:
            if (__builtin_mul_overflow(a.u, b.u, &r))
                return verr(ev, "unsigned integer overflow");
            break;
        case B_DIV:
            if (b.u == 0)
                return verr(ev, "division by zero");
            r = a.u / b.u;
            break;
        case B_MOD:
            if (b.u == 0)
                return verr(ev, "modulus by zero");
            r = a.u % b.u;
            break;
        default:
            return no_overload_rt(ev);
        }
        v.u = r;
        return v;
    } else if (a.k == V_DOUBLE && b.k == V_DOUBLE && op != B_MOD) {
        struct val v = {.k = V_DOUBLE};
        v.d = op == B_ADD   ? a.d + b.d
              : op == B_SUB ? a.d - b.d
              : op == B_MUL ? a.d * b.d
                            : a.d / b.d;
        return v;
    } else if (op == B_ADD && a.k == V_STRING && b.k == V_STRING) {
        char *s = eval_alloc(ev, a.n + b.n + 1);
        if (!s)
            return verr(ev, "operation cancelled: actual cost limit exceeded");
        memcpy(s, a.s, a.n);
        memcpy(s + a.n, b.s, b.n);
        return vstr(s, a.n + b.n);
    } else if (op == B_ADD && a.k == V_LIST && b.k == V_LIST) {
        struct val *items = eval_alloc(ev, (a.n + b.n) * sizeof(*items));
        if (!items)
            return verr(ev, "operation cancelled: actual cost limit exceeded");
        if (a.n)
            memcpy(items, a.items, a.n * sizeof(*items));
        if (b.n)
            memcpy(items + a.n, b.items, b.n * sizeof(*items));
        return (struct val){.k = V_LIST, .items = items, .n = a.n + b.n};
    }
    return no_overload_rt(ev);
}

static struct val compare(struct eval *ev, enum bop op, struct val a, struct val b)
{
    int r;
    if (is_num(&a) && is_num(&b)) {
        r = num_cmp(&a, &b);
        if (r == 2)
            return vbool(false);
    } else if (a.k == V_STRING && b.k == V_STRING) {
        r = str_cmp(&a, &b);
    } else if (a.k == V_BOOL && b.k == V_BOOL) {
        r = a.b == b.b ? 0 : a.b ? 1 : -1;
    } else {
        return no_overload_rt(ev);
    }
    switch (op) {
    case B_LT:
        return vbool(r < 0);
    case B_LE:
        return vbool(r <= 0);
    case B_GT:
        return vbool(r > 0);
    default:
        return vbool(r >= 0);
    }
}

static size_t utf8_count(const char *s, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80)
            c++;
    return c;
}

static struct val fmt_double(struct eval *ev, double d)
{
    char buf[64];
    if (isnan(d))
        snprintf(buf, sizeof(buf), "NaN");
    else if (isinf(d))
        snprintf(buf, sizeof(buf), d > 0 ? "+Inf" : "-Inf");
    else {
        /* the shortest text that reads back as d, as Go's 'g' with precision -1 */
        for (int prec = 1; prec <= 17; prec++) {
            snprintf(buf, sizeof(buf), "%.*g", prec, d);
            if (strtod(buf, NULL) == d)
                break;
        }
    }
    size_t n = strlen(buf);
    char *s = eval_alloc(ev, n + 1);
    if (!s)
        return verr(ev, "operation cancelled: actual cost limit exceeded");
    memcpy(s, buf, n + 1);
    return vstr(s, n);
}

static struct val call_fn(struct eval *ev, const char *name, bool member, struct val *args,
                          size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (args[i].k == V_ERR)
            return args[i];
    struct val *a = args;
    char buf[128];
    if (streq(name, "size") && n == 1) {
        if (a[0].k == V_STRING)
            return vint((int64_t)utf8_count(a[0].s, a[0].n));
        if (a[0].k == V_LIST)
            return vint((int64_t)a[0].n);
        if (a[0].k == V_ATTR_IDS || a[0].k == V_CAP_IDS)
            return vint((int64_t)domain_size(
                ev, a[0].k == V_ATTR_IDS ? ev->attributes : ev->capacity, a[0].s, a[0].n));
        if (a[0].k == V_ATTRS || a[0].k == V_CAPS) {
            /* the number of domains */
            json_t *map = a[0].k == V_ATTRS ? ev->attributes : ev->capacity;
            size_t count = 0;
            const char *k, *k2;
            json_t *v, *v2;
            json_object_foreach (map, k, v) {
                const char *sl = strchr(k, '/');
                const char *d = sl ? k : ev->driver;
                size_t dn = sl ? (size_t)(sl - k) : strlen(ev->driver);
                bool seen = false;
                json_object_foreach (map, k2, v2) {
                    if (k2 == k)
                        break;
                    const char *sl2 = strchr(k2, '/');
                    const char *d2 = sl2 ? k2 : ev->driver;
                    size_t dn2 = sl2 ? (size_t)(sl2 - k2) : strlen(ev->driver);
                    if (dn2 == dn && !memcmp(d, d2, dn))
                        seen = true;
                }
                count += !seen;
            }
            return vint((int64_t)count);
        }
        return no_overload_rt(ev);
    }
    if ((streq(name, "contains") || streq(name, "startsWith") || streq(name, "endsWith")) &&
        member && n == 2) {
        if (a[0].k != V_STRING || a[1].k != V_STRING)
            return no_overload_rt(ev);
        if (a[1].n > a[0].n)
            return vbool(false);
        if (name[0] == 's')
            return vbool(!memcmp(a[0].s, a[1].s, a[1].n));
        if (name[0] == 'e')
            return vbool(!memcmp(a[0].s + a[0].n - a[1].n, a[1].s, a[1].n));
        for (size_t i = 0; i + a[1].n <= a[0].n; i++)
            if (!memcmp(a[0].s + i, a[1].s, a[1].n))
                return vbool(true);
        return vbool(false);
    }
    if (streq(name, "dyn") && n == 1)
        return a[0];
    if (streq(name, "int") && n == 1) {
        if (a[0].k == V_INT)
            return a[0];
        if (a[0].k == V_UINT)
            return a[0].u > INT64_MAX
                       ? verr(ev, "range error converting %" PRIu64 " to int", a[0].u)
                       : vint((int64_t)a[0].u);
        if (a[0].k == V_DOUBLE) {
            if (!(a[0].d > -9223372036854775808.0 && a[0].d < 9223372036854775808.0))
                return verr(ev, "range error converting %g to int", a[0].d);
            return vint((int64_t)a[0].d);
        }
        if (a[0].k == V_STRING) {
            snprintf(buf, sizeof(buf), "%.*s", (int)(a[0].n > 100 ? 100 : a[0].n), a[0].s);
            int64_t v;
            if (a[0].n > 100 || parse_i64(buf, &v) < 0 || strchr(buf, 'x') || strchr(buf, 'X'))
                return verr(ev, "strconv.ParseInt: parsing \"%s\": invalid syntax", buf);
            return vint(v);
        }
        return no_overload_rt(ev);
    }
    if (streq(name, "uint") && n == 1) {
        struct val v = {.k = V_UINT};
        if (a[0].k == V_UINT)
            return a[0];
        if (a[0].k == V_INT) {
            if (a[0].i < 0)
                return verr(ev, "range error converting %" PRId64 " to uint", a[0].i);
            v.u = (uint64_t)a[0].i;
            return v;
        }
        if (a[0].k == V_DOUBLE) {
            if (!(a[0].d >= 0 && a[0].d < 18446744073709551616.0))
                return verr(ev, "range error converting %g to uint", a[0].d);
            v.u = (uint64_t)a[0].d;
            return v;
        }
        if (a[0].k == V_STRING) {
            snprintf(buf, sizeof(buf), "%.*s", (int)(a[0].n > 100 ? 100 : a[0].n), a[0].s);
            if (a[0].n > 100 || !is_digit(buf[0]) || parse_u64(buf, &v.u) < 0 || strchr(buf, 'x'))
                return verr(ev, "strconv.ParseUint: parsing \"%s\": invalid syntax", buf);
            return v;
        }
        return no_overload_rt(ev);
    }
    if (streq(name, "double") && n == 1) {
        struct val v = {.k = V_DOUBLE};
        if (a[0].k == V_DOUBLE)
            return a[0];
        if (a[0].k == V_INT || a[0].k == V_UINT) {
            v.d = a[0].k == V_INT ? (double)a[0].i : (double)a[0].u;
            return v;
        }
        if (a[0].k == V_STRING) {
            snprintf(buf, sizeof(buf), "%.*s", (int)(a[0].n > 100 ? 100 : a[0].n), a[0].s);
            char *end = NULL;
            errno = 0;
            v.d = strtod(buf, &end);
            if (a[0].n > 100 || !buf[0] || *end || errno)
                return verr(ev, "strconv.ParseFloat: parsing \"%s\": invalid syntax", buf);
            return v;
        }
        return no_overload_rt(ev);
    }
    if (streq(name, "string") && n == 1) {
        if (a[0].k == V_STRING)
            return a[0];
        if (a[0].k == V_BOOL)
            return a[0].b ? vstr("true", 4) : vstr("false", 5);
        if (a[0].k == V_DOUBLE)
            return fmt_double(ev, a[0].d);
        if (a[0].k == V_INT || a[0].k == V_UINT) {
            if (a[0].k == V_INT)
                snprintf(buf, sizeof(buf), "%" PRId64, a[0].i);
            else
                snprintf(buf, sizeof(buf), "%" PRIu64, a[0].u);
            size_t l = strlen(buf);
            char *s = eval_alloc(ev, l + 1);
            if (!s)
                return verr(ev, "operation cancelled: actual cost limit exceeded");
            memcpy(s, buf, l + 1);
            return vstr(s, l);
        }
        return no_overload_rt(ev);
    }
    if (streq(name, "bool") && n == 1) {
        if (a[0].k == V_BOOL)
            return a[0];
        if (a[0].k == V_STRING) {
            static const char *const t[] = {"1", "t", "T", "TRUE", "true", "True"};
            static const char *const f[] = {"0", "f", "F", "FALSE", "false", "False"};
            for (size_t i = 0; i < ARRAY_SIZE(t); i++) {
                if (a[0].n == strlen(t[i]) && !memcmp(a[0].s, t[i], a[0].n))
                    return vbool(true);
                if (a[0].n == strlen(f[i]) && !memcmp(a[0].s, f[i], a[0].n))
                    return vbool(false);
            }
            snprintf(buf, sizeof(buf), "%.*s", (int)(a[0].n > 100 ? 100 : a[0].n), a[0].s);
            return verr(ev, "strconv.ParseBool: parsing \"%s\": invalid syntax", buf);
        }
        return no_overload_rt(ev);
    }
    if (streq(name, "quantity") && n == 1) {
        if (a[0].k != V_STRING)
            return no_overload_rt(ev);
        return quantity_of(ev, a[0].s, a[0].n);
    }
    if (streq(name, "isQuantity") && n == 1) {
        if (a[0].k != V_STRING)
            return no_overload_rt(ev);
        struct val q = quantity_of(ev, a[0].s, a[0].n);
        return vbool(q.k == V_QUANTITY);
    }
    if ((streq(name, "semver") || streq(name, "isSemver")) && (n == 1 || n == 2)) {
        if (a[0].k != V_STRING || (n == 2 && a[1].k != V_BOOL))
            return no_overload_rt(ev);
        const char *s = a[0].s;
        size_t len = a[0].n;
        char norm[160];
        if (n == 2 && a[1].b) {
            /* normalize: strip a leading v, fill missing minor/patch with 0, drop leading zeroes
             * of the numbers */
            if (len && s[0] == 'v') {
                s++;
                len--;
            }
            size_t core = 0;
            while (core < len && s[core] != '-' && s[core] != '+')
                core++;
            struct sbuf nb;
            sbuf_init(&nb, sizeof(norm) - 1);
            size_t parts = 0, i = 0;
            while (i <= core && parts < 3) {
                size_t j = i;
                while (j < core && s[j] != '.')
                    j++;
                size_t z = i;
                while (z + 1 < j && s[z] == '0')
                    z++;
                sbuf_addf(&nb, "%s%.*s", parts ? "." : "", (int)(j - z), s + z);
                parts++;
                i = j + 1;
                if (j >= core)
                    break;
            }
            while (parts < 3) {
                sbuf_adds(&nb, ".0");
                parts++;
            }
            if (i <= core && i < len && core > i)
                sbuf_add(&nb, s + i - 1, core - i + 1); /* extra parts: left to fail */
            sbuf_add(&nb, s + core, len - core);
            if (nb.error) {
                sbuf_free(&nb);
                return streq(name, "isSemver") ? vbool(false)
                                               : verr(ev, "No Major.Minor.Patch elements found");
            }
            snprintf(norm, sizeof(norm), "%.*s", (int)nb.len, nb.data);
            sbuf_free(&nb);
            s = norm;
            len = strlen(norm);
        }
        const char *why = NULL;
        struct semver *sv = semver_parse(ev, s, len, &why);
        if (streq(name, "isSemver"))
            return vbool(sv != NULL);
        if (!sv)
            return verr(ev, "%s", why);
        return (struct val){.k = V_SEMVER, .sv = sv};
    }
    if (member && n >= 1 && a[0].k == V_QUANTITY) {
        int64_t q = a[0].i;
        if (n == 1 && streq(name, "isInteger"))
            return vbool(q % 1000 == 0 && q != INT64_MAX && q != INT64_MIN);
        if (n == 1 && streq(name, "asInteger")) {
            if (q % 1000 != 0 || q == INT64_MAX || q == INT64_MIN)
                return verr(ev, "cannot convert value to integer");
            return vint(q / 1000);
        }
        if (n == 1 && streq(name, "asApproximateFloat"))
            return (struct val){.k = V_DOUBLE, .d = (double)q / 1000.0};
        if (n == 1 && streq(name, "sign"))
            return vint(q > 0 ? 1 : q < 0 ? -1 : 0);
        if (n == 2 && a[1].k == V_QUANTITY) {
            int64_t o = a[1].i;
            int c = q < o ? -1 : q > o ? 1 : 0;
            if (streq(name, "compareTo"))
                return vint(c);
            if (streq(name, "isGreaterThan"))
                return vbool(c > 0);
            if (streq(name, "isLessThan"))
                return vbool(c < 0);
        }
        if (n == 2 && (streq(name, "add") || streq(name, "sub")) &&
            (a[1].k == V_QUANTITY || a[1].k == V_INT)) {
            int64_t o = a[1].k == V_QUANTITY ? a[1].i : 0, r;
            if (a[1].k == V_INT && __builtin_mul_overflow(a[1].i, 1000, &o))
                return verr(ev, "integer overflow");
            bool ov = name[0] == 'a' ? __builtin_add_overflow(q, o, &r)
                                     : __builtin_sub_overflow(q, o, &r);
            if (ov)
                return verr(ev, "integer overflow");
            return (struct val){.k = V_QUANTITY, .i = r};
        }
        return no_overload_rt(ev);
    }
    if (member && n >= 1 && a[0].k == V_SEMVER) {
        const struct semver *sv = a[0].sv;
        if (n == 1 && streq(name, "major"))
            return vint((int64_t)sv->major);
        if (n == 1 && streq(name, "minor"))
            return vint((int64_t)sv->minor);
        if (n == 1 && streq(name, "patch"))
            return vint((int64_t)sv->patch);
        if (n == 2 && a[1].k == V_SEMVER) {
            int c = semver_cmp(sv, a[1].sv);
            if (streq(name, "compareTo"))
                return vint(c);
            if (streq(name, "isGreaterThan"))
                return vbool(c > 0);
            if (streq(name, "isLessThan"))
                return vbool(c < 0);
        }
        return no_overload_rt(ev);
    }
    return no_overload_rt(ev);
}

static struct val eval_inner(struct eval *ev, int i)
{
    const struct node *nd = &ev->c->nodes[i];
    switch (nd->k) {
    case N_NULL:
        return (struct val){.k = V_NULL};
    case N_BOOL:
        return vbool(nd->bv);
    case N_INT:
        return vint(nd->i);
    case N_UINT:
        return (struct val){.k = V_UINT, .u = nd->u};
    case N_DOUBLE:
        return (struct val){.k = V_DOUBLE, .d = nd->d};
    case N_STRING:
        return vstr(nd->str, nd->slen);
    case N_IDENT:
        return (struct val){.k = V_DEVICE};
    case N_SELECT: {
        struct val t = eval(ev, nd->a);
        if (t.k == V_ERR)
            return t;
        if (t.k == V_DEVICE) {
            if (streq(nd->str, "driver"))
                return nd->test ? vbool(true) : vstr(ev->driver, strlen(ev->driver));
            if (streq(nd->str, "attributes"))
                return nd->test ? vbool(true) : (struct val){.k = V_ATTRS};
            if (streq(nd->str, "capacity"))
                return nd->test ? vbool(true) : (struct val){.k = V_CAPS};
            return verr(ev, "no such key: %s", nd->str);
        }
        if (!is_map(&t))
            return nd->test ? verr(ev, "invalid type for field selection.") : no_overload_rt(ev);
        /* the domain maps answer every key (an empty map for a missing domain), so a presence
         * test of a domain is true, as with the scheduler's CEL environment */
        if (nd->test && (t.k == V_ATTRS || t.k == V_CAPS))
            return vbool(true);
        struct val key = vstr(nd->str, strlen(nd->str));
        bool found = false;
        struct val r = map_get(ev, &t, &key, &found);
        if (nd->test)
            return r.k == V_ERR && found ? r : vbool(found);
        if (r.k == V_ERR)
            return r;
        if (!found && t.k != V_ATTRS && t.k != V_CAPS) /* a missing domain is an empty map */
            return no_such_key(ev, &key);
        return r;
    }
    case N_INDEX: {
        struct val t = eval(ev, nd->a);
        struct val k = eval(ev, nd->b);
        if (t.k == V_ERR)
            return t;
        if (k.k == V_ERR)
            return k;
        if (t.k == V_LIST) {
            int64_t ix;
            if (k.k == V_INT)
                ix = k.i;
            else if (k.k == V_UINT)
                ix = k.u > INT64_MAX ? INT64_MAX : (int64_t)k.u;
            else if (k.k == V_DOUBLE && k.d == floor(k.d) && fabs(k.d) < 9e18)
                ix = (int64_t)k.d;
            else
                return no_overload_rt(ev);
            if (ix < 0 || (uint64_t)ix >= t.n)
                return verr(ev, "index out of bounds: %" PRId64, ix);
            return t.items[ix];
        }
        if (!is_map(&t))
            return no_overload_rt(ev);
        bool found = false;
        struct val r = map_get(ev, &t, &k, &found);
        if (r.k == V_ERR)
            return r;
        if (!found && (t.k == V_ATTR_IDS || t.k == V_CAP_IDS))
            return no_such_key(ev, &k);
        return r; /* a missing domain is an empty map */
    }
    case N_UNARY: {
        struct val v = eval(ev, nd->a);
        if (v.k == V_ERR)
            return v;
        if (nd->op == '!')
            return v.k == V_BOOL ? vbool(!v.b) : no_overload_rt(ev);
        if (v.k == V_INT)
            return v.i == INT64_MIN ? verr(ev, "integer overflow") : vint(-v.i);
        if (v.k == V_DOUBLE)
            return (struct val){.k = V_DOUBLE, .d = -v.d};
        return no_overload_rt(ev);
    }
    case N_BINARY: {
        enum bop op = (enum bop)nd->op;
        if (op == B_AND || op == B_OR) {
            /* commutative: a decisive operand wins over an error on the other side */
            bool decisive = op == B_OR;
            struct val l = eval(ev, nd->a);
            if (l.k == V_BOOL && l.b == decisive)
                return l;
            struct val r = eval(ev, nd->b);
            if (r.k == V_BOOL && r.b == decisive)
                return r;
            if (l.k == V_ERR)
                return l;
            if (r.k == V_ERR)
                return r;
            if (l.k != V_BOOL || r.k != V_BOOL)
                return no_overload_rt(ev);
            return vbool(!decisive);
        }
        struct val l = eval(ev, nd->a);
        struct val r = eval(ev, nd->b);
        if (l.k == V_ERR)
            return l;
        if (r.k == V_ERR)
            return r;
        switch (op) {
        case B_EQ:
        case B_NE: {
            struct val e = equals(ev, &l, &r);
            if (e.k == V_BOOL && op == B_NE)
                e.b = !e.b;
            return e;
        }
        case B_LT:
        case B_LE:
        case B_GT:
        case B_GE:
            return compare(ev, op, l, r);
        case B_IN:
            if (r.k == V_LIST) {
                for (size_t k = 0; k < r.n; k++) {
                    struct val e = equals(ev, &l, &r.items[k]);
                    if (e.k == V_ERR)
                        return e;
                    if (e.b)
                        return vbool(true);
                }
                return vbool(false);
            }
            if (is_map(&r)) {
                bool found = false;
                struct val g = map_get(ev, &r, &l, &found);
                if (g.k == V_ERR && !found && l.k != V_STRING)
                    return vbool(false);
                return vbool(found);
            }
            return no_overload_rt(ev);
        default:
            return arith(ev, op, l, r);
        }
    }
    case N_COND: {
        struct val c = eval(ev, nd->a);
        if (c.k == V_ERR)
            return c;
        if (c.k != V_BOOL)
            return no_overload_rt(ev);
        return eval(ev, c.b ? nd->b : nd->c);
    }
    case N_LIST: {
        struct val *items = eval_alloc(ev, nd->nargs * sizeof(*items));
        if (!items && nd->nargs)
            return verr(ev, "operation cancelled: actual cost limit exceeded");
        for (size_t k = 0; k < nd->nargs; k++) {
            items[k] = eval(ev, nd->args[k]);
            if (items[k].k == V_ERR)
                return items[k];
        }
        return (struct val){.k = V_LIST, .items = items, .n = nd->nargs};
    }
    case N_CALL: {
        if (!nd->member && streq(nd->str, "has"))
            return eval(ev, nd->args[0]);
        size_t n = nd->nargs + (nd->member ? 1 : 0);
        struct val args[8];
        if (n > ARRAY_SIZE(args))
            return no_overload_rt(ev);
        size_t k = 0;
        if (nd->member)
            args[k++] = eval(ev, nd->a);
        for (size_t a = 0; a < nd->nargs; a++)
            args[k++] = eval(ev, nd->args[a]);
        return call_fn(ev, nd->str, nd->member, args, n);
    }
    }
    return no_overload_rt(ev);
}

static struct val eval(struct eval *ev, int i)
{
    if (ev->over)
        return (struct val){.k = V_ERR, .s = "operation cancelled: actual cost limit exceeded"};
    return eval_inner(ev, i);
}

int ks_cel_match(const struct ks_cel *c, const char *driver, json_t *attributes, json_t *capacity,
                 bool *ret_match, char **ret_err)
{
    struct eval ev = {.c = c,
                      .driver = driver ? driver : "",
                      .attributes = json_is_object(attributes) ? attributes : NULL,
                      .capacity = json_is_object(capacity) ? capacity : NULL};
    struct val v = eval(&ev, c->root);
    int r = 0;
    if (v.k == V_BOOL) {
        *ret_match = v.b;
    } else if (v.k == V_ERR) {
        *ret_err = xstrdup(v.s);
        r = -EINVAL;
    } else {
        static const char *const names[] = {
            [V_ERR] = "error",
            [V_NULL] = "null_type",
            [V_BOOL] = "bool",
            [V_INT] = "int",
            [V_UINT] = "uint",
            [V_DOUBLE] = "double",
            [V_STRING] = "string",
            [V_LIST] = "list",
            [V_ATTRS] = "map",
            [V_ATTR_IDS] = "map",
            [V_CAPS] = "map",
            [V_CAP_IDS] = "map",
            [V_QUANTITY] = "kubernetes.Quantity",
            [V_SEMVER] = "kubernetes.Semver",
            [V_DEVICE] = "kubernetes.DRADevice",
        };
        *ret_err = xasprintf("CEL result of type %s could not be converted to bool", names[v.k]);
        r = -EINVAL;
    }
    for (size_t i = 0; i < ev.n_blocks; i++)
        free(ev.blocks[i]);
    free(ev.blocks);
    return r;
}
