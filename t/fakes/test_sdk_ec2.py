"""The fake EC2 Query API (t/fakes/ec2.py) against boto3, AWS's own SDK:
boto3 makes the calls denv-cp makes (src/cp/cloud_aws.c, token_check.c) —
DescribeRegions, RunInstances with UserData and TagSpecifications,
DescribeInstances (by id, then by tag:Name and state, pending then
running), TerminateInstances, and a TerminateInstances of an instance that
is gone — signed with SigV4 by botocore, and accepts every answer; a wrong
secret or an unknown key id raises botocore's ClientError with AuthFailure.
Prints TAP; run by t/integ/fakes-ec2-sdk.sh. Loopback only.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import tap  # noqa: E402
from tap import ok, is_, skip  # noqa: E402
from ec2 import FakeEC2, KEY_ID, SECRET  # noqa: E402

NAMES = ("describe_regions", "same call", "run_instances", "user data and tags", "describe pending",
         "describe running", "by tag", "terminate", "terminated", "gone", "wrong secret", "unknown key")


def client(boto3, url, key=KEY_ID, secret=SECRET):
    from botocore.config import Config
    return boto3.client("ec2", endpoint_url=url, region_name="us-east-1", aws_access_key_id=key,
                        aws_secret_access_key=secret, config=Config(retries={"max_attempts": 1}))


def error_of(fn):
    try:
        fn()
    except Exception as ex:  # botocore.exceptions.ClientError is checked by the caller
        return ex
    return None


def main():
    try:
        import boto3
        import botocore
    except ImportError:
        for t in NAMES:
            skip(t, "boto3 is not installed (t/requirements.txt)")
        return tap.finish()
    f = FakeEC2(pending_s=0.5)
    try:
        ec2 = client(boto3, f.url)
        regions = [r["RegionName"] for r in ec2.describe_regions()["Regions"]]
        ok("us-east-1" in regions, "boto3 %s / botocore %s: describe_regions accepts the fake's answer"
           % (boto3.__version__, botocore.__version__), regions)
        r = f.requests[-1]
        ok(r["action"] == "DescribeRegions" and r["params"].get("Version") == "2016-11-15"
           and r["headers"]["authorization"].startswith("AWS4-HMAC-SHA256 Credential=%s/" % KEY_ID),
           "the call denv-cp's token check makes (POST / Action=DescribeRegions, SigV4)", r)
        ud = "#cloud-config\nruncmd:\n  - [echo, hi]\n"
        run = ec2.run_instances(ImageId="ami-0123456789abcdef0", InstanceType="t3.large", MinCount=1, MaxCount=1,
                                UserData=ud, ClientToken="denv-abc123",
                                TagSpecifications=[{"ResourceType": "instance", "Tags": [
                                    {"Key": "Name", "Value": "denv-abc123"}, {"Key": "managed-by", "Value": "denv"}]}])
        inst = run["Instances"][0]
        iid = inst["InstanceId"]
        ok(iid.startswith("i-") and inst["State"]["Name"] == "pending" and run["ReservationId"].startswith("r-"),
           "run_instances: an instance id, pending, a reservation", run["Instances"])
        made = f.instances.get(iid, {})
        is_((made.get("user_data"), made.get("tags")), (ud, {"Name": "denv-abc123", "managed-by": "denv"}),
            "the fake decoded UserData (base64 by botocore) and the instance tags")
        d = ec2.describe_instances(InstanceIds=[iid])
        is_(d["Reservations"][0]["Instances"][0]["State"]["Name"], "pending", "describe_instances: pending at first")
        time.sleep(0.6)
        d = ec2.describe_instances(InstanceIds=[iid])["Reservations"][0]["Instances"][0]
        ok(d["State"] == {"Code": 16, "Name": "running"} and d.get("PublicIpAddress"),
           "then running, with a public address", d.get("State"))
        d = ec2.describe_instances(Filters=[{"Name": "tag:Name", "Values": ["denv-abc123"]},
                                            {"Name": "instance-state-name",
                                             "Values": ["pending", "running", "stopping", "stopped"]}])
        is_([i["InstanceId"] for rs in d["Reservations"] for i in rs["Instances"]], [iid],
            "describe_instances by tag:Name and state: the call denv-cp's start-up sweep makes")
        t = ec2.terminate_instances(InstanceIds=[iid])["TerminatingInstances"][0]
        ok(t["InstanceId"] == iid and t["CurrentState"]["Name"] == "shutting-down"
           and t["PreviousState"]["Name"] == "running", "terminate_instances", t)
        d = ec2.describe_instances(Filters=[{"Name": "tag:Name", "Values": ["denv-abc123"]},
                                            {"Name": "instance-state-name", "Values": ["pending", "running"]}])
        is_(d["Reservations"], [], "a terminated instance no longer matches the sweep's filter")
        ex = error_of(lambda: ec2.terminate_instances(InstanceIds=["i-0000000000000dead"]))
        ok(isinstance(ex, botocore.exceptions.ClientError)
           and ex.response["Error"]["Code"] == "InvalidInstanceID.NotFound",
           "terminating an unknown instance: ClientError InvalidInstanceID.NotFound", repr(ex))
        ex = error_of(lambda: client(boto3, f.url, secret="wrong-secret").describe_regions())
        ok(isinstance(ex, botocore.exceptions.ClientError) and ex.response["Error"]["Code"] == "AuthFailure"
           and ex.response["ResponseMetadata"]["HTTPStatusCode"] == 401
           and "not able to validate" in ex.response["Error"]["Message"],
           "a wrong secret: ClientError AuthFailure (401) with EC2's message", repr(ex))
        ex = error_of(lambda: client(boto3, f.url, key="AKIDNOSUCHKEY").describe_regions())
        ok(isinstance(ex, botocore.exceptions.ClientError) and ex.response["Error"]["Code"] == "AuthFailure",
           "an unknown access key id: AuthFailure too", repr(ex))
    finally:
        f.stop()
    return tap.finish()


if __name__ == "__main__":
    sys.exit(main())
