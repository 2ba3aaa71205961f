-- 0014: a session knows how and when it was last proven.
--
-- A sensitive change (changePassword, deleteAccount, detaching an identity, adding or removing a
-- passkey) asks one rule (`StepUp`) whether the caller proved itself recently enough, and by a method
-- the change accepts. The session's sign-in is its first proof; a later re-proof on the same session
-- (the current password presented to changePassword, a step-up on the coming OAuth login page or in
-- the Portal) moves both columns on. `proven_by` holds the same names as `method`.
ALTER TABLE sessions ADD COLUMN proven_by text, ADD COLUMN proven_at timestamptz;
UPDATE sessions SET proven_by = method, proven_at = created_at;
ALTER TABLE sessions
    ALTER COLUMN proven_by SET NOT NULL,
    ALTER COLUMN proven_at SET NOT NULL,
    ALTER COLUMN proven_at SET DEFAULT now(),
    ADD CONSTRAINT sessions_proven_by_check
        CHECK (proven_by IN ('password', 'second_factor', 'anonymous', 'signup', 'register', 'apple', 'google', 'passkey'));
