/* images.c: every service's image is on this host before env.create makes
 * anything (volume, network, container). An image that is missing is pulled
 * once, all pulls together bounded by SC_IMAGE_PULL_MS (the control plane
 * gives the whole env.create 15 minutes); one that is still missing stops the
 * create with a message that names the service, the image and the host and
 * says what to do. Without this check the first docker command that needs
 * the image (a volume fill's `docker create`) failed with Docker's own
 * "Unable to find image" text, naming a volume and not the image's service. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/ev.h"
#include "base/str.h"
#include "sidecar/sidecar.h"

/* What Docker says when no registry could be reached at all, as opposed to
 * a registry that answered "no such image" or "denied". */
static bool unreachable(const char *msg)
{
	static const char *const signs[] = { "dial tcp", "no such host", "connection refused", "i/o timeout",
					     "network is unreachable", "name resolution", "TLS handshake timeout",
					     "timed out", "Client.Timeout", NULL };

	for (size_t i = 0; signs[i]; i++)
		if (strstr(msg, signs[i]))
			return true;
	return false;
}

static int missing(const char *svc, const char *image, const char *pull_error, struct err *e)
{
	char host[256] = "", why[300];

	if (gethostname(host, sizeof(host) - 1) < 0 || !host[0])
		str_copy(host, sizeof(host), "this host");
	if (unreachable(pull_error)) {
		str_copy(why, sizeof(why), "no registry answered");
	} else {
		char line[240];

		dk_first_line(pull_error, line, sizeof(line));
		snprintf(why, sizeof(why), "the pull failed (%s)", line);
	}
	return err_set(e,
		       "service \"%s\" image \"%s\" is not on host \"%s\" and %s: build it (docker build), load it "
		       "(docker load), or use a local image (denv images / make images lists them)",
		       svc, image, host, why);
}

/* Record image's id and digest under its reference. 1 present, 0 absent, -1 e. */
static int look_up(const char *image, struct json *images, struct err *e)
{
	struct engine_img im;
	struct json *one;
	int rc;

	if ((rc = engine_image(image, &im, e)) <= 0)
		return rc;
	one = json_new_object();
	json_object_set_str(one, "id", im.id);
	json_object_set_str(one, "digest", im.digest);
	json_object_set(images, image, one);
	return 1;
}

int images_ensure(const struct json *order, struct json **out, struct err *e)
{
	struct json *images = json_new_object();
	int64_t deadline = ev_mono_ms() + SC_IMAGE_PULL_MS;

	for (size_t i = 0; i < json_len(order); i++) {
		const char *svc = json_get_str(json_at(order, i), "name");
		const char *image = json_get_str(json_at(order, i), "image");
		struct err pe;
		int rc;

		if (!image || !*image || json_get(images, image))
			continue;
		err_clear(&pe);
		if ((rc = look_up(image, images, &pe)) < 0) {
			json_free(images);
			return err_set(e, "service \"%s\" image \"%s\": %s", svc, image, pe.msg);
		}
		if (rc > 0)
			continue;
		wk_progress("image %s of service %s is not on this host: pulling it", image, svc);
		err_clear(&pe);
		if (ev_mono_ms() >= deadline)
			err_set(&pe, "docker pull: timed out (%d s for every pull of this create)", SC_IMAGE_PULL_MS / 1000);
		else if (dk(NULL, deadline - ev_mono_ms(), &pe, "pull", "--quiet", image, NULL) == 0)
			(void)look_up(image, images, &pe);	/* absent or failed: the check below */
		if (!json_get(images, image)) {
			json_free(images);
			return missing(svc, image, pe.msg[0] ? pe.msg : "not there after the pull", e);
		}
	}
	*out = images;
	return 0;
}
