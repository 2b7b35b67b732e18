/* crypto.c: see crypto.h. */
#include "base/crypto.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "base/enc.h"

/* getrandom(2) returns at most this much per call from the urandom source. */
#define CRYPTO_RANDOM_CHUNK (32 << 20)

int sha256(const void *p, size_t n, uint8_t out[SHA256_LEN])
{
	unsigned int len = 0;

	if (EVP_Digest(p, n, out, &len, EVP_sha256(), NULL) != 1 || len != SHA256_LEN) {
		memset(out, 0, SHA256_LEN);
		return -1;
	}
	return 0;
}

int sha256_hex(const void *p, size_t n, char out[SHA256_HEX_LEN + 1])
{
	uint8_t md[SHA256_LEN];
	int r = sha256(p, n, md);

	enc_hex_write(out, md, sizeof(md));
	return r;
}

int sha256_init(struct sha256_ctx *c)
{
	c->md = EVP_MD_CTX_new();
	if (!c->md)
		return -1;
	if (EVP_DigestInit_ex(c->md, EVP_sha256(), NULL) != 1) {
		sha256_release(c);
		return -1;
	}
	return 0;
}

int sha256_update(struct sha256_ctx *c, const void *p, size_t n)
{
	if (!c->md)
		return -1;
	if (EVP_DigestUpdate(c->md, p, n) != 1) {
		sha256_release(c);
		return -1;
	}
	return 0;
}

int sha256_final(struct sha256_ctx *c, uint8_t out[SHA256_LEN])
{
	unsigned int len = 0;
	int ok = c->md && EVP_DigestFinal_ex(c->md, out, &len) == 1 && len == SHA256_LEN;

	sha256_release(c);
	if (!ok) {
		memset(out, 0, SHA256_LEN);
		return -1;
	}
	return 0;
}

void sha256_release(struct sha256_ctx *c)
{
	EVP_MD_CTX_free(c->md);
	c->md = NULL;
}

int hmac_sha256(const void *key, size_t keylen, const void *p, size_t n, uint8_t out[SHA256_LEN])
{
	static const unsigned char nokey[1];
	unsigned int len = 0;

	if (keylen > INT32_MAX || !HMAC(EVP_sha256(), keylen ? key : nokey, (int)keylen,
					p, n, out, &len) || len != SHA256_LEN) {
		memset(out, 0, SHA256_LEN);
		return -1;
	}
	return 0;
}

int crypto_random(void *buf, size_t n, struct err *e)
{
	unsigned char *p = buf;

	while (n > 0) {
		ssize_t r = getrandom(p, n > CRYPTO_RANDOM_CHUNK ? CRYPTO_RANDOM_CHUNK : n, 0);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return err_errno(e, "getrandom");
		}
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

int crypto_token(const char *prefix, size_t nbytes, char *out, size_t outsize, struct err *e)
{
	unsigned char raw[CRYPTO_TOKEN_BYTES_MAX];
	size_t plen = strlen(prefix), need;

	if (plen == 0 || plen > CRYPTO_TOKEN_PREFIX_MAX)
		return err_set(e, "token prefix must be 1 to %d characters", CRYPTO_TOKEN_PREFIX_MAX);
	for (size_t i = 0; i < plen; i++)
		if (!((prefix[i] >= 'a' && prefix[i] <= 'z') || (prefix[i] >= '0' && prefix[i] <= '9')))
			return err_set(e, "token prefix \"%s\": only lowercase letters and digits", prefix);
	if (nbytes < CRYPTO_TOKEN_BYTES_MIN || nbytes > CRYPTO_TOKEN_BYTES_MAX)
		return err_set(e, "token size %zu out of range %d..%d bytes", nbytes,
			       CRYPTO_TOKEN_BYTES_MIN, CRYPTO_TOKEN_BYTES_MAX);
	need = plen + 1 + enc_base64_len(nbytes, ENC_BASE64URL) + 1;
	if (outsize < need)
		return err_set(e, "token needs %zu bytes of output, have %zu", need, outsize);
	if (crypto_random(raw, nbytes, e) < 0)
		return -1;
	memcpy(out, prefix, plen);
	out[plen] = '_';
	enc_base64_write(out + plen + 1, raw, nbytes, ENC_BASE64URL);
	/* the secret now lives only in out; explicit_bzero is not optimised away */
	explicit_bzero(raw, sizeof(raw));
	return 0;
}

bool crypto_equal(const void *a, const void *b, size_t n)
{
	const volatile unsigned char *x = a, *y = b;
	unsigned char d = 0;

	for (size_t i = 0; i < n; i++)
		d |= x[i] ^ y[i];
	return d == 0;
}
