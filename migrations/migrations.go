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
	"time"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
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
	var (
		gd   goose.Dialect
		opts []goose.ProviderOption
	)
	switch d {
	case Postgres:
		gd = goose.DialectPostgres
		// Consoles started together (two replicas on a fresh database)
		// must not run the migrations at once: concurrent CREATE TABLEs
		// collide in pg_type.
		opts = append(opts, goose.WithSessionLocker(advisoryLock{}))
	case SQLite:
		gd = goose.DialectSQLite3
	default:
		return nil, fmt.Errorf("migrations: unknown dialect %q", d)
	}
	sub, err := fs.Sub(files, string(d))
	if err != nil {
		return nil, err
	}
	return goose.NewProvider(gd, db, sub, opts...)
}

// lockWait bounds how long Up waits for another process's migrations.
const lockWait = 5 * time.Minute

// advisoryLock serialises migrations on a Postgres session advisory lock
// (goose's lock id). It waits on pg_advisory_lock, so a console that lost
// the race starts the moment the winner is done; goose's own locker polls
// pg_try_advisory_lock once a second at best.
type advisoryLock struct{}

func (advisoryLock) SessionLock(ctx context.Context, conn *sql.Conn) error {
	ctx, cancel := context.WithTimeout(ctx, lockWait)
	defer cancel()
	if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock($1)", lock.DefaultLockID); err != nil {
		return fmt.Errorf("migrations: wait for the migration lock (advisory lock %d, held by another console migrating this database): %w", lock.DefaultLockID, err)
	}
	return nil
}

func (advisoryLock) SessionUnlock(ctx context.Context, conn *sql.Conn) error {
	_, err := conn.ExecContext(ctx, "SELECT pg_advisory_unlock($1)", lock.DefaultLockID)
	return err
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
