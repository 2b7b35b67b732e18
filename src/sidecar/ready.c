/* ready.c: how denvd tells that a service is ready without waiting on
 * Docker's healthcheck interval (health.c runs the plan).
 *  - A healthcheck that is a database's stock readiness command (pg_isready,
 *    `redis-cli ping`, with only connection options) is answered by asking
 *    the database itself from inside the container's network namespace: a
 *    PostgreSQL startup packet on 127.0.0.1 (any answer but "57P03 cannot
 *    connect now" means it accepts connections, pg_isready's own rule) or a
 *    Redis PING (+PONG, or an error other than LOADING/BUSY: the server is
 *    answering, as redis-cli ping exits 0 on those). No process is spawned in
 *    the container, so it can be asked every few milliseconds.
 *  - Any other healthcheck is run through the Engine API's exec, as Docker
 *    would run it, only sooner and more often (RD_GAP_*).
 * Both back off from a short first gap. Anything this file does not know
 * leaves the service to its exec test and Docker's own health state. */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "base/str.h"
#include "sidecar/sidecar.h"

/* A CMD-SHELL string split at blanks, refused when the shell would do more
 * than run one command (quotes, pipes, expansions, redirections). */
static int split_shell(const char *s, char words[][SC_READY_WORD_MAX], size_t *n)
{
	size_t k = 0;

	if (strpbrk(s, "|&;<>()$`\\\"'*?{}[]~#\n"))
		return -1;
	while (*s) {
		size_t len = strcspn(s, " \t");

		if (len) {
			if (k == SC_READY_TOKENS_MAX || len >= SC_READY_WORD_MAX)
				return -1;
			memcpy(words[k], s, len);
			words[k++][len] = '\0';
		}
		s += len;
		s += strspn(s, " \t");
	}
	*n = k;
	return 0;
}

static size_t test_words(const struct json *test, char words[][SC_READY_WORD_MAX])
{
	size_t n = 0;

	if (json_len(test) < 2)
		return 0;
	if (str_eq(json_at(test, 0)->u.str.s, "CMD-SHELL"))
		return json_len(test) == 2 && split_shell(json_at(test, 1)->u.str.s, words, &n) == 0 ? n : 0;
	for (size_t i = 1; i < json_len(test); i++) {
		const char *w = json_at(test, i)->u.str.s;

		if (n == SC_READY_TOKENS_MAX || strlen(w) >= SC_READY_WORD_MAX)
			return 0;
		str_copy(words[n++], SC_READY_WORD_MAX, w);
	}
	return n;
}

static const char *base_name(const char *p)
{
	const char *s = strrchr(p, '/');

	return s ? s + 1 : p;
}

/* A host option that still names this container's own server. */
static bool own_host(const char *h, const char *svc)
{
	return str_eq(h, "localhost") || str_eq(h, "127.0.0.1") || str_eq(h, "::1") || str_eq(h, svc) || h[0] == '/';
}

/* pg_isready [-h H] [-p P] [-U U] [-d D] [-t T] [-q]: anything else is not its stock use. */
static bool plan_pg(char w[][SC_READY_WORD_MAX], size_t n, const char *svc, struct rd_plan *p)
{
	p->port = RD_PG_PORT;
	str_copy(p->user, sizeof(p->user), "postgres");
	for (size_t i = 1; i < n; i++) {
		const char *o = w[i], *v = i + 1 < n ? w[i + 1] : NULL;

		if (str_eq(o, "-q") || str_eq(o, "--quiet"))
			continue;
		if (!v || o[0] != '-')
			return false;
		if (str_eq(o, "-p") || str_eq(o, "--port")) {
			if (str_to_int(v, &p->port) < 0 || p->port <= 0 || p->port > 65535)
				return false;
		} else if (str_eq(o, "-h") || str_eq(o, "--host")) {
			if (!own_host(v, svc))
				return false;
		} else if (str_eq(o, "-U") || str_eq(o, "--username")) {
			str_copy(p->user, sizeof(p->user), v);
		} else if (!str_eq(o, "-d") && !str_eq(o, "--dbname") && !str_eq(o, "-t") && !str_eq(o, "--timeout")) {
			return false;
		}
		i++;
	}
	p->native = RD_POSTGRES;
	return true;
}

/* redis-cli [-h H] [-p P] [-a A] [--no-auth-warning] ping */
static bool plan_redis(char w[][SC_READY_WORD_MAX], size_t n, const char *svc, struct rd_plan *p)
{
	p->port = RD_REDIS_PORT;
	if (n < 2 || strcasecmp(w[n - 1], "ping") != 0)
		return false;
	for (size_t i = 1; i + 1 < n; i++) {
		const char *o = w[i], *v = i + 2 < n ? w[i + 1] : NULL;

		if (str_eq(o, "--no-auth-warning"))
			continue;
		if (!v)
			return false;
		if (str_eq(o, "-p")) {
			if (str_to_int(v, &p->port) < 0 || p->port <= 0 || p->port > 65535)
				return false;
		} else if (str_eq(o, "-h")) {
			if (!own_host(v, svc))
				return false;
		} else if (!str_eq(o, "-a")) {
			return false;
		}
		i++;
	}
	p->native = RD_REDIS;
	return true;
}

void rd_plan_of(const struct json *svc, struct rd_plan *p)
{
	const struct json *test = json_get(json_get(svc, "health"), "test");
	const char *name = json_get_str(svc, "name");
	char words[SC_READY_TOKENS_MAX][SC_READY_WORD_MAX];
	size_t n;

	memset(p, 0, sizeof(*p));
	p->exec = json_len(test) >= 2;
	if (!p->exec || (n = test_words(test, words)) == 0)
		return;
	/* Each sets p->native only when the whole command is its stock use. */
	if (str_eq(base_name(words[0]), "pg_isready"))
		(void)plan_pg(words, n, name ? name : "", p);
	else if (str_eq(base_name(words[0]), "redis-cli"))
		(void)plan_redis(words, n, name ? name : "", p);
}

size_t rd_pg_startup(const char *user, uint8_t *out, size_t n)
{
	static const char db[] = "database\0postgres";
	size_t ul = strlen(user), len = 4 + 4 + 5 + ul + 1 + sizeof(db) + 1;

	if (len > n || ul == 0)
		return 0;
	out[0] = (uint8_t)(len >> 24);
	out[1] = (uint8_t)(len >> 16);
	out[2] = (uint8_t)(len >> 8);
	out[3] = (uint8_t)len;
	out[4] = 0, out[5] = 3, out[6] = 0, out[7] = 0;		/* protocol 3.0 */
	memcpy(out + 8, "user", 5);
	memcpy(out + 13, user, ul + 1);
	memcpy(out + 14 + ul, db, sizeof(db));
	out[len - 1] = 0;
	return len;
}

int rd_pg_answer(const uint8_t *p, size_t n)
{
	uint32_t len;
	size_t i;

	if (n < 1)
		return RD_MORE;
	if (p[0] == 'R' || p[0] == 'v')		/* an authentication request: it accepts connections */
		return RD_READY;
	if (p[0] != 'E')
		return RD_BAD;
	if (n < 5)
		return RD_MORE;
	len = (uint32_t)p[1] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 8 | p[4];
	if (len < 4 || len > RD_ANSWER_MAX)
		return RD_BAD;
	if (n < 1 + (size_t)len)
		return RD_MORE;
	for (i = 5; i < 1 + (size_t)len && p[i]; i++) {
		const uint8_t *v = p + i + 1;
		size_t vl = strnlen((const char *)v, 1 + len - (i + 1));

		if (p[i] == 'C')
			return vl == 5 && memcmp(v, "57P03", 5) == 0 ? RD_NOT_YET : RD_READY;
		i += 1 + vl;	/* the field's code, text and NUL */
	}
	return RD_READY;	/* an error without a code is still an answer */
}

int rd_redis_answer(const char *p, size_t n)
{
	const char *nl = memchr(p, '\n', n);

	if (!nl)
		return n >= RD_ANSWER_MAX ? RD_BAD : RD_MORE;
	if (n >= 5 && memcmp(p, "+PONG", 5) == 0)
		return RD_READY;
	if (p[0] != '-')
		return RD_BAD;
	if ((n >= 8 && memcmp(p, "-LOADING", 8) == 0) || (n >= 5 && memcmp(p, "-BUSY", 5) == 0))
		return RD_NOT_YET;
	return RD_READY;	/* NOAUTH and the like: the server answers */
}

int64_t rd_gap_next(int64_t gap, int64_t cap)
{
	int64_t next = gap + gap / 2;

	if (next <= gap)
		next = gap + 1;
	return next > cap ? cap : next;
}

/* In netns_run's child: the connection on 127.0.0.1 and one exchange. */
static int native_child(void *arg, char *msg, size_t n)
{
	const struct rd_plan *p = arg;
	struct sockaddr_in sa;
	uint8_t req[RD_ANSWER_MAX], ans[RD_ANSWER_MAX];
	size_t rl, got = 0;
	struct pollfd pfd;
	int s, rc = RD_MORE;

	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)p->port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (p->native == RD_POSTGRES) {
		rl = rd_pg_startup(p->user, req, sizeof(req));
	} else {
		memcpy(req, "PING\r\n", 6);
		rl = 6;
	}
	if (rl == 0 || (s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return snprintf(msg, n, "socket: %s", strerror(errno)), RD_EXIT_NOT_YET;
	if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return snprintf(msg, n, "connect 127.0.0.1:%d: %s", p->port, strerror(errno)), RD_EXIT_NOT_YET;
	if (send(s, req, rl, MSG_NOSIGNAL) != (ssize_t)rl)
		return snprintf(msg, n, "send: %s", strerror(errno)), RD_EXIT_NOT_YET;
	pfd.fd = s;
	pfd.events = POLLIN;
	while (rc == RD_MORE && got < sizeof(ans) && poll(&pfd, 1, RD_NATIVE_TIMEOUT_MS) > 0) {
		ssize_t r = read(s, ans + got, sizeof(ans) - got);

		if (r <= 0)
			break;
		got += (size_t)r;
		rc = p->native == RD_POSTGRES ? rd_pg_answer(ans, got) : rd_redis_answer((const char *)ans, got);
	}
	snprintf(msg, n, "%s on 127.0.0.1:%d: %s", p->native == RD_POSTGRES ? "startup packet" : "PING", p->port,
		 rc == RD_READY ? "accepting" : rc == RD_NOT_YET ? "starting up" : rc == RD_BAD ? "not the database"
										    : "no answer");
	return rc == RD_READY ? RD_EXIT_READY : rc == RD_NOT_YET ? RD_EXIT_STARTING : RD_EXIT_NOT_YET;
}

int rd_native(int pid, const struct rd_plan *p, char *detail, size_t n, struct err *e)
{
	char msg[NETNS_MSG_MAX];
	int code = netns_run(pid, native_child, (void *)p, RD_NATIVE_TIMEOUT_MS + 1000, msg, sizeof(msg), e);

	if (code < 0)
		return -1;
	str_copy(detail, n, msg);
	return code == RD_EXIT_READY ? 1 : code == RD_EXIT_STARTING ? 2 : 0;
}
