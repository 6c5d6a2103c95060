package trigger

import (
	"errors"
	"testing"

	"github.com/switchyard-io/switchyard/internal/servertest"
	"github.com/switchyard-io/switchyard/server"
)

// TestStateWritesAreGuarded: two writers of one rule's state (the job
// evaluating, a person pausing) read the same revision; the second write
// fails with a conflict instead of overwriting the first — a pause is
// never lost to an evaluation that read the state before it.
func TestStateWritesAreGuarded(t *testing.T) {
	db := servertest.OpenDB(t, "", t.TempDir())
	r := &Rule{App: "checkout", Name: "cpu-high", SwitchName: "reco", Source: "fleet", Query: "instances{}", TriggerOp: Above, RecoverOp: Below,
		TriggerFor: "0s", RecoverFor: "0s", Cooldown: "0s", MaxOn: "0s", OnNoData: MissingHold, OnError: MissingHold, FlapMaxTransitions: 4, FlapWindow: "1h0m0s", Mode: ModeEnforce}
	r.UpdatedAt, r.CreatedAt = t0, t0
	if err := db.Create(r).Error; err != nil {
		t.Fatal(err)
	}
	if _, err := insertState(db, r.ID, Fresh(false, t0), t0); err != nil {
		t.Fatal(err)
	}
	job, st, err := loadState(db, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	person, pst, _ := loadState(db, r.ID)
	if err := saveState(db, person, pst.Pause("olga", "olga made switch.off", t0), nil, t0); err != nil {
		t.Fatal(err)
	}
	next, _ := Evaluate(r.Policy(0), st, Value(99), t0)
	if err := saveState(db, job, next, nil, t0); !errors.Is(err, server.ErrConflict) {
		t.Fatalf("a write on a stale revision: %v, want a conflict", err)
	}
	_, got, _ := loadState(db, r.ID)
	if !got.Paused || got.Phase != PhaseOK {
		t.Fatalf("the pause was overwritten: %+v", got)
	}
}
