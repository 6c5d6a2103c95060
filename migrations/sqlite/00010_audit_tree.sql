-- +goose Up
-- The audit log's RFC 6962 Merkle tree and its signed checkpoints: see
-- migrations/postgres/00011_audit_tree.sql.
CREATE TABLE audit_tree (
    idx  INTEGER PRIMARY KEY,
    hash BLOB    NOT NULL
);

CREATE TABLE audit_checkpoints (
    size       INTEGER  PRIMARY KEY,
    root       TEXT     NOT NULL,
    note       TEXT     NOT NULL,
    key        TEXT     NOT NULL,
    created_at DATETIME NOT NULL
);

CREATE TRIGGER audit_tree_no_update BEFORE UPDATE ON audit_tree
BEGIN SELECT RAISE(ABORT, 'audit_tree is append-only: UPDATE refused'); END;
CREATE TRIGGER audit_tree_no_delete BEFORE DELETE ON audit_tree
BEGIN SELECT RAISE(ABORT, 'audit_tree is append-only: DELETE refused'); END;
CREATE TRIGGER audit_checkpoints_no_update BEFORE UPDATE ON audit_checkpoints
BEGIN SELECT RAISE(ABORT, 'audit_checkpoints is append-only: UPDATE refused'); END;
CREATE TRIGGER audit_checkpoints_no_delete BEFORE DELETE ON audit_checkpoints
BEGIN SELECT RAISE(ABORT, 'audit_checkpoints is append-only: DELETE refused'); END;

-- +goose Down
DROP TRIGGER audit_checkpoints_no_delete;
DROP TRIGGER audit_checkpoints_no_update;
DROP TRIGGER audit_tree_no_delete;
DROP TRIGGER audit_tree_no_update;
DROP TABLE audit_checkpoints;
DROP TABLE audit_tree;
