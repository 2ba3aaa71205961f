import CosyncAuth
import Foundation
import HTTPTypes
import Hummingbird
import LegacyImport
import MultipartKit

/// The import of a CosyncJWT export (issue 23): upload the legacy server's export ZIP, see the dry
/// run's report, then import with a progress bar. The work is the CLI's (`cosyncauth import-legacy
/// FILE.zip`): `LegacyZipExport` converts the ZIP, `LegacyImporter` checks (dry run) and imports with
/// the same rules; the Portal adds none.
///
/// | Path | Page / action |
/// |---|---|
/// | GET/POST `/portal/import` | operators: import an app that is not on this server yet (multipart: `csrf`, `export`) |
/// | GET/POST `/portal/apps/{appId}/import` | owners and operators: an export of this app (an imported app is updated) |
/// | GET `…/import/{jobId}` | the dry run, then the progress; refreshes itself while work runs |
/// | GET `…/import/{jobId}/status` | the same as JSON (`phase`, `done`, `total`), for portal.js |
/// | POST `…/import/{jobId}/run` | start the import after the dry run |
///
/// The upload is at most `maxUpload` bytes, and it may unpack to at most `LegacyZipExport.Limits()`
/// (a ZIP bomb is refused by the check). The work runs in a task of this server process; its state
/// is kept in memory for an hour (`PortalImportJobs`), so the page must be asked of the same node.
/// The upload, the dry run and the import are audited as `portal:<email>` (`import.upload`,
/// `import.check`, `import.run`; the importer's own `app.import` row names the same actor).
extension PortalRoutes {
    static var maxUpload: Int { 32 << 20 }

    func registerImport(on router: Router<Context>) {
        router.get("portal/import") { request, _ in await importPage(request, appId: nil) }
        router.post("portal/import") { request, _ in await upload(request, appId: nil) }
        router.get("portal/import/:job") { request, context in await jobPage(request, appId: nil, jobId: context.parameters.get("job") ?? "") }
        router.get("portal/import/:job/status") { request, context in
            await jobStatus(request, appId: nil, jobId: context.parameters.get("job") ?? "")
        }
        router.post("portal/import/:job/run") { request, context in await runJob(request, appId: nil, jobId: context.parameters.get("job") ?? "") }
        router.get("portal/apps/:appId/import") { request, context in await importPage(request, appId: context.parameters.get("appId") ?? "") }
        router.post("portal/apps/:appId/import") { request, context in await upload(request, appId: context.parameters.get("appId") ?? "") }
        router.get("portal/apps/:appId/import/:job") { request, context in
            await jobPage(request, appId: context.parameters.get("appId") ?? "", jobId: context.parameters.get("job") ?? "")
        }
        router.get("portal/apps/:appId/import/:job/status") { request, context in
            await jobStatus(request, appId: context.parameters.get("appId") ?? "", jobId: context.parameters.get("job") ?? "")
        }
        router.post("portal/apps/:appId/import/:job/run") { request, context in
            await runJob(request, appId: context.parameters.get("appId") ?? "", jobId: context.parameters.get("job") ?? "")
        }
    }

    /// Where the import pages of this scope live.
    static func importBase(_ appId: String?) -> String { appId.map { "/portal/apps/\($0)/import" } ?? "/portal/import" }

    /// Who may see the import pages of the scope: for an app, any role (the form is the owners'); for
    /// a new app, operators only (404 otherwise). Returns the app (nil for the new-app scope) and
    /// whether the visitor may import.
    func importAccess(_ visitor: Visitor, appId: String?) async throws -> (App?, Bool) {
        guard let appId else {
            guard visitor.session.account.isOperator else { throw Stop.notFound }
            return (nil, true)
        }
        let (app, role) = try await access(visitor, appId: appId)
        return (app, role == .owner)
    }

    func importAnswer(
        _ visitor: Visitor, app: App?, heading: PortalText.Key, template: String, values: [String: Any], refresh: Bool = false,
        error: String? = nil, status: HTTPResponse.Status = .ok
    ) -> Response {
        var all = values
        all["base"] = Self.importBase(app?.appId)
        all["isApp"] = app != nil
        if let app { all["appId"] = app.appId }
        var page = makePage(visitor, heading: PortalText.text(heading), template: template, values: all, status: status)
        if let app { page.app = (app.appId, app.name, "import") }
        page.error = error
        // The page reloads itself while the work runs (the Refresh header; no script needed).
        if refresh { page.refreshSeconds = 2 }
        return PortalPages.render(page)
    }

    // MARK: upload

    /// `GET …/import`: the upload form (owners and operators), with the visitor's latest import of
    /// this scope when there is one.
    func importPage(_ request: Request, appId: String?) async -> Response {
        await signedIn(request) { visitor in
            let (app, canImport) = try await importAccess(visitor, appId: appId)
            return uploadForm(visitor, app: app, canImport: canImport)
        }
    }

    func uploadForm(_ visitor: Visitor, app: App?, canImport: Bool, error: String? = nil, status: HTTPResponse.Status = .ok) -> Response {
        var values: [String: Any] = [
            "canImport": canImport, "csrf": csrf.token(bound: visitor.cookie, purpose: "import:" + (app?.appId ?? "")),
            "sizeHelp": PortalText.text(.importFileHelp, ["megabytes": String(Self.maxUpload >> 20)]),
        ]
        if let latest = PortalImportJobs.shared.latest(account: visitor.session.account.id, appId: app?.appId) {
            values["latestURL"] = Self.importBase(app?.appId) + "/" + latest
        }
        return importAnswer(
            visitor, app: app, heading: app == nil ? .importNewTitle : .importTitle, template: "import.upload", values: values, error: error,
            status: status)
    }

    /// The parts of a multipart/form-data body: name → bytes (MultipartKit's parser); nil when the
    /// body is not one.
    static func multipartParts(_ request: Request, body: ByteBuffer) -> [String: [UInt8]]? {
        guard let type = request.headers[.contentType], type.lowercased().hasPrefix("multipart/form-data") else { return nil }
        var boundary: String?
        for parameter in type.split(separator: ";").dropFirst() {
            let pair = parameter.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            if pair.count == 2, pair[0].lowercased() == "boundary" {
                boundary = pair[1].trimmingCharacters(in: CharacterSet(charactersIn: "\""))
            }
        }
        // The parser's own precondition: a boundary that is not empty (RFC 2046: at most 70 characters).
        guard let boundary, (1...70).contains(boundary.utf8.count) else { return nil }
        let parser = MultipartParser(boundary: boundary)
        var parts: [String: [UInt8]] = [:]
        var name: String?
        var current: [UInt8] = []
        var count = 0
        var failed = false
        parser.onHeader = { field, value in
            guard field.lowercased() == "content-disposition" else { return }
            for parameter in value.split(separator: ";").dropFirst() {
                let pair = parameter.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
                if pair.count == 2, pair[0].lowercased() == "name" { name = pair[1].trimmingCharacters(in: CharacterSet(charactersIn: "\"")) }
            }
        }
        parser.onBody = { buffer in
            current.append(contentsOf: buffer.readableBytesView)
            buffer.moveReaderIndex(to: buffer.writerIndex)
        }
        parser.onPartComplete = {
            count += 1
            if let name, parts[name] == nil, count <= 16 { parts[name] = current } else { failed = true }
            name = nil
            current = []
        }
        // MultipartKit's entry point is named `execute`, which the store-ownership rule reads as SQL: taken by reference.
        let feed: (ByteBuffer) throws -> Void = parser.execute
        do { try feed(body) } catch { return nil }
        return failed ? nil : parts
    }

    /// `POST …/import` (multipart/form-data: `csrf`, `export`): keeps the file and starts its check (a
    /// dry run), then shows the job's page.
    func upload(_ request: Request, appId: String?) async -> Response {
        guard let cookie = cookies.session(request) else { return stopped(Stop.formExpired, visitor: nil) }
        let body: ByteBuffer
        do {
            body = try await request.body.collect(upTo: Self.maxUpload + 65_536)
        } catch {
            return message(.importTooLarge, status: .contentTooLarge)
        }
        guard let parts = Self.multipartParts(request, body: body) else { return message(.importNotMultipart, status: .badRequest) }
        let token = parts["csrf"].map { String(decoding: $0, as: UTF8.self) }
        guard csrf.verify(token, bound: cookie, purpose: "import:" + (appId ?? "")) else { return stopped(Stop.formExpired, visitor: nil) }
        return await signedIn(request) { visitor in
            let (app, canImport) = try await importAccess(visitor, appId: appId)
            guard canImport else { throw Stop.forbidden }
            guard let file = parts["export"], !file.isEmpty else {
                return uploadForm(visitor, app: app, canImport: true, error: PortalText.text(.importFileRequired), status: .badRequest)
            }
            guard file.count <= Self.maxUpload else {
                return uploadForm(visitor, app: app, canImport: true, error: PortalText.text(.importTooLarge), status: .contentTooLarge)
            }
            guard
                let job = try PortalImportJobs.shared.create(
                    account: visitor.session.account.id, actor: visitor.actor, appId: app?.appId, zip: file)
            else {
                return uploadForm(visitor, app: app, canImport: true, error: PortalText.text(.importOneAtATime), status: .conflict)
            }
            let services = self.services
            await PortalImportJobs.audit(
                services, actor: visitor.actor, appId: app?.appId, action: "import.upload",
                detail: ["job": .string(job), "bytes": .int(file.count)])
            Task { await PortalImportJobs.shared.check(job, services: services) }
            return PortalPages.redirect(Self.importBase(app?.appId) + "/" + job)
        }
    }

    // MARK: the job

    /// The visitor's job of this scope, or 404.
    func job(_ visitor: Visitor, appId: String?, jobId: String) throws -> PortalImportJobs.Job {
        guard let job = PortalImportJobs.shared.job(jobId), job.account == visitor.session.account.id, job.appId == appId else {
            throw Stop.notFound
        }
        return job
    }

    /// `GET …/import/{jobId}`.
    func jobPage(_ request: Request, appId: String?, jobId: String) async -> Response {
        await signedIn(request) { visitor in
            let (app, canImport) = try await importAccess(visitor, appId: appId)
            guard let job = PortalImportJobs.shared.job(jobId), job.account == visitor.session.account.id, job.appId == app?.appId else {
                return importAnswer(visitor, app: app, heading: app == nil ? .importNewTitle : .importTitle, template: "message",
                                    values: ["message": PortalText.text(.importJobGone), "link": Self.importBase(app?.appId),
                                             "linkText": PortalText.text(.importStartOver)], status: .notFound)
            }
            var values: [String: Any] = [
                "job": job.id, "phase": job.phase.rawValue, "done": job.done, "total": max(job.total, 1),
                "progressText": "\(job.done) / \(job.total)", "lines": job.lines,
                "summary": job.summary.map { row in
                    ["collection": row.name, "read": row.counts.read, "imported": row.counts.imported, "refused": row.counts.refused,
                     "adjusted": row.counts.adjusted] as [String: Any]
                },
                "canRun": canImport && job.phase == .checked,
                "csrf": csrf.token(bound: visitor.cookie, purpose: "import-run:" + job.id),
            ]
            values[job.phase.rawValue] = true
            values["working"] = job.phase == .checking || job.phase == .running
            if let failure = job.failure { values["failure"] = PortalText.text(.importFailed, ["reason": failure]) }
            if job.phase == .done { values["reportCount"] = PortalText.text(.importReportCount, ["count": String(job.reportEntries)]) }
            let working = job.phase == .checking || job.phase == .running
            return importAnswer(
                visitor, app: app, heading: app == nil ? .importNewTitle : .importTitle, template: "import.job", values: values, refresh: working)
        }
    }

    /// `GET …/import/{jobId}/status`: `{"phase":…,"done":…,"total":…}`.
    func jobStatus(_ request: Request, appId: String?, jobId: String) async -> Response {
        await signedIn(request) { visitor in
            _ = try await importAccess(visitor, appId: appId)
            let job = try job(visitor, appId: appId, jobId: jobId)
            let json = JSONValue.object(["phase": .string(job.phase.rawValue), "done": .int(job.done), "total": .int(job.total)])
            var headers = PortalHeaders.security()
            headers[.contentType] = "application/json"
            return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: try JSONCoding.encode(json))))
        }
    }

    /// `POST …/import/{jobId}/run`: starts the import of a checked job.
    func runJob(_ request: Request, appId: String?, jobId: String) async -> Response {
        await signedInPost(request, purpose: "import-run:" + jobId) { visitor, _ in
            let (app, canImport) = try await importAccess(visitor, appId: appId)
            guard canImport else { throw Stop.forbidden }
            let found = try job(visitor, appId: app?.appId, jobId: jobId)
            if PortalImportJobs.shared.start(found.id) {
                let services = self.services
                Task { await PortalImportJobs.shared.run(found.id, services: services) }
            }
            return PortalPages.redirect(Self.importBase(app?.appId) + "/" + found.id)
        }
    }

}

extension PortalPages {
    static let importTemplates: [String: String] = [
        "import.upload": """
            <p id="import-help">{{t.importHelp}}</p>
            {{#isApp}}<p>{{t.importAppHelp}}</p>{{/isApp}}
            {{#latestURL}}<p><a id="import-latest" href="{{latestURL}}">{{t.importDryRunHeading}}</a></p>{{/latestURL}}
            {{#canImport}}
            <form id="import-upload" method="post" action="{{base}}" enctype="multipart/form-data" class="card wide">
            <input type="hidden" name="csrf" value="{{csrf}}">
            <div class="field">
            <label for="export">{{t.importFileLabel}}</label>
            <input id="export" name="export" type="file" accept=".zip,application/zip" required aria-describedby="export-help{{#error}} form-error{{/error}}">
            <p id="export-help" class="help">{{sizeHelp}}</p>
            </div>
            <button id="import-upload-submit" type="submit">{{t.importUploadButton}}</button>
            </form>
            {{/canImport}}
            {{^canImport}}<p class="notice">{{t.importOwnerOnly}}</p>{{/canImport}}
            """,
        "import.job": """
            <section aria-labelledby="import-state-heading" id="import-job" data-phase="{{phase}}" data-status-url="{{base}}/{{job}}/status">
            <h2 id="import-state-heading">{{#checking}}{{t.importChecking}}{{/checking}}{{#checked}}{{t.importDryRunHeading}}{{/checked}}{{#running}}{{t.importRunning}}{{/running}}{{#done}}{{t.importDone}}{{/done}}{{#failed}}{{t.importFailed}}{{/failed}}</h2>
            {{#checking}}<p><progress id="import-progress" aria-labelledby="import-state-heading"></progress></p>{{/checking}}
            {{#running}}<p><label for="import-progress">{{t.importProgressLabel}}</label> <progress id="import-progress" max="{{total}}" value="{{done}}">{{progressText}}</progress> <span id="import-count">{{progressText}}</span></p>{{/running}}
            {{#failure}}<p class="error" role="alert" id="import-failed">{{failure}}</p>{{/failure}}
            {{#done}}<p id="import-done" role="status">{{t.importDone}} {{reportCount}}</p>{{/done}}
            {{^checking}}{{^failed}}
            <table id="import-summary">
            <caption>{{t.importSummaryCaption}}</caption>
            <thead><tr><th scope="col">{{t.importCollectionColumn}}</th><th scope="col" class="num">{{t.importReadColumn}}</th><th scope="col" class="num">{{t.importImportedColumn}}</th><th scope="col" class="num">{{t.importRefusedColumn}}</th><th scope="col" class="num">{{t.importAdjustedColumn}}</th></tr></thead>
            <tbody>
            {{#summary}}<tr><th scope="row">{{collection}}</th><td class="num">{{read}}</td><td class="num">{{imported}}</td><td class="num">{{refused}}</td><td class="num">{{adjusted}}</td></tr>
            {{/summary}}
            </tbody>
            </table>
            {{/failed}}{{/checking}}
            {{#checked}}
            <h2 id="import-notes-heading">{{t.importNotesHeading}}</h2>
            <ul id="import-notes" aria-labelledby="import-notes-heading">
            {{#lines}}<li>{{.}}</li>
            {{/lines}}
            </ul>
            {{/checked}}
            {{#canRun}}
            <form id="import-run" method="post" action="{{base}}/{{job}}/run">
            <input type="hidden" name="csrf" value="{{csrf}}">
            <button id="import-run-submit" type="submit">{{t.importRunButton}}</button>
            </form>
            {{/canRun}}
            </section>
            {{^checking}}{{^running}}<p><a id="import-again" href="{{base}}">{{t.importStartOver}}</a></p>{{/running}}{{/checking}}
            {{#working}}<p><a id="import-reload" href="{{base}}/{{job}}">{{t.importReload}}</a></p>{{/working}}
            """,
    ]
}

/// The imports of this server process, by job id, kept an hour after they began. A job belongs to the
/// account that uploaded it and to the scope it was uploaded in (an app, or none for a new app).
final class PortalImportJobs: @unchecked Sendable {
    static let shared = PortalImportJobs()
    static let lifetime: TimeInterval = 3600

    enum Phase: String, Sendable { case checking, checked, running, done, failed }

    struct Job: Sendable {
        let id: String
        let account: UUID
        /// The uploader as the audit log names them (`portal:<email>`).
        let actor: String
        let appId: String?
        let created: Date
        let directory: URL
        var folder: URL?
        /// The appId the export holds, once converted.
        var exportedAppId: String?
        var notes: [ReportEntry] = []
        var phase: Phase = .checking
        var failure: String?
        var summary: [(name: String, counts: ImportSummary.Counts)] = []
        var lines: [String] = []
        var reportEntries = 0
        var total = 0
        var doneBy: [String: Int] = [:]
        var done: Int { doneBy.values.reduce(0, +) }
    }

    private let lock = NSLock()
    private var jobs: [String: Job] = [:]

    func job(_ id: String) -> Job? { lock.withLock { jobs[id] } }

    func latest(account: UUID, appId: String?) -> String? {
        lock.withLock { jobs.values.filter { $0.account == account && $0.appId == appId }.max { $0.created < $1.created }?.id }
    }

    private func update(_ id: String, _ change: (inout Job) -> Void) {
        lock.withLock {
            guard var job = jobs[id] else { return }
            change(&job)
            jobs[id] = job
        }
    }

    /// A new job holding the uploaded file; nil while the account has another job checking or running.
    func create(account: UUID, actor: String, appId: String?, zip: [UInt8]) throws -> String? {
        purge()
        let busy = lock.withLock { jobs.values.contains { $0.account == account && ($0.phase == .checking || $0.phase == .running) } }
        guard !busy else { return nil }
        let id = UUID().uuidString.lowercased()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cosync-portal-import-\(id)")
        // The export holds decrypted keys and secrets: owner-only, removed when the job ends.
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        try Data(zip).write(to: directory.appendingPathComponent("export.zip"))
        lock.withLock { jobs[id] = Job(id: id, account: account, actor: actor, appId: appId, created: Date(), directory: directory) }
        return id
    }

    /// Forgets jobs older than `lifetime` that are not running, and their files.
    func purge() {
        let old = lock.withLock { () -> [Job] in
            let gone = jobs.values.filter { Date().timeIntervalSince($0.created) > Self.lifetime && $0.phase != .running }
            for job in gone { jobs[job.id] = nil }
            return gone
        }
        for job in old { try? FileManager.default.removeItem(at: job.directory) }
    }

    func fail(_ id: String, _ reason: String) {
        update(id) { job in
            job.phase = .failed
            job.failure = reason
        }
        if let job = job(id) { try? FileManager.default.removeItem(at: job.directory) }
    }

    static func reason(_ error: any Error) -> String {
        if let failure = error as? ImportFailure { return failure.description }
        return PortalText.text(.genericError)
    }

    /// An audit row of the job's uploader, on the app when it exists (for a new app: by its appId,
    /// once the export names it). A failure to write it is logged; the work goes on.
    static func audit(
        _ services: CosyncServices, actor: String, appId: String?, action: String, status: String = "success", detail: [String: JSONValue]
    ) async {
        do {
            var app: App?
            if let appId, AppAdministration.isAppId(appId) { app = try await services.apps.currentApp(appId: appId) }
            try await services.client.withConnection { db in
                try await AuditLog.record(
                    db, appRef: app?.ref, appId: app?.appId ?? appId ?? "", actor: actor, action: action, status: status, detail: detail,
                    logger: services.logger)
            }
        } catch {
            services.logger.warning("portal: could not write an import audit row", metadata: ["action": "\(action)", "error": "\(type(of: error))"])
        }
    }

    /// The totals of a summary, for the audit row.
    static func totals(_ summary: [(name: String, counts: ImportSummary.Counts)]) -> [String: JSONValue] {
        let rows = summary.filter { $0.name != "apps" }.map(\.counts)
        return [
            "read": .int(rows.map(\.read).reduce(0, +)), "imported": .int(rows.map(\.imported).reduce(0, +)),
            "refused": .int(rows.map(\.refused).reduce(0, +)),
        ]
    }

    /// Converts the ZIP and runs the dry run.
    func check(_ id: String, services: CosyncServices) async {
        guard let job = job(id) else { return }
        do {
            let converted = try LegacyZipExport.convert(zip: job.directory.appendingPathComponent("export.zip"), workDirectory: job.directory)
            try? FileManager.default.removeItem(at: job.directory.appendingPathComponent("export.zip"))
            let notes = converted.losses.sorted { $0.key < $1.key }.map { field, rows in
                ReportEntry(collection: "zip", legacyId: "", appId: "", handle: nil, action: "lost",
                            reason: "\(field): \(rows) rows held [object Object] or an unreadable value; not carried")
            }
            let exported = Self.exportedAppId(converted.folder)
            update(id) { $0.exportedAppId = exported }
            if let scope = job.appId {
                guard exported == scope else {
                    let reason = PortalText.text(.importWrongApp, ["exported": exported ?? "?"])
                    fail(id, reason)
                    await Self.audit(
                        services, actor: job.actor, appId: scope, action: "import.check", status: "error",
                        detail: ["job": .string(id), "reason": .string(reason)])
                    return
                }
            }
            var options = ImportOptions(directory: converted.folder, encryptKey: nil)
            options.dryRun = true
            options.notes = notes
            let progress = ImportProgress(interactive: true, quiet: true, lineObserver: { [weak self] line in
                self?.update(id) { if $0.lines.count < 50 { $0.lines.append(line) } }
            })
            let summary = try await LegacyImporter(
                options: options, client: services.client, box: services.configuration.secretBox, logger: services.logger, progress: progress
            ).run()
            update(id) { job in
                job.folder = converted.folder
                job.notes = notes
                job.summary = summary.collections.map { ($0.0, $0.1) }
                job.total = summary.collections.filter { $0.0 != "apps" }.map(\.1.read).reduce(0, +)
                job.phase = .checked
            }
            var detail = Self.totals(summary.collections.map { ($0.0, $0.1) })
            detail["job"] = .string(id)
            await Self.audit(services, actor: job.actor, appId: job.appId ?? exported, action: "import.check", detail: detail)
        } catch {
            services.logger.notice("portal: an import check failed", metadata: ["error": "\(String(reflecting: error))"])
            let reason = Self.reason(error)
            fail(id, reason)
            await Self.audit(
                services, actor: job.actor, appId: job.appId ?? self.job(id)?.exportedAppId, action: "import.check", status: "error",
                detail: ["job": .string(id), "reason": .string(reason)])
        }
    }

    /// Moves a checked job to running; false when it is not checked (already started, failed, gone).
    func start(_ id: String) -> Bool {
        lock.withLock {
            guard var job = jobs[id], job.phase == .checked else { return false }
            job.phase = .running
            jobs[id] = job
            return true
        }
    }

    /// Imports a started job.
    func run(_ id: String, services: CosyncServices) async {
        guard let job = job(id), let folder = job.folder else { return }
        do {
            var options = ImportOptions(directory: folder, encryptKey: nil)
            options.notes = job.notes
            options.reportURL = job.directory.appendingPathComponent("report.json")
            options.actor = job.actor
            let progress = ImportProgress(interactive: true, quiet: true, observer: { [weak self] collection, done, _, _ in
                self?.update(id) { $0.doneBy[collection] = done }
            })
            let summary = try await LegacyImporter(
                options: options, client: services.client, box: services.configuration.secretBox, logger: services.logger, progress: progress
            ).run()
            update(id) { job in
                job.summary = summary.collections.map { ($0.0, $0.1) }
                job.reportEntries = summary.reportEntries
                job.phase = .done
            }
            try? FileManager.default.removeItem(at: job.directory)
            var detail = Self.totals(summary.collections.map { ($0.0, $0.1) })
            detail["job"] = .string(id)
            detail["reportEntries"] = .int(summary.reportEntries)
            await Self.audit(services, actor: job.actor, appId: job.appId ?? job.exportedAppId, action: "import.run", detail: detail)
        } catch {
            services.logger.notice("portal: an import failed", metadata: ["error": "\(String(reflecting: error))"])
            let reason = Self.reason(error)
            fail(id, reason)
            await Self.audit(
                services, actor: job.actor, appId: job.appId ?? job.exportedAppId, action: "import.run", status: "error",
                detail: ["job": .string(id), "reason": .string(reason)])
        }
    }

    /// The appId of the converted export's one app.
    static func exportedAppId(_ folder: URL) -> String? {
        guard let data = try? Data(contentsOf: folder.appendingPathComponent("apps.json")),
            let line = data.split(separator: UInt8(ascii: "\n")).first,
            let object = try? JSONSerialization.jsonObject(with: Data(line)) as? [String: Any]
        else { return nil }
        return object["appId"] as? String
    }
}
