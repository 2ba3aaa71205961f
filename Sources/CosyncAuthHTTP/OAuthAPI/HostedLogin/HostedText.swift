import CosyncAuth
import Foundation

/// Every text of the hosted pages, in one table per language (<doc:OAuth> §3). A language is added by
/// adding its table to `tables` under the app's locale code (`Locales`: upper-case, two letters); a key
/// missing from a table falls back to English. `{app}`, `{handle}` and `{rule}` are filled in before
/// the page is rendered (and escaped with everything else).
enum HostedText {
    enum Key: String, CaseIterable {
        case signInTitle, handleLabel, handleOrUserNameLabel, passwordLabel, signInButton, forgotLink, signupLink, otherOptions
        case codeTitle, totpPrompt, smsPrompt, codeLabel, verifyButton
        case signupTitle, newPasswordLabel, signupButton, signupCodePrompt
        case forgotTitle, forgotPrompt, sendCodeButton, resetTitle, resetPrompt, resetButton, passwordChanged, backToSignIn
        case passkeyOnly
        case continueTitle, continuePrompt, continueButton, otherAccountLink, signedInAccount
        case errorTitle, requestExpired, cookiesNeeded, formExpired, badRequest
        case signedOutTitle, signedOutBody, logoutTitle, logoutPrompt, logoutButton, continueLink, redirecting
        case invalidCredentials, invalidCode, accountNotVerified, userSuspended, appUnavailable, rateLimited, busy, handleTaken
        case invalidSignup, missingField, signupDisabled, invalidMetadata, userNamesDisabled, codeExpired, passwordRule, genericError
    }

    static let english: [Key: String] = [
        .signInTitle: "Sign in",
        .handleLabel: "Email",
        .handleOrUserNameLabel: "Email or user name",
        .passwordLabel: "Password",
        .signInButton: "Sign in",
        .forgotLink: "Forgot your password?",
        .signupLink: "Create an account",
        .otherOptions: "Other ways to sign in",
        .codeTitle: "Enter your code",
        .totpPrompt: "Enter the 6-digit code from your authenticator app.",
        .smsPrompt: "Enter the code we sent to your phone by text message.",
        .codeLabel: "Code",
        .verifyButton: "Verify",
        .signupTitle: "Create an account",
        .newPasswordLabel: "Choose a password",
        .signupButton: "Create account",
        .signupCodePrompt: "We sent a code to {handle}. Enter it to finish creating your account.",
        .forgotTitle: "Reset your password",
        .forgotPrompt: "Enter the email of your account. We will send it a code to reset your password.",
        .sendCodeButton: "Send code",
        .resetTitle: "Choose a new password",
        .resetPrompt: "If {handle} has an account, we sent it a code. Enter the code and choose a new password.",
        .resetButton: "Change password",
        .passwordChanged: "Your password was changed. Sign in with your new password.",
        .backToSignIn: "Back to sign in",
        .passkeyOnly: "This app signs you in with a passkey.",
        .continueTitle: "Choose an account",
        .continuePrompt: "You are signed in to {app} as {handle}. Continue to {client} with this account?",
        .continueButton: "Continue as {handle}",
        .otherAccountLink: "Use another account",
        .signedInAccount: "the signed-in account",
        .errorTitle: "Something went wrong",
        .requestExpired: "This sign-in request has expired or was already used. Go back to the app and try again.",
        .cookiesNeeded: "This sign-in was started in another browser, or your browser did not keep this site's cookie. Allow cookies for this site, go back to the app and try again.",
        .formExpired: "This form has expired. Please try again.",
        .badRequest: "The app sent a request this server cannot accept.",
        .signedOutTitle: "Signed out",
        .signedOutBody: "You are signed out of {app}.",
        .logoutTitle: "Sign out",
        .logoutPrompt: "Do you want to sign out of {app}?",
        .logoutButton: "Sign out",
        .continueLink: "Continue to the app",
        .redirecting: "Returning to the app…",
        .invalidCredentials: "The email or password is not correct.",
        .invalidCode: "That code is not correct or has expired.",
        .accountNotVerified: "This account is not verified yet. Finish creating it with the code we e-mailed you.",
        .userSuspended: "This account is suspended.",
        .appUnavailable: "This app is not available right now.",
        .rateLimited: "Too many attempts. Please wait a moment and try again.",
        .busy: "The service is busy. Please try again in a moment.",
        .handleTaken: "An account with this email already exists. Sign in instead.",
        .invalidSignup: "Enter a valid email address and a password.",
        .missingField: "Please fill in every field.",
        .signupDisabled: "Creating accounts is not available for this app.",
        .invalidMetadata: "This app needs more information to create your account. Please create it in the app.",
        .userNamesDisabled: "Sign in with your email address.",
        .codeExpired: "This code has expired. Please start again.",
        .passwordRule: "The password {rule}.",
        .genericError: "Something went wrong. Please try again.",
    ]

    static let french: [Key: String] = [
        .signInTitle: "Connexion",
        .handleLabel: "E-mail",
        .handleOrUserNameLabel: "E-mail ou nom d’utilisateur",
        .passwordLabel: "Mot de passe",
        .signInButton: "Se connecter",
        .forgotLink: "Mot de passe oublié ?",
        .signupLink: "Créer un compte",
        .otherOptions: "Autres façons de se connecter",
        .codeTitle: "Saisissez votre code",
        .totpPrompt: "Saisissez le code à 6 chiffres de votre application d’authentification.",
        .smsPrompt: "Saisissez le code que nous avons envoyé par SMS à votre téléphone.",
        .codeLabel: "Code",
        .verifyButton: "Valider",
        .signupTitle: "Créer un compte",
        .newPasswordLabel: "Choisissez un mot de passe",
        .signupButton: "Créer le compte",
        .signupCodePrompt: "Nous avons envoyé un code à {handle}. Saisissez-le pour terminer la création de votre compte.",
        .forgotTitle: "Réinitialiser le mot de passe",
        .forgotPrompt: "Saisissez l’e-mail de votre compte. Nous y enverrons un code pour réinitialiser votre mot de passe.",
        .sendCodeButton: "Envoyer le code",
        .resetTitle: "Choisissez un nouveau mot de passe",
        .resetPrompt: "Si {handle} a un compte, nous lui avons envoyé un code. Saisissez-le et choisissez un nouveau mot de passe.",
        .resetButton: "Changer le mot de passe",
        .passwordChanged: "Votre mot de passe a été changé. Connectez-vous avec le nouveau.",
        .backToSignIn: "Retour à la connexion",
        .continueTitle: "Choisissez un compte",
        .continuePrompt: "Vous êtes connecté à {app} en tant que {handle}. Continuer vers {client} avec ce compte ?",
        .continueButton: "Continuer en tant que {handle}",
        .otherAccountLink: "Utiliser un autre compte",
        .signedInAccount: "le compte connecté",
        .errorTitle: "Un problème est survenu",
        .signedOutTitle: "Déconnecté",
        .signedOutBody: "Vous êtes déconnecté de {app}.",
        .logoutTitle: "Déconnexion",
        .logoutPrompt: "Voulez-vous vous déconnecter de {app} ?",
        .logoutButton: "Se déconnecter",
        .continueLink: "Revenir à l’application",
        .invalidCredentials: "L’e-mail ou le mot de passe est incorrect.",
        .invalidCode: "Ce code est incorrect ou a expiré.",
        .rateLimited: "Trop de tentatives. Patientez un moment puis réessayez.",
        .missingField: "Veuillez remplir tous les champs.",
        .genericError: "Un problème est survenu. Veuillez réessayer.",
    ]

    /// The tables by the app's locale code.
    static let tables: [String: [Key: String]] = ["EN": english, "FR": french]

    /// The texts of one page in one language.
    struct Language: Sendable {
        /// The app's locale code (`EN`) and the page's `lang` attribute (`en`).
        let code: String
        var lang: String { code.lowercased() }

        func callAsFunction(_ key: Key, _ values: [String: String] = [:]) -> String {
            var text = HostedText.tables[code]?[key] ?? HostedText.english[key] ?? key.rawValue
            for (name, value) in values { text = text.replacingOccurrences(of: "{\(name)}", with: value) }
            return text
        }
    }

    /// The language of a page: the first of the request's `ui_locales`, then of the browser's
    /// `Accept-Language`, that the app offers (`app.settings.locales`) and this table has; else English.
    static func language(app: App, uiLocales: [String], acceptLanguage: String?) -> Language {
        for code in candidates(uiLocales: uiLocales, acceptLanguage: acceptLanguage)
        where app.settings.locales.contains(code) && tables[code] != nil {
            return Language(code: code)
        }
        return Language(code: Locales.defaultLocale)
    }

    /// The locale a new account gets: the first candidate the app offers, whether or not the page has
    /// its texts; else the app's default.
    static func accountLocale(app: App, uiLocales: [String], acceptLanguage: String?) -> String {
        candidates(uiLocales: uiLocales, acceptLanguage: acceptLanguage).first { app.settings.locales.contains($0) } ?? Locales.defaultLocale
    }

    /// The primary language subtags, upper-cased, in preference order.
    static func candidates(uiLocales: [String], acceptLanguage: String?) -> [String] {
        var tags = uiLocales
        if let header = acceptLanguage, header.utf8.count <= 512 {
            let weighted = header.split(separator: ",").enumerated().compactMap { index, item -> (String, Double, Int)? in
                let parts = item.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }
                guard let tag = parts.first, !tag.isEmpty, tag != "*" else { return nil }
                var q = 1.0
                for part in parts.dropFirst() where part.hasPrefix("q=") { q = Double(part.dropFirst(2)) ?? 0 }
                return q > 0 ? (tag, q, index) : nil
            }
            tags += weighted.sorted { $0.1 != $1.1 ? $0.1 > $1.1 : $0.2 < $1.2 }.map(\.0)
        }
        var codes: [String] = []
        for tag in tags {
            let primary = String(tag.prefix { $0 != "-" && $0 != "_" }).uppercased()
            if primary.count == 2, !codes.contains(primary) { codes.append(primary) }
        }
        return codes
    }
}
