-- +goose Up
-- TRUNCATE fires no row trigger: without this guard it would empty the audit
-- log, and an empty chain verifies.
CREATE TRIGGER audit_events_no_truncate
    BEFORE TRUNCATE ON audit_events
    FOR EACH STATEMENT EXECUTE FUNCTION audit_events_append_only();

-- +goose Down
DROP TRIGGER audit_events_no_truncate ON audit_events;
