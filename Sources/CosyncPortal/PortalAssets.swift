/// The Portal's two static files, served from memory: the stylesheet and one small plain script.
/// Every page works without the script; it only adds "Copy" buttons beside the values a developer
/// copies (the app token, the public key, an invitation link). The button's texts come from the page
/// (`data-copy-label` and `data-copied-label` on `<body>`, from `PortalText`), so that every string
/// stays in `PortalText.swift`.
enum PortalAssets {
    static let stylesheet = """
        :root { color-scheme: light; --accent: #174ea6; --accent-text: #ffffff; --error: #a50e0e; --line: #6b6b6b; --muted: #3c4043;
          --bg: #ffffff; --fg: #1f1f1f; --panel: #f3f5f8; --focus: #b3261e; }
        * { box-sizing: border-box; }
        body { margin: 0; font: 16px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; background: var(--bg); color: var(--fg); }
        a { color: var(--accent); }
        a:focus-visible, button:focus-visible, input:focus-visible, select:focus-visible, textarea:focus-visible, main:focus-visible {
          outline: 3px solid var(--focus); outline-offset: 2px; }
        .skip-link { position: absolute; left: -999px; top: 0; background: var(--bg); padding: .5rem 1rem; z-index: 10; }
        .skip-link:focus { left: 1rem; }
        header.top { display: flex; flex-wrap: wrap; align-items: center; gap: 1rem 2rem; padding: .75rem 1.5rem; border-bottom: 1px solid var(--line); background: var(--panel); }
        .brand { margin: 0; font-weight: 700; }
        .brand a { text-decoration: none; color: var(--fg); }
        nav ul { list-style: none; margin: 0; padding: 0; display: flex; flex-wrap: wrap; gap: .25rem 1rem; }
        nav a[aria-current="page"] { font-weight: 700; text-decoration-thickness: 3px; }
        #sign-out { margin-left: auto; display: flex; align-items: center; gap: .75rem; }
        .who { color: var(--muted); }
        main { max-width: 64rem; margin: 0 auto; padding: 1.5rem; }
        #app-nav { margin: 0 0 1rem; padding-bottom: .5rem; border-bottom: 1px solid var(--line); }
        .app-name { margin: 0 0 .25rem; font-weight: 600; color: var(--muted); }
        h1 { font-size: 1.6rem; margin: .5rem 0 1rem; }
        h2 { font-size: 1.15rem; margin: 1.5rem 0 .5rem; }
        .card { max-width: 28rem; }
        .card.wide { max-width: 44rem; }
        .field { margin: 0 0 1rem; }
        label, .label, dt { display: block; font-weight: 600; margin: 0 0 .25rem; }
        input, select, textarea { width: 100%; padding: .55rem; font: inherit; border: 1px solid var(--line); border-radius: .35rem; background: var(--bg); color: var(--fg); }
        textarea { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; font-size: .9rem; }
        .help { margin: .25rem 0 0; color: var(--muted); font-size: .9rem; }
        button, .button { display: inline-block; padding: .55rem 1.1rem; font: inherit; font-weight: 600; border: 1px solid var(--accent); border-radius: .35rem;
          background: var(--accent); color: var(--accent-text); cursor: pointer; text-decoration: none; }
        button.secondary { background: var(--bg); color: var(--accent); }
        .search { display: flex; flex-wrap: wrap; align-items: flex-end; gap: .5rem; margin: 0 0 1rem; }
        .search label { width: 100%; }
        .search input { flex: 1 1 16rem; width: auto; }
        table { border-collapse: collapse; width: 100%; margin: 0 0 1rem; }
        caption { text-align: left; font-weight: 600; padding: 0 0 .5rem; }
        th, td { text-align: left; padding: .45rem .6rem; border-bottom: 1px solid var(--line); vertical-align: top; }
        td form { margin: 0; }
        code, pre { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; font-size: .9rem; }
        .wrap { word-break: break-all; }
        pre { white-space: pre-wrap; margin: 0; }
        .facts { display: grid; grid-template-columns: repeat(auto-fill, minmax(14rem, 1fr)); gap: 1rem; margin: 0 0 1.5rem; }
        .facts dd { margin: 0; }
        .notice { border-left: 4px solid var(--accent); padding: .25rem .75rem; background: var(--panel); }
        .error { color: var(--error); border-left: 4px solid var(--error); padding: .25rem .75rem; background: #fdf0ef; }
        .once { border: 2px solid var(--accent); border-radius: .35rem; padding: .5rem 1rem; margin: 0 0 1.5rem; background: var(--panel); }
        .copy-button { margin-left: .5rem; padding: .2rem .6rem; font-size: .85rem; }
        .qr-figure { margin: 0 0 1rem; }
        .qr { width: 12rem; height: 12rem; }
        #members li { padding: .25rem 0; }
        .member-role { color: var(--muted); margin-left: .5rem; }
        footer.foot { max-width: 64rem; margin: 2rem auto 0; padding: 1rem 1.5rem; color: var(--muted); border-top: 1px solid var(--line); }
        /* settings */
        fieldset { border: 1px solid var(--line); border-radius: .35rem; margin: 0 0 1.25rem; padding: .75rem 1rem 0; }
        legend { font-weight: 700; padding: 0 .35rem; }
        .field.check { display: flex; flex-wrap: wrap; align-items: center; gap: .5rem; }
        .field.check input { width: auto; margin: 0; }
        .field.check label { margin: 0; }
        .field.check .help { width: 100%; }
        .actions { display: flex; flex-wrap: wrap; gap: .5rem; }
        button.danger { background: var(--error); border-color: var(--error); color: #ffffff; }
        #preview pre { border: 1px solid var(--line); border-radius: .35rem; padding: .5rem; background: var(--panel); }
        /* observe: charts (SVG drawn by the server; colours here, no style attribute), audit, outbox, webhooks */
        .charts { display: grid; grid-template-columns: repeat(auto-fill, minmax(20rem, 1fr)); gap: 1rem; }
        .chart-figure { margin: 0 0 1rem; }
        .chart-figure figcaption { font-weight: 600; margin: 0 0 .25rem; }
        .chart-total { color: var(--muted); font-weight: 400; margin-left: .35rem; }
        svg.chart { width: 100%; height: auto; max-width: 40rem; background: var(--bg); }
        svg.chart .axis line { stroke: var(--line); stroke-width: 1; }
        svg.chart text { fill: var(--fg); font-size: 12px; font-family: system-ui, sans-serif; }
        svg.chart text.tick, svg.chart text.empty { fill: var(--muted); }
        svg.chart .bar { fill: var(--accent); }
        svg.chart-failures .bar { fill: #a50e0e; }
        svg.chart-lockouts .bar { fill: #8a4b00; }
        svg.chart-new-users .bar { fill: #1b6e3a; }
        svg.chart-backlog .bar { fill: #5b2c8f; }
        svg.chart-outbox .bar { fill: #3c4043; }
        .chart-data { margin: 0 0 1.5rem; }
        .chart-data summary { cursor: pointer; color: var(--accent); font-weight: 600; }
        .filters { display: grid; grid-template-columns: repeat(auto-fill, minmax(12rem, 1fr)); gap: 0 1rem; align-items: end; margin: 0 0 1rem; }
        .filters button { margin: 0 0 1rem; }
        fieldset.types { display: grid; grid-template-columns: repeat(auto-fill, minmax(15rem, 1fr)); gap: .25rem 1rem; padding-bottom: .75rem; }
        div.check { display: flex; align-items: center; gap: .5rem; margin: 0 0 .5rem; }
        div.check input { width: auto; margin: 0; }
        div.check label { margin: 0; font-weight: 400; }
        form.inline { margin: 0 0 1rem; }
        .status-failed, .status-dead { color: var(--error); font-weight: 600; }
        [hidden] { display: none !important; }
        .passkey { margin-top: 1.5rem; }
        /* users */
        form.action { margin: 0 0 1.25rem; }
        form.action .help { margin: 0 0 .5rem; }
        td.row-actions form { display: inline-block; margin: 0 .35rem .25rem 0; }
        .danger-zone { border-top: 2px solid var(--error); margin-top: 2rem; }
        """

    static let script = """
        // CosyncAuth Portal: progressive enhancement only (copy buttons, passkeys). Every page works without it
        // except the passkey ceremony.
        (function () {
          "use strict";
          if (!navigator.clipboard || !document.querySelectorAll) { return; }
          var body = document.body;
          var label = body.getAttribute("data-copy-label") || "Copy";
          var done = body.getAttribute("data-copied-label") || "Copied";
          var values = document.querySelectorAll("code.copyable");
          Array.prototype.forEach.call(values, function (value) {
            var button = document.createElement("button");
            button.type = "button";
            button.className = "secondary copy-button";
            button.textContent = label;
            if (value.id) { button.setAttribute("aria-describedby", value.id); }
            button.addEventListener("click", function () {
              navigator.clipboard.writeText(value.textContent || "").then(function () {
                button.textContent = done;
                setTimeout(function () { button.textContent = label; }, 2000);
              }, function () {});
            });
            value.parentNode.insertBefore(button, value.nextSibling);
          });
        })();
        // Passkeys (WebAuthn): the buttons with data-passkey="create" or "get" run a ceremony against the JSON
        // endpoints their data attributes name, with the page's CSRF token, then go where the server says.
        (function () {
          "use strict";
          var buttons = document.querySelectorAll("button[data-passkey]");
          if (!buttons.length) { return; }
          var supported = !!(window.PublicKeyCredential && navigator.credentials && window.fetch && window.atob);
          function toBytes(text) {
            var s = String(text).split("-").join("+").split("_").join("/");
            while (s.length % 4) { s += "="; }
            var raw = atob(s), out = new Uint8Array(raw.length);
            for (var i = 0; i < raw.length; i++) { out[i] = raw.charCodeAt(i); }
            return out.buffer;
          }
          function toText(buffer) {
            var bytes = new Uint8Array(buffer), s = "";
            for (var i = 0; i < bytes.length; i++) { s += String.fromCharCode(bytes[i]); }
            s = btoa(s).split("+").join("-").split("/").join("_");
            while (s.charAt(s.length - 1) === "=") { s = s.slice(0, -1); }
            return s;
          }
          function ids(list) { (list || []).forEach(function (c) { c.id = toBytes(c.id); }); }
          function credentialJSON(c) {
            var r = c.response, out = { id: c.id, rawId: toText(c.rawId), type: c.type, response: { clientDataJSON: toText(r.clientDataJSON) } };
            if (r.attestationObject) {
              out.response.attestationObject = toText(r.attestationObject);
              if (r.getTransports) { out.response.transports = r.getTransports(); }
            } else {
              out.response.authenticatorData = toText(r.authenticatorData);
              out.response.signature = toText(r.signature);
              if (r.userHandle) { out.response.userHandle = toText(r.userHandle); }
            }
            return out;
          }
          function post(url, body) {
            return fetch(url, {
              method: "POST", credentials: "same-origin",
              headers: { "Content-Type": "application/json", "X-CSRF-Token": body.csrf },
              body: JSON.stringify(body)
            }).then(function (answer) {
              return answer.json().then(function (json) {
                // A refusal that names a page (a fresh sign-in is needed first): go there; the chain stops.
                if (!answer.ok && json.location) { window.location.assign(json.location); return new Promise(function () {}); }
                if (!answer.ok) { var e = new Error(json.message || ""); e.fromServer = true; throw e; }
                return json;
              });
            });
          }
          Array.prototype.forEach.call(buttons, function (button) {
            var status = button.parentNode.querySelector("[role=alert]");
            function say(text) { if (status) { status.textContent = text || ""; status.hidden = !text; } }
            if (!supported) { say(button.getAttribute("data-text-unsupported")); return; }
            button.hidden = false;
            button.addEventListener("click", function () {
              var create = button.getAttribute("data-passkey") === "create";
              var body = { csrf: button.getAttribute("data-csrf") };
              var name = document.getElementById(button.getAttribute("data-name-field") || "");
              if (name && name.value) { body.name = name.value; }
              if (button.getAttribute("data-next")) { body.next = button.getAttribute("data-next"); }
              button.disabled = true;
              say("");
              post(button.getAttribute("data-options"), body).then(function (answer) {
                var o = answer.publicKey;
                o.challenge = toBytes(o.challenge);
                if (create) {
                  o.user.id = toBytes(o.user.id);
                  ids(o.excludeCredentials);
                  return navigator.credentials.create({ publicKey: o });
                }
                ids(o.allowCredentials);
                return navigator.credentials.get({ publicKey: o });
              }).then(function (credential) {
                if (!credential) { throw new Error(""); }
                body.credential = credentialJSON(credential);
                return post(button.getAttribute("data-finish"), body);
              }).then(function (answer) {
                window.location.assign(answer.location);
              }).catch(function (error) {
                button.disabled = false;
                if (error && error.fromServer && error.message) { say(error.message); }
                else if (error && error.name === "NotAllowedError") { say(button.getAttribute("data-text-cancelled")); }
                else if (error && error.name === "InvalidStateError") { say(button.getAttribute("data-text-failed")); }
                else { say(button.getAttribute("data-text-failed")); }
              });
            });
          });
        })();
        """
}
