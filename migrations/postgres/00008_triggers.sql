-- +goose Up
-- Auto-trigger rules (server/trigger): each turns one switch on when a
-- metric crosses its trigger threshold for a sustained time, and off only
-- when it is past a separate recover threshold for a sustained time.
-- Durations are Go duration strings, as the switches' max_on.
CREATE TABLE triggers (
    id                   BIGSERIAL        PRIMARY KEY,
    app                  TEXT             NOT NULL,
    name                 TEXT             NOT NULL,
    switch_name          TEXT             NOT NULL,
    description          TEXT             NOT NULL DEFAULT '',
    source               TEXT             NOT NULL,
    query                TEXT             NOT NULL,
    trigger_op           TEXT             NOT NULL,
    trigger_threshold    DOUBLE PRECISION NOT NULL,
    trigger_for          TEXT             NOT NULL,
    recover_op           TEXT             NOT NULL,
    recover_threshold    DOUBLE PRECISION NOT NULL,
    recover_for          TEXT             NOT NULL,
    cooldown             TEXT             NOT NULL,
    max_on               TEXT             NOT NULL,
    missing_data         TEXT             NOT NULL,
    confirm_recovery     BOOLEAN          NOT NULL DEFAULT FALSE,
    flap_max_transitions INTEGER          NOT NULL,
    flap_window          TEXT             NOT NULL,
    -- percent × 100 the rule turns the switch on with; NULL: the switch's own rollout
    rollout_basis        INTEGER,
    -- a staged-rollout template the rule starts when it fires; '': none
    rollout_template     TEXT             NOT NULL DEFAULT '',
    mode                 TEXT             NOT NULL,
    version              BIGINT           NOT NULL,
    reason               TEXT             NOT NULL DEFAULT '',
    updated_by           TEXT             NOT NULL DEFAULT '',
    updated_at           TIMESTAMPTZ      NOT NULL,
    created_at           TIMESTAMPTZ      NOT NULL,
    UNIQUE (app, name),
    CHECK (mode IN ('enforce', 'dry_run')),
    CHECK (missing_data IN ('hold', 'breaching', 'not_breaching'))
);
CREATE INDEX triggers_switch ON triggers (app, switch_name);

-- The evaluation state of each rule, written by the leader's trigger job
-- after every evaluation (state is the JSON of trigger.State: phase,
-- pending-since, cooldown, flips, lock, pause), so a new leader resumes a
-- hold where the old one was. rev guards every write against a concurrent
-- one (a person's pause committed while the job evaluated).
CREATE TABLE trigger_states (
    trigger_id   BIGINT      PRIMARY KEY REFERENCES triggers (id) ON DELETE CASCADE,
    rev          BIGINT      NOT NULL,
    phase        TEXT        NOT NULL,
    paused       BOOLEAN     NOT NULL DEFAULT FALSE,
    state        TEXT        NOT NULL,
    last_at      TIMESTAMPTZ,
    last_outcome TEXT        NOT NULL DEFAULT '',
    last_value   TEXT        NOT NULL DEFAULT '',
    last_error   TEXT        NOT NULL DEFAULT '',
    updated_at   TIMESTAMPTZ NOT NULL
);

-- Recent evaluations of each rule (the newest few hundred are kept):
-- what the query gave (value as text, so ±Inf survives), the phases before
-- and after, what the rule did (or, in dry run, would have done) and why.
CREATE TABLE trigger_evaluations (
    id         BIGSERIAL   PRIMARY KEY,
    trigger_id BIGINT      NOT NULL REFERENCES triggers (id) ON DELETE CASCADE,
    at         TIMESTAMPTZ NOT NULL,
    outcome    TEXT        NOT NULL,
    value      TEXT        NOT NULL DEFAULT '',
    error      TEXT        NOT NULL DEFAULT '',
    phase_from TEXT        NOT NULL,
    phase_to   TEXT        NOT NULL,
    action     TEXT        NOT NULL DEFAULT '',
    dry_run    BOOLEAN     NOT NULL DEFAULT FALSE,
    why        TEXT        NOT NULL DEFAULT ''
);
CREATE INDEX trigger_evaluations_rule ON trigger_evaluations (trigger_id, id);

-- +goose Down
DROP TABLE trigger_evaluations;
DROP TABLE trigger_states;
DROP TABLE triggers;
