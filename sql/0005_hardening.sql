-- 0005: limits that hold under concurrency and across nodes.
--
-- Login throttling becomes a reservation: an attempt is counted (atomically, in one upsert) BEFORE the
-- password is checked, and a success gives it back. Subjects are per (handle, client address), per
-- handle and per client address; see LoginThrottle and the README's security section.
--
-- rate_limits: fixed-window counters for everything else that must be bounded per handle, user or
-- client address (signup and invite re-sends, forgotPassword, wrong reset-code guesses per user).
-- A slot is taken with one INSERT … ON CONFLICT DO UPDATE … WHERE count < limit RETURNING, so two
-- nodes can never both take the last slot.
CREATE TABLE rate_limits (
    app_ref      bigint NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
    subject      text NOT NULL,
    window_start timestamptz NOT NULL,
    count        integer NOT NULL,
    PRIMARY KEY (app_ref, subject)
);

-- A pending signup or invite whose code is dead (too many wrong guesses, or expired) is closed as
-- 'expired' when a new one replaces it, so the history stays listable.
ALTER TABLE signups DROP CONSTRAINT signups_status_check,
    ADD CONSTRAINT signups_status_check CHECK (status IN ('pending', 'verified', 'expired'));
ALTER TABLE invites DROP CONSTRAINT invites_status_check,
    ADD CONSTRAINT invites_status_check CHECK (status IN ('pending', 'verified', 'expired'));

-- A handle has one pending invite per sender (enduser-api.md §5.8 step 7), each with its own code and
-- attempts, so another user's invite never takes over a pending one. Wrong guesses at a handle's
-- invite codes count against all of them.
DROP INDEX invites_app_handle_pending;
CREATE UNIQUE INDEX invites_app_handle_sender_pending ON invites (app_ref, lower(handle), lower(sender_handle)) WHERE status = 'pending';
