/*
 * yaml.h: the YAML 1.2 that compose files and denv.yaml use, parsed into the
 * JSON DOM of json/json.h.
 *
 * One document per text. Supported: block mappings and sequences (including
 * "- key: v" entries and a sequence at the same indentation as its parent
 * key), flow mappings and sequences, plain / single- / double-quoted scalars
 * with every YAML escape and line folding, literal (|) and folded (>) block
 * scalars with chomping and indentation indicators, comments, "---" and
 * "...", anchors, aliases and "<<" merge keys, the tags !!str !!int !!float
 * !!bool !!null !!map !!seq (and the non-specific "!"), and an optional
 * "%YAML" directive.
 *
 * Refused, each with "line:col: reason": a second document, "?" complex keys
 * and collections used as keys, other tags and directives, tabs in
 * indentation, invalid UTF-8, control characters, a byte-order mark anywhere
 * but at the very start, duplicate keys, undefined aliases, and anything over
 * the limits below.
 *
 * Typing of plain scalars follows the YAML 1.2 core schema:
 *   null   ~ null Null NULL and the empty scalar          -> JSON_NULL
 *   bool   true True TRUE false False FALSE                -> JSON_BOOL
 *          (yes/no/on/off are YAML 1.1 and stay strings)
 *   int    [-+]?[0-9]+, 0o[0-7]+, 0x[0-9a-fA-F]+            -> JSON_INT;
 *          an integer beyond int64 becomes a JSON_DOUBLE (decimal: the
 *          nearest double; octal/hex: summed in double precision), or stays
 *          a string if it is beyond the double range too
 *   float  [-+]?(.[0-9]+|[0-9]+(.[0-9]*)?)([eE][-+]?[0-9]+)? -> JSON_DOUBLE;
 *          .inf, -.inf and .nan have no JSON form and stay strings, as does
 *          a float that overflows a double
 *   anything else, every quoted scalar and every block scalar -> JSON_STRING.
 * Mapping keys are always strings: a plain key keeps its source text ("80",
 * "true" and "null" stay those strings), a quoted key its value, an alias
 * key the text of the scalar it names. An empty plain key (": x") is refused;
 * an empty quoted key ("": x) is the empty string.
 *
 * Merge keys: "<<: *a" or "<<: [*a, *b]" (plain "<<" only; a quoted "<<" is an
 * ordinary key). Keys written in the mapping win over merged ones wherever
 * they appear, and earlier maps in a list win over later ones. Merged members
 * follow the mapping's own members in the output order.
 *
 * Tags: !!str makes any scalar a string; !!int, !!float, !!bool, !!null
 * require text of that type ("!!int abc" is an error; !!float turns an
 * integer into a double); !!map / !!seq require that collection, and on an
 * empty node give {} / []. "!" (non-specific) makes a string. The verbatim
 * forms !<tag:yaml.org,2002:str> etc. are the same tags.
 *
 * Details a user may meet:
 *  - double-quoted \xXX is the code point U+00XX (so "\xe9" is "é"), and a
 *    \uD83D\uDE00 surrogate pair is combined; a lone surrogate is an error;
 *  - tabs may separate tokens on a line and fill blank lines, never indent;
 *  - line breaks are LF, CRLF or CR (U+0085 is not a line break, as in 1.2);
 *  - continuation lines of a flow collection must be indented more than the
 *    block node around it (a closing bracket may sit at its column); a line
 *    further left gives "unclosed flow sequence" / "unclosed flow mapping";
 *  - "[a: 1]" is a single-pair mapping inside a sequence;
 *  - anchor names are any run of non-space characters except ",[]{}" and
 *    ':' (so "*a: x" is an alias key, as libyaml reads it);
 *  - a top-level block scalar may have its content at column 0;
 *  - block scalar auto-indentation counts leading space-only lines, as
 *    libyaml does.
 */
#ifndef DENV_YAML_H
#define DENV_YAML_H

#include <stddef.h>

#include "base/err.h"
#include "json/json.h"

/* Defaults for the limits; callers may pass tighter ones. */
#define YAML_MAX_SIZE_DEFAULT ((size_t)8 << 20)	/* bytes of input */
#define YAML_MAX_DEPTH_DEFAULT 128		/* nested collections, alias expansions included */
#define YAML_MAX_DEPTH_CAP 1024		/* a larger max_depth is lowered to this: the parser recurses */
#define YAML_MAX_NODES_DEFAULT ((size_t)100000)	/* nodes in the result, counting every alias copy */
#define YAML_MAX_SCALAR_DEFAULT ((size_t)4 << 20)	/* bytes of one scalar after unescaping */

struct yaml_limits {
	size_t max_size;	/* 0 = default for each field */
	unsigned max_depth;
	size_t max_nodes;
	size_t max_scalar;
};

/* Parse one YAML document into *out (a new tree; free with json_free). An
 * empty document gives a JSON null. lim may be NULL for the defaults. On
 * failure returns -1, *out is NULL and e->msg reads "line:col: reason"
 * (1-based; col counts characters) pointing at the offending character, or
 * names the limit that was passed. */
int yaml_parse(const char *text, size_t len, const struct yaml_limits *lim,
	       struct json **out, struct err *e);

#endif
