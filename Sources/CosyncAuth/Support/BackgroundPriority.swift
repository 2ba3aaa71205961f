#if canImport(Glibc)
import Glibc
#endif

/// CPU-bound work that a request only waits for (bcrypt) or that runs ahead of need (RSA keys for the
/// key pool) runs below the request path's threads: Linux keeps a nice value per thread, and a thread
/// of such work runs at nice 10. When an event loop or a PostgreSQL backend wakes up, it gets a core at
/// once instead of after a hash's time slice.
///
/// Measured before (`tools/bench/profile.sh`, ROUTE=login): with both hashing threads at the request
/// path's priority, each short transaction of a login (the attempt's reservation, the session's
/// insert) waited for a core while it held the rows it had locked, among them the throttle row of the
/// client address that every login from that address shares. The logins queued behind those locks,
/// and the hashing threads ran out of work: each was busy 56 % of the time, and logins ran at 0.64
/// (one user) to 0.84 (32 users) of the bcrypt ceiling.
public enum BackgroundPriority {
    /// The nice value of a thread that runs only such work (0 is the default; 19 the lowest).
    public static let niceness: Int32 = 10

    /// Lowers the calling thread's priority to `niceness`. Only for threads that run nothing else: an
    /// unprivileged process cannot raise it again. Without effect where it is not supported.
    static func lowerCurrentThread() {
        #if os(Linux)
        // `who` 0 is the calling thread on Linux (the nice value is per thread there).
        _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, niceness)
        #endif
    }

    /// The calling thread's nice value (tests).
    public static func currentNiceness() -> Int32 {
        #if os(Linux)
        return getpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0)
        #else
        return 0
        #endif
    }
}
