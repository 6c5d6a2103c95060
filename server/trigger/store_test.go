package trigger

import (
	"errors"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/switchyard-io/switchyard/internal/pgtest"
	"github.com/switchyard-io/switchyard/internal/servertest"
	"github.com/switchyard-io/switchyard/server"
)

// TestStateWritesAreGuarded: two writers of one rule's state (the job
// evaluating, a person pausing) read the same revision; the second write
// fails with a conflict instead of overwriting the first — a pause is
// never lost to an evaluation that read the state before it.
func TestStateWritesAreGuarded(t *testing.T) {
	db := servertest.OpenDB(t, "", t.TempDir())
	r := storedRule(t, db, "cpu-high")
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

// storedRule stores an enforcing rule name on checkout/reco and its first
// state.
func storedRule(t *testing.T, db *gorm.DB, name string) *Rule {
	t.Helper()
	r := &Rule{App: "checkout", Name: name, SwitchName: "reco", Source: "fleet", Query: "instances{}", TriggerOp: Above, RecoverOp: Below,
		TriggerFor: "0s", RecoverFor: "0s", Cooldown: "0s", MaxOn: "0s", OnNoData: MissingHold, OnError: MissingHold, FlapMaxTransitions: 4, FlapWindow: "1h0m0s", Mode: ModeEnforce}
	r.UpdatedAt, r.CreatedAt = t0, t0
	if err := db.Create(r).Error; err != nil {
		t.Fatal(err)
	}
	if _, err := insertState(db, r.ID, Fresh(false, t0), t0); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestBatch: a job step's batch writes every rule's state and evaluation
// in a few statements, on both dialects. Its state writes keep the
// revision guard — a person's pause between the step's read and its
// write fails the whole batch with a conflict and is kept — and every
// twentieth revision of a rule forgets its evaluations beyond the newest
// keepEvaluations.
func TestBatch(t *testing.T) {
	for _, dialect := range []string{"sqlite", "postgres"} {
		t.Run(dialect, func(t *testing.T) {
			url := ""
			if dialect == "postgres" {
				url = pgtest.NewDatabase(t)
			}
			db := servertest.OpenDB(t, url, t.TempDir())
			rules := []Rule{*storedRule(t, db, "one"), *storedRule(t, db, "two")}
			step := func(at time.Time, between func()) error {
				return db.Transaction(func(tx *gorm.DB) error {
					b, err := readBatch(tx, rules)
					if err != nil {
						return err
					}
					if between != nil {
						between()
					}
					for _, r := range rules {
						row, st, err := b.state(r.ID)
						if err != nil {
							return err
						}
						next, d := Evaluate(r.Policy(0), st, Value(1), at)
						if err := b.save(row, next, Value(1), at); err != nil {
							return err
						}
						b.evaluated(r.ID, row.Rev, Value(1), d, false, at)
					}
					return b.flush(tx)
				})
			}
			// Rev 1 is the first state; steps write revs 2…keepEvaluations+20,
			// the last of which (a multiple of 20) prunes.
			for i := range keepEvaluations + 19 {
				if err := step(t0.Add(time.Duration(i)*time.Second), nil); err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
			}
			for _, r := range rules {
				var n int64
				var oldest evaluationRow
				db.Model(&evaluationRow{}).Where("trigger_id = ?", r.ID).Count(&n)
				db.Where("trigger_id = ?", r.ID).Order("id").Take(&oldest)
				if n != keepEvaluations || !oldest.At.Equal(t0.Add(19*time.Second)) {
					t.Errorf("rule %s keeps %d evaluations from %v, want %d from %v", r.Name, n, oldest.At, keepEvaluations, t0.Add(19*time.Second))
				}
				row, _, _ := loadState(db, r.ID)
				if row.Rev != keepEvaluations+20 || row.LastAt == nil || row.LastOutcome != string(OutcomeValue) {
					t.Errorf("rule %s: state %+v, want rev %d with its last sample", r.Name, row, keepEvaluations+20)
				}
			}

			// SQLite serializes transactions (the person's write cannot
			// come between); on Postgres it commits in between.
			if dialect != "postgres" {
				return
			}
			var evals int64
			db.Model(&evaluationRow{}).Count(&evals)
			err := step(t0.Add(time.Hour), func() {
				row, st, _ := loadState(db, rules[1].ID)
				if err := saveState(db, row, st.Pause("olga", "olga made switch.off", t0), nil, t0); err != nil {
					t.Fatal(err)
				}
			})
			if !errors.Is(err, server.ErrConflict) {
				t.Fatalf("a batch over a person's pause: %v, want a conflict", err)
			}
			var after int64
			db.Model(&evaluationRow{}).Count(&after)
			_, st, _ := loadState(db, rules[1].ID)
			if !st.Paused || after != evals {
				t.Fatalf("after the conflict: paused %v, %d evaluations (before %d): the batch wrote part of its step", st.Paused, after, evals)
			}
		})
	}
}
