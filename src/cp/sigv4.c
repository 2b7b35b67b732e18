/*
 * sigv4.c: AWS Signature Version 4 for one request (the EC2 Query API's,
 * cloud_aws.c): the canonical request over the method, path, query, the
 * signed headers (content-type when there is a body, host, x-amz-date) and
 * the payload's SHA-256; the string to sign over its hash and the scope
 * <date>/<region>/<service>/aws4_request; the signature, HMAC-SHA-256 with
 * the key derived from the secret through date, region, service and
 * "aws4_request". Checked against AWS's published test vectors
 * (t/unit/cp-sigv4.c).
 *
 * The secret and every derived key are wiped before returning.
 */
#include <stdio.h>
#include <string.h>

#include "base/buf.h"
#include "base/crypto.h"
#include "base/enc.h"
#include "base/str.h"
#include "cp/cloud.h"

#define SIGV4_ALGORITHM "AWS4-HMAC-SHA256"
#define SIGV4_DATE_LEN 8		/* "20150830" of "20150830T123600Z" */
#define SIGV4_AMZ_DATE_LEN 16

static bool amz_date_ok(const char *d)
{
	return d && strlen(d) == SIGV4_AMZ_DATE_LEN && strspn(d, "0123456789") == SIGV4_DATE_LEN && d[8] == 'T' &&
	       strspn(d + 9, "0123456789") == 6 && d[15] == 'Z';
}

/* A header value as SigV4 canonicalises it: no spaces at either end, runs
 * of spaces as one. */
static void add_trimmed(struct buf *out, const char *v)
{
	bool gap = false;

	while (*v == ' ' || *v == '\t')
		v++;
	for (; *v; v++) {
		if (*v == ' ' || *v == '\t') {
			gap = true;
			continue;
		}
		if (gap)
			buf_addch(out, ' ');
		gap = false;
		buf_addch(out, *v);
	}
}

static void add_sha256_hex(struct buf *out, const void *p, size_t n)
{
	char hex[SHA256_HEX_LEN + 1];

	sha256_hex(p, n, hex);
	buf_adds(out, hex);
}

/* The canonical request; signed gets the signed header names. */
static void canonical_request(const struct aws_sigv4 *s, struct buf *out, char *signed_names, size_t n)
{
	buf_addf(out, "%s\n%s\n%s\n", s->method, s->path && *s->path ? s->path : "/", s->query ? s->query : "");
	if (s->content_type) {
		buf_adds(out, "content-type:");
		add_trimmed(out, s->content_type);
		buf_addch(out, '\n');
	}
	buf_adds(out, "host:");
	add_trimmed(out, s->host);
	buf_addf(out, "\nx-amz-date:%s\n\n", s->amz_date);
	snprintf(signed_names, n, "%shost;x-amz-date", s->content_type ? "content-type;" : "");
	buf_addf(out, "%s\n", signed_names);
	add_sha256_hex(out, s->payload ? s->payload : "", s->payload_len);
}

/* kSigning from the secret, through date, region, service, "aws4_request". */
static int signing_key(const struct aws_sigv4 *s, uint8_t key[SHA256_LEN])
{
	char first[SIGV4_SECRET_MAX + 5], date[SIGV4_DATE_LEN + 1];
	const char *steps[3] = { s->region, s->service, "aws4_request" };
	int rc;

	snprintf(first, sizeof(first), "AWS4%s", s->secret);
	memcpy(date, s->amz_date, SIGV4_DATE_LEN);
	date[SIGV4_DATE_LEN] = '\0';
	rc = hmac_sha256(first, strlen(first), date, strlen(date), key);
	memset(first, 0, sizeof(first));
	for (size_t i = 0; rc == 0 && i < sizeof(steps) / sizeof(steps[0]); i++) {
		uint8_t next[SHA256_LEN];

		rc = hmac_sha256(key, SHA256_LEN, steps[i], strlen(steps[i]), next);
		memcpy(key, next, SHA256_LEN);
		memset(next, 0, sizeof(next));
	}
	return rc;
}

int aws_sigv4_sign(const struct aws_sigv4 *s, char *auth, size_t n, struct err *e)
{
	struct buf creq = BUF_INIT, sts = BUF_INIT;
	char signed_names[64], scope[160], sig[SHA256_HEX_LEN + 1];
	uint8_t key[SHA256_LEN], mac[SHA256_LEN];
	int rc;

	if (!amz_date_ok(s->amz_date))
		return err_set(e, "sigv4: \"%.20s\" is not an x-amz-date (YYYYMMDDTHHMMSSZ)", s->amz_date ? s->amz_date : "");
	if (!s->secret || !*s->secret || strlen(s->secret) > SIGV4_SECRET_MAX)
		return err_set(e, "sigv4: the secret access key is empty or longer than %d", SIGV4_SECRET_MAX);
	if (!s->access_key_id || !*s->access_key_id || strlen(s->access_key_id) > SIGV4_KEY_ID_MAX ||
	    strcspn(s->access_key_id, "/, \r\n") != strlen(s->access_key_id))
		return err_set(e, "sigv4: the access key id is not one AWS issues");
	snprintf(scope, sizeof(scope), "%.8s/%.40s/%.40s/aws4_request", s->amz_date, s->region, s->service);
	canonical_request(s, &creq, signed_names, sizeof(signed_names));
	buf_addf(&sts, "%s\n%s\n%s\n", SIGV4_ALGORITHM, s->amz_date, scope);
	add_sha256_hex(&sts, creq.data, creq.len);
	rc = signing_key(s, key);
	if (rc == 0)
		rc = hmac_sha256(key, sizeof(key), sts.data, sts.len, mac);
	memset(key, 0, sizeof(key));
	buf_release(&creq);
	buf_release(&sts);
	if (rc < 0)
		return err_set(e, "sigv4: HMAC-SHA-256 failed");
	enc_hex_write(sig, mac, sizeof(mac));
	sig[SHA256_HEX_LEN] = '\0';
	if ((size_t)snprintf(auth, n, "%s Credential=%s/%s, SignedHeaders=%s, Signature=%s", SIGV4_ALGORITHM,
			     s->access_key_id, scope, signed_names, sig) >= n)
		return err_set(e, "sigv4: the Authorization header does not fit");
	return 0;
}
