/*
 * cloud.h: what the clouds that create machines share inside the control
 * plane (cloud_machines.c, cloud_hetzner.c, cloud_aws.c, token_check.c):
 * the machine call in flight, AWS Signature Version 4 (sigv4.c), the XML
 * reader for EC2's answers (xml.c) and the signed EC2 Query API call.
 * The provider interface itself (struct cp_cloud_ops) is in cp.h.
 */
#ifndef DENV_CP_CLOUD_H
#define DENV_CP_CLOUD_H

#include "cp/cp.h"

/* ---- a machine call (cloud_machines.c) ---- */

enum cp_machine_op { CP_MACHINE_CREATE, CP_MACHINE_DELETE, CP_MACHINE_FIND };

struct cp_machine_call {
	struct cp *cp;
	enum cp_machine_op op;
	struct http_acall *call;	/* the request in flight */
	cp_machine_fn fn;
	void *arg;
	char name[CP_NAME_MAX + 1];	/* of the machine created or looked for */
};

struct cp_machine_call *cp_machine_call_new(struct cp *cp, enum cp_machine_op op, cp_machine_fn fn, void *arg);
/* Report the outcome (m and error both NULL: deleted, or nothing found)
 * and free the call. */
void cp_machine_call_end(struct cp_machine_call *c, const struct cp_machine *m, const char *error);
/* A string of a cloud's config, or fallback when it is absent or empty. */
const char *cp_cloud_cfg(const struct json *config, const char *key, const char *fallback);

/* ---- AWS Signature Version 4 (sigv4.c) ---- */

#define SIGV4_SECRET_MAX 128		/* AWS secret access keys are 40 characters */
#define SIGV4_KEY_ID_MAX 128		/* access key ids are 16 to 128 */
#define SIGV4_AUTH_MAX 512		/* the Authorization header's value */

struct aws_sigv4 {
	const char *method;
	const char *host;		/* as the Host header carries it, with a non-default port */
	const char *path;		/* already URI-encoded; NULL or "": "/" */
	const char *query;		/* canonical (sorted, encoded), or NULL */
	const char *content_type;	/* signed when set */
	const void *payload;
	size_t payload_len;
	const char *region, *service;
	const char *access_key_id, *secret;
	const char *amz_date;		/* YYYYMMDDTHHMMSSZ, also sent as X-Amz-Date */
};

/* The Authorization header's value for the request. 0, or -1 with e. */
int aws_sigv4_sign(const struct aws_sigv4 *s, char *auth, size_t n, struct err *e);

/* ---- XML (xml.c) ---- */

#define XML_INPUT_MAX CP_PROVIDER_BODY_MAX	/* a document */
#define XML_DEPTH_MAX 32			/* nesting of elements */
#define XML_NODES_MAX 20000			/* elements in one document */
#define XML_NAME_MAX 64				/* one step of an xml_path */

struct xml_node {
	const char *name;		/* the local name, without a namespace prefix */
	const char *text;		/* its own character data, decoded; "" when none */
	struct xml_node *child, *next;
};
struct xml_doc;

/* NULL with e on malformed or oversized input. */
struct xml_doc *xml_parse(const char *p, size_t n, struct err *e);
void xml_free(struct xml_doc *doc);
const struct xml_node *xml_root(const struct xml_doc *doc);
/* The first child named name; NULL when there is none (or n is NULL). */
const struct xml_node *xml_child(const struct xml_node *n, const char *name);
/* Children by "a/b/c", first match at each step; "" is n itself. */
const struct xml_node *xml_path(const struct xml_node *n, const char *path);
const char *xml_text(const struct xml_node *n, const char *path);

/* ---- the EC2 Query API (cloud_aws.c) ---- */

#define CP_EC2_API_VERSION "2016-11-15"
#define CP_AWS_REGION "us-east-1"		/* config defaults */
#define CP_AWS_INSTANCE_TYPE "t3.large"
/* Canonical's Ubuntu 24.04 AMI for the region, resolved by EC2 itself. */
#define CP_AWS_IMAGE "resolve:ssm:/aws/service/canonical/ubuntu/server/24.04/stable/current/amd64/hvm/ebs-gp3/ami-id"
#define CP_AWS_USER_DATA_MAX ((size_t)16 << 10)	/* RunInstances takes 16 KiB before base64 */
#define CP_AWS_MESSAGE_MAX 300			/* of EC2's error message, in ours */

/* POST form (already "Action=...&Version=...&...") to the cloud's EC2
 * endpoint, signed with its access key; what gets "POST <url> Action=<x>"
 * for messages. The call, or NULL with e (e->code 400 when the config is
 * unusable). The secret is wiped from our copies once the call is queued. */
struct http_acall *cp_ec2_call(struct cp *cp, const struct json *config, const char *form, int timeout_ms,
			       http_aclient_fn fn, void *arg, char *what, size_t what_n, struct err *e);
/* EC2's <Response><Errors><Error><Code/><Message/> as "Code: Message"
 * (control characters blanked); 0, or -1 when body is no such document. */
int cp_ec2_error(const char *body, size_t len, char *out, size_t n);

#endif
