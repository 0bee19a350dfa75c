/* SPDX-License-Identifier: Apache-2.0 */
/* A throwaway CA and a server certificate for 127.0.0.1/localhost (and ip, the listen address,
 * when another), made with OpenSSL. */
#ifndef GPUOP_KUBESIM_TLS_H
#define GPUOP_KUBESIM_TLS_H

#include "util.h"

struct ks_tls {
    char *ca_pem;   /* the CA certificate clients trust */
    char *cert_pem; /* server certificate */
    char *key_pem;  /* server private key */
};

int ks_tls_generate(const char *ip, struct ks_tls **ret, struct err *e);
void ks_tls_free(struct ks_tls *t);
DEFINE_CLEANUP_FUNC(struct ks_tls, ks_tls_free)

#endif
