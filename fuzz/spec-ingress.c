/*
 * fuzz/spec-ingress.c: a TLS server name, as any client may send it, split
 * by spec_ingress_split (src/spec/ingress_name.c) against a fixed domain
 * and against a domain taken from the input. It may not crash or read past
 * the name (its own allocation, for ASan); a split that succeeds gives two
 * labels that rebuild a name which splits back to the same two labels.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "spec/spec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void must(int cond)
{
	if (!cond)
		abort();	/* the fuzzer's way to report a finding */
}

static void check(const char *host, const char *domain)
{
	char svc[SPEC_DNS_LABEL_MAX + 1], env[SPEC_DNS_LABEL_MAX + 1], name[SPEC_DNS_NAME_MAX + 1];
	char svc2[SPEC_DNS_LABEL_MAX + 1], env2[SPEC_DNS_LABEL_MAX + 1];
	struct err e;

	if (spec_ingress_split(host, domain, svc, env) < 0)
		return;
	must(*svc && *env && strlen(svc) <= SPEC_DNS_LABEL_MAX && strlen(env) <= SPEC_DNS_LABEL_MAX);
	must(strstr(env, "--") == NULL);
	if (spec_ingress_name(svc, env, domain, name, sizeof(name), &e) == 0) {
		must(spec_ingress_split(name, domain, svc2, env2) == 0);
		must(strcmp(svc, svc2) == 0 && strcmp(env, env2) == 0);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *host = malloc(size + 1);
	char *nl;

	memcpy(host, data, size);
	host[size] = '\0';
	check(host, "envs.example.test");
	/* "name\ndomain": the domain from the input too, when it is one. */
	if ((nl = strchr(host, '\n'))) {
		*nl = '\0';
		if (spec_ingress_domain_ok(nl + 1))
			check(host, nl + 1);
	}
	free(host);
	return 0;
}
