/*
 * engine/engine.h: the Docker wing of denvd (docker.c, the CLI; engine*.c, the
 * Engine API socket; mux.c, its multiplexed streams). A part of sidecar.h,
 * which includes it where it stood: include sidecar/sidecar.h, not this.
 */
#ifndef DENV_SIDECAR_ENGINE_H
#define DENV_SIDECAR_ENGINE_H

/* docker.c: the docker CLI, blocking (workers only), with base/proc.h's
 * argument vectors (struct argv). */
/* Run docker with a's arguments (a excludes "docker"). Output in out (may be
 * NULL), exit status checked: -1 with "docker <verb>: <stderr>" unless 0. */
int dk_run(const struct argv *a, int64_t timeout_ms, struct buf *out, struct err *e);
/* The same from a NULL-terminated list. */
int dk(struct buf *out, int64_t timeout_ms, struct err *e, ...);
/* n docker commands at once, each to its end. -1 when any failed: e is the
 * message of the earliest (in cmds order) and *failed (may be NULL) its index. */
int dk_run_many(const struct argv *cmds, size_t n, int64_t timeout_ms, size_t *failed, struct err *e);
/* Lower-case project name and container names for an environment. */
void dk_project(const char *env, char *out, size_t n);
void dk_container(const char *project, const char *svc, char *out, size_t n);
/* Ids of every container of the project (label), newline-separated in out. */
int dk_project_containers(const char *project, struct buf *out, struct err *e);
/* Remove every container and the network of a project. */
int dk_project_down(const char *project, struct err *e);
/* The first line of s, trimmed, at most n-1 bytes, for messages. */
void dk_first_line(const char *s, char *out, size_t n);

/* engine.c: container and image state read over dockerd's Engine API socket
 * ($DOCKER_HOST unix://..., default /var/run/docker.sock), or from `docker
 * inspect` when the socket cannot be used. 1 found, 0 no such object, -1 e. */
struct engine_ctr {
	char status[32];	/* created running paused restarting exited dead */
	char health[32];	/* none (no healthcheck) starting healthy unhealthy */
	int exit_code;
	int pid;		/* 0 when not running */
	char env[SC_ID_MAX];	/* its ai.denv.env label, "" when none */
	bool gvisor;		/* it runs under runsc (runtime.c) */
};
struct engine_img {
	char id[80];		/* sha256:... */
	char digest[512];	/* its first repo digest (repo@sha256:...), "" for a local image */
};
int engine_container(const char *name, struct engine_ctr *c, struct err *e);
/* The host's own view of a container's files, for a runtime whose
 * /proc/<pid>/root is not the container's (gVisor's sandbox process has an
 * empty root of its own): *mounts is inspect's Mounts (Destination, Source;
 * the caller frees it), rootfs the storage driver's merged directory.
 * 1, 0 no such container, -1 e. */
int engine_container_files(const char *name, struct json **mounts, char *rootfs, size_t n, struct err *e);
/* POST /containers/<name>/<action> (pause, unpause): 1 done, 0 the API
 * cannot be used (run the CLI instead), -1 Docker refused it (e). */
int engine_container_do(const char *name, const char *action, struct err *e);
int engine_image(const char *ref, struct engine_img *im, struct err *e);

/* GET path on the API socket: 1 and *out (200), 0 (404), -1 (e); DELETE
 * path: 0 with the HTTP status, -1 (e). No CLI fallback. */
int engine_api_get(const char *path, struct json **out, struct err *e);
int engine_api_delete(const char *path, int *status, struct err *e);
/* The socket path, or NULL when DOCKER_HOST names something else. */
const char *engine_socket(void);
/* This process's client for the socket (connections kept alive). */
struct http_client *engine_client(void);
/* engine.c: method path on the socket with a JSON body (or NULL): 0 and
 * *status (*out parsed on a 2xx when out is not NULL; e says the refusal
 * otherwise), -1 when no answer came. */
int engine_api(const char *method, const char *path, const struct json *body, int timeout_ms, int *status,
	       struct json **out, struct err *e);
/* engine_run.c: a `docker run -d` argv as render_run_argv writes it, run
 * as create + start on the socket. 1 started; 0 nothing was left behind
 * and the CLI should run it (a flag it does not map, no socket, a refusal:
 * the CLI then gives its own message); never -1. */
int engine_run(const struct argv *a);

/* mux.c: dockerd's multiplexed stdout/stderr stream, split and capped. */
struct mux {
	size_t cap;		/* bytes kept per stream */
	struct buf out[2];	/* stdout, stderr */
	bool truncated[2];
	uint8_t head[8];	/* a frame header being read */
	size_t hlen;
	uint8_t stream;
	uint32_t left;		/* bytes of the current frame still to come */
	/* Set: every piece goes here as it arrives (which: 0 stdout, 1 stderr)
	 * instead of into out[] (a streamed exec). */
	void (*sink)(void *arg, int which, const char *p, size_t n);
	void *sink_arg;
	bool raw;		/* an exec with a TTY: no headers, all stdout */
};
void mux_init(struct mux *m, size_t cap);
void mux_release(struct mux *m);
/* Feed bytes in any split. -1 on a malformed frame header. */
int mux_feed(struct mux *m, const char *p, size_t n, struct err *e);
/* True between frames: the stream ended cleanly if it ends here. */
bool mux_complete(const struct mux *m);

/* engine_exec.c: env.exec through the API. 1 ran (r filled: timed_out, or
 * exit_code and the output), 0 the API was not usable and nothing ran (use
 * the CLI), -1 failed after the command may have started (e). Release r
 * after any return. */
struct engine_exec {
	int exit_code;
	bool timed_out;
	struct mux mux;
	bool stdin_closed, killed;	/* interactive: 'e' and 'k' came */
	bool ctl_gone;			/* interactive: the control FIFO has no writer */
	bool container_ended;		/* the container stopped while the command ran */
	struct buf ctl;			/* interactive: control bytes short of a line */
	/* Set: called with dockerd's exec id once it exists, before the start. */
	void (*on_created)(void *arg, const char *exec_id);
	void *created_arg;
};
int engine_exec(const char *container, const char *const *argv, int64_t timeout_ms, size_t max,
		struct engine_exec *r, struct err *e);
/* The same with the output handed to sink as it arrives (struct mux). */
int engine_exec_stream(const char *container, const char *const *argv, int64_t timeout_ms,
		       void (*sink)(void *arg, int which, const char *p, size_t n), void *arg,
		       struct engine_exec *r, struct err *e);
/* The same, and on_created(arg, exec id) before the start (a background
 * command records the id so that it can be signalled later). */
int engine_exec_watch(const char *container, const char *const *argv, int64_t timeout_ms,
		      void (*sink)(void *arg, int which, const char *p, size_t n),
		      void (*on_created)(void *arg, const char *exec_id), void *arg, struct engine_exec *r,
		      struct err *e);
/* An interactive exec (env.exec with stdin or tty): stdin, resizes and a
 * kill come from ctl_fd as control lines (SC_CTL_*: 'i' base64 stdin, 'e'
 * stdin's end, 'r' "ROWS COLS", 'k' kill); output goes to sink as it
 * arrives (with tty, all of it as stdout). Returns like engine_exec. */
struct engine_tty {
	bool stdin_open, tty;
	int rows, cols;		/* 0: dockerd's default */
	int ctl_fd;		/* -1: none */
};
int engine_exec_interactive(const char *container, const char *const *argv, int64_t timeout_ms,
			    const struct engine_tty *t, void (*sink)(void *arg, int which, const char *p, size_t n),
			    void *arg, struct engine_exec *r, struct err *e);
/* An exec's host pid and whether it still runs. 0, or -1 (e). */
int engine_exec_state(const char *exec_id, int *pid, bool *running, struct err *e);
void engine_exec_release(struct engine_exec *r);

/* engine_build.c: a build through the API's POST /build (classic builder),
 * the context archive read from fd (size bytes), each output line handed
 * to line as it comes. 1 the daemon answered (out: failed with its error
 * and errorDetail.code, or the image id), 0 the API cannot be used and
 * nothing was sent (use the CLI), -1 failed talking to it (e). */
#define ENGINE_BUILD_TAGS 2
struct engine_build {
	const char *tags[ENGINE_BUILD_TAGS];	/* NULL-terminated when fewer */
	const char *dockerfile;
	const char *target;	/* NULL or "": the last stage */
	const struct json *args;	/* {name: value} or NULL */
	const char *label;	/* the image's ai.denv.build label */
	const char *data;	/* its ai.denv.data label: the data directory of the denvd that built it */
	int fd;
	int64_t size;
	void (*line)(void *arg, const char *p, size_t n);
	void *arg;
};
struct engine_build_result {
	bool failed;
	int code;		/* the failed step's exit code, 0 when not known */
	char error[SC_BUILD_ERROR_TAIL + 64];
	char id[80];		/* sha256:... when the daemon said it */
};
int engine_build(const struct engine_build *r, struct engine_build_result *out, struct err *e);
/* Append s percent-encoded (all but RFC 3986's unreserved characters). */
void engine_escape(struct buf *b, const char *s);

#endif
