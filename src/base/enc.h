/*
 * enc.h: hex and base64 (RFC 4648) encoding and strict decoding.
 *
 * Encoders append to a struct buf (failing only when the buf's cap is hit) or
 * write into a caller array sized with the *_len helpers. Decoders are strict,
 * because what they read comes from peers and from tokens that are compared
 * byte for byte: no whitespace, no mixed alphabets, exact padding, and no
 * non-zero bits left over at the end (so every byte string has exactly one
 * accepted encoding).
 */
#ifndef DENV_ENC_H
#define DENV_ENC_H

#include <stdbool.h>
#include <stddef.h>

#include "base/buf.h"
#include "base/err.h"

enum enc_b64 {
	ENC_BASE64,		/* standard alphabet (+/), padded with '=' */
	ENC_BASE64URL,		/* URL-safe alphabet (-_), no padding (tokens, JWT) */
	ENC_BASE64URL_PAD,	/* URL-safe alphabet, padded */
};

/* Exact encoded length of n bytes (without the NUL). 0 / SIZE_MAX on overflow. */
size_t enc_hex_len(size_t n);
size_t enc_base64_len(size_t n, enum enc_b64 mode);

/* Encode into out, which must have room for the *_len result plus a NUL.
 * Hex is lowercase. Return the length written (without the NUL). */
size_t enc_hex_write(char *out, const void *p, size_t n);
size_t enc_base64_write(char *out, const void *p, size_t n, enum enc_b64 mode);

/* Append the encoding to out. 0, or -1 (errno EMSGSIZE) if the cap is hit, in
 * which case out is unchanged. */
int enc_hex_encode(struct buf *out, const void *p, size_t n);
int enc_base64_encode(struct buf *out, const void *p, size_t n, enum enc_b64 mode);

/* Decode n characters of s (either case for hex) and append the bytes to out.
 * 0, or -1 with a message in e ("base64: invalid character at offset 7");
 * out is unchanged on failure. */
int enc_hex_decode(struct buf *out, const char *s, size_t n, struct err *e);
int enc_base64_decode(struct buf *out, const char *s, size_t n, enum enc_b64 mode, struct err *e);

/* Decode exactly into out[outlen] (e.g. a 32-byte key): -1 unless the input
 * decodes to exactly outlen bytes. */
int enc_hex_decode_exact(void *out, size_t outlen, const char *s, size_t n, struct err *e);

/* The value of one hex digit (either case), or -1. */
int enc_hex_digit(char c);

#endif
