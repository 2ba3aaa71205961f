import CosyncAuth
import Foundation
import HTTPTypes
import Hummingbird

/// The observation pages of an app (issue 23): the overview's charts, the audit log with filters and
/// the outbox. Read-only for every role; the numbers come from the core (`services.records`), as the
/// admin API's `logs` and `messages` do.
///
/// | Path | Page |
/// |---|---|
/// | GET `/portal/apps/{appId}` | overview: charts of the last 30 days, the webhook backlog, the outbox (this file's part) |
/// | GET `/portal/apps/{appId}/audit?action=&actor=&user=&from=&to=&cursor=` | the audit log, filtered, a page at a time |
/// | GET `/portal/apps/{appId}/outbox?to=&cursor=` | the app's messages: queued, sent, failed (no body: codes and links stay out) |
extension PortalRoutes {
    func registerObserve(on router: Router<Context>) {
        router.get("portal/apps/:appId/audit") { request, context in await auditPage(request, appId: context.parameters.get("appId") ?? "") }
        router.get("portal/apps/:appId/outbox") { request, context in await outboxPage(request, appId: context.parameters.get("appId") ?? "") }
    }

    // MARK: overview

    /// `MM-DD` of a UTC day, and its full `YYYY-MM-DD`.
    static func dayLabels(_ date: Date) -> (short: String, full: String) {
        let full = String(ISO8601.milliseconds(date).prefix(10))
        return (String(full.dropFirst(5)), full)
    }

    /// A duration in words: seconds, minutes, hours or days.
    static func age(since date: Date?, now: Date = Date()) -> String {
        guard let date else { return PortalText.text(.observeNone) }
        let seconds = max(0, Int(now.timeIntervalSince(date).rounded(.down)))
        if seconds < 120 { return PortalText.text(.observeSeconds, ["n": String(seconds)]) }
        if seconds < 7_200 { return PortalText.text(.observeMinutes, ["n": String(seconds / 60)]) }
        if seconds < 172_800 { return PortalText.text(.observeHours, ["n": String(seconds / 3_600)]) }
        return PortalText.text(.observeDays, ["n": String(seconds / 86_400)])
    }

    /// The overview's charts and their numbers, as values of the `observe.overview` template.
    func overviewCharts(app: App) async throws -> [String: Any] {
        let activity = try await services.records.activity(app: app, days: 30)
        let labels = activity.days.map { Self.dayLabels($0.date) }
        let series: [(id: String, key: PortalText.Key, values: [Int])] = [
            ("sign-ins", .observeSignIns, activity.days.map(\.signIns)),
            ("failures", .observeFailures, activity.days.map(\.failures)),
            ("lockouts", .observeLockouts, activity.days.map(\.lockouts)),
            ("new-users", .observeNewUsers, activity.days.map(\.newUsers)),
        ]
        let charts: [[String: Any]] = series.map { item in
            let title = PortalText.text(item.key)
            let total = PortalCharts.total(item.values)
            var summary = PortalText.text(.observeDailySummary, ["total": String(total), "days": String(item.values.count)])
            if let peak = item.values.max(), peak > 0, let at = item.values.firstIndex(of: peak) {
                summary += " " + PortalText.text(.observePeak, ["n": String(peak), "day": labels[at].full])
            }
            return [
                "id": item.id, "title": title, "total": String(total), "summary": summary,
                "svg": PortalCharts.columns(
                    id: item.id, title: title, summary: summary, labels: labels.map(\.short), values: item.values, kind: item.id),
            ]
        }
        let rows: [[String: Any]] = activity.days.enumerated().reversed().map { index, day in
            [
                "day": labels[index].full, "signIns": String(day.signIns), "failures": String(day.failures), "lockouts": String(day.lockouts),
                "newUsers": String(day.newUsers),
            ]
        }
        var values: [String: Any] = ["observeCharts": charts, "observeRows": rows]

        // The webhook backlog: undelivered messages per endpoint.
        let backlogTotal = PortalCharts.total(activity.backlog.map(\.count))
        let oldestBacklog = activity.backlog.compactMap(\.oldest).min()
        let backlogSummary = PortalText.text(
            .observeBacklogSummary, ["total": String(backlogTotal), "endpoints": String(activity.backlog.count), "age": Self.age(since: oldestBacklog)])
        values["observeBacklogSummary"] = backlogSummary
        values["observeBacklogTotal"] = String(backlogTotal)
        if !activity.backlog.isEmpty {
            let title = PortalText.text(.observeBacklogTitle)
            values["observeBacklogSVG"] = PortalCharts.bars(
                id: "webhook-backlog", title: title, summary: backlogSummary, labels: activity.backlog.map(\.url),
                values: activity.backlog.map(\.count), kind: "backlog")
            values["observeBacklogRows"] = activity.backlog.map { item -> [String: Any] in
                [
                    "url": item.url, "count": String(item.count), "age": Self.age(since: item.oldest),
                    "state": PortalText.text(item.enabled ? .webhookEnabled : .webhookDisabled),
                    "link": "/portal/apps/\(app.appId)/webhooks/\(item.endpointId.uuidString.lowercased())",
                ]
            }
        }

        // The outbox: waiting and failed messages, and how long the oldest waiting one has waited.
        let outboxSummary = PortalText.text(
            .observeOutboxSummary,
            ["queued": String(activity.outboxQueued), "failed": String(activity.outboxFailed), "age": Self.age(since: activity.outboxOldest)])
        values["observeOutboxSummary"] = outboxSummary
        values["observeOutboxQueued"] = String(activity.outboxQueued)
        values["observeOutboxFailed"] = String(activity.outboxFailed)
        values["observeOutboxAge"] = Self.age(since: activity.outboxOldest)
        values["observeOutboxSVG"] = PortalCharts.bars(
            id: "outbox", title: PortalText.text(.observeOutboxTitle), summary: outboxSummary,
            labels: [PortalText.text(.observeQueued), PortalText.text(.observeFailedMessages)], values: [activity.outboxQueued, activity.outboxFailed],
            kind: "outbox")
        return values
    }

    // MARK: audit log

    /// A date of a filter: `YYYY-MM-DD` (a date input's value), or a full ISO 8601 date-time.
    static func filterDate(_ text: String) -> Date? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        guard !trimmed.isEmpty, trimmed.count <= 64 else { return nil }
        if trimmed.count == 10 {
            let parts = trimmed.split(separator: "-", omittingEmptySubsequences: false)
            guard parts.count == 3, parts[0].count == 4, parts[1].count == 2, parts[2].count == 2,
                let year = Int(parts[0]), let month = Int(parts[1]), let day = Int(parts[2]),
                (1970...9998).contains(year), (1...12).contains(month), (1...31).contains(day)
            else { return nil }
            var calendar = Calendar(identifier: .gregorian)
            calendar.timeZone = TimeZone(identifier: "UTC") ?? calendar.timeZone
            let components = DateComponents(year: year, month: month, day: day)
            guard components.isValidDate(in: calendar), let date = calendar.date(from: components) else { return nil }
            return date
        }
        let withFraction = ISO8601DateFormatter()
        withFraction.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let plain = ISO8601DateFormatter()
        plain.formatOptions = [.withInternetDateTime]
        guard let date = withFraction.date(from: trimmed) ?? plain.date(from: trimmed),
            date.timeIntervalSince1970 >= 0, date.timeIntervalSince1970 < 253_402_300_800
        else { return nil }
        return date
    }

    /// `GET /portal/apps/{appId}/audit`: the app's audit log, newest first, filtered by action (exact,
    /// or a prefix ending in `.*`), actor, user id and dates (`from` and `to` inclusive days, UTC).
    func auditPage(_ request: Request, appId: String) async -> Response {
        await signedIn(request) { visitor in
            let (app, _) = try await access(visitor, appId: appId)
            guard let query = PortalForm.queryParameters(request) else { throw Stop.badRequest }
            func field(_ name: String) -> String { (query[name] ?? "").trimmingCharacters(in: .whitespaces) }
            let action = field("action"), actor = field("actor"), user = field("user"), from = field("from"), to = field("to")
            var filter = AuditLog.Filter()
            var problems: [String] = []
            if !action.isEmpty {
                if action.unicodeScalars.count <= 100 { filter.action = action } else { problems.append(PortalText.text(.auditActionInvalid)) }
            }
            if !actor.isEmpty {
                if actor.unicodeScalars.count <= 320 { filter.actor = actor } else { problems.append(PortalText.text(.auditActorInvalid)) }
            }
            if !user.isEmpty {
                if let id = UUID(uuidString: user) { filter.userId = id } else { problems.append(PortalText.text(.auditUserInvalid)) }
            }
            if !from.isEmpty {
                if let date = Self.filterDate(from) { filter.from = date } else { problems.append(PortalText.text(.auditFromInvalid)) }
            }
            if !to.isEmpty {
                // A day is inclusive: up to the next midnight; a date-time is the end itself.
                if let date = Self.filterDate(to) { filter.to = to.count == 10 ? date.addingTimeInterval(86_400) : date } else {
                    problems.append(PortalText.text(.auditToInvalid))
                }
            }
            let cursor = query["cursor"].flatMap { $0.isEmpty ? nil : $0 }
            var values: [String: Any] = ["action": action, "actor": actor, "user": user, "from": from, "to": to, "entries": [] as [[String: Any]]]
            guard problems.isEmpty else {
                return appPage(
                    visitor, app: app, current: "audit", heading: .auditTitle, template: "observe.audit", values: values,
                    error: problems.joined(separator: " "), status: .badRequest)
            }
            let page = try await services.records.logs(app: app, filter: filter, limit: Self.pageSize, cursor: cursor)
            values["entries"] = page.items.map { entry -> [String: Any] in
                var detail = String(decoding: (try? JSONCoding.encode(entry.detail)) ?? Data("{}".utf8), as: UTF8.self)
                if detail == "{}" { detail = "" }
                if detail.count > 400 { detail = String(detail.prefix(399)) + "…" }
                return [
                    "id": String(entry.id), "time": Self.date(entry.createdAt), "actor": entry.actor, "action": entry.action,
                    "status": entry.status, "detail": detail,
                ]
            }
            if let next = page.nextCursor {
                let kept = [("action", action), ("actor", actor), ("user", user), ("from", from), ("to", to)].filter { !$0.1.isEmpty }
                values["nextURL"] = "/portal/apps/\(app.appId)/audit?"
                    + (kept + [("cursor", next)]).map { "\($0.0)=\(PortalForm.encode($0.1))" }.joined(separator: "&")
            }
            return appPage(visitor, app: app, current: "audit", heading: .auditTitle, template: "observe.audit", values: values)
        }
    }

    // MARK: outbox

    /// `GET /portal/apps/{appId}/outbox?to=`: the app's messages, newest first, as the admin API's
    /// `messages` lists them, without the body or subject (they may carry codes and links).
    func outboxPage(_ request: Request, appId: String) async -> Response {
        await signedIn(request) { visitor in
            let (app, _) = try await access(visitor, appId: appId)
            guard let query = PortalForm.queryParameters(request) else { throw Stop.badRequest }
            let to = (query["to"] ?? "").trimmingCharacters(in: .whitespaces)
            guard to.unicodeScalars.count <= 254 else { throw Stop.badRequest }
            let cursor = query["cursor"].flatMap { $0.isEmpty ? nil : $0 }
            let page = try await services.records.messages(app: app, to: to.isEmpty ? nil : to, limit: Self.pageSize, cursor: cursor)
            let labels: [String: PortalText.Key] = [
                "queued": .outboxQueued, "sending": .outboxSending, "sent": .outboxSent, "failed": .outboxFailed,
            ]
            var values: [String: Any] = [
                "to": to,
                "messages": page.items.map { message -> [String: Any] in
                    [
                        "id": String(message.id), "created": Self.date(message.createdAt), "channel": message.channel, "recipient": message.to,
                        "template": message.template, "status": labels[message.status].map { PortalText.text($0) } ?? message.status,
                        "statusClass": PortalCharts.token(message.status), "attempts": String(message.attempts), "sent": Self.date(message.sentAt),
                    ]
                },
            ]
            if let next = page.nextCursor {
                values["nextURL"] = "/portal/apps/\(app.appId)/outbox?" + (to.isEmpty ? "" : "to=" + PortalForm.encode(to) + "&")
                    + "cursor=" + PortalForm.encode(next)
            }
            return appPage(visitor, app: app, current: "outbox", heading: .outboxTitle, template: "observe.outbox", values: values)
        }
    }
}

extension PortalPages {
    static let observeTemplates: [String: String] = [
        "observe.overview": """
            <section aria-labelledby="activity-heading" class="observe">
            <h2 id="activity-heading">{{t.observeActivityHeading}}</h2>
            <p class="help">{{t.observeActivityHelp}}</p>
            <div class="charts">
            {{#observeCharts}}
            <figure class="chart-figure" id="figure-{{id}}">
            <figcaption><span class="chart-title">{{title}}</span> <span class="chart-total">{{total}}</span></figcaption>
            {{{svg}}}
            </figure>
            {{/observeCharts}}
            </div>
            <details class="chart-data">
            <summary>{{t.observeNumbersSummary}}</summary>
            <table id="activity">
            <caption>{{t.observeActivityCaption}}</caption>
            <thead><tr><th scope="col">{{t.observeDayColumn}}</th><th scope="col">{{t.observeSignIns}}</th><th scope="col">{{t.observeFailures}}</th><th scope="col">{{t.observeLockouts}}</th><th scope="col">{{t.observeNewUsers}}</th></tr></thead>
            <tbody>
            {{#observeRows}}<tr><th scope="row">{{day}}</th><td>{{signIns}}</td><td>{{failures}}</td><td>{{lockouts}}</td><td>{{newUsers}}</td></tr>
            {{/observeRows}}
            </tbody>
            </table>
            </details>
            </section>
            <section aria-labelledby="backlog-heading" class="observe">
            <h2 id="backlog-heading">{{t.observeBacklogTitle}}</h2>
            <p id="backlog-summary">{{observeBacklogSummary}}</p>
            {{#observeBacklogSVG}}
            <figure class="chart-figure" id="figure-webhook-backlog">{{{observeBacklogSVG}}}</figure>
            <table id="backlog">
            <caption>{{t.observeBacklogCaption}}</caption>
            <thead><tr><th scope="col">{{t.webhookUrlColumn}}</th><th scope="col">{{t.webhookStateColumn}}</th><th scope="col">{{t.observeUndeliveredColumn}}</th><th scope="col">{{t.observeOldestColumn}}</th></tr></thead>
            <tbody>
            {{#observeBacklogRows}}<tr><td><a href="{{link}}" class="wrap">{{url}}</a></td><td>{{state}}</td><td>{{count}}</td><td>{{age}}</td></tr>
            {{/observeBacklogRows}}
            </tbody>
            </table>
            {{/observeBacklogSVG}}
            </section>
            <section aria-labelledby="outbox-heading" class="observe">
            <h2 id="outbox-heading">{{t.observeOutboxTitle}}</h2>
            <p id="outbox-summary">{{observeOutboxSummary}}</p>
            <figure class="chart-figure" id="figure-outbox">{{{observeOutboxSVG}}}</figure>
            <dl class="facts">
            <div><dt>{{t.observeQueued}}</dt><dd id="outbox-queued">{{observeOutboxQueued}}</dd></div>
            <div><dt>{{t.observeFailedMessages}}</dt><dd id="outbox-failed">{{observeOutboxFailed}}</dd></div>
            <div><dt>{{t.observeOutboxAge}}</dt><dd id="outbox-age">{{observeOutboxAge}}</dd></div>
            </dl>
            </section>
            """,
        "observe.audit": """
            <form method="get" action="/portal/apps/{{appId}}/audit" role="search" class="filters" aria-label="{{t.auditFiltersLabel}}">
            <div class="field">
            <label for="action">{{t.auditActionLabel}}</label>
            <input id="action" name="action" type="text" maxlength="100" value="{{action}}" aria-describedby="action-help" spellcheck="false">
            <p id="action-help" class="help">{{t.auditActionHelp}}</p>
            </div>
            <div class="field">
            <label for="actor">{{t.auditActorLabel}}</label>
            <input id="actor" name="actor" type="text" maxlength="320" value="{{actor}}" spellcheck="false">
            </div>
            <div class="field">
            <label for="user">{{t.auditUserLabel}}</label>
            <input id="user" name="user" type="text" maxlength="36" value="{{user}}" spellcheck="false">
            </div>
            <div class="field">
            <label for="from">{{t.auditFromLabel}}</label>
            <input id="from" name="from" type="date" value="{{from}}">
            </div>
            <div class="field">
            <label for="to">{{t.auditToLabel}}</label>
            <input id="to" name="to" type="date" value="{{to}}">
            </div>
            <button id="audit-filter" type="submit">{{t.auditFilterButton}}</button>
            </form>
            <table id="audit">
            <caption>{{t.auditCaption}}</caption>
            <thead><tr><th scope="col">{{t.auditTimeColumn}}</th><th scope="col">{{t.auditActorColumn}}</th><th scope="col">{{t.auditActionColumn}}</th><th scope="col">{{t.auditStatusColumn}}</th><th scope="col">{{t.auditDetailColumn}}</th></tr></thead>
            <tbody>
            {{#entries}}<tr id="audit-{{id}}"><td>{{time}}</td><td class="wrap">{{actor}}</td><td><code>{{action}}</code></td><td>{{status}}</td><td><code class="wrap">{{detail}}</code></td></tr>
            {{/entries}}
            </tbody>
            </table>
            {{^entries}}<p>{{t.auditNone}}</p>{{/entries}}
            {{#nextURL}}<p><a id="next-page" href="{{nextURL}}">{{t.nextPage}}</a></p>{{/nextURL}}
            """,
        "observe.outbox": """
            <form method="get" action="/portal/apps/{{appId}}/outbox" role="search" class="search">
            <label for="to">{{t.outboxToLabel}}</label>
            <input id="to" name="to" type="search" maxlength="254" value="{{to}}">
            <button type="submit">{{t.searchButton}}</button>
            </form>
            <p class="help">{{t.outboxHelp}}</p>
            <table id="outbox">
            <caption>{{t.outboxCaption}}</caption>
            <thead><tr><th scope="col">{{t.outboxCreatedColumn}}</th><th scope="col">{{t.outboxChannelColumn}}</th><th scope="col">{{t.outboxToColumn}}</th><th scope="col">{{t.outboxTemplateColumn}}</th><th scope="col">{{t.outboxStatusColumn}}</th><th scope="col">{{t.outboxAttemptsColumn}}</th><th scope="col">{{t.outboxSentColumn}}</th></tr></thead>
            <tbody>
            {{#messages}}<tr id="message-{{id}}"><td>{{created}}</td><td>{{channel}}</td><td class="wrap">{{recipient}}</td><td>{{template}}</td><td><span class="status status-{{statusClass}}">{{status}}</span></td><td>{{attempts}}</td><td>{{sent}}</td></tr>
            {{/messages}}
            </tbody>
            </table>
            {{^messages}}<p>{{t.outboxNone}}</p>{{/messages}}
            {{#nextURL}}<p><a id="next-page" href="{{nextURL}}">{{t.nextPage}}</a></p>{{/nextURL}}
            """,
    ]
}
