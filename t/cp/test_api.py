"""Integration test of denv-cp's REST API (everything that needs no host).

Starts bin/denv-cp on a temporary store, drives every route over HTTP with
the standard library only, restarts it on the same store, and prints TAP.
Run by t/integ/cp-api.sh, and by t/integ/cp-api-pg.sh with the store on
PostgreSQL: DENV_TEST_PG_DSN then names a database (denv) of a throw-away
cluster that also has the other databases of PG_DBS (t/lib/pg-suite.sh);
each temporary store of this and the other cp suites becomes the database
PG_DBS maps its name to, and the parts that only make sense for
the file store's log (the cut log, -db-repair) are skipped.
"""
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import tap  # noqa: E402
from cp_harness import (  # noqa: E402
    BIN, BOOT_KEY, BULLETS, CONSOLE, PG_DSN, PHASES, QUICKSTART, REFUSALS, Server,
    append_records, crockford_ulid, err_of, pg_dsn, status_of_big, upgrade_status, wait_deployment)
from tap import ok, is_  # noqa: E402


# ---- the tests ----

def test_basics(s):
    st, doc, _ = s.call("GET", "/health")
    is_((st, doc), (200, {"status": "ok"}), "GET /health")
    st, doc, _ = s.call("GET", "/v1/me", key=BOOT_KEY)
    ok(st == 200 and doc["team"]["Name"] == "acme", "bootstrap key from DENV_BOOTSTRAP_KEY works, team DENV_TEAM", doc)
    is_(doc["teams"][0]["Role"], "key", "/v1/me with a key: one team with role key")
    ok("user" not in doc, "/v1/me with a key has no user")
    for what, hdr in [("no credentials", {}), ("unknown key", {"Authorization": "Bearer dak_nope"}),
                      ("unknown session", {"Authorization": "Bearer dst_nope"}),
                      ("other token kind", {"Authorization": "Bearer xyz"}),
                      ("basic auth", {"Authorization": "Basic Zm9vOmJhcg=="})]:
        st, doc, _ = s.call("GET", "/v1/projects", headers=hdr)
        ok(st == 401 and isinstance(err_of(doc), str), "401 with %s" % what, (st, doc))
    st, doc, _ = s.call("POST", "/v1/projects", key=BOOT_KEY, raw=b"{nope", headers={"Content-Type": "application/json"})
    ok(st == 400 and "invalid JSON" in err_of(doc), "400 on invalid JSON", (st, doc))
    st, doc, _ = s.call("POST", "/v1/projects", key=BOOT_KEY, body=[1, 2])
    is_((st, err_of(doc)), (400, "body must be a JSON object"), "400 on a non-object body")
    st, doc, _ = s.call("GET", "/v1/no-such-route", key=BOOT_KEY)
    is_((st, err_of(doc)), (404, "not found"), "unknown /v1 path is a JSON 404")
    return doc


def test_keys(s, state):
    st, doc, _ = s.call("POST", "/v1/keys", key=BOOT_KEY, body={"name": "ci"})
    ok(st == 201 and doc["api_key"].startswith("dak_") and doc["key"]["Name"] == "ci", "POST /v1/keys 201", (st, doc))
    ok("Hash" not in doc["key"] and doc["api_key"] not in json.dumps(doc["key"]), "key row carries no key material")
    ci = doc["api_key"]
    state["ci_key"] = ci
    state["secrets"].append(ci)
    st, doc, _ = s.call("POST", "/v1/keys", key=ci)
    ok(st == 201 and doc["key"]["Name"] == "key", "POST /v1/keys without a body: name defaults to key", (st, doc))
    doomed, doomed_id = doc["api_key"], doc["key"]["ID"]
    state["secrets"].append(doomed)
    st, doc, _ = s.call("GET", "/v1/keys", key=BOOT_KEY)
    names = sorted(k["Name"] for k in doc["keys"])
    is_(names, ["bootstrap", "ci", "key"], "GET /v1/keys lists the team's keys")
    ok(all("Hash" not in k for k in doc["keys"]), "GET /v1/keys shows no hashes")
    fields = {"ID", "TeamID", "Name", "CreatedBy", "CreatedAt", "LastUsedAt", "RevokedAt"}
    is_(set(doc["keys"][0].keys()), fields, "key fields are the contract's")
    boot = [k for k in doc["keys"] if k["Name"] == "bootstrap"][0]
    ok(boot["LastUsedAt"] is not None, "LastUsedAt is set once a key is used")
    st, doc, _ = s.call("GET", "/v1/me", key=doomed)
    is_(st, 200, "a new key works")
    st, doc, _ = s.call("DELETE", "/v1/keys/" + doomed_id, key=BOOT_KEY)
    is_((st, doc), (200, {"revoked": True}), "DELETE /v1/keys/{id} revokes")
    st, doc, _ = s.call("GET", "/v1/me", key=doomed)
    is_(st, 401, "a revoked key is refused")
    state["revoked_key"] = doomed
    st, doc, _ = s.call("DELETE", "/v1/keys/key_nope", key=BOOT_KEY)
    is_(st, 404, "DELETE of an unknown key is 404")
    st, doc, _ = s.call("POST", "/v1/keys", key=BOOT_KEY, body={"name": 7})
    is_((st, err_of(doc)), (400, "name must be a string"), "POST /v1/keys with a bad name type is 400")
    big = json.dumps({"name": "x" * (1 << 20)}).encode()
    is_(status_of_big(s, "POST", "/v1/keys", big, BOOT_KEY), 413, "a JSON body over 1 MiB is 413")


def test_sessions(s, state):
    st, doc, _ = s.call("POST", "/auth/dev-login", body={"email": "ada@example.com", "name": "Ada"})
    ok(st == 200 and doc["token"].startswith("dst_"), "POST /auth/dev-login gives a dst_ session", (st, doc))
    ses = doc["token"]
    state["session"] = ses
    state["secrets"].append(ses)
    st, doc, _ = s.call("POST", "/auth/dev-login", body={"email": "not-an-address"})
    is_(st, 400, "dev login with a bad email is 400")
    st, doc, _ = s.call("POST", "/auth/dev-login", body={})
    is_((st, err_of(doc)), (400, "email is required"), "dev login without email is 400")
    st, doc, _ = s.call("GET", "/v1/me", key=ses)
    ok(st == 200 and doc["user"]["Email"] == "ada@example.com" and doc["teams"][0]["Role"] == "owner",
       "/v1/me with a session: user and a personal team (owner)", doc)
    personal = doc["team"]["ID"]
    state["personal_team"] = personal
    st, doc, _ = s.call("GET", "/v1/teams", key=ses)
    ok(st == 200 and [t["ID"] for t in doc["teams"]] == [personal], "GET /v1/teams", doc)
    st, doc, _ = s.call("POST", "/v1/teams", key=ses, body={"name": "research"})
    ok(st == 201 and doc["team"]["Name"] == "research", "POST /v1/teams 201", (st, doc))
    research = doc["team"]["ID"]
    state["research_team"] = research
    st, doc, _ = s.call("POST", "/v1/teams", key=ses, body={})
    is_(st, 400, "POST /v1/teams without a name is 400")
    st, doc, _ = s.call("GET", "/v1/teams", key=ses)
    ok({t["ID"]: t["Role"] for t in doc["teams"]} == {personal: "owner", research: "owner"},
       "GET /v1/teams lists both memberships with roles", doc)
    st, doc, _ = s.call("GET", "/v1/me", key=ses, headers={"X-Denv-Team": research})
    is_(doc["team"]["ID"], research, "X-Denv-Team selects the team (by id)")
    st, doc, _ = s.call("GET", "/v1/me", key=ses, headers={"X-Denv-Team": "research"})
    is_(doc["team"]["ID"], research, "X-Denv-Team selects the team (by name)")
    st, doc, _ = s.call("GET", "/v1/projects", key=ses, headers={"X-Denv-Team": state["boot_team"]})
    is_(st, 403, "X-Denv-Team of a team the user is not in is 403")
    st, doc, _ = s.call("GET", "/v1/teams", key=BOOT_KEY)
    is_(st, 403, "a user route with an API key is 403")
    st, doc, _ = s.call("POST", "/v1/teams", key=BOOT_KEY, body={"name": "x"})
    is_(st, 403, "POST /v1/teams with an API key is 403")
    # A second user, for membership refusals.
    st, doc, _ = s.call("POST", "/auth/dev-login", body={"email": "bob@example.com"})
    state["bob"] = doc["token"]
    state["secrets"].append(doc["token"])
    st, doc, _ = s.call("GET", "/v1/me", key=state["bob"])
    state["bob_team"] = doc["team"]["ID"]
    ok(doc["team"]["Name"] == "bob", "a dev-login user's personal team is named after the email's local part", doc)


def test_device(s, state):
    st, doc, _ = s.call("POST", "/v1/device/code")
    ok(st == 200 and doc["device_code"].startswith("ddc_") and re.match(r"^[A-Z]{4}-[A-Z]{4}$", doc["user_code"]),
       "POST /v1/device/code", (st, doc))
    is_((doc["verification_uri"], doc["expires_in"], doc["interval"]),
        (CONSOLE + "/app/device/", 900, 5), "device code: verification_uri, expires_in, interval")
    is_(doc["verification_uri_complete"], CONSOLE + "/app/device/?code=" + doc["user_code"], "verification_uri_complete")
    dc, uc = doc["device_code"], doc["user_code"]
    st, doc, _ = s.call("POST", "/v1/device/token", body={"device_code": dc})
    is_((st, doc), (428, {"error": "authorization_pending"}), "token before approval: 428 authorization_pending")
    st, doc, _ = s.call("POST", "/v1/device/token", body={"device_code": "ddc_unknown"})
    is_((st, doc), (400, {"error": "invalid_device_code"}), "unknown device code: 400 invalid_device_code")
    st, doc, _ = s.call("POST", "/v1/device/token", body={})
    is_((st, doc), (400, {"error": "invalid_device_code"}), "no device code: 400 invalid_device_code")
    st, doc, _ = s.call("POST", "/v1/device/approve", key=BOOT_KEY, body={"user_code": uc, "team_id": state["boot_team"]})
    is_(st, 403, "approve with an API key is 403")
    st, doc, _ = s.call("POST", "/v1/device/approve", key=state["bob"],
                        body={"user_code": uc, "team_id": state["personal_team"]})
    is_(st, 403, "approve for a team the user is not in is 403")
    st, doc, _ = s.call("POST", "/v1/device/approve", key=state["session"],
                        body={"user_code": "BBBB-BBBB", "team_id": state["personal_team"]})
    is_(st, 404, "approve an unknown user code is 404")
    st, doc, _ = s.call("POST", "/v1/device/approve", key=state["session"], body={"user_code": uc})
    is_((st, err_of(doc)), (400, "team_id is required"), "approve without team_id is 400")
    st, doc, _ = s.call("POST", "/v1/device/approve", key=state["session"],
                        body={"user_code": uc.lower().replace("-", ""), "team_id": state["research_team"],
                              "name": "laptop"})
    ok(st == 200 and doc["approved"] is True and doc["team_id"] == state["research_team"]
       and doc["key_id"].startswith("key_"), "approve (code typed in lower case, no dash): {approved, key_id, team_id}", (st, doc))
    st, doc, _ = s.call("POST", "/v1/device/approve", key=state["session"],
                        body={"user_code": uc, "team_id": state["research_team"]})
    is_(st, 409, "approving the same code twice is 409")
    st, doc, _ = s.call("POST", "/v1/device/token", body={"device_code": dc})
    ok(st == 200 and doc["api_key"].startswith("dak_") and doc["team"]["ID"] == state["research_team"]
       and set(doc["team"]) == {"ID", "Name", "CreatedAt"}, "token after approval: api_key and team", (st, doc))
    dev_key = doc.get("api_key")
    state["device_key"] = dev_key
    state["secrets"].append(dev_key)
    st, doc, _ = s.call("POST", "/v1/device/token", body={"device_code": dc})
    is_(st, 410, "the key is handed out once: then 410")
    st, doc, _ = s.call("GET", "/v1/me", key=dev_key)
    ok(st == 200 and doc["team"]["ID"] == state["research_team"], "the device key belongs to the approved team", doc)
    st, doc, _ = s.call("GET", "/v1/keys", key=dev_key)
    ok([k["Name"] for k in doc["keys"]] == ["laptop"] and doc["keys"][0]["CreatedBy"] == state["ada_id"],
       "device key is named and created by the approving user", doc)


def test_projects(s, state):
    st, doc, _ = s.call("POST", "/v1/projects", key=BOOT_KEY,
                        body={"name": "ops-world", "kind": "rl-environment", "source": "github:you/ops-world"})
    ok(st == 201 and doc["project"]["Name"] == "ops-world", "POST /v1/projects 201", (st, doc))
    p = doc["project"]
    is_(set(p), {"ID", "TeamID", "Name", "Kind", "Source", "CreatedAt"}, "project fields")
    envs = doc["environments"]
    ok(len(envs) == 1 and envs[0]["Name"] == "alpha", "the project comes with its alpha environment", envs)
    is_(set(envs[0]), {"ID", "ProjectID", "Name", "Stage", "HostID", "ParentVersionID", "CurrentVersionID",
                       "Status", "CreatedAt", "Endpoints"}, "environment fields")
    state["project"] = p
    state["alpha"] = envs[0]["ID"]
    st, doc, _ = s.call("POST", "/v1/projects", key=BOOT_KEY, body={"name": "ops-world"})
    is_(st, 409, "duplicate project name is 409")
    st, doc, _ = s.call("POST", "/v1/projects", key=BOOT_KEY, body={"name": "agentic", "kind": "agent"})
    ok(st == 201 and doc["project"]["Kind"] == "agent", "kind agent", doc)
    st, doc, _ = s.call("POST", "/v1/projects", key=BOOT_KEY, body={"name": "plain"})
    ok(st == 201 and doc["project"]["Kind"] == "rl-environment", "kind defaults to rl-environment", doc)
    st, doc, _ = s.call("POST", "/v1/projects", key=BOOT_KEY, body={"name": "x", "kind": "game"})
    is_(st, 400, "unknown kind is 400")
    st, doc, _ = s.call("POST", "/v1/projects", key=BOOT_KEY, body={})
    is_((st, err_of(doc)), (400, "name is required"), "project without a name is 400")
    st, doc, _ = s.call("POST", "/v1/projects", key=BOOT_KEY, body={"name": "has space"})
    is_(st, 400, "a bad project name is 400")
    st, doc, _ = s.call("GET", "/v1/projects", key=BOOT_KEY)
    is_(sorted(x["Name"] for x in doc["projects"]), ["agentic", "ops-world", "plain"], "GET /v1/projects")
    st, doc, _ = s.call("GET", "/v1/projects/ops-world/envs", key=BOOT_KEY)
    ok(st == 200 and [e["ID"] for e in doc["environments"]] == [state["alpha"]], "envs by project name", doc)
    st, doc, _ = s.call("GET", "/v1/projects/%s/envs" % p["ID"], key=BOOT_KEY)
    ok(st == 200 and len(doc["environments"]) == 1, "envs by project id", doc)
    st, doc, _ = s.call("GET", "/v1/projects/nope/envs", key=BOOT_KEY)
    is_(st, 404, "unknown project is 404")
    # Another team: the same name is fine there, and neither sees the other's.
    st, doc, _ = s.call("POST", "/v1/projects", key=state["session"], body={"name": "ops-world"})
    is_(st, 201, "the same project name in another team is allowed")
    other = doc["project"]["ID"]
    state["other_alpha"] = doc["environments"][0]["ID"]
    st, doc, _ = s.call("GET", "/v1/projects/%s/envs" % other, key=BOOT_KEY)
    is_(st, 404, "another team's project id is 404")
    st, doc, _ = s.call("GET", "/v1/envs/%s" % state["other_alpha"], key=BOOT_KEY)
    is_(st, 404, "another team's environment is 404")
    st, doc, _ = s.call("GET", "/v1/projects/ops-world/envs", key=state["session"])
    ok(st == 200 and doc["environments"][0]["ID"] == state["other_alpha"], "a name resolves within the caller's team", doc)


def test_source(s, state):
    st, doc, _ = s.call("GET", "/v1/projects/ops-world/source", key=BOOT_KEY)
    want = {"ProjectID": state["project"]["ID"], "Repo": "you/ops-world", "DefaultBranch": "main",
            "ComposePath": "docker-compose.yaml", "InstallationID": 0, "DeployBranches": False, "LastDeployedSHA": ""}
    is_((st, doc and doc.get("source")), (200, want), "GET /v1/projects/{p}/source")
    st, doc, _ = s.call("POST", "/v1/projects/ops-world/source", key=BOOT_KEY,
                        body={"default_branch": "trunk", "compose_path": "envs/ops/compose.yaml", "deploy_branches": True})
    ok(st == 200 and doc["source"]["DefaultBranch"] == "trunk" and doc["source"]["ComposePath"] == "envs/ops/compose.yaml"
       and doc["source"]["DeployBranches"] is True, "POST source updates fields", (st, doc))
    st, doc, _ = s.call("POST", "/v1/projects/ops-world/source", key=BOOT_KEY,
                        body={"default_branch": "", "compose_path": "", "installation_id": 0, "deploy_branches": None})
    ok(st == 200 and doc["source"]["DefaultBranch"] == "trunk" and doc["source"]["DeployBranches"] is True,
       "empty strings, 0 and null leave fields unchanged", doc)
    st, doc, _ = s.call("POST", "/v1/projects/ops-world/source", key=BOOT_KEY, body={"installation_id": 42})
    is_(st, 400, "an installation not linked to the team is 400")
    st, doc, _ = s.call("POST", "/v1/projects/ops-world/source", key=BOOT_KEY, body={"compose_path": "../x.yaml"})
    is_(st, 400, "a compose path outside the repository is 400")
    st, doc, _ = s.call("GET", "/v1/projects/plain/source", key=BOOT_KEY)
    is_(st, 404, "a project without a GitHub source: 404")
    st, doc, _ = s.call("POST", "/v1/projects/ops-world/deploy-from-source", key=BOOT_KEY, body={})
    ok(st == 503 and "GitHub App" in err_of(doc), "deploy-from-source without the GitHub App is 503", (st, doc))


def test_deploy(s, state):
    st, doc, _ = s.call("POST", "/v1/projects/ops-world/deploy", key=BOOT_KEY, body={"compose": QUICKSTART})
    ok(st == 202, "quickstart deploy is 202", (st, doc))
    dep, phases = doc["deployment"], doc["phases"]
    is_([p["Name"] for p in phases], PHASES, "11 deploy phases in order")
    ok(all(p["Status"] == "pending" and p["DeploymentID"] == dep["ID"] for p in phases), "every phase pending")
    is_([p["Seq"] for p in phases], list(range(1, 12)), "phase Seq 1..11")
    is_(set(phases[0]), {"DeploymentID", "Seq", "Name", "Status", "Evidence", "Error", "StartedAt", "FinishedAt"},
        "phase fields")
    is_((dep["Kind"], dep["Status"], dep["EnvID"], dep["ProjectID"]),
        ("deploy", "pending", state["alpha"], state["project"]["ID"]), "deployment: kind, status, env, project")
    is_(set(dep), {"ID", "ProjectID", "EnvID", "Kind", "Status", "VersionID", "TargetEnvID", "Params", "Error",
                   "CreatedAt", "FinishedAt"}, "deployment fields")
    spec = dep["Params"]["spec"]
    is_([x["name"] for x in spec["services"]], ["box", "db"], "Params.spec holds the resolved spec (sorted services)")
    is_(spec["agent"], {"service": "box"}, "Params.spec keeps x-denv.agent")
    is_(dep["Params"]["warm"], None, "no warm given: Params.warm is null")
    state["dep"] = dep["ID"]
    st, doc, _ = s.call("GET", "/v1/deployments/" + dep["ID"], key=BOOT_KEY)
    ok(st == 200 and doc["deployment"]["ID"] == dep["ID"] and [p["Name"] for p in doc["phases"]] == PHASES,
       "GET /v1/deployments/{dep}", (st, doc))
    st, doc, _ = s.call("GET", "/v1/deployments/" + dep["ID"], key=state["session"])
    is_(st, 404, "another team's deployment is 404")
    st, doc, _ = s.call("GET", "/v1/deployments/dep_nope", key=BOOT_KEY)
    is_(st, 404, "unknown deployment is 404")
    st, doc, _ = s.call("GET", "/v1/envs/%s/deployments" % state["alpha"], key=BOOT_KEY)
    ok(st == 200 and [d["ID"] for d in doc["deployments"]] == [dep["ID"]], "GET /v1/envs/{env}/deployments", doc)
    # No host and no cloud: the deploy runs and fails at provision (t/cp/test_hub.py runs it on a host).
    final = wait_deployment(s, dep["ID"])
    is_((final["deployment"]["Status"], final["deployment"]["Error"]),
        ("failed", "provision: no connected host and no cloud that can provision: connect a cloud or run "
                   "`denvd join` on a machine"), "without a host the deploy fails at provision")
    is_([p["Status"] for p in final["phases"]],
        ["ok", "ok", "failed", "skipped", "skipped", "skipped", "skipped", "skipped", "skipped", "skipped", "failed"],
        "phases after the failure are skipped; verdict records it")
    is_(final["phases"][1]["Evidence"], {"host": "", "reason": "no connected host; provisioning"}, "place evidence")
    is_(final["phases"][10]["Evidence"], {"reverted": "no previous version"}, "verdict evidence")
    st, doc, _ = s.call("GET", "/v1/envs/%s/versions" % state["alpha"], key=BOOT_KEY)
    ok(st == 200 and len(doc["versions"]) == 1 and doc["versions"][0]["Healthy"] is False
       and doc["versions"][0]["Number"] == 1, "resolve created version 1, not healthy", doc)
    st, doc, _ = s.call("GET", "/v1/envs/%s" % state["alpha"], key=BOOT_KEY)
    ok(st == 200 and doc["environment"]["ID"] == state["alpha"] and doc["connected"] is False,
       "GET /v1/envs/{env}: {environment, connected}", doc)
    st, doc, _ = s.call("GET", "/v1/envs/env_nope/versions", key=BOOT_KEY)
    is_(st, 404, "versions of an unknown env is 404")

    st, doc, _ = s.call("POST", "/v1/projects/ops-world/deploy", key=BOOT_KEY,
                        body={"env": "feature-x", "compose": QUICKSTART, "warm": ["psql", "-c", "select 1"]})
    ok(st == 202 and doc["deployment"]["Params"]["warm"] == ["psql", "-c", "select 1"],
       "deploy to a new env name with warm: 202, Params.warm", (st, doc))
    # A warm string, or the blog's one-string list, runs under sh -c (spec_warm).
    for warm in ("psql -c 'select 1'", ["psql -c 'select 1'"]):
        st, doc, _ = s.call("POST", "/v1/projects/ops-world/deploy", key=BOOT_KEY,
                            body={"env": "feature-x", "compose": QUICKSTART, "warm": warm})
        ok(st == 202 and doc["deployment"]["Params"]["warm"] == ["sh", "-c", "psql -c 'select 1'"],
           "warm %r: Params.warm is sh -c" % (warm,), (st, doc))
    st, doc, _ = s.call("GET", "/v1/projects/ops-world/envs", key=BOOT_KEY)
    is_(sorted(e["Name"] for e in doc["environments"]), ["alpha", "feature-x"], "deploying to a new name creates it")
    for text, msg in REFUSALS:
        st, doc, _ = s.call("POST", "/v1/projects/ops-world/deploy", key=BOOT_KEY, body={"compose": text})
        is_((st, err_of(doc)), (400, msg), "refused compose: " + msg)
    st, doc, _ = s.call("POST", "/v1/projects/ops-world/deploy", key=BOOT_KEY, body={"env": "alpha"})
    is_((st, err_of(doc)), (400, "compose is required"), "deploy without compose is 400")
    st, doc, _ = s.call("POST", "/v1/projects/ops-world/deploy", key=BOOT_KEY, body={"compose": QUICKSTART, "warm": 5})
    is_((st, err_of(doc)), (400, "warm must be a string or an array of strings"), "deploy with a bad warm is 400")
    st, doc, _ = s.call("POST", "/v1/projects/ops-world/deploy", key=BOOT_KEY,
                        body={"compose": QUICKSTART, "warm": ["psql", 1]})
    is_((st, err_of(doc)), (400, "warm must be a string or an array of strings"), "a warm list with a number is 400")
    st, doc, _ = s.call("POST", "/v1/projects/nope/deploy", key=BOOT_KEY, body={"compose": QUICKSTART})
    is_(st, 404, "deploy to an unknown project is 404")
    pad = "# " + "x" * (1400 * 1024) + "\n"
    st, doc, _ = s.call("POST", "/v1/projects/ops-world/deploy", key=BOOT_KEY, body={"compose": pad + QUICKSTART})
    ok(st != 413, "a 1.4 MiB deploy body is under the deploy route's 2 MiB limit", (st, doc))
    big = json.dumps({"compose": "# " + "x" * (2100 * 1024) + "\n" + QUICKSTART}).encode()
    is_(status_of_big(s, "POST", "/v1/projects/ops-world/deploy", big, BOOT_KEY), 413,
        "a deploy body over 2 MiB is 413")


def test_templates(s, state):
    st, doc, _ = s.call("GET", "/v1/templates", key=BOOT_KEY)
    ok(st == 200 and doc["kinds"] == ["rl-environment", "agent"], "GET /v1/templates: kinds", doc)
    names = {t["name"]: t for t in doc["templates"]}
    ok(set(names) == {"rl-environment-ops", "agent-runtime"}, "both templates listed", list(names))
    ops = names.get("rl-environment-ops", {})
    ok(ops.get("kind") == "rl-environment" and "warm" in ops and "compose" in ops and "description" in ops,
       "template fields", ops)
    st, doc, _ = s.call("GET", "/v1/templates?kind=agent", key=BOOT_KEY)
    is_([t["name"] for t in doc["templates"]], ["agent-runtime"], "?kind=agent filters")
    st, doc, _ = s.call("GET", "/v1/templates?kind=game", key=BOOT_KEY)
    is_(st, 400, "?kind=unknown is 400")
    for name, t in sorted(names.items()):
        st, doc, _ = s.call("POST", "/v1/projects/plain/deploy", key=BOOT_KEY,
                            body={"env": name, "compose": t["compose"], "warm": t.get("warm")})
        ok(st == 202, "template %s passes the compose reader (deploy 202)" % name, (st, doc))


def test_events(s, state):
    st, doc, _ = s.call("GET", "/v1/events", key=BOOT_KEY)
    is_(st, 400, "GET /v1/events without subject is 400")
    st, doc, _ = s.call("GET", "/v1/events?subject=nope", key=BOOT_KEY)
    is_(st, 400, "a malformed subject is 400")
    st, doc, _ = s.call("GET", "/v1/events?subject=env:" + state["alpha"], key=BOOT_KEY)
    is_((st, [e["Kind"] for e in doc["events"]]), (200, ["deployment.finished", "deployment.started"]),
        "GET /v1/events?subject=env:<id>: the deploy's events, newest first")
    st, doc, _ = s.call("GET", "/v1/events?subject=dep:" + state["dep"], key=BOOT_KEY)
    ok(st == 200 and len(doc["events"]) >= 2, "GET /v1/events?subject=dep:<own deployment> is 200", (st, doc))
    # Another team's object is 404 with the text of the object's own route,
    # exactly like a missing one: the ids of other teams are not confirmed.
    for subject, what in (("env:" + state["alpha"], "environment"), ("dep:" + state["dep"], "deployment")):
        st, doc, _ = s.call("GET", "/v1/events?subject=" + subject, key=state["session"])
        is_((st, err_of(doc)), (404, what + " not found"),
            "GET /v1/events?subject=<another team's %s> is 404, like GET of the %s" % (what, what))
        is_(upgrade_status(s, "/v1/events/stream?subject=" + subject, state["session"]),
            (404, {"error": what + " not found"}), "the live stream of another team's %s is 404 too" % what)
    for subject, what in (("env:env_01JAAAAAAAAAAAAAAAAAAAAAAA", "environment"), ("dep:dep_nope", "deployment"),
                          ("host:host_nope", "host"), ("cmd:cmd_nope", "command")):
        st, doc, _ = s.call("GET", "/v1/events?subject=" + subject, key=BOOT_KEY)
        is_((st, err_of(doc)), (404, what + " not found"), "GET /v1/events?subject=%s (unknown id) is 404" % subject)
    is_(upgrade_status(s, "/v1/events/stream?subject=env:env_01JAAAAAAAAAAAAAAAAAAAAAAA", BOOT_KEY),
        (404, {"error": "environment not found"}), "the live stream of an unknown id is 404")
    is_(upgrade_status(s, "/v1/events/stream?subject=env:" + state["alpha"], BOOT_KEY)[0], 101,
        "the live stream of the caller's own environment upgrades (101)")
    is_(upgrade_status(s, "/v1/events/stream", state["session"])[0], 101,
        "the live stream without a subject (all of the team's events) upgrades (101)")


def test_clouds(s, state):
    st, doc, _ = s.call("POST", "/v1/clouds", key=BOOT_KEY, body={"provider": "manual"})
    ok(st == 201 and doc["cloud"]["Provider"] == "manual" and doc["cloud"]["Name"] == "manual"
       and doc["token_checked"] is False, "manual cloud 201 (no token to check)", doc)
    state["manual_cloud"] = doc["cloud"]["ID"]
    is_(set(doc["cloud"]), {"ID", "TeamID", "Provider", "Name", "Config", "CreatedAt"}, "cloud fields")
    st, doc, _ = s.call("POST", "/v1/clouds", key=BOOT_KEY, body={"provider": "hetzner", "name": "hz"})
    is_((st, err_of(doc)), (400, "hetzner: config.token is required"), "hetzner without a token is 400")
    st, doc, _ = s.call("POST", "/v1/clouds", key=BOOT_KEY,
                        body={"provider": "hetzner", "name": "hz", "config": {"token": "hz-secret-token", "location": "fsn1",
                                                                               "ssh_key": "abc", "client_secret": "s"}})
    ok(st == 201 and doc.get("token_checked") is True, "hetzner cloud 201, its token checked", (st, doc))
    cfg = doc["cloud"]["Config"]
    is_(cfg, {"token": BULLETS, "location": "fsn1", "ssh_key": BULLETS, "client_secret": BULLETS,
              "server_type": "cpx31", "image": "ubuntu-24.04"}, "defaults filled, secrets shown as bullets")
    state["secrets"].append("hz-secret-token")
    st, doc, _ = s.call("POST", "/v1/clouds", key=BOOT_KEY, body={"provider": "aws"})
    is_(st, 400, "unknown provider is 400")
    st, doc, _ = s.call("POST", "/v1/clouds", key=BOOT_KEY, body={"provider": "e2b", "config": "x"})
    is_(st, 400, "config that is not an object is 400")
    st, doc, _ = s.call("POST", "/v1/clouds", key=BOOT_KEY, body={"provider": "manual"})
    is_(st, 409, "a duplicate cloud name is 409")
    st, doc, _ = s.call("POST", "/v1/clouds", key=BOOT_KEY, body={"provider": "e2b", "config": {"token": "e2b-tok"}})
    ok(st == 201 and doc["cloud"]["Config"]["token"] == BULLETS and doc["token_checked"] is True,
       "e2b cloud 201, its token checked", doc)
    state["e2b_cloud"] = doc["cloud"]["ID"]
    st, doc, _ = s.call("GET", "/v1/clouds", key=BOOT_KEY)
    ok(st == 200 and sorted(c["Name"] for c in doc["clouds"]) == ["e2b", "hz", "manual"] and
       "hz-secret-token" not in json.dumps(doc), "GET /v1/clouds masks tokens", doc)
    st, doc, _ = s.call("GET", "/v1/clouds", key=state["session"])
    is_(doc["clouds"], [], "clouds are per team")


def test_join_tokens(s, state):
    st, doc, _ = s.call("POST", "/v1/join-tokens", key=BOOT_KEY)
    ok(st == 201 and doc["token"].startswith("djt_") and doc["expires_in_sec"] == 3600, "POST /v1/join-tokens 201", doc)
    cmd = doc["command"]
    ok("http://cp.example:8080/denvd" in cmd and doc["token"] in cmd and "--server http://cp.example:8080" in cmd,
       "command uses -public-url, the denvd route and the token", cmd)
    state["secrets"].append(doc["token"])
    st, doc, _ = s.call("POST", "/v1/join-tokens", key=BOOT_KEY, body={"cloud_id": state["manual_cloud"]})
    is_(st, 201, "join token for a cloud of the team")
    state["secrets"].append(doc["token"])
    st, doc, _ = s.call("POST", "/v1/join-tokens", key=state["session"], body={"cloud_id": state["manual_cloud"]})
    is_(st, 404, "join token for another team's cloud is 404")


def test_targets(s, state):
    st, doc, _ = s.call("GET", "/v1/hosts", key=BOOT_KEY)
    is_((st, doc), (200, {"hosts": []}), "GET /v1/hosts before any driver host exists")
    st, doc, _ = s.call("GET", "/v1/targets", key=BOOT_KEY)
    ok(st == 200 and len(doc["targets"]) == 1, "GET /v1/targets creates the e2b cloud's driver host", doc)
    t = doc["targets"][0]
    ok(t["kind"] == "driver:e2b" and t["provider"] == "e2b" and t["connected"] is True and t["table"]["provider"] == "e2b"
       and t["CloudID"] == state["e2b_cloud"], "driver target: kind, provider, connected, table", t)
    st, doc, _ = s.call("GET", "/v1/targets", key=BOOT_KEY)
    is_(len(doc["targets"]), 1, "one driver host per cloud")
    st, doc, _ = s.call("GET", "/v1/hosts", key=BOOT_KEY)
    ok(len(doc["hosts"]) == 1 and doc["hosts"][0]["connected"] is True and
       set(doc["hosts"][0]) == {"ID", "TeamID", "CloudID", "Name", "Status", "ProviderRef", "LastSeenAt", "CreatedAt",
                                "Capabilities", "connected"}, "GET /v1/hosts fields", doc)
    st, doc, _ = s.call("POST", "/v1/targets/connect", key=BOOT_KEY, body={"provider": "daytona", "token": "dt-tok"})
    ok(st == 201 and set(doc) == {"cloud", "host", "info", "capabilities"} and doc["cloud"]["Config"]["token"] == BULLETS
       and doc["host"]["CloudID"] == doc["cloud"]["ID"] and doc["info"]["token_checked"] is True,
       "POST /v1/targets/connect 201, the token checked", (st, doc))
    st, doc, _ = s.call("POST", "/v1/targets/connect", key=BOOT_KEY, body={"provider": "hetzner", "token": "x"})
    is_(st, 400, "targets/connect for a non-hosted provider is 400")
    st, doc, _ = s.call("POST", "/v1/targets/connect", key=BOOT_KEY, body={"provider": "e2b", "name": "e2b-2"})
    is_(st, 400, "targets/connect without a token is 400")
    st, doc, _ = s.call("GET", "/v1/targets", key=BOOT_KEY)
    is_(sorted(t["kind"] for t in doc["targets"]), ["driver:daytona", "driver:e2b"], "both driver targets listed")
    st, doc, _ = s.call("GET", "/v1/targets", key=state["session"])
    is_(doc["targets"], [], "targets are per team")


def test_github(s, state):
    st, doc, _ = s.call("GET", "/v1/github/installations", key=BOOT_KEY)
    is_((st, doc), (200, {"installations": [], "configured": False}), "installations: configured false")
    st, doc, _ = s.call("POST", "/v1/github/installations/5/link", key=BOOT_KEY)
    is_(st, 503, "link without the app is 503")
    st, doc, _ = s.call("GET", "/v1/github/repos?installation=5", key=BOOT_KEY)
    is_(st, 503, "repos without the app is 503")
    st, doc, _ = s.call("POST", "/webhooks/github", body={"zen": "x"}, headers={"X-GitHub-Event": "ping"})
    is_(st, 503, "webhook without the app is 503")
    st, doc, _ = s.call("GET", "/auth/github/start?return=http://localhost:3100/app/")
    is_(st, 503, "GitHub sign-in not configured: /auth/github/start 503")
    st, doc, _ = s.call("GET", "/auth/github/callback?state=x&code=y")
    is_(st, 503, "GitHub sign-in not configured: /auth/github/callback 503")


def test_releases(s, state, releases):
    st, doc, _ = s.call("GET", "/denvd")
    ok(st == 404 and "not on this server" in err_of(doc), "/denvd absent: 404", (st, doc))
    st, doc, _ = s.call("GET", "/denvd-linux-arm64")
    is_(st, 404, "/denvd-linux-arm64 absent: 404")
    st, doc, _ = s.call("GET", "/denvd?arch=mips")
    is_(st, 400, "/denvd?arch=mips is 400")
    with open(os.path.join(releases, "denvd-linux-arm64"), "wb") as f:
        f.write(b"\x7fELF arm64 build")
    with open(os.path.join(releases, "denvd-linux-amd64"), "wb") as f:
        f.write(b"\x7fELF amd64 build")
    st, body, h = s.call("GET", "/denvd?arch=arm64")
    is_((st, body), (200, b"\x7fELF arm64 build"), "/denvd?arch=arm64 serves the arm64 build")
    st, body, h = s.call("GET", "/denvd")
    is_((st, body), (200, b"\x7fELF amd64 build"), "/denvd serves amd64")
    st, body, h = s.call("GET", "/denvd-linux-amd64")
    ok(st == 200 and h.get("content-type") == "application/octet-stream", "/denvd-linux-amd64 200 octet-stream", h)


def test_cors(s, state):
    _, _, h = s.call("GET", "/v1/me", key=BOOT_KEY, headers={"Origin": CONSOLE})
    is_((h.get("access-control-allow-origin"), h.get("access-control-allow-headers"),
         h.get("access-control-allow-methods"), h.get("access-control-max-age")),
        (CONSOLE, "Authorization, Content-Type, X-Denv-Team", "GET, POST, PUT, PATCH, DELETE, OPTIONS", "600"),
        "CORS headers for the console origin")
    _, _, h = s.call("GET", "/v1/me", key=BOOT_KEY, headers={"Origin": "http://localhost:5173"})
    is_(h.get("access-control-allow-origin"), "http://localhost:5173", "CORS for http://localhost:*")
    _, _, h = s.call("GET", "/v1/me", key=BOOT_KEY, headers={"Origin": "http://127.0.0.1:9"})
    is_(h.get("access-control-allow-origin"), "http://127.0.0.1:9", "CORS for http://127.0.0.1:*")
    _, _, h = s.call("GET", "/v1/me", key=BOOT_KEY, headers={"Origin": "http://evil.example"})
    is_(h.get("access-control-allow-origin"), None, "no CORS for another origin")
    _, _, h = s.call("GET", "/v1/me", headers={"Origin": CONSOLE})
    is_(h.get("access-control-allow-origin"), CONSOLE, "CORS headers on errors too (401)")
    _, _, h = s.call("GET", "/health", headers={"Origin": CONSOLE})
    is_(h.get("access-control-allow-origin"), None, "no CORS outside /v1/ and /auth/")
    st, _, h = s.call("OPTIONS", "/v1/projects", headers={"Origin": CONSOLE, "Access-Control-Request-Method": "POST"})
    ok(st == 204 and h.get("access-control-allow-origin") == CONSOLE, "OPTIONS /v1/... is 204 with CORS", (st, h))
    st, _, h = s.call("OPTIONS", "/auth/dev-login", headers={"Origin": "http://localhost:3100"})
    ok(st == 204 and h.get("access-control-allow-origin") == "http://localhost:3100", "OPTIONS /auth/... is 204", (st, h))


def seed_rows(store, state):
    """Rows no route of this issue creates (events, a sidecar host), put
    straight into the log while denv-cp is stopped."""
    team, other = state["boot_team"], state["personal_team"]
    subject = "env:" + state["alpha"]
    # After every event of the run, so that newest-first puts the seeded ones on top.
    base = int(time.time() * 1000) + 1000
    ops = []
    for i in range(205):
        eid = "evt_" + crockford_ulid(base + i, i)
        ops.append({"put": "events", "id": eid, "row": {"ID": eid, "TeamID": team, "Subject": subject,
                                                        "Kind": "test.seq", "Body": {"i": i}, "At": "2026-01-01T00:00:00Z"}})
    for i in range(3):
        eid = "evt_" + crockford_ulid(base + 500 + i, i)
        ops.append({"put": "events", "id": eid, "row": {"ID": eid, "TeamID": other, "Subject": subject,
                                                        "Kind": "test.other", "Body": {}, "At": "2026-01-01T00:00:00Z"}})
    hid = "host_" + crockford_ulid(base, 7)
    state["seeded_host"] = hid
    ops.append({"put": "hosts", "id": hid, "row": {"ID": hid, "TeamID": team, "CloudID": "", "Name": "box-1",
                                                    "Status": "unreachable", "ProviderRef": "", "LastSeenAt": None,
                                                    "CreatedAt": "2026-01-01T00:00:00Z", "Capabilities": {"storage": "dir"}}})
    append_records(store, [ops])


def test_restart(s, state):
    st, doc, _ = s.call("GET", "/v1/me", key=BOOT_KEY)
    ok(st == 200 and doc["team"]["Name"] == "acme", "after restart: the bootstrap key still works", doc)
    ok("created team" not in s.stderr().split("restart-marker")[-1], "the bootstrap team is not created again")
    st, doc, _ = s.call("GET", "/v1/me", key="dak_a_different_bootstrap_key")
    is_(st, 401, "a new DENV_BOOTSTRAP_KEY is ignored on a store with teams")
    for name in ("ci_key", "device_key"):
        st, doc, _ = s.call("GET", "/v1/me", key=state[name])
        is_(st, 200, "after restart: %s still works" % name)
    st, doc, _ = s.call("GET", "/v1/me", key=state["revoked_key"])
    is_(st, 401, "after restart: the revoked key stays refused")
    st, doc, _ = s.call("GET", "/v1/me", key=state["session"])
    ok(st == 200 and doc["user"]["Email"] == "ada@example.com", "after restart: the session still works", doc)
    st, doc, _ = s.call("GET", "/v1/projects", key=BOOT_KEY)
    is_(sorted(x["Name"] for x in doc["projects"]), ["agentic", "ops-world", "plain"], "after restart: projects")
    st, doc, _ = s.call("GET", "/v1/projects/ops-world/envs", key=BOOT_KEY)
    is_(sorted(e["Name"] for e in doc["environments"]), ["alpha", "feature-x"], "after restart: environments")
    st, doc, _ = s.call("GET", "/v1/deployments/" + state["dep"], key=BOOT_KEY)
    ok(st == 200 and [p["Name"] for p in doc["phases"]] == PHASES, "after restart: deployment and phases", doc)
    st, doc, _ = s.call("GET", "/v1/projects/ops-world/source", key=BOOT_KEY)
    is_(doc["source"]["DefaultBranch"], "trunk", "after restart: source settings")
    st, doc, _ = s.call("GET", "/v1/clouds", key=BOOT_KEY)
    is_(len(doc["clouds"]), 4, "after restart: clouds")
    st, doc, _ = s.call("GET", "/v1/keys", key=BOOT_KEY)
    revoked = [k for k in doc["keys"] if k["RevokedAt"]]
    is_(len(revoked), 1, "after restart: the revoked key is listed as revoked")
    st, doc, _ = s.call("GET", "/v1/teams", key=state["session"])
    is_(len(doc["teams"]), 2, "after restart: memberships")
    # Seeded rows.
    st, doc, _ = s.call("GET", "/v1/events?subject=env:" + state["alpha"], key=BOOT_KEY)
    evs = doc["events"]
    ok(len(evs) == 200, "events: at most 200", len(evs))
    ok(all(e["TeamID"] == state["boot_team"] for e in evs), "events: only the caller's team")
    is_([e["Body"]["i"] for e in evs[:3]], [204, 203, 202], "events: newest first")
    st, doc, _ = s.call("GET", "/v1/events?subject=env:" + state["alpha"], key=state["session"])
    is_((st, err_of(doc)), (404, "environment not found"),
        "events: another team asking for this environment's events is 404, even with events of its own there")
    hid = state["seeded_host"]
    st, doc, _ = s.call("GET", "/v1/events?subject=host:" + hid, key=BOOT_KEY)
    is_((st, doc and doc.get("events")), (200, []), "events of the team's own (seeded) host: 200")
    st, doc, _ = s.call("GET", "/v1/events?subject=host:" + hid, key=state["session"])
    is_((st, err_of(doc)), (404, "host not found"), "events of another team's host: 404")
    st, doc, _ = s.call("GET", "/v1/targets", key=BOOT_KEY)
    kinds = [t["kind"] for t in doc["targets"]]
    is_(kinds[0], "sidecar", "targets: sidecars first")
    ok(doc["targets"][0]["connected"] is False and doc["targets"][0]["capabilities"] == {"storage": "dir"},
       "sidecar target: not connected (no hub yet), capabilities from its row", doc["targets"][0])
    _, _, h = s.call("GET", "/v1/me", key=BOOT_KEY, headers={"Origin": CONSOLE})
    is_(h.get("access-control-allow-origin"), None, "without DENV_CONSOLE_URL no CORS headers")
    st, _, _ = s.call("OPTIONS", "/v1/projects", headers={"Origin": CONSOLE})
    ok(st != 204, "without DENV_CONSOLE_URL OPTIONS is not answered as a preflight", st)
    st, doc, _ = s.call("POST", "/auth/dev-login", body={"email": "ada@example.com"})
    is_(st, 404, "without DENV_DEV_LOGIN=1 dev login is 404")
    st, doc, _ = s.call("GET", "/v1/nope", key=BOOT_KEY)
    is_(st, 404, "without CORS an unknown path is the router's 404")
    st, doc, _ = s.call("DELETE", "/v1/projects", key=BOOT_KEY)
    is_(st, 405, "without CORS a wrong method is the router's 405")


def signed(secret, body):
    import hashlib
    import hmac
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def test_github_configured(tmp):
    """The GitHub routes with the app and OAuth configured (no GitHub reachable)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    secret = "whsec-test"
    pem = rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode()
    # A closed loopback port: GitHub is never reachable from the tests.
    env = {"DENV_BOOTSTRAP_KEY": BOOT_KEY, "DENV_DEV_LOGIN": "1", "DENV_CONSOLE_URL": CONSOLE,
           "DENV_GITHUB_APP_ID": "1234", "DENV_GITHUB_APP_PRIVATE_KEY": pem,
           "DENV_GITHUB_API_URL": "http://127.0.0.1:9",
           "DENV_GITHUB_WEBHOOK_SECRET": secret, "DENV_GITHUB_CLIENT_ID": "Iv1.client",
           "DENV_GITHUB_CLIENT_SECRET": "oauth-secret", "DENV_PUBLIC_URL": "http://cp.example:8080"}
    s = Server(os.path.join(tmp, "gh"), env)
    try:
        st, doc, h = s.call("GET", "/auth/github/start?return=http://localhost:3100/app/")
        loc = h.get("location", "")
        ok(st == 302 and loc.startswith("https://github.com/login/oauth/authorize?client_id=Iv1.client")
           and "scope=read%3Auser%20user%3Aemail" in loc and "state=" in loc
           and "redirect_uri=http%3A%2F%2Fcp.example%3A8080%2Fauth%2Fgithub%2Fcallback" in loc,
           "/auth/github/start redirects to GitHub with scopes, callback and state", (st, loc))
        st, doc, h = s.call("GET", "/auth/github/start?return=https://evil.example/")
        is_(st, 400, "a return URL that is not the console or loopback is 400")
        st, doc, h = s.call("GET", "/auth/github/start")
        is_(st, 302, "/auth/github/start without return (default /app/)")
        st, doc, _ = s.call("GET", "/auth/github/callback?state=bogus&code=x")
        is_((st, err_of(doc)), (400, "unknown or expired state"), "callback with an unknown state is 400")

        ping = json.dumps({"zen": "hi"}).encode()
        st, doc, _ = s.call("POST", "/webhooks/github", raw=ping,
                            headers={"X-GitHub-Event": "ping", "X-Hub-Signature-256": signed("wrong", ping)})
        is_(st, 401, "webhook with a bad signature is 401")
        st, doc, _ = s.call("POST", "/webhooks/github", raw=ping, headers={"X-GitHub-Event": "ping"})
        is_(st, 401, "webhook without a signature is 401")
        st, doc, _ = s.call("POST", "/webhooks/github", raw=ping,
                            headers={"X-GitHub-Event": "ping", "X-Hub-Signature-256": signed(secret, ping)})
        is_((st, doc), (200, {"ok": True}), "signed ping is 200")
        inst = json.dumps({"action": "created", "installation": {"id": 77, "account": {"login": "you"}}}).encode()
        st, doc, _ = s.call("POST", "/webhooks/github", raw=inst,
                            headers={"X-GitHub-Event": "installation", "X-Hub-Signature-256": signed(secret, inst)})
        is_(st, 200, "installation created is recorded")
        st, doc, _ = s.call("GET", "/v1/github/installations", key=BOOT_KEY)
        is_((st, doc), (200, {"installations": [], "configured": True}), "unlinked installations are not listed")
        st, doc, _ = s.call("POST", "/v1/github/installations/78/link", key=BOOT_KEY)
        is_(st, 404, "linking an installation the app has not reported is 404")
        st, doc, _ = s.call("POST", "/v1/projects", key=BOOT_KEY, body={"name": "ops", "source": "github:you/ops"})
        st, doc, _ = s.call("POST", "/v1/projects/ops/deploy-from-source", key=BOOT_KEY, body={})
        is_(st, 409, "deploy-from-source without a linked installation is 409")
        st, doc, _ = s.call("POST", "/v1/github/installations/77/link", key=BOOT_KEY)
        ok(st == 200 and doc["installation"]["InstallationID"] == 77 and doc["installation"]["AccountLogin"] == "you",
           "link an installation: {installation}", (st, doc))
        st, doc, _ = s.call("GET", "/v1/github/installations", key=BOOT_KEY)
        is_([i["InstallationID"] for i in doc["installations"]], [77], "the linked installation is listed")
        st, doc, _ = s.call("POST", "/auth/dev-login", body={"email": "eve@example.com"})
        eve = doc["token"]
        st, doc, _ = s.call("POST", "/v1/github/installations/77/link", key=eve)
        is_(st, 409, "linking an installation linked to another team is 409")
        st, doc, _ = s.call("POST", "/v1/projects/ops/source", key=BOOT_KEY, body={"installation_id": 77})
        ok(st == 200 and doc["source"]["InstallationID"] == 77, "source accepts a linked installation", (st, doc))
        st, doc, _ = s.call("GET", "/v1/github/repos", key=BOOT_KEY)
        is_(st, 400, "repos without ?installation is 400")
        st, doc, _ = s.call("GET", "/v1/github/repos?installation=77", key=eve)
        is_(st, 404, "repos of another team's installation is 404")
        push = json.dumps({"ref": "refs/heads/main", "after": "abc123", "repository": {"full_name": "you/ops"}}).encode()
        st, doc, _ = s.call("POST", "/webhooks/github", raw=push,
                            headers={"X-GitHub-Event": "push", "X-Hub-Signature-256": signed(secret, push)})
        ok(st == 200 and doc["ok"] is True and doc["sha"] == "abc123" and doc["branch"] == "main"
           and len(doc["projects"]) == 1, "push: {ok, sha, branch, projects}", (st, doc))
        ok("GitHub could not be reached" in doc["projects"][0].get("error", ""),
           "push with GitHub unreachable: the project's error says so", doc)
    finally:
        is_(s.stop(), 0, "GitHub-configured server exits 0")


def log_boundaries(log):
    """Offsets where each record of a store log ends (after the 16-byte header)."""
    with open(log, "rb") as f:
        data = f.read()
    off, ends = 16, []
    while off + 8 <= len(data):
        n = struct.unpack("<I", data[off:off + 4])[0]
        if off + 8 + n > len(data):
            break
        off += 8 + n
        ends.append(off)
    return ends


def test_truncated_store(tmp, store):
    """A copy of the store with its log cut in the middle at a record
    boundary: denv-cp refuses to start, naming both counts; -db-repair
    starts it and says what it drops (the issue: 13,644 projects -> 157)."""
    cut = os.path.join(tmp, "cut")
    shutil.copytree(store, cut, ignore=shutil.ignore_patterns("lock"))
    log = os.path.join(cut, "log")
    ends = log_boundaries(log)
    total, size = len(ends), os.path.getsize(log)
    keep = total // 2
    ok(total >= 10 and ends[-1] == size, "the stopped store's log: %d transactions, %d bytes" % (total, size))
    with open(log, "r+b") as f:
        f.truncate(ends[keep - 1])
    e = {k: v for k, v in os.environ.items() if not k.startswith("DENV_")}
    p = subprocess.run([BIN, "-addr", "127.0.0.1:0", "-db", cut], env=e, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=20)
    err = p.stderr.decode()
    ok(p.returncode == 1 and "shorter than what was acknowledged" in err, "a log cut in the middle: denv-cp "
       "refuses to start (exit 1)", (p.returncode, err))
    want = "holds %d transactions (%d bytes) but its mark %s/mark says %d transactions (%d bytes) were acknowledged" % (
        keep, ends[keep - 1], cut, total, size)
    ok(want in err, "the refusal names what the log holds and what was acknowledged", err)
    s = Server(cut, {}, args=["-db-repair"])
    ok("dropping %d acknowledged transactions (%d bytes)" % (total - keep, size - ends[keep - 1]) in s.stderr(),
       "-db-repair starts it and says what it drops", s.stderr())
    st, _, _ = s.call("GET", "/health")
    is_(st, 200, "the repaired store serves")
    is_(s.stop(), 0, "and stops cleanly")
    s = Server(cut, {})
    st, _, _ = s.call("GET", "/health")
    is_(st, 200, "after the repair a plain start works (the mark was reset)")
    s.stop()


def test_pg_copy(tmp, store):
    """-db-copy moves the suite's store from PostgreSQL to a file store and
    back into another database; each copy serves the bootstrap key, the last
    one reached through DENV_DB_HOST and the other DENV_DB_* variables."""
    import urllib.parse
    e = {k: v for k, v in os.environ.items() if not k.startswith("DENV_")}
    moved = os.path.join(tmp, "moved-dir")
    p = subprocess.run([BIN, "-db-copy", pg_dsn(store), moved], env=e, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=60)
    out = p.stdout.decode()
    m = re.search(r"copied (\d+) rows in (\d+) tables .* both hold sha256 ([0-9a-f]{64})", out)
    ok(p.returncode == 0 and m and int(m.group(1)) > 200, "-db-copy PostgreSQL -> file store, checked",
       (p.returncode, out, p.stderr.decode()[-500:]))
    digest = m.group(3) if m else None
    s = Server(os.path.join(tmp, "moved-run"), {}, db=moved)
    st, doc, _ = s.call("GET", "/v1/me", key=BOOT_KEY)
    ok(st == 200 and doc["team"]["Name"] == "acme", "the file store copy serves the bootstrap key", (st, doc))
    is_(s.stop(), 0, "and stops")
    p = subprocess.run([BIN, "-db-copy", moved, pg_dsn("moved")], env=e, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=60)
    out = p.stdout.decode()
    ok(p.returncode == 0 and digest and digest in out, "-db-copy file store -> PostgreSQL: the same digest",
       (p.returncode, out, p.stderr.decode()[-500:]))
    p = subprocess.run([BIN, "-db-copy", moved, pg_dsn("moved")], env=e, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=60)
    ok(p.returncode == 1 and "already holds rows" in p.stderr.decode(), "-db-copy into a store with rows: exit 1",
       (p.returncode, p.stderr.decode()[-300:]))
    q = urllib.parse.parse_qs(urllib.parse.urlparse(PG_DSN).query)
    env = {"DENV_DB_HOST": q["host"][0], "DENV_DB_USER": q["user"][0], "DENV_DB_NAME": "moved",
           "DENV_FILES_DIR": os.path.join(tmp, "moved-files")}
    s = Server(os.path.join(tmp, "moved-env"), env, db="")
    st, doc, _ = s.call("GET", "/v1/me", key=BOOT_KEY)
    ok(st == 200 and doc["team"]["Name"] == "acme", "DENV_DB_HOST (a socket directory), DENV_DB_USER, DENV_DB_NAME: "
       "denv-cp serves the copy", (st, doc))
    is_(s.stop(), 0, "and stops")


def test_flags(tmp):
    def run(args, env=None):
        e = {k: v for k, v in os.environ.items() if not k.startswith("DENV_")}
        e.update(env or {})
        p = subprocess.run([BIN] + args, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=20)
        return p.returncode, p.stdout.decode(), p.stderr.decode()

    rc, out, err = run(["-h"])
    ok(rc == 0 and "-addr" in out and "-db-repair" in out and "-public-url" in out, "-h prints usage, exit 0", (rc, out))
    rc, out, err = run(["--help"])
    is_(rc, 0, "--help exits 0")
    rc, out, err = run(["-bogus"])
    ok(rc == 2 and "unknown flag" in err, "an unknown flag exits 2", (rc, err))
    # Port 1 on loopback: nothing listens, the connection is refused at once.
    rc, out, err = run(["-db", "postgres://u:sekrit@127.0.0.1:1/denv"])
    ok(rc == 1 and "PostgreSQL postgres://u:***@127.0.0.1:1/denv: cannot connect" in err,
       "an unreachable postgres:// DSN: exit 1, named, the password as ***", (rc, err))
    ok("sekrit" not in err, "the DSN's password is not printed", err)
    rc, out, err = run([], {"DENV_DB_HOST": "127.0.0.1", "DENV_DB_PORT": "1", "DENV_DB_PASSWORD": "pw sekrit"})
    ok(rc == 1 and "PostgreSQL postgresql://denv:***@127.0.0.1:1/denv?sslmode=require: cannot connect" in err,
       "DENV_DB_HOST: the DSN built from DENV_DB_* (user, name, sslmode defaults)", (rc, err))
    ok("sekrit" not in err, "DENV_DB_PASSWORD is not printed", err)
    # No DENV_BOOTSTRAP_KEY: a key is generated, printed once, and works.
    store = os.path.join(tmp, "gen")
    s = Server(store)
    # The key is printed once the team's commit is on disk, which can come
    # after "listening on" (a loaded machine): wait for the line.
    deadline = time.time() + 10
    while not (m := re.search(r"(dak_[A-Za-z0-9_-]+)", s.stderr())) and time.time() < deadline:
        time.sleep(0.05)
    ok(m is not None, "without DENV_BOOTSTRAP_KEY a dak_ key is printed to stderr", s.stderr())
    key = m.group(1) if m else "dak_x"
    st, doc, _ = s.call("GET", "/v1/me", key=key)
    ok(st == 200 and doc["team"]["Name"] == "default", "the generated key works; DENV_TEAM defaults to default", doc)
    is_(s.stop(), 0, "SIGTERM: exit status 0")
    with open(store + ".stderr", "a") as f:
        f.write("restart-marker\n")
    s = Server(store)
    ok(key not in s.stderr().split("restart-marker")[-1], "restart: the key is not printed again")
    st, doc, _ = s.call("GET", "/v1/me", key=key)
    is_(st, 200, "restart: the generated key still works")
    s.stop()


def provider_fakes():
    """Fakes of Hetzner, E2B and Daytona that accept the tokens used here."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fakes"))
    from hetzner import FakeHetzner
    from fake_e2b import FakeE2B
    from fake_daytona import FakeDaytona
    return [FakeHetzner(token="hz-secret-token"), FakeE2B(key="e2b-tok"), FakeDaytona(key="dt-tok")]


def main():
    if not os.access(BIN, os.X_OK):
        print("1..0 # SKIP %s is not built" % BIN)
        return 0
    tmp = tempfile.mkdtemp(prefix="denv-cp-test-")
    releases = os.path.join(tmp, "releases")
    os.mkdir(releases)
    store = os.path.join(tmp, "store")
    # The clouds made below have their tokens checked by fakes on loopback,
    # never by the real APIs (t/fakes/).
    fakes = provider_fakes()
    env = {"DENV_BOOTSTRAP_KEY": BOOT_KEY, "DENV_TEAM": "acme", "DENV_DEV_LOGIN": "1",
           "DENV_CONSOLE_URL": CONSOLE + "/", "DENV_RELEASES_DIR": releases,
           "DENV_PUBLIC_URL": "http://cp.example:8080", "DENV_HETZNER_API_URL": fakes[0].url,
           "DENV_E2B_API_URL": fakes[1].url, "DENV_DAYTONA_API_URL": fakes[2].url}
    state = {"secrets": []}
    s = None
    try:
        s = Server(store, env)
        doc = s.call("GET", "/v1/me", key=BOOT_KEY)[1]
        state["boot_team"] = doc["team"]["ID"]
        test_basics(s)
        test_keys(s, state)
        test_sessions(s, state)
        state["ada_id"] = s.call("GET", "/v1/me", key=state["session"])[1]["user"]["ID"]
        test_device(s, state)
        test_projects(s, state)
        test_source(s, state)
        test_deploy(s, state)
        test_templates(s, state)
        test_events(s, state)
        test_clouds(s, state)
        test_join_tokens(s, state)
        test_targets(s, state)
        test_github(s, state)
        test_releases(s, state, releases)
        test_cors(s, state)
        is_(s.stop(), 0, "SIGTERM: denv-cp exits 0")
        log = s.stderr()
        leaked = [x[:8] + "..." for x in state["secrets"] + [BOOT_KEY] if x and x in log]
        is_(leaked, [], "no key, session or token appears in the log (-v)")
        seed_rows(store, state)
        with open(store + ".stderr", "a") as f:
            f.write("restart-marker\n")
        env2 = dict(env)
        del env2["DENV_CONSOLE_URL"]
        del env2["DENV_DEV_LOGIN"]
        env2["DENV_BOOTSTRAP_KEY"] = "dak_a_different_bootstrap_key"
        s = Server(store, env2)
        test_restart(s, state)
        is_(s.stop(), 0, "second SIGTERM: exit 0")
        s = None
        if PG_DSN:
            print("# PostgreSQL: the cut-log and -db-repair checks are the file store's; skipped")
            test_pg_copy(tmp, store)
        else:
            test_truncated_store(tmp, store)
        test_github_configured(tmp)
        test_flags(tmp)
    except Exception as ex:  # report, don't hide, a crash of the test itself
        import traceback
        ok(False, "test run raised %s" % type(ex).__name__, traceback.format_exc())
        if s is not None:
            print("# denv-cp stderr tail:")
            for line in s.stderr().splitlines()[-15:]:
                print("#   " + line)
            s.proc.kill()
    finally:
        for f in fakes:
            f.stop()
    return tap.finish(tmp)


if __name__ == "__main__":
    sys.exit(main())
