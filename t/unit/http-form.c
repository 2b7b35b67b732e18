/* Unit tests: form fields, cookies and HTML escaping (http/form.c). Inputs
 * are copied into exact-size allocations so that ASan catches over-reads. */
#include <stdlib.h>
#include <string.h>

#include "http/http.h"
#include "tap.h"

struct form_case {
	const char *body;
	const char *name;
	size_t cap;		/* out's cap; 0: default */
	int want;
	const char *value;	/* when want == 1 */
};

static const struct form_case form_cases[] = {
	{ "a=1&b=2", "b", 0, 1, "2" },
	{ "a=1&b=2", "a", 0, 1, "1" },
	{ "a=1&b=2", "c", 0, 0, NULL },
	{ "", "a", 0, 0, NULL },
	{ "user_code=bcdf-ghjk&team_id=team_01", "user_code", 0, 1, "bcdf-ghjk" },
	{ "email=a%40b.example&x=y", "email", 0, 1, "a@b.example" },
	{ "name=two+words", "name", 0, 1, "two words" },
	{ "a=1&a=2", "a", 0, 1, "1" },			/* the first one counts */
	{ "ab=1&a=2", "a", 0, 1, "2" },			/* a prefix of another name is not it */
	{ "a", "a", 0, 1, "" },				/* a bare name: empty value */
	{ "a=", "a", 0, 1, "" },
	{ "%61=encoded", "a", 0, 1, "encoded" },	/* the name is decoded too */
	{ "a=%zz", "a", 0, -1, NULL },			/* bad escape */
	{ "a=%00", "a", 0, -1, NULL },			/* decoded NUL */
	{ "a=%4", "a", 0, -1, NULL },			/* truncated escape at the end */
	{ "a=0123456789", "a", 5, -1, NULL },		/* over the cap */
	{ "a=01234&b=x", "a", 5, 1, "01234" },		/* exactly the cap */
	{ "&&a=1&", "a", 0, 1, "1" },
};

static void test_form(void)
{
	for (size_t i = 0; i < sizeof(form_cases) / sizeof(form_cases[0]); i++) {
		const struct form_case *c = &form_cases[i];
		size_t len = strlen(c->body);
		char *copy = xmemdup(c->body, len ? len : 1);
		struct buf out;
		int r;

		buf_init(&out, c->cap);
		r = http_form_field(copy, len, c->name, &out);
		ok(r == c->want && (r != 1 || strcmp(out.data, c->value) == 0), "form %s in \"%s\": %d \"%s\"",
		   c->name, c->body, r, out.data);
		buf_release(&out);
		free(copy);
	}
}

struct cookie_case {
	const char *header;
	const char *name;
	int want;
	const char *value;
};

static const struct cookie_case cookie_cases[] = {
	{ "denv_session=dst_abc", "denv_session", 1, "dst_abc" },
	{ "a=1; denv_session=dst_abc; b=2", "denv_session", 1, "dst_abc" },
	{ "a=1;denv_session=x", "denv_session", 1, "x" },
	{ "xdenv_session=no; denv_session=yes", "denv_session", 1, "yes" },
	{ "denv_session_old=no", "denv_session", 0, NULL },
	{ "denv_session=", "denv_session", 1, "" },
	{ "other=1", "denv_session", 0, NULL },
	{ "", "denv_session", 0, NULL },
	{ NULL, "denv_session", 0, NULL },
	{ "denv_session=0123456789abcdef", "denv_session", 0, NULL },	/* does not fit out[16] */
	{ "denv_session=0123456789abcde", "denv_session", 1, "0123456789abcde" },
};

static void test_cookie(void)
{
	for (size_t i = 0; i < sizeof(cookie_cases) / sizeof(cookie_cases[0]); i++) {
		const struct cookie_case *c = &cookie_cases[i];
		char *copy = c->header ? xstrdup(c->header) : NULL;
		char out[16] = "";
		int r = http_cookie(copy, c->name, out, sizeof(out));

		ok(r == c->want && (r != 1 || strcmp(out, c->value) == 0), "cookie %s in \"%s\": %d \"%s\"", c->name,
		   c->header ? c->header : "(null)", r, out);
		free(copy);
	}
}

static void test_escape(void)
{
	struct buf b = BUF_INIT, small;

	ok(http_html_escape(&b, "<script>alert('x') & \"y\"</script>") == 0 &&
		   strcmp(b.data, "&lt;script&gt;alert(&#39;x&#39;) &amp; &quot;y&quot;&lt;/script&gt;") == 0,
	   "html escape: %s", b.data);
	buf_reset(&b);
	ok(http_html_escape(&b, NULL) == 0 && b.len == 0, "NULL escapes to nothing");
	ok(http_html_escape(&b, "caf\xc3\xa9 BCDF-GHJK") == 0 && strcmp(b.data, "caf\xc3\xa9 BCDF-GHJK") == 0,
	   "plain text and UTF-8 pass through");
	buf_release(&b);
	buf_init(&small, 4);
	ok(http_html_escape(&small, "<<") < 0, "over the cap: -1");
	buf_release(&small);
}

int main(void)
{
	test_form();
	test_cookie();
	test_escape();
	return tap_done();
}
