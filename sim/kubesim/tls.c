/* SPDX-License-Identifier: Apache-2.0 */
#include <openssl/bio.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <string.h>

#include "kubesim-tls.h"

static char *bio_string(BIO *b)
{
    char *data = NULL;
    long n = BIO_get_mem_data(b, &data);
    return n > 0 ? xstrndup(data, (size_t)n) : NULL;
}

static EVP_PKEY *new_key(void)
{
    return EVP_EC_gen("P-256");
}

static int add_ext(X509 *cert, X509 *issuer, int nid, const char *value)
{
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, issuer, cert, NULL, NULL, 0);
    X509_EXTENSION *ex = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
    if (!ex)
        return -1;
    int r = X509_add_ext(cert, ex, -1) == 1 ? 0 : -1;
    X509_EXTENSION_free(ex);
    return r;
}

static X509 *make_cert(EVP_PKEY *key, const char *cn, X509 *issuer, EVP_PKEY *issuer_key, bool ca,
                       const char *san)
{
    X509 *x = X509_new();
    if (!x)
        return NULL;
    X509_set_version(x, 2);
    unsigned char serial[16];
    RAND_bytes(serial, sizeof(serial));
    serial[0] &= 0x7f;
    BIGNUM *bn = BN_bin2bn(serial, sizeof(serial), NULL);
    BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x));
    BN_free(bn);
    X509_gmtime_adj(X509_getm_notBefore(x), -3600);
    X509_gmtime_adj(X509_getm_notAfter(x), 60L * 60 * 24 * 365);
    X509_set_pubkey(x, key);
    X509_NAME *name = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0);
    X509_set_issuer_name(x, issuer ? X509_get_subject_name(issuer) : name);
    X509 *iss = issuer ? issuer : x;
    int r = 0;
    if (ca) {
        r |= add_ext(x, iss, NID_basic_constraints, "critical,CA:TRUE");
        r |= add_ext(x, iss, NID_key_usage, "critical,keyCertSign,cRLSign,digitalSignature");
        r |= add_ext(x, iss, NID_subject_key_identifier, "hash");
    } else {
        r |= add_ext(x, iss, NID_basic_constraints, "critical,CA:FALSE");
        r |= add_ext(x, iss, NID_key_usage, "critical,digitalSignature,keyEncipherment");
        r |= add_ext(x, iss, NID_ext_key_usage, "serverAuth");
        r |= add_ext(x, iss, NID_subject_alt_name, san);
        r |= add_ext(x, iss, NID_authority_key_identifier, "keyid:always");
    }
    if (r || !X509_sign(x, issuer_key ? issuer_key : key, EVP_sha256())) {
        X509_free(x);
        return NULL;
    }
    return x;
}

int ks_tls_generate(const char *ip, struct ks_tls **ret, struct err *e)
{
    char san[128];
    if (ip && strcmp(ip, "127.0.0.1") && strcmp(ip, "0.0.0.0"))
        snprintf(san, sizeof(san), "IP:127.0.0.1,IP:%s,DNS:localhost,DNS:kubesim", ip);
    else
        snprintf(san, sizeof(san), "IP:127.0.0.1,DNS:localhost,DNS:kubesim");
    EVP_PKEY *cakey = new_key(), *key = new_key();
    X509 *ca = NULL, *cert = NULL;
    BIO *b1 = BIO_new(BIO_s_mem()), *b2 = BIO_new(BIO_s_mem()), *b3 = BIO_new(BIO_s_mem());
    int r = -EIO;
    if (!cakey || !key || !b1 || !b2 || !b3) {
        err_set(e, -EIO, "generate keys: OpenSSL failed");
        goto out;
    }
    ca = make_cert(cakey, "kubesim-ca", NULL, NULL, true, NULL);
    cert = ca ? make_cert(key, "kubesim", ca, cakey, false, san) : NULL;
    if (!ca || !cert) {
        err_set(e, -EIO, "generate certificates: OpenSSL failed");
        goto out;
    }
    PEM_write_bio_X509(b1, ca);
    PEM_write_bio_X509(b2, cert);
    PEM_write_bio_PrivateKey(b3, key, NULL, NULL, 0, NULL, NULL);
    struct ks_tls *t = xcalloc(1, sizeof(*t));
    t->ca_pem = bio_string(b1);
    t->cert_pem = bio_string(b2);
    t->key_pem = bio_string(b3);
    if (!t->ca_pem || !t->cert_pem || !t->key_pem) {
        ks_tls_free(t);
        err_set(e, -EIO, "encode PEM: OpenSSL failed");
        goto out;
    }
    *ret = t;
    r = 0;
out:
    X509_free(ca);
    X509_free(cert);
    EVP_PKEY_free(cakey);
    EVP_PKEY_free(key);
    BIO_free(b1);
    BIO_free(b2);
    BIO_free(b3);
    return r;
}

void ks_tls_free(struct ks_tls *t)
{
    if (!t)
        return;
    free(t->ca_pem);
    free(t->cert_pem);
    free(t->key_pem);
    free(t);
}
