/* xframe.c: the streamed exec's frames (xframe.h): checked on the way in,
 * built on the way out, and the worker's pipe lines inside denvd. */
#include <string.h>

#include "base/enc.h"
#include "base/str.h"
#include "base/sys.h"
#include "ws/xframe.h"

void xf_frame_init(struct xf_frame *f)
{
	memset(f, 0, sizeof(*f));
	buf_init(&f->data, XF_CHUNK_MAX);
}

void xf_frame_release(struct xf_frame *f)
{
	buf_release(&f->data);
}

static const char *stream_name(enum xf_stream s)
{
	return s == XF_STDERR ? "stderr" : "stdout";
}

static int parse_out(const struct json *j, struct xf_frame *f, struct err *e)
{
	const char *s = json_get_str(j, "stream");
	const struct json *seq = json_get(j, "seq"), *data = json_get(j, "data");

	if (str_eq(s, "stdout"))
		f->stream = XF_STDOUT;
	else if (str_eq(s, "stderr"))
		f->stream = XF_STDERR;
	else
		return err_set(e, "exec.out: stream must be \"stdout\" or \"stderr\"");
	if (!seq || seq->type != JSON_INT || seq->u.i < 0)
		return err_set(e, "exec.out: seq must be a number from 0");
	f->seq = seq->u.i;
	if (!data || data->type != JSON_STRING || data->u.str.len == 0)
		return err_set(e, "exec.out: data must be non-empty base64");
	/* Checked before decoding: a peer's length is not trusted. */
	if (data->u.str.len > enc_base64_len(XF_CHUNK_MAX, ENC_BASE64))
		return err_set(e, "exec.out: data longer than %zu bytes", XF_CHUNK_MAX);
	buf_reset(&f->data);
	if (enc_base64_decode(&f->data, data->u.str.s, data->u.str.len, ENC_BASE64, e) < 0)
		return err_prefix(e, "exec.out");
	return 0;
}

static int parse_in(const struct json *j, struct xf_frame *f, struct err *e)
{
	const struct json *data = json_get(j, "data");

	f->eof = json_get_bool(j, "eof", false);
	buf_reset(&f->data);
	if (!data && f->eof)
		return 0;
	if (!data || data->type != JSON_STRING || (data->u.str.len == 0 && !f->eof))
		return err_set(e, "exec.in: data must be base64 (empty only with eof)");
	if (data->u.str.len > enc_base64_len(XF_CHUNK_MAX, ENC_BASE64))
		return err_set(e, "exec.in: data longer than %zu bytes", XF_CHUNK_MAX);
	if (enc_base64_decode(&f->data, data->u.str.s, data->u.str.len, ENC_BASE64, e) < 0)
		return err_prefix(e, "exec.in");
	return 0;
}

static int parse_resize(const struct json *j, struct xf_frame *f, struct err *e)
{
	const struct json *r = json_get(j, "rows"), *c = json_get(j, "cols");

	if (!r || r->type != JSON_INT || r->u.i < 1 || r->u.i > XF_TTY_MAX || !c || c->type != JSON_INT ||
	    c->u.i < 1 || c->u.i > XF_TTY_MAX)
		return err_set(e, "exec.resize: rows and cols must be numbers from 1 to %d", XF_TTY_MAX);
	f->rows = (int)r->u.i;
	f->cols = (int)c->u.i;
	return 0;
}

int xf_from_json(const struct json *j, struct xf_frame *f, struct err *e)
{
	const char *type = json_get_str(j, "type"), *id = json_get_str(j, "command_id");
	const struct json *code;

	if (!j || j->type != JSON_OBJECT)
		return err_set(e, "exec frame: not a JSON object");
	if (id && str_copy(f->command_id, sizeof(f->command_id), id) < 0)
		return err_set(e, "exec frame: command_id too long");
	if (str_eq(type, "exec.out")) {
		f->kind = XF_OUT;
		return parse_out(j, f, e);
	}
	if (str_eq(type, "exec.exit")) {
		f->kind = XF_EXIT;
		code = json_get(j, "exit_code");
		if (!code || code->type != JSON_INT || code->u.i < -1 || code->u.i > 255)
			return err_set(e, "exec.exit: exit_code must be a number from -1 to 255");
		f->exit_code = (int)code->u.i;
		f->timed_out = json_get_bool(j, "timed_out", false);
		return 0;
	}
	if (str_eq(type, "exec.error")) {
		const char *msg = json_get_str(j, "error");

		f->kind = XF_ERROR;
		str_copy(f->error, sizeof(f->error), msg && *msg ? msg : "the exec stream failed without a reason");
		return 0;
	}
	if (str_eq(type, "exec.in")) {
		f->kind = XF_IN;
		return parse_in(j, f, e);
	}
	if (str_eq(type, "exec.resize")) {
		f->kind = XF_RESIZE;
		return parse_resize(j, f, e);
	}
	if (str_eq(type, "exec.kill")) {
		f->kind = XF_KILL;
		return 0;
	}
	return err_set(e, "exec frame: unknown type");
}

int xf_parse(const char *text, size_t len, struct xf_frame *f, struct err *e)
{
	struct json_limits lim = { 8, XF_FRAME_MAX };
	struct json *j = NULL;
	int rc;

	if (len > XF_FRAME_MAX)
		return err_set(e, "exec frame: larger than %zu bytes", XF_FRAME_MAX);
	if (json_parse(text, len, &lim, &j, e) < 0)
		return err_prefix(e, "exec frame");
	rc = xf_from_json(j, f, e);
	json_free(j);
	return rc;
}

static struct json *frame_new(const char *type, const char *id)
{
	struct json *f = json_new_object();

	json_object_set_str(f, "type", type);
	if (id && *id)
		json_object_set_str(f, "command_id", id);
	return f;
}

/* A frame's bytes go as base64 in its "data". */
static void set_data(struct json *f, const void *data, size_t n)
{
	struct buf b = BUF_INIT;

	enc_base64_encode(&b, data, n, ENC_BASE64);
	json_object_set(f, "data", json_new_strn(b.data, b.len));
	buf_release(&b);
}

struct json *xf_out_json(const char *id, enum xf_stream s, int64_t seq, const void *data, size_t n)
{
	struct json *f = frame_new("exec.out", id);

	json_object_set_str(f, "stream", stream_name(s));
	json_object_set_int(f, "seq", seq);
	set_data(f, data, n);
	return f;
}

struct json *xf_exit_json(const char *id, int exit_code, bool timed_out)
{
	struct json *f = frame_new("exec.exit", id);

	json_object_set_int(f, "exit_code", exit_code);
	json_object_set_bool(f, "timed_out", timed_out);
	return f;
}

struct json *xf_error_json(const char *id, const char *error)
{
	struct json *f = frame_new("exec.error", id);
	size_t n = error ? strlen(error) : 0;

	json_object_set(f, "error", json_new_strn(error ? error : "", n > XF_ERROR_MAX ? XF_ERROR_MAX : n));
	return f;
}

struct json *xf_in_json(const char *id, const void *data, size_t n, bool eof)
{
	struct json *f = frame_new("exec.in", id);

	set_data(f, data, n);
	if (eof)
		json_object_set_bool(f, "eof", true);
	return f;
}

struct json *xf_resize_json(const char *id, int rows, int cols)
{
	struct json *f = frame_new("exec.resize", id);

	json_object_set_int(f, "rows", rows);
	json_object_set_int(f, "cols", cols);
	return f;
}

struct json *xf_kill_json(const char *id)
{
	return frame_new("exec.kill", id);
}

struct json *xf_pipe_frame(const char *id, int64_t seq, const char *line, size_t n)
{
	struct buf raw = BUF_INIT;
	struct json *f = NULL;
	struct err e;

	if (n < 3 || line[0] != XF_PIPE_MARK || (line[1] != '1' && line[1] != '2') ||
	    n - 2 > enc_base64_len(XF_CHUNK_MAX, ENC_BASE64))
		return NULL;
	/* Decoded once to check it; the frame carries the same base64. */
	buf_init(&raw, XF_CHUNK_MAX);
	if (enc_base64_decode(&raw, line + 2, n - 2, ENC_BASE64, &e) == 0 && raw.len > 0)
		f = xf_out_json(id, line[1] == '1' ? XF_STDOUT : XF_STDERR, seq, raw.data, raw.len);
	buf_release(&raw);
	return f;
}

int xf_pipe_write(int fd, enum xf_stream s, const void *data, size_t n)
{
	const char *p = data;
	struct buf line = BUF_INIT;
	int rc = 0;

	buf_init(&line, XF_PIPE_LINE_MAX);
	while (n > 0 && rc == 0) {
		size_t take = n < XF_CHUNK_MAX ? n : XF_CHUNK_MAX;

		buf_reset(&line);
		buf_addch(&line, XF_PIPE_MARK);
		buf_addch(&line, s == XF_STDERR ? '2' : '1');
		enc_base64_encode(&line, p, take, ENC_BASE64);
		buf_addch(&line, '\n');
		rc = sys_write_all(fd, line.data, line.len);
		p += take;
		n -= take;
	}
	buf_release(&line);
	return rc < 0 ? -1 : 0;
}

size_t xf_pipe_lines(size_t n)
{
	return (n + XF_CHUNK_MAX - 1) / XF_CHUNK_MAX;
}
