/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cdi: spec parsing and checks (errors naming the file and the field), names, the registry of
 * CDI directories (priority, resolution order, unknown names) and the OCI edit (environment,
 * device nodes and their cgroup rules, mounts, hooks, groups; a field of the wrong type).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "cdi.h"

static const char spec_yaml[] = "cdiVersion: 0.5.0\n"
                                "kind: nvidia.com/gpu\n"
                                "containerEdits:\n"
                                "  env: [NVIDIA_VISIBLE_DEVICES=void]\n"
                                "  deviceNodes: [{path: /dev/nvidiactl}]\n"
                                "  mounts:\n"
                                "  - {hostPath: /usr/lib/libcuda.so.1, containerPath: "
                                "/usr/lib/libcuda.so.1, options: [ro, nosuid, bind]}\n"
                                "  hooks:\n"
                                "  - {hookName: createContainer, path: /usr/bin/nvidia-cdi-hook,"
                                " args: [nvidia-cdi-hook, update-ldcache]}\n"
                                "devices:\n"
                                "- name: \"0\"\n"
                                "  containerEdits:\n"
                                "    deviceNodes: [{path: /dev/nvidia0}]\n"
                                "- name: all\n"
                                "  containerEdits:\n"
                                "    deviceNodes: [{path: /dev/nvidia0}, {path: /dev/nvidia1}]\n"
                                "- name: GPU-aaaa\n"
                                "  containerEdits:\n"
                                "    env: [GPU_NAME=aaaa]\n"
                                "    deviceNodes: [{path: /dev/nvidia0, hostPath: /dev/nvidia7}]\n";

static struct cdi_spec *parse_ok(const char *path, const char *text)
{
    struct err e = {0};
    struct cdi_spec *s = NULL;
    if (cdi_spec_parse(path, text, strlen(text), &s, &e) < 0)
        fail_msg("%s: %s", path, err_msg(&e));
    return s;
}

/* ---- parse ---------------------------------------------------------------------------------- */

static void test_parse_ok(void **state)
{
    (void)state;
    struct err e = {0};
    struct cdi_spec *s = parse_ok("nvidia.yaml", spec_yaml);
    assert_string_equal(cdi_spec_kind(s), "nvidia.com/gpu");
    assert_string_equal(cdi_spec_version(s), "0.5.0");
    assert_string_equal(cdi_spec_path(s), "nvidia.yaml");
    assert_int_equal(cdi_spec_n_devices(s), 3);
    assert_string_equal(cdi_spec_device_name(s, 2), "GPU-aaaa");
    assert_null(cdi_spec_device_name(s, 3));
    assert_true(cdi_spec_has_device(s, "all"));
    assert_false(cdi_spec_has_device(s, "1"));
    const struct cdi_edits *ed = cdi_spec_edits(s);
    assert_int_equal(ed->n_env, 1);
    assert_string_equal(ed->env[0], "NVIDIA_VISIBLE_DEVICES=void");
    assert_int_equal(ed->n_mounts, 1);
    assert_int_equal(ed->mounts[0].n_options, 3);
    assert_string_equal(ed->mounts[0].options[2], "bind");
    assert_null(ed->mounts[0].type);
    assert_int_equal(ed->n_hooks, 1);
    assert_string_equal(ed->hooks[0].hook_name, "createContainer");
    assert_int_equal(ed->hooks[0].n_args, 2);
    assert_false(ed->hooks[0].has_timeout);
    ed = cdi_spec_device_edits(s, "GPU-aaaa");
    assert_non_null(ed);
    assert_string_equal(ed->device_nodes[0].host_path, "/dev/nvidia7");
    assert_false(ed->device_nodes[0].has_major);
    assert_null(cdi_spec_device_edits(s, "nope"));
    cdi_spec_free(s);

    const char *json = "{\"cdiVersion\":\"0.3.0\",\"kind\":\"vendor.example/dev\",\"devices\":"
                       "[{\"name\":\"x\",\"containerEdits\":{\"env\":[\"A=1\"]}}]}";
    cdi_spec_free(parse_ok("v.json", json));
    /* Every field the model knows, numbers included. */
    s = parse_ok("full.yaml",
                 "cdiVersion: 1.1.0\nkind: a.com/b\nannotations: {x: y}\ndevices:\n"
                 "- name: \"0:1\"\n  annotations: {k: v}\n  containerEdits:\n"
                 "    deviceNodes: [{path: /dev/x, hostPath: /dev/y, type: c, major: 195, minor: 7,"
                 " fileMode: 0x1b6, permissions: rw, uid: 1, gid: 2}]\n"
                 "    hooks: [{hookName: poststop, path: /bin/h, env: [A=b], timeout: 3}]\n"
                 "    additionalGids: [44, 0]\n"
                 "    netDevices: [{hostInterfaceName: eth1, name: net0}]\n"
                 "    intelRdt: {closID: c}\n");
    ed = cdi_spec_device_edits(s, "0:1");
    const struct cdi_device_node *d = &ed->device_nodes[0];
    assert_true(d->has_major && d->has_minor && d->has_file_mode && d->has_uid && d->has_gid);
    assert_int_equal(d->major, 195);
    assert_int_equal(d->minor, 7);
    assert_int_equal(d->file_mode, 0666);
    assert_string_equal(d->permissions, "rw");
    assert_int_equal(ed->hooks[0].timeout, 3);
    assert_int_equal(ed->n_additional_gids, 2);
    assert_int_equal(ed->additional_gids[0], 44);
    cdi_spec_free(s);

    /* The fuzz corpus: real-shaped specs parse; bad-* ones do not. */
    const char *src = getenv("GPUOP_SOURCE_ROOT");
    if (!src)
        return;
    char *dir = xasprintf("%s/tests/fuzz/cdi/corpus", src);
    DIR *dp = opendir(dir);
    assert_non_null(dp);
    size_t seen = 0;
    struct dirent *de;
    while ((de = readdir(dp))) {
        if (de->d_name[0] == '.')
            continue;
        char *path = xasprintf("%s/%s", dir, de->d_name);
        s = NULL;
        int r = cdi_spec_load(path, &s, &e);
        if ((r == 0) != !str_has_prefix(de->d_name, "bad-"))
            fail_msg("%s: r=%d %s", de->d_name, r, err_msg(&e));
        cdi_spec_free(s);
        free(path);
        seen++;
    }
    closedir(dp);
    free(dir);
    assert_true(seen >= 5);
}

static void test_parse_errors(void **state)
{
    (void)state;
    static const struct {
        const char *text, *want;
    } cases[] = {
        {"cdiVersion: 0.2.0\nkind: a.com/b\ndevices: []\n", "f.yaml.cdiVersion: \"0.2.0\""},
        {"cdiVersion: 0.9.0\nkind: a.com/b\ndevices: []\n", "is not a supported version"},
        {"cdiVersion: 0.5.0\ndevices: []\n", "f.yaml.kind"},
        {"cdiVersion: 0.5.0\nkind: nodomain\ndevices: []\n", "f.yaml.kind: \"nodomain\""},
        {"cdiVersion: 0.5.0\nkind: 1a.com/b\ndevices: []\n", "f.yaml.kind: \"1a.com/b\""},
        {"cdiVersion: 0.5.0\nkind: a.com/b.c\ndevices: []\n", "f.yaml.kind: \"a.com/b.c\""},
        {"cdiVersion: 0.5.0\nkind: a.com/b\n", "f.yaml.devices"},
        {"cdiVersion: 0.5.0\nkind: a.com/b\nbogus: 1\ndevices: []\n", "bogus"},
        {"cdiVersion: 0.5.0\nkind: a.com/b\ndevices:\n- name: ok\n  containerEdits: {env: [A=1]}\n"
         "- name: -bad\n  containerEdits: {env: [A=1]}\n",
         "f.yaml: devices[1].name: \"-bad\""},
        {"cdiVersion: 0.5.0\nkind: a.com/b\ndevices:\n- name: x\n  containerEdits:\n"
         "    mounts: [{hostPath: /a}]\n",
         "f.yaml: devices[0].containerEdits.mounts[0].containerPath"},
        {"cdiVersion: 0.5.0\nkind: a.com/b\ndevices:\n- name: x\n  containerEdits:\n"
         "    env: [NOVALUE]\n",
         "f.yaml: devices[0].containerEdits.env[0]: \"NOVALUE\""},
        {"cdiVersion: 0.5.0\nkind: a.com/b\ndevices:\n- name: x\n  containerEdits: {}\n",
         "devices[0].containerEdits: a device must edit something"},
        {"cdiVersion: 0.5.0\nkind: a.com/b\ndevices:\n- name: x\n  containerEdits: {env: [A=1]}\n"
         "- name: x\n  containerEdits: {env: [A=1]}\n",
         "devices[1].name: \"x\" is defined twice"},
        {"cdiVersion: 0.5.0\nkind: a.com/b\ndevices:\n- name: x\n  containerEdits:\n"
         "    deviceNodes: [{path: dev/rel}]\n",
         "deviceNodes[0].path: \"dev/rel\" is not an absolute path"},
        {"cdiVersion: 0.5.0\nkind: a.com/b\ndevices:\n- name: x\n  containerEdits:\n"
         "    hooks: [{hookName: whenever, path: /bin/true}]\n",
         "hooks[0].hookName: \"whenever\""},
        {"cdiVersion: 0.5.0\nkind: a.com/b\ndevices:\n- name: x\n  containerEdits:\n"
         "    hooks: [{hookName: poststop, path: /bin/true, env: [X]}]\n",
         "devices[0].containerEdits.hooks[0].env[0]: \"X\""},
        {"cdiVersion: 0.5.0\nkind: a.com/b\ndevices:\n- name: x\n  containerEdits:\n"
         "    deviceNodes: [{path: /dev/x, major: many}]\n",
         "deviceNodes[0].major"},
        {"cdiVersion: 0.5.0\nkind: a.com/b\ndevices:\n- name: x\n  containerEdits:\n"
         "    deviceNodes: [{path: /dev/x, type: z}]\n",
         "deviceNodes[0].type: \"z\" is not b, c, u or p"},
        {"cdiVersion: 0.5.0\nkind: a.com/b\ndevices:\n- name: x\n  containerEdits:\n"
         "    deviceNodes: [{path: /dev/x, type: p, major: 1}]\n",
         "deviceNodes[0]: a fifo (type p) has no major or minor"},
        {"cdiVersion: 0.5.0\nkind: a.com/b\ndevices:\n- name: x\n  containerEdits:\n"
         "    deviceNodes: [{path: /dev/x, permissions: rwx}]\n",
         "deviceNodes[0].permissions: \"rwx\": only r, w and m"},
        {"cdiVersion: 0.5.0\nkind: a.com/b\ndevices:\n- name: x\n  containerEdits:\n"
         "    deviceNodes: [{path: /dev/x, fileMode: 070000}]\n",
         "deviceNodes[0].fileMode"},
        {"cdiVersion: 0.5.0\nkind: a.com/b\ndevices:\n- name: x\n  containerEdits:\n"
         "    deviceNodes: [{path: /dev/x, hostpath: /dev/y}]\n",
         "deviceNodes[0]: unknown"},
        {"cdiVersion: 0.5.0\nkind: a.com/b\ndevices:\n- name: x\n  containerEdits:\n"
         "    devices: [/dev/x]\n",
         "devices[0].containerEdits: unknown"},
        {"cdiVersion: 0.5.0\nkind: a.com/b\ndevices:\n- name: x\n  containerEdits:\n"
         "    additionalGids: [-1]\n",
         "additionalGids[0]: not a group ID"},
        {"cdiVersion: 0.5.0\nkind: a.com/b\ndevices:\n- name: x\n  containerEdits:\n"
         "    intelRdt: {closID: c, bogus: 1}\n",
         "containerEdits.intelRdt: unknown"},
        {"cdiVersion: 0.4.0\nkind: a.com/b\ndevices:\n- name: x\n  containerEdits:\n"
         "    deviceNodes: [{path: /dev/x, hostPath: /dev/y}]\n",
         "f.yaml.cdiVersion: \"0.4.0\" is too low"},
        {"cdiVersion: 0.3.0\nkind: a.com/b\ndevices:\n- name: \"0\"\n  containerEdits:\n"
         "    env: [A=1]\n",
         "f.yaml.cdiVersion: \"0.3.0\" is too low"},
        {"cdiVersion: 0.5.0\nkind: a.com/b\ndevices:\n- name: x\n  annotations: {a: [1]}\n"
         "  containerEdits: {env: [A=1]}\n",
         "devices[0].annotations.a: expected a string"},
        {"[1, 2]\n", "f.yaml: expected an object"},
        {"{\"cdiVersion\": \"0.5.0\",", "f.yaml:"},
        {"{\"cdiVersion\": \"0.5.0\", \"cdiVersion\": \"0.6.0\"}", "f.yaml:1:"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        struct err e = {0};
        struct cdi_spec *s = NULL;
        int r = cdi_spec_parse("f.yaml", cases[i].text, strlen(cases[i].text), &s, &e);
        if (r >= 0 || !strstr(err_msg(&e), cases[i].want))
            fail_msg("case %zu: r=%d error \"%s\", want \"%s\"", i, r, err_msg(&e), cases[i].want);
        assert_null(s);
    }
}

static void test_names(void **state)
{
    (void)state;
    assert_true(cdi_kind_valid("nvidia.com/gpu"));
    assert_true(cdi_kind_valid("management.nvidia.com/gpu"));
    assert_true(cdi_kind_valid("a_b-c.d/e_f-g"));
    assert_false(cdi_kind_valid("nvidia.com"));
    assert_false(cdi_kind_valid("nvidia.com/"));
    assert_false(cdi_kind_valid("/gpu"));
    assert_false(cdi_kind_valid("nvidia.com/gpu-"));
    assert_false(cdi_kind_valid("nvidia.com/g/pu"));
    assert_false(cdi_kind_valid(NULL));
    assert_true(cdi_device_name_valid("0"));
    assert_true(cdi_device_name_valid("0:1"));
    assert_true(cdi_device_name_valid("GPU-6b8f_x.y"));
    assert_false(cdi_device_name_valid(""));
    assert_false(cdi_device_name_valid("a:"));
    assert_false(cdi_device_name_valid("a b"));
    assert_false(cdi_device_name_valid("a/b"));
    size_t kl = 0;
    const char *name = NULL;
    struct err e = {0};
    assert_int_equal(cdi_qualified_split("nvidia.com/gpu=MIG-1", &kl, &name, &e), 0);
    assert_int_equal(kl, strlen("nvidia.com/gpu"));
    assert_string_equal(name, "MIG-1");
    assert_int_equal(cdi_qualified_split("nvidia.com/gpu", &kl, &name, &e), -EINVAL);
    assert_non_null(strstr(err_msg(&e), "not a qualified device name"));
    assert_int_equal(cdi_qualified_split("gpu=0", &kl, &name, &e), -EINVAL);
    assert_non_null(strstr(err_msg(&e), "\"gpu\" is not vendor/class"));
    assert_int_equal(cdi_qualified_split("nvidia.com/gpu=", &kl, &name, &e), -EINVAL);
    assert_non_null(strstr(err_msg(&e), "is not a device name"));
}

/* ---- registry ------------------------------------------------------------------------------- */

static char tmp[256];

static void write_file(const char *rel, const char *text)
{
    char *path = xasprintf("%s/%s", tmp, rel);
    char *dir = xstrdup(path);
    *strrchr(dir, '/') = 0;
    assert_int_equal(mkdir_p(dir, 0755), 0);
    struct err e = {0};
    assert_int_equal(file_write_atomic(path, text, strlen(text), 0644, &e), 0);
    free(dir);
    free(path);
}

static void test_registry(void **state)
{
    (void)state;
    write_file("etc/cdi/nvidia.yaml", spec_yaml);
    /* Later directory wins for GPU-aaaa; a spec that does not parse is skipped, kept named. */
    write_file("run/cdi/override.json",
               "{\"cdiVersion\":\"0.6.0\",\"kind\":\"nvidia.com/gpu\",\"devices\":[{\"name\":"
               "\"GPU-aaaa\",\"containerEdits\":{\"env\":[\"GPU_NAME=override\"]}}]}");
    write_file("run/cdi/broken.yaml", "cdiVersion: 0.1.0\nkind: other.com/x\ndevices: []\n");
    write_file("run/cdi/ignored.txt", "not a spec");
    write_file("run/cdi/other.yml", "cdiVersion: 0.6.0\nkind: other.com/x\ndevices:\n"
                                    "- {name: a, containerEdits: {env: [OTHER=1]}}\n");
    char *etc = xasprintf("%s/etc/cdi", tmp), *run = xasprintf("%s/run/cdi", tmp);
    char *missing = xasprintf("%s/none", tmp);
    const char *dirs[] = {etc, missing, run};
    struct err e = {0};
    struct cdi_registry *r = NULL;
    assert_int_equal(cdi_registry_load(dirs, ARRAY_SIZE(dirs), &r, &e), 0);
    assert_int_equal(cdi_registry_n_specs(r), 3);
    assert_non_null(strstr(cdi_registry_errors(r), "broken.yaml.cdiVersion"));
    const struct cdi_spec *s = cdi_registry_lookup(r, "nvidia.com/gpu=GPU-aaaa");
    assert_non_null(s);
    assert_non_null(strstr(cdi_spec_path(s), "override.json"));
    assert_non_null(
        strstr(cdi_spec_path(cdi_registry_lookup(r, "nvidia.com/gpu=0")), "nvidia.yaml"));
    assert_null(cdi_registry_lookup(r, "nvidia.com/gpu=7"));
    assert_null(cdi_registry_lookup(r, "bad"));

    /* Spec edits once per spec, in first-named order, then each device once. */
    const char *names[] = {"nvidia.com/gpu=0", "other.com/x=a", "nvidia.com/gpu=all",
                           "nvidia.com/gpu=0"};
    const struct cdi_edits **edits = NULL;
    size_t n = 0;
    assert_int_equal(cdi_registry_resolve(r, names, ARRAY_SIZE(names), &edits, &n, &e), 0);
    const struct cdi_spec *nv = cdi_registry_lookup(r, "nvidia.com/gpu=0");
    const struct cdi_spec *other = cdi_registry_lookup(r, "other.com/x=a");
    assert_int_equal(n, 5);
    assert_ptr_equal(edits[0], cdi_spec_edits(nv));
    assert_ptr_equal(edits[1], cdi_spec_edits(other));
    assert_ptr_equal(edits[2], cdi_spec_device_edits(nv, "0"));
    assert_ptr_equal(edits[3], cdi_spec_device_edits(other, "a"));
    assert_ptr_equal(edits[4], cdi_spec_device_edits(nv, "all"));
    free(edits);

    const char *bad[] = {"nvidia.com/gpu=9", "nvidia.com/gpu=0", "garbage", "other.com/x=b"};
    edits = NULL;
    assert_int_equal(cdi_registry_resolve(r, bad, ARRAY_SIZE(bad), &edits, &n, &e), -ENOENT);
    assert_null(edits);
    assert_non_null(strstr(err_msg(&e), "unresolvable CDI devices nvidia.com/gpu=9, garbage, "
                                        "other.com/x=b; specs not used: "));
    assert_non_null(strstr(err_msg(&e), "broken.yaml"));
    cdi_registry_free(r);
    free(etc), free(run), free(missing);
}

/* The registry reads specs as the toolkit requires them: a spec owned by another user in a
 * mode-1777 directory is refused, both reasons and its path said; a group-writable one too. */
static void test_registry_trust(void **state)
{
    (void)state;
    const char *ok_spec = "cdiVersion: 0.6.0\nkind: trust.com/x\ndevices:\n"
                          "- {name: a, containerEdits: {env: [A=1]}}\n";
    write_file("open/cdi/evil.yaml", "cdiVersion: 0.6.0\nkind: trust.com/x\ndevices:\n"
                                     "- {name: b, containerEdits: {env: [B=1]}}\n");
    char *dir = xasprintf("%s/open/cdi", tmp), *evil = xasprintf("%s/evil.yaml", dir);
    assert_int_equal(chmod(dir, 01777), 0);
    assert_int_equal(chown(evil, 65534, 65534), 0);
    write_file("safe/cdi/a.yaml", ok_spec);
    write_file("safe/cdi/b-group.yaml", "cdiVersion: 0.6.0\nkind: trust.com/x\ndevices:\n"
                                        "- {name: c, containerEdits: {env: [C=1]}}\n");
    char *safe = xasprintf("%s/safe/cdi", tmp), *grp = xasprintf("%s/b-group.yaml", safe);
    assert_int_equal(chmod(grp, 0664), 0);
    const char *dirs[] = {safe, dir};
    struct err e = {0};
    struct cdi_registry *r = NULL;
    assert_int_equal(cdi_registry_load(dirs, ARRAY_SIZE(dirs), &r, &e), 0);
    assert_int_equal(cdi_registry_n_specs(r), 1);
    assert_non_null(cdi_registry_lookup(r, "trust.com/x=a"));
    assert_null(cdi_registry_lookup(r, "trust.com/x=b"));
    assert_null(cdi_registry_lookup(r, "trust.com/x=c"));
    const char *errs = cdi_registry_errors(r);
    char *want = xasprintf("%s: refused: the file owned by uid 65534, not root; its directory "
                           "writable by others (mode 1777) \"%s\"",
                           evil, dir);
    if (!strstr(errs, want))
        fail_msg("%s", errs);
    char *want2 = xasprintf("%s: refused: the file writable by group (mode 0664)", grp);
    assert_non_null(strstr(errs, want2));
    /* resolving a refused device says why */
    const char *names[] = {"trust.com/x=b"};
    const struct cdi_edits **edits = NULL;
    size_t n = 0;
    assert_int_equal(cdi_registry_resolve(r, names, 1, &edits, &n, &e), -ENOENT);
    assert_non_null(
        strstr(err_msg(&e), "unresolvable CDI devices trust.com/x=b; specs not used: "));
    assert_non_null(strstr(err_msg(&e), "evil.yaml: refused: the file owned by uid 65534"));
    cdi_registry_free(r);
    /* the same spec once trusted is read: the check, not the content, refused it */
    assert_int_equal(chown(evil, 0, 0), 0);
    assert_int_equal(chmod(dir, 0755), 0);
    assert_int_equal(cdi_registry_load(dirs, ARRAY_SIZE(dirs), &r, &e), 0);
    assert_non_null(cdi_registry_lookup(r, "trust.com/x=b"));
    cdi_registry_free(r);
    free(dir), free(evil), free(safe), free(grp), free(want), free(want2);
}

/* A file without the atomic write's fsync: hundreds of them. */
static void write_plain(const char *rel, const char *text)
{
    char *path = xasprintf("%s/%s", tmp, rel);
    char *dir = xstrdup(path);
    *strrchr(dir, '/') = 0;
    assert_int_equal(mkdir_p(dir, 0755), 0);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fputs(text, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
    free(dir);
    free(path);
}

/* Every spec file of a directory is read, in name order (a later name wins); past the bound the
 * first ones by name are read and the rest named. */
static void test_registry_many(void **state)
{
    (void)state;
    /* 300 specs, written in an order that is not the name order */
    for (int i = 299; i >= 0; i--) {
        char rel[64], text[256];
        snprintf(rel, sizeof(rel), "many/cdi/spec-%03d.yaml", i);
        snprintf(text, sizeof(text),
                 "cdiVersion: 0.6.0\nkind: many.com/x\ndevices:\n"
                 "- {name: d%d, containerEdits: {env: [D=%d]}}\n"
                 "- {name: last, containerEdits: {env: [LAST=%d]}}\n",
                 i, i, i);
        write_plain(rel, text);
    }
    char *dir = xasprintf("%s/many/cdi", tmp);
    const char *dirs[] = {dir};
    struct err e = {0};
    struct cdi_registry *r = NULL;
    assert_int_equal(cdi_registry_load(dirs, 1, &r, &e), 0);
    assert_int_equal(cdi_registry_n_specs(r), 300);
    assert_string_equal(cdi_registry_errors(r), "");
    const char *names[300];
    char buf[300][32]; /* "many.com/x=d" and any int */
    for (int i = 0; i < 300; i++) {
        snprintf(buf[i], sizeof(buf[i]), "many.com/x=d%d", i);
        names[i] = buf[i];
    }
    const struct cdi_edits **edits = NULL;
    size_t n = 0;
    assert_int_equal(cdi_registry_resolve(r, names, 300, &edits, &n, &e), 0);
    free(edits);
    /* the same device in every file: the last by name wins */
    const struct cdi_spec *last = cdi_registry_lookup(r, "many.com/x=last");
    assert_non_null(strstr(cdi_spec_path(last), "spec-299.yaml"));
    cdi_registry_free(r);

    /* 1030: the first 1024 by name read, the last 6 by name named */
    for (int i = 0; i < 730; i++) {
        char rel[64];
        snprintf(rel, sizeof(rel), "many/cdi/zz-%04d.yaml", i);
        write_plain(rel, "cdiVersion: 0.6.0\nkind: many.com/y\ndevices:\n"
                         "- {name: y, containerEdits: {env: [Y=1]}}\n");
    }
    assert_int_equal(cdi_registry_load(dirs, 1, &r, &e), 0);
    assert_int_equal(cdi_registry_n_specs(r), 1024);
    const char *errs = cdi_registry_errors(r);
    if (!strstr(errs, "/many/cdi\": more than 1024 spec files, the first 1024 by name read; "
                      "not read: zz-0724.yaml, zz-0725.yaml, zz-0726.yaml, zz-0727.yaml, "
                      "zz-0728.yaml, zz-0729.yaml"))
        fail_msg("%s", errs);
    assert_null(strstr(errs, "zz-0723.yaml"));
    cdi_registry_free(r);
    free(dir);
}

/* ---- OCI edit ------------------------------------------------------------------------------- */

static int fake_stat(void *ud, const char *path, struct cdi_host_node *ret, struct err *e)
{
    int *calls = ud;
    (*calls)++;
    if (strstr(path, "missing"))
        return err_set(e, -ENOENT, "stat \"%s\": No such file or directory", path);
    *ret = (struct cdi_host_node){.type = 'c', .major = 195, .minor = 200, .file_mode = 0660};
    return 0;
}

static json_t *apply(const char *oci_text, const char *spec_text, const char *device, int *calls,
                     int want_r, const char *want_err)
{
    struct cdi_spec *s = parse_ok("s.yaml", spec_text);
    json_error_t je;
    json_t *oci = json_loads(oci_text, 0, &je);
    assert_non_null(oci);
    const struct cdi_edits *edits[] = {cdi_spec_edits(s), cdi_spec_device_edits(s, device)};
    struct err e = {0};
    int r = cdi_oci_apply(oci, edits, ARRAY_SIZE(edits), fake_stat, calls, &e);
    if (r != want_r || (want_err && !strstr(err_msg(&e), want_err)))
        fail_msg("r=%d error \"%s\", want %d \"%s\"", r, err_msg(&e), want_r,
                 want_err ? want_err : "");
    cdi_spec_free(s);
    return oci;
}

static void assert_json(const json_t *got, const char *want_text)
{
    json_t *want = json_loads(want_text, 0, NULL);
    assert_non_null(want);
    if (!json_equal(got, want)) {
        char *g = json_dumps(got, JSON_SORT_KEYS | JSON_COMPACT);
        fail_msg("got %s\nwant %s", g, want_text);
    }
    json_decref(want);
}

static void test_oci_apply(void **state)
{
    (void)state;
    int calls = 0;
    static const char spec[] =
        "cdiVersion: 0.7.0\nkind: nvidia.com/gpu\n"
        "containerEdits:\n"
        "  env: [NVIDIA_VISIBLE_DEVICES=void, NEW=1]\n"
        "  deviceNodes: [{path: /dev/nvidiactl}]\n"
        "  mounts:\n"
        "  - {hostPath: /h/libcuda.so.1, containerPath: /usr/lib/libcuda.so.1, "
        "options: [ro, nosuid, nodev, bind]}\n"
        "  - {hostPath: /h/run, containerPath: /run, type: tmpfs}\n"
        "  hooks: [{hookName: createContainer, path: /bin/hook, args: [hook, x], env: [A=1], "
        "timeout: 5}]\n"
        "  additionalGids: [0, 44]\n"
        "devices:\n"
        "- name: \"0\"\n"
        "  containerEdits:\n"
        "    deviceNodes:\n"
        "    - {path: /dev/nvidia0, hostPath: /h/nvidia0, type: c, major: 195, minor: 0, "
        "fileMode: 0x1b6, permissions: rw, uid: 0, gid: 44}\n"
        "    - {path: /dev/fifo, type: p}\n"
        "    additionalGids: [44, 45]\n";
    json_t *oci = apply("{\"process\":{\"env\":[\"PATH=/bin\",\"NVIDIA_VISIBLE_DEVICES=0\"],"
                        "\"user\":{\"uid\":0,\"gid\":0}},"
                        "\"mounts\":[{\"destination\":\"/run/x/y\",\"source\":\"a\"},"
                        "{\"destination\":\"/run\",\"source\":\"old\"},"
                        "{\"destination\":\"/proc\",\"source\":\"proc\"}],"
                        "\"linux\":{\"devices\":[{\"path\":\"/dev/nvidia0\",\"type\":\"c\","
                        "\"major\":1,\"minor\":3}]}}",
                        spec, "0", &calls, 0, NULL);
    /* Only /dev/nvidiactl needed the host: the rest was in the spec, the fifo needs nothing. */
    assert_int_equal(calls, 1);
    assert_json(
        oci, "{\"process\":{\"env\":[\"PATH=/bin\",\"NVIDIA_VISIBLE_DEVICES=void\",\"NEW=1\"],"
             "\"user\":{\"uid\":0,\"gid\":0,\"additionalGids\":[44,45]}},"
             "\"mounts\":[{\"destination\":\"/proc\",\"source\":\"proc\"},"
             "{\"source\":\"/h/run\",\"destination\":\"/run\",\"type\":\"tmpfs\"},"
             "{\"destination\":\"/run/x/y\",\"source\":\"a\"},"
             "{\"source\":\"/h/libcuda.so.1\",\"destination\":\"/usr/lib/libcuda.so.1\","
             "\"options\":[\"ro\",\"nosuid\",\"nodev\",\"bind\"]}],"
             "\"linux\":{\"devices\":["
             "{\"path\":\"/dev/nvidia0\",\"type\":\"c\",\"major\":195,\"minor\":0,\"fileMode\":438,"
             "\"uid\":0,\"gid\":44},"
             "{\"path\":\"/dev/nvidiactl\",\"type\":\"c\",\"major\":195,\"minor\":200,"
             "\"fileMode\":432},"
             "{\"path\":\"/dev/fifo\",\"type\":\"p\"}],"
             "\"resources\":{\"devices\":["
             "{\"allow\":true,\"type\":\"c\",\"major\":195,\"minor\":200,\"access\":\"rwm\"},"
             "{\"allow\":true,\"type\":\"c\",\"major\":195,\"minor\":0,\"access\":\"rw\"}]}},"
             "\"hooks\":{\"createContainer\":[{\"path\":\"/bin/hook\",\"args\":[\"hook\",\"x\"],"
             "\"env\":[\"A=1\"],\"timeout\":5}]}}");
    json_decref(oci);

    /* An empty OCI spec gets the objects created. */
    calls = 0;
    oci = apply("{}",
                "cdiVersion: 0.5.0\nkind: a.com/b\ndevices:\n- name: x\n"
                "  containerEdits: {env: [A=1], mounts: [{hostPath: /a, containerPath: /b}]}\n",
                "x", &calls, 0, NULL);
    assert_json(oci, "{\"process\":{\"env\":[\"A=1\"]},"
                     "\"mounts\":[{\"source\":\"/a\",\"destination\":\"/b\"}]}");
    json_decref(oci);

    /* A field of the wrong type, a device node the host lacks: errors naming them. */
    static const struct {
        const char *oci, *spec, *want;
    } bad[] = {
        {"{\"process\":{\"env\":\"x\"}}",
         "cdiVersion: 0.5.0\nkind: a.com/b\ndevices: [{name: x, containerEdits: {env: [A=1]}}]\n",
         "config.json: process.env: expected an array"},
        {"{\"linux\":[]}",
         "cdiVersion: 0.5.0\nkind: a.com/b\ndevices: [{name: x, containerEdits: "
         "{deviceNodes: [{path: /dev/x}]}}]\n",
         "config.json: linux: expected an object"},
        {"{\"hooks\":{\"poststop\":{}}}",
         "cdiVersion: 0.5.0\nkind: a.com/b\ndevices: [{name: x, containerEdits: "
         "{hooks: [{hookName: poststop, path: /x}]}}]\n",
         "config.json: hooks.poststop: expected an array"},
        {"{}",
         "cdiVersion: 0.5.0\nkind: a.com/b\ndevices: [{name: x, containerEdits: "
         "{deviceNodes: [{path: /dev/missing0}]}}]\n",
         "device node \"/dev/missing0\": stat \"/dev/missing0\""},
        {"[]",
         "cdiVersion: 0.5.0\nkind: a.com/b\ndevices: [{name: x, containerEdits: {env: [A=1]}}]\n",
         "config.json: expected an object"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
        json_decref(
            apply(bad[i].oci, bad[i].spec, "x", &calls, i == 3 ? -ENOENT : -EINVAL, bad[i].want));
}

/* The real stat: /dev/null is c 1:3. */
static void test_stat_host(void **state)
{
    (void)state;
    struct cdi_host_node h;
    struct err e = {0};
    assert_int_equal(cdi_stat_host(NULL, "/dev/null", &h, &e), 0);
    assert_int_equal(h.type, 'c');
    assert_int_equal(h.major, 1);
    assert_int_equal(h.minor, 3);
    assert_int_equal(cdi_stat_host(NULL, "/etc/hostname-not-here", &h, &e), -ENOENT);
    assert_int_equal(cdi_stat_host(NULL, "/", &h, &e), -EINVAL);
    assert_non_null(strstr(err_msg(&e), "not a device node"));
}

int main(void)
{
    snprintf(tmp, sizeof(tmp), "/tmp/gpuop-test-cdi-XXXXXX");
    assert_non_null(mkdtemp(tmp));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_ok),       cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_names),          cmocka_unit_test(test_registry),
        cmocka_unit_test(test_oci_apply),      cmocka_unit_test(test_stat_host),
        cmocka_unit_test(test_registry_trust), cmocka_unit_test(test_registry_many),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    char *cmd = xasprintf("rm -rf '%s'", tmp);
    if (system(cmd) != 0)
        rc = rc ? rc : 1;
    free(cmd);
    return rc;
}
