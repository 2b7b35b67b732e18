/* enc.c: see enc.h. */
#include "base/enc.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

static const char hex_digits[] = "0123456789abcdef";
static const char b64_std[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
static const char b64_url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

size_t enc_hex_len(size_t n)
{
	return n > SIZE_MAX / 2 ? SIZE_MAX : n * 2;
}

size_t enc_base64_len(size_t n, enum enc_b64 mode)
{
	size_t full = n / 3, rest = n % 3;

	if (full > (SIZE_MAX - 4) / 4)
		return SIZE_MAX;
	if (mode == ENC_BASE64URL)
		return full * 4 + (rest ? rest + 1 : 0);
	return full * 4 + (rest ? 4 : 0);
}

size_t enc_hex_write(char *out, const void *p, size_t n)
{
	const unsigned char *in = p;

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = hex_digits[in[i] >> 4];
		out[2 * i + 1] = hex_digits[in[i] & 15];
	}
	out[2 * n] = '\0';
	return 2 * n;
}

size_t enc_base64_write(char *out, const void *p, size_t n, enum enc_b64 mode)
{
	const unsigned char *in = p;
	const char *alpha = mode == ENC_BASE64 ? b64_std : b64_url;
	bool pad = mode != ENC_BASE64URL;
	size_t o = 0, i = 0;

	for (; i + 3 <= n; i += 3) {
		uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
		out[o++] = alpha[v >> 18];
		out[o++] = alpha[(v >> 12) & 63];
		out[o++] = alpha[(v >> 6) & 63];
		out[o++] = alpha[v & 63];
	}
	if (n - i == 1) {
		uint32_t v = (uint32_t)in[i] << 16;
		out[o++] = alpha[v >> 18];
		out[o++] = alpha[(v >> 12) & 63];
		if (pad) {
			out[o++] = '=';
			out[o++] = '=';
		}
	} else if (n - i == 2) {
		uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8;
		out[o++] = alpha[v >> 18];
		out[o++] = alpha[(v >> 12) & 63];
		out[o++] = alpha[(v >> 6) & 63];
		if (pad)
			out[o++] = '=';
	}
	out[o] = '\0';
	return o;
}

int enc_hex_encode(struct buf *out, const void *p, size_t n)
{
	size_t len = enc_hex_len(n);

	if (len == SIZE_MAX) {
		errno = EMSGSIZE;
		return -1;
	}
	if (buf_grow(out, len) < 0)
		return -1;
	enc_hex_write(out->data + out->len, p, n);
	buf_setlen(out, out->len + len);
	return 0;
}

int enc_base64_encode(struct buf *out, const void *p, size_t n, enum enc_b64 mode)
{
	size_t len = enc_base64_len(n, mode);

	if (len == SIZE_MAX) {
		errno = EMSGSIZE;
		return -1;
	}
	if (buf_grow(out, len) < 0)
		return -1;
	enc_base64_write(out->data + out->len, p, n, mode);
	buf_setlen(out, out->len + len);
	return 0;
}

int enc_hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Decode into dst (room for n / 2 bytes). */
static int hex_decode_to(unsigned char *dst, const char *s, size_t n, struct err *e)
{
	if (n % 2)
		return err_set(e, "hex: odd length %zu", n);
	for (size_t i = 0; i < n; i += 2) {
		int hi = enc_hex_digit(s[i]), lo = enc_hex_digit(s[i + 1]);
		if (hi < 0 || lo < 0)
			return err_set(e, "hex: invalid character at offset %zu", hi < 0 ? i : i + 1);
		dst[i / 2] = (unsigned char)(hi << 4 | lo);
	}
	return 0;
}

int enc_hex_decode(struct buf *out, const char *s, size_t n, struct err *e)
{
	if (buf_grow(out, n / 2) < 0)
		return err_set(e, "hex: decoded data larger than %zu bytes", out->max);
	if (hex_decode_to((unsigned char *)out->data + out->len, s, n, e) < 0) {
		out->data[out->len] = '\0';
		return -1;
	}
	buf_setlen(out, out->len + n / 2);
	return 0;
}

int enc_hex_decode_exact(void *out, size_t outlen, const char *s, size_t n, struct err *e)
{
	if (n != 2 * outlen)
		return err_set(e, "hex: want %zu characters, got %zu", 2 * outlen, n);
	return hex_decode_to(out, s, n, e);
}

static int b64_val(unsigned char c, bool url)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == (url ? '-' : '+'))
		return 62;
	if (c == (url ? '_' : '/'))
		return 63;
	return -1;
}

int enc_base64_decode(struct buf *out, const char *s, size_t n, enum enc_b64 mode, struct err *e)
{
	const char *name = mode == ENC_BASE64 ? "base64" : "base64url";
	bool url = mode != ENC_BASE64, pad = mode != ENC_BASE64URL;
	size_t data = n, tail, outlen, o = 0;
	unsigned char *dst;
	uint32_t acc = 0;

	if (pad) {
		if (n % 4)
			return err_set(e, "%s: length %zu is not a multiple of 4", name, n);
		while (data > 0 && n - data < 2 && s[data - 1] == '=')
			data--;
	}
	tail = data % 4;
	if (tail == 1)
		return err_set(e, "%s: truncated input (length %zu)", name, n);
	outlen = data / 4 * 3 + (tail ? tail - 1 : 0);
	if (buf_grow(out, outlen) < 0)
		return err_set(e, "%s: decoded data larger than %zu bytes", name, out->max);
	dst = (unsigned char *)out->data + out->len;
	for (size_t i = 0; i < data; i++) {
		int v = b64_val((unsigned char)s[i], url);
		if (v < 0) {
			out->data[out->len] = '\0';
			if (s[i] == '=')
				return err_set(e, "%s: misplaced padding at offset %zu", name, i);
			return err_set(e, "%s: invalid character at offset %zu", name, i);
		}
		acc = acc << 6 | (uint32_t)v;
		if (i % 4 == 3) {
			dst[o++] = (unsigned char)(acc >> 16);
			dst[o++] = (unsigned char)(acc >> 8);
			dst[o++] = (unsigned char)acc;
			acc = 0;
		}
	}
	/* the last group: 2 chars carry 12 bits for 1 byte, 3 chars 18 bits for 2;
	 * the unused low bits must be zero or two inputs would decode the same */
	if (tail == 2) {
		if (acc & 0xf) {
			out->data[out->len] = '\0';
			return err_set(e, "%s: non-zero trailing bits", name);
		}
		dst[o++] = (unsigned char)(acc >> 4);
	} else if (tail == 3) {
		if (acc & 0x3) {
			out->data[out->len] = '\0';
			return err_set(e, "%s: non-zero trailing bits", name);
		}
		dst[o++] = (unsigned char)(acc >> 10);
		dst[o++] = (unsigned char)(acc >> 2);
	}
	buf_setlen(out, out->len + o);
	return 0;
}
