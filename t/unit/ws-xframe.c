/* Unit tests: the streamed exec's frames (ws/xframe.h): a table of frames
 * that must be refused, round trips of all 256 byte values, the worker's
 * pipe lines, and the length policy. Inputs are copied into exact-size
 * allocations so ASan catches an over-read. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ws/xframe.h"
#include "tap.h"

static int parse_exact(const char *text, struct xf_frame *f, struct err *e)
{
	size_t n = strlen(text);
	char *copy = malloc(n ? n : 1);
	int rc;

	memcpy(copy, text, n);
	rc = xf_parse(copy, n, f, e);
	free(copy);
	return rc;
}

static void bad_frames(void)
{
	static const struct {
		const char *text, *why;
	} cases[] = {
		{ "", "empty" },
		{ "[]", "not an object" },
		{ "{\"type\":\"exec.nope\"}", "unknown type" },
		{ "{\"type\":\"exec.out\",\"stream\":\"stdin\",\"seq\":0,\"data\":\"YQ==\"}", "stdin" },
		{ "{\"type\":\"exec.out\",\"stream\":\"stdout\",\"seq\":-1,\"data\":\"YQ==\"}", "negative seq" },
		{ "{\"type\":\"exec.out\",\"stream\":\"stdout\",\"seq\":\"0\",\"data\":\"YQ==\"}", "seq a string" },
		{ "{\"type\":\"exec.out\",\"stream\":\"stdout\",\"seq\":0,\"data\":\"\"}", "empty data" },
		{ "{\"type\":\"exec.out\",\"stream\":\"stdout\",\"seq\":0,\"data\":\"Y*==\"}", "not base64" },
		{ "{\"type\":\"exec.out\",\"stream\":\"stdout\",\"seq\":0}", "no data" },
		{ "{\"type\":\"exec.exit\"}", "exit without a code" },
		{ "{\"type\":\"exec.exit\",\"exit_code\":256}", "code over 255" },
		{ "{\"type\":\"exec.exit\",\"exit_code\":true}", "code a bool" },
		{ "{\"type\":\"exec.in\"}", "stdin without data or eof" },
		{ "{\"type\":\"exec.in\",\"data\":\"\"}", "empty stdin without eof" },
		{ "{\"type\":\"exec.in\",\"data\":7}", "stdin data a number" },
		{ "{\"type\":\"exec.in\",\"data\":\"Y*==\"}", "stdin not base64" },
		{ "{\"type\":\"exec.resize\",\"rows\":0,\"cols\":80}", "zero rows" },
		{ "{\"type\":\"exec.resize\",\"rows\":24}", "no cols" },
		{ "{\"type\":\"exec.resize\",\"rows\":24,\"cols\":10001}", "cols over XF_TTY_MAX" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct xf_frame f;
		struct err e;

		xf_frame_init(&f);
		err_clear(&e);
		ok(parse_exact(cases[i].text, &f, &e) < 0 && e.msg[0], "refused: %s (%s)", cases[i].why, e.msg);
		xf_frame_release(&f);
	}
}

/* The client's frames: built, then parsed back. */
static void client_frames(void)
{
	unsigned char all[256];
	struct xf_frame f;
	struct json *j;
	char *text;
	struct err e;

	for (int i = 0; i < 256; i++)
		all[i] = (unsigned char)i;
	xf_frame_init(&f);
	j = xf_in_json("cmd_1", all, sizeof(all), false);
	text = json_to_string(j, JSON_COMPACT);
	ok(parse_exact(text, &f, &e) == 0 && f.kind == XF_IN && !f.eof && f.data.len == 256 &&
	   memcmp(f.data.data, all, 256) == 0 && strcmp(f.command_id, "cmd_1") == 0,
	   "exec.in: all 256 byte values come back");
	free(text);
	json_free(j);
	j = xf_in_json(NULL, "", 0, true);
	text = json_to_string(j, JSON_COMPACT);
	ok(parse_exact(text, &f, &e) == 0 && f.kind == XF_IN && f.eof && f.data.len == 0, "exec.in: eof alone");
	free(text);
	json_free(j);
	ok(parse_exact("{\"type\":\"exec.in\",\"eof\":true}", &f, &e) == 0 && f.eof, "exec.in: eof without data");
	j = xf_resize_json(NULL, 40, 120);
	text = json_to_string(j, JSON_COMPACT);
	ok(parse_exact(text, &f, &e) == 0 && f.kind == XF_RESIZE && f.rows == 40 && f.cols == 120, "exec.resize");
	free(text);
	json_free(j);
	j = xf_kill_json("cmd_2");
	text = json_to_string(j, JSON_COMPACT);
	ok(parse_exact(text, &f, &e) == 0 && f.kind == XF_KILL && strcmp(f.command_id, "cmd_2") == 0, "exec.kill");
	free(text);
	json_free(j);
	xf_frame_release(&f);
}

static void too_long(void)
{
	struct buf b = BUF_INIT, d = BUF_INIT;
	struct xf_frame f;
	struct err e;

	/* One byte more than a chunk, as base64: refused before decoding. */
	for (size_t i = 0; i < XF_CHUNK_MAX + 3; i += 3)
		buf_adds(&d, "AAAA");
	buf_addf(&b, "{\"type\":\"exec.out\",\"stream\":\"stdout\",\"seq\":0,\"data\":\"%s\"}", d.data);
	xf_frame_init(&f);
	ok(xf_parse(b.data, b.len, &f, &e) < 0 && strstr(e.msg, "longer"), "data over XF_CHUNK_MAX refused");
	xf_frame_release(&f);
	buf_release(&b);
	buf_release(&d);
}

static void round_trip(void)
{
	unsigned char all[256];
	struct xf_frame f;
	struct json *j;
	char *text;
	struct err e;

	for (int i = 0; i < 256; i++)
		all[i] = (unsigned char)i;
	j = xf_out_json("cmd_1", XF_STDERR, 7, all, sizeof(all));
	text = json_to_string(j, JSON_COMPACT);
	xf_frame_init(&f);
	ok(xf_parse(text, strlen(text), &f, &e) == 0, "exec.out parses");
	is_int(f.kind, XF_OUT, "kind");
	is_int(f.stream, XF_STDERR, "stream");
	is_int(f.seq, 7, "seq");
	is_str(f.command_id, "cmd_1", "command_id");
	ok(f.data.len == 256 && memcmp(f.data.data, all, 256) == 0, "all 256 byte values intact");
	free(text);
	json_free(j);

	j = xf_exit_json(NULL, 124, true);
	text = json_to_string(j, JSON_COMPACT);
	ok(xf_parse(text, strlen(text), &f, &e) == 0 && f.kind == XF_EXIT && f.exit_code == 124 && f.timed_out,
	   "exec.exit round trip");
	free(text);
	json_free(j);

	j = xf_error_json(NULL, "no such service");
	text = json_to_string(j, JSON_COMPACT);
	ok(xf_parse(text, strlen(text), &f, &e) == 0 && f.kind == XF_ERROR, "exec.error round trip");
	is_str(f.error, "no such service", "error text");
	free(text);
	json_free(j);
	xf_frame_release(&f);
}

/* Bytes written as pipe lines come back as exec.out frames, chunked. */
static void pipe_lines(void)
{
	size_t n = XF_CHUNK_MAX + 10;
	unsigned char *data = malloc(n);
	char path[4096];
	struct buf got = BUF_INIT, file = BUF_INIT;
	char tmp[65536];
	ssize_t r;
	int fd, lines = 0, bad = 0;

	for (size_t i = 0; i < n; i++)
		data[i] = (unsigned char)(i * 7);
	snprintf(path, sizeof(path), "%s/pipe", tap_tmpdir());
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	ok(xf_pipe_write(fd, XF_STDOUT, data, n) == 0, "pipe lines written");
	lseek(fd, 0, SEEK_SET);
	while ((r = read(fd, tmp, sizeof(tmp))) > 0)
		buf_add(&file, tmp, (size_t)r);
	close(fd);
	for (char *p = file.data, *nl; (nl = memchr(p, '\n', file.len - (size_t)(p - file.data))); p = nl + 1) {
		struct json *j = xf_pipe_frame("cmd_2", lines, p, (size_t)(nl - p));
		struct xf_frame f;
		struct err e;

		xf_frame_init(&f);
		if (!j || xf_from_json(j, &f, &e) < 0 || f.seq != lines)
			bad++;
		else
			buf_add(&got, f.data.data, f.data.len);
		xf_frame_release(&f);
		json_free(j);
		lines++;
	}
	is_int(lines, 2, "a chunk and a bit make two lines");
	is_int(xf_pipe_lines(n), 2, "xf_pipe_lines counts them");
	is_int(xf_pipe_lines(0), 0, "no bytes, no lines");
	is_int(xf_pipe_lines(XF_CHUNK_MAX), 1, "a whole chunk is one line");
	is_int(bad, 0, "every line is a valid frame");
	ok(got.len == n && memcmp(got.data, data, n) == 0, "bytes intact through the pipe");
	ok(!xf_pipe_frame("c", 0, "\0363YQ==", 6), "stream digit 3 refused");
	ok(!xf_pipe_frame("c", 0, "x1YQ==", 6), "a progress line is not output");
	ok(!xf_pipe_frame("c", 0, "\0361", 2), "empty output refused");
	buf_release(&got);
	buf_release(&file);
	free(data);
}

int main(void)
{
	bad_frames();
	client_frames();
	too_long();
	round_trip();
	pipe_lines();
	return tap_done();
}
