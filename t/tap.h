/*
 * tap.h: a tiny TAP producer for the unit tests (run by prove).
 *
 * Each check prints "ok N - name" or "not ok N - name" with a diagnostic;
 * tap_done() prints the plan and returns the exit status for main.
 */
#ifndef DENV_TAP_H
#define DENV_TAP_H

#include <stddef.h>
#include <stdint.h>

/* ok(cond, fmt, ...): one test point. Returns cond so callers may branch. */
int tap_ok(int cond, const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
#define ok(cond, ...) tap_ok(!!(cond), __FILE__, __LINE__, __VA_ARGS__)

/* Equality checks that print both sides when they differ. */
int tap_is_str(const char *got, const char *want, const char *file, int line, const char *name);
int tap_is_int(long long got, long long want, const char *file, int line, const char *name);
#define is_str(got, want, name) tap_is_str((got), (want), __FILE__, __LINE__, (name))
#define is_int(got, want, name) tap_is_int((long long)(got), (long long)(want), __FILE__, __LINE__, (name))

/* A comment line ("# ..."), shown by prove -v. */
void tap_diag(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Skip the whole file (prints "1..0 # SKIP reason"); returns 0 for main. */
int tap_skip_all(const char *reason);

/* Print the plan; 0 when every test passed, 1 otherwise. */
int tap_done(void);

/* A fresh empty directory under $TMPDIR for this test; removed by tap_done(). */
const char *tap_tmpdir(void);

#endif
