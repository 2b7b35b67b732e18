/* frame.c: the cell grid between the renderer and the screen. See tui.h. */
#include "tui/tui.h"

#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"

void frame_reset(struct tui_frame *f, int w, int h)
{
	size_t n;

	w = w < 1 ? 1 : w > TOP_MAX_W ? TOP_MAX_W : w;
	h = h < 1 ? 1 : h > TOP_MAX_H ? TOP_MAX_H : h;
	n = (size_t)w * (size_t)h;
	if ((size_t)f->w * (size_t)f->h != n) {
		f->ch = xrealloc(f->ch, n);
		f->at = xrealloc(f->at, n);
	}
	f->w = w;
	f->h = h;
	memset(f->ch, ' ', n);
	memset(f->at, TA_NORMAL, n);
}

void frame_release(struct tui_frame *f)
{
	free(f->ch);
	free(f->at);
	memset(f, 0, sizeof(*f));
}

/* One source character: printable ASCII as itself, a tab as a space,
 * anything else (control bytes, a UTF-8 sequence, a stray byte) as one '?'.
 * Returns the bytes consumed. */
static size_t next_cell(const char *s, char *out)
{
	unsigned char c = (unsigned char)*s;
	size_t n;

	if (c >= 0x20 && c < 0x7f) {
		*out = (char)c;
		return 1;
	}
	*out = c == '\t' ? ' ' : '?';
	if (c < 0x80)
		return 1;
	n = utf8_seq_len((const unsigned char *)s, strnlen(s, 4));
	return n ? n : 1;
}

int frame_put(struct tui_frame *f, int y, int x, int maxw, enum tui_attr a, const char *s)
{
	int n = 0;

	if (!s || y < 0 || y >= f->h || x >= f->w)
		return 0;
	if (maxw < 0 || x + maxw > f->w)
		maxw = f->w - x;
	while (*s && n < maxw) {
		char c;

		s += next_cell(s, &c);
		if (x + n >= 0) {
			size_t i = (size_t)y * (size_t)f->w + (size_t)(x + n);

			f->ch[i] = c;
			f->at[i] = (unsigned char)a;
		}
		n++;
	}
	return n;
}

void frame_attr(struct tui_frame *f, int y, int x, int n, enum tui_attr a)
{
	if (y < 0 || y >= f->h)
		return;
	for (int i = x < 0 ? 0 : x; i < x + n && i < f->w; i++)
		f->at[(size_t)y * (size_t)f->w + (size_t)i] = (unsigned char)a;
}

void frame_fill_row(struct tui_frame *f, int y, enum tui_attr a)
{
	if (y < 0 || y >= f->h)
		return;
	memset(f->ch + (size_t)y * (size_t)f->w, ' ', (size_t)f->w);
	memset(f->at + (size_t)y * (size_t)f->w, a, (size_t)f->w);
}

void frame_text(const struct tui_frame *f, struct buf *out)
{
	size_t keep = out->len;

	for (int y = 0; y < f->h; y++) {
		const char *row = f->ch + (size_t)y * (size_t)f->w;
		int n = f->w;

		while (n > 0 && row[n - 1] == ' ')
			n--;
		buf_add(out, row, (size_t)n);
		buf_addch(out, '\n');
	}
	/* Drop trailing blank rows, but keep what the buffer held before. */
	while (out->len > keep + 1 && out->data[out->len - 1] == '\n' && out->data[out->len - 2] == '\n')
		buf_truncate(out, out->len - 1);
}
