-- 0014: a session knows how and when it was last proven.
--
-- A sensitive change (changePassword, deleteAccount, detaching an identity, adding or removing a
-- passkey) asks one rule (`StepUp`) whether the caller proved itself recently enough, and by a method
-- the change accepts. The session's sign-in is its first proof; a later re-proof on the same session
-- (the current password presented to changePassword, a step-up on the coming OAuth login page or in
-- the Portal) moves both columns on. `proven_by` holds the same names as `method`.
--
-- Expand only: both columns are nullable and have no default, so adding them rewrites nothing and
-- holds the table's lock for a moment, and a node of the previous release (which inserts sessions
-- without them) keeps working during a rolling upgrade. NULL reads as the sign-in that opened the
-- session: `COALESCE(proven_by, method)`, `COALESCE(proven_at, created_at)` (SessionStore). A default
-- of now() is deliberately absent: it would date every existing session's proof at the migration,
-- making old sign-ins look fresh.
ALTER TABLE sessions
    ADD COLUMN proven_by text
        CHECK (proven_by IN ('password', 'second_factor', 'anonymous', 'signup', 'register', 'apple', 'google', 'passkey')),
    ADD COLUMN proven_at timestamptz;
