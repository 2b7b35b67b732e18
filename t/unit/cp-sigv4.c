/* cp-sigv4.c: AWS Signature Version 4 (src/cp/sigv4.c) against AWS's own
 * published examples: "get-vanilla" of the SigV4 test suite and the
 * IAM ListUsers request of the SigV4 documentation, then an EC2 form POST
 * as denv-cp sends it (its value computed by botocore 1.43's SigV4Auth with
 * the same inputs), and the inputs the signer refuses. */
#include <string.h>

#include "cp/cloud.h"
#include "tap.h"

#define EX_KEY_ID "AKIDEXAMPLE"
#define EX_SECRET "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
#define EX_DATE "20150830T123600Z"
#define FORM_TYPE "application/x-www-form-urlencoded; charset=utf-8"

static struct aws_sigv4 example(void)
{
	struct aws_sigv4 s = { 0 };

	s.method = "GET";
	s.path = "/";
	s.region = "us-east-1";
	s.access_key_id = EX_KEY_ID;
	s.secret = EX_SECRET;
	s.amz_date = EX_DATE;
	return s;
}

int main(void)
{
	char auth[SIGV4_AUTH_MAX];
	struct aws_sigv4 s = example();
	struct err e;
	const char *form = "Action=DescribeRegions&Version=2016-11-15";

	s.host = "example.amazonaws.com";
	s.service = "service";
	is_int(aws_sigv4_sign(&s, auth, sizeof(auth), &e), 0, "get-vanilla signs");
	is_str(auth, "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
		     "SignedHeaders=host;x-amz-date, "
		     "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31",
	       "get-vanilla: the test suite's Authorization header");

	s = example();
	s.host = "iam.amazonaws.com";
	s.service = "iam";
	s.query = "Action=ListUsers&Version=2010-05-08";
	s.content_type = FORM_TYPE;
	aws_sigv4_sign(&s, auth, sizeof(auth), &e);
	is_str(auth, "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/iam/aws4_request, "
		     "SignedHeaders=content-type;host;x-amz-date, "
		     "Signature=5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7",
	       "IAM ListUsers: the documentation's signature (query and content-type signed)");

	s = example();
	s.method = "POST";
	s.host = "127.0.0.1:8999";
	s.service = "ec2";
	s.content_type = "  application/x-www-form-urlencoded;   charset=utf-8 ";
	s.payload = form;
	s.payload_len = strlen(form);
	aws_sigv4_sign(&s, auth, sizeof(auth), &e);
	is_str(auth, "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/ec2/aws4_request, "
		     "SignedHeaders=content-type;host;x-amz-date, "
		     "Signature=5359205634978c7f995b88c08c53ac32db29dff50c8983be2eb9ad236daa52c0",
	       "an EC2 form POST: botocore's signature (payload hashed, header value trimmed and folded)");

	s.payload_len--;
	aws_sigv4_sign(&s, auth, sizeof(auth), &e);
	ok(!strstr(auth, "5359205634978c7f"), "one byte less of payload: another signature");

	s = example();
	s.host = "example.amazonaws.com";
	s.service = "service";
	s.amz_date = "2015-08-30T12:36:00Z";
	ok(aws_sigv4_sign(&s, auth, sizeof(auth), &e) < 0 && strstr(e.msg, "x-amz-date"), "an ISO date is refused: %s",
	   e.msg);
	s = example();
	s.host = "h";
	s.service = "ec2";
	s.secret = "";
	ok(aws_sigv4_sign(&s, auth, sizeof(auth), &e) < 0 && strstr(e.msg, "secret"), "an empty secret is refused");
	s.secret = EX_SECRET;
	s.access_key_id = "AKID/EVIL, x";
	ok(aws_sigv4_sign(&s, auth, sizeof(auth), &e) < 0 && strstr(e.msg, "access key id"),
	   "a key id that would break the Credential field is refused");
	s.access_key_id = EX_KEY_ID;
	ok(aws_sigv4_sign(&s, auth, 40, &e) < 0 && strstr(e.msg, "does not fit"), "a short output buffer is an error");
	return tap_done();
}
