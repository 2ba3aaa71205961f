import Foundation

/// Every text the Portal shows, in one place (English only). The templates read them as `{{t.key}}`;
/// Swift code as `PortalText.text(.key)`. `{name}` placeholders are filled in by `text(_:_:)` before
/// rendering, and the result is escaped with every other value.
enum PortalText {
    enum Key: String, CaseIterable {
        // Layout
        case productName, skipLink, mainNav, appNav, appsLink, signOutButton, signedInAs, footer, copyButton, copied
        // Sign-in, invite, enrolment, re-authentication
        case signInTitle, emailLabel, passwordLabel, signInButton
        case codeTitle, codePrompt, codeLabel, verifyButton, backToSignIn
        case inviteTitle, invitePrompt, newPasswordLabel, passwordConfirmLabel, passwordHelp, inviteButton
        case enrolTitle, enrolPrompt, enrolKeyLabel, enrolQRLabel, enrolCodePrompt, enrolButton
        case reauthTitle, reauthPrompt, reauthButton
        // Apps list
        case appsTitle, searchLabel, searchButton, newAppLink, appNameColumn, appIdColumn, productColumn, statusColumn
        case createdColumn, nextPage, noApps, appsCaption
        // Create app
        case newAppTitle, appNameLabel, productLabel, productCosyncAuth, productAppKey, createAppButton
        // App pages
        case overviewTitle, overviewLink, settingsLink, keysLink, usersLink, membersLink
        case appIdLabel, productLabelShort, statusLabel, createdLabel, yourRoleLabel, membersCount, metadataCount, signupFlowLabelShort
        case settingsTitle, signupFlowLabel, signupFlowNone, signupFlowCode, signupFlowLink, metadataLabel, metadataHelp, saveButton, settingsSaved
        case keysTitle, rawPublicKeyLabel, appTokenLabel, appTokenOnce, appSecretLabel, appSecretOnce, rotateTokenHeading, rotateTokenHelp
        case graceLabel, graceHelp, rotateTokenButton, tokenRotated, readOnlyNote, keysOwnerOnly
        case usersTitle, userSearchLabel, handleColumn, userNameColumn, userStatusColumn, lastLoginColumn, noUsers, usersCaption
        case userTitle, userIdLabel, userStatusLabel, sessionsHeading, sessionsCaption, sessionMethodColumn, sessionCreatedColumn
        case sessionLastSeenColumn, sessionAddressColumn, sessionActionColumn, revokeButton, revokeLabel, noSessions, sessionRevoked
        case membersTitle, membersCaption, memberEmailColumn, memberRoleColumn, noMembers, inviteHeading, inviteEmailLabel
        case inviteRoleLabel, roleOwner, roleEditor, roleViewer, sendInviteButton, inviteLinkLabel, inviteSent, inviteEmailed
        // Refusals and errors
        case errorTitle, forbiddenTitle, forbidden, notFoundTitle, notFound, formExpired, cookiesNeeded, badRequest
        case invalidCredentials, invalidCode, locked, needsSecondFactor, inviteInvalid, weakPassword, passwordsDiffer
        case genericError, busy, graceInvalid, metadataNotJSON, nameRequired, emailRequired, signedOut
        // observe
        case observeActivityHeading, observeActivityHelp, observeSignIns, observeFailures, observeLockouts, observeNewUsers, observeDailySummary
        case observePeak, observeNumbersSummary, observeActivityCaption, observeDayColumn, observeBacklogTitle, observeBacklogSummary
        case observeBacklogCaption, observeUndeliveredColumn, observeOldestColumn, observeOutboxTitle, observeOutboxSummary, observeQueued
        case observeFailedMessages, observeOutboxAge, observeNone, observeSeconds, observeMinutes, observeHours, observeDays
        case auditLink, auditTitle, auditFiltersLabel, auditActionLabel, auditActionHelp, auditActorLabel, auditUserLabel, auditFromLabel
        case auditToLabel, auditFilterButton, auditCaption, auditTimeColumn, auditActorColumn, auditActionColumn, auditStatusColumn
        case auditDetailColumn, auditNone, auditActionInvalid, auditActorInvalid, auditUserInvalid, auditFromInvalid, auditToInvalid
        case outboxLink, outboxTitle, outboxToLabel, outboxHelp, outboxCaption, outboxCreatedColumn, outboxChannelColumn, outboxToColumn
        case outboxTemplateColumn, outboxStatusColumn, outboxAttemptsColumn, outboxSentColumn, outboxNone, outboxQueued, outboxSending
        case outboxSent, outboxFailed, webhooksLink, webhooksTitle, webhooksHelp, webhooksCaption, webhooksNone, webhookUrlColumn
        case webhookTypesColumn, webhookStateColumn, webhookFailuresColumn, webhookCreatedColumn, webhookEnabled, webhookDisabled
        case webhookNewHeading, webhookUrlLabel, webhookUrlHelp, webhookDescriptionLabel, webhookTypesLegend, webhookCreateButton
        case webhookTitle, webhookIdLabel, webhookPreviousSecretLabel, webhookSecretOnce, webhookSecretLabel, webhookCreated
        case webhookSecretRotated, webhookSaved, webhookEditHeading, webhookEnabledLabel, webhookDisableButton, webhookRotateHeading
        case webhookRotateHelp, webhookRotateButton, webhookDeleteHeading, webhookDeleteHelp, webhookDeleteButton, deliveriesHeading
        case deliveriesCaption, deliveriesNone, deliveryMessageColumn, deliveryTypeColumn, deliveryStatusColumn, deliveryAttemptsColumn
        case deliveryCreatedColumn, deliveryErrorColumn, deliveryActionColumn, deliveryDeliveredLabel, deliveryNextLabel, deliveryPending
        case deliverySending, deliveryDelivered, deliveryDead, deliveryTitle, deliveryReplayed, attemptsCaption, attemptColumn
        case attemptTimeColumn, attemptStatusColumn, attemptLatencyColumn, attemptsNone, replayButton, replayNeedsEnabled, replayRefused
        case backToWebhook
        // passkey
        case accountLink, accountTitle, accountTOTPLabel, accountTOTPOn, accountTOTPOff, passkeysHeading, passkeysCaption
        case passkeyNameColumn, passkeyCreatedColumn, passkeyLastUsedColumn, passkeyActionColumn, passkeyRemoveButton, noPasskeys
        case passkeyNeverUsed, passkeyAddHeading, passkeyNameLabel, passkeyAddButton, passkeySignInHeading, passkeySignInButton
        case passkeyEnrolHeading, passkeyEnrolHelp, passkeyEnrolButton, passkeyReauthHeading, passkeyReauthButton, passkeyNoScript
        case passkeyFailed, passkeyCancelled, passkeyUnsupported, passkeyUnavailable, passkeyExpired, passkeyRefused, passkeyExists
        case passkeyLastFactor, passkeySignedOut
        // operator
        case tenantsLink, accountsLink, tenantsTitle, tenantsCaption, tenantSearchLabel, tenantUsersColumn, tenantSessionsColumn
        case tenantLastSignInColumn, tenantEventsColumn, noTenants, importAppLink
        case accountsTitle, accountsCaption, accountSearchLabel, accountEmailColumn, accountKindColumn, accountStatusColumn
        case accountRolesColumn, accountActionsColumn, operatorKind, developerKind, notEnrolled, suspendButton, activateButton
        case removeRoleButton, noAccounts, noRoles, inviteOperatorHeading, inviteOperatorHelp, inviteOperatorButton
        case accountSuspended, accountActivated, roleRemoved, operatorInvited
        // import
        case importLink, importTitle, importNewTitle, importHelp, importAppHelp, importFileLabel, importFileHelp, importUploadButton
        case importOwnerOnly, importChecking, importDryRunHeading, importSummaryCaption, importCollectionColumn, importReadColumn
        case importImportedColumn, importRefusedColumn, importAdjustedColumn, importNotesHeading, importRunButton, importRunning
        case importProgressLabel, importDone, importFailed, importTooLarge, importNotMultipart, importWrongApp, importFileRequired
        case importJobGone, importStartOver, importReportCount, importCheckFailed, importOneAtATime, importReload
        // settings
        case emailsLink, emailsTitle, settingsSignupGroup, settingsPasswordGroup, settingsSessionGroup, settingsProvidersGroup
        case settingsMetadataGroup, settingsPasskeyGroup, handleTypeLabel, handleTypeHelp, userNamesLabel, anonymousLoginLabel
        case localesLabel, localesHelp, passwordFilterLabel, passwordFilterHelp, passwordMinLengthLabel, passwordMinUpperLabel
        case passwordMinLowerLabel, passwordMinDigitLabel, passwordMinSpecialLabel, range0to128, range1to100, range60to600, range60to86400
        case twoFactorLabel, twoFactorHelp, jwtExpiryLabel, jwtExpiryHelp, freshAuthLabel, freshAuthHelp, appleLoginLabel
        case appleBundleIdLabel, commaListHelp, googleLoginLabel, googleClientIdLabel, googleAppNameLabel, metadataInviteLabel
        case metadataInviteHelp, metadataInviteNotJSON, rpIdLabel, rpIdHelp, rpNameLabel, rpNameHelp, allowedOriginsLabel
        case allowedOriginsHelp, userVerificationLabel, attestationLabel, attestationHelp, trustAnchorsLabel, trustAnchorsHelp
        case passkeysPerUserLabel, challengeLifetimeLabel, counterRegressionLabel, signupCodeLifetimeLabel, yes, no
        case lifecycleHeading, suspendHelp, suspendAppButton, activateAppButton, statusOperatorOnly, appSuspended, appActivated
        case deleteHeading, deleteHelp, confirmNameLabel, confirmNameHelp, deleteButton, confirmNameWrong
        case jwksLabel, rotateSecretHeading, rotateSecretHelp, rotateSecretButton, secretRotated, rotateRSAHeading, rotateRSAHelp
        case retireLabel, retireHelp, rotateRSAButton, rsaRotated, retireInvalid
        case templateLabel, localeLabel, openTemplateButton, templateIsDefault, placeholdersHelp, subjectLabel, smsTextLabel
        case htmlLabel, textLabel, textHelp, replyToLabel, localeLinkTextLabel, localeLinkTextHelp, previewButton
        case saveTemplateButton, resetTemplateButton, previewHeading, previewHelp, previewHTMLLabel, previewTextLabel
        case templateSaved, templateReset, previewNotSaved
        // users (user page, users search, pending signups and invites)
        case usersPendingLink, usersLocaleLabel, usersActionsHeading, usersSuspendHelp, usersSuspendButton, usersActivateHelp
        case usersActivateButton, usersSignOutEverywhereHelp, usersSignOutEverywhereButton, usersNewPasswordLabel
        case usersNewPasswordHelp, usersSetPasswordButton, usersIdentitiesHeading, usersIdentitiesCaption
        case usersIdentityKindColumn, usersIdentitySubjectColumn, usersIdentityEmailColumn, usersIdentityCreatedColumn
        case usersIdentityLastUsedColumn, usersDetachButton, usersDetachLabel, usersNoIdentities, usersPasskeysHeading
        case usersPasskeysCaption, usersPasskeyNameColumn, usersPasskeyPlatformColumn, usersPasskeyBackedUpColumn
        case usersPasskeyCloneColumn, usersNoPasskeys, usersYes, usersNo, usersDeleteHeading, usersDeleteHelp
        case usersDeleteConfirmLabel, usersDeleteButton, usersDeleteConfirmRequired, usersPasswordRequired, usersDeleted
        case usersSuspendedNotice, usersActivatedNotice, usersPasswordSet, usersSignedOutEverywhere, usersIdentityDetached
        case pendingLink, pendingTitle, pendingHelp, pendingInviteHeading, pendingInviteHandleLabel, pendingInviteLocaleLabel
        case pendingInviteMetaDataLabel, pendingInviteMetaDataHelp, pendingInviteButton, pendingSignupsHeading
        case pendingSignupsCaption, pendingInvitesHeading, pendingInvitesCaption, pendingStatusColumn, pendingLocaleColumn
        case pendingSenderColumn, pendingCreatedColumn, pendingExpiresColumn, pendingCancelButton, pendingCancelLabel
        case pendingResendButton, pendingResendLabel, pendingNoSignups, pendingNoInvites, pendingMoreSignups, pendingMoreInvites
        case pendingCancelled, pendingInvited, pendingMetaDataNotJSON, pendingRateLimited
    }

    static let english: [Key: String] = [
        .productName: "CosyncAuth Portal",
        .skipLink: "Skip to the content",
        .mainNav: "Portal",
        .appNav: "App",
        .appsLink: "Apps",
        .signOutButton: "Sign out",
        .signedInAs: "Signed in as {email}",
        .footer: "CosyncAuth",
        .copyButton: "Copy",
        .copied: "Copied",

        .signInTitle: "Sign in to the Portal",
        .emailLabel: "Email",
        .passwordLabel: "Password",
        .signInButton: "Continue",
        .codeTitle: "Enter your code",
        .codePrompt: "Enter the 6-digit code from your authenticator app.",
        .codeLabel: "Code",
        .verifyButton: "Verify",
        .backToSignIn: "Back to sign in",
        .inviteTitle: "Accept your invitation",
        .invitePrompt: "You were invited to the Portal as {email}. Choose a password to create your account.",
        .newPasswordLabel: "Choose a password",
        .passwordConfirmLabel: "Repeat the password",
        .passwordHelp: "At least 12 characters. If you already have a Portal account, enter its current password.",
        .inviteButton: "Set password",
        .enrolTitle: "Set up your authenticator",
        .enrolPrompt: "Add this key to an authenticator app (or scan the QR code), then enter the code it shows.",
        .enrolKeyLabel: "Key",
        .enrolQRLabel: "QR code of the key",
        .enrolCodePrompt: "The 6-digit code from your authenticator app.",
        .enrolButton: "Finish",
        .reauthTitle: "Confirm it is you",
        .reauthPrompt: "This action needs a recent sign-in. Enter your password and a code from your authenticator app.",
        .reauthButton: "Confirm",

        .appsTitle: "Apps",
        .searchLabel: "Search apps by name",
        .searchButton: "Search",
        .newAppLink: "New app",
        .appNameColumn: "Name",
        .appIdColumn: "App id",
        .productColumn: "Product",
        .statusColumn: "Status",
        .createdColumn: "Created",
        .nextPage: "Next page",
        .noApps: "No apps to show.",
        .appsCaption: "Your apps",

        .newAppTitle: "New app",
        .appNameLabel: "Name",
        .productLabel: "Product",
        .productCosyncAuth: "CosyncAuth (password sign-in)",
        .productAppKey: "AppKey (passkeys)",
        .createAppButton: "Create app",

        .overviewTitle: "Overview",
        .overviewLink: "Overview",
        .settingsLink: "Auth settings",
        .keysLink: "Keys",
        .usersLink: "Users",
        .membersLink: "Members",
        .appIdLabel: "App id",
        .productLabelShort: "Product",
        .statusLabel: "Status",
        .createdLabel: "Created",
        .yourRoleLabel: "Your role",
        .membersCount: "Members",
        .metadataCount: "Metadata fields",
        .signupFlowLabelShort: "Signup flow",
        .settingsTitle: "Auth settings",
        .signupFlowLabel: "Signup flow",
        .signupFlowNone: "none: accounts are ready at once",
        .signupFlowCode: "code: the user confirms a code sent by e-mail",
        .signupFlowLink: "link: the user confirms a link sent by e-mail",
        .metadataLabel: "Metadata fields",
        .metadataHelp: "A JSON array, as the admin API takes it: for example [{\"path\": \"user.firstName\", \"fieldName\": \"First name\", \"required\": true}].",
        .saveButton: "Save",
        .settingsSaved: "The settings were saved.",
        .keysTitle: "Keys",
        .rawPublicKeyLabel: "Public key (rawPublicKey)",
        .appTokenLabel: "App token",
        .appTokenOnce: "This is the only time the app token is shown. Copy it now.",
        .appSecretLabel: "App secret",
        .appSecretOnce: "This is the only time the app secret is shown. Copy it now.",
        .rotateTokenHeading: "Rotate the app token",
        .rotateTokenHelp: "A new app token replaces the current one. Apps keep working with the old token during the grace period.",
        .graceLabel: "Grace period (seconds)",
        .graceHelp: "From 0 (the old token stops at once) to 2592000 (30 days).",
        .rotateTokenButton: "Rotate app token",
        .tokenRotated: "The app token was rotated.",
        .readOnlyNote: "You can view this app but not change it.",
        .keysOwnerOnly: "Only the app's owners can rotate its keys.",
        .usersTitle: "Users",
        .userSearchLabel: "Search users by handle, user name or user id",
        .handleColumn: "Handle",
        .userNameColumn: "User name",
        .userStatusColumn: "Status",
        .lastLoginColumn: "Last sign-in",
        .noUsers: "No users to show.",
        .usersCaption: "Users of the app",
        .userTitle: "User {handle}",
        .userIdLabel: "User id",
        .userStatusLabel: "Status",
        .sessionsHeading: "Sessions",
        .sessionsCaption: "Signed-in devices",
        .sessionMethodColumn: "Method",
        .sessionCreatedColumn: "Started",
        .sessionLastSeenColumn: "Last seen",
        .sessionAddressColumn: "Address",
        .sessionActionColumn: "Action",
        .revokeButton: "Revoke",
        .revokeLabel: "Revoke the session started {created}",
        .noSessions: "This user has no sessions.",
        .sessionRevoked: "The session was revoked.",
        .membersTitle: "Members",
        .membersCaption: "Portal accounts with a role on this app",
        .memberEmailColumn: "Email",
        .memberRoleColumn: "Role",
        .noMembers: "No members yet.",
        .inviteHeading: "Invite a developer",
        .inviteEmailLabel: "Email",
        .inviteRoleLabel: "Role",
        .roleOwner: "owner",
        .roleEditor: "editor",
        .roleViewer: "viewer",
        .sendInviteButton: "Send invitation",
        .inviteLinkLabel: "Invitation link",
        .inviteSent: "The invitation was sent to {email}. You can also pass on this link:",
        .inviteEmailed: "An invitation e-mail was sent to {email}.",

        .errorTitle: "Something went wrong",
        .forbiddenTitle: "Not allowed",
        .forbidden: "You are not allowed to do this.",
        .notFoundTitle: "Not found",
        .notFound: "There is nothing here.",
        .formExpired: "This form has expired. Go back, reload the page and try again.",
        .cookiesNeeded: "The Portal needs cookies. Allow cookies for this site and try again.",
        .badRequest: "The request could not be read.",
        .invalidCredentials: "The email or password is not correct.",
        .invalidCode: "That code is not correct or has expired.",
        .locked: "Too many attempts. Try again in {seconds} seconds.",
        .needsSecondFactor: "This account has no authenticator yet. Open your invitation link again to set it up.",
        .inviteInvalid: "This invitation link is not valid: it was used already or has expired.",
        .weakPassword: "{reason}",
        .passwordsDiffer: "The two passwords are not the same.",
        .genericError: "Something went wrong. Please try again.",
        .busy: "The service is busy. Please try again in a moment.",
        .graceInvalid: "gracePeriodSeconds must be an integer from 0 to 2592000",
        .metadataNotJSON: "metaData must be a JSON array",
        .nameRequired: "name is required",
        .emailRequired: "Enter an email address.",
        .signedOut: "You are signed out.",

        // observe
        .observeActivityHeading: "Activity in the last 30 days",
        .observeActivityHelp: "Counted per day (UTC) from the app's event stream, which keeps 30 days.",
        .observeSignIns: "Sign-ins",
        .observeFailures: "Failed sign-ins",
        .observeLockouts: "Lockouts",
        .observeNewUsers: "New users",
        .observeDailySummary: "{total} in the last {days} days.",
        .observePeak: "Most on {day}: {n}.",
        .observeNumbersSummary: "Show the numbers",
        .observeActivityCaption: "Activity per day, newest first",
        .observeDayColumn: "Day (UTC)",
        .observeBacklogTitle: "Webhook backlog",
        .observeBacklogSummary: "{total} messages not yet delivered to {endpoints} endpoints; the oldest waits for {age}.",
        .observeBacklogCaption: "Undelivered messages per endpoint",
        .observeUndeliveredColumn: "Not yet delivered",
        .observeOldestColumn: "Oldest waits for",
        .observeOutboxTitle: "Outbox",
        .observeOutboxSummary: "{queued} messages waiting to be sent, {failed} failed; the oldest waiting one waits for {age}.",
        .observeQueued: "Waiting to be sent",
        .observeFailedMessages: "Failed",
        .observeOutboxAge: "Oldest waiting message",
        .observeNone: "nothing waiting",
        .observeSeconds: "{n} seconds",
        .observeMinutes: "{n} minutes",
        .observeHours: "{n} hours",
        .observeDays: "{n} days",
        .auditLink: "Audit log",
        .auditTitle: "Audit log",
        .auditFiltersLabel: "Filter the audit log",
        .auditActionLabel: "Action",
        .auditActionHelp: "Exact, as user.update, or every action of a kind, as user.*",
        .auditActorLabel: "Actor",
        .auditUserLabel: "User id",
        .auditFromLabel: "From (UTC day)",
        .auditToLabel: "To (UTC day, inclusive)",
        .auditFilterButton: "Filter",
        .auditCaption: "Audit log entries, newest first",
        .auditTimeColumn: "Time",
        .auditActorColumn: "Actor",
        .auditActionColumn: "Action",
        .auditStatusColumn: "Result",
        .auditDetailColumn: "Details",
        .auditNone: "No entries match.",
        .auditActionInvalid: "The action may have at most 100 characters.",
        .auditActorInvalid: "The actor may have at most 320 characters.",
        .auditUserInvalid: "The user id must be a UUID, as 0f8fad5b-d9cb-469f-a165-70867728950e.",
        .auditFromInvalid: "The start date must be a date, as 2026-11-27.",
        .auditToInvalid: "The end date must be a date, as 2026-11-27.",
        .outboxLink: "Outbox",
        .outboxTitle: "Outbox",
        .outboxToLabel: "Recipient",
        .outboxHelp: "E-mails and text messages of this app. Their contents are not shown: they may hold codes and links.",
        .outboxCaption: "Messages, newest first",
        .outboxCreatedColumn: "Queued",
        .outboxChannelColumn: "Channel",
        .outboxToColumn: "Recipient",
        .outboxTemplateColumn: "Template",
        .outboxStatusColumn: "Status",
        .outboxAttemptsColumn: "Attempts",
        .outboxSentColumn: "Sent",
        .outboxNone: "No messages.",
        .outboxQueued: "queued",
        .outboxSending: "sending",
        .outboxSent: "sent",
        .outboxFailed: "failed",
        .webhooksLink: "Webhooks",
        .webhooksTitle: "Webhooks",
        .webhooksHelp: "Endpoints that receive this app's events, signed with their own secret.",
        .webhooksCaption: "Webhook endpoints",
        .webhooksNone: "No webhook endpoints yet.",
        .webhookUrlColumn: "URL",
        .webhookTypesColumn: "Event types",
        .webhookStateColumn: "State",
        .webhookFailuresColumn: "Failures in a row",
        .webhookCreatedColumn: "Created",
        .webhookEnabled: "enabled",
        .webhookDisabled: "disabled",
        .webhookNewHeading: "Add an endpoint",
        .webhookUrlLabel: "Endpoint URL",
        .webhookUrlHelp: "An https URL of a public host (the server refuses private and loopback addresses unless its operator allows them).",
        .webhookDescriptionLabel: "Description (optional)",
        .webhookTypesLegend: "Event types to send",
        .webhookCreateButton: "Add endpoint",
        .webhookTitle: "Webhook endpoint",
        .webhookIdLabel: "Endpoint id",
        .webhookPreviousSecretLabel: "Previous secret signs until",
        .webhookSecretOnce: "This is the endpoint's signing secret. It is shown only now: copy it to your receiver.",
        .webhookSecretLabel: "Signing secret",
        .webhookCreated: "The endpoint was added.",
        .webhookSecretRotated: "The secret was rotated. The previous one keeps signing for a while.",
        .webhookSaved: "The endpoint was saved.",
        .webhookEditHeading: "Edit the endpoint",
        .webhookEnabledLabel: "Enabled",
        .webhookDisableButton: "Disable endpoint",
        .webhookRotateHeading: "Rotate the secret",
        .webhookRotateHelp: "A new signing secret is made and shown once; the previous one keeps signing during the overlap. You may be asked to sign in again.",
        .webhookRotateButton: "Rotate secret",
        .webhookDeleteHeading: "Delete the endpoint",
        .webhookDeleteHelp: "The endpoint, its deliveries and their log are deleted. You may be asked to sign in again.",
        .webhookDeleteButton: "Delete endpoint",
        .deliveriesHeading: "Delivery log",
        .deliveriesCaption: "Messages sent to this endpoint, newest first",
        .deliveriesNone: "No messages yet.",
        .deliveryMessageColumn: "Message",
        .deliveryTypeColumn: "Event type",
        .deliveryStatusColumn: "Status",
        .deliveryAttemptsColumn: "Attempts",
        .deliveryCreatedColumn: "Created",
        .deliveryErrorColumn: "Last error",
        .deliveryActionColumn: "Action",
        .deliveryDeliveredLabel: "Delivered",
        .deliveryNextLabel: "Next attempt",
        .deliveryPending: "pending",
        .deliverySending: "sending",
        .deliveryDelivered: "delivered",
        .deliveryDead: "failed for good",
        .deliveryTitle: "Message {id}",
        .deliveryReplayed: "The message was queued again.",
        .attemptsCaption: "Attempts, oldest first",
        .attemptColumn: "Attempt",
        .attemptTimeColumn: "Time",
        .attemptStatusColumn: "HTTP status",
        .attemptLatencyColumn: "Time taken (ms)",
        .attemptsNone: "No attempts yet.",
        .replayButton: "Replay",
        .replayNeedsEnabled: "Enable the endpoint to replay its messages.",
        .replayRefused: "The message was not replayed: {reason}",
        .backToWebhook: "Back to the endpoint",
        // operator
        .tenantsLink: "Tenants",
        .accountsLink: "Accounts",
        .tenantsTitle: "Tenants",
        .tenantsCaption: "Every app, newest first, with its size and recent activity",
        .tenantSearchLabel: "Search tenants by name or app id",
        .tenantUsersColumn: "Users",
        .tenantSessionsColumn: "Live sessions",
        .tenantLastSignInColumn: "Last sign-in",
        .tenantEventsColumn: "Events (7 days)",
        .noTenants: "No apps match.",
        .importAppLink: "Import an app from CosyncJWT",
        .accountsTitle: "Portal accounts",
        .accountsCaption: "Portal accounts and their roles per app",
        .accountSearchLabel: "Search accounts by email",
        .accountEmailColumn: "Email",
        .accountKindColumn: "Kind",
        .accountStatusColumn: "Status",
        .accountRolesColumn: "Roles",
        .accountActionsColumn: "Actions",
        .operatorKind: "operator",
        .developerKind: "developer",
        .notEnrolled: "(not enrolled yet)",
        .suspendButton: "Suspend",
        .activateButton: "Activate",
        .removeRoleButton: "Remove",
        .noAccounts: "No accounts match.",
        .noRoles: "none",
        .inviteOperatorHeading: "Invite an operator",
        .inviteOperatorHelp: "An operator can do everything in the Portal. The invitation is e-mailed; its link is also shown here once.",
        .inviteOperatorButton: "Invite operator",
        .accountSuspended: "The account {email} is suspended; its sessions have ended.",
        .accountActivated: "The account {email} is active again.",
        .roleRemoved: "The role was removed.",
        .operatorInvited: "An invitation was sent to {email}.",
        // import
        .importLink: "Import",
        .importTitle: "Import from CosyncJWT",
        .importNewTitle: "Import an app from CosyncJWT",
        .importHelp: "Upload the export ZIP of a CosyncJWT app (the legacy server's export). It is checked first (a dry run that writes nothing); then you start the import.",
        .importAppHelp: "The export must be of this app (the same app id). An app created here cannot be imported over; an imported app is updated by a newer export.",
        .importFileLabel: "Export file (.zip)",
        .importFileHelp: "At most {megabytes} MB.",
        .importUploadButton: "Upload and check",
        .importOwnerOnly: "Only the app's owners and operators can import.",
        .importChecking: "Checking the export…",
        .importDryRunHeading: "Dry run",
        .importSummaryCaption: "What the import will do, by collection",
        .importCollectionColumn: "Collection",
        .importReadColumn: "Read",
        .importImportedColumn: "Imported",
        .importRefusedColumn: "Refused",
        .importAdjustedColumn: "Adjusted",
        .importNotesHeading: "Notes",
        .importRunButton: "Import now",
        .importRunning: "Importing…",
        .importProgressLabel: "Import progress",
        .importDone: "The import is done.",
        .importFailed: "The import stopped: {reason}",
        .importTooLarge: "The file is too large.",
        .importNotMultipart: "Upload the file with the form.",
        .importWrongApp: "This export is of app {exported}, not of this app.",
        .importFileRequired: "Choose the export file.",
        .importJobGone: "This import is no longer known (imports are kept for an hour, on the server that ran them).",
        .importStartOver: "Import another file",
        .importReportCount: "{count} rows were refused or adjusted.",
        .importCheckFailed: "The export could not be read: {reason}",
        .importOneAtATime: "Another import is running on this server; try again when it is done.",
        .importReload: "Check again (the page also refreshes itself every 2 seconds)",
        // settings
        .emailsLink: "E-mail templates",
        .emailsTitle: "E-mail templates",
        .settingsSignupGroup: "Sign-up and accounts",
        .settingsPasswordGroup: "Passwords",
        .settingsSessionGroup: "Sign-in and tokens",
        .settingsProvidersGroup: "Apple and Google sign-in",
        .settingsMetadataGroup: "Metadata fields",
        .settingsPasskeyGroup: "Passkeys (relying party)",
        .handleTypeLabel: "Handle type (handleType)",
        .handleTypeHelp: "What a user's handle may be: email, phone or both.",
        .userNamesLabel: "User names (userNamesEnabled)",
        .anonymousLoginLabel: "Anonymous login (anonymousLoginEnabled)",
        .localesLabel: "Locales",
        .localesHelp: "Upper-case locale codes separated by commas, for example EN, FR, DE. EN must be one of them.",
        .passwordFilterLabel: "Password filter (passwordFilter)",
        .passwordFilterHelp: "When on, new passwords must meet the minimums below.",
        .passwordMinLengthLabel: "Minimum length",
        .passwordMinUpperLabel: "Minimum upper-case letters",
        .passwordMinLowerLabel: "Minimum lower-case letters",
        .passwordMinDigitLabel: "Minimum digits",
        .passwordMinSpecialLabel: "Minimum special characters",
        .range0to128: "From 0 to 128.",
        .range1to100: "From 1 to 100.",
        .range60to600: "From 60 to 600.",
        .range60to86400: "From 60 to 86400.",
        .twoFactorLabel: "Two-factor mode (twoFactorVerification)",
        .twoFactorHelp: "none, phone (a code by SMS) or google (an authenticator app).",
        .jwtExpiryLabel: "JWT expiry in hours (userJWTExpiration)",
        .jwtExpiryHelp: "From 1 to 8760.",
        .freshAuthLabel: "Fresh sign-in in minutes (freshAuthMinutes)",
        .freshAuthHelp: "How recent a sign-in must be for destructive steps: from 1 to 1440.",
        .appleLoginLabel: "Sign in with Apple (appleLoginEnabled)",
        .appleBundleIdLabel: "Apple bundle ids (appleBundleId)",
        .commaListHelp: "Identifiers separated by commas.",
        .googleLoginLabel: "Sign in with Google (googleLoginEnabled)",
        .googleClientIdLabel: "Google client ids (googleClientId)",
        .googleAppNameLabel: "Google app name (googleAppName)",
        .metadataInviteLabel: "Invite metadata fields (metaDataInvite)",
        .metadataInviteHelp: "A JSON array, as the admin API takes it: the fields an invitation carries, for example [{\"path\": \"invite.team\", \"fieldName\": \"Team\"}].",
        .metadataInviteNotJSON: "metaDataInvite must be a JSON array",
        .rpIdLabel: "Relying party id (rpId)",
        .rpIdHelp: "A domain name such as auth.example.com, without scheme, port or path.",
        .rpNameLabel: "Relying party name (rpName)",
        .rpNameHelp: "The name the passkey sheet shows; empty: the app's name.",
        .allowedOriginsLabel: "Allowed origins (allowedOrigins)",
        .allowedOriginsHelp: "One origin a line, for example https://app.example.com; empty: https://<rpId> only.",
        .userVerificationLabel: "User verification (userVerification)",
        .attestationLabel: "Attestation (attestation)",
        .attestationHelp: "required needs trust anchors.",
        .trustAnchorsLabel: "Attestation trust anchors (trustAnchors)",
        .trustAnchorsHelp: "One certificate a line, the standard base64 of its DER.",
        .passkeysPerUserLabel: "Passkeys per user (passkeysPerUser)",
        .challengeLifetimeLabel: "Challenge lifetime in seconds (challengeLifetimeSeconds)",
        .counterRegressionLabel: "Sign counter that did not grow (counterRegression)",
        .signupCodeLifetimeLabel: "Signup code lifetime in seconds (signupCodeLifetimeSeconds)",
        .yes: "yes",
        .no: "no",
        .lifecycleHeading: "App status",
        .suspendHelp: "A suspended app's end-user API refuses every request until the app is activated again.",
        .suspendAppButton: "Suspend app",
        .activateAppButton: "Activate app",
        .statusOperatorOnly: "Only an operator can suspend or activate an app.",
        .appSuspended: "The app was suspended.",
        .appActivated: "The app was activated.",
        .deleteHeading: "Delete the app",
        .deleteHelp: "Deleting the app removes its users, sessions, keys and records for good. It needs a recent sign-in.",
        .confirmNameLabel: "Type the app's name to confirm",
        .confirmNameHelp: "The app's name:",
        .deleteButton: "Delete app",
        .confirmNameWrong: "The name typed is not the app's name. Nothing was deleted.",
        .jwksLabel: "Public keys (JWKS)",
        .rotateSecretHeading: "Rotate the app secret",
        .rotateSecretHelp: "A new app secret replaces the current one at once: update every tool that uses it.",
        .rotateSecretButton: "Rotate app secret",
        .secretRotated: "The app secret was rotated.",
        .rotateRSAHeading: "Rotate the signing key",
        .rotateRSAHelp: "A new RSA key signs new tokens. The old public key stays in the JWKS until the tokens it signed have expired.",
        .retireLabel: "Keep the old key for (hours)",
        .retireHelp: "From 0 to 8760; empty: the app's JWT expiry.",
        .rotateRSAButton: "Rotate signing key",
        .rsaRotated: "The signing key was rotated. The previous key stays in the JWKS until {date}.",
        .retireInvalid: "retireAfterHours must be an integer from 0 to 8760",
        .templateLabel: "Template",
        .localeLabel: "Locale",
        .openTemplateButton: "Open",
        .templateIsDefault: "This app has no template of its own here: the built-in one is shown.",
        .placeholdersHelp: "Placeholders: %CODE%, %HANDLE%, %APP_NAME%, %LINK%.",
        .subjectLabel: "Subject",
        .smsTextLabel: "SMS text",
        .htmlLabel: "HTML body",
        .textLabel: "Text body",
        .textHelp: "Empty: the HTML body without its tags.",
        .replyToLabel: "Reply-To",
        .localeLinkTextLabel: "Link text",
        .localeLinkTextHelp: "The text of the %LINK% link in the signUpLink e-mail.",
        .previewButton: "Preview",
        .saveTemplateButton: "Save template",
        .resetTemplateButton: "Back to the built-in template",
        .previewHeading: "Preview",
        .previewHelp: "Rendered by the courier's renderer with sample values. The HTML is shown as source.",
        .previewHTMLLabel: "HTML",
        .previewTextLabel: "Text",
        .templateSaved: "The template was saved.",
        .templateReset: "The built-in template applies again.",
        .previewNotSaved: "This is a preview: nothing was saved.",

        // users
        .usersPendingLink: "Pending signups and invitations",
        .usersLocaleLabel: "Locale",
        .usersActionsHeading: "Actions",
        .usersSuspendHelp: "Suspending ends every session and access token of this user; they cannot sign in until activated again.",
        .usersSuspendButton: "Suspend",
        .usersActivateHelp: "This user is suspended. Activating lets them sign in again.",
        .usersActivateButton: "Activate",
        .usersSignOutEverywhereHelp: "Ends every session of this user on every device.",
        .usersSignOutEverywhereButton: "Sign out everywhere",
        .usersNewPasswordLabel: "New password",
        .usersNewPasswordHelp: "The app's password rules apply. The user's access tokens stop working.",
        .usersSetPasswordButton: "Set password",
        .usersIdentitiesHeading: "Identities",
        .usersIdentitiesCaption: "Ways this user signs in",
        .usersIdentityKindColumn: "Kind",
        .usersIdentitySubjectColumn: "Subject",
        .usersIdentityEmailColumn: "Email",
        .usersIdentityCreatedColumn: "Added",
        .usersIdentityLastUsedColumn: "Last used",
        .usersDetachButton: "Detach",
        .usersDetachLabel: "Detach the {kind} identity",
        .usersNoIdentities: "This user has no identities.",
        .usersPasskeysHeading: "Passkeys",
        .usersPasskeysCaption: "The user's passkeys",
        .usersPasskeyNameColumn: "Name",
        .usersPasskeyPlatformColumn: "Platform",
        .usersPasskeyBackedUpColumn: "Backed up",
        .usersPasskeyCloneColumn: "Clone suspected",
        .usersNoPasskeys: "This user has no passkeys.",
        .usersYes: "yes",
        .usersNo: "no",
        .usersDeleteHeading: "Delete this user",
        .usersDeleteHelp: "Deleting removes the user, their sessions and identities for good. It needs a fresh sign-in.",
        .usersDeleteConfirmLabel: "I understand that this cannot be undone",
        .usersDeleteButton: "Delete user",
        .usersDeleteConfirmRequired: "Tick the box to confirm the deletion.",
        .usersPasswordRequired: "Enter a new password.",
        .usersDeleted: "The user was deleted.",
        .usersSuspendedNotice: "The user is suspended; their sessions ended.",
        .usersActivatedNotice: "The user is active again.",
        .usersPasswordSet: "The password was set.",
        .usersSignedOutEverywhere: "Every session of this user ended.",
        .usersIdentityDetached: "The identity was detached.",
        .pendingLink: "Pending",
        .pendingTitle: "Pending signups and invitations",
        .pendingHelp: "Signups waiting for their confirmation code or link, and invitations not accepted yet.",
        .pendingInviteHeading: "Invite a user",
        .pendingInviteHandleLabel: "Email address",
        .pendingInviteLocaleLabel: "Locale of the e-mail",
        .pendingInviteMetaDataLabel: "Invitation metadata",
        .pendingInviteMetaDataHelp: "A JSON object with the app's invitation metadata fields, for example {\"role\": \"member\"}.",
        .pendingInviteButton: "Send invitation",
        .pendingSignupsHeading: "Pending signups",
        .pendingSignupsCaption: "Signups not confirmed yet, newest first",
        .pendingInvitesHeading: "Invitations",
        .pendingInvitesCaption: "Invitations not accepted yet, newest first",
        .pendingStatusColumn: "Status",
        .pendingLocaleColumn: "Locale",
        .pendingSenderColumn: "Sent by",
        .pendingCreatedColumn: "Created",
        .pendingExpiresColumn: "Expires",
        .pendingCancelButton: "Cancel",
        .pendingCancelLabel: "Cancel the one for {handle}",
        .pendingResendButton: "Resend",
        .pendingResendLabel: "Resend the invitation to {handle}",
        .pendingNoSignups: "No pending signups.",
        .pendingNoInvites: "No invitations.",
        .pendingMoreSignups: "More signups",
        .pendingMoreInvites: "More invitations",
        .pendingCancelled: "Cancelled.",
        .pendingInvited: "An invitation was e-mailed to {handle}.",
        .pendingMetaDataNotJSON: "metaData must be a JSON object",
        .pendingRateLimited: "Too many e-mails went to this address. Try again later.",
        // passkey
        .accountLink: "Account",
        .accountTitle: "Your account",
        .accountTOTPLabel: "Authenticator app (TOTP)",
        .accountTOTPOn: "On",
        .accountTOTPOff: "Off",
        .passkeysHeading: "Passkeys",
        .passkeysCaption: "Your passkeys",
        .passkeyNameColumn: "Name",
        .passkeyCreatedColumn: "Added",
        .passkeyLastUsedColumn: "Last used",
        .passkeyActionColumn: "Action",
        .passkeyRemoveButton: "Remove",
        .noPasskeys: "You have no passkeys yet.",
        .passkeyNeverUsed: "never",
        .passkeyAddHeading: "Add a passkey",
        .passkeyNameLabel: "Name of the new passkey (optional)",
        .passkeyAddButton: "Add a passkey",
        .passkeySignInHeading: "Or use a passkey",
        .passkeySignInButton: "Sign in with a passkey",
        .passkeyEnrolHeading: "Or use a passkey instead",
        .passkeyEnrolHelp: "Sign in with this device's screen lock or a security key instead of codes.",
        .passkeyEnrolButton: "Create a passkey",
        .passkeyReauthHeading: "Or confirm with a passkey",
        .passkeyReauthButton: "Confirm with a passkey",
        .passkeyNoScript: "Passkeys need JavaScript. Turn it on for this site and reload the page.",
        .passkeyFailed: "The passkey could not be used. Please try again.",
        .passkeyCancelled: "The passkey request was cancelled or timed out.",
        .passkeyUnsupported: "This browser cannot use passkeys.",
        .passkeyUnavailable: "Passkeys are not available on this Portal.",
        .passkeyExpired: "This passkey request has expired. Reload the page and try again.",
        .passkeyRefused: "This passkey could not be verified.",
        .passkeyExists: "This passkey is registered already.",
        .passkeyLastFactor: "This passkey is your only way to sign in: add another passkey or an authenticator app first.",
        .passkeySignedOut: "You are signed out. Sign in again.",
    ]

    /// The text of `key`, with `{name}` placeholders filled from `fill`.
    static func text(_ key: Key, _ fill: [String: String] = [:]) -> String {
        var value = english[key] ?? key.rawValue
        for (name, replacement) in fill { value = value.replacingOccurrences(of: "{\(name)}", with: replacement) }
        return value
    }

    /// Every text by key, for the templates (`{{t.key}}`).
    static let table: [String: String] = Dictionary(uniqueKeysWithValues: Key.allCases.map { ($0.rawValue, text($0)) })
}
