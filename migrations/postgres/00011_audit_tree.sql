-- +goose Up
-- The audit log's RFC 6962 Merkle tree (audit/tree.go): the stored hashes
-- of golang.org/x/mod/sumdb/tlog, indexed by tlog.StoredHashIndex, written
-- in the transaction of each event. Like the events, append-only.
CREATE TABLE audit_tree (
    idx  BIGINT PRIMARY KEY,
    hash BYTEA  NOT NULL
);

-- Signed checkpoints of the tree (audit/checkpoint.go): size, root, the
-- signed note a witness checks, and the public key that signed it, so a
-- checkpoint stays verifiable after the signing key is rotated.
CREATE TABLE audit_checkpoints (
    size       BIGINT      PRIMARY KEY,
    root       TEXT        NOT NULL,
    note       TEXT        NOT NULL,
    key        TEXT        NOT NULL,
    created_at TIMESTAMPTZ NOT NULL
);

-- +goose StatementBegin
CREATE FUNCTION audit_tree_append_only() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION '% is append-only: % refused', TG_TABLE_NAME, TG_OP;
END;
$$ LANGUAGE plpgsql;
-- +goose StatementEnd

CREATE TRIGGER audit_tree_no_update_delete
    BEFORE UPDATE OR DELETE ON audit_tree
    FOR EACH ROW EXECUTE FUNCTION audit_tree_append_only();
CREATE TRIGGER audit_tree_no_truncate
    BEFORE TRUNCATE ON audit_tree
    FOR EACH STATEMENT EXECUTE FUNCTION audit_tree_append_only();
CREATE TRIGGER audit_checkpoints_no_update_delete
    BEFORE UPDATE OR DELETE ON audit_checkpoints
    FOR EACH ROW EXECUTE FUNCTION audit_tree_append_only();
CREATE TRIGGER audit_checkpoints_no_truncate
    BEFORE TRUNCATE ON audit_checkpoints
    FOR EACH STATEMENT EXECUTE FUNCTION audit_tree_append_only();

-- +goose Down
DROP TABLE audit_checkpoints;
DROP TABLE audit_tree;
DROP FUNCTION audit_tree_append_only();
