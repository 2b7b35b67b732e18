/* Unit tests: a service's build: into the Spec's build object (build.c):
 * the string and map forms, args as a map or a list, image: beside build:
 * as the tag, and each refusal with its message. */
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "json/json.h"
#include "spec/spec.h"
#include "tap.h"

struct build_case {
	const char *svc;	/* the service's YAML (flow map) */
	const char *want;	/* the Spec service's build and image, as JSON; NULL: refused */
	const char *error;	/* the refusal */
	const char *name;
};

static const struct build_case cases[] = {
	{ "{build: ./app}",
	  "{\"image\":\"\",\"build\":{\"context\":\"./app\",\"dockerfile\":\"Dockerfile\",\"args\":{},\"target\":\"\"}}",
	  NULL, "a string is the context" },
	{ "{build: {context: app, dockerfile: docker/Dockerfile.dev, target: test, args: {A: 1, B: x}}}",
	  "{\"image\":\"\",\"build\":{\"context\":\"app\",\"dockerfile\":\"docker/Dockerfile.dev\","
	  "\"args\":{\"A\":\"1\",\"B\":\"x\"},\"target\":\"test\"}}",
	  NULL, "a map with every key" },
	{ "{build: {context: ., args: [\"A=1\", \"B=\"]}}",
	  "{\"image\":\"\",\"build\":{\"context\":\".\",\"dockerfile\":\"Dockerfile\",\"args\":{\"A\":\"1\",\"B\":\"\"},"
	  "\"target\":\"\"}}",
	  NULL, "args as a list of KEY=VALUE" },
	{ "{build: {dockerfile: Containerfile}}",
	  "{\"image\":\"\",\"build\":{\"context\":\".\",\"dockerfile\":\"Containerfile\",\"args\":{},\"target\":\"\"}}",
	  NULL, "no context is the compose file's directory" },
	{ "{image: my/app:dev, build: ./app}",
	  "{\"image\":\"my/app:dev\",\"build\":{\"context\":\"./app\",\"dockerfile\":\"Dockerfile\",\"args\":{},"
	  "\"target\":\"\"}}",
	  NULL, "image beside build names the built image" },
	{ "{build: \"https://github.com/x/y.git\"}", NULL,
	  "compose: service \"app\" build.context \"https://github.com/x/y.git\" is a URL; only a local directory is "
	  "supported (it is packed and sent with the deploy)",
	  "a URL context is refused" },
	{ "{build: {context: ., dockerfile: ../Dockerfile}}", NULL,
	  "compose: service \"app\" build.dockerfile \"../Dockerfile\" must be a relative path inside the context "
	  "(only the context is sent)",
	  "a Dockerfile outside the context is refused" },
	{ "{build: {context: ., dockerfile: /abs/Dockerfile}}", NULL,
	  "compose: service \"app\" build.dockerfile \"/abs/Dockerfile\" must be a relative path inside the context "
	  "(only the context is sent)",
	  "an absolute Dockerfile is refused" },
	{ "{build: {context: ., args: [TOKEN]}}", NULL,
	  "compose: service \"app\" build.args \"TOKEN\" needs a value (the deploying shell's environment is not "
	  "passed in)",
	  "an arg from the shell (list) is refused" },
	{ "{build: {context: ., args: {TOKEN: null}}}", NULL,
	  "compose: service \"app\" build.args \"TOKEN\" needs a value (the deploying shell's environment is not "
	  "passed in)",
	  "an arg from the shell (map) is refused" },
	{ "{build: {context: ., args: 5}}", NULL,
	  "compose: service \"app\" build.args must be a map or a list of KEY=VALUE", "args of another type" },
	{ "{build: [a]}", NULL, "compose: service \"app\" build must be a directory or a map with context",
	  "a list is refused" },
	{ "{build: {context: [a]}}", NULL, "compose: service \"app\" build.context must be a string of at most 4095 bytes",
	  "a context that is not a string" },
	{ "{build: {dockerfile_inline: \"FROM x\"}}", NULL,
	  "compose: service \"app\" build.dockerfile_inline is not supported; put the Dockerfile in the context",
	  "dockerfile_inline is refused" },
	{ "{user: \"1000\"}", NULL,
	  "compose: service \"app\" has no image and nothing to build (set image: or build:)", "neither image nor build" },
};

static void test_cases(void)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct build_case *c = &cases[i];
		struct buf y = BUF_INIT;
		struct json *spec = NULL, *want = NULL, *got;
		const struct json *svc;
		struct err e = { "", 0 };
		int rc;

		buf_addf(&y, "services:\n  app: %s\n", c->svc);
		rc = spec_parse_compose(y.data, y.len, &spec, &e);
		if (!c->want) {
			ok(rc == -1, "%s", c->name);
			is_str(e.msg, c->error, "  with the message");
		} else if (ok(rc == 0, "%s", c->name)) {
			svc = spec_service(spec, "app");
			got = json_new_object();
			json_object_set_str(got, "image", json_get_str(svc, "image"));
			json_object_set(got, "build", json_dup(json_get(svc, "build")));
			if (json_parse(c->want, strlen(c->want), NULL, &want, &e) < 0)
				tap_diag("bad JSON in a case: %s", e.msg);
			if (!ok(json_equal(got, want), "  to %s", c->want)) {
				char *s = json_to_string(got, 0);

				tap_diag("got %s", s);
				free(s);
			}
			json_free(got);
			json_free(want);
		} else {
			tap_diag("%s", e.msg);
		}
		json_free(spec);
		buf_release(&y);
	}
}

/* A service with only an image has no build object. */
static void test_image_only(void)
{
	static const char y[] = "services:\n  app: {image: a}\n";
	struct json *spec = NULL;
	struct err e = { "", 0 };

	if (ok(spec_parse_compose(y, strlen(y), &spec, &e) == 0, "an image-only service parses"))
		ok(!json_get(spec_service(spec, "app"), "build"), "  and has no build");
	json_free(spec);
}

/* build's own keys: the four read; the builder's tuning warned as ignored;
 * a typo named with the key it is near. */
static void test_warnings(void)
{
	static const char y[] = "services:\n  app:\n    build: {context: ., cache_from: [x], targte: t}\n";
	static const char want[] = "[\"services.app.build.cache_from: ignored by denv\","
				   "\"services.app.build.targte: unknown key (did you mean target?)\"]";
	struct json *spec = NULL, *w = NULL;
	struct err e = { "", 0 };

	if (ok(spec_parse_compose(y, strlen(y), &spec, &e) == 0, "a build map with extra keys parses")) {
		(void)json_parse(want, strlen(want), NULL, &w, &e);
		if (!ok(json_equal(json_get(spec, "warnings"), w), "  warnings name the build keys denv ignores")) {
			char *s = json_to_string(json_get(spec, "warnings"), 0);

			tap_diag("got %s", s);
			free(s);
		}
	}
	json_free(w);
	json_free(spec);
}

int main(void)
{
	test_cases();
	test_image_only();
	test_warnings();
	return tap_done();
}
