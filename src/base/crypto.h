/*
 * crypto.h: SHA-256, HMAC-SHA-256 (through libcrypto's EVP interface), the
 * kernel's random numbers, random tokens, and constant-time comparison.
 *
 * The hash functions fail only if libcrypto does (out of memory, or a broken
 * OpenSSL configuration that hides SHA-256); they then return -1 and zero
 * their output, so a caller that ignores the result never reads garbage.
 */
#ifndef DENV_CRYPTO_H
#define DENV_CRYPTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

#define SHA256_LEN 32
#define SHA256_HEX_LEN 64			/* without the NUL */
/* Bytes of randomness in a token: 16 is the least we accept (128 bits). */
#define CRYPTO_TOKEN_BYTES_MIN 16
#define CRYPTO_TOKEN_BYTES_MAX 64
#define CRYPTO_TOKEN_PREFIX_MAX 16
/* Longest token: prefix, '_', base64url of 64 bytes (86 chars), NUL. */
#define CRYPTO_TOKEN_MAX (CRYPTO_TOKEN_PREFIX_MAX + 1 + 86 + 1)

/* libcrypto's EVP_MD_CTX, declared so this header need not include OpenSSL's. */
struct evp_md_ctx_st;

struct sha256_ctx {
	struct evp_md_ctx_st *md;	/* NULL when not in use */
};
#define SHA256_CTX_INIT { NULL }

int sha256(const void *p, size_t n, uint8_t out[SHA256_LEN]);
/* Lowercase hex digest: 64 characters and a NUL. */
int sha256_hex(const void *p, size_t n, char out[SHA256_HEX_LEN + 1]);

/* Streaming: init, any number of updates, final (which also releases).
 * sha256_release abandons a context; it is safe on a released one. */
int sha256_init(struct sha256_ctx *c);
int sha256_update(struct sha256_ctx *c, const void *p, size_t n);
int sha256_final(struct sha256_ctx *c, uint8_t out[SHA256_LEN]);
void sha256_release(struct sha256_ctx *c);

int hmac_sha256(const void *key, size_t keylen, const void *p, size_t n, uint8_t out[SHA256_LEN]);

/* Fill buf with n bytes from getrandom(2). 0, or -1 with e. */
int crypto_random(void *buf, size_t n, struct err *e);

/* A secret token: "<prefix>_" followed by nbytes random bytes in unpadded
 * URL-safe base64 ("dak_3q2-7w..."). prefix is 1..16 lowercase letters or
 * digits; nbytes is CRYPTO_TOKEN_BYTES_MIN..MAX. 0, or -1 with e. */
int crypto_token(const char *prefix, size_t nbytes, char *out, size_t outsize, struct err *e);

/* Compare n bytes in time that depends only on n (for secrets and MACs). */
bool crypto_equal(const void *a, const void *b, size_t n);

#endif
