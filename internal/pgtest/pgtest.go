// Package pgtest gives each test package its own throw-away Postgres
// database on the server named by SWITCHYARD_TEST_DATABASE_URL (default
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable).
//
// When no server answers, tests fail with a clear message; they skip only
// when SWITCHYARD_TEST_SKIP_POSTGRES=1 is set explicitly, which CI never does.
package pgtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
)

// DefaultURL is used when SWITCHYARD_TEST_DATABASE_URL is unset.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// AdminURL returns the configured test server URL.
func AdminURL() string {
	if u := os.Getenv("SWITCHYARD_TEST_DATABASE_URL"); u != "" {
		return u
	}
	return DefaultURL
}

// NewDatabase creates a database with a random name and returns its URL.
// The database is dropped when tb ends.
func NewDatabase(tb testing.TB) string {
	tb.Helper()
	admin := AdminURL()
	db, err := sql.Open("pgx", admin)
	if err != nil {
		tb.Fatalf("pgtest: open %s: %v", admin, err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		if os.Getenv("SWITCHYARD_TEST_SKIP_POSTGRES") == "1" {
			tb.Skipf("pgtest: Postgres at %s not reachable and SWITCHYARD_TEST_SKIP_POSTGRES=1: %v", admin, err)
		}
		tb.Fatalf("pgtest: no Postgres answers at %s (set SWITCHYARD_TEST_DATABASE_URL): %v", admin, err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "switchyard_test_" + hex.EncodeToString(b[:])
	if _, err := db.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		tb.Fatalf("pgtest: create database: %v", err)
	}
	tb.Cleanup(func() { drop(admin, name) })
	u, err := url.Parse(admin)
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}

func drop(admin, name string) {
	db, err := sql.Open("pgx", admin)
	if err != nil {
		return
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = db.ExecContext(ctx, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", name))
	if err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: drop %s: %v\n", name, err)
	}
}
