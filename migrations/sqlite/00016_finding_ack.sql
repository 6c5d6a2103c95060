-- +goose Up
-- A person acknowledges an open finding (it stays open until its cause
-- goes away); version guards that change like every other (optimistic
-- concurrency): it moves when a finding is acknowledged or resolved.
ALTER TABLE findings ADD COLUMN version BIGINT NOT NULL DEFAULT 1;
ALTER TABLE findings ADD COLUMN acked_by TEXT NOT NULL DEFAULT '';
ALTER TABLE findings ADD COLUMN acked_at DATETIME;
ALTER TABLE findings ADD COLUMN ack_reason TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE findings DROP COLUMN ack_reason;
ALTER TABLE findings DROP COLUMN acked_at;
ALTER TABLE findings DROP COLUMN acked_by;
ALTER TABLE findings DROP COLUMN version;
