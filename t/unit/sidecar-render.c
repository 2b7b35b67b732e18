/* Unit tests: start order, docker run argument vectors and compose.yaml. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sidecar/sidecar.h"
#include "tap.h"

static struct json *parse(const char *text)
{
	struct json *j = NULL;
	struct err e;

	if (json_parse(text, strlen(text), NULL, &j, &e) < 0) {
		tap_diag("bad test JSON: %s", e.msg);
		return json_new_array();
	}
	return j;
}

static const char *names(const struct json *order)
{
	static char out[256];

	out[0] = '\0';
	for (size_t i = 0; i < json_len(order); i++) {
		strncat(out, json_get_str(json_at(order, i), "name"), sizeof(out) - strlen(out) - 2);
		strncat(out, " ", sizeof(out) - strlen(out) - 1);
	}
	return out;
}

static void test_order(void)
{
	struct json *s = parse("[{\"name\":\"a\",\"image\":\"i\",\"depends_on\":[\"c\"]},"
			       "{\"name\":\"b\",\"image\":\"i\"},{\"name\":\"c\",\"image\":\"i\",\"depends_on\":[\"b\"]}]");
	struct json *o;
	struct err e;

	o = render_order(s, &e);
	is_str(o ? names(o) : e.msg, "b c a ", "dependencies first, then by name");
	json_free(o);
	json_free(s);
	s = parse("[{\"name\":\"a\",\"image\":\"i\",\"depends_on\":[\"b\"]},{\"name\":\"b\",\"image\":\"i\",\"depends_on\":[\"a\"]}]");
	ok(!render_order(s, &e) && strstr(e.msg, "cycle"), "a cycle is refused: %s", e.msg);
	json_free(s);
	s = parse("[{\"name\":\"a\",\"image\":\"i\",\"depends_on\":[\"zz\"]}]");
	ok(!render_order(s, &e) && strstr(e.msg, "unknown service"), "an unknown dependency is refused: %s", e.msg);
	json_free(s);
	s = parse("[{\"name\":\"../x\",\"image\":\"i\"}]");
	ok(!render_order(s, &e), "a bad service name is refused: %s", e.msg);
	json_free(s);
	s = parse("[]");
	ok(!render_order(s, &e), "no services is refused");
	json_free(s);
}

static void test_user(void)
{
	long u = -1, g = -1;

	ok(render_user("1000:1000", &u, &g) == 0 && u == 1000 && g == 1000, "uid:gid");
	ok(render_user("1000", &u, &g) == 0 && u == 1000 && g == 0, "a bare uid runs with group 0, as in Docker");
	ok(render_user("postgres", &u, &g) < 0 && render_user("", &u, &g) < 0 && render_user(NULL, &u, &g) < 0,
	   "names and empty are not numeric");
	ok(render_user("1:x", &u, &g) < 0 && render_user("-1", &u, &g) < 0, "junk refused");
}

static bool has_seq(const struct argv *a, const char *x, const char *y)
{
	for (size_t i = 0; i + 1 < a->n; i++)
		if (strcmp(a->v[i], x) == 0 && (!y || strcmp(a->v[i + 1], y) == 0))
			return true;
	return false;
}

static void test_argv(void)
{
	struct json *svc = parse("{\"name\":\"db\",\"image\":\"denv-test/debian\",\"command\":[\"postgres\"],"
				 "\"env\":{\"A\":\"x y\"},\"volumes\":[\"pg:/var/lib/pg\"],\"ports\":[\"5432\"],"
				 "\"health\":{\"test\":[\"CMD\",\"pg_isready\",\"-U\",\"it's\"],\"interval\":\"1s\",\"retries\":5},"
				 "\"user\":\"\",\"resources\":{\"memory_mb\":0,\"pids\":0,\"cpus\":0}}");
	struct json *box = parse("{\"name\":\"box\",\"image\":\"bb\",\"user\":\"1000:1000\",\"command\":[],"
				 "\"volumes\":[\"home\"],\"resources\":{\"memory_mb\":512,\"pids\":64,\"cpus\":0.5}}");
	struct argv a;
	struct err e;
	size_t n;

	av_init(&a);
	ok(render_run_argv("env_x", "ENV_X", svc, "/d/vol", false, false, &a, &e) == 0, "db argv renders");
	n = a.n;
	ok(has_seq(&a, "--name", "env_x-db-1") && has_seq(&a, "--network", "env_x_default") &&
	   has_seq(&a, "--network-alias", "db"), "name, network, alias");
	ok(has_seq(&a, "--memory", "4096m") && has_seq(&a, "--pids-limit", "2048") && has_seq(&a, "--cpus", "2.000"),
	   "default caps 4096 MiB / 2048 / 2.0");
	ok(has_seq(&a, "--label", "com.docker.compose.project=env_x") &&
	   has_seq(&a, "--label", "com.docker.compose.service=db") && has_seq(&a, "--label", "ai.denv.env=ENV_X"),
	   "compose labels");
	ok(has_seq(&a, "-e", "A=x y") && has_seq(&a, "-v", "/d/vol/pg:/var/lib/pg"), "env and volume bind");
	ok(has_seq(&a, "--health-cmd", "'pg_isready' '-U' 'it'\\''s'") && has_seq(&a, "--health-interval", "1s") &&
	   has_seq(&a, "--health-retries", "5"), "CMD healthcheck quoted for the shell");
	ok(!has_seq(&a, "-p", NULL) && !has_seq(&a, "--user", NULL), "no ports published when egress is denied; no user");
	ok(!has_seq(&a, "--runtime", NULL), "runc is Docker's default: no --runtime");
	ok(n >= 2 && strcmp(a.v[n - 2], "denv-test/debian") == 0 && strcmp(a.v[n - 1], "postgres") == 0,
	   "image, then the command");
	av_release(&a);
	av_init(&a);
	ok(render_run_argv("env_x", "ENV_X", svc, "/d/vol", false, true, &a, &e) == 0 &&
	   has_seq(&a, "-p", "127.0.0.1::5432"), "egress allow publishes on 127.0.0.1");
	av_release(&a);
	av_init(&a);
	ok(render_run_argv("env_x", "ENV_X", svc, "/d/vol", true, false, &a, &e) == 0 &&
	   has_seq(&a, "--network", "none") && !has_seq(&a, "--network-alias", NULL) &&
	   has_seq(&a, "--add-host", "db:127.0.0.1") &&
	   !has_seq(&a, "--network", "env_x_default"), "networkless: Docker's none network, no alias");
	av_release(&a);
	av_init(&a);
	json_object_set_str(svc, "runtime", "gvisor");
	ok(render_run_argv("env_x", "ENV_X", svc, "/d/vol", false, false, &a, &e) == 0 &&
	   has_seq(&a, "--runtime", "runsc"), "a gVisor service runs with --runtime runsc");
	ok(has_seq(&a, "--pids-limit", "20544"),
	   "a gVisor service's host pid cap holds its sandbox's threads too (64 + 10 x 2048)");
	json_object_set_str(svc, "runtime", "runc");
	av_release(&a);
	av_init(&a);
	ok(render_run_argv("env_x", "ENV_X", box, "/d/vol", false, false, &a, &e) < 0 && strstr(e.msg, "name:/path"),
	   "a volume without a path is refused: %s", e.msg);
	av_release(&a);
	json_free(svc);
	json_free(box);
}

static void test_compose(void)
{
	struct json *spec = parse("{\"egress\":\"deny\",\"services\":[{\"name\":\"box\",\"image\":\"bb\","
				  "\"user\":\"1000:1000\",\"command\":[\"sh\",\"-c\",\"echo \\\"hi\\\"\\nx: y\"],"
				  "\"env\":{\"K\":\"a: b # c\"},\"volumes\":[\"home:/home/agent\"],"
				  "\"resources\":{\"memory_mb\":512,\"pids\":64,\"cpus\":1}}]}");
	struct buf b = BUF_INIT;
	struct err e;

	struct json *two = parse("{\"egress\":\"deny\",\"services\":[{\"name\":\"a\",\"image\":\"bb\"},"
				 "{\"name\":\"b\",\"image\":\"bb\"}]}");

	ok(render_compose("env_x", "ENV_X", spec, "/d/vol", true, &b, &e) == 0, "compose renders");
	ok(strstr(b.data, "network_mode: none") && strstr(b.data, "extra_hosts: [\"box:127.0.0.1\"]") &&
	   !strstr(b.data, "networks:"),
	   "one service with egress denied: no network at all");
	buf_reset(&b);
	ok(render_compose("env_x", "ENV_X", spec, "/d/vol", false, &b, &e) == 0 &&
	   strstr(b.data, "internal: false") && !strstr(b.data, "network_mode"),
	   "the leaky test mode (not internal) keeps a network");
	buf_reset(&b);
	ok(render_compose("env_x", "ENV_X", two, "/d/vol", true, &b, &e) == 0 &&
	   strstr(b.data, "internal: true") && strstr(b.data, "name: \"env_x_default\"") &&
	   !strstr(b.data, "network_mode"), "two services with egress denied: an internal network");
	ok(render_networkless(spec, false) && !render_networkless(spec, true) && !render_networkless(two, false),
	   "render_networkless: one service, egress denied, not leaky");
	json_free(two);
	buf_reset(&b);
	ok(render_compose("env_x", "ENV_X", spec, "/d/vol", true, &b, &e) == 0, "compose renders again");
	ok(strstr(b.data, "mem_limit: 512m") && strstr(b.data, "pids_limit: 64") && strstr(b.data, "cpus: 1.000"),
	   "caps rendered");
	json_object_set_str(json_at(json_get(spec, "services"), 0), "runtime", "gvisor");
	buf_reset(&b);
	ok(render_compose("env_x", "ENV_X", spec, "/d/vol", true, &b, &e) == 0 && strstr(b.data, "pids_limit: 704") &&
	   strstr(b.data, "runtime: runsc"), "under gVisor the host's pid cap is scaled: 64 + 10 x 64");
	json_object_set_str(json_at(json_get(spec, "services"), 0), "runtime", "runc");
	buf_reset(&b);
	ok(render_compose("env_x", "ENV_X", spec, "/d/vol", true, &b, &e) == 0, "compose renders once more");
	ok(strstr(b.data, "\"K\": \"a: b # c\"") != NULL, "values are quoted scalars");
	ok(strstr(b.data, "command: [\"sh\", \"-c\", \"echo \\\"hi\\\"\\nx: y\"]") != NULL,
	   "quotes and newlines are escaped, never structure");
	ok(strstr(b.data, "- \"/d/vol/home:/home/agent\"") != NULL, "volumes are host dirs");
	buf_release(&b);
	json_free(spec);
}

int main(void)
{
	test_order();
	test_user();
	test_argv();
	test_compose();
	return tap_done();
}
