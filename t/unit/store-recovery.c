/* Unit tests: store start-up recovery: torn tails, mid-log corruption, repair, headers. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/fs.h"
#include "base/log.h"
#include "json/json.h"
#include "store/store.h"
#include "store-log.h"
#include "tap.h"

#define NTXN 10

static char *path2(const char *a, const char *b)
{
	struct buf p = BUF_INIT;

	buf_addf(&p, "%s/%s", a, b);
	return buf_detach(&p, NULL);
}

static off_t file_size(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 ? st.st_size : -1;
}

static void append_bytes(const char *path, const void *p, size_t n)
{
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT, 0600);

	if (fd < 0 || write(fd, p, n) != (ssize_t)n) {
		perror(path);
		exit(2);
	}
	close(fd);
}

static void write_at(const char *path, off_t off, const void *p, size_t n)
{
	int fd = open(path, O_WRONLY);

	if (fd < 0 || pwrite(fd, p, n, off) != (ssize_t)n) {
		perror(path);
		exit(2);
	}
	close(fd);
}

static unsigned char byte_at(const char *path, off_t off)
{
	unsigned char c = 0;
	int fd = open(path, O_RDONLY);

	if (fd < 0 || pread(fd, &c, 1, off) != 1) {
		perror(path);
		exit(2);
	}
	close(fd);
	return c;
}

static void copy_file(const char *from, const char *to)
{
	struct buf b = BUF_INIT;
	struct err e;

	if (fs_read_file(from, &b, 1 << 20, &e) < 0) {
		fprintf(stderr, "%s\n", e.msg);
		exit(2);
	}
	unlink(to);
	append_bytes(to, b.data, b.len);
	buf_release(&b);
}

/* A store with NTXN transactions, each putting a/<i> and b/count = i.
 * offs[i] gets the offset of transaction i's record; offs[NTXN] the end.
 * The mark as it was before the last commit is kept as mark.before-last:
 * put back, it makes the last record one whose fsync never completed
 * (never acknowledged), which is what a crash mid-write leaves. */
static char *make_store(const char *name, off_t offs[NTXN + 1])
{
	char *dir = path2(tap_tmpdir(), name);
	char *log = path2(dir, "log");
	struct st_db *db;
	struct err e;

	if (st_open(dir, NULL, &db, &e) < 0) {
		fprintf(stderr, "%s\n", e.msg);
		exit(2);
	}
	for (int i = 0; i < NTXN; i++) {
		struct st_txn *t = st_begin(db);
		struct json *r = json_new_object();
		struct json *c = json_new_object();
		char id[16];

		offs[i] = file_size(log);
		if (i == NTXN - 1) {
			char *m = path2(dir, "mark"), *keep = path2(dir, "mark.before-last");
			copy_file(m, keep);
			free(m);
			free(keep);
		}
		snprintf(id, sizeof(id), "r%02d", i);
		json_object_set_int(r, "i", i);
		json_object_set_str(r, "pad", "some padding so that records have a body");
		json_object_set_int(c, "n", i);
		st_put(t, "a", id, r);
		st_put(t, "b", "count", c);
		if (st_commit(t, NULL, NULL, &e) < 0) {
			fprintf(stderr, "%s\n", e.msg);
			exit(2);
		}
	}
	offs[NTXN] = file_size(log);
	st_close(db);
	free(log);
	return dir;
}

/* The store holds exactly transactions 0..n-1. */
static int holds_exactly(struct st_db *db, int n)
{
	int ok = (int)st_count(db, "a", NULL, NULL) == n;

	for (int i = 0; i < NTXN; i++) {
		char id[16];
		snprintf(id, sizeof(id), "r%02d", i);
		ok = ok && (st_get(db, "a", id) != NULL) == (i < n);
	}
	if (n > 0)
		ok = ok && json_get_int(st_get(db, "b", "count"), "n", -1) == n - 1;
	else
		ok = ok && st_get(db, "b", "count") == NULL;
	return ok;
}

/* Capture the store's log lines (stderr) during an open. */
static int open_capturing(const char *dir, const struct st_opts *o, struct st_db **db, struct err *e,
			  struct buf *out)
{
	char *cap = path2(tap_tmpdir(), "stderr.txt");
	int saved = dup(2), fd = open(cap, O_RDWR | O_CREAT | O_TRUNC, 0600), rc;

	fflush(stderr);
	dup2(fd, 2);
	rc = st_open(dir, o, db, e);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	close(fd);
	buf_reset(out);
	fs_read_file(cap, out, 1 << 20, e);
	/* One TAP line per check: the log lines are joined. */
	for (size_t i = 0; i < out->len; i++)
		if (out->data[i] == '\n')
			out->data[i] = ' ';
	free(cap);
	return rc;
}

static void test_torn_tails(void)
{
	static const struct {
		const char *name;
		size_t len;
		int kind;	/* 0 random, 1 zeros, 2 header claiming more than the file holds, 3 huge length */
	} cases[] = {
		{ "3 random bytes (short header)", 3, 0 },
		{ "7 random bytes", 7, 0 },
		{ "100 random bytes", 100, 0 },
		{ "5000 random bytes", 5000, 0 },
		{ "4096 zero bytes (delayed allocation after a crash)", 4096, 1 },
		{ "a header promising 1000 bytes, 50 present", 58, 2 },
		{ "a length over the record limit", 40, 3 },
	};
	struct buf logs = BUF_INIT;

	srand(42);
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		off_t offs[NTXN + 1];
		char name[32];
		char *dir, *log;
		unsigned char *junk = xcalloc(1, cases[c].len);
		struct st_db *db;
		struct err e;
		struct st_stats s;
		char want[128];

		snprintf(name, sizeof(name), "torn%zu", c);
		dir = make_store(name, offs);
		log = path2(dir, "log");
		if (cases[c].kind == 0)
			for (size_t i = 0; i < cases[c].len; i++)
				junk[i] = (unsigned char)rand();
		if (cases[c].kind == 2) {
			junk[0] = 0xe8;	/* 1000 */
			junk[1] = 0x03;
			memcpy(junk + 8, "{\"ops\":[", 8);
		}
		if (cases[c].kind == 3)
			memset(junk, 0x7f, 8);
		append_bytes(log, junk, cases[c].len);
		ok(open_capturing(dir, NULL, &db, &e, &logs) == 0, "%s: the store opens", cases[c].name);
		if (!db) {
			tap_diag("%s", e.msg);
			free(junk), free(log), free(dir);
			continue;
		}
		ok(holds_exactly(db, NTXN), "%s: every transaction intact", cases[c].name);
		st_stats(db, &s);
		is_int(s.truncated_bytes, cases[c].len, "truncated_bytes counts the tail");
		snprintf(want, sizeof(want), "torn tail at offset %lld", (long long)offs[NTXN]);
		ok(strstr(logs.data, want) && strstr(logs.data, " warn "), "%s: warning names the offset: %s",
		   cases[c].name, logs.data);
		st_close(db);
		is_int(file_size(log), offs[NTXN], "the file is cut back to the last good record");
		ok(st_open(dir, NULL, &db, &e) == 0 && holds_exactly(db, NTXN), "reopens cleanly");
		st_close(db);
		free(junk);
		free(log);
		free(dir);
	}

	/* A record cut short (the last write of a crash), and a bad CRC in the
	 * last record: both torn tails when that write was never acknowledged
	 * (the mark from before it), the earlier transactions kept. */
	for (int k = 0; k < 2; k++) {
		off_t offs[NTXN + 1];
		char *dir = make_store(k ? "tornlastcrc" : "tornlastcut", offs);
		char *log = path2(dir, "log");
		char *mark = path2(dir, "mark"), *before = path2(dir, "mark.before-last");
		struct st_db *db;
		struct err e;

		copy_file(before, mark);
		free(mark);
		free(before);

		if (k == 0) {
			if (truncate(log, offs[NTXN] - 5) < 0)
				perror("truncate");
		} else {
			unsigned char b = byte_at(log, offs[NTXN - 1] + 20) ^ 0x01;
			write_at(log, offs[NTXN - 1] + 20, &b, 1);
		}
		ok(open_capturing(dir, NULL, &db, &e, &logs) == 0 && holds_exactly(db, NTXN - 1),
		   k ? "a bad CRC in the last record: dropped, the rest kept" :
		       "the last record cut short: dropped, the rest kept");
		ok(strstr(logs.data, k ? "bad crc" : "incomplete record") != NULL, "the warning says why: %s", logs.data);
		st_close(db);
		is_int(file_size(log), offs[NTXN - 1], "file cut at the last record's start");
		free(log);
		free(dir);
	}
	buf_release(&logs);
}

static void test_mid_corruption(void)
{
	static const struct {
		const char *name;
		int txn;	/* which record */
		int where;	/* byte offset inside it */
		const char *why;
	} cases[] = {
		{ "a flipped byte in a payload", 3, 30, "bad crc" },
		{ "a flipped byte in a CRC", 5, 5, "bad crc" },
		{ "a length over the limit", 2, 3, "bad length" },
		{ "a length pointing past the next record", 0, 1, "bad crc" },
		{ "the first record", 0, 12, "bad crc" },
	};
	struct buf logs = BUF_INIT;

	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		off_t offs[NTXN + 1], bad;
		char name[32], want[160];
		char *dir, *log;
		struct st_db *db;
		struct err e;
		struct st_opts o = { .repair = true };
		unsigned char b;
		DIR *d;
		struct dirent *de;
		char *aside = NULL;

		snprintf(name, sizeof(name), "mid%zu", c);
		dir = make_store(name, offs);
		log = path2(dir, "log");
		bad = offs[cases[c].txn];
		b = byte_at(log, bad + cases[c].where) ^ (cases[c].where == 3 ? 0x40 : 0x04);
		write_at(log, bad + cases[c].where, &b, 1);

		ok(st_open(dir, NULL, &db, &e) == -1 && db == NULL, "%s: start-up refused", cases[c].name);
		snprintf(want, sizeof(want), "corrupt record at offset %lld (%s); start with -db-repair to keep the %d "
			 "transactions before it", (long long)bad, cases[c].why, cases[c].txn);
		ok(strstr(e.msg, want) != NULL, "%s: the error names the offset and what repair keeps: %s",
		   cases[c].name, e.msg);
		is_int(file_size(log), offs[NTXN], "the log is left untouched");

		ok(open_capturing(dir, &o, &db, &e, &logs) == 0, "%s: -db-repair opens", cases[c].name);
		ok(db && holds_exactly(db, cases[c].txn), "the transactions before the bad record are kept");
		ok(strstr(logs.data, "repaired") != NULL, "repair is logged: %s", logs.data);
		st_close(db);
		is_int(file_size(log), bad, "the log ends where the bad record began");
		d = opendir(dir);
		while (d && (de = readdir(d)))
			if (strncmp(de->d_name, "log.corrupt-", 12) == 0)
				aside = path2(dir, de->d_name);
		if (d)
			closedir(d);
		ok(aside != NULL, "the rest was moved aside to %s", aside ? aside : "(nothing)");
		if (aside) {
			snprintf(want, sizeof(want), "log.corrupt-%lld-", (long long)bad);
			ok(strstr(aside, want) != NULL, "its name carries the offset");
			is_int(file_size(aside), offs[NTXN] - bad, "and it holds every byte from there to the end");
		}
		ok(st_open(dir, NULL, &db, &e) == 0 && holds_exactly(db, cases[c].txn), "a plain open works afterwards");
		st_close(db);
		free(aside);
		free(log);
		free(dir);
	}
	buf_release(&logs);
}

/* Write a record with a valid CRC around an arbitrary payload. */
static void append_record(const char *log, const char *payload)
{
	size_t n = strlen(payload);
	unsigned char h[ST_RECORD_HEAD_BYTES];

	stlog_record_head(h, payload, n);
	append_bytes(log, h, sizeof(h));
	append_bytes(log, payload, n);
}

static void test_headers_and_leftovers(void)
{
	off_t offs[NTXN + 1];
	char *dir = make_store("hdr", offs), *log = path2(dir, "log");
	char *tmp = path2(dir, "log.compact"), *newp = path2(dir, "log.new");
	struct st_db *db;
	struct err e;
	struct buf logs = BUF_INIT;
	unsigned char b;

	append_bytes(tmp, "half a compaction", 17);
	append_bytes(newp, "half a creation", 15);
	ok(st_open(dir, NULL, &db, &e) == 0 && holds_exactly(db, NTXN), "leftover temp files do not disturb open");
	ok(!fs_exists(tmp) && !fs_exists(newp), "and are removed");
	st_close(db);

	/* A well-framed record that does not decode is not a torn tail: it
	 * was written whole, so dropping it silently could lose data. */
	append_record(log, "{\"ops\":[{\"put\":\"a\",\"id\":\"x\"}]}");
	ok(st_open(dir, NULL, &db, &e) == -1 && strstr(e.msg, "undecodable transaction"),
	   "an undecodable record at the tail refuses start-up: %s", e.msg);
	if (truncate(log, offs[NTXN]) < 0)
		perror("truncate");
	append_record(log, "{\"ops\":[]} junk");
	ok(st_open(dir, NULL, &db, &e) == -1 && strstr(e.msg, "undecodable"), "bad JSON in a good frame: %s", e.msg);
	if (truncate(log, offs[NTXN]) < 0)
		perror("truncate");
	append_record(log, "{\"ops\":[]}");
	ok(st_open(dir, NULL, &db, &e) == 0 && holds_exactly(db, NTXN), "an empty transaction record is fine");
	st_close(db);

	b = byte_at(log, 2) ^ 0x20;
	write_at(log, 2, &b, 1);
	ok(st_open(dir, NULL, &db, &e) == -1 && strstr(e.msg, "not a denv store log"), "bad magic: %s", e.msg);
	b ^= 0x20;
	write_at(log, 2, &b, 1);
	b = 2;
	write_at(log, 8, &b, 1);
	ok(st_open(dir, NULL, &db, &e) == -1 && strstr(e.msg, "header corrupt"), "bad header crc: %s", e.msg);
	free(log);
	free(dir);

	/* A header that never finished (creation is atomic, but not every file
	 * system orders data before the rename): an empty store, with a warning. */
	dir = path2(tap_tmpdir(), "hdr2");
	log = path2(dir, "log");
	fs_mkdir_p(dir, 0700, &e);
	append_bytes(log, "denvs", 5);
	ok(open_capturing(dir, NULL, &db, &e, &logs) == 0 && st_count(db, "a", NULL, NULL) == 0,
	   "a header prefix opens as an empty store");
	ok(strstr(logs.data, "incomplete header") != NULL, "with a warning: %s", logs.data);
	st_close(db);
	is_int(file_size(log), ST_HEADER_BYTES, "the header is completed");
	if (truncate(log, 0) < 0)
		perror("truncate");
	ok(open_capturing(dir, NULL, &db, &e, &logs) == 0, "an empty file opens as an empty store");
	st_close(db);
	if (truncate(log, 0) < 0)
		perror("truncate");
	append_bytes(log, "hello", 5);
	ok(st_open(dir, NULL, &db, &e) == -1 && strstr(e.msg, "not a denv store log"), "a short foreign file is refused: %s",
	   e.msg);
	buf_release(&logs);
	free(log);
	free(tmp);
	free(newp);
	free(dir);
}

int main(void)
{
	log_set_level(LOG_WARN);
	test_torn_tails();
	test_mid_corruption();
	test_headers_and_leftovers();
	return tap_done();
}
