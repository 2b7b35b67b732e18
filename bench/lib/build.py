"""Image builds: a 3-layer Dockerfile (COPY, RUN, RUN on the busybox
fixture) with a 4 MiB payload.

  build-cold     denv: the prepare phase of a deploy whose context is new
                 (sent to the host, built there), from the deployment's own
                 timestamps; baseline: `docker build -` of a new context of
                 the same shape (the tar on stdin, classic builder), wall
                 time. Each run has its own payload, so nothing is cached
                 but the FROM image.
  build-cached   the same context again: denv finds the image by its cache
                 key and sends nothing; docker build runs its layer cache.
  build-cli      denv cold with DENVD_BUILD_CLI=1 (denvd's `docker build -`
                 fallback) against denv cold through the Engine API, in one
                 run: which builder is faster here.

The context upload (PUT /v1/contexts) is not in the denv figure: it is the
client's, like the baseline's tar packing. Runs alternate."""
import hashlib
import io
import os
import tarfile

import benchlib as B

DOCKERFILE = b"""FROM denv-test/busybox:latest
COPY payload /payload
RUN sha256sum /payload > /payload.sum
RUN mkdir /out && cp /payload /out/copy && echo done > /out/done
"""
COMPOSE = "services:\n  app:\n    build: .\n    command: [sleep, '3600']\n"
PAYLOAD = 4 << 20
TOOK = []  # the host's own build times (builds[].took_ms) of the cold API builds
IMAGES = []  # tags this run made (denv's and the baseline's), removed at the end


def context():
    """A new context: (tar bytes, sha256)."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as t:
        for name, data in (("Dockerfile", DOCKERFILE), ("payload", os.urandom(PAYLOAD))):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = 0
            t.addfile(info, io.BytesIO(data))
    b = out.getvalue()
    return b, hashlib.sha256(b).hexdigest()


def docker_build(tar, tag):
    t0 = B.now()
    r = B.subprocess.run(["docker", "build", "-q", "-t", tag, "-"], input=tar, capture_output=True,
                         env=dict(os.environ, DOCKER_BUILDKIT="0"), timeout=600)
    t1 = B.now()
    if r.returncode != 0:
        raise B.Pending("docker build: " + r.stderr.decode(errors="replace")[-200:])
    IMAGES.append(tag)
    return (t1 - t0) * 1000


def upload(s, tar, digest):
    import urllib.request
    req = urllib.request.Request(s.url + "/v1/contexts/" + digest, data=tar, method="PUT",
                                 headers={"Authorization": "Bearer " + s.key, "Content-Type": "application/x-tar"})
    with urllib.request.urlopen(req, timeout=120) as r:
        B.need(r.status == 201, "PUT /v1/contexts: %s" % r.status)


def denv_build(s, digest, n):
    """prepare's ms and the build record, for a deploy of the context to a new environment."""
    st, dep = s.req("POST", "/v1/projects/bench-build/deploy",
                    {"compose": COMPOSE, "contexts": {"app": digest}, "env": "b%d" % n})
    B.need(st == 202, "deploy refused: %s %s" % (st, dep))
    s.envs.add(dep["deployment"]["EnvID"])
    dd = s.wait_dep(dep["deployment"]["ID"])
    if dd["deployment"]["Status"] != "succeeded":
        raise B.Pending(s.failed_phase(dd))
    prep = [p for p in dd["phases"] if p["Name"] == "prepare"][0]
    rec = (prep.get("Evidence") or {}).get("builds", [{}])[0]
    if rec.get("image") and rec["image"] not in IMAGES:
        IMAGES.append(rec["image"])
    if not rec.get("cached") and rec.get("builder") == "engine-api":
        TOOK.append(rec.get("took_ms") or 0)
    return B.phase_ms(dd)["prepare"], rec


def stack(name, cli):
    old = os.environ.pop("DENVD_BUILD_CLI", None)
    if cli:
        os.environ["DENVD_BUILD_CLI"] = "1"
    try:
        s = B.Stack(name)
    finally:
        os.environ.pop("DENVD_BUILD_CLI", None)
        if old is not None:
            os.environ["DENVD_BUILD_CLI"] = old
    s.req("POST", "/v1/projects", {"name": "bench-build"})
    return s


def body():
    B.fig("build-cold", "compose build: 3-layer Dockerfile, new context (prepare)", "docker build - (classic)",
          "ms", "ratio<=1.25")
    B.fig("build-cached", "the same context again (prepare, cached)", "docker build - (layer cache)",
          "ms", "ratio<=1.25")
    B.fig("build-cli", "denvd build through docker build - (DENVD_BUILD_CLI=1)", "through POST /build",
          "ms", "report")
    why = B.docker_ready()
    if why:
        for k in ("build-cold", "build-cached", "build-cli"):
            B.pending(k, why)
        return
    n = B.runs(5, 3)
    api = cli = None
    try:
        api = stack("build-api", False)
        cli = stack("build-cli", True)
        docker_build(context()[0], B.PREFIX + "build:warm")  # the FROM image and the engine, not recorded
        builders = set()
        for i in range(n):
            tar, digest = context()
            upload(api, tar, digest)
            ms, rec = denv_build(api, digest, i)
            builders.add(rec.get("builder", "?"))
            B.sample("build-cold", ms)
            B.base("build-cli", ms)
            btar = context()[0]
            B.base("build-cold", docker_build(btar, B.PREFIX + "build:c%d" % i))
            ms, rec = denv_build(api, digest, 100 + i)
            B.need(rec.get("cached") is True, "second deploy was not cached: %s" % rec)
            B.sample("build-cached", ms)
            B.base("build-cached", docker_build(btar, B.PREFIX + "build:c%d" % i))
            tar, digest = context()
            upload(cli, tar, digest)
            ms, rec = denv_build(cli, digest, i)
            B.need(rec.get("builder") == "docker-cli", "DENVD_BUILD_CLI=1 ran %s" % rec.get("builder"))
            B.sample("build-cli", ms)
        B.note("build: denvd's builder in build-cold: %s; of its prepare, the build itself (builds[].took_ms) "
               "is %.0f ms (median), the rest is sending the %d MiB context to the host and env.create's "
               "checks" % (", ".join(sorted(builders)), B.median(TOOK) or 0, PAYLOAD >> 20))
    except B.Pending as p:
        for k in ("build-cold", "build-cached", "build-cli"):
            B.pending(k, p)
    finally:
        for s in (cli, api):
            if s:
                s.close()
        for t in IMAGES:
            B.sh("docker", "rmi", "-f", t)


B.main(body)
