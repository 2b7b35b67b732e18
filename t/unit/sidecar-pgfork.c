/*
 * Unit tests: pgfork.c. PG_VERSION's text to a major version; which
 * commands are PostgreSQL's server; and which services of a fork get the
 * syncfs setting: only "postgres" with a data directory in one of its named
 * volumes (default PGDATA, a PGDATA below the mount, :ro kept apart) saying
 * 14 or later; never a bind mount, an old or missing PG_VERSION, or another
 * command.
 */
#include <stdio.h>
#include <string.h>

#include "base/fs.h"
#include "sidecar/sidecar.h"
#include "tap.h"

static void put(const char *dir, const char *rel, const char *text)
{
	char path[4096], parent[4096];
	struct err e;

	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	snprintf(parent, sizeof(parent), "%s", path);
	*strrchr(parent, '/') = '\0';
	if (fs_mkdir_p(parent, 0700, &e) < 0 || fs_write_atomic(path, text, strlen(text), 0600, &e) < 0)
		tap_diag("put %s: %s", path, e.msg);
}

static const struct {
	const char *svc;
	bool stamped;
} cases[] = {
	{ "{\"name\":\"a\",\"command\":[\"postgres\"],\"volumes\":[\"pg15:/var/lib/postgresql/data\"]}", true },
	{ "{\"name\":\"b\",\"command\":[\"/usr/lib/postgresql/15/bin/postgres\",\"-c\",\"x=1\"],\"volumes\":[\"pg15:/var/lib/postgresql/data/\"]}", true },
	{ "{\"name\":\"c\",\"command\":[\"postgres\"],\"env\":{\"PGDATA\":\"/var/lib/postgresql/data/pgdata\"},\"volumes\":[\"sub:/var/lib/postgresql/data\"]}", true },
	{ "{\"name\":\"d\",\"command\":[\"postgres\"],\"volumes\":[\"pg13:/var/lib/postgresql/data\"]}", false },
	{ "{\"name\":\"e\",\"command\":[\"postgres\"],\"volumes\":[\"empty:/var/lib/postgresql/data\"]}", false },
	{ "{\"name\":\"f\",\"command\":[\"sh\",\"-c\",\"postgres\"],\"volumes\":[\"pg15:/var/lib/postgresql/data\"]}", false },
	{ "{\"name\":\"g\",\"command\":[\"postgres\"],\"volumes\":[\"./pg15:/var/lib/postgresql/data\"]}", false },
	{ "{\"name\":\"h\",\"command\":[\"postgres\"],\"volumes\":[\"pg15:/var/lib/postgresql\"]}", false },
	{ "{\"name\":\"i\",\"command\":[\"postgres\"],\"volumes\":[\"pg15:/var/lib/postgresql/dat\"]}", false },
	{ "{\"name\":\"j\",\"command\":[\"postgres\"],\"volumes\":[\"pg15:/var/lib/postgresql/data:ro\"]}", true },
	{ "{\"name\":\"k\",\"command\":[],\"volumes\":[\"pg15:/var/lib/postgresql/data\"]}", false },
};

int main(void)
{
	const char *dir = tap_tmpdir();
	size_t n = sizeof(cases) / sizeof(cases[0]);
	struct json *order = json_new_array(), *res = json_new_object();
	const struct json *listed;
	struct err e;

	is_int(pgf_major("15\n"), 15, "15");
	is_int(pgf_major("9.6\n"), 9, "9.6 is 9");
	is_int(pgf_major("14"), 14, "14 without a newline");
	is_int(pgf_major(""), -1, "empty");
	is_int(pgf_major("x15"), -1, "not a number");
	is_int(pgf_major("15x"), -1, "trailing junk");
	put(dir, "pg15/PG_VERSION", "15\n");
	put(dir, "pg13/PG_VERSION", "13\n");
	put(dir, "sub/pgdata/PG_VERSION", "16\n");
	put(dir, "empty/.keep", "");
	for (size_t i = 0; i < n; i++) {
		struct json *s = NULL;

		if (json_parse(cases[i].svc, strlen(cases[i].svc), NULL, &s, &e) < 0) {
			ok(0, "case %zu parses: %s", i, e.msg);
			return tap_done();
		}
		json_array_push(order, s);
	}
	pgf_prepare(order, dir, res);
	listed = json_get(res, "pg_syncfs");
	for (size_t i = 0; i < n; i++) {
		const struct json *cmd = json_get(json_at(order, i), "command");
		size_t len = json_len(cmd);
		bool stamped = len >= 2 && !strcmp(json_at(cmd, len - 1)->u.str.s, PGF_SYNC_ARG) &&
			       !strcmp(json_at(cmd, len - 2)->u.str.s, "-c");
		bool in_list = false;

		for (size_t k = 0; k < json_len(listed); k++)
			in_list |= !strcmp(json_at(listed, k)->u.str.s, json_get_str(json_at(order, i), "name"));
		ok(stamped == cases[i].stamped && in_list == cases[i].stamped, "%s: %s", cases[i].svc,
		   cases[i].stamped ? "syncfs added and listed" : "left alone");
	}
	json_free(order);
	json_free(res);
	{
		struct json *none = json_new_array(), *r2 = json_new_object();

		pgf_prepare(none, dir, r2);
		ok(!json_get(r2, "pg_syncfs"), "nothing to stamp: no pg_syncfs in the result");
		json_free(none);
		json_free(r2);
	}
	return tap_done();
}
