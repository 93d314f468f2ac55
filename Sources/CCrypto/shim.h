#ifndef CHRONICLE_CCRYPTO_SHIM_H
#define CHRONICLE_CCRYPTO_SHIM_H
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/crypto.h>
#endif
