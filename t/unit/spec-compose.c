/* Unit tests: compose + x-denv into a Spec, and every refusal the contract names. */
#include <stdlib.h>
#include <string.h>

#include "json/json.h"
#include "spec/spec.h"
#include "tap.h"

struct refusal {
	const char *yaml;
	const char *error;
};

/* Each refusal, with the exact message users see (spec/compose.md). */
static const struct refusal refusals[] = {
	{ "services: {}\n", "compose: no services" },
	{ "x-denv:\n  egress: deny\n", "compose: no services" },
	{ "services:\n  app:\n    build: .\n", "compose: service \"app\" has no image (build is not supported in v0; push an image)" },
	{ "services:\n  app:\n    image: a\n    network_mode: host\n", "compose: service \"app\" uses network_mode: host, which cannot be forked" },
	{ "services:\n  app:\n    image: a\n    privileged: true\n", "compose: service \"app\" asks for privileged or cap_add, which is refused" },
	{ "services:\n  app:\n    image: a\n    cap_add: [NET_ADMIN]\n", "compose: service \"app\" asks for privileged or cap_add, which is refused" },
	{ "services:\n  app:\n    image: a\n    volumes: [\"/srv/data:/data\"]\n", "compose: service \"app\" bind-mounts \"/srv/data\"; only named volumes are forkable" },
	{ "services:\n  app:\n    image: a\n    volumes: [\"./data:/data\"]\n", "compose: service \"app\" bind-mounts \"./data\"; only named volumes are forkable" },
	{ "services:\n  app:\n    image: a\n    volumes: [\"v:/data\"]\n", "compose: service \"app\" uses undeclared volume \"v\"" },
	{ "services:\n  app:\n    image: a\n    volumes: [v]\nvolumes: {v: {}}\n", "compose: service \"app\" volume \"v\" must be <volume>:<path>" },
	{ "x-denv:\n  egress: maybe\nservices:\n  app: {image: a}\n", "compose: x-denv.egress must be deny or allow, got \"maybe\"" },
	{ "x-denv:\n  agent: {service: app}\nservices:\n  app: {image: a}\n",
	  "compose: x-denv.agent.service \"app\" must set a non-root user (user: \"1000:1000\"); the agent is never root" },
	{ "x-denv:\n  agent: {service: app}\nservices:\n  app: {image: a, user: \"0:0\"}\n",
	  "compose: x-denv.agent.service \"app\" must set a non-root user (user: \"1000:1000\"); the agent is never root" },
	{ "x-denv:\n  agent: {service: app}\n  verifier: {image: g, service: app, command: [x]}\nservices:\n  app: {image: a, user: \"1000\"}\n",
	  "compose: x-denv.verifier needs exactly one of image or service" },
	{ "x-denv:\n  agent: {service: app}\n  verifier: {command: [x]}\nservices:\n  app: {image: a, user: \"1000\"}\n",
	  "compose: x-denv.verifier needs exactly one of image or service" },
	{ "x-denv:\n  agent: {service: app}\n  verifier: {image: g}\nservices:\n  app: {image: a, user: \"1000\"}\n",
	  "compose: x-denv.verifier.command is required" },
	{ "x-denv:\n  agent: {service: app}\n  verifier: {image: g, command: [x], collect: [answer.txt]}\nservices:\n  app: {image: a, user: \"1000\"}\n",
	  "compose: x-denv.verifier.collect path \"answer.txt\" must be absolute" },
	{ "x-denv:\n  verifier: {image: g, command: [x]}\nservices:\n  app: {image: a, user: \"1000\"}\n",
	  "compose: x-denv.verifier requires x-denv.agent.service, the service whose paths are collected" },
	{ "services:\n  app: {image: a, ports: [\"53/udp\"]}\n", "compose: service \"app\" port \"53/udp\": only tcp ports are supported" },
	{ "services:\n  app: {image: a, mem_limit: 1024k}\n", "compose: service \"app\" mem_limit \"1024k\" is below the 6 MiB minimum" },
	{ "services:\n  app: {image: a, mem_limit: lots}\n", "compose: service \"app\" mem_limit \"lots\" is not a size (use 512m, 2g or bytes)" },
	{ "services:\n  app: {image: a, pids_limit: -1}\n", "compose: service \"app\" pids_limit must be a positive number of processes" },
	{ "services:\n  app: {image: a, depends_on: [db]}\n", "compose: service \"app\" depends on unknown service \"db\"" },
	{ "services:\n  a: {image: x, depends_on: [b]}\n  b: {image: x, depends_on: [a]}\n", "compose: depends_on has a cycle through service \"a\"" },
	{ "services:\n  app: {image: a, environment: [KEY]}\n",
	  "compose: service \"app\" environment \"KEY\" needs a value (the deploying shell's environment is not passed in)" },
	{ "services:\n  app: {image: a, healthcheck: {test: [CMD, x], interval: soon}}\n",
	  "compose: service \"app\" healthcheck.interval must be a duration such as 2s" },
	{ "services:\n  app: [1, 2\n", NULL /* any YAML error, prefixed */ },
};

/* The quickstart's compose file, and the Spec we expect for it, written by hand. */
static const char quickstart_yaml[] =
	"x-denv:\n"
	"  kind: rl-environment\n"
	"  agent:\n"
	"    service: box\n"
	"  verifier:\n"
	"    image: busybox:1.36\n"
	"    command: [\"sh\", \"-c\", \"[ \\\"$(cat /submission/home/agent/answer.txt)\\\" = 42 ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\"]\n"
	"    collect: [\"/home/agent/answer.txt\"]\n"
	"services:\n"
	"  db:\n"
	"    image: postgres:16-alpine\n"
	"    environment: { POSTGRES_PASSWORD: world }\n"
	"    volumes: [\"pg:/var/lib/postgresql/data\"]\n"
	"    healthcheck: { test: [\"CMD-SHELL\", \"pg_isready -U postgres\"], interval: 2s, retries: 30 }\n"
	"  box:\n"
	"    image: python:3.12-slim\n"
	"    user: \"1000:1000\"\n"
	"    command: [\"sleep\", \"infinity\"]\n"
	"    environment: { HOME: /home/agent, PGHOST: db, PGPASSWORD: world }\n"
	"    volumes: [\"home:/home/agent\"]\n"
	"    depends_on: [db]\n"
	"    restart: always\n"
	"volumes: { pg: {}, home: {} }\n";

static const char quickstart_spec[] =
	"{\"kind\":\"rl-environment\",\"egress\":\"deny\",\"services\":["
	"{\"name\":\"box\",\"image\":\"python:3.12-slim\","
	"\"env\":{\"HOME\":\"/home/agent\",\"PGHOST\":\"db\",\"PGPASSWORD\":\"world\"},"
	"\"ports\":[],\"volumes\":[\"home:/home/agent\"],\"depends_on\":[\"db\"],"
	"\"command\":[\"sleep\",\"infinity\"],\"user\":\"1000:1000\","
	"\"resources\":{\"memory_mb\":0,\"pids\":0,\"cpus\":0}},"
	"{\"name\":\"db\",\"image\":\"postgres:16-alpine\",\"env\":{\"POSTGRES_PASSWORD\":\"world\"},"
	"\"ports\":[],\"volumes\":[\"pg:/var/lib/postgresql/data\"],"
	"\"health\":{\"test\":[\"CMD-SHELL\",\"pg_isready -U postgres\"],\"interval\":\"2s\",\"retries\":30},"
	"\"depends_on\":[],\"command\":[],\"user\":\"\","
	"\"resources\":{\"memory_mb\":0,\"pids\":0,\"cpus\":0}}],"
	"\"volumes\":[\"home\",\"pg\"],\"warm\":[],"
	"\"agent\":{\"service\":\"box\"},"
	"\"verifier\":{\"image\":\"busybox:1.36\",\"service\":\"\",\"command\":[\"sh\",\"-c\","
	"\"[ \\\"$(cat /submission/home/agent/answer.txt)\\\" = 42 ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\"],"
	"\"collect\":[\"/home/agent/answer.txt\"],\"timeout_sec\":600},"
	"\"warnings\":[\"service \\\"box\\\": key \\\"restart\\\" is ignored\"]}";

static struct json *parse_json(const char *s)
{
	struct json *v = NULL;
	struct err e;

	if (json_parse(s, strlen(s), NULL, &v, &e) < 0)
		tap_diag("bad expected JSON in test: %s", e.msg);
	return v;
}

static void test_refusals(void)
{
	for (size_t i = 0; i < sizeof(refusals) / sizeof(refusals[0]); i++) {
		const struct refusal *r = &refusals[i];
		struct json *spec = NULL;
		struct err e = { "", 0 };
		int rc = spec_parse_compose(r->yaml, strlen(r->yaml), &spec, &e);

		if (r->error) {
			ok(rc == -1 && !spec, "refused #%zu", i);
			is_str(e.msg, r->error, "  with the contract's message");
		} else {
			ok(rc == -1 && !strncmp(e.msg, "compose: ", 9) && strchr(e.msg + 9, ':'),
			   "YAML error is prefixed and located: %s", e.msg);
		}
		json_free(spec);
	}
}

static void test_quickstart(void)
{
	struct json *spec = NULL, *want = parse_json(quickstart_spec);
	struct err e = { "", 0 };
	int rc = spec_parse_compose(quickstart_yaml, strlen(quickstart_yaml), &spec, &e);

	if (!ok(rc == 0, "quickstart compose resolves")) {
		tap_diag("%s", e.msg);
	} else if (!ok(json_equal(spec, want), "quickstart spec is what we wrote by hand")) {
		char *got = json_to_string(spec, JSON_PRETTY);
		tap_diag("got: %s", got);
		free(got);
	}
	is_str(json_get_str(json_at(json_get(spec, "services"), 0), "name"), "box", "services sorted by name");
	ok(spec_service(spec, "db") && !spec_service(spec, "nope"), "spec_service finds by name");
	json_free(spec);
	json_free(want);
}

static struct json *resolve(const char *yaml)
{
	struct json *spec = NULL;
	struct err e = { "", 0 };

	if (spec_parse_compose(yaml, strlen(yaml), &spec, &e) < 0)
		tap_diag("unexpected refusal: %s", e.msg);
	return spec;
}

static void test_conversions(void)
{
	struct json *spec, *svc, *want;

	spec = resolve("x-denv:\n  egress: allow\n  warm: [psql, -f, /seed/orders.sql]\n"
		       "services:\n  web:\n    image: nginx\n    ports: [\"8080:80\", \"443/tcp\", 9000, \"127.0.0.1:1:22\", \"80\"]\n"
		       "    command: \"sleep   3600\"\n    environment: [A=1, B=x=y]\n    mem_limit: 2g\n    pids_limit: 512\n    cpus: 0.5\n");
	svc = json_at(json_get(spec, "services"), 0);
	want = parse_json("[\"80\",\"443\",\"9000\",\"22\"]");
	ok(json_equal(json_get(svc, "ports"), want), "ports reduced to container ports, /tcp dropped, deduplicated");
	json_free(want);
	want = parse_json("[\"sleep\",\"3600\"]");
	ok(json_equal(json_get(svc, "command"), want), "string command split on whitespace");
	json_free(want);
	want = parse_json("{\"A\":\"1\",\"B\":\"x=y\"}");
	ok(json_equal(json_get(svc, "env"), want), "KEY=VALUE list split at the first =");
	json_free(want);
	want = parse_json("{\"memory_mb\":2048,\"pids\":512,\"cpus\":0.5}");
	ok(json_equal(json_get(svc, "resources"), want), "caps from the shorthand keys");
	json_free(want);
	is_str(json_get_str(spec, "egress"), "allow", "egress allow");
	is_int(json_len(json_get(spec, "warm")), 3, "warm argv kept");
	json_free(spec);

	spec = resolve("services:\n  a:\n    image: x\n    mem_limit: 512m\n    deploy:\n      resources:\n        limits: {memory: 1g, cpus: \"1.5\", pids: 100}\n");
	svc = json_at(json_get(spec, "services"), 0);
	want = parse_json("{\"memory_mb\":512,\"pids\":100,\"cpus\":1.5}");
	ok(json_equal(json_get(svc, "resources"), want), "deploy.resources.limits only where the shorthand is absent");
	json_free(want);
	json_free(spec);

	spec = resolve("services:\n  a:\n    image: x\n    command: [sleep, 3600]\n    environment: {PORT: 5432, DEBUG: true}\n"
		       "    healthcheck: {test: \"redis-cli ping\"}\n    depends_on: {b: {condition: service_healthy}}\n"
		       "  b: {image: y, volumes: [\"d:/data:ro\"]}\nvolumes:\n  d:\n");
	svc = json_at(json_get(spec, "services"), 0);
	want = parse_json("[\"sleep\",\"3600\"]");
	ok(json_equal(json_get(svc, "command"), want), "numbers in a command list become strings");
	json_free(want);
	want = parse_json("{\"PORT\":\"5432\",\"DEBUG\":\"true\"}");
	ok(json_equal(json_get(svc, "env"), want), "numbers and booleans in environment become strings");
	json_free(want);
	want = parse_json("{\"test\":[\"CMD-SHELL\",\"redis-cli ping\"],\"interval\":\"\",\"retries\":0}");
	ok(json_equal(json_get(svc, "health"), want), "a string healthcheck runs through the shell");
	json_free(want);
	want = parse_json("[\"b\"]");
	ok(json_equal(json_get(svc, "depends_on"), want), "depends_on map: keys only");
	json_free(want);
	want = parse_json("[\"d:/data:ro\"]");
	ok(json_equal(json_get(json_at(json_get(spec, "services"), 1), "volumes"), want), "read-only volume kept");
	json_free(want);
	json_free(spec);
}

int main(void)
{
	test_refusals();
	test_quickstart();
	test_conversions();
	return tap_done();
}
