/*
 * driver.c: what the hosted provider drivers (driver_e2b.c,
 * driver_daytona.c, driver_prime.c) do alike: an operation's start from the
 * provider's table (struct cp_drv_provider) and its life to the one answer,
 * the calls (headers, URL, JSON bodies) and their answers, the waits,
 * env.destroy whole, env.put's archive split into files and sent one at a
 * time (the providers' files APIs take one file each), env.get's file handed
 * back as a tar of it, the environment's variables as an object, the
 * service's command started in the background, output as valid UTF-8, and
 * the provider's error message in one line.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/str.h"
#include "base/utf8.h"
#include "cp/cp.h"
#include "tar/tar.h"

#define DRV_ENV_KEY_MAX 256	/* one variable's name */
#define DRV_TOKEN_MAX 200	/* a token that fits a header line */
#define DRV_PATH_MAX 1024	/* a call's path under its base URL */

/* Fill op's common part; timeout_ms is CP_PROVIDER_TIMEOUT_MS, or the
 * caller's when that is shorter. */
static void drv_init(struct cp_drv_op *op, const struct cp_drv_provider *drv, struct cp *cp, const char *kind,
		     const char *env_id, const char *token, const struct json *payload, int64_t timeout_ms, cp_drv_fn fn,
		     void *arg)
{
	op->drv = drv;
	op->cp = cp;
	op->provider = drv->name;
	str_copy(op->env_id, sizeof(op->env_id), env_id ? env_id : "");
	str_copy(op->kind, sizeof(op->kind), kind);
	str_copy(op->token, sizeof(op->token), token);
	op->payload = payload ? json_dup(payload) : json_new_object();
	op->timeout_ms = CP_PROVIDER_TIMEOUT_MS;
	if (timeout_ms > 0 && timeout_ms < op->timeout_ms)
		op->timeout_ms = timeout_ms;
	op->started_ns = clock_now_ns();
	buf_init(&op->out, 0);
	op->fn = fn;
	op->arg = arg;
}

/* The cloud's token, or NULL with refused filled when it cannot be sent. */
static const char *drv_token(const struct json *cloud, const char *provider, const char *kind, char *refused, size_t n)
{
	const char *token = json_get_str(json_get(cloud, "Config"), "token");

	if (!token || !*token || strcspn(token, "\r\n") != strlen(token) || strlen(token) >= DRV_TOKEN_MAX) {
		snprintf(refused, n, "%s: %s: the target's cloud has no usable token", provider, kind);
		return NULL;
	}
	return token;
}

static void drv_free(struct cp_drv_op *op)
{
	ev_timer_stop(op->cp->ev, &op->timer);
	if (op->call)
		http_acall_cancel(op->call);
	json_free(op->payload);
	json_free(op->result);
	buf_release(&op->out);
	memset(op->token, 0, sizeof(op->token));
	memset(op->secret, 0, sizeof(op->secret));
	cp_drv_files_release(op->files, op->nfiles);
	free(op);
}

static void deliver(struct ev *ev, void *arg)
{
	struct cp_drv_op *op = arg;

	(void)ev;
	op->fn(op->cp, op->ok, op->ok ? NULL : op->error, op->result, op->out.len ? &op->out : NULL, op->arg);
	drv_free(op);
}

void cp_drv_done(struct cp_drv_op *op, bool ok, struct json *result)
{
	op->ok = ok;
	if (result != op->result)
		json_free(op->result);
	op->result = result;
	ev_timer_start(op->cp->ev, &op->timer, 0, deliver, op);
}

void cp_drv_fail(struct cp_drv_op *op, const char *fmt, ...)
{
	va_list ap;
	char msg[ERR_MSG_MAX];

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(op->error, sizeof(op->error), "%s: %s: %.400s", op->provider, op->kind, msg);
	log_info(op->provider, "%s", op->error);
	cp_drv_done(op, false, NULL);
}

static bool status_2xx(int status)
{
	return status >= 200 && status <= 299;
}

static void drv_destroyed(struct cp_drv_op *op)
{
	cp_drv_done(op, true, cp_obj("destroyed", json_new_str(""), NULL));
}

static void drv_got(struct cp_drv_op *op, const struct http_client_resp *resp);

/* A call's answer: a 2xx to the driver (env.destroy's finishes op here);
 * else op fails, or is done when env.destroy finds the sandbox already gone. */
static void drv_answered(const struct http_client_resp *resp, const struct err *e, void *arg)
{
	struct cp_drv_op *op = arg;
	char says[ERR_MSG_MAX];

	op->call = NULL;
	if (!resp) {
		cp_drv_fail(op, "cannot reach %s: %.300s", op->drv->title, e ? e->msg : "request failed");
	} else if (str_eq(op->kind, "env.destroy") && (resp->status == 404 || status_2xx(resp->status))) {
		drv_destroyed(op);	/* a 404: already gone */
	} else if (!status_2xx(resp->status)) {
		cp_drv_provider_says(resp, says, sizeof(says));
		cp_drv_fail(op, "%s answered %s", op->drv->title, says);
	} else if (op->phase == CP_DRV_PUTTING) {
		cp_drv_put_next(op);
	} else if (op->phase == CP_DRV_GETTING) {
		drv_got(op, resp);
	} else {
		op->drv->answered(op, resp);
	}
}

void cp_drv_cancel(struct cp_drv_op *op)
{
	if (op)
		drv_free(op);
}

struct json *cp_drv_env_object(const struct json *env)
{
	struct json *vars = json_new_object();

	/* env is {NAME: value} or ["NAME=value"] as rendered */
	for (size_t i = 0; env && i < json_len(env); i++) {
		if (env->type == JSON_OBJECT && env->u.obj.m[i].val->type == JSON_STRING) {
			json_object_set(vars, env->u.obj.m[i].key, json_dup(env->u.obj.m[i].val));
		} else if (env->type == JSON_ARRAY && json_at(env, i)->type == JSON_STRING) {
			const char *kv = json_at(env, i)->u.str.s, *eq = strchr(kv, '=');

			if (eq && eq > kv) {
				char key[DRV_ENV_KEY_MAX];

				snprintf(key, sizeof(key), "%.*s", (int)(eq - kv), kv);
				json_object_set_str(vars, key, eq + 1);
			}
		}
	}
	return vars;
}

struct json *cp_drv_background_argv(const struct json *c)
{
	struct json *argv;

	if (!c || (c->type == JSON_ARRAY && !json_len(c)) || (c->type == JSON_STRING && !*c->u.str.s) ||
	    (c->type != JSON_ARRAY && c->type != JSON_STRING))
		return NULL;
	/* A shell starts the command detached and exits, so the call that runs
	 * it returns at once, as a container's command would keep running. */
	argv = json_new_array();
	json_array_push(argv, json_new_str("/bin/sh"));
	json_array_push(argv, json_new_str("-c"));
	if (c->type == JSON_STRING) {
		json_array_push(argv, json_new_str("sh -c \"$1\" >/dev/null 2>&1 </dev/null &"));
		json_array_push(argv, json_new_str("sh"));
		json_array_push(argv, json_dup(c));
	} else {
		json_array_push(argv, json_new_str("\"$@\" >/dev/null 2>&1 </dev/null &"));
		json_array_push(argv, json_new_str("sh"));
		for (size_t i = 0; i < json_len(c); i++)
			json_array_push(argv, json_dup(json_at(c, i)));
	}
	return argv;
}

struct json *cp_drv_text(const struct buf *b)
{
	const unsigned char *p = (const unsigned char *)b->data;
	struct buf t = BUF_INIT;
	struct json *j;
	size_t i = 0, k;

	if (utf8_valid(b->data, b->len))
		return json_new_strn(b->data, b->len);
	buf_init(&t, 0);
	while (i < b->len) {
		k = utf8_seq_len(p + i, b->len - i);
		if (k) {
			buf_add(&t, p + i, k);
			i += k;
		} else {
			buf_add(&t, "\xEF\xBF\xBD", 3);
			i++;
		}
	}
	j = json_new_strn(t.data, t.len);
	buf_release(&t);
	return j;
}

void cp_drv_provider_says(const struct http_client_resp *resp, char *out, size_t n)
{
	struct json *doc = NULL;
	struct err pe;
	const char *m;

	snprintf(out, n, "%d %s", resp->status, http_status_text(resp->status));
	/* {message}: E2B's and Daytona's; {detail}: Prime's (FastAPI's) */
	if (resp->body.len && json_parse(resp->body.data, resp->body.len, NULL, &doc, &pe) == 0 &&
	    (((m = json_get_str(doc, "message")) && *m) || ((m = json_get_str(doc, "detail")) && *m))) {
		size_t k = strlen(out);

		snprintf(out + k, n - k, ": %.200s", m);
		for (char *q = out + k; *q; q++)
			if ((unsigned char)*q < 0x20)
				*q = ' ';
	}
	json_free(doc);
}

int cp_drv_unpack(const struct buf *tar, const char *base, const char *provider, struct cp_drv_file *files,
		  size_t max, size_t *nfiles, char *msg, size_t n)
{
	struct tar_reader *r = tar_reader_new();
	size_t off = 0, used;
	struct tar_event ev;
	struct err e;
	int k, rc = -1;

	while ((k = tar_reader_feed(r, tar->data + off, tar->len - off, &used, &ev, &e)) > 0 || k == TAR_EV_MORE) {
		off += used;
		if (k == TAR_EV_END || (k == TAR_EV_MORE && off >= tar->len))
			break;
		if (k == TAR_EV_ENTRY && ev.entry->type == TAR_REG) {
			struct buf path = BUF_INIT;

			if (*nfiles >= max) {
				snprintf(msg, n, "more than %zu files in one archive", max);
				goto out;
			}
			buf_addf(&path, "%s/%s", base, ev.entry->path);
			files[*nfiles].path = buf_detach(&path, NULL);
			buf_init(&files[*nfiles].data, CP_ARCHIVE_MAX);
			(*nfiles)++;
		} else if (k == TAR_EV_ENTRY && ev.entry->type != TAR_DIR) {
			snprintf(msg, n, "%.200s: only files and directories travel through %s's files API",
				 ev.entry->path, provider);
			goto out;
		} else if (k == TAR_EV_DATA && *nfiles && tar_reader_entry(r)->type == TAR_REG) {
			buf_add(&files[*nfiles - 1].data, ev.data, ev.len);
		}
	}
	if (k < 0 || tar_reader_finish(r, &e) < 0) {
		snprintf(msg, n, "the archive: %.300s", e.msg);
		goto out;
	}
	rc = 0;
out:
	tar_reader_free(r);
	return rc;
}

void cp_drv_files_release(struct cp_drv_file *files, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(files[i].path);
		buf_release(&files[i].data);
	}
}

int cp_drv_tar_one(struct buf *out, const char *path, const void *data, size_t len, struct err *e)
{
	const char *name = strrchr(path, '/');
	struct tar_writer *w;
	struct tar_meta m = { 0 };
	int rc;

	name = name && name[1] ? name + 1 : path;
	buf_init(out, CP_ARCHIVE_MAX);
	m.mtime = clock_now_ns() / 1000000000;
	w = tar_writer_new_buf(out);
	rc = tar_write_file(w, name, &m, data, len, e) < 0 || tar_writer_finish(w, e) < 0 ? -1 : 0;
	tar_writer_free(w);
	return rc;
}


/* What is at target, one word, printed by a shell in the sandbox: the
 * providers' files APIs write a path as given, so docker cp's rules are
 * applied here from the answer. */
static const char drv_probe_script[] =
	"if [ -d \"$1\" ]; then echo dir; elif [ -e \"$1\" ]; then echo file; "
	"elif [ -d \"$(dirname -- \"$1\")\" ]; then echo missing; else echo noparent; fi";

struct json *cp_drv_probe_argv(const char *target)
{
	struct json *argv = json_new_array();

	json_array_push(argv, json_new_str("/bin/sh"));
	json_array_push(argv, json_new_str("-c"));
	json_array_push(argv, json_new_str(drv_probe_script));
	json_array_push(argv, json_new_str("sh"));
	json_array_push(argv, json_new_str(target));
	return argv;
}

/* files[i].path is "/<top>[/rest]"; it becomes prefix + what is kept. */
static void drv_rebase(struct cp_drv_file *f, const char *target, size_t tlen, bool keep_top)
{
	const char *rest = keep_top ? f->path : f->path + 1 + strcspn(f->path + 1, "/");
	struct buf p = BUF_INIT;

	buf_addf(&p, "%.*s%s", (int)tlen, target, rest);
	free(f->path);
	f->path = buf_detach(&p, NULL);
}

int cp_drv_place(const char *target, const char *probe, struct cp_drv_file *files, size_t n, char *msg, size_t m)
{
	size_t tlen = strlen(target), plen = strcspn(probe, "\r\n");
	bool one_file = n == 1 && !strchr(files[0].path + 1, '/'), slash = tlen && target[tlen - 1] == '/';

	while (tlen > 1 && target[tlen - 1] == '/')
		tlen--;
	if (plen == 3 && !strncmp(probe, "dir", 3)) {
		for (size_t i = 0; i < n; i++)
			drv_rebase(&files[i], target, tlen == 1 ? 0 : tlen, true);	/* "/" */
	} else if (plen == 7 && !strncmp(probe, "missing", 7)) {
		if (one_file && slash)
			return snprintf(msg, m, "%.300s does not exist and ends in /: a file cannot become a directory",
					target), -1;
		for (size_t i = 0; i < n; i++)
			drv_rebase(&files[i], target, tlen, false);
	} else if (plen == 4 && !strncmp(probe, "file", 4)) {
		if (!one_file)
			return snprintf(msg, m, "%.300s is a file: a directory cannot be copied onto it", target), -1;
		drv_rebase(&files[0], target, tlen, false);
	} else if (plen == 8 && !strncmp(probe, "noparent", 8)) {
		return snprintf(msg, m, "the parent directory of %.300s does not exist", target), -1;
	} else {
		return snprintf(msg, m, "could not tell what is at %.300s", target), -1;
	}
	return 0;
}

int cp_drv_put_begin(struct cp_drv_op *op, const struct buf *data)
{
	const char *name = op->drv->title;
	const char *path = json_get_str(op->payload, "path"), *target = json_get_str(op->payload, "target");
	char msg[ERR_MSG_MAX];

	if ((!path && !target) || !data) {
		cp_drv_fail(op, "a path or target and an archive are required");
		return -1;
	}
	if (json_get_str(op->payload, "owner")) {
		cp_drv_fail(op, "owner needs your machines: %s's files API writes as the sandbox's user", name);
		return -1;
	}
	if (cp_drv_unpack(data, path ? path : "", name, op->files, CP_DRV_FILES_MAX, &op->nfiles, msg, sizeof(msg)) < 0) {
		cp_drv_fail(op, "%s", msg);
		return -1;
	}
	return path ? 0 : 1;
}

int cp_drv_probed(struct cp_drv_op *op, int64_t code, const char *out)
{
	char msg[ERR_MSG_MAX];

	if (code != 0) {
		cp_drv_fail(op, "could not look at the target (exit %" PRId64 ")", code);
		return -1;
	}
	if (cp_drv_place(json_get_str(op->payload, "target"), out, op->files, op->nfiles, msg, sizeof(msg)) < 0) {
		cp_drv_fail(op, "%s", msg);
		return -1;
	}
	return 0;
}

struct json *cp_drv_put_result(const struct cp_drv_op *op, size_t n)
{
	const char *path = json_get_str(op->payload, "path");

	return cp_obj("path", json_new_str(path ? path : json_get_str(op->payload, "target")), "files",
		      json_new_int((int64_t)n), NULL);
}

int cp_drv_kind_step(const struct cp_drv_kind *kinds, size_t n, const char *provider, const char *kind,
		     char *refused, size_t rn)
{
	for (size_t i = 0; i < n; i++)
		if (str_eq(kinds[i].kind, kind))
			return kinds[i].step;
	snprintf(refused, rn, "%s: %s: not supported on %s yet", provider, kind, provider);
	return -1;
}

int64_t cp_drv_exec_timeout_ms(const struct json *payload, int64_t dflt_s, int64_t extra_ms, int64_t timeout_ms)
{
	int64_t own = json_get_int(payload, "timeout_sec", dflt_s) * 1000 + extra_ms;

	return timeout_ms > 0 && timeout_ms < own ? timeout_ms : own;
}

const struct json *cp_drv_row(const struct cp_drv_op *op, const char *env_id)
{
	return json_get(st_get(op->cp->db, "environments", env_id), "Driver");
}

const struct json *cp_drv_sandbox(struct cp_drv_op *op, char *sandbox, size_t n)
{
	const struct json *row = cp_drv_row(op, op->env_id);
	const char *id = json_get_str(row, "sandbox_id");

	if (id && *id) {
		str_copy(sandbox, n, id);
		return row;
	}
	if (str_eq(op->kind, "env.destroy"))
		drv_destroyed(op);
	else
		cp_drv_fail(op, "environment %s has no %s sandbox (its create did not finish)", op->env_id, op->drv->title);
	return NULL;
}

const struct json *cp_drv_one_service(struct cp_drv_op *op, const char *image_for)
{
	const struct json *services = json_get(op->payload, "services"), *s = json_at(services, 0);
	const char *image = json_get_str(s, "image");

	if (json_len(services) != 1) {
		cp_drv_fail(op, "%s runs one container per environment; use your machines for multi-service stacks "
			    "(%zu services declared)", op->provider, json_len(services));
		return NULL;
	}
	if (image_for && (!image || !*image)) {
		cp_drv_fail(op, "service %s has no image %s", json_get_str(s, "name"), image_for);
		return NULL;
	}
	return s;
}

void cp_drv_multipart(struct buf *body, char *ctype, size_t n, uint64_t seed, const void *data, size_t len)
{
	char boundary[64];
	unsigned tries = 0;

	/* a boundary the file's bytes do not contain */
	do
		snprintf(boundary, sizeof(boundary), "denv-%016" PRIx64 "-%u", seed, tries++);
	while (len && memmem(data, len, boundary, strlen(boundary)));
	buf_init(body, CP_ARCHIVE_MAX + 1024);
	buf_addf(body, "--%s\r\nContent-Disposition: form-data; name=\"file\"; filename=\"file\"\r\n"
		       "Content-Type: application/octet-stream\r\n\r\n", boundary);
	buf_add(body, data, len);
	buf_addf(body, "\r\n--%s--\r\n", boundary);
	snprintf(ctype, n, "multipart/form-data; boundary=%s", boundary);
}

void cp_drv_header(struct cp_drv_headers *hs, const char *fmt, ...)
{
	va_list ap;
	int k;

	if (hs->n >= CP_DRV_HEADERS_MAX) {
		hs->cut = true;
		return;
	}
	va_start(ap, fmt);
	k = vsnprintf(hs->line[hs->n], sizeof(hs->line[hs->n]), fmt, ap);
	va_end(ap);
	if (k < 0 || (size_t)k >= sizeof(hs->line[hs->n]))
		hs->cut = true;
	else
		hs->n++;
}

/* The call, its URL and headers made, as op's call in flight. */
static int drv_send(struct cp_drv_op *op, const char *method, const char *url, const char **headers, const void *body,
		    size_t len, size_t max_body, const char *what)
{
	struct http_client_req req = { 0 };
	struct err e;

	req.method = method;
	req.url = url;
	req.headers = headers;
	req.body = body;
	req.body_len = len;
	req.timeout_ms = (int)op->timeout_ms;
	op->call = http_aclient_do(cp_aclient(op->cp), &req, max_body, drv_answered, op, &e);
	if (!op->call) {
		cp_drv_fail(op, "%s %s: %s", method, what, e.msg);
		return -1;
	}
	return 0;
}

int cp_drv_send(struct cp_drv_op *op, const char *method, struct cp_drv_headers *hs, const char *ctype,
		const void *body, size_t len, size_t max_body, const char *what, const char *url_fmt, ...)
{
	const char *headers[CP_DRV_HEADERS_MAX + 3];
	struct buf url = BUF_INIT;
	size_t nh = 0;
	va_list ap;
	int rc = -1;

	if (ctype)
		cp_drv_header(hs, "Content-Type: %s", ctype);
	for (size_t i = 0; i < hs->n; i++)
		headers[nh++] = hs->line[i];
	headers[nh++] = "User-Agent: denv-cp";
	headers[nh] = NULL;
	buf_init(&url, CP_DRV_URL_MAX);
	va_start(ap, url_fmt);
	if (buf_vaddf(&url, url_fmt, ap) < 0)
		cp_drv_fail(op, "%s %s: the URL is longer than %d bytes", method, what, CP_DRV_URL_MAX);
	else if (hs->cut)
		cp_drv_fail(op, "%s %s: a request header is longer than %d bytes", method, what, CP_DRV_HEADER_MAX);
	else
		rc = drv_send(op, method, url.data, headers, body, len, max_body, what);
	va_end(ap);
	buf_release(&url);
	memset(hs, 0, sizeof(*hs));	/* tokens */
	return rc;
}

void cp_drv_put_next(struct cp_drv_op *op)
{
	op->phase = CP_DRV_PUTTING;
	if (op->next >= op->nfiles)
		cp_drv_done(op, true, cp_drv_put_result(op, op->nfiles));
	else
		op->drv->put(op, &op->files[op->next++]);
}

void cp_drv_put_multipart(struct cp_drv_op *op, const struct cp_drv_file *f, const char *path)
{
	struct buf body = BUF_INIT;
	char ctype[128];

	cp_drv_multipart(&body, ctype, sizeof(ctype), (uint64_t)op->started_ns, f->data.data, f->data.len);
	op->drv->call(op, "POST", true, path, ctype, body.data, body.len, CP_PROVIDER_BODY_MAX);
	buf_release(&body);
}

int cp_drv_call_json(struct cp_drv_op *op, const char *method, bool sandbox, const struct json *body,
		     const char *path_fmt, ...)
{
	struct buf path = BUF_INIT;
	char *text = NULL;
	va_list ap;
	int rc = -1;

	buf_init(&path, DRV_PATH_MAX);
	va_start(ap, path_fmt);
	if (buf_vaddf(&path, path_fmt, ap) < 0) {
		cp_drv_fail(op, "%s: the path is longer than %d bytes", method, DRV_PATH_MAX);
	} else {
		text = body ? json_to_string(body, JSON_COMPACT) : NULL;
		rc = op->drv->call(op, method, sandbox, path.data, body ? "application/json" : NULL, text,
				   text ? strlen(text) : 0, CP_PROVIDER_BODY_MAX);
	}
	va_end(ap);
	free(text);
	buf_release(&path);
	return rc;
}

void cp_drv_wait_begin(struct cp_drv_op *op)
{
	op->deadline_ns = clock_now_ns() + (int64_t)CP_PROVIDER_WAIT_MAX_MS * 1000000;
}

void cp_drv_wait_more(struct cp_drv_op *op, const char *what, const char *state, ev_timer_fn look)
{
	if (clock_now_ns() > op->deadline_ns)
		cp_drv_fail(op, "%s still %s after %d s", what, state, CP_PROVIDER_WAIT_MAX_MS / 1000);
	else
		ev_timer_start(op->cp->ev, &op->timer, CP_PROVIDER_POLL_MS, look, op);
}

struct json *cp_drv_up(struct cp_drv_op *op, bool forked, const char *egress, const char *sandbox)
{
	const struct json *c = json_get(json_at(json_get(op->payload, "services"), 0), "command");
	struct json *argv = cp_drv_background_argv(c);
	char took[32];

	snprintf(took, sizeof(took), "%.3fs", (double)(clock_now_ns() - op->started_ns) / 1e9);
	json_free(op->result);
	op->result = cp_obj("endpoints", json_new_object(), forked ? "forked_in" : "started_in", json_new_str(took),
			    "digests", json_new_object(), "storage", json_new_str(op->provider), "egress",
			    json_new_str(egress), "sandbox_id", json_new_str(sandbox), NULL);
	if (!argv)
		cp_drv_done(op, true, op->result);
	return argv;
}

void cp_drv_command_started(struct cp_drv_op *op, int64_t code)
{
	if (code != 0)
		cp_drv_fail(op, "the service's command did not start (exit %" PRId64 ")", code);
	else
		cp_drv_done(op, true, op->result);
}

bool cp_drv_argv_ok(struct cp_drv_op *op, const struct json *cmd)
{
	bool strings = json_len(cmd) > 0;

	for (size_t i = 0; strings && i < json_len(cmd); i++)
		strings = json_at(cmd, i)->type == JSON_STRING;
	if (!strings)
		cp_drv_fail(op, "cmd must be a non-empty array of strings");
	return strings;
}

void cp_drv_file_route(struct buf *path, const char *route, const char *file)
{
	buf_adds(path, route);
	http_pct_encode(path, file, "/");
}

void cp_drv_get(struct cp_drv_op *op, const char *route, const char *tail)
{
	struct buf path = BUF_INIT;

	cp_drv_file_route(&path, route, json_get_str(op->payload, "path"));
	if (tail)
		buf_adds(&path, tail);
	op->phase = CP_DRV_GETTING;
	op->drv->call(op, "GET", true, path.data, NULL, NULL, 0, CP_ARCHIVE_MAX);
	buf_release(&path);
}

static void drv_got(struct cp_drv_op *op, const struct http_client_resp *resp)
{
	struct err te;

	if (cp_drv_tar_one(&op->out, json_get_str(op->payload, "path"), resp->body.data, resp->body.len, &te) < 0)
		cp_drv_fail(op, "%s", te.msg);
	else
		cp_drv_done(op, true, json_new_object());
}

void cp_drv_snapshot_done(struct cp_drv_op *op, const char *how, const char *provider_snapshot)
{
	const char *name = json_get_str(op->payload, "name");
	struct json *res = cp_obj("snapshot", json_new_str(name ? name : ""), "datasets", json_new_int(1), "consistent",
				  json_new_bool(true), "how", json_new_str(how), NULL);

	if (provider_snapshot)
		json_object_set_str(res, "provider_snapshot", provider_snapshot);
	cp_drv_done(op, true, res);
}

/* env.destroy: the same DELETE of the sandbox for every provider. */
static void drv_destroy(struct cp_drv_op *op)
{
	char sandbox[CP_DRV_ID_MAX];

	if (cp_drv_sandbox(op, sandbox, sizeof(sandbox)))
		cp_drv_call_json(op, "DELETE", false, NULL, "%s%s", op->drv->destroy_route, sandbox);
}

static const struct cp_drv_provider *const drv_providers[] = { &cp_drv_e2b, &cp_drv_daytona, &cp_drv_prime };

struct cp_drv_op *cp_drv_start(const char *provider, struct cp *cp, const struct json *cloud, const char *env_id,
			       const char *kind, const struct json *payload, const struct buf *data, int64_t timeout_ms,
			       cp_drv_fn fn, void *arg, char *refused, size_t n)
{
	const struct cp_drv_provider *drv = NULL;
	const char *token;
	struct cp_drv_op *op;
	bool destroy;
	int step = -1;

	for (size_t i = 0; i < sizeof(drv_providers) / sizeof(drv_providers[0]) && !drv; i++)
		if (str_eq(drv_providers[i]->name, provider))
			drv = drv_providers[i];
	if (!drv) {
		cp_drv_kind_step(NULL, 0, provider, kind, refused, n);
		return NULL;
	}
	if (drv->fork_refused && str_eq(kind, "env.fork")) {
		snprintf(refused, n, "%s", drv->fork_refused);
		return NULL;
	}
	destroy = str_eq(kind, "env.destroy");
	if ((!destroy && (step = cp_drv_kind_step(drv->kinds, drv->nkinds, drv->name, kind, refused, n)) < 0) ||
	    !(token = drv_token(cloud, drv->name, kind, refused, n)))
		return NULL;
	op = xcalloc(1, drv->op_size);
	drv_init(op, drv, cp, kind, env_id, token, payload, timeout_ms, fn, arg);
	if (str_eq(kind, "env.exec"))
		op->timeout_ms = cp_drv_exec_timeout_ms(op->payload, drv->exec_default_s, drv->exec_extra_ms, timeout_ms);
	if (destroy)
		drv_destroy(op);
	else if (str_eq(kind, "env.get") && !json_get_str(op->payload, "path"))
		cp_drv_fail(op, "path is required");
	else
		drv->begin(op, step, data);
	return op;
}
