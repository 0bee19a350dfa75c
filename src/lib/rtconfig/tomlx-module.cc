// SPDX-License-Identifier: Apache-2.0
// gpuop-tomlx.so: toml++ behind the C table of internal/tomlx-module.h, loaded by tomlx.c on the
// first TOML operation. Every entry point catches C++ exceptions; allocation failure inside
// toml++ becomes -ENOMEM. It calls nothing of gpuop's (linked with --no-undefined where the build
// allows): errors travel back as codes, positions and malloc'ed strings.
#include "tomlx-module.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <string_view>

#include <toml++/toml.h>

struct tomlx {
    toml::table root;
};

namespace
{

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

int parse(const char *data, size_t len, struct tomlx **ret, unsigned *ret_line, unsigned *ret_col,
          char **ret_what)
{
    *ret_line = 0;
    *ret_col = 0;
    *ret_what = nullptr;
    try {
        auto *t = new tomlx{toml::parse(std::string_view(data ? data : "", data ? len : 0))};
        *ret = t;
        return 0;
    } catch (const toml::parse_error &pe) {
        const auto &b = pe.source().begin;
        *ret_line = (unsigned)b.line;
        *ret_col = (unsigned)b.column;
        std::string_view d = pe.description();
        *ret_what = strndup(d.data(), d.size());
        return -EINVAL;
    } catch (const std::bad_alloc &) {
        return -ENOMEM;
    } catch (...) {
        return -EINVAL;
    }
}

struct tomlx *new_doc(void)
{
    try {
        return new tomlx{};
    } catch (...) {
        return nullptr;
    }
}

void free_doc(struct tomlx *t)
{
    delete t;
}

bool empty(const struct tomlx *t)
{
    return t->root.empty();
}

enum tomlx_type type_at(const struct tomlx *t, const char *const *path, size_t n)
{
    const toml::node *nd = find(t->root, path, n);
    if (!nd)
        return TOMLX_NONE;
    switch (nd->type()) {
    case toml::node_type::table:
        return TOMLX_TABLE;
    case toml::node_type::array:
        return TOMLX_ARRAY;
    case toml::node_type::string:
        return TOMLX_STRING;
    case toml::node_type::integer:
        return TOMLX_INT;
    case toml::node_type::floating_point:
        return TOMLX_FLOAT;
    case toml::node_type::boolean:
        return TOMLX_BOOL;
    default:
        return TOMLX_OTHER;
    }
}

int get_int(const struct tomlx *t, const char *const *path, size_t n, int64_t *ret)
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

int get_bool(const struct tomlx *t, const char *const *path, size_t n, bool *ret)
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

int dup_out(const std::string &s, char **ret)
{
    char *p = strndup(s.data(), s.size());
    if (!p)
        return -ENOMEM;
    *ret = p;
    return 0;
}

int get_str(const struct tomlx *t, const char *const *path, size_t n, char **ret)
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

int str_array_len(const struct tomlx *t, const char *const *path, size_t n)
{
    const toml::node *nd = find(t->root, path, n);
    if (!nd)
        return -ENOENT;
    const toml::array *a = nd->as_array();
    if (!a || !a->is_homogeneous(toml::node_type::string) || a->size() > 4096)
        return a && a->empty() ? 0 : -EINVAL;
    return (int)a->size();
}

int str_array_get(const struct tomlx *t, const char *const *path, size_t n, size_t i,
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

int span(const struct tomlx *t, const char *const *path, size_t n, unsigned *ret_line,
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

int set_bool(struct tomlx *t, const char *const *path, size_t n, bool v)
{
    return guard([&] {
        toml::table *p = n ? parent_for_set(t->root, path, n) : nullptr;
        if (!p)
            return -EEXIST;
        p->insert_or_assign(std::string_view(path[n - 1]), v);
        return 0;
    });
}

int set_str(struct tomlx *t, const char *const *path, size_t n, const char *v)
{
    return guard([&] {
        toml::table *p = n ? parent_for_set(t->root, path, n) : nullptr;
        if (!p)
            return -EEXIST;
        p->insert_or_assign(std::string_view(path[n - 1]), std::string(v));
        return 0;
    });
}

int set_str_array(struct tomlx *t, const char *const *path, size_t n, const char *const *v,
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

int copy(const struct tomlx *src, const char *const *spath, size_t sn, struct tomlx *dst,
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

int remove(struct tomlx *t, const char *const *path, size_t n)
{
    if (n == 0)
        return -EINVAL;
    toml::node *pn = const_cast<toml::node *>(find(t->root, path, n - 1));
    toml::table *p = pn ? pn->as_table() : nullptr;
    if (p)
        p->erase(std::string_view(path[n - 1]));
    return 0;
}

bool equal(const struct tomlx *a, const struct tomlx *b)
{
    return a->root == b->root;
}

int emit(const struct tomlx *t, char **ret, size_t *ret_len)
{
    return guard([&] {
        std::ostringstream os;
        constexpr auto flags =
            toml::toml_formatter::default_flags &
            ~(toml::format_flags::indentation | toml::format_flags::allow_literal_strings);
        os << toml::toml_formatter{t->root, flags};
        std::string s = os.str();
        if (!s.empty() && s.back() != '\n')
            s.push_back('\n');
        char *p = static_cast<char *>(malloc(s.size() + 1));
        if (!p)
            return -ENOMEM;
        memcpy(p, s.data(), s.size());
        p[s.size()] = '\0';
        *ret = p;
        *ret_len = s.size();
        return 0;
    });
}

const struct tomlx_module table = {
    TOMLX_MODULE_ABI,
    sizeof(struct tomlx_module),
    parse,
    new_doc,
    free_doc,
    empty,
    type_at,
    get_int,
    get_bool,
    get_str,
    str_array_len,
    str_array_get,
    span,
    set_bool,
    set_str,
    set_str_array,
    copy,
    remove,
    equal,
    emit,
};

} // namespace

extern "C" __attribute__((visibility("default"))) const struct tomlx_module *
gpuop_tomlx_module(unsigned abi)
{
    return abi == TOMLX_MODULE_ABI ? &table : nullptr;
}
