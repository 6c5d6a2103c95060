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

-- The approval policy of each app (server/policy): whether it is
-- protected, how many approvals a held change needs, which kinds of change
-- are held (rules, a JSON array; NULL: the defaults), and whether
-- break-glass is refused. Set by admins, audited.
CREATE TABLE app_policies (
    app            TEXT        PRIMARY KEY,
    protected      BOOLEAN     NOT NULL DEFAULT 0,
    approvals      INTEGER     NOT NULL DEFAULT 1,
    rules          TEXT,
    no_break_glass BOOLEAN     NOT NULL DEFAULT 0,
    version        INTEGER      NOT NULL,
    reason         TEXT        NOT NULL,
    updated_by     TEXT        NOT NULL,
    updated_at     DATETIME NOT NULL
);

-- Change requests: a held change stored exactly (body, with the target's
-- version), its author and reason. Approvals bind to the content hash, so
-- an edit clears them. One transition to applied wins.
CREATE TABLE change_requests (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    app              TEXT        NOT NULL,
    name             TEXT        NOT NULL,
    kind             TEXT        NOT NULL,
    body             TEXT        NOT NULL,
    content_hash     TEXT        NOT NULL,
    rule             TEXT        NOT NULL,
    approvals_needed INTEGER     NOT NULL,
    state            TEXT        NOT NULL,
    author           TEXT        NOT NULL,
    reason           TEXT        NOT NULL,
    created_at       DATETIME NOT NULL,
    updated_at       DATETIME NOT NULL,
    expires_at       DATETIME NOT NULL,
    decided_by       TEXT        NOT NULL DEFAULT '',
    decision_reason  TEXT        NOT NULL DEFAULT '',
    decided_at       DATETIME,
    applied_by       TEXT        NOT NULL DEFAULT '',
    applied_at       DATETIME,
    break_glass      BOOLEAN     NOT NULL DEFAULT 0,
    CHECK (state IN ('pending', 'approved', 'denied', 'applied', 'expired'))
);
CREATE INDEX change_requests_open ON change_requests (app, name) WHERE state IN ('pending', 'approved');

CREATE TABLE change_approvals (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    request_id   INTEGER      NOT NULL REFERENCES change_requests (id) ON DELETE CASCADE,
    approver     TEXT        NOT NULL,
    content_hash TEXT        NOT NULL,
    reason       TEXT        NOT NULL,
    created_at   DATETIME NOT NULL,
    UNIQUE (request_id, approver, content_hash)
);

-- +goose Down
DROP TABLE change_approvals;
DROP TABLE change_requests;
DROP TABLE app_policies;
DROP INDEX users_subject;
ALTER TABLE users DROP COLUMN email;
ALTER TABLE users DROP COLUMN subject;
ALTER TABLE users DROP COLUMN source;
