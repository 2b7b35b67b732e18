/*
 * tar.h: ustar + pax archives: a streaming reader, a writer, and extraction
 * into a directory that a malicious archive cannot escape.
 *
 * Archives come from outside (PUT /v1/envs/{id}/files, a verifier's collected
 * submission, docker cp streams), so every length in them is checked against
 * a limit below before it is used, and extraction never follows a symlink.
 *
 * Reader (tar_reader_*): a push parser. Feed it bytes as they arrive (from a
 * socket on the event loop); it reports one event at a time: an entry header,
 * a chunk of the entry's data (a view into the bytes you fed: nothing is
 * copied), or the end of the archive. Memory use is bounded by the limits
 * below whatever the archive's size. tar_reader_next_fd/tar_reader_data_fd are
 * a pull-style convenience over a blocking fd.
 *   Formats: POSIX ustar (name + prefix), pax 'x' extended headers (path,
 *   linkpath, size, uid, gid, mtime; 'g' global headers are skipped and never
 *   applied), GNU 'L'/'K' long names, GNU ("ustar  ") headers, base-256
 *   numbers. The header checksum is verified (signed and unsigned sums are
 *   both accepted, as in GNU tar). Pre-POSIX v7 headers (no magic) are refused.
 *   Precedence for an entry's path: pax path, then GNU 'L', then the header.
 *   End of archive: two zero blocks. EOF right after a single zero block is
 *   accepted (GNU tar does the same, with a warning). EOF without any zero
 *   block is an error, because it is what a truncated upload looks like. A
 *   non-zero block after one zero block is an error (GNU tar stops at the
 *   first zero block, so anything after it would be an entry that GNU tar and
 *   we disagree on). Bytes after the end marker (record padding) are ignored.
 *   Header-only types (directory, links, devices, FIFO) with a non-zero size
 *   are refused for the same reason: readers disagree on whether data follows.
 *
 * Writer (tar_writer_*): to a struct buf (its max is the archive's cap) or
 * an fd. Writes ustar when the entry fits, and adds a pax header when a path
 * cannot be split into ustar prefix/name, a link target is over 100 bytes, a
 * name is not ASCII, a size is 8 GiB or more, or uid/gid/mtime do not fit.
 *
 * Extraction (tar_extract_*): see the rules above tar_extract_new.
 */
#ifndef DENV_TAR_H
#define DENV_TAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/buf.h"
#include "base/err.h"

/* ---- Limits ---- */
#define TAR_BLOCK_SIZE 512
/* Longest path or link target we accept from a pax or GNU long-name header,
 * and the default (and highest) extraction path limit. Linux's PATH_MAX. */
#define TAR_MAX_PATH 4096
/* Most components in a path (the hard ceiling for tar_limits.max_depth). */
#define TAR_MAX_DEPTH 128
/* Largest pax 'x' extended header we keep in memory. Path and linkpath are
 * each at most TAR_MAX_PATH, so this leaves room for every other record. */
#define TAR_MAX_PAX_SIZE 65536
/* Most pax/GNU meta headers in a row before a real entry. */
#define TAR_MAX_META_CHAIN 8
/* Most GNU sparse extension blocks after an 'S' header (each maps 21 holes). */
#define TAR_MAX_SPARSE_EXT 1024
/* Defaults for struct tar_limits fields left at 0. */
#define TAR_DEFAULT_MAX_ENTRIES 100000
#define TAR_DEFAULT_MAX_BYTES ((uint64_t)1 << 30)
/* Largest size a ustar size field holds (11 octal digits): 8 GiB - 1. */
#define TAR_USTAR_MAX_SIZE 077777777777ULL

/* Limits for extraction and tar_write_tree. A field left 0 takes the default;
 * max_path and max_depth above TAR_MAX_PATH/TAR_MAX_DEPTH are clamped. */
struct tar_limits {
	uint64_t max_entries;	/* entries (every type; meta headers not counted) */
	uint64_t max_bytes;	/* sum of regular files' sizes */
	size_t max_path;	/* bytes in a path or link target */
	size_t max_depth;	/* components in a path */
};

enum tar_type {
	TAR_REG,	/* '0', '\0' (old-style, name not ending in '/') */
	TAR_HARDLINK,	/* '1' */
	TAR_SYMLINK,	/* '2' */
	TAR_CHAR,	/* '3' */
	TAR_BLOCK,	/* '4' */
	TAR_DIR,	/* '5', '\0' with a name ending in '/' */
	TAR_FIFO,	/* '6' */
	TAR_CONTIG,	/* '7': contiguous file; its data follows */
	TAR_SPARSE,	/* GNU 'S', or pax GNU.sparse.*: the data is not the file */
	TAR_OTHER,	/* anything else (GNU 'D', 'V', 'M', 'N', vendor types) */
};

/* Name of a type for messages ("regular file", "FIFO", ...). */
const char *tar_type_name(enum tar_type t);

/* One archive entry, as the reader reports it (after pax/GNU overrides) and
 * as the writer takes it. */
struct tar_entry {
	enum tar_type type;
	char typeflag;		/* the header's byte, for TAR_OTHER */
	const char *path;	/* NUL-terminated, never NULL */
	const char *linkpath;	/* hard/symlink target; "" when none */
	uint64_t size;		/* data bytes that follow the header */
	uint32_t mode;		/* permission bits as stored (07777) */
	uint64_t uid, gid;
	int64_t mtime;		/* seconds since the epoch */
	uint32_t mtime_nsec;	/* from a pax mtime with a fraction; else 0 */
	uint32_t devmajor, devminor;
	uint64_t offset;	/* reader: archive offset of the entry's first header */
	uint64_t index;		/* reader: 0-based entry number */
};

/* ---- Header block (allocation-free) ---- */

/* A parsed 512-byte header: fixed fields, no overrides applied. */
struct tar_header {
	char name[256 + 1];	/* ustar prefix + '/' + name, NUL-terminated */
	char linkname[100 + 1];
	char typeflag;
	bool gnu;		/* "ustar  " magic (old GNU); else POSIX ustar */
	uint32_t mode;
	uint64_t uid, gid, size;
	int64_t mtime;
	uint32_t devmajor, devminor;
	bool sparse_ext;	/* GNU 'S': extension blocks follow */
};

/* true if all 512 bytes are zero (an end-of-archive block). */
bool tar_block_is_zero(const unsigned char *blk);
/* Parse one header block. 0, or -1 (bad checksum, bad magic, bad number). */
int tar_header_parse(const unsigned char *blk, struct tar_header *h, struct err *e);

/* ---- Streaming reader ---- */

struct tar_reader;

enum tar_event_kind {
	TAR_EV_MORE,	/* all input consumed; feed more */
	TAR_EV_ENTRY,	/* ev->entry is the next entry; its data (if any) follows */
	TAR_EV_DATA,	/* ev->data/ev->len: a chunk of the current entry's data */
	TAR_EV_END,	/* end of archive; further input is ignored */
};

struct tar_event {
	const struct tar_entry *entry;	/* the current entry (ENTRY, DATA) */
	const unsigned char *data;	/* DATA: points into the fed bytes */
	size_t len;
	uint64_t remain;		/* DATA: entry bytes still to come after this chunk */
};

struct tar_reader *tar_reader_new(void);
void tar_reader_free(struct tar_reader *r);

/* Consume up to len bytes; *used says how many. Returns a tar_event_kind, or
 * -1 with e set (and every later call fails the same way). Call again with
 * the rest of the input until it returns TAR_EV_MORE. ev->entry stays valid
 * until the next TAR_EV_ENTRY; ev->data only until you feed again. */
int tar_reader_feed(struct tar_reader *r, const void *p, size_t len, size_t *used,
		    struct tar_event *ev, struct err *e);
/* The input has ended: 0 if the archive was complete, else -1 with a message
 * naming where it was cut ("entry \"x\": archive truncated in its data"). */
int tar_reader_finish(struct tar_reader *r, struct err *e);
/* The entry most recently reported (NULL before the first). */
const struct tar_entry *tar_reader_entry(const struct tar_reader *r);

/* Pull-style over a blocking fd. next: 1 and *ent set, 0 at the end of the
 * archive (checked complete), -1 on error. Unread data of the previous entry
 * is skipped. data: up to n bytes of the current entry's data; 0 when the
 * entry's data is exhausted; -1 on error or truncation. Do not mix with feed. */
int tar_reader_next_fd(struct tar_reader *r, int fd, const struct tar_entry **ent, struct err *e);
ssize_t tar_reader_data_fd(struct tar_reader *r, int fd, void *dst, size_t n, struct err *e);

/* ---- Writer ---- */

struct tar_writer;

/* Append to out; growing out past out->max fails the write with an error. */
struct tar_writer *tar_writer_new_buf(struct buf *out);
/* Write to fd (not closed by the writer). */
struct tar_writer *tar_writer_new_fd(int fd);
void tar_writer_free(struct tar_writer *w);
/* Bytes written so far. */
uint64_t tar_writer_offset(const struct tar_writer *w);

/* Metadata for the convenience writers; zero-initialised is fine: mode 0 means
 * 0644 for files, 0755 for directories, 0777 for symlinks. */
struct tar_meta {
	uint32_t mode;
	uint64_t uid, gid;
	int64_t mtime;
};

/* Low level: write the header(s) for ent (any type, pax added as needed);
 * then exactly ent->size bytes with tar_write_data (padding is added when the
 * last byte arrives). The writer copies what it needs from ent. */
int tar_write_header(struct tar_writer *w, const struct tar_entry *ent, struct err *e);
int tar_write_data(struct tar_writer *w, const void *p, size_t n, struct err *e);

int tar_write_file(struct tar_writer *w, const char *path, const struct tar_meta *m,
		   const void *data, uint64_t size, struct err *e);
/* Copy exactly size bytes from fd; a file that turns out shorter is an error. */
int tar_write_file_fd(struct tar_writer *w, const char *path, const struct tar_meta *m,
		      int fd, uint64_t size, struct err *e);
int tar_write_dir(struct tar_writer *w, const char *path, const struct tar_meta *m, struct err *e);
int tar_write_symlink(struct tar_writer *w, const char *path, const char *target,
		      const struct tar_meta *m, struct err *e);
int tar_write_hardlink(struct tar_writer *w, const char *path, const char *target,
		       const struct tar_meta *m, struct err *e);
/* The end-of-archive marker (two zero blocks). */
int tar_writer_finish(struct tar_writer *w, struct err *e);

/* tar_write_tree flags */
#define TAR_W_REFUSE_SPECIAL 0x1	/* sockets, FIFOs, devices: error (default: skipped) */

/* Archive the tree at dir, entries named prefix/<relative path> (prefix ""
 * names them by relative path only and writes no entry for dir itself, like
 * `tar -C dir .` without the "./"). Children are written in strcmp order,
 * each directory before its contents. Symlinks are stored as symlinks and
 * never followed (dir itself may be a symlink: the caller chose it). Hard
 * links are stored as separate regular files. If dir is a regular file, one
 * entry named prefix (which must then be non-empty) is written. Limits: lim
 * (NULL for defaults) bounds entries, total file bytes, path length, depth.
 * Does not write the end marker: call tar_writer_finish. */
int tar_write_tree(const char *dir, const char *prefix, struct tar_writer *w,
		   const struct tar_limits *lim, unsigned flags, struct err *e);

#define TAR_W_STABLE 0x2		/* uid, gid and mtime 0: the same files give the same bytes */

/* tar_write_tree with a filter: skip(arg, path, is_dir, &descend) is asked
 * for every entry below dir (path as the archive names it); true
 * leaves the entry out. A directory left out is not walked unless skip
 * sets *descend (it starts false): then its children are asked in turn
 * and the directory's own entry is not written (extraction makes parents). */
typedef bool (*tar_skip_fn)(void *arg, const char *path, bool is_dir, bool *descend);
int tar_write_tree_filtered(const char *dir, const char *prefix, struct tar_writer *w,
			    const struct tar_limits *lim, unsigned flags, tar_skip_fn skip, void *skip_arg,
			    struct err *e);

/* ---- .dockerignore (ignore.c) ---- */

#define TAR_IGNORE_MAX_BYTES ((size_t)1 << 20)	/* a .dockerignore file */
#define TAR_IGNORE_MAX_PATTERNS 4096

/* Docker's .dockerignore rules (ignore.c's header lists them). */
struct tar_ignore;
/* Parse the file's text. -1 with e (".dockerignore: ...") over the limits. */
int tar_ignore_parse(const char *text, size_t len, struct tar_ignore **out, struct err *e);
/* Whether path (relative to the context, '/'-separated, no "./") is left
 * out: the last pattern matching it or a parent directory decides. */
bool tar_ignore_match(const struct tar_ignore *ig, const char *path);
/* Whether any pattern is an exception ('!'): excluded directories must then be walked. */
bool tar_ignore_has_exceptions(const struct tar_ignore *ig);
void tar_ignore_free(struct tar_ignore *ig);

/* ---- Safe extraction ---- */

/* tar_extract flags */
#define TAR_X_KEEP_OWNER		0x01	/* chown to the archive's uid/gid */
#define TAR_X_KEEP_SPECIAL_BITS		0x02	/* keep setuid/setgid/sticky */
#define TAR_X_NO_SYMLINKS		0x04	/* refuse every symlink entry */
#define TAR_X_ALLOW_ESCAPING_SYMLINKS	0x08	/* create absolute/escaping symlinks too */
#define TAR_X_NO_HARDLINKS		0x10	/* refuse every hard link entry */
#define TAR_X_SKIP_SPECIAL		0x20	/* skip devices, FIFOs, sparse, other (default: refuse) */

struct tar_stats {
	uint64_t entries;	/* entries read (including skipped) */
	uint64_t files, dirs, symlinks, hardlinks, skipped;
	uint64_t bytes;		/* regular file bytes written */
};

struct tar_extract;

/*
 * Extract into dest_dir, which must exist (the caller chose it; it is opened
 * once and every entry is created relative to that fd). Rules, each refusal an
 * error naming the entry ("tar: entry \"../x\": path escapes the destination"):
 *  - paths: absolute paths and ".." components are refused (not stripped);
 *    "." and empty components are ignored; "." alone as a directory entry is
 *    skipped (the destination itself is left as it is);
 *  - every directory on the way is opened with openat(O_NOFOLLOW|O_DIRECTORY)
 *    from the destination fd: a symlink in the path (one already there or one
 *    this archive made) is never followed; such an entry is refused. Missing
 *    parents are created (0755);
 *  - regular files: an existing non-directory is unlinked, then the file is
 *    created with O_CREAT|O_EXCL|O_NOFOLLOW (never written through);
 *  - symlinks are created, never followed. By default a target that is
 *    absolute, or whose leading ".." climb above the destination, or that has
 *    ".." after a name ("a/../..", which can escape through another link), is
 *    refused; so every link resolves inside the tree. TAR_X_NO_SYMLINKS
 *    refuses them all; TAR_X_ALLOW_ESCAPING_SYMLINKS creates any target (as
 *    data: extraction still never follows it);
 *  - hard links: the target must be a regular file this archive extracted,
 *    still the same inode (dev/ino checked), not the link itself;
 *  - devices, FIFOs, contiguous, sparse and other types are refused
 *    (TAR_X_SKIP_SPECIAL: skipped);
 *  - modes are masked to 0777 unless TAR_X_KEEP_SPECIAL_BITS; ownership is
 *    the extracting process's unless TAR_X_KEEP_OWNER; mtimes are restored
 *    (directories' at tar_extract_finish, after their contents are written);
 *  - lim bounds entries, total bytes, path length and depth (checked before
 *    any byte of the entry is written).
 * On error the destination may hold the entries extracted before it (the
 * partly written file is removed); nothing is ever written outside it.
 */
struct tar_extract *tar_extract_new(const char *dest_dir, const struct tar_limits *lim,
				    unsigned flags, struct err *e);
/* Feed archive bytes (any chunking). 0, or -1 with e set. */
int tar_extract_feed(struct tar_extract *x, const void *p, size_t len, struct err *e);
/* Input ended: check the archive was complete, set directory modes/mtimes. */
int tar_extract_finish(struct tar_extract *x, struct err *e);
const struct tar_stats *tar_extract_stats(const struct tar_extract *x);
void tar_extract_free(struct tar_extract *x);

/* Conveniences: the whole archive from a blocking fd or from memory. st may be NULL. */
int tar_extract_fd(int fd, const char *dest_dir, const struct tar_limits *lim, unsigned flags,
		   struct tar_stats *st, struct err *e);
int tar_extract_mem(const void *p, size_t len, const char *dest_dir, const struct tar_limits *lim,
		    unsigned flags, struct tar_stats *st, struct err *e);

/* The check extraction applies to an entry's path: 0 if it is relative,
 * has no ".." component, and is within lim's length and depth (NULL: the
 * defaults). -1 with "tar: entry \"...\": ..." otherwise. */
int tar_path_check(const char *path, const struct tar_limits *lim, struct err *e);

#endif
