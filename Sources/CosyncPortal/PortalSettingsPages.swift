import CosyncAuth
import Foundation
import HTTPTypes
import Hummingbird

/// The auth settings of an app, its e-mail templates, its lifecycle (suspend, activate, delete) and its
/// keys (the app token, the app secret, the RSA signing key, the JWKS link).
///
/// Every change goes through the core service the admin API calls: a settings form is a PATCH of the
/// app (`services.apps.update`, the same validation and messages), a template is the admin API's PUT
/// (`services.records.putTemplate`), and the preview renders a draft with the courier's own renderer
/// (`Outbox.compose`, through `services.records.previewTemplate`) without storing it.
///
/// Roles: viewers read; editors save settings and templates; owners (and operators) rotate keys and
/// delete the app, after a fresh sign-in; only operators suspend and activate an app, as only the
/// operator may change `status` through the admin API.
extension PortalRoutes {
    func registerSettings(on router: Router<Context>) {
        router.get("portal/apps/:appId/settings") { request, context in
            await settingsPage(request, appId: context.parameters.get("appId") ?? "")
        }
        router.post("portal/apps/:appId/settings") { request, context in
            await saveSettings(request, appId: context.parameters.get("appId") ?? "")
        }
        router.post("portal/apps/:appId/status") { request, context in
            await setStatus(request, appId: context.parameters.get("appId") ?? "")
        }
        router.post("portal/apps/:appId/delete") { request, context in
            await deleteApp(request, appId: context.parameters.get("appId") ?? "")
        }
        router.post("portal/apps/:appId/keys/rotate-secret") { request, context in
            await rotateSecret(request, appId: context.parameters.get("appId") ?? "")
        }
        router.post("portal/apps/:appId/keys/rotate-rsa") { request, context in
            await rotateRSA(request, appId: context.parameters.get("appId") ?? "")
        }
        router.get("portal/apps/:appId/emails") { request, context in
            await emailsPage(request, appId: context.parameters.get("appId") ?? "")
        }
        router.post("portal/apps/:appId/emails") { request, context in
            await saveEmail(request, appId: context.parameters.get("appId") ?? "")
        }
    }

    // MARK: the settings form

    /// One setting of the form: its admin API field name (also the form field's name and the element id,
    /// except the metadata fields, whose id was `metadataFields` from the start), and how it is edited.
    struct Setting {
        enum Kind {
            case choice([String])
            case flag
            case number
            case text
            /// A JSON array of strings, edited as one line separated by commas or spaces.
            case words
            /// A JSON array of strings, edited one per line.
            case lines
            /// A JSON value (the metadata descriptors), edited as JSON.
            case json
        }

        let field: String
        let kind: Kind
        let label: PortalText.Key
        var help: PortalText.Key? = nil
        var id: String { field == "metaData" ? "metadataFields" : field }
    }

    struct SettingGroup {
        let legend: PortalText.Key
        let settings: [Setting]
        var appKeyOnly = false
    }

    static var settingGroups: [SettingGroup] {
        [
            SettingGroup(
                legend: .settingsSignupGroup,
                settings: [
                    Setting(field: "signupFlow", kind: .choice(["none", "code", "link"]), label: .signupFlowLabel),
                    Setting(field: "handleType", kind: .choice(AppSettings.HandleType.allCases.map(\.rawValue)), label: .handleTypeLabel, help: .handleTypeHelp),
                    Setting(field: "userNamesEnabled", kind: .flag, label: .userNamesLabel),
                    Setting(field: "anonymousLoginEnabled", kind: .flag, label: .anonymousLoginLabel),
                    Setting(field: "locales", kind: .words, label: .localesLabel, help: .localesHelp),
                ]),
            SettingGroup(
                legend: .settingsPasswordGroup,
                settings: [
                    Setting(field: "passwordFilter", kind: .flag, label: .passwordFilterLabel, help: .passwordFilterHelp),
                    Setting(field: "passwordMinLength", kind: .number, label: .passwordMinLengthLabel, help: .range0to128),
                    Setting(field: "passwordMinUpper", kind: .number, label: .passwordMinUpperLabel, help: .range0to128),
                    Setting(field: "passwordMinLower", kind: .number, label: .passwordMinLowerLabel, help: .range0to128),
                    Setting(field: "passwordMinDigit", kind: .number, label: .passwordMinDigitLabel, help: .range0to128),
                    Setting(field: "passwordMinSpecial", kind: .number, label: .passwordMinSpecialLabel, help: .range0to128),
                ]),
            SettingGroup(
                legend: .settingsSessionGroup,
                settings: [
                    Setting(
                        field: "twoFactorVerification", kind: .choice(AppSettings.TwoFactorMode.allCases.map(\.rawValue)),
                        label: .twoFactorLabel, help: .twoFactorHelp),
                    Setting(field: "userJWTExpiration", kind: .number, label: .jwtExpiryLabel, help: .jwtExpiryHelp),
                    Setting(field: "freshAuthMinutes", kind: .number, label: .freshAuthLabel, help: .freshAuthHelp),
                ]),
            SettingGroup(
                legend: .settingsProvidersGroup,
                settings: [
                    Setting(field: "appleLoginEnabled", kind: .flag, label: .appleLoginLabel),
                    Setting(field: "appleBundleId", kind: .text, label: .appleBundleIdLabel, help: .commaListHelp),
                    Setting(field: "googleLoginEnabled", kind: .flag, label: .googleLoginLabel),
                    Setting(field: "googleClientId", kind: .text, label: .googleClientIdLabel, help: .commaListHelp),
                    Setting(field: "googleAppName", kind: .text, label: .googleAppNameLabel),
                ]),
            SettingGroup(
                legend: .settingsMetadataGroup,
                settings: [
                    Setting(field: "metaData", kind: .json, label: .metadataLabel, help: .metadataHelp),
                    Setting(field: "metaDataInvite", kind: .json, label: .metadataInviteLabel, help: .metadataInviteHelp),
                ]),
            SettingGroup(
                legend: .settingsPasskeyGroup,
                settings: [
                    Setting(field: "rpId", kind: .text, label: .rpIdLabel, help: .rpIdHelp),
                    Setting(field: "rpName", kind: .text, label: .rpNameLabel, help: .rpNameHelp),
                    Setting(field: "allowedOrigins", kind: .lines, label: .allowedOriginsLabel, help: .allowedOriginsHelp),
                    Setting(
                        field: "userVerification", kind: .choice(AppSettings.UserVerification.allCases.map(\.rawValue)),
                        label: .userVerificationLabel),
                    Setting(
                        field: "attestation", kind: .choice(AppSettings.AttestationPolicy.allCases.map(\.rawValue)), label: .attestationLabel,
                        help: .attestationHelp),
                    Setting(field: "trustAnchors", kind: .lines, label: .trustAnchorsLabel, help: .trustAnchorsHelp),
                    Setting(field: "passkeysPerUser", kind: .number, label: .passkeysPerUserLabel, help: .range1to100),
                    Setting(field: "challengeLifetimeSeconds", kind: .number, label: .challengeLifetimeLabel, help: .range60to600),
                    Setting(
                        field: "counterRegression", kind: .choice(AppSettings.CounterRegression.allCases.map(\.rawValue)),
                        label: .counterRegressionLabel),
                    Setting(field: "signupCodeLifetimeSeconds", kind: .number, label: .signupCodeLifetimeLabel, help: .range60to86400),
                ],
                appKeyOnly: true),
        ]
    }

    /// The groups an app's form shows: the passkey relying party only for AppKey apps.
    static func groups(for app: App) -> [SettingGroup] {
        settingGroups.filter { !$0.appKeyOnly || app.product == .appKey }
    }

    /// The text a setting's field shows for a stored value.
    static func formText(_ setting: Setting, _ value: JSONValue?) -> String {
        guard let value else { return "" }
        switch setting.kind {
        case .choice, .text: return value.stringValue ?? ""
        case .number:
            if case .int(let number) = value { return String(number) }
            return ""
        case .flag: return value.boolValue == true ? "true" : ""
        case .words: return (value.arrayValue ?? []).compactMap(\.stringValue).joined(separator: ", ")
        case .lines: return (value.arrayValue ?? []).compactMap(\.stringValue).joined(separator: "\n")
        case .json:
            let encoder = JSONCoding.encoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes, .prettyPrinted]
            return (try? encoder.encode(value)).map { String(decoding: $0, as: UTF8.self) } ?? "[]"
        }
    }

    /// The app's settings as the admin API shows them (field name → JSON value).
    static func storedSettings(_ app: App) -> [String: JSONValue] {
        (try? JSONCoding.tree(app.settings))?.objectValue ?? [:]
    }

    /// The values the form shows: the stored settings, or what was sent (after a refusal).
    func settingsForm(
        _ visitor: Visitor, app: App, role: PortalRole, sent: [String: String]? = nil, invalidField: String? = nil, error: String? = nil,
        notice: String? = nil, status: HTTPResponse.Status = .ok
    ) -> Response {
        let stored = Self.storedSettings(app)
        let shownFlags = Set((sent?["flags"] ?? "").split(separator: ",").map(String.init))
        var flags: [String] = []
        let groups: [[String: Any]] = Self.groups(for: app).map { group in
            let fields: [[String: Any]] = group.settings.map { setting in
                let storedText = Self.formText(setting, stored[setting.field])
                var text = storedText
                if let sent {
                    if case .flag = setting.kind {
                        if sent[setting.id] != nil { text = "true" } else if shownFlags.contains(setting.id) { text = "" }
                    } else if let value = sent[setting.id] {
                        text = value
                    }
                }
                var options: [[String: Any]] = []
                var isSelect = false, isFlag = false, isTextarea = false, isNumber = false
                switch setting.kind {
                case .choice(let values):
                    isSelect = true
                    options = values.map { ["value": $0, "optionLabel": $0, "selected": $0 == text] }
                    if !values.contains(text) { options.append(["value": text, "optionLabel": text, "selected": true]) }
                case .flag:
                    isFlag = true
                    flags.append(setting.id)
                case .lines, .json: isTextarea = true
                case .number: isNumber = true
                case .text, .words: break
                }
                let helpId = setting.help == nil ? "" : setting.id + "-help"
                let invalid = invalidField.map { $0 == setting.field || $0.hasPrefix(setting.field + "[") || $0.hasPrefix(setting.field + ".") } ?? false
                let described = ([helpId] + (invalid ? ["form-error"] : [])).filter { !$0.isEmpty }.joined(separator: " ")
                let shown = isFlag ? (text == "true" ? PortalText.text(.yes) : PortalText.text(.no)) : text
                return [
                    "id": setting.id, "label": PortalText.text(setting.label), "help": setting.help.map { PortalText.text($0) } ?? "",
                    "helpId": helpId, "hasHelp": !helpId.isEmpty, "described": described, "hasDescribed": !described.isEmpty, "invalid": invalid, "isSelect": isSelect, "options": options, "isFlag": isFlag,
                    "checked": text == "true", "isTextarea": isTextarea, "rows": setting.field.hasPrefix("metaData") ? 8 : 4,
                    "isNumber": isNumber, "isPlain": !isSelect && !isFlag && !isTextarea && !isNumber, "value": text, "shown": shown,
                    "isBlock": isTextarea,
                ]
            }
            return ["legend": PortalText.text(group.legend), "fields": fields]
        }
        let isOwner = role == .owner, isOperator = visitor.session.account.isOperator
        return appPage(
            visitor, app: app, current: "settings", heading: .settingsTitle, template: "settings.form",
            values: [
                "canEdit": role != .viewer, "csrf": csrf.token(bound: visitor.cookie, purpose: "settings:" + app.appId), "groups": groups,
                "flags": flags.joined(separator: ","), "appName": app.name, "appStatus": app.status.rawValue,
                "isActive": app.status == .active, "canManage": isOwner, "canSetStatus": isOperator,
                "statusCSRF": csrf.token(bound: visitor.cookie, purpose: "app-status:" + app.appId),
                "deleteCSRF": csrf.token(bound: visitor.cookie, purpose: "delete-app:" + app.appId),
            ],
            error: error, notice: notice, status: status)
    }

    func settingsPage(_ request: Request, appId: String) async -> Response {
        await signedIn(request) { visitor in
            let (app, role) = try await access(visitor, appId: appId)
            let notice: String? =
                switch PortalForm.queryParameters(request)?["done"] {
                case "suspended": PortalText.text(.appSuspended)
                case "active": PortalText.text(.appActivated)
                default: nil
                }
            return settingsForm(visitor, app: app, role: role, notice: notice)
        }
    }

    /// The PATCH a settings form asks for: only the settings whose value differs from the stored one
    /// (so the audit names what changed). A field the form did not send is left as it is; a check box
    /// the form showed (`flags`) and did not send is false. Nil and a message when a JSON field is not JSON.
    static func settingsPatch(_ form: [String: String], app: App) -> (patch: [String: JSONValue], invalid: (field: String, text: String)?) {
        let stored = storedSettings(app)
        let shownFlags = Set((form["flags"] ?? "").split(separator: ",").map(String.init))
        var patch: [String: JSONValue] = [:]
        for group in groups(for: app) {
            for setting in group.settings {
                let raw = form[setting.id]
                let value: JSONValue
                switch setting.kind {
                case .flag:
                    guard raw != nil || shownFlags.contains(setting.id) else { continue }
                    value = .bool(raw != nil)
                case .choice, .text:
                    guard let raw else { continue }
                    value = .string(raw)
                case .number:
                    guard let raw else { continue }
                    let trimmed = raw.trimmingCharacters(in: .whitespaces)
                    // Not an integer: sent as text, so that the API's own message says what it must be.
                    value = Int(trimmed).map { .int($0) } ?? .string(trimmed)
                case .words:
                    guard let raw else { continue }
                    let words = raw.split(whereSeparator: { $0 == "," || $0.isWhitespace }).map { JSONValue.string(String($0)) }
                    value = .array(words)
                case .lines:
                    guard let raw else { continue }
                    let lines = raw.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
                    value = .array(lines.map { .string($0) })
                case .json:
                    guard let raw else { continue }
                    let trimmed = raw.trimmingCharacters(in: .whitespacesAndNewlines)
                    if trimmed.isEmpty {
                        value = .array([])
                    } else if let parsed = try? JSONDecoder().decode(JSONValue.self, from: Data(trimmed.utf8)) {
                        value = parsed
                    } else {
                        let key: PortalText.Key = setting.field == "metaData" ? .metadataNotJSON : .metadataInviteNotJSON
                        return (patch, (setting.field, PortalText.text(key)))
                    }
                }
                if stored[setting.field] != value { patch[setting.field] = value }
            }
        }
        return (patch, nil)
    }

    /// `POST /portal/apps/{appId}/settings` (editors, owners, operators): a PATCH of the app through the
    /// admin service; its validation messages show in the form and nothing changes.
    func saveSettings(_ request: Request, appId: String) async -> Response {
        await signedInPost(request, purpose: "settings:" + appId) { visitor, form in
            let (app, role) = try await access(visitor, appId: appId)
            guard role != .viewer else { throw Stop.forbidden }
            let (patch, invalid) = Self.settingsPatch(form, app: app)
            if let invalid {
                return settingsForm(
                    visitor, app: app, role: role, sent: form, invalidField: invalid.field, error: invalid.text, status: .badRequest)
            }
            do {
                if !patch.isEmpty { _ = try await services.apps.update(app: app, patch: patch, actor: visitor.actor) }
                let (saved, _) = try await access(visitor, appId: appId)
                return settingsForm(visitor, app: saved, role: role, notice: PortalText.text(.settingsSaved))
            } catch {
                guard let (text, status) = Self.formError(error) else { throw error }
                var field: String?
                if case AdminFailure.invalid(let failure) = error { field = failure.field }
                return settingsForm(visitor, app: app, role: role, sent: form, invalidField: field, error: text, status: status)
            }
        }
    }

    // MARK: lifecycle

    /// `POST /portal/apps/{appId}/status` (operators): `status` = `suspended` or `active`, through the
    /// admin PATCH. A suspended app's end-user API answers 402.
    func setStatus(_ request: Request, appId: String) async -> Response {
        await signedInPost(request, purpose: "app-status:" + appId) { visitor, form in
            let (app, role) = try await access(visitor, appId: appId)
            // The admin API lets only the operator change an app's status (an app's own secret cannot).
            guard visitor.session.account.isOperator else { throw Stop.forbidden }
            let wanted = form["status"] ?? ""
            do {
                _ = try await services.apps.update(app: app, patch: ["status": .string(wanted)], actor: visitor.actor)
            } catch {
                guard let (text, status) = Self.formError(error) else { throw error }
                return settingsForm(visitor, app: app, role: role, error: text, status: status)
            }
            return PortalPages.redirect("/portal/apps/\(app.appId)/settings?done=" + PortalForm.encode(wanted))
        }
    }

    /// `POST /portal/apps/{appId}/delete` (owners, operators): needs a fresh sign-in and the app's name
    /// typed in `confirmName`; deletes as the admin API's DELETE does.
    func deleteApp(_ request: Request, appId: String) async -> Response {
        await signedInPost(request, purpose: "delete-app:" + appId) { visitor, form in
            let (app, role) = try await access(visitor, appId: appId)
            guard role == .owner else { throw Stop.forbidden }
            guard visitor.isFresh else { throw Stop.reauth(next: "/portal/apps/\(app.appId)/settings") }
            guard (form["confirmName"] ?? "").trimmingCharacters(in: .whitespaces) == app.name else {
                return settingsForm(
                    visitor, app: app, role: role, invalidField: "confirmName", error: PortalText.text(.confirmNameWrong), status: .badRequest)
            }
            try await services.apps.delete(app: app, actor: visitor.actor)
            return PortalPages.redirect("/portal")
        }
    }

    // MARK: keys

    func keysForm(
        _ visitor: Visitor, app: App, role: PortalRole, shown: [String: String]? = nil, grace: String = "0", retire: String = "",
        error: String? = nil, status: HTTPResponse.Status = .ok
    ) async throws -> Response {
        let view = try await services.apps.view(app: app)
        var values: [String: Any] = [
            "canEdit": role == .owner, "csrf": csrf.token(bound: visitor.cookie, purpose: "rotate-token:" + app.appId),
            "secretCSRF": csrf.token(bound: visitor.cookie, purpose: "rotate-secret:" + app.appId),
            "rsaCSRF": csrf.token(bound: visitor.cookie, purpose: "rotate-rsa:" + app.appId),
            "rawPublicKey": view.rawPublicKey ?? "", "grace": grace, "retire": retire,
            "jwksURL": "/apps/\(app.appId)/.well-known/jwks.json", "jwtHours": String(app.settings.userJWTExpiration),
        ]
        var notice: String?
        if let shown {
            if let token = shown["token"] { values["appToken"] = token }
            if let secret = shown["secret"] { values["appSecret"] = secret }
            switch shown["kind"] {
            case "rotated": notice = PortalText.text(.tokenRotated)
            case "secret": notice = PortalText.text(.secretRotated)
            case "rsa": notice = PortalText.text(.rsaRotated, ["date": shown["retiresAt"] ?? ""])
            default: break
            }
        }
        return appPage(
            visitor, app: app, current: "keys", heading: .keysTitle, template: "settings.keys", values: values, error: error, notice: notice,
            status: status)
    }

    /// `GET /portal/apps/{appId}/keys`: after a creation or a rotation, the new token or secret once
    /// (the hand-over cookie): only to the session that made it, with the owner role (an operator's
    /// too), for this app. Any hand-over cookie this page receives is cleared here, shown or not (an
    /// enrolment's excepted: it belongs to a browser not signed in yet).
    func keysPage(_ request: Request, appId: String) async -> Response {
        await signedIn(request) { visitor in
            let (app, role) = try await access(visitor, appId: appId)
            var shown: [String: String]?
            var clear: [String] = []
            if let raw = PortalCookies.value(request, cookies.onceName) {
                let fields = sealer.open(raw)
                if fields?["kind"] != "enrol" { clear = [cookies.clear(cookies.onceName)] }
                if let fields, ["created", "rotated", "secret", "rsa"].contains(fields["kind"] ?? ""), fields["appId"] == app.appId,
                    fields["sid"] == visitor.session.id.uuidString.lowercased(), role == .owner
                {
                    shown = fields
                }
            }
            var response = try await keysForm(visitor, app: app, role: role, shown: shown)
            for cookie in clear { response.headers.append(HTTPField(name: .setCookie, value: cookie)) }
            return response
        }
    }

    /// `POST /portal/apps/{appId}/keys/rotate-token` (owners, operators): needs a fresh sign-in; the grace period is checked
    /// as the admin API checks `gracePeriodSeconds`.
    func rotateToken(_ request: Request, appId: String) async -> Response {
        await signedInPost(request, purpose: "rotate-token:" + appId) { visitor, form in
            let (app, role) = try await access(visitor, appId: appId)
            // The app token gives the whole admin API of the app: owners (and operators) only.
            guard role == .owner else { throw Stop.forbidden }
            guard visitor.isFresh else { throw Stop.reauth(next: "/portal/apps/\(app.appId)/keys") }
            let raw = (form["graceSeconds"] ?? "").trimmingCharacters(in: .whitespaces)
            let grace = raw.isEmpty ? 0 : Int(raw)
            guard let grace, (0...2_592_000).contains(grace) else {
                return try await keysForm(visitor, app: app, role: role, grace: raw, error: PortalText.text(.graceInvalid), status: .badRequest)
            }
            let rotation = try await services.apps.rotateAppToken(app: app, graceSeconds: grace, actor: visitor.actor)
            return try showOnce(visitor, ["kind": "rotated", "appId": app.appId, "token": rotation.appToken], on: "/portal/apps/\(app.appId)/keys")
        }
    }

    /// `POST /portal/apps/{appId}/keys/rotate-secret` (owners, operators, fresh sign-in): a new app
    /// secret, shown once on the keys page; the old one stops at once.
    func rotateSecret(_ request: Request, appId: String) async -> Response {
        await signedInPost(request, purpose: "rotate-secret:" + appId) { visitor, _ in
            let (app, role) = try await access(visitor, appId: appId)
            guard role == .owner else { throw Stop.forbidden }
            guard visitor.isFresh else { throw Stop.reauth(next: "/portal/apps/\(app.appId)/keys") }
            let secret = try await services.apps.rotateAppSecret(app: app, actor: visitor.actor)
            return try showOnce(visitor, ["kind": "secret", "appId": app.appId, "secret": secret], on: "/portal/apps/\(app.appId)/keys")
        }
    }

    /// `POST /portal/apps/{appId}/keys/rotate-rsa` (owners, operators, fresh sign-in): a new signing key;
    /// the old public key stays in the JWKS for `retireAfterHours` (0…8760, as the admin API checks it;
    /// empty: the app's JWT expiry).
    func rotateRSA(_ request: Request, appId: String) async -> Response {
        await signedInPost(request, purpose: "rotate-rsa:" + appId) { visitor, form in
            let (app, role) = try await access(visitor, appId: appId)
            guard role == .owner else { throw Stop.forbidden }
            guard visitor.isFresh else { throw Stop.reauth(next: "/portal/apps/\(app.appId)/keys") }
            let raw = (form["retireAfterHours"] ?? "").trimmingCharacters(in: .whitespaces)
            var hours: Int?
            if !raw.isEmpty {
                guard let value = Int(raw), (0...8760).contains(value) else {
                    return try await keysForm(visitor, app: app, role: role, retire: raw, error: PortalText.text(.retireInvalid), status: .badRequest)
                }
                hours = value
            }
            let rotation = try await services.apps.rotateKeys(app: app, retireAfterHours: hours, actor: visitor.actor)
            return try showOnce(
                visitor, ["kind": "rsa", "appId": app.appId, "retiresAt": Self.date(rotation.previousKeyRetiresAt)],
                on: "/portal/apps/\(app.appId)/keys")
        }
    }

    // MARK: e-mail templates

    /// The template and locale a page or form is about: a known template name and one of the app's
    /// locales (the first ones when not given); nil when the request names others.
    static func templateKey(_ values: [String: String]?, app: App) -> (name: String, locale: String)? {
        let name = values?["template"].flatMap { $0.isEmpty ? nil : $0 } ?? EmailTemplate.names[0]
        let locale = values?["locale"].flatMap { $0.isEmpty ? nil : $0 } ?? app.settings.locales.first ?? Locales.defaultLocale
        guard EmailTemplate.names.contains(name), app.settings.locales.contains(locale) else { return nil }
        return (name, locale)
    }

    func emailsForm(
        _ visitor: Visitor, app: App, role: PortalRole, name: String, locale: String, draft: EmailTemplate, isDefault: Bool,
        preview: Outbox.Rendered? = nil, error: String? = nil, notice: String? = nil, status: HTTPResponse.Status = .ok
    ) -> Response {
        let templates: [[String: Any]] = EmailTemplate.names.map { ["value": $0, "selected": $0 == name] }
        let locales: [[String: Any]] = app.settings.locales.map { ["value": $0, "selected": $0 == locale] }
        var values: [String: Any] = [
            "canEdit": role != .viewer, "csrf": csrf.token(bound: visitor.cookie, purpose: "emails:" + app.appId),
            "templates": templates, "locales": locales, "template": name, "locale": locale, "subject": draft.subject, "html": draft.html,
            "text": draft.text, "replyTo": draft.replyTo, "localeLinkText": draft.localeLinkText, "isDefault": isDefault,
            "isSMS": name == "sms",
        ]
        if let preview {
            values["preview"] = [
                "subject": preview.subject, "html": preview.html, "text": preview.text, "hasSubject": !preview.subject.isEmpty,
                "hasHTML": !preview.html.isEmpty, "hasText": !preview.text.isEmpty,
            ] as [String: Any]
        }
        return appPage(
            visitor, app: app, current: "emails", heading: .emailsTitle, template: "settings.emails", values: values, error: error, notice: notice,
            status: status)
    }

    /// `GET /portal/apps/{appId}/emails?template=&locale=`: the app's template (or the built-in one).
    func emailsPage(_ request: Request, appId: String) async -> Response {
        await signedIn(request) { visitor in
            let (app, role) = try await access(visitor, appId: appId)
            let query = PortalForm.queryParameters(request)
            guard query != nil else { throw Stop.badRequest }
            guard let key = Self.templateKey(query, app: app) else { throw Stop.notFound }
            let view = try await services.records.template(app: app, name: key.name, locale: key.locale)
            let notice = query?["saved"] == "1" ? PortalText.text(.templateSaved) : query?["reset"] == "1" ? PortalText.text(.templateReset) : nil
            return emailsForm(
                visitor, app: app, role: role, name: key.name, locale: key.locale, draft: view.template, isDefault: view.isDefault, notice: notice)
        }
    }

    /// `POST /portal/apps/{appId}/emails` (editors, owners, operators): `action` = `preview` (renders the
    /// draft with the courier's renderer; nothing stored), `save` (the admin API's PUT) or `reset`
    /// (back to the built-in template).
    func saveEmail(_ request: Request, appId: String) async -> Response {
        await signedInPost(request, purpose: "emails:" + appId) { visitor, form in
            let (app, role) = try await access(visitor, appId: appId)
            guard role != .viewer else { throw Stop.forbidden }
            guard let key = Self.templateKey(form, app: app) else { throw Stop.notFound }
            var input: [String: JSONValue] = [:]
            for field in ["subject", "html", "text", "replyTo", "localeLinkText"] {
                if let value = form[field] { input[field] = .string(value) }
            }
            let typed = EmailTemplate(
                subject: form["subject"] ?? "", html: form["html"] ?? "", text: form["text"] ?? "", replyTo: form["replyTo"] ?? "",
                localeLinkText: form["localeLinkText"] ?? "")
            let location = "/portal/apps/\(app.appId)/emails?template=\(PortalForm.encode(key.name))&locale=\(PortalForm.encode(key.locale))"
            do {
                switch form["action"] ?? "save" {
                case "preview":
                    let preview = try services.records.previewTemplate(
                        app: app, name: key.name, locale: key.locale, input: input, publicURL: services.configuration.publicURL)
                    return emailsForm(
                        visitor, app: app, role: role, name: key.name, locale: key.locale, draft: preview.template, isDefault: false,
                        preview: preview.rendered, notice: PortalText.text(.previewNotSaved))
                case "save":
                    _ = try await services.records.putTemplate(app: app, name: key.name, locale: key.locale, input: input, actor: visitor.actor)
                    return PortalPages.redirect(location + "&saved=1")
                case "reset":
                    _ = try await services.records.resetTemplate(app: app, name: key.name, locale: key.locale, actor: visitor.actor)
                    return PortalPages.redirect(location + "&reset=1")
                default:
                    throw Stop.badRequest
                }
            } catch {
                guard let (text, status) = Self.formError(error) else { throw error }
                return emailsForm(
                    visitor, app: app, role: role, name: key.name, locale: key.locale, draft: typed, isDefault: false, error: text, status: status)
            }
        }
    }
}

extension PortalPages {
    /// The settings slice's templates: the settings form with the app's lifecycle, the keys page, the
    /// e-mail template editor. The preview shows the rendered message as text (escaped like every
    /// value): the Portal never puts a template's HTML into its own page.
    static let settingsTemplates: [String: String] = [
        "settings.form": """
            {{#canEdit}}
            <form id="settings-form" method="post" action="/portal/apps/{{appId}}/settings" class="card wide">
            <input type="hidden" name="csrf" value="{{csrf}}">
            <input type="hidden" name="flags" value="{{flags}}">
            {{#groups}}
            <fieldset>
            <legend>{{legend}}</legend>
            {{#fields}}
            <div class="field{{#isFlag}} check{{/isFlag}}">
            {{#isFlag}}<input id="{{id}}" name="{{id}}" type="checkbox" value="true"{{#checked}} checked{{/checked}}{{#hasDescribed}} aria-describedby="{{described}}"{{/hasDescribed}}{{#invalid}} aria-invalid="true"{{/invalid}}>
            <label for="{{id}}">{{label}}</label>{{/isFlag}}
            {{^isFlag}}<label for="{{id}}">{{label}}</label>{{/isFlag}}
            {{#isSelect}}<select id="{{id}}" name="{{id}}"{{#hasDescribed}} aria-describedby="{{described}}"{{/hasDescribed}}{{#invalid}} aria-invalid="true"{{/invalid}}>
            {{#options}}<option value="{{value}}"{{#selected}} selected{{/selected}}>{{optionLabel}}</option>
            {{/options}}
            </select>{{/isSelect}}
            {{#isNumber}}<input id="{{id}}" name="{{id}}" type="text" inputmode="numeric" value="{{value}}"{{#hasDescribed}} aria-describedby="{{described}}"{{/hasDescribed}}{{#invalid}} aria-invalid="true"{{/invalid}}>{{/isNumber}}
            {{#isPlain}}<input id="{{id}}" name="{{id}}" type="text" spellcheck="false" value="{{value}}"{{#hasDescribed}} aria-describedby="{{described}}"{{/hasDescribed}}{{#invalid}} aria-invalid="true"{{/invalid}}>{{/isPlain}}
            {{#isTextarea}}<textarea id="{{id}}" name="{{id}}" rows="{{rows}}" spellcheck="false"{{#hasDescribed}} aria-describedby="{{described}}"{{/hasDescribed}}{{#invalid}} aria-invalid="true"{{/invalid}}>{{value}}</textarea>{{/isTextarea}}
            {{#hasHelp}}<p id="{{helpId}}" class="help">{{help}}</p>{{/hasHelp}}
            </div>
            {{/fields}}
            </fieldset>
            {{/groups}}
            <button id="settings-submit" type="submit">{{t.saveButton}}</button>
            </form>
            {{/canEdit}}
            {{^canEdit}}
            <p class="notice">{{t.readOnlyNote}}</p>
            {{#groups}}
            <h2>{{legend}}</h2>
            <dl class="facts">
            {{#fields}}<div><dt>{{label}}</dt><dd>{{#isBlock}}<pre>{{shown}}</pre>{{/isBlock}}{{^isBlock}}{{shown}}{{/isBlock}}</dd></div>
            {{/fields}}
            </dl>
            {{/groups}}
            {{/canEdit}}
            <section class="card wide" aria-labelledby="lifecycle-heading">
            <h2 id="lifecycle-heading">{{t.lifecycleHeading}}</h2>
            <p>{{t.statusLabel}}: <strong id="app-status">{{appStatus}}</strong></p>
            {{#canSetStatus}}
            {{#isActive}}
            <form id="suspend-app" method="post" action="/portal/apps/{{appId}}/status">
            <input type="hidden" name="csrf" value="{{statusCSRF}}">
            <input type="hidden" name="status" value="suspended">
            <p class="help" id="suspend-help">{{t.suspendHelp}}</p>
            <button id="suspend-app-submit" type="submit" class="secondary" aria-describedby="suspend-help">{{t.suspendAppButton}}</button>
            </form>
            {{/isActive}}
            {{^isActive}}
            <form id="activate-app" method="post" action="/portal/apps/{{appId}}/status">
            <input type="hidden" name="csrf" value="{{statusCSRF}}">
            <input type="hidden" name="status" value="active">
            <button id="activate-app-submit" type="submit">{{t.activateAppButton}}</button>
            </form>
            {{/isActive}}
            {{/canSetStatus}}
            {{^canSetStatus}}<p class="help">{{t.statusOperatorOnly}}</p>{{/canSetStatus}}
            {{#canManage}}
            <h3 id="delete-heading">{{t.deleteHeading}}</h3>
            <form id="delete-app" method="post" action="/portal/apps/{{appId}}/delete" aria-labelledby="delete-heading">
            <input type="hidden" name="csrf" value="{{deleteCSRF}}">
            <p id="delete-help">{{t.deleteHelp}}</p>
            <div class="field">
            <label for="confirmName">{{t.confirmNameLabel}}</label>
            <input id="confirmName" name="confirmName" type="text" autocomplete="off" spellcheck="false" required aria-describedby="delete-help">
            <p class="help">{{t.confirmNameHelp}} <code>{{appName}}</code></p>
            </div>
            <button id="delete-app-submit" type="submit" class="danger">{{t.deleteButton}}</button>
            </form>
            {{/canManage}}
            </section>
            """,
        "settings.keys": """
            {{#appToken}}
            <div class="once" role="status">
            <p>{{t.appTokenOnce}}</p>
            <p class="label" id="app-token-label">{{t.appTokenLabel}}</p>
            <p><code id="app-token" class="copyable wrap">{{appToken}}</code></p>
            </div>
            {{/appToken}}
            {{#appSecret}}
            <div class="once">
            <p>{{t.appSecretOnce}}</p>
            <p class="label" id="app-secret-label">{{t.appSecretLabel}}</p>
            <p><code id="app-secret" class="copyable wrap">{{appSecret}}</code></p>
            </div>
            {{/appSecret}}
            <dl class="facts">
            <div><dt id="app-id-label">{{t.appIdLabel}}</dt><dd><code id="app-id" class="copyable">{{appId}}</code></dd></div>
            <div><dt id="raw-public-key-label">{{t.rawPublicKeyLabel}}</dt><dd><code id="raw-public-key" class="copyable wrap">{{rawPublicKey}}</code></dd></div>
            <div><dt>{{t.jwksLabel}}</dt><dd><a id="jwks-link" href="{{jwksURL}}">{{jwksURL}}</a></dd></div>
            </dl>
            {{#canEdit}}
            <section class="card wide" aria-labelledby="rotate-heading">
            <h2 id="rotate-heading">{{t.rotateTokenHeading}}</h2>
            <p>{{t.rotateTokenHelp}}</p>
            <form id="rotate-token" method="post" action="/portal/apps/{{appId}}/keys/rotate-token">
            <input type="hidden" name="csrf" value="{{csrf}}">
            <div class="field">
            <label for="graceSeconds">{{t.graceLabel}}</label>
            <input id="graceSeconds" name="graceSeconds" type="number" min="0" max="2592000" step="1" value="{{grace}}" aria-describedby="grace-help{{#error}} form-error{{/error}}">
            <p id="grace-help" class="help">{{t.graceHelp}}</p>
            </div>
            <button id="rotate-token-submit" type="submit">{{t.rotateTokenButton}}</button>
            </form>
            </section>
            <section class="card wide" aria-labelledby="rotate-secret-heading">
            <h2 id="rotate-secret-heading">{{t.rotateSecretHeading}}</h2>
            <p id="rotate-secret-help">{{t.rotateSecretHelp}}</p>
            <form id="rotate-secret" method="post" action="/portal/apps/{{appId}}/keys/rotate-secret">
            <input type="hidden" name="csrf" value="{{secretCSRF}}">
            <button id="rotate-secret-submit" type="submit" aria-describedby="rotate-secret-help">{{t.rotateSecretButton}}</button>
            </form>
            </section>
            <section class="card wide" aria-labelledby="rotate-rsa-heading">
            <h2 id="rotate-rsa-heading">{{t.rotateRSAHeading}}</h2>
            <p>{{t.rotateRSAHelp}}</p>
            <form id="rotate-rsa" method="post" action="/portal/apps/{{appId}}/keys/rotate-rsa">
            <input type="hidden" name="csrf" value="{{rsaCSRF}}">
            <div class="field">
            <label for="retireAfterHours">{{t.retireLabel}}</label>
            <input id="retireAfterHours" name="retireAfterHours" type="number" min="0" max="8760" step="1" value="{{retire}}" placeholder="{{jwtHours}}" aria-describedby="retire-help{{#error}} form-error{{/error}}">
            <p id="retire-help" class="help">{{t.retireHelp}}</p>
            </div>
            <button id="rotate-rsa-submit" type="submit">{{t.rotateRSAButton}}</button>
            </form>
            </section>
            {{/canEdit}}
            {{^canEdit}}<p class="notice">{{t.keysOwnerOnly}}</p>{{/canEdit}}
            """,
        "settings.emails": """
            <form id="template-choice" method="get" action="/portal/apps/{{appId}}/emails" class="search">
            <div class="field">
            <label for="template">{{t.templateLabel}}</label>
            <select id="template" name="template">
            {{#templates}}<option value="{{value}}"{{#selected}} selected{{/selected}}>{{value}}</option>
            {{/templates}}
            </select>
            </div>
            <div class="field">
            <label for="locale">{{t.localeLabel}}</label>
            <select id="locale" name="locale">
            {{#locales}}<option value="{{value}}"{{#selected}} selected{{/selected}}>{{value}}</option>
            {{/locales}}
            </select>
            </div>
            <button id="template-open" type="submit" class="secondary">{{t.openTemplateButton}}</button>
            </form>
            <h2 id="template-heading">{{template}} ({{locale}})</h2>
            {{#isDefault}}<p id="template-default" class="help">{{t.templateIsDefault}}</p>{{/isDefault}}
            <p class="help">{{t.placeholdersHelp}}</p>
            {{#canEdit}}
            <form id="template-form" method="post" action="/portal/apps/{{appId}}/emails" class="card wide" aria-labelledby="template-heading">
            <input type="hidden" name="csrf" value="{{csrf}}">
            <input type="hidden" name="template" value="{{template}}">
            <input type="hidden" name="locale" value="{{locale}}">
            {{^isSMS}}
            <div class="field">
            <label for="subject">{{t.subjectLabel}}</label>
            <input id="subject" name="subject" type="text" maxlength="500" value="{{subject}}">
            </div>
            {{/isSMS}}
            <div class="field">
            <label for="html">{{#isSMS}}{{t.smsTextLabel}}{{/isSMS}}{{^isSMS}}{{t.htmlLabel}}{{/isSMS}}</label>
            <textarea id="html" name="html" rows="10" spellcheck="false">{{html}}</textarea>
            </div>
            {{^isSMS}}
            <div class="field">
            <label for="text">{{t.textLabel}}</label>
            <textarea id="text" name="text" rows="6" spellcheck="false" aria-describedby="text-help">{{text}}</textarea>
            <p id="text-help" class="help">{{t.textHelp}}</p>
            </div>
            <div class="field">
            <label for="replyTo">{{t.replyToLabel}}</label>
            <input id="replyTo" name="replyTo" type="text" inputmode="email" autocomplete="off" spellcheck="false" value="{{replyTo}}">
            </div>
            <div class="field">
            <label for="localeLinkText">{{t.localeLinkTextLabel}}</label>
            <input id="localeLinkText" name="localeLinkText" type="text" maxlength="200" value="{{localeLinkText}}" aria-describedby="link-text-help">
            <p id="link-text-help" class="help">{{t.localeLinkTextHelp}}</p>
            </div>
            {{/isSMS}}
            <div class="actions">
            <button id="preview-template" type="submit" name="action" value="preview" class="secondary">{{t.previewButton}}</button>
            <button id="save-template" type="submit" name="action" value="save">{{t.saveTemplateButton}}</button>
            <button id="reset-template" type="submit" name="action" value="reset" class="secondary">{{t.resetTemplateButton}}</button>
            </div>
            </form>
            {{/canEdit}}
            {{^canEdit}}
            <p class="notice">{{t.readOnlyNote}}</p>
            <dl class="facts">
            {{^isSMS}}<div><dt>{{t.subjectLabel}}</dt><dd>{{subject}}</dd></div>{{/isSMS}}
            <div><dt>{{#isSMS}}{{t.smsTextLabel}}{{/isSMS}}{{^isSMS}}{{t.htmlLabel}}{{/isSMS}}</dt><dd><pre>{{html}}</pre></dd></div>
            {{^isSMS}}<div><dt>{{t.textLabel}}</dt><dd><pre>{{text}}</pre></dd></div>{{/isSMS}}
            </dl>
            {{/canEdit}}
            {{#preview}}
            <section id="preview" class="card wide" aria-labelledby="preview-heading">
            <h2 id="preview-heading">{{t.previewHeading}}</h2>
            <p class="help">{{t.previewHelp}}</p>
            {{#hasSubject}}<p class="label">{{t.subjectLabel}}</p><p id="preview-subject">{{subject}}</p>{{/hasSubject}}
            {{#hasHTML}}<p class="label">{{t.previewHTMLLabel}}</p><pre id="preview-html" class="wrap">{{html}}</pre>{{/hasHTML}}
            {{#hasText}}<p class="label">{{t.previewTextLabel}}</p><pre id="preview-text" class="wrap">{{text}}</pre>{{/hasText}}
            </section>
            {{/preview}}
            """,
    ]
}
