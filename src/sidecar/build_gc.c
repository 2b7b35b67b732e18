/*
 * build_gc.c: the host's cache of built images (build.c), kept bounded.
 *
 * Every image a build made carries the labels ai.denv.build and
 * ai.denv.data=<the data directory>: only this denvd's images are looked
 * at, never another's on the same engine (images built before the label
 * existed are not touched either). One is pinned
 * while a spec on this host runs it (<data>/envs/<env>/spec.json) or a
 * version here may run it again (<data>/snaps/<env>/<ver>/snapshot.json,
 * whose spec names the image id): those are never removed. Of the others,
 * the ones built more than SC_BUILD_IMAGE_KEEP_S ago go, and past
 * SC_BUILD_IMAGES_MAX the oldest go too, so a host that builds all day
 * holds a bounded cache. Each tag is removed by name (a build tags its
 * image with denv-build/<svc>:<key> and the service's image:); dockerd
 * deletes the image with its last tag and refuses (409) while a container
 * uses it, which is then left for a later sweep. It runs in the agent's
 * sweep, so it does at most SC_BUILD_PRUNE_MAX removals a call, and only
 * through the Engine API socket (no socket: nothing is pruned).
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fs.h"
#include "base/log.h"
#include "base/str.h"
#include "sidecar/sidecar.h"


/* The image ids a spec's services run, added to pins. */
static void pin_spec(const struct json *spec, struct json *pins)
{
	const struct json *services = json_get(spec, "services");

	for (size_t i = 0; i < json_len(services); i++) {
		const char *img = json_get_str(json_at(services, i), "image");

		if (img && str_has_prefix(img, "sha256:"))
			json_array_push(pins, json_new_str(img));
	}
}

static void pin_file(const char *path, bool snapshot, struct json *pins)
{
	struct json *doc = NULL;
	struct err e;

	if (fs_exists(path) && json_parse_file(path, SC_SPEC_FILE_MAX, &doc, &e) == 0)
		pin_spec(snapshot ? json_get(doc, "spec") : doc, pins);
	json_free(doc);
}

/* <dir>/<each entry>/<file>, or with snaps one level deeper. */
static void pin_tree(const char *dir, const char *file, bool snaps, struct json *pins)
{
	DIR *d = opendir(dir);
	struct dirent *de;

	if (!d)
		return;
	while ((de = readdir(d))) {
		char sub[FS_PATH_MAX], path[FS_PATH_MAX];

		if (de->d_name[0] == '.' || str_fmt(sub, sizeof(sub), "%s/%s", dir, de->d_name) < 0)
			continue;
		if (snaps) {
			pin_tree(sub, file, false, pins);
			continue;
		}
		if (str_fmt(path, sizeof(path), "%s/%s", sub, file) == 0)
			pin_file(path, str_eq(file, "snapshot.json"), pins);
	}
	closedir(d);
}

static bool pinned(const struct json *pins, const char *id)
{
	for (size_t i = 0; i < json_len(pins); i++)
		if (str_eq(json_at(pins, i)->u.str.s, id))
			return true;
	return false;
}

static int cmp_created(const void *a, const void *b)
{
	int64_t x = json_get_int(*(const struct json *const *)a, "Created", 0);
	int64_t y = json_get_int(*(const struct json *const *)b, "Created", 0);

	return x < y ? -1 : x > y;
}

/* Remove every tag of image (or the id of an untagged one). 1 gone, 0 kept. */
static int remove_image(const struct json *img)
{
	const struct json *tags = json_get(img, "RepoTags");
	const char *id = json_get_str(img, "Id");
	char path[SC_ENGINE_PATH_MAX];
	int status = 0;
	struct err e;

	for (size_t i = 0; i < json_len(tags); i++) {
		const char *t = json_at(tags, i)->type == JSON_STRING ? json_at(tags, i)->u.str.s : "";

		if (!*t || str_fmt(path, sizeof(path), "/images/%s", t) < 0 || str_eq(t, "<none>:<none>") || engine_api_delete(path, &status, &e) < 0 || status == 409)
			return 0;
	}
	if (json_len(tags) == 0) {
		if (str_fmt(path, sizeof(path), "/images/%s", id ? id : "") < 0 || engine_api_delete(path, &status, &e) < 0 || status / 100 != 2)
			return 0;
	}
	log_info("denvd", "built image %.19s (%s) removed: no version on this host pins it", id ? id : "?",
		 json_len(tags) ? json_at(tags, 0)->u.str.s : "untagged");
	return 1;
}

static int64_t keep_s(void)
{
	const char *v = getenv("DENVD_BUILD_IMAGE_KEEP_SEC");
	int64_t n;

	return v && str_to_i64(v, &n) == 0 && n >= 0 ? n : SC_BUILD_IMAGE_KEEP_S;
}

int build_images_prune(const char *data, int64_t now_s)
{
	struct json *images = NULL, *pins = json_new_array();
	const struct json **loose = NULL;
	char envs[FS_PATH_MAX], snaps[FS_PATH_MAX];
	struct err e;
	size_t n = 0, i;
	int removed = 0;
	int64_t cutoff = now_s - keep_s();

	struct buf path = BUF_INIT, filter = BUF_INIT;
	int rc;

	/* GET /images/json?filters={"label":["ai.denv.data=<data>"]} */
	struct json *f = json_new_object(), *labels = json_new_array();
	char *text;

	buf_addf(&filter, "ai.denv.data=%s", data);
	json_array_push(labels, json_new_str(filter.data));
	json_object_set(f, "label", labels);
	text = json_to_string(f, 0);
	json_free(f);
	buf_adds(&path, "/images/json?filters=");
	engine_escape(&path, text);
	free(text);
	/* An Engine API path is at most SC_ENGINE_PATH_MAX: a longer data path is not swept. */
	rc = path.len < SC_ENGINE_PATH_MAX ? engine_api_get(path.data, &images, &e) : 0;
	buf_release(&path);
	buf_release(&filter);
	/* Without both trees the pins are unknown: then nothing is swept. */
	if (rc <= 0 || images->type != JSON_ARRAY || fs_path(envs, sizeof(envs), &e, "%s/envs", data) < 0 ||
	    fs_path(snaps, sizeof(snaps), &e, "%s/snaps", data) < 0) {
		json_free(images);
		json_free(pins);
		return 0;
	}
	pin_tree(envs, "spec.json", false, pins);
	pin_tree(snaps, "snapshot.json", true, pins);
	loose = xcalloc(json_len(images) + 1, sizeof(*loose));
	for (i = 0; i < json_len(images); i++)
		if (json_get_str(json_at(images, i), "Id") && !pinned(pins, json_get_str(json_at(images, i), "Id")))
			loose[n++] = json_at(images, i);
	qsort(loose, n, sizeof(*loose), cmp_created);
	/* Oldest first: past the cap, or past the age. */
	for (i = 0; i < n && removed < SC_BUILD_PRUNE_MAX; i++)
		if (n - i > SC_BUILD_IMAGES_MAX || json_get_int(loose[i], "Created", 0) <= cutoff)
			removed += remove_image(loose[i]);
	free(loose);
	json_free(images);
	json_free(pins);
	return removed;
}
