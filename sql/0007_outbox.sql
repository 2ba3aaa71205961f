-- 0007: the outbox sends each message on its own.
--
-- A worker claims ONE due message in a short statement (status 'sending', attempts + 1, and
-- next_attempt moved forward as the lease), sends it outside any transaction, then marks it 'sent' or
-- back to 'queued'/'failed'. A worker that dies while sending leaves the row 'sending' with its lease
-- running out; once next_attempt has passed, another worker claims it again. So a crash resends at
-- most the one message that was in flight, never messages already marked 'sent'.
ALTER TABLE messages DROP CONSTRAINT messages_status_check,
    ADD CONSTRAINT messages_status_check CHECK (status IN ('queued', 'sending', 'sent', 'failed'));

DROP INDEX messages_due;
CREATE INDEX messages_due ON messages (next_attempt, id) WHERE status IN ('queued', 'sending');
