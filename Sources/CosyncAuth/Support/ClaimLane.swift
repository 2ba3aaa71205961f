import ServiceLifecycle

/// One lane of an outbox worker (e-mail and SMS, webhooks): claim one due row, send it, repeat; sleep
/// `pollInterval` when nothing is due. A graceful shutdown cancels the claim (which may be waiting for
/// a connection while PostgreSQL is unreachable) and the idle sleep, but not a send in flight: it runs
/// in a task of its own and the lane waits for it, at most `inFlightLimit` (if its mark cannot be
/// written, the row's lease runs out and another node sends it again).
///
/// `drained`, when given, tells whether a claim took everything that was due (a batch that was not
/// full): then the lane also waits `pollInterval` before it claims again, so that under a steady
/// trickle it claims batches, not one row per statement, while a backlog is still worked through at
/// full speed.
///
/// `wake`, when given and listening (`NOTIFY cosync_work` reaches this node), replaces the idle poll:
/// the lane waits for a notification, and looks on its own only every `idlePoll` (for rows that fall
/// due later: retries, leases that ran out). Without a listener it polls every `pollInterval`.
func runClaimLane<Claimed: Sendable>(
    pollInterval: Duration, inFlightLimit: Duration,
    wake: WorkSignal? = nil, idlePoll: Duration = .seconds(5),
    claim: @escaping @Sendable () async throws -> Claimed?, deliver: @escaping @Sendable (Claimed) async throws -> Void,
    drained: (@Sendable (Claimed) -> Bool)? = nil
) async {
    while !Task.isCancelled, !Task.isShuttingDownGracefully {
        let seen = wake?.generation ?? 0
        let claimed = try? await cancelWhenGracefulShutdown { try await abandoningOnCancel { try await claim() } }
        guard let claimed = claimed ?? nil else {
            if let wake, wake.isListening {
                await cancelWhenGracefulShutdown { await wake.wait(since: seen, upTo: idlePoll) }
            } else {
                try? await cancelWhenGracefulShutdown { try await Task.sleep(for: pollInterval) }
            }
            continue
        }
        let inFlight = Task { try await deliver(claimed) }
        _ = try? await withDeadline(inFlightLimit) { try await inFlight.value }
        if drained?(claimed) == true {
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: pollInterval) }
        }
    }
}
