/*
 * Unit tests: ready.c, denvd's own readiness tests. Which healthchecks are
 * a database's stock one (and so answered by the database itself) and
 * which stay an exec; the PostgreSQL startup packet byte for byte; the
 * first answers of PostgreSQL and Redis, whole and cut short at every
 * byte (each in an exact-size allocation); the back-off.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sidecar/sidecar.h"
#include "tap.h"

static const struct {
	const char *svc;	/* the Spec's service, JSON */
	bool exec;
	enum rd_native native;
	int port;
	const char *user;
} plans[] = {
	{ "{\"name\":\"db\"}", false, RD_NONE, 0, "" },
	{ "{\"name\":\"db\",\"health\":{\"test\":[\"CMD-SHELL\",\"pg_isready -U postgres\"]}}", true, RD_POSTGRES, 5432, "postgres" },
	{ "{\"name\":\"db\",\"health\":{\"test\":[\"CMD\",\"pg_isready\"]}}", true, RD_POSTGRES, 5432, "postgres" },
	{ "{\"name\":\"db\",\"health\":{\"test\":[\"CMD\",\"/usr/bin/pg_isready\",\"-p\",\"5433\",\"-U\",\"app\",\"-q\"]}}", true, RD_POSTGRES, 5433, "app" },
	{ "{\"name\":\"db\",\"health\":{\"test\":[\"CMD-SHELL\",\"pg_isready -h db -d shop -t 3\"]}}", true, RD_POSTGRES, 5432, "postgres" },
	{ "{\"name\":\"db\",\"health\":{\"test\":[\"CMD-SHELL\",\"pg_isready -h other\"]}}", true, RD_NONE, 0, "" },
	{ "{\"name\":\"db\",\"health\":{\"test\":[\"CMD-SHELL\",\"pg_isready && psql -c 'select 1'\"]}}", true, RD_NONE, 0, "" },
	{ "{\"name\":\"db\",\"health\":{\"test\":[\"CMD-SHELL\",\"pg_isready -U $USER\"]}}", true, RD_NONE, 0, "" },
	{ "{\"name\":\"db\",\"health\":{\"test\":[\"CMD-SHELL\",\"pg_isready --bogus\"]}}", true, RD_NONE, 0, "" },
	{ "{\"name\":\"db\",\"health\":{\"test\":[\"CMD-SHELL\",\"pg_isready -p 99999\"]}}", true, RD_NONE, 0, "" },
	{ "{\"name\":\"db\",\"health\":{\"test\":[\"CMD-SHELL\",\"pg_isready -U\"]}}", true, RD_NONE, 0, "" },
	{ "{\"name\":\"c\",\"health\":{\"test\":[\"CMD\",\"redis-cli\",\"ping\"]}}", true, RD_REDIS, 6379, "" },
	{ "{\"name\":\"c\",\"health\":{\"test\":[\"CMD-SHELL\",\"redis-cli -h c -p 7000 -a s3 --no-auth-warning PING\"]}}", true, RD_REDIS, 7000, "" },
	{ "{\"name\":\"c\",\"health\":{\"test\":[\"CMD\",\"redis-cli\",\"get\",\"k\"]}}", true, RD_NONE, 0, "" },
	{ "{\"name\":\"c\",\"health\":{\"test\":[\"CMD\",\"redis-cli\",\"-n\",\"2\",\"ping\"]}}", true, RD_NONE, 0, "" },
	{ "{\"name\":\"c\",\"health\":{\"test\":[\"CMD-SHELL\",\"curl -f http://localhost/\"]}}", true, RD_NONE, 0, "" },
};

/* Copy a into an allocation of exactly n bytes so ASan sees any over-read. */
static int pg_at(const uint8_t *a, size_t n)
{
	uint8_t *p = malloc(n ? n : 1);
	int rc;

	memcpy(p, a, n);
	rc = rd_pg_answer(p, n);
	free(p);
	return rc;
}

static int redis_at(const char *a, size_t n)
{
	char *p = malloc(n ? n : 1);
	int rc;

	memcpy(p, a, n);
	rc = rd_redis_answer(p, n);
	free(p);
	return rc;
}

/* An ErrorResponse with severity S and the given SQLSTATE. */
static size_t pg_error(uint8_t *out, const char *code)
{
	size_t n = 5;
	const char *fields[] = { "SFATAL", "C", "Mthe database system is starting up" };

	for (size_t i = 0; i < 3; i++) {
		size_t l = strlen(fields[i]);

		memcpy(out + n, fields[i], l);
		n += l;
		if (i == 1) {
			memcpy(out + n, code, strlen(code));
			n += strlen(code);
		}
		out[n++] = 0;
	}
	out[n++] = 0;
	out[0] = 'E';
	out[1] = out[2] = 0;
	out[3] = (uint8_t)((n - 1) >> 8);
	out[4] = (uint8_t)(n - 1);
	return n;
}

static void test_plans(void)
{
	for (size_t i = 0; i < sizeof(plans) / sizeof(plans[0]); i++) {
		struct json *svc = NULL;
		struct rd_plan p;
		struct err e;

		if (!ok(json_parse(plans[i].svc, strlen(plans[i].svc), NULL, &svc, &e) == 0, "case %zu parses", i))
			continue;
		rd_plan_of(svc, &p);
		ok(p.exec == plans[i].exec && p.native == plans[i].native, "%s: exec %d native %d", plans[i].svc, p.exec,
		   p.native);
		if (p.native != RD_NONE)
			ok(p.port == plans[i].port && (p.native != RD_POSTGRES || !strcmp(p.user, plans[i].user)),
			   "%s: port %d user %s", plans[i].svc, p.port, p.user);
		json_free(svc);
	}
}

static void test_startup(void)
{
	static const uint8_t want[] = { 0, 0, 0, 35, 0, 3, 0, 0, 'u', 's', 'e', 'r', 0, 'p', 'g', 0,
					'd', 'a', 't', 'a', 'b', 'a', 's', 'e', 0, 'p', 'o', 's', 't', 'g', 'r',
					'e', 's', 0, 0 };
	uint8_t out[64];
	size_t n = rd_pg_startup("pg", out, sizeof(out));

	is_int(n, 35, "startup packet for user pg is 35 bytes");
	ok(n == 35 && memcmp(out, want, 35) == 0, "startup packet bytes");
	is_int(rd_pg_startup("pg", out, 34), 0, "a short buffer gives 0");
	is_int(rd_pg_startup("", out, sizeof(out)), 0, "no user gives 0");
}

static void test_answers(void)
{
	static const uint8_t auth[] = { 'R', 0, 0, 0, 12, 0, 0, 0, 5, 1, 2, 3, 4 };
	uint8_t starting[128], denied[128];
	size_t ns = pg_error(starting, "57P03"), nd = pg_error(denied, "28P01");
	bool cut = true;

	is_int(pg_at(auth, sizeof(auth)), RD_READY, "an authentication request: ready");
	is_int(pg_at(auth, 1), RD_READY, "its first byte is enough");
	is_int(pg_at(starting, ns), RD_NOT_YET, "57P03: starting up");
	is_int(pg_at(denied, nd), RD_READY, "28P01 (bad password): the server accepts connections");
	for (size_t k = 0; k < ns; k++)
		cut &= pg_at(starting, k) == RD_MORE;
	ok(cut, "57P03 cut at every byte needs more");
	is_int(pg_at((const uint8_t *)"HTTP/1.1", 8), RD_BAD, "not PostgreSQL");
	{
		uint8_t big[] = { 'E', 0, 1, 0, 0 };

		is_int(pg_at(big, sizeof(big)), RD_BAD, "an error longer than RD_ANSWER_MAX is refused");
	}
	is_int(redis_at("+PONG\r\n", 7), RD_READY, "+PONG: ready");
	is_int(redis_at("-LOADING Redis is loading the dataset in memory\r\n", 49), RD_NOT_YET, "LOADING: not yet");
	is_int(redis_at("-BUSY running a script\r\n", 24), RD_NOT_YET, "BUSY: not yet");
	is_int(redis_at("-NOAUTH Authentication required.\r\n", 34), RD_READY, "NOAUTH: the server answers");
	is_int(redis_at("+PON", 4), RD_MORE, "a cut line needs more");
	is_int(redis_at("HTTP/1.1 200\r\n", 14), RD_BAD, "not Redis");
}

static void test_gaps(void)
{
	int64_t g = RD_GAP_FIRST_MS, sum = 0;
	int steps = 0;

	ok(RD_GAP_FIRST_MS <= 20 && RD_GAP_EXEC_FIRST_MS <= 20, "first tries within 20 ms");
	while (g < RD_GAP_NATIVE_MAX_MS && steps < 100) {
		int64_t next = rd_gap_next(g, RD_GAP_NATIVE_MAX_MS);

		if (next <= g)
			break;
		sum += g;
		g = next;
		steps++;
	}
	is_int(g, RD_GAP_NATIVE_MAX_MS, "the back-off grows to its cap");
	ok(steps < 10, "in %d steps (%lld ms)", steps, (long long)sum);
	is_int(rd_gap_next(RD_GAP_NATIVE_MAX_MS, RD_GAP_NATIVE_MAX_MS), RD_GAP_NATIVE_MAX_MS, "and stays there");
	is_int(rd_gap_next(1, 100), 2, "a gap of 1 still grows");
}

int main(void)
{
	test_plans();
	test_startup();
	test_answers();
	test_gaps();
	return tap_done();
}
