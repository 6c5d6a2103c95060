-- +goose Up
-- See migrations/postgres/00012_drill_runs_retention.sql.
ALTER TABLE drill_runs ADD COLUMN count INTEGER NOT NULL DEFAULT 1;
ALTER TABLE drill_runs ADD COLUMN last_scheduled_for DATETIME;
ALTER TABLE drill_runs ADD COLUMN drill_version BIGINT NOT NULL DEFAULT 0;
ALTER TABLE drill_runs ADD COLUMN spec_sha256 TEXT NOT NULL DEFAULT '';
CREATE INDEX drill_runs_finished ON drill_runs (finished_at) WHERE finished_at IS NOT NULL;

-- Runs stored before this version copied the drill's probe header values:
-- blank them, keeping the header names.
UPDATE drill_runs SET spec = json_set(spec, '$.probes', json((
    SELECT json_group_array(json(CASE WHEN json_type(p.value, '$.headers') = 'object'
        THEN json_set(p.value, '$.headers', json((SELECT json_group_object(h.key, '') FROM json_each(p.value, '$.headers') h)))
        ELSE p.value END))
    FROM json_each(spec, '$.probes') p
)))
WHERE spec LIKE '%"headers"%' AND json_type(spec, '$.probes') = 'array';

-- +goose Down
DROP INDEX drill_runs_finished;
ALTER TABLE drill_runs DROP COLUMN spec_sha256;
ALTER TABLE drill_runs DROP COLUMN drill_version;
ALTER TABLE drill_runs DROP COLUMN last_scheduled_for;
ALTER TABLE drill_runs DROP COLUMN count;
