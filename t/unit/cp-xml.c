/* cp-xml.c: the XML reader for EC2's answers (src/cp/xml.c) on the shapes
 * EC2 sends (RunInstances, DescribeInstances, an error Response), entity
 * and CDATA decoding, and the malformed and oversized documents it must
 * refuse; then cp_ec2_error's "Code: Message". Inputs are copied into
 * exact-size allocations so that ASan catches a read past the end. */
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "cp/cloud.h"
#include "tap.h"

static struct xml_doc *parse(const char *s, struct err *e)
{
	size_t n = strlen(s);
	char *copy = malloc(n ? n : 1);
	struct xml_doc *doc;

	memcpy(copy, s, n);
	doc = xml_parse(copy, n, e);
	free(copy);	/* the tree holds its own copies */
	return doc;
}

static const char run_answer[] =
	"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
	"<RunInstancesResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\">\n"
	"  <requestId>r-1</requestId><reservationId>r-0a1</reservationId><groupSet/>\n"
	"  <instancesSet><item><instanceId>i-0123456789abcdef0</instanceId>\n"
	"    <instanceState><code>0</code><name>pending</name></instanceState>\n"
	"    <privateIpAddress>10.0.0.7</privateIpAddress>\n"
	"    <tagSet><item><key>managed-by</key><value>denv</value></item>"
	"<item><key>Name</key><value>denv-abc123</value></item></tagSet>\n"
	"  </item></instancesSet>\n"
	"</RunInstancesResponse>\n";

static void shapes(void)
{
	struct err e;
	struct xml_doc *doc = parse(run_answer, &e);
	const struct xml_node *root = xml_root(doc), *item = xml_path(root, "instancesSet/item"), *tag;

	ok(doc != NULL, "RunInstances' answer parses");
	is_str(root ? root->name : "", "RunInstancesResponse", "the root's name");
	is_str(xml_text(item, "instanceId"), "i-0123456789abcdef0", "instancesSet/item/instanceId");
	is_str(xml_text(item, "instanceState/name"), "pending", "a nested path");
	is_str(xml_text(root, "groupSet"), "", "an empty element has empty text");
	ok(xml_text(item, "ipAddress") == NULL && xml_path(root, "no/such") == NULL, "absent paths are NULL");
	tag = xml_child(xml_child(item, "tagSet"), "item");
	ok(tag && tag->next && strcmp(xml_text(tag->next, "value"), "denv-abc123") == 0, "siblings in order");
	ok(xml_path(root, "") == root && xml_text(NULL, "a") == NULL, "\"\" is the node itself; NULL is safe");
	xml_free(doc);

	doc = parse("<a:Root xmlns:a=\"x\" b='1'><a:v>1 &lt; 2 &amp;&amp; &quot;x&apos; &#65;&#x263A;</a:v>"
		    "<w><![CDATA[<not & markup>]]> tail</w><!-- c --><e/></a:Root>",
		    &e);
	root = xml_root(doc);
	is_str(root ? root->name : "", "Root", "a namespace prefix is dropped");
	is_str(xml_text(root, "v"), "1 < 2 && \"x' A\xe2\x98\xba", "entities and character references decoded");
	is_str(xml_text(root, "w"), "<not & markup> tail", "CDATA kept verbatim");
	ok(xml_child(root, "e") != NULL, "a self-closing element after a comment");
	xml_free(doc);
}

/* open repeated n times, then close n times. */
static char *nested(int n, const char *open, const char *close)
{
	struct buf b = BUF_INIT;

	for (int i = 0; i < n; i++)
		buf_adds(&b, open);
	for (int i = 0; i < n; i++)
		buf_adds(&b, close);
	return buf_detach(&b, NULL);
}

/* <r> holding n empty elements. */
static char *siblings(int n)
{
	struct buf b = BUF_INIT;

	buf_adds(&b, "<r>");
	for (int i = 0; i < n; i++)
		buf_adds(&b, "<a/>");
	buf_adds(&b, "</r>");
	return buf_detach(&b, NULL);
}

static void refused(void)
{
	static const struct {
		const char *doc, *why;
	} bad[] = {
		{ "", "no root element" },
		{ "   ", "no root element" },
		{ "<a>", "not closed" },
		{ "<a></b>", "closed by" },
		{ "<a><b></a>", "closed by" },
		{ "<a>x</a><b/>", "after the root" },
		{ "<a>x</a>junk", "after the root" },
		{ "<!DOCTYPE a [<!ENTITY x \"y\">]><a>&x;</a>", "DOCTYPE" },
		{ "<a>&nope;</a>", "unknown entity" },
		{ "<a>&#0;</a>", "character reference" },
		{ "<a>&#xD800;</a>", "character reference" },
		{ "<a>&#x110000;</a>", "character reference" },
		{ "<a>&#123456789;</a>", "character reference" },
		{ "<a>&#12</a>", "character reference" },
		{ "<a b=1></a>", "without quotes" },
		{ "<a b></a>", "without '='" },
		{ "<a b=\"1></a>", "unterminated attribute" },
		{ "<a><![CDATA[x</a>", "unterminated CDATA" },
		{ "<a><!-- x</a>", "unterminated comment" },
		{ "<?xml version=\"1.0\"", "unterminated processing" },
		{ "<>", "name was expected" },
		{ "<a:>x</a:>", "empty local name" },
		{ "<a", "unterminated start tag" },
		{ "<a></a", "unterminated end tag" },
	};
	struct err e;
	char *deep;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct xml_doc *doc = parse(bad[i].doc, &e);

		ok(!doc && strstr(e.msg, bad[i].why), "refused: %s (%s)", bad[i].doc, doc ? "parsed" : e.msg);
		xml_free(doc);
	}
	deep = nested(XML_DEPTH_MAX + 1, "<a>", "</a>");
	ok(!parse(deep, &e) && strstr(e.msg, "deeper"), "nesting past XML_DEPTH_MAX is refused: %s", e.msg);
	free(deep);
	deep = siblings(XML_NODES_MAX + 1);
	ok(!parse(deep, &e) && strstr(e.msg, "elements"), "more than XML_NODES_MAX elements are refused: %s", e.msg);
	free(deep);
	ok(!xml_parse("<a/>", XML_INPUT_MAX + 1, &e) && strstr(e.msg, "bytes"), "a document over XML_INPUT_MAX: %s",
	   e.msg);
}

static void ec2_errors(void)
{
	char out[ERR_MSG_MAX];
	const char *auth = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error><Code>AuthFailure</Code>"
			   "<Message>AWS was not able to validate the provided access credentials</Message></Error>"
			   "</Errors><RequestID>7e1c</RequestID></Response>";

	is_int(cp_ec2_error(auth, strlen(auth), out, sizeof(out)), 0, "EC2's error Response is read");
	is_str(out, "AuthFailure: AWS was not able to validate the provided access credentials", "as Code: Message");
	auth = "<Response><Errors><Error><Code>Bad</Code><Message>a\nb\tc</Message></Error></Errors></Response>";
	cp_ec2_error(auth, strlen(auth), out, sizeof(out));
	is_str(out, "Bad: a b c", "control characters in their message are blanked");
	auth = "<Response><Errors><Error><Code>Only</Code></Error></Errors></Response>";
	cp_ec2_error(auth, strlen(auth), out, sizeof(out));
	is_str(out, "Only", "a code without a message");
	ok(cp_ec2_error("{\"message\":\"x\"}", 15, out, sizeof(out)) < 0, "JSON is no EC2 error");
	ok(cp_ec2_error(run_answer, strlen(run_answer), out, sizeof(out)) < 0, "nor is a success answer");
	ok(cp_ec2_error(NULL, 0, out, sizeof(out)) < 0, "nor an empty body");
}

int main(void)
{
	shapes();
	refused();
	ec2_errors();
	return tap_done();
}
