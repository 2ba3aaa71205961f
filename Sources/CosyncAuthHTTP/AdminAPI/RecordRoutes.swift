import CosyncAuth
import Hummingbird

/// `/admin/v1/apps/{appId}/{signups,invites,email-templates,messages,logs}`.
struct RecordRoutes {
    let services: CosyncServices

    func register(on app: RouterGroup<AdminAppContext>) {
        app.get("signups") { try await listPending(.signups, $0, $1) }
        app.delete("signups/:id") { try await deletePending(.signups, $0, $1) }
        app.get("invites") { try await listPending(.invites, $0, $1) }
        app.post("invites", use: createInvite)
        app.delete("invites/:id") { try await deletePending(.invites, $0, $1) }
        app.get("email-templates/:template/:locale", use: showTemplate)
        app.put("email-templates/:template/:locale", use: putTemplate)
        app.post("email-templates/:template/:locale/reset", use: resetTemplate)
        app.get("messages", use: messages)
        app.get("logs", use: logs)
    }

    func listPending(_ kind: AppRecordStore.Kind, _ request: Request, _ context: AdminAppContext) async throws -> Response {
        let scope = context.scope
        let query = AdminQuery(request: request)
        // The query is checked before the app is (a bad limit is a 400 even for a missing app).
        let limit = try query.limit()
        let page = try await services.records.pending(kind, app: try scope.resolvedApp(), limit: limit, cursor: query.cursor)
        return JSONBody.response([
            kind.rawValue: .array(page.items.map { .object($0.json()) }),
            "nextCursor": page.nextCursor.map { .string($0) } ?? .null,
        ])
    }

    func deletePending(_ kind: AppRecordStore.Kind, _ request: Request, _ context: AdminAppContext) async throws -> Response {
        let scope = context.scope, principal = scope.principal
        try await services.records.deletePending(
            kind, app: try scope.resolvedApp(), id: context.parameters.get("id") ?? "", actor: principal.auditName)
        return Response(status: .noContent)
    }

    /// `{handle, locale?, metaData?}`: e-mails an invite code (sender `superuser`).
    @Sendable func createInvite(_ request: Request, context: AdminAppContext) async throws -> Response {
        let scope = context.scope, principal = scope.principal
        let input = try await JSONBody.object(request, context: context)
        // The app's locales and its required invite fields (metaDataInvite) are stored state.
        let metaDataIsObject = input["metaData"]?.objectValue != nil
        let handle = try await StateRule.applying([.appLocale(input), StateRule("metaData", ["invalid_value"]) { metaDataIsObject }]) {
            try await services.flows.adminInvite(app: try scope.resolvedApp(), input: input, actor: principal.auditName)
        }
        return JSONBody.response(["handle": .string(handle), "status": .string("pending")], status: .created)
    }

    func templateKey(_ context: AdminAppContext) -> (String, String) {
        (context.parameters.get("template") ?? "", (context.parameters.get("locale") ?? "").uppercased())
    }

    @Sendable func showTemplate(_ request: Request, context: AdminAppContext) async throws -> Response {
        let scope = context.scope
        let (name, locale) = templateKey(context)
        return JSONBody.response(try await services.records.template(app: try scope.resolvedApp(), name: name, locale: locale).json())
    }

    @Sendable func putTemplate(_ request: Request, context: AdminAppContext) async throws -> Response {
        let scope = context.scope, principal = scope.principal
        var input = try await JSONBody.object(request, context: context)
        let (name, locale) = templateKey(context)
        // A template sent by e-mail without a subject gets the built-in template's (an sms or the
        // clickThrough page has none of its own).
        if input["subject"] == nil, name != "sms", name != "clickThrough", let builtIn = EmailTemplate.builtIn(name) {
            input["subject"] = .string(builtIn.subject)
        }
        let view = try await services.records.putTemplate(
            app: try scope.resolvedApp(), name: name, locale: locale, input: input, actor: principal.auditName)
        return JSONBody.response(view.json())
    }

    @Sendable func resetTemplate(_ request: Request, context: AdminAppContext) async throws -> Response {
        let scope = context.scope, principal = scope.principal
        let (name, locale) = templateKey(context)
        let view = try await services.records.resetTemplate(app: try scope.resolvedApp(), name: name, locale: locale, actor: principal.auditName)
        return JSONBody.response(view.json())
    }

    @Sendable func messages(_ request: Request, context: AdminAppContext) async throws -> Response {
        let scope = context.scope
        let query = AdminQuery(request: request)
        let (to, limit) = (try query.string("to", maxLength: 254), try query.limit())
        let page = try await services.records.messages(app: try scope.resolvedApp(), to: to, limit: limit, cursor: query.cursor)
        return JSONBody.response([
            "messages": .array(page.items.map { .object($0.json()) }),
            "nextCursor": page.nextCursor.map { .string($0) } ?? .null,
        ])
    }

    @Sendable func logs(_ request: Request, context: AdminAppContext) async throws -> Response {
        let scope = context.scope
        let query = AdminQuery(request: request)
        let limit = try query.limit()
        let page = try await services.records.logs(app: try scope.resolvedApp(), limit: limit, cursor: query.cursor)
        let entries: [JSONValue] = page.items.map { entry in
            .object([
                "id": .int(Int(entry.id)), "actor": .string(entry.actor), "action": .string(entry.action),
                "status": .string(entry.status), "detail": entry.detail,
                "createdAt": .string(ISO8601.milliseconds(entry.createdAt)),
            ])
        }
        return JSONBody.response(["logs": .array(entries), "nextCursor": page.nextCursor.map { .string($0) } ?? .null])
    }
}
