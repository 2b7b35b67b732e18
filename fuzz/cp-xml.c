/*
 * fuzz/cp-xml.c: the XML reader for EC2's answers (src/cp/xml.c) and the
 * error reader on top of it (cp_ec2_error) on any input. Neither may crash
 * or read past the input (copied to its own allocation for ASan); a tree
 * that parses has names that are never empty, text that is never NULL,
 * and no more than XML_NODES_MAX elements; an error message is a C string.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cp/cloud.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void must(int cond)
{
	if (!cond)
		abort();	/* the fuzzer's way to report a finding */
}

/* Elements below n, checked on the way; depth bounded by the reader. */
static size_t walk(const struct xml_node *n, int depth)
{
	size_t count = 0;

	must(depth <= XML_DEPTH_MAX);
	for (; n; n = n->next) {
		must(n->name && *n->name && n->text);
		must(strchr(n->name, ':') == NULL);
		count += 1 + walk(n->child, depth + 1);
	}
	return count;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *copy = malloc(size ? size : 1), out[ERR_MSG_MAX];
	struct xml_doc *doc;
	struct err e;

	memcpy(copy, data, size);
	e.msg[0] = '\0';
	doc = xml_parse(copy, size, &e);
	if (doc) {
		const struct xml_node *root = xml_root(doc);

		must(root && !root->next);
		must(walk(root, 1) <= XML_NODES_MAX);
		(void)xml_text(root, "Errors/Error/Code");
	} else {
		must(memchr(e.msg, '\0', sizeof(e.msg)) != NULL && e.msg[0]);
	}
	xml_free(doc);
	if (cp_ec2_error(copy, size, out, sizeof(out)) == 0)
		must(memchr(out, '\0', sizeof(out)) != NULL && out[0]);
	free(copy);
	return 0;
}
