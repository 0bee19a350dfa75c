/* SPDX-License-Identifier: Apache-2.0 */
/* gpuop gather's core: the redaction of each kind of credential (text and objects), Secrets
 * refused, what is collected (sources, nodes, Events, logs, the doctor's image, safe names), the
 * tar headers, the size bound (the file never above it, what it left out in the index), and the
 * index read back from a finished bundle (gunzip and untar here, with zlib). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <zlib.h>

#include "gather.h"
#include "kobj.h"
#include "yamlcfg.h"

static char *redact(const char *in, size_t *ret_n)
{
    struct sbuf b;
    sbuf_init(&b, 1 << 20);
    *ret_n = gather_redact_text(in, strlen(in), &b);
    assert_int_equal(sbuf_check(&b), 0);
    return sbuf_steal(&b);
}

/* Each kind of credential in text, and text that must stay as it is. */
static void test_redact_text(void **state)
{
    (void)state;
    static const struct {
        const char *in, *out;
        size_t n;
    } cases[] = {
        /* HTTP headers, to the end of the line */
        {"GET / Authorization: Bearer abc.def\nnext", "GET / Authorization: <redacted>\nnext", 1},
        {"authorization=Basic dXNlcjpwYXNz", "authorization=<redacted>", 1},
        {"Proxy-Authorization: Basic eA==", "Proxy-Authorization: <redacted>", 1},
        {"Cookie: a=1; b=2\n", "Cookie: <redacted>\n", 1},
        {"{\"Authorization\":\"Bearer x y\",\"a\":1}", "{\"Authorization\":\"<redacted>\",\"a\":1}",
         1},
        /* bearer tokens and JWTs anywhere */
        {"sent bearer tok_123 to server", "sent bearer <redacted> to server", 1},
        {"id eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl end", "id <redacted> end", 1},
        {"jwt=eyJhbGciOiJub25lIn0.eyJhIjoxfQ.", "jwt=<redacted>", 1},
        /* key: value, key=value, "key":"value" */
        {"token: abc123\nother: x", "token: <redacted>\nother: x", 1},
        {"  client-key-data: LS0tLS1CRUdJTg==", "  client-key-data: <redacted>", 1},
        {"--password=hunter2 --user=bob", "--password=<redacted> --user=bob", 1},
        {"https://x/?access_token=abc&page=2", "https://x/?access_token=<redacted>&page=2", 1},
        {"{\"password\":\"p\\\"w\",\"user\":\"u\"}", "{\"password\":\"<redacted>\",\"user\":\"u\"}",
         1},
        {"AWS_SECRET_ACCESS_KEY=wJalr MY_API_KEY='k'",
         "AWS_SECRET_ACCESS_KEY=<redacted> MY_API_KEY='<redacted>'", 2},
        {"client_secret: s, passphrase: p", "client_secret: <redacted>, passphrase: <redacted>", 2},
        /* a URL's user information */
        {"proxy http://user:pw@proxy:3128/x", "proxy http://<redacted>@proxy:3128/x", 1},
        {"git https://ghp_abc@github.com/o/r", "git https://<redacted>@github.com/o/r", 1},
        /* a private key's body, the markers kept */
        {"-----BEGIN RSA PRIVATE KEY-----\nMIIE\nabc\n-----END RSA PRIVATE KEY-----\n",
         "-----BEGIN RSA PRIVATE KEY-----<redacted>-----END RSA PRIVATE KEY-----\n", 1},
        {"-----BEGIN PRIVATE KEY-----\ncut", "-----BEGIN PRIVATE KEY-----<redacted>", 1},
        /* what stays */
        {"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----",
         "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----", 0},
        {"tokens: 3, secretName: creds, token:\n", "tokens: 3, secretName: creds, token:\n", 0},
        {"spec: {token: {a: 1}}", "spec: {token: {a: 1}}", 0},
        {"key: nvidia.com/gpu monkey=1", "key: nvidia.com/gpu monkey=1", 0},
        {"https://10.0.0.1:6443/api?watch=1", "https://10.0.0.1:6443/api?watch=1", 0},
        {"already token: <redacted> here", "already token: <redacted> here", 0},
        {"", "", 0},
        {"nvidia-smi: Bearer", "nvidia-smi: Bearer", 0},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        size_t n = 0;
        char *out = redact(cases[i].in, &n);
        if (strcmp(out, cases[i].out) != 0 || n != cases[i].n)
            fail_msg("case %zu: \"%s\"\n got \"%s\" (%zu)\nwant \"%s\" (%zu)", i, cases[i].in, out,
                     n, cases[i].out, cases[i].n);
        /* redacting again changes nothing */
        size_t again = 0;
        char *out2 = redact(out, &again);
        if (again != 0 || strcmp(out, out2) != 0)
            fail_msg("case %zu: a second pass changed \"%s\" to \"%s\"", i, out, out2);
        free(out);
        free(out2);
    }
    /* the output's limit is the caller's to check, never a silent cut */
    struct sbuf small _cleanup_sbuf_;
    sbuf_init(&small, 8);
    gather_redact_text("token: abcdefgh", 15, &small);
    assert_true(sbuf_check(&small) < 0);
}

static void test_names(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        bool secret;
    } env[] = {{"API_TOKEN", true},      {"db_password", true}, {"PASSWD", true},
               {"CLIENT_SECRET", true},  {"SSH_KEY", true},     {"AWS_CREDENTIALS", true},
               {"BASIC_AUTH", true},     {"LOG_LEVEL", false},  {"NVIDIA_VISIBLE_DEVICES", false},
               {"DRIVER_VERSION", false}};
    for (size_t i = 0; i < ARRAY_SIZE(env); i++)
        if (gather_env_name_secret(env[i].name) != env[i].secret)
            fail_msg("env %s: want %d", env[i].name, env[i].secret);
    static const struct {
        const char *key;
        bool secret;
    } keys[] = {{"token", true},           {"bearerToken", true},
                {"client-key-data", true}, {"password", true},
                {"aws_access_key", true},  {"privateKey", true},
                {"credentials", true},     {"Authorization", true},
                {"set-cookie", true},      {"key", false},
                {"secretName", false},     {"tokenExpirationSeconds", false},
                {"automount", false},      {"name", false},
                {"a/token", false},        {"", false}};
    for (size_t i = 0; i < ARRAY_SIZE(keys); i++)
        if (gather_key_secret(keys[i].key, strlen(keys[i].key)) != keys[i].secret)
            fail_msg("key %s: want %d", keys[i].key, keys[i].secret);
}

static json_t *load(const char *s)
{
    json_error_t je;
    json_t *v = json_loads(s, 0, &je);
    if (!v)
        fail_msg("fixture: %s", je.text);
    return v;
}

static void test_redact_object(void **state)
{
    (void)state;
    _cleanup_(json_decrefp) json_t *ds =
        load("{\"apiVersion\":\"apps/v1\",\"kind\":\"DaemonSet\","
             "\"metadata\":{\"name\":\"d\",\"managedFields\":[{\"manager\":\"kubectl\"}],"
             "\"annotations\":{\"kubectl.kubernetes.io/last-applied-configuration\":"
             "\"{\\\"spec\\\":{\\\"env\\\":[{\\\"name\\\":\\\"MY_TOKEN\\\",\\\"value\\\":"
             "\\\"zz1\\\"}]}}\","
             "\"note\":\"curl -H 'Authorization: Bearer zz2'\"}},"
             "\"spec\":{\"template\":{\"spec\":{\"containers\":[{\"name\":\"c\",\"env\":["
             "{\"name\":\"MY_TOKEN\",\"value\":\"zz3\"},{\"name\":\"LEVEL\",\"value\":\"info\"},"
             "{\"name\":\"FROM\",\"valueFrom\":{\"secretKeyRef\":{\"name\":\"s\",\"key\":\"k\"}}},"
             "{\"name\":\"DB_PASSWORD\",\"value\":\"\"}],"
             "\"args\":[\"--token=zz4\",\"--v=2\"]}],"
             "\"tolerations\":[{\"key\":\"nvidia.com/gpu\",\"operator\":\"Exists\"}],"
             "\"volumes\":[{\"name\":\"v\",\"secret\":{\"secretName\":\"s\"}}]}}},"
             "\"data\":{\"token\":\"zz5\",\"config\":\"password: zz6\\n\"}}");
    size_t n = gather_redact_object(ds);
    assert_int_equal(n, 6);
    char *d = json_dumps(ds, JSON_COMPACT);
    if (strstr(d, "zz"))
        fail_msg("a credential left in %s", d);
    assert_null(strstr(d, "managedFields"));
    /* references and ordinary fields stay */
    assert_non_null(strstr(d, "\"secretKeyRef\":{\"name\":\"s\",\"key\":\"k\"}"));
    assert_non_null(strstr(d, "{\"name\":\"LEVEL\",\"value\":\"info\"}"));
    assert_non_null(strstr(d, "{\"key\":\"nvidia.com/gpu\",\"operator\":\"Exists\"}"));
    assert_non_null(strstr(d, "\"secretName\":\"s\""));
    assert_non_null(strstr(d, "\"--v=2\""));
    assert_non_null(strstr(d, "{\"name\":\"DB_PASSWORD\",\"value\":\"\"}"));
    /* last-applied-configuration stays JSON, redacted inside */
    json_t *la = kobj_path(ds, "metadata.annotations");
    const char *las =
        json_string_value(json_object_get(la, "kubectl.kubernetes.io/last-applied-configuration"));
    _cleanup_(json_decrefp) json_t *lav = load(las);
    assert_string_equal(kobj_str(json_array_get(kobj_path(lav, "spec.env"), 0), "value"),
                        GATHER_REDACTED);
    free(d);
    assert_int_equal(gather_redact_object(ds), 0); /* a second pass finds nothing */

    /* a Secret is refused, alone or in a list; another object comes out as YAML */
    struct err e = {0};
    struct sbuf y _cleanup_sbuf_;
    sbuf_init(&y, 1 << 20);
    size_t red = 99;
    _cleanup_(json_decrefp) json_t *sec = load(
        "{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":\"s\"},\"data\":{}}");
    assert_int_equal(gather_object_yaml(sec, &y, &red, &e), -EPERM);
    assert_non_null(strstr(err_msg(&e), "never collected"));
    _cleanup_(json_decrefp) json_t *list =
        load("{\"kind\":\"List\",\"items\":[{\"kind\":\"ConfigMap\"},{\"kind\":\"Secret\"}]}");
    assert_int_equal(gather_object_yaml(list, &y, &red, &e), -EPERM);
    assert_int_equal(y.len, 0);
    _cleanup_(json_decrefp) json_t *cm =
        load("{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"c\"},"
             "\"data\":{\"password\":\"x\",\"on\":\"yes\"}}");
    assert_int_equal(gather_object_yaml(cm, &y, &red, &e), 0);
    assert_int_equal(red, 1);
    assert_string_equal(y.data, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n"
                                "  password: <redacted>\n  'on': 'yes'\n");
    /* the caller's object is left as it was */
    assert_string_equal(kobj_path_str(cm, "data.password"), "x");

    char url[256];
    gather_redact_url("https://admin:pw@10.0.0.1:6443/base?token=x#f", url, sizeof(url));
    assert_string_equal(url, "https://10.0.0.1:6443/base");
    gather_redact_url("https://kube.example:443", url, sizeof(url));
    assert_string_equal(url, "https://kube.example:443");
    gather_redact_url(NULL, url, sizeof(url));
    assert_string_equal(url, "");
}

static void test_plan(void **state)
{
    (void)state;
    /* no Secret among the sources; the gpuop filter */
    const struct gather_source *crb = NULL, *crd = NULL;
    for (const struct gather_source *s = gather_sources; s->res; s++) {
        assert_string_not_equal(s->res->kind, "Secret");
        if (streq_ptr(s->dir, "clusterrolebindings"))
            crb = s;
        if (streq_ptr(s->dir, "customresourcedefinitions"))
            crd = s;
    }
    assert_non_null(crb);
    assert_non_null(crd);
    _cleanup_(json_decrefp) json_t *mine = load(
        "{\"metadata\":{\"name\":\"x\",\"labels\":{\"app.kubernetes.io/managed-by\":\"gpuop\"}}}");
    _cleanup_(json_decrefp) json_t *chart =
        load("{\"metadata\":{\"name\":\"y\",\"labels\":{\"app.kubernetes.io/name\":\"gpuop\"}}}");
    _cleanup_(json_decrefp) json_t *named = load("{\"metadata\":{\"name\":\"gpu-operator-x\"}}");
    _cleanup_(json_decrefp) json_t *other = load("{\"metadata\":{\"name\":\"system:admin\"}}");
    assert_true(gather_wanted(crb, mine));
    assert_true(gather_wanted(crb, chart));
    assert_true(gather_wanted(crb, named));
    assert_false(gather_wanted(crb, other));
    _cleanup_(json_decrefp) json_t *crd1 = load("{\"spec\":{\"group\":\"nvidia.com\"}}");
    _cleanup_(json_decrefp) json_t *crd2 = load("{\"spec\":{\"group\":\"upgrade.gpuop.dev\"}}");
    _cleanup_(json_decrefp) json_t *crd3 = load("{\"spec\":{\"group\":\"monitoring.coreos.com\"}}");
    assert_true(gather_wanted(crd, crd1));
    assert_true(gather_wanted(crd, crd2));
    assert_false(gather_wanted(crd, crd3));

    /* a node's facts */
    _cleanup_(json_decrefp) json_t *node =
        load("{\"metadata\":{\"name\":\"n\",\"labels\":{\"a\":\"b\"},\"annotations\":{\"c\":\"d\"},"
             "\"uid\":\"u\"},\"spec\":{\"taints\":[{\"key\":\"k\"}]},"
             "\"status\":{\"conditions\":[{\"type\":\"Ready\"}],\"images\":[1,2,3]}}");
    _cleanup_(json_decrefp) json_t *view = gather_node_view(node);
    _cleanup_(json_decrefp) json_t *want =
        load("{\"name\":\"n\",\"labels\":{\"a\":\"b\"},\"annotations\":{\"c\":\"d\"},"
             "\"taints\":[{\"key\":\"k\"}],\"conditions\":[{\"type\":\"Ready\"}]}");
    assert_true(json_equal(view, want));

    /* Events: the window, oldest first, an Event without a time kept */
    _cleanup_(json_decrefp) json_t *evs =
        load("[{\"reason\":\"new\",\"lastTimestamp\":\"2026-01-01T11:30:00Z\"},"
             "{\"reason\":\"old\",\"lastTimestamp\":\"2026-01-01T09:00:00Z\"},"
             "{\"reason\":\"series\",\"eventTime\":\"2026-01-01T11:00:00.123456Z\"},"
             "{\"reason\":\"timeless\"}]");
    uint64_t now = 0;
    assert_int_equal(time_parse_rfc3339("2026-01-01T12:00:00Z", &now), 0);
    _cleanup_(json_decrefp) json_t *w = gather_events_since(evs, now, 3600 * 1000);
    json_t *items = json_object_get(w, "items");
    assert_int_equal(json_array_size(items), 3);
    assert_string_equal(kobj_str(json_array_get(items, 0), "reason"), "timeless");
    assert_string_equal(kobj_str(json_array_get(items, 1), "reason"), "series");
    assert_string_equal(kobj_str(json_array_get(items, 2), "reason"), "new");
    assert_string_equal(kobj_str(w, "since"), "2026-01-01T11:00:00Z");
    _cleanup_(json_decrefp) json_t *all = gather_events_since(evs, now, 0);
    assert_int_equal(json_array_size(json_object_get(all, "items")), 4);
    assert_true(json_is_null(json_object_get(all, "since")));

    /* logs: the operator first, init containers, previous instances, safe paths, the cap */
    _cleanup_(json_decrefp) json_t *pods = load(
        "[{\"metadata\":{\"name\":\"a-plugin\"},\"spec\":{\"initContainers\":[{\"name\":\"init\"}],"
        "\"containers\":[{\"name\":\"plugin\"}]},"
        "\"status\":{\"containerStatuses\":[{\"name\":\"plugin\",\"restartCount\":2}]}},"
        "{\"metadata\":{\"name\":\"z-operator\",\"labels\":{\"app.kubernetes.io/component\":"
        "\"operator\"}},\"spec\":{\"containers\":[{\"name\":\"gpu-operator\"}]}},"
        "{\"metadata\":{\"name\":\"../evil\"},\"spec\":{\"containers\":[{\"name\":\"c/x\"}]}}]");
    struct gather_log *logs = NULL;
    size_t n = 0, more = 0;
    gather_log_plan(pods, 16, &logs, &n, &more);
    assert_int_equal(n, 5);
    assert_int_equal(more, 0);
    assert_string_equal(logs[0].path, "logs/z-operator/gpu-operator.log");
    assert_string_equal(logs[1].path, "logs/.._evil/c_x.log");
    assert_string_equal(logs[1].pod, "../evil");
    assert_string_equal(logs[2].path, "logs/a-plugin/init.log");
    assert_string_equal(logs[3].path, "logs/a-plugin/plugin.log");
    assert_false(logs[3].previous);
    assert_string_equal(logs[4].path, "logs/a-plugin/plugin.previous.log");
    assert_true(logs[4].previous);
    free(logs);
    gather_log_plan(pods, 2, &logs, &n, &more);
    assert_int_equal(n, 2);
    assert_int_equal(more, 3);
    free(logs);

    /* the doctor's image: the operator Deployment's, else the fallback */
    _cleanup_(json_decrefp) json_t *deps = load(
        "[{\"metadata\":{\"name\":\"other\"},\"spec\":{\"template\":{\"spec\":{\"containers\":"
        "[{\"image\":\"x:1\"}]}}}},{\"metadata\":{\"name\":\"gpu-operator\",\"labels\":{\"app\":"
        "\"gpu-operator\"}},\"spec\":{\"template\":{\"spec\":{\"containers\":[{\"image\":"
        "\"registry.example/gpuop:1.2\"}]}}}}]");
    assert_string_equal(gather_doctor_image(deps, "gpuop:0"), "registry.example/gpuop:1.2");
    _cleanup_(json_decrefp) json_t *none = json_array();
    assert_string_equal(gather_doctor_image(none, "gpuop:0"), "gpuop:0");

    char part[16];
    static const char *const parts[][2] = {{"ok-name.1", "ok-name.1"},
                                           {"..", "_"},
                                           {".", "_"},
                                           {"", "_"},
                                           {"a/b", "a_b"},
                                           {"a b\n", "a_b_"},
                                           {"abcdefghijklmnopqrs", "abcdefghijklmno"}};
    for (size_t i = 0; i < ARRAY_SIZE(parts); i++) {
        gather_path_part(parts[i][0], part, sizeof(part));
        assert_string_equal(part, parts[i][1]);
    }
    assert_true(gather_api_down(-ECONNREFUSED));
    assert_true(gather_api_down(-EACCES));
    assert_false(gather_api_down(-EPERM));
    assert_false(gather_api_down(-ENOENT));
}

static void test_tar_header(void **state)
{
    (void)state;
    char b[512];
    assert_int_equal(gather_tar_header("root/status.json", 1234, 1767225600, b), 0);
    assert_string_equal(b, "root/status.json");
    assert_memory_equal(b + 100, "0000644", 8);
    assert_string_equal(b + 124, "00000002322"); /* 1234 in octal */
    assert_int_equal(b[156], '0');
    assert_memory_equal(b + 257,
                        "ustar\0"
                        "00",
                        8);
    unsigned sum = 0;
    for (int i = 0; i < 512; i++)
        sum += (i >= 148 && i < 156) ? ' ' : (unsigned char)b[i];
    assert_int_equal(strtoul(b + 148, NULL, 8), sum);
    /* a long name: split into prefix and name */
    char name[300];
    snprintf(name, sizeof(name), "r/%0150d/%090d", 0, 0);
    assert_int_equal(gather_tar_header(name, 0, 0, b), 0);
    assert_int_equal(strlen(b), 90);
    assert_int_equal(strnlen(b + 345, 155), 152);
    /* no split that fits: the bundle writes a pax header */
    snprintf(name, sizeof(name), "r/%0200d", 0);
    assert_int_equal(gather_tar_header(name, 0, 0, b), -ENAMETOOLONG);
}

/* ---- a whole bundle, read back -------------------------------------------------------------- */

struct entry {
    char name[600];
    char *data;
    size_t len;
};

/* gunzip + untar (ustar with pax path records): the entries, in order. */
static size_t untar(const char *gz, size_t gzlen, struct entry *out, size_t max)
{
    size_t cap = 64 << 20, len = 0;
    unsigned char *tar = malloc(cap);
    z_stream z = {0};
    assert_int_equal(inflateInit2(&z, 15 + 16), Z_OK);
    z.next_in = (Bytef *)gz;
    z.avail_in = (uInt)gzlen;
    z.next_out = tar;
    z.avail_out = (uInt)cap;
    assert_int_equal(inflate(&z, Z_FINISH), Z_STREAM_END);
    len = z.total_out;
    inflateEnd(&z);
    size_t n = 0, at = 0;
    char pax_path[600] = "";
    while (at + 512 <= len) {
        const char *h = (const char *)tar + at;
        if (h[0] == 0)
            break;
        size_t size = strtoul(h + 124, NULL, 8);
        const char *data = h + 512;
        if (h[156] == 'x') {
            const char *p = strstr(data, " path=");
            assert_non_null(p);
            snprintf(pax_path, sizeof(pax_path), "%.*s", (int)(strchr(p, '\n') - p - 6), p + 6);
        } else {
            assert_true(n < max);
            struct entry *e = &out[n++];
            if (pax_path[0])
                snprintf(e->name, sizeof(e->name), "%s", pax_path);
            else if (h[345])
                snprintf(e->name, sizeof(e->name), "%.155s/%.100s", h + 345, h);
            else
                snprintf(e->name, sizeof(e->name), "%.100s", h);
            pax_path[0] = 0;
            e->data = malloc(size + 1);
            memcpy(e->data, data, size);
            e->data[size] = '\0';
            e->len = size;
        }
        at += 512 + (size + 511) / 512 * 512;
    }
    /* the end: two zero blocks */
    assert_true(at + 1024 <= len);
    free(tar);
    return n;
}

static json_t *facts(void)
{
    return load("{\"version\":\"gpuop test\",\"server\":\"https://k:6443\"}");
}

static void test_bundle(void **state)
{
    (void)state;
    struct err e = {0};
    _cleanup_(json_decrefp) json_t *f = facts();
    struct gather_bundle_opts o = {
        .root = "b", .max_size = GATHER_MIN_SIZE, .now_ms = 1767225600000ull, .facts = f};
    _cleanup_(gather_bundle_freep) struct gather_bundle *b = NULL;
    assert_int_equal(gather_bundle_new(&o, &b, &e), 0);
    assert_int_equal(gather_bundle_add(b, "status.json", "{}\n", 3, "gpuop status -o json", 0, &e),
                     0);
    char longp[400];
    snprintf(longp, sizeof(longp), "logs/%0250d/main.log", 7);
    assert_int_equal(gather_bundle_add(b, longp, "line\n", 5, "a log", 1, &e), 0);
    /* unsafe paths are refused, not written */
    assert_int_equal(gather_bundle_add(b, "../x", "", 0, "x", 0, &e), -EINVAL);
    assert_int_equal(gather_bundle_add(b, "/abs", "", 0, "x", 0, &e), -EINVAL);
    assert_int_equal(gather_bundle_add(b, "a//b", "", 0, "x", 0, &e), -EINVAL);
    /* incompressible data: the bound leaves the second one out */
    size_t big = 150000;
    char *noise = malloc(big);
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < big; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        noise[i] = (char)x;
    }
    assert_int_equal(gather_bundle_add(b, "big1", noise, big, "noise", 0, &e), 0);
    assert_false(gather_bundle_full(b));
    assert_int_equal(gather_bundle_add(b, "big2", noise, big, "noise", 0, &e), 1);
    assert_true(gather_bundle_full(b));
    /* what fits only compressed: tried, and kept */
    size_t flat_len = 1 << 20;
    char *flat = malloc(flat_len);
    memset(flat, 'a', flat_len);
    assert_int_equal(gather_bundle_add(b, "flat", flat, flat_len, "flat", 0, &e), 0);
    /* what does not fit even compressed: tried, undone, and the stream goes on */
    assert_int_equal(gather_bundle_add(b, "big3", noise, big, "noise", 0, &e), 1);
    assert_int_equal(gather_bundle_add(b, "small", "s", 1, "small", 0, &e), 0);
    free(noise);
    gather_bundle_missing(b, "logs/p/c.log", "get log: pods \"p\" not found (404 NotFound) %s",
                          "https://u:pw@k:6443");
    char *gz = NULL;
    size_t gzlen = 0;
    assert_int_equal(gather_bundle_finish(b, &gz, &gzlen, &e), 0);
    assert_true(gzlen <= GATHER_MIN_SIZE);
    assert_int_equal(gather_bundle_add(b, "late", "", 0, "x", 0, &e), -EINVAL);

    struct entry ents[16];
    size_t n = untar(gz, gzlen, ents, 16);
    free(gz);
    assert_int_equal(n, 7);
    assert_string_equal(ents[0].name, "b/status.json");
    assert_string_equal(ents[0].data, "{}\n");
    char want[420];
    snprintf(want, sizeof(want), "b/%s", longp);
    assert_string_equal(ents[1].name, want);
    assert_string_equal(ents[2].name, "b/big1");
    assert_int_equal(ents[2].len, big);
    assert_string_equal(ents[3].name, "b/flat");
    assert_int_equal(ents[3].len, flat_len);
    assert_true(ents[3].data[0] == 'a' && ents[3].data[flat_len - 1] == 'a');
    assert_string_equal(ents[4].name, "b/small");
    assert_string_equal(ents[5].name, "b/MANIFEST");
    assert_string_equal(ents[6].name, "b/manifest.json");
    _cleanup_(json_decrefp) json_t *m = load(ents[6].data);
    assert_string_equal(kobj_path_str(m, "facts.server"), "https://k:6443");
    json_t *col = json_object_get(m, "collected");
    assert_int_equal(json_array_size(col), 5);
    assert_string_equal(kobj_str(json_array_get(col, 1), "what"), "a log");
    assert_int_equal(json_integer_value(json_object_get(json_array_get(col, 1), "redactions")), 1);
    json_t *mis = json_object_get(m, "missing");
    assert_int_equal(json_array_size(mis), 3);
    assert_string_equal(kobj_str(json_array_get(mis, 0), "what"), "big2");
    assert_true(str_has_prefix(kobj_str(json_array_get(mis, 0), "why"), "the size bound: 150000"));
    assert_string_equal(kobj_str(json_array_get(mis, 1), "what"), "big3");
    /* the index's lines are redacted too */
    assert_non_null(strstr(kobj_str(json_array_get(mis, 2), "why"), "https://<redacted>@k:6443"));
    assert_null(strstr(ents[5].data, "pw@"));
    assert_non_null(strstr(ents[5].data, "\nNot collected: 3\n  big2: the size bound"));
    assert_non_null(strstr(ents[5].data, "server      https://k:6443\n"));
    for (size_t i = 0; i < n; i++)
        free(ents[i].data);
    free(flat);

    /* bad options */
    struct gather_bundle *bad = NULL;
    o.max_size = GATHER_MIN_SIZE - 1;
    assert_int_equal(gather_bundle_new(&o, &bad, &e), -EINVAL);
    o.max_size = GATHER_MIN_SIZE;
    o.root = "a/b";
    assert_int_equal(gather_bundle_new(&o, &bad, &e), -EINVAL);
    o.root = "..";
    assert_int_equal(gather_bundle_new(&o, &bad, &e), -EINVAL);
}

/* Many small entries past the bound: the file stays under it, the index lists what fits and
 * counts the rest. */
static void test_bundle_index_bound(void **state)
{
    (void)state;
    struct err e = {0};
    _cleanup_(json_decrefp) json_t *f = facts();
    struct gather_bundle_opts o = {
        .root = "b", .max_size = GATHER_MIN_SIZE, .now_ms = 0, .facts = f};
    _cleanup_(gather_bundle_freep) struct gather_bundle *b = NULL;
    assert_int_equal(gather_bundle_new(&o, &b, &e), 0);
    char path[64], data[2048];
    uint64_t x = 1;
    size_t added = 0, out = 0;
    for (int i = 0; i < 3000; i++) {
        for (size_t k = 0; k < sizeof(data); k++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            data[k] = (char)x;
        }
        snprintf(path, sizeof(path), "objects/object-%04d.yaml", i);
        int r = gather_bundle_add(b, path, data, sizeof(data), "an object", 0, &e);
        assert_true(r == 0 || r == 1);
        if (r == 0)
            added++;
        else
            out++;
    }
    for (int i = 0; i < 2000; i++) {
        snprintf(path, sizeof(path), "logs/pod-%04d/c.log", i);
        gather_bundle_missing(b, path,
                              "get log: the container has no log yet, a long reason to "
                              "fill the index beyond its slack quickly");
    }
    assert_true(added > 50);
    assert_true(out > 1000);
    char *gz = NULL;
    size_t gzlen = 0;
    assert_int_equal(gather_bundle_finish(b, &gz, &gzlen, &e), 0);
    assert_true(gzlen <= GATHER_MIN_SIZE);
    struct entry *ents = calloc(4096, sizeof(*ents));
    size_t n = untar(gz, gzlen, ents, 4096);
    free(gz);
    assert_int_equal(n, added + 2);
    _cleanup_(json_decrefp) json_t *m = load(ents[n - 1].data);
    json_int_t unlisted = json_integer_value(kobj_path(m, "unlisted.missing"));
    assert_true(unlisted > 0);
    assert_int_equal((size_t)unlisted + json_array_size(json_object_get(m, "missing")), out + 2000);
    assert_non_null(strstr(ents[n - 2].data, "more, not listed (the size bound)"));
    for (size_t i = 0; i < n; i++)
        free(ents[i].data);
    free(ents);
}

/* ---- the run -------------------------------------------------------------------------------- */

static json_t *yml(const char *s)
{
    json_t *v = NULL;
    struct err e = {0};
    if (yaml_parse_one(s, strlen(s), "test", &v, &e) < 0)
        fail_msg("%s", err_msg(&e));
    return v;
}

#define T0 1767225600000ull /* 2026-01-01T00:00:00Z */

/* The options as typed: sizes as quantities within their bounds, the namespace, the output. */
static void test_options(void **state)
{
    (void)state;
    static const struct {
        const char *max_size, *log_bytes, *ns, *output;
        int rc;
        uint64_t want_max, want_log;
        const char *msg;
    } cases[] = {
        {NULL, NULL, NULL, NULL, 0, 64ull << 20, 1u << 20, NULL},
        {"256Ki", "1Ki", "gpu", "x.tgz", 0, 256u << 10, 1024, NULL},
        {"4Gi", "32Mi", NULL, NULL, 0, 4ull << 30, 32u << 20, NULL},
        {"1G", "2048", NULL, NULL, 0, 1000000000ull, 2048, NULL},
        {"255Ki", NULL, NULL, NULL, -ERANGE, 0, 0,
         "--max-size 255Ki: expected 262144 to 4294967296 bytes"},
        {"5Gi", NULL, NULL, NULL, -ERANGE, 0, 0,
         "--max-size 5Gi: expected 262144 to 4294967296 bytes"},
        {"lots", NULL, NULL, NULL, -EINVAL, 0, 0, "--max-size lots: expected a size such as 64Mi"},
        {"-1Mi", NULL, NULL, NULL, -EINVAL, 0, 0, "--max-size -1Mi: expected a size such as 64Mi"},
        {NULL, "33Mi", NULL, NULL, -ERANGE, 0, 0,
         "--log-bytes 33Mi: expected 1024 to 33554432 bytes"},
        {NULL, "1023", NULL, NULL, -ERANGE, 0, 0,
         "--log-bytes 1023: expected 1024 to 33554432 bytes"},
        {NULL, NULL, "", NULL, -EINVAL, 0, 0, "--namespace \"\": expected a namespace name"},
        {NULL, NULL, "n234567890123456789012345678901234567890123456789012345678901234", NULL,
         -EINVAL, 0, 0,
         "--namespace \"n234567890123456789012345678901234567890123456789012345678901234\": "
         "expected a namespace name"},
        {NULL, NULL, NULL, "", -EINVAL, 0, 0, "--output: expected a file name"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        struct gather_options o = {0};
        gather_options_defaults(&o);
        assert_string_equal(o.ns, "gpu-operator");
        assert_int_equal(o.tail, 1000);
        assert_int_equal(o.doctor_timeout_ms, 120000);
        if (cases[i].max_size)
            o.max_size_s = cases[i].max_size;
        if (cases[i].log_bytes)
            o.log_bytes_s = cases[i].log_bytes;
        if (cases[i].ns)
            o.ns = cases[i].ns;
        if (cases[i].output)
            o.output = cases[i].output;
        struct err e = {0};
        int rc = gather_options_check(&o, &e);
        if (rc != cases[i].rc)
            fail_msg("case %zu: %d (%s)", i, rc, err_msg(&e));
        if (rc == 0) {
            assert_int_equal(o.max_size, cases[i].want_max);
            assert_int_equal(o.log_bytes, cases[i].want_log);
        } else {
            assert_int_equal(o.max_size, 0); /* written only on success */
            assert_string_equal(err_msg(&e), cases[i].msg);
        }
    }
}

/* The file written and the bundle's folder: the default name, a folder, a file; the folder it
 * goes into. */
static void test_output(void **state)
{
    (void)state;
    static const struct {
        const char *output;
        bool is_dir;
        const char *path, *root, *dir;
    } cases[] = {
        {NULL, false, "gpuop-gather-20260101T000000Z.tar.gz", "gpuop-gather-20260101T000000Z", "."},
        {"out", true, "out/gpuop-gather-20260101T000000Z.tar.gz", "gpuop-gather-20260101T000000Z",
         "out"},
        {"/tmp/", true, "/tmp/gpuop-gather-20260101T000000Z.tar.gz",
         "gpuop-gather-20260101T000000Z", "/tmp"},
        {"/b.tgz", false, "/b.tgz", "b", "/"},
        {"a/b/case 7.tar.gz", false, "a/b/case 7.tar.gz", "case_7", "a/b"},
        {"bundle.gz", false, "bundle.gz", "bundle", "."},
        {"a/..", false, "a/..", "_", "a"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        char path[256], root[96], dir[256];
        gather_output_path(cases[i].output, cases[i].is_dir, T0, path, sizeof(path), root,
                           sizeof(root));
        assert_string_equal(path, cases[i].path);
        assert_string_equal(root, cases[i].root);
        gather_output_dir(path, dir, sizeof(dir));
        assert_string_equal(dir, cases[i].dir);
    }
}

/* The index's facts: the command as given, no credential, the defaults said. */
static void test_facts(void **state)
{
    (void)state;
    struct gather_options o = {0};
    gather_options_defaults(&o);
    o.max_size = 64ull << 20;
    _cleanup_(json_decrefp) json_t *f = gather_facts(&o, "https://k:6443", T0);
    assert_string_equal(kobj_str(f, "command"),
                        "gpuop gather --namespace gpu-operator --tail 1000 --log-bytes 1Mi "
                        "--max-size 64Mi");
    assert_string_equal(kobj_str(f, "created"), "2026-01-01T00:00:00Z");
    assert_string_equal(kobj_str(f, "context"), "(current)");
    assert_string_equal(kobj_str(f, "server"), "https://k:6443");
    assert_int_equal(json_integer_value(json_object_get(f, "maxSize")), 64 << 20);
    o.since_ms = 3600000;
    o.doctor = true;
    o.context = "prod";
    o.kubeconfig = "/k/config";
    _cleanup_(json_decrefp) json_t *g = gather_facts(&o, "https://k:6443", T0);
    assert_string_equal(kobj_str(g, "command"),
                        "gpuop gather --namespace gpu-operator --tail 1000 --log-bytes 1Mi "
                        "--max-size 64Mi --since 3600s --doctor --context prod");
    assert_string_equal(kobj_str(g, "kubeconfig"), "/k/config");
}

/* The names of what goes in, the lists kept for later, the doctor's files, a log's end. */
static void test_entries(void **state)
{
    (void)state;
    char what[256], dir[160], path[512], desc[384];
    size_t n_sources = 0, kept[5] = {0};
    for (const struct gather_source *src = gather_sources; src->res; src++, n_sources++) {
        gather_source_names(src, "gpu", what, sizeof(what), dir, sizeof(dir));
        if (src->res->namespaced) {
            assert_true(strncmp(dir, "namespaces/gpu/", 15) == 0);
            assert_non_null(strstr(what, " in namespace gpu"));
        } else {
            assert_true(strncmp(dir, "cluster/", 8) == 0);
            assert_string_equal(what, src->res->plural);
        }
        kept[gather_keep_of(src)]++;
    }
    assert_true(n_sources > 4);
    /* each list the status view and the doctor need comes from exactly one source */
    for (int k = GATHER_KEEP_POLICIES; k <= GATHER_KEEP_DEPLOYMENTS; k++)
        assert_int_equal(kept[k], 1);
    _cleanup_(json_decrefp) json_t *obj = yml("{metadata: {name: ../x y}}");
    gather_object_names("cluster/clusterroles", "ClusterRole", obj, path, sizeof(path), desc,
                        sizeof(desc));
    assert_string_equal(path, "cluster/clusterroles/.._x_y.yaml");
    assert_string_equal(desc, "ClusterRole ../x y");

    gather_doctor_path("gpu-1", true, path, sizeof(path));
    assert_string_equal(path, "doctor/gpu-1.json");
    gather_doctor_path("a/b", false, path, sizeof(path));
    assert_string_equal(path, "doctor/a_b.log");
    static const struct {
        int code;
        bool report;
    } exits[] = {{0, true},  {3, true},   {4, true},   {1, false},
                 {2, false}, {-1, false}, {137, false}};
    for (size_t i = 0; i < ARRAY_SIZE(exits); i++)
        assert_int_equal(gather_doctor_report(exits[i].code), exits[i].report);

    static const struct {
        const char *log;
        size_t max, start;
    } tails[] = {
        {"abc\ndef\n", 100, 0}, /* within the bound: all */
        {"abc\ndef\n", 8, 0},   /* exactly the bound: all */
        {"abc\ndef\n", 7, 4},   /* from the next line's start */
        {"ab\ncd\nef", 6, 3},   /* the cut right on a newline: after it */
        {"abcdefgh\n", 4, 5},   /* the only newline is the last byte: the bound's cut */
        {"abc\ndefgh", 5, 4},   /* no newline after the cut: the bound's cut */
    };
    for (size_t i = 0; i < ARRAY_SIZE(tails); i++)
        if (gather_log_tail_start(tails[i].log, strlen(tails[i].log), tails[i].max) !=
            tails[i].start)
            fail_msg("tail %zu: %zu", i,
                     gather_log_tail_start(tails[i].log, strlen(tails[i].log), tails[i].max));
}

/* status.json from the lists read: a list that could not be read counts as empty; redacted. */
static void test_status_json(void **state)
{
    (void)state;
    /* a failed validation whose reason quotes a URL with a password */
    _cleanup_(json_decrefp) json_t *nodes =
        yml("- metadata:\n"
            "    name: gpu-1\n"
            "    labels: {nvidia.com/gpu.present: 'true'}\n"
            "    annotations:\n"
            "      validation.gpuop.dev/driver: '{\"state\":\"failed\",\"reason\":\"pull "
            "https://u:hunter2@reg.example/d failed\",\"time\":\"2026-01-01T00:00:00Z\"}'\n"
            "  status: {capacity: {nvidia.com/gpu: '2'}, allocatable: {nvidia.com/gpu: '2'}}\n");
    struct gather_status_in in = {.nodes = nodes, .now_ms = T0};
    char *text = NULL;
    size_t red = 99;
    struct err e = {0};
    assert_int_equal(gather_status_json(&in, &text, &red, &e), 0);
    assert_non_null(text);
    assert_true(text[strlen(text) - 1] == '\n');
    json_error_t je;
    _cleanup_(json_decrefp) json_t *model = json_loads(text, 0, &je);
    assert_non_null(model);
    assert_non_null(json_object_get(model, "summary"));
    assert_null(strstr(text, "hunter2"));
    assert_non_null(strstr(text, "https://<redacted>@reg.example/d"));
    assert_true(red >= 1);
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_redact_text),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_redact_object),
        cmocka_unit_test(test_plan),
        cmocka_unit_test(test_tar_header),
        cmocka_unit_test(test_bundle),
        cmocka_unit_test(test_bundle_index_bound),
        cmocka_unit_test(test_options),
        cmocka_unit_test(test_output),
        cmocka_unit_test(test_facts),
        cmocka_unit_test(test_entries),
        cmocka_unit_test(test_status_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
