#if canImport(Glibc)
import Glibc
#endif

/// CPU-bound work that runs ahead of need (RSA keys for the key pool) runs below the request path's
/// threads: Linux keeps a nice value per thread, and such a thread runs at nice 10, so when one of the
/// server's event loops wakes up it gets a core at once instead of after a key generation's time slice.
/// (Nice ranks threads within one scheduling group: with autogroup on, as on Debian, processes of other
/// sessions, such as PostgreSQL's backends, are not ranked against these threads.)
///
/// bcrypt can run there too (`COSYNC_BCRYPT_NICE`), but does not by default. Measured on the 2-core
/// machine (`tools/bench/login.sh`, the same binary, nice 0 then 10): logins 0.82 and 0.85 of the
/// bcrypt ceiling (within the noise), and in the fairness run, the quiet app's p99 221 ms at nice 0
/// against 293 ms at nice 10 (three runs at 10: 293 to 940 ms): below the flooding app's request
/// work, the quiet app's own hash waited too.
public enum BackgroundPriority {
    /// The nice value of a thread that runs only such work (0 is the default; 19 the lowest).
    public static let niceness: Int32 = 10

    /// Sets the calling thread's nice value (`niceness` by default). Only for threads that run nothing
    /// else: an unprivileged process cannot raise it again. Without effect where it is not supported.
    static func lowerCurrentThread(to value: Int32 = niceness) {
        #if os(Linux)
        // `who` 0 is the calling thread on Linux (the nice value is per thread there).
        if getpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0) != value {
            _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, value)
        }
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
