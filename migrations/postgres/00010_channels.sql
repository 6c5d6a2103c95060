-- +goose Up
-- Notification channels (admin): where the leader's delivery job sends the
-- events of the notifications table. The secret signs every delivery
-- (HMAC-SHA256); it is never shown again after it is set. events is a
-- comma-separated list of event kinds ("*": every kind), apps a
-- comma-separated list of apps ("": every app).
CREATE TABLE channels (
    id            BIGSERIAL   PRIMARY KEY,
    name          TEXT        NOT NULL UNIQUE,
    url           TEXT        NOT NULL,
    secret        TEXT        NOT NULL,
    secret_set_at TIMESTAMPTZ NOT NULL,
    events        TEXT        NOT NULL,
    apps          TEXT        NOT NULL DEFAULT '',
    format        TEXT        NOT NULL,
    version       BIGINT      NOT NULL,
    reason        TEXT        NOT NULL DEFAULT '',
    updated_by    TEXT        NOT NULL DEFAULT '',
    updated_at    TIMESTAMPTZ NOT NULL,
    created_at    TIMESTAMPTZ NOT NULL,
    CHECK (format IN ('json', 'slack')),
    CHECK (secret <> '')
);

-- The delivery log: one row per event and channel. A row is claimed
-- ("sending", next_attempt_at pushed past the request's timeout) before
-- its request and finished after it, so a new leader retries what a dead
-- one left unfinished.
CREATE TABLE deliveries (
    id              BIGSERIAL   PRIMARY KEY,
    notification_id BIGINT      NOT NULL REFERENCES notifications (id) ON DELETE CASCADE,
    channel_id      BIGINT      NOT NULL REFERENCES channels (id) ON DELETE CASCADE,
    status          TEXT        NOT NULL,
    attempts        INTEGER     NOT NULL DEFAULT 0,
    next_attempt_at TIMESTAMPTZ,
    last_attempt_at TIMESTAMPTZ,
    response_code   INTEGER     NOT NULL DEFAULT 0,
    error           TEXT        NOT NULL DEFAULT '',
    created_at      TIMESTAMPTZ NOT NULL,
    finished_at     TIMESTAMPTZ,
    UNIQUE (notification_id, channel_id),
    CHECK (status IN ('pending', 'sending', 'delivered', 'failed'))
);
CREATE INDEX deliveries_due ON deliveries (next_attempt_at) WHERE finished_at IS NULL;
CREATE INDEX deliveries_channel ON deliveries (channel_id, id);
CREATE INDEX deliveries_finished ON deliveries (finished_at) WHERE finished_at IS NOT NULL;

-- An event is dispatched once the delivery job has made its deliveries.
ALTER TABLE notifications ADD COLUMN dispatched_at TIMESTAMPTZ;
CREATE INDEX notifications_undispatched ON notifications (id) WHERE dispatched_at IS NULL;

-- The expiry job's progress on the current expiry of each switch that is
-- on: when it reminded, found the switch expired, escalated. A renewal
-- (a new expires_at) starts afresh.
CREATE TABLE expiry_states (
    app          TEXT        NOT NULL,
    name         TEXT        NOT NULL,
    expires_at   TIMESTAMPTZ NOT NULL,
    reminded_at  TIMESTAMPTZ,
    expired_at   TIMESTAMPTZ,
    escalated_at TIMESTAMPTZ,
    PRIMARY KEY (app, name)
);

-- What the findings job has seen of each switch's reads: since when
-- instances reporting signals evaluate its app (watched_since), and the
-- newest read any of them reported (to the hour). The fleet model lives in
-- memory; this survives restarts and leader changes.
CREATE TABLE switch_reads (
    app           TEXT        NOT NULL,
    name          TEXT        NOT NULL,
    watched_since TIMESTAMPTZ NOT NULL,
    last_read     TIMESTAMPTZ,
    PRIMARY KEY (app, name)
);

-- +goose Down
DROP TABLE switch_reads;
DROP TABLE expiry_states;
DROP INDEX notifications_undispatched;
ALTER TABLE notifications DROP COLUMN dispatched_at;
DROP TABLE deliveries;
DROP TABLE channels;
