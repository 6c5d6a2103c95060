-- +goose Up
-- People who sign in to the web console. Passwords are bcrypt hashes (of
-- the SHA-256 of the password, so long passphrases are not truncated).
CREATE TABLE users (
    id                  INTEGER PRIMARY KEY AUTOINCREMENT,
    username            TEXT        NOT NULL UNIQUE,
    password_hash       TEXT        NOT NULL,
    role                TEXT        NOT NULL,
    apps                TEXT        NOT NULL DEFAULT '',
    disabled_at         DATETIME,
    password_changed_at DATETIME    NOT NULL,
    created_by          TEXT        NOT NULL DEFAULT '',
    created_at          DATETIME    NOT NULL,
    updated_at          DATETIME    NOT NULL,
    CHECK (role IN ('viewer', 'operator', 'admin'))
);

-- Browser sessions: only the SHA-256 of the cookie value is stored.
CREATE TABLE web_sessions (
    id_hash      TEXT        PRIMARY KEY,
    user_id      INTEGER     NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    csrf_token   TEXT        NOT NULL,
    created_at   DATETIME    NOT NULL,
    expires_at   DATETIME    NOT NULL,
    last_seen_at DATETIME    NOT NULL
);
CREATE INDEX web_sessions_expires ON web_sessions (expires_at);

-- +goose Down
DROP TABLE web_sessions;
DROP TABLE users;
