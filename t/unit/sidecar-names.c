/* Unit tests: the name gateway's routing (names_route.c), its certificate's
 * life (names_tls.c) and its flags (names_ctl.c). */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "base/fs.h"
#include <openssl/ssl.h>

#include "json/json.h"
#include "sidecar/sidecar.h"
#include "tap.h"

static void put(const char *dir, const char *env, const char *text)
{
	char path[FS_PATH_MAX];
	struct err e;

	snprintf(path, sizeof(path), "%s/envs/%s", dir, env);
	fs_mkdir_p(path, 0700, &e);
	if (text) {
		snprintf(path, sizeof(path), "%s/envs/%s/endpoints.json", dir, env);
		fs_write_atomic(path, text, strlen(text), 0644, &e);
	}
}

static void test_route(void)
{
	const char *d = tap_tmpdir();
	struct nm_route r;
	struct json *eps;
	struct err e;

	put(d, "env_01ABC", "{\"web\":\"127.0.0.1:38000\",\"web:9000\":\"127.0.0.1:38001\",\"My_Db\":\"0.0.0.0:5432\"}");
	put(d, "env_NOEPS", NULL);
	put(d, "env_TWO", "{\"a_b\":\"127.0.0.1:1\",\"a.b\":\"127.0.0.1:2\",\"bad\":\"nowhere\"}");
	ok(nm_route(d, "d.test", "web--env-01abc.d.test", &r) == 0 && r.port == 38000 && strcmp(r.env, "env_01ABC") == 0 &&
		   strcmp(r.service, "web") == 0,
	   "web--env-01abc: env_01ABC's web on 38000 (%s)", r.why);
	ok(nm_route(d, "d.test", "MY-DB--ENV-01ABC.D.TEST", &r) == 0 && r.port == 5432 && strcmp(r.service, "My_Db") == 0,
	   "a service by its label form, any case; Docker's 0.0.0.0 is the port too");
	ok(nm_route(d, "d.test", "web-9000--env-01abc.d.test", &r) < 0 && r.status == 404,
	   "a further port (svc:port) has no name of its own");
	ok(nm_route(d, "d.test", "nope--env-01abc.d.test", &r) < 0 && r.status == 404 &&
		   strstr(r.why, "publishes no service nope"),
	   "an unknown service: 404, %s", r.why);
	ok(nm_route(d, "d.test", "web--env-zzz.d.test", &r) < 0 && r.status == 404 &&
		   strstr(r.why, "no environment env-zzz"),
	   "an unknown env: 404, %s", r.why);
	ok(nm_route(d, "d.test", "web--env-noeps.d.test", &r) < 0 && r.status == 503, "an env that published nothing: 503");
	ok(nm_route(d, "d.test", "a-b--env-two.d.test", &r) < 0 && r.status == 409 && strstr(r.why, "two services"),
	   "two services with one label: refused, %s", r.why);
	ok(nm_route(d, "d.test", "bad--env-two.d.test", &r) < 0 && r.status == 502, "an address without a port: 502");
	ok(nm_route(d, "d.test", NULL, &r) < 0 && r.status == 421 && strstr(r.why, "ask by name"), "no name: 421");
	ok(nm_route(d, "d.test", "web--env-01abc.other.test", &r) < 0 && r.status == 421, "another domain: 421");
	ok(nm_route("/nonexistent-denv", "d.test", "web--env-01abc.d.test", &r) < 0 && r.status == 404,
	   "a data dir without envs: 404");
	{
		const char *text = "{\"svc\":\"127.0.0.1:4000\"}";

		json_parse(text, strlen(text), NULL, &eps, &e);
	}
	put(d, "env_REC", NULL);
	ok(nm_record(d, "env_REC", eps, &e) == 0 && nm_route(d, "d.test", "svc--env-rec.d.test", &r) == 0 && r.port == 4000,
	   "nm_record writes what nm_route reads");
	json_free(eps);
}

static void test_due(void)
{
	const int64_t now = 1800000000, day = 86400;

	ok(!nt_due(now + 30 * day, now, 30), "30 days left of 30: kept");
	ok(!nt_due(now + 11 * day, now, 30), "11 days left of 30: kept");
	ok(nt_due(now + 9 * day, now, 30), "9 days left of 30: due");
	ok(nt_due(now + day, now, 30), "one day left: due");
	ok(nt_due(now - 1, now, 30), "ended: due");
	ok(!nt_due(now + day, now, 2), "one day left of 2: kept");
}

static void test_tls(void)
{
	char dir[FS_PATH_MAX], kpath[FS_PATH_MAX], cpath[FS_PATH_MAX];
	struct nt_config c = { NULL, "d.test", NULL, NULL, 30 };
	struct nt_state st, st2;
	struct stat sb;
	struct err e;
	void *ctx;

	snprintf(dir, sizeof(dir), "%s/tls", tap_tmpdir());
	c.dir = dir;
	ok(nt_ensure(&c, 1800000000, &st, &e) == 0 && st.issued && st.not_after - 1800000000 == 30 * 86400,
	   "a first certificate is issued, valid for 30 days (%s)", e.msg);
	nt_paths(dir, kpath, cpath, &e);
	ok(stat(kpath, &sb) == 0 && (sb.st_mode & 0777) == 0600, "its key is 0600");
	ok(nt_ensure(&c, 1800000000 + 86400, &st2, &e) == 0 && !st2.issued && st2.not_after == st.not_after,
	   "a day later it is kept");
	ok(nt_ensure(&c, 1800000000 + 25 * 86400, &st2, &e) == 0 && st2.issued && st2.not_after > st.not_after,
	   "25 days later it is issued again");
	c.domain = "other.test";
	ok(nt_ensure(&c, 1800000000 + 25 * 86400, &st, &e) == 0 && st.issued, "another domain: issued again");
	ok((ctx = nt_server_context(dir, &e)) != NULL, "a TLS context loads from the files (%s)", e.msg);
	SSL_CTX_free(ctx);
	c.ca_cert = "/nonexistent-ca.pem";
	c.ca_key = "/nonexistent-ca.key";
	ok(nt_ensure(&c, 1800000000, &st, &e) < 0 && strstr(e.msg, "--ingress-ca-cert /nonexistent-ca.pem"),
	   "an unreadable CA is named: %s", e.msg);
}

static void test_flags(void)
{
	struct sc_config c;
	char host[64];
	int port = 0;
	struct err e;

	ok(nm_listen_parse("127.0.0.1:8443", host, sizeof(host), &port) == 0 && strcmp(host, "127.0.0.1") == 0 &&
		   port == 8443,
	   "HOST:PORT");
	ok(nm_listen_parse(":443", host, sizeof(host), &port) == 0 && strcmp(host, "0.0.0.0") == 0 && port == 443,
	   ":PORT is every address");
	ok(nm_listen_parse("127.0.0.1", host, sizeof(host), &port) < 0 && nm_listen_parse("h:0", host, sizeof(host), &port) < 0 &&
		   nm_listen_parse("h:99999", host, sizeof(host), &port) < 0,
	   "no port, port 0, a port past 65535: refused");
	memset(&c, 0, sizeof(c));
	ok(nm_config_check(&c, &e) == 0 && nm_capabilities(&c) == NULL, "no domain: nothing to check, nothing to say");
	c.ingress_domain = "denv.test";
	c.ingress_listen = "127.0.0.1:8443";
	c.ingress_cert_days = "30";
	ok(nm_config_check(&c, &e) == 0, "a domain, a listen address, 30 days");
	c.ingress_cert_days = "0";
	ok(nm_config_check(&c, &e) < 0 && strstr(e.msg, "--ingress-cert-days 0"), "0 days: %s", e.msg);
	c.ingress_cert_days = "30";
	c.ingress_ca_key = "/k.pem";
	ok(nm_config_check(&c, &e) < 0 && strstr(e.msg, "go together"), "a CA key without its certificate: %s", e.msg);
	c.ingress_ca_key = NULL;
	c.ingress_listen = "nowhere";
	ok(nm_config_check(&c, &e) < 0 && strstr(e.msg, "--ingress-listen nowhere"), "a bad listen address: %s", e.msg);
	c.ingress_listen = "127.0.0.1:8443";
	{
		struct json *caps = nm_capabilities(&c);

		ok(caps && strcmp(json_get_str(caps, "domain"), "denv.test") == 0 && json_get_int(caps, "port", 0) == 8443 &&
			   strcmp(json_get_str(caps, "issuer"), "self-signed") == 0,
		   "the hello's ingress: domain, port, issuer");
		json_free(caps);
	}
}

int main(void)
{
	test_route();
	test_due();
	test_tls();
	test_flags();
	return tap_done();
}
