-- +goose Up
-- Findings: something about a switch or a job that a person should look
-- at (expired_on, never_drilled, never_read, no_owner, trigger_locked,
-- drill_failed, rollout_paused, …). One open finding per kind and target;
-- a finding whose cause went away is resolved, saying why.
CREATE TABLE findings (
    id          INTEGER     PRIMARY KEY AUTOINCREMENT,
    kind        TEXT        NOT NULL,
    target      TEXT        NOT NULL,
    app         TEXT        NOT NULL DEFAULT '',
    severity    TEXT        NOT NULL,
    summary     TEXT        NOT NULL,
    detail      TEXT        NOT NULL DEFAULT '',
    since       DATETIME    NOT NULL,
    updated_at  DATETIME    NOT NULL,
    resolved_at DATETIME,
    resolution  TEXT        NOT NULL DEFAULT '',
    CHECK (severity IN ('info', 'warning', 'critical'))
);
CREATE UNIQUE INDEX findings_open ON findings (kind, target) WHERE resolved_at IS NULL;
CREATE INDEX findings_since ON findings (since);

-- Notifications: events for the channels, written in the transaction of
-- the change that caused them (so an event exists exactly when its cause
-- committed) and delivered by the leader's notification job.
CREATE TABLE notifications (
    id         INTEGER     PRIMARY KEY AUTOINCREMENT,
    event_key  TEXT        NOT NULL UNIQUE,
    kind       TEXT        NOT NULL,
    app        TEXT        NOT NULL DEFAULT '',
    target     TEXT        NOT NULL DEFAULT '',
    title      TEXT        NOT NULL,
    body       TEXT        NOT NULL DEFAULT '',
    data       TEXT        NOT NULL DEFAULT '{}',
    created_at  DATETIME   NOT NULL
);

-- +goose Down
DROP TABLE notifications;
DROP TABLE findings;
