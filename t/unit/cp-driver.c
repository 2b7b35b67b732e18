/* cp-driver.c: what the hosted provider drivers share (src/cp/driver.c):
 * a rendered env as an object, the background command's argv, output made
 * valid UTF-8, the provider's error in one line, env.put's archive split
 * into files (a link refused in the provider's name, the file cap) and a
 * tar of one file that splits back into the same bytes, a call's header
 * lines and their caps, a files route. Inputs that the
 * code reads by length are copied into exact-size allocations so ASan
 * catches a read past their end. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cp/cp.h"
#include "tap.h"
#include "tar/tar.h"

static struct json *parse(const char *text)
{
	struct json *j = NULL;
	struct err e;

	if (json_parse(text, strlen(text), NULL, &j, &e) < 0)
		return NULL;
	return j;
}

static void is_json(struct json *got, const char *want, const char *name)
{
	char *s = got ? json_to_string(got, JSON_COMPACT) : NULL;

	is_str(s ? s : "(null)", want, name);
	free(s);
	json_free(got);
}

static void test_env_and_command(void)
{
	struct json *o = parse("{\"A\":\"1\",\"N\":2}"), *a = parse("[\"A=1\",\"B=x=y\",\"=z\",\"C\",3]");
	struct json *cs = parse("\"echo hi\""), *ca = parse("[\"sleep\",\"9\"]"), *c0 = parse("[]"), *ce = parse("\"\"");

	is_json(cp_drv_env_object(o), "{\"A\":\"1\"}", "env object: strings kept, others left out");
	is_json(cp_drv_env_object(a), "{\"A\":\"1\",\"B\":\"x=y\"}", "env list: NAME=value, the first = splits");
	is_json(cp_drv_env_object(NULL), "{}", "no env: an empty object");
	is_json(cp_drv_background_argv(cs), "[\"/bin/sh\",\"-c\",\"sh -c \\\"$1\\\" >/dev/null 2>&1 </dev/null &\","
					    "\"sh\",\"echo hi\"]", "a string command: through a shell, detached");
	is_json(cp_drv_background_argv(ca), "[\"/bin/sh\",\"-c\",\"\\\"$@\\\" >/dev/null 2>&1 </dev/null &\",\"sh\","
					    "\"sleep\",\"9\"]", "an argv command: its words as the shell's arguments");
	ok(!cp_drv_background_argv(NULL) && !cp_drv_background_argv(c0) && !cp_drv_background_argv(ce) &&
	   !cp_drv_background_argv(o), "no command, an empty one, or an object: NULL");
	json_free(o);
	json_free(a);
	json_free(cs);
	json_free(ca);
	json_free(c0);
	json_free(ce);
}

static void test_text_and_says(void)
{
	struct buf b = BUF_INIT;
	struct http_client_resp r = HTTP_CLIENT_RESP_INIT;
	char out[ERR_MSG_MAX];
	const char *body = "{\"statusCode\":404,\"message\":\"file not found:\\n/x\"}";

	buf_add(&b, "ok \xff\xc3\xa9\xe2\x82", 8);
	is_json(cp_drv_text(&b), "\"ok \xef\xbf\xbd\xc3\xa9\xef\xbf\xbd\xef\xbf\xbd\"",
		"a byte that is not UTF-8, and a cut sequence: U+FFFD each");
	buf_release(&b);
	r.status = 404;
	buf_add(&r.body, body, strlen(body));
	cp_drv_provider_says(&r, out, sizeof(out));
	is_str(out, "404 Not Found: file not found: /x", "the provider's message, in one line");
	buf_release(&r.body);
	r.status = 500;
	buf_add(&r.body, "<html>", 6);
	cp_drv_provider_says(&r, out, sizeof(out));
	is_str(out, "500 Internal Server Error", "a body that is not JSON: the status only");
	buf_release(&r.body);
}

static void add_file(struct tar_writer *w, const char *path, const char *data)
{
	struct tar_meta m = { 0 };
	struct err e;

	m.mode = 0644;
	tar_write_file(w, path, &m, data, strlen(data), &e);
}

static void test_unpack(void)
{
	struct buf tar = BUF_INIT, one = BUF_INIT;
	struct tar_writer *w;
	struct tar_meta m = { 0 };
	struct cp_drv_file files[4] = { { 0 } };
	size_t n = 0;
	char msg[ERR_MSG_MAX];
	struct err e;

	buf_init(&tar, 1 << 20);
	w = tar_writer_new_buf(&tar);
	m.mode = 0755;
	tar_write_dir(w, "d", &m, &e);
	add_file(w, "a.txt", "alpha");
	add_file(w, "d/b.txt", "");
	tar_writer_finish(w, &e);
	tar_writer_free(w);
	is_int(cp_drv_unpack(&tar, "/work", "Daytona", files, 4, &n, msg, sizeof(msg)), 0, "a tar of two files and a dir");
	ok(n == 2 && strcmp(files[0].path, "/work/a.txt") == 0 && files[0].data.len == 5 &&
	   memcmp(files[0].data.data, "alpha", 5) == 0 && strcmp(files[1].path, "/work/d/b.txt") == 0 &&
	   files[1].data.len == 0, "  gives each file under the path with its bytes");
	cp_drv_files_release(files, n);
	n = 0;
	is_int(cp_drv_unpack(&tar, "/work", "Daytona", files, 1, &n, msg, sizeof(msg)), -1, "more files than the cap");
	is_str(msg, "more than 1 files in one archive", "  says so");
	cp_drv_files_release(files, n);
	n = 0;
	buf_release(&tar);
	buf_init(&tar, 1 << 20);
	w = tar_writer_new_buf(&tar);
	tar_write_symlink(w, "l", "/etc/passwd", &m, &e);
	tar_writer_finish(w, &e);
	tar_writer_free(w);
	is_int(cp_drv_unpack(&tar, "/w", "Daytona", files, 4, &n, msg, sizeof(msg)), -1, "a symlink");
	is_str(msg, "l: only files and directories travel through Daytona's files API", "  is refused by name");
	cp_drv_files_release(files, n);
	n = 0;
	is_int(cp_drv_tar_one(&one, "/work/in/x.bin", "\0\1\2", 3, &e), 0, "a tar of one file");
	is_int(cp_drv_unpack(&one, "/back", "E2B", files, 4, &n, msg, sizeof(msg)), 0, "  splits again");
	ok(n == 1 && strcmp(files[0].path, "/back/x.bin") == 0 && files[0].data.len == 3 &&
	   memcmp(files[0].data.data, "\0\1\2", 3) == 0, "  into the file by its last name, same bytes");
	cp_drv_files_release(files, n);
	buf_release(&one);
	buf_release(&tar);
}

static const struct {
	const char *target, *probe;
	const char *paths[3];	/* the archive's files, split with base "" */
	int rc;
	const char *want[3];	/* where they go, or the refusal */
} places[] = {
	{ "/w", "dir\n", { "/c.txt" }, 0, { "/w/c.txt" } },
	{ "/w/", "dir\n", { "/d/a", "/d/e/b" }, 0, { "/w/d/a", "/w/d/e/b" } },
	{ "/", "dir\n", { "/c.txt" }, 0, { "/c.txt" } },
	{ "/w/new.txt", "missing\n", { "/c.txt" }, 0, { "/w/new.txt" } },
	{ "/w/newdir/", "missing\n", { "/d/a", "/d/e/b" }, 0, { "/w/newdir/a", "/w/newdir/e/b" } },
	{ "/w/old.txt", "file", { "/c.txt" }, 0, { "/w/old.txt" } },
	{ "/w/new/", "missing", { "/c.txt" }, -1, { "/w/new/ does not exist and ends in /: a file cannot become a directory" } },
	{ "/w/old.txt", "file", { "/d/a" }, -1, { "/w/old.txt is a file: a directory cannot be copied onto it" } },
	{ "/no/x", "noparent\n", { "/c.txt" }, -1, { "the parent directory of /no/x does not exist" } },
	{ "/w", "", { "/c.txt" }, -1, { "could not tell what is at /w" } },
};

static void test_place(void)
{
	for (size_t i = 0; i < sizeof(places) / sizeof(places[0]); i++) {
		struct cp_drv_file files[3] = { { 0 } };
		char msg[ERR_MSG_MAX] = "", name[128];
		size_t n = 0;
		int rc;

		while (n < 3 && places[i].paths[n])
			files[n].path = xstrdup(places[i].paths[n]), n++;
		rc = cp_drv_place(places[i].target, places[i].probe, files, n, msg, sizeof(msg));
		snprintf(name, sizeof(name), "put %s onto %s (%.*s)", places[i].paths[0], places[i].target,
			 (int)strcspn(places[i].probe, "\n"), places[i].probe);
		is_int(rc, places[i].rc, name);
		for (size_t k = 0; rc == 0 && k < n; k++)
			is_str(files[k].path, places[i].want[k], "  lands where docker cp puts it");
		if (rc < 0)
			is_str(msg, places[i].want[0], "  refused as docker cp would");
		cp_drv_files_release(files, n);
	}
}

/* The kinds table, an exec's timeout and the multipart body the upload routes take. */
static void test_kinds_timeout_multipart(void)
{
	static const struct cp_drv_kind kinds[] = { { "env.create", 3 }, { "env.exec", 7 } };
	struct json *p = parse("{\"timeout_sec\":5}"), *none = parse("{}");
	struct buf body = BUF_INIT;
	char refused[128] = "", ctype[128];
	static const char data[] = "--denv-0000000000000001-0 in the file\r\n";

	is_int(cp_drv_kind_step(kinds, 2, "prime", "env.exec", refused, sizeof(refused)), 7, "a kind: its step");
	ok(cp_drv_kind_step(kinds, 2, "prime", "verify.run", refused, sizeof(refused)) == -1 &&
	   !strcmp(refused, "prime: verify.run: not supported on prime yet"), "another: -1, in targets.md's words");
	is_int(cp_drv_exec_timeout_ms(p, 120, 10000, 0), 15000, "exec: its timeout_sec plus the extra");
	is_int(cp_drv_exec_timeout_ms(none, 120, 10000, 0), 130000, "without one: the default plus the extra");
	is_int(cp_drv_exec_timeout_ms(p, 120, 10000, 9000), 9000, "within the command's own timeout");
	cp_drv_multipart(&body, ctype, sizeof(ctype), 1, data, sizeof(data) - 1);
	ok(!strcmp(ctype, "multipart/form-data; boundary=denv-0000000000000001-1"),
	   "a boundary the bytes hold is not used: the next one is");
	buf_addch(&body, '\0');
	ok(strstr(body.data, "--denv-0000000000000001-1\r\nContent-Disposition: form-data; name=\"file\"; "
			     "filename=\"file\"\r\n") == body.data && strstr(body.data, data) &&
	   strstr(body.data, "\r\n--denv-0000000000000001-1--\r\n"), "one part \"file\" with the bytes, closed");
	buf_release(&body);
	json_free(p);
	json_free(none);
}

static void test_headers_and_routes(void)
{
	struct cp_drv_headers hs = { 0 };
	struct buf path = BUF_INIT;
	char big[CP_DRV_HEADER_MAX + 8];

	cp_drv_header(&hs, "Authorization: Bearer %s", "tok");
	cp_drv_header(&hs, "X-Port: %d", 49983);
	ok(hs.n == 2 && !hs.cut && strcmp(hs.line[0], "Authorization: Bearer tok") == 0 &&
	   strcmp(hs.line[1], "X-Port: 49983") == 0, "header lines formatted in order");
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	cp_drv_header(&hs, "X-Big: %s", big);
	ok(hs.cut && hs.n == 2, "a line longer than CP_DRV_HEADER_MAX is not kept, and cuts the call");
	memset(&hs, 0, sizeof(hs));
	for (int i = 0; i <= CP_DRV_HEADERS_MAX; i++)
		cp_drv_header(&hs, "X-N: %d", i);
	ok(hs.cut && hs.n == CP_DRV_HEADERS_MAX, "one line more than CP_DRV_HEADERS_MAX cuts the call");
	cp_drv_file_route(&path, "/files?path=", "/work/a b&c");
	is_str(path.data, "/files?path=/work/a%20b%26c", "a file route: the path percent-encoded, its slashes kept");
	buf_release(&path);
}

int main(void)
{
	test_headers_and_routes();
	test_kinds_timeout_multipart();
	test_place();
	test_env_and_command();
	test_text_and_says();
	test_unpack();
	return tap_done();
}
