-- Issue 24: the outbox and webhook workers wait for work instead of polling. A message or delivery
-- that becomes due now (queued, replayed, or its endpoint resumed) announces itself on the channel
-- `cosync_work` when its transaction commits; each node's listener wakes its workers. Rows the workers
-- themselves touch (claims, releases, retries scheduled for later) announce nothing, so a worker never
-- wakes itself: retries are found by the workers' slow idle poll (COSYNC_WORKER_IDLE_POLL_MS).
-- NOTIFY folds identical payloads of one transaction into one, so a row trigger costs one message per
-- transaction however many rows it queues.

CREATE FUNCTION cosync_work_outbox() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('cosync_work', 'outbox');
    RETURN NULL;
END;
$$;

CREATE FUNCTION cosync_work_webhooks() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('cosync_work', 'webhooks');
    RETURN NULL;
END;
$$;

-- FOR EACH ROW: a statement-level trigger fires for an INSERT … SELECT that inserts nothing (every
-- event is offered to the app's endpoints this way, most apps have none), and a NOTIFY on every login
-- would wake every node's webhook workers and take the notify queue's lock in every login's commit.
CREATE TRIGGER messages_work AFTER INSERT ON messages
    FOR EACH ROW EXECUTE FUNCTION cosync_work_outbox();

CREATE TRIGGER webhook_deliveries_queued AFTER INSERT ON webhook_deliveries
    FOR EACH ROW EXECUTE FUNCTION cosync_work_webhooks();

-- A replay (delivered or dead → pending) or a resumed endpoint (a parked delivery made due now).
CREATE TRIGGER webhook_deliveries_requeued AFTER UPDATE ON webhook_deliveries
    FOR EACH ROW
    WHEN (NEW.status = 'pending' AND (OLD.status IN ('delivered', 'dead') OR OLD.next_attempt > now() + interval '50 years')
          AND NEW.next_attempt <= now() + interval '1 second')
    EXECUTE FUNCTION cosync_work_webhooks();
