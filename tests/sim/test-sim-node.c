/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The simulated driver on a simulated node: GPUOP_SIM_ROOT makes NVML depend on the node's
 * kernel module (<root>/sys/module/nvidia/version), and processes registered in the shared
 * state (simnvml.h, sim_procs_*) show in nvmlDeviceGetComputeRunningProcesses while they live;
 * an initialised client holds a reference on the module (sim_module_get), which an unload
 * (sim_module_lock) cannot take while it is held.
 *
 * Usage: test-sim-node LIBNVIDIA_ML FLEETS_DIR
 */
#include <dlfcn.h>
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "nvml-abi.h"
#include "simnvml.h"
#include "util.h"

#define DECL(f) __typeof__(&f) f;
static struct {
    NVML_FUNCS(DECL)
    nvmlReturn_t (*nvmlDeviceGetComputeRunningProcesses)(nvmlDevice_t, unsigned *,
                                                         nvmlProcessInfo_v1_t *);
    nvmlReturn_t (*nvmlDeviceGetComputeRunningProcesses_v2)(nvmlDevice_t, unsigned *,
                                                            nvmlProcessInfo_v2_t *);
} N;

static const char *fleets_dir;
static char tmp_root[256];

static char *path_in(const char *dir, const char *name)
{
    static char buf[4][600];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof(buf[k]), "%s/%s", dir, name);
    return buf[k];
}

/* A fresh node root and state dir for the fleet; returns the root. */
static const char *node(const char *fleet_file)
{
    static int n;
    static char root[400];
    snprintf(root, sizeof(root), "%s/node-%d", tmp_root, ++n);
    assert_int_equal(mkdir_p(root, 0755), 0);
    setenv("GPUOP_SIM_FLEET", path_in(fleets_dir, fleet_file), 1);
    setenv("GPUOP_SIM_STATE", path_in(root, "state"), 1);
    setenv("GPUOP_SIM_ROOT", root, 1);
    return root;
}

static void module_write(const char *root, const char *text)
{
    char dir[600], file[700];
    snprintf(dir, sizeof(dir), "%s/sys/module/nvidia", root);
    assert_int_equal(mkdir_p(dir, 0755), 0);
    snprintf(file, sizeof(file), "%s/version", dir);
    struct err e = {0};
    assert_int_equal(file_write_atomic(file, text, strlen(text), 0644, &e), 0);
}

static void module_remove(const char *root)
{
    char file[700];
    snprintf(file, sizeof(file), "%s/sys/module/nvidia/version", root);
    assert_int_equal(unlink(file), 0);
}

static void refcnt_write(const char *root)
{
    char file[700];
    snprintf(file, sizeof(file), "%s%s", root, SIM_MODULE_REFCNT_FILE);
    struct err e = {0};
    assert_int_equal(file_write_atomic(file, "2\n", 2, 0644, &e), 0);
}

/* What an unload finds: 1 the module is free (the lock dropped again), 0 it is in use. */
static int module_free(const char *root)
{
    int fd = -1;
    struct err e = {0};
    int r = sim_module_lock(root, &fd, &e);
    assert_true(r >= 0);
    if (fd >= 0)
        close(fd);
    return r;
}

static nvmlDevice_t dev(unsigned i)
{
    nvmlDevice_t d = NULL;
    assert_int_equal(N.nvmlDeviceGetHandleByIndex_v2(i, &d), NVML_SUCCESS);
    return d;
}

static void test_driver_not_loaded(void **state)
{
    (void)state;
    const char *root = node("dgx-h100.yaml");
    assert_int_equal(N.nvmlInit_v2(), NVML_ERROR_DRIVER_NOT_LOADED);
    char buf[96];
    assert_int_equal(N.nvmlSystemGetDriverVersion(buf, sizeof(buf)), NVML_ERROR_UNINITIALIZED);
    /* an empty or garbled module file is not a driver */
    module_write(root, "\n");
    assert_int_equal(N.nvmlInit_v2(), NVML_ERROR_UNKNOWN);
    module_write(root, "550.127.05; rm -rf /\n");
    assert_int_equal(N.nvmlInit_v2(), NVML_ERROR_UNKNOWN);
    unsetenv("GPUOP_SIM_ROOT");
}

static void test_driver_version_from_module(void **state)
{
    (void)state;
    const char *root = node("dgx-h100.yaml"); /* the fleet says 570.86.15, CUDA 12.8 */
    module_write(root, "  550.127.05\n");
    assert_int_equal(N.nvmlInit_v2(), NVML_SUCCESS);
    char buf[96];
    assert_int_equal(N.nvmlSystemGetDriverVersion(buf, sizeof(buf)), NVML_SUCCESS);
    assert_string_equal(buf, "550.127.05");
    int cuda = 0;
    assert_int_equal(N.nvmlSystemGetCudaDriverVersion_v2(&cuda), NVML_SUCCESS);
    assert_int_equal(cuda, 12040);
    assert_int_equal(N.nvmlSystemGetNVMLVersion(buf, sizeof(buf)), NVML_SUCCESS);
    assert_string_equal(buf, "12.550.127.05");
    unsigned n = 0;
    assert_int_equal(N.nvmlDeviceGetCount_v2(&n), NVML_SUCCESS);
    assert_int_equal(n, 8);

    /* a reload with another version: seen by a client that stays initialised */
    module_write(root, "580.65.06\n");
    assert_int_equal(N.nvmlSystemGetDriverVersion(buf, sizeof(buf)), NVML_SUCCESS);
    assert_string_equal(buf, "580.65.06");
    assert_int_equal(N.nvmlSystemGetCudaDriverVersion_v2(&cuda), NVML_SUCCESS);
    assert_int_equal(cuda, 13000);
    /* a branch the table lacks: the fleet's CUDA version */
    module_write(root, "999.1\n");
    assert_int_equal(N.nvmlSystemGetCudaDriverVersion_v2(&cuda), NVML_SUCCESS);
    assert_int_equal(cuda, 12080);

    /* unloaded under the client: every call fails as without a driver */
    module_remove(root);
    assert_int_equal(N.nvmlSystemGetDriverVersion(buf, sizeof(buf)), NVML_ERROR_DRIVER_NOT_LOADED);
    nvmlDevice_t d = NULL;
    assert_int_equal(N.nvmlDeviceGetHandleByIndex_v2(0, &d), NVML_ERROR_DRIVER_NOT_LOADED);
    module_write(root, "550.127.05\n");
    assert_int_equal(N.nvmlSystemGetDriverVersion(buf, sizeof(buf)), NVML_SUCCESS);
    assert_string_equal(buf, "550.127.05");
    N.nvmlShutdown();

    /* without GPUOP_SIM_ROOT: the fleet's driver, as before */
    unsetenv("GPUOP_SIM_ROOT");
    assert_int_equal(N.nvmlInit_v2(), NVML_SUCCESS);
    assert_int_equal(N.nvmlSystemGetDriverVersion(buf, sizeof(buf)), NVML_SUCCESS);
    assert_string_equal(buf, "570.86.15");
    N.nvmlShutdown();
}

/* A pid that no longer names a process. */
static uint32_t dead_pid(void)
{
    pid_t pid = fork();
    if (pid == 0)
        _exit(0);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    return (uint32_t)pid;
}

static struct sim_store *store_open(struct sim_fleet **ret_fleet)
{
    struct err e = {0};
    assert_int_equal(sim_fleet_load(getenv("GPUOP_SIM_FLEET"), ret_fleet, &e), 0);
    struct sim_store *s = NULL;
    assert_int_equal(sim_store_open(*ret_fleet, getenv("GPUOP_SIM_STATE"), 0, &s, &e), 0);
    return s;
}

static void test_running_processes(void **state)
{
    (void)state;
    const char *root = node("pcie-l4.yaml");
    module_write(root, "550.127.05\n");
    struct sim_fleet *f _cleanup_(sim_fleet_freep) = NULL;
    struct sim_store *s _cleanup_(sim_store_freep) = store_open(&f);
    struct err e = {0};
    uint32_t me = (uint32_t)getpid(), gone = dead_pid();
    struct sim_proc procs[] = {
        {.pid = me, .gpu = 1, .gi_id = SIM_NO_ID, .ci_id = SIM_NO_ID, .used_mib = 100},
        {.pid = me, .gpu = 2, .gi_id = SIM_NO_ID, .ci_id = SIM_NO_ID, .used_mib = 200},
    };
    assert_int_equal(sim_procs_register(s, procs, 2, &e), 0);
    struct sim_proc ghost = {
        .pid = gone, .gpu = 1, .gi_id = SIM_NO_ID, .ci_id = SIM_NO_ID, .used_mib = 7};
    assert_int_equal(sim_procs_register(s, &ghost, 1, &e), 0);
    struct sim_proc bad = {.pid = me, .gpu = 4, .gi_id = SIM_NO_ID, .ci_id = SIM_NO_ID};
    assert_int_equal(sim_procs_register(s, &bad, 1, &e), -EINVAL);
    assert_non_null(strstr(err_msg(&e), "GPU 4 is out of range"));

    assert_int_equal(N.nvmlInit_v2(), NVML_SUCCESS);
    nvmlProcessInfo_t info[4];
    unsigned n = 0;
    /* sizing: a count of 0 asks how many */
    assert_int_equal(N.nvmlDeviceGetComputeRunningProcesses_v3(dev(1), &n, NULL),
                     NVML_ERROR_INSUFFICIENT_SIZE);
    assert_int_equal(n, 1); /* the dead pid is not listed */
    n = 4;
    assert_int_equal(N.nvmlDeviceGetComputeRunningProcesses_v3(dev(1), &n, info), NVML_SUCCESS);
    assert_int_equal(n, 1);
    assert_int_equal(info[0].pid, me);
    assert_int_equal(info[0].usedGpuMemory, 100ULL << 20);
    assert_int_equal(info[0].gpuInstanceId, 0xFFFFFFFFu);
    n = 4;
    assert_int_equal(N.nvmlDeviceGetComputeRunningProcesses_v3(dev(0), &n, info), NVML_SUCCESS);
    assert_int_equal(n, 0);
    nvmlProcessInfo_v1_t v1[2];
    n = 2;
    assert_int_equal(N.nvmlDeviceGetComputeRunningProcesses(dev(2), &n, v1), NVML_SUCCESS);
    assert_int_equal(n, 1);
    assert_int_equal(v1[0].usedGpuMemory, 200ULL << 20);
    nvmlProcessInfo_v2_t v2[2];
    n = 2;
    assert_int_equal(N.nvmlDeviceGetComputeRunningProcesses_v2(dev(2), &n, v2), NVML_SUCCESS);
    assert_int_equal(n, 1);
    assert_int_equal(v2[0].pid, me);

    /* another process's store sees them (state.json round trip) */
    struct sim_fleet *f2 _cleanup_(sim_fleet_freep) = NULL;
    struct sim_store *s2 _cleanup_(sim_store_freep) = store_open(&f2);
    struct sim_proc live[4];
    assert_int_equal(sim_procs_live(sim_store_state(s2), SIM_NO_ID, live, 4), 2);
    assert_int_equal(sim_procs_live(sim_store_state(s2), 2, live, 4), 1);
    assert_int_equal(live[0].used_mib, 200);

    /* unregistering removes the pid everywhere, and prunes the dead one */
    assert_int_equal(sim_procs_unregister(s, me, &e), 0);
    n = 4;
    assert_int_equal(N.nvmlDeviceGetComputeRunningProcesses_v3(dev(1), &n, info), NVML_SUCCESS);
    assert_int_equal(n, 0);
    assert_int_equal(sim_store_refresh(s2, &e), 0);
    assert_int_equal(sim_store_state(s2)->n_procs, 0);
    N.nvmlShutdown();
}

static void test_mig_processes(void **state)
{
    (void)state;
    const char *root = node("dgx-a100-80gb-mig.yaml"); /* GPU 2 runs 7x 1g.10gb */
    module_write(root, "570.86.15\n");
    assert_int_equal(N.nvmlInit_v2(), NVML_SUCCESS);
    nvmlDevice_t mig0 = NULL, mig1 = NULL;
    assert_int_equal(N.nvmlDeviceGetMigDeviceHandleByIndex(dev(2), 0, &mig0), NVML_SUCCESS);
    assert_int_equal(N.nvmlDeviceGetMigDeviceHandleByIndex(dev(2), 1, &mig1), NVML_SUCCESS);
    unsigned gi = 0, ci = 0;
    assert_int_equal(N.nvmlDeviceGetGpuInstanceId(mig0, &gi), NVML_SUCCESS);
    assert_int_equal(N.nvmlDeviceGetComputeInstanceId(mig0, &ci), NVML_SUCCESS);

    struct sim_fleet *f _cleanup_(sim_fleet_freep) = NULL;
    struct sim_store *s _cleanup_(sim_store_freep) = store_open(&f);
    struct err e = {0};
    struct sim_proc p = {
        .pid = (uint32_t)getpid(), .gpu = 2, .gi_id = gi, .ci_id = ci, .used_mib = 50};
    assert_int_equal(sim_procs_register(s, &p, 1, &e), 0);

    nvmlProcessInfo_t info[4];
    unsigned n = 4;
    assert_int_equal(N.nvmlDeviceGetComputeRunningProcesses_v3(mig0, &n, info), NVML_SUCCESS);
    assert_int_equal(n, 1);
    assert_int_equal(info[0].gpuInstanceId, gi);
    assert_int_equal(info[0].computeInstanceId, ci);
    n = 4;
    assert_int_equal(N.nvmlDeviceGetComputeRunningProcesses_v3(mig1, &n, info), NVML_SUCCESS);
    assert_int_equal(n, 0);
    n = 4; /* the parent GPU lists its MIG devices' processes */
    assert_int_equal(N.nvmlDeviceGetComputeRunningProcesses_v3(dev(2), &n, info), NVML_SUCCESS);
    assert_int_equal(n, 1);
    assert_int_equal(sim_procs_unregister(s, p.pid, &e), 0);
    N.nvmlShutdown();
}

static void test_state_processes_checked(void **state)
{
    (void)state;
    node("pcie-l4.yaml");
    struct sim_fleet *f _cleanup_(sim_fleet_freep) = NULL;
    struct sim_store *s _cleanup_(sim_store_freep) = store_open(&f);
    struct err e = {0};
    char *text = NULL;
    size_t len = 0;
    const char *file = path_in(getenv("GPUOP_SIM_STATE"), "state.json");
    assert_int_equal(file_read_all(file, 1 << 20, &text, &len, &e), 0);
    char *at = strstr(text, "\"processes\": []");
    assert_non_null(at);
    struct sbuf b _cleanup_sbuf_;
    sbuf_init(&b, 1 << 20);
    sbuf_add(&b, text, (size_t)(at - text));
    sbuf_adds(&b, "\"processes\": [{\"pid\": 1, \"gpu\": 9, \"used_mib\": 1}]");
    sbuf_adds(&b, at + strlen("\"processes\": []"));
    free(text);
    assert_int_equal(sbuf_check(&b), 0);
    assert_int_equal(file_write_atomic(file, b.data, b.len, 0644, &e), 0);
    assert_true(sim_store_refresh(s, &e) < 0);
    assert_non_null(strstr(err_msg(&e), "processes[0].gpu"));
}

static int rm_cb(const char *p, const struct stat *sb, int type, struct FTW *f)
{
    (void)sb;
    (void)type;
    (void)f;
    return remove(p);
}

static void test_module_references(void **state)
{
    (void)state;
    const char *root = node("pcie-l4.yaml");
    module_write(root, "580.105.08\n");
    /* a module without its refcnt file (a root laid out by hand): loaded, nothing to hold */
    assert_int_equal(N.nvmlInit_v2(), NVML_SUCCESS);
    int fd = 0;
    struct err e = {0};
    assert_int_equal(sim_module_lock(root, &fd, &e), 1);
    assert_int_equal(fd, -1);
    assert_int_equal(N.nvmlShutdown(), NVML_SUCCESS);

    refcnt_write(root);
    assert_int_equal(module_free(root), 1);
    /* held from the first nvmlInit to the last nvmlShutdown */
    assert_int_equal(N.nvmlInit_v2(), NVML_SUCCESS);
    assert_int_equal(module_free(root), 0);
    assert_int_equal(N.nvmlInit_v2(), NVML_SUCCESS);
    assert_int_equal(N.nvmlShutdown(), NVML_SUCCESS);
    assert_int_equal(module_free(root), 0);
    assert_int_equal(N.nvmlShutdown(), NVML_SUCCESS);
    assert_int_equal(module_free(root), 1);

    /* a client's end releases it, without nvmlShutdown */
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        char c = N.nvmlInit_v2() == NVML_SUCCESS ? 'y' : 'n';
        if (write(p[1], &c, 1) != 1)
            _exit(1);
        pause();
        _exit(0);
    }
    close(p[1]);
    char c = 0;
    assert_int_equal(read(p[0], &c, 1), 1);
    close(p[0]);
    assert_int_equal(c, 'y');
    assert_int_equal(module_free(root), 0);
    kill(child, SIGKILL);
    int st = 0;
    assert_int_equal(waitpid(child, &st, 0), child);
    assert_int_equal(module_free(root), 1);

    /* a client initialising while an unload holds the module waits, and then finds no driver */
    assert_int_equal(sim_module_lock(root, &fd, &e), 1);
    assert_true(fd >= 0);
    child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        close(fd); /* the unload's lock is the parent's alone */
        _exit(N.nvmlInit_v2());
    }
    usleep(100 * 1000);
    assert_int_equal(waitpid(child, &st, WNOHANG), 0); /* it waits */
    module_remove(root);
    char refcnt[700];
    snprintf(refcnt, sizeof(refcnt), "%s%s", root, SIM_MODULE_REFCNT_FILE);
    assert_int_equal(unlink(refcnt), 0);
    close(fd);
    assert_int_equal(waitpid(child, &st, 0), child);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), NVML_ERROR_DRIVER_NOT_LOADED);
    unsetenv("GPUOP_SIM_ROOT");
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s LIBNVIDIA_ML FLEETS_DIR\n", argv[0]);
        return 2;
    }
    fleets_dir = argv[2];
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "dlopen %s: %s\n", argv[1], dlerror());
        return 1;
    }
#define LOAD(f)                                                   \
    if (!(N.f = (__typeof__(N.f))dlsym(lib, #f))) {               \
        fprintf(stderr, "%s: %s is not exported\n", argv[1], #f); \
        return 1;                                                 \
    }
    NVML_FUNCS(LOAD)
    LOAD(nvmlDeviceGetComputeRunningProcesses)
    LOAD(nvmlDeviceGetComputeRunningProcesses_v2)
    snprintf(tmp_root, sizeof(tmp_root), "%s/gpuop-test-sim-node-XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmp_root)) {
        perror("mkdtemp");
        return 1;
    }
    unsetenv("GPUOP_SIM_CLOCK");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_driver_not_loaded),
        cmocka_unit_test(test_driver_version_from_module),
        cmocka_unit_test(test_running_processes),
        cmocka_unit_test(test_mig_processes),
        cmocka_unit_test(test_state_processes_checked),
        cmocka_unit_test(test_module_references),
    };
    int r = cmocka_run_group_tests(tests, NULL, NULL);
    nftw(tmp_root, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    return r;
}
