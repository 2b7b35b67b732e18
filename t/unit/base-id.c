/* Unit tests: ids (prefixed ULIDs). */
#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "base/id.h"
#include "tap.h"

static void test_shape(void)
{
	char id[ID_MAX];
	int64_t before = clock_now_ms(), after, t;

	ok(id_new("env", id) == 0, "id_new");
	after = clock_now_ms();
	is_int(strlen(id), 4 + 26, "env_ + 26 characters");
	ok(strncmp(id, "env_", 4) == 0, "prefix and underscore");
	ok(strspn(id + 4, "0123456789ABCDEFGHJKMNPQRSTVWXYZ") == 26, "Crockford base32 alphabet, uppercase");
	ok(id_valid(id, "env") && id_valid(id, NULL), "valid with its prefix and with any");
	ok(!id_valid(id, "ver") && !id_valid(id, "en") && !id_valid(id, "envx"), "invalid with another prefix");
	t = id_time_ms(id);
	ok(t >= before && t <= after, "timestamp is the creation time");
	ok(id_new("abcdefghijklmnop", id) == 0 && id_valid(id, "abcdefghijklmnop"), "16-letter prefix");
}

static void test_bad_prefix(void)
{
	static const char *bad[] = { "", "Env", "env_", "en1", "abcdefghijklmnopq", "é" };
	char id[ID_MAX];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(id, sizeof(id), "junk");
		ok(id_new(bad[i], id) == -1 && id[0] == '\0', "prefix \"%s\" refused", bad[i]);
	}
}

static void test_known(void)
{
	/* 2^48 - 1 ms and all-ones random is the largest ULID: 7ZZZ...Z */
	ok(id_valid("x_7ZZZZZZZZZZZZZZZZZZZZZZZZZ", "x"), "largest ULID valid");
	is_int(id_time_ms("x_7ZZZZZZZZZZZZZZZZZZZZZZZZZ"), 281474976710655LL, "its time is 2^48 - 1");
	is_int(id_time_ms("dep_01ARYZ6S41TSV4RRFFQ69G5FAV"), 1469918176385LL, "time of the ULID spec's example");
	is_int(id_time_ms("ver_00000000000000000000000000"), 0, "zero time");
	ok(!id_valid("x_8ZZZZZZZZZZZZZZZZZZZZZZZZZ", NULL), "first character past 7 overflows 128 bits");
	ok(!id_valid("dep_01ARZ3NDEKTSV4RRFFQ69G5FA", NULL), "25 characters");
	ok(!id_valid("dep_01ARZ3NDEKTSV4RRFFQ69G5FAVV", NULL), "27 characters");
	ok(!id_valid("dep_01arz3ndektsv4rrffq69g5fav", NULL), "lowercase ULID refused (ids compare exactly)");
	ok(!id_valid("dep_01ARZ3NDEKTSV4RRFFQ69G5FAU", NULL), "U is not Crockford");
	ok(!id_valid("dep_01ARZ3NDEKTSV4RRFFQ69G5FAI", NULL), "I is not Crockford");
	ok(!id_valid("01ARZ3NDEKTSV4RRFFQ69G5FAV", NULL), "no prefix");
	ok(!id_valid("_01ARZ3NDEKTSV4RRFFQ69G5FAV", NULL), "empty prefix");
	ok(!id_valid("De_01ARZ3NDEKTSV4RRFFQ69G5FAV", NULL), "uppercase prefix");
	ok(!id_valid("a_b_01ARZ3NDEKTSV4RRFFQ69G5FAV", NULL), "two underscores");
	ok(!id_valid(NULL, NULL), "NULL");
	is_int(id_time_ms("nope"), -1, "time of an invalid id is -1");
}

static void test_monotonic(void)
{
	enum { N = 20000 };
	static char ids[N][ID_MAX];
	int sorted = 1, same_ms = 0, distinct = 1;

	for (int i = 0; i < N; i++)
		id_new("env", ids[i]);
	for (int i = 1; i < N; i++) {
		if (strcmp(ids[i - 1], ids[i]) >= 0)
			sorted = 0;
		if (id_time_ms(ids[i - 1]) == id_time_ms(ids[i])) {
			same_ms++;
			/* same ms: the random part is the previous one plus one */
			if (strncmp(ids[i - 1], ids[i], 4 + 10) != 0)
				distinct = 0;
		}
	}
	ok(sorted, "%d ids strictly increasing as strings", N);
	ok(same_ms > 0, "some ids share a millisecond (%d)", same_ms);
	ok(distinct, "ids in the same millisecond share the time characters");
	/* different prefixes share the ordering state: the ULID parts still increase */
	{
		char a[ID_MAX], b[ID_MAX];
		id_new("ver", a);
		id_new("dep", b);
		ok(strcmp(a + 4, b + 4) < 0, "ULID parts increase across prefixes");
	}
}

int main(void)
{
	test_shape();
	test_bad_prefix();
	test_known();
	test_monotonic();
	return tap_done();
}
