"""OAuth refresh-token rotation across server processes (issue 22): PostgreSQL decides, no node keeps state.

    refresh_race.py OPERATOR_TOKEN NODE_URL NODE_URL NODE_URL

Steps: an app and a public client (grace 3 s) on nodes 1 and 2; a user signed up and logged in through the
end-user API; its access-token exchanged (RFC 8693) for an OAuth token set. Then:
  1. 20 refreshes of the same refresh token at once, spread over the three nodes: every one succeeds and
     all answer the same successor; the successor refreshes again (the family lives on);
  2. after the grace window the first token is presented again (node 3): refused with invalid_grant, the
     newest token of the family is dead too, and `session.revoked` with reason `refresh_token_reuse` was
     recorded (read from PostgreSQL with psql: MN_PSQL, MN_PGPORT, MN_DB).
Prints PASS lines; exits 1 on the first failure. Standard library only.
"""

import concurrent.futures
import hashlib
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid

GRACE = 3
EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"


def call(url, body=None, headers=None, form=None):
    data, kind = None, {}
    if form is not None:
        data, kind = urllib.parse.urlencode(form).encode(), {"Content-Type": "application/x-www-form-urlencoded"}
    elif body is not None:
        data, kind = json.dumps(body).encode(), {"Content-Type": "application/json"}
    request = urllib.request.Request(url, data=data, method="POST" if data is not None else "GET",
                                     headers={**kind, **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=20) as reply:
            return reply.status, json.loads(reply.read() or b"null")
    except urllib.error.HTTPError as error:
        raw = error.read()
        try:
            return error.code, json.loads(raw or b"null")
        except ValueError:
            return error.code, raw.decode(errors="replace")


def check(ok, what, detail=""):
    print(("PASS  " if ok else "FAIL  ") + what + (f" ({detail})" if detail and not ok else ""))
    if not ok:
        sys.exit(1)


def reuse_events(app_id):
    psql, port, db = os.environ.get("MN_PSQL"), os.environ.get("MN_PGPORT"), os.environ.get("MN_DB")
    if not (psql and port and db):
        return None
    sql = ("SELECT count(*) FROM events e JOIN apps a ON a.id = e.app_ref WHERE a.app_id = '%s' "
           "AND e.type = 'session.revoked' AND e.body::jsonb -> 'data' ->> 'reason' = 'refresh_token_reuse'" % app_id)
    out = subprocess.run([psql, "-h", "127.0.0.1", "-p", port, "-U", "postgres", "-tAc", sql, db],
                         capture_output=True, text=True, check=True)
    return int(out.stdout.strip())


def main():
    operator, nodes = sys.argv[1], sys.argv[2:5]
    admin = {"Authorization": f"Bearer {operator}"}
    status, app = call(f"{nodes[0]}/admin/v1/apps", {"name": "Refresh race", "signupFlow": "none"}, admin)
    check(status == 201, "an app is created on node 1", f"{status} {app}")
    app_id, app_token = app["appId"], app["appToken"]
    status, client = call(f"{nodes[1]}/admin/v1/apps/{app_id}/oauth/clients", {
        "name": "race", "kind": "public", "tokenEndpointAuthMethod": "none",
        "redirectUris": ["http://127.0.0.1/callback"], "grantTypes": ["authorization_code", "refresh_token", EXCHANGE],
        "scopes": ["openid", "offline_access"], "refreshGraceSeconds": GRACE, "dpopRequired": False,
    }, admin)
    check(status == 201, "a public client (grace 3 s) is registered on node 2", f"{status} {client}")
    client_id = client["clientId"]

    handle = f"race-{uuid.uuid4().hex[:10]}@example.com"
    password = hashlib.md5(b"race-password-1").hexdigest()
    status, signed = call(f"{nodes[2]}/api/appuser/signup", headers={"app-token": app_token},
                          form={"handle": handle, "password": password})
    check(status == 200, "a user signs up through the end-user API on node 3", f"{status} {signed}")
    status, login = call(f"{nodes[0]}/api/appuser/login", headers={"app-token": app_token},
                         form={"handle": handle, "password": password})
    check(status == 200 and "access-token" in login, "the user logs in on node 1", f"{status} {login}")

    token_url = lambda i: f"{nodes[i % 3]}/apps/{app_id}/oauth/token"  # noqa: E731
    status, tokens = call(token_url(1), form={
        "grant_type": EXCHANGE, "client_id": client_id, "subject_token": login["access-token"],
        "subject_token_type": "urn:ietf:params:oauth:token-type:access_token", "scope": "openid offline_access"})
    check(status == 200 and "refresh_token" in tokens, "the access-token is exchanged for an OAuth token set on node 2",
          f"{status} {tokens}")
    first = tokens["refresh_token"]

    def refresh(i, token):
        return call(token_url(i), form={"grant_type": "refresh_token", "refresh_token": token, "client_id": client_id})

    with concurrent.futures.ThreadPoolExecutor(max_workers=20) as pool:
        replies = list(pool.map(lambda i: refresh(i, first), range(20)))
    failed = [r for r in replies if r[0] != 200]
    check(not failed, "20 concurrent refreshes of one token over 3 nodes all succeed", f"{len(failed)} failed, e.g. {failed[:1]}")
    successors = {body.get("refresh_token") for _, body in replies}
    check(len(successors) == 1 and None not in successors and first not in successors,
          "all 20 answer the same successor", f"{len(successors)} different successors")
    successor = successors.pop()
    status, after = refresh(2, successor)
    check(status == 200 and after.get("refresh_token") not in (None, first, successor),
          "the successor refreshes on node 3: the family lives on", f"{status} {after}")
    newest = after["refresh_token"]

    time.sleep(GRACE + 1.5)
    status, body = refresh(2, first)
    check(status == 400 and isinstance(body, dict) and body.get("error") == "invalid_grant",
          "the first token after the grace window is refused (node 3)", f"{status} {body}")
    status, body = refresh(0, newest)
    check(status == 400 and isinstance(body, dict) and body.get("error") == "invalid_grant",
          "reuse revoked the whole family: its newest token is dead on node 1", f"{status} {body}")
    count = reuse_events(app_id)
    if count is None:
        print("SKIP  session.revoked event check (MN_PSQL/MN_PGPORT/MN_DB not set)")
    else:
        check(count == 1, "exactly one session.revoked event with reason refresh_token_reuse", f"found {count}")


if __name__ == "__main__":
    main()
