/* Unit tests: hex and base64 (RFC 4648 vectors, strictness, caps). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/enc.h"
#include "tap.h"

static void test_hex(void)
{
	struct buf b = BUF_INIT;
	struct err e;
	unsigned char all[256], key[4];
	char small[8];

	for (int i = 0; i < 256; i++)
		all[i] = (unsigned char)i;
	ok(enc_hex_encode(&b, "\x00\x01\xab\xff", 4) == 0, "hex encode");
	is_str(b.data, "0001abff", "hex is lowercase");
	is_int(enc_hex_len(4), 8, "hex length");
	buf_reset(&b);
	ok(enc_hex_decode(&b, "0001ABff", 8, &e) == 0 && b.len == 4 && memcmp(b.data, "\x00\x01\xab\xff", 4) == 0,
	   "hex decode accepts either case");
	buf_reset(&b);
	enc_hex_encode(&b, all, 256);
	{
		struct buf d = BUF_INIT;
		ok(enc_hex_decode(&d, b.data, b.len, &e) == 0 && d.len == 256 && memcmp(d.data, all, 256) == 0,
		   "hex round trip of all byte values");
		buf_release(&d);
	}
	buf_reset(&b);
	buf_adds(&b, "keep");
	ok(enc_hex_decode(&b, "abc", 3, &e) == -1, "odd length refused");
	is_str(e.msg, "hex: odd length 3", "odd length message");
	ok(enc_hex_decode(&b, "ab0g", 4, &e) == -1, "bad digit refused");
	is_str(e.msg, "hex: invalid character at offset 3", "bad digit message names the offset");
	ok(enc_hex_decode(&b, "ab 0", 4, &e) == -1, "space refused");
	is_str(b.data, "keep", "buffer unchanged after refused decode");
	is_int(b.len, 4, "and its length too");
	buf_release(&b);

	ok(enc_hex_decode_exact(key, 4, "DEADbeef", 8, &e) == 0 && memcmp(key, "\xde\xad\xbe\xef", 4) == 0,
	   "decode_exact");
	ok(enc_hex_decode_exact(key, 4, "deadbe", 6, &e) == -1, "decode_exact wrong length refused");
	is_str(e.msg, "hex: want 8 characters, got 6", "decode_exact message");
	is_int(enc_hex_write(small, "\x12\x34\x56", 3), 6, "hex_write returns the length");
	is_str(small, "123456", "hex_write terminates");

	buf_init(&b, 7);
	errno = 0;
	ok(enc_hex_encode(&b, "abcd", 4) == -1 && errno == EMSGSIZE && b.len == 0, "hex encode over the cap fails cleanly");
	buf_release(&b);
}

static void test_b64_vectors(void)
{
	/* RFC 4648 section 10 */
	static const struct { const char *in, *std, *url; } v[] = {
		{ "", "", "" },
		{ "f", "Zg==", "Zg" },
		{ "fo", "Zm8=", "Zm8" },
		{ "foo", "Zm9v", "Zm9v" },
		{ "foob", "Zm9vYg==", "Zm9vYg" },
		{ "fooba", "Zm9vYmE=", "Zm9vYmE" },
		{ "foobar", "Zm9vYmFy", "Zm9vYmFy" },
	};
	struct buf b = BUF_INIT;
	struct err e;

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		size_t n = strlen(v[i].in);
		buf_reset(&b);
		enc_base64_encode(&b, v[i].in, n, ENC_BASE64);
		is_str(b.data, v[i].std, "std encode");
		is_int(enc_base64_len(n, ENC_BASE64), strlen(v[i].std), "std length");
		buf_reset(&b);
		enc_base64_encode(&b, v[i].in, n, ENC_BASE64URL);
		is_str(b.data, v[i].url, "url encode without padding");
		is_int(enc_base64_len(n, ENC_BASE64URL), strlen(v[i].url), "url length");
		buf_reset(&b);
		enc_base64_encode(&b, v[i].in, n, ENC_BASE64URL_PAD);
		is_str(b.data, v[i].std, "url encode with padding");
		buf_reset(&b);
		ok(enc_base64_decode(&b, v[i].std, strlen(v[i].std), ENC_BASE64, &e) == 0 &&
		   b.len == n && memcmp(b.data, v[i].in, n) == 0, "std decode \"%s\"", v[i].std);
		buf_reset(&b);
		ok(enc_base64_decode(&b, v[i].url, strlen(v[i].url), ENC_BASE64URL, &e) == 0 &&
		   b.len == n && memcmp(b.data, v[i].in, n) == 0, "url decode \"%s\"", v[i].url);
	}
	buf_release(&b);
}

static void test_b64_alphabets(void)
{
	struct buf b = BUF_INIT;
	struct err e;
	const unsigned char in[] = { 0xfb, 0xff, 0xbf };
	unsigned char all[256];
	char out[400];

	enc_base64_encode(&b, in, 3, ENC_BASE64);
	is_str(b.data, "+/+/", "std alphabet uses + and /");
	buf_reset(&b);
	enc_base64_encode(&b, in, 3, ENC_BASE64URL);
	is_str(b.data, "-_-_", "url alphabet uses - and _");
	buf_reset(&b);
	ok(enc_base64_decode(&b, "-_-_", 4, ENC_BASE64, &e) == -1, "std decode refuses url characters");
	is_str(e.msg, "base64: invalid character at offset 0", "message");
	ok(enc_base64_decode(&b, "+/+/", 4, ENC_BASE64URL, &e) == -1, "url decode refuses std characters");
	is_str(e.msg, "base64url: invalid character at offset 0", "message");
	for (int i = 0; i < 256; i++)
		all[i] = (unsigned char)(255 - i);
	for (int m = ENC_BASE64; m <= ENC_BASE64URL_PAD; m++) {
		for (size_t n = 0; n <= 256; n += 37) {
			size_t len = enc_base64_write(out, all, n, (enum enc_b64)m);
			buf_reset(&b);
			if (!ok(len == enc_base64_len(n, (enum enc_b64)m) && strlen(out) == len &&
				enc_base64_decode(&b, out, len, (enum enc_b64)m, &e) == 0 && b.len == n &&
				memcmp(b.data, all, n) == 0, "round trip mode %d, %zu bytes", m, n))
				tap_diag("%s", e.msg);
		}
	}
	buf_release(&b);
}

static void test_b64_strict(void)
{
	static const struct { const char *s; enum enc_b64 mode; const char *msg; } bad[] = {
		{ "Zg=", ENC_BASE64, "base64: length 3 is not a multiple of 4" },
		{ "Zg", ENC_BASE64, "base64: length 2 is not a multiple of 4" },
		{ "Z===", ENC_BASE64, "base64: misplaced padding at offset 1" },
		{ "====", ENC_BASE64, "base64: misplaced padding at offset 0" },
		{ "Zg=A", ENC_BASE64, "base64: misplaced padding at offset 2" },
		{ "Zm=vYg==", ENC_BASE64, "base64: misplaced padding at offset 2" },
		{ "Zh==", ENC_BASE64, "base64: non-zero trailing bits" },
		{ "Zm9=", ENC_BASE64, "base64: non-zero trailing bits" },
		{ "Zm 9v", ENC_BASE64, "base64: length 5 is not a multiple of 4" },
		{ "Zm9v\n", ENC_BASE64, "base64: length 5 is not a multiple of 4" },
		{ "Zm9\n", ENC_BASE64, "base64: invalid character at offset 3" },
		{ "Zg==", ENC_BASE64URL, "base64url: misplaced padding at offset 2" },
		{ "Zh", ENC_BASE64URL, "base64url: non-zero trailing bits" },
		{ "Z", ENC_BASE64URL, "base64url: truncated input (length 1)" },
		{ "Zm9vY", ENC_BASE64URL, "base64url: truncated input (length 5)" },
		{ "Zg", ENC_BASE64URL_PAD, "base64url: length 2 is not a multiple of 4" },
	};
	struct buf b = BUF_INIT;
	struct err e;

	buf_adds(&b, "prev");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		e.msg[0] = '\0';
		ok(enc_base64_decode(&b, bad[i].s, strlen(bad[i].s), bad[i].mode, &e) == -1, "refuse bad input %zu (mode %d)",
		   i, bad[i].mode);
		is_str(e.msg, bad[i].msg, "  with the right message");
	}
	is_str(b.data, "prev", "buffer unchanged after all the refusals");
	ok(enc_base64_decode(&b, "Zm9\0", 4, ENC_BASE64, &e) == -1, "embedded NUL refused");
	buf_release(&b);

	buf_init(&b, 5);
	ok(enc_base64_decode(&b, "Zm9vYmFy", 8, ENC_BASE64, &e) == -1, "decode over the cap refused");
	is_str(e.msg, "base64: decoded data larger than 5 bytes", "cap message");
	ok(enc_base64_decode(&b, "Zm9vYmE=", 8, ENC_BASE64, &e) == 0 && b.len == 5, "decode to exactly the cap");
	buf_release(&b);
}

int main(void)
{
	test_hex();
	test_b64_vectors();
	test_b64_alphabets();
	test_b64_strict();
	return tap_done();
}
