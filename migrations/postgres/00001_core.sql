-- +goose Up
CREATE TABLE switches (
    id                 BIGSERIAL PRIMARY KEY,
    app                TEXT        NOT NULL,
    name               TEXT        NOT NULL,
    level              TEXT        NOT NULL,
    description        TEXT        NOT NULL DEFAULT '',
    owner              TEXT        NOT NULL DEFAULT '',
    runbook            TEXT        NOT NULL DEFAULT '',
    fallback           TEXT        NOT NULL DEFAULT '',
    max_staleness      TEXT        NOT NULL DEFAULT '',
    state              TEXT        NOT NULL DEFAULT 'off',
    rollout_basis      INTEGER     NOT NULL DEFAULT 10000,
    rollout_stickiness TEXT        NOT NULL DEFAULT 'instance',
    rollout_selector   TEXT        NOT NULL DEFAULT '',
    max_on             TEXT        NOT NULL DEFAULT '',
    expiry_policy      TEXT        NOT NULL DEFAULT 'remind',
    expires_at         TIMESTAMPTZ,
    turned_on_at       TIMESTAMPTZ,
    version            BIGINT      NOT NULL,
    reason             TEXT        NOT NULL DEFAULT '',
    updated_by         TEXT        NOT NULL DEFAULT '',
    updated_at         TIMESTAMPTZ NOT NULL,
    created_at         TIMESTAMPTZ NOT NULL,
    UNIQUE (app, name),
    CHECK (rollout_basis BETWEEN 0 AND 10000),
    CHECK (state IN ('on', 'off'))
);

CREATE TABLE limit_rules (
    id          BIGSERIAL PRIMARY KEY,
    app         TEXT        NOT NULL,
    resource    TEXT        NOT NULL,
    kind        TEXT        NOT NULL,
    state       TEXT        NOT NULL DEFAULT 'on',
    spec        TEXT        NOT NULL,
    description TEXT        NOT NULL DEFAULT '',
    version     BIGINT      NOT NULL,
    reason      TEXT        NOT NULL DEFAULT '',
    updated_by  TEXT        NOT NULL DEFAULT '',
    updated_at  TIMESTAMPTZ NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL,
    UNIQUE (app, resource),
    CHECK (state IN ('on', 'off'))
);

-- Every committed change leaves one row here in the same transaction; the
-- publisher deletes it once etcd holds the entity's current state.
CREATE TABLE outbox (
    id         BIGSERIAL PRIMARY KEY,
    kind       TEXT        NOT NULL,
    app        TEXT        NOT NULL,
    name       TEXT        NOT NULL,
    created_at TIMESTAMPTZ NOT NULL
);

CREATE TABLE api_tokens (
    id          BIGSERIAL PRIMARY KEY,
    name        TEXT        NOT NULL,
    token_hash  TEXT        NOT NULL UNIQUE,
    role        TEXT        NOT NULL,
    apps        TEXT        NOT NULL DEFAULT '',
    created_by  TEXT        NOT NULL DEFAULT '',
    created_at  TIMESTAMPTZ NOT NULL,
    revoked_at  TIMESTAMPTZ,
    CHECK (role IN ('viewer', 'operator', 'admin'))
);

-- The audit log: id is a gap-free sequence assigned under a lock, so a
-- deleted row shows up as a gap when the chain is verified.
CREATE TABLE audit_events (
    id          BIGINT      PRIMARY KEY,
    at          TIMESTAMPTZ NOT NULL,
    actor       TEXT        NOT NULL,
    actor_kind  TEXT        NOT NULL,
    action      TEXT        NOT NULL,
    target      TEXT        NOT NULL,
    before      TEXT        NOT NULL DEFAULT '',
    after       TEXT        NOT NULL DEFAULT '',
    reason      TEXT        NOT NULL DEFAULT '',
    request_id  TEXT        NOT NULL DEFAULT '',
    remote_addr TEXT        NOT NULL DEFAULT '',
    prev_hash   TEXT        NOT NULL,
    hash        TEXT        NOT NULL
);
CREATE INDEX audit_events_target ON audit_events (target, id);
CREATE INDEX audit_events_actor ON audit_events (actor, id);
CREATE INDEX audit_events_at ON audit_events (at);

-- +goose StatementBegin
CREATE FUNCTION audit_events_append_only() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'audit_events is append-only: % refused', TG_OP;
END;
$$ LANGUAGE plpgsql;
-- +goose StatementEnd

CREATE TRIGGER audit_events_no_update_delete
    BEFORE UPDATE OR DELETE ON audit_events
    FOR EACH ROW EXECUTE FUNCTION audit_events_append_only();

-- +goose Down
DROP TRIGGER audit_events_no_update_delete ON audit_events;
DROP FUNCTION audit_events_append_only();
DROP TABLE audit_events;
DROP TABLE api_tokens;
DROP TABLE outbox;
DROP TABLE limit_rules;
DROP TABLE switches;
