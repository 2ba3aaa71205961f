-- 0023: indexes for the Portal's observation pages (issue 23), so that they stay fast on large apps.
--
-- The overview's outbox figures (how many of an app's messages are queued, sending or failed, and the
-- oldest) read only the open and failed rows, not the app's whole history of sent messages.
CREATE INDEX messages_app_open ON messages (app_ref, status, created_at) WHERE status IN ('queued', 'sending', 'failed');

-- An endpoint's delivery log, newest first, a page at a time (the unique (endpoint_id, event_ref) index
-- does not give the deliveries in their order).
CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries (endpoint_id, id);

-- The overview's per-day counts of sign-ins, failures, lockouts and new users: the types it counts,
-- by app and time, without reading the app's other events (events_app_time (app_ref, created_at)
-- reads every event of the period and filters by type).
CREATE INDEX events_app_type_time ON events (app_ref, type, created_at);
