/* Unit tests: the phase lines of --wait and deployment watch (wait.c): long
 * evidence is cut unless verbose, a failed phase's stderr follows its error
 * line by line. */
#include <string.h>

#include "cli/cli.h"
#include "json/json.h"
#include "tap.h"

static struct json *doc_of(const char *phase_json)
{
	struct buf b = BUF_INIT;
	struct json *d = NULL;
	struct err e;

	buf_addf(&b, "{\"deployment\":{\"ID\":\"dep_1\",\"Status\":\"running\"},\"phases\":[%s]}", phase_json);
	if (json_parse(b.data, b.len, NULL, &d, &e) < 0)
		tap_diag("bad case: %s", e.msg);
	buf_release(&b);
	return d;
}

/* The text one fresh watch prints for one phase. */
static void lines_of(const char *phase_json, bool verbose, struct buf *out)
{
	struct cli_watch w = { 0 };
	struct json *d = doc_of(phase_json);

	w.verbose = verbose;
	buf_reset(out);
	cli_watch_print(&w, d, out);
	cli_watch_release(&w);
	json_free(d);
}

static void long_evidence(void)
{
	struct buf ph = BUF_INIT, out = BUF_INIT, want = BUF_INIT;
	char digest[301];

	memset(digest, 'a', sizeof(digest) - 1);
	digest[sizeof(digest) - 1] = '\0';
	buf_addf(&ph, "{\"Name\":\"prepare\",\"Status\":\"ok\",\"Evidence\":{\"digests\":{\"db\":\"%s\"}},\"Error\":\"\"}",
		 digest);
	lines_of(ph.data, false, &out);
	ok(strstr(out.data, "...\n") && !strstr(out.data, digest), "without -v long evidence is cut with ...");
	is_int((long long)strlen(out.data), (long long)(strlen("  prepare    ok        ") + CLI_WAIT_DETAIL_MAX + 4),
	       "  at CLI_WAIT_DETAIL_MAX characters");
	lines_of(ph.data, true, &out);
	buf_addf(&want, "  prepare    ok        {\"digests\":{\"db\":\"%s\"}}\n", digest);
	is_str(out.data, want.data, "with -v the evidence is whole");
	buf_release(&ph);
	buf_release(&out);
	buf_release(&want);
}

static void failed_output(void)
{
	const char *warm = "{\"Name\":\"warm\",\"Status\":\"failed\",\"Evidence\":{\"exit\":2,"
			   "\"stderr\":\"psql: error: one\\nsecond line\\n\"},\"Error\":\"warm command exited 2: second line\"}";
	const char *quiet = "{\"Name\":\"warm\",\"Status\":\"failed\",\"Evidence\":{\"exit\":126,\"stderr\":\"\","
			    "\"stdout\":\"OCI runtime exec failed\"},\"Error\":\"warm command exited 126: OCI runtime exec failed\"}";
	struct buf out = BUF_INIT;

	lines_of(warm, false, &out);
	is_str(out.data,
	       "  warm       failed    warm command exited 2: second line\n"
	       "             | psql: error: one\n"
	       "             | second line\n",
	       "a failed phase: its error, then its stderr line by line");
	lines_of(quiet, false, &out);
	is_str(out.data,
	       "  warm       failed    warm command exited 126: OCI runtime exec failed\n"
	       "             | OCI runtime exec failed\n",
	       "empty stderr: its stdout instead");
	lines_of(warm, true, &out);
	ok(strstr(out.data, "             evidence: {\"exit\":2,\"stderr\":\"psql: error: one\\nsecond line\\n\"}\n") != NULL,
	   "with -v a failed phase's evidence follows too");
	lines_of("{\"Name\":\"place\",\"Status\":\"failed\",\"Evidence\":{},\"Error\":\"no host\"}", true, &out);
	is_str(out.data, "  place      failed    no host\n", "a failed phase without evidence: just the error");
	buf_release(&out);
}

int main(void)
{
	long_evidence();
	failed_output();
	return tap_done();
}
