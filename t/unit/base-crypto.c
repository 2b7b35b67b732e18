/* Unit tests: SHA-256 (FIPS 180-4 / NIST vectors), HMAC-SHA-256 (RFC 4231),
 * random bytes, tokens, constant-time compare. */
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/crypto.h"
#include "base/enc.h"
#include "tap.h"

static void hex(const uint8_t *md, char out[SHA256_HEX_LEN + 1])
{
	enc_hex_write(out, md, SHA256_LEN);
}

static void test_sha256(void)
{
	static const struct { const char *in, *md; } v[] = {
		{ "", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" },
		{ "abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" },
		{ "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
		  "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1" },
		{ "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
		  "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1" },
	};
	uint8_t md[SHA256_LEN];
	char h[SHA256_HEX_LEN + 1];
	struct sha256_ctx c = SHA256_CTX_INIT;
	char *million;

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		ok(sha256(v[i].in, strlen(v[i].in), md) == 0, "sha256 succeeds");
		hex(md, h);
		is_str(h, v[i].md, "sha256 vector");
		ok(sha256_hex(v[i].in, strlen(v[i].in), h) == 0, "sha256_hex succeeds");
		is_str(h, v[i].md, "sha256_hex vector");
	}

	/* one million 'a', fed in uneven pieces through the streaming API */
	million = xmalloc(1000000);
	memset(million, 'a', 1000000);
	ok(sha256_init(&c) == 0, "init");
	for (size_t off = 0, step = 1; off < 1000000; off += step, step = step * 3 + 1) {
		size_t n = step > 1000000 - off ? 1000000 - off : step;
		sha256_update(&c, million + off, n);
	}
	ok(sha256_final(&c, md) == 0 && c.md == NULL, "final releases the context");
	hex(md, h);
	is_str(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0", "streaming million 'a'");
	free(million);

	ok(sha256_update(&c, "x", 1) == -1, "update on a finished context fails");
	ok(sha256_final(&c, md) == -1, "final on a finished context fails");
	ok(md[0] == 0 && md[31] == 0, "and zeroes the output");
	sha256_init(&c);
	sha256_update(&c, "abc", 3);
	sha256_release(&c);
	sha256_release(&c);
	ok(c.md == NULL, "abandoned context released twice safely");
}

static void unhex(const char *s, struct buf *b)
{
	struct err e;
	buf_reset(b);
	enc_hex_decode(b, s, strlen(s), &e);
}

/* RFC 4231 cases 6 and 7: 131 bytes of 0xaa */
#define KEY131 AA10 AA10 AA10 AA10 AA10 AA10 AA10 AA10 AA10 AA10 AA10 AA10 AA10 "aa"
#define AA10 "aaaaaaaaaaaaaaaaaaaa"

static void test_hmac(void)
{
	/* RFC 4231 test cases 1-4, 6, 7 (case 5 is a truncated MAC) */
	static const struct { const char *key, *data, *mac; } v[] = {
		{ "0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b", "4869205468657265",
		  "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7" },
		{ "4a656665", "7768617420646f2079612077616e7420666f72206e6f7468696e673f",
		  "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843" },
		{ "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
		  "dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd",
		  "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe" },
		{ "0102030405060708090a0b0c0d0e0f10111213141516171819",
		  "cdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcd",
		  "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b" },
		{ KEY131,
		  "54657374205573696e67204c6172676572205468616e20426c6f636b2d53697a65204b6579202d2048617368204b6579204669727374",
		  "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54" },
		{ KEY131,
		  "5468697320697320612074657374207573696e672061206c6172676572207468616e20626c6f636b2d73697a65206b657920616e642061206c6172676572207468616e20626c6f636b2d73697a6520646174612e20546865206b6579206e6565647320746f20626520686173686564206265666f7265206265696e6720757365642062792074686520484d414320616c676f726974686d2e",
		  "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2" },
	};
	struct buf key = BUF_INIT, data = BUF_INIT;
	uint8_t mac[SHA256_LEN];
	char h[SHA256_HEX_LEN + 1];

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		unhex(v[i].key, &key);
		unhex(v[i].data, &data);
		ok(hmac_sha256(key.data, key.len, data.data, data.len, mac) == 0, "hmac succeeds");
		hex(mac, h);
		is_str(h, v[i].mac, "RFC 4231 vector");
	}
	ok(hmac_sha256("", 0, "", 0, mac) == 0, "empty key and data");
	hex(mac, h);
	is_str(h, "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad", "HMAC of empty with empty key");
	buf_release(&key);
	buf_release(&data);
}

static void test_random(void)
{
	unsigned char a[64], b[64], zero[64] = { 0 };
	struct err e;
	unsigned char *big = xmalloc(1 << 20);
	size_t nonzero = 0;

	ok(crypto_random(a, sizeof(a), &e) == 0 && crypto_random(b, sizeof(b), &e) == 0, "crypto_random");
	ok(memcmp(a, b, sizeof(a)) != 0 && memcmp(a, zero, sizeof(a)) != 0, "two draws differ and are not zero");
	ok(crypto_random(a, 0, &e) == 0, "zero bytes is fine");
	memset(big, 0, 1 << 20);
	ok(crypto_random(big, 1 << 20, &e) == 0, "1 MiB at once");
	for (size_t i = 0; i < (1 << 20); i++)
		nonzero += big[i] != 0;
	/* expected 1048576 * 255/256 = 1044480; the loop must have filled the tail */
	ok(nonzero > 1040000 && big[(1 << 20) - 1] + big[(1 << 20) - 2] + big[(1 << 20) - 3] != 0,
	   "the whole buffer was filled (%zu non-zero bytes)", nonzero);
	free(big);
}

static void test_token(void)
{
	char t1[CRYPTO_TOKEN_MAX], t2[CRYPTO_TOKEN_MAX], small[20];
	struct err e;
	struct buf raw = BUF_INIT;

	ok(crypto_token("dak", 32, t1, sizeof(t1), &e) == 0, "token");
	ok(crypto_token("dak", 32, t2, sizeof(t2), &e) == 0, "second token");
	is_int(strlen(t1), 4 + 43, "dak_ + 43 characters for 32 bytes");
	ok(strncmp(t1, "dak_", 4) == 0, "prefix");
	ok(strcmp(t1, t2) != 0, "two tokens differ");
	ok(strspn(t1 + 4, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") == 43,
	   "URL-safe base64 alphabet, no padding");
	ok(enc_base64_decode(&raw, t1 + 4, strlen(t1 + 4), ENC_BASE64URL, &e) == 0 && raw.len == 32,
	   "decodes back to 32 bytes");
	buf_release(&raw);
	ok(crypto_token("dst", CRYPTO_TOKEN_BYTES_MAX, t1, sizeof(t1), &e) == 0 &&
	   strlen(t1) == CRYPTO_TOKEN_MAX - 1 - (CRYPTO_TOKEN_PREFIX_MAX - 3), "largest token fits CRYPTO_TOKEN_MAX");

	ok(crypto_token("dak", 32, small, sizeof(small), &e) == -1, "too small output refused");
	is_str(e.msg, "token needs 48 bytes of output, have 20", "message");
	ok(crypto_token("DAK", 32, t1, sizeof(t1), &e) == -1, "uppercase prefix refused");
	is_str(e.msg, "token prefix \"DAK\": only lowercase letters and digits", "message");
	ok(crypto_token("", 32, t1, sizeof(t1), &e) == -1, "empty prefix refused");
	ok(crypto_token("a_b", 32, t1, sizeof(t1), &e) == -1, "underscore in prefix refused");
	ok(crypto_token("dak", 8, t1, sizeof(t1), &e) == -1, "too few bytes refused");
	is_str(e.msg, "token size 8 out of range 16..64 bytes", "message");
	ok(crypto_token("dak", 65, t1, sizeof(t1), &e) == -1, "too many bytes refused");
}

static void test_equal(void)
{
	ok(crypto_equal("abcdef", "abcdef", 6), "equal");
	ok(!crypto_equal("abcdef", "abcdeg", 6), "last byte differs");
	ok(!crypto_equal("xbcdef", "abcdef", 6), "first byte differs");
	ok(crypto_equal("a", "b", 0), "zero length is equal");
	ok(!crypto_equal("\x80", "\x00", 1), "high bit");
}

int main(void)
{
	test_sha256();
	test_hmac();
	test_random();
	test_token();
	test_equal();
	return tap_done();
}
