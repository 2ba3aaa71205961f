#!/usr/bin/env python3
"""Build the legacy CosyncJWT per-app export ZIP from a legacy fixture dump.

Input is a folder written by make_fixture.py (mongoexport-style Extended JSON,
one document per line or one JSON array per file, plus manifest.json).  The
output is what the legacy server's `GET /api/app/export?appId=...` returned
for that app (shared/spec/admin-and-legacy.md sections 5.1 and 9.8):

    app-collection.csv  user-collection.csv  signup-collection.csv
    invite-collection.csv  email-template-collection.csv

at the archive root, DEFLATE-compressed.  CSV dialect is csv-writer's default
(UTF-8 without BOM, header line always, ',' separator, '\\n' after every record,
a field is quoted only when it contains ',', '"', CR or LF, inner quotes
doubled, undefined/null/'' -> empty field).  Values are rendered like
JavaScript String(value): true/false, JS number formatting, Date.toString() in
UTC ("Mon Jan 15 2024 10:00:00 GMT+0000 (Coordinated Universal Time)"),
arrays comma-joined, objects "[object Object]".

The app row's at-rest encrypted fields (appPrivateKey, appPublicKey,
appSecret, emailExtensionAPIKey, TWILIOAccountSid, TWILIOToken,
TWILIOPhoneNumber) are written decrypted.  The key is manifest.json's
encryptKey (AES-256-CTR, key = SHA-256(encryptKey), stored value =
base64(IV || ciphertext)); values that already look like plaintext (section 3.9
detection table) are kept as they are.  AES uses the `cryptography` package
when it is importable and a small pure-Python AES otherwise, so the script
runs with the plain system python3.

Rows appear in collection-file order (MongoDB natural order); fields absent
from a document give empty cells (no schema defaults are filled in).

Usage:
    make_export_zip.py FIXTURE_DIR APP_ID OUT.zip
"""

import base64
import datetime
import hashlib
import json
import math
import os
import re
import sys
import time
import zipfile

# --------------------------------------------------------------------------
# Export layout (section 5.1)
# --------------------------------------------------------------------------

APP_COLUMNS = [
    "name", "status", "jwtEnabled", "appPrivateKey", "appPublicKey", "appToken",
    "appSecret", "handle", "invitationEnabled", "signupEnabled", "signupFlow",
    "twoFactorVerification", "emailExtension", "emailExtensionAPIKey",
    "emailExtensionSenderEmail", "TWILIOAccountSid", "TWILIOToken",
    "TWILIOPhoneNumber", "googleAppName", "maxLoginAttempts", "passwordFilter",
    "passwordMinLength", "passwordMinUpper", "passwordMinLower", "passwordMinDigit",
    "passwordMinSpecial", "userJWTExpiration", "realmAppId", "appData",
    "metaDataInvite", "metaData", "metaDataEmail", "locales", "createdAt", "updatedAt",
]
USER_COLUMNS = [
    "handle", "password", "status", "appId", "twoFactorPhoneVerification",
    "twoFactorGoogleVerification", "googleSecretKey", "twoFactorCode", "phone",
    "phoneVerified", "phoneCode", "metaData", "lastLogin", "locale", "createdAt",
    "updatedAt",
]
SIGNUP_COLUMNS = [
    "handle", "password", "status", "appId", "code", "locale", "metaData",
    "createdAt", "updatedAt",
]
INVITE_COLUMNS = [
    "handle", "senderHandle", "senderUserId", "code", "status", "appId", "metaData",
    "createdAt", "updatedAt",
]
TEMPLATE_COLUMNS = [
    "appId", "subject", "replyTo", "templateName", "htmlTemplate", "locale",
    "htmlTemplate", "createdAt", "updatedAt",
]

# (zip entry, collection file, columns), in archive order
CHILD_FILES = [
    ("user-collection.csv", "users", USER_COLUMNS),
    ("signup-collection.csv", "signups", SIGNUP_COLUMNS),
    ("invite-collection.csv", "invites", INVITE_COLUMNS),
    ("email-template-collection.csv", "emailtemplates", TEMPLATE_COLUMNS),
]

SECRET_FIELDS = ["appPrivateKey", "appPublicKey", "appSecret", "emailExtensionAPIKey",
                 "TWILIOAccountSid", "TWILIOToken", "TWILIOPhoneNumber"]


class ExportError(Exception):
    pass


# --------------------------------------------------------------------------
# Extended JSON -> Python values
# --------------------------------------------------------------------------

class JSDate:
    """A BSON datetime as milliseconds since the epoch (UTC)."""
    __slots__ = ("ms",)

    def __init__(self, ms):
        self.ms = int(ms)


class JSDouble(float):
    """A BSON double (kept apart from int so 5.0 still prints as 5, like JS)."""


_ISO_RE = re.compile(
    r"^(-?\d{4,6})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d+))?)?)?"
    r"\s*(Z|[+-]\d{2}:?\d{2})?$")


def iso_to_ms(s):
    m = _ISO_RE.match(s.strip())
    if not m:
        raise ExportError("unparsable $date string: %r" % s)
    y, mo, d, hh, mi, ss, frac, tz = m.groups()
    days = (datetime.date(int(y), int(mo), int(d)) - datetime.date(1970, 1, 1)).days
    secs = days * 86400 + int(hh or 0) * 3600 + int(mi or 0) * 60 + int(ss or 0)
    ms = secs * 1000 + (int((frac + "000")[:3]) if frac else 0)
    if tz and tz != "Z":
        sign = -1 if tz[0] == "-" else 1
        t = tz[1:].replace(":", "")
        ms -= sign * (int(t[:2]) * 60 + int(t[2:])) * 60000
    return ms


def unwrap(v):
    """Extended JSON (canonical, relaxed or legacy v1) -> plain Python values."""
    if isinstance(v, dict):
        if len(v) == 1:
            (k, x), = v.items()
            if k == "$oid":
                return str(x)
            if k == "$date":
                if isinstance(x, dict):
                    x = unwrap(x)
                if isinstance(x, str):
                    return JSDate(iso_to_ms(x))
                return JSDate(x)
            if k in ("$numberInt", "$numberLong"):
                return int(x)
            if k == "$numberDouble":
                return JSDouble(float(x))   # accepts "Infinity", "-Infinity", "NaN"
            if k == "$numberDecimal":
                return str(x)
            if k == "$undefined":
                return None
        return {k: unwrap(x) for k, x in v.items()}
    if isinstance(v, list):
        return [unwrap(x) for x in v]
    if type(v) is float:
        return JSDouble(v)
    return v


def iter_docs(path, must_contain=None):
    """Documents of a mongoexport file: JSON lines or one JSON array.
    must_contain: cheap pre-filter on the raw line text (only in line mode)."""
    with open(path, "r", encoding="utf-8") as f:
        head = f.read(4096)
        f.seek(0)
        first = head.lstrip()[:1]
        if first != "[":
            for n, line in enumerate(f, 1):
                line = line.strip()
                if not line:
                    continue
                if must_contain is not None and must_contain not in line:
                    continue
                try:
                    yield json.loads(line)
                except ValueError as e:
                    raise ExportError("%s line %d: %s" % (path, n, e))
            return
    # JSON array: try one document per line (what mongoexport --jsonArray and
    # make_fixture.py write); fall back to parsing the whole file.
    docs = []
    with open(path, "r", encoding="utf-8") as f:
        ok = True
        for line in f:
            s = line.strip()
            if s in ("", "[", "]", "[]"):
                continue
            if s.startswith("["):
                s = s[1:].lstrip()
            if s.endswith("]") and s[:-1].rstrip().endswith("}"):
                s = s[:-1].rstrip()
            if s.endswith(","):
                s = s[:-1].rstrip()
            if must_contain is not None and must_contain not in s:
                continue
            try:
                docs.append(json.loads(s))
            except ValueError:
                ok = False
                break
    if ok:
        for d in docs:
            yield d
        return
    with open(path, "r", encoding="utf-8") as f:
        for d in json.load(f):
            yield d


def app_docs(fixture_dir, collection, app_id):
    path = os.path.join(fixture_dir, collection + ".json")
    if not os.path.exists(path):
        raise ExportError("missing collection file %s" % path)
    for raw in iter_docs(path, must_contain=app_id):
        if raw.get("appId") == app_id:
            yield unwrap(raw)


# --------------------------------------------------------------------------
# JavaScript String(value)
# --------------------------------------------------------------------------

_DAYS = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
_MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]


def js_date_string(ms):
    """Date.prototype.toString() on a host whose zone is UTC."""
    dt = datetime.datetime(1970, 1, 1) + datetime.timedelta(milliseconds=ms)
    return "%s %s %02d %04d %02d:%02d:%02d GMT+0000 (Coordinated Universal Time)" % (
        _DAYS[dt.weekday()], _MONTHS[dt.month - 1], dt.day, dt.year,
        dt.hour, dt.minute, dt.second)


def js_number(x):
    """ECMAScript Number::toString(10)."""
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, int):
        if abs(x) < 10 ** 21:
            return str(x)
        x = float(x)
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "0"
    sign = "-" if x < 0 else ""
    r = repr(abs(x))                      # shortest round-trip digits
    mant, _, exp = r.partition("e")
    exp = int(exp) if exp else 0
    ip, _, fp = mant.partition(".")
    digits = (ip + fp).lstrip("0")
    lead = len(ip + fp) - len((ip + fp).lstrip("0"))
    n = len(ip) + exp - lead              # decimal point position
    digits = digits.rstrip("0") or "0"
    k = len(digits)
    if k <= n <= 21:
        s = digits + "0" * (n - k)
    elif 0 < n <= 21:
        s = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        s = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        es = ("+" if e >= 0 else "-") + str(abs(e))
        s = digits[0] + ("." + digits[1:] if k > 1 else "") + "e" + es
    return sign + s


def js_string(v):
    """String(v) for a value from unwrap(); None means null/undefined."""
    if v is None:
        return None
    if isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return js_number(v)
    if isinstance(v, JSDate):
        return js_date_string(v.ms)
    if isinstance(v, list):   # Array.prototype.join: null/undefined -> ""
        return ",".join("" if x is None else js_string(x) for x in v)
    if isinstance(v, dict):
        return "[object Object]"
    return str(v)


def csv_field(v):
    """csv-writer's default field stringifier."""
    s = js_string(v)
    if s is None or s == "":
        return ""
    if "," in s or '"' in s or "\n" in s or "\r" in s:
        return '"' + s.replace('"', '""') + '"'
    return s


def csv_line(values):
    return ",".join(csv_field(v) for v in values) + "\n"


# --------------------------------------------------------------------------
# AES-256-CTR (legacy aesEncrypt / aesDecrypt)
# --------------------------------------------------------------------------

def _aes_ctr_cryptography(key, iv, data):
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
    d = Cipher(algorithms.AES(key), modes.CTR(iv)).decryptor()
    return d.update(data) + d.finalize()


def _build_aes_tables():
    sbox = [0] * 256
    p = q = 1
    while True:   # generate the S-box from the multiplicative inverse
        p = p ^ ((p << 1) & 0xFF) ^ (0x1B if p & 0x80 else 0)
        q ^= q << 1
        q ^= q << 2
        q ^= q << 4
        q &= 0xFF
        if q & 0x80:
            q ^= 0x09
        x = q ^ ((q << 1 | q >> 7) & 0xFF) ^ ((q << 2 | q >> 6) & 0xFF) \
            ^ ((q << 3 | q >> 5) & 0xFF) ^ ((q << 4 | q >> 4) & 0xFF)
        sbox[p] = x ^ 0x63
        if p == 1:
            break
    sbox[0] = 0x63
    return sbox


_SBOX = None


def _xtime(a):
    a <<= 1
    return (a ^ 0x1B) & 0xFF if a & 0x100 else a


def _aes_encrypt_block_factory(key):
    """Pure-Python AES-256 forward cipher (CTR only needs encryption)."""
    global _SBOX
    if _SBOX is None:
        _SBOX = _build_aes_tables()
    sbox = _SBOX
    nk, nr = 8, 14
    w = [list(key[4 * i:4 * i + 4]) for i in range(nk)]
    rcon = 1
    for i in range(nk, 4 * (nr + 1)):
        t = list(w[i - 1])
        if i % nk == 0:
            t = t[1:] + t[:1]
            t = [sbox[b] for b in t]
            t[0] ^= rcon
            rcon = _xtime(rcon)
        elif i % nk == 4:
            t = [sbox[b] for b in t]
        w.append([a ^ b for a, b in zip(w[i - nk], t)])
    round_keys = [sum(w[4 * r:4 * r + 4], []) for r in range(nr + 1)]

    def encrypt(block):
        s = [b ^ k for b, k in zip(block, round_keys[0])]
        for r in range(1, nr + 1):
            s = [sbox[b] for b in s]
            # ShiftRows (state is column-major: s[c*4 + row])
            s = [s[((c + row) % 4) * 4 + row] for c in range(4) for row in range(4)]
            if r != nr:
                m = []
                for c in range(4):
                    a0, a1, a2, a3 = s[4 * c:4 * c + 4]
                    t = a0 ^ a1 ^ a2 ^ a3
                    m += [a0 ^ t ^ _xtime(a0 ^ a1), a1 ^ t ^ _xtime(a1 ^ a2),
                          a2 ^ t ^ _xtime(a2 ^ a3), a3 ^ t ^ _xtime(a3 ^ a0)]
                s = m
            s = [b ^ k for b, k in zip(s, round_keys[r])]
        return bytes(s)

    return encrypt


def _aes_ctr_pure(key, iv, data):
    enc = _aes_encrypt_block_factory(key)
    ctr = int.from_bytes(iv, "big")
    out = bytearray()
    for off in range(0, len(data), 16):
        ks = enc((ctr & ((1 << 128) - 1)).to_bytes(16, "big"))
        chunk = data[off:off + 16]
        out += bytes(a ^ b for a, b in zip(chunk, ks))
        ctr += 1
    return bytes(out)


def aes_ctr(key, iv, data):
    try:
        return _aes_ctr_cryptography(key, iv, data)
    except ImportError:
        return _aes_ctr_pure(key, iv, data)


def aes_decrypt(stored, encrypt_key):
    """Legacy aesDecrypt; None when the value is too short."""
    if not encrypt_key:
        return stored
    raw = base64.b64decode(stored, validate=True)
    if len(raw) < 17:
        return None
    key = hashlib.sha256(encrypt_key.encode("utf-8")).digest()
    return aes_ctr(key, raw[:16], raw[16:]).decode("utf-8", errors="replace")


# --------------------------------------------------------------------------
# Plaintext detection (section 3.9)
# --------------------------------------------------------------------------

def _is_key64(s):
    try:
        return base64.b64decode(s, validate=True).startswith(b"-----BEGIN")
    except (ValueError, TypeError):
        return False


def _is_jwt(s):
    return s.startswith("eyJ") and s.count(".") == 2


LOOKS_PLAIN = {
    "appPrivateKey": _is_key64,
    "appPublicKey": _is_key64,
    "appSecret": _is_jwt,
    "emailExtensionAPIKey": lambda s: s.startswith("SG."),
    "TWILIOAccountSid": lambda s: s.startswith("AC") and len(s) == 34,
    "TWILIOPhoneNumber": lambda s: re.fullmatch(r"\+[0-9]{4,15}", s) is not None,
    "TWILIOToken": lambda s: re.fullmatch(r"[0-9a-fA-F]{32}", s) is not None,
}
# A failed check after decrypting these means the encryptKey is wrong: abort.
FATAL_FIELDS = {"appPrivateKey", "appPublicKey", "appSecret"}


def plaintext_secret(field, value, encrypt_key):
    if value is None or value == "":
        return value
    if not isinstance(value, str):
        raise ExportError("app field %s is not a string" % field)
    check = LOOKS_PLAIN[field]
    if check(value):
        return value
    if not encrypt_key:
        return value   # legacy with no encryptKey: identity
    try:
        plain = aes_decrypt(value, encrypt_key)
    except ValueError:
        print("warning: %s is neither recognisable plaintext nor base64; kept as is" % field,
              file=sys.stderr)
        return value
    if plain is None or not check(plain):
        msg = "%s does not decrypt to the expected shape (wrong encryptKey?)" % field
        if field in FATAL_FIELDS:
            raise ExportError(msg)
        print("warning: " + msg, file=sys.stderr)
    return plain


# --------------------------------------------------------------------------
# ZIP
# --------------------------------------------------------------------------

def _zipinfo(name):
    zi = zipfile.ZipInfo(name, date_time=time.gmtime()[:6])
    zi.compress_type = zipfile.ZIP_DEFLATED
    zi.external_attr = 0o644 << 16
    return zi


def write_entry(zf, name, columns, rows):
    """rows: iterable of dicts; streamed into the archive."""
    count = 0
    with zf.open(_zipinfo(name), "w") as out:
        buf = [csv_line(columns)]
        size = len(buf[0])
        for row in rows:
            line = csv_line([row.get(c) for c in columns])
            buf.append(line)
            size += len(line)
            count += 1
            if size > 1 << 20:
                out.write("".join(buf).encode("utf-8"))
                buf, size = [], 0
        if buf:
            out.write("".join(buf).encode("utf-8"))
    return count


def build(fixture_dir, app_id, out_zip):
    manifest_path = os.path.join(fixture_dir, "manifest.json")
    with open(manifest_path, "r", encoding="utf-8") as f:
        manifest = json.load(f)
    encrypt_key = manifest.get("encryptKey") or ""

    app = next(app_docs(fixture_dir, "apps", app_id), None)   # findOne({appId})
    if app is None:
        raise ExportError("no app with appId %s in %s" % (app_id, fixture_dir))
    app = dict(app)
    for field in SECRET_FIELDS:
        if field in app:
            app[field] = plaintext_secret(field, app[field], encrypt_key)

    counts = {}
    tmp = out_zip + ".tmp"
    try:
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            counts["app-collection.csv"] = write_entry(zf, "app-collection.csv", APP_COLUMNS, [app])
            for entry, coll, cols in CHILD_FILES:
                counts[entry] = write_entry(zf, entry, cols, app_docs(fixture_dir, coll, app_id))
        os.replace(tmp, out_zip)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return counts


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 3 or argv[0] in ("-h", "--help"):
        print("usage: make_export_zip.py FIXTURE_DIR APP_ID OUT.zip", file=sys.stderr)
        return 2
    fixture_dir, app_id, out_zip = argv
    try:
        counts = build(fixture_dir, app_id, out_zip)
    except (ExportError, OSError) as e:
        print("make_export_zip: %s" % e, file=sys.stderr)
        return 1
    print("wrote %s: %s" % (out_zip, ", ".join("%s %d" % (k, v) for k, v in counts.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
