/* templates.c: the starting points GET /v1/templates offers. Each compose
 * text must pass our own reader without a warning; cp_templates_check proves
 * it at start-up and the integration suite deploys each one. */
#include <string.h>

#include "base/log.h"
#include "cp/cp.h"
#include "spec/spec.h"

/* An ops world: a ticket database the agent works against from a box it
 * does not own as root, graded by a separate image on a fork. warm seeds
 * the table once the database is healthy (db sorts first, so warm runs there). */
static const char ops_compose[] =
	"x-denv:\n"
	"  kind: rl-environment\n"
	"  egress: deny\n"
	"  warm: [\"psql\", \"-U\", \"postgres\", \"-c\", \"CREATE TABLE IF NOT EXISTS tickets (id serial PRIMARY KEY, title text NOT NULL, state text NOT NULL DEFAULT 'open')\"]\n"
	"  agent:\n"
	"    service: ops\n"
	"  verifier:\n"
	"    image: busybox:1.36\n"
	"    command: [\"sh\", \"-c\", \"grep -q resolved /submission/home/agent/report.txt && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\"]\n"
	"    collect: [\"/home/agent/report.txt\"]\n"
	"    timeout_sec: 300\n"
	"services:\n"
	"  db:\n"
	"    image: postgres:16-alpine\n"
	"    environment:\n"
	"      POSTGRES_PASSWORD: world\n"
	"    volumes: [\"pgdata:/var/lib/postgresql/data\"]\n"
	"    healthcheck:\n"
	"      test: [\"CMD-SHELL\", \"pg_isready -U postgres\"]\n"
	"      interval: 2s\n"
	"      retries: 30\n"
	"    mem_limit: 1g\n"
	"  ops:\n"
	"    image: python:3.12-slim\n"
	"    user: \"1000:1000\"\n"
	"    command: [\"sleep\", \"infinity\"]\n"
	"    environment:\n"
	"      HOME: /home/agent\n"
	"      PGHOST: db\n"
	"      PGUSER: postgres\n"
	"      PGPASSWORD: world\n"
	"    volumes: [\"home:/home/agent\"]\n"
	"    depends_on: [db]\n"
	"    pids_limit: 512\n"
	"volumes:\n"
	"  pgdata: {}\n"
	"  home: {}\n";

static const char *const ops_warm[] = {
	"psql", "-U", "postgres", "-c",
	"CREATE TABLE IF NOT EXISTS tickets (id serial PRIMARY KEY, title text NOT NULL, state text NOT NULL DEFAULT 'open')",
	NULL
};
static const char *const ops_requires[] = { "sidecar", NULL };

/* One long-lived box an agent runs in, with a persistent work directory.
 * Egress is allowed: an agent usually calls a model API. */
static const char agent_compose[] =
	"x-denv:\n"
	"  kind: agent\n"
	"  egress: allow\n"
	"  agent:\n"
	"    service: agent\n"
	"services:\n"
	"  agent:\n"
	"    image: python:3.12-slim\n"
	"    user: \"1000:1000\"\n"
	"    command: [\"sleep\", \"infinity\"]\n"
	"    environment:\n"
	"      HOME: /work\n"
	"    volumes: [\"work:/work\"]\n"
	"    cpus: 2\n"
	"    mem_limit: 2g\n"
	"volumes:\n"
	"  work: {}\n";

const struct cp_template cp_templates[] = {
	{ "rl-environment-ops", "rl-environment",
	  "Postgres with a ticket table, an agent box that is not root, and an image verifier that grades a report",
	  ops_requires, ops_compose, ops_warm },
	{ "agent-runtime", "agent", "A single non-root box with a persistent /work volume and egress allowed", NULL,
	  agent_compose, NULL },
};
const size_t cp_ntemplates = sizeof(cp_templates) / sizeof(cp_templates[0]);

int cp_templates_check(void)
{
	for (size_t i = 0; i < cp_ntemplates; i++) {
		struct json *spec = NULL;
		struct err e;

		if (spec_parse_compose(cp_templates[i].compose, strlen(cp_templates[i].compose), &spec, &e) < 0) {
			log_error("cp", "template %s does not pass the compose reader: %s", cp_templates[i].name, e.msg);
			return -1;
		}
		/* A starting point should not teach keys that do nothing. */
		if (json_len(json_get(spec, "warnings"))) {
			log_error("cp", "template %s has compose warnings: %s", cp_templates[i].name,
				  json_at(json_get(spec, "warnings"), 0)->u.str.s);
			json_free(spec);
			return -1;
		}
		json_free(spec);
	}
	return 0;
}
