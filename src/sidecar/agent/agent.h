/*
 * agent/agent.h: the agent wing of denvd (agent.c, dispatch.c, runner.c, tx.c,
 * spool.c, cmdlog.c): the loop, its stream to the control plane, the command
 * log and the spools. A part of sidecar.h, which includes it where it
 * stood: include sidecar/sidecar.h, not this.
 */
#ifndef DENV_SIDECAR_AGENT_H
#define DENV_SIDECAR_AGENT_H

/* ---- the agent ---- */
struct agent;
int agent_run(struct sc_config *c, struct err *e);
/* Send a frame (host_id and sent_at added); takes ownership of f. -1 when offline. */
int agent_send(struct agent *a, struct json *f);
int agent_send_text(struct agent *a, const char *text, size_t len);
size_t agent_queued(const struct agent *a);
bool agent_online(const struct agent *a);
struct ev *agent_ev(struct agent *a);
const struct sc_config *agent_config(const struct agent *a);

/* dispatch.c */
struct dispatch;
struct dispatch *dispatch_new(struct agent *a);
void dispatch_free(struct dispatch *d);
void dispatch_command(struct dispatch *d, const struct json *frame);
void dispatch_chunk(struct dispatch *d, const struct json *frame);
void dispatch_offline(struct dispatch *d);
void dispatch_drain(struct dispatch *d);
/* exec.in, exec.resize, exec.kill frames of a running streamed exec. */
void dispatch_exec_ctl(struct dispatch *d, const struct json *frame);
void dispatch_sweep(struct dispatch *d);

/* cmdlog.c: <data>/commands/<id>.{json,cmd,tar} */
int cmdlog_path(const char *data, const char *id, const char *ext, char *out, size_t n);
/* 1 and *res if a result is stored, 0 if none, -1 on a broken file. */
int cmdlog_read(const char *data, const char *id, struct json **res, struct err *e);
int cmdlog_write(const char *data, const char *id, const char *kind, const char *env,
		 bool ok, struct json *payload, const char *error, struct err *e);
int cmdlog_prune(const char *data, int64_t now_s);
/* The result frame for a stored result. */
struct json *cmdlog_frame(const struct json *res);

/* spool.c: env.put archives arriving as chunk frames. */
struct spools;
struct spools *spools_new(const char *data);
void spools_free(struct spools *s);
void spools_chunk(struct spools *s, const struct json *frame, int64_t now);
/* Hand the spool of id over as {"path","bytes","chunks","complete","error"} (NULL if none). */
struct json *spools_take(struct spools *s, const char *id);
void spools_drop(struct spools *s, const char *id);
void spools_sweep(struct spools *s, int64_t now);

#endif
