#!/usr/bin/env python3
"""A SendGrid v3 stand-in for scripts: accepts POST /v3/mail/send (202) on 127.0.0.1 and appends each
received message as one JSON line to the file given. Usage: fake_sendgrid.py PORT OUTFILE"""
import json, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.path != "/v3/mail/send":
            self.send_response(404); self.end_headers(); return
        with open(sys.argv[2], "a") as out:
            out.write(json.dumps(json.loads(body)) + "\n")
        self.send_response(202); self.end_headers()

    def log_message(self, *args):
        pass


ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
