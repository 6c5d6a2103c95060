package server

import (
	"fmt"

	"gorm.io/gorm"
)

// UpdateVersioned writes next over the row of model with id only while
// the row is still at version: optimistic concurrency for every entity
// with a version column. next is a struct (every column but id and
// created_at is written, zero values too) or a map of the columns to
// write. A write that committed since the row was read makes this one
// fail with ErrConflict naming what changed, rather than be lost.
func UpdateVersioned(tx *gorm.DB, model any, id, version int64, what string, next any) error {
	q := tx.Model(model).Where("id = ? AND version = ?", id, version)
	if _, columns := next.(map[string]any); !columns {
		q = q.Select("*").Omit("id", "created_at")
	}
	return checkVersioned(q.Updates(next), what)
}

// DeleteVersioned deletes the row of model with id only while it is still
// at version (see UpdateVersioned).
func DeleteVersioned(tx *gorm.DB, model any, id, version int64, what string) error {
	return checkVersioned(tx.Where("id = ? AND version = ?", id, version).Delete(model), what)
}

// checkVersioned turns a versioned write that matched no row into ErrConflict.
func checkVersioned(res *gorm.DB, what string) error {
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 0 {
		return fmt.Errorf("%w: %s changed concurrently", ErrConflict, what)
	}
	return nil
}
