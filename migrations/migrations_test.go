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

// TestConcurrentUpPostgres: consoles started together on an empty database
// (docker-compose starts two replicas at once) each run the migrations; one
// takes the migration lock, the others wait and then find nothing to do.
// Without the lock, concurrent CREATE TABLEs collide in pg_type.
func TestConcurrentUpPostgres(t *testing.T) {
	url := pgtest.NewDatabase(t)
	latest, err := migrations.Latest(migrations.Postgres)
	if err != nil {
		t.Fatal(err)
	}
	const n = 6
	type result struct {
		version int64
		err     error
	}
	results := make(chan result, n)
	start := make(chan struct{})
	for range n {
		go func() {
			db, err := sql.Open("pgx", url)
			if err != nil {
				results <- result{err: err}
				return
			}
			defer db.Close()
			<-start
			v, err := migrations.Up(context.Background(), db, migrations.Postgres)
			results <- result{v, err}
		}()
	}
	close(start)
	for range n {
		if r := <-results; r.err != nil || r.version != latest {
			t.Errorf("concurrent up: version %d (want %d), %v", r.version, latest, r.err)
		}
	}
}
