#!/usr/bin/env python3
"""A stand-in OTLP/HTTP collector for tests (Python standard library only).

    otlp_receiver.py OUT.jsonl [--port N] [--port-file FILE]

Listens on 127.0.0.1 (port 0 = any free port; the chosen port is written to --port-file once the
socket is bound). Every POST, whatever its path (/v1/traces, /v1/metrics, /v1/logs), is answered
200 `{}` and appended to OUT.jsonl as one line:
  {"path": ..., "content_type": ..., "content_encoding": ..., "received_at": epoch seconds,
   "json": <the decoded body> | null, "raw_base64": <the body when it is not JSON> | null}
gzip/deflate bodies are decompressed first. A protobuf body (the OTLP default protocol) is kept as
raw_base64, so a test can say the server sent protobuf instead of JSON.
"""
import argparse
import base64
import gzip
import json
import os
import sys
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    args = ap.parse_args()
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *a):  # quiet
            pass

        def _reply(self, status=200, body=b"{}"):
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):
            length = int(self.headers.get("Content-Length") or 0)
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                data = b""
                while True:
                    size = int(self.rfile.readline().split(b";")[0], 16)
                    if size == 0:
                        self.rfile.readline()
                        break
                    data += self.rfile.read(size)
                    self.rfile.readline()
            else:
                data = self.rfile.read(length)
            encoding = (self.headers.get("Content-Encoding") or "").lower()
            try:
                if encoding == "gzip":
                    data = gzip.decompress(data)
                elif encoding == "deflate":
                    data = zlib.decompress(data)
            except Exception:
                pass
            record = {
                "path": self.path,
                "content_type": self.headers.get("Content-Type"),
                "content_encoding": encoding or None,
                "received_at": time.time(),
                "json": None,
                "raw_base64": None,
            }
            try:
                record["json"] = json.loads(data.decode("utf-8"))
            except Exception:
                record["raw_base64"] = base64.b64encode(data).decode()
            with lock:
                with open(args.out, "a") as f:
                    f.write(json.dumps(record) + "\n")
            self._reply()

        def do_GET(self):
            self._reply()

    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(str(server.server_address[1]))
        os.replace(tmp, args.port_file)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
