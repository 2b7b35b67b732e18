/*
 * ingress_name.c: the DNS names denvd's ingress serves published services
 * under (spec.h). The control plane makes them for the ingress phase's
 * evidence; denvd's name gateway reads them back out of a TLS server name.
 * Pure: no I/O, so that unit tests and a fuzz target drive it directly.
 */
#include <ctype.h>
#include <stdbool.h>
#include <string.h>

#include "base/str.h"
#include "spec/spec.h"

int spec_dns_label(const char *s, char *out, size_t n)
{
	size_t len = s ? strlen(s) : 0;

	if (len == 0 || len > SPEC_DNS_LABEL_MAX || n <= len)
		return -1;
	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (ch == '_' || ch == '.')
			out[i] = '-';
		else if (isalnum(ch) || ch == '-')
			out[i] = (char)tolower(ch);
		else
			return -1;
	}
	out[len] = '\0';
	/* A label neither starts nor ends with a hyphen. */
	return out[0] == '-' || out[len - 1] == '-' ? -1 : 0;
}

/* One label of a domain: [a-z0-9-], 1..63 bytes, no hyphen at either end. */
static bool label_ok(const char *s, size_t len)
{
	if (len == 0 || len > SPEC_DNS_LABEL_MAX || s[0] == '-' || s[len - 1] == '-')
		return false;
	for (size_t i = 0; i < len; i++)
		if (!islower((unsigned char)s[i]) && !isdigit((unsigned char)s[i]) && s[i] != '-')
			return false;
	return true;
}

bool spec_ingress_domain_ok(const char *domain)
{
	size_t len = domain ? strlen(domain) : 0, labels = 0;
	const char *p = domain;

	if (len == 0 || len > SPEC_DNS_NAME_MAX)
		return false;
	for (;;) {
		const char *dot = strchr(p, '.');
		size_t l = dot ? (size_t)(dot - p) : strlen(p);

		if (!label_ok(p, l))
			return false;
		labels++;
		if (!dot)
			break;
		p = dot + 1;
	}
	return labels >= 2;
}

int spec_ingress_name(const char *service, const char *env, const char *domain, char *out, size_t n,
		      struct err *e)
{
	char svc[SPEC_DNS_LABEL_MAX + 1], id[SPEC_DNS_LABEL_MAX + 1];
	size_t total;

	if (!spec_ingress_domain_ok(domain))
		return err_set(e, "ingress domain \"%s\" is not a DNS name", domain ? domain : "");
	if (spec_dns_label(service, svc, sizeof(svc)) < 0)
		return err_set(e, "service \"%s\" has no DNS label form", service ? service : "");
	if (spec_dns_label(env, id, sizeof(id)) < 0 || strstr(id, "--"))
		return err_set(e, "environment \"%s\" has no DNS label form", env ? env : "");
	if (strlen(svc) + 2 + strlen(id) > SPEC_DNS_LABEL_MAX)
		return err_set(e, "service \"%s\": %s--%s is longer than a DNS label (%d)", service, svc, id,
			       SPEC_DNS_LABEL_MAX);
	total = strlen(svc) + 2 + strlen(id) + 1 + strlen(domain);
	if (total > SPEC_DNS_NAME_MAX || str_fmt(out, n, "%s--%s.%s", svc, id, domain) < 0)
		return err_set(e, "service \"%s\": its name is longer than a DNS name (%d)", service,
			       SPEC_DNS_NAME_MAX);
	return 0;
}

int spec_ingress_split(const char *host, const char *domain, char *svc_label, char *env_label)
{
	char low[SPEC_DNS_NAME_MAX + 2];
	size_t hl = host ? strlen(host) : 0, dl = domain ? strlen(domain) : 0, first;
	const char *sep = NULL;

	/* A trailing dot (the root) is the same name. */
	if (hl > 0 && host[hl - 1] == '.')
		hl--;
	if (hl == 0 || hl >= sizeof(low) || dl == 0 || hl <= dl + 1)
		return -1;
	for (size_t i = 0; i < hl; i++)
		low[i] = (char)tolower((unsigned char)host[i]);
	low[hl] = '\0';
	first = hl - dl - 1;
	if (low[first] != '.' || strcmp(low + first + 1, domain) != 0 || memchr(low, '.', first))
		return -1;
	low[first] = '\0';
	for (const char *p = strstr(low, "--"); p; p = strstr(p + 1, "--"))
		sep = p;
	if (!sep || !label_ok(low, first))
		return -1;
	if ((size_t)(sep - low) == 0 || strlen(sep + 2) == 0)
		return -1;
	memcpy(svc_label, low, (size_t)(sep - low));
	svc_label[sep - low] = '\0';
	str_copy(env_label, SPEC_DNS_LABEL_MAX + 1, sep + 2);
	/* "a---b": the service label may not end in '-'. */
	return label_ok(svc_label, strlen(svc_label)) && label_ok(env_label, strlen(env_label)) ? 0 : -1;
}
