/* Unit tests: a snapshot moved between two data dirs on the dir backend
 * (move.c) without Docker: snap.export writes a tar stream and a manifest
 * with its sha256, snap.read answers a part of it, the stream carried to
 * the other host and imported there gives the same files (modes kept) and a
 * record with this host's backend; a stream changed on the way is refused
 * with the mismatch named and leaves nothing behind; old stream files go in
 * the sweep. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <utime.h>

#include "base/fs.h"
#include "json/json.h"
#include "sidecar/sidecar.h"
#include "sidecar/storage/storage.h"
#include "tap.h"

#define ENV "env_src"
#define SNAP "ver_one"

static struct json *parse(const char *text)
{
	struct json *v = NULL;
	struct err e;

	if (json_parse(text, strlen(text), NULL, &v, &e) < 0)
		tap_diag("bad JSON in a case: %s", e.msg);
	return v;
}

static void put(const char *path, const char *text, mode_t mode)
{
	struct err e;

	if (fs_write_atomic(path, text, strlen(text), mode, &e) < 0)
		tap_diag("cannot write %s: %s", path, e.msg);
}

/* A dir-backend snapshot of one volume "home" with a file and a subdirectory. */
static void make_snapshot(const char *data)
{
	char path[1024];
	struct err e;

	snprintf(path, sizeof(path), "%s/snaps/%s/%s/home/sub", data, ENV, SNAP);
	fs_mkdir_p(path, 0755, &e);
	snprintf(path, sizeof(path), "%s/snaps/%s/%s/home/known.txt", data, ENV, SNAP);
	put(path, "moved-file-content\n", 0640);
	snprintf(path, sizeof(path), "%s/snaps/%s/%s/snapshot.json", data, ENV, SNAP);
	put(path, "{\"name\":\"" SNAP "\",\"env\":\"" ENV "\",\"storage\":\"dir\",\"volumes\":[\"home\"],"
		  "\"datasets\":[],\"spec\":{\"services\":[]}}",
	    0600);
}

static void wk_for(struct wk *w, const char *data, const char *id, const char *kind)
{
	memset(w, 0, sizeof(*w));
	w->data = data;
	w->id = id;
	w->kind = kind;
	w->env = ENV;
}

static int copy_file(const char *from, const char *to)
{
	char buf[65536];
	FILE *in = fopen(from, "rb"), *out = in ? fopen(to, "wb") : NULL;
	size_t n;

	if (!out) {
		if (in)
			fclose(in);
		return -1;
	}
	while ((n = fread(buf, 1, sizeof(buf), in)) > 0)
		fwrite(buf, 1, n, out);
	fclose(in);
	return fclose(out);
}

static struct json *import_payload(const struct json *manifest)
{
	struct json *p = json_new_object();

	json_object_set_str(p, "snapshot", SNAP);
	json_object_set_str(p, "from_env", ENV);
	json_object_set_str(p, "format", "tar");
	json_object_set(p, "volumes", json_dup(json_get(manifest, "volumes")));
	json_object_set(p, "record", json_dup(json_get(manifest, "record")));
	return p;
}

static void test_move(void)
{
	char src[512], dst[512], stream[1024], part[1024], path[1024], cmds[1024];
	struct json *p, *man = NULL, *res = NULL, *rec = NULL;
	struct wk w;
	struct err e;
	struct stat st;
	struct buf text = BUF_INIT;

	snprintf(src, sizeof(src), "%s/src", tap_tmpdir());
	snprintf(dst, sizeof(dst), "%s/dst", tap_tmpdir());
	make_snapshot(src);
	snprintf(cmds, sizeof(cmds), "%s/commands", src);
	fs_mkdir_p(cmds, 0700, &e);
	fs_mkdir_p(dst, 0700, &e);

	wk_for(&w, src, "cmd_export", "snap.export");
	p = parse("{\"snapshot\":\"" SNAP "\",\"from_env\":\"" ENV "\",\"format\":\"tar\"}");
	ok(cmd_snap_export(&w, p, &man, &e) == 0, "snap.export of a dir snapshot as tar (%s)", e.msg);
	json_free(p);
	is_int(json_len(json_get(man, "volumes")), 1, "the manifest has one stream per volume");
	ok(json_get_str(json_at(json_get(man, "volumes"), 0), "sha256") &&
		   strlen(json_get_str(json_at(json_get(man, "volumes"), 0), "sha256")) == 64,
	   "each stream has its sha256");
	snprintf(stream, sizeof(stream), "%s/moves/out.%s.home.tar", src, SNAP);
	ok(stat(stream, &st) == 0 && st.st_size == json_get_int(json_at(json_get(man, "volumes"), 0), "bytes", -1),
	   "the stream file is as long as the manifest says");

	wk_for(&w, src, "cmd_read", "snap.read");
	p = parse("{\"snapshot\":\"" SNAP "\",\"format\":\"tar\",\"volume\":\"home\",\"offset\":512,\"length\":100}");
	ok(cmd_snap_read(&w, p, &res, &e) == 0 && json_get_int(res, "tar_bytes", -1) == 100,
	   "snap.read answers the part asked for as an archive (%s)", e.msg);
	json_free(p);
	json_free(res);
	res = NULL;
	p = parse("{\"snapshot\":\"" SNAP "\",\"format\":\"tar\",\"volume\":\"home\",\"offset\":0,\"length\":99999999}");
	ok(cmd_snap_read(&w, p, &res, &e) < 0, "a part past 32 MiB or the stream's end is refused: %s", e.msg);
	json_free(p);

	/* The stream arrives whole on the other host. */
	snprintf(path, sizeof(path), "%s/moves", dst);
	fs_mkdir_p(path, 0700, &e);
	snprintf(part, sizeof(part), "%s/moves/in.%s.%s.home", dst, ENV, SNAP);
	copy_file(stream, part);
	wk_for(&w, dst, "cmd_import", "snap.import");
	w.env = "env_fork";
	p = import_payload(man);
	res = NULL;
	ok(cmd_snap_import(&w, p, &res, &e) == 0, "snap.import of the whole stream (%s)", e.msg);
	json_free(res);
	snprintf(path, sizeof(path), "%s/snaps/%s/%s/home/known.txt", dst, ENV, SNAP);
	ok(fs_read_file(path, &text, 1024, &e) == 0 && strcmp(text.data, "moved-file-content\n") == 0,
	   "the file is there with its content");
	ok(stat(path, &st) == 0 && (st.st_mode & 0777) == 0640, "its mode is kept");
	ok(snap_record_load(dst, ENV, SNAP, &rec, &e) == 1 && strcmp(json_get_str(rec, "storage"), "dir") == 0 &&
		   json_get(rec, "moved"),
	   "the record is written with this host's backend and how it came");
	ok(!fs_exists(part), "the received stream is removed once imported");
	json_free(rec);
	json_free(p);

	/* A changed byte on the way: refused, nothing left. */
	snprintf(path, sizeof(path), "%s/snaps/%s", dst, ENV);
	fs_remove_all(path, &e);
	copy_file(stream, part);
	{
		FILE *f = fopen(part, "r+b");

		fseek(f, 600, SEEK_SET);
		fputc('X', f);
		fclose(f);
	}
	p = import_payload(man);
	res = NULL;
	ok(cmd_snap_import(&w, p, &res, &e) < 0 && strstr(e.msg, "stream sha256 mismatch"),
	   "a changed stream is refused: %s", e.msg);
	snprintf(path, sizeof(path), "%s/snaps/%s/%s", dst, ENV, SNAP);
	ok(!fs_exists(part) && !fs_exists(path), "and nothing of it stays");
	json_free(p);

	/* A short stream is named as such. */
	put(part, "short", 0600);
	p = import_payload(man);
	ok(cmd_snap_import(&w, p, &res, &e) < 0 && strstr(e.msg, "got 5 of"), "a short stream is refused: %s",
	   e.msg);
	json_free(p);
	json_free(man);
	buf_release(&text);
}

static void test_prune(void)
{
	char dir[512], path[1024];
	struct utimbuf old = { 1000, 1000 };
	struct err e;

	snprintf(dir, sizeof(dir), "%s/prune/moves", tap_tmpdir());
	fs_mkdir_p(dir, 0700, &e);
	snprintf(path, sizeof(path), "%s/out.a.b.tar", dir);
	put(path, "x", 0600);
	utime(path, &old);
	snprintf(path, sizeof(path), "%s/in.a.b.c", dir);
	put(path, "x", 0600);
	snprintf(path, sizeof(path), "%s/notes", dir);
	put(path, "x", 0600);
	utime(path, &old);
	snprintf(dir, sizeof(dir), "%s/prune", tap_tmpdir());
	is_int(move_prune(dir, 1000 + SC_MOVE_KEEP_S + 10), 1, "the sweep removes only an old stream file");
}

int main(void)
{
	test_move();
	test_prune();
	return tap_done();
}
