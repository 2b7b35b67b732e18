/* Unit tests: buf, err, str, arena. */
#include <errno.h>
#include <string.h>
#include <stdlib.h>

#include "base/arena.h"
#include "base/buf.h"
#include "base/err.h"
#include "base/str.h"
#include "tap.h"

static void test_buf(void)
{
	struct buf b = BUF_INIT;
	char *s;
	size_t n;

	ok(b.data && b.data[0] == '\0' && b.len == 0, "empty buf is a valid empty string");
	buf_adds(&b, "hello");
	buf_addch(&b, ' ');
	buf_addf(&b, "%s %d", "world", 42);
	is_str(b.data, "hello world 42", "add, addch, addf");
	buf_consume(&b, 6);
	is_str(b.data, "world 42", "consume from front");
	buf_truncate(&b, 5);
	is_str(b.data, "world", "truncate");
	for (int i = 0; i < 1000; i++)
		buf_addf(&b, "%04d", i);
	is_int(b.len, 5 + 4000, "growth through many addf");
	s = buf_detach(&b, &n);
	is_int(n, 4005, "detach gives length");
	ok(b.len == 0 && b.data[0] == '\0', "buf empty after detach");
	free(s);
	buf_release(&b);

	buf_init(&b, 8);
	ok(buf_adds(&b, "12345678") == 0, "fill to the cap");
	errno = 0;
	ok(buf_addch(&b, 'x') == -1 && errno == EMSGSIZE, "one byte over the cap fails with EMSGSIZE");
	is_str(b.data, "12345678", "contents unchanged after refused growth");
	buf_reset(&b);
	ok(buf_addf(&b, "%s", "123456789") == -1, "addf over the cap fails");
	ok(b.len == 0 && b.data[0] == '\0', "and leaves the buffer as it was");
	buf_release(&b);

	buf_init(&b, 0);
	buf_add_shell_word(&b, "it's $x");
	is_str(b.data, "'it'\\''s $x'", "a shell word: quoted, its quote closed, escaped and reopened");
	buf_reset(&b);
	buf_add_shell_word(&b, "");
	is_str(b.data, "''", "the empty shell word");
	buf_release(&b);
	buf_init(&b, 4);
	ok(buf_add_shell_word(&b, "abcd") == -1, "a shell word over the cap fails");
	buf_release(&b);
}

static void test_err(void)
{
	struct err e;

	ok(err_set(&e, "service \"%s\" has no image", "x") == -1, "err_set returns -1");
	err_prefix(&e, "compose");
	is_str(e.msg, "compose: service \"x\" has no image", "err_prefix adds context");
	errno = ENOENT;
	err_errno(&e, "open %s", "/nope");
	is_str(e.msg, "open /nope: No such file or directory", "err_errno appends strerror");
	is_int(e.code, ENOENT, "err_errno keeps errno in code");
}

static void test_str(void)
{
	int64_t i;
	uint64_t u;
	int n;
	double d;
	char small[4];
	char trim[] = "  a b \t\n";
	size_t count;
	char **parts;

	ok(str_to_i64("-9223372036854775808", &i) == 0 && i == INT64_MIN, "i64 min");
	ok(str_to_i64("9223372036854775808", &i) == -1, "i64 overflow refused");
	ok(str_to_i64("12x", &i) == -1, "trailing junk refused");
	ok(str_to_i64(" 1", &i) == -1, "leading space refused");
	ok(str_to_i64("", &i) == -1, "empty refused");
	ok(str_to_u64("-1", &u) == -1, "negative u64 refused");
	ok(str_to_u64("18446744073709551615", &u) == 0 && u == UINT64_MAX, "u64 max");
	ok(str_to_int("2147483648", &n) == -1, "int overflow refused");
	ok(str_to_double("2.5", &d) == 0 && d == 2.5, "double");
	ok(str_to_double("inf", &d) == -1, "inf refused");
	ok(str_copy(small, sizeof(small), "abcdef") == -1 && strcmp(small, "abc") == 0, "str_copy truncates and says so");
	is_str(str_trim(trim), "a b", "trim");
	ok(str_has_prefix("env_01", "env_") && !str_has_prefix("en", "env_"), "prefix");
	ok(str_has_suffix("a.yaml", ".yaml") && !str_has_suffix("ml", ".yaml"), "suffix");
	parts = str_split("  sleep   infinity ", " \t", &count);
	ok(count == 2 && str_eq(parts[0], "sleep") && str_eq(parts[1], "infinity") && !parts[2], "split on whitespace");
	str_list_free(parts);
	ok(str_eq(NULL, NULL) && !str_eq("a", NULL), "str_eq is NULL-safe");
}

static void test_arena(void)
{
	struct arena a = ARENA_INIT;
	char *s = arena_strdup(&a, "hello");
	char *p = arena_printf(&a, "%s-%d", s, 7);
	void *big = arena_alloc(&a, 100000);
	uintptr_t q = (uintptr_t)arena_alloc(&a, 3);

	is_str(p, "hello-7", "arena_printf");
	ok(big && ((unsigned char *)big)[99999] == 0, "large allocation is zeroed");
	ok(q % 16 == 0, "allocations are 16-byte aligned");
	arena_release(&a);
	ok(a.head == NULL && a.used == 0, "release empties the arena");
}

int main(void)
{
	test_buf();
	test_err();
	test_str();
	test_arena();
	return tap_done();
}
