/*
 * fuzz/tar.c: the tar reader over arbitrary input, fed in irregular chunks
 * (the event loop's sockets deliver any split), every entry's data consumed
 * and counted, every path put through the check extraction uses. When the
 * whole input is a valid archive, every entry is written again with our
 * writer and the copy must read back the same: a differential check of the
 * writer against the reader.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tar/tar.h"

struct seen {
	enum tar_type type;
	char *path, *link;
	uint64_t size, uid, gid;
	int64_t mtime;
	uint32_t mode;
};

#define FUZZ_MAX_ENTRIES 256

static void check(int cond)
{
	if (!cond)
		__builtin_trap();
}

/* Read all of data; record entries (up to max) if rec. 0 if the archive was complete. */
static int read_all(const uint8_t *data, size_t size, struct seen *rec, size_t *nrec,
		    struct tar_writer *w, int *wok, int irregular)
{
	struct tar_reader *r = tar_reader_new();
	struct err e;
	size_t pos = 0, step = 0, n = 0;
	uint64_t got = 0, want = 0;
	int rc = -1, in_entry = 0, ok = 1;

	while (pos < size) {
		/* chunk sizes from a tiny LCG over the input length: 1..1031 bytes */
		step = step * 1103515245u + 12345u + size;
		size_t chunk = irregular ? 1 + (step >> 8) % 1031 : size - pos;
		if (chunk > size - pos)
			chunk = size - pos;
		size_t off = 0;
		while (off < chunk) {
			struct tar_event ev;
			size_t used;
			int k = tar_reader_feed(r, data + pos + off, chunk - off, &used, &ev, &e);
			check(used <= chunk - off);
			off += used;
			if (k < 0) {
				check(e.msg[0] != '\0');
				goto out;
			}
			if (k == TAR_EV_ENTRY) {
				check(!in_entry || got == want);
				check(ev.entry && ev.entry->path[0]);
				tar_path_check(ev.entry->path, NULL, &e);
				if (ev.entry->type == TAR_HARDLINK)
					tar_path_check(ev.entry->linkpath, NULL, &e);
				in_entry = 1;
				got = 0;
				want = ev.entry->size;
				if (rec && n < FUZZ_MAX_ENTRIES) {
					rec[n].type = ev.entry->type;
					rec[n].path = strdup(ev.entry->path);
					rec[n].link = strdup(ev.entry->linkpath);
					rec[n].size = ev.entry->size;
					rec[n].uid = ev.entry->uid;
					rec[n].gid = ev.entry->gid;
					rec[n].mtime = ev.entry->mtime;
					rec[n].mode = ev.entry->mode;
					n++;
				}
				if (w && ok && tar_write_header(w, ev.entry, &e) < 0)
					ok = 0;
			} else if (k == TAR_EV_DATA) {
				check(in_entry && ev.len > 0 && got + ev.len <= want);
				got += ev.len;
				check(ev.remain == want - got);
				if (w && ok && tar_write_data(w, ev.data, ev.len, &e) < 0)
					ok = 0;
			} else {
				check(off == chunk);
			}
		}
		pos += chunk;
	}
	rc = tar_reader_finish(r, &e);
	check(rc < 0 ? e.msg[0] != '\0' : (!in_entry || got == want));
out:
	if (wok)
		*wok = ok;
	if (nrec)
		*nrec = n;
	tar_reader_free(r);
	return rc;
}

static void free_seen(struct seen *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(s[i].path);
		free(s[i].link);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct seen a[FUZZ_MAX_ENTRIES], b[FUZZ_MAX_ENTRIES];
	struct buf out;
	struct tar_writer *w;
	struct err e;
	size_t na = 0, nb = 0;
	int rc1, rc2, wok = 0;

	/* the same input whole and in pieces must give the same verdict */
	rc1 = read_all(data, size, NULL, NULL, NULL, NULL, 0);
	buf_init(&out, 4u << 20);
	w = tar_writer_new_buf(&out);
	rc2 = read_all(data, size, a, &na, w, &wok, 1);
	check(rc1 == rc2);
	/* everything the reader accepts, the writer can write */
	check(rc2 < 0 || wok);
	if (rc2 == 0 && na < FUZZ_MAX_ENTRIES) {
		check(tar_writer_finish(w, &e) == 0);
		check(read_all((const uint8_t *)out.data, out.len, b, &nb, NULL, NULL, 1) == 0);
		check(na == nb);
		for (size_t i = 0; i < na; i++) {
			check(a[i].type == b[i].type);
			check(strcmp(a[i].path, b[i].path) == 0);
			check(strcmp(a[i].link, b[i].link) == 0);
			check(a[i].size == b[i].size && a[i].mode == b[i].mode);
			check(a[i].uid == b[i].uid && a[i].gid == b[i].gid && a[i].mtime == b[i].mtime);
		}
	}
	free_seen(a, na);
	free_seen(b, nb);
	tar_writer_free(w);
	buf_release(&out);
	return 0;
}
