/* Unit tests: what denv-cp's GitHub sign-in takes from GitHub's answers
 * (cp/auth_github.c): the code exchange, GET /user, GET /user/emails, and
 * where a sign-in may return to. Bodies are copied into exact-size
 * allocations (no NUL after them) so that ASan catches over-reads. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cp/cp.h"
#include "tap.h"

static char *exact(const char *s, size_t *len)
{
	*len = strlen(s);
	return *len ? memcpy(malloc(*len), s, *len) : NULL;
}

struct token_case {
	int status;
	const char *body;
	int code;		/* 0: accepted */
	const char *want;	/* the token, or a piece of the message */
};

static const struct token_case token_cases[] = {
	{ 200, "{\"access_token\":\"gho_abc123\",\"token_type\":\"bearer\",\"scope\":\"read:user,user:email\"}", 0,
	  "gho_abc123" },
	{ 200, "{\"error\":\"bad_verification_code\",\"error_description\":\"The code passed is incorrect or expired.\","
	       "\"error_uri\":\"https://docs.github.com/x\"}",
	  400, "GitHub refused the sign-in: The code passed is incorrect or expired. (bad_verification_code)" },
	{ 200, "{\"error\":\"incorrect_client_credentials\",\"error_description\":\"The client_id and/or client_secret "
	       "passed are incorrect.\"}",
	  502, "(incorrect_client_credentials)" },
	{ 200, "{\"error\":\"redirect_uri_mismatch\"}", 502, "GitHub refused the sign-in: redirect_uri_mismatch" },
	{ 200, "access_token=gho_x&scope=&token_type=bearer", 502, "not JSON" },	/* no Accept: JSON */
	{ 200, "", 502, "not JSON" },
	{ 200, "[]", 502, "not JSON" },
	{ 200, "{\"token_type\":\"bearer\"}", 502, "no usable access_token" },
	{ 200, "{\"access_token\":\"\"}", 502, "no usable access_token" },
	{ 200, "{\"access_token\":\"gho_a\\r\\nX-Evil: 1\"}", 502, "no usable access_token" },	/* header injection */
	{ 200, "{\"access_token\":\"gho a\"}", 502, "no usable access_token" },
	{ 200, "{\"access_token\":42}", 502, "no usable access_token" },
	{ 404, "{\"message\":\"Not Found\"}", 502, "HTTP 404 to the code exchange: Not Found" },
	{ 500, "<html>oops</html>", 502, "HTTP 500 to the code exchange: no message" },
};

static void test_token(void)
{
	char tok[CP_GH_TOKEN_MAX], big[CP_GH_TOKEN_MAX + 64], *body;
	struct err e;
	size_t len;
	int rc;

	for (size_t i = 0; i < sizeof(token_cases) / sizeof(token_cases[0]); i++) {
		const struct token_case *c = &token_cases[i];

		body = exact(c->body, &len);
		memset(&e, 0, sizeof(e));
		rc = cp_gh_token_answer(c->status, body, len, tok, &e);
		if (c->code == 0)
			ok(rc == 0 && strcmp(tok, c->want) == 0, "token case %zu: accepted (%s)", i, rc ? e.msg : tok);
		else
			ok(rc < 0 && e.code == c->code && strstr(e.msg, c->want), "token case %zu: %d \"%s\"", i, e.code,
			   e.msg);
		free(body);
	}
	/* A token as long as the bound is refused, one shorter taken. */
	for (int n = CP_GH_TOKEN_MAX - 1; n <= CP_GH_TOKEN_MAX; n++) {
		char t[CP_GH_TOKEN_MAX + 1];

		memset(t, 'a', (size_t)n);
		t[n] = '\0';
		snprintf(big, sizeof(big), "{\"access_token\":\"%s\"}", t);
		body = exact(big, &len);
		rc = cp_gh_token_answer(200, body, len, tok, &e);
		ok(n < CP_GH_TOKEN_MAX ? rc == 0 && strlen(tok) == (size_t)n : rc < 0,
		   "a token of %d bytes is %s", n, n < CP_GH_TOKEN_MAX ? "taken" : "refused");
		free(body);
	}
}

struct user_case {
	int status;
	const char *body;
	int fails;
	const char *id, *login, *name, *email;
};

static const struct user_case user_cases[] = {
	{ 200, "{\"login\":\"octocat\",\"id\":583231,\"name\":\"The Octocat\",\"email\":\"octo@example.com\"}", 0,
	  "583231", "octocat", "The Octocat", "octo@example.com" },
	{ 200, "{\"login\":\"octo-cat\",\"id\":1,\"name\":null,\"email\":null}", 0, "1", "octo-cat", "", "" },
	{ 200, "{\"login\":\"a\",\"id\":2,\"email\":\"not an address\"}", 0, "2", "a", "", "" },
	{ 200, "{\"login\":\"a\",\"id\":\"2\"}", 1, NULL, NULL, NULL, NULL },		/* id as a string */
	{ 200, "{\"login\":\"a\",\"id\":0}", 1, NULL, NULL, NULL, NULL },
	{ 200, "{\"login\":\"a\",\"id\":1.5}", 1, NULL, NULL, NULL, NULL },
	{ 200, "{\"id\":3}", 1, NULL, NULL, NULL, NULL },
	{ 200, "{\"login\":\"<script>\",\"id\":3}", 1, NULL, NULL, NULL, NULL },	/* not a login */
	{ 200, "{\"login\":\"a234567890123456789012345678901234567890\",\"id\":3}", 1, NULL, NULL, NULL, NULL },
	{ 401, "{\"message\":\"Bad credentials\",\"documentation_url\":\"https://docs.github.com/rest\"}", 1, NULL,
	  NULL, NULL, NULL },
	{ 200, "nonsense", 1, NULL, NULL, NULL, NULL },
};

static void test_user(void)
{
	struct cp_gh_user u;
	struct err e;
	size_t len;
	char *body;
	int rc;

	for (size_t i = 0; i < sizeof(user_cases) / sizeof(user_cases[0]); i++) {
		const struct user_case *c = &user_cases[i];

		body = exact(c->body, &len);
		rc = cp_gh_user_answer(c->status, body, len, &u, &e);
		if (c->fails)
			ok(rc < 0 && e.code == 502, "user case %zu refused: %s", i, rc < 0 ? e.msg : u.login);
		else
			ok(rc == 0 && !strcmp(u.id, c->id) && !strcmp(u.login, c->login) && !strcmp(u.name, c->name) &&
				   !strcmp(u.email, c->email),
			   "user case %zu: %s %s \"%s\" \"%s\"", i, u.id, u.login, u.name, u.email);
		free(body);
	}
	body = exact("{\"message\":\"Bad credentials\"}", &len);
	cp_gh_user_answer(401, body, len, &u, &e);
	ok(strstr(e.msg, "HTTP 401 to GET /user: Bad credentials") != NULL, "a 401 says GitHub's words: %s", e.msg);
	free(body);
}

struct email_case {
	int status;
	const char *body;
	const char *want;
};

static const struct email_case email_cases[] = {
	{ 200, "[{\"email\":\"a@x.example\",\"primary\":false,\"verified\":true},"
	       "{\"email\":\"b@x.example\",\"primary\":true,\"verified\":true,\"visibility\":\"private\"}]",
	  "b@x.example" },		/* the primary wins */
	{ 200, "[{\"email\":\"p@x.example\",\"primary\":true,\"verified\":false},"
	       "{\"email\":\"v@x.example\",\"primary\":false,\"verified\":true}]",
	  "v@x.example" },		/* an unverified primary does not count */
	{ 200, "[{\"email\":\"u@x.example\",\"primary\":true,\"verified\":false}]", "" },
	{ 200, "[{\"email\":\"bad address\",\"primary\":true,\"verified\":true}]", "" },
	{ 200, "[{\"primary\":true,\"verified\":true}]", "" },
	{ 200, "{\"email\":\"a@x.example\"}", "" },
	{ 200, "[]", "" },
	{ 200, "", "" },
	{ 404, "{\"message\":\"Not Found\"}", "" },	/* no user:email scope */
	{ 403, "[{\"email\":\"a@x.example\",\"primary\":true,\"verified\":true}]", "" },
};

static void test_emails(void)
{
	char email[CP_EMAIL_MAX + 1], *body;
	size_t len;

	for (size_t i = 0; i < sizeof(email_cases) / sizeof(email_cases[0]); i++) {
		body = exact(email_cases[i].body, &len);
		cp_gh_email_pick(email_cases[i].status, body, len, email);
		ok(strcmp(email, email_cases[i].want) == 0, "emails case %zu: \"%s\"", i, email);
		free(body);
	}
}

static void test_return(void)
{
	struct cp cp;

	memset(&cp, 0, sizeof(cp));
	cp.cfg.console_url = "https://console.example";
	ok(cp_gh_return_allowed(&cp, "/app/device/?code=BCDF-GHJK"), "a path of this server");
	ok(!cp_gh_return_allowed(&cp, "//evil.example/"), "not a scheme-relative URL");
	ok(!cp_gh_return_allowed(&cp, "/\\evil.example/"), "not a backslash trick");
	ok(cp_gh_return_allowed(&cp, "https://console.example/app/"), "the console");
	ok(!cp_gh_return_allowed(&cp, "https://console.example.evil/app/"), "not a host that starts like it");
	ok(cp_gh_return_allowed(&cp, "http://localhost:3100/app/"), "a loopback URL");
	ok(!cp_gh_return_allowed(&cp, "http://localhost.evil/"), "not a host that starts like localhost");
	ok(!cp_gh_return_allowed(&cp, "https://evil.example/"), "not another site");
	ok(cp_web_is_page("/app/device/") && cp_web_is_page("/app/device/?code=bcdf-ghjk"), "the device page");
	ok(!cp_web_is_page("/app/device/?code=\"><script>") && !cp_web_is_page("/app/device/x") &&
		   !cp_web_is_page("/app/") && !cp_web_is_page(NULL),
	   "nothing else counts as the device page");
}

int main(void)
{
	test_token();
	test_user();
	test_emails();
	test_return();
	return tap_done();
}
