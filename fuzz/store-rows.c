/*
 * Fuzz target: one transaction's payload, as bytes, in a log with a good
 * header and CRC, so that every input reaches the decoding of the record
 * and the search for each row's text inside it (src/store/record.c, st_find_row_spans;
 * json_skip). Opening must succeed or fail with a message. When it
 * succeeds, every row must read back from its span equal to what
 * json_parse makes of the payload (last put wins, a delete removes), and
 * again after a compaction (rows copied by their spans) and a reopen.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/fs.h"
#include "base/log.h"
#include "json/json.h"
#include "store/store.h"
#include "store-fuzz.h"
#include "store-log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void must(int cond)
{
	if (!cond)
		abort();
}

/* Every op of the payload agrees with the store: for each (table, id), the
 * last op decides. */
static void check_rows(struct st_db *db, const struct json *doc)
{
	const struct json *ops = json_get(doc, "ops");

	for (size_t i = 0; i < json_len(ops); i++) {
		const struct json *op = json_at(ops, i), *last = NULL;
		const char *table = json_get_str(op, "put") ? json_get_str(op, "put") : json_get_str(op, "del");
		const char *id = json_get_str(op, "id");
		const struct json *got;

		must(table && id);
		for (size_t j = i; j < json_len(ops); j++) {
			const struct json *o2 = json_at(ops, j);
			const char *t2 = json_get_str(o2, "put") ? json_get_str(o2, "put") : json_get_str(o2, "del");
			if (strcmp(t2, table) == 0 && strcmp(json_get_str(o2, "id"), id) == 0)
				last = o2;
		}
		got = st_get(db, table, id);
		if (json_get_str(last, "put"))
			must(got && json_equal(got, json_get(last, "row")));
		else
			must(got == NULL);
	}
	must(!st_failed(db));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *top = fuzz_setup("denv-fuzz-rows");
	struct buf dir = BUF_INIT, log = BUF_INIT, file = BUF_INIT;
	struct st_opts o = { .no_auto_compact = true };
	struct st_db *db;
	struct json *doc = NULL;
	struct json_limits lim = { ST_JSON_DEPTH_MAX + 8, ST_RECORD_MAX };
	unsigned char h[ST_HEADER_BYTES], rh[ST_RECORD_HEAD_BYTES];
	struct err e;
	int fd;

	if (size > ST_RECORD_MAX)
		return 0;
	buf_addf(&dir, "%s/db", top);
	buf_addf(&log, "%s/log", dir.data);
	if (fs_remove_all(dir.data, &e) < 0 || fs_mkdir_p(dir.data, 0700, &e) < 0)
		abort();
	stlog_header(h);
	stlog_record_head(rh, data, size);
	buf_add(&file, (const char *)h, sizeof(h));
	buf_add(&file, (const char *)rh, sizeof(rh));
	buf_add(&file, (const char *)data, size);
	fd = open(log.data, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, file.data, file.len) != (ssize_t)file.len)
		abort();
	close(fd);

	e.msg[0] = '\0';
	if (st_open(dir.data, &o, &db, &e) < 0) {
		must(e.msg[0] && !db);
		goto out;
	}
	if (json_parse((const char *)data, size, &lim, &doc, &e) < 0) {
		/* Not a record: open cut it as a torn tail, or it was too short. */
		struct st_stats s;
		st_stats(db, &s);
		must(s.live_rows == 0);
		st_close(db);
		goto out;
	}
	check_rows(db, doc);
	st_release(db);
	must(st_compact(db, &e) == 0);
	check_rows(db, doc);
	st_close(db);
	must(st_open(dir.data, &o, &db, &e) == 0);
	check_rows(db, doc);
	st_close(db);
out:
	json_free(doc);
	buf_release(&dir);
	buf_release(&log);
	buf_release(&file);
	return 0;
}
