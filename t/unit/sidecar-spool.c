/* Unit tests: env.put spools (order, bounds, hand-over, expiry) and the
 * command log. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/enc.h"
#include "base/fs.h"
#include "sidecar/sidecar.h"
#include "tap.h"

static struct json *chunk(const char *id, int64_t seq, bool last, const void *p, size_t n)
{
	struct json *f = json_new_object();
	struct buf b = BUF_INIT;

	enc_base64_encode(&b, p, n, ENC_BASE64);
	json_object_set_str(f, "type", "chunk");
	json_object_set_str(f, "command_id", id);
	json_object_set_int(f, "seq", seq);
	json_object_set_bool(f, "last", last);
	json_object_set(f, "data", json_new_strn(b.data, b.len));
	buf_release(&b);
	return f;
}

static void feed(struct spools *s, const char *id, int64_t seq, bool last, const void *p, size_t n, int64_t now)
{
	struct json *f = chunk(id, seq, last, p, n);

	spools_chunk(s, f, now);
	json_free(f);
}

static void test_spools(const char *data)
{
	struct spools *s = spools_new(data);
	struct json *j;
	struct buf got = BUF_INIT;
	struct err e;
	char *mib = xcalloc(1, SC_CHUNK_BYTES);

	feed(s, "cmd_a", 0, false, "hello ", 6, 0);
	feed(s, "cmd_a", 1, true, "world", 5, 0);
	j = spools_take(s, "cmd_a");
	ok(j && json_get_bool(j, "complete", false) && json_get_int(j, "bytes", 0) == 11 &&
	   json_get_int(j, "chunks", 0) == 2, "two chunks spooled and complete");
	ok(j && fs_read_file(json_get_str(j, "path"), &got, 100, &e) == 0 && strcmp(got.data, "hello world") == 0,
	   "the spool file holds the archive");
	if (j)
		unlink(json_get_str(j, "path"));
	json_free(j);
	ok(spools_take(s, "cmd_a") == NULL, "taken once");

	feed(s, "cmd_b", 0, false, "x", 1, 0);
	feed(s, "cmd_b", 2, true, "y", 1, 0);
	j = spools_take(s, "cmd_b");
	ok(j && !json_get_bool(j, "complete", true) && strstr(json_get_str(j, "error"), "out of order") &&
	   json_get_int(j, "bytes", 0) == 1, "a gap marks the spool bad, keeping the count of what arrived");
	json_free(j);

	{
		struct json *f = chunk("cmd_c", 0, true, "x", 1);

		json_object_set_str(f, "data", "!!notbase64");
		spools_chunk(s, f, 0);
		json_free(f);
		j = spools_take(s, "cmd_c");
		ok(j && strstr(json_get_str(j, "error"), "base64"), "bad base64 marks it bad");
		json_free(j);
	}

	for (int i = 0; i < 32; i++)
		feed(s, "cmd_big", i, false, mib, SC_CHUNK_BYTES, 0);
	feed(s, "cmd_big", 32, true, "z", 1, 0);
	j = spools_take(s, "cmd_big");
	ok(j && strstr(json_get_str(j, "error"), "32 MiB") && json_get_int(j, "bytes", 0) == 32 << 20,
	   "past 32 MiB the rest is discarded");
	ok(j && !*json_get_str(j, "path"), "nothing of a refused archive is kept");
	json_free(j);

	feed(s, "cmd_1", 0, false, "1", 1, 0);
	feed(s, "cmd_2", 0, false, "2", 1, 0);
	feed(s, "cmd_3", 0, false, "3", 1, 0);
	feed(s, "cmd_4", 0, false, "4", 1, 0);
	feed(s, "cmd_5", 0, true, "5", 1, 0);
	j = spools_take(s, "cmd_5");
	ok(j && strstr(json_get_str(j, "error"), "too many"), "a fifth spool at once is refused");
	json_free(j);

	spools_sweep(s, SC_SPOOL_TTL_MS - 1);
	j = spools_take(s, "cmd_1");
	ok(j != NULL, "a young spool survives the sweep");
	if (j && *json_get_str(j, "path"))
		unlink(json_get_str(j, "path"));
	json_free(j);
	spools_sweep(s, SC_SPOOL_TTL_MS + 1);
	ok(spools_take(s, "cmd_2") == NULL, "spools whose command never came expire after 10 min");
	spools_drop(s, "cmd_3");
	feed(s, "../evil", 0, true, "x", 1, 0);
	ok(spools_take(s, "../evil") == NULL, "a chunk with an unsafe id is ignored");
	buf_release(&got);
	free(mib);
	spools_free(s);
}

static void test_cmdlog(const char *data)
{
	struct json *res = NULL, *f;
	struct err e;

	ok(cmdlog_read(data, "cmd_x", &res, &e) == 0, "no result yet");
	{
		struct json *p = json_new_object();

		json_object_set_int(p, "exit_code", 3);
		ok(cmdlog_write(data, "cmd_x", "env.exec", "env_1", true, p, NULL, &e) == 0, "result written");
	}
	ok(cmdlog_read(data, "cmd_x", &res, &e) == 1, "and read back");
	f = cmdlog_frame(res);
	ok(strcmp(json_get_str(f, "type"), "result") == 0 && json_get_bool(f, "ok", false) &&
	   json_get_int(json_get(f, "payload"), "exit_code", 0) == 3 && strcmp(json_get_str(f, "env_id"), "env_1") == 0,
	   "the result frame carries the stored payload");
	json_free(f);
	json_free(res);
	ok(cmdlog_write(data, "cmd_y", "env.put", "", false, NULL, "env.put: nope", &e) == 0 &&
	   cmdlog_read(data, "cmd_y", &res, &e) == 1, "a failure is logged too");
	f = cmdlog_frame(res);
	ok(!json_get_bool(f, "ok", true) && strcmp(json_get_str(f, "error"), "env.put: nope") == 0 &&
	   !json_get(f, "env_id"), "failure frame: error, no env_id when none");
	json_free(f);
	json_free(res);
	ok(cmdlog_write(data, "../x", "k", "", true, NULL, NULL, &e) < 0, "an unsafe id is never a path");
	{
		char path[2048];
		int64_t now = (int64_t)time(NULL);

		snprintf(path, sizeof(path), "%s/commands/cmd_z.cmd", data);
		fs_write_atomic(path, "{}", 2, 0600, &e);
		ok(cmdlog_prune(data, now) == 0, "fresh results are kept");
		ok(cmdlog_prune(data, now + SC_CMDLOG_RESULT_KEEP_S + 10) == 2 &&
		   cmdlog_read(data, "cmd_x", &res, &e) == 0 && fs_exists(path),
		   "results older than a week go; a running command's file stays");
	}
}

int main(void)
{
	char data[1024];

	snprintf(data, sizeof(data), "%s/data", tap_tmpdir());
	test_spools(data);
	test_cmdlog(data);
	return tap_done();
}
