/* Unit tests: compose + x-denv into a Spec, and every refusal the contract names. */
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
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
	{ "services:\n  app:\n    user: \"1000\"\n", "compose: service \"app\" has no image and nothing to build (set image: or build:)" },
	{ "services:\n  app:\n    image: a\n    network_mode: host\n", "compose: service \"app\" uses network_mode: host, which cannot be forked" },
	{ "services:\n  app:\n    image: a\n    privileged: true\n", "compose: service \"app\" asks for privileged or cap_add, which is refused" },
	{ "services:\n  app:\n    image: a\n    cap_add: [NET_ADMIN]\n", "compose: service \"app\" asks for privileged or cap_add, which is refused" },
	{ "services:\n  app:\n    image: a\n    volumes: [\"/srv/data:/data\"]\n", "compose: service \"app\" bind-mounts \"/srv/data\"; only named volumes are forkable" },
	{ "services:\n  app:\n    image: a\n    volumes: [\"./data:/data\"]\n", "compose: service \"app\" bind-mounts \"./data\"; only named volumes are forkable" },
	{ "services:\n  app:\n    image: a\n    volumes: [\"v:/data\"]\n", "compose: service \"app\" uses undeclared volume \"v\"" },
	{ "services:\n  app:\n    image: a\n    volumes: [v]\nvolumes: {v: {}}\n", "compose: service \"app\" volume \"v\" must be <volume>:<path>" },
	{ "x-denv:\n  egress: maybe\nservices:\n  app: {image: a}\n", "compose: x-denv.egress must be deny or allow, got \"maybe\"" },
	{ "x-denv:\n  pool: -1\nservices:\n  app: {image: a}\n", "compose: x-denv.pool must be a whole number from 0 to 256" },
	{ "x-denv:\n  pool: 257\nservices:\n  app: {image: a}\n", "compose: x-denv.pool must be a whole number from 0 to 256" },
	{ "x-denv:\n  pool: two\nservices:\n  app: {image: a}\n", "compose: x-denv.pool must be a whole number from 0 to 256" },
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
	"\"warnings\":[\"services.box.restart: ignored by denv\"]}";

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

/* ---- warnings: keys denv does not act on (keys.c) ---- */

struct distance {
	const char *a, *b;
	size_t d;
};

static const struct distance distances[] = {
	{ "command", "command", 0 }, { "comand", "command", 1 }, { "commandd", "command", 1 },
	{ "imgae", "image", 1 },	/* a swap is one edit */
	{ "kitten", "sitting", 3 }, { "", "pid", 3 }, { "ca", "abc", 3 },	/* OSA: no edit of a swapped pair */
	{ "usr", "user", 1 }, { "x-denf", "x-denv", 1 },
	{ "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "a", SIZE_MAX },	/* 65 bytes */
};

static void test_edit_distance(void)
{
	for (size_t i = 0; i < sizeof(distances) / sizeof(distances[0]); i++) {
		const struct distance *t = &distances[i];
		is_int(spec_edit_distance(t->a, t->b) == t->d, 1, t->a);
		is_int(spec_edit_distance(t->b, t->a) == t->d, 1, "  and the other way round");
	}
}

static void test_nearest(void)
{
	static const struct spec_key keys[] = {
		{ "command", SPEC_KEY_READ, NULL }, { "user", SPEC_KEY_READ, NULL }, { "pid", SPEC_KEY_IGNORED, NULL },
		{ "pids_limit", SPEC_KEY_READ, NULL }, { "ab", SPEC_KEY_READ, NULL }, { "ac", SPEC_KEY_READ, NULL },
		{ NULL, SPEC_KEY_READ, NULL },
	};
	static const struct { const char *word, *want; } cases[] = {
		{ "comand", "command" }, { "comamnd", "command" }, { "usr", "user" }, { "pids_limt", "pids_limit" },
		{ "foo", NULL }, { "cmd", NULL },	/* two edits from "pid", but three letters allow one */ { "commmandd", "command" }, { "xxxxxxxxx", NULL }, { "a", "ab" },	/* a tie: the first */
		{ "", NULL },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *got = spec_nearest_key(cases[i].word, keys);
		if (cases[i].want)
			is_str(got ? got : "(none)", cases[i].want, cases[i].word);
		else
			ok(!got, "%s: nothing near (got %s)", cases[i].word, got ? got : "none");
	}
}

struct warned {
	const char *what, *yaml, *warnings;	/* warnings: the JSON array expected */
};

static const struct warned warned[] = {
	{ "a clean file", "services:\n  a: {image: x, command: [sleep, 1]}\nvolumes: {v: {}}\n", "[]" },
	{ "typo at the top", "services:\n  a: {image: x}\nvolume: {v: {}}\n",
	  "[\"volume: unknown key (did you mean volumes?)\"]" },
	{ "typo in a service", "services:\n  a:\n    image: x\n    comand: [sleep, 1]\n",
	  "[\"services.a.comand: unknown key (did you mean command?)\"]" },
	{ "unknown, nothing near", "services:\n  a: {image: x, frobnicate: 1}\n", "[\"services.a.frobnicate: unknown key\"]" },
	{ "typo in x-denv", "x-denv: {egres: allow}\nservices:\n  a: {image: x}\n",
	  "[\"x-denv.egres: unknown key (did you mean egress?)\"]" },
	{ "x-denv.clock is read", "x-denv: {clock: frozen}\nservices:\n  a: {image: x}\n", "[]" },
	{ "typo in x-denv.clock", "x-denv: {clock: {mode: frozen, att: x}}\nservices:\n  a: {image: x}\n",
	  "[\"x-denv.clock.att: unknown key (did you mean at?)\"]" },
	{ "typo in x-denv.verifier",
	  "x-denv:\n  agent: {service: a}\n  verifier: {image: g, command: [x], colect: [/a]}\nservices:\n  a: {image: x, user: \"1000\"}\n",
	  "[\"x-denv.verifier.colect: unknown key (did you mean collect?)\"]" },
	{ "typo in x-denv.agent", "x-denv:\n  agent: {service: a, servce: a}\nservices:\n  a: {image: x, user: \"1000\"}\n",
	  "[\"x-denv.agent.servce: unknown key (did you mean service?)\"]" },
	{ "valid Compose that denv ignores",
	  "services:\n  a:\n    image: x\n    restart: always\n    container_name: web\n    logging: {driver: none}\n"
	  "    build: .\n    healthcheck: {test: [CMD, x], timeout: 3s}\n"
	  "    deploy: {replicas: 2, resources: {limits: {memory: 1g}, reservations: {}}}\n"
	  "volumes: {v: {driver: local}}\nversion: \"3.9\"\nnetworks: {}\n",
	  "[\"version: ignored by denv (obsolete; Compose ignores it too)\","
	  "\"networks: ignored by denv (every environment gets one network of its own)\","
	  "\"services.a.restart: ignored by denv\","
	  "\"services.a.container_name: ignored by denv (every fork names its own containers)\","
	  "\"services.a.logging: ignored by denv\","
	  "\"services.a.healthcheck.timeout: ignored by denv\","
	  "\"services.a.deploy.replicas: ignored by denv\","
	  "\"services.a.deploy.resources.reservations: ignored by denv\","
	  "\"volumes.v.driver: ignored by denv\"]" },
	{ "typos deeper in a service",
	  "services:\n  a:\n    image: x\n    healthcheck: {test: [CMD, x], intervall: 2s}\n"
	  "    deploy: {resources: {limits: {memroy: 1g}}}\n",
	  "[\"services.a.healthcheck.intervall: unknown key (did you mean interval?)\","
	  "\"services.a.deploy.resources.limits.memroy: unknown key (did you mean memory?)\"]" },
	{ "extension fields are Compose's own",
	  "x-common: &c {restart: always}\nservices:\n  a: {image: x, x-note: hi, x-tty: 1}\nx-denf: {}\n",
	  "[\"x-denf: unknown key (did you mean x-denv?)\"]" },
	{ "order: services by name, keys as written",
	  "services:\n  b: {image: x, comand: 1, restart: always}\n  a: {image: x, tty: true}\n",
	  "[\"services.a.tty: ignored by denv\",\"services.b.comand: unknown key (did you mean command?)\","
	  "\"services.b.restart: ignored by denv\"]" },
	{ "a key that is not text is shown safely", "services:\n  a: {image: x, \"k\\e[31m\\nx\": 1}\n",
	  "[\"services.a.k?[31m?x: unknown key\"]" },
	{ "a NUL inside a key", "services:\n  a: {image: x, command: [a], \"tty\\0x\": 1}\n",
	  "[\"services.a.tty?x: unknown key (did you mean tty?)\"]" },
};

static void test_warnings(void)
{
	for (size_t i = 0; i < sizeof(warned) / sizeof(warned[0]); i++) {
		struct json *spec = resolve(warned[i].yaml), *want = parse_json(warned[i].warnings);
		if (!ok(spec && json_equal(json_get(spec, "warnings"), want), "warnings: %s", warned[i].what)) {
			char *got = json_to_string(json_get(spec, "warnings"), JSON_COMPACT);
			tap_diag("got: %s", got ? got : "(no spec)");
			free(got);
		}
		json_free(spec);
		json_free(want);
	}
}

/* However many keys a file has, the warnings stay within their bounds. */
static void test_warnings_bounded(void)
{
	struct buf y = BUF_INIT;
	struct json *spec, *w;
	size_t longest = 0;

	buf_adds(&y, "services:\n  a:\n    image: x\n");
	for (int i = 0; i < SPEC_MAX_WARNINGS + 8; i++)
		buf_addf(&y, "    unknown_%d: 1\n", i);
	buf_adds(&y, "    ");
	for (int i = 0; i < 3 * SPEC_WARNING_MAX; i++)
		buf_addch(&y, 'k');
	buf_adds(&y, ": 1\n");
	spec = resolve(y.data);
	w = json_get(spec, "warnings");
	is_int(json_len(w), SPEC_MAX_WARNINGS + 1, "at most SPEC_MAX_WARNINGS warnings and a count");
	is_str(json_len(w) ? json_at(w, json_len(w) - 1)->u.str.s : "", "9 more warnings not shown", "  the count");
	for (size_t i = 0; i < json_len(w); i++)
		if (json_at(w, i)->u.str.len > longest)
			longest = json_at(w, i)->u.str.len;
	ok(longest < SPEC_WARNING_MAX, "every warning is shorter than SPEC_WARNING_MAX (%zu)", longest);
	json_free(spec);
	buf_reset(&y);
	buf_adds(&y, "services:\n  a:\n    image: x\n    ");
	for (int i = 0; i < 3 * SPEC_WARNING_MAX; i++)
		buf_addch(&y, 'k');
	buf_adds(&y, ": 1\n");
	spec = resolve(y.data);
	w = json_at(json_get(spec, "warnings"), 0);
	ok(w && strstr(w->u.str.s, "kkk...: unknown key") && w->u.str.len < 100, "a long key is cut, and says so");
	json_free(spec);
	buf_release(&y);
}

/* x-denv.pool: kept as "pool" when above 0; 0 or absent leaves none, so
 * specs without it are unchanged. */
static void test_pool(void)
{
	struct json *spec = resolve("x-denv:\n  pool: 3\nservices:\n  app: {image: a}\n");

	ok(json_get_int(spec, "pool", 0) == 3, "x-denv.pool: 3 is the spec's pool");
	ok(json_len(json_get(spec, "warnings")) == 0, "pool is a known x-denv key (no warning)");
	json_free(spec);
	spec = resolve("x-denv:\n  pool: 0\nservices:\n  app: {image: a}\n");
	ok(spec && !json_get(spec, "pool"), "x-denv.pool: 0 leaves no pool");
	json_free(spec);
}

int main(void)
{
	test_refusals();
	test_quickstart();
	test_conversions();
	test_pool();
	test_edit_distance();
	test_nearest();
	test_warnings();
	test_warnings_bounded();
	return tap_done();
}
