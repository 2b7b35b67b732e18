/* form.c: reading HTML form bodies and cookies, and escaping text for HTML.
 * See http.h for each function's rules. */
#include <string.h>

#include "http/http.h"

int http_form_field(const char *body, size_t len, const char *name, struct buf *out)
{
	size_t want = strlen(name);
	const char *p = body, *end = body + len;

	while (p < end) {
		const char *amp = memchr(p, '&', (size_t)(end - p));
		const char *e = amp ? amp : end;
		const char *eq = memchr(p, '=', (size_t)(e - p));
		const char *ne = eq ? eq : e;
		struct buf key;
		bool match;

		/* Field names are ours and plain; decode them anyway, bounded. */
		buf_init(&key, want + 1);
		match = http_pct_decode(p, (size_t)(ne - p), true, &key) == 0 && key.len == want &&
			memcmp(key.data, name, want) == 0;
		buf_release(&key);
		if (match) {
			if (eq && http_pct_decode(eq + 1, (size_t)(e - eq - 1), true, out) < 0)
				return -1;
			return 1;
		}
		p = amp ? amp + 1 : end;
	}
	return 0;
}

int http_cookie(const char *header, const char *name, char *out, size_t n)
{
	size_t want = strlen(name);
	const char *p = header;

	while (p && *p) {
		const char *semi = strchr(p, ';');
		const char *e = semi ? semi : p + strlen(p);
		size_t vlen;

		while (*p == ' ' || *p == '\t')
			p++;
		if ((size_t)(e - p) > want && strncmp(p, name, want) == 0 && p[want] == '=') {
			p += want + 1;
			vlen = (size_t)(e - p);
			while (vlen > 0 && (p[vlen - 1] == ' ' || p[vlen - 1] == '\t'))
				vlen--;
			if (vlen >= n)
				return 0;
			memcpy(out, p, vlen);
			out[vlen] = '\0';
			return 1;
		}
		p = semi ? semi + 1 : e;
	}
	return 0;
}

int http_html_escape(struct buf *out, const char *s)
{
	for (; s && *s; s++) {
		const char *ref = NULL;
		int rc;

		switch (*s) {
		case '&': ref = "&amp;"; break;
		case '<': ref = "&lt;"; break;
		case '>': ref = "&gt;"; break;
		case '"': ref = "&quot;"; break;
		case '\'': ref = "&#39;"; break;
		default: break;
		}
		rc = ref ? buf_adds(out, ref) : buf_addch(out, *s);
		if (rc < 0)
			return -1;
	}
	return 0;
}
