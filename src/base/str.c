/* str.c: see str.h. */
#include "base/str.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"

bool str_eq(const char *a, const char *b)
{
	if (!a || !b)
		return a == b;
	return strcmp(a, b) == 0;
}

bool str_has_prefix(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

bool str_has_suffix(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);
	return n >= m && memcmp(s + n - m, suffix, m) == 0;
}

bool str_only(const char *s, const char *extra)
{
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || strchr(extra, *s)))
			return false;
	return true;
}

int str_copy(char *dst, size_t n, const char *src)
{
	size_t len = strlen(src);

	if (n == 0)
		return -1;
	if (len >= n) {
		memcpy(dst, src, n - 1);
		dst[n - 1] = '\0';
		return -1;
	}
	memcpy(dst, src, len + 1);
	return 0;
}

int str_vfmt(char *dst, size_t n, const char *fmt, va_list ap)
{
	int len;

	if (n == 0)
		return -1;
	len = vsnprintf(dst, n, fmt, ap);
	if (len < 0 || (size_t)len >= n) {
		dst[0] = '\0';
		return -1;
	}
	return 0;
}

int str_fmt(char *dst, size_t n, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = str_vfmt(dst, n, fmt, ap);
	va_end(ap);
	return rc;
}

int str_to_i64(const char *s, int64_t *out)
{
	char *end;
	long long v;

	if (!s || !*s || isspace((unsigned char)*s))
		return -1;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || *end)
		return -1;
	*out = v;
	return 0;
}

int str_to_u64(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (!s || !isdigit((unsigned char)*s))
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end)
		return -1;
	*out = v;
	return 0;
}

int str_to_int(const char *s, int *out)
{
	int64_t v;

	if (str_to_i64(s, &v) < 0 || v < INT_MIN || v > INT_MAX)
		return -1;
	*out = (int)v;
	return 0;
}

int str_to_double(const char *s, double *out)
{
	char *end;
	double v;

	if (!s || !*s || isspace((unsigned char)*s))
		return -1;
	errno = 0;
	v = strtod(s, &end);
	if (errno || *end || !isfinite(v))
		return -1;
	*out = v;
	return 0;
}

char *str_trim(char *s)
{
	size_t n = strlen(s), start = 0;

	while (n > 0 && isspace((unsigned char)s[n - 1]))
		n--;
	while (start < n && isspace((unsigned char)s[start]))
		start++;
	memmove(s, s + start, n - start);
	s[n - start] = '\0';
	return s;
}

char **str_split(const char *s, const char *seps, size_t *n)
{
	size_t count = 0, cap = 4;
	char **list = xmalloc(cap * sizeof(*list));

	while (*s) {
		size_t len;
		s += strspn(s, seps);
		len = strcspn(s, seps);
		if (!len)
			break;
		if (count + 2 > cap) {
			cap *= 2;
			list = xrealloc(list, cap * sizeof(*list));
		}
		list[count++] = xstrndup(s, len);
		s += len;
	}
	list[count] = NULL;
	if (n)
		*n = count;
	return list;
}

void str_list_free(char **list)
{
	if (!list)
		return;
	for (char **p = list; *p; p++)
		free(*p);
	free(list);
}
