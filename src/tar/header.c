/* header.c: one 512-byte header block, parsed without allocating; numbers. */
#include "tar/tar.h"
#include "tar/internal.h"

#include <stdio.h>
#include <string.h>

/* ustar field offsets and widths (POSIX.1-2008, pax "ustar Interchange Format"). */
enum {
	H_NAME = 0, H_MODE = 100, H_UID = 108, H_GID = 116, H_SIZE = 124,
	H_MTIME = 136, H_CHKSUM = 148, H_TYPE = 156, H_LINK = 157,
	H_MAGIC = 257, H_VERSION = 263, H_DEVMAJOR = 329, H_DEVMINOR = 337,
	H_PREFIX = 345, H_GNU_ISEXT = 482,
};

const char *tar_type_name(enum tar_type t)
{
	switch (t) {
	case TAR_REG: return "regular file";
	case TAR_HARDLINK: return "hard link";
	case TAR_SYMLINK: return "symlink";
	case TAR_CHAR: return "character device";
	case TAR_BLOCK: return "block device";
	case TAR_DIR: return "directory";
	case TAR_FIFO: return "FIFO";
	case TAR_CONTIG: return "contiguous file";
	case TAR_SPARSE: return "sparse file";
	case TAR_OTHER: break;
	}
	return "unsupported entry type";
}

const char *tar_quote(const char *s, char *out)
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0;

	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		size_t need = (c < 0x20 || c >= 0x7f || c == '"' || c == '\\') ? 4 : 1;
		if (o + need + 4 > TAR_QUOTE_MAX) {
			memcpy(out + o, "...", 4);
			return out;
		}
		if (need == 1) {
			out[o++] = (char)c;
		} else {
			out[o++] = '\\';
			out[o++] = 'x';
			out[o++] = hex[c >> 4];
			out[o++] = hex[c & 15];
		}
	}
	out[o] = '\0';
	return out;
}

bool tar_block_is_zero(const unsigned char *blk)
{
	for (size_t i = 0; i < TAR_BLOCK_SIZE; i++)
		if (blk[i])
			return false;
	return true;
}

/*
 * Octal: optional leading spaces, digits, then only spaces/NULs (writers
 * differ on the terminator). An empty field is 0: GNU and others leave device
 * numbers blank on regular files. Base-256 (GNU, star): first byte 0x80 for a
 * positive big-endian number in the remaining bytes, 0xff for a negative one
 * in two's complement over the whole field.
 */
int tar_parse_num(const unsigned char *p, size_t w, int64_t *sv, uint64_t *uv, int want_signed)
{
	uint64_t v = 0;
	size_t i = 0;

	if (p[0] == 0x80) {
		for (i = 1; i < w; i++) {
			if (v >> 56)
				return -1;	/* would overflow 64 bits */
			v = v << 8 | p[i];
		}
		if (want_signed && v > (uint64_t)INT64_MAX)
			return -1;
		if (sv)
			*sv = (int64_t)v;
		if (uv)
			*uv = v;
		return 0;
	}
	if (p[0] == 0xff) {
		if (!want_signed || w < 8)
			return -1;
		for (i = 1; i + 8 < w; i++)
			if (p[i] != 0xff)
				return -1;
		for (; i < w; i++)
			v = v << 8 | p[i];
		if (!(v >> 63))
			return -1;	/* does not fit in an int64_t */
		/* two's complement to a negative value without signed overflow */
		*sv = -(int64_t)(~v) - 1;
		return 0;
	}
	if (p[0] & 0x80)
		return -1;
	while (i < w && p[i] == ' ')
		i++;
	for (; i < w && p[i] >= '0' && p[i] <= '7'; i++) {
		if (v >> 61)
			return -1;
		v = v << 3 | (uint64_t)(p[i] - '0');
	}
	for (; i < w; i++)
		if (p[i] != ' ' && p[i] != '\0')
			return -1;
	if (want_signed && v > (uint64_t)INT64_MAX)
		return -1;
	if (sv)
		*sv = (int64_t)v;
	if (uv)
		*uv = v;
	return 0;
}

/* A fixed-width, possibly unterminated string field into out (w + 1 bytes). */
static size_t field_str(char *out, const unsigned char *p, size_t w)
{
	size_t n = 0;

	while (n < w && p[n])
		n++;
	memcpy(out, p, n);
	out[n] = '\0';
	return n;
}

int tar_header_parse(const unsigned char *blk, struct tar_header *h, struct err *e)
{
	uint64_t want, usum = 0, u;
	int64_t ssum = 0, s;
	char prefix[156], name[101], q[TAR_QUOTE_MAX];
	size_t pn, nn;

	/* Checksum: the sum of all bytes with the checksum field read as spaces.
	 * Old writers summed signed chars, so either sum is accepted. */
	if (tar_parse_num(blk + H_CHKSUM, 8, NULL, &want, 0) < 0)
		return err_set(e, "header checksum field is not a number");
	for (size_t i = 0; i < TAR_BLOCK_SIZE; i++) {
		unsigned char c = (i >= H_CHKSUM && i < H_CHKSUM + 8) ? ' ' : blk[i];
		usum += c;
		ssum += (signed char)c;
	}
	if (want != usum && (int64_t)want != ssum)
		return err_set(e, "header checksum mismatch (not a tar archive, or corrupt)");

	if (memcmp(blk + H_MAGIC, "ustar\0", 6) == 0)
		h->gnu = false;
	else if (memcmp(blk + H_MAGIC, "ustar  \0", 8) == 0)
		h->gnu = true;
	else
		return err_set(e, "header has no ustar magic (pre-POSIX archives are not supported)");

	h->typeflag = (char)blk[H_TYPE];
	nn = field_str(name, blk + H_NAME, 100);
	pn = h->gnu ? 0 : field_str(prefix, blk + H_PREFIX, 155);
	if (pn)
		snprintf(h->name, sizeof(h->name), "%s/%s", prefix, name);
	else
		memcpy(h->name, name, nn + 1);
	field_str(h->linkname, blk + H_LINK, 100);

	if (tar_parse_num(blk + H_MODE, 8, NULL, &u, 0) < 0 || u > 07777777)
		return err_set(e, "entry \"%s\": bad mode field", tar_quote(h->name, q));
	h->mode = (uint32_t)(u & 07777);
	if (tar_parse_num(blk + H_UID, 8, NULL, &h->uid, 0) < 0)
		return err_set(e, "entry \"%s\": bad uid field", tar_quote(h->name, q));
	if (tar_parse_num(blk + H_GID, 8, NULL, &h->gid, 0) < 0)
		return err_set(e, "entry \"%s\": bad gid field", tar_quote(h->name, q));
	if (tar_parse_num(blk + H_SIZE, 12, NULL, &h->size, 0) < 0)
		return err_set(e, "entry \"%s\": bad size field", tar_quote(h->name, q));
	if (tar_parse_num(blk + H_MTIME, 12, &s, NULL, 1) < 0)
		return err_set(e, "entry \"%s\": bad mtime field", tar_quote(h->name, q));
	h->mtime = s;
	if (tar_parse_num(blk + H_DEVMAJOR, 8, NULL, &u, 0) < 0 || u > UINT32_MAX)
		return err_set(e, "entry \"%s\": bad devmajor field", tar_quote(h->name, q));
	h->devmajor = (uint32_t)u;
	if (tar_parse_num(blk + H_DEVMINOR, 8, NULL, &u, 0) < 0 || u > UINT32_MAX)
		return err_set(e, "entry \"%s\": bad devminor field", tar_quote(h->name, q));
	h->devminor = (uint32_t)u;
	h->sparse_ext = h->gnu && h->typeflag == 'S' && blk[H_GNU_ISEXT] != 0;
	return 0;
}
