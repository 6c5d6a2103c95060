-- +goose Up
-- Staged rollouts: a plan that opens (or closes) one switch in steps,
-- advanced by the scheduler's leader. The plan, its progress (current
-- step, each step's convergence, hold and gate verdicts) and the switch's
-- state before the plan (what a revert puts back) are JSON documents;
-- version guards every update. A plan outlives its switch's deletion as
-- history, so there is no foreign key.
CREATE TABLE rollouts (
    id           INTEGER     PRIMARY KEY AUTOINCREMENT,
    app          TEXT        NOT NULL,
    switch_name  TEXT        NOT NULL,
    direction    TEXT        NOT NULL,
    state        TEXT        NOT NULL,
    plan         TEXT        NOT NULL,
    before_state TEXT        NOT NULL,
    base_version INTEGER     NOT NULL,
    progress     TEXT        NOT NULL,
    version      INTEGER     NOT NULL,
    created_by   TEXT        NOT NULL,
    reason       TEXT        NOT NULL,
    created_at   DATETIME    NOT NULL,
    updated_at   DATETIME    NOT NULL,
    ended_at     DATETIME,
    CHECK (direction IN ('on', 'off')),
    CHECK (state IN ('pending', 'running', 'paused', 'done', 'aborted', 'reverted'))
);
-- One active plan per switch, whatever the code above the database does.
CREATE UNIQUE INDEX rollouts_active ON rollouts (app, switch_name) WHERE state IN ('pending', 'running', 'paused');
CREATE INDEX rollouts_switch ON rollouts (app, switch_name, id);

-- +goose Down
DROP TABLE rollouts;
