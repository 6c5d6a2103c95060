-- +goose Up
-- Single sign-on: a user who signs in through the identity provider
-- (source 'sso') is keyed by its issuer and subject, has no password, and
-- gets its role and grants from the mapping rules at every sign-in. Email
-- is kept only when the identity provider verified it.
ALTER TABLE users ADD COLUMN source TEXT NOT NULL DEFAULT 'local'
    CHECK (source IN ('local', 'sso'));
ALTER TABLE users ADD COLUMN subject TEXT;
ALTER TABLE users ADD COLUMN email TEXT NOT NULL DEFAULT '';
CREATE UNIQUE INDEX users_subject ON users (subject);

-- +goose Down
DROP INDEX users_subject;
ALTER TABLE users DROP COLUMN email;
ALTER TABLE users DROP COLUMN subject;
ALTER TABLE users DROP COLUMN source;
