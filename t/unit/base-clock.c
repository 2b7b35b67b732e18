/* Unit tests: clock (RFC 3339 and Go durations). */
#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "tap.h"

static void test_now(void)
{
	int64_t ns = clock_now_ns(), ms = clock_now_ms();

	/* 2020-01-01 .. 2100-01-01: a sanity range, not a timing assertion */
	ok(ns > 1577836800000000000LL && ns < 4102444800000000000LL, "clock_now_ns is a plausible realtime");
	ok(ms >= ns / 1000000 && ms - ns / 1000000 < 60000, "clock_now_ms agrees with clock_now_ns");
}

static void test_format(void)
{
	static const struct { int64_t ns; const char *want; } cases[] = {
		{ 0, "1970-01-01T00:00:00Z" },
		{ 1795959810120000000LL, "2026-11-29T13:43:30.12Z" },
		{ 1795959810000000000LL, "2026-11-29T13:43:30Z" },
		{ 1795959810000000001LL, "2026-11-29T13:43:30.000000001Z" },
		{ 1795959810123456789LL, "2026-11-29T13:43:30.123456789Z" },
		{ 951782400000000000LL, "2000-02-29T00:00:00Z" },
		{ -1, "1969-12-31T23:59:59.999999999Z" },
		{ -1500000000LL, "1969-12-31T23:59:58.5Z" },
		{ INT64_MAX, "2262-04-11T23:47:16.854775807Z" },
		{ INT64_MIN, "1677-09-21T00:12:43.145224192Z" },
	};
	char out[CLOCK_RFC3339_MAX];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		clock_format_rfc3339(cases[i].ns, out);
		is_str(out, cases[i].want, cases[i].want);
	}
}

static void test_parse(void)
{
	static const struct { const char *s; int64_t want; } good[] = {
		{ "1970-01-01T00:00:00Z", 0 },
		{ "2026-11-29T13:43:30.12Z", 1795959810120000000LL },
		{ "2026-11-29T13:43:30Z", 1795959810000000000LL },
		{ "2026-11-29T14:43:30+01:00", 1795959810000000000LL },
		{ "2026-11-29T08:13:30.5-05:30", 1795959810500000000LL },
		{ "2026-11-29T13:43:30.123456789Z", 1795959810123456789LL },
		{ "2024-02-29T00:00:00Z", 1709164800000000000LL },
		{ "1969-12-31T23:59:59.999999999Z", -1 },
		{ "2262-04-11T23:47:16.854775807Z", INT64_MAX },
		{ "1677-09-21T00:12:43.145224192Z", INT64_MIN },
	};
	static const char *bad[] = {
		"", "2026-11-29", "2026-11-29T13:43:30", "2026-11-29 13:43:30Z", "2026-11-29t13:43:30Z",
		"2026-11-29T13:43:30z", "2026-13-01T00:00:00Z", "2026-00-01T00:00:00Z", "2025-02-29T00:00:00Z",
		"2026-04-31T00:00:00Z", "2026-11-29T24:00:00Z", "2026-11-29T23:60:00Z", "2026-11-29T23:59:60Z",
		"2026-11-29T13:43:30.Z", "2026-11-29T13:43:30.1234567890Z", "2026-11-29T13:43:30+0100",
		"2026-11-29T13:43:30+01:60", "2026-11-29T13:43:30+24:00", "2026-11-29T13:43:30Z ",
		" 2026-11-29T13:43:30Z", "2026-1-29T13:43:30Z", "+026-11-29T13:43:30Z", "2026-11-29T13:43:30+01",
		"2262-04-11T23:47:16.854775808Z", "1677-09-21T00:12:43.145224191Z", "9999-12-31T23:59:59Z",
		"2026-11-29T13:43:30Z+01:00",
	};
	int64_t ns;
	char out[CLOCK_RFC3339_MAX];

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		ns = 42;
		ok(clock_parse_rfc3339(good[i].s, &ns) == 0 && ns == good[i].want, "parse %s", good[i].s);
		if (ns != good[i].want)
			tap_diag("got %lld", (long long)ns);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ok(clock_parse_rfc3339(bad[i], &ns) == -1, "refuse \"%s\"", bad[i]);
	ok(clock_parse_rfc3339(NULL, &ns) == -1, "refuse NULL");

	/* round trip over a spread of instants, both signs */
	int fails = 0;
	for (int64_t v = INT64_MIN; ; v += 3074457345618258601LL / 997) {
		if (v > INT64_MAX - 3074457345618258601LL / 997)
			break;
		clock_format_rfc3339(v, out);
		if (clock_parse_rfc3339(out, &ns) < 0 || ns != v)
			fails++;
	}
	is_int(fails, 0, "format then parse gives the same instant (5982 values)");
}

static void test_duration(void)
{
	static const struct { const char *s; int64_t ms; } good[] = {
		{ "0", 0 }, { "+0", 0 }, { "2s", 2000 }, { "500ms", 500 }, { "1m30s", 90000 },
		{ "1.5h", 5400000 }, { "1h2m3s", 3723000 }, { ".5s", 500 }, { "5.s", 5000 },
		{ "+1s", 1000 }, { "1500us", 1 }, { "1999999ns", 1 }, { "999us", 0 },
		{ "1\xc2\xb5s", 0 }, { "2000\xce\xbcs", 2 }, { "0s", 0 }, { "1h1h", 7200000 },
		{ "1.0000000000000000000001s", 1000 }, { "0.001s", 1 }, { "0.0009s", 0 },
		{ "2562047h47m16.854775807s", 9223372036854LL }, { "2562047h", 9223369200000LL },
		{ "0.333333333333333333333h", 1199999 }, { "10ms5ns", 10 },
	};
	static const char *bad[] = {
		"", "-1s", "-0", "1", "10", "s", ".s", "1.2.3s", "1x", "1sm", "1 s", " 1s", "1s ",
		"1S", "1d", "2562048h", "2562047h47m16.854775808s", "9223372036854775808ns",
		"99999999999999999999s", "1m-1s", "+", "++1s", "\xc2\xb5s", "1\xc2s",
	};
	int64_t ms;

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		ms = -7;
		ok(clock_parse_duration(good[i].s, &ms) == 0 && ms == good[i].ms, "duration %s", good[i].s);
		if (ms != good[i].ms)
			tap_diag("got %lld", (long long)ms);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ok(clock_parse_duration(bad[i], &ms) == -1, "refuse duration \"%s\"", bad[i]);
}

static void test_format_duration(void)
{
	static const struct { int64_t ms; const char *want; } cases[] = {
		{ 0, "0s" }, { 1, "1ms" }, { 250, "250ms" }, { 999, "999ms" }, { 1000, "1s" },
		{ 1500, "1.5s" }, { 1250, "1.25s" }, { 1001, "1.001s" }, { 90000, "1m30s" },
		{ 60000, "1m0s" }, { 3600000, "1h0m0s" }, { 3723500, "1h2m3.5s" }, { -1500, "-1.5s" },
		{ -250, "-250ms" }, { INT64_MIN, "-2562047788015h12m55.808s" },
	};
	char out[CLOCK_DURATION_MAX];
	char tiny[4];
	int64_t back;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ok(clock_format_duration(cases[i].ms, out, sizeof(out)) == 0, "format %lld fits", (long long)cases[i].ms);
		is_str(out, cases[i].want, cases[i].want);
	}
	ok(clock_format_duration(90000, tiny, sizeof(tiny)) == -1 && strcmp(tiny, "1m3") == 0,
	   "too small an output is refused, truncated and terminated");
	ok(clock_format_duration(3723500, out, sizeof(out)) == 0 && clock_parse_duration(out, &back) == 0 &&
	   back == 3723500, "format then parse round trip");
}

int main(void)
{
	test_now();
	test_format();
	test_parse();
	test_duration();
	test_format_duration();
	return tap_done();
}
