/* Unit tests: the GitHub App's pure parts (cp/gh_app.c, cp/gh_tarball.c):
 * the RS256 JWT (verified here with the key's public half), GitHub's
 * installation token answer, one file out of a repository tarball (and the
 * archives that must be refused), and a branch's environment name. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include <openssl/evp.h>
#include <openssl/rsa.h>

#include "base/enc.h"
#include "base/str.h"
#include "cp/cp.h"
#include "tap.h"
#include "tar/tar.h"

static void test_jwt(void)
{
	EVP_PKEY *key = EVP_RSA_gen(2048);
	char jwt[CP_GH_JWT_MAX], *dot1, *dot2;
	struct buf claims = BUF_INIT, sig = BUF_INIT;
	struct json *c = NULL;
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	struct err e;

	ok(key != NULL, "an RSA key to sign with");
	ok(cp_gh_jwt(key, "4242", 1700000000, jwt, sizeof(jwt), &e) == 0, "the JWT is made");
	dot1 = strchr(jwt, '.');
	dot2 = dot1 ? strchr(dot1 + 1, '.') : NULL;
	ok(dot1 && dot2, "three parts");
	if (!dot1 || !dot2)
		goto out;
	enc_base64_decode(&claims, dot1 + 1, (size_t)(dot2 - dot1 - 1), ENC_BASE64URL, &e);
	json_parse(claims.data, claims.len, NULL, &c, &e);
	is_int(json_get_int(c, "iss", 0), 4242, "iss is the App id, as a number");
	is_int(json_get_int(c, "iat", 0), 1700000000 - CP_GH_JWT_SKEW_S, "iat is a minute back");
	is_int(json_get_int(c, "exp", 0), 1700000000 + CP_GH_JWT_TTL_S, "exp is within GitHub's ten minutes");
	enc_base64_decode(&sig, dot2 + 1, strlen(dot2 + 1), ENC_BASE64URL, &e);
	ok(EVP_DigestVerifyInit(md, NULL, EVP_sha256(), NULL, key) == 1 &&
		   EVP_DigestVerify(md, (unsigned char *)sig.data, sig.len, (unsigned char *)jwt,
				    (size_t)(dot2 - jwt)) == 1,
	   "the RS256 signature verifies with the public key");
	ok(cp_gh_jwt(key, "4242", 1700000000, jwt, 64, &e) < 0, "a JWT longer than its room is an error");
	ok(cp_gh_jwt(NULL, "4242", 1700000000, jwt, sizeof(jwt), &e) < 0, "no key: an error, not a crash");
out:
	json_free(c);
	buf_release(&claims);
	buf_release(&sig);
	EVP_MD_CTX_free(md);
	EVP_PKEY_free(key);
}

static void test_token_answer(void)
{
	char tok[CP_GH_TOKEN_MAX];
	int64_t exp = 0;
	struct err e;
	const char *good = "{\"token\":\"ghs_abc\",\"expires_at\":\"2026-12-02T13:00:00Z\",\"permissions\":{}}";

	ok(cp_gh_install_token_answer(201, good, strlen(good), tok, &exp, &e) == 0, "201 with a token is taken");
	is_str(tok, "ghs_abc", "the token");
	is_int(exp, 1796216400, "expires_at in unix seconds");
	ok(cp_gh_install_token_answer(401, "{\"message\":\"A JSON web token could not be decoded\"}", 51, tok, &exp,
				      &e) < 0 && strstr(e.msg, "HTTP 401: A JSON web token could not be decoded"),
	   "a 401 names GitHub's words: %s", e.msg);
	ok(cp_gh_install_token_answer(201, "{\"token\":\"a\\r\\nb\",\"expires_at\":\"2026-12-02T13:00:00Z\"}", 52,
				      tok, &exp, &e) < 0, "a token with a line break is refused");
	ok(cp_gh_install_token_answer(201, "{\"token\":\"ghs_a\"}", 17, tok, &exp, &e) < 0 &&
		   strstr(e.msg, "expires_at"), "no expires_at is refused");
	ok(cp_gh_install_token_answer(201, "[]", 2, tok, &exp, &e) < 0, "not an object is refused");
}

/* A gzip'd tar from the writer: GitHub's layout unless top is NULL. */
static void tarball(struct buf *gz, const char *const *files, const char *link, const char *target)
{
	struct buf raw = BUF_INIT;
	struct tar_writer *w = tar_writer_new_buf(&raw);
	struct tar_meta m = { 0 };
	uLongf n;
	struct err e;

	for (size_t i = 0; files[i]; i += 2) {
		if (str_has_suffix(files[i], "/"))
			tar_write_dir(w, files[i], &m, &e);
		else
			tar_write_file(w, files[i], &m, files[i + 1], strlen(files[i + 1]), &e);
	}
	if (link)
		tar_write_symlink(w, link, target, &m, &e);
	tar_writer_finish(w, &e);
	tar_writer_free(w);
	/* gzip, as GitHub sends: deflate with the gzip wrapper. */
	{
		z_stream z = { 0 };

		buf_reset(gz);
		buf_grow(gz, raw.len + 1024);
		deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
		z.next_in = (unsigned char *)raw.data;
		z.avail_in = (uInt)raw.len;
		z.next_out = (unsigned char *)gz->data;
		z.avail_out = (uInt)(raw.len + 1024);
		deflate(&z, Z_FINISH);
		n = z.total_out;
		deflateEnd(&z);
		buf_setlen(gz, n);
	}
	buf_release(&raw);
}

static void test_tarball(void)
{
	static const char *const repo[] = { "octo-ops-abc1234/", "", "octo-ops-abc1234/README", "hi\n",
					    "octo-ops-abc1234/docker-compose.yaml", "services: {}\n",
					    "octo-ops-abc1234/envs/ops/compose.yaml", "services: {a: {}}\n", NULL };
	static const char *const escape[] = { "octo-ops-abc1234/", "", "octo-ops-abc1234/../../etc/x", "x", NULL };
	static const char *const two_tops[] = { "a/x", "1", "b/docker-compose.yaml", "2", NULL };
	struct buf gz = BUF_INIT, out = BUF_INIT;
	struct err e;

	tarball(&gz, repo, NULL, NULL);
	ok(cp_gh_tarball_file(gz.data, gz.len, "docker-compose.yaml", &out, &e) == 0, "the root compose file");
	ok(out.len == 13 && memcmp(out.data, "services: {}\n", 13) == 0, "its bytes");
	ok(cp_gh_tarball_file(gz.data, gz.len, "./envs/ops/compose.yaml", &out, &e) == 0 &&
		   out.len == 18, "a compose_path below the root (with ./)");
	ok(cp_gh_tarball_file(gz.data, gz.len, "nosuch.yaml", &out, &e) < 0 && strstr(e.msg, "was not found"),
	   "a missing file: %s", e.msg);
	ok(cp_gh_tarball_file(gz.data, gz.len, "../docker-compose.yaml", &out, &e) < 0, "a path with .. is refused");
	ok(cp_gh_tarball_file(gz.data, gz.len, "/docker-compose.yaml", &out, &e) < 0, "an absolute path is refused");
	ok(cp_gh_tarball_file(gz.data, gz.len - 20, "envs/ops/compose.yaml", &out, &e) < 0, "a truncated tarball");
	ok(cp_gh_tarball_file("not gzip at all", 15, "x", &out, &e) < 0 && strstr(e.msg, "gzip"),
	   "not gzip: %s", e.msg);
	tarball(&gz, repo, "octo-ops-abc1234/envs/link", "ops");
	ok(cp_gh_tarball_file(gz.data, gz.len, "envs/link/compose.yaml", &out, &e) < 0 &&
		   strstr(e.msg, "is a link"), "a path through a symlinked directory is refused: %s", e.msg);
	tarball(&gz, repo, "octo-ops-abc1234/c.yaml", "/etc/passwd");
	ok(cp_gh_tarball_file(gz.data, gz.len, "c.yaml", &out, &e) < 0 && strstr(e.msg, "is a link"),
	   "a compose file that is a symlink is refused");
	ok(cp_gh_tarball_file(gz.data, gz.len, "README", &out, &e) == 0, "an unrelated link does not matter");
	tarball(&gz, escape, NULL, NULL);
	ok(cp_gh_tarball_file(gz.data, gz.len, "docker-compose.yaml", &out, &e) < 0 && strstr(e.msg, "escapes"),
	   "an entry with .. refuses the archive: %s", e.msg);
	tarball(&gz, two_tops, NULL, NULL);
	ok(cp_gh_tarball_file(gz.data, gz.len, "docker-compose.yaml", &out, &e) < 0 && strstr(e.msg, "top directory"),
	   "entries under two top directories: %s", e.msg);
	buf_release(&gz);
	buf_release(&out);
}

static void test_branch_env(void)
{
	char env[CP_NAME_MAX + 1], longb[200];

	cp_gh_branch_env("feature/x", env);
	is_str(env, "feature-x", "feature/x is feature-x");
	cp_gh_branch_env("Fix_2.0", env);
	is_str(env, "-ix-2-0", "every character outside [a-z0-9] is a dash");
	memset(longb, 'a', sizeof(longb) - 1);
	longb[sizeof(longb) - 1] = '\0';
	cp_gh_branch_env(longb, env);
	is_int(strlen(env), CP_NAME_MAX, "cut to a name's length");
}

int main(void)
{
	test_jwt();
	test_token_answer();
	test_tarball();
	test_branch_env();
	return tap_done();
}
