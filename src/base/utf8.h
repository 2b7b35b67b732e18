/*
 * utf8.h: UTF-8 validation and encoding (RFC 3629: no overlongs, no
 * surrogates, nothing past U+10FFFF). Shared by the JSON, YAML and WebSocket
 * code, which must each refuse invalid text.
 */
#ifndef DENV_UTF8_H
#define DENV_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Length of the valid UTF-8 sequence at s (1-4), or 0 if the bytes there are
 * not a complete valid sequence within n bytes. */
size_t utf8_seq_len(const unsigned char *s, size_t n);

/* True if all n bytes are valid UTF-8. */
bool utf8_valid(const void *s, size_t n);

/* Incremental validation for text that arrives in pieces (WebSocket
 * fragments). state starts at 0; utf8_feed returns false as soon as the bytes
 * cannot be valid; at the end, the text is complete iff *state == 0. */
bool utf8_feed(uint32_t *state, const void *s, size_t n);

/* Encode code point cp (<= 0x10FFFF, not a surrogate) into out; returns 1-4, or 0 if invalid. */
size_t utf8_encode(uint32_t cp, char out[4]);

#endif
