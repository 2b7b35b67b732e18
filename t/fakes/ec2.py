"""A FAKE of the Amazon EC2 Query API, for tests only: it creates nothing.

It serves, on loopback, the calls denv-cp makes to provision a machine on
AWS and to delete one that never joined (src/cp/cloud_aws.c), and its token
check (src/cp/token_check.c). Every call is POST / with a form body
(Action=...&Version=2016-11-15&...) signed with AWS Signature Version 4;
answers are XML in EC2's namespace. The shapes are those of botocore
1.43.117's ec2 service model (botocore/data/ec2/2016-11-15/service-2.json,
protocol "ec2"), which boto3 1.43.117 parses (t/fakes/test_sdk_ec2.py):

  DescribeRegions       regionInfo/item/{regionName, regionEndpoint, optInStatus}
  RunInstances          ImageId, InstanceType, MinCount, MaxCount, UserData (base64),
                        ClientToken, TagSpecification.N.{ResourceType, Tag.M.{Key, Value}},
                        SubnetId, SecurityGroupId.N, KeyName
                        -> {reservationId, ownerId, instancesSet/item/{instanceId,
                           instanceState/{code, name}, privateIpAddress, tagSet/item/{key, value}, ...}}
  DescribeInstances     InstanceId.N, Filter.N.{Name, Value.M} (tag:<key>, instance-state-name)
                        -> reservationSet/item/{reservationId, instancesSet/item/...}
  TerminateInstances    InstanceId.N -> instancesSet/item/{instanceId, previousState, currentState}
  errors                <Response><Errors><Error><Code/><Message/></Error></Errors><RequestID/></Response>
                        AuthFailure (401: unknown access key id or a signature that does not
                        verify with its secret, EC2's answer to both), InvalidInstanceID.NotFound
                        (400), InvalidParameterValue (400), InvalidAMIID.Malformed (400),
                        MissingParameter (400), InvalidAction (400)

An instance is "pending" until `pending_s` seconds after its creation, then
"running"; terminated ones stay listed as "terminated". Knobs: `keys`
({access key id: secret}), `plan` ([(status, xml)] answered first),
`terminate_plan` (the same for TerminateInstances only), `on_boot(instance,
user_data)` (called in a thread after RunInstances: the cloud-init stand-in,
see CloudInitStandIn), `on_terminate(instance)`. Every request is recorded
(action, params, headers).

Run it: python3 t/fakes/ec2.py [port] (key AKIDFAKEEC2EXAMPLE).
"""
import base64
import hashlib
import hmac
import os
import re
import secrets
import subprocess
import sys
import threading
import time
import urllib.parse
from xml.sax.saxutils import escape

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fakeapi import FakeAPI  # noqa: E402

NS = "http://ec2.amazonaws.com/doc/2016-11-15/"
INSTANCE_TYPES = {"t3.micro", "t3.small", "t3.medium", "t3.large", "t3.xlarge", "m6i.large", "m6i.xlarge",
                  "c6i.large"}
REGIONS = ["us-east-1", "us-east-2", "us-west-2", "eu-central-1", "eu-west-1", "ap-southeast-1"]
STATE_CODES = {"pending": 0, "running": 16, "shutting-down": 32, "terminated": 48, "stopping": 64, "stopped": 80}
AUTH_MESSAGE = "AWS was not able to validate the provided access credentials"
KEY_ID = "AKIDFAKEEC2EXAMPLE"
SECRET = "fake/ec2+secret/0123456789abcdefEXAMPLE"


def error_xml(code, message):
    return ('<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error><Code>%s</Code><Message>%s</Message>'
            '</Error></Errors><RequestID>%s</RequestID></Response>' % (escape(code), escape(message), request_id()))


def request_id():
    h = secrets.token_hex(16)
    return "%s-%s-%s-%s-%s" % (h[:8], h[8:12], h[12:16], h[16:20], h[20:])


def sigv4_signature(secret, method, path, query, headers, signed, payload, amz_date, scope):
    """The signature SigV4 gives this request (headers: lowercase name -> value)."""
    pairs = sorted(urllib.parse.parse_qsl(query, keep_blank_values=True))
    cq = "&".join("%s=%s" % (urllib.parse.quote(k, safe="-_.~"), urllib.parse.quote(v, safe="-_.~"))
                  for k, v in pairs)
    ch = "".join("%s:%s\n" % (n, " ".join(headers.get(n, "").split())) for n in signed)
    creq = "\n".join([method, path or "/", cq, ch, ";".join(signed), hashlib.sha256(payload).hexdigest()])
    sts = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(creq.encode()).hexdigest()])
    key = ("AWS4" + secret).encode()
    for part in scope.split("/"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return hmac.new(key, sts.encode(), hashlib.sha256).hexdigest()


def indexed(params, prefix):
    """[values] of prefix.1, prefix.2, ... in order."""
    out, i = [], 1
    while "%s.%d" % (prefix, i) in params:
        out.append(params["%s.%d" % (prefix, i)])
        i += 1
    return out


class FakeEC2(FakeAPI):
    """FakeAPI's loopback server, answering XML instead of JSON (_handle)."""

    def __init__(self, keys=None, port=0, pending_s=0.5):
        self.keys = dict(keys or {KEY_ID: SECRET})
        self.pending_s = pending_s
        self.terminate_plan = []
        self.instances = {}     # id -> instance dict
        self.tokens = {}        # ClientToken -> instance id
        self.terminated = []    # ids, in order
        self.on_boot = None
        self.on_terminate = None
        self.owner = "123456789012"
        super().__init__(port)  # plan, requests ({action, params, headers, status}), lock, url

    def actions(self):
        with self.lock:
            return [r["action"] for r in self.requests]

    def wait_action(self, action, n=1, timeout=15):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.actions().count(action) >= n:
                return True
            time.sleep(0.05)
        return False

    # ---- the wire ----

    def _handle(self, h):
        raw = self._read_body(h)
        path, _, query = h.path.partition("?")
        params = dict(urllib.parse.parse_qsl(query, keep_blank_values=True))
        if h.command == "POST":
            params.update(urllib.parse.parse_qsl(raw.decode("utf-8", "replace"), keep_blank_values=True))
        headers = {k.lower(): v for k, v in h.headers.items()}
        with self.lock:
            rec = {"action": params.get("Action", ""), "params": params, "headers": headers}
            self.requests.append(rec)
            status, doc = self._authorized(h.command, path, query, headers, raw)
            if not status:
                status, doc = self._answer(params)
            rec["status"] = status
        data = doc.encode()
        h.send_response(status)
        h.send_header("Content-Type", "text/xml;charset=UTF-8")
        h.send_header("Content-Length", str(len(data)))
        h.send_header("x-amzn-RequestId", request_id())
        h.end_headers()
        h.wfile.write(data)

    def _authorized(self, method, path, query, headers, payload):
        """(0, None) when the SigV4 signature verifies with a known key, else EC2's AuthFailure."""
        m = re.fullmatch(r"AWS4-HMAC-SHA256 Credential=([^/,]+)/(\d{8}/[^/,]+/ec2/aws4_request), "
                         r"SignedHeaders=([a-z0-9;-]+), Signature=([0-9a-f]{64})", headers.get("authorization", ""))
        amz_date = headers.get("x-amz-date", "")
        if not m or m.group(1) not in self.keys or not amz_date.startswith(m.group(2)[:8]):
            return 401, error_xml("AuthFailure", AUTH_MESSAGE)
        signed = m.group(3).split(";")
        if "host" not in signed:
            return 401, error_xml("AuthFailure", AUTH_MESSAGE)
        want = sigv4_signature(self.keys[m.group(1)], method, path, query, headers, signed, payload, amz_date,
                               m.group(2))
        if not hmac.compare_digest(want, m.group(4)):
            return 401, error_xml("AuthFailure", AUTH_MESSAGE)
        return 0, None

    def _answer(self, p):
        if self.plan:
            return self.plan.pop(0)
        if p.get("Version") != "2016-11-15":
            return 400, error_xml("InvalidParameterValue", "Invalid API version: %s" % p.get("Version"))
        action = p.get("Action")
        fn = {"DescribeRegions": self._describe_regions, "RunInstances": self._run,
              "DescribeInstances": self._describe, "TerminateInstances": self._terminate}.get(action)
        if not fn:
            return 400, error_xml("InvalidAction", "The action %s is not valid for this web service." % action)
        return fn(p)

    def _response(self, action, body):
        return 200, ('<?xml version="1.0" encoding="UTF-8"?>\n<%sResponse xmlns="%s"><requestId>%s</requestId>%s'
                     '</%sResponse>' % (action, NS, request_id(), body, action))

    # ---- the actions ----

    def _describe_regions(self, p):
        items = "".join("<item><regionName>%s</regionName><regionEndpoint>ec2.%s.amazonaws.com</regionEndpoint>"
                        "<optInStatus>opt-in-not-required</optInStatus></item>" % (r, r) for r in REGIONS)
        return self._response("DescribeRegions", "<regionInfo>%s</regionInfo>" % items)

    def _state(self, inst):
        if inst["state"] == "pending" and time.time() >= inst["created"] + self.pending_s:
            inst["state"] = "running"
        return inst["state"]

    def _instance_xml(self, inst):
        state = self._state(inst)
        tags = "".join("<item><key>%s</key><value>%s</value></item>" % (escape(k), escape(v))
                       for k, v in inst["tags"].items())
        public = "<ipAddress>%s</ipAddress>" % inst["public_ip"] if state == "running" else ""
        return ("<item><instanceId>%s</instanceId><imageId>%s</imageId><instanceState><code>%d</code><name>%s</name>"
                "</instanceState><privateDnsName>ip-%s.ec2.internal</privateDnsName><dnsName/><reason/>"
                "<amiLaunchIndex>0</amiLaunchIndex><productCodes/><instanceType>%s</instanceType>"
                "<launchTime>2026-01-01T00:00:00.000Z</launchTime><placement><availabilityZone>us-east-1a"
                "</availabilityZone><tenancy>default</tenancy></placement><monitoring><state>disabled</state>"
                "</monitoring><privateIpAddress>%s</privateIpAddress>%s<groupSet/><architecture>x86_64"
                "</architecture><rootDeviceType>ebs</rootDeviceType><rootDeviceName>/dev/sda1</rootDeviceName>"
                "<blockDeviceMapping/><virtualizationType>hvm</virtualizationType><clientToken>%s</clientToken>"
                "<tagSet>%s</tagSet><hypervisor>xen</hypervisor></item>"
                % (inst["id"], escape(inst["image"]), STATE_CODES[state], state, inst["private_ip"].replace(".", "-"),
                   escape(inst["type"]), inst["private_ip"], public, escape(inst["client_token"]), tags))

    def _run(self, p):
        for need in ("ImageId", "MinCount", "MaxCount"):
            if not p.get(need):
                return 400, error_xml("MissingParameter", "The request must contain the parameter %s" % need)
        image, itype = p["ImageId"], p.get("InstanceType", "m1.small")
        if not (re.fullmatch(r"ami-[0-9a-f]{8,17}", image) or image.startswith("resolve:ssm:/")):
            return 400, error_xml("InvalidAMIID.Malformed", 'Invalid id: "%s" (expecting "ami-...")' % image)
        if itype not in INSTANCE_TYPES:
            return 400, error_xml("InvalidParameterValue",
                                  "Invalid value '%s' for InstanceType." % itype)
        if p["MinCount"] != "1" or p["MaxCount"] != "1":
            return 400, error_xml("InvalidParameterValue", "this fake makes one instance per call")
        try:
            user_data = base64.b64decode(p.get("UserData", ""), validate=True).decode()
        except ValueError:
            return 400, error_xml("InvalidParameterValue", "Invalid BASE64 encoding of user data.")
        token = p.get("ClientToken", "")
        if token and token in self.tokens:
            inst = self.instances[self.tokens[token]]
            return self._run_answer(inst)
        tags, i = {}, 1
        while "TagSpecification.%d.ResourceType" % i in p:
            if p["TagSpecification.%d.ResourceType" % i] == "instance":
                j = 1
                while "TagSpecification.%d.Tag.%d.Key" % (i, j) in p:
                    tags[p["TagSpecification.%d.Tag.%d.Key" % (i, j)]] = p.get(
                        "TagSpecification.%d.Tag.%d.Value" % (i, j), "")
                    j += 1
            i += 1
        n = len(self.instances) + 1
        inst = {"id": "i-%017x" % (0x0a1b2c3d4e5f00000 + n), "image": image, "type": itype, "state": "pending",
                "created": time.time(), "tags": tags, "user_data": user_data, "client_token": token,
                "private_ip": "10.0.0.%d" % (n % 250 + 4), "public_ip": "198.51.100.%d" % (n % 250 + 4),
                "reservation": "r-%017x" % (0x0f00000000000000 + n), "params": dict(p)}
        self.instances[inst["id"]] = inst
        if token:
            self.tokens[token] = inst["id"]
        if self.on_boot:
            threading.Thread(target=self.on_boot, args=(dict(inst), user_data), daemon=True).start()
        return self._run_answer(inst)

    def _run_answer(self, inst):
        return self._response("RunInstances", "<reservationId>%s</reservationId><ownerId>%s</ownerId><groupSet/>"
                              "<instancesSet>%s</instancesSet>" % (inst["reservation"], self.owner,
                                                                    self._instance_xml(inst)))

    def _matches(self, inst, filters):
        for name, values in filters:
            if name.startswith("tag:"):
                if inst["tags"].get(name[4:]) not in values:
                    return False
            elif name == "instance-state-name":
                if self._state(inst) not in values:
                    return False
            else:
                return False
        return True

    def _describe(self, p):
        ids = indexed(p, "InstanceId")
        for i in ids:
            if i not in self.instances:
                return 400, error_xml("InvalidInstanceID.NotFound", "The instance ID '%s' does not exist" % i)
        filters, i = [], 1
        while "Filter.%d.Name" % i in p:
            filters.append((p["Filter.%d.Name" % i], indexed(p, "Filter.%d.Value" % i)))
            i += 1
        found = [v for v in self.instances.values() if (not ids or v["id"] in ids) and self._matches(v, filters)]
        res = "".join("<item><reservationId>%s</reservationId><ownerId>%s</ownerId><groupSet/><instancesSet>%s"
                      "</instancesSet></item>" % (v["reservation"], self.owner, self._instance_xml(v)) for v in found)
        return self._response("DescribeInstances", "<reservationSet>%s</reservationSet>" % res)

    def _terminate(self, p):
        if self.terminate_plan:
            return self.terminate_plan.pop(0)
        ids = indexed(p, "InstanceId")
        if not ids:
            return 400, error_xml("MissingParameter", "The request must contain the parameter InstanceId")
        for i in ids:
            if i not in self.instances:
                return 400, error_xml("InvalidInstanceID.NotFound", "The instance ID '%s' does not exist" % i)
        items = ""
        for i in ids:
            inst = self.instances[i]
            prev = self._state(inst)
            if prev != "terminated":
                inst["state"] = "terminated"
                self.terminated.append(i)
                if self.on_terminate:
                    threading.Thread(target=self.on_terminate, args=(dict(inst),), daemon=True).start()
            items += ("<item><instanceId>%s</instanceId><currentState><code>32</code><name>shutting-down</name>"
                      "</currentState><previousState><code>%d</code><name>%s</name></previousState></item>"
                      % (i, STATE_CODES[prev], prev))
        return self._response("TerminateInstances", "<instancesSet>%s</instancesSet>" % items)


class CloudInitStandIn:
    """What cloud-init would do on the instance, done on this machine: read
    DENV_SERVER and DENV_JOIN_TOKEN from the /etc/denv/join.env that the
    user data writes, and run `denvd join` with them, its data under
    tmp/<instance id>. It uses the denvd it is given rather than the one the
    user data downloads: the control plane under test serves no release.
    Use as fake.on_boot = standin.boot, fake.on_terminate = standin.terminate."""

    def __init__(self, denvd, tmp, extra=()):
        self.denvd, self.tmp, self.extra = denvd, tmp, list(extra)
        self.procs = {}
        self.seen = {}   # instance id -> the join.env values

    @staticmethod
    def join_env(user_data):
        m = re.search(r"- path: /etc/denv/join\.env\n(?:    .*\n)*?    content: \|\n((?:      .*\n)+)", user_data)
        if not m:
            return {}
        return dict(line.strip().split("=", 1) for line in m.group(1).splitlines() if "=" in line)

    def boot(self, inst, user_data):
        env = self.join_env(user_data)
        self.seen[inst["id"]] = env
        if not env.get("DENV_SERVER") or not env.get("DENV_JOIN_TOKEN"):
            return
        d = os.path.join(self.tmp, inst["id"])
        os.makedirs(d, exist_ok=True)
        log = open(os.path.join(d, "denvd.log"), "w")
        self.procs[inst["id"]] = subprocess.Popen(
            [self.denvd, "join", "--server", env["DENV_SERVER"], "--token", env["DENV_JOIN_TOKEN"],
             "--state", os.path.join(d, "host.json"), "--data", os.path.join(d, "data")] + self.extra,
            stdin=subprocess.DEVNULL, stdout=log, stderr=log)

    def terminate(self, inst):
        p = self.procs.pop(inst["id"], None)
        if p:
            p.terminate()
            p.wait(30)

    def stop_all(self):
        for i in list(self.procs):
            self.terminate({"id": i})


if __name__ == "__main__":
    f = FakeEC2(port=int(sys.argv[1]) if len(sys.argv) > 1 else 0)
    print("fake EC2 Query API on %s (access key %s)" % (f.url, KEY_ID), flush=True)
    try:
        f.thread.join()
    except KeyboardInterrupt:
        f.stop()
