/*
 * clock.h: wall-clock time, RFC 3339 timestamps and Go-style durations.
 *
 * Timestamps on the wire are Go's time.RFC3339Nano in UTC (the reference
 * implementation's format), and durations in flags and compose files use Go's
 * time.ParseDuration syntax, so both are reproduced exactly here.
 * For intervals inside the process use ev_mono_ms() (monotonic) instead.
 */
#ifndef DENV_CLOCK_H
#define DENV_CLOCK_H

#include <stddef.h>
#include <stdint.h>

/* "2262-04-11T23:47:16.854775807Z" is the longest int64 nanoseconds can give
 * (30 bytes); offsets are never produced, only parsed. */
#define CLOCK_RFC3339_MAX 40
/* "-2562047h47m16.854s" fits with room; any int64 ms fits in 40 bytes. */
#define CLOCK_DURATION_MAX 40
/* Longest input clock_parse_duration looks at (real durations are short). */
#define CLOCK_DURATION_INPUT_MAX 64
/* Fraction digits kept when parsing a duration; later digits are below 1 ns. */
#define CLOCK_DURATION_FRAC_DIGITS 18

/* Realtime clock: nanoseconds / milliseconds since the Unix epoch. */
int64_t clock_now_ns(void);
int64_t clock_now_ms(void);

/* Format like Go's time.RFC3339Nano in UTC: "2026-11-29T13:43:30.12Z"
 * (fraction without trailing zeros, none at all when zero). Always succeeds. */
void clock_format_rfc3339(int64_t unix_ns, char out[CLOCK_RFC3339_MAX]);

/* Parse "YYYY-MM-DDTHH:MM:SS[.f{1,9}](Z|+hh:mm|-hh:mm)" strictly (uppercase T
 * and Z, real calendar dates, no leap second, no spaces). 0, or -1 if s is not
 * such a timestamp or the instant does not fit int64 nanoseconds. */
int clock_parse_rfc3339(const char *s, int64_t *unix_ns);

/* Parse Go duration syntax ("0", "2s", "500ms", "1m30s", "1.5h", ".5s", "+1s";
 * units ns us µs μs ms s m h) into milliseconds, rounding down. Negative
 * durations, missing units, and values past Go's limit (int64 nanoseconds,
 * about 292 years) are refused with -1. */
int clock_parse_duration(const char *s, int64_t *ms);

/* Format like Go's Duration.String for a whole number of ms: "1m30s", "250ms",
 * "1.5s", "1h0m0s", "0s". Returns 0, or -1 if n is too small (out is then
 * truncated but NUL-terminated). */
int clock_format_duration(int64_t ms, char *out, size_t n);

#endif
