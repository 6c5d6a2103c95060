-- +goose Up
-- The scheduler's current leadership term: the election key's create
-- revision, which grows with every new leader. A leader job's transaction
-- commits only while its term is the one recorded here, so a deposed
-- leader (cut off from etcd, still reaching the database) cannot act.
CREATE TABLE leader_term (
    id     INTEGER     PRIMARY KEY CHECK (id = 1),
    term   BIGINT      NOT NULL,
    holder TEXT        NOT NULL DEFAULT '',
    since  TIMESTAMPTZ
);
INSERT INTO leader_term (id, term) VALUES (1, 0);

-- Durable state of leader jobs that have no table of their own, so a new
-- leader resumes where the old one stopped.
CREATE TABLE leader_jobs (
    name       TEXT        PRIMARY KEY,
    state      TEXT        NOT NULL,
    term       BIGINT      NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL
);

-- +goose Down
DROP TABLE leader_jobs;
DROP TABLE leader_term;
