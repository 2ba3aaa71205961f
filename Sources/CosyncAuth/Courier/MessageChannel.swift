/// How an outbox message travels (`messages.channel`): the e-mail transport or the SMS one. The
/// column's CHECK admits exactly these cases; the raw values are what it stores.
public enum MessageChannel: String, Sendable, CaseIterable {
    case email, sms
}
