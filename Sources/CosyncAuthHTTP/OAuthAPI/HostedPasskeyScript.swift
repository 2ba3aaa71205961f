import CosyncAuth
import Foundation

/// The script of the hosted page's passkey buttons, served at `I/oauth/assets/passkey.js`
/// (`HostedPasskeyRoutes`): plain JavaScript, no framework, no build step. It reads everything it
/// needs from the passkey block the page renders (`HostedPasskeyRoutes.block`), so it holds no URL,
/// token or text of its own.
enum HostedPasskeyScript {
    static let source = #"""
// Passkeys on the CosyncAuth hosted login page. Plain JavaScript, no framework, no build step.
//
// The page renders a block <div id="cosync-passkey" data-…> (see HostedPasskeyRoutes.swift): the
// endpoint URLs, the waiting request's reference, the CSRF token and the page's texts are its data
// attributes. This script runs the WebAuthn ceremony with navigator.credentials, posts the
// credential (binary members base64url) as JSON, and follows the server's answer:
// {"location": URL} → the browser goes there (the same resume step the password form ends with);
// {"error": reason, "message": text} → the text is shown.
//
// window.CosyncPasskey.signIn(), .signUp() and .completeSignup() are what the buttons call.
(function () {
  "use strict";

  function toBytes(text) {
    var b64 = String(text).replace(/-/g, "+").replace(/_/g, "/");
    while (b64.length % 4) { b64 += "="; }
    var raw = atob(b64);
    var bytes = new Uint8Array(raw.length);
    for (var i = 0; i < raw.length; i++) { bytes[i] = raw.charCodeAt(i); }
    return bytes.buffer;
  }

  function toText(buffer) {
    if (!buffer) { return null; }
    var bytes = new Uint8Array(buffer);
    var raw = "";
    for (var i = 0; i < bytes.length; i++) { raw += String.fromCharCode(bytes[i]); }
    return btoa(raw).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  }

  function descriptors(list) {
    return (list || []).map(function (d) {
      var out = { type: d.type || "public-key", id: toBytes(d.id) };
      if (d.transports) { out.transports = d.transports; }
      return out;
    });
  }

  // PublicKeyCredentialRequestOptionsJSON → the options navigator.credentials.get takes.
  function requestOptions(json) {
    var options = { challenge: toBytes(json.challenge), allowCredentials: descriptors(json.allowCredentials) };
    ["rpId", "timeout", "userVerification"].forEach(function (k) { if (json[k] !== undefined) { options[k] = json[k]; } });
    return options;
  }

  // PublicKeyCredentialCreationOptionsJSON → the options navigator.credentials.create takes.
  function creationOptions(json) {
    var options = {};
    Object.keys(json).forEach(function (k) { options[k] = json[k]; });
    options.challenge = toBytes(json.challenge);
    options.user = { id: toBytes(json.user.id), name: json.user.name, displayName: json.user.displayName };
    options.excludeCredentials = descriptors(json.excludeCredentials);
    return options;
  }

  // A PublicKeyCredential as JSON (WebAuthn Level 3 toJSON, written out for older browsers).
  function credentialJSON(credential) {
    var r = credential.response;
    var response = { clientDataJSON: toText(r.clientDataJSON) };
    if (r.authenticatorData) { response.authenticatorData = toText(r.authenticatorData); }
    if (r.signature) { response.signature = toText(r.signature); }
    if (r.userHandle) { response.userHandle = toText(r.userHandle); }
    if (r.attestationObject) { response.attestationObject = toText(r.attestationObject); }
    if (typeof r.getTransports === "function") { response.transports = r.getTransports(); }
    var out = { id: credential.id, rawId: toText(credential.rawId), type: credential.type, response: response };
    if (credential.authenticatorAttachment) { out.authenticatorAttachment = credential.authenticatorAttachment; }
    return out;
  }

  function block() { return document.getElementById("cosync-passkey"); }

  function field(name) {
    var root = block();
    var input = root && root.querySelector("[data-passkey-field='" + name + "']");
    return input ? input.value.trim() : "";
  }

  function show(text) {
    var root = block();
    var status = root && root.querySelector("[data-passkey-status]");
    if (status) { status.textContent = text || ""; status.hidden = !text; }
  }

  function busy(on) {
    var root = block();
    if (!root) { return; }
    Array.prototype.forEach.call(root.querySelectorAll("button"), function (b) { b.disabled = on; });
  }

  function text(name) { var root = block(); return (root && root.getAttribute("data-text-" + name)) || ""; }

  function post(url, body) {
    var root = block();
    body.request = root.getAttribute("data-request");
    return fetch(url, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRF-Token": root.getAttribute("data-csrf") },
      body: JSON.stringify(body)
    }).then(function (reply) {
      return reply.json().catch(function () { return {}; }).then(function (json) {
        if (!reply.ok) { throw { message: json.message || text("failed") }; }
        return json;
      });
    });
  }

  function follow(answer) {
    if (answer && answer.location) { window.location.assign(answer.location); return true; }
    return false;
  }

  function failed(error) {
    busy(false);
    // The user closed the passkey sheet, or the authenticator refused: not the server's doing.
    if (error && (error.name === "NotAllowedError" || error.name === "AbortError")) { show(text("cancelled")); return; }
    if (error && error.name === "InvalidStateError") { show(text("exists")); return; }
    show((error && error.message && !error.name) ? error.message : text("failed"));
  }

  function supported() {
    return !!(window.PublicKeyCredential && navigator.credentials && navigator.credentials.get);
  }

  function signIn() {
    if (!supported()) { show(text("unsupported")); return Promise.resolve(); }
    var root = block();
    var handle = field("handle");
    if (!handle) { show(text("handle")); return Promise.resolve(); }
    busy(true); show("");
    return post(root.getAttribute("data-options"), { handle: handle })
      .then(function (answer) { return navigator.credentials.get({ publicKey: requestOptions(answer.publicKey) }); })
      .then(function (credential) { return post(root.getAttribute("data-finish"), { handle: handle, credential: credentialJSON(credential) }); })
      .then(function (answer) { if (!follow(answer)) { busy(false); } })
      .catch(failed);
  }

  function signUp() {
    if (!supported()) { show(text("unsupported")); return Promise.resolve(); }
    var root = block();
    var handle = field("signup-handle"), name = field("display-name");
    if (!handle || !name) { show(text("handle")); return Promise.resolve(); }
    busy(true); show("");
    return post(root.getAttribute("data-signup-options"), { handle: handle, displayName: name })
      .then(function (answer) { return navigator.credentials.create({ publicKey: creationOptions(answer.publicKey) }); })
      .then(function (credential) { return post(root.getAttribute("data-signup-confirm"), { handle: handle, credential: credentialJSON(credential) }); })
      .then(function (answer) {
        busy(false);
        root.setAttribute("data-signup-token", answer.signupToken);
        var step = root.querySelector("[data-passkey-code-step]");
        if (step) { step.hidden = false; }
        show(text("code-sent"));
      })
      .catch(failed);
  }

  function completeSignup() {
    var root = block();
    var code = field("code");
    if (!code) { show(text("code")); return Promise.resolve(); }
    busy(true); show("");
    return post(root.getAttribute("data-signup-complete"), { signupToken: root.getAttribute("data-signup-token") || "", code: code })
      .then(function (answer) { if (!follow(answer)) { busy(false); } })
      .catch(failed);
  }

  window.CosyncPasskey = { signIn: signIn, signUp: signUp, completeSignup: completeSignup };

  function start() {
    var root = block();
    if (!root) { return; }
    if (!supported()) { show(text("unsupported")); }
    var actions = { "sign-in": signIn, "sign-up": signUp, "complete-signup": completeSignup };
    Array.prototype.forEach.call(root.querySelectorAll("[data-passkey-action]"), function (button) {
      var action = actions[button.getAttribute("data-passkey-action")];
      if (action) { button.addEventListener("click", function (event) { event.preventDefault(); action(); }); }
    });
    root.hidden = false;
  }

  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", start); } else { start(); }
})();
"""#

    /// The script's bytes and their ETag (the first 16 bytes of its SHA-256, hex).
    static let bytes = Array(source.utf8)
    static let etag = "\"" + Hex.encode(Secrets.sha256(source).prefix(16)) + "\""
}
