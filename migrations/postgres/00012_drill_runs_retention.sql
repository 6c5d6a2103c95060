-- +goose Up
-- A drill run records the drill's version and the SHA-256 of the spec it
-- stores, which no longer holds probe header values (tokens, cookies): the
-- leader takes those from the drill when it probes. Refused and missed
-- scheduled runs in a row coalesce into one row: count says how many cron
-- times it stands for, from scheduled_for to last_scheduled_for.
ALTER TABLE drill_runs ADD COLUMN count INTEGER NOT NULL DEFAULT 1;
ALTER TABLE drill_runs ADD COLUMN last_scheduled_for TIMESTAMPTZ;
ALTER TABLE drill_runs ADD COLUMN drill_version BIGINT NOT NULL DEFAULT 0;
ALTER TABLE drill_runs ADD COLUMN spec_sha256 TEXT NOT NULL DEFAULT '';
CREATE INDEX drill_runs_finished ON drill_runs (finished_at) WHERE finished_at IS NOT NULL;

-- Runs stored before this version copied the drill's probe header values:
-- blank them, keeping the header names.
UPDATE drill_runs SET spec = jsonb_set(spec::jsonb, '{probes}', (
    SELECT COALESCE(jsonb_agg(CASE WHEN jsonb_typeof(p.value -> 'headers') = 'object'
        THEN jsonb_set(p.value, '{headers}', COALESCE((SELECT jsonb_object_agg(h.key, '""'::jsonb) FROM jsonb_each(p.value -> 'headers') h), '{}'::jsonb))
        ELSE p.value END ORDER BY p.n), '[]'::jsonb)
    FROM jsonb_array_elements(spec::jsonb -> 'probes') WITH ORDINALITY AS p (value, n)
))::text
WHERE spec LIKE '%"headers"%' AND jsonb_typeof(spec::jsonb -> 'probes') = 'array';

-- +goose Down
DROP INDEX drill_runs_finished;
ALTER TABLE drill_runs DROP COLUMN spec_sha256;
ALTER TABLE drill_runs DROP COLUMN drill_version;
ALTER TABLE drill_runs DROP COLUMN last_scheduled_for;
ALTER TABLE drill_runs DROP COLUMN count;
