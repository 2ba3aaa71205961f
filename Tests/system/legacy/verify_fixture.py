#!/usr/bin/env python3
"""Check a folder written by make_fixture.py against its manifest.json.

Deliberately shares no code with the generator: Extended JSON is parsed here,
the legacy AES scheme is re-implemented from the spec (and checked against
the spec's test vectors first), bcrypt hashes are checked against MD5 of the
manifest's plaintext passwords, app tokens are verified with the legacy
server public key and each decrypted private key must match its public key.

Usage: verify_fixture.py OUT_DIR [--sample N]   (exit 1 on any failure)
"""

import argparse
import base64
import datetime
import hashlib
import hmac
import json
import os
import struct
import sys

import bcrypt
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

failures = []
checks = 0


def check(cond, what):
    global checks
    checks += 1
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def decode_ext(v):
    """Extended JSON (canonical, relaxed or v1) -> plain Python values."""
    if isinstance(v, list):
        return [decode_ext(x) for x in v]
    if not isinstance(v, dict):
        return v
    if len(v) == 1:
        (k, x), = v.items()
        if k == "$oid":
            return ("oid", x)
        if k in ("$numberInt", "$numberLong"):
            return int(x)
        if k == "$numberDouble":
            return float(x)
        if k == "$date":
            if isinstance(x, dict):
                return datetime.datetime.fromtimestamp(int(x["$numberLong"]) / 1000, datetime.timezone.utc)
            if isinstance(x, (int, float)):
                return datetime.datetime.fromtimestamp(x / 1000, datetime.timezone.utc)
            return datetime.datetime.fromisoformat(x.replace("Z", "+00:00"))
    return {k: decode_ext(x) for k, x in v.items()}


def read_collection(path):
    with open(path, encoding="utf-8") as f:
        head = f.read(1)
        f.seek(0)
        if head == "[":
            for d in json.load(f):
                yield decode_ext(d)
        else:
            for line in f:
                if line.strip():
                    yield decode_ext(json.loads(line))


def aes_decrypt(stored, passphrase):
    raw = base64.b64decode(stored)
    if len(raw) < 17:
        return None
    key = hashlib.sha256(passphrase.encode("utf-8")).digest()
    d = Cipher(algorithms.AES(key), modes.CTR(raw[:16])).decryptor()
    return (d.update(raw[16:]) + d.finalize()).decode("utf-8", "replace")


def b64url_dec(s):
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def verify_jwt(token, public_pem):
    h, p, s = token.split(".")
    pub = serialization.load_pem_public_key(public_pem.encode())
    try:
        pub.verify(b64url_dec(s), (h + "." + p).encode(), padding.PKCS1v15(), hashes.SHA256())
    except Exception:
        return None
    return json.loads(b64url_dec(p))


def totp_now(b32, t):
    key = base64.b32decode(b32)
    mac = hmac.new(key, struct.pack(">Q", t // 30), hashlib.sha1).digest()
    o = mac[-1] & 15
    return "%06d" % ((struct.unpack(">I", mac[o:o + 4])[0] & 0x7FFFFFFF) % 1000000)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out_dir")
    ap.add_argument("--sample", type=int, default=200, help="bench users to check against the pool")
    a = ap.parse_args()
    man = json.load(open(os.path.join(a.out_dir, "manifest.json"), encoding="utf-8"))
    key = man["encryptKey"]

    # spec §3.9 test vectors (IV 00..0f)
    for plain, stored in [("hello", "AAECAwQFBgcICQoLDA0OD10R3Vea"),
                          ("+15555550100", "AAECAwQFBgcICQoLDA0ODx5FhA7A7fIttGmdeQ==")]:
        check(aes_decrypt(stored, "jojo123") == plain, "spec AES vector " + plain)

    cols = {}
    for name, info in man["collections"].items():
        path = os.path.join(a.out_dir, info["file"])
        if name == "users" and man.get("bench"):
            continue   # streamed below
        cols[name] = list(read_collection(path))
        check(len(cols[name]) == info["count"], "%s count %d" % (name, info["count"]))

    # apps: decrypt, compare with manifest, key pair match, token signatures
    server_pub = man["legacyServer"]["publicKeyPem"]
    apps_by_id = {d["appId"]: d for d in cols["apps"]}
    for e in man["apps"]:
        d = apps_by_id[e["appId"]]
        for f in ("appPrivateKey", "appPublicKey", "appSecret", "emailExtensionAPIKey",
                  "TWILIOAccountSid", "TWILIOToken", "TWILIOPhoneNumber"):
            if f not in d or d[f] is None:
                continue
            stored = d[f]
            plain = aes_decrypt(stored, key) if f in e["encryptedFields"] else stored
            want = {"appPrivateKey": e["appPrivateKey"], "appPublicKey": e["rawPublicKey"],
                    "appSecret": e["appSecret"]}.get(f, e["secrets"].get(f))
            check(plain == want, "%s %s decrypts to manifest value" % (e["ref"], f))
            if f in e["encryptedFields"]:
                check(stored != want, "%s %s is really encrypted" % (e["ref"], f))
        pub_pem = base64.b64decode(e["rawPublicKey"]).decode()
        priv_pem = base64.b64decode(e["appPrivateKey"]).decode()
        check(pub_pem.startswith("-----BEGIN PUBLIC KEY-----") and not pub_pem.endswith("\n"),
              e["ref"] + " SPKI PEM shape")
        check(priv_pem.startswith("-----BEGIN RSA PRIVATE KEY-----") and not priv_pem.endswith("\n"),
              e["ref"] + " PKCS#1 PEM shape")
        priv = serialization.load_pem_private_key(priv_pem.encode(), None)
        pub = serialization.load_pem_public_key(pub_pem.encode())
        check(priv.public_key().public_numbers() == pub.public_numbers() and priv.key_size == 2048,
              e["ref"] + " key pair matches, 2048 bit")
        check(d["appToken"] == e["appToken"], e["ref"] + " appToken stored verbatim")
        claims = verify_jwt(e["appToken"], server_pub)
        check(claims is not None and claims.get("appId") == e["appId"] and claims.get("scope") == "app"
              and list(claims) == ["appId", "scope", "iat"], e["ref"] + " appToken signature/claims")
        sc = verify_jwt(e["appSecret"], server_pub)
        check(sc is not None and sc.get("scope") == "appSecret", e["ref"] + " appSecret signature")
    A = man["apps"][0]
    check(set(A["encryptedFields"]) == {"appPrivateKey", "appPublicKey", "appSecret"}, "A encrypted set")
    B = man["apps"][1]
    check(base64.b64decode(apps_by_id[B["appId"]]["appPublicKey"]).startswith(b"-----BEGIN"),
          "B public key is plaintext base64 PEM")
    check(aes_decrypt(apps_by_id[B["appId"]]["TWILIOAccountSid"], key) == "AC" + "0" * 32, "B Twilio SID")
    check(verify_jwt(man["legacyServer"]["serverSecret"], server_pub)["scope"] == "server", "server secret")

    # users: bcrypt(md5(password)), raw md5, TOTP, handles
    bench = man.get("bench")
    users_path = os.path.join(a.out_dir, man["collections"]["users"]["file"])
    users = {}
    for i, d in enumerate(read_collection(users_path)):
        if i >= len(man["users"]) + (a.sample if bench else 0):
            break
        users[d["_id"][1]] = d
    for u in man["users"]:
        d = users[u["_id"]]
        check(d["handle"] == u["handle"], u["ref"] + " handle")
        if u["password"] is None:
            check("password" not in d, u["ref"] + " has no password")
            continue
        md5 = hashlib.md5(u["password"].encode()).hexdigest()
        check(md5 == u["passwordMd5"], u["ref"] + " md5")
        if u["passwordFormat"] == "md5-raw":
            check(d["password"] == md5, u["ref"] + " raw md5 stored")
        else:
            check(d["password"].startswith("$" + u["passwordFormat"][-2:] + "$10$"), u["ref"] + " prefix")
            check(bcrypt.checkpw(md5.encode(), d["password"].encode()), u["ref"] + " bcrypt(md5) verifies")
            check(not bcrypt.checkpw(md5.upper().encode(), d["password"].encode()),
                  u["ref"] + " uppercase md5 rejected")
        if u["totp"]:
            b32 = d["googleSecretKey"].replace(" ", "").upper()
            check(b32 == u["totp"]["base32"] and len(base64.b32decode(b32)) == 20, u["ref"] + " totp secret")
            t = int(datetime.datetime(2024, 1, 15, 10, tzinfo=datetime.timezone.utc).timestamp())
            check(totp_now(b32, t) == u["totp"]["codeAtReferenceTime"], u["ref"] + " totp code")
    kinds = {u["passwordFormat"] for u in man["users"]}
    check({"bcrypt-2a", "bcrypt-2b", "md5-raw", None} <= kinds, "password variants present")
    dup = man["duplicates"][0]
    norm = {u["expectedHandle"] for u in man["users"] if u["_id"] in [r["_id"] for r in dup["rows"]]}
    check(norm == {dup["normalisedHandle"]} and len(dup["rows"]) == 2, "duplicate pair normalises together")

    # signups/invites codes present in the dump
    by_code = {(s["handle"], s["code"]) for s in cols["signups"]}
    for s in man["signups"]:
        check((s["handle"], s["code"]) in by_code, "signup %s code in dump" % s["ref"])
    pend = [s for s in man["signups"] if s["ref"] == "S2"][0]
    row = [s for s in cols["signups"] if s["handle"] == "erin@example.com"][0]
    check(bcrypt.checkpw(hashlib.md5(pend["password"].encode()).hexdigest().encode(), row["password"].encode()),
          "S2 hash is Secret#2024")
    check(row["updatedAt"].microsecond == 0, "whole-second dates")
    inv = {(i["handle"], i["code"], i["status"]) for i in cols["invites"]}
    for i in man["invites"]:
        check((i["handle"], i["code"], i["status"]) in inv, "invite %s in dump" % i["ref"])
    tpl = {}
    for t in cols["emailtemplates"]:
        tpl[t["appId"]] = tpl.get(t["appId"], 0) + 1
    check(tpl == man["emailtemplates"]["perApp"], "template counts")
    check(tpl[A["appId"]] == 16 and tpl[B["appId"]] == 8, "A has 16 templates, B 8")

    # bench pool and a sample of streamed users
    if bench:
        pool = bench["pool"]
        for p in pool:
            check(bcrypt.checkpw(hashlib.md5(p["password"].encode()).hexdigest().encode(), p["hash"].encode()),
                  "pool %d hash matches its password" % p["index"])
        apps = [e["appId"] for e in man["apps"]]
        base = len(man["users"])
        n = 0
        with open(users_path, encoding="utf-8") as f:
            lines = (l for l in f if l.strip() not in ("", "[", "]"))
            for idx, line in enumerate(lines):
                if idx < base:
                    continue
                if idx >= base + a.sample:
                    break
                d = decode_ext(json.loads(line.rstrip().rstrip(",")))
                i = idx - base
                check(d["appId"] == apps[i % len(apps)], "bench user %d app" % i)
                if "password" in d:
                    p = pool[i % len(pool)]
                    want = p["md5"] if i % 500 == 1 else p["hash"]
                    check(d["password"] == want and d["handle"] == "user%07d@bench.example" % i,
                          "bench user %d password from pool" % i)
                n += 1
        total = man["collections"]["users"]["count"]
        counted = sum(1 for _ in open(users_path, encoding="utf-8") if _.strip() not in ("", "[", "]"))
        check(counted == total, "users line count %d == manifest %d" % (counted, total))

    print("%d checks, %d failed" % (checks, len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
