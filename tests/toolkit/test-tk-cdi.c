/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The toolkit's CDI core: the spec for a fixed inventory and driver against golden files
 * (tests/toolkit/golden/unit-*.yaml; GPUOP_UPDATE_GOLDEN=1 rewrites them), byte stability,
 * cdiVersion, MIG capability minors, names, bad input; and the driver lookup on a fake driver
 * root built in a temporary directory (search order, one pass per directory, other versions
 * left out, links, vdpau, firmware, binaries, IPC; no NVML, no CUDA, a bad version).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "cdi.h"
#include "nvcdi.h"

/* ---- a fixed inventory -------------------------------------------------------------------- */

static struct gpu_mig_device migs[2];
static struct gpu_device gpus[3];
static struct gpu_inventory inv;

static void make_inventory(void)
{
    memset(gpus, 0, sizeof(gpus));
    memset(migs, 0, sizeof(migs));
    strcpy(inv.driver_version, "550.90.07");
    gpus[0].index = 0;
    gpus[0].minor = 0;
    strcpy(gpus[0].uuid, "GPU-00000000-1111-2222-3333-444444444444");
    gpus[1].index = 1;
    gpus[1].minor = 3; /* minors need not follow indices */
    strcpy(gpus[1].uuid, "GPU-aaaaaaaa-1111-2222-3333-444444444444");
    gpus[1].mig_enabled = true;
    gpus[1].n_mig = 2;
    gpus[1].mig = migs;
    migs[0] = (struct gpu_mig_device){.index = 0, .gi_id = 1, .ci_id = 0};
    strcpy(migs[0].uuid, "MIG-11111111-2222-3333-4444-555555555555");
    migs[1] = (struct gpu_mig_device){.index = 1, .gi_id = 9, .ci_id = 0};
    strcpy(migs[1].uuid, "MIG-66666666-2222-3333-4444-555555555555");
    gpus[2].index = 2;
    gpus[2].minor = 2;
    gpus[2].lost = true; /* no UUID: named by index only */
    inv.n_gpus = 3;
    inv.gpus = gpus;
}

static struct nvcdi_file files[] = {
    {NVCDI_FILE_LIBRARY, "/usr/lib/x86_64-linux-gnu/libcuda.so.550.90.07", NULL},
    {NVCDI_FILE_LIBRARY, "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.90.07", NULL},
    {NVCDI_FILE_LIBRARY, "/usr/lib/x86_64-linux-gnu/vdpau/libvdpau_nvidia.so.550.90.07", NULL},
    {NVCDI_FILE_LIBRARY, "/lib64/libnvidia-opencl.so.550.90.07",
     "/usr/lib64/libnvidia-opencl.so.550.90.07"},
    {NVCDI_FILE_LINK, "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
     "/usr/lib/x86_64-linux-gnu/libcuda.so.550.90.07"},
    {NVCDI_FILE_FIRMWARE, "/lib/firmware/nvidia/550.90.07/gsp_ga10x.bin", NULL},
    {NVCDI_FILE_BINARY, "/usr/bin/nvidia-smi", NULL},
    {NVCDI_FILE_IPC, "/run/nvidia-persistenced/socket", NULL},
};

static struct nvcdi_driver driver = {
    .version = "550.90.07",
    .libcuda_dir = "/usr/lib/x86_64-linux-gnu",
    .n_files = sizeof(files) / sizeof(files[0]),
    .files = files,
};

/* ---- golden files ------------------------------------------------------------------------- */

static char *golden_path(const char *name)
{
    const char *src = getenv("GPUOP_SOURCE_ROOT");
    assert_non_null(src);
    return xasprintf("%s/tests/toolkit/golden/%s", src, name);
}

static void check_golden(const char *name, const char *text)
{
    _cleanup_free_ char *path = golden_path(name);
    const char *update = getenv("GPUOP_UPDATE_GOLDEN");
    struct err e = {0};
    if (update && strcmp(update, "1") == 0) {
        assert_int_equal(file_write_atomic(path, text, strlen(text), 0644, &e), 0);
        return;
    }
    _cleanup_free_ char *want = NULL;
    size_t len;
    if (file_read_all(path, 1u << 20, &want, &len, &e) < 0)
        fail_msg("%s (GPUOP_UPDATE_GOLDEN=1 writes it)", err_msg(&e));
    if (strcmp(want, text) != 0) {
        fprintf(stderr, "--- %s differs; got:\n%s\n", path, text);
        fail();
    }
}

/* Renders, and reads the spec back with the CDI model every consumer uses. */
static char *render_or_fail(const struct nvcdi_cdi_input *in)
{
    struct err e = {0};
    char *text = NULL;
    if (nvcdi_cdi_render(in, &text, &e) < 0)
        fail_msg("render: %s", err_msg(&e));
    _cleanup_(cdi_spec_freep) struct cdi_spec *s = NULL;
    if (cdi_spec_parse("rendered", text, strlen(text), &s, &e) < 0)
        fail_msg("%s", err_msg(&e));
    assert_string_equal(cdi_spec_kind(s), NVCDI_CDI_KIND);
    _cleanup_sbuf_ struct sbuf names;
    sbuf_init(&names, 1u << 16);
    assert_int_equal(nvcdi_cdi_names(in->inv, &names), 0);
    size_t n = 0;
    for (const char *p = names.data; p && *p; p = strchr(p, '\n') + 1, n++) {
        const char *eq = strchr(p, '=') + 1;
        _cleanup_free_ char *name = xstrndup(eq, (size_t)(strchr(p, '\n') - eq));
        assert_true(cdi_spec_has_device(s, name));
    }
    assert_int_equal(cdi_spec_n_devices(s), n);
    return text;
}

static void test_golden_host(void **state)
{
    (void)state;
    make_inventory();
    struct nvcdi_cdi_input in = {.inv = &inv, .driver = &driver, .driver_root = "/"};
    _cleanup_free_ char *a = render_or_fail(&in);
    _cleanup_free_ char *b = render_or_fail(&in);
    assert_string_equal(a, b); /* byte-stable */
    check_golden("unit-host.yaml", a);
    /* host driver: no hostPath anywhere, so 0.5.0 is for the index names */
    assert_null(strstr(a, "hostPath: /dev"));
    assert_null(strstr(a, "hooks:")); /* no hook path: no hooks */
    assert_non_null(strstr(a, "cdiVersion: \"0.5.0\"\n"));
}

static void test_golden_container(void **state)
{
    (void)state;
    make_inventory();
    /* mig-minors lists GPU minor 3's GI 1 and its CI 0 only: GI 9 is computed */
    const char *minors = "config 1\nmonitor 2\ngpu3/gi1/access 500\ngpu3/gi1/ci0/access 501\n";
    bool present[NVCDI_N_CONTROL] = {true, true, false, true}; /* no nvidia-uvm-tools */
    struct nvcdi_cdi_input in = {.inv = &inv,
                                 .driver = &driver,
                                 .driver_root = "/run/nvidia/driver/",
                                 .mig_minors = minors,
                                 .control_present = present,
                                 .hook_path = "/usr/local/nvidia/gpuop"};
    _cleanup_free_ char *a = render_or_fail(&in);
    check_golden("unit-container.yaml", a);
    /* a file whose links resolve elsewhere inside the driver root is mounted from there */
    assert_non_null(
        strstr(a, "  - hostPath: /run/nvidia/driver/usr/lib64/libnvidia-opencl.so.550.90.07\n"
                  "    containerPath: /lib64/libnvidia-opencl.so.550.90.07\n"));
    /* the hooks: the libcuda.so link, then the loader cache with the library folders once each,
     * in the mounts' order, and the driver's version for CUDA forward compatibility */
    assert_non_null(strstr(a, "  hooks:\n"
                              "  - hookName: createContainer\n"
                              "    path: /usr/local/nvidia/gpuop\n"
                              "    args:\n"
                              "    - gpuop\n"
                              "    - cdi-hook\n"
                              "    - create-symlinks\n"
                              "    - \"--link\"\n"
                              "    - libcuda.so.1::/usr/lib/x86_64-linux-gnu/libcuda.so\n"
                              "  - hookName: createContainer\n"
                              "    path: /usr/local/nvidia/gpuop\n"
                              "    args:\n"
                              "    - gpuop\n"
                              "    - cdi-hook\n"
                              "    - update-ldcache\n"
                              "    - \"--host-driver-version\"\n"
                              "    - \"550.90.07\"\n"
                              "    - \"--folder\"\n"
                              "    - /usr/lib/x86_64-linux-gnu\n"
                              "    - \"--folder\"\n"
                              "    - /usr/lib/x86_64-linux-gnu/vdpau\n"
                              "    - \"--folder\"\n"
                              "    - /lib64\n"));
    {
        struct err he = {0};
        _cleanup_(cdi_spec_freep) struct cdi_spec *hs = NULL;
        assert_int_equal(cdi_spec_parse("rendered", a, strlen(a), &hs, &he), 0);
        const struct cdi_edits *common = cdi_spec_edits(hs);
        assert_int_equal(common->n_hooks, 2);
        assert_string_equal(common->hooks[0].hook_name, "createContainer");
        assert_int_equal(common->hooks[1].n_args, 11);
        assert_string_equal(common->hooks[1].args[4], "550.90.07");
    }
    /* a relative hook path is bad input */
    char *bad = NULL;
    struct err be = {0};
    in.hook_path = "gpuop";
    assert_int_equal(nvcdi_cdi_render(&in, &bad, &be), -EINVAL);
    assert_null(bad);
    in.hook_path = "/usr/local/nvidia/gpuop";
    assert_non_null(strstr(a, "/dev/nvidia-caps/nvidia-cap500\n"));
    assert_non_null(strstr(a, "/dev/nvidia-caps/nvidia-cap501\n"));
    assert_null(strstr(a, "nvidia-uvm-tools"));
    assert_non_null(
        strstr(a, "  - hostPath: /run/nvidia/driver/usr/lib/x86_64-linux-gnu/libcuda.so.550.90.07\n"
                  "    containerPath: /usr/lib/x86_64-linux-gnu/libcuda.so.1\n"));
    /* a separate device root */
    in.dev_root = "/";
    _cleanup_free_ char *c = render_or_fail(&in);
    assert_null(strstr(c, "hostPath: /run/nvidia/driver/dev/"));
    assert_non_null(strstr(c, "hostPath: /run/nvidia/driver/usr/bin/nvidia-smi\n"));
}

/* Every golden spec (the fleets' too, which the integration test compares byte for byte with
 * what gpuop writes) checks with the CDI model, at the lowest version its fields need. */
static void test_goldens_parse(void **state)
{
    (void)state;
    const char *names[] = {"unit-host.yaml", "unit-container.yaml",     "dgx-h100.yaml",
                           "hgx-h200.yaml",  "dgx-a100-80gb-mig.yaml",  "pcie-l4.yaml",
                           "dgx1-v100.yaml", "pcie-l4-host-driver.yaml"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        _cleanup_free_ char *path = golden_path(names[i]);
        struct err e = {0};
        _cleanup_(cdi_spec_freep) struct cdi_spec *s = NULL;
        if (cdi_spec_load(path, &s, &e) < 0)
            fail_msg("%s", err_msg(&e));
        assert_string_equal(cdi_spec_version(s), "0.5.0");
        assert_true(cdi_spec_has_device(s, "all"));
        assert_true(cdi_spec_has_device(s, "0"));
        const struct cdi_edits *all = cdi_spec_device_edits(s, "all");
        assert_non_null(all);
        assert_true(all->n_device_nodes >= 1);
        const struct cdi_edits *common = cdi_spec_edits(s);
        assert_true(common->n_mounts >= 2);
        assert_int_equal(common->n_env, 1);
    }
    /* the MIG fleet: 8 GPUs (16 names), 26 MIG devices (52 names), all */
    _cleanup_free_ char *path = golden_path("dgx-a100-80gb-mig.yaml");
    struct err e = {0};
    _cleanup_(cdi_spec_freep) struct cdi_spec *s = NULL;
    assert_int_equal(cdi_spec_load(path, &s, &e), 0);
    assert_int_equal(cdi_spec_n_devices(s), 16 + 52 + 1);
    const struct cdi_edits *mig = cdi_spec_device_edits(s, "0:0");
    assert_non_null(mig);
    assert_int_equal(mig->n_device_nodes, 3); /* /dev/nvidia0 and two capability nodes */
    assert_true(mig->device_nodes[0].has_major);
    assert_int_equal(mig->device_nodes[0].major, 195);
}

static void test_names(void **state)
{
    (void)state;
    make_inventory();
    _cleanup_sbuf_ struct sbuf b;
    sbuf_init(&b, 4096);
    assert_int_equal(nvcdi_cdi_names(&inv, &b), 0);
    assert_string_equal(b.data, "nvidia.com/gpu=0\n"
                                "nvidia.com/gpu=GPU-00000000-1111-2222-3333-444444444444\n"
                                "nvidia.com/gpu=1\n"
                                "nvidia.com/gpu=GPU-aaaaaaaa-1111-2222-3333-444444444444\n"
                                "nvidia.com/gpu=1:0\n"
                                "nvidia.com/gpu=MIG-11111111-2222-3333-4444-555555555555\n"
                                "nvidia.com/gpu=1:1\n"
                                "nvidia.com/gpu=MIG-66666666-2222-3333-4444-555555555555\n"
                                "nvidia.com/gpu=2\n"
                                "nvidia.com/gpu=all\n");
    /* a kind of the caller's (the DRA plugin's): the same devices under it */
    struct nvcdi_cdi_input in = {
        .inv = &inv, .driver = &driver, .driver_root = "/", .kind = "k8s.gpu.nvidia.com/device"};
    struct err e = {0};
    _cleanup_free_ char *text = NULL;
    assert_int_equal(nvcdi_cdi_render(&in, &text, &e), 0);
    _cleanup_(cdi_spec_freep) struct cdi_spec *s = NULL;
    assert_int_equal(cdi_spec_parse("rendered", text, strlen(text), &s, &e), 0);
    assert_string_equal(cdi_spec_kind(s), "k8s.gpu.nvidia.com/device");
    assert_true(cdi_spec_has_device(s, "GPU-aaaaaaaa-1111-2222-3333-444444444444"));
    assert_true(cdi_spec_has_device(s, "MIG-11111111-2222-3333-4444-555555555555"));
    /* a full buffer is an error */
    _cleanup_sbuf_ struct sbuf small;
    sbuf_init(&small, 16);
    assert_true(nvcdi_cdi_names(&inv, &small) < 0);
}

static void test_versions(void **state)
{
    (void)state;
    struct {
        struct nvcdi_cdi_features f;
        const char *want;
    } cases[] = {
        {{0}, "0.3.0"},
        {{.mount_types = true}, "0.4.0"},
        {{.digit_names = true}, "0.5.0"},
        {{.host_paths = true, .mount_types = true}, "0.5.0"},
        {{.annotations = true, .digit_names = true}, "0.6.0"},
        {{.extra_gids = true}, "0.7.0"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        assert_string_equal(nvcdi_cdi_min_version(&cases[i].f), cases[i].want);
}

static void test_mig_minors(void **state)
{
    (void)state;
    /* the driver's layout: GI 0 of GPU 0 is 3, its CIs 4..11; GI 2 is 21; GPU 1 starts at 138 */
    assert_int_equal(gpu_mig_cap_minor(NULL, 0, 0, -1), 3);
    assert_int_equal(gpu_mig_cap_minor(NULL, 0, 0, 7), 11);
    assert_int_equal(gpu_mig_cap_minor(NULL, 0, 2, -1), 21);
    assert_int_equal(gpu_mig_cap_minor(NULL, 0, 7, 0), 67);
    assert_int_equal(gpu_mig_cap_minor(NULL, 1, 0, -1), 138);
    /* the file wins; lines that do not parse are skipped */
    const char *text = "gpu0/gi7/access 66x\ngpu0/gi7/access 90\ngpu0/gi7/ci0/access 91\n"
                       "gpu0/gi8/access\n";
    assert_int_equal(gpu_mig_cap_minor(text, 0, 7, -1), 90);
    assert_int_equal(gpu_mig_cap_minor(text, 0, 7, 0), 91);
    assert_int_equal(gpu_mig_cap_minor(text, 0, 8, -1), 75);
}

static void test_bad_input(void **state)
{
    (void)state;
    struct err e = {0};
    char *text = NULL;
    struct gpu_inventory empty = {0};
    struct nvcdi_cdi_input in = {.inv = &empty, .driver = &driver, .driver_root = "/"};
    assert_int_equal(nvcdi_cdi_render(&in, &text, &e), -EINVAL);
    assert_non_null(strstr(err_msg(&e), "no GPUs"));
    assert_null(text);
    make_inventory();
    in.inv = &inv;
    in.driver_root = "run/nvidia/driver";
    assert_int_equal(nvcdi_cdi_render(&in, &text, &e), -EINVAL);
    in.driver_root = "/";
    in.dev_root = "dev";
    assert_int_equal(nvcdi_cdi_render(&in, &text, &e), -EINVAL);
    assert_null(text);
}

/* ---- the lookup on a fake driver root ----------------------------------------------------- */

static char root[256];

static void mk(const char *rel)
{
    _cleanup_free_ char *p = xasprintf("%s%s", root, rel);
    _cleanup_free_ char *d = xstrdup(p);
    *strrchr(d, '/') = 0;
    assert_int_equal(mkdir_p(d, 0755), 0);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs("x\n", f);
    fclose(f);
}

static void ln(const char *target, const char *rel)
{
    _cleanup_free_ char *p = xasprintf("%s%s", root, rel);
    _cleanup_free_ char *d = xstrdup(p);
    *strrchr(d, '/') = 0;
    assert_int_equal(mkdir_p(d, 0755), 0);
    assert_int_equal(symlink(target, p), 0);
}

static int setup_root(void **state)
{
    (void)state;
    snprintf(root, sizeof(root), "/tmp/gpuop-tk-root.XXXXXX");
    assert_non_null(mkdtemp(root));
    const char *v = "550.90.07";
    char p[256];
    const char *libs[] = {"libcuda", "libnvidia-ml", "libnvidia-ptxjitcompiler"};
    for (size_t i = 0; i < 3; i++) {
        snprintf(p, sizeof(p), "/usr/lib/x86_64-linux-gnu/%s.so.%s", libs[i], v);
        mk(p);
        snprintf(p, sizeof(p), "%s.so.%s", libs[i], v);
        char l[256];
        snprintf(l, sizeof(l), "/usr/lib/x86_64-linux-gnu/%s.so.1", libs[i]);
        ln(p, l);
    }
    ln("libcuda.so.1", "/usr/lib/x86_64-linux-gnu/libcuda.so"); /* the dev link: left out */
    mk("/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.535.183.01"); /* an older driver's leftover */
    ln("libnvidia-ml.so.535.183.01", "/usr/lib/x86_64-linux-gnu/libnvidia-old.so.1");
    mk("/usr/lib/x86_64-linux-gnu/libc.so.6");
    mk("/usr/lib/x86_64-linux-gnu/vdpau/libvdpau_nvidia.so.550.90.07");
    mk("/usr/lib64/libnvidia-opencl.so.550.90.07"); /* a second directory, searched earlier */
    ln("../usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu"); /* the same dir again */
    mk("/lib/firmware/nvidia/550.90.07/gsp_tu10x.bin");
    mk("/lib/firmware/nvidia/550.90.07/gsp_ga10x.bin");
    mk("/lib/firmware/nvidia/550.90.07/README");
    mk("/lib/firmware/nvidia/535.183.01/gsp_ga10x.bin");
    mk("/usr/bin/nvidia-smi");
    mk("/bin/nvidia-smi"); /* found later in the order: not used */
    mk("/usr/sbin/nvidia-persistenced");
    mk("/usr/bin/nvidia-cuda-mps-control");
    mk("/run/nvidia-persistenced/socket");
    _cleanup_free_ char *mps = xasprintf("%s/tmp/nvidia-mps", root);
    assert_int_equal(mkdir_p(mps, 0755), 0);
    return 0;
}

static int teardown_root(void **state)
{
    (void)state;
    _cleanup_free_ char *cmd = xasprintf("rm -rf '%s'", root);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_lookup(void **state)
{
    (void)state;
    /* the fake root is the driver root under host root "/" */
    struct err e = {0};
    _cleanup_(nvcdi_driver_freep) struct nvcdi_driver *d = NULL;
    if (nvcdi_driver_lookup("/", root, "550.90.07", &d, &e) < 0)
        fail_msg("lookup: %s", err_msg(&e));
    const char *want[] = {
        "L /usr/lib64/libnvidia-opencl.so.550.90.07",
        "L /usr/lib/x86_64-linux-gnu/libcuda.so.550.90.07",
        "L /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.90.07",
        "L /usr/lib/x86_64-linux-gnu/libnvidia-ptxjitcompiler.so.550.90.07",
        "L /usr/lib/x86_64-linux-gnu/vdpau/libvdpau_nvidia.so.550.90.07",
        "S /usr/lib/x86_64-linux-gnu/libcuda.so.1",
        "S /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
        "S /usr/lib/x86_64-linux-gnu/libnvidia-ptxjitcompiler.so.1",
        "F /lib/firmware/nvidia/550.90.07/gsp_ga10x.bin",
        "F /lib/firmware/nvidia/550.90.07/gsp_tu10x.bin",
        "B /usr/bin/nvidia-smi",
        "B /usr/sbin/nvidia-persistenced",
        "B /usr/bin/nvidia-cuda-mps-control",
        "I /run/nvidia-persistenced/socket",
        "I /tmp/nvidia-mps",
    };
    const char kinds[] = "LSFBI";
    size_t n = sizeof(want) / sizeof(want[0]);
    for (size_t i = 0; i < d->n_files && i < n; i++) {
        char got[512];
        snprintf(got, sizeof(got), "%c %s", kinds[d->files[i].kind], d->files[i].path);
        assert_string_equal(got, want[i]);
    }
    assert_int_equal(d->n_files, n);
    assert_string_equal(d->libcuda_dir, "/usr/lib/x86_64-linux-gnu");
    assert_string_equal(d->version, "550.90.07");

    /* the same through a host root: the paths stay inside the driver root */
    nvcdi_driver_free(d);
    d = NULL;
    char parent[256];
    snprintf(parent, sizeof(parent), "%s", root);
    char *slash = strrchr(parent, '/');
    _cleanup_free_ char *droot = xasprintf("/%s", slash + 1);
    *slash = 0;
    if (nvcdi_driver_lookup(parent, droot, "550.90.07", &d, &e) < 0)
        fail_msg("lookup: %s", err_msg(&e));
    assert_int_equal(d->n_files, n);

    char nvml[512];
    assert_int_equal(nvcdi_driver_find_nvml(parent, droot, nvml, sizeof(nvml), &e), 0);
    /* the link resolved inside the driver root: what dlopen then reads is inside it */
    _cleanup_free_ char *want_nvml =
        xasprintf("%s/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.90.07", root);
    assert_string_equal(nvml, want_nvml);
    assert_int_equal(d->n_skipped, 0);
}

/* Links that lead outside the driver root: a library linked to /etc/shadow (absolute) and to
 * ../../../../etc/passwd (past the root), an absolute .so.1 link whose target is inside (rebased)
 * and one whose target is not, a binary linked to the host's /bin/sh, a library folder that is an
 * absolute link (rebased), NVML reached through an absolute link. Nothing found resolves outside
 * the driver root; every escaping file is in the skipped list with its reason. */
static void test_lookup_escapes(void **state)
{
    (void)state;
    const char *v = "550.90.07";
    char p[256], t[256];
    snprintf(p, sizeof(p), "/usr/lib/x86_64-linux-gnu/libnvidia-escape.so.%s", v);
    ln("/etc/shadow", p);
    snprintf(p, sizeof(p), "/usr/lib/x86_64-linux-gnu/libnvidia-up.so.%s", v);
    ln("../../../../../../../../etc/passwd", p);
    /* the .so.1 links made absolute: one inside, one pointing at nothing inside the root */
    _cleanup_free_ char *l1 = xasprintf("%s/usr/lib/x86_64-linux-gnu/libcuda.so.1", root);
    assert_int_equal(unlink(l1), 0);
    snprintf(t, sizeof(t), "/usr/lib/x86_64-linux-gnu/libcuda.so.%s", v);
    assert_int_equal(symlink(t, l1), 0);
    _cleanup_free_ char *l2 =
        xasprintf("%s/usr/lib/x86_64-linux-gnu/libnvidia-ptxjitcompiler.so.1", root);
    assert_int_equal(unlink(l2), 0);
    snprintf(t, sizeof(t), "/opt/elsewhere/libnvidia-ptxjitcompiler.so.%s", v);
    assert_int_equal(symlink(t, l2), 0);
    _cleanup_free_ char *smi = xasprintf("%s/usr/bin/nvidia-smi", root);
    assert_int_equal(unlink(smi), 0);
    assert_int_equal(symlink("/bin/sh", smi), 0); /* /bin/nvidia-smi of the root is found next */
    /* /lib64 -> /usr/lib64, absolute: read inside the root, the same folder as /usr/lib64 */
    ln("/usr/lib64", "/lib64");
    /* NVML's .so.1 absolute */
    _cleanup_free_ char *l3 = xasprintf("%s/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1", root);
    assert_int_equal(unlink(l3), 0);
    snprintf(t, sizeof(t), "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.%s", v);
    assert_int_equal(symlink(t, l3), 0);

    struct err e = {0};
    _cleanup_(nvcdi_driver_freep) struct nvcdi_driver *d = NULL;
    if (nvcdi_driver_lookup("/", root, v, &d, &e) < 0)
        fail_msg("lookup: %s", err_msg(&e));
    bool cuda1 = false;
    for (size_t i = 0; i < d->n_files; i++) {
        const struct nvcdi_file *f = &d->files[i];
        const char *host = f->resolved ? f->resolved : f->path;
        /* what the spec mounts is a file of the root, reached without a link */
        _cleanup_free_ char *hp = xasprintf("%s%s", root, host);
        struct stat st;
        assert_int_equal(lstat(hp, &st), 0);
        assert_false(S_ISLNK(st.st_mode));
        assert_null(strstr(f->path, "escape"));
        assert_null(strstr(f->path, "libnvidia-up"));
        assert_null(strstr(f->path, "ptxjitcompiler.so.1"));
        assert_string_not_equal(f->path, "/usr/bin/nvidia-smi");
        if (strcmp(f->path, "/usr/lib/x86_64-linux-gnu/libcuda.so.1") == 0) {
            cuda1 = true;
            assert_non_null(f->resolved);
            assert_string_equal(f->resolved, "/usr/lib/x86_64-linux-gnu/libcuda.so.550.90.07");
        }
        if (strcmp(f->path, "/bin/nvidia-smi") == 0)
            assert_null(f->resolved);
    }
    assert_true(cuda1);
    const char *want_skipped[][2] = {
        {"/usr/lib/x86_64-linux-gnu/libnvidia-escape.so.550.90.07",
         "resolves to \"/etc/shadow\" inside the driver root"},
        {"/usr/lib/x86_64-linux-gnu/libnvidia-up.so.550.90.07",
         "resolves to \"/etc/passwd\" inside the driver root"},
        {"/usr/lib/x86_64-linux-gnu/libnvidia-ptxjitcompiler.so.1",
         "resolves to \"/opt/elsewhere/libnvidia-ptxjitcompiler.so.550.90.07\""},
        {"/usr/bin/nvidia-smi", "resolves to \"/bin/sh\""},
    };
    assert_int_equal(d->n_skipped, ARRAY_SIZE(want_skipped));
    for (size_t i = 0; i < ARRAY_SIZE(want_skipped); i++) {
        assert_string_equal(d->skipped[i].path, want_skipped[i][0]);
        if (!strstr(d->skipped[i].reason, want_skipped[i][1]))
            fail_msg("%s: %s", d->skipped[i].path, d->skipped[i].reason);
        assert_non_null(strstr(d->skipped[i].reason, "which is not inside the driver root"));
    }
    /* /lib64 is /usr/lib64 once resolved: its library counted once */
    size_t opencl = 0;
    for (size_t i = 0; i < d->n_files; i++)
        opencl += strstr(d->files[i].path, "libnvidia-opencl") != NULL;
    assert_int_equal(opencl, 1);

    /* the driver root has an /etc/shadow of its own: the link is still left out, not a library */
    mk("/etc/shadow");
    nvcdi_driver_free(d);
    d = NULL;
    assert_int_equal(nvcdi_driver_lookup("/", root, v, &d, &e), 0);
    assert_string_equal(d->skipped[0].path, want_skipped[0][0]);
    assert_non_null(strstr(d->skipped[0].reason, "not a library"));

    /* NVML through its absolute link, resolved inside the root */
    char nvml[512];
    assert_int_equal(nvcdi_driver_find_nvml("/", root, nvml, sizeof(nvml), &e), 0);
    _cleanup_free_ char *want =
        xasprintf("%s/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.%s", root, v);
    assert_string_equal(nvml, want);
}

static void test_lookup_bad(void **state)
{
    (void)state;
    struct err e = {0};
    struct nvcdi_driver *d = NULL;
    /* a version this root has no NVML for */
    assert_int_equal(nvcdi_driver_lookup("/", root, "570.86.15", &d, &e), -ENOENT);
    assert_non_null(strstr(err_msg(&e), "no libnvidia-ml.so.570.86.15 (NVML)"));
    assert_non_null(strstr(err_msg(&e), root));
    assert_null(d);
    /* NVML without CUDA */
    assert_int_equal(nvcdi_driver_lookup("/", root, "535.183.01", &d, &e), -ENOENT);
    assert_non_null(strstr(err_msg(&e), "no libcuda.so.535.183.01 (CUDA)"));
    /* not a version */
    assert_int_equal(nvcdi_driver_lookup("/", root, "../../x", &d, &e), -EINVAL);
    assert_int_equal(nvcdi_driver_lookup("/", root, "", &d, &e), -EINVAL);
    /* no such root */
    assert_int_equal(nvcdi_driver_lookup(root, "/nonexistent", "550.90.07", &d, &e), -ENOENT);
    assert_non_null(strstr(err_msg(&e), "/nonexistent"));
    char buf[256];
    assert_int_equal(nvcdi_driver_find_nvml(root, "/nonexistent", buf, sizeof(buf), &e), -ENOENT);
    assert_non_null(strstr(err_msg(&e), "no libnvidia-ml.so.1"));
    assert_null(d);
}

/* The generator through the simulated NVML on the fake root as the host's own driver: the hooks
 * run the gpuop .toolkit-ctr-ready's TOOLKIT_INSTALL_DIR names (what the MIG manager writes, so
 * it agrees with the toolkit), else NVCDI_HOOK_PATH; none, with a warning, where that is not an
 * executable file; hook_path "" turns them off; an escaping driver file is a warning. */
static void test_gen_hooks(void **state)
{
    (void)state;
    const char *build = getenv("GPUOP_BUILD_ROOT"), *src = getenv("GPUOP_SOURCE_ROOT");
    assert_non_null(build);
    assert_non_null(src);
    _cleanup_free_ char *nvml = xasprintf("%s/libnvidia-ml.so.1", build);
    _cleanup_free_ char *fleet = xasprintf("%s/sim/fleets/dgx-a100-80gb-mig.yaml", src);
    _cleanup_free_ char *simstate = xasprintf("%s/sim-state", root);
    assert_int_equal(mkdir_p(simstate, 0755), 0);
    /* single-threaded test: the simulated NVML reads its fleet from the environment */
    setenv("GPUOP_SIM_FLEET", fleet, 1);
    setenv("GPUOP_SIM_STATE", simstate, 1);
    char p[256];
    snprintf(p, sizeof(p), "/usr/lib/x86_64-linux-gnu/libnvidia-escape.so.550.90.07");
    ln("/etc/shadow", p);
    struct nvcdi_gen_options o = {.host_root = root,
                                  .driver_root = "/",
                                  .nvml_library = nvml,
                                  .validations_dir = "/run/nvidia/validations"};
    struct err e = {0};
    const struct nvcdi_warning *w = NULL;

    /* no marker, nothing at NVCDI_HOOK_PATH: no hooks, the warning names the path */
    _cleanup_(nvcdi_gen_freep) struct nvcdi_gen *g = nvcdi_gen_new(&o);
    _cleanup_free_ char *a = NULL;
    if (nvcdi_gen_spec(g, &a, NULL, 0, &e) < 0)
        fail_msg("%s", err_msg(&e));
    assert_null(strstr(a, "hooks:"));
    size_t n = nvcdi_gen_warnings(g, &w);
    assert_int_equal(n, 2);
    assert_string_equal(w[0].what, "driver file left out of the CDI spec");
    assert_string_equal(w[0].path, p);
    assert_non_null(strstr(w[0].reason, "/etc/shadow"));
    assert_string_equal(w[1].what, "CDI hooks left out");
    assert_string_equal(w[1].path, NVCDI_HOOK_PATH);

    /* the toolkit's marker names its install folder, gpuop is there */
    mk("/run/nvidia/validations/.toolkit-ctr-ready");
    _cleanup_free_ char *marker = xasprintf("%s/run/nvidia/validations/.toolkit-ctr-ready", root);
    const char *text = "RUNTIME=containerd\nCDI_SPEC=/var/run/cdi/nvidia.yaml\n"
                       "TOOLKIT_INSTALL_DIR=/opt/tk\n";
    assert_int_equal(file_write_atomic(marker, text, strlen(text), 0644, &e), 0);
    mk("/opt/tk/gpuop");
    _cleanup_free_ char *bin = xasprintf("%s/opt/tk/gpuop", root);
    assert_int_equal(chmod(bin, 0755), 0);
    _cleanup_free_ char *b = NULL;
    assert_int_equal(nvcdi_gen_spec(g, &b, NULL, 0, &e), 0);
    assert_non_null(
        strstr(b, "  hooks:\n  - hookName: createContainer\n    path: /opt/tk/gpuop\n"));
    assert_int_equal(nvcdi_gen_warnings(g, &w), 1);
    /* not executable: left out again */
    assert_int_equal(chmod(bin, 0644), 0);
    _cleanup_free_ char *c = NULL;
    assert_int_equal(nvcdi_gen_spec(g, &c, NULL, 0, &e), 0);
    assert_null(strstr(c, "hooks:"));
    assert_int_equal(nvcdi_gen_warnings(g, &w), 2);
    assert_string_equal(w[1].path, "/opt/tk/gpuop");

    /* hook_path given and unchecked (the daemon installs it with the spec); "" turns hooks off */
    o.hook_path = "/usr/local/nvidia/gpuop";
    o.hook_unchecked = true;
    _cleanup_(nvcdi_gen_freep) struct nvcdi_gen *g2 = nvcdi_gen_new(&o);
    _cleanup_free_ char *d = NULL;
    assert_int_equal(nvcdi_gen_spec(g2, &d, NULL, 0, &e), 0);
    assert_non_null(strstr(d, "    path: /usr/local/nvidia/gpuop\n"));
    o.hook_path = "";
    _cleanup_(nvcdi_gen_freep) struct nvcdi_gen *g3 = nvcdi_gen_new(&o);
    _cleanup_free_ char *f = NULL;
    assert_int_equal(nvcdi_gen_spec(g3, &f, NULL, 0, &e), 0);
    assert_null(strstr(f, "hooks:"));
    assert_int_equal(nvcdi_gen_warnings(g3, &w), 1); /* the escaping library only */
    unsetenv("GPUOP_SIM_FLEET");
    unsetenv("GPUOP_SIM_STATE");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden_host),
        cmocka_unit_test(test_golden_container),
        cmocka_unit_test(test_goldens_parse),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_versions),
        cmocka_unit_test(test_mig_minors),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test_setup_teardown(test_lookup, setup_root, teardown_root),
        cmocka_unit_test_setup_teardown(test_lookup_bad, setup_root, teardown_root),
        cmocka_unit_test_setup_teardown(test_lookup_escapes, setup_root, teardown_root),
        cmocka_unit_test_setup_teardown(test_gen_hooks, setup_root, teardown_root),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
