"""Integration test of AWS provisioning through denv-cp's API (targets.md,
"Clouds and hosts"; deployments.md, phases provision and join) against the
fake EC2 Query API (t/fakes/ec2.py), whose cloud-init stand-in runs a real
denvd join with the token from the RunInstances user data:

  - POST /v1/clouds for aws checks the key pair with DescribeRegions: a wrong
    secret is a 400 naming aws and EC2's answer, and nothing is stored;
  - EC2's refusal of RunInstances fails provision in its words;
  - a deploy with no host and a machine that never joins ends with
    TerminateInstances of it, the host row and event saying so;
  - after a restart with a longer join wait, a deploy creates an instance
    whose denvd joins, and an environment runs on it (exec answers);
  - denv cloud connect aws takes the keys as flags or from AWS's variables.
Prints TAP; run by t/integ/cp-provision-aws.sh. Everything stays on loopback.
"""
import base64
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "fakes"))
import cp_harness as T  # noqa: E402
import tap  # noqa: E402
from cp_harness import BOOT_KEY  # noqa: E402
from tap import ok, is_  # noqa: E402
from test_hub import call, wait_until, wait_dep, phase_map, events  # noqa: E402
from ec2 import FakeEC2, CloudInitStandIn, KEY_ID, SECRET, AUTH_MESSAGE, error_xml  # noqa: E402

SHORT_WAIT_SEC = 4
LONG_WAIT_SEC = 120      # a real denvd joining under load: generous
COMPOSE = """services:
  app:
    image: denv-test/busybox
    command: ["sleep", "3600"]
"""
DEFAULT_IMAGE = "resolve:ssm:/aws/service/canonical/ubuntu/server/24.04/stable/current/amd64/hvm/ebs-gp3/ami-id"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def deploy(s, env):
    st, doc, _ = call(s, "POST", "/v1/projects/aws/deploy", {"env": env, "compose": COMPOSE})
    assert st == 202, (st, doc)
    return doc["deployment"]["ID"]


def runs(fake, n=0):
    return [r for r in fake.requests[n:] if r["action"] == "RunInstances"]


def test_connect(s, st8):
    fake = st8["fake"]
    st, doc, _ = call(s, "POST", "/v1/clouds", {"provider": "aws", "name": "bad", "config": {
        "access_key_id": KEY_ID, "secret_access_key": "not-the-secret"}})
    is_((st, doc.get("error") if isinstance(doc, dict) else doc),
        (400, "aws: token refused (401 Unauthorized: AuthFailure: %s)" % AUTH_MESSAGE),
        "a wrong secret: 400 naming aws and EC2's answer")
    is_([r["action"] for r in fake.requests], ["DescribeRegions"], "checked with one DescribeRegions")
    st, doc, _ = call(s, "POST", "/v1/clouds", {"provider": "aws", "name": "half", "config": {
        "access_key_id": KEY_ID}})
    is_((st, doc.get("error")), (400, "aws: config.secret_access_key is required"), "a missing secret: 400")
    st, doc, _ = call(s, "POST", "/v1/clouds", {"provider": "aws", "name": "bad", "config": {
        "access_key_id": KEY_ID, "secret_access_key": SECRET, "region": "Not A Region"}})
    is_((st, doc.get("error")), (400, "aws: config.region is not an AWS region name"), "a bad region: 400")
    is_(call(s, "GET", "/v1/clouds")[1]["clouds"], [], "none of them was stored")
    st, doc, _ = call(s, "POST", "/v1/clouds", {"provider": "aws", "name": "ec2", "config": {
        "access_key_id": KEY_ID, "secret_access_key": SECRET}})
    ok(st == 201 and doc["token_checked"] is True, "the right keys: 201, token_checked", (st, doc))
    cfg = doc["cloud"]["Config"] if st == 201 else {}
    is_(cfg, {"access_key_id": "\u2022\u2022\u2022", "secret_access_key": "\u2022\u2022\u2022",
              "region": "us-east-1", "instance_type": "t3.large", "image_id": DEFAULT_IMAGE},
        "its config as shown: keys masked, the defaults filled in")
    r = fake.requests[-1]
    ok(r["action"] == "DescribeRegions" and r["status"] == 200
       and re.match(r"AWS4-HMAC-SHA256 Credential=%s/\d{8}/us-east-1/ec2/aws4_request, "
                    r"SignedHeaders=content-type;host;x-amz-date, Signature=[0-9a-f]{64}$" % KEY_ID,
                    r["headers"]["authorization"]), "denv-cp's own SigV4 signature verified", r["headers"])
    st8["cloud"] = doc["cloud"]["ID"]


def user_data_of(req):
    return base64.b64decode(req["params"]["UserData"]).decode()


def test_provider_error(s, st8):
    fake = st8["fake"]
    call(s, "POST", "/v1/projects", {"name": "aws"})
    fake.plan.append((400, error_xml("InvalidParameterValue", "Invalid value 'x' for InstanceType.")))
    doc = wait_dep(s, deploy(s, "refused"), timeout=30)
    is_((doc["deployment"]["Status"], doc["deployment"]["Error"]),
        ("failed", "provision: aws: InvalidParameterValue: Invalid value 'x' for InstanceType. (HTTP 400)"),
        "EC2 refuses RunInstances: provision fails with its code and message")


def test_never_joins(s, st8):
    fake = st8["fake"]
    n = len(fake.requests)
    dep = deploy(s, "lonely")
    doc = wait_dep(s, dep, timeout=SHORT_WAIT_SEC + 30)
    made = runs(fake, n)
    ok(len(made) == 1, "provision called RunInstances once", [r["action"] for r in fake.requests[n:]])
    p = made[0]["params"] if made else {}
    name = p.get("ClientToken", "?")
    ok(re.fullmatch(r"denv-[a-z0-9]{6}", name), "the machine's name is its ClientToken", name)
    is_((p.get("ImageId"), p.get("InstanceType"), p.get("MinCount"), p.get("MaxCount")),
        (DEFAULT_IMAGE, "t3.large", "1", "1"), "ImageId, InstanceType: the defaults; one instance")
    tags = {p.get("TagSpecification.1.Tag.%d.Key" % i): p.get("TagSpecification.1.Tag.%d.Value" % i)
            for i in range(1, 5)}
    is_((p.get("TagSpecification.1.ResourceType"), tags),
        ("instance", {"Name": name, "managed-by": "denv", "denv-cloud": st8["cloud"], "denv-deployment": dep}),
        "instance tags: Name, managed-by, the cloud and the deployment")
    ud = user_data_of(made[0]) if made else ""
    ok(ud.startswith("#cloud-config\n") and "denvd install --env-file /etc/denv/join.env" in ud
       and re.search(r"DENV_JOIN_TOKEN=djt_", ud), "UserData: the cloud-init that installs and joins denvd", ud[:120])
    ref = phase_map(doc)["provision"]["Evidence"].get("ref", "?")
    ok(re.fullmatch(r"i-[0-9a-f]{17}", ref) and ref in fake.instances, "provision evidence: the instance id", ref)
    is_((doc["deployment"]["Status"], doc["deployment"]["Error"]),
        ("failed", "join: no host of the team connected within %d s; provisioned server %s (%s) deleted"
         % (SHORT_WAIT_SEC, name, ref)), "nobody joins: join fails and says the instance was deleted")
    terms = [r for r in fake.requests[n:] if r["action"] == "TerminateInstances"]
    ok(len(terms) == 1 and terms[0]["params"].get("InstanceId.1") == ref and terms[0]["status"] == 200,
       "it ended with TerminateInstances of that instance", [r["action"] for r in fake.requests[n:]])
    ok(ref in fake.terminated, "the instance is terminated in the account", fake.terminated)
    hs = [h for h in call(s, "GET", "/v1/hosts")[1]["hosts"] if h["Name"] == name]
    ok(len(hs) == 1 and hs[0]["Status"] == "deleted" and hs[0]["ProviderRef"] == ref,
       "its host row says deleted, with the instance id", hs)
    ok([e for e in events(s, "dep:" + dep) if e["Kind"] == "host.deleted"], "with a host.deleted event")
    tok = re.search(r"DENV_JOIN_TOKEN=(djt_[A-Za-z0-9_-]+)", ud)
    st8["secrets"].append(tok.group(1) if tok else "")


def test_joins_and_runs(s, st8):
    fake, standin = st8["fake"], st8["standin"]
    fake.on_boot, fake.on_terminate = standin.boot, standin.terminate
    n = len(fake.requests)
    dep = deploy(s, "alpha")
    doc = wait_dep(s, dep, timeout=LONG_WAIT_SEC + 60)
    ok(len(runs(fake, n)) == 1, "one RunInstances")
    ref = phase_map(doc)["provision"]["Evidence"].get("ref")
    is_(doc["deployment"]["Status"], "succeeded", "the instance's denvd joined and the deploy succeeded")
    log = os.path.join(st8["tmp"], "boot", ref or "none", "denvd.log")
    if doc["deployment"]["Status"] != "succeeded" and os.path.exists(log):
        for line in open(log).read().splitlines()[-15:]:
            print("#   denvd: " + line)
    seen = standin.seen.get(ref or "", {})
    is_(seen.get("DENV_SERVER"), st8["public"], "the stand-in read DENV_SERVER from the user data's join.env")
    host = phase_map(doc)["join"]["Evidence"].get("host")
    h = [x for x in call(s, "GET", "/v1/hosts")[1]["hosts"] if x["ID"] == host]
    ok(h and h[0]["CloudID"] == st8["cloud"] and h[0]["ProviderRef"] == ref and h[0]["connected"],
       "the joined host records the aws cloud and the instance id", h)
    env = doc["deployment"]["EnvID"]
    st, r, _ = call(s, "POST", "/v1/envs/%s/exec" % env, {"service": "app", "cmd": ["sh", "-c", "echo ran-on-$0", "aws"]})
    is_((st, r.get("stdout") if isinstance(r, dict) else r), (200, "ran-on-aws\n"),
        "an environment runs on the provisioned host: exec answers")
    ok(ref not in fake.terminated, "the instance that joined is kept", fake.terminated)
    st8["env"] = env
    st, r, _ = call(s, "DELETE", "/v1/envs/" + env)
    if st == 202:
        wait_dep(s, r["deployment"]["ID"], timeout=120)


def cli(s, env, *args):
    full = {k: v for k, v in os.environ.items() if not k.startswith(("DENV_", "AWS_"))}
    full.update(env, DENV_SERVER="http://127.0.0.1:%d" % s.port, DENV_API_KEY=BOOT_KEY)
    p = subprocess.run([os.path.join(T.TOP, "bin", "denv")] + list(args), env=full, capture_output=True,
                       text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


def test_cli(s, st8):
    """denv cloud connect aws: the flags, or AWS's own variables for the keys."""
    rc, out, err = cli(s, {}, "cloud", "connect", "aws", "--name", "cli-bad", "--access-key-id", KEY_ID,
                       "--secret-access-key", "not-the-secret")
    ok(rc == 1 and "aws: token refused (401 Unauthorized: AuthFailure: %s)" % AUTH_MESSAGE in err,
       "denv cloud connect aws with a wrong secret: exit 1 with EC2's answer", (rc, out, err))
    rc, out, err = cli(s, {"AWS_ACCESS_KEY_ID": KEY_ID, "AWS_SECRET_ACCESS_KEY": SECRET}, "cloud", "connect", "aws",
                       "--name", "cli-ec2", "--region", "eu-west-1")
    doc = json.loads(out) if rc == 0 else {}
    ok(rc == 0 and doc.get("token_checked") is True and doc["cloud"]["Config"].get("region") == "eu-west-1",
       "the keys from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY: exit 0, checked, the region given", (rc, out, err))


def main():
    if not os.access(T.BIN, os.X_OK) or not os.access(os.path.join(T.TOP, "bin", "denvd"), os.X_OK):
        print("1..0 # SKIP bin/denv-cp or bin/denvd is not built")
        return 0
    tmp = tempfile.mkdtemp(prefix="denv-cp-aws-")
    fake = FakeEC2()
    port = free_port()
    public = "http://127.0.0.1:%d" % port
    standin = CloudInitStandIn(os.path.join(T.TOP, "bin", "denvd"), os.path.join(tmp, "boot"),
                               ["--probe-image", "denv-test/busybox", "--probe-url", "http://127.0.0.1:9/"])
    env = {"DENV_BOOTSTRAP_KEY": BOOT_KEY, "DENV_TEAM": "acme", "DENV_PUBLIC_URL": public,
           "DENV_AWS_EC2_URL": fake.url, "DENV_JOIN_WAIT_SEC": str(SHORT_WAIT_SEC), "DENV_HOST_GRACE_SEC": "2"}
    st8 = {"secrets": [SECRET], "fake": fake, "standin": standin, "tmp": tmp, "public": public}
    s = None
    try:
        store = os.path.join(tmp, "store")
        s = T.Server(store, env, args=["-addr", "127.0.0.1:%d" % port])
        test_connect(s, st8)
        test_provider_error(s, st8)
        test_never_joins(s, st8)
        is_(s.stop(), 0, "SIGTERM: exit 0")
        s = T.Server(store, dict(env, DENV_JOIN_WAIT_SEC=str(LONG_WAIT_SEC)), args=["-addr", "127.0.0.1:%d" % port])
        test_joins_and_runs(s, st8)
        test_cli(s, st8)
        is_(s.stop(), 0, "SIGTERM: exit 0")
        log = s.stderr()
        is_([x[:8] for x in st8["secrets"] if x and x in log], [], "no secret key or join token in the log (-v)")
        ok("ERROR: AddressSanitizer" not in log and "runtime error:" not in log, "no sanitizer report")
        s = None
    except Exception:
        ok(False, "test run raised", traceback.format_exc())
        if s is not None:
            print("# denv-cp stderr tail:")
            for line in s.stderr().splitlines()[-25:]:
                print("#   " + line)
            s.proc.kill()
    finally:
        standin.stop_all()
        fake.stop()
    return tap.finish(tmp)


if __name__ == "__main__":
    sys.exit(main())
