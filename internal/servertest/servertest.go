// Package servertest opens the console's database for tests outside
// package server.
package servertest

import (
	"context"
	"testing"

	"gorm.io/gorm"

	"github.com/switchyard-io/switchyard/server"
)

// OpenDB opens and migrates the database at url (empty: SQLite under dir)
// as the console does, and closes it when the test ends.
func OpenDB(t testing.TB, url, dir string) *gorm.DB {
	t.Helper()
	db, _, err := server.OpenDB(context.Background(), url, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if s, err := db.DB(); err == nil {
			s.Close()
		}
	})
	return db
}
