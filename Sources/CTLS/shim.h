#ifndef CHRONICLE_CTLS_SHIM_H
#define CHRONICLE_CTLS_SHIM_H
// OpenSSL's TLS (libssl), for the article fetcher's connections to the addresses it checked.
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>

// Macros in OpenSSL's headers, as functions Swift can call.
static inline long chronicle_tls_set_sni(SSL *ssl, const char *name) {
    return SSL_set_tlsext_host_name(ssl, name);
}
static inline int chronicle_tls_min_tls12(SSL_CTX *ctx) {
    return (int)SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
}
static inline size_t chronicle_tls_pending_out(BIO *bio) {
    return BIO_ctrl_pending(bio);
}
#endif
