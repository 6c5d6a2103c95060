-- +goose Up
CREATE TABLE switches (
    id                 INTEGER PRIMARY KEY AUTOINCREMENT,
    app                TEXT     NOT NULL,
    name               TEXT     NOT NULL,
    level              TEXT     NOT NULL,
    description        TEXT     NOT NULL DEFAULT '',
    owner              TEXT     NOT NULL DEFAULT '',
    runbook            TEXT     NOT NULL DEFAULT '',
    fallback           TEXT     NOT NULL DEFAULT '',
    max_staleness      TEXT     NOT NULL DEFAULT '',
    state              TEXT     NOT NULL DEFAULT 'off',
    rollout_basis      INTEGER  NOT NULL DEFAULT 10000,
    rollout_stickiness TEXT     NOT NULL DEFAULT 'instance',
    rollout_selector   TEXT     NOT NULL DEFAULT '',
    max_on             TEXT     NOT NULL DEFAULT '',
    expiry_policy      TEXT     NOT NULL DEFAULT 'remind',
    expires_at         DATETIME,
    turned_on_at       DATETIME,
    version            INTEGER  NOT NULL,
    reason             TEXT     NOT NULL DEFAULT '',
    updated_by         TEXT     NOT NULL DEFAULT '',
    updated_at         DATETIME NOT NULL,
    created_at         DATETIME NOT NULL,
    UNIQUE (app, name),
    CHECK (rollout_basis BETWEEN 0 AND 10000),
    CHECK (state IN ('on', 'off'))
);

CREATE TABLE limit_rules (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    app         TEXT     NOT NULL,
    resource    TEXT     NOT NULL,
    kind        TEXT     NOT NULL,
    state       TEXT     NOT NULL DEFAULT 'on',
    spec        TEXT     NOT NULL,
    description TEXT     NOT NULL DEFAULT '',
    version     INTEGER  NOT NULL,
    reason      TEXT     NOT NULL DEFAULT '',
    updated_by  TEXT     NOT NULL DEFAULT '',
    updated_at  DATETIME NOT NULL,
    created_at  DATETIME NOT NULL,
    UNIQUE (app, resource),
    CHECK (state IN ('on', 'off'))
);

CREATE TABLE outbox (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    kind       TEXT     NOT NULL,
    app        TEXT     NOT NULL,
    name       TEXT     NOT NULL,
    created_at DATETIME NOT NULL
);

CREATE TABLE api_tokens (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    name        TEXT     NOT NULL,
    token_hash  TEXT     NOT NULL UNIQUE,
    role        TEXT     NOT NULL,
    apps        TEXT     NOT NULL DEFAULT '',
    created_by  TEXT     NOT NULL DEFAULT '',
    created_at  DATETIME NOT NULL,
    revoked_at  DATETIME,
    CHECK (role IN ('viewer', 'operator', 'admin'))
);

CREATE TABLE audit_events (
    id          INTEGER PRIMARY KEY,
    at          DATETIME NOT NULL,
    actor       TEXT     NOT NULL,
    actor_kind  TEXT     NOT NULL,
    action      TEXT     NOT NULL,
    target      TEXT     NOT NULL,
    before      TEXT     NOT NULL DEFAULT '',
    after       TEXT     NOT NULL DEFAULT '',
    reason      TEXT     NOT NULL DEFAULT '',
    request_id  TEXT     NOT NULL DEFAULT '',
    remote_addr TEXT     NOT NULL DEFAULT '',
    prev_hash   TEXT     NOT NULL,
    hash        TEXT     NOT NULL
);
CREATE INDEX audit_events_target ON audit_events (target, id);
CREATE INDEX audit_events_actor ON audit_events (actor, id);
CREATE INDEX audit_events_at ON audit_events (at);

-- SQLite has no stored procedures; RAISE in a trigger gives the same guarantee.
CREATE TRIGGER audit_events_no_update BEFORE UPDATE ON audit_events
BEGIN SELECT RAISE(ABORT, 'audit_events is append-only: UPDATE refused'); END;
CREATE TRIGGER audit_events_no_delete BEFORE DELETE ON audit_events
BEGIN SELECT RAISE(ABORT, 'audit_events is append-only: DELETE refused'); END;

-- +goose Down
DROP TRIGGER audit_events_no_delete;
DROP TRIGGER audit_events_no_update;
DROP TABLE audit_events;
DROP TABLE api_tokens;
DROP TABLE outbox;
DROP TABLE limit_rules;
DROP TABLE switches;
