/* Unit tests: ingress names, <service>--<env>.<domain> (spec/ingress_name.c). */
#include <stdio.h>
#include <string.h>

#include "spec/spec.h"
#include "tap.h"

static void test_labels(void)
{
	char out[SPEC_DNS_LABEL_MAX + 1], long_name[80];

	ok(spec_dns_label("web", out, sizeof(out)) == 0 && strcmp(out, "web") == 0, "a plain name is its label");
	ok(spec_dns_label("My_App.v2", out, sizeof(out)) == 0 && strcmp(out, "my-app-v2") == 0,
	   "upper case lowered, '_' and '.' as '-'");
	ok(spec_dns_label("env_01M8VH2D1JSPBDMZ1JVAXDGV5H", out, sizeof(out)) == 0 &&
		   strcmp(out, "env-01m8vh2d1jspbdmz1jvaxdgv5h") == 0,
	   "an env id's label");
	ok(spec_dns_label("", out, sizeof(out)) < 0 && spec_dns_label(NULL, out, sizeof(out)) < 0, "empty: none");
	ok(spec_dns_label("a b", out, sizeof(out)) < 0 && spec_dns_label("caf\xc3\xa9", out, sizeof(out)) < 0,
	   "a space or a non-ASCII byte: none");
	ok(spec_dns_label("_x", out, sizeof(out)) < 0 && spec_dns_label("x-", out, sizeof(out)) < 0,
	   "a hyphen (or what becomes one) at either end: none");
	memset(long_name, 'a', 64);
	long_name[64] = '\0';
	ok(spec_dns_label(long_name, out, sizeof(out)) < 0, "64 bytes: longer than a label");
	long_name[63] = '\0';
	ok(spec_dns_label(long_name, out, sizeof(out)) == 0, "63 bytes: a label");
	ok(spec_dns_label("web", out, 3) < 0, "an output too small is refused, not cut");
}

static void test_domains(void)
{
	ok(spec_ingress_domain_ok("envs.example.test"), "envs.example.test");
	ok(spec_ingress_domain_ok("denv.test"), "two labels");
	ok(!spec_ingress_domain_ok("localhost"), "one label is refused");
	ok(!spec_ingress_domain_ok("Envs.Example.Test"), "upper case is refused (say it in lower case)");
	ok(!spec_ingress_domain_ok("a..test") && !spec_ingress_domain_ok(".test") && !spec_ingress_domain_ok("a.test."),
	   "empty labels are refused");
	ok(!spec_ingress_domain_ok("-a.test") && !spec_ingress_domain_ok("a_b.test") && !spec_ingress_domain_ok(""),
	   "a leading hyphen, an underscore, nothing");
}

static void test_names(void)
{
	char name[SPEC_DNS_NAME_MAX + 1], svc[SPEC_DNS_LABEL_MAX + 1], env[SPEC_DNS_LABEL_MAX + 1];
	char big_domain[300];
	struct err e;

	ok(spec_ingress_name("web", "env_01ABC", "envs.example.test", name, sizeof(name), &e) == 0 &&
		   strcmp(name, "web--env-01abc.envs.example.test") == 0,
	   "web in env_01ABC: %s", name);
	ok(spec_ingress_name("a_b", "env_X", "d.test", name, sizeof(name), &e) == 0 &&
		   strcmp(name, "a-b--env-x.d.test") == 0,
	   "a service's label form");
	ok(spec_ingress_name("web", "env_X", "nodots", name, sizeof(name), &e) < 0 && strstr(e.msg, "not a DNS name"),
	   "a bad domain is named: %s", e.msg);
	ok(spec_ingress_name("w b", "env_X", "d.test", name, sizeof(name), &e) < 0 && strstr(e.msg, "\"w b\""),
	   "a service with no label form is named: %s", e.msg);
	ok(spec_ingress_name("web", "env__x", "d.test", name, sizeof(name), &e) < 0, "an env whose label has -- : none");
	ok(spec_ingress_name("a-very-long-service-name-that-goes-on-and-on", "env_01M8VH2D1JSPBDMZ1JVAXDGV5H",
			     "d.test", name, sizeof(name), &e) < 0 && strstr(e.msg, "longer than a DNS label"),
	   "service--env past 63 bytes: %s", e.msg);
	/* Four labels of 62 and "test": 256 bytes. */
	snprintf(big_domain, sizeof(big_domain), "%1$s.%1$s.%1$s.%1$s.test",
		 "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
	ok(spec_ingress_name("web", "env_X", big_domain, name, sizeof(name), &e) < 0, "a name past 253 bytes: none");

	ok(spec_ingress_split("web--env-01abc.envs.example.test", "envs.example.test", svc, env) == 0 &&
		   strcmp(svc, "web") == 0 && strcmp(env, "env-01abc") == 0,
	   "split: web / env-01abc");
	ok(spec_ingress_split("WEB--ENV-01ABC.Envs.Example.Test.", "envs.example.test", svc, env) == 0 &&
		   strcmp(svc, "web") == 0 && strcmp(env, "env-01abc") == 0,
	   "split ignores case and the root's dot");
	ok(spec_ingress_split("a--b--env-x.d.test", "d.test", svc, env) == 0 && strcmp(svc, "a--b") == 0 &&
		   strcmp(env, "env-x") == 0,
	   "the env is after the last --");
	ok(spec_ingress_split("web.d.test", "d.test", svc, env) < 0, "no --: not a name of ours");
	ok(spec_ingress_split("web--env-x.other.test", "d.test", svc, env) < 0, "another domain: no");
	ok(spec_ingress_split("x.web--env-x.d.test", "d.test", svc, env) < 0, "a deeper name: no");
	ok(spec_ingress_split("--env-x.d.test", "d.test", svc, env) < 0 && spec_ingress_split("web--.d.test", "d.test", svc, env) < 0,
	   "an empty part: no");
	ok(spec_ingress_split("d.test", "d.test", svc, env) < 0 && spec_ingress_split(".d.test", "d.test", svc, env) < 0 &&
		   spec_ingress_split("", "d.test", svc, env) < 0 && spec_ingress_split(NULL, "d.test", svc, env) < 0,
	   "the domain itself, an empty label, nothing: no");
	ok(spec_ingress_split("w_b--env-x.d.test", "d.test", svc, env) < 0, "a byte no label has: no");
	ok(spec_ingress_name("My_App", "env_01XY", "d.test", name, sizeof(name), &e) == 0 &&
		   spec_ingress_split(name, "d.test", svc, env) == 0 && strcmp(svc, "my-app") == 0 &&
		   strcmp(env, "env-01xy") == 0,
	   "a made name splits back into its labels");
}

int main(void)
{
	test_labels();
	test_domains();
	test_names();
	return tap_done();
}
