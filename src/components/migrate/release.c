/* SPDX-License-Identifier: Apache-2.0 */
/* Helm release records (migrate.h): decode, encode, keep everything. Bytes in, bytes out. */
#include <string.h>
#include <zlib.h>

#include "kobj.h"
#include "migrate.h"
#include "yamlcfg.h"

#define RELEASE_MAX (64u << 20)

static int gunzip(const unsigned char *in, size_t n, char **ret, size_t *ret_len, struct err *e)
{
    z_stream z = {0};
    if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK)
        return err_set(e, -ENOMEM, "release record: gzip: cannot start inflating");
    size_t cap = n * 4 + 1024, len = 0;
    _cleanup_free_ char *out = NULL;
    int r = 0;
    z.next_in = (unsigned char *)in;
    z.avail_in = (uInt)n;
    for (;;) {
        if (cap > RELEASE_MAX + 1)
            cap = RELEASE_MAX + 1;
        out = xrealloc(out, cap);
        z.next_out = (unsigned char *)out + len;
        z.avail_out = (uInt)(cap - len);
        int zr = inflate(&z, Z_NO_FLUSH);
        len = cap - z.avail_out;
        if (zr == Z_STREAM_END)
            break;
        if (zr != Z_OK && zr != Z_BUF_ERROR) {
            r = err_set(e, -EINVAL, "release record: gzip: %s", z.msg ? z.msg : "corrupt data");
            break;
        }
        if (len > RELEASE_MAX) {
            r = err_set(e, -EFBIG, "release record: more than %u bytes uncompressed", RELEASE_MAX);
            break;
        }
        if (z.avail_in == 0 && z.avail_out > 0) {
            r = err_set(e, -EINVAL, "release record: gzip: truncated");
            break;
        }
        cap *= 2;
    }
    inflateEnd(&z);
    if (r < 0)
        return r;
    out = xrealloc(out, len + 1);
    out[len] = '\0';
    *ret = steal_ptr(&out);
    *ret_len = len;
    return 0;
}

static int gzip_bytes(const char *in, size_t n, unsigned char **ret, size_t *ret_len, struct err *e)
{
    z_stream z = {0};
    if (deflateInit2(&z, 9, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return err_set(e, -ENOMEM, "release record: gzip: cannot start deflating");
    size_t cap = deflateBound(&z, (uLong)n) + 64;
    _cleanup_free_ unsigned char *out = xmalloc(cap);
    z.next_in = (unsigned char *)in;
    z.avail_in = (uInt)n;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    int zr = deflate(&z, Z_FINISH);
    size_t len = cap - z.avail_out;
    deflateEnd(&z);
    if (zr != Z_STREAM_END)
        return err_set(e, -EIO, "release record: gzip: deflate did not finish");
    *ret = steal_ptr(&out);
    *ret_len = len;
    return 0;
}

int mig_release_decode(const char *data, json_t **ret, struct err *e)
{
    if (!data)
        return err_set(e, -EINVAL, "release record: no data.release");
    _cleanup_free_ char *helm = NULL, *raw = NULL, *json = NULL;
    size_t helm_len = 0, raw_len = 0, json_len = 0;
    if (base64_decode(data, strlen(data), &helm, &helm_len) < 0)
        return err_set(e, -EINVAL, "release record: data.release is not base64");
    if (base64_decode(helm, helm_len, &raw, &raw_len) < 0)
        return err_set(e, -EINVAL, "release record: the release is not Helm's base64");
    const char *body = raw;
    size_t body_len = raw_len;
    if (raw_len >= 3 && (unsigned char)raw[0] == 0x1f && (unsigned char)raw[1] == 0x8b &&
        (unsigned char)raw[2] == 0x08) {
        int r = gunzip((const unsigned char *)raw, raw_len, &json, &json_len, e);
        if (r < 0)
            return r;
        body = json;
        body_len = json_len;
    }
    json_error_t je;
    json_t *rel = json_loadb(body, body_len, 0, &je);
    if (!rel)
        return err_set(e, -EINVAL, "release record: JSON: %s (line %d)", je.text, je.line);
    if (!json_is_object(rel)) {
        json_decref(rel);
        return err_set(e, -EINVAL, "release record: not a JSON object");
    }
    *ret = rel;
    return 0;
}

int mig_release_encode(const json_t *release, char **ret, struct err *e)
{
    _cleanup_free_ char *json = json_dumps(release, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (!json)
        return err_set(e, -ENOMEM, "release record: cannot write JSON");
    _cleanup_free_ unsigned char *gz = NULL;
    size_t gz_len = 0;
    int r = gzip_bytes(json, strlen(json), &gz, &gz_len, e);
    if (r < 0)
        return r;
    _cleanup_free_ char *helm = base64_encode(gz, gz_len);
    *ret = base64_encode(helm, strlen(helm));
    return 0;
}

/* A manifest split as Helm splits it: at lines that are "---" (trailing blanks allowed). */
static json_t *split_manifest(const char *m)
{
    json_t *docs = json_array();
    const char *start = m, *p = m;
    while (*p) {
        const char *eol = strchr(p, '\n');
        size_t ll = eol ? (size_t)(eol - p) : strlen(p);
        size_t t = ll;
        while (t > 3 && (p[t - 1] == ' ' || p[t - 1] == '\t' || p[t - 1] == '\r'))
            t--;
        if (t == 3 && strncmp(p, "---", 3) == 0) {
            json_array_append_new(docs, json_stringn(start, (size_t)(p - start)));
            start = eol ? eol + 1 : p + ll;
        }
        p = eol ? eol + 1 : p + ll;
    }
    json_array_append_new(docs, json_string(start));
    return docs;
}

int mig_release_keep_all(json_t *release, size_t *ret_docs, size_t *ret_hooks, struct err *e)
{
    const char *manifest = kobj_str(release, "manifest");
    _cleanup_json_ json_t *docs = split_manifest(manifest ? manifest : "");
    char *out = xstrdup("");
    size_t n = 0, seen = 0, i;
    json_t *d;
    json_array_foreach (docs, i, d) {
        const char *text = json_string_value(d);
        if (text[strspn(text, " \t\r\n")] == '\0')
            continue; /* before the first separator, or after the last */
        seen++;
        /* its comment lines ("# Source: chart/templates/x.yaml") stay above it */
        _cleanup_free_ char *comments = xstrdup("");
        for (const char *l = text; *l == '#';) {
            const char *eol = strchr(l, '\n');
            size_t ll = eol ? (size_t)(eol - l + 1) : strlen(l);
            char *c = xasprintf("%s%.*s%s", comments, (int)ll, l, eol ? "" : "\n");
            free(comments);
            comments = c;
            l += ll;
        }
        _cleanup_json_ json_t *obj = NULL;
        _cleanup_free_ char *where = xasprintf("release manifest document %zu", seen);
        if (yaml_parse_one(text, strlen(text), where, &obj, e) < 0) {
            free(out);
            return err_prefix(e, "release %s", kobj_str(release, "name") ?: "?");
        }
        if (!json_is_object(obj) || json_object_size(obj) == 0)
            continue;
        json_t *ann = kobj_ensure_keys(obj, (const char *const[]){"metadata", "annotations", NULL});
        json_object_set_new(ann, ADOPT_HELM_RESOURCE_POLICY, json_string("keep"));
        _cleanup_free_ char *body = json_dumps(obj, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        char *next = xasprintf("%s---\n%s%s\n", out, comments, body);
        free(out);
        out = next;
        n++;
    }
    /* hooks run at uninstall: dropped from the record */
    size_t dropped = 0;
    json_t *hooks = json_object_get(release, "hooks");
    for (i = json_array_size(hooks); i-- > 0;) {
        json_t *h = json_array_get(hooks, i);
        bool on_delete = false;
        size_t j;
        json_t *ev;
        json_array_foreach (json_object_get(h, "events"), j, ev) {
            on_delete = on_delete || streq_ptr(json_string_value(ev), "pre-delete") ||
                        streq_ptr(json_string_value(ev), "post-delete");
        }
        if (on_delete) {
            json_array_remove(hooks, i);
            dropped++;
        }
    }
    json_object_set_new(release, "manifest", json_string(out));
    free(out);
    *ret_docs = n;
    *ret_hooks = dropped;
    return 0;
}
