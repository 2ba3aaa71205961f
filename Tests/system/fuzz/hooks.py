"""Schemathesis hooks for Tests/system/fuzz/admin.sh (loaded through SCHEMATHESIS_HOOKS=hooks). They only
help generation: nothing here looks at a response or decides whether a check passed.

1. The `webhook-url` string format of the document (an https URL whose host resolves only to public
   addresses, decided by DNS when the endpoint is saved) gets a generator: https URLs of public IPv4
   literals (the fuzz machine may have no DNS), with a random port and path.
2. The one app rule a JSON Schema cannot state: in `metaData` and `metaDataInvite`, no descriptor's
   `path` may equal another's or be a dotted prefix of it (one JWT claim would overwrite the other);
   the server answers 422 `duplicate` naming the field. Before a positive request to create or change
   an app is sent, a descriptor whose path overlaps an earlier one gets a fresh path, so that
   "schema-valid" keeps meaning "accepted". Nothing else in a generated request is changed, and
   negative (schema-breaking) requests are sent as generated.
3. OAuth clients: the `redirect-uri` and `jwks-uri` formats get generators (RFC 8252's three kinds of
   redirect URI; https URLs of public IPv4 literals), and the `jwks` of a positive request to register or
   change a client becomes a JWKS of real public keys (a random string is no point on a curve).
4. Real ids (Tests/system/fuzz/seed.py): every other positive draw of an operation's path parameters (all
   of them generated, none taken from a link) is replaced by the ids of live objects the operation needs:
   an app, a user, a session, an identity, a passkey, a pending signup, an invite, a template, a webhook
   endpoint, a delivered webhook message, an OAuth client. Drawing leaves a placeholder (quick, so
   generation stays fast); before the call, the placeholder becomes the ids, made through the server's
   APIs when needed (a DELETE gets an object of its own). So every operation also runs against objects
   that exist, in the fuzzing and stateful phases, and the stateful phase follows links from real
   objects. Negative draws and link values are never touched. Needs COSYNC_FUZZ_BASE_URL and
   COSYNC_FUZZ_OPERATOR_TOKEN (admin.sh sets them); without them nothing is replaced.
"""
import itertools
import os
import sys

import schemathesis
from hypothesis import strategies as st

from schemathesis.transport.serialization import quote_all

try:
    from schemathesis.generation.value import GeneratedValue
except ImportError:  # another schemathesis layout: every drawn value is taken for a plain one
    GeneratedValue = ()

# CPython 3.11 before 3.11.8 (gh-106905) can raise "SystemError: AST constructor recursion depth
# mismatch" from ast.parse when it runs deep in a worker thread's stack. Hypothesis calls ast.parse
# only to pretty-print a lambda for a strategy's repr, and schemathesis's coverage phase reports the
# SystemError as a runtime error of the fuzz run (a failed CI run with Python 3.11.7, nothing to do
# with the server). A lambda whose source cannot be parsed gets Hypothesis's own "unknown" description
# instead; what is generated and sent does not change.
try:
    from hypothesis.internal import lambda_sources as _lambda_sources

    _describe = _lambda_sources._lambda_description

    def _lambda_description_tolerant(f, *args, **kwargs):
        try:
            return _describe(f, *args, **kwargs)
        except (SystemError, RecursionError):
            return "lambda *args, **kwargs: <unknown>"

    _lambda_sources._lambda_description = _lambda_description_tolerant
except (ImportError, AttributeError):  # another Hypothesis layout: nothing to patch
    pass

# Public addresses (outside every network WebhookURLGuard blocks).
PUBLIC_HOSTS = ("1.1.1.1", "8.8.8.8", "9.9.9.9", "93.184.215.14", "151.101.1.69", "140.82.112.3")
PATH_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~!$&'()*+,;=:@"
schemathesis.openapi.format(
    "webhook-url",
    st.builds(
        lambda host, port, path, query: f"https://{host}{port}/{path}{query}",
        st.sampled_from(PUBLIC_HOSTS),
        st.one_of(st.just(""), st.integers(1, 65535).map(lambda p: f":{p}")),
        st.text(PATH_CHARS + "/", max_size=40),
        st.one_of(st.just(""), st.text(PATH_CHARS + "/?", max_size=20).map(lambda q: "?" + q)),
    ),
)

# OAuth client registration (the OAuthClient* schemas): redirect URIs of RFC 8252's three kinds, and JWKS
# URLs like webhook URLs (https to a public IPv4 literal).
SEGMENT = st.text("abcdefghijklmnopqrstuvwxyz0123456789-._~", min_size=1, max_size=12)
schemathesis.openapi.format(
    "redirect-uri",
    st.one_of(
        st.builds(lambda host, path: f"https://{host}/{path}",
                  st.sampled_from(("app.example.com", "login.example.org", "93.184.215.14")), st.lists(SEGMENT, max_size=3).map("/".join)),
        st.builds(lambda host, port, path: f"http://{host}{port}/{path}",
                  st.sampled_from(("127.0.0.1", "[::1]")), st.one_of(st.just(""), st.integers(1, 65535).map(lambda p: f":{p}")), SEGMENT),
        st.builds(lambda scheme, path: f"{scheme}:/{path}",
                  st.sampled_from(("com.example.app", "org.example.native.app")), st.lists(SEGMENT, max_size=3).map("/".join)),
    ),
)
schemathesis.openapi.format(
    "jwks-uri",
    st.builds(lambda host, path: f"https://{host}/{path}", st.sampled_from(PUBLIC_HOSTS), st.lists(SEGMENT, max_size=3).map("/".join)),
)
# Upstream providers and assertion keys (the OAuthUpstream* / OAuthAssertionKey* schemas): their URLs are
# fetched when saved, so a positive request must name something live. A small OpenID provider on loopback
# (started here, in the fuzzer's process) serves a discovery document whose issuer is its own URL and a
# JWK set of real public keys; `public-key-pem` draws a real SubjectPublicKeyInfo PEM.
def _provider():
    import seed
    return seed.fake_provider()


schemathesis.openapi.format(
    "oidc-discovery-url", st.builds(lambda n: f"{_provider()}/idp{n}", st.integers(0, 10**9)))
schemathesis.openapi.format("jwks-url", st.builds(lambda n: f"{_provider()}/jwks?{n}", st.integers(0, 10**9)))
schemathesis.openapi.format("public-key-pem", st.just(
    "-----BEGIN PUBLIC KEY-----\n"
    "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEn0bUtrThrqu7lDio5XtVZkh3pS/j\n"
    "ZEenkKNvzWVC4fP4WmRzrNrjbYHCq6WXUaIlKK1h+oLvlnGZfghT3RNDBg==\n"
    "-----END PUBLIC KEY-----\n"))

# The other rule a JSON Schema cannot state: a registered JWKS holds real public keys (points on their
# curves). A positive request's `jwks` becomes this one (an Ed25519 and a P-256 key).
CLIENT_JWKS = {"keys": [
    {"kty": "OKP", "crv": "Ed25519", "kid": "fuzz-ed", "x": "EOCIrZj49nEXxWOa6Cqd8v603RbADfygvqr64wDfIqc"},
    {"kty": "EC", "crv": "P-256", "kid": "fuzz-ec", "x": "CxvqJOV5CCVbfqxd8qSX2Lcrsn5llQS8fW1XIE-0NQA",
     "y": "_L-1KJcwizH0KdOsbe44tjFChwRr5_Qx2RmpTc053vo"},
]}
CLIENT_PATHS = ("/admin/v1/apps/{appId}/oauth/clients", "/admin/v1/apps/{appId}/oauth/clients/{clientId}")

APP_PATHS = ("/admin/v1/apps", "/admin/v1/apps/{appId}")


def _overlaps(parts, other):
    shorter = min(len(parts), len(other))
    return parts[:shorter] == other[:shorter]


def _separate(descriptors):
    if not isinstance(descriptors, list):
        return
    seen = []
    for index, item in enumerate(descriptors):
        path = item.get("path") if isinstance(item, dict) else None
        if not isinstance(path, str):
            continue
        parts = path.split(".")
        if any(_overlaps(parts, other) for other in seen):
            fresh = f"fuzz{index}"
            while any(_overlaps([fresh], other) for other in seen):
                fresh += "x"
            item["path"] = fresh
            parts = [fresh]
        seen.append(parts)


_WORLD = []
_PLACEHOLDER = "cosyncseed"
_drawn = {}  # placeholder number -> the generated values (sent when no live object can be had)
_numbers = itertools.count(1)
_counts = {}  # operation -> positive draws of its path parameters so far


def _world():
    if not _WORLD:
        base, token = os.environ.get("COSYNC_FUZZ_BASE_URL"), os.environ.get("COSYNC_FUZZ_OPERATOR_TOKEN")
        if base and token:
            import seed

            _WORLD.append(seed.World(base, token))
        else:
            _WORLD.append(None)
    return _WORLD[0]


@schemathesis.hook
def before_generate_path_parameters(context, strategy):
    operation = context.operation
    if operation is None or _world() is None:
        return strategy
    names = {parameter.name for parameter in operation.path_parameters}
    label = f"{operation.method} {operation.path}"

    def place(value):
        # A value a mutation made (negative) stays as drawn; a positive one may come plain or wrapped.
        wrapped = isinstance(value, GeneratedValue)
        if wrapped and value.meta is not None:
            return value
        params = value.value if wrapped else value
        if not isinstance(params, dict) or set(params) != names:
            return value
        # Every other positive draw of the operation (the first one included) gets live objects.
        count = _counts[label] = _counts.get(label, 0) + 1
        if count % 2 == 0:
            return value
        number = next(_numbers)
        _drawn[number] = dict(params)
        placeholders = {name: f"{_PLACEHOLDER}{number}" for name in params}
        return GeneratedValue(placeholders, None) if wrapped else placeholders

    return strategy.map(place)


def _live_ids(case):
    params = case.path_parameters or {}
    marks = [v for v in params.values() if isinstance(v, str) and v.startswith(_PLACEHOLDER)]
    if not marks:
        return
    number = int(marks[0][len(_PLACEHOLDER):])
    try:
        ids = _world().ids(case.method, case.operation.path)
    except Exception as error:  # the server refused to make an object: send the generated values
        print(f"hooks: no live object for {case.method} {case.operation.path}: {error}", file=sys.stderr)
        ids = None
    # The generated values go out quoted, as schemathesis sends path parameters.
    case.path_parameters = ids if ids and set(ids) == set(params) else quote_all(dict(_drawn[number]))
    if os.environ.get("COSYNC_FUZZ_HOOKS_DEBUG"):
        print(f"hooks: {case.method} {case.operation.path} <- {case.path_parameters}", file=sys.stderr)


@schemathesis.hook
def before_call(context, case, **kwargs):
    _live_ids(case)
    meta = getattr(case, "meta", None)
    if meta is not None and not meta.generation.mode.is_positive:
        return
    if case.operation.path in APP_PATHS and case.method.upper() in ("POST", "PATCH") and isinstance(case.body, dict):
        _separate(case.body.get("metaData"))
        _separate(case.body.get("metaDataInvite"))
    if case.operation.path in CLIENT_PATHS and case.method.upper() in ("POST", "PATCH") and isinstance(case.body, dict):
        if "jwks" in case.body:
            case.body["jwks"] = CLIENT_JWKS
    # A JWK set's keys carry their own kid: a `kid` beside `jwksUri` is refused (a rule the schema leaves out).
    if case.operation.path == "/admin/v1/apps/{appId}/oauth/assertion-keys" and case.method.upper() == "POST" \
            and isinstance(case.body, dict) and "jwksUri" in case.body:
        case.body.pop("kid", None)
    # A registered assertion key is a real public key (a schema cannot say "a point on its curve").
    if case.operation.path == "/admin/v1/apps/{appId}/oauth/assertion-keys" and case.method.upper() == "POST" \
            and isinstance(case.body, dict) and "jwk" in case.body:
        key = dict(CLIENT_JWKS["keys"][1])
        if isinstance(case.body.get("kid"), str):
            key["kid"] = case.body["kid"]  # the key's own kid, when given, must be the one registered
        case.body["jwk"] = key
