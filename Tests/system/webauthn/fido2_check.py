#!/usr/bin/env python3
"""Independent cross-check of the WebAuthn tests' fixtures with Yubico's `fido2` package.

Reads one JSON document on stdin:
  {"rpId": str, "origin": str, "cases": [case, ...]}
where a case is
  {"kind": "registration", "challenge": b64url, "credential": <standard WebAuthn JSON>}
  {"kind": "assertion", "challenge": b64url, "credential": <standard WebAuthn JSON>,
   "credentialId": b64url, "publicKeyCOSE": b64url}
and prints one JSON array with, per case, {"ok": true, ...facts} or {"ok": false, "error": str}.
Registration facts: credentialId, publicKeyCOSE (re-encoded by fido2), alg, fmt, attestation
(the fido2 attestation type name, or null for fmt none).
"""
import json
import sys

from fido2 import cbor
from fido2.attestation import AppleAttestation, NoneAttestation, PackedAttestation
from fido2.server import Fido2Server
from fido2.utils import websafe_decode, websafe_encode
from fido2.webauthn import (
    AttestedCredentialData,
    CoseKey,
    PublicKeyCredentialRpEntity,
    RegistrationResponse,
    UserVerificationRequirement,
)

VERIFIERS = {"packed": PackedAttestation(), "apple": AppleAttestation(), "none": NoneAttestation()}


def main() -> None:
    doc = json.load(sys.stdin)
    origin = doc["origin"]
    server = Fido2Server(
        PublicKeyCredentialRpEntity(name="test", id=doc["rpId"]), verify_origin=lambda o: o == origin
    )
    results = []
    for case in doc["cases"]:
        state = {"challenge": case["challenge"], "user_verification": UserVerificationRequirement.PREFERRED}
        try:
            if case["kind"] == "registration":
                auth_data = server.register_complete(state, case["credential"])
                response = RegistrationResponse.from_dict(case["credential"]).response
                att = response.attestation_object
                verifier = VERIFIERS.get(att.fmt)
                kind = None
                if verifier is not None and att.fmt != "none":
                    kind = verifier.verify(att.att_stmt, att.auth_data, response.client_data.hash).attestation_type.name
                cred = auth_data.credential_data
                results.append({
                    "ok": True,
                    "credentialId": websafe_encode(cred.credential_id),
                    "publicKeyCOSE": websafe_encode(cbor.encode(dict(cred.public_key))),
                    "alg": cred.public_key.ALGORITHM,
                    "fmt": att.fmt,
                    "attestation": kind,
                })
            else:
                key = CoseKey.parse(cbor.decode(websafe_decode(case["publicKeyCOSE"])))
                stored = AttestedCredentialData.create(b"\0" * 16, websafe_decode(case["credentialId"]), key)
                server.authenticate_complete(state, [stored], case["credential"])
                results.append({"ok": True})
        except Exception as error:  # noqa: BLE001 - every refusal is reported, not raised
            results.append({"ok": False, "error": f"{type(error).__name__}: {error}"})
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    main()
