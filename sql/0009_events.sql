-- 0009: the event stream and its signed webhook deliveries.
--
-- A flow writes one `events` row in the transaction of the state change it describes, and in the same
-- statement one `webhook_deliveries` row per enabled endpoint of the app subscribed to that type. So an
-- event exists exactly when its change committed, and every delivery exists exactly when its event does.
-- Workers claim one due delivery at a time (FOR UPDATE SKIP LOCKED, a lease in next_attempt), send it
-- outside any transaction, then mark it and log the attempt in `webhook_attempts`.

CREATE TABLE webhook_endpoints (
    id                          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    app_ref                     bigint NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
    url                         text NOT NULL CHECK (length(url) BETWEEN 1 AND 2048),
    event_types                 text[] NOT NULL,
    description                 text NOT NULL DEFAULT '' CHECK (length(description) <= 500),
    enabled                     boolean NOT NULL DEFAULT true,
    disabled_reason             text,
    secret_sealed               bytea NOT NULL,
    -- After a rotation the previous secret keeps signing (a second signature) until it expires.
    previous_secret_sealed      bytea,
    previous_secret_expires_at  timestamptz,
    -- Failed attempts since the last success; at the operator's threshold the endpoint is disabled.
    consecutive_failures        integer NOT NULL DEFAULT 0,
    created_at                  timestamptz NOT NULL DEFAULT now(),
    updated_at                  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_endpoints_app ON webhook_endpoints (app_ref, created_at);

-- `id` (a sequence) is the event's place in the stream; see README "Webhooks" for what it orders.
CREATE TABLE events (
    id          bigserial PRIMARY KEY,
    event_id    uuid NOT NULL UNIQUE DEFAULT gen_random_uuid(),
    app_ref     bigint NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
    type        text NOT NULL,
    user_id     uuid,
    -- The exact JSON body every endpoint receives (the bytes that are signed).
    body        text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX events_app_time ON events (app_ref, created_at);

CREATE TABLE webhook_deliveries (
    id              bigserial PRIMARY KEY,
    endpoint_id     uuid NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    event_ref       bigint NOT NULL REFERENCES events (id) ON DELETE CASCADE,
    user_id         uuid,
    status          text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'sending', 'delivered', 'dead')),
    -- Every attempt ever made (the attempt number in the log), and the failures since the delivery was
    -- last queued (the place in the retry schedule; a replay starts the schedule again).
    attempts        integer NOT NULL DEFAULT 0,
    round_failures  integer NOT NULL DEFAULT 0,
    next_attempt    timestamptz NOT NULL DEFAULT now(),
    last_error      text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    delivered_at    timestamptz,
    UNIQUE (endpoint_id, event_ref)
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt, id) WHERE status IN ('pending', 'sending');
-- The ordering rule: an earlier undelivered event of the same user on the same endpoint holds later ones.
CREATE INDEX webhook_deliveries_user_order ON webhook_deliveries (endpoint_id, user_id, event_ref)
    WHERE status IN ('pending', 'sending');

CREATE TABLE webhook_attempts (
    id           bigserial PRIMARY KEY,
    delivery_ref bigint NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
    endpoint_id  uuid NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    attempt      integer NOT NULL,
    http_status  integer,
    error        text,
    latency_ms   integer NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_attempts_endpoint ON webhook_attempts (endpoint_id, id);
CREATE INDEX webhook_attempts_delivery ON webhook_attempts (delivery_ref);
