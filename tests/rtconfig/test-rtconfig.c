/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rtconfig: the pure editing cores by table (containerd per config version, CRI-O, docker),
 * idempotence, bad input (a config that does not parse: refused with the line, nothing written),
 * names, detection and the policy mismatch, and configure/restore on a host root.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <string.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "rtconfig.h"

static const struct rtconfig_options opts = {.runtime_name = "nvidia",
                                             .runtime_path = "/usr/local/nvidia/toolkit/gpuop",
                                             .enable_cdi = true};

static struct rtconfig_text txt(const char *s)
{
    return (struct rtconfig_text){s, s ? strlen(s) : 0};
}

/* ---- containerd --------------------------------------------------------------------------- */

static void containerd_case(const char *in, const char *main_has, const char *dropin_has)
{
    struct sbuf m, d, m2, d2;
    struct err e = {0};
    sbuf_init(&m, 1 << 20);
    sbuf_init(&d, 1 << 20);
    sbuf_init(&m2, 1 << 20);
    sbuf_init(&d2, 1 << 20);
    assert_int_equal(rtconfig_containerd_edit(txt(in), &opts, &m, &d, &e), 0);
    assert_non_null(strstr(m.data, main_has));
    assert_non_null(strstr(d.data, dropin_has));
    assert_non_null(strstr(d.data, "BinaryName = \"/usr/local/nvidia/toolkit/gpuop\""));
    assert_non_null(strstr(d.data, "enable_cdi = true"));
    assert_non_null(strstr(d.data, "cdi_spec_dirs = [ \"/etc/cdi\", \"/var/run/cdi\" ]"));
    /* The original's bytes are all there, in order: only lines were added. */
    if (in && *in) {
        const char *p = m.data;
        for (const char *l = in; *l;) {
            const char *nl = strchr(l, '\n');
            size_t n = nl ? (size_t)(nl - l) : strlen(l);
            char *line = strndup(l, n);
            if (!strstr(line, "imports") && !strstr(line, "\"/b.toml\"")) {
                p = strstr(p, line);
                if (!p)
                    fail_msg("line \"%s\" of the original is gone", line);
            }
            free(line);
            l += n + (nl ? 1 : 0);
        }
    }
    /* Idempotent: the output fed back gives the same bytes. */
    assert_int_equal(
        rtconfig_containerd_edit((struct rtconfig_text){m.data, m.len}, &opts, &m2, &d2, &e), 0);
    assert_string_equal(m.data, m2.data);
    assert_string_equal(d.data, d2.data);
    sbuf_free(&m);
    sbuf_free(&d);
    sbuf_free(&m2);
    sbuf_free(&d2);
}

static void test_containerd_versions(void **state)
{
    (void)state;
    /* version 1: no version key, plugin "cri"; the drop-in keeps version 1. */
    containerd_case("[plugins.cri.containerd.runtimes.runc]\n  runtime_type = "
                    "\"io.containerd.runc.v2\"\n",
                    "imports = [\"/etc/containerd/conf.d/99-nvidia.toml\"]\n[plugins.cri",
                    "version = 1\n\n[plugins.cri]");
    containerd_case("version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc."
                    "options]\n  SystemdCgroup = true\n",
                    "version = 2\nimports = [",
                    "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.nvidia.options]\n"
                    "BinaryName = \"/usr/local/nvidia/toolkit/gpuop\"\nSystemdCgroup = true");
    containerd_case("version = 3\n", "version = 3\nimports = [",
                    "[plugins.\"io.containerd.cri.v1.runtime\"]");
    /* Empty and missing: version 2. */
    containerd_case("", "version = 2\nimports = [", "version = 2\n");
    containerd_case(NULL, "version = 2\nimports = [", "runtime_type = \"io.containerd.runc.v2\"");
    containerd_case("# only a comment\n", "version = 2\n", "io.containerd.grpc.v1.cri");
    /* An existing imports array gets the drop-in appended; a trailing comment stays. */
    containerd_case(
        "version = 2\nimports = [\"/a.toml\", # first\n  \"/b.toml\"] # mine\n",
        "imports = [\"/a.toml\", \"/b.toml\", \"/etc/containerd/conf.d/99-nvidia.toml\"] "
        "# mine",
        "version = 2");
    /* Without a runc entry, the default runtime's is cloned. */
    containerd_case("version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd]\n"
                    "default_runtime_name = \"crun\"\n[plugins.\"io.containerd.grpc.v1.cri\"."
                    "containerd.runtimes.crun]\nruntime_type = \"io.containerd.runc.v2\"\n"
                    "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.crun.options]\n"
                    "BinaryName = \"/usr/bin/crun\"\n",
                    "default_runtime_name = \"crun\"",
                    "BinaryName = \"/usr/local/nvidia/toolkit/gpuop\"");
}

static void test_containerd_default_and_bad(void **state)
{
    (void)state;
    struct sbuf m, d;
    struct err e = {0};
    struct rtconfig_options o = opts;
    o.set_as_default = true;
    sbuf_init(&m, 1 << 20);
    sbuf_init(&d, 1 << 20);
    assert_int_equal(rtconfig_containerd_edit(txt("version = 2\n"), &o, &m, &d, &e), 0);
    assert_non_null(strstr(d.data, "default_runtime_name = \"nvidia\""));

    static const struct {
        const char *in, *msg;
    } bad[] = {
        {"version = 2\n[plugins\nx = 1\n", "line 2"},
        {"version = 2\nversion = 3\n", "line 2"},
        {"a = \"unterminated\n", "line 1"},
        {"version = 7\n", "not a containerd config version"},
        {"version = \"2\"\n", "not an integer"},
        {"version = 2\nimports = \"/x\"\n", "imports"},
        {"version = 2\nplugins = 3\n", "not a table"},
        {"version = 2\n[plugins.\"io.containerd.grpc.v1.cri\"]\ncontainerd = 1\n", "not a table"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        sbuf_reset(&m);
        sbuf_reset(&d);
        err_clear(&e);
        if (rtconfig_containerd_edit(txt(bad[i].in), &opts, &m, &d, &e) >= 0)
            fail_msg("case %zu accepted", i);
        if (!strstr(err_msg(&e), bad[i].msg))
            fail_msg("case %zu: \"%s\" lacks \"%s\"", i, err_msg(&e), bad[i].msg);
    }
    sbuf_free(&m);
    sbuf_free(&d);
}

/* ---- CRI-O -------------------------------------------------------------------------------- */

static void test_crio(void **state)
{
    (void)state;
    struct sbuf d;
    struct err e = {0};
    sbuf_init(&d, 1 << 20);
    struct rtconfig_text in[] = {
        txt("[crio.runtime.runtimes.crun]\nruntime_path = \"/usr/bin/crun\"\nmonitor_path = "
            "\"/usr/libexec/crio/conmon\"\n"),
        txt("[crio.runtime.runtimes.runc]\nruntime_path = \"/usr/bin/runc\"\nruntime_root = "
            "\"/run/runc\"\n"),
    };
    assert_int_equal(rtconfig_crio_edit(in, 2, &opts, &d, NULL, &e), 0);
    assert_non_null(strstr(d.data, "[crio.runtime.runtimes.nvidia]\nruntime_path = "
                                   "\"/usr/local/nvidia/toolkit/gpuop\"\nruntime_root = "
                                   "\"/run/runc\"\nruntime_type = \"oci\""));
    assert_null(strstr(d.data, "default_runtime"));
    /* Only crun: its keys. */
    sbuf_reset(&d);
    assert_int_equal(rtconfig_crio_edit(in, 1, &opts, &d, NULL, &e), 0);
    assert_non_null(strstr(d.data, "monitor_path = \"/usr/libexec/crio/conmon\""));
    /* Nothing: the handler alone; as default. */
    struct rtconfig_options o = opts;
    o.set_as_default = true;
    sbuf_reset(&d);
    assert_int_equal(rtconfig_crio_edit(NULL, 0, &o, &d, NULL, &e), 0);
    assert_non_null(strstr(d.data, "default_runtime = \"nvidia\""));
    /* A bad second file is named by index and line. */
    struct rtconfig_text bad[] = {in[0], txt("[crio.runtime]\nx = = 1\n")};
    size_t at = 99;
    sbuf_reset(&d);
    assert_true(rtconfig_crio_edit(bad, 2, &opts, &d, &at, &e) < 0);
    assert_int_equal(at, 1);
    assert_non_null(strstr(err_msg(&e), "line 2"));
    sbuf_free(&d);
}

/* ---- docker ------------------------------------------------------------------------------- */

static void docker_case(const char *in, const struct rtconfig_options *o, const char *want)
{
    struct sbuf out, again;
    struct err e = {0};
    sbuf_init(&out, 1 << 20);
    sbuf_init(&again, 1 << 20);
    assert_int_equal(rtconfig_docker_edit(txt(in), o, &out, &e), 0);
    if (strcmp(out.data, want) != 0)
        fail_msg("got\n%s\nwant\n%s", out.data, want);
    assert_int_equal(rtconfig_docker_edit((struct rtconfig_text){out.data, out.len}, o, &again, &e),
                     0);
    assert_string_equal(out.data, again.data);
    sbuf_free(&out);
    sbuf_free(&again);
}

static void test_docker(void **state)
{
    (void)state;
    struct rtconfig_options def = opts;
    def.set_as_default = true;
    docker_case("{\n  \"log-driver\": \"json-file\"\n}\n", &opts,
                "{\n  \"log-driver\": \"json-file\",\n  \"runtimes\": {\n    \"nvidia\": {\n"
                "      \"path\": \"/usr/local/nvidia/toolkit/gpuop\",\n      \"args\": []\n"
                "    }\n  },\n  \"features\": {\n    \"cdi\": true\n  }\n}\n");
    docker_case("{\"a\": 1, \"features\": {\"buildkit\": true}}", &def,
                "{\"a\": 1, \"features\": {\"buildkit\": true, \"cdi\": true}, \"runtimes\": "
                "{\"nvidia\": {\"path\": \"/usr/local/nvidia/toolkit/gpuop\", \"args\": []}}, "
                "\"default-runtime\": \"nvidia\"}");
    /* A stale handler path is replaced in place; other runtimes stay. */
    docker_case("{\"runtimes\": {\"nvidia\": {\"path\": \"/old\"}, \"x\": {\"path\": \"/x\"}}, "
                "\"features\": {\"cdi\": false}}",
                &opts,
                "{\"runtimes\": {\"nvidia\": {\"path\": \"/usr/local/nvidia/toolkit/gpuop\", "
                "\"args\": []}, \"x\": {\"path\": \"/x\"}}, \"features\": {\"cdi\": true}}");
    docker_case("", &opts,
                "{\n    \"runtimes\": {\n        \"nvidia\": {\n            \"path\": "
                "\"/usr/local/nvidia/toolkit/gpuop\",\n            \"args\": []\n        }\n    "
                "},\n    \"features\": {\n        \"cdi\": true\n    }\n}\n");

    static const struct {
        const char *in, *msg;
    } bad[] = {
        {"{\n  \"a\": 1,\n}\n", "line 3"},
        {"[1, 2]", "not a JSON object"},
        {"{\"runtimes\": []}", "runtimes"},
        {"{\"features\": 1}", "features"},
        {"{\"runtimes\": {}, \"runtimes\": {\"x\": {}}}", "not written"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        struct sbuf out;
        struct err e = {0};
        sbuf_init(&out, 1 << 20);
        assert_true(rtconfig_docker_edit(txt(bad[i].in), &opts, &out, &e) < 0);
        if (!strstr(err_msg(&e), bad[i].msg))
            fail_msg("case %zu: \"%s\" lacks \"%s\"", i, err_msg(&e), bad[i].msg);
        sbuf_free(&out);
    }
}

/* ---- uninstall: the undoing cores ----------------------------------------------------------
 * Each case: ours is what configure writes for base; cur is ours with one piece of text replaced
 * (an administrator's edit since), or given whole; the undo must say want and give want_text. */

/* s with the first `from` replaced by `to` (malloc'ed). */
static char *replaced(const char *s, const char *from, const char *to)
{
    const char *at = strstr(s, from);
    if (!at)
        fail_msg("\"%s\" not in\n%s", from, s);
    return xasprintf("%.*s%s%s", (int)(at - s), s, to, at + strlen(from));
}

enum which { CONTAINERD, DOCKER };

static void undo_case(enum which w, const char *base, const char *from, const char *to,
                      enum rtconfig_undo want, const char *want_text, const char *want_why)
{
    struct sbuf ours, dropin, out;
    struct err e = {0};
    sbuf_init(&ours, 1 << 20);
    sbuf_init(&dropin, 1 << 20);
    sbuf_init(&out, 1 << 20);
    if (w == CONTAINERD)
        assert_int_equal(rtconfig_containerd_edit(txt(base), &opts, &ours, &dropin, &e), 0);
    else
        assert_int_equal(rtconfig_docker_edit(txt(base), &opts, &ours, &e), 0);
    char *cur = !from ? xstrdup(ours.data) : !*from ? xstrdup(to) : replaced(ours.data, from, to);
    struct rtconfig_undo_file u = {0};
    int r = w == CONTAINERD ? rtconfig_containerd_unedit(txt(base), txt(cur), &opts, &out, &u, &e)
                            : rtconfig_docker_unedit(txt(base), txt(cur), &opts, &out, &u, &e);
    if (r < 0)
        fail_msg("undo of\n%s\nfailed: %s", cur, err_msg(&e));
    if (u.what != want)
        fail_msg("undo of\n%s\nis %s (%s), want %s", cur, rtconfig_undo_name(u.what), u.why,
                 rtconfig_undo_name(want));
    if (want_text && (!out.data || strcmp(out.data, want_text) != 0))
        fail_msg("undo of\n%s\ngave\n%s\nwant\n%s", cur, out.data ? out.data : "(nothing)",
                 want_text);
    if (!want_text)
        assert_int_equal(out.len, 0);
    if (want_why && !strstr(u.why, want_why))
        fail_msg("why \"%s\" lacks \"%s\"", u.why, want_why);
    free(cur);
    sbuf_free(&ours);
    sbuf_free(&dropin);
    sbuf_free(&out);
}

static void test_containerd_undo(void **state)
{
    (void)state;
    const char *v2 = "version = 2\n# the site's\n[plugins.\"io.containerd.grpc.v1.cri\"]\n"
                     "  sandbox_image = \"pause:3.9\"\n";
    const char *imp = "imports = [\"/etc/containerd/conf.d/99-nvidia.toml\"]\n";
    /* Nothing but gpuop's change: the original; a file gpuop created: removed. */
    undo_case(CONTAINERD, v2, NULL, NULL, RTCONFIG_UNDO_ORIGINAL, NULL, NULL);
    undo_case(CONTAINERD, "", NULL, NULL, RTCONFIG_UNDO_ORIGINAL, NULL, NULL);
    undo_case(CONTAINERD, NULL, NULL, NULL, RTCONFIG_UNDO_REMOVE, NULL, NULL);
    /* An edit since stays; only the imports line goes. */
    undo_case(CONTAINERD, v2, "pause:3.9\"\n", "pause:3.10\"\n  max_concurrent_downloads = 5\n",
              RTCONFIG_UNDO_EDIT,
              "version = 2\n# the site's\n[plugins.\"io.containerd.grpc.v1.cri\"]\n"
              "  sandbox_image = \"pause:3.10\"\n  max_concurrent_downloads = 5\n",
              NULL);
    /* The administrator's own imports since: only gpuop's entry goes. */
    undo_case(CONTAINERD, "version = 2\nimports = [\"/a.toml\"]\n", "99-nvidia.toml\"]",
              "99-nvidia.toml\", \"/b.toml\"]", RTCONFIG_UNDO_EDIT,
              "version = 2\nimports = [\"/a.toml\", \"/b.toml\"]\n", NULL);
    undo_case(
        CONTAINERD, v2, imp, "imports = [\"/etc/containerd/conf.d/99-nvidia.toml\", \"/c\"]\n",
        RTCONFIG_UNDO_EDIT,
        "version = 2\nimports = [\"/c\"]\n# the site's\n[plugins.\"io.containerd.grpc.v1.cri\"]\n"
        "  sandbox_image = \"pause:3.9\"\n",
        NULL);
    /* A comment on gpuop's line is the administrator's: the line stays, the entry goes. */
    undo_case(
        CONTAINERD, v2, "99-nvidia.toml\"]\n", "99-nvidia.toml\"] # keep\n", RTCONFIG_UNDO_EDIT,
        "version = 2\nimports = [] # keep\n# the site's\n[plugins.\"io.containerd.grpc.v1.cri\"]\n"
        "  sandbox_image = \"pause:3.9\"\n",
        NULL);
    /* A file gpuop created, extended since: the extension (and the version it was written for)
     * stays; with only a comment added, gpuop's version line goes too. */
    undo_case(CONTAINERD, NULL, "toml\"]\n",
              "toml\"]\n[plugins.\"io.containerd.grpc.v1.cri\"]\n  sandbox_image = \"x\"\n",
              RTCONFIG_UNDO_EDIT,
              "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\"]\n  sandbox_image = \"x\"\n",
              NULL);
    undo_case(CONTAINERD, NULL, "toml\"]\n", "toml\"]\n# mine\n", RTCONFIG_UNDO_EDIT, "# mine\n",
              NULL);
    undo_case(CONTAINERD, NULL, "toml\"]\n", "toml\"]\n\n\n", RTCONFIG_UNDO_REMOVE, NULL, NULL);
    /* The entry taken out by hand: nothing of gpuop's left. */
    undo_case(CONTAINERD, v2, imp, "", RTCONFIG_UNDO_NONE, NULL, "no imports entry");
    undo_case(CONTAINERD, v2, "", "version = 2\n", RTCONFIG_UNDO_NONE, NULL, "no imports entry");

    /* A config that does not parse now: an error naming the line, nothing decided. */
    struct sbuf out;
    struct err e = {0};
    struct rtconfig_undo_file u = {0};
    sbuf_init(&out, 1 << 20);
    assert_int_equal(
        rtconfig_containerd_unedit(txt(v2), txt("version = 2\n[plugins\n"), &opts, &out, &u, &e),
        -EINVAL);
    assert_non_null(strstr(err_msg(&e), "line 2"));
    assert_int_equal(out.len, 0);
    /* Gone: nothing to do. */
    assert_int_equal(rtconfig_containerd_unedit(txt(v2), txt(NULL), &opts, &out, &u, &e), 0);
    assert_int_equal(u.what, RTCONFIG_UNDO_NONE);
    sbuf_free(&out);
}

static void test_docker_undo(void **state)
{
    (void)state;
    const char *pretty = "{\n  \"log-driver\": \"json-file\"\n}\n";
    undo_case(DOCKER, pretty, NULL, NULL, RTCONFIG_UNDO_ORIGINAL, NULL, NULL);
    undo_case(DOCKER, NULL, NULL, NULL, RTCONFIG_UNDO_REMOVE, NULL, NULL);
    /* A member added since stays; gpuop's go, with the objects gpuop made for them. */
    undo_case(DOCKER, pretty, "\"json-file\",", "\"json-file\",\n  \"debug\": true,",
              RTCONFIG_UNDO_EDIT, "{\n  \"log-driver\": \"json-file\",\n  \"debug\": true\n}\n",
              NULL);
    /* A daemon.json gpuop created, extended since: the extension stays. */
    undo_case(DOCKER, NULL, "{\n", "{\n    \"log-level\": \"debug\",\n", RTCONFIG_UNDO_EDIT,
              "{\n    \"log-level\": \"debug\"\n}\n", NULL);
    /* Other runtimes and features added since stay. */
    undo_case(DOCKER, NULL, "\"cdi\": true", "\"cdi\": true, \"buildkit\": true",
              RTCONFIG_UNDO_EDIT, "{\n    \"features\": {\n        \"buildkit\": true\n    }\n}\n",
              NULL);
    undo_case(DOCKER, "{\"a\": 1}", "{\"nvidia\"", "{\"crun\": {\"path\": \"/c\"}, \"nvidia\"",
              RTCONFIG_UNDO_EDIT, "{\"a\": 1, \"runtimes\": {\"crun\": {\"path\": \"/c\"}}}", NULL);
    /* What the original had comes back: a handler path, features.cdi false, a default. */
    struct rtconfig_options def = opts;
    def.set_as_default = true;
    (void)def;
    undo_case(DOCKER,
              "{\"runtimes\": {\"nvidia\": {\"path\": \"/old\"}, \"x\": {\"path\": \"/x\"}}, "
              "\"features\": {\"cdi\": false}}",
              "\"cdi\": true}", "\"cdi\": true}, \"debug\": true", RTCONFIG_UNDO_EDIT,
              "{\"runtimes\": {\"nvidia\": {\"path\": \"/old\"}, \"x\": {\"path\": \"/x\"}}, "
              "\"features\": {\"cdi\": false}, \"debug\": true}",
              NULL);
    /* gpuop's handler changed by hand: gpuop cannot tell; the whole file stays. */
    undo_case(DOCKER, pretty, "/usr/local/nvidia/toolkit/gpuop", "/opt/mine", RTCONFIG_UNDO_LEFT,
              NULL, "runtimes.nvidia changed since gpuop set it");
    undo_case(DOCKER, pretty, "\"cdi\": true", "\"cdi\": false", RTCONFIG_UNDO_LEFT, NULL,
              "features.cdi");
    /* Everything of gpuop's taken out by hand. */
    undo_case(DOCKER, pretty, "", "{\"log-driver\": \"journald\"}", RTCONFIG_UNDO_NONE, NULL,
              "nothing of gpuop's");
    /* Does not parse now: an error naming the line. */
    struct sbuf out;
    struct err e = {0};
    struct rtconfig_undo_file u = {0};
    sbuf_init(&out, 1 << 20);
    assert_int_equal(
        rtconfig_docker_unedit(txt(pretty), txt("{\n  \"a\": 1,\n}\n"), &opts, &out, &u, &e),
        -EINVAL);
    assert_non_null(strstr(err_msg(&e), "line 3"));
    assert_int_equal(out.len, 0);
    sbuf_free(&out);
}

static void test_docker_undo_default(void **state)
{
    (void)state;
    struct rtconfig_options def = opts;
    def.set_as_default = true;
    const char *base = "{\"default-runtime\": \"runc\", \"debug\": false}";
    struct sbuf ours, out;
    struct err e = {0};
    sbuf_init(&ours, 1 << 20);
    sbuf_init(&out, 1 << 20);
    assert_int_equal(rtconfig_docker_edit(txt(base), &def, &ours, &e), 0);
    char *cur = replaced(ours.data, "\"debug\": false", "\"debug\": true");
    struct rtconfig_undo_file u = {0};
    assert_int_equal(rtconfig_docker_unedit(txt(base), txt(cur), &def, &out, &u, &e), 0);
    assert_int_equal(u.what, RTCONFIG_UNDO_EDIT);
    assert_string_equal(out.data, "{\"default-runtime\": \"runc\", \"debug\": true}");
    free(cur);
    sbuf_free(&ours);
    sbuf_free(&out);
}

static void test_owned_undo(void **state)
{
    (void)state;
    struct rtconfig_undo_file u = {0};
    struct rtconfig_text none = {NULL, 0};
    rtconfig_owned_unedit(none, txt("x"), txt("x"), none, &u);
    assert_int_equal(u.what, RTCONFIG_UNDO_REMOVE);
    rtconfig_owned_unedit(txt("theirs"), txt("x"), none, txt("x"), &u);
    assert_int_equal(u.what, RTCONFIG_UNDO_ORIGINAL);
    rtconfig_owned_unedit(none, txt("x\n# mine\n"), txt("x"), txt("y"), &u);
    assert_int_equal(u.what, RTCONFIG_UNDO_LEFT);
    assert_non_null(strstr(u.why, "changed since gpuop wrote it"));
    rtconfig_owned_unedit(none, none, txt("x"), none, &u);
    assert_int_equal(u.what, RTCONFIG_UNDO_NONE);
}

/* ---- names and detection ------------------------------------------------------------------ */

static void test_names(void **state)
{
    (void)state;
    enum rtconfig_kind k;
    assert_int_equal(rtconfig_kind_parse("containerd://1.7.24", &k), 0);
    assert_int_equal(k, RTCONFIG_CONTAINERD);
    assert_int_equal(rtconfig_kind_parse("cri-o://1.30.4", &k), 0);
    assert_int_equal(k, RTCONFIG_CRIO);
    assert_int_equal(rtconfig_kind_parse("crio", &k), 0);
    assert_int_equal(rtconfig_kind_parse("docker://24.0.7", &k), 0);
    assert_int_equal(k, RTCONFIG_DOCKER);
    assert_string_equal(rtconfig_kind_name(RTCONFIG_CRIO), "cri-o");
    assert_true(rtconfig_kind_parse("podman", &k) < 0);
    assert_true(rtconfig_kind_parse("containerd2://1", &k) < 0);
    assert_true(rtconfig_kind_parse("", &k) < 0);
    enum rtconfig_restart_mode m;
    assert_int_equal(rtconfig_restart_mode_parse("systemd", &m), 0);
    assert_int_equal(m, RTCONFIG_RESTART_SYSTEMD);
    assert_true(rtconfig_restart_mode_parse("hup", &m) < 0);
}

static void touch(const char *root, const char *rel)
{
    char *p = xasprintf("%s%s", root, rel);
    char *dir = xstrdup(p);
    *strrchr(dir, '/') = '\0';
    assert_int_equal(mkdir_p(dir, 0755), 0);
    assert_int_equal(file_write_atomic(p, "", 0, 0644, NULL), 0);
    free(dir);
    free(p);
}

static void test_detect(void **state)
{
    (void)state;
    char root[] = "/tmp/rtconfig-test-XXXXXX";
    assert_non_null(mkdtemp(root));
    struct err e = {0};
    enum rtconfig_kind k;
    /* Nothing there. */
    assert_int_equal(rtconfig_detect(root, NULL, NULL, &k, &e), -ENOENT);
    /* The node's word first, whatever the files say. */
    touch(root, "/etc/docker/daemon.json");
    assert_int_equal(rtconfig_detect(root, "containerd://1.7.24", NULL, &k, &e), 0);
    assert_int_equal(k, RTCONFIG_CONTAINERD);
    /* Files only: docker. */
    assert_int_equal(rtconfig_detect(root, NULL, NULL, &k, &e), 0);
    assert_int_equal(k, RTCONFIG_DOCKER);
    /* A socket beats a config file. */
    touch(root, "/run/crio/crio.sock");
    assert_int_equal(rtconfig_detect(root, NULL, NULL, &k, &e), 0);
    assert_int_equal(k, RTCONFIG_CRIO);
    /* Two sockets: ambiguous without the node's word or a policy. */
    touch(root, "/run/containerd/containerd.sock");
    assert_true(rtconfig_detect(root, NULL, NULL, &k, &e) < 0);
    assert_int_equal(rtconfig_detect(root, NULL, "containerd", &k, &e), 0);
    assert_int_equal(k, RTCONFIG_CONTAINERD);
    /* The mismatch names both. */
    err_clear(&e);
    assert_true(rtconfig_detect(root, "containerd://1.7.24", "docker", &k, &e) < 0);
    assert_non_null(strstr(err_msg(&e), "containerd"));
    assert_non_null(strstr(err_msg(&e), "docker"));
    /* Unknown runtimes. */
    err_clear(&e);
    assert_true(rtconfig_detect(root, "rkt://1.0", NULL, &k, &e) < 0);
    assert_non_null(strstr(err_msg(&e), "unknown container runtime \"rkt://1.0\""));
    err_clear(&e);
    assert_true(rtconfig_detect(root, NULL, "podman", &k, &e) < 0);
    assert_non_null(strstr(err_msg(&e), "podman"));
    char *cmd = xasprintf("rm -rf '%s'", root);
    assert_int_equal(system(cmd), 0);
    free(cmd);
}

/* ---- configure and restore on a host root ------------------------------------------------- */

static char *slurp(const char *root, const char *rel, size_t *len)
{
    char *p = xasprintf("%s%s", root, rel), *data = NULL;
    int r = file_read_all(p, 1 << 20, &data, len, NULL);
    free(p);
    return r < 0 ? NULL : data;
}

static void test_configure_restore(void **state)
{
    (void)state;
    char root[] = "/tmp/rtconfig-test-XXXXXX";
    assert_non_null(mkdtemp(root));
    struct err e = {0};
    const char *orig = "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\"]\n  sandbox_image = "
                       "\"pause:3.9\"\n";
    char *p = xasprintf("%s/etc/containerd", root);
    assert_int_equal(mkdir_p(p, 0755), 0);
    free(p);
    p = xasprintf("%s/etc/containerd/config.toml", root);
    assert_int_equal(file_write_atomic(p, orig, strlen(orig), 0640, NULL), 0);
    bool changed = false;
    assert_int_equal(rtconfig_configure(root, RTCONFIG_CONTAINERD, &opts, &changed, &e), 0);
    assert_true(changed);
    struct stat st;
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0640); /* the file's mode is kept */
    assert_int_equal(rtconfig_check(root, RTCONFIG_CONTAINERD, &opts, &e), 0);
    struct rtconfig_options other = opts;
    other.runtime_path = "/elsewhere";
    assert_int_equal(rtconfig_check(root, RTCONFIG_CONTAINERD, &other, &e), -ENOENT);
    assert_int_equal(rtconfig_configure(root, RTCONFIG_CONTAINERD, &opts, &changed, &e), 0);
    assert_false(changed);
    size_t len;
    char *log = slurp(root, "/var/lib/gpuop/rtconfig/reload.log", &len);
    assert_non_null(log);
    assert_non_null(strstr(log, "runtime=containerd action=configure mode=none result=recorded"));
    free(log);

    /* A broken main config: refused, the file and line named, nothing written. */
    assert_int_equal(rtconfig_restore(root, RTCONFIG_CONTAINERD, &opts, NULL, &e), 0);
    char *back = slurp(root, "/etc/containerd/config.toml", &len);
    assert_string_equal(back, orig);
    free(back);
    const char *broken = "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\"\n";
    assert_int_equal(file_write_atomic(p, broken, strlen(broken), 0644, NULL), 0);
    err_clear(&e);
    assert_int_equal(rtconfig_configure(root, RTCONFIG_CONTAINERD, &opts, &changed, &e), -EINVAL);
    assert_non_null(strstr(err_msg(&e), "/etc/containerd/config.toml: line 2"));
    back = slurp(root, "/etc/containerd/config.toml", &len);
    assert_string_equal(back, broken);
    free(back);
    assert_null(slurp(root, "/etc/containerd/conf.d/99-nvidia.toml", &len));
    assert_null(slurp(root, "/var/lib/gpuop/rtconfig/etc_containerd_config.toml.orig", &len));
    /* Restore with nothing to restore: fine, nothing changes. */
    assert_int_equal(rtconfig_restore(root, RTCONFIG_CONTAINERD, &opts, NULL, &e), 0);
    free(p);
    char *cmd = xasprintf("rm -rf '%s'", root);
    assert_int_equal(system(cmd), 0);
    free(cmd);
}

/* The host's paths under a host root: a link to an absolute path is followed from the host root
 * (never from this process's /), ".." stops at it, the link stays a link and what it points at is
 * written with its owner and mode; a linked folder too. Restore gives the bytes back the same way.
 */
static void test_host_root_links(void **state)
{
    (void)state;
    char root[] = "/tmp/rtconfig-test-XXXXXX";
    assert_non_null(mkdtemp(root));
    struct err e = {0};
    const char *orig = "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\"]\n  sandbox_image = "
                       "\"pause:3.9\"\n";
    char *site = xasprintf("%s/etc/site", root), *ctd = xasprintf("%s/etc/containerd", root);
    assert_int_equal(mkdir_p(site, 0755), 0);
    assert_int_equal(mkdir_p(ctd, 0755), 0);
    char *target = xasprintf("%s/c.toml", site), *link = xasprintf("%s/config.toml", ctd);
    assert_int_equal(file_write_atomic(target, orig, strlen(orig), 0640, NULL), 0);
    bool as_root = geteuid() == 0;
    if (as_root)
        assert_int_equal(chown(target, 1000, 1001), 0);
    /* Absolute, and with more ".." than there are folders: both stay under the root. */
    static const char *const links[] = {"/etc/site/c.toml", "../../../../../../etc/site/c.toml"};
    for (size_t i = 0; i < ARRAY_SIZE(links); i++) {
        unlink(link);
        assert_int_equal(symlink(links[i], link), 0);
        bool changed = false;
        err_clear(&e);
        if (rtconfig_configure(root, RTCONFIG_CONTAINERD, &opts, &changed, &e) < 0)
            fail_msg("configure through %s: %s", links[i], err_msg(&e));
        assert_true(changed);
        struct stat st;
        assert_int_equal(lstat(link, &st), 0);
        assert_true(S_ISLNK(st.st_mode));
        char buf[256];
        ssize_t n = readlink(link, buf, sizeof(buf) - 1);
        assert_true(n > 0);
        buf[n] = '\0';
        assert_string_equal(buf, links[i]);
        assert_int_equal(stat(target, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0640);
        if (as_root) {
            assert_int_equal(st.st_uid, 1000);
            assert_int_equal(st.st_gid, 1001);
        }
        size_t len;
        char *now = slurp(root, "/etc/site/c.toml", &len);
        assert_non_null(strstr(now, "imports = [\"/etc/containerd/conf.d/99-nvidia.toml\"]"));
        free(now);
        assert_int_equal(rtconfig_check(root, RTCONFIG_CONTAINERD, &opts, &e), 0);
        struct rtconfig_restore_report rep;
        assert_int_equal(rtconfig_restore(root, RTCONFIG_CONTAINERD, &opts, &rep, &e), 0);
        assert_int_equal(rep.n, 2);
        assert_int_equal(rep.files[0].what, RTCONFIG_UNDO_ORIGINAL);
        assert_int_equal(rep.files[1].what, RTCONFIG_UNDO_REMOVE);
        assert_false(rep.left);
        now = slurp(root, "/etc/site/c.toml", &len);
        assert_string_equal(now, orig);
        free(now);
        assert_int_equal(lstat(link, &st), 0);
        assert_true(S_ISLNK(st.st_mode));
        assert_int_equal(stat(target, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0640);
        if (as_root)
            assert_int_equal(st.st_uid, 1000);
    }
    /* A folder that is a link to an absolute path: docker's daemon.json in it. */
    char *dsite = xasprintf("%s/srv/docker", root), *etc = xasprintf("%s/etc/docker", root);
    assert_int_equal(mkdir_p(dsite, 0755), 0);
    assert_int_equal(symlink("/srv/docker", etc), 0);
    char *dj = xasprintf("%s/daemon.json", dsite);
    assert_int_equal(file_write_atomic(dj, "{\"debug\": true}\n", 16, 0600, NULL), 0);
    bool changed = false;
    assert_int_equal(rtconfig_configure(root, RTCONFIG_DOCKER, &opts, &changed, &e), 0);
    assert_true(changed);
    size_t len;
    char *now = slurp(root, "/srv/docker/daemon.json", &len);
    assert_non_null(strstr(now, "\"nvidia\""));
    free(now);
    struct stat st;
    assert_int_equal(lstat(etc, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    assert_int_equal(stat(dj, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    assert_int_equal(rtconfig_restore(root, RTCONFIG_DOCKER, &opts, NULL, &e), 0);
    now = slurp(root, "/srv/docker/daemon.json", &len);
    assert_string_equal(now, "{\"debug\": true}\n");
    free(now);
    free(dsite);
    free(etc);
    free(dj);
    free(site);
    free(ctd);
    free(target);
    free(link);
    char *cmd = xasprintf("rm -rf '%s'", root);
    assert_int_equal(system(cmd), 0);
    free(cmd);
}

/* restart_mode signal: SIGHUP goes to the process serving the runtime's socket (here, this test),
 * and the request is recorded with the pid; no socket is an error that is recorded too. */
static volatile sig_atomic_t got_hup;
static void on_hup(int sig)
{
    (void)sig;
    got_hup = 1;
}

static void test_reload_signal(void **state)
{
    (void)state;
    char root[] = "/tmp/rtconfig-test-XXXXXX";
    assert_non_null(mkdtemp(root));
    struct err e = {0};
    struct rtconfig_options o = opts;
    o.restart_mode = RTCONFIG_RESTART_SIGNAL;
    bool changed;
    /* No socket: the config is written, the reload fails and says so. */
    assert_true(rtconfig_configure(root, RTCONFIG_DOCKER, &o, &changed, &e) < 0);
    assert_non_null(strstr(err_msg(&e), "tell docker to reload (signal)"));
    assert_int_equal(rtconfig_restore(root, RTCONFIG_DOCKER, &opts, NULL, &e), 0);

    char *dir = xasprintf("%s/run", root);
    assert_int_equal(mkdir_p(dir, 0755), 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/docker.sock", dir);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(listen(fd, 4), 0);
    struct sigaction act = {.sa_handler = on_hup}, old;
    sigemptyset(&act.sa_mask);
    assert_int_equal(sigaction(SIGHUP, &act, &old), 0);
    got_hup = 0;
    err_clear(&e);
    assert_int_equal(rtconfig_configure(root, RTCONFIG_DOCKER, &o, &changed, &e), 0);
    assert_true(changed);
    assert_true(got_hup);
    size_t len;
    char *log = slurp(root, "/var/lib/gpuop/rtconfig/reload.log", &len);
    assert_non_null(log);
    char *want = xasprintf("runtime=docker action=configure mode=signal result=sighup pid=%d",
                           (int)getpid());
    assert_non_null(strstr(log, want));
    assert_non_null(strstr(log, "mode=signal result=failed"));
    free(want);
    free(log);
    /* Nothing changed: no reload. */
    got_hup = 0;
    assert_int_equal(rtconfig_configure(root, RTCONFIG_DOCKER, &o, &changed, &e), 0);
    assert_false(changed);
    assert_false(got_hup);
    sigaction(SIGHUP, &old, NULL);
    close(fd);
    free(dir);
    char *cmd = xasprintf("rm -rf '%s'", root);
    assert_int_equal(system(cmd), 0);
    free(cmd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_containerd_versions),
        cmocka_unit_test(test_containerd_default_and_bad),
        cmocka_unit_test(test_crio),
        cmocka_unit_test(test_docker),
        cmocka_unit_test(test_containerd_undo),
        cmocka_unit_test(test_docker_undo),
        cmocka_unit_test(test_docker_undo_default),
        cmocka_unit_test(test_owned_undo),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_detect),
        cmocka_unit_test(test_configure_restore),
        cmocka_unit_test(test_host_root_links),
        cmocka_unit_test(test_reload_signal),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
