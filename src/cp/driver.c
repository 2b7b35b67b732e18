/*
 * driver.c: what the hosted provider drivers (driver_e2b.c,
 * driver_daytona.c) do alike: the environment's variables as an object, the
 * service's command started in the background, env.put's archive split into
 * files (the providers' files APIs take one file at a time), env.get's file
 * handed back as a tar of it, output as valid UTF-8, and the provider's
 * error message in one line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/str.h"
#include "base/utf8.h"
#include "cp/cp.h"
#include "tar/tar.h"

#define DRV_ENV_KEY_MAX 256	/* one variable's name */

void cp_drv_query_escape(struct buf *out, const char *s)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("-._~/", c))
			buf_addch(out, (char)c);
		else
			buf_addf(out, "%%%02X", c);
	}
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
	if (resp->body.len && json_parse(resp->body.data, resp->body.len, NULL, &doc, &pe) == 0 &&
	    (m = json_get_str(doc, "message")) && *m) {
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

void cp_drv_cancel(struct cp_drv_op *op)
{
	if (op)
		op->cancel(op);
}
