/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The module containers NVIDIA's driver pod runs beside the driver, simulated on a node root
 * (GPUOP_SIM_ROOT), and kmod's lsmod there:
 *
 *   nvidia-gds-driver install      GPUDirect Storage's nvidia_fs (nvcr.io/nvidia/cloud-native/
 *                                  nvidia-fs, the driver pod's nvidia-fs-ctr)
 *   nvidia-gdrcopy-driver install  GDRCopy's gdrdrv (nvcr.io/nvidia/cloud-native/gdrdrv,
 *                                  nvidia-gdrcopy-ctr)
 *   lsmod                          the modules loaded on the node root
 *
 * The pod's container waits in a shell loop for the driver (its root's usr/src and `lsmod | grep
 * nvidia`), then execs `install`: it unloads a module left loaded (refused while in use), builds
 * against the driver's kernel sources (<root>/run/nvidia/driver/usr/src/nvidia-<version>, which
 * the simulated driver container lays out unless it is precompiled), loads the module
 * (<root>/sys/module/<name>) and waits for a signal, then unloads it. Without the sources it
 * refuses, naming the folder, exit 1: nothing is loaded.
 */
#include <dirent.h>
#include <string.h>
#include <sys/stat.h>

#include "images-shell.h"

#define DRIVER_SRC "/run/nvidia/driver/usr/src"

struct module_image {
    const char *program; /* the image's entrypoint */
    const char *module;  /* its kernel module, as /sys/module names it */
    const char *display; /* as its log names it */
};

static const struct module_image gds = {"nvidia-gds-driver", "nvidia_fs", "nvidia-fs"};
static const struct module_image gdrcopy = {"nvidia-gdrcopy-driver", "gdrdrv", "gdrdrv"};

/* Loaded: its folder under <root>/sys/module (rmmod's rule). */
static bool module_loaded(const char *root, const char *module)
{
    _cleanup_free_ char *p = xasprintf("%s/sys/module/%s", root, module);
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The module's reference count (0 when unreadable). */
static long module_refs(const char *root, const char *module)
{
    _cleanup_free_ char *p = xasprintf("%s/sys/module/%s/refcnt", root, module);
    _cleanup_free_ char *text = NULL;
    struct err e = {0};
    if (file_read_all(p, 64, &text, NULL, &e) < 0)
        return 0;
    return strtol(text, NULL, 10);
}

static void remove_module(const char *root, const char *module)
{
    static const char *const files[] = {"refcnt", "initstate"};
    for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
        _cleanup_free_ char *p = xasprintf("%s/sys/module/%s/%s", root, module, files[i]);
        unlink(p);
    }
    _cleanup_free_ char *dir = xasprintf("%s/sys/module/%s", root, module);
    rmdir(dir);
}

/* The script's _unload_driver: nothing loaded is fine; in use is refused. */
static int unload(const struct module_image *m, const char *root)
{
    if (!module_loaded(root, m->module))
        return 0;
    if (module_refs(root, m->module) > 0) {
        simimg_fail("Could not unload %s kernel module, module is in use\n", m->display);
        return -EBUSY;
    }
    simimg_say("+ rmmod %s\n", m->module);
    remove_module(root, m->module);
    return 0;
}

static int write_in(const char *root, const char *rel, const char *text, struct err *e)
{
    _cleanup_free_ char *p = xasprintf("%s%s", root, rel);
    _cleanup_free_ char *dir = xstrdup(p);
    *strrchr(dir, '/') = '\0';
    int r = mkdir_p(dir, 0755);
    if (r < 0)
        return err_errno(e, r, "create \"%s\"", dir);
    return file_write_atomic(p, text, strlen(text), 0644, e);
}

/* The loaded driver's version ("" when none is loaded). */
static void driver_version(const char *root, char *buf, size_t n)
{
    buf[0] = '\0';
    _cleanup_free_ char *p = xasprintf("%s%s", root, SIM_DRIVER_VERSION_FILE);
    _cleanup_free_ char *text = NULL;
    struct err e = {0};
    if (file_read_all(p, 128, &text, NULL, &e) < 0)
        return;
    text[strcspn(text, "\n")] = '\0';
    snprintf(buf, n, "%s", text);
}

static int install(const struct module_image *m, const char *root)
{
    int sigfd _cleanup_close_ = simimg_signals_open();
    if (sigfd < 0) {
        simimg_fail("%s: signals: %s\n", m->program, strerror(-sigfd));
        return 1;
    }
    simimg_say("Unloading %s kernel module\n", m->display);
    if (unload(m, root) < 0)
        return 1;
    simimg_say("Updating the package cache\n");
    simimg_say("Installing prerequisites\n");
    char version[64];
    driver_version(root, version, sizeof(version));
    if (!version[0]) {
        simimg_fail("%s: the NVIDIA driver is not loaded (%s%s is missing): %s needs it\n",
                    m->program, root, SIM_DRIVER_VERSION_FILE, m->module);
        return 1;
    }
    _cleanup_free_ char *src = xasprintf("%s/nvidia-%s", DRIVER_SRC, version);
    _cleanup_free_ char *src_host = xasprintf("%s%s", root, src);
    struct stat st;
    if (stat(src_host, &st) < 0 || !S_ISDIR(st.st_mode)) {
        simimg_fail("%s: no kernel sources of the NVIDIA driver %s in %s to build %s against\n",
                    m->program, version, src, m->module);
        return 1;
    }
    simimg_say("Building and loading %s kernel module\n", m->display);
    simimg_say("+ modprobe %s\n", m->module);
    _cleanup_free_ char *refcnt = xasprintf("/sys/module/%s/refcnt", m->module);
    _cleanup_free_ char *init = xasprintf("/sys/module/%s/initstate", m->module);
    struct err e = {0};
    if (write_in(root, refcnt, "0\n", &e) < 0 || write_in(root, init, "live\n", &e) < 0) {
        simimg_fail("%s: %s\n", m->program, err_msg(&e));
        remove_module(root, m->module);
        return 1;
    }
    simimg_say("Done, now waiting for signal\n");
    int sig = 0;
    while (!simimg_signal_wait(sigfd, UINT32_MAX, &sig))
        ;
    simimg_say("Caught signal\n");
    return unload(m, root) < 0 ? 1 : 0;
}

static int module_main(const struct module_image *m, int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "install") != 0) {
        simimg_fail(
            "Usage: %s COMMAND [ARG...]\n\nCommands:\n  install - install the %s kernel module\n",
            m->program, m->display);
        return 1;
    }
    const char *root = env_get("GPUOP_SIM_ROOT");
    if (!root || root[0] != '/') {
        simimg_fail("%s: GPUOP_SIM_ROOT must name the node root (an absolute path)\n", m->program);
        return 1;
    }
    return install(m, root);
}

int simimg_gds_main(int argc, char **argv)
{
    return module_main(&gds, argc, argv);
}

int simimg_gdrcopy_main(int argc, char **argv)
{
    return module_main(&gdrcopy, argc, argv);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* kmod's lsmod over <root>/sys/module, each folder a loaded module; sizes are not simulated
 * (0), the use count is its refcnt. */
int simimg_lsmod_main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    const char *root = env_get("GPUOP_SIM_ROOT");
    if (!root || root[0] != '/') {
        fprintf(stderr, "lsmod: GPUOP_SIM_ROOT must name the node root (an absolute path)\n");
        return 1;
    }
    _cleanup_free_ char *dir = xasprintf("%s/sys/module", root);
    printf("Module                  Size  Used by\n");
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    char **names = NULL;
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.' || de->d_type != DT_DIR)
            continue;
        names = xrealloc(names, (n + 1) * sizeof(*names));
        names[n++] = xstrdup(de->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof(*names), by_name);
    for (size_t i = 0; i < n; i++) {
        printf("%-19s %8d  %ld\n", names[i], 0, module_refs(root, names[i]));
        free(names[i]);
    }
    free(names);
    return 0;
}
