-- +goose Up
-- Drills: scheduled exercises of a switch (server/drill). spec holds the
-- drill's settings as the API takes them (schedule, target, duration,
-- probes, abort conditions, blackout windows, preflight); last_scheduled_at
-- is the newest cron time the leader's drill job has dealt with (run,
-- refused or recorded as missed), so a new leader neither repeats nor
-- forgets a scheduled run.
CREATE TABLE drills (
    id                INTEGER     PRIMARY KEY AUTOINCREMENT,
    app               TEXT        NOT NULL,
    name              TEXT        NOT NULL,
    switch_name       TEXT        NOT NULL,
    spec              TEXT        NOT NULL,
    enabled           BOOLEAN     NOT NULL DEFAULT TRUE,
    last_scheduled_at DATETIME,
    version           BIGINT      NOT NULL,
    reason            TEXT        NOT NULL DEFAULT '',
    updated_by        TEXT        NOT NULL DEFAULT '',
    updated_at        DATETIME    NOT NULL,
    created_at        DATETIME    NOT NULL,
    UNIQUE (app, name)
);

-- One row per run of a drill, also for runs that were refused or missed.
-- A run in progress has no finished_at: at most one per drill (the partial
-- unique index). phase and state (JSON: evidence so far) let a new leader
-- find a run the old one left, and lease_id the etcd lease of its
-- override.
CREATE TABLE drill_runs (
    id              INTEGER     PRIMARY KEY AUTOINCREMENT,
    app             TEXT        NOT NULL,
    drill           TEXT        NOT NULL,
    switch_name     TEXT        NOT NULL,
    number          BIGINT      NOT NULL,
    dry_run         BOOLEAN     NOT NULL DEFAULT FALSE,
    started_via     TEXT        NOT NULL,
    started_by      TEXT        NOT NULL DEFAULT '',
    started_by_kind TEXT        NOT NULL DEFAULT '',
    reason          TEXT        NOT NULL DEFAULT '',
    scheduled_for   DATETIME,
    phase           TEXT        NOT NULL,
    outcome         TEXT        NOT NULL DEFAULT '',
    summary         TEXT        NOT NULL DEFAULT '',
    lease_id        BIGINT      NOT NULL DEFAULT 0,
    abort_request   TEXT        NOT NULL DEFAULT '',
    spec            TEXT        NOT NULL,
    state           TEXT        NOT NULL DEFAULT '{}',
    created_at      DATETIME    NOT NULL,
    started_at      DATETIME,
    reverted_at     DATETIME,
    finished_at     DATETIME,
    UNIQUE (app, drill, number)
);
CREATE UNIQUE INDEX drill_runs_one_open ON drill_runs (app, drill) WHERE finished_at IS NULL;
CREATE INDEX drill_runs_switch ON drill_runs (app, switch_name, outcome, finished_at);

-- +goose Down
DROP TABLE drill_runs;
DROP TABLE drills;
