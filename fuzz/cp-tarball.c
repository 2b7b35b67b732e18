/*
 * fuzz/cp-tarball.c: cp_gh_tarball_file, the reader of GitHub's repository
 * tarballs (cp/gh_tarball.c), on any bytes. The first byte picks the form:
 * odd, the rest is a tar that is gzip'd here first (so the fuzzer reaches
 * the tar reader); even, the rest is the download itself. Whatever arrives,
 * the call returns 0 with at most CP_GH_COMPOSE_MAX bytes, or -1 with a
 * message; it never crashes or reads out of bounds.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "cp/cp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void must(int cond)
{
	if (!cond)
		abort();	/* the fuzzer's way to report a finding */
}

/* data gzip'd into a malloc'd block (*n its length). */
static unsigned char *gzip_of(const uint8_t *data, size_t size, size_t *n)
{
	z_stream z;
	size_t cap = compressBound((uLong)size) + 64;
	unsigned char *out = malloc(cap);

	memset(&z, 0, sizeof(z));
	must(out && deflateInit2(&z, 1, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK);
	z.next_in = (unsigned char *)data;
	z.avail_in = (uInt)size;
	z.next_out = out;
	z.avail_out = (uInt)cap;
	must(deflate(&z, Z_FINISH) == Z_STREAM_END);
	*n = z.total_out;
	deflateEnd(&z);
	return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct buf out = BUF_INIT;
	unsigned char *in;
	size_t n;
	struct err e;
	int rc;

	if (size < 1)
		return 0;
	if (data[0] & 1) {
		in = gzip_of(data + 1, size - 1, &n);
	} else {
		n = size - 1;
		in = malloc(n ? n : 1);	/* its own allocation: ASan sees overreads */
		memcpy(in, data + 1, n);
	}
	buf_init(&out, CP_GH_COMPOSE_MAX);
	rc = cp_gh_tarball_file(in, n, "docker-compose.yaml", &out, &e);
	must(rc == 0 || rc == -1);
	must(rc == -1 ? e.msg[0] != '\0' : out.len <= CP_GH_COMPOSE_MAX);
	buf_release(&out);
	free(in);
	return 0;
}
