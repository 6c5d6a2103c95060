// Package migrations holds the versioned SQL schema of the console, one
// directory per dialect, embedded in the binary and applied with goose at
// start. Files are never edited once released; a change is a new file.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"

	"github.com/pressly/goose/v3"
)

//go:embed postgres/*.sql sqlite/*.sql
var files embed.FS

// Dialect names a supported database.
type Dialect string

// Supported dialects.
const (
	Postgres Dialect = "postgres"
	SQLite   Dialect = "sqlite"
)

func provider(db *sql.DB, d Dialect) (*goose.Provider, error) {
	var gd goose.Dialect
	switch d {
	case Postgres:
		gd = goose.DialectPostgres
	case SQLite:
		gd = goose.DialectSQLite3
	default:
		return nil, fmt.Errorf("migrations: unknown dialect %q", d)
	}
	sub, err := fs.Sub(files, string(d))
	if err != nil {
		return nil, err
	}
	return goose.NewProvider(gd, db, sub)
}

// Up applies every pending migration and returns the schema version.
func Up(ctx context.Context, db *sql.DB, d Dialect) (int64, error) {
	p, err := provider(db, d)
	if err != nil {
		return 0, err
	}
	if _, err := p.Up(ctx); err != nil {
		return 0, fmt.Errorf("migrations: up: %w", err)
	}
	return p.GetDBVersion(ctx)
}

// DownTo rolls back migrations until the schema is at version (0 = empty).
func DownTo(ctx context.Context, db *sql.DB, d Dialect, version int64) error {
	p, err := provider(db, d)
	if err != nil {
		return err
	}
	if _, err := p.DownTo(ctx, version); err != nil {
		return fmt.Errorf("migrations: down: %w", err)
	}
	return nil
}

// Latest is the highest version shipped for d.
func Latest(d Dialect) (int64, error) {
	entries, err := fs.ReadDir(files, string(d))
	if err != nil {
		return 0, err
	}
	var latest int64
	for _, e := range entries {
		var v int64
		if _, err := fmt.Sscanf(e.Name(), "%d_", &v); err == nil && v > latest {
			latest = v
		}
	}
	return latest, nil
}
