/* Fuzz target: xframe.c, the streamed exec's frames. Any input either is
 * refused or gives a frame whose data fits XF_CHUNK_MAX; a frame that parses
 * is rebuilt and must parse to the same bytes. The first byte also tries
 * the input as a worker pipe line. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ws/xframe.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void rebuild(const struct xf_frame *f)
{
	struct xf_frame g;
	struct json *j;
	char *text;
	struct err e;

	if (f->kind != XF_OUT)
		return;
	j = xf_out_json(f->command_id, f->stream, f->seq, f->data.data, f->data.len);
	text = json_to_string(j, 0);
	xf_frame_init(&g);
	if (xf_parse(text, strlen(text), &g, &e) < 0 || g.data.len != f->data.len ||
	    memcmp(g.data.data, f->data.data, f->data.len) != 0 || g.seq != f->seq)
		abort();
	xf_frame_release(&g);
	free(text);
	json_free(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct xf_frame f;
	struct json *j;
	struct err e;

	xf_frame_init(&f);
	if (xf_parse((const char *)data, size, &f, &e) == 0) {
		if (f.data.len > XF_CHUNK_MAX)
			abort();
		rebuild(&f);
	}
	xf_frame_release(&f);
	if ((j = xf_pipe_frame("cmd_f", 0, (const char *)data, size))) {
		xf_frame_init(&f);
		if (xf_from_json(j, &f, &e) < 0 || f.data.len == 0 || f.data.len > XF_CHUNK_MAX)
			abort();
		xf_frame_release(&f);
		json_free(j);
	}
	return 0;
}
