// SPDX-License-Identifier: Apache-2.0
// tomlx: toml++ behind a C interface (internal/tomlx.h). Every entry point catches C++
// exceptions; allocation failure inside toml++ becomes -ENOMEM.
#include "tomlx.h"

#include <cerrno>
#include <cstring>
#include <sstream>
#include <string>
#include <string_view>

#include <toml++/toml.h>

struct tomlx {
    toml::table root;
};

namespace {

const toml::node *find(const toml::table &root, const char *const *path, size_t n)
{
    const toml::node *cur = &root;
    for (size_t i = 0; i < n; i++) {
        const toml::table *tbl = cur->as_table();
        if (!tbl)
            return nullptr;
        cur = tbl->get(std::string_view(path[i]));
        if (!cur)
            return nullptr;
    }
    return cur;
}

// The table that holds path's last key, created along the way; nullptr when a step is not a
// table.
toml::table *parent_for_set(toml::table &root, const char *const *path, size_t n)
{
    toml::table *cur = &root;
    for (size_t i = 0; i + 1 < n; i++) {
        toml::node *next = cur->get(std::string_view(path[i]));
        if (!next) {
            auto [it, ok] = cur->insert(std::string_view(path[i]), toml::table{});
            (void)ok;
            next = &it->second;
        }
        cur = next->as_table();
        if (!cur)
            return nullptr;
    }
    return cur;
}

template <typename F> int guard(F &&f)
{
    try {
        return f();
    } catch (const std::bad_alloc &) {
        return -ENOMEM;
    } catch (...) {
        return -EINVAL;
    }
}

} // namespace

extern "C" {

int tomlx_parse(const char *data, size_t len, struct tomlx **ret, unsigned *ret_line,
                struct err *e)
{
    try {
        auto *t = new tomlx{toml::parse(std::string_view(data ? data : "", data ? len : 0))};
        *ret = t;
        return 0;
    } catch (const toml::parse_error &pe) {
        const auto &b = pe.source().begin;
        if (ret_line)
            *ret_line = b.line;
        std::string d(pe.description());
        return err_set(e, -EINVAL, "line %u, column %u: %s", (unsigned)b.line, (unsigned)b.column,
                       d.c_str());
    } catch (const std::bad_alloc &) {
        return err_set(e, -ENOMEM, "out of memory parsing TOML");
    } catch (...) {
        return err_set(e, -EINVAL, "TOML parser failed");
    }
}

struct tomlx *tomlx_new(void)
{
    try {
        return new tomlx{};
    } catch (...) {
        return nullptr;
    }
}

void tomlx_free(struct tomlx *t)
{
    delete t;
}

bool tomlx_empty(const struct tomlx *t)
{
    return t->root.empty();
}

enum tomlx_type tomlx_type_at(const struct tomlx *t, const char *const *path, size_t n)
{
    const toml::node *nd = find(t->root, path, n);
    if (!nd)
        return TOMLX_NONE;
    switch (nd->type()) {
    case toml::node_type::table: return TOMLX_TABLE;
    case toml::node_type::array: return TOMLX_ARRAY;
    case toml::node_type::string: return TOMLX_STRING;
    case toml::node_type::integer: return TOMLX_INT;
    case toml::node_type::floating_point: return TOMLX_FLOAT;
    case toml::node_type::boolean: return TOMLX_BOOL;
    default: return TOMLX_OTHER;
    }
}

int tomlx_get_int(const struct tomlx *t, const char *const *path, size_t n, int64_t *ret)
{
    const toml::node *nd = find(t->root, path, n);
    if (!nd)
        return -ENOENT;
    auto v = nd->value_exact<int64_t>();
    if (!v)
        return -EINVAL;
    *ret = *v;
    return 0;
}

int tomlx_get_bool(const struct tomlx *t, const char *const *path, size_t n, bool *ret)
{
    const toml::node *nd = find(t->root, path, n);
    if (!nd)
        return -ENOENT;
    auto v = nd->value_exact<bool>();
    if (!v)
        return -EINVAL;
    *ret = *v;
    return 0;
}

static int dup_out(const std::string &s, char **ret)
{
    char *p = strndup(s.data(), s.size());
    if (!p)
        return -ENOMEM;
    *ret = p;
    return 0;
}

int tomlx_get_str(const struct tomlx *t, const char *const *path, size_t n, char **ret)
{
    return guard([&] {
        const toml::node *nd = find(t->root, path, n);
        if (!nd)
            return -ENOENT;
        const toml::value<std::string> *v = nd->as_string();
        if (!v)
            return -EINVAL;
        return dup_out(v->get(), ret);
    });
}

int tomlx_str_array_len(const struct tomlx *t, const char *const *path, size_t n)
{
    const toml::node *nd = find(t->root, path, n);
    if (!nd)
        return -ENOENT;
    const toml::array *a = nd->as_array();
    if (!a || !a->is_homogeneous(toml::node_type::string) || a->size() > 4096)
        return a && a->empty() ? 0 : -EINVAL;
    return (int)a->size();
}

int tomlx_str_array_get(const struct tomlx *t, const char *const *path, size_t n, size_t i,
                        char **ret)
{
    return guard([&] {
        const toml::node *nd = find(t->root, path, n);
        const toml::array *a = nd ? nd->as_array() : nullptr;
        if (!a || i >= a->size())
            return -ENOENT;
        const toml::value<std::string> *v = a->get(i)->as_string();
        if (!v)
            return -EINVAL;
        return dup_out(v->get(), ret);
    });
}

int tomlx_span(const struct tomlx *t, const char *const *path, size_t n, unsigned *ret_line,
               unsigned *ret_col, unsigned *ret_end_line, unsigned *ret_end_col)
{
    const toml::node *nd = find(t->root, path, n);
    if (!nd)
        return -ENOENT;
    const toml::source_region &r = nd->source();
    if (r.begin.line == 0 || r.end.line == 0)
        return -ENOENT;
    *ret_line = r.begin.line;
    *ret_col = r.begin.column;
    *ret_end_line = r.end.line;
    *ret_end_col = r.end.column;
    return 0;
}

int tomlx_set_bool(struct tomlx *t, const char *const *path, size_t n, bool v)
{
    return guard([&] {
        toml::table *p = n ? parent_for_set(t->root, path, n) : nullptr;
        if (!p)
            return -EEXIST;
        p->insert_or_assign(std::string_view(path[n - 1]), v);
        return 0;
    });
}

int tomlx_set_str(struct tomlx *t, const char *const *path, size_t n, const char *v)
{
    return guard([&] {
        toml::table *p = n ? parent_for_set(t->root, path, n) : nullptr;
        if (!p)
            return -EEXIST;
        p->insert_or_assign(std::string_view(path[n - 1]), std::string(v));
        return 0;
    });
}

int tomlx_set_str_array(struct tomlx *t, const char *const *path, size_t n, const char *const *v,
                        size_t nv)
{
    return guard([&] {
        toml::table *p = n ? parent_for_set(t->root, path, n) : nullptr;
        if (!p)
            return -EEXIST;
        toml::array a;
        for (size_t i = 0; i < nv; i++)
            a.push_back(std::string(v[i]));
        p->insert_or_assign(std::string_view(path[n - 1]), std::move(a));
        return 0;
    });
}

int tomlx_copy(const struct tomlx *src, const char *const *spath, size_t sn, struct tomlx *dst,
               const char *const *dpath, size_t dn)
{
    return guard([&] {
        const toml::node *from = find(src->root, spath, sn);
        if (!from)
            return -ENOENT;
        if (dn == 0) {
            const toml::table *tb = from->as_table();
            if (!tb)
                return -EINVAL;
            dst->root = *tb;
            return 0;
        }
        toml::table *p = parent_for_set(dst->root, dpath, dn);
        if (!p)
            return -EEXIST;
        std::string_view key(dpath[dn - 1]);
        from->visit([&](const auto &node) { p->insert_or_assign(key, node); });
        return 0;
    });
}

int tomlx_remove(struct tomlx *t, const char *const *path, size_t n)
{
    if (n == 0)
        return -EINVAL;
    toml::node *pn = const_cast<toml::node *>(find(t->root, path, n - 1));
    toml::table *p = pn ? pn->as_table() : nullptr;
    if (p)
        p->erase(std::string_view(path[n - 1]));
    return 0;
}

int tomlx_keys(const struct tomlx *t, const char *const *path, size_t n, char ***ret,
               size_t *ret_n)
{
    return guard([&] {
        const toml::node *nd = find(t->root, path, n);
        if (!nd)
            return -ENOENT;
        const toml::table *tb = nd->as_table();
        if (!tb)
            return -EINVAL;
        char **keys = static_cast<char **>(calloc(tb->size() + 1, sizeof(char *)));
        if (!keys)
            return -ENOMEM;
        size_t i = 0;
        for (auto &&kv : *tb) {
            keys[i] = strndup(kv.first.str().data(), kv.first.str().size());
            if (!keys[i]) {
                tomlx_keys_free(keys, i);
                return -ENOMEM;
            }
            i++;
        }
        *ret = keys;
        *ret_n = i;
        return 0;
    });
}

void tomlx_keys_free(char **keys, size_t n)
{
    if (!keys)
        return;
    for (size_t i = 0; i < n; i++)
        free(keys[i]);
    free(keys);
}

bool tomlx_equal(const struct tomlx *a, const struct tomlx *b)
{
    return a->root == b->root;
}

int tomlx_emit(const struct tomlx *t, struct sbuf *out)
{
    int r = guard([&] {
        std::ostringstream os;
        constexpr auto flags = toml::toml_formatter::default_flags &
                               ~(toml::format_flags::indentation | toml::format_flags::allow_literal_strings);
        os << toml::toml_formatter{t->root, flags};
        std::string s = os.str();
        if (!s.empty() && s.back() != '\n')
            s.push_back('\n');
        return sbuf_append(out, s.data(), s.size());
    });
    return r < 0 ? sbuf_fail(out, r) : 0;
}

void tomlx_quote(struct sbuf *out, const char *s)
{
    sbuf_adds(out, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': sbuf_adds(out, "\\\""); break;
        case '\\': sbuf_adds(out, "\\\\"); break;
        case '\n': sbuf_adds(out, "\\n"); break;
        case '\t': sbuf_adds(out, "\\t"); break;
        case '\r': sbuf_adds(out, "\\r"); break;
        default:
            if (*p < 0x20 || *p == 0x7f)
                sbuf_addf(out, "\\u%04x", *p);
            else
                sbuf_add(out, p, 1);
        }
    }
    sbuf_adds(out, "\"");
}

} // extern "C"
