/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libcurl, loaded on first use. gpuop is one binary for every component; only those that talk
 * to the API server need libcurl, and linking it pulls its whole TLS, Kerberos, LDAP and SSH
 * dependency tree (and gnutls' load-time initialisation) into every process: about 5 MiB of
 * resident pages in the node agents that never make an HTTPS call. kube_curl_load() dlopens
 * Debian's GnuTLS build of libcurl (libcurl-gnutls.so.4) once; kube-http.c calls curl through
 * the macros below. GnuTLS, not OpenSSL: gpuop already maps and initialises GnuTLS (through
 * libmicrohttpd), where the OpenSSL build initialises OpenSSL 3 as well; with libssh2's crypto
 * also left uninitialised (kube-curl.c), an API client holds about 2 MiB fewer resident pages,
 * 2.5 MiB over TLS (bench/RESULTS.md). The GnuTLS build takes
 * certificates and keys as files only (no CURLOPT_*_BLOB): kube-http.c hands inline data over as
 * memory files.
 */
#ifndef GPUOP_KUBE_CURL_H
#define GPUOP_KUBE_CURL_H

#define CURL_DISABLE_TYPECHECK 1 /* the type-checking macros would call the symbols directly */
#include <curl/curl.h>

#include "util.h"

struct kube_curl {
    CURLcode (*global_init)(long flags);
    CURL *(*easy_init)(void);
    void (*easy_cleanup)(CURL *h);
    void (*easy_reset)(CURL *h);
    CURLcode (*easy_setopt)(CURL *h, CURLoption opt, ...);
    CURLcode (*easy_perform)(CURL *h);
    CURLcode (*easy_getinfo)(CURL *h, CURLINFO info, ...);
    const char *(*easy_strerror)(CURLcode cc);
    struct curl_slist *(*slist_append)(struct curl_slist *l, const char *s);
    void (*slist_free_all)(struct curl_slist *l);
    CURLM *(*multi_init)(void);
    CURLMcode (*multi_cleanup)(CURLM *m);
    CURLMcode (*multi_add_handle)(CURLM *m, CURL *h);
    CURLMcode (*multi_remove_handle)(CURLM *m, CURL *h);
    CURLMcode (*multi_perform)(CURLM *m, int *running);
    CURLMcode (*multi_poll)(CURLM *m, struct curl_waitfd *extra, unsigned n, int timeout_ms,
                            int *ret);
    CURLMsg *(*multi_info_read)(CURLM *m, int *msgs_in_queue);
};

/* Loads libcurl and runs curl_global_init, once per process (thread-safe). -ELIBACC with a
 * message naming the library when it cannot be loaded or lacks a symbol. */
int kube_curl_load(struct err *e);
/* The loaded table; only valid after kube_curl_load() succeeded. */
const struct kube_curl *kube_curl(void);

#endif
