import CosyncAuth
import Foundation
import HTTPTypes
import Hummingbird

/// Signing in, accepting an invitation, enrolling the authenticator, re-authenticating, signing out.
extension PortalRoutes {
    // MARK: sign in

    func signInPage(_ request: Request, email: String = "", error: String? = nil, status: HTTPResponse.Status = .ok) async -> Response {
        if error == nil, (try? await visitor(request)) != nil { return PortalPages.redirect("/portal") }
        let (key, setCookie) = browserKey(request)
        var page = makePage(
            nil, heading: PortalText.text(.signInTitle), template: "signIn",
            values: ["csrf": csrf.token(bound: key, purpose: "sign-in"), "email": email], status: status)
        page.error = error
        page.cookies = setCookie.map { [$0] } ?? []
        return PortalPages.render(page)
    }

    /// `POST /portal/sign-in`: the password; the answer is the code form.
    func signIn(_ request: Request, _ context: Context) async -> Response {
        let posted: (form: [String: String], browserKey: String)
        switch await anonymousPost(request, purpose: "sign-in") {
        case .success(let value): posted = value
        case .failure(let stop): return stop.response
        }
        let email = (posted.form["email"] ?? "").trimmingCharacters(in: .whitespaces)
        do {
            switch try await services.portal.signIn(email: email, password: posted.form["password"] ?? "", address: clientAddress(request, context)) {
            case .code(let ticket): return codePage(browserKey: posted.browserKey, ticket: ticket)
            case .enrol(let enrolment): return enrolRedirect(enrolment)
            }
        } catch {
            guard let (text, status) = Self.formError(error) else { return stopped(error, visitor: nil) }
            return await signInPage(request, email: email, error: text, status: status)
        }
    }

    func codePage(browserKey: String, ticket: String, error: String? = nil, status: HTTPResponse.Status = .ok) -> Response {
        var page = makePage(
            nil, heading: PortalText.text(.codeTitle), template: "code",
            values: ["csrf": csrf.token(bound: browserKey, purpose: "sign-in-code"), "ticket": ticket], status: status)
        page.error = error
        return PortalPages.render(page)
    }

    /// `POST /portal/sign-in/code`: the TOTP code; opens the session.
    func signInCode(_ request: Request, _ context: Context) async -> Response {
        let posted: (form: [String: String], browserKey: String)
        switch await anonymousPost(request, purpose: "sign-in-code") {
        case .success(let value): posted = value
        case .failure(let stop): return stop.response
        }
        let ticket = posted.form["ticket"] ?? ""
        do {
            let signedIn = try await services.portal.signInCode(ticket: ticket, code: posted.form["code"] ?? "", address: clientAddress(request, context))
            return opened(signedIn)
        } catch {
            guard let (text, status) = Self.formError(error) else { return stopped(error, visitor: nil) }
            if case PortalError.invalidCredentials = error {
                // The ticket is gone (expired or used): back to step 1.
                return await signInPage(request, error: text, status: status)
            }
            return codePage(browserKey: posted.browserKey, ticket: ticket, error: text, status: status)
        }
    }

    /// A new session: its cookie, then the apps list.
    func opened(_ signedIn: PortalSignIn, extraCookies: [String] = []) -> Response {
        PortalPages.redirect("/portal", cookies: [cookies.set(cookies.sessionName, signedIn.cookie)] + extraCookies)
    }

    /// To the enrolment page, its ticket in the sealed hand-over cookie.
    func enrolRedirect(_ enrolment: PortalEnrolment) -> Response {
        guard let sealed = sealer.seal(["kind": "enrol", "ticket": enrolment.ticket], lifetime: 1800) else {
            return stopped(Stop.badRequest, visitor: nil)
        }
        return PortalPages.redirect("/portal/enrol", cookies: [cookies.set(cookies.onceName, sealed, maxAge: 1800)])
    }

    // MARK: invitation and enrolment

    func invitePage(_ request: Request, code: String, error: String? = nil, status: HTTPResponse.Status = .ok) async -> Response {
        let email: String?
        do { email = try await services.portal.inviteEmail(code: code) } catch { return stopped(error, visitor: nil) }
        guard let email else { return message(.inviteInvalid, title: .notFoundTitle, status: .notFound) }
        let (key, setCookie) = browserKey(request)
        var page = makePage(
            nil, heading: PortalText.text(.inviteTitle), template: "invite",
            values: [
                "csrf": csrf.token(bound: key, purpose: "invite:" + code), "action": "/portal/invite/" + PortalForm.encode(code),
                "prompt": PortalText.text(.invitePrompt, ["email": email]),
            ],
            status: status)
        page.error = error
        page.cookies = setCookie.map { [$0] } ?? []
        return PortalPages.render(page)
    }

    /// `POST /portal/invite/{code}`: the password; the account then enrols its authenticator.
    func acceptInvite(_ request: Request, _ context: Context, code: String) async -> Response {
        let posted: (form: [String: String], browserKey: String)
        switch await anonymousPost(request, purpose: "invite:" + code) {
        case .success(let value): posted = value
        case .failure(let stop): return stop.response
        }
        let password = posted.form["password"] ?? ""
        guard password == posted.form["password-confirm"] ?? "" else {
            return await invitePage(request, code: code, error: PortalText.text(.passwordsDiffer), status: .badRequest)
        }
        do {
            // nil: an account that already signs in got the role; it signs in as usual.
            guard let enrolment = try await services.portal.acceptInvite(code: code, password: password, address: clientAddress(request, context))
            else { return PortalPages.redirect("/portal/sign-in") }
            return enrolRedirect(enrolment)
        } catch PortalError.inviteInvalid {
            return message(.inviteInvalid, title: .notFoundTitle, status: .notFound)
        } catch {
            guard let (text, status) = Self.formError(error) else { return stopped(error, visitor: nil) }
            return await invitePage(request, code: code, error: text, status: status)
        }
    }

    /// The enrolment whose ticket waits in the hand-over cookie, while it is live.
    func pendingEnrolment(_ request: Request) async throws -> PortalEnrolment? {
        guard let fields = sealer.open(PortalCookies.value(request, cookies.onceName)), fields["kind"] == "enrol", let ticket = fields["ticket"]
        else { return nil }
        return try await services.portal.enrolment(ticket: ticket)
    }

    func enrolPage(_ request: Request, error: String? = nil, status: HTTPResponse.Status = .ok) async -> Response {
        let pending: PortalEnrolment?
        do { pending = try await pendingEnrolment(request) } catch { return stopped(error, visitor: nil) }
        guard let pending else { return PortalPages.redirect("/portal/sign-in") }
        let (key, setCookie) = browserKey(request)
        var values: [String: Any] = ["csrf": csrf.token(bound: key, purpose: "enrol"), "key": TOTP.displayKey(pending.totpSecret)]
        if let qr = PortalPages.qrSVG(pending.provisioningURI, label: PortalText.text(.enrolQRLabel)) { values["qr"] = qr }
        var page = makePage(nil, heading: PortalText.text(.enrolTitle), template: "enrol", values: values, status: status)
        page.error = error
        page.cookies = setCookie.map { [$0] } ?? []
        return PortalPages.render(page)
    }

    /// `POST /portal/enrol`: the first code from the authenticator; confirms it and opens the session.
    func enrol(_ request: Request, _ context: Context) async -> Response {
        let posted: (form: [String: String], browserKey: String)
        switch await anonymousPost(request, purpose: "enrol") {
        case .success(let value): posted = value
        case .failure(let stop): return stop.response
        }
        guard let fields = sealer.open(PortalCookies.value(request, cookies.onceName)), fields["kind"] == "enrol", let ticket = fields["ticket"] else {
            return message(.formExpired, title: .forbiddenTitle, status: .forbidden, link: ("/portal/sign-in", .backToSignIn))
        }
        do {
            let signedIn = try await services.portal.confirmTOTP(ticket: ticket, code: posted.form["code"] ?? "", address: clientAddress(request, context))
            return opened(signedIn, extraCookies: [cookies.clear(cookies.onceName)])
        } catch PortalError.invalidCredentials {
            // The ticket expired or was used up.
            return message(.formExpired, title: .forbiddenTitle, status: .forbidden, link: ("/portal/sign-in", .backToSignIn),
                           cookies: [cookies.clear(cookies.onceName)])
        } catch {
            guard let (text, status) = Self.formError(error) else { return stopped(error, visitor: nil) }
            return await enrolPage(request, error: text, status: status)
        }
    }

    // MARK: re-authentication and sign-out

    func reauthPage(_ request: Request) async -> Response {
        let next = PortalForm.localPortalPath(PortalForm.queryParameters(request)?["next"]) ?? "/portal"
        return await signedIn(request) { visitor in reauthForm(visitor, next: next) }
    }

    func reauthForm(_ visitor: Visitor, next: String, error: String? = nil, status: HTTPResponse.Status = .ok) -> Response {
        var page = makePage(
            visitor, heading: PortalText.text(.reauthTitle), template: "reauth",
            values: ["csrf": csrf.token(bound: visitor.cookie, purpose: "reauth"), "next": next], status: status)
        page.error = error
        return PortalPages.render(page)
    }

    /// `POST /portal/reauth`: password and code again; then back to `next` (a Portal path only).
    func reauth(_ request: Request, _ context: Context) async -> Response {
        await signedInPost(request, purpose: "reauth") { visitor, form in
            let next = PortalForm.localPortalPath(form["next"]) ?? "/portal"
            do {
                _ = try await services.portal.reauthenticate(
                    cookie: visitor.cookie, password: form["password"] ?? "", code: form["code"] ?? "", address: clientAddress(request, context))
                return PortalPages.redirect(next)
            } catch {
                guard let (text, status) = Self.formError(error) else { throw error }
                return reauthForm(visitor, next: next, error: text, status: status)
            }
        }
    }

    /// `POST /portal/sign-out`.
    func signOut(_ request: Request) async -> Response {
        guard let form = await PortalForm.body(request) else { return stopped(Stop.badRequest, visitor: nil) }
        guard let cookie = cookies.session(request), csrf.verify(form["csrf"], bound: cookie, purpose: "sign-out") else {
            return stopped(Stop.formExpired, visitor: nil)
        }
        do { try await services.portal.signOut(cookie: cookie) } catch { return stopped(error, visitor: nil) }
        // The hand-over cookie goes too: a value shown once never outlives the session it was for.
        return PortalPages.redirect("/portal/sign-in", cookies: [cookies.clear(cookies.sessionName), cookies.clear(cookies.onceName)])
    }
}
