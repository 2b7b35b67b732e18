"""API GET /v1/envs/{id}: requests/s and p99 with wrk (one thread, 50
connections, keep-alive, loopback) against denv-cp (one event loop, API key
checked on every request), and against nginx (one worker) serving the same
bytes with the same content type. API_BENCH_DURATION overrides the 5 s
(2 s with QUICK=1) of each wrk run; runs alternate."""
import os
import urllib.request

import benchlib as B

DUR = os.environ.get("API_BENCH_DURATION") or ("2s" if B.QUICK else "5s")


def body():
    B.fig("api_rps", "API GET /v1/envs/{id} requests/s", "nginx, same bytes", "req/s", "ratio>=0.8")
    B.fig("api_p99", "API GET /v1/envs/{id} p99 latency", "nginx, same bytes", "ms", "ratio<=1.25")
    n = B.runs(3, 1)
    try:
        s = B.Stack("api", sidecar=False)
    except B.Pending as p:
        B.pending("api_rps", p)
        B.pending("api_p99", p)
        return
    ng = None
    try:
        st, r = s.req("POST", "/v1/projects", {"name": "apibench"})
        B.need(st == 201, "POST /v1/projects: %s %s" % (st, r))
        env = r["environments"][0]["ID"]
        path = "/v1/envs/" + env
        auth = "Authorization: Bearer " + s.key
        rq = urllib.request.Request(s.url + path, headers={"Authorization": "Bearer " + s.key})
        with urllib.request.urlopen(rq) as resp:
            data, ctype = resp.read(), resp.headers.get("Content-Type", "application/json")
        ng = B.Nginx(s.tmp, path, data, ctype)
        B.note("api: %d-byte body; wrk -t1 -c50 -d%s; nginx 1 worker, denv-cp 1 loop" % (len(data), DUR))
        for _ in range(n):
            rps, p99, bad = B.wrk(s.url + path, DUR, headers=(auth,))
            B.need(bad == 0, "denv-cp answered %d non-2xx responses under wrk" % bad)
            B.sample("api_rps", rps)
            B.sample("api_p99", p99)
            rps, p99, bad = B.wrk(ng.url, DUR, headers=(auth,))
            B.base("api_rps", rps)
            B.base("api_p99", p99)
    except B.Pending as p:
        B.pending("api_rps", p)
        B.pending("api_p99", p)
    finally:
        if ng:
            ng.stop()
        s.close()


B.main(body)
