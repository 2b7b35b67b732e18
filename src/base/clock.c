/* clock.c: see clock.h. */
#include "base/clock.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define NS_PER_SEC 1000000000LL

int64_t clock_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * NS_PER_SEC + ts.tv_nsec;
}

int64_t clock_now_ms(void)
{
	return clock_now_ns() / 1000000;
}

/* Days since 1970-01-01 of a proleptic Gregorian date, and back. Done by hand
 * rather than with timegm/gmtime_r so that results never depend on the C
 * library's time_t range or TZ, and negative instants work the same way. */
static int64_t days_from_civil(int64_t y, int m, int d)
{
	int64_t era, yoe, doy, doe;

	y -= m <= 2;
	era = (y >= 0 ? y : y - 399) / 400;
	yoe = y - era * 400;
	doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

static void civil_from_days(int64_t z, int64_t *y, int *m, int *d)
{
	int64_t era, doe, yoe, doy, mp;

	z += 719468;
	era = (z >= 0 ? z : z - 146096) / 146097;
	doe = z - era * 146097;
	yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	mp = (5 * doy + 2) / 153;
	*d = (int)(doy - (153 * mp + 2) / 5 + 1);
	*m = (int)(mp < 10 ? mp + 3 : mp - 9);
	*y = yoe + era * 400 + (*m <= 2);
}

static int days_in_month(int64_t y, int m)
{
	static const int days[] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
	bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;

	return m == 2 && leap ? 29 : days[m - 1];
}

void clock_format_rfc3339(int64_t unix_ns, char out[CLOCK_RFC3339_MAX])
{
	int64_t secs = unix_ns / NS_PER_SEC, frac = unix_ns % NS_PER_SEC, days, rem, y;
	int m, d, n;
	char digits[10];

	if (frac < 0) {
		frac += NS_PER_SEC;
		secs--;
	}
	days = secs / 86400;
	rem = secs % 86400;
	if (rem < 0) {
		rem += 86400;
		days--;
	}
	civil_from_days(days, &y, &m, &d);
	n = snprintf(out, CLOCK_RFC3339_MAX, "%04lld-%02d-%02dT%02d:%02d:%02d", (long long)y, m, d,
		     (int)(rem / 3600), (int)(rem / 60 % 60), (int)(rem % 60));
	if (frac) {
		int len = 9;
		snprintf(digits, sizeof(digits), "%09d", (int)frac);
		while (digits[len - 1] == '0')
			len--;
		n += snprintf(out + n, (size_t)(CLOCK_RFC3339_MAX - n), ".%.*s", len, digits);
	}
	snprintf(out + n, (size_t)(CLOCK_RFC3339_MAX - n), "Z");
}

/* Exactly n ASCII digits at s, as a number; -1 if any is not a digit. */
static int digits_at(const char *s, int n)
{
	int v = 0;

	for (int i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	return v;
}

int clock_parse_rfc3339(const char *s, int64_t *unix_ns)
{
	int y, mo, d, h, mi, sec, off = 0;
	int64_t frac = 0, secs;
	const char *p;

	if (!s || strnlen(s, 20) < 20)
		return -1;
	y = digits_at(s, 4);
	mo = digits_at(s + 5, 2);
	d = digits_at(s + 8, 2);
	h = digits_at(s + 11, 2);
	mi = digits_at(s + 14, 2);
	sec = digits_at(s + 17, 2);
	if (y < 0 || mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo) ||
	    h < 0 || h > 23 || mi < 0 || mi > 59 || sec < 0 || sec > 59 ||
	    s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':')
		return -1;
	p = s + 19;
	if (*p == '.') {
		int n = 0;
		for (p++; *p >= '0' && *p <= '9'; p++, n++) {
			if (n == 9)
				return -1;
			frac = frac * 10 + (*p - '0');
		}
		if (n == 0)
			return -1;
		for (; n < 9; n++)
			frac *= 10;
	}
	if (*p == 'Z') {
		p++;
	} else if (*p == '+' || *p == '-') {
		int oh = digits_at(p + 1, 2), om;
		if (oh < 0 || oh > 23 || p[3] != ':')
			return -1;
		om = digits_at(p + 4, 2);
		if (om < 0 || om > 59)
			return -1;
		off = (oh * 60 + om) * 60 * (*p == '-' ? -1 : 1);
		p += 6;
	} else {
		return -1;
	}
	if (*p)
		return -1;
	secs = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec - off;
	/* int64 ns spans -9223372036.854775808 s .. 9223372036.854775807 s */
	if (secs > 9223372036LL || secs < -9223372037LL)
		return -1;
	if (secs == 9223372036LL && frac > 854775807)
		return -1;
	if (secs == -9223372037LL) {
		if (frac < 145224192)
			return -1;
		*unix_ns = INT64_MIN + (frac - 145224192);
		return 0;
	}
	*unix_ns = secs * NS_PER_SEC + frac;
	return 0;
}

struct dur_unit {
	const char *name;
	uint64_t ns;
};

static const struct dur_unit dur_units[] = {
	{ "ns", 1 },
	{ "us", 1000 },
	{ "\xc2\xb5s", 1000 },	/* U+00B5 micro sign */
	{ "\xce\xbcs", 1000 },	/* U+03BC Greek mu */
	{ "ms", 1000000 },
	{ "s", 1000000000ULL },
	{ "m", 60000000000ULL },
	{ "h", 3600000000000ULL },
};

static uint64_t gcd_u64(uint64_t a, uint64_t b)
{
	while (b) {
		uint64_t t = a % b;
		a = b;
		b = t;
	}
	return a;
}

int clock_parse_duration(const char *s, int64_t *ms)
{
	const uint64_t limit = (uint64_t)INT64_MAX;
	uint64_t total = 0;
	const char *p = s;

	if (!s || strnlen(s, CLOCK_DURATION_INPUT_MAX + 1) > CLOCK_DURATION_INPUT_MAX)
		return -1;
	if (*p == '+')
		p++;
	if (strcmp(p, "0") == 0) {
		*ms = 0;
		return 0;
	}
	if (!*p)
		return -1;
	while (*p) {
		uint64_t v = 0, f = 0, scale = 1, unit = 0, add;
		bool digits = false;
		size_t ulen = 0;

		for (; *p >= '0' && *p <= '9'; p++) {
			digits = true;
			if (v > (limit - (uint64_t)(*p - '0')) / 10)
				return -1;
			v = v * 10 + (uint64_t)(*p - '0');
		}
		if (*p == '.') {
			int kept = 0;
			for (p++; *p >= '0' && *p <= '9'; p++) {
				digits = true;
				if (kept < CLOCK_DURATION_FRAC_DIGITS) {
					f = f * 10 + (uint64_t)(*p - '0');
					scale *= 10;
					kept++;
				}
			}
		}
		if (!digits)
			return -1;
		for (size_t i = 0; i < sizeof(dur_units) / sizeof(dur_units[0]); i++) {
			size_t n = strlen(dur_units[i].name);
			/* longest match, so "ms" is not read as "m" followed by "s" */
			if (n > ulen && strncmp(p, dur_units[i].name, n) == 0) {
				unit = dur_units[i].ns;
				ulen = n;
			}
		}
		if (!unit)
			return -1;
		p += ulen;
		if (v > limit / unit)
			return -1;
		add = v * unit;
		if (f) {
			/* floor(f * unit / scale) without overflow: f < scale, and after
			 * dividing out the common factor the product stays below 2^64 */
			uint64_t g = gcd_u64(unit, scale);
			add += f * (unit / g) / (scale / g);
		}
		if (add > limit || total > limit - add)
			return -1;
		total += add;
	}
	*ms = (int64_t)(total / 1000000);
	return 0;
}

int clock_format_duration(int64_t ms, char *out, size_t n)
{
	uint64_t u = ms < 0 ? (uint64_t)0 - (uint64_t)ms : (uint64_t)ms;
	const char *sign = ms < 0 ? "-" : "";
	uint64_t secs = u / 1000, frac = u % 1000, h = secs / 3600, m = secs / 60 % 60, sec = secs % 60;
	char fr[8] = "";
	int r;

	if (n == 0)
		return -1;
	if (u == 0)
		r = snprintf(out, n, "0s");
	else if (u < 1000)
		r = snprintf(out, n, "%s%llums", sign, (unsigned long long)u);
	else {
		if (frac) {
			snprintf(fr, sizeof(fr), ".%03llu", (unsigned long long)frac);
			for (size_t i = strlen(fr); fr[i - 1] == '0'; i--)
				fr[i - 1] = '\0';
		}
		if (h)
			r = snprintf(out, n, "%s%lluh%llum%llu%ss", sign, (unsigned long long)h,
				     (unsigned long long)m, (unsigned long long)sec, fr);
		else if (m)
			r = snprintf(out, n, "%s%llum%llu%ss", sign, (unsigned long long)m,
				     (unsigned long long)sec, fr);
		else
			r = snprintf(out, n, "%s%llu%ss", sign, (unsigned long long)sec, fr);
	}
	return r < 0 || (size_t)r >= n ? -1 : 0;
}
