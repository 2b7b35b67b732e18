/* names_tls.c: the certificate of denvd's name gateway (names.c): one
 * wildcard for *.<domain> and <domain>, issued by the configured CA
 * (--ingress-ca-cert and --ingress-ca-key) or, without one, self-signed by
 * this host. It lives under <data>/ingress-tls as key.pem (0600) and
 * cert.pem (the leaf, then the CA's certificate when there is one), and is
 * issued again, with a new key, once it is due: less than a third of the
 * configured validity (--ingress-cert-days) left, or it no longer fits (another domain, another issuer, a
 * key that is not its own). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "base/fs.h"
#include "base/str.h"
#include "sidecar/sidecar.h"
#include "spec/spec.h"

bool nt_due(int64_t not_after, int64_t now, int days)
{
	return not_after - now < (int64_t)days * 86400 / NT_RENEW_PARTS;
}

static int ossl_fail(struct err *e, const char *what)
{
	char msg[256];
	unsigned long code = ERR_get_error();

	ERR_error_string_n(code, msg, sizeof(msg));
	ERR_clear_error();
	return err_set(e, "%s: %s", what, code ? msg : "failed");
}

static int64_t asn1_epoch(const ASN1_TIME *t)
{
	struct tm tm;

	if (!t || ASN1_TIME_to_tm(t, &tm) != 1)
		return 0;
	return (int64_t)timegm(&tm);
}

/* The first certificate in the PEM file (or, with key, its private key),
 * or NULL. */
static void *read_pem(const char *path, bool key)
{
	FILE *f = fopen(path, "r");
	void *v;

	if (!f)
		return NULL;
	v = key ? (void *)PEM_read_PrivateKey(f, NULL, NULL, NULL) : (void *)PEM_read_X509(f, NULL, NULL, NULL);
	fclose(f);
	return v;
}

static X509 *read_cert(const char *path)
{
	return read_pem(path, false);
}

static EVP_PKEY *read_key(const char *path)
{
	return read_pem(path, true);
}

/* The configured CA, both halves, or -1 with e naming the file. */
static int load_ca(const struct nt_config *c, X509 **ca, EVP_PKEY **ca_key, struct err *e)
{
	*ca = NULL;
	*ca_key = NULL;
	if (!c->ca_cert)
		return 0;
	if (!(*ca = read_cert(c->ca_cert)))
		return err_set(e, "--ingress-ca-cert %s: not a PEM certificate", c->ca_cert);
	if (!(*ca_key = read_key(c->ca_key)) || X509_check_private_key(*ca, *ca_key) != 1) {
		X509_free(*ca);
		EVP_PKEY_free(*ca_key);
		*ca = NULL;
		*ca_key = NULL;
		ERR_clear_error();
		return err_set(e, "--ingress-ca-key %s: not the private key of %s", c->ca_key, c->ca_cert);
	}
	return 0;
}

/* Whether the kept certificate serves the domain, comes from the issuer
 * wanted, has its key, and is not due. */
static bool kept_fits(const struct nt_config *c, X509 *ca, X509 *cert, EVP_PKEY *key, int64_t now)
{
	char probe[SPEC_DNS_NAME_MAX + 8];
	EVP_PKEY *ca_pub = ca ? X509_get0_pubkey(ca) : NULL;
	bool fits;

	if (!cert || !key || X509_check_private_key(cert, key) != 1)
		return false;
	if (str_fmt(probe, sizeof(probe), "x.%s", c->domain) < 0)
		return false;
	fits = X509_check_host(cert, probe, 0, 0, NULL) == 1 && X509_check_host(cert, c->domain, 0, 0, NULL) == 1;
	if (ca)
		fits = fits && X509_check_issued(ca, cert) == X509_V_OK && X509_verify(cert, ca_pub) == 1;
	else	/* self-issued; X509_check_issued would want keyCertSign of a leaf */
		fits = fits && X509_NAME_cmp(X509_get_issuer_name(cert), X509_get_subject_name(cert)) == 0 &&
		       X509_verify(cert, X509_get0_pubkey(cert)) == 1;
	fits = fits && !nt_due(asn1_epoch(X509_get0_notAfter(cert)), now, c->days);
	ERR_clear_error();
	return fits;
}

static int add_ext(X509 *cert, X509 *issuer, int nid, const char *value)
{
	X509V3_CTX v3;
	X509_EXTENSION *ext;
	int ok;

	X509V3_set_ctx(&v3, issuer, cert, NULL, NULL, 0);
	if (!(ext = X509V3_EXT_conf_nid(NULL, &v3, nid, value)))
		return -1;
	ok = X509_add_ext(cert, ext, -1);
	X509_EXTENSION_free(ext);
	return ok ? 0 : -1;
}

/* A random positive 127-bit serial. */
static int set_serial(X509 *cert)
{
	unsigned char raw[16];
	BIGNUM *bn;
	int ok;

	if (RAND_bytes(raw, sizeof(raw)) != 1)
		return -1;
	raw[0] &= 0x7f;
	bn = BN_bin2bn(raw, sizeof(raw), NULL);
	ok = bn && BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert)) != NULL;
	BN_free(bn);
	return ok ? 0 : -1;
}

/* A new leaf for the domain, signed by ca_key (or key, self-signed). */
static X509 *issue(const struct nt_config *c, EVP_PKEY *key, X509 *ca, EVP_PKEY *ca_key, int64_t now)
{
	X509 *cert = X509_new();
	X509_NAME *subject = X509_NAME_new();
	char san[2 * SPEC_DNS_NAME_MAX + 16];
	bool ok;

	ok = cert && subject && X509_set_version(cert, 2) && set_serial(cert) == 0 &&
	     X509_NAME_add_entry_by_txt(subject, "O", MBSTRING_ASC, (const unsigned char *)"denvd ingress", -1, -1, 0) &&
	     X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_ASC, (const unsigned char *)c->domain, -1, -1, 0) &&
	     X509_set_subject_name(cert, subject) &&
	     X509_set_issuer_name(cert, ca ? X509_get_subject_name(ca) : subject) &&
	     X509_time_adj_ex(X509_getm_notBefore(cert), 0, -NT_BACKDATE_S, (time_t *)&now) &&
	     X509_time_adj_ex(X509_getm_notAfter(cert), c->days, 0, (time_t *)&now) && X509_set_pubkey(cert, key) &&
	     str_fmt(san, sizeof(san), "DNS:*.%s,DNS:%s", c->domain, c->domain) == 0;
	ok = ok && add_ext(cert, ca ? ca : cert, NID_subject_alt_name, san) == 0 &&
	     add_ext(cert, ca ? ca : cert, NID_basic_constraints, "critical,CA:FALSE") == 0 &&
	     add_ext(cert, ca ? ca : cert, NID_key_usage, "critical,digitalSignature") == 0 &&
	     add_ext(cert, ca ? ca : cert, NID_ext_key_usage, "serverAuth") == 0 &&
	     add_ext(cert, ca ? ca : cert, NID_subject_key_identifier, "hash") == 0 &&
	     X509_sign(cert, ca ? ca_key : key, EVP_sha256()) > 0;
	X509_NAME_free(subject);
	if (!ok) {
		X509_free(cert);
		return NULL;
	}
	return cert;
}

/* PEM of the key, or of the leaf then the CA, into a string (caller frees). */
static char *pem_of(EVP_PKEY *key, X509 *cert, X509 *ca, size_t *len)
{
	BIO *b = BIO_new(BIO_s_mem());
	char *data, *out = NULL;
	long n;
	bool ok;

	if (!b)
		return NULL;
	ok = key ? PEM_write_bio_PrivateKey(b, key, NULL, NULL, 0, NULL, NULL)
		 : PEM_write_bio_X509(b, cert) && (!ca || PEM_write_bio_X509(b, ca));
	if (ok && (n = BIO_get_mem_data(b, &data)) > 0) {
		out = xstrndup(data, (size_t)n);
		*len = (size_t)n;
	}
	BIO_free(b);
	return out;
}

static int write_pem(const char *path, EVP_PKEY *key, X509 *cert, X509 *ca, int mode, struct err *e)
{
	size_t len = 0;
	char *pem = pem_of(key, cert, ca, &len);
	int rc;

	if (!pem)
		return ossl_fail(e, "writing PEM");
	rc = fs_write_atomic(path, pem, len, mode, e);
	OPENSSL_cleanse(pem, len);
	free(pem);
	return rc;
}

int nt_paths(const char *dir, char *key, char *cert, struct err *e)
{
	if (fs_path(key, FS_PATH_MAX, e, "%s/key.pem", dir) < 0 || fs_path(cert, FS_PATH_MAX, e, "%s/cert.pem", dir) < 0)
		return -1;
	return 0;
}

/* Issue a new key and leaf and write both; the key first, so that a crash
 * between the two leaves a pair that does not match: due, issued again. */
static int renew(const struct nt_config *c, X509 *ca, EVP_PKEY *ca_key, int64_t now, struct err *e)
{
	char kpath[FS_PATH_MAX], cpath[FS_PATH_MAX];
	EVP_PKEY *key;
	X509 *cert = NULL;
	int rc = -1;

	if (nt_paths(c->dir, kpath, cpath, e) < 0)
		return -1;
	if (!(key = EVP_EC_gen(NT_CURVE)))
		return ossl_fail(e, "making the ingress key");
	if (!(cert = issue(c, key, ca, ca_key, now)))
		ossl_fail(e, "issuing the ingress certificate");
	else if (write_pem(kpath, key, NULL, NULL, 0600, e) == 0 && write_pem(cpath, NULL, cert, ca, 0644, e) == 0)
		rc = 0;
	X509_free(cert);
	EVP_PKEY_free(key);
	return rc;
}

int nt_ensure(const struct nt_config *c, int64_t now, struct nt_state *st, struct err *e)
{
	char kpath[FS_PATH_MAX], cpath[FS_PATH_MAX];
	X509 *ca, *cert;
	EVP_PKEY *ca_key, *key;
	int rc = 0;

	memset(st, 0, sizeof(*st));
	if (nt_paths(c->dir, kpath, cpath, e) < 0 || fs_mkdir_p(c->dir, 0700, e) < 0 ||
	    load_ca(c, &ca, &ca_key, e) < 0)
		return -1;
	cert = read_cert(cpath);
	key = read_key(kpath);
	ERR_clear_error();
	if (!kept_fits(c, ca, cert, key, now)) {
		rc = renew(c, ca, ca_key, now, e);
		st->issued = rc == 0;
		X509_free(cert);
		cert = rc == 0 ? read_cert(cpath) : NULL;
	}
	if (rc == 0 && cert) {
		st->not_before = asn1_epoch(X509_get0_notBefore(cert));
		st->not_after = asn1_epoch(X509_get0_notAfter(cert));
	} else if (rc == 0) {
		rc = err_set(e, "%s: unreadable after writing it", cpath);
	}
	X509_free(cert);
	EVP_PKEY_free(key);
	X509_free(ca);
	EVP_PKEY_free(ca_key);
	return rc;
}

SSL_CTX *nt_server_context(const char *dir, struct err *e)
{
	char kpath[FS_PATH_MAX], cpath[FS_PATH_MAX];
	SSL_CTX *ctx;

	if (nt_paths(dir, kpath, cpath, e) < 0)
		return NULL;
	if (!(ctx = SSL_CTX_new(TLS_server_method()))) {
		ossl_fail(e, "TLS context");
		return NULL;
	}
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	if (SSL_CTX_use_certificate_chain_file(ctx, cpath) != 1 ||
	    SSL_CTX_use_PrivateKey_file(ctx, kpath, SSL_FILETYPE_PEM) != 1 || SSL_CTX_check_private_key(ctx) != 1) {
		ossl_fail(e, cpath);
		SSL_CTX_free(ctx);
		return NULL;
	}
	return ctx;
}
