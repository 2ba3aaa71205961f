#!/usr/bin/env python3
"""Creates N apps through the admin API of a running server and prints:
- the creation rate (apps/s) with W concurrent clients;
- the time to read one app (GET /admin/v1/apps/{appId}), median and p95, measured when the server
  holds few apps and again when it holds all of them: it should not grow with the count;
- the time to list one page (first page, and a page deep in the keyset pagination).
Usage: apps.py --url http://localhost:8080 --token $OPERATOR_TOKEN [--count 10000] [--workers 4]
Standard library only."""
import argparse, json, random, statistics, sys, time, urllib.request
from concurrent.futures import ThreadPoolExecutor


def call(url, token, method="GET", body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        return json.loads(resp.read() or b"null")


def timed(fn, repeat):
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    samples.sort()
    return statistics.median(samples), samples[int(len(samples) * 0.95) - 1]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--token", required=True)
    p.add_argument("--count", type=int, default=10000)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--measure-only", action="store_true",
                   help="create nothing: time reads and list pages on the apps already there (run on a quiet machine)")
    a = p.parse_args()
    base = a.url.rstrip("/")
    run = f"bench-{int(time.time())}"

    def create(i):
        return call(f"{base}/admin/v1/apps", a.token, "POST", {"name": f"{run}-{i}"})["appId"]

    def read_figures(ids):
        sample = random.sample(ids, min(len(ids), 300))
        it = iter(sample * 2)
        return timed(lambda: call(f"{base}/admin/v1/apps/{next(it)}", a.token), len(sample))

    def list_figures():
        first = timed(lambda: call(f"{base}/admin/v1/apps?limit=50", a.token), 50)
        # walk 20 pages deep, then time that page
        cursor = None
        for _ in range(20):
            page = call(f"{base}/admin/v1/apps?limit=50" + (f"&cursor={cursor}" if cursor else ""), a.token)
            cursor = page.get("nextCursor") or cursor
        deep = timed(lambda: call(f"{base}/admin/v1/apps?limit=50&cursor={cursor}", a.token), 50)
        return first, deep

    if a.measure_only:
        ids, cursor = [], None
        while True:
            page = call(f"{base}/admin/v1/apps?limit=200" + (f"&cursor={cursor}" if cursor else ""), a.token)
            ids += [app["appId"] for app in page.get("apps", [])]
            cursor = page.get("nextCursor")
            if not cursor:
                break
        read = read_figures(ids)
        first, deep = list_figures()
        print(f"read one app, {len(ids):>5} apps: median {read[0]:.2f} ms, p95 {read[1]:.2f} ms")
        print(f"list page 1 (50), {len(ids):>5} apps: median {first[0]:.2f} ms; page 21: {deep[0]:.2f} ms")
        return

    early_n = min(200, a.count)
    ids = []
    t0 = time.perf_counter()
    with ThreadPoolExecutor(a.workers) as pool:
        ids += list(pool.map(create, range(early_n)))
    early_read = read_figures(ids)
    early_list = list_figures()
    with ThreadPoolExecutor(a.workers) as pool:
        done = early_n
        for start in range(early_n, a.count, 500):
            ids += list(pool.map(create, range(start, min(start + 500, a.count))))
            done = len(ids)
            rate = done / (time.perf_counter() - t0)
            print(f"  created {done}/{a.count} apps ({rate:.0f}/s)", file=sys.stderr, flush=True)
    elapsed = time.perf_counter() - t0
    late_read = read_figures(ids)
    late_list = list_figures()
    total = call(f"{base}/admin/v1/apps?limit=1", a.token)
    print(f"apps created:            {len(ids)} in {elapsed:.1f} s = {len(ids) / elapsed:.1f} apps/s ({a.workers} clients; each app = RSA-2048 keygen + 1 transaction)")
    print(f"read one app, {early_n:>5} apps:  median {early_read[0]:.2f} ms, p95 {early_read[1]:.2f} ms")
    print(f"read one app, {len(ids):>5}+ apps: median {late_read[0]:.2f} ms, p95 {late_read[1]:.2f} ms")
    print(f"list page 1 (50),  {early_n:>5} apps: median {early_list[0][0]:.2f} ms; page 21: {early_list[1][0]:.2f} ms")
    print(f"list page 1 (50), {len(ids):>5}+ apps: median {late_list[0][0]:.2f} ms; page 21: {late_list[1][0]:.2f} ms")
    print(f"keyset pagination: nextCursor present = {total.get('nextCursor') is not None}")


if __name__ == "__main__":
    main()
