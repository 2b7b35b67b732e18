/* cp-token.c: the verdict on a provider's answer to a token check
 * (src/cp/token_check.c): which status denv-cp answers and in whose words,
 * for each provider's error body, a body without a message and one that is
 * not JSON. Each body is copied into an exact-size allocation so that ASan
 * catches a read past its end. */
#include <stdlib.h>
#include <string.h>

#include "cp/cp.h"
#include "tap.h"

static const struct {
	const char *provider;
	int status;
	const char *body;
	int want;
	const char *msg;
} cases[] = {
	{ "hetzner", 401, "{\"error\":{\"code\":\"unauthorized\",\"message\":\"unable to authenticate\",\"details\":{}}}",
	  400, "hetzner: token refused (401 Unauthorized: unable to authenticate)" },
	{ "e2b", 401, "{\"code\":401,\"message\":\"Invalid API key\"}", 400,
	  "e2b: token refused (401 Unauthorized: Invalid API key)" },
	{ "daytona", 401, "{\"statusCode\":401,\"message\":\"Invalid API key\",\"error\":\"Unauthorized\"}", 400,
	  "daytona: token refused (401 Unauthorized: Invalid API key)" },
	{ "daytona", 403, "{\"statusCode\":403,\"error\":\"Forbidden\"}", 400,
	  "daytona: token refused (403 Forbidden: Forbidden)" },
	{ "e2b", 401, "", 400, "e2b: token refused (401 Unauthorized)" },
	{ "e2b", 401, "<html>nope</html>", 400, "e2b: token refused (401 Unauthorized)" },
	{ "e2b", 401, "{\"message\":\"\"}", 400, "e2b: token refused (401 Unauthorized)" },
	{ "e2b", 429, "{\"code\":429,\"message\":\"Rate limit exceeded\"}", 502,
	  "e2b: cannot check the token: GET u answered 429 Too Many Requests: Rate limit exceeded" },
	{ "hetzner", 503, "{\"error\":{\"code\":\"unavailable\",\"message\":\"service unavailable\"}}", 502,
	  "hetzner: cannot check the token: GET u answered 503 Service Unavailable: service unavailable" },
	{ "daytona", 404, "{\"statusCode\":404,\"message\":\"Cannot GET /sandbox\",\"error\":\"Not Found\"}", 502,
	  "daytona: cannot check the token: GET u answered 404 Not Found: Cannot GET /sandbox" },
	{ "daytona", 500, "", 502, "daytona: cannot check the token: GET u answered 500 Internal Server Error" },
	{ "e2b", 401, "{\"message\":\"bad\\nkey\\u0007!\"}", 400, "e2b: token refused (401 Unauthorized: bad key !)" },
	{ "prime", 401, "{\"detail\":\"Invalid API key\"}", 400, "prime: token refused (401 Unauthorized: Invalid API key)" },
	{ "prime", 422, "{\"detail\":[{\"loc\":[\"query\"],\"msg\":\"bad\"}]}", 502,
	  "prime: cannot check the token: GET u answered 422 Unprocessable Content" },
};

int main(void)
{
	char out[ERR_MSG_MAX], *long_msg;
	size_t n;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t len = strlen(cases[i].body);
		char *body = malloc(len ? len : 1);

		memcpy(body, cases[i].body, len);
		is_int(cp_token_verdict(cases[i].provider, "GET u", cases[i].status, body, len, out, sizeof(out)),
		       cases[i].want, cases[i].msg);
		is_str(out, cases[i].msg, "  and its message");
		free(body);
	}
	/* A provider's message is cut, never our buffer overrun. */
	n = 4000;
	long_msg = malloc(n + 32);
	memcpy(long_msg, "{\"message\":\"", 12);
	memset(long_msg + 12, 'x', n);
	memcpy(long_msg + 12 + n, "\"}", 2);
	is_int(cp_token_verdict("e2b", "GET u", 401, long_msg, n + 14, out, sizeof(out)), 400, "a long message");
	ok(strlen(out) < 300 && strncmp(out, "e2b: token refused (401 Unauthorized: xxx", 41) == 0,
	   "is cut to fit (%zu bytes)", strlen(out));
	free(long_msg);
	return tap_done();
}
