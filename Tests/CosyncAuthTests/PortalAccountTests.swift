import CosyncAuth
import Foundation
import PostgresNIO
import Testing

/// The Portal's accounts (issue 23), against the real PostgreSQL: invites, TOTP enrolment, the
/// two-step sign-in, lockouts under concurrency, sessions and their timeouts, roles per app.
@Suite("Portal accounts: invites, TOTP, sign-in, lockouts, sessions and roles")
struct PortalAccountTests {
    static let password = "correct horse battery staple"

    static func email(_ tag: String) -> String { "\(tag)-\(Secrets.hexIdentifier().prefix(12))@portal.test" }

    /// The current TOTP code of `secret`. Each test resets the account's last used step before
    /// reusing a step (a code works once).
    static func code(_ secret: [UInt8]) -> String { TOTP.code(secret: secret, step: TOTP.step(at: Date())) }

    static func forgetUsedSteps(_ id: UUID) async throws {
        try await TestEnvironment.sql("UPDATE portal_accounts SET totp_last_step = 0 WHERE id = \(id)")
    }

    /// An account made through an invite code, enrolled and signed in once.
    struct Member {
        let email: String
        let secret: [UInt8]
        let signIn: PortalSignIn
        var session: PortalSession { signIn.session }
    }

    static func enrol(code inviteCode: String, email: String) async throws -> Member {
        let portal = try await TestEnvironment.services().portal
        let enrolment = try #require(try await portal.acceptInvite(code: inviteCode, password: password))
        #expect(enrolment.account.email == email && !enrolment.account.totpEnabled)
        let signIn = try await portal.confirmTOTP(ticket: enrolment.ticket, code: Self.code(enrolment.totpSecret))
        return Member(email: email, secret: enrolment.totpSecret, signIn: signIn)
    }

    static func newOperator() async throws -> Member {
        let email = Self.email("op")
        let code = try await TestEnvironment.services().portal.bootstrapOperator(email: email)
        return try await enrol(code: code, email: email)
    }

    static func newApp(_ name: String) async throws -> String {
        let services = try await TestEnvironment.services()
        return try await services.apps.create(["name": .string(name)], actor: "test").app.appId
    }

    static func expectError(_ expected: PortalError, _ body: () async throws -> Void, sourceLocation: SourceLocation = #_sourceLocation) async {
        do {
            try await body()
            Issue.record("expected \(expected), got success", sourceLocation: sourceLocation)
        } catch let error as PortalError {
            #expect(error == expected, sourceLocation: sourceLocation)
        } catch {
            Issue.record("expected \(expected), got \(error)", sourceLocation: sourceLocation)
        }
    }

    @Test("the walk: operator invite → accept → enrol TOTP → session; sign out; sign in with password and code; fresh sign-in")
    func walk() async throws {
        let services = try await TestEnvironment.services()
        let portal = services.portal
        let email = Self.email("walk")
        let code = try await portal.bootstrapOperator(email: email.uppercased())
        #expect(portal.inviteLink(code: code) == "http://localhost:8080/portal/invite/\(code)")
        #expect(try await portal.inviteEmail(code: code) == email)
        let member = try await Self.enrol(code: code, email: email)
        #expect(member.session.account.isOperator && member.session.account.totpEnabled)
        #expect(member.session.provenBy == "password+totp" && member.session.isFresh())
        #expect(member.session.auditActor == "portal:\(email)")
        // The invite was used; only the cookie's hash is stored.
        #expect(try await portal.inviteEmail(code: code) == nil)
        #expect(try await TestEnvironment.value(
            "SELECT count(*)::int FROM portal_sessions WHERE secret_hash = \(Secrets.sha256(member.signIn.cookie))", as: Int.self) == 1)
        let live = try #require(try await portal.session(cookie: member.signIn.cookie))
        #expect(live.id == member.session.id && live.account.email == email)

        try await portal.signOut(cookie: member.signIn.cookie)
        #expect(try await portal.session(cookie: member.signIn.cookie) == nil)

        try await Self.forgetUsedSteps(member.session.account.id)
        let step = try await portal.signIn(email: email, password: Self.password, address: "198.51.100.1")
        guard case .code(let ticket) = step else { Issue.record("expected a code step, got \(step)"); return }
        let signedIn = try await portal.signInCode(ticket: ticket, code: Self.code(member.secret), address: "198.51.100.1")
        #expect(signedIn.session.account.id == member.session.account.id)
        #expect(try await portal.session(cookie: signedIn.cookie) != nil)
        // The ticket was used up.
        try await Self.forgetUsedSteps(member.session.account.id)
        await Self.expectError(.invalidCredentials) { _ = try await portal.signInCode(ticket: ticket, code: Self.code(member.secret)) }

        // A fresh sign-in moves provenAt on the same session.
        try await TestEnvironment.sql("UPDATE portal_sessions SET proven_at = now() - interval '10 minutes' WHERE id = \(signedIn.session.id)")
        let stale = try #require(try await portal.session(cookie: signedIn.cookie))
        #expect(!stale.isFresh())
        try await Self.forgetUsedSteps(member.session.account.id)
        let fresh = try await portal.reauthenticate(cookie: signedIn.cookie, password: Self.password, code: Self.code(member.secret))
        #expect(fresh.id == signedIn.session.id && fresh.isFresh())

        // Audited with the account's identity, on no app.
        let actions = try await TestEnvironment.value(
            "SELECT string_agg(action, ',' ORDER BY id) FROM audit_log WHERE actor = \("portal:" + email) AND app_ref IS NULL AND status = 'success'",
            as: String.self)
        #expect(actions == "portal.invite.accept,portal.enrol,portal.sign-out,portal.sign-in,portal.reauth", "\(actions ?? "")")
    }

    @Test("wrong password, unknown account, wrong or replayed code, bad input: refused, never a trap")
    func refusals() async throws {
        let portal = try await TestEnvironment.services().portal
        let member = try await Self.newOperator()
        let address = "198.51.100.2"
        await Self.expectError(.invalidCredentials) { _ = try await portal.signIn(email: member.email, password: "wrong password!", address: address) }
        await Self.expectError(.invalidCredentials) { _ = try await portal.signIn(email: Self.email("nobody"), password: Self.password, address: address) }
        await Self.expectError(.invalidCredentials) { _ = try await portal.signIn(email: "not an e-mail", password: Self.password) }
        await Self.expectError(.invalidCredentials) {
            _ = try await portal.signIn(email: member.email, password: String(repeating: "p", count: 5000))
        }
        let step = try await portal.signIn(email: member.email, password: Self.password, address: address)
        guard case .code(let ticket) = step else { Issue.record("expected a code step"); return }
        // The code of the confirmation step was used: the same code again is refused (replay).
        let usedStep = try #require(try await TestEnvironment.value(
            "SELECT totp_last_step FROM portal_accounts WHERE id = \(member.session.account.id)", as: Int64.self))
        await Self.expectError(.invalidCode) { _ = try await portal.signInCode(ticket: ticket, code: TOTP.code(secret: member.secret, step: usedStep)) }
        let wrong = Self.code(member.secret) == "123456" ? "654321" : "123456"
        await Self.expectError(.invalidCode) { _ = try await portal.signInCode(ticket: ticket, code: wrong) }
        await Self.expectError(.invalidCode) { _ = try await portal.signInCode(ticket: ticket, code: "12 456") }
        await Self.expectError(.invalidCredentials) { _ = try await portal.signInCode(ticket: "no-such-ticket-" + String(repeating: "x", count: 30), code: "123456") }
        await Self.expectError(.invalidCredentials) { _ = try await portal.signInCode(ticket: String(repeating: "t", count: 100_000), code: "123456") }
        #expect(try await portal.session(cookie: "") == nil)
        #expect(try await portal.session(cookie: String(repeating: "c", count: 100_000)) == nil)
        #expect(try await portal.session(cookie: "\u{0}\u{FFFF}é🙂") == nil)
        #expect(try await portal.inviteEmail(code: String(repeating: "i", count: 100_000)) == nil)
        await Self.expectError(.inviteInvalid) { _ = try await portal.acceptInvite(code: "unknown-invite-code-0123456789abcdef", password: Self.password) }
        await Self.expectError(.badInput("Enter a valid e-mail address.")) { _ = try await portal.bootstrapOperator(email: "a@b@c") }
        await Self.expectError(.badInput("Enter a valid e-mail address.")) { _ = try await portal.bootstrapOperator(email: String(repeating: "a", count: 300) + "@x.test") }
        // A weak password leaves the invite usable.
        let email = Self.email("weak")
        let code = try await portal.bootstrapOperator(email: email)
        await Self.expectError(.weakPassword("The password must have at least 12 characters.")) { _ = try await portal.acceptInvite(code: code, password: "short") }
        await Self.expectError(.weakPassword("Choose a password that is harder to guess.")) { _ = try await portal.acceptInvite(code: code, password: email) }
        #expect(try await portal.inviteEmail(code: code) == email)
        // A code for an account that never confirmed its enrolment leads to the enrolment again.
        let enrolment = try #require(try await portal.acceptInvite(code: code, password: Self.password))
        let again = try await portal.signIn(email: email, password: Self.password)
        guard case .enrol(let renewed) = again else { Issue.record("expected the enrolment again"); return }
        #expect(renewed.account.id == enrolment.account.id && renewed.totpSecret != enrolment.totpSecret)
        #expect(try await portal.enrolment(ticket: renewed.ticket)?.totpSecret == renewed.totpSecret)
        // The first enrolment's secret was replaced.
        await Self.expectError(.invalidCode) { _ = try await portal.confirmTOTP(ticket: renewed.ticket, code: Self.code(enrolment.totpSecret) == Self.code(renewed.totpSecret) ? "000000" : Self.code(enrolment.totpSecret)) }
        _ = try await portal.confirmTOTP(ticket: renewed.ticket, code: Self.code(renewed.totpSecret))
        #expect(try await portal.enrolment(ticket: renewed.ticket) == nil)
    }

    @Test("30 concurrent wrong passwords run at most the threshold's bcrypt checks; the rest, and then the right password, are locked")
    func lockoutUnderConcurrency() async throws {
        let portal = try await TestEnvironment.services().portal
        let member = try await Self.newOperator()
        let address = "203.0.113.\(Int.random(in: 1...250))"
        let outcomes = await withTaskGroup(of: String.self) { group in
            for index in 0..<30 {
                group.addTask {
                    do {
                        _ = try await portal.signIn(email: member.email, password: "wrong password \(index)", address: address)
                        return "signed in"
                    } catch PortalError.invalidCredentials {
                        return "checked"
                    } catch PortalError.locked(let seconds) {
                        return seconds > 0 ? "locked" : "locked without a wait"
                    } catch {
                        return "\(error)"
                    }
                }
            }
            var all: [String] = []
            for await outcome in group { all.append(outcome) }
            return all
        }
        let checked = outcomes.filter { $0 == "checked" }.count
        #expect(checked >= 1 && checked <= PortalAccounts.maxLoginAttempts, "\(outcomes)")
        #expect(outcomes.filter { $0 == "locked" }.count == 30 - checked, "\(outcomes)")
        // While locked, even the right password is not checked.
        do {
            _ = try await portal.signIn(email: member.email, password: Self.password, address: address)
            Issue.record("the right password went through a lock")
        } catch PortalError.locked(let seconds) {
            #expect(seconds > 0 && seconds <= 30)
        }
        // The lock is per (e-mail, address): another address still signs in.
        let other = try await portal.signIn(email: member.email, password: Self.password, address: "192.0.2.77")
        guard case .code = other else { Issue.record("expected a code step"); return }
    }

    @Test("wrong TOTP codes lock the account's code checks, whatever the ticket")
    func codeLockout() async throws {
        let portal = try await TestEnvironment.services().portal
        let member = try await Self.newOperator()
        var refused: [String] = []
        for _ in 0..<4 {
            guard case .code(let ticket) = try await portal.signIn(email: member.email, password: Self.password) else { return }
            for _ in 0..<2 {
                do {
                    _ = try await portal.signInCode(ticket: ticket, code: "000000")
                    refused.append("accepted")
                } catch PortalError.invalidCode {
                    refused.append("wrong")
                } catch PortalError.locked {
                    refused.append("locked")
                }
            }
        }
        #expect(refused.filter { $0 == "wrong" }.count == PortalAccounts.maxCodeAttempts, "\(refused)")
        #expect(refused.filter { $0 == "locked" }.count == 8 - PortalAccounts.maxCodeAttempts, "\(refused)")
    }

    @Test("an invite code is accepted once, however many requests race for it")
    func inviteSingleUse() async throws {
        let portal = try await TestEnvironment.services().portal
        let email = Self.email("race")
        let code = try await portal.bootstrapOperator(email: email)
        let outcomes = await withTaskGroup(of: String.self) { group in
            for _ in 0..<10 {
                group.addTask {
                    do {
                        return try await portal.acceptInvite(code: code, password: Self.password) == nil ? "nil" : "accepted"
                    } catch PortalError.inviteInvalid {
                        return "invalid"
                    } catch {
                        return "\(error)"
                    }
                }
            }
            var all: [String] = []
            for await outcome in group { all.append(outcome) }
            return all
        }
        #expect(outcomes.filter { $0 == "accepted" }.count == 1, "\(outcomes)")
        #expect(outcomes.filter { $0 == "invalid" }.count == 9, "\(outcomes)")
        #expect(try await TestEnvironment.value("SELECT count(*)::int FROM portal_tickets t JOIN portal_accounts a ON a.id = t.account_id WHERE a.email = \(email)", as: Int.self) == 1)
        // Re-running the operator command retires the previous unused link.
        let first = try await portal.bootstrapOperator(email: email)
        let second = try await portal.bootstrapOperator(email: email)
        #expect(try await portal.inviteEmail(code: first) == nil)
        #expect(try await portal.inviteEmail(code: second) == email)
        // An expired invite is refused.
        try await TestEnvironment.sql("UPDATE portal_invites SET expires_at = now() - interval '1 second' WHERE code_hash = \(Secrets.sha256(second))")
        await Self.expectError(.inviteInvalid) { _ = try await portal.acceptInvite(code: second, password: Self.password) }
    }

    @Test("a session ends after 30 idle minutes and 12 hours after it began")
    func sessionExpiry() async throws {
        let portal = try await TestEnvironment.services().portal
        let member = try await Self.newOperator()
        let id = member.session.id
        try await TestEnvironment.sql("UPDATE portal_sessions SET last_seen_at = now() - interval '29 minutes' WHERE id = \(id)")
        #expect(try await portal.session(cookie: member.signIn.cookie) != nil)  // and it is seen now again
        try await TestEnvironment.sql("UPDATE portal_sessions SET last_seen_at = now() - interval '31 minutes' WHERE id = \(id)")
        #expect(try await portal.session(cookie: member.signIn.cookie) == nil)

        try await Self.forgetUsedSteps(member.session.account.id)
        guard case .code(let ticket) = try await portal.signIn(email: member.email, password: Self.password) else { return }
        let second = try await portal.signInCode(ticket: ticket, code: Self.code(member.secret))
        try await TestEnvironment.sql("UPDATE portal_sessions SET created_at = now() - interval '11 hours 59 minutes' WHERE id = \(second.session.id)")
        #expect(try await portal.session(cookie: second.cookie) != nil)
        try await TestEnvironment.sql("UPDATE portal_sessions SET created_at = now() - interval '12 hours 1 minute' WHERE id = \(second.session.id)")
        #expect(try await portal.session(cookie: second.cookie) == nil)
        // A sign-in ticket lives 5 minutes.
        try await Self.forgetUsedSteps(member.session.account.id)
        guard case .code(let late) = try await portal.signIn(email: member.email, password: Self.password) else { return }
        try await TestEnvironment.sql("UPDATE portal_tickets SET expires_at = now() - interval '1 second' WHERE secret_hash = \(Secrets.sha256(late))")
        await Self.expectError(.invalidCredentials) { _ = try await portal.signInCode(ticket: late, code: Self.code(member.secret)) }
        // Housekeeping removes what expired.
        try await TestEnvironment.sql("UPDATE portal_sessions SET last_seen_at = now() - interval '2 days' WHERE id = \(id)")
        try await portal.purgeExpired()
        #expect(try await TestEnvironment.value("SELECT count(*)::int FROM portal_sessions WHERE id = \(id)", as: Int.self) == 0)
    }

    @Test("roles: a developer sees and acts only on its apps; owners invite to their app only; app deletion removes the role")
    func roles() async throws {
        let services = try await TestEnvironment.services()
        let portal = services.portal
        let operatorMember = try await Self.newOperator()
        let tag = "portal-roles-\(Secrets.hexIdentifier().prefix(8))"
        let appA = try await Self.newApp("\(tag) A")
        let appB = try await Self.newApp("\(tag) B")

        // The operator invites a developer as viewer of A.
        let devEmail = Self.email("dev")
        let devCode = try await portal.invite(email: devEmail, isOperator: false, appId: appA, role: .viewer, by: operatorMember.session)
        let dev = try await Self.enrol(code: devCode, email: devEmail)
        #expect(!dev.session.account.isOperator)
        #expect(try await portal.role(of: dev.session, appId: appA) == .viewer)
        #expect(try await portal.role(of: dev.session, appId: appB) == nil)
        #expect(try await portal.role(of: operatorMember.session, appId: appB) == .owner)
        #expect(try await portal.authorize(dev.session, appId: appA, needs: .viewer) == .viewer)
        await Self.expectError(.forbidden) { try await portal.authorize(dev.session, appId: appA, needs: .editor) }
        await Self.expectError(.notFound) { try await portal.authorize(dev.session, appId: appB, needs: .viewer) }

        // visibleApps: the developer sees A only; the operator sees both.
        let devPage = try await portal.visibleApps(of: dev.session, query: nil, limit: 50, cursor: nil)
        #expect(devPage.apps.map(\.appId) == [appA] && devPage.nextCursor == nil)
        #expect(try await portal.visibleApps(of: dev.session, query: "\(tag) b", limit: 50, cursor: nil).apps.isEmpty)
        let opPage = try await portal.visibleApps(of: operatorMember.session, query: tag, limit: 1, cursor: nil)
        #expect(opPage.apps.map(\.appId) == [appB])
        let opNext = try await portal.visibleApps(of: operatorMember.session, query: tag, limit: 1, cursor: opPage.nextCursor)
        #expect(opNext.apps.map(\.appId) == [appA])

        // Who may invite whom.
        await Self.expectError(.forbidden) {
            _ = try await portal.invite(email: Self.email("x"), isOperator: false, appId: appA, role: .viewer, by: dev.session)
        }
        await Self.expectError(.notFound) {
            _ = try await portal.invite(email: Self.email("x"), isOperator: false, appId: appB, role: .viewer, by: dev.session)
        }
        await Self.expectError(.forbidden) { _ = try await portal.invite(email: Self.email("x"), isOperator: true, appId: nil, role: nil, by: dev.session) }
        await Self.expectError(.badInput("Choose an app and a role.")) {
            _ = try await portal.invite(email: Self.email("x"), isOperator: false, appId: appA, role: nil, by: operatorMember.session)
        }

        // An owner of A invites to A; an invite to an existing account needs its current password and adds the role.
        let ownerEmail = Self.email("owner")
        let owner = try await Self.enrol(
            code: try await portal.invite(email: ownerEmail, isOperator: false, appId: appA, role: .owner, by: operatorMember.session),
            email: ownerEmail)
        let upgrade = try await portal.invite(email: devEmail, isOperator: false, appId: appA, role: .editor, by: owner.session)
        await Self.expectError(.invalidCredentials) { _ = try await portal.acceptInvite(code: upgrade, password: "not the password at all") }
        #expect(try await portal.acceptInvite(code: upgrade, password: Self.password) == nil)
        #expect(try await portal.role(of: dev.session, appId: appA) == .editor)
        let members = try await portal.members(appId: appA)
        #expect(Set(members.map { "\($0.email) \($0.role.rawValue)" }) == ["\(devEmail) editor", "\(ownerEmail) owner"])
        await Self.expectError(.notFound) { _ = try await portal.members(appId: "0123456789abcdef0123456789abcdef") }

        // The invite e-mail went through the outbox with no app, and was delivered (then redacted).
        var status: String?
        for _ in 0..<200 {
            status = try await TestEnvironment.value(
                "SELECT status FROM messages WHERE recipient = \(ownerEmail) AND app_ref IS NULL AND template = 'portalInvite'", as: String.self)
            if status == "sent" { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(status == "sent")
        #expect(try await TestEnvironment.value("SELECT body FROM messages WHERE recipient = \(ownerEmail) AND app_ref IS NULL", as: String.self)
            == "[redacted after delivery]")
        // Audited on the app with the inviter's identity.
        #expect(try await TestEnvironment.value(
            """
            SELECT count(*)::int FROM audit_log l JOIN apps a ON a.id = l.app_ref
            WHERE a.app_id = \(appA) AND l.actor = \("portal:" + ownerEmail) AND l.action = 'portal.invite'
            """, as: Int.self) == 1)

        // Deleting the app removes its roles.
        try await services.apps.delete(appId: appA, actor: operatorMember.session.auditActor)
        #expect(try await portal.visibleApps(of: dev.session, query: nil, limit: 50, cursor: nil).apps.isEmpty)
        #expect(try await portal.role(of: dev.session, appId: appA) == nil)
    }

    @Test("an app owner's invite cannot take over a half-set-up account (password set, authenticator never confirmed), nor an operator's")
    func inviteCannotTakeOverHalfSetUpAccount() async throws {
        let portal = try await TestEnvironment.services().portal
        let operatorMember = try await Self.newOperator()
        let appA = try await Self.newApp("portal-takeover-\(Secrets.hexIdentifier().prefix(8))")
        let ownerEmail = Self.email("owner")
        let owner = try await Self.enrol(
            code: try await portal.invite(email: ownerEmail, isOperator: false, appId: appA, role: .owner, by: operatorMember.session),
            email: ownerEmail)

        // Alice gets the operator recovery invite, sets her password, and stops before the enrolment.
        let alice = Self.email("alice")
        let alicePending = try #require(try await portal.acceptInvite(code: try await portal.bootstrapOperator(email: alice), password: Self.password))
        #expect(alicePending.account.isOperator && !alicePending.account.totpEnabled)
        let before = try #require(try await TestEnvironment.value(
            "SELECT password_hash || encode(totp_secret_sealed, 'hex') FROM portal_accounts WHERE email = \(alice)", as: String.self))

        // The owner of A invites alice as a viewer, opens the link itself and sets its own password: refused.
        let code = try await portal.invite(email: alice, isOperator: false, appId: appA, role: .viewer, by: owner.session)
        await Self.expectError(.invalidCredentials) {
            _ = try await portal.acceptInvite(code: code, password: "the owner's own password", address: "198.51.100.40")
        }
        // Nothing of alice's changed, and she got no role; the invite still waits for her.
        #expect(try await TestEnvironment.value(
            "SELECT password_hash || encode(totp_secret_sealed, 'hex') FROM portal_accounts WHERE email = \(alice)", as: String.self)
            == before)
        #expect(try await portal.members(appId: appA).map(\.email).contains(alice) == false)
        #expect(try await portal.inviteEmail(code: code) == alice)

        // With her own password the invite adds the role and changes nothing else; her sign-in leads to the enrolment.
        #expect(try await portal.acceptInvite(code: code, password: Self.password) == nil)
        #expect(try await portal.members(appId: appA).contains { $0.email == alice && $0.role == .viewer })
        guard case .enrol(let enrolment) = try await portal.signIn(email: alice, password: Self.password) else {
            Issue.record("expected the enrolment"); return
        }
        let signedIn = try await portal.confirmTOTP(ticket: enrolment.ticket, code: Self.code(enrolment.totpSecret))
        #expect(signedIn.session.account.isOperator && signedIn.session.account.email == alice)

        // The recovery invite of the portal-operator command still resets the credentials (and ends the sessions).
        let recovered = try #require(try await portal.acceptInvite(code: try await portal.bootstrapOperator(email: alice), password: "a brand new passphrase"))
        #expect(recovered.account.id == enrolment.account.id && !recovered.account.totpEnabled)
        #expect(try await portal.session(cookie: signedIn.cookie) == nil)
    }

    @Test("accepting an invite with a password that breaks the rule answers the same for an existing and a new account")
    func inviteAnswersDoNotTellAccountsApart() async throws {
        let portal = try await TestEnvironment.services().portal
        let operatorMember = try await Self.newOperator()
        let appA = try await Self.newApp("portal-enum-\(Secrets.hexIdentifier().prefix(8))")
        let existing = Self.email("existing")
        _ = try await Self.enrol(
            code: try await portal.invite(email: existing, isOperator: false, appId: appA, role: .viewer, by: operatorMember.session),
            email: existing)
        let fresh = Self.email("fresh")
        let toExisting = try await portal.invite(email: existing, isOperator: false, appId: appA, role: .editor, by: operatorMember.session)
        let toFresh = try await portal.invite(email: fresh, isOperator: false, appId: appA, role: .editor, by: operatorMember.session)
        for (code, email) in [(toExisting, existing), (toFresh, fresh)] {
            await Self.expectError(.weakPassword("The password must have at least 12 characters.")) {
                _ = try await portal.acceptInvite(code: code, password: "short")
            }
            await Self.expectError(.weakPassword("Choose a password that is harder to guess.")) {
                _ = try await portal.acceptInvite(code: code, password: email)
            }
            await Self.expectError(.weakPassword("The password is too long.")) {
                _ = try await portal.acceptInvite(code: code, password: String(repeating: "ab", count: 600))
            }
            #expect(try await portal.inviteEmail(code: code) == email)
        }
    }

    @Test("portal_roles.role admits exactly the PortalRole cases, portal_tickets.kind the two ticket kinds")
    func roleColumn() async throws {
        #expect(try await EnumColumnTests.admitted("portal_roles", "role") == Set(PortalRole.allCases.map(\.rawValue)))
        #expect(try await EnumColumnTests.admitted("portal_tickets", "kind") == ["sign-in", "enrol"])
    }
}
