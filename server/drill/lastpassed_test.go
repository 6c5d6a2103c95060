package drill_test

import (
	"context"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/pgtest"
	"github.com/switchyard-io/switchyard/internal/servertest"
	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/drill"
)

// TestLastPassed: the newest pass of any drill of the switch, ignoring dry
// runs and other outcomes; false when none passed (what the expiry job's
// never_drilled finding reads). On Postgres and on the embedded SQLite,
// both migrated.
func TestLastPassed(t *testing.T) {
	t.Run("postgres", func(t *testing.T) { lastPassed(t, pgtest.NewDatabase(t), "") })
	t.Run("sqlite", func(t *testing.T) { lastPassed(t, "", t.TempDir()) })
}

func lastPassed(t *testing.T, url, dir string) {
	db := servertest.OpenDB(t, url, dir)
	svc := drill.New(drill.Config{Service: server.NewService(db, nil)})
	ctx := context.Background()
	if _, ok, err := svc.LastPassed(ctx, "checkout", "recommend"); ok || err != nil {
		t.Fatalf("no runs: %v %v", ok, err)
	}
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d int) *time.Time { x := t0.AddDate(0, 0, d); return &x }
	for i, r := range []drill.Run{
		{Drill: "a", Outcome: drill.OutcomePassed, FinishedAt: at(1)},
		{Drill: "b", Outcome: drill.OutcomePassed, FinishedAt: at(5)},
		{Drill: "a", Outcome: drill.OutcomeFailed, FinishedAt: at(9)},
		{Drill: "a", Outcome: drill.OutcomePassed, DryRun: true, FinishedAt: at(10)},
		{Drill: "c", Outcome: drill.OutcomePassed, FinishedAt: at(20), SwitchName: "other"},
	} {
		r.App, r.Number, r.StartedVia, r.Phase, r.Spec, r.CreatedAt = "checkout", int64(i+1), drill.ViaManual, drill.PhaseDone, "{}", t0
		if r.SwitchName == "" {
			r.SwitchName = "recommend"
		}
		if err := db.Create(&r).Error; err != nil {
			t.Fatal(err)
		}
	}
	last, ok, err := svc.LastPassed(ctx, "checkout", "recommend")
	if err != nil || !ok || !last.Equal(*at(5)) {
		t.Fatalf("last passed %v %v %v, want %v", last, ok, err, *at(5))
	}
}
