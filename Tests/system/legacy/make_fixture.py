#!/usr/bin/env python3
"""Build a legacy CosyncJWT MongoDB dump for testing the legacy importer.

The output folder looks like what `mongoexport` leaves behind when it is run
once per collection of a legacy CosyncJWT database:

    OUT_DIR/apps.json  users.json  signups.json  invites.json
            resetpasswords.json  emailtemplates.json  applogs.json  versions.json
            manifest.json

Each collection file is MongoDB Extended JSON, one document per line (the
mongoexport default) or a single JSON array with --json-array (mongoexport's
--jsonArray).  manifest.json is NOT part of the dump: it holds the plaintext
facts a test needs to check an import (encryptKey, app credentials, the raw
public keys, user passwords, TOTP secrets, pending codes, duplicate rows).

Content follows the "minimal legacy fixture" of shared/spec/admin-and-legacy.md
section 9 (two apps, "Acme Notes" created after at-rest encryption existed and
"Beta Tracker" created before), plus edge cases: $2a$/$2b$ bcrypt hashes,
a raw-MD5 password, an uppercase handle, a case/whitespace duplicate pair and
a handle with a space where "+" was meant.

Bench mode (--apps N and/or --users M) adds N-2 generated apps and M generated
users, streamed straight to users.json.  Generated users reuse a small pool of
precomputed bcrypt hashes (--pool-size, default 50); the manifest says which
password each pool hash has and how a user index maps to its pool entry.

Determinism: with the same --seed (and --now) every byte is reproducible
except what is random by nature: bcrypt salts and the RSA key pairs (server and
per app).  Because the keys differ, app tokens and ciphertexts differ too.
AES IVs are drawn from the seeded generator (the legacy server used random IVs;
the scheme does not care).

Usage:
    make_fixture.py OUT_DIR --encrypt-key KEY [--json-array] [--seed N]
                    [--now 2024-06-01T12:00:00Z]
                    [--apps 100 --users 1000000 [--pool-size 50]]
"""

import argparse
import base64
import calendar
import hashlib
import hmac
import json
import os
import random
import struct
import sys
import time
import uuid

import bcrypt
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

# --------------------------------------------------------------------------
# Extended JSON
#
# Three dialects appear in real legacy dumps, depending on which mongoexport
# produced them:
#   CANONICAL - mongo-tools 100.x with --jsonFormat=canonical:
#               {"$date":{"$numberLong":"1705312800000"}}, {"$numberInt":"8"}
#   RELAXED   - mongo-tools 100.x default (--jsonFormat=relaxed):
#               {"$date":"2024-01-15T10:00:00Z"} (no millis when zero), 8
#   LEGACY    - mongoexport 3.x/4.0 ("strict mode" extended JSON v1):
#               {"$date":"2024-01-15T10:00:00.000Z"}, 8, {"$numberLong":"…"}
# Mongoose/js-bson store integral JS numbers that fit in 32 bits as int32, so
# int64 only shows up inside canonical dates; Long is kept for completeness.
# --------------------------------------------------------------------------

CANONICAL, RELAXED, LEGACY = "canonical", "relaxed", "legacy-v1"

# Which dialect each collection file is written in (a dump assembled over
# time from different mongoexport versions looks like this).
COLLECTION_FORMATS = {
    "apps": CANONICAL,         # mongo-tools 100.x --jsonFormat=canonical
    "users": RELAXED,          # mongo-tools 100.x default
    "signups": LEGACY,         # mongoexport 4.0
    "invites": CANONICAL,      # mongo-tools 100.x --jsonFormat=canonical
    "resetpasswords": LEGACY,  # mongoexport 4.0
    "emailtemplates": RELAXED, # mongo-tools 100.x default
    "applogs": RELAXED,        # mongo-tools 100.x default
    "versions": LEGACY,        # mongoexport 4.0
}


class OID(str):
    """24-hex ObjectId."""


class Date(int):
    """BSON datetime, whole seconds since the epoch (legacy stamps have no ms)."""


class Long(int):
    """BSON int64."""


def _iso(sec, millis):
    base = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec))
    return base + (".000Z" if millis else "Z")


def to_ext(v, fmt):
    t = type(v)
    if t is str or t is bool or v is None:
        return v
    if t is int:
        if not -2**31 <= v < 2**31:
            raise ValueError("int out of int32 range: %r" % v)
        return {"$numberInt": str(v)} if fmt == CANONICAL else v
    if t is dict:
        return {k: to_ext(x, fmt) for k, x in v.items()}
    if t is list:
        return [to_ext(x, fmt) for x in v]
    if t is OID:
        return {"$oid": str(v)}
    if t is Date:
        if fmt == CANONICAL:
            return {"$date": {"$numberLong": str(int(v) * 1000)}}
        return {"$date": _iso(int(v), fmt == LEGACY)}
    if t is Long:
        return int(v) if fmt == RELAXED else {"$numberLong": str(int(v))}
    if t is float:
        return {"$numberDouble": repr(v)} if fmt == CANONICAL else v
    raise TypeError("cannot encode %r" % (v,))


class CollectionWriter:
    """Streams documents of one collection to OUT_DIR/<name>.json."""

    def __init__(self, out_dir, name, json_array):
        self.name = name
        self.fmt = COLLECTION_FORMATS[name]
        self.path = os.path.join(out_dir, name + ".json")
        self.json_array = json_array
        self.count = 0
        self.f = open(self.path, "w", encoding="utf-8", buffering=1 << 20)
        if json_array:
            self.f.write("[")
        self._dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode

    def write(self, doc):
        s = self._dumps(to_ext(doc, self.fmt))
        if self.json_array:
            self.f.write(("\n" if self.count == 0 else ",\n") + s)
        else:
            self.f.write(s + "\n")
        self.count += 1

    def close(self):
        if self.json_array:
            self.f.write("\n]\n" if self.count else "]\n")
        self.f.close()


# --------------------------------------------------------------------------
# Legacy crypto and token formats
# --------------------------------------------------------------------------

def aes_encrypt(plaintext, encrypt_key, iv):
    """Legacy aesEncrypt: AES-256-CTR, key = SHA-256(encryptKey), value =
    base64(IV || ciphertext); empty plaintext -> null; no key -> identity."""
    if plaintext is None or plaintext == "":
        return None
    if not encrypt_key:
        return plaintext
    key = hashlib.sha256(encrypt_key.encode("utf-8")).digest()
    enc = Cipher(algorithms.AES(key), modes.CTR(iv)).encryptor()
    ct = enc.update(plaintext.encode("utf-8")) + enc.finalize()
    return base64.b64encode(iv + ct).decode("ascii")


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def sign_jwt(payload, private_key):
    """RS256 JWT as jsonwebtoken 8 writes it (compact JSON, iat last)."""
    header = b64url(b'{"alg":"RS256","typ":"JWT"}')
    body = b64url(json.dumps(payload, separators=(",", ":")).encode("utf-8"))
    signing_input = (header + "." + body).encode("ascii")
    sig = private_key.sign(signing_input, padding.PKCS1v15(), hashes.SHA256())
    return header + "." + body + "." + b64url(sig)


def new_rsa(bits):
    return rsa.generate_private_key(public_exponent=65537, key_size=bits)


def pem_private_pkcs1(key):
    return key.private_bytes(serialization.Encoding.PEM,
                             serialization.PrivateFormat.TraditionalOpenSSL,
                             serialization.NoEncryption()).decode("ascii").rstrip("\n")


def pem_public_spki(key):
    return key.public_key().public_bytes(
        serialization.Encoding.PEM,
        serialization.PublicFormat.SubjectPublicKeyInfo).decode("ascii").rstrip("\n")


def key64(pem):
    """node-rsa export, then base64 of the whole PEM text (no trailing newline)."""
    return base64.b64encode(pem.encode("ascii")).decode("ascii")


def md5hex(s):
    return hashlib.md5(s.encode("utf-8")).hexdigest()


def bcrypt_md5(password, prefix=b"2b"):
    return bcrypt.hashpw(md5hex(password).encode("ascii"),
                         bcrypt.gensalt(rounds=10, prefix=prefix)).decode("ascii")


def totp(base32_secret, t, step=30, digits=6):
    key = base64.b32decode(base32_secret.upper().replace(" ", ""))
    mac = hmac.new(key, struct.pack(">Q", int(t) // step), hashlib.sha1).digest()
    off = mac[-1] & 0x0F
    code = (struct.unpack(">I", mac[off:off + 4])[0] & 0x7FFFFFFF) % (10 ** digits)
    return str(code).zfill(digits)


def legacy_totp_secret(raw20):
    """20 bytes -> base32, lowercase, groups of 4 separated by spaces."""
    b32 = base64.b32encode(raw20).decode("ascii").rstrip("=").lower()
    return " ".join(b32[i:i + 4] for i in range(0, len(b32), 4))


def normalise_handle(handle):
    """What the new server should store: anonymous handles exactly as they
    are; everything else trimmed and lowercased, and in e-mail handles an
    interior space is the '+' an old client failed to escape."""
    if "ANON_" in handle:
        return handle
    h = handle.strip().lower()
    if "@" in h:
        h = "+".join(h.split())
    return h


def ts(s):
    """'2024-01-15T10:00:00Z' -> epoch seconds."""
    return calendar.timegm(time.strptime(s, "%Y-%m-%dT%H:%M:%SZ"))


def iso(sec):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(sec))


class Ids:
    """ObjectIds the way the Node driver makes them: 4-byte creation time,
    5 bytes fixed per process, 3-byte counter; the 5 bytes come from the seed."""

    def __init__(self, rng):
        self.process = rng.getrandbits(40)
        self.counter = rng.getrandbits(24)

    def new(self, sec):
        self.counter = (self.counter + 1) & 0xFFFFFF
        return OID("%08x%010x%06x" % (sec & 0xFFFFFFFF, self.process, self.counter))


# --------------------------------------------------------------------------
# Fixture content
# --------------------------------------------------------------------------

REF_TIME = ts("2024-01-15T10:00:00Z")   # iat 1705312800
TEMPLATE_NAMES = ["signUp", "signUpLink", "clickThrough", "resetPassword",
                  "invite", "qrCode", "sms", "signUpSuccess"]

DEFAULT_TEMPLATES = {
    "signUp": ("Please verify your e-mail for %APP_NAME%",
               "<p>Hi %HANDLE%,</p>\n<p>Here is your verification code: <b>%CODE%</b></p>\n"
               "<p>If you did not sign up, just ignore this message.</p>\n<p>- the %APP_NAME% team</p>"),
    "signUpLink": ("Verify your %APP_NAME% account",
                   "<p>Hi %HANDLE%,</p>\n<p>Follow this %LINK% to confirm your address.</p>\n"
                   "<p>- the %APP_NAME% team</p>"),
    "clickThrough": ("clickThrough",
                     "<html><body><h2>%APP_NAME%</h2>\n<p>Thanks %HANDLE%, your account is confirmed."
                     " Go back to the app and log in.</p></body></html>"),
    "resetPassword": ("Password reset for %APP_NAME%",
                      "<p>Hi %HANDLE%,</p>\n<p>Enter the code <b>%CODE%</b> in %APP_NAME% to choose a new password.</p>"),
    "invite": ("You are invited to %APP_NAME%",
               "<p>Hi %HANDLE%,</p>\n<p>Someone invited you to %APP_NAME%. Register with the code <b>%CODE%</b>.</p>"),
    "qrCode": ("Two-step verification for %APP_NAME%",
               "<p>Hi %HANDLE%,</p>\n<p>Scan the attached QR code with an authenticator app,"
               " or type in this key: <b>%CODE%</b></p>"),
    "sms": ("sms", "%CODE% is your %APP_NAME% code."),
    "signUpSuccess": ("Welcome to %APP_NAME%",
                      "<p>Hi %HANDLE%,</p>\n<p>Your %APP_NAME% account is ready to use.</p>"),
}

APP_A_META = [
    {"id": 1, "path": "user.firstName", "fieldName": "firstName", "required": True, "canEdit": True},
    {"id": 2, "path": "user.plan", "fieldName": "plan", "required": False, "canEdit": False},
]
APP_A_META_INVITE = [{"id": 1, "path": "invite.role", "fieldName": "role", "required": False}]

ALICE_TOTP = "jbsw y3dp ehpk 3pxp jbsw y3dp ehpk 3pxp"

# Secret fields of an app and the plaintext shape each decrypts to.
SECRET_FIELDS = ["appPrivateKey", "appPublicKey", "appSecret", "emailExtensionAPIKey",
                 "TWILIOAccountSid", "TWILIOToken", "TWILIOPhoneNumber"]


class Builder:
    def __init__(self, args):
        self.args = args
        self.rng = random.Random(args.seed)
        self.ids = Ids(self.rng)
        self.now = args.now_sec
        self.encrypt_key = args.encrypt_key
        t0 = time.time()
        self.server_key = new_rsa(3072)   # legacy README: 3072-bit server key
        self.keygen_seconds = time.time() - t0
        self.manifest = {
            "generator": "Tests/system/legacy/make_fixture.py",
            "seed": args.seed,
            "now": iso(self.now),
            "referenceTime": iso(REF_TIME),
            "encryptKey": self.encrypt_key,
            "randomParts": "bcrypt salts and RSA keys (hence app tokens and ciphertexts) differ between runs",
            "legacyServer": {
                "name": "Jojo-CosyncJWT-Server",
                "publicKeyPem": pem_public_spki(self.server_key),
                "serverSecret": sign_jwt({"name": "Jojo-CosyncJWT-Server", "scope": "server",
                                          "iat": REF_TIME}, self.server_key),
            },
            "collections": {},
            "apps": [], "users": [], "signups": [], "invites": [],
            "resetpasswords": [], "emailtemplates": {}, "duplicates": [],
        }

    def iv(self):
        return self.rng.getrandbits(128).to_bytes(16, "big")

    def enc(self, value, encrypted):
        return aes_encrypt(value, self.encrypt_key, self.iv()) if encrypted else value

    def app_id(self):
        return uuid.UUID(int=self.rng.getrandbits(128), version=4).hex

    # ---- apps ----------------------------------------------------------

    def make_app(self, spec, encrypted_keys, secrets, ref):
        """spec: ordered dict of the stored plaintext fields (without keys);
        encrypted_keys: whether appPrivateKey/PublicKey/Secret are ciphertext;
        secrets: plaintext Twilio/SendGrid values (always encrypted, they
        were added after encryption existed)."""
        key = new_rsa(2048)   # node-rsa default
        priv64 = key64(pem_private_pkcs1(key))
        pub64 = key64(pem_public_spki(key))
        app_id = spec["appId"]
        iat = spec.pop("_iat")
        app_token = sign_jwt({"appId": app_id, "scope": "app", "iat": iat}, self.server_key)
        app_secret = sign_jwt({"appId": app_id, "scope": "appSecret", "iat": iat}, self.server_key)
        doc = {}
        for k, v in spec.items():
            doc[k] = v
            if k == "status":   # keys and tokens sit next to the identity fields
                doc["appPrivateKey"] = self.enc(priv64, encrypted_keys)
                doc["appPublicKey"] = self.enc(pub64, encrypted_keys)
                doc["appToken"] = app_token
                doc["appSecret"] = self.enc(app_secret, encrypted_keys)
        stored_secret_fields = []
        for k, v in secrets.items():
            doc[k] = self.enc(v, True)
            stored_secret_fields.append(k)
        doc["createdAt"] = doc.pop("createdAt")
        doc["updatedAt"] = doc.pop("updatedAt")
        doc["__v"] = 0
        encrypted_fields = (["appPrivateKey", "appPublicKey", "appSecret"] if encrypted_keys else [])
        encrypted_fields += stored_secret_fields
        settings = {k: v for k, v in doc.items()
                    if k not in SECRET_FIELDS and k not in ("_id", "__v", "appToken")}
        entry = {
            "ref": ref,
            "_id": str(doc["_id"]),
            "appId": app_id,
            "name": doc["name"],
            "appToken": app_token,
            "rawPublicKey": pub64,
            "appPrivateKey": priv64,
            "appSecret": app_secret,
            "secrets": dict(secrets),
            "encryptedFields": encrypted_fields,
            "plaintextSecretFields": [f for f in ["appPrivateKey", "appPublicKey", "appSecret"]
                                      if not encrypted_keys],
            "settings": json_plain(settings),
        }
        return doc, entry

    def fixture_apps(self):
        a = {
            "_id": OID("65a4f0c2e4b0a1b2c3d4e501"), "_iat": REF_TIME,
            "appId": "3f1c9a7e5b2d4c8e9a0b1c2d3e4f5a6b", "name": "Acme Notes",
            "status": "active", "jwtEnabled": False, "anonymousLoginEnabled": False,
            "userNamesEnabled": False, "appleLoginEnabled": False, "googleLoginEnabled": False,
            "emailExtension": False, "type": "development", "handle": "email",
            "invitationEnabled": True, "signupEnabled": True, "signupFlow": "code",
            "twoFactorVerification": "google", "googleAppName": "Acme", "maxUsers": 0,
            "passwordFilter": True, "passwordMinLength": 8, "passwordMinUpper": 1,
            "passwordMinLower": 1, "passwordMinDigit": 1, "passwordMinSpecial": 1,
            "userJWTExpiration": 24, "realmAppId": "acme-notes-abcde",
            "appData": {"CosyncJWTVersion": "1.0.1", "CosyncEngineVersion": None},
            "metaData": APP_A_META, "metaDataInvite": APP_A_META_INVITE,
            "metaDataEmail": True, "locales": ["EN", "FR"],
            "createdAt": Date(REF_TIME), "updatedAt": Date(ts("2024-02-01T08:30:00Z")),
        }
        b = {
            "_id": OID("60f1a2b3c4d5e6f708192a02"), "_iat": 1626400000,
            "appId": "9b8a7c6d5e4f40312a1b0c9d8e7f6a5b", "name": "Beta Tracker",
            "status": "active", "jwtEnabled": False, "anonymousLoginEnabled": True,
            "userNamesEnabled": True, "appleLoginEnabled": False, "googleLoginEnabled": True,
            "googleClientId": "111-abc.apps.googleusercontent.com,222-def.apps.googleusercontent.com",
            "emailExtension": True, "emailExtensionSenderEmail": "noreply@beta.example",
            "type": "development", "handle": "email",
            "invitationEnabled": False, "signupEnabled": True, "signupFlow": "none",
            "twoFactorVerification": "phone", "maxUsers": 0, "maxLoginAttempts": "0",
            "passwordFilter": False, "passwordMinLength": 5, "passwordMinUpper": 0,
            "passwordMinLower": 0, "passwordMinDigit": 0, "passwordMinSpecial": 0,
            "userJWTExpiration": 2, "metaData": [], "metaDataInvite": [],
            "metaDataEmail": True, "locales": ["EN"],
            "createdAt": Date(1626400000), "updatedAt": Date(ts("2023-05-09T12:00:00Z")),
        }
        b_secrets = {"emailExtensionAPIKey": "SG.fixture.key",
                     "TWILIOAccountSid": "AC00000000000000000000000000000000",
                     "TWILIOToken": "0123456789abcdef0123456789abcdef",
                     "TWILIOPhoneNumber": "+15555550100"}
        da, ea = self.make_app(a, True, {}, "A")
        db, eb = self.make_app(b, False, b_secrets, "B")
        ea["note"] = "created after 2021-08-06: keys and appSecret AES-encrypted under encryptKey"
        eb["note"] = ("created 2021-07-16, before at-rest encryption: keys and appSecret are plaintext; "
                      "Twilio and SendGrid values were set later and are encrypted")
        return [(da, ea), (db, eb)]

    def bench_app(self, n):
        created = REF_TIME - self.rng.randrange(0, 2 * 365 * 86400)
        flow = self.rng.choice(["code", "code", "link", "none"])
        spec = {
            "_id": self.ids.new(created), "_iat": created,
            "appId": self.app_id(), "name": "Bench App %03d" % n,
            "status": "active", "jwtEnabled": False, "anonymousLoginEnabled": n % 3 == 0,
            "userNamesEnabled": n % 4 == 0, "appleLoginEnabled": False, "googleLoginEnabled": False,
            "emailExtension": False, "type": "development", "handle": "email",
            "invitationEnabled": True, "signupEnabled": True, "signupFlow": flow,
            "twoFactorVerification": self.rng.choice(["none", "none", "google"]), "maxUsers": 0,
            "passwordFilter": False, "passwordMinLength": 5, "passwordMinUpper": 0,
            "passwordMinLower": 0, "passwordMinDigit": 0, "passwordMinSpecial": 0,
            "userJWTExpiration": 24, "realmAppId": "bench-%03d-app" % n,
            "metaData": APP_A_META[:1], "metaDataInvite": [],
            "metaDataEmail": True, "locales": ["EN"],
            "createdAt": Date(created), "updatedAt": Date(created + 3600),
        }
        return self.make_app(spec, True, {}, "bench%03d" % n)

    # ---- templates -----------------------------------------------------

    def templates(self, app_id, locales, created, overrides=None):
        overrides = overrides or {}
        rows = []
        for loc in locales:
            for name in TEMPLATE_NAMES:
                subject, html = DEFAULT_TEMPLATES[name]
                row = {"_id": self.ids.new(created), "appId": app_id, "templateName": name,
                       "subject": subject, "replyTo": "", "htmlTemplate": html, "locale": loc}
                if name == "signUpLink":
                    row["localeLinkText"] = "LINK"
                row.update(overrides.get((loc, name), {}))
                row["createdAt"] = Date(created)
                row["updatedAt"] = Date(created)
                row["__v"] = 0
                rows.append(row)
        return rows

    # ---- the hand-written fixture rows --------------------------------

    def fixture_rows(self, A, B):
        """Returns dict collection -> list of docs, and fills the manifest."""
        m = self.manifest
        users, signups, invites, resets = [], [], [], []

        def user(ref, app, handle, password, fmt, created, fields, note=""):
            if fmt == "spec":
                pw = fields.pop("password")
            elif fmt == "bcrypt-2b":
                pw = bcrypt_md5(password, b"2b")
            elif fmt == "bcrypt-2a":
                pw = bcrypt_md5(password, b"2a")
            elif fmt == "md5-raw":
                pw = md5hex(password)
            else:
                pw = None
            doc = {"_id": self.ids.new(created), "handle": handle}
            if pw is not None:
                doc["password"] = pw
            doc["appId"] = app["appId"]
            doc["status"] = fields.pop("status", "active")
            doc.update(fields)
            doc["createdAt"] = Date(created)
            doc["updatedAt"] = Date(fields.pop("_updated", created))
            doc.pop("_updated", None)
            doc["__v"] = 0
            users.append(doc)
            secret = doc.get("googleSecretKey")
            m["users"].append({
                "ref": ref, "_id": str(doc["_id"]), "app": app["ref"], "appId": app["appId"],
                "handle": handle, "expectedHandle": normalise_handle(handle),
                "password": password, "passwordMd5": md5hex(password) if password else None,
                "passwordFormat": ("bcrypt-" + pw[1:3]) if pw and pw.startswith("$2") else
                                  ("md5-raw" if pw else None),
                "status": doc["status"], "userName": doc.get("userName"),
                "loginProvider": doc.get("loginProvider", ""),
                "socialUserId": doc.get("socialUserId"),
                "phone": doc.get("phone"), "phoneVerified": doc.get("phoneVerified"),
                "totp": None if not secret else {
                    "legacy": secret,
                    "base32": secret.replace(" ", "").upper(),
                    "codeAtReferenceTime": totp(secret, REF_TIME),
                },
                "note": note,
            })
            return doc

        def signup(ref, app, handle, status, code, password_hash, created, fields=None,
                   updated=None, note=""):
            doc = {"_id": self.ids.new(created), "appId": app["appId"], "handle": handle}
            if password_hash is not None:
                doc["password"] = password_hash
            doc["code"] = code
            doc.update(fields or {})
            doc["status"] = status
            doc["createdAt"] = Date(created)
            doc["updatedAt"] = Date(updated or created)
            doc["__v"] = 0
            signups.append(doc)
            m["signups"].append({"ref": ref, "_id": str(doc["_id"]), "app": app["ref"],
                                 "handle": handle, "expectedHandle": normalise_handle(handle),
                                 "status": status, "code": code, "updatedAt": iso(updated or created),
                                 "note": note})
            return doc

        t = ts
        # U1: TOTP user (spec hash verbatim)
        u1 = user("U1", A, "alice@example.com", "Password1!", "spec", t("2024-01-15T10:05:00Z"), {
            "password": "$2b$10$lmJDx9lfQL5cH/0CxGeCD.cBpHHxCvY0tW/eHVRzlSchzGB7Vch9y",
            "locale": "EN", "loginProvider": "",
            "metaData": {"user": {"firstName": "Alice", "plan": "pro"}},
            "twoFactorGoogleVerification": True, "googleSecretKey": ALICE_TOTP,
            "lastLogin": Date(t("2024-02-01T08:30:00Z")), "_updated": t("2024-02-01T08:30:00Z")},
            note="Google-authenticator 2FA; TOTP SHA-1/6 digits/30 s")
        # U2: suspended, came through an invite
        user("U2", A, "bob@example.com", "hunter22", "spec", t("2024-01-16T09:00:00Z"), {
            "password": "$2b$10$ZhOV.Pl.8zM/0laVRymqLeOq5zJztWWSnhJfmHgQQmgrjKt9ssU2S",
            "status": "suspend", "locale": "FR", "loginProvider": "",
            "metaData": {"user": {"firstName": "Bob"}, "invite": {"role": "editor"}},
            "_updated": t("2024-01-20T11:00:00Z")}, note="suspended; registered via invite")
        # U3: phone-verified user with a user name
        u3 = user("U3", B, "carol@example.com", "Password1!", "bcrypt-2b", t("2022-03-01T12:00:00Z"), {
            "userName": "carol", "locale": "EN", "loginProvider": "",
            "phone": "+15555550123", "phoneVerified": True, "phoneCode": 0,
            "twoFactorPhoneVerification": True, "twoFactorCode": "",
            "_updated": t("2023-04-02T07:15:00Z")}, note="log in by user name 'carol'; SMS 2FA")
        # U4: anonymous
        user("U4", B, "ANON_6f1d2c3b-0a9e-4f8d-b7c6-5a4b3c2d1e0f", None, None,
             t("2022-06-10T18:20:00Z"), {"loginProvider": ""},
             note="anonymous: no password, no locale, no metaData; handle must stay exact")
        # U5: Google social user
        user("U5", B, "dave@gmail.com", None, None, t("2022-09-05T14:00:00Z"), {
            "locale": "EN", "loginProvider": "google", "socialUserId": "109876543210987654321"},
            note="social (google) only, no password")
        # U6: pre-2021-07-19 raw MD5 password (App B existed then)
        u6 = user("U6", B, "grace@example.com", "OldTimer7", "md5-raw", t("2021-07-17T09:30:00Z"), {
            "locale": "EN", "loginProvider": ""},
            note="legacy raw MD5 hex password, compare by equality then upgrade")
        # U7: uppercase handle, admin addUser (no locale, no metaData)
        u7 = user("U7", B, "Eve@Example.com", "Admin#Made9", "bcrypt-2a", t("2023-02-14T16:00:00Z"), {},
                  note="admin-added with uppercase letters; only user with this handle in its app")
        # U8 + U9: duplicate pair differing only in case/whitespace
        u8 = user("U8", A, "henry@example.com", "HenryOne#1", "bcrypt-2b", t("2024-01-20T10:00:00Z"), {
            "locale": "EN", "loginProvider": "", "metaData": {"user": {"firstName": "Henry"}}},
            note="duplicate (older)")
        u9 = user("U9", A, " Henry@Example.COM", "HenryTwo#2", "bcrypt-2a", t("2024-01-25T10:00:00Z"), {
            "locale": "EN", "loginProvider": "",
            "metaData": {"user": {"firstName": "Henry"}, "invite": {"role": "viewer"}},
            "_updated": t("2024-01-26T10:00:00Z")},
            note="duplicate (newer): invite register stored the handle as typed")
        # U10: space where '+' was meant (CJS <= 1.1.5)
        u10 = user("U10", A, "ivy test@example.com", "Ivy+Pass1", "bcrypt-2b", t("2024-01-18T13:00:00Z"), {
            "locale": "EN", "loginProvider": "", "metaData": {"user": {"firstName": "Ivy"}}},
            note="old client sent '+' unescaped; normalises to ivy+test@example.com")

        m["duplicates"].append({
            "collection": "users", "appId": A["appId"], "normalisedHandle": "henry@example.com",
            "rows": [{"_id": str(u8["_id"]), "handle": u8["handle"], "updatedAt": iso(int(u8["updatedAt"]))},
                     {"_id": str(u9["_id"]), "handle": u9["handle"], "updatedAt": iso(int(u9["updatedAt"]))}],
            "keep": str(u9["_id"]),
            "rule": "same (appId, normalised handle); keep newest updatedAt, report the rest",
        })

        # signups
        signup("S1", A, "alice@example.com", "verified", 318406, u1["password"],
               t("2024-01-15T10:03:00Z"), {"locale": "EN", "metaData": {"user": {"firstName": "Alice"}}},
               updated=t("2024-01-15T10:05:00Z"))
        erin_t = self.now - 2 * 3600
        signup("S2", A, "erin@example.com", "pending", 482913,
               "$2b$10$LXirV86Ak9mIRJ291zMFX.EZxMX2NKf6dGSxUR4Qlp60/ndhGjDhC", erin_t,
               {"locale": "FR", "metaData": {"user": {"firstName": "Erin"}}},
               note="pending, code valid for 48 h after updatedAt (= --now - 2 h); password 'Secret#2024'")
        m["signups"][-1]["password"] = "Secret#2024"
        signup("S3", B, "carol@example.com", "active", 705112, u3["password"], t("2022-03-01T12:00:00Z"),
               {"locale": "EN"})
        signup("S4", B, "dave@gmail.com", "active", None, "", t("2022-09-05T14:00:00Z"),
               {"signupProvider": "google", "locale": "EN"})
        signup("S5", B, "grace@example.com", "verified", 224466, u6["password"], t("2021-07-17T09:25:00Z"),
               {"locale": "EN"}, updated=t("2021-07-17T09:30:00Z"))
        signup("S6", B, "Eve@Example.com", "active", 0, u7["password"], t("2023-02-14T16:00:00Z"),
               note="admin addUser companion row (handle as given, code 0, empty metaData dropped)")
        signup("S7", A, "henry@example.com", "verified", 640375, u8["password"], t("2024-01-20T09:58:00Z"),
               {"locale": "EN", "metaData": {"user": {"firstName": "Henry"}}}, updated=t("2024-01-20T10:00:00Z"))
        signup("S8", A, "ivy test@example.com", "verified", 913204, u10["password"], t("2024-01-18T12:55:00Z"),
               {"locale": "EN", "metaData": {"user": {"firstName": "Ivy"}}}, updated=t("2024-01-18T13:00:00Z"))

        # invites
        def invite(ref, app, handle, sender, sender_id, code, status, created, meta=None, updated=None, note=""):
            doc = {"_id": self.ids.new(created), "handle": handle, "appId": app["appId"],
                   "senderHandle": sender, "senderUserId": sender_id}
            if meta:
                doc["metaData"] = meta
            doc["code"] = code
            doc["status"] = status
            doc["createdAt"] = Date(created)
            doc["updatedAt"] = Date(updated or created)
            doc["__v"] = 0
            invites.append(doc)
            m["invites"].append({"ref": ref, "_id": str(doc["_id"]), "app": app["ref"], "handle": handle,
                                 "code": code, "status": status, "senderHandle": sender,
                                 "metaData": meta, "note": note})

        invite("I1", A, "frank@example.com", "alice@example.com", "65a4f0c2e4b0a1b2c3d4e5f6", 731046,
               "pending", t("2024-01-28T15:00:00Z"), {"invite": {"role": "viewer"}},
               note="redeemable with the code")
        invite("I2", A, "bob@example.com", "alice@example.com", "65a4f0c2e4b0a1b2c3d4e5f6", 287731,
               "verified", t("2024-01-16T08:30:00Z"), {"invite": {"role": "editor"}},
               updated=t("2024-01-16T09:00:00Z"))
        invite("I3", A, "henry@example.com", "superuser", "superuser", 519862, "verified",
               t("2024-01-24T17:00:00Z"), updated=t("2024-01-25T10:00:00Z"),
               note="portal invite; its register created the mixed-case duplicate U9")
        invite("I4", A, "gina@example.com", "superuser", "superuser", 408815, "pending",
               t("2024-02-01T08:00:00Z"), note="portal invite, no metaData")

        # reset-password codes (never expire in legacy)
        def reset(ref, app, handle, code, created, note=""):
            doc = {"_id": self.ids.new(created), "handle": handle, "code": code, "appId": app["appId"],
                   "status": "pending", "createdAt": Date(created), "updatedAt": Date(created), "__v": 0}
            resets.append(doc)
            m["resetpasswords"].append({"ref": ref, "_id": str(doc["_id"]), "app": app["ref"],
                                        "handle": handle, "code": code, "note": note})

        reset("R1", A, "alice@example.com", 555123, t("2024-02-02T07:00:00Z"))
        reset("R2", B, "carol", 601932, t("2023-06-01T10:00:00Z"), note="typed a user name, not an e-mail")

        return {"users": users, "signups": signups, "invites": invites, "resetpasswords": resets}


def json_plain(v):
    """Manifest view of a document value: dates as ISO strings, ids as hex."""
    if isinstance(v, dict):
        return {k: json_plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [json_plain(x) for x in v]
    if type(v) is Date:
        return iso(int(v))
    if type(v) in (OID, Long):
        return str(v) if type(v) is OID else int(v)
    return v


# --------------------------------------------------------------------------
# Bench users
# --------------------------------------------------------------------------

BENCH_TOTP = "gezd gnbv gy3t qojq gezd gnbv gy3t qojq"   # base32 of "12345678901234567890"


def make_pool(rng, size):
    pool = []
    for k in range(size):
        pw = "Bench-%02d-%06d!" % (k, rng.randrange(10 ** 6))
        prefix = b"2a" if k % 5 == 4 else b"2b"
        pool.append({"index": k, "password": pw, "md5": md5hex(pw), "hash": bcrypt_md5(pw, prefix)})
    return pool


def bench_user_rule():
    return {
        "count": None,
        "index": "i = 0 .. count-1, written after the hand-made users",
        "app": "apps[i % len(apps)] (apps in apps.json order, i.e. manifest.apps order)",
        "handle": "'user%07d@bench.example' % i (already normalised)",
        "kinds (first match)": [
            "i % 1000 == 999: google social user, no password, socialUserId = str(10**20 + i)",
            "i % 1000 == 998: anonymous user, handle 'ANON_<uuid>' (random from the seed), no password",
            "i % 500 == 1: raw MD5 password = pool[i % poolSize].md5",
            "otherwise: password = pool[i % poolSize].hash (bcrypt of md5)",
        ],
        "status": "'suspend' if i % 97 == 0 else 'active'",
        "totp": "i % 100 == 7 (and a password user): twoFactorGoogleVerification true, googleSecretKey = bench.totpSecret",
        "metaData": "{'user': {'firstName': 'User<i>'}} on apps whose metaData schema is non-empty",
    }


def stream_bench_users(w, apps, count, pool, rng, ids):
    napps = len(apps)
    psize = len(pool)
    hashes = [p["hash"] for p in pool]
    md5s = [p["md5"] for p in pool]
    app_ids = [a["appId"] for a in apps]
    has_meta = [bool(a["metaData"]) for a in apps]
    base = REF_TIME - 3 * 365 * 86400
    for i in range(count):
        ai = i % napps
        created = base + i * 60 + rng.randrange(60)
        r = i % 1000
        doc = {"_id": ids.new(created)}
        if r == 999:
            doc["handle"] = "user%07d@bench.example" % i
            doc["appId"] = app_ids[ai]
            doc["status"] = "suspend" if i % 97 == 0 else "active"
            doc["locale"] = "EN"
            doc["loginProvider"] = "google"
            doc["socialUserId"] = str(10 ** 20 + i)
        elif r == 998:
            doc["handle"] = "ANON_" + str(uuid.UUID(int=rng.getrandbits(128), version=4))
            doc["appId"] = app_ids[ai]
            doc["status"] = "suspend" if i % 97 == 0 else "active"
            doc["loginProvider"] = ""
        else:
            doc["handle"] = "user%07d@bench.example" % i
            doc["password"] = md5s[i % psize] if i % 500 == 1 else hashes[i % psize]
            doc["appId"] = app_ids[ai]
            doc["status"] = "suspend" if i % 97 == 0 else "active"
            doc["locale"] = "EN"
            doc["loginProvider"] = ""
            if has_meta[ai]:
                doc["metaData"] = {"user": {"firstName": "User%d" % i}}
            if i % 100 == 7:
                doc["twoFactorGoogleVerification"] = True
                doc["googleSecretKey"] = BENCH_TOTP
            doc["lastLogin"] = Date(created + 86400)
        doc["createdAt"] = Date(created)
        doc["updatedAt"] = Date(created)
        doc["__v"] = 0
        w.write(doc)


# --------------------------------------------------------------------------

def main(argv=None):
    p = argparse.ArgumentParser(description="Write a legacy CosyncJWT mongoexport-style fixture.")
    p.add_argument("out_dir")
    p.add_argument("--encrypt-key", required=True, help="legacy encryptKey passphrase ('' = no encryption)")
    p.add_argument("--json-array", action="store_true", help="one JSON array per file instead of JSON lines")
    p.add_argument("--seed", type=int, default=None, help="random seed (default: random, recorded in the manifest)")
    p.add_argument("--now", default=None,
                   help="reference 'test run' time, e.g. 2024-06-01T12:00:00Z (default: current time); "
                        "the pending signup's updatedAt is now - 2 h")
    p.add_argument("--apps", type=int, default=2, help="total apps (>= 2); apps beyond the two fixture apps are generated")
    p.add_argument("--users", type=int, default=0, help="generated bench users on top of the fixture users")
    p.add_argument("--pool-size", type=int, default=50, help="precomputed bcrypt hashes reused by bench users")
    args = p.parse_args(argv)
    if args.apps < 2:
        p.error("--apps must be at least 2")
    if args.seed is None:
        args.seed = int.from_bytes(os.urandom(4), "big")
    args.now_sec = ts(args.now) if args.now else int(time.time())

    started = time.time()
    os.makedirs(args.out_dir, exist_ok=True)
    b = Builder(args)
    m = b.manifest
    writers = {name: CollectionWriter(args.out_dir, name, args.json_array) for name in COLLECTION_FORMATS}

    # apps
    apps = b.fixture_apps()
    for n in range(args.apps - 2):
        apps.append(b.bench_app(n + 1))
    for doc, entry in apps:
        writers["apps"].write(doc)
        m["apps"].append(entry)
    A, B = m["apps"][0], m["apps"][1]
    A["ref"], B["ref"] = "A", "B"

    # hand-made rows
    rows = b.fixture_rows(A, B)
    for name in ("users", "signups", "invites", "resetpasswords"):
        for doc in rows[name]:
            writers[name].write(doc)

    # bench apps get one pending signup, invite and reset each
    for doc, entry in apps[2:]:
        app = {"appId": entry["appId"], "ref": entry["ref"]}
        code = 100000 + b.rng.randrange(899999)
        h = "pending-%s@bench.example" % entry["ref"]
        t = b.now - 3600
        writers["signups"].write({"_id": b.ids.new(t), "appId": app["appId"], "handle": h,
                                  "password": "$2b$10$LXirV86Ak9mIRJ291zMFX.EZxMX2NKf6dGSxUR4Qlp60/ndhGjDhC",
                                  "code": code, "locale": "EN", "status": "pending",
                                  "createdAt": Date(t), "updatedAt": Date(t), "__v": 0})
        m["signups"].append({"ref": "S-" + entry["ref"], "app": entry["ref"], "handle": h,
                             "expectedHandle": h, "status": "pending", "code": code,
                             "password": "Secret#2024", "updatedAt": iso(t)})
        code = 100000 + b.rng.randrange(899999)
        h = "invitee-%s@bench.example" % entry["ref"]
        writers["invites"].write({"_id": b.ids.new(t), "handle": h, "appId": app["appId"],
                                  "senderHandle": "superuser", "senderUserId": "superuser",
                                  "code": code, "status": "pending",
                                  "createdAt": Date(t), "updatedAt": Date(t), "__v": 0})
        m["invites"].append({"ref": "I-" + entry["ref"], "app": entry["ref"], "handle": h,
                             "code": code, "status": "pending", "senderHandle": "superuser"})

    # e-mail templates
    tmpl_count = {}
    overrides_a = {
        ("FR", "signUpLink"): {"localeLinkText": "LIEN"},
        ("FR", "signUp"): {"subject": "Vérifiez votre adresse e-mail pour %APP_NAME%",
                           "htmlTemplate": "<p>Bonjour %HANDLE%,</p>\n<p>Votre code de vérification : "
                                           "<b>%CODE%</b></p>\n<p>— l’équipe %APP_NAME%</p>"},
    }
    overrides_b = {("EN", "resetPassword"): {"replyTo": "support@beta.example"}}
    for (doc, entry) in apps:
        ov = overrides_a if entry["ref"] == "A" else overrides_b if entry["ref"] == "B" else {}
        trows = b.templates(entry["appId"], doc["locales"], int(doc["createdAt"]), ov)
        for r in trows:
            writers["emailtemplates"].write(r)
        tmpl_count[entry["appId"]] = len(trows)
    m["emailtemplates"] = {
        "perApp": tmpl_count,
        "customised": [
            {"app": "A", "locale": "FR", "templateName": "signUpLink", "localeLinkText": "LIEN"},
            {"app": "A", "locale": "FR", "templateName": "signUp", "note": "French subject and body (UTF-8)"},
            {"app": "B", "locale": "EN", "templateName": "resetPassword", "replyTo": "support@beta.example"},
        ],
    }

    # applogs and versions (an importer may ignore them)
    for app, action, value, ltype, status, when in [
        (A, "create", "true", "app", "success", REF_TIME),
        (A, "login", json.dumps({"handle": "alice@example.com", "status": True}, separators=(",", ":")),
         "user", "success", ts("2024-02-01T08:30:00Z")),
        (A, "login", json.dumps({"code": 600, "message": "invalid login credentials",
                                 "handle": "bob@example.com"}, separators=(",", ":")),
         "user", "error", ts("2024-01-21T09:00:00Z")),
        (B, "updateAppSetting", "signupFlow", "app", "success", ts("2023-05-09T12:00:00Z")),
    ]:
        writers["applogs"].write({"_id": b.ids.new(when), "appId": app["appId"], "action": action,
                                  "value": value, "logType": ltype, "status": status,
                                  "createdAt": Date(when), "__v": 0})
    for name in ("CosyncJWT", "CosyncEngine"):
        when = ts("2021-06-01T00:00:00Z")
        writers["versions"].write({"_id": b.ids.new(when), "name": name, "service": name,
                                   "desc": "%s service version" % name, "versionNumber": "1.0.1",
                                   "status": "active", "createdAt": Date(when),
                                   "updatedAt": Date(when), "__v": 0})

    # bench users, streamed
    bench_seconds = 0.0
    if args.users > 0:
        pool_t0 = time.time()
        pool = make_pool(b.rng, args.pool_size)
        pool_seconds = time.time() - pool_t0
        app_docs = [doc for doc, _ in apps]
        t0 = time.time()
        stream_bench_users(writers["users"], app_docs, args.users, pool, b.rng, b.ids)
        bench_seconds = time.time() - t0
        rule = bench_user_rule()
        rule["count"] = args.users
        m["bench"] = {
            "users": rule,
            "poolSize": len(pool),
            "pool": pool,
            "totpSecret": BENCH_TOTP,
            "poolSeconds": round(pool_seconds, 2),
        }

    for w in writers.values():
        w.close()
        m["collections"][w.name] = {"file": os.path.basename(w.path), "format": w.fmt,
                                    "jsonArray": args.json_array, "count": w.count}
    m["userCount"] = writers["users"].count
    with open(os.path.join(args.out_dir, "manifest.json"), "w", encoding="utf-8") as f:
        json.dump(m, f, indent=2, ensure_ascii=False)
        f.write("\n")

    total = time.time() - started
    rows = sum(w.count for w in writers.values())
    print("wrote %d rows (%d users) to %s in %.1f s: %.0f rows/s overall"
          % (rows, writers["users"].count, args.out_dir, total, rows / total if total else 0))
    if args.users > 0:
        print("bench users: %d in %.1f s = %.0f rows/s (bcrypt pool of %d: %.1f s)"
              % (args.users, bench_seconds, args.users / bench_seconds if bench_seconds else 0,
                 m["bench"]["poolSize"], m["bench"]["poolSeconds"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
