/* Unit tests: how denv exec reads the answer (exit code, timeouts). */
#include <string.h>

#include "cli/cli.h"
#include "json/json.h"
#include "tap.h"

static int code_of(const char *text)
{
	struct json *doc = NULL;
	struct err e;
	int rc;

	if (json_parse(text, strlen(text), NULL, &doc, &e) < 0)
		return -100;
	err_clear(&e);
	rc = cli_exec_code(doc, &e);
	json_free(doc);
	return rc;
}

int main(void)
{
	static const struct {
		const char *answer;
		int code;
	} codes[] = {
		{ "{\"exit_code\":0,\"stdout\":\"\",\"stderr\":\"\"}", 0 },
		{ "{\"exit_code\":2}", 2 },
		{ "{\"exit_code\":125}", 125 },
		{ "{\"exit_code\":255}", 255 },
		{ "{\"exit_code\":-1}", -1 },
		{ "{\"exit_code\":256}", -1 },
		{ "{\"exit_code\":\"3\"}", -1 },
		{ "{\"stdout\":\"x\"}", -1 },
	};

	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
		is_int(code_of(codes[i].answer), codes[i].code, codes[i].answer);
	ok(cli_exec_timed_out(502, "env.exec: timed out after 2 s (the process was killed)"), "the host's timeout");
	ok(cli_exec_timed_out(502, "env.exec timed out after 32 s"), "the control plane's timeout");
	ok(!cli_exec_timed_out(502, "env.exec: service \"box\" is frozen by verify"), "a refusal is not a timeout");
	ok(!cli_exec_timed_out(400, "env.exec: timed out after 2 s"), "only a 502");
	ok(!cli_exec_timed_out(502, NULL), "no message");
	ok(CLI_EXEC_TIMEOUT == 124 && CLI_EXEC_FAIL == 125, "timeout(1)'s 124, docker run's 125");
	return tap_done();
}
