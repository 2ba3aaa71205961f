"""AppKey (passkey) part of the end-user fuzzer (imported by enduser.py; Python standard library only).

Set-up makes an appKey app, an anonymous passkey user whose P-256 key lives here (pure-Python ECDSA),
and pools of live WebAuthn challenges (signup and login). Generation then sends AppKey requests
whose clientDataJSON / attestationObject / authenticatorData / signature are valid-looking base64url
of real, correctly signed ceremonies, mutated: bit flips, truncations, insertions, CBOR heads with huge
or indefinite lengths, deep nesting, duplicate keys, other types. Every answer must be a complete 4xx
(or 200 for the rare unmutated one), like every other request of the fuzzer.
"""

import base64
import hashlib
import json
import random
import uuid

RP_ID = "fuzz.appkey.test"
ORIGIN = "https://" + RP_ID
APPKEY_ENDPOINTS = [
    "app", "user", "signup", "signupConfirm", "signupComplete", "login", "loginComplete", "loginAnonymous",
    "loginAnonymousComplete", "verify", "verifyComplete", "setLocale", "setUsername", "userNameAvailable", "deleteAccount",
    "socialSignup", "socialLogin", "verifySocialAccount", "updateProfile", "addPasskey", "addPasskeyComplete",
    "updatePasskey", "removePasskey",
]

def mark_bomb(r, name, counts=(130, 300, 2000, 20_000)):
    """One base letter carrying many random combining marks (U+0300-U+036F): one character to Swift,
    hundreds or thousands of code points to PostgreSQL's length() CHECKs and index rows. Random
    marks, so that PostgreSQL cannot compress an index key of them under its 8 kB row limit."""
    marks = "".join(chr(r.randrange(0x300, 0x370)) for _ in range(r.choice(counts)))
    text = r.choice(["e", "x", "\u0430"]) + marks
    if name == "handle":
        return r.choice([text + "@x.io", "ANON_" + text, text])
    return text


# --- P-256 (pure Python; only for the set-up's few keys and signatures) -----------------------------
P = 0xFFFFFFFF00000001000000000000000000000000FFFFFFFFFFFFFFFFFFFFFFFF
A = P - 3
N = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551
G = (0x6B17D1F2E12C4247F8BCE6E563A440F277037D812DEB33A0F4A13945D898C296,
     0x4FE342E2FE1A7F9B8EE7EB4A7C0F9E162BCE33576B315ECECBB6406837BF51F5)


def _add(p1, p2):
    if p1 is None:
        return p2
    if p2 is None:
        return p1
    if p1[0] == p2[0] and (p1[1] + p2[1]) % P == 0:
        return None
    if p1 == p2:
        lam = (3 * p1[0] * p1[0] + A) * pow(2 * p1[1], -1, P) % P
    else:
        lam = (p2[1] - p1[1]) * pow(p2[0] - p1[0], -1, P) % P
    x = (lam * lam - p1[0] - p2[0]) % P
    return (x, (lam * (p1[0] - x) - p1[1]) % P)


def _mul(k, point):
    result = None
    while k:
        if k & 1:
            result = _add(result, point)
        point = _add(point, point)
        k >>= 1
    return result


def _der_int(v):
    b = v.to_bytes(32, "big").lstrip(b"\x00") or b"\x00"
    if b[0] & 0x80:
        b = b"\x00" + b
    return b"\x02" + bytes([len(b)]) + b


class Key:
    def __init__(self, r):
        self.d = r.randrange(1, N)
        self.q = _mul(self.d, G)

    def cose(self):
        return cbor({1: 2, 3: -7, -1: 1, -2: self.q[0].to_bytes(32, "big"), -3: self.q[1].to_bytes(32, "big")})

    def sign(self, data, r):
        e = int.from_bytes(hashlib.sha256(data).digest(), "big")
        while True:
            k = r.randrange(1, N)
            x = _mul(k, G)[0] % N
            s = pow(k, -1, N) * (e + x * self.d) % N
            if x and s:
                body = _der_int(x) + _der_int(s)
                return b"\x30" + bytes([len(body)]) + body


# --- CBOR --------------------------------------------------------------------------------------------
def _head(major, value):
    if value < 24:
        return bytes([major << 5 | value])
    for ai, size in ((24, 1), (25, 2), (26, 4), (27, 8)):
        if value < 1 << (8 * size):
            return bytes([major << 5 | ai]) + value.to_bytes(size, "big")
    raise ValueError("too large")


def cbor(v):
    if isinstance(v, bool):
        return b"\xf5" if v else b"\xf4"
    if v is None:
        return b"\xf6"
    if isinstance(v, int):
        return _head(0, v) if v >= 0 else _head(1, -1 - v)
    if isinstance(v, bytes):
        return _head(2, len(v)) + v
    if isinstance(v, str):
        b = v.encode()
        return _head(3, len(b)) + b
    if isinstance(v, list):
        return _head(4, len(v)) + b"".join(cbor(x) for x in v)
    if isinstance(v, dict):
        return _head(5, len(v)) + b"".join(cbor(k) + cbor(x) for k, x in v.items())
    raise TypeError(type(v))


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64url(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


# --- ceremonies -------------------------------------------------------------------------------------
def client_data(kind, challenge):
    return json.dumps({"type": kind, "challenge": challenge, "origin": ORIGIN}, separators=(",", ":")).encode()


def registration(key, credential_id, challenge, r):
    cd = client_data("webauthn.create", challenge)
    auth = hashlib.sha256(RP_ID.encode()).digest() + bytes([0x5D]) + b"\x00\x00\x00\x00" + b"\x00" * 16
    auth += len(credential_id).to_bytes(2, "big") + credential_id + key.cose()
    if r.random() < 0.5:
        statement = {"alg": -7, "sig": key.sign(auth + hashlib.sha256(cd).digest(), r)}
        fmt = "packed"
    else:
        statement, fmt = {}, "none"
    return {"clientDataJSON": cd, "attestationObject": cbor({"fmt": fmt, "attStmt": statement, "authData": auth}),
            "authData": auth}


def assertion(key, challenge, counter, r):
    cd = client_data("webauthn.get", challenge)
    auth = hashlib.sha256(RP_ID.encode()).digest() + bytes([0x1D]) + counter.to_bytes(4, "big")
    return {"clientDataJSON": cd, "authenticatorData": auth, "signature": key.sign(auth + hashlib.sha256(cd).digest(), r)}


# --- set-up -----------------------------------------------------------------------------------------
def setup(base, admin, http, expect, tag, pool=300):
    """Returns the AppKey part of the fuzzer's state (or raises the caller's SetupError via expect)."""
    r = random.Random(f"appkey-setup-{tag}")
    app = expect(*http(base, "POST", "/admin/v1/apps", {
        "name": f"Fuzz AppKey {tag}", "product": "appKey", "rpId": RP_ID, "anonymousLoginEnabled": True,
        "userNamesEnabled": True, "locales": ["EN", "FR"], "counterRegression": "refuse",
    }, admin), 201, "create appKey app")
    token = {"app-token": app["appToken"]}
    key = Key(r)
    credential_id = r.randbytes(20)
    handle = "ANON_" + str(uuid.UUID(int=r.getrandbits(128))).upper()
    options = expect(*http(base, "POST", "/api/appuser/loginAnonymous", {"handle": handle}, token), 200, "loginAnonymous")
    reg = registration(key, credential_id, options["challenge"], r)
    user = expect(*http(base, "POST", "/api/appuser/loginAnonymousComplete", {
        "handle": handle, "id": b64url(credential_id),
        "response": {"clientDataJSON": b64url(reg["clientDataJSON"]), "attestationObject": b64url(reg["attestationObject"])},
    }, token), 200, "loginAnonymousComplete")
    signups, logins = [], []
    for i in range(pool):
        h = f"fz{i}-{tag}@fuzz.test".lower()
        o = expect(*http(base, "POST", "/api/appuser/signup", {"handle": h, "displayName": "F"}, token), 200, "appkey signup")
        signups.append((h, o["challenge"], Key(r) if i < 8 else key, r.randbytes(20)))
    for i in range(50):  # a handle gets 60 challenges an hour
        o = expect(*http(base, "POST", "/api/appuser/login", {"handle": handle}, token), 200, "appkey login")
        logins.append(o["challenge"])
    # Real responses, made once (signing in pure Python is slow): the generator mutates copies.
    registrations = [(h, cid, registration(k, cid, ch, r)) for (h, ch, k, cid) in signups]
    assertions = [assertion(key, ch, 0, r) for ch in logins]
    return {"app": app, "handle": handle, "credential": b64url(credential_id), "access": user["access-token"],
            "registrations": registrations, "assertions": assertions}


# --- mutation ---------------------------------------------------------------------------------------
def mutate_cbor(r, data):
    data = bytearray(data)
    choice = r.randrange(14)
    if not data:
        return bytes(r.randbytes(r.randrange(1, 40)))
    if choice == 0:  # bit flips
        for _ in range(r.randrange(1, 8)):
            i = r.randrange(len(data))
            data[i] ^= 1 << r.randrange(8)
    elif choice == 1:  # truncation
        data = data[:r.randrange(len(data))]
    elif choice == 2:  # random insertion
        i = r.randrange(len(data) + 1)
        data[i:i] = r.randbytes(r.randrange(1, 30))
    elif choice == 3:  # a head claiming a huge length
        i = r.randrange(len(data))
        data[i:i + 1] = bytes([r.choice([0x5B, 0x7B, 0x9B, 0xBB])]) + b"\xff" * 8
    elif choice == 4:  # indefinite lengths, reserved AI, tags, floats, undefined
        i = r.randrange(len(data))
        data[i] = r.choice([0x5F, 0x7F, 0x9F, 0xBF, 0xFF, 0x1C, 0x1D, 0x1E, 0xC0, 0xD8, 0xF9, 0xFA, 0xFB, 0xF7, 0xF8])
    elif choice == 5:  # deep nesting
        depth = r.choice([9, 50, 500, 5000])
        return bytes([0x81] * depth) + b"\x00" if r.random() < 0.5 else bytes([0xA1, 0x01] * depth) + b"\x00"
    elif choice == 6:  # duplicate map keys
        return bytes([0xA3]) + cbor("fmt") + cbor("none") + cbor("fmt") + cbor("none") + cbor("attStmt") + b"\xa0"
    elif choice == 7:  # trailing garbage
        data += r.randbytes(r.randrange(1, 20))
    elif choice == 8:  # huge item counts
        return bytes([r.choice([0x9A, 0xBA])]) + b"\x7f\xff\xff\xff"
    elif choice == 9:  # oversized
        data += bytes(r.choice([20_000, 70_000]))
    elif choice == 10:  # byte swap
        i, j = r.randrange(len(data)), r.randrange(len(data))
        data[i], data[j] = data[j], data[i]
    elif choice == 11:  # empty / one byte
        return r.choice([b"", b"\xa0", b"\x00", b"\xf6", b"\x40"])
    elif choice == 12:  # change a type: bytes ↔ text
        i = r.randrange(len(data))
        data[i] = (data[i] & 0x1F) | r.choice([0x40, 0x60, 0x80, 0xA0])
    else:
        pass  # unchanged
    return bytes(data)


def mutate_client_data(r, data):
    choice = r.randrange(10)
    text = data.decode()
    if choice == 0:
        return mutate_cbor(r, data)
    if choice == 1:
        return text.replace(ORIGIN, r.choice(["https://evil.test", "android:apk-key-hash:x", "", ORIGIN + "/"])).encode()
    if choice == 2:
        return text.replace("webauthn.", r.choice(["webauthn.x", "", "WEBAUTHN."])).encode()
    if choice == 3:
        obj = json.loads(text)
        obj[r.choice(["crossOrigin", "topOrigin", "tokenBinding", "challenge", "type", "origin"])] = r.choice(
            [True, 1, None, [], {"a": "b"}, "x" * 5000, "\u0000"])
        return json.dumps(obj).encode()
    if choice == 4:
        return b"[" + data + b"]"
    if choice == 5:
        return data[: r.randrange(len(data))]
    if choice == 6:
        return data + b"," + data
    if choice == 7:
        return b'{"type":"webauthn.create","challenge":"' + b"A" * r.choice([0, 42, 43, 44, 5000]) + b'","origin":"x"}'
    return data


def encode(r, data):
    """base64url (as the clients send), sometimes standard base64 with padding, sometimes broken."""
    choice = r.randrange(12)
    if choice < 8:
        return b64url(data)
    if choice == 8:
        return base64.b64encode(data).decode()
    if choice == 9:
        return b64url(data) + r.choice(["=", "==", "===", "!", " ", "%"])
    if choice == 10:
        return b64url(data)[: max(0, len(b64url(data)) - r.randrange(1, 4))]
    return r.choice(["", "A", "AA", "====", "\u00e9", "null"])


def generate(r, st):
    """(path, headers, body bytes, json?) for one AppKey request."""
    ak = st["appkey"]
    token = ak["app"]["appToken"]
    kind = r.randrange(10)
    headers = [("app-token", token)]
    if kind < 4:  # registration
        handle, cid, reg = r.choice(ak["registrations"])
        cd = reg["clientDataJSON"]
        obj = reg["attestationObject"]
        part = r.randrange(4)
        if part == 0:
            cd = mutate_client_data(r, cd)
        elif part == 1:
            obj = mutate_cbor(r, obj)
        elif part == 2:  # mutate authData inside a well-formed object (its COSE key, flags, lengths)
            auth = mutate_cbor(r, reg["authData"])
            obj = cbor({"fmt": r.choice(["none", "packed", "apple", "tpm", "fido-u2f", ""]), "attStmt": {}, "authData": auth})
        name = r.choice(["signupConfirm", "signupConfirm", "loginAnonymousComplete", "addPasskeyComplete"])
        response = {"clientDataJSON": encode(r, cd), "attestationObject": encode(r, obj)}
        if name == "addPasskeyComplete":
            headers = [("access-token", ak["access"])]
        fields = {"handle": handle, "id": r.choice([b64url(cid), encode(r, mutate_cbor(r, cid)), ""]), "response": response}
    elif kind < 8:  # assertion
        a = r.choice(ak["assertions"])
        cd, auth, sig = a["clientDataJSON"], a["authenticatorData"], a["signature"]
        part = r.randrange(4)
        if part == 0:
            cd = mutate_client_data(r, cd)
        elif part == 1:
            auth = mutate_cbor(r, auth)
        elif part == 2:
            sig = mutate_cbor(r, sig)
        name = r.choice(["loginComplete", "verifyComplete"])
        response = {"clientDataJSON": encode(r, cd), "authenticatorData": encode(r, auth), "signature": encode(r, sig),
                    "userHandle": r.choice(["", encode(r, r.randbytes(r.choice([0, 16, 32, 100])))])}
        fields = {"handle": ak["handle"], "id": r.choice([ak["credential"], encode(r, r.randbytes(20))]), "response": response}
    else:  # any endpoint, plausible fields
        name = r.choice(APPKEY_ENDPOINTS)
        fields = {k: r.choice(["", "x", ak["handle"], "EN", "a@b.co", "apple", b64url(r.randbytes(20)), "1" * 6])
                  if r.random() < 0.9 else mark_bomb(r, k)
                  for k in r.sample(["handle", "displayName", "locale", "code", "userName", "keyId", "keyName", "token",
                                     "provider", "firstName", "lastName", "id"], r.randrange(0, 5))}
        if r.random() < 0.5:
            headers = [("access-token", ak["access"])]
        elif r.random() < 0.2:
            headers = [("signup-token", b64url(r.randbytes(32)))]
    if r.random() < 0.5:  # the AppKeySwift form: response as a hand-built JSON string, no escaping
        response = fields.get("response")
        pairs = []
        for k, v in fields.items():
            if k == "response":
                v = ", ".join(f'"{rk}": "{rv}"' for rk, rv in v.items())
                v = "{" + v + "}"
            pairs.append(f"{k}={v}")
        body = "&".join(pairs).encode("utf-8", "surrogatepass")
        content_type = None
    else:
        body = json.dumps(fields).encode()
        content_type = "application/json"
    path = "/api/appuser/" + name
    method = "GET" if name in ("app", "user", "userNameAvailable") else "POST"
    return method, path, headers, body, content_type
