/*
 * cloud_aws.c: machines on EC2 through its Query API (version 2016-11-15),
 * each call a form POSTed to the region's endpoint and signed with SigV4
 * (sigv4.c); the answers are XML (xml.c). Create is RunInstances (one
 * instance of the cloud's instance_type from its image_id, the cloud-init
 * in UserData, tags Name and the labels on the instance, and the machine's
 * name as ClientToken so that a repeated request makes no second one),
 * delete is TerminateInstances, find is DescribeInstances by tag:Name
 * among instances not terminated. The endpoint is
 * https://ec2.<region>.amazonaws.com unless DENV_AWS_EC2_URL says otherwise
 * (tests).
 *
 * The secret access key goes only into the signature; it and the user data
 * (which holds a join token) are never logged.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/enc.h"
#include "base/log.h"
#include "base/str.h"
#include "cp/cloud.h"

#define EC2_CONTENT_TYPE "application/x-www-form-urlencoded; charset=utf-8"
#define EC2_URL_MAX 512
#define EC2_REGION_MAX 32
#define EC2_HEADER_MAX (SIGV4_AUTH_MAX + 32)

/* Regions are lowercase words and digits joined by '-' ("eu-central-1"). */
static bool region_ok(const char *r)
{
	size_t n = strlen(r);

	return n > 0 && n < EC2_REGION_MAX && strspn(r, "abcdefghijklmnopqrstuvwxyz0123456789-") == n;
}

/* The Host header's value for url: its authority without a default port. */
static void url_host(const char *url, char *out, size_t n)
{
	bool tls = str_has_prefix(url, "https://");
	const char *a = strstr(url, "://");
	size_t len;

	a = a ? a + 3 : url;
	len = strcspn(a, "/?#");
	if (len >= n)
		len = n - 1;
	memcpy(out, a, len);
	out[len] = '\0';
	if (str_has_suffix(out, tls ? ":443" : ":80"))
		out[strlen(out) - (tls ? 4 : 3)] = '\0';
}

static void amz_now(char out[17])
{
	time_t t = (time_t)(clock_now_ns() / 1000000000);
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(out, 17, "%Y%m%dT%H%M%SZ", &tm);
}

/* -1 with e (code 400): the cloud's config cannot sign a request. */
static int config_fail(struct err *e, const char *msg)
{
	err_set(e, "aws: %s", msg);
	e->code = 400;
	return -1;
}

/* The endpoint's URL ("<base>/") for the cloud's region. */
static int endpoint(const struct cp *cp, const char *region, char *url, size_t n, struct err *e)
{
	if (!region_ok(region))
		return config_fail(e, "config.region is not an AWS region name");
	if (cp->cfg.aws_ec2_url)
		snprintf(url, n, "%s/", cp->cfg.aws_ec2_url);
	else
		snprintf(url, n, "https://ec2.%s.amazonaws.com/", region);
	return 0;
}

struct http_acall *cp_ec2_call(struct cp *cp, const struct json *config, const char *form, int timeout_ms,
			       http_aclient_fn fn, void *arg, char *what, size_t what_n, struct err *e)
{
	const char *key_id = json_get_str(config, "access_key_id"), *secret = json_get_str(config, "secret_access_key");
	const char *region = cp_cloud_cfg(config, "region", CP_AWS_REGION);
	char url[EC2_URL_MAX], host[EC2_URL_MAX], date[17], sig[SIGV4_AUTH_MAX];
	char auth[EC2_HEADER_MAX], xdate[40];
	const char *headers[] = { auth, xdate, "Content-Type: " EC2_CONTENT_TYPE, "Accept: text/xml",
				  "User-Agent: denv-cp", NULL };
	struct aws_sigv4 s = { 0 };
	struct http_client_req req = { 0 };
	struct http_acall *call;

	if (!key_id || !*key_id || !secret || !*secret)
		return config_fail(e, "config.access_key_id and config.secret_access_key are required"), NULL;
	if (endpoint(cp, region, url, sizeof(url), e) < 0)
		return NULL;
	url_host(url, host, sizeof(host));
	amz_now(date);
	s.method = "POST";
	s.host = host;
	s.path = "/";
	s.content_type = EC2_CONTENT_TYPE;
	s.payload = form;
	s.payload_len = strlen(form);
	s.region = region;
	s.service = "ec2";
	s.access_key_id = key_id;
	s.secret = secret;
	s.amz_date = date;
	if (aws_sigv4_sign(&s, sig, sizeof(sig), e) < 0) {
		e->code = 400;
		return NULL;
	}
	snprintf(auth, sizeof(auth), "Authorization: %s", sig);
	snprintf(xdate, sizeof(xdate), "X-Amz-Date: %s", date);
	snprintf(what, what_n, "POST %.200s %.*s", url, (int)strcspn(form, "&"), form);
	req.method = "POST";
	req.url = url;
	req.headers = headers;
	req.body = form;
	req.body_len = strlen(form);
	req.timeout_ms = timeout_ms;
	call = http_aclient_do(cp_aclient(cp), &req, CP_PROVIDER_BODY_MAX, fn, arg, e);
	memset(sig, 0, sizeof(sig));
	memset(auth, 0, sizeof(auth));
	if (!call)
		err_prefix(e, "aws");
	return call;
}

/* Their words go into log lines and one-line errors: no control characters. */
static void blank_controls(char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			*s = ' ';
}

int cp_ec2_error(const char *body, size_t len, char *out, size_t n)
{
	struct err pe;
	struct xml_doc *doc = body && len ? xml_parse(body, len, &pe) : NULL;
	const struct xml_node *err = xml_path(xml_root(doc), "Errors/Error");
	const char *code = xml_text(err, "Code"), *msg = xml_text(err, "Message");

	if (!doc || !str_eq(xml_root(doc)->name, "Response") || !code || !*code) {
		xml_free(doc);
		return -1;
	}
	snprintf(out, n, "%.80s%s%.*s", code, msg && *msg ? ": " : "", CP_AWS_MESSAGE_MAX, msg ? msg : "");
	blank_controls(out);
	xml_free(doc);
	return 0;
}

/* ---- the three calls ---- */

/* An instance of an answer: RunInstances' first, or DescribeInstances' first
 * of its first reservation; NULL when there is none. */
static const struct xml_node *answer_instance(enum cp_machine_op op, const struct xml_node *root)
{
	if (op == CP_MACHINE_CREATE)
		return xml_path(root, "instancesSet/item");
	return xml_path(root, "reservationSet/item/instancesSet/item");
}

/* The instance's Name tag, if it has one. */
static const char *instance_name(const struct xml_node *inst)
{
	for (const struct xml_node *t = xml_child(xml_child(inst, "tagSet"), "item"); t; t = t->next)
		if (str_eq(t->name, "item") && str_eq(xml_text(t, "key"), "Name"))
			return xml_text(t, "value");
	return NULL;
}

/* The machine of an answer's instance: id, address (public, else private), name. */
static int read_machine(const struct cp_machine_call *c, const struct xml_node *inst, struct cp_machine *m)
{
	const char *id = xml_text(inst, "instanceId"), *pub = xml_text(inst, "ipAddress");
	const char *priv = xml_text(inst, "privateIpAddress"), *name = instance_name(inst);

	memset(m, 0, sizeof(*m));
	if (!id || !*id || str_copy(m->ref, sizeof(m->ref), id) < 0)
		return -1;
	str_copy(m->ip, sizeof(m->ip), pub && *pub ? pub : priv ? priv : "");
	str_copy(m->name, sizeof(m->name), name && *name ? name : c->name);
	return 0;
}

static void http_failed(const struct http_client_resp *resp, char *why, size_t n)
{
	char msg[ERR_MSG_MAX];

	if (cp_ec2_error(resp->body.data, resp->body.len, msg, sizeof(msg)) == 0)
		snprintf(why, n, "aws: %.400s (HTTP %d)", msg, resp->status);
	else
		snprintf(why, n, "aws: HTTP %d from the EC2 API", resp->status);
}

static void answered(const struct http_client_resp *resp, const struct err *e, void *arg)
{
	struct cp_machine_call *c = arg;
	const struct xml_node *inst;
	struct cp_machine m;
	struct xml_doc *doc;
	char why[ERR_MSG_MAX];
	struct err pe;

	c->call = NULL;
	if (!resp) {
		snprintf(why, sizeof(why), "aws: %.400s", e ? e->msg : "request failed");
		cp_machine_call_end(c, NULL, why);
		return;
	}
	if (resp->status < 200 || resp->status > 299) {
		http_failed(resp, why, sizeof(why));
		/* An instance EC2 no longer knows: what a delete wanted. */
		cp_machine_call_end(c, NULL, c->op == CP_MACHINE_DELETE && strstr(why, "InvalidInstanceID.NotFound")
						     ? NULL : why);
		return;
	}
	if (c->op == CP_MACHINE_DELETE) {
		cp_machine_call_end(c, NULL, NULL);
		return;
	}
	doc = xml_parse(resp->body.data, resp->body.len, &pe);
	inst = answer_instance(c->op, xml_root(doc));
	if (doc && !inst && c->op == CP_MACHINE_FIND) {
		xml_free(doc);
		cp_machine_call_end(c, NULL, NULL);
		return;
	}
	if (!doc || read_machine(c, inst, &m) < 0) {
		snprintf(why, sizeof(why), "aws: HTTP %d without an instance id in the answer%s%.200s", resp->status,
			 doc ? "" : ": ", doc ? "" : pe.msg);
		xml_free(doc);
		cp_machine_call_end(c, NULL, why);
		return;
	}
	xml_free(doc);
	cp_machine_call_end(c, &m, NULL);
}

/* Start op with the form built so far (freed here, wiped: it may hold user data). */
static struct cp_machine_call *ec2_start(struct cp *cp, const struct json *config, enum cp_machine_op op,
					 const char *name, struct buf *form, cp_machine_fn fn, void *arg,
					 struct err *e)
{
	struct cp_machine_call *c = cp_machine_call_new(cp, op, fn, arg);
	char what[300];

	str_copy(c->name, sizeof(c->name), name ? name : "");
	c->call = cp_ec2_call(cp, config, form->data, CP_PROVIDER_TIMEOUT_MS, answered, c, what, sizeof(what), e);
	memset(form->data, 0, form->len);
	buf_release(form);
	if (!c->call) {
		free(c);
		return NULL;
	}
	return c;
}

static void form_param(struct buf *form, const char *key, const char *value)
{
	buf_addf(form, "&%s=", key);
	http_pct_encode(form, value, "/");
}

static void form_tag(struct buf *form, int n, const char *key, const char *value)
{
	char k[64];

	snprintf(k, sizeof(k), "TagSpecification.1.Tag.%d.Key", n);
	form_param(form, k, key);
	snprintf(k, sizeof(k), "TagSpecification.1.Tag.%d.Value", n);
	form_param(form, k, value);
}

struct cp_machine_call *cp_aws_create(struct cp *cp, const struct json *config, const char *name,
				      const char *user_data, const struct json *labels, cp_machine_fn fn, void *arg,
				      struct err *e)
{
	static const char *const optional[][2] = {
		{ "subnet_id", "SubnetId" }, { "security_group_id", "SecurityGroupId.1" }, { "key_name", "KeyName" }
	};
	struct buf form = BUF_INIT, b64 = BUF_INIT;
	struct cp_machine_call *c;
	size_t ud_len = strlen(user_data);
	int tag = 1;

	if (ud_len > CP_AWS_USER_DATA_MAX)
		return err_set(e, "aws: cloud-init user data is %zu bytes, more than RunInstances takes (%zu)", ud_len,
			       CP_AWS_USER_DATA_MAX), NULL;
	enc_base64_encode(&b64, user_data, ud_len, ENC_BASE64);
	buf_adds(&form, "Action=RunInstances&Version=" CP_EC2_API_VERSION "&MinCount=1&MaxCount=1");
	form_param(&form, "ImageId", cp_cloud_cfg(config, "image_id", CP_AWS_IMAGE));
	form_param(&form, "InstanceType", cp_cloud_cfg(config, "instance_type", CP_AWS_INSTANCE_TYPE));
	form_param(&form, "ClientToken", name);
	form_param(&form, "UserData", b64.data ? b64.data : "");
	for (size_t i = 0; i < sizeof(optional) / sizeof(optional[0]); i++)
		if (cp_cloud_cfg(config, optional[i][0], NULL))
			form_param(&form, optional[i][1], cp_cloud_cfg(config, optional[i][0], NULL));
	form_param(&form, "TagSpecification.1.ResourceType", "instance");
	form_tag(&form, tag++, "Name", name);
	for (size_t i = 0; labels && labels->type == JSON_OBJECT && i < labels->u.obj.n; i++)
		if (labels->u.obj.m[i].val->type == JSON_STRING)
			form_tag(&form, tag++, labels->u.obj.m[i].key, labels->u.obj.m[i].val->u.str.s);
	memset(b64.data, 0, b64.len);
	buf_release(&b64);
	c = ec2_start(cp, config, CP_MACHINE_CREATE, name, &form, fn, arg, e);
	if (c)
		log_info("cloud", "aws: creating instance %s (%s in %s)", name,
			 cp_cloud_cfg(config, "instance_type", CP_AWS_INSTANCE_TYPE),
			 cp_cloud_cfg(config, "region", CP_AWS_REGION));
	return c;
}

/* Instance ids are "i-" and 8 or 17 hex digits; anything else is refused. */
static bool instance_id_ok(const char *ref)
{
	size_t n = ref ? strlen(ref) : 0;

	return (n == 10 || n == 19) && str_has_prefix(ref, "i-") && strspn(ref + 2, "0123456789abcdef") == n - 2;
}

struct cp_machine_call *cp_aws_delete(struct cp *cp, const struct json *config, const char *ref, cp_machine_fn fn,
				      void *arg, struct err *e)
{
	struct buf form = BUF_INIT;
	struct cp_machine_call *c;

	if (!instance_id_ok(ref))
		return err_set(e, "aws: \"%.40s\" is not an instance id", ref ? ref : ""), NULL;
	buf_adds(&form, "Action=TerminateInstances&Version=" CP_EC2_API_VERSION);
	form_param(&form, "InstanceId.1", ref);
	c = ec2_start(cp, config, CP_MACHINE_DELETE, NULL, &form, fn, arg, e);
	if (c)
		log_info("cloud", "aws: terminating instance %s", ref);
	return c;
}

struct cp_machine_call *cp_aws_find(struct cp *cp, const struct json *config, const char *name, cp_machine_fn fn,
				    void *arg, struct err *e)
{
	static const char *const alive[] = { "pending", "running", "stopping", "stopped" };
	struct buf form = BUF_INIT;
	char key[48];

	if (!cp_valid_name(name))
		return err_set(e, "aws: \"%.63s\" is not an instance name denv makes", name), NULL;
	buf_adds(&form, "Action=DescribeInstances&Version=" CP_EC2_API_VERSION);
	form_param(&form, "Filter.1.Name", "tag:Name");
	form_param(&form, "Filter.1.Value.1", name);
	form_param(&form, "Filter.2.Name", "instance-state-name");
	for (size_t i = 0; i < sizeof(alive) / sizeof(alive[0]); i++) {
		snprintf(key, sizeof(key), "Filter.2.Value.%zu", i + 1);
		form_param(&form, key, alive[i]);
	}
	return ec2_start(cp, config, CP_MACHINE_FIND, name, &form, fn, arg, e);
}
