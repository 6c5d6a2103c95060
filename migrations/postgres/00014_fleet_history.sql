-- +goose Up
-- The fleet model's sampled history (sparklines, fleet-source trigger
-- previews), kept by the leader so that a restarted console starts with
-- it: one row per sampling step (unix seconds), the series of every switch
-- and limit rule sampled then as JSON. Rows older than the history length
-- (6h) are deleted at every step.
CREATE TABLE fleet_history (
    at BIGINT PRIMARY KEY,
    frame TEXT NOT NULL
);

-- +goose Down
DROP TABLE fleet_history;
