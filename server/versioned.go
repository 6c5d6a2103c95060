package server

import (
	"gorm.io/gorm"
)

// Versioned names the row a versioned write expects: its id, the version
// it was read at, what it is (for the error) and the version the caller
// sent, if any — the conflict names the version field only then.
type Versioned struct {
	ID, Version int64
	What        string
	Sent        *int64
}

// refuseVersion records, for an entity without a version column (what:
// "users", "tokens"), that the caller sent a version: silently ignored,
// it would let the caller believe its write was guarded.
func refuseVersion(v *FieldErrors, what string, sent *int64) {
	if sent != nil {
		v.Add("version", what+" have no version; send the change without one")
	}
}

// UpdateVersioned writes next over the row of model with row.ID only while
// the row is still at row.Version: optimistic concurrency for every entity
// with a version column. next is a struct (every column but id and
// created_at is written, zero values too) or a map of the columns to
// write. A write that committed since the row was read makes this one
// fail with the one conflict error (ChangedConcurrently), rather than be
// lost.
func UpdateVersioned(tx *gorm.DB, model any, row Versioned, next any) error {
	q := tx.Model(model).Where("id = ? AND version = ?", row.ID, row.Version)
	if _, columns := next.(map[string]any); !columns {
		q = q.Select("*").Omit("id", "created_at")
	}
	return checkVersioned(q.Updates(next), row)
}

// DeleteVersioned deletes the row of model with row.ID only while it is
// still at row.Version (see UpdateVersioned).
func DeleteVersioned(tx *gorm.DB, model any, row Versioned) error {
	return checkVersioned(tx.Where("id = ? AND version = ?", row.ID, row.Version).Delete(model), row)
}

// checkVersioned turns a versioned write that matched no row into the
// conflict error.
func checkVersioned(res *gorm.DB, row Versioned) error {
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 0 {
		return ChangedConcurrently(row.What, row.Sent)
	}
	return nil
}
