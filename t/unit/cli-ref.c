/* Unit tests: bare environment names (cli_ref_is_id, cli_ref_pick). */
#include <stdio.h>
#include <string.h>

#include "base/str.h"
#include "cli/cli.h"
#include "json/json.h"
#include "tap.h"

/* Rows as cli_resolve_env builds them: an environment plus its project's name. */
static struct json *envs_of(const char *text)
{
	struct json *doc = NULL;
	struct err e;

	if (json_parse(text, strlen(text), NULL, &doc, &e) < 0)
		tap_diag("bad fixture: %s", e.msg);
	return doc;
}

static void test_is_id(void)
{
	ok(cli_ref_is_id("env_01ABC"), "env_... is an id");
	ok(!cli_ref_is_id("alpha"), "alpha is a bare name");
	ok(!cli_ref_is_id("environment"), "a name that starts like env is a name");
}

static void test_unique(void)
{
	struct json *envs = envs_of("[{\"ID\":\"env_1\",\"Name\":\"alpha\",\"project\":\"a\",\"Status\":\"running\"},"
				    "{\"ID\":\"env_2\",\"Name\":\"beta\",\"project\":\"a\",\"Status\":\"running\"},"
				    "{\"ID\":\"env_3\",\"Name\":\"alpha\",\"project\":\"b\",\"Status\":\"destroyed\"},"
				    "{\"ID\":\"env_4\",\"Name\":\"gone\",\"project\":\"b\",\"Status\":\"destroyed\"}]");
	char id[CLI_ID_MAX] = "";
	struct err e;

	err_clear(&e);
	ok(cli_ref_pick("beta", envs, id, sizeof(id), &e) == 0 && str_eq(id, "env_2"), "unique name: its id");
	ok(cli_ref_pick("alpha", envs, id, sizeof(id), &e) == 0 && str_eq(id, "env_1"),
	   "a destroyed namesake does not make a live one ambiguous");
	ok(cli_ref_pick("gone", envs, id, sizeof(id), &e) == 0 && str_eq(id, "env_4"),
	   "only a destroyed one: it is still the answer");
	json_free(envs);
}

static void test_ambiguous(void)
{
	struct json *envs = envs_of("[{\"ID\":\"env_1\",\"Name\":\"alpha\",\"project\":\"a\"},"
				    "{\"ID\":\"env_2\",\"Name\":\"beta\",\"project\":\"a\"},"
				    "{\"ID\":\"env_3\",\"Name\":\"alpha\",\"project\":\"b\"}]");
	char id[CLI_ID_MAX] = "";
	struct err e;

	err_clear(&e);
	ok(cli_ref_pick("alpha", envs, id, sizeof(id), &e) < 0, "two projects with an alpha: refused");
	is_str(e.msg, "environment \"alpha\" is in more than one project; use <project>/<env>: a/alpha, b/alpha",
	       "the message names both");
	json_free(envs);
}

static void test_unknown(void)
{
	struct buf text = BUF_INIT;
	struct json *envs, *none = envs_of("[]");
	char id[CLI_ID_MAX] = "";
	struct err e;

	buf_adds(&text, "[");
	for (int i = 0; i < CLI_CANDIDATES_MAX + 3; i++)
		buf_addf(&text, "%s{\"ID\":\"env_%d\",\"Name\":\"e%d\",\"project\":\"p\"}", i ? "," : "", i, i);
	buf_adds(&text, "]");
	envs = envs_of(text.data);
	err_clear(&e);
	ok(cli_ref_pick("nope", envs, id, sizeof(id), &e) < 0, "unknown name: refused");
	ok(str_has_prefix(e.msg, "no environment named \"nope\"; use <project>/<env> or an id (env_...); there are: "
				 "p/e0, p/e1, "),
	   "says what to use and lists candidates (%s)", e.msg);
	ok(strstr(e.msg, "p/e7 (and 3 more)") && !strstr(e.msg, "p/e8"), "at most %d listed, then a count",
	   CLI_CANDIDATES_MAX);
	ok(cli_ref_pick("nope", none, id, sizeof(id), &e) < 0 && strstr(e.msg, "this team has none"),
	   "no environments at all (%s)", e.msg);
	json_free(envs);
	json_free(none);
	buf_release(&text);
}

int main(void)
{
	test_is_id();
	test_unique();
	test_ambiguous();
	test_unknown();
	return tap_done();
}
