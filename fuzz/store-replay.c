/*
 * Fuzz target: arbitrary bytes as a store's log file. Opening must either
 * succeed or fail with a message, never crash, leak or hang. When it
 * succeeds, the store must take a commit, optionally compact, and reopen
 * (without repair) to the same number of rows: whatever open accepted or
 * repaired has to be a log it accepts again.
 *
 * The first input byte holds flags, the rest is the file:
 *   bit 0  prepend a valid header (so most inputs reach the records)
 *   bit 1  open with repair
 *   bit 2  compact after opening
 *   bit 3  recompute the CRC of every record that frames (with bit 0 the
 *          records start right after the header), so that mutated payloads
 *          reach the JSON decoding instead of stopping at the checksum
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include "base/buf.h"
#include "base/fs.h"
#include "base/log.h"
#include "json/json.h"
#include "store/store.h"
#include "store-fuzz.h"
#include "store-log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *top = fuzz_setup("denv-fuzz-store");
	struct buf dir = BUF_INIT, log = BUF_INIT;
	struct st_opts o = { .no_auto_compact = true };
	struct st_db *db;
	struct st_stats s1, s2;
	struct err e;
	unsigned flags = size ? data[0] : 0;
	int fd;

	if (size) {
		data++;
		size--;
	}
	buf_addf(&dir, "%s/db", top);
	buf_addf(&log, "%s/log", dir.data);
	if (fs_remove_all(dir.data, &e) < 0 || fs_mkdir_p(dir.data, 0700, &e) < 0)
		abort();
	fd = open(log.data, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		abort();
	if (flags & 1) {
		unsigned char h[ST_HEADER_BYTES];
		stlog_header(h);
		if (write(fd, h, sizeof(h)) != (ssize_t)sizeof(h))
			abort();
	}
	if (size) {
		uint8_t *copy = malloc(size);
		if (!copy)
			abort();
		memcpy(copy, data, size);
		if (flags & 8) {
			size_t off = (flags & 1) ? 0 : ST_HEADER_BYTES;
			while (off + 8 <= size) {
				uint32_t len = (uint32_t)copy[off] | (uint32_t)copy[off + 1] << 8 |
					       (uint32_t)copy[off + 2] << 16 | (uint32_t)copy[off + 3] << 24;
				uint32_t c;
				if (len > size - off - 8)
					break;
				c = (uint32_t)crc32(0, copy + off + 8, len);
				stlog_put_u32(copy + off + 4, c);
				off += 8 + (size_t)len;
			}
		}
		if (write(fd, copy, size) != (ssize_t)size)
			abort();
		free(copy);
	}
	close(fd);

	o.repair = flags & 2;
	e.msg[0] = '\0';
	if (st_open(dir.data, &o, &db, &e) < 0) {
		if (!e.msg[0] || db)
			abort();	/* a failure must say why */
		goto out;
	}
	{
		/* The store must accept a commit where replay left the file. */
		struct st_txn *t = st_begin(db);
		struct json *r = json_new_object();
		json_object_set_str(r, "TeamID", "t1");
		st_put(t, "fuzz", "zz-fuzz-row", r);
		if (st_commit(t, NULL, NULL, &e) < 0)
			abort();
	}
	if ((flags & 4) && st_compact(db, &e) < 0)
		abort();
	st_stats(db, &s1);
	st_close(db);
	o.repair = false;
	if (st_open(dir.data, &o, &db, &e) < 0) {
		fprintf(stderr, "reopen after a successful open failed: %s\n", e.msg);
		abort();
	}
	st_stats(db, &s2);
	if (s1.live_rows != s2.live_rows || !st_get(db, "fuzz", "zz-fuzz-row")) {
		fprintf(stderr, "reopen: %llu rows, before %llu\n", (unsigned long long)s2.live_rows,
			(unsigned long long)s1.live_rows);
		abort();
	}
	st_close(db);
out:
	buf_release(&dir);
	buf_release(&log);
	return 0;
}
