-- +goose Up
-- What a failed query counts as (on_error), apart from no data
-- (on_no_data, stored as missing_data): an outage of the metric source
-- is not no data. The default holds.
ALTER TABLE triggers ADD COLUMN on_error TEXT NOT NULL DEFAULT 'hold'
    CHECK (on_error IN ('hold', 'breaching', 'not_breaching'));

-- +goose Down
ALTER TABLE triggers DROP COLUMN on_error;
