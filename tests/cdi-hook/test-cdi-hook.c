/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpuop cdi-hook's pure core: the container state and config.json read (bundle, root.path),
 * the arguments checked (paths inside the container, --link TARGET::LINK), driver versions
 * compared, CUDA forward compatibility decided from the names of the image's compat folder, and
 * update-ldcache's plan (compat first, each folder once, folders the image lacks left out, the
 * drop-in's text).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cdi-hook.h"

static void test_state_and_config(void **state)
{
    (void)state;
    struct err e = {0};
    char *b = NULL;
    const char *st = "{\"ociVersion\":\"1.0.2\",\"id\":\"c1\",\"status\":\"creating\",\"pid\":42,"
                     "\"bundle\":\"/run/containerd/io.containerd.runtime.v2.task/k8s.io/c1\"}";
    assert_int_equal(hook_state_bundle(st, strlen(st), &b, &e), 0);
    assert_string_equal(b, "/run/containerd/io.containerd.runtime.v2.task/k8s.io/c1");
    struct {
        const char *text, *want;
    } bad[] = {
        {"", "not JSON"},
        {"[1]", "not a JSON object"},
        {"{\"id\":\"x\"}", "bundle: missing"},
        {"{\"bundle\":\"relative/b\"}", "not an absolute path"},
        {"{\"bundle\":7}", "bundle: missing"},
        {"{\"bundle\":\"/a\",\"bundle\":\"/b\"}", "not JSON"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        char *x = NULL;
        assert_true(hook_state_bundle(bad[i].text, strlen(bad[i].text), &x, &e) < 0);
        assert_null(x);
        if (!strstr(err_msg(&e), bad[i].want))
            fail_msg("%s: %s", bad[i].text, err_msg(&e));
    }

    char *root = NULL;
    const char *rel = "{\"ociVersion\":\"1.0.2\",\"root\":{\"path\":\"rootfs\",\"readonly\":true}}";
    assert_int_equal(hook_config_rootfs("config.json", b, rel, strlen(rel), &root, &e), 0);
    assert_string_equal(root, "/run/containerd/io.containerd.runtime.v2.task/k8s.io/c1/rootfs");
    free(root);
    root = NULL;
    const char *abs = "{\"root\":{\"path\":\"/var/lib/c1/merged\"}}";
    assert_int_equal(hook_config_rootfs("config.json", NULL, abs, strlen(abs), &root, &e), 0);
    assert_string_equal(root, "/var/lib/c1/merged");
    free(root);
    root = NULL;
    const char *none = "{\"process\":{}}";
    assert_int_equal(hook_config_rootfs("/b/config.json", b, none, strlen(none), &root, &e),
                     -EINVAL);
    assert_string_equal(err_msg(&e), "/b/config.json: root.path: missing");
    assert_int_equal(hook_config_rootfs("/b/config.json", NULL, rel, strlen(rel), &root, &e),
                     -EINVAL);
    assert_non_null(strstr(err_msg(&e), "relative and no bundle"));
    assert_null(root);
    free(b);
}

static void test_paths_and_links(void **state)
{
    (void)state;
    struct err e = {0};
    assert_int_equal(hook_path_check("--folder", "/usr/lib/x86_64-linux-gnu", &e), 0);
    assert_int_equal(hook_path_check("--folder", "/usr//lib/", &e), 0);
    const char *bad[] = {"usr/lib",        "",      "/usr/../etc", "/usr/./lib", "/..",
                         "/usr/lib\n/etc", "/a\x7f"};
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        assert_int_equal(hook_path_check("--folder", bad[i], &e), -EINVAL);
        assert_non_null(strstr(err_msg(&e), "--folder"));
    }

    struct hook_link l = {0};
    assert_int_equal(hook_link_parse("libcuda.so.1::/usr/lib/x86_64-linux-gnu/libcuda.so", &l, &e),
                     0);
    assert_string_equal(l.target, "libcuda.so.1");
    assert_string_equal(l.link, "/usr/lib/x86_64-linux-gnu/libcuda.so");
    hook_link_clear(&l);
    assert_int_equal(hook_link_parse("../card1::/dev/dri/by-path/pci-0000:01:00.0-card", &l, &e),
                     0);
    assert_string_equal(l.target, "../card1"); /* split at the first "::" */
    assert_string_equal(l.link, "/dev/dri/by-path/pci-0000:01:00.0-card");
    hook_link_clear(&l);
    const char *bad_links[] = {"libcuda.so.1",    "::/usr/lib/libcuda.so", "libcuda.so.1::",
                               "a::relative/b",   "a::/usr/../etc/x",      "a::/",
                               "a\nb::/usr/lib/x"};
    for (size_t i = 0; i < ARRAY_SIZE(bad_links); i++) {
        assert_true(hook_link_parse(bad_links[i], &l, &e) < 0);
        assert_null(l.target);
        assert_null(l.link);
    }
}

/* Which hook, and the flags each takes: bad input names what is wrong. */
static void test_args(void **state)
{
    (void)state;
    static const char *const link_ok[] = {"libcuda.so.1::/usr/lib/libcuda.so"};
    static const char *const link_bad[] = {"libcuda.so.1"};
    static const char *const folder_ok[] = {"/usr/lib64", "/usr/lib/x86_64-linux-gnu"};
    static const char *const folder_bad[] = {"/usr/../etc"};
    static const struct {
        const char *verb;
        const char *const *links;
        size_t n_links;
        const char *const *folders;
        size_t n_folders;
        const char *driver, *ldconfig;
        int want; /* 0, or -EINVAL */
        enum hook_verb want_verb;
        const char *want_msg;
    } cases[] = {
        {"create-symlinks", link_ok, 1, NULL, 0, NULL, NULL, 0, HOOK_CREATE_SYMLINKS, NULL},
        {"create-symlinks", NULL, 0, NULL, 0, NULL, NULL, 0, HOOK_CREATE_SYMLINKS, NULL},
        {"update-ldcache", NULL, 0, folder_ok, 2, "550.90.07", "/sbin/ldconfig", 0,
         HOOK_UPDATE_LDCACHE, NULL},
        {NULL, NULL, 0, NULL, 0, NULL, NULL, -EINVAL, 0, "a hook is needed"},
        {"frobnicate", NULL, 0, NULL, 0, NULL, NULL, -EINVAL, 0, "unknown hook \"frobnicate\""},
        {"create-symlinks", link_ok, 1, folder_ok, 1, NULL, NULL, -EINVAL, 0,
         "create-symlinks takes --link only"},
        {"create-symlinks", NULL, 0, NULL, 0, "550.90.07", NULL, -EINVAL, 0,
         "create-symlinks takes --link only"},
        {"create-symlinks", NULL, 0, NULL, 0, NULL, "/sbin/ldconfig", -EINVAL, 0,
         "create-symlinks takes --link only"},
        {"update-ldcache", link_ok, 1, NULL, 0, NULL, NULL, -EINVAL, 0,
         "update-ldcache takes no --link"},
        {"create-symlinks", link_bad, 1, NULL, 0, NULL, NULL, -EINVAL, 0, "not TARGET::LINK"},
        {"update-ldcache", NULL, 0, folder_bad, 1, NULL, NULL, -EINVAL, 0, "--folder"},
        {"update-ldcache", NULL, 0, folder_ok, 1, NULL, "ldconfig", -EINVAL, 0,
         "--ldconfig \"ldconfig\": not an absolute path"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        struct hook_args a = {.verb = cases[i].verb,
                              .links = cases[i].links,
                              .n_links = cases[i].n_links,
                              .folders = cases[i].folders,
                              .n_folders = cases[i].n_folders,
                              .host_driver_version = cases[i].driver,
                              .ldconfig = cases[i].ldconfig};
        enum hook_verb verb = (enum hook_verb) - 1;
        struct err e = {0};
        print_message("case %zu: %s\n", i, cases[i].want_msg ? cases[i].want_msg : "ok");
        assert_int_equal(hook_args_check(&a, &verb, &e), cases[i].want);
        if (cases[i].want == 0) {
            assert_int_equal(verb, cases[i].want_verb);
        } else {
            assert_int_equal(verb, (enum hook_verb) - 1); /* written only on success */
            assert_non_null(strstr(err_msg(&e), cases[i].want_msg));
        }
    }
}

static void test_versions(void **state)
{
    (void)state;
    struct {
        const char *a, *b;
        int want;
    } cases[] = {
        {"550.90.07", "550.90.07", 0},
        {"550.90.07", "550.100.01", -1},
        {"560.35.03", "550.127.05", 1},
        {"550.90", "550.90.07", -1},
        {"9.0", "10.0", -1},
        {"", "", 0},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        int r = hook_version_cmp(cases[i].a, cases[i].b);
        assert_int_equal(r < 0 ? -1 : r > 0 ? 1 : 0, cases[i].want);
    }
}

static void test_compat(void **state)
{
    (void)state;
    char v[64];
    /* the newest libcuda.so.<version> of the folder, used when its branch is newer */
    const char *names[] = {"libcuda.so",
                           "libcuda.so.1",
                           "libcuda.so.560.28.03",
                           "libcuda.so.560.35.03",
                           "libnvidia-ptxjitcompiler.so.560.35.03",
                           "libcuda.so.x.y"};
    assert_true(hook_compat_pick(names, ARRAY_SIZE(names), "550.127.05", v, sizeof(v)));
    assert_string_equal(v, "560.35.03");
    /* the same branch, an older one: the driver's own libcuda */
    assert_false(hook_compat_pick(names, ARRAY_SIZE(names), "560.28.03", v, sizeof(v)));
    assert_false(hook_compat_pick(names, ARRAY_SIZE(names), "570.86.15", v, sizeof(v)));
    assert_string_equal(v, "560.35.03");
    /* no compat libcuda, or no driver version: never */
    const char *links[] = {"libcuda.so", "libcuda.so.1"};
    assert_false(hook_compat_pick(links, ARRAY_SIZE(links), "550.127.05", v, sizeof(v)));
    assert_string_equal(v, "");
    assert_false(hook_compat_pick(names, ARRAY_SIZE(names), NULL, v, sizeof(v)));
    assert_false(hook_compat_pick(names, ARRAY_SIZE(names), "garbage", v, sizeof(v)));
    assert_false(hook_compat_pick(NULL, 0, "550.127.05", v, sizeof(v)));
}

static void test_ldcache_plan(void **state)
{
    (void)state;
    struct err e = {0};
    const char *folders[] = {"/usr/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu/vdpau",
                             "/usr/lib64", "/usr/lib/x86_64-linux-gnu"};
    bool present[] = {true, false, true, true};
    struct hook_ldcache_in in = {.folders = folders,
                                 .n_folders = ARRAY_SIZE(folders),
                                 .folder_present = present,
                                 .compat = true};
    struct hook_ldcache_plan p = {0};
    assert_int_equal(hook_ldcache_plan(&in, &p, &e), 0);
    assert_int_equal(p.n_folders, 3);
    assert_string_equal(p.folders[0], HOOK_COMPAT_DIR);
    assert_string_equal(p.folders[1], "/usr/lib/x86_64-linux-gnu");
    assert_string_equal(p.folders[2], "/usr/lib64");
    assert_string_equal(p.conf,
                        "# gpuop cdi-hook update-ldcache: the GPU driver's library folders\n"
                        "/usr/local/cuda/compat\n"
                        "/usr/lib/x86_64-linux-gnu\n"
                        "/usr/lib64\n");
    hook_ldcache_plan_clear(&p);
    /* no compat, nothing present: the drop-in lists nothing */
    in.compat = false;
    bool absent[] = {false, false, false, false};
    in.folder_present = absent;
    assert_int_equal(hook_ldcache_plan(&in, &p, &e), 0);
    assert_int_equal(p.n_folders, 0);
    hook_ldcache_plan_clear(&p);
    /* a folder that is not a path inside the container is refused */
    const char *bad[] = {"/usr/lib", "lib"};
    struct hook_ldcache_in bin = {.folders = bad, .n_folders = 2};
    assert_int_equal(hook_ldcache_plan(&bin, &p, &e), -EINVAL);
    assert_null(p.conf);
    /* too many */
    const char *many[HOOK_FOLDERS_MAX + 1];
    for (size_t i = 0; i < ARRAY_SIZE(many); i++)
        many[i] = "/usr/lib";
    struct hook_ldcache_in min = {.folders = many, .n_folders = ARRAY_SIZE(many)};
    assert_int_equal(hook_ldcache_plan(&min, &p, &e), -E2BIG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_state_and_config), cmocka_unit_test(test_paths_and_links),
        cmocka_unit_test(test_versions),         cmocka_unit_test(test_compat),
        cmocka_unit_test(test_ldcache_plan),     cmocka_unit_test(test_args),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
