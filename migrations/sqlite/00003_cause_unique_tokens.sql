-- +goose Up
-- What made a leader job act (the rule or run), recorded with its change.
ALTER TABLE audit_events ADD COLUMN cause TEXT NOT NULL DEFAULT '';

-- Active token names are unique, so an audit actor names one token.
-- Duplicates left by earlier versions (a rotated bootstrap token) keep
-- working under a name suffixed with their id.
UPDATE api_tokens SET name = name || '-' || id
WHERE revoked_at IS NULL
  AND EXISTS (SELECT 1 FROM api_tokens n WHERE n.name = api_tokens.name AND n.revoked_at IS NULL AND n.id > api_tokens.id);
CREATE UNIQUE INDEX api_tokens_active_name ON api_tokens (name) WHERE revoked_at IS NULL;

-- +goose Down
DROP INDEX api_tokens_active_name;
ALTER TABLE audit_events DROP COLUMN cause;
