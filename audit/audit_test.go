package audit_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"gorm.io/gorm"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/internal/pgtest"
	"github.com/switchyard-io/switchyard/internal/servertest"
	"github.com/switchyard-io/switchyard/server"
)

func openPostgres(t *testing.T) *gorm.DB {
	t.Helper()
	db := servertest.OpenDB(t, pgtest.NewDatabase(t), "")
	return db
}

func appendN(t *testing.T, db *gorm.DB, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		err := db.Transaction(func(tx *gorm.DB) error {
			return audit.Append(tx, &audit.Event{
				Actor: "token:ops", ActorKind: audit.ActorToken, Action: "switch.on",
				Target: fmt.Sprintf("switch/checkout/s%d", i), After: `{"state":"on"}`, Reason: "incident",
			})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestTamperIsNamed(t *testing.T) {
	db := openPostgres(t)
	appendN(t, db, 5)
	if res, err := audit.Verify(context.Background(), db); err != nil || !res.OK() || res.Events != 5 {
		t.Fatalf("clean chain: %+v %v", res, err)
	}
	// The trigger refuses edits made through normal sessions.
	if err := db.Exec("UPDATE audit_events SET reason = 'x' WHERE id = 3").Error; err == nil || !strings.Contains(err.Error(), "append-only") {
		t.Fatalf("UPDATE not refused: %v", err)
	}
	if err := db.Exec("DELETE FROM audit_events WHERE id = 3").Error; err == nil {
		t.Fatal("DELETE not refused")
	}
	// A superuser can bypass triggers; the chain still names the event.
	err := db.Connection(func(tx *gorm.DB) error {
		if err := tx.Exec("SET session_replication_role = replica").Error; err != nil {
			return err
		}
		if err := tx.Exec("UPDATE audit_events SET reason = 'nothing happened' WHERE id = 3").Error; err != nil {
			return err
		}
		return tx.Exec("SET session_replication_role = origin").Error
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := audit.Verify(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	if res.OK() || res.Mismatch.ID != 3 || res.Events != 2 {
		t.Fatalf("tampered event not named: %+v", res)
	}
}

func TestDeletedEventIsNamed(t *testing.T) {
	db := openPostgres(t)
	appendN(t, db, 4)
	err := db.Connection(func(tx *gorm.DB) error {
		tx.Exec("SET session_replication_role = replica")
		defer tx.Exec("SET session_replication_role = origin")
		return tx.Exec("DELETE FROM audit_events WHERE id = 2").Error
	})
	if err != nil {
		t.Fatal(err)
	}
	res, _ := audit.Verify(context.Background(), db)
	if res.OK() || res.Mismatch.ID != 3 || !strings.Contains(res.Mismatch.Reason, "missing") {
		t.Fatalf("deletion not detected: %+v", res.Mismatch)
	}
}

func TestConcurrentAppendsKeepOneChain(t *testing.T) {
	db := openPostgres(t)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			appendN(t, db, 10)
		}()
	}
	wg.Wait()
	res, err := audit.Verify(context.Background(), db)
	if err != nil || !res.OK() || res.Events != 80 {
		t.Fatalf("verify after concurrent appends: %+v %v", res, err)
	}
}

func TestListFiltersAndPages(t *testing.T) {
	db := openPostgres(t)
	appendN(t, db, 7)
	ctx := context.Background()
	page, next, err := audit.List(ctx, db, audit.Filter{Limit: 3})
	if err != nil || len(page) != 3 || page[0].ID != 7 || next != 5 {
		t.Fatalf("first page: %d events, next %d, %v", len(page), next, err)
	}
	page, next, _ = audit.List(ctx, db, audit.Filter{Limit: 3, BeforeID: next})
	if len(page) != 3 || page[0].ID != 4 || next != 2 {
		t.Fatalf("second page: first %d, next %d", page[0].ID, next)
	}
	page, _, _ = audit.List(ctx, db, audit.Filter{Target: "switch/checkout/s2"})
	if len(page) != 1 || page[0].Target != "switch/checkout/s2" {
		t.Fatalf("target filter: %+v", page)
	}
	if page, _, _ = audit.List(ctx, db, audit.Filter{Action: "switch.off"}); len(page) != 0 {
		t.Fatalf("action filter matched %d", len(page))
	}
}

func TestExport(t *testing.T) {
	db := openPostgres(t)
	appendN(t, db, 3)
	var jl bytes.Buffer
	if err := audit.Export(context.Background(), db, &jl, audit.FormatJSONL, audit.Filter{}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(jl.String()), "\n")
	var first audit.Event
	if len(lines) != 3 || json.Unmarshal([]byte(lines[0]), &first) != nil || first.ID != 1 || first.PrevHash != audit.GenesisHash {
		t.Fatalf("jsonl: %q", jl.String())
	}
	var cb bytes.Buffer
	if err := audit.Export(context.Background(), db, &cb, audit.FormatCSV, audit.Filter{}); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&cb).ReadAll()
	if err != nil || len(rows) != 4 || rows[0][0] != "id" || rows[3][12] == "" {
		t.Fatalf("csv: %v %v", rows, err)
	}
	if err := audit.Export(context.Background(), db, &cb, "xml", audit.Filter{}); err == nil {
		t.Fatal("unknown format accepted")
	}
}

// TestSQLiteRefusesEdits: the embedded default has the same append-only
// guard as Postgres.
func TestSQLiteRefusesEdits(t *testing.T) {
	db, _, err := server.OpenDB(context.Background(), "", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if s, err := db.DB(); err == nil {
			s.Close()
		}
	}()
	appendN(t, db, 2)
	if err := db.Exec("UPDATE audit_events SET reason = 'x' WHERE id = 1").Error; err == nil || !strings.Contains(err.Error(), "append-only") {
		t.Fatalf("UPDATE not refused: %v", err)
	}
	if err := db.Exec("DELETE FROM audit_events WHERE id = 2").Error; err == nil || !strings.Contains(err.Error(), "append-only") {
		t.Fatalf("DELETE not refused: %v", err)
	}
	if res, err := audit.Verify(context.Background(), db); err != nil || !res.OK() || res.Events != 2 {
		t.Fatalf("verify: %+v %v", res, err)
	}
}

// TestPostgresRefusesTruncate: TRUNCATE, which row triggers do not see,
// cannot empty the log (an empty chain would verify).
func TestPostgresRefusesTruncate(t *testing.T) {
	db := openPostgres(t)
	appendN(t, db, 2)
	if err := db.Exec("TRUNCATE audit_events").Error; err == nil || !strings.Contains(err.Error(), "append-only") {
		t.Fatalf("TRUNCATE not refused: %v", err)
	}
	if res, err := audit.Verify(context.Background(), db); err != nil || !res.OK() || res.Events != 2 {
		t.Fatalf("verify: %+v %v", res, err)
	}
}

// TestFilterPrefixAndKind: a target prefix matches literally (an
// underscore is no wildcard) and actor kinds filter, on both databases.
func TestFilterPrefixAndKind(t *testing.T) {
	for _, url := range []string{"", pgtest.NewDatabase(t)} {
		db, _, err := server.OpenDB(context.Background(), url, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range []audit.Event{
			{Actor: "trigger", ActorKind: audit.ActorTrigger, Action: audit.SwitchOn, Target: "switch/_global/maint", Reason: "r"},
			{Actor: "trigger", ActorKind: audit.ActorTrigger, Action: audit.SwitchOn, Target: "switch/xglobal/maint", Reason: "r"},
			{Actor: "token:ops#1", ActorKind: audit.ActorToken, Action: audit.SwitchOff, Target: "switch/_global/maint", Reason: "r"},
		} {
			e := e
			if err := db.Transaction(func(tx *gorm.DB) error { return audit.Append(tx, &e) }); err != nil {
				t.Fatal(err)
			}
		}
		got, _, err := audit.List(context.Background(), db, audit.Filter{TargetPrefix: "switch/_global/", ActorKind: audit.ActorTrigger})
		if err != nil || len(got) != 1 || got[0].Target != "switch/_global/maint" || got[0].ActorKind != audit.ActorTrigger {
			t.Fatalf("url %q: %+v %v", url, got, err)
		}
		if s, err := db.DB(); err == nil {
			s.Close()
		}
	}
}
