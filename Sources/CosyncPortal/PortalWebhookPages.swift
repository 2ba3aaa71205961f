import CosyncAuth
import Foundation
import HTTPTypes
import Hummingbird

/// The webhook pages of an app (issue 23), through the same core service as the admin API's
/// `/webhooks` routes (`services.webhooks`), audited as `portal:<email>`. The URL guard and every
/// validation are the service's; its messages show in the form.
///
/// | Path | Page / action | Who |
/// |---|---|---|
/// | GET/POST `/portal/apps/{appId}/webhooks` | endpoints; add one (its secret shown once on its page) | all / editors+ |
/// | GET/POST `/portal/apps/{appId}/webhooks/{id}` | an endpoint, its delivery log (`cursor`); edit | all / editors+ |
/// | POST `…/{id}/disable` | disable | editors+ |
/// | POST `…/{id}/rotate-secret` | a new secret, shown once (fresh sign-in) | owners |
/// | POST `…/{id}/delete` | delete (fresh sign-in) | owners |
/// | GET `…/{id}/deliveries/{messageId}` | one message and each of its attempts | all |
/// | POST `…/{id}/deliveries/{messageId}/replay` | queue it again (same webhook-id) | editors+ |
///
/// "Owners" includes operators (their role on every app is owner). An endpoint's signing secret is
/// key material (it signs what the app's backend trusts), so rotating it is the owners', as rotating
/// the app's keys is.
extension PortalRoutes {
    func registerWebhooks(on router: Router<Context>) {
        router.get("portal/apps/:appId/webhooks") { request, context in await webhooksPage(request, appId: Self.appParameter(context)) }
        router.post("portal/apps/:appId/webhooks") { request, context in await createWebhook(request, appId: Self.appParameter(context)) }
        router.get("portal/apps/:appId/webhooks/:webhookId") { request, context in
            await webhookPage(request, appId: Self.appParameter(context), webhookId: Self.webhookParameter(context))
        }
        router.post("portal/apps/:appId/webhooks/:webhookId") { request, context in
            await updateWebhook(request, appId: Self.appParameter(context), webhookId: Self.webhookParameter(context))
        }
        router.post("portal/apps/:appId/webhooks/:webhookId/disable") { request, context in
            await disableWebhook(request, appId: Self.appParameter(context), webhookId: Self.webhookParameter(context))
        }
        router.post("portal/apps/:appId/webhooks/:webhookId/rotate-secret") { request, context in
            await rotateWebhookSecret(request, appId: Self.appParameter(context), webhookId: Self.webhookParameter(context))
        }
        router.post("portal/apps/:appId/webhooks/:webhookId/delete") { request, context in
            await deleteWebhook(request, appId: Self.appParameter(context), webhookId: Self.webhookParameter(context))
        }
        router.get("portal/apps/:appId/webhooks/:webhookId/deliveries/:messageId") { request, context in
            await deliveryPage(request, appId: Self.appParameter(context), webhookId: Self.webhookParameter(context), messageId: context.parameters.get("messageId") ?? "")
        }
        router.post("portal/apps/:appId/webhooks/:webhookId/deliveries/:messageId/replay") { request, context in
            await replayDelivery(request, appId: Self.appParameter(context), webhookId: Self.webhookParameter(context), messageId: context.parameters.get("messageId") ?? "")
        }
    }

    static func appParameter(_ context: Context) -> String { context.parameters.get("appId") ?? "" }
    static func webhookParameter(_ context: Context) -> String { context.parameters.get("webhookId") ?? "" }

    /// The id of an endpoint as the pages write it (lower case); another text is a 404.
    static func webhookKey(_ text: String) throws -> String {
        guard let id = UUID(uuidString: text) else { throw Stop.notFound }
        return id.uuidString.lowercased()
    }

    static func webhookPurpose(_ action: String, appId: String, webhookId: String = "", messageId: String = "") -> String {
        "webhook-\(action):\(appId):\(webhookId.lowercased()):\(messageId)"
    }

    /// The checkboxes of the event types (`type:<name>`), `chosen` checked.
    static func eventTypeBoxes(_ chosen: Set<String>, prefix: String) -> [[String: Any]] {
        EventType.allCases.map { type in
            ["name": "type:" + type.rawValue, "id": prefix + PortalCharts.token(type.rawValue), "label": type.rawValue, "checked": chosen.contains(type.rawValue)]
        }
    }

    /// The patch fields of a webhook form as the admin API takes them: `url`, `description`,
    /// `eventTypes` (the checked boxes) and, when `withEnabled`, `enabled`.
    static func webhookInput(_ form: [String: String], withEnabled: Bool) -> [String: JSONValue] {
        var input: [String: JSONValue] = [:]
        if let url = form["url"] { input["url"] = .string(url.trimmingCharacters(in: .whitespaces)) }
        if let description = form["description"] { input["description"] = .string(description) }
        let types = EventType.allCases.map(\.rawValue).filter { form["type:" + $0] != nil }
        input["eventTypes"] = .array(types.map { .string($0) })
        if withEnabled { input["enabled"] = .bool(form["enabled"] != nil) }
        return input
    }

    static func state(_ endpoint: WebhookEndpoint) -> String { PortalText.text(endpoint.enabled ? .webhookEnabled : .webhookDisabled) }

    // MARK: the endpoints

    func webhooksForm(
        _ visitor: Visitor, app: App, role: PortalRole, form: [String: String]? = nil, error: String? = nil, status: HTTPResponse.Status = .ok
    ) async throws -> Response {
        let endpoints = try await services.webhooks.list(app: app)
        let chosen = form.map { values in Set(EventType.allCases.map(\.rawValue).filter { values["type:" + $0] != nil }) }
            ?? [EventType.userCreated.rawValue]
        let rows: [[String: Any]] = endpoints.map { endpoint in
            [
                "id": endpoint.id.uuidString.lowercased(), "url": endpoint.url, "description": endpoint.description,
                "hasDescription": !endpoint.description.isEmpty,
                "types": endpoint.eventTypes.joined(separator: ", "), "state": Self.state(endpoint),
                "failures": String(endpoint.consecutiveFailures), "created": Self.date(endpoint.createdAt),
            ]
        }
        return appPage(
            visitor, app: app, current: "webhooks", heading: .webhooksTitle, template: "observe.webhooks",
            values: [
                "webhooks": rows, "canEdit": role != .viewer,
                "csrf": csrf.token(bound: visitor.cookie, purpose: Self.webhookPurpose("create", appId: app.appId)),
                "url": form?["url"] ?? "", "description": form?["description"] ?? "", "types": Self.eventTypeBoxes(chosen, prefix: "new-type-"),
            ],
            error: error, status: status)
    }

    func webhooksPage(_ request: Request, appId: String) async -> Response {
        await signedIn(request) { visitor in
            let (app, role) = try await access(visitor, appId: appId)
            return try await webhooksForm(visitor, app: app, role: role)
        }
    }

    /// `POST /portal/apps/{appId}/webhooks` (editors+): creates the endpoint; its page then shows the
    /// secret once.
    func createWebhook(_ request: Request, appId: String) async -> Response {
        await signedInPost(request, purpose: Self.webhookPurpose("create", appId: appId)) { visitor, form in
            let (app, role) = try await access(visitor, appId: appId)
            guard role != .viewer else { throw Stop.forbidden }
            do {
                let (endpoint, secret) = try await services.webhooks.create(
                    app: app, input: Self.webhookInput(form, withEnabled: false), actor: visitor.actor)
                let id = endpoint.id.uuidString.lowercased()
                return try showOnce(
                    visitor, ["kind": "webhook-secret", "appId": app.appId, "webhookId": id, "secret": secret, "note": "created"],
                    on: "/portal/apps/\(app.appId)/webhooks/\(id)")
            } catch {
                guard let (text, status) = Self.formError(error) else { throw error }
                return try await webhooksForm(visitor, app: app, role: role, form: form, error: text, status: status)
            }
        }
    }

    // MARK: one endpoint

    func webhookForm(
        _ visitor: Visitor, app: App, role: PortalRole, endpoint: WebhookEndpoint, cursor: String? = nil, form: [String: String]? = nil,
        secret: String? = nil, notice: String? = nil, error: String? = nil, status: HTTPResponse.Status = .ok
    ) async throws -> Response {
        let id = endpoint.id.uuidString.lowercased()
        let page = try await services.webhooks.deliveries(app: app, id: id, limit: Self.pageSize, cursor: cursor)
        let canEdit = role != .viewer
        let labels: [String: PortalText.Key] = [
            "pending": .deliveryPending, "sending": .deliverySending, "delivered": .deliveryDelivered, "dead": .deliveryDead,
        ]
        let deliveries: [[String: Any]] = page.deliveries.map { delivery in
            let finished = delivery.status == "delivered" || delivery.status == "dead"
            return [
                "messageId": delivery.messageId, "type": delivery.eventType,
                "status": labels[delivery.status].map { PortalText.text($0) } ?? delivery.status, "statusClass": PortalCharts.token(delivery.status),
                "attempts": String(delivery.attempts), "created": Self.date(delivery.createdAt), "delivered": Self.date(delivery.deliveredAt),
                "lastError": delivery.lastError ?? "",
                "canReplay": canEdit && finished && endpoint.enabled,
                "csrf": csrf.token(bound: visitor.cookie, purpose: Self.webhookPurpose("replay", appId: app.appId, webhookId: id, messageId: delivery.messageId)),
            ]
        }
        let chosen = form.map { values in Set(EventType.allCases.map(\.rawValue).filter { values["type:" + $0] != nil }) } ?? Set(endpoint.eventTypes)
        var values: [String: Any] = [
            "webhookId": id, "url": form?["url"] ?? endpoint.url, "description": form?["description"] ?? endpoint.description,
            "currentUrl": endpoint.url, "currentDescription": endpoint.description, "eventTypes": endpoint.eventTypes.joined(separator: ", "),
            "enabled": form.map { $0["enabled"] != nil } ?? endpoint.enabled, "state": Self.state(endpoint),
            "failures": String(endpoint.consecutiveFailures), "created": Self.date(endpoint.createdAt), "updated": Self.date(endpoint.updatedAt),
            "types": Self.eventTypeBoxes(chosen, prefix: "type-"), "deliveries": deliveries,
            "canEdit": canEdit, "canDisable": canEdit && endpoint.enabled, "canRotate": role == .owner, "canDelete": role == .owner,
            "editCSRF": csrf.token(bound: visitor.cookie, purpose: Self.webhookPurpose("edit", appId: app.appId, webhookId: id)),
            "disableCSRF": csrf.token(bound: visitor.cookie, purpose: Self.webhookPurpose("disable", appId: app.appId, webhookId: id)),
            "rotateCSRF": csrf.token(bound: visitor.cookie, purpose: Self.webhookPurpose("rotate", appId: app.appId, webhookId: id)),
            "deleteCSRF": csrf.token(bound: visitor.cookie, purpose: Self.webhookPurpose("delete", appId: app.appId, webhookId: id)),
        ]
        if let secret { values["secret"] = secret }
        // Mustache shows a section for an empty string too: optional facts are left out when there are none.
        if let reason = endpoint.disabledReason, !reason.isEmpty { values["disabledReason"] = reason }
        if let expires = endpoint.previousSecretExpiresAt, expires > Date() { values["previousSecretExpires"] = Self.date(expires) }
        if let next = page.nextCursor { values["nextURL"] = "/portal/apps/\(app.appId)/webhooks/\(id)?cursor=" + PortalForm.encode(next) }
        return appPage(
            visitor, app: app, current: "webhooks", heading: .webhookTitle, template: "observe.webhook", values: values, error: error, notice: notice,
            status: status)
    }

    /// `GET /portal/apps/{appId}/webhooks/{id}`: after a creation or a rotation, the secret once (the
    /// hand-over cookie, to the session that made it, for this endpoint).
    func webhookPage(_ request: Request, appId: String, webhookId: String) async -> Response {
        await signedIn(request) { visitor in
            let (app, role) = try await access(visitor, appId: appId)
            let id = try Self.webhookKey(webhookId)
            let endpoint = try await services.webhooks.get(app: app, id: id)
            guard let query = PortalForm.queryParameters(request) else { throw Stop.badRequest }
            let cursor = query["cursor"].flatMap { $0.isEmpty ? nil : $0 }
            var secret: String?, notice: String?
            var clear: [String] = []
            if let raw = PortalCookies.value(request, cookies.onceName), let fields = sealer.open(raw), fields["kind"] == "webhook-secret" {
                clear = [cookies.clear(cookies.onceName)]
                if fields["appId"] == app.appId, fields["webhookId"] == id, fields["sid"] == visitor.session.id.uuidString.lowercased() {
                    secret = fields["secret"]
                    notice = PortalText.text(fields["note"] == "created" ? .webhookCreated : .webhookSecretRotated)
                }
            }
            if query["saved"] == "1" { notice = PortalText.text(.webhookSaved) }
            var response = try await webhookForm(visitor, app: app, role: role, endpoint: endpoint, cursor: cursor, secret: secret, notice: notice)
            for cookie in clear { response.headers.append(HTTPField(name: .setCookie, value: cookie)) }
            return response
        }
    }

    /// `POST /portal/apps/{appId}/webhooks/{id}` (editors+): a PATCH of url, event types, description
    /// and enabled, as the admin API takes it.
    func updateWebhook(_ request: Request, appId: String, webhookId: String) async -> Response {
        await signedInPost(request, purpose: Self.webhookPurpose("edit", appId: appId, webhookId: webhookId)) { visitor, form in
            let (app, role) = try await access(visitor, appId: appId)
            guard role != .viewer else { throw Stop.forbidden }
            let id = try Self.webhookKey(webhookId)
            let endpoint = try await services.webhooks.get(app: app, id: id)
            do {
                _ = try await services.webhooks.update(app: app, id: id, patch: Self.webhookInput(form, withEnabled: true), actor: visitor.actor)
                return PortalPages.redirect("/portal/apps/\(app.appId)/webhooks/\(id)?saved=1")
            } catch {
                guard let (text, status) = Self.formError(error) else { throw error }
                return try await webhookForm(visitor, app: app, role: role, endpoint: endpoint, form: form, error: text, status: status)
            }
        }
    }

    /// `POST …/{id}/disable` (editors+).
    func disableWebhook(_ request: Request, appId: String, webhookId: String) async -> Response {
        await signedInPost(request, purpose: Self.webhookPurpose("disable", appId: appId, webhookId: webhookId)) { visitor, _ in
            let (app, role) = try await access(visitor, appId: appId)
            guard role != .viewer else { throw Stop.forbidden }
            let id = try Self.webhookKey(webhookId)
            _ = try await services.webhooks.disable(app: app, id: id, actor: visitor.actor)
            return PortalPages.redirect("/portal/apps/\(app.appId)/webhooks/\(id)?saved=1")
        }
    }

    /// `POST …/{id}/rotate-secret` (owners and operators, fresh sign-in): the new secret is shown
    /// once; the previous one keeps signing for the overlap.
    func rotateWebhookSecret(_ request: Request, appId: String, webhookId: String) async -> Response {
        await signedInPost(request, purpose: Self.webhookPurpose("rotate", appId: appId, webhookId: webhookId)) { visitor, _ in
            let (app, role) = try await access(visitor, appId: appId)
            // The signing secret lets one forge webhooks to the app's backend: owners (and operators) only.
            guard role == .owner else { throw Stop.forbidden }
            let id = try Self.webhookKey(webhookId)
            _ = try await services.webhooks.get(app: app, id: id)
            guard visitor.isFresh else { throw Stop.reauth(next: "/portal/apps/\(app.appId)/webhooks/\(id)") }
            let (_, secret) = try await services.webhooks.rotateSecret(app: app, id: id, actor: visitor.actor)
            return try showOnce(
                visitor, ["kind": "webhook-secret", "appId": app.appId, "webhookId": id, "secret": secret, "note": "rotated"],
                on: "/portal/apps/\(app.appId)/webhooks/\(id)")
        }
    }

    /// `POST …/{id}/delete` (owners, fresh sign-in).
    func deleteWebhook(_ request: Request, appId: String, webhookId: String) async -> Response {
        await signedInPost(request, purpose: Self.webhookPurpose("delete", appId: appId, webhookId: webhookId)) { visitor, _ in
            let (app, role) = try await access(visitor, appId: appId)
            guard role == .owner else { throw Stop.forbidden }
            let id = try Self.webhookKey(webhookId)
            _ = try await services.webhooks.get(app: app, id: id)
            guard visitor.isFresh else { throw Stop.reauth(next: "/portal/apps/\(app.appId)/webhooks/\(id)") }
            try await services.webhooks.delete(app: app, id: id, actor: visitor.actor)
            return PortalPages.redirect("/portal/apps/\(app.appId)/webhooks")
        }
    }

    // MARK: one delivery

    /// `GET …/{id}/deliveries/{messageId}`: the message's delivery and each attempt.
    func deliveryPage(_ request: Request, appId: String, webhookId: String, messageId: String) async -> Response {
        await signedIn(request) { visitor in
            let (app, role) = try await access(visitor, appId: appId)
            let id = try Self.webhookKey(webhookId)
            let endpoint = try await services.webhooks.get(app: app, id: id)
            let (delivery, attempts) = try await services.webhooks.delivery(app: app, id: id, messageId: messageId)
            let finished = delivery.status == "delivered" || delivery.status == "dead"
            let labels: [String: PortalText.Key] = [
                "pending": .deliveryPending, "sending": .deliverySending, "delivered": .deliveryDelivered, "dead": .deliveryDead,
            ]
            var values: [String: Any] = [
                "webhookId": id, "url": endpoint.url, "messageId": delivery.messageId, "type": delivery.eventType,
                "status": labels[delivery.status].map { PortalText.text($0) } ?? delivery.status, "attemptCount": String(delivery.attempts),
                "created": Self.date(delivery.createdAt),
                "attempts": attempts.map { attempt -> [String: Any] in
                    [
                        "attempt": String(attempt.attempt), "time": Self.date(attempt.createdAt),
                        "httpStatus": attempt.httpStatus.map(String.init) ?? "", "error": attempt.error ?? "", "latency": String(attempt.latencyMs),
                    ]
                },
                "canReplay": role != .viewer && finished && endpoint.enabled,
                "csrf": csrf.token(
                    bound: visitor.cookie, purpose: Self.webhookPurpose("replay", appId: app.appId, webhookId: id, messageId: delivery.messageId)),
            ]
            // Mustache shows a section for an empty string too: optional facts are left out when there are none.
            if let delivered = delivery.deliveredAt { values["delivered"] = Self.date(delivered) }
            if delivery.status == "pending" { values["next"] = Self.date(delivery.nextAttempt) }
            if let error = delivery.lastError, !error.isEmpty { values["lastError"] = error }
            if role != .viewer && finished && !endpoint.enabled { values["replayNote"] = PortalText.text(.replayNeedsEnabled) }
            var page = makePage(
                visitor, heading: PortalText.text(.deliveryTitle, ["id": delivery.messageId]), template: "observe.delivery", values: values)
            page.values["appId"] = app.appId
            page.app = (app.appId, app.name, "webhooks")
            if PortalForm.queryParameters(request)?["replayed"] == "1" { page.notice = PortalText.text(.deliveryReplayed) }
            return PortalPages.render(page)
        }
    }

    /// `POST …/{id}/deliveries/{messageId}/replay` (editors+): queues the message again.
    func replayDelivery(_ request: Request, appId: String, webhookId: String, messageId: String) async -> Response {
        await signedInPost(request, purpose: Self.webhookPurpose("replay", appId: appId, webhookId: webhookId, messageId: messageId)) { visitor, _ in
            let (app, role) = try await access(visitor, appId: appId)
            guard role != .viewer else { throw Stop.forbidden }
            let id = try Self.webhookKey(webhookId)
            do {
                try await services.webhooks.replay(app: app, id: id, messageId: messageId, actor: visitor.actor)
            } catch AdminFailure.conflict(_, let text) {
                return message(.replayRefused, title: .errorTitle, status: .conflict, visitor: visitor, fill: ["reason": text],
                               link: ("/portal/apps/\(app.appId)/webhooks/\(id)", .backToWebhook))
            }
            return PortalPages.redirect("/portal/apps/\(app.appId)/webhooks/\(id)/deliveries/\(PortalForm.encode(messageId))?replayed=1")
        }
    }
}

extension PortalPages {
    static let webhookTemplates: [String: String] = [
        "observe.webhooks": """
            <p class="help">{{t.webhooksHelp}}</p>
            <table id="webhooks">
            <caption>{{t.webhooksCaption}}</caption>
            <thead><tr><th scope="col">{{t.webhookUrlColumn}}</th><th scope="col">{{t.webhookTypesColumn}}</th><th scope="col">{{t.webhookStateColumn}}</th><th scope="col">{{t.webhookFailuresColumn}}</th><th scope="col">{{t.webhookCreatedColumn}}</th></tr></thead>
            <tbody>
            {{#webhooks}}<tr id="webhook-{{id}}"><td><a class="webhook-link wrap" href="/portal/apps/{{appId}}/webhooks/{{id}}">{{url}}</a>{{#hasDescription}}<br><span class="help">{{description}}</span>{{/hasDescription}}</td><td>{{types}}</td><td>{{state}}</td><td>{{failures}}</td><td>{{created}}</td></tr>
            {{/webhooks}}
            </tbody>
            </table>
            {{^webhooks}}<p>{{t.webhooksNone}}</p>{{/webhooks}}
            {{#canEdit}}
            <section class="card wide" aria-labelledby="new-webhook-heading">
            <h2 id="new-webhook-heading">{{t.webhookNewHeading}}</h2>
            <form id="new-webhook" method="post" action="/portal/apps/{{appId}}/webhooks">
            <input type="hidden" name="csrf" value="{{csrf}}">
            {{> observe.webhookFields}}
            <button id="webhook-create-submit" type="submit">{{t.webhookCreateButton}}</button>
            </form>
            </section>
            {{/canEdit}}
            """,
        // The endpoint's fields, shared by the new-endpoint and the edit forms.
        "observe.webhookFields": """
            <div class="field">
            <label for="webhook-url">{{t.webhookUrlLabel}}</label>
            <input id="webhook-url" name="url" type="url" required maxlength="2048" value="{{url}}" spellcheck="false" aria-describedby="webhook-url-help{{#error}} form-error{{/error}}">
            <p id="webhook-url-help" class="help">{{t.webhookUrlHelp}}</p>
            </div>
            <div class="field">
            <label for="webhook-description">{{t.webhookDescriptionLabel}}</label>
            <input id="webhook-description" name="description" type="text" maxlength="500" value="{{description}}">
            </div>
            <fieldset class="types">
            <legend>{{t.webhookTypesLegend}}</legend>
            {{#types}}<div class="check"><input type="checkbox" id="{{id}}" name="{{name}}" value="1"{{#checked}} checked{{/checked}}> <label for="{{id}}">{{label}}</label></div>
            {{/types}}
            </fieldset>
            """,
        "observe.webhook": """
            {{#secret}}
            <div class="once" role="status">
            <p>{{t.webhookSecretOnce}}</p>
            <p class="label" id="webhook-secret-label">{{t.webhookSecretLabel}}</p>
            <p><code id="webhook-secret" class="copyable wrap">{{secret}}</code></p>
            </div>
            {{/secret}}
            <dl class="facts">
            <div><dt>{{t.webhookUrlLabel}}</dt><dd><code id="webhook-current-url" class="wrap">{{currentUrl}}</code></dd></div>
            <div><dt>{{t.webhookIdLabel}}</dt><dd><code id="webhook-id" class="copyable wrap">{{webhookId}}</code></dd></div>
            <div><dt>{{t.webhookStateColumn}}</dt><dd id="webhook-state">{{state}}{{#disabledReason}} ({{disabledReason}}){{/disabledReason}}</dd></div>
            <div><dt>{{t.webhookFailuresColumn}}</dt><dd>{{failures}}</dd></div>
            <div><dt>{{t.webhookTypesColumn}}</dt><dd>{{eventTypes}}</dd></div>
            <div><dt>{{t.webhookCreatedColumn}}</dt><dd>{{created}}</dd></div>
            {{#previousSecretExpires}}<div><dt>{{t.webhookPreviousSecretLabel}}</dt><dd>{{previousSecretExpires}}</dd></div>{{/previousSecretExpires}}
            </dl>
            <h2 id="deliveries-heading">{{t.deliveriesHeading}}</h2>
            <table id="deliveries">
            <caption>{{t.deliveriesCaption}}</caption>
            <thead><tr><th scope="col">{{t.deliveryMessageColumn}}</th><th scope="col">{{t.deliveryTypeColumn}}</th><th scope="col">{{t.deliveryStatusColumn}}</th><th scope="col">{{t.deliveryAttemptsColumn}}</th><th scope="col">{{t.deliveryCreatedColumn}}</th><th scope="col">{{t.deliveryErrorColumn}}</th>{{#canEdit}}<th scope="col">{{t.deliveryActionColumn}}</th>{{/canEdit}}</tr></thead>
            <tbody>
            {{#deliveries}}<tr><td><a class="delivery-link" href="/portal/apps/{{appId}}/webhooks/{{webhookId}}/deliveries/{{messageId}}"><code>{{messageId}}</code></a></td><td>{{type}}</td><td><span class="status status-{{statusClass}}">{{status}}</span></td><td>{{attempts}}</td><td>{{created}}</td><td class="wrap">{{lastError}}</td>{{#canEdit}}<td>{{#canReplay}}<form class="replay-delivery" method="post" action="/portal/apps/{{appId}}/webhooks/{{webhookId}}/deliveries/{{messageId}}/replay"><input type="hidden" name="csrf" value="{{csrf}}"><button type="submit" class="secondary" aria-label="{{t.replayButton}} {{messageId}}">{{t.replayButton}}</button></form>{{/canReplay}}</td>{{/canEdit}}</tr>
            {{/deliveries}}
            </tbody>
            </table>
            {{^deliveries}}<p>{{t.deliveriesNone}}</p>{{/deliveries}}
            {{#nextURL}}<p><a id="next-page" href="{{nextURL}}">{{t.nextPage}}</a></p>{{/nextURL}}
            {{#canEdit}}
            <section class="card wide" aria-labelledby="edit-webhook-heading">
            <h2 id="edit-webhook-heading">{{t.webhookEditHeading}}</h2>
            <form id="edit-webhook" method="post" action="/portal/apps/{{appId}}/webhooks/{{webhookId}}">
            <input type="hidden" name="csrf" value="{{editCSRF}}">
            {{> observe.webhookFields}}
            <div class="check"><input type="checkbox" id="webhook-enabled" name="enabled" value="1"{{#enabled}} checked{{/enabled}}> <label for="webhook-enabled">{{t.webhookEnabledLabel}}</label></div>
            <button id="webhook-save-submit" type="submit">{{t.saveButton}}</button>
            </form>
            </section>
            {{#canDisable}}
            <form id="disable-webhook" method="post" action="/portal/apps/{{appId}}/webhooks/{{webhookId}}/disable" class="inline">
            <input type="hidden" name="csrf" value="{{disableCSRF}}">
            <button id="webhook-disable-submit" type="submit" class="secondary">{{t.webhookDisableButton}}</button>
            </form>
            {{/canDisable}}
            {{/canEdit}}
            {{#canRotate}}
            <section class="card wide" aria-labelledby="rotate-secret-heading">
            <h2 id="rotate-secret-heading">{{t.webhookRotateHeading}}</h2>
            <p>{{t.webhookRotateHelp}}</p>
            <form id="rotate-webhook-secret" method="post" action="/portal/apps/{{appId}}/webhooks/{{webhookId}}/rotate-secret">
            <input type="hidden" name="csrf" value="{{rotateCSRF}}">
            <button id="webhook-rotate-submit" type="submit">{{t.webhookRotateButton}}</button>
            </form>
            </section>
            {{/canRotate}}
            {{#canDelete}}
            <section class="card wide" aria-labelledby="delete-webhook-heading">
            <h2 id="delete-webhook-heading">{{t.webhookDeleteHeading}}</h2>
            <p>{{t.webhookDeleteHelp}}</p>
            <form id="delete-webhook" method="post" action="/portal/apps/{{appId}}/webhooks/{{webhookId}}/delete">
            <input type="hidden" name="csrf" value="{{deleteCSRF}}">
            <button id="webhook-delete-submit" type="submit" class="danger">{{t.webhookDeleteButton}}</button>
            </form>
            </section>
            {{/canDelete}}
            {{^canEdit}}<p class="notice">{{t.readOnlyNote}}</p>{{/canEdit}}
            """,
        "observe.delivery": """
            <dl class="facts">
            <div><dt>{{t.webhookUrlLabel}}</dt><dd><a class="wrap" href="/portal/apps/{{appId}}/webhooks/{{webhookId}}">{{url}}</a></dd></div>
            <div><dt>{{t.deliveryTypeColumn}}</dt><dd>{{type}}</dd></div>
            <div><dt>{{t.deliveryStatusColumn}}</dt><dd id="delivery-status">{{status}}</dd></div>
            <div><dt>{{t.deliveryAttemptsColumn}}</dt><dd id="delivery-attempts">{{attemptCount}}</dd></div>
            <div><dt>{{t.deliveryCreatedColumn}}</dt><dd>{{created}}</dd></div>
            {{#delivered}}<div><dt>{{t.deliveryDeliveredLabel}}</dt><dd>{{delivered}}</dd></div>{{/delivered}}
            {{#next}}<div><dt>{{t.deliveryNextLabel}}</dt><dd>{{next}}</dd></div>{{/next}}
            {{#lastError}}<div><dt>{{t.deliveryErrorColumn}}</dt><dd class="wrap">{{lastError}}</dd></div>{{/lastError}}
            </dl>
            <table id="attempts">
            <caption>{{t.attemptsCaption}}</caption>
            <thead><tr><th scope="col">{{t.attemptColumn}}</th><th scope="col">{{t.attemptTimeColumn}}</th><th scope="col">{{t.attemptStatusColumn}}</th><th scope="col">{{t.attemptLatencyColumn}}</th><th scope="col">{{t.deliveryErrorColumn}}</th></tr></thead>
            <tbody>
            {{#attempts}}<tr><td>{{attempt}}</td><td>{{time}}</td><td>{{httpStatus}}</td><td>{{latency}}</td><td class="wrap">{{error}}</td></tr>
            {{/attempts}}
            </tbody>
            </table>
            {{^attempts}}<p>{{t.attemptsNone}}</p>{{/attempts}}
            {{#canReplay}}
            <form class="replay-delivery" id="replay-delivery" method="post" action="/portal/apps/{{appId}}/webhooks/{{webhookId}}/deliveries/{{messageId}}/replay">
            <input type="hidden" name="csrf" value="{{csrf}}">
            <button id="replay-submit" type="submit">{{t.replayButton}}</button>
            </form>
            {{/canReplay}}
            {{#replayNote}}<p class="notice">{{replayNote}}</p>{{/replayNote}}
            <p><a href="/portal/apps/{{appId}}/webhooks/{{webhookId}}">{{t.backToWebhook}}</a></p>
            """,
    ]
}
