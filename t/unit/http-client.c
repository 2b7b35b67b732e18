/* Unit tests: reading a JSON error answer (http_client_resp_error). */
#include <string.h>

#include "base/buf.h"
#include "http/http.h"
#include "tap.h"

/* One case: the answer's body, and the message that should come of it. */
struct error_case {
	const char *body;
	size_t room;
	int want_rc;
	const char *want;
	const char *name;
};

static const struct error_case cases[] = {
	{ "{\"error\":\"project not found\"}", 64, 1, "project not found", "the error member" },
	{ "{\"error\":\"project not found\"}", 8, 1, "project", "cut to the room given" },
	{ "{\"error\":\"\"}", 64, 0, "", "an empty message is none" },
	{ "{\"error\":42}", 64, 0, "", "a message that is not a string is none" },
	{ "{\"detail\":\"x\"}", 64, 0, "", "no error member" },
	{ "<html>502</html>", 64, 0, "", "a body that is not JSON" },
	{ "", 64, 0, "", "an empty body" },
};

int main(void)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct http_client_resp r = HTTP_CLIENT_RESP_INIT;
		char out[64];

		memset(out, 'x', sizeof(out));
		r.status = 404;
		buf_adds(&r.body, cases[i].body);
		is_int(http_client_resp_error(&r, out, cases[i].room), cases[i].want_rc, cases[i].name);
		is_str(out, cases[i].want, cases[i].name);
		http_client_resp_release(&r);
	}
	return tap_done();
}
