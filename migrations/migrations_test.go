package migrations_test

import (
	"context"
	"database/sql"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/switchyard-io/switchyard/internal/pgtest"
	"github.com/switchyard-io/switchyard/migrations"
)

func tables(t *testing.T, db *sql.DB) int {
	t.Helper()
	var n int
	err := db.QueryRow(`SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public' AND table_name <> 'goose_db_version'`).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestUpDownUpPostgres(t *testing.T) {
	db, err := sql.Open("pgx", pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	latest, err := migrations.Latest(migrations.Postgres)
	if err != nil || latest < 1 {
		t.Fatalf("latest: %d %v", latest, err)
	}
	v, err := migrations.Up(ctx, db, migrations.Postgres)
	if err != nil || v != latest {
		t.Fatalf("up: version %d, %v", v, err)
	}
	if n := tables(t, db); n < 5 {
		t.Fatalf("after up: %d tables", n)
	}
	if err := migrations.DownTo(ctx, db, migrations.Postgres, 0); err != nil {
		t.Fatal(err)
	}
	if n := tables(t, db); n != 0 {
		t.Fatalf("after down: %d tables left", n)
	}
	if v, err := migrations.Up(ctx, db, migrations.Postgres); err != nil || v != latest {
		t.Fatalf("up again: %d %v", v, err)
	}
}
