package migrations_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/glebarez/sqlite"
	"gorm.io/gorm"

	"github.com/switchyard-io/switchyard/internal/pgtest"
	"github.com/switchyard-io/switchyard/migrations"
)

// TestRunSpecsScrubbed: drill runs stored before the migration that stopped
// copying probe header values have those values blanked by it, their
// header names, other probes and other settings kept — on both dialects.
func TestRunSpecsScrubbed(t *testing.T) {
	pg, err := sql.Open("pgx", pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	gdb, err := gorm.Open(sqlite.Open(filepath.Join(t.TempDir(), "s.db")), &gorm.Config{})
	if err != nil {
		t.Fatal(err)
	}
	lite, err := gdb.DB()
	if err != nil {
		t.Fatal(err)
	}
	defer lite.Close()
	for _, tc := range []struct {
		d      migrations.Dialect
		db     *sql.DB
		before int64 // the version before the scrub
		insert string
	}{
		{migrations.Postgres, pg, 11, `INSERT INTO drill_runs (app, drill, switch_name, number, started_via, phase, spec, created_at, finished_at) VALUES ('a', 'd', 's', $1, 'manual', 'done', $2, now(), now())`},
		{migrations.SQLite, lite, 10, `INSERT INTO drill_runs (app, drill, switch_name, number, started_via, phase, spec, created_at, finished_at) VALUES ('a', 'd', 's', ?, 'manual', 'done', ?, datetime('now'), datetime('now'))`},
	} {
		ctx := context.Background()
		if _, err := migrations.Up(ctx, tc.db, tc.d); err != nil {
			t.Fatal(err)
		}
		if err := migrations.DownTo(ctx, tc.db, tc.d, tc.before); err != nil {
			t.Fatal(err)
		}
		specs := []string{
			`{"switch":"s","duration":"1m","probes":[{"url":"http://a","headers":{"Authorization":"Bearer s3cret","Cookie":"id=1"}},{"url":"http://b"}]}`,
			`{"switch":"s","duration":"1m","probes":[{"url":"http://c","headers":{}}]}`,
			`{"switch":"s","duration":"1m","probes":[{"url":"http://d"}]}`,
		}
		for i, s := range specs {
			if _, err := tc.db.Exec(tc.insert, i+1, s); err != nil {
				t.Fatalf("%s: %v", tc.d, err)
			}
		}
		if _, err := migrations.Up(ctx, tc.db, tc.d); err != nil {
			t.Fatalf("%s: %v", tc.d, err)
		}
		want := []string{
			`{"switch":"s","duration":"1m","probes":[{"url":"http://a","headers":{"Authorization":"","Cookie":""}},{"url":"http://b"}]}`,
			specs[1], specs[2],
		}
		rows, err := tc.db.Query(`SELECT spec FROM drill_runs ORDER BY number`)
		if err != nil {
			t.Fatal(err)
		}
		var i int
		for rows.Next() {
			var got string
			if err := rows.Scan(&got); err != nil {
				t.Fatal(err)
			}
			if !sameJSON(t, got, want[i]) {
				t.Errorf("%s: run %d: spec %s, want %s", tc.d, i+1, got, want[i])
			}
			i++
		}
		rows.Close()
		if i != len(want) {
			t.Fatalf("%s: %d runs", tc.d, i)
		}
	}
}

func sameJSON(t *testing.T, a, b string) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal([]byte(a), &x); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal([]byte(b), &y); err != nil {
		t.Fatal(err)
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}
