package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/glebarez/sqlite"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/switchyard-io/switchyard/migrations"
)

// OpenDB connects to the database and applies pending migrations. An empty
// url selects the embedded SQLite database in dataDir; otherwise url must be
// a postgres:// URL.
func OpenDB(ctx context.Context, url, dataDir string) (*gorm.DB, migrations.Dialect, error) {
	cfg := &gorm.Config{Logger: logger.Discard, TranslateError: true, NowFunc: func() time.Time { return time.Now().UTC() }}
	var (
		db      *gorm.DB
		err     error
		dialect migrations.Dialect
	)
	switch {
	case url == "":
		if err := os.MkdirAll(dataDir, 0o750); err != nil {
			return nil, "", fmt.Errorf("server: data dir: %w", err)
		}
		dsn := "file:" + SQLitePath(dataDir) + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate"
		db, err = gorm.Open(sqlite.Open(dsn), cfg)
		dialect = migrations.SQLite
	case strings.HasPrefix(url, "postgres://"), strings.HasPrefix(url, "postgresql://"):
		db, err = gorm.Open(postgres.Open(url), cfg)
		dialect = migrations.Postgres
	default:
		return nil, "", errors.New("server: database url must start with postgres:// (or be empty for SQLite)")
	}
	if err != nil {
		return nil, "", fmt.Errorf("server: open database: %w", err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, "", err
	}
	if dialect == migrations.SQLite {
		// One writer at a time is SQLite's model; one connection keeps the
		// audit chain's appends strictly serialized.
		sqlDB.SetMaxOpenConns(1)
	} else {
		sqlDB.SetMaxOpenConns(20)
		sqlDB.SetMaxIdleConns(10)
		sqlDB.SetConnMaxIdleTime(5 * time.Minute)
	}
	if _, err := migrations.Up(ctx, sqlDB, dialect); err != nil {
		sqlDB.Close()
		return nil, "", err
	}
	return db, dialect, nil
}

// SQLitePath is the embedded database file in dataDir.
func SQLitePath(dataDir string) string { return filepath.Join(dataDir, "switchyard.db") }

// DescribeDB names the database for start-up logs without credentials.
func DescribeDB(url, dataDir string) string {
	if url == "" {
		return "sqlite " + SQLitePath(dataDir)
	}
	if i := strings.Index(url, "@"); i >= 0 {
		if j := strings.Index(url, "://"); j >= 0 && j < i {
			return url[:j+3] + "…" + url[i:]
		}
	}
	return url
}
