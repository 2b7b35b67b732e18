/*
 * xframe.h: the frames of a streamed exec, one format for the hub (denvd ->
 * denv-cp), the client stream (denv-cp -> denv, GET /v1/envs/{env}/exec/stream)
 * and the worker's pipe inside denvd. Written once here, fuzzed
 * (fuzz/ws-xframe.c) and unit-tested (t/unit/ws-xframe.c).
 *
 * Frames are JSON objects (text WebSocket messages):
 *   {"type":"exec.out","command_id":ID,"stream":"stdout"|"stderr","seq":N,"data":B64}
 *       data: standard base64 of 1 to XF_CHUNK_MAX bytes of the command's
 *       output, as the process wrote them (NUL and non-UTF-8 intact). seq
 *       counts from 0 across both streams, so the receiver knows the order
 *       and notices a lost frame.
 *   {"type":"exec.exit","command_id":ID,"exit_code":N,"timed_out":BOOL}
 *       the command ended (timed_out: it ran past its timeout and was killed).
 *   {"type":"exec.error","command_id":ID,"error":TEXT}
 *       it could not be run, or the stream broke; the last frame.
 * The other way (client -> denv-cp -> denvd), while the command runs:
 *   {"type":"exec.in","command_id":ID,"data":B64,"eof":BOOL}
 *       bytes for the command's stdin (data may be "" with eof true: the
 *       end of stdin; at most XF_CHUNK_MAX bytes per frame);
 *   {"type":"exec.resize","command_id":ID,"rows":N,"cols":N}
 *       its TTY's new size (1 to XF_TTY_MAX each);
 *   {"type":"exec.kill","command_id":ID}
 *       kill it (its client went away, or asked).
 * command_id is optional on the client stream. Policy on every length: a
 * frame is at most XF_FRAME_MAX bytes of text; data decodes to at most
 * XF_CHUNK_MAX bytes; error text is cut to XF_ERROR_MAX bytes.
 *
 * Inside denvd the worker hands chunks to the agent on its stdout, next to
 * its progress lines, as one line each: XF_PIPE_MARK, '1' (stdout) or '2'
 * (stderr), the base64, '\n'. The agent numbers them and sends exec.out.
 */
#ifndef DENV_WS_XFRAME_H
#define DENV_WS_XFRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/err.h"
#include "json/json.h"

/* Raw output bytes per exec.out frame. */
#define XF_CHUNK_MAX ((size_t)32 << 10)
/* Largest frame text: the base64 of a chunk plus the members around it. */
#define XF_FRAME_MAX ((size_t)64 << 10)
/* Longest error text carried in exec.error. */
#define XF_ERROR_MAX 1024
/* First byte of a worker pipe line that carries output, not progress. */
#define XF_PIPE_MARK '\036'
/* Longest worker pipe line (mark, stream digit, base64, newline). */
#define XF_PIPE_LINE_MAX (XF_FRAME_MAX)

/* Largest TTY side in exec.resize. */
#define XF_TTY_MAX 10000

enum xf_kind { XF_OUT, XF_EXIT, XF_ERROR, XF_IN, XF_RESIZE, XF_KILL };
enum xf_stream { XF_STDOUT = 1, XF_STDERR = 2 };

struct xf_frame {
	enum xf_kind kind;
	enum xf_stream stream;	/* OUT */
	int64_t seq;		/* OUT */
	struct buf data;	/* OUT, IN: the decoded bytes (capped at XF_CHUNK_MAX) */
	bool eof;		/* IN */
	int rows, cols;		/* RESIZE */
	int exit_code;		/* EXIT */
	bool timed_out;		/* EXIT */
	char error[XF_ERROR_MAX + 1];	/* ERROR */
	char command_id[64];	/* "" when absent */
};

void xf_frame_init(struct xf_frame *f);
void xf_frame_release(struct xf_frame *f);

/* Check a parsed frame and fill f. 0, or -1 with why in e (unknown type,
 * a member missing or of the wrong type, data not base64 or too long). */
int xf_from_json(const struct json *j, struct xf_frame *f, struct err *e);
/* The same from frame text (at most XF_FRAME_MAX bytes). */
int xf_parse(const char *text, size_t len, struct xf_frame *f, struct err *e);

/* New frames (owned by the caller); id may be NULL. data: n <= XF_CHUNK_MAX. */
struct json *xf_out_json(const char *id, enum xf_stream s, int64_t seq, const void *data, size_t n);
struct json *xf_exit_json(const char *id, int exit_code, bool timed_out);
struct json *xf_error_json(const char *id, const char *error);
struct json *xf_in_json(const char *id, const void *data, size_t n, bool eof);
struct json *xf_resize_json(const char *id, int rows, int cols);
struct json *xf_kill_json(const char *id);

/* A worker pipe line (without its '\n', starting with XF_PIPE_MARK) as an
 * exec.out frame numbered seq. NULL if the line is malformed. */
struct json *xf_pipe_frame(const char *id, int64_t seq, const char *line, size_t n);
/* Write n bytes of stream s to fd as pipe lines of at most XF_CHUNK_MAX
 * bytes each. 0, or -1 (errno) when the write fails. */
int xf_pipe_write(int fd, enum xf_stream s, const void *data, size_t n);
/* How many lines xf_pipe_write would write for n bytes. */
size_t xf_pipe_lines(size_t n);

#endif
