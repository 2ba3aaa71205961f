#!/usr/bin/env python3
"""The resolver and the two listeners of Tests/system/ops/webhook-rebind-test.sh (Python stdlib only).

    webhook_rebind.py DIR DNS_ADDRESS NAME FIRST SECOND

- A DNS server on DNS_ADDRESS:53 (UDP) that knows one name, NAME. An A query for it is answered FIRST
  when DIR/arm exists (the file is then removed: one answer per arming), else SECOND; TTL 0, so nothing
  caches it. AAAA queries for NAME get an empty answer, other names NXDOMAIN. Every query is logged to
  DIR/dns.log ("A NAME -> ADDRESS").
- Two HTTP listeners on the same port, one on FIRST and one on SECOND (the port is written to DIR/port).
  Each answers 200 to every POST and logs it to DIR/<address>.jsonl: the Host header, the path and the
  webhook-id.
Ends when its parent process ends.
"""
import json
import os
import socket
import struct
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DIR, DNS_ADDRESS, NAME, FIRST, SECOND = sys.argv[1:6]
NAME = NAME.lower().rstrip(".")
LOCK = threading.Lock()


def log(file, line):
    with LOCK, open(os.path.join(DIR, file), "a") as f:
        f.write(line + "\n")


def parse_question(packet):
    labels, at = [], 12
    while True:
        length = packet[at]
        if length == 0:
            at += 1
            break
        labels.append(packet[at + 1:at + 1 + length].decode("ascii", "replace"))
        at += 1 + length
    qtype, _qclass = struct.unpack("!HH", packet[at:at + 4])
    return ".".join(labels).lower(), qtype, at + 4


def answer(packet):
    (query_id,) = struct.unpack("!H", packet[:2])
    name, qtype, end = parse_question(packet)
    question = packet[12:end]
    records = b""
    count = 0
    rcode = 0
    if name != NAME:
        rcode = 3  # NXDOMAIN
        log("dns.log", f"{qtype} {name} -> NXDOMAIN")
    elif qtype == 1:  # A
        arm = os.path.join(DIR, "arm")
        with LOCK:
            armed = os.path.exists(arm)
            if armed:
                os.remove(arm)
        address = FIRST if armed else SECOND
        records = struct.pack("!HHHIH", 0xC00C, 1, 1, 0, 4) + socket.inet_aton(address)
        count = 1
        log("dns.log", f"A {name} -> {address}")
    else:
        log("dns.log", f"{qtype} {name} -> (none)")
    flags = 0x8400 | 0x0100 | 0x0080 | rcode  # response, authoritative, recursion desired and available
    return struct.pack("!HHHHHH", query_id, flags, 1, count, 0, 0) + question + records


def dns_server(sock):
    while True:
        packet, peer = sock.recvfrom(4096)
        try:
            sock.sendto(answer(packet), peer)
        except (IndexError, struct.error, UnicodeError):
            pass


def listener(address, port):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            length = int(self.headers.get("content-length") or 0)
            self.rfile.read(length)
            log(f"{address}.jsonl", json.dumps({"host": self.headers.get("host"), "path": self.path,
                                                "id": self.headers.get("webhook-id")}))
            self.send_response(200)
            self.send_header("content-length", "0")
            self.end_headers()

    server = ThreadingHTTPServer((address, port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main():
    parent = os.getppid()
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((DNS_ADDRESS, 53))
    threading.Thread(target=dns_server, args=(sock,), daemon=True).start()
    for _ in range(50):
        first = listener(FIRST, 0)
        port = first.server_address[1]
        try:
            listener(SECOND, port)
            break
        except OSError:
            first.shutdown()
    with open(os.path.join(DIR, "port.tmp"), "w") as f:
        f.write(str(port))
    os.replace(os.path.join(DIR, "port.tmp"), os.path.join(DIR, "port"))
    while os.getppid() == parent:
        time.sleep(0.5)


if __name__ == "__main__":
    main()
