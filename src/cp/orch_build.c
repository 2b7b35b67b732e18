/*
 * orch_build.c: the deploy's build contexts go to the placed host before
 * env.create (compose build:, contexts.c). For each service with a
 * context_digest, in the Spec's order, env.context commands move the
 * stored archive in parts of at most CP_ARCHIVE_MAX bytes, each part the
 * existing chunked transfer of one command (doc/host-stream-chunks.md):
 *
 *   payload {service, digest, size, offset, build}   (+ the part's chunks)
 *   result  {have, cached}
 *
 * The first command of a service carries no data: the host answers how
 * many bytes of that context it holds already (all of them when the
 * context is there, or when the image it builds is cached, which the
 * build in the payload lets it tell), and the parts start there. So an
 * unchanged context is not sent again, and a transfer cut off by a
 * reconnect resumes. One part in flight at a time keeps the hub's queue
 * to the host (CP_HUB_MAX_QUEUED) far from full whatever the context's size.
 * ctx: ship_next (the service index), ship_expect (the host's count that a
 * part in flight must bring).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/str.h"
#include "base/sys.h"
#include "cp/orch.h"

static void send_part(struct cp_run *r, const struct json *svc, int64_t offset);

static const struct json *current(const struct cp_run *r)
{
	return json_at(json_get(json_get(r->params, "spec"), "services"), (size_t)json_get_int(r->ctx, "ship_next", 0));
}

/* From ship_next on, the next service with a context to send; NULL when none is left. */
static const struct json *next_service(struct cp_run *r)
{
	const struct json *services = json_get(json_get(r->params, "spec"), "services");

	for (size_t i = (size_t)json_get_int(r->ctx, "ship_next", 0); i < json_len(services); i++) {
		const struct json *b = json_get(json_at(services, i), "build");

		if (json_get_str(b, "context_digest") && !json_get_str(b, "image_id")) {
			json_object_set_int(r->ctx, "ship_next", (int64_t)i);
			return json_at(services, i);
		}
	}
	json_object_set_int(r->ctx, "ship_next", (int64_t)json_len(services));
	return NULL;
}

static void ship_next(struct cp_run *r)
{
	const struct json *svc = next_service(r);
	run_phase_fn then = r->after_ship;

	if (svc) {
		send_part(r, svc, -1);
		return;
	}
	r->after_ship = NULL;
	then(r);
}

static void shipped(struct cp_run *r, const struct cp_result *res)
{
	const struct json *svc = current(r), *b = json_get(svc, "build");
	const char *name = json_get_str(svc, "name");
	int64_t size = json_get_int(b, "context_bytes", -1), have = json_get_int(res->payload, "have", -1);
	int64_t expect = json_get_int(r->ctx, "ship_expect", -1);

	if (!res->ok) {
		run_fail(r, NULL, "service \"%s\": sending its build context: %s", name, res->error);
		return;
	}
	if (have < 0 || have > size || (expect >= 0 && have != expect && have != size)) {
		run_fail(r, NULL, "service \"%s\": sending its build context: the host holds %lld of %lld bytes "
			 "after a part that should have made %lld", name, (long long)have, (long long)size,
			 (long long)expect);
		return;
	}
	if (have == size) {
		json_object_set_int(r->ctx, "ship_next", json_get_int(r->ctx, "ship_next", 0) + 1);
		ship_next(r);
		return;
	}
	send_part(r, svc, have);
}

/* Bytes [offset, offset + n) of the stored context into data. */
static int read_part(struct cp_run *r, const char *digest, int64_t offset, size_t n, struct buf *data, struct err *e)
{
	char path[4096];
	int fd;
	int rc = 0;

	if (cp_context_path(r->cp, r->team_id, digest, path, sizeof(path)) < 0)
		return err_set(e, "bad context digest");
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return err_errno(e, "the stored context");
	buf_init(data, n + 1);
	if (buf_grow(data, n) < 0 || lseek(fd, (off_t)offset, SEEK_SET) < 0)
		rc = err_errno(e, "reading the stored context");
	while (rc == 0 && data->len < n) {
		ssize_t got = sys_read(fd, data->data + data->len, n - data->len);

		if (got <= 0)
			rc = err_set(e, "the stored context is shorter than recorded");
		else
			data->len += (size_t)got;
	}
	sys_close(fd);
	if (rc < 0)
		buf_release(data);
	return rc;
}

/* offset -1: the first command, no data (how much does the host hold?). */
static void send_part(struct cp_run *r, const struct json *svc, int64_t offset)
{
	const struct json *b = json_get(svc, "build");
	const char *digest = json_get_str(b, "context_digest");
	int64_t size = json_get_int(b, "context_bytes", 0);
	struct json *payload;
	struct buf data = BUF_INIT;
	struct err e;

	payload = cp_obj("service", json_new_str(json_get_str(svc, "name")), "digest", json_new_str(digest), "size",
			 json_new_int(size), "offset", json_new_int(offset < 0 ? 0 : offset), "build", json_dup(b),
			 NULL);
	json_object_set_int(r->ctx, "ship_expect", -1);
	if (offset >= 0) {
		size_t n = (size_t)(size - offset) < CP_ARCHIVE_MAX ? (size_t)(size - offset) : CP_ARCHIVE_MAX;

		err_clear(&e);
		if (read_part(r, digest, offset, n, &data, &e) < 0) {
			json_free(payload);
			run_fail(r, NULL, "service \"%s\": %s", json_get_str(svc, "name"), e.msg);
			return;
		}
		json_object_set_int(r->ctx, "ship_expect", offset + (int64_t)n);
		{
			char msg[200];

			snprintf(msg, sizeof(msg), "sending the build context of %s: bytes %lld to %lld of %lld",
				 json_get_str(svc, "name"), (long long)offset, (long long)(offset + (int64_t)n),
				 (long long)size);
			run_event(r, "progress", cp_obj("message", json_new_str(msg), NULL));
		}
		(void)run_cmd_data(r, r->env_id, "env.context", payload, &data, 0, shipped);
		buf_release(&data);
		return;
	}
	(void)run_cmd_data(r, r->env_id, "env.context", payload, NULL, 0, shipped);
}

void run_ship_contexts(struct cp_run *r, run_phase_fn then)
{
	json_object_set_int(r->ctx, "ship_next", 0);
	r->after_ship = then;
	ship_next(r);
}
