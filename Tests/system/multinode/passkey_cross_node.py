"""Passkey ceremonies across server processes (issue 12): each WebAuthn ceremony begins on one node
and completes on another, so the challenge can only come from PostgreSQL.

    passkey_cross_node.py OPERATOR_TOKEN NODE_URL NODE_URL NODE_URL

Steps: create an appKey app on node 1; loginAnonymous on node 1, loginAnonymousComplete on node 2
(registration); login on node 3, then the same loginComplete 40 times at once over the three nodes:
exactly one may succeed (the challenge is used once); a later replay on node 2 is refused. Prints PASS lines; exits 1 on the first failure.
Standard library only: the keys and signatures come from Tests/system/fuzz/appkey_fuzz.py.
"""

import concurrent.futures
import json
import os
import random
import sys
import urllib.error
import urllib.request
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fuzz"))
import appkey_fuzz as ak  # noqa: E402


def call(base, path, body, headers):
    request = urllib.request.Request(
        base + path, data=json.dumps(body).encode(), method="POST",
        headers={"Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(request, timeout=15) as reply:
            return reply.status, json.loads(reply.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def check(ok, what, detail=""):
    print(("PASS  " if ok else "FAIL  ") + what + (f" ({detail})" if detail and not ok else ""))
    if not ok:
        sys.exit(1)


def main():
    operator, nodes = sys.argv[1], sys.argv[2:5]
    r = random.Random(12)
    status, app = call(nodes[0], "/admin/v1/apps", {
        "name": "Cross-node passkeys", "product": "appKey", "rpId": ak.RP_ID, "anonymousLoginEnabled": True,
    }, {"Authorization": f"Bearer {operator}"})
    check(status == 201, "an appKey app is created on node 1", f"{status} {app}")
    token = {"app-token": app["appToken"]}

    key, credential = ak.Key(r), r.randbytes(20)
    handle = "ANON_" + str(uuid.UUID(int=r.getrandbits(128))).upper()
    status, options = call(nodes[0], "/api/appuser/loginAnonymous", {"handle": handle}, token)
    check(status == 200 and "challenge" in options, "registration begun on node 1 (loginAnonymous)", f"{status} {options}")
    reg = ak.registration(key, credential, options["challenge"], r)
    status, user = call(nodes[1], "/api/appuser/loginAnonymousComplete", {
        "handle": handle, "id": ak.b64url(credential),
        "response": {"clientDataJSON": ak.b64url(reg["clientDataJSON"]), "attestationObject": ak.b64url(reg["attestationObject"])},
    }, token)
    check(status == 200 and "access-token" in user, "registration completed on node 2 (loginAnonymousComplete)", f"{status} {user}")

    status, options = call(nodes[2], "/api/appuser/login", {"handle": handle}, token)
    check(status == 200 and "challenge" in options, "login begun on node 3", f"{status} {options}")
    signed = ak.assertion(key, options["challenge"], 0, r)
    body = {"handle": handle, "id": ak.b64url(credential), "response": {
        "clientDataJSON": ak.b64url(signed["clientDataJSON"]), "authenticatorData": ak.b64url(signed["authenticatorData"]),
        "signature": ak.b64url(signed["signature"])}}
    # The same completion 40 times at once, spread over the three nodes: exactly one may succeed.
    with concurrent.futures.ThreadPoolExecutor(max_workers=40) as pool:
        answers = list(pool.map(lambda i: call(nodes[i % 3], "/api/appuser/loginComplete", body, token), range(40)))
    won = [a for a in answers if a[0] == 200 and "access-token" in (a[1] or {})]
    refused = [a for a in answers if a[0] == 400]
    check(len(won) == 1 and len(refused) == 39,
          "the same loginComplete 40 times at once over 3 nodes: exactly one succeeds, 39 are refused (single-use challenge)",
          f"{sorted(a[0] for a in answers)}")
    status, replay = call(nodes[1], "/api/appuser/loginComplete", body, token)
    check(status == 400, "the assertion replayed afterwards on node 2 is refused", f"{status} {replay}")


if __name__ == "__main__":
    main()
