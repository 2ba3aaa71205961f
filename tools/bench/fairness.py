#!/usr/bin/env python3
"""Open-loop login load from two apps at once (standard library only), for tools/bench/login.sh.

App A sends logins at a fixed rate (--a-rate, e.g. 3x the bcrypt ceiling), app B at a low fixed rate
(--b-rate, e.g. 2/s), both for --seconds. Open loop: request i of a stream is sent at t0 + i/rate
whether or not earlier ones were answered (one new connection per request), and its latency is
counted from that scheduled time, so a slow server cannot slow the senders down (no coordinated
omission). Prints one JSON object: per app, requests sent, outcomes by HTTP status (and client-side
errors), latency percentiles of the 200s and of all answers, and how many 503s carried Retry-After.

  fairness.py --url http://127.0.0.1:8080 --a-token T --a-handles 'a{}@bench.test' --a-users 32 \
              --b-token T --b-handles 'b{}@bench.test' --b-users 4 --password MD5 --a-rate 90 --b-rate 2 --seconds 30
"""
import argparse, asyncio, json, time, urllib.parse


def percentile(values, p):
    if not values:
        return None
    values = sorted(values)
    k = max(0, min(len(values) - 1, int(round(p / 100.0 * len(values) + 0.5)) - 1))  # nearest rank
    return values[k]


async def one_login(host, port, token, body, timeout):
    """POST /api/appuser/login on a fresh connection; returns (status, retry_after_present)."""
    reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    try:
        payload = body.encode()
        head = (f"POST /api/appuser/login HTTP/1.1\r\nHost: {host}:{port}\r\napp-token: {token}\r\n"
                f"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {len(payload)}\r\n"
                "Connection: close\r\n\r\n").encode()
        writer.write(head + payload)
        await writer.drain()
        status_line = await asyncio.wait_for(reader.readline(), timeout)
        parts = status_line.decode("latin-1").split()
        if len(parts) < 2:
            raise ConnectionError("no status line")
        status = int(parts[1])
        retry_after = False
        length = None
        while True:
            line = await asyncio.wait_for(reader.readline(), timeout)
            if line in (b"\r\n", b"\n", b""):
                break
            name, _, value = line.decode("latin-1").partition(":")
            name = name.strip().lower()
            if name == "retry-after":
                retry_after = True
            elif name == "content-length":
                length = int(value.strip())
        if length is not None:
            await asyncio.wait_for(reader.readexactly(length), timeout)
        else:
            await asyncio.wait_for(reader.read(), timeout)
        return status, retry_after
    finally:
        writer.close()
        try:
            await writer.wait_closed()
        except Exception:
            pass


client_lag = {}


async def stream(name, host, port, token, handles, users, password, rate, seconds, timeout, t0, results):
    total = int(rate * seconds)
    tasks = []
    lags = client_lag.setdefault(name, [])
    loop = asyncio.get_running_loop()

    async def send(i, scheduled):
        lags.append(loop.time() - scheduled)  # how late this client started the request
        handle = handles.format(i % users + 1)
        body = "handle=" + urllib.parse.quote(handle, safe="@") + "&password=" + password
        try:
            status, retry_after = await one_login(host, port, token, body, timeout)
            results.append((name, str(status), loop.time() - scheduled, retry_after))
        except Exception as error:  # timeouts, refused or reset connections
            results.append((name, "error:" + type(error).__name__, loop.time() - scheduled, False))

    for i in range(total):
        scheduled = t0 + i / rate
        delay = scheduled - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(send(i, scheduled)))
    await asyncio.gather(*tasks)


def ms(value):
    return None if value is None else round(value, 1)


def summary(results, name, seconds):
    mine = [r for r in results if r[0] == name]
    outcomes = {}
    for _, status, _, _ in mine:
        outcomes[status] = outcomes.get(status, 0) + 1
    ok = [r[2] * 1000 for r in mine if r[1] == "200"]
    answered = [r[2] * 1000 for r in mine if not r[1].startswith("error")]
    refused = [r for r in mine if r[1] == "503"]
    return {
        "sent": len(mine),
        "outcomes": dict(sorted(outcomes.items())),
        "ok_per_s": round(len(ok) / seconds, 2),
        "rate_503": round(len(refused) / len(mine), 4) if mine else 0.0,
        "retry_after_on_503": sum(1 for r in refused if r[3]),
        "ok_p50_ms": ms(percentile(ok, 50)), "ok_p99_ms": ms(percentile(ok, 99)), "ok_max_ms": ms(max(ok) if ok else None),
        "all_p50_ms": ms(percentile(answered, 50)), "all_p99_ms": ms(percentile(answered, 99)),
        "refused_p50_ms": ms(percentile([r[2] * 1000 for r in refused], 50)),
        # Included in the latencies above; large values mean the client itself fell behind.
        "client_lag_p50_ms": ms(percentile([x * 1000 for x in client_lag.get(name, [])], 50)),
        "client_lag_p99_ms": ms(percentile([x * 1000 for x in client_lag.get(name, [])], 99)),
    }


async def main():
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--a-token", required=True)
    p.add_argument("--a-handles", required=True, help="handle pattern with {} for 1..users")
    p.add_argument("--a-users", type=int, default=32)
    p.add_argument("--a-rate", type=float, required=True)
    p.add_argument("--b-token", required=True)
    p.add_argument("--b-handles", required=True)
    p.add_argument("--b-users", type=int, default=4)
    p.add_argument("--b-rate", type=float, default=2.0)
    p.add_argument("--password", required=True, help="the MD5 hex the SDKs send")
    p.add_argument("--seconds", type=float, default=30)
    p.add_argument("--timeout", type=float, default=30)
    a = p.parse_args()
    url = urllib.parse.urlsplit(a.url)
    host, port = url.hostname, url.port or 80
    loop = asyncio.get_running_loop()
    results = []
    t0 = loop.time() + 0.2
    started = time.time()
    await asyncio.gather(
        stream("A", host, port, a.a_token, a.a_handles, a.a_users, a.password, a.a_rate, a.seconds, a.timeout, t0, results),
        stream("B", host, port, a.b_token, a.b_handles, a.b_users, a.password, a.b_rate, a.seconds, a.timeout, t0 + 0.25, results),
    )
    print(json.dumps({
        "seconds": a.seconds, "wall_seconds": round(time.time() - started, 2),
        "a_rate": a.a_rate, "b_rate": a.b_rate,
        "A": summary(results, "A", a.seconds), "B": summary(results, "B", a.seconds),
    }))


if __name__ == "__main__":
    asyncio.run(main())
