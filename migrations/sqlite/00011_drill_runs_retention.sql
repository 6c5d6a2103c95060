-- +goose Up
-- See migrations/postgres/00012_drill_runs_retention.sql.
ALTER TABLE drill_runs ADD COLUMN count INTEGER NOT NULL DEFAULT 1;
ALTER TABLE drill_runs ADD COLUMN last_scheduled_for DATETIME;
ALTER TABLE drill_runs ADD COLUMN drill_version BIGINT NOT NULL DEFAULT 0;
ALTER TABLE drill_runs ADD COLUMN spec_sha256 TEXT NOT NULL DEFAULT '';
CREATE INDEX drill_runs_finished ON drill_runs (finished_at) WHERE finished_at IS NOT NULL;

-- +goose Down
DROP INDEX drill_runs_finished;
ALTER TABLE drill_runs DROP COLUMN spec_sha256;
ALTER TABLE drill_runs DROP COLUMN drill_version;
ALTER TABLE drill_runs DROP COLUMN last_scheduled_for;
ALTER TABLE drill_runs DROP COLUMN count;
