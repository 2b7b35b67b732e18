/*
 * cmd.c: commands to hosts (protocol.md, "Command lifecycle").
 *
 * A command is a row in the commands table before it is a frame on a
 * stream: cp_cmd_send puts the row, and only the commit's done callback
 * writes the frame, so a crash in between leaves a "sent" row, never a
 * command the store does not know. Each command waits in memory for its one
 * result until its timeout; when its host reconnects it is written again with
 * the same id, and the sidecar answers a finished id from its log.
 *
 * Archives travel as chunk frames (doc/host-stream-chunks.md, denv-cp(8)):
 *   {"type":"chunk","command_id":ID,"seq":N,"last":BOOL,"data":BASE64}
 * with at most CP_CHUNK_BYTES of archive each, seq from 0, all of them before
 * the frame they belong to: the env.put command (payload tar_bytes,
 * tar_sha256, tar_chunks) or the sidecar's env.get result (the same three).
 * An empty archive is one chunk with data "" and last true.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/crypto.h"
#include "base/enc.h"
#include "base/log.h"
#include "base/str.h"
#include "cp/cp.h"

struct cp_cmd {
	struct cp *cp;
	char id[ID_MAX];
	char team_id[ID_MAX];
	char host_id[ID_MAX];
	char env_id[ID_MAX];
	char kind[32];
	struct json *payload;
	struct buf out;		/* archive sent in chunks before the command */
	struct buf in;		/* archive received in chunks before the result */
	int64_t in_next;	/* next chunk seq expected */
	char in_err[128];	/* a bad chunk: the result fails with this */
	bool chunked;		/* out is sent in chunk frames (even when empty) */
	bool durable;		/* its row is on disk: it may be written to the stream */
	char fail[ERR_MSG_MAX];	/* set: finish with this error from the timer */
	int64_t timeout_ms;
	struct ev_timer timer;
	cp_cmd_fn fn;
	cp_cmd_out_fn out_fn;	/* a streamed exec's output (NULL none) */
	void *arg;
	char also[ID_MAX + 8];	/* progress goes to this subject too ("" none) */
	char driver[16];	/* a hosted provider runs it in-process ("" a sidecar) */
	struct cp_drv_op *op;	/* that run, in flight */
	bool written;		/* the command frame went to the host's stream */
	struct json *later;	/* frames for it (exec.in ...) waiting for that; NULL none */
	struct cp_cmd *next;
};

void cp_cmd_progress_also(struct cp_cmd *cmd, const char *subject)
{
	if (cmd)
		str_copy(cmd->also, sizeof(cmd->also), subject);
}

const char *cp_cmd_id(const struct cp_cmd *cmd)
{
	return cmd->id;
}

static struct cp_cmd *find(struct cp *cp, const char *id)
{
	for (struct cp_cmd *c = cp->cmds; c; c = c->next)
		if (str_eq(c->id, id))
			return c;
	return NULL;
}

static void unlink_cmd(struct cp *cp, struct cp_cmd *cmd)
{
	for (struct cp_cmd **p = &cp->cmds; *p; p = &(*p)->next)
		if (*p == cmd) {
			*p = cmd->next;
			return;
		}
}

static void cmd_free(struct cp_cmd *cmd)
{
	ev_timer_stop(cmd->cp->ev, &cmd->timer);
	cp_drv_cancel(cmd->op);
	json_free(cmd->payload);
	json_free(cmd->later);
	buf_release(&cmd->out);
	buf_release(&cmd->in);
	free(cmd);
}

/* What the row keeps of a result: the payload, or only its size when big
 * (an archive, a long output); the caller still gets the whole payload. */
static struct json *stored_result(const struct json *payload)
{
	char *text;
	size_t n;
	struct json *o;

	if (!payload)
		return json_new_null();
	text = json_to_string(payload, JSON_COMPACT);
	n = strlen(text);
	free(text);
	if (n <= CP_RESULT_STORE_MAX)
		return json_dup(payload);
	o = json_new_object();
	json_object_set_int(o, "omitted_bytes", (int64_t)n);
	return o;
}

/* Record the outcome, hand it to the caller, forget the command. */
static void finish(struct cp_cmd *cmd, bool ok, const char *error, const struct json *payload,
		   const struct buf *data)
{
	struct cp *cp = cmd->cp;
	struct cp_result res = { ok, error, payload, data };

	cp_update(cp, "commands", cmd->id,
		  cp_obj("Status", json_new_str(ok ? "ok" : "failed"), "Result", stored_result(payload), "Error",
			 json_new_str(ok ? "" : error), "FinishedAt", cp_now_json(), NULL));
	unlink_cmd(cp, cmd);
	if (cmd->fn)
		cmd->fn(cp, &res, cmd->arg);
	cmd_free(cmd);
}

static struct json *frame_new(const struct cp_cmd *cmd, const char *type)
{
	struct json *f = json_new_object();

	json_object_set_str(f, "type", type);
	json_object_set_str(f, "host_id", cmd->host_id);
	json_object_set_str(f, "command_id", cmd->id);
	return f;
}

/* Write the command (its chunks first) to the host's stream. A failure here
 * is not final: the command is written again when the host reconnects. */
static void transmit(struct cp_cmd *cmd)
{
	struct cp *cp = cmd->cp;
	struct json *f;
	struct buf b64 = BUF_INIT;
	struct err e;
	int rc = 0;
	size_t off = 0;
	int64_t seq = 0;

	buf_reset(&cmd->in);
	cmd->in_next = 0;
	cmd->in_err[0] = '\0';
	/* do-while: an empty archive is still one (empty, last) chunk. */
	do {
		size_t n = cmd->out.len - off < CP_CHUNK_BYTES ? cmd->out.len - off : CP_CHUNK_BYTES;

		if (!cmd->chunked)
			break;
		buf_reset(&b64);
		enc_base64_encode(&b64, cmd->out.data + off, n, ENC_BASE64);
		f = frame_new(cmd, "chunk");
		json_object_set_int(f, "seq", seq++);
		json_object_set_bool(f, "last", off + n >= cmd->out.len);
		json_object_set(f, "data", json_new_strn(b64.data, b64.len));
		rc = cp_hub_send(cp, cmd->host_id, f, &e);
		json_free(f);
		off += n;
	} while (rc == 0 && off < cmd->out.len);
	buf_release(&b64);
	if (rc == 0) {
		f = frame_new(cmd, "command");
		json_object_set_str(f, "kind", cmd->kind);
		json_object_set_str(f, "env_id", cmd->env_id);
		json_object_set(f, "payload", json_dup(cmd->payload));
		json_object_set(f, "sent_at", cp_now_json());
		rc = cp_hub_send(cp, cmd->host_id, f, &e);
		json_free(f);
	}
	if (rc < 0)
		log_warn("cmd", "%s %s to host %s: %s (sent again when the host reconnects)", cmd->kind, cmd->id,
			 cmd->host_id, e.msg);
	else
		log_debug("cmd", "%s %s sent to host %s", cmd->kind, cmd->id, cmd->host_id);
	if (rc == 0 && !cmd->written) {
		cmd->written = true;
		for (size_t i = 0; cmd->later && i < json_len(cmd->later); i++)
			if (cp_hub_send(cp, cmd->host_id, json_at(cmd->later, i), &e) < 0)
				log_warn("cmd", "%s %s: a frame for it: %s", cmd->kind, cmd->id, e.msg);
		json_free(cmd->later);
		cmd->later = NULL;
	}
}

int cp_cmd_send_frame(struct cp_cmd *cmd, struct json *frame, struct err *e)
{
	int rc = 0;

	if (!cmd) {
		json_free(frame);
		return err_set(e, "the command has ended");
	}
	json_object_set_str(frame, "host_id", cmd->host_id);
	json_object_set_str(frame, "command_id", cmd->id);
	if (cmd->written) {
		rc = cp_hub_send(cmd->cp, cmd->host_id, frame, e);
		json_free(frame);
		return rc;
	}
	if (!cmd->later)
		cmd->later = json_new_array();
	if (json_len(cmd->later) >= CP_CMD_LATER_MAX) {
		json_free(frame);
		return err_set(e, "more than %d frames wait for the command to reach its host", CP_CMD_LATER_MAX);
	}
	json_array_push(cmd->later, frame);
	return 0;
}

static void on_timer(struct ev *ev, void *arg)
{
	struct cp_cmd *cmd = arg;
	char msg[ERR_MSG_MAX];

	if (cmd->fail[0]) {
		str_copy(msg, sizeof(msg), cmd->fail);
	} else {
		snprintf(msg, sizeof(msg), "%s timed out after %" PRId64 " s", cmd->kind, cmd->timeout_ms / 1000);
		log_warn("cmd", "%s on host %s: %s", cmd->id, cmd->host_id, msg);
	}
	finish(cmd, false, msg, NULL, NULL);
}

/* Fail from the loop, never from inside cp_cmd_send. */
static void fail_soon(struct cp_cmd *cmd, const char *msg)
{
	str_copy(cmd->fail, sizeof(cmd->fail), msg);
	ev_timer_start(cmd->cp->ev, &cmd->timer, 0, on_timer, cmd);
}

static void driver_done(struct cp *cp, bool ok, const char *error, const struct json *payload,
			const struct buf *data, void *arg)
{
	struct cp_cmd *cmd = arg;

	(void)cp;
	cmd->op = NULL;	/* the driver frees it once this returns */
	finish(cmd, ok, error, payload, data);
}

/* A driver host's command runs here, against the provider's API. */
static void drive(struct cp_cmd *cmd)
{
	struct cp *cp = cmd->cp;
	const struct json *host = st_get(cp->db, "hosts", cmd->host_id);
	const struct json *cloud = st_get(cp->db, "clouds", json_get_str(host, "CloudID"));
	char msg[ERR_MSG_MAX];

	cmd->op = cp_drv_start(cmd->driver, cp, cloud, cmd->env_id, cmd->kind, cmd->payload,
			       cmd->chunked ? &cmd->out : NULL, cmd->timeout_ms, driver_done, cmd, msg, sizeof(msg));
	if (!cmd->op)
		fail_soon(cmd, msg);
}

static void recorded(int status, struct err *e, void *arg)
{
	struct cp_cmd *cmd = arg;

	if (status != 0) {
		fail_soon(cmd, "the control plane could not record the command");
		return;
	}
	cmd->durable = true;
	/* A command refused up front (no such host, a driver host) fails only
	 * now: freeing it earlier would leave this callback a dangling cmd. */
	if (cmd->fail[0])
		ev_timer_start(cmd->cp->ev, &cmd->timer, 0, on_timer, cmd);
	else if (cmd->driver[0])
		drive(cmd);
	else if (cp_host_connected(cmd->cp, cmd->host_id))
		transmit(cmd);
}

struct cp_cmd *cp_cmd_send(struct cp *cp, const char *host_id, const char *env_id, const char *kind,
			   struct json *payload, struct buf *data, int64_t timeout_ms, cp_cmd_fn fn, void *arg)
{
	struct cp_cmd *cmd = xcalloc(1, sizeof(*cmd));
	const struct json *host = st_get(cp->db, "hosts", host_id);
	const char *provider = cp_host_driver(cp, host);
	struct json *row;
	struct st_txn *txn;
	struct err e;

	cmd->cp = cp;
	id_new("cmd", cmd->id);
	str_copy(cmd->team_id, sizeof(cmd->team_id), json_get_str(host, "TeamID"));
	str_copy(cmd->host_id, sizeof(cmd->host_id), host_id);
	str_copy(cmd->env_id, sizeof(cmd->env_id), env_id ? env_id : "");
	str_copy(cmd->kind, sizeof(cmd->kind), kind);
	cmd->payload = payload ? payload : json_new_object();
	buf_init(&cmd->out, 0);
	buf_init(&cmd->in, CP_ARCHIVE_MAX);
	if (data) {
		char sum[SHA256_HEX_LEN + 1];
		size_t chunks = (data->len + CP_CHUNK_BYTES - 1) / CP_CHUNK_BYTES;

		cmd->out = *data;
		buf_init(data, 0);
		cmd->chunked = true;
		sha256_hex(cmd->out.data, cmd->out.len, sum);
		json_object_set_int(cmd->payload, "tar_bytes", (int64_t)cmd->out.len);
		json_object_set_str(cmd->payload, "tar_sha256", sum);
		json_object_set_int(cmd->payload, "tar_chunks", (int64_t)(chunks ? chunks : 1));
	}
	cmd->timeout_ms = timeout_ms > 0 ? timeout_ms : cp->cfg.command_timeout_ms;
	cmd->fn = fn;
	cmd->arg = arg;
	cmd->next = cp->cmds;
	cp->cmds = cmd;

	row = cp_obj("ID", json_new_str(cmd->id), "TeamID", json_new_str(cmd->team_id), "HostID",
		     json_new_str(host_id), "EnvID", json_new_str(cmd->env_id), "Kind", json_new_str(kind),
		     "Payload", stored_result(cmd->payload), "Status", json_new_str("sent"), "Result",
		     json_new_null(), "Error", json_new_str(""), "CreatedAt", cp_now_json(), "AckedAt",
		     json_new_null(), "FinishedAt", json_new_null(), NULL);
	if (!host) {
		str_copy(cmd->fail, sizeof(cmd->fail), "host not found");
	} else if (provider) {
		/* Hosted providers are driven in-process once the row is on disk. */
		str_copy(cmd->driver, sizeof(cmd->driver), provider);
	}
	txn = st_begin(cp->db);
	st_put(txn, "commands", cmd->id, row);
	if (st_commit(txn, recorded, cmd, &e) < 0) {
		/* Nothing applied and recorded is never called: fail from here. */
		log_error("cmd", "record %s: %s", kind, e.msg);
		fail_soon(cmd, "the control plane could not record the command");
		return cmd;
	}
	/* A refused command fails once recorded (see recorded). */
	if (!cmd->fail[0] && !ev_timer_armed(&cmd->timer))
		ev_timer_start(cp->ev, &cmd->timer, cmd->timeout_ms, on_timer, cmd);
	return cmd;
}

void cp_cmd_on_output(struct cp_cmd *cmd, cp_cmd_out_fn fn)
{
	cmd->out_fn = fn;
}

void cp_cmd_cancel(struct cp_cmd *cmd)
{
	if (cmd) {
		cmd->fn = NULL;
		cmd->out_fn = NULL;
		cmd->arg = NULL;
	}
}

static void on_chunk(struct cp_cmd *cmd, const struct json *f)
{
	const struct json *data = json_get(f, "data");
	int64_t seq = json_get_int(f, "seq", -1);
	struct err e;

	if (cmd->in_err[0])
		return;
	if (seq != cmd->in_next || !data || data->type != JSON_STRING) {
		snprintf(cmd->in_err, sizeof(cmd->in_err), "chunk %" PRId64 " arrived, %" PRId64 " expected", seq,
			 cmd->in_next);
		return;
	}
	if (data->u.str.len > enc_base64_len(CP_CHUNK_BYTES, ENC_BASE64) ||
	    enc_base64_decode(&cmd->in, data->u.str.s, data->u.str.len, ENC_BASE64, &e) < 0) {
		snprintf(cmd->in_err, sizeof(cmd->in_err), "%s",
			 cmd->in.len + CP_CHUNK_BYTES > CP_ARCHIVE_MAX ? "archive larger than 32 MiB"
								    : "chunk is not base64 of at most 1 MiB");
		return;
	}
	cmd->in_next++;
}

/* The chunks received against what the result says they were. */
static int check_archive(struct cp_cmd *cmd, const struct json *p, char *msg, size_t n)
{
	int64_t bytes = json_get_int(p, "tar_bytes", -1), chunks = json_get_int(p, "tar_chunks", -1);
	const char *want = json_get_str(p, "tar_sha256");
	char sum[SHA256_HEX_LEN + 1];

	if (cmd->in_err[0]) {
		snprintf(msg, n, "%s: %s", cmd->kind, cmd->in_err);
		return -1;
	}
	if (chunks != cmd->in_next || bytes != (int64_t)cmd->in.len) {
		snprintf(msg, n, "%s: archive incomplete: got %zu of %" PRId64 " bytes", cmd->kind, cmd->in.len, bytes);
		return -1;
	}
	sha256_hex(cmd->in.data, cmd->in.len, sum);
	if (!want || strlen(want) != SHA256_HEX_LEN || !crypto_equal(sum, want, SHA256_HEX_LEN)) {
		snprintf(msg, n, "%s: archive sha256 mismatch", cmd->kind);
		return -1;
	}
	return 0;
}

static void on_result(struct cp_cmd *cmd, const struct json *frame)
{
	const struct json *p = json_get(frame, "payload");
	const char *error = json_get_str(frame, "error");
	char msg[ERR_MSG_MAX];

	if (!json_get_bool(frame, "ok", false)) {
		finish(cmd, false, error && *error ? error : "the host reported a failure without a reason", p, NULL);
		return;
	}
	if (json_get(p, "tar_chunks") || cmd->in_next > 0 || cmd->in_err[0]) {
		if (check_archive(cmd, p, msg, sizeof(msg)) < 0)
			finish(cmd, false, msg, NULL, NULL);
		else
			finish(cmd, true, NULL, p, &cmd->in);
		return;
	}
	finish(cmd, true, NULL, p, NULL);
}

void cp_cmd_frame(struct cp *cp, const char *host_id, const char *type, const struct json *frame)
{
	const char *id = json_get_str(frame, "command_id");
	struct cp_cmd *cmd = id ? find(cp, id) : NULL;
	const char *msg;
	char subject[ST_ID_MAX];

	/* A late or repeated answer (after a timeout, or a second result for the
	 * same id) finds no command and is dropped: each completes once. */
	if (!cmd || !str_eq(cmd->host_id, host_id) || cmd->fail[0]) {
		log_debug("cmd", "host %s: %s for %s, which is not waiting", host_id, type, id ? id : "no command");
		return;
	}
	if (str_eq(type, "ack")) {
		cp_update(cp, "commands", cmd->id, cp_obj("Status", json_new_str("acked"), "AckedAt", cp_now_json(), NULL));
	} else if (str_eq(type, "progress")) {
		msg = json_get_str(frame, "message");
		snprintf(subject, sizeof(subject), "cmd:%s", cmd->id);
		cp_event(cp, NULL, cmd->team_id, subject, "progress",
			 cp_obj("message", json_new_str(msg ? msg : ""), NULL));
		if (cmd->also[0])
			cp_event(cp, NULL, cmd->team_id, cmd->also, "progress",
				 cp_obj("message", json_new_str(msg ? msg : ""), "command", json_new_str(cmd->id), NULL));
	} else if (str_eq(type, "chunk")) {
		on_chunk(cmd, frame);
	} else if (str_eq(type, "exec.out")) {
		if (cmd->out_fn)
			cmd->out_fn(cp, frame, cmd->arg);
	} else if (str_eq(type, "result")) {
		on_result(cmd, frame);
	}
}

void cp_cmd_host_up(struct cp *cp, const char *host_id)
{
	for (struct cp_cmd *c = cp->cmds; c; c = c->next)
		if (c->durable && !c->fail[0] && !c->driver[0] && str_eq(c->host_id, host_id)) {
			log_info("cmd", "host %s is back: sending %s %s again", host_id, c->kind, c->id);
			transmit(c);
		}
}

static int collect_open(const char *id, const struct json *row, void *arg)
{
	const char *st = json_get_str(row, "Status");

	if (str_eq(st, "sent") || str_eq(st, "acked"))
		json_array_push(arg, json_new_str(id));
	return 0;
}

void cp_cmd_recover(struct cp *cp)
{
	struct json *ids = json_new_array();
	struct err e;

	if (st_scan(cp->db, "commands", NULL, NULL, NULL, collect_open, ids, &e) < 0)
		log_error("cmd", "commands: %s", e.msg);
	for (size_t i = 0; i < json_len(ids); i++)
		cp_update(cp, "commands", json_at(ids, i)->u.str.s,
			  cp_obj("Status", json_new_str("failed"), "Error",
				 json_new_str("the control plane restarted before the result arrived"), "FinishedAt",
				 cp_now_json(), NULL));
	if (json_len(ids) > 0)
		log_warn("cmd", "%zu command(s) left unanswered by the previous run marked failed", json_len(ids));
	json_free(ids);
}

void cp_cmd_free_all(struct cp *cp)
{
	while (cp->cmds) {
		struct cp_cmd *c = cp->cmds;

		cp->cmds = c->next;
		cmd_free(c);
	}
}

int cp_result_archive(const struct cp_result *res, struct buf *out, struct err *e)
{
	const char *b64 = json_get_str(res->payload, "tar_b64");

	if (res->data)
		return buf_add(out, res->data->data, res->data->len) < 0 ? err_set(e, "archive too large") : 0;
	if (!b64)
		return err_set(e, "the host's answer has no archive");
	return enc_base64_decode(out, b64, strlen(b64), ENC_BASE64, e);
}
