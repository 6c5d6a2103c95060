-- +goose Up
-- Key lists in a switch's rollout (JSON arrays of request keys, '' for
-- none) and the shadow verification settings of its fallback (a JSON
-- object, '' for the defaults).
ALTER TABLE switches ADD COLUMN rollout_include TEXT NOT NULL DEFAULT '';
ALTER TABLE switches ADD COLUMN rollout_exclude TEXT NOT NULL DEFAULT '';
ALTER TABLE switches ADD COLUMN verify TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE switches DROP COLUMN verify;
ALTER TABLE switches DROP COLUMN rollout_exclude;
ALTER TABLE switches DROP COLUMN rollout_include;
