#!/usr/bin/env python3
"""A webhook receiver for the tests: verifies every request with the `standardwebhooks` package.

    receiver.py DIR [--port N]

Listens on 127.0.0.1 (port 0: the OS chooses), prints `PORT <n>` on its first line and writes the
number to DIR/port. It is driven
through files in DIR, so the caller needs no HTTP client:

- DIR/config.json (re-read on every request; write it atomically): {"secrets": ["whsec_..", ..],
  "fail": {"<webhook-id or event type>": N, ...}, "failAll": false}. A request is accepted when its
  signature verifies with at least one secret; `fail` answers 500 to the first N requests of that id
  or type, `failAll` answers 500 to everything; `delayMs` holds every answer that long (a slow or,
  with a large value, a hanging endpoint: the request is logged when it arrives).
- DIR/received.jsonl: one JSON line per request: id, type, userId, timestamp, attempt (how many times
  this id arrived), verified (one boolean per configured secret), status (the answer), body.
"""
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

DIR = sys.argv[1] if len(sys.argv) > 1 else "."
PORT = int(sys.argv[sys.argv.index("--port") + 1]) if "--port" in sys.argv else 0
LOCK = threading.Lock()
SEEN = {}      # webhook-id -> requests so far
FAILED = {}    # fail key -> 500s answered so far


def config():
    try:
        with open(os.path.join(DIR, "config.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length).decode("utf-8", "replace")
        headers = {k.lower(): v for k, v in self.headers.items()}
        cfg = config()
        verified = []
        for secret in cfg.get("secrets", []):
            try:
                Webhook(secret).verify(body, headers)
                verified.append(True)
            except (WebhookVerificationError, ValueError, TypeError):
                verified.append(False)
        try:
            payload = json.loads(body)
        except ValueError:
            payload = {}
        msg_id = headers.get("webhook-id", "")
        etype = payload.get("type", "")
        with LOCK:
            SEEN[msg_id] = SEEN.get(msg_id, 0) + 1
            attempt = SEEN[msg_id]
            status = 200 if any(verified) else 401
            if status == 200 and cfg.get("failAll"):
                status = 500
            if status == 200:
                for key in (msg_id, etype):
                    limit = cfg.get("fail", {}).get(key, 0)
                    if FAILED.get(key, 0) < limit:
                        FAILED[key] = FAILED.get(key, 0) + 1
                        status = 500
                        break
            record = {"id": msg_id, "type": etype, "userId": payload.get("data", {}).get("userId"),
                      "timestamp": headers.get("webhook-timestamp"), "signature": headers.get("webhook-signature"),
                      "attempt": attempt, "verified": verified, "status": status, "body": body}
            with open(os.path.join(DIR, "received.jsonl"), "a") as f:
                f.write(json.dumps(record) + "\n")
        delay = cfg.get("delayMs", 0)
        if delay:
            time.sleep(delay / 1000)
        self.send_response(status)
        self.send_header("content-length", "0")
        self.end_headers()


def orphan_watch(parent):
    # The receiver ends with the process that started it (a test run that failed or was killed).
    while True:
        time.sleep(1)
        if os.getppid() != parent:
            os._exit(0)


def main():
    threading.Thread(target=orphan_watch, args=(os.getppid(),), daemon=True).start()
    ThreadingHTTPServer.daemon_threads = True  # a held answer never keeps the receiver alive
    server = ThreadingHTTPServer(("127.0.0.1", PORT), Handler)
    port = server.server_address[1]
    with open(os.path.join(DIR, "port.tmp"), "w") as f:
        f.write(str(port))
    os.replace(os.path.join(DIR, "port.tmp"), os.path.join(DIR, "port"))
    print(f"PORT {port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
