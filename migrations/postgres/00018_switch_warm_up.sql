-- +goose Up
-- How long an L4 switch's writes take to come back after it turns off
-- (a Go duration, 1s–10m); '' lets them all back at once.
ALTER TABLE switches ADD COLUMN warm_up TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE switches DROP COLUMN warm_up;
