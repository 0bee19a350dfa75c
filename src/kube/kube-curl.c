/* SPDX-License-Identifier: Apache-2.0 */
#include "kube-curl.h"

#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

/* Debian's GnuTLS flavour (libcurl3-gnutls): why, in kube-curl.h. */
#define KUBE_CURL_LIB "libcurl-gnutls.so.4"

/* libcurl is loaded with dlopen, which ldd cannot see: its soname goes into the ELF section
 * .gpuop.dlopen, which scripts/image-rootfs.sh reads to put the library into the gpuop image.
 * (The GPU driver's libraries, also loaded with dlopen, come from the host and are not named.) */
__attribute__((section(".gpuop.dlopen"), used)) static const char dlopen_curl[] = KUBE_CURL_LIB;

static struct kube_curl table;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static char load_error[512];

static void *sym(void *lib, const char *name)
{
    void *p = dlsym(lib, name);
    if (!p && !load_error[0])
        snprintf(load_error, sizeof(load_error), "%s: missing symbol %s", KUBE_CURL_LIB, name);
    return p;
}

static void load(void)
{
    void *lib = dlopen(KUBE_CURL_LIB, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *why = dlerror();
        snprintf(load_error, sizeof(load_error), "loading %s: %s", KUBE_CURL_LIB,
                 why ? why : "unknown error");
        return;
    }
    struct kube_curl t;
    /* POSIX guarantees object and function pointers convert through dlsym's void *. */
#define LOAD(field, name) *(void **)(&t.field) = sym(lib, name)
    LOAD(global_init, "curl_global_init");
    LOAD(easy_init, "curl_easy_init");
    LOAD(easy_cleanup, "curl_easy_cleanup");
    LOAD(easy_reset, "curl_easy_reset");
    LOAD(easy_setopt, "curl_easy_setopt");
    LOAD(easy_perform, "curl_easy_perform");
    LOAD(easy_getinfo, "curl_easy_getinfo");
    LOAD(easy_strerror, "curl_easy_strerror");
    LOAD(slist_append, "curl_slist_append");
    LOAD(slist_free_all, "curl_slist_free_all");
    LOAD(multi_init, "curl_multi_init");
    LOAD(multi_cleanup, "curl_multi_cleanup");
    LOAD(multi_add_handle, "curl_multi_add_handle");
    LOAD(multi_remove_handle, "curl_multi_remove_handle");
    LOAD(multi_perform, "curl_multi_perform");
    LOAD(multi_poll, "curl_multi_poll");
    LOAD(multi_info_read, "curl_multi_info_read");
#undef LOAD
    if (load_error[0])
        return; /* the library stays loaded; nothing of it is used */
    /* libcurl's global init calls libssh2_init(0), which initialises OpenSSL 3 for SSH: about
     * 1.5 MiB of touched pages in every process, for a protocol gpuop never enables (requests
     * are limited to http and https). libssh2 sets up its crypto only on its first init and only
     * without LIBSSH2_INIT_NO_CRYPTO (0x0001 in libssh2.h), so initialising it first with that
     * flag leaves OpenSSL untouched; curl's later call only counts. TLS is GnuTLS's (this
     * libcurl's backend), which does not use OpenSSL. A libcurl without libssh2 has no such
     * symbol: nothing to do. */
    int (*ssh2_init)(int flags);
    *(void **)(&ssh2_init) = dlsym(lib, "libssh2_init");
    if (ssh2_init)
        ssh2_init(0x0001);
    if (t.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        snprintf(load_error, sizeof(load_error), "%s: curl_global_init failed", KUBE_CURL_LIB);
        return;
    }
    table = t;
}

int kube_curl_load(struct err *e)
{
    pthread_once(&once, load);
    if (load_error[0])
        return err_set(e, -ELIBACC, "%s", load_error);
    return 0;
}

const struct kube_curl *kube_curl(void)
{
    return &table;
}
