package server

import (
	"context"
	"errors"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/internal/pgtest"
	"github.com/switchyard-io/switchyard/sdk/wire"
)

// stepState is a test job's durable state.
type stepState struct{ Step int }

// step is one step of a test job: turn the switch on at step 0, off at
// step 1, recording the step, all in one fenced transaction.
func step(ctx context.Context, svc *Service, term Term, hold func()) ([]Receipt, error) {
	return svc.InTerm(ctx, term, func(j *JobTx) error {
		var st stepState
		if _, err := j.LoadState("test", &st); err != nil {
			return err
		}
		a := JobActor(audit.ActorRollout, "rollout/checkout/reco#1")
		var err error
		if st.Step == 0 {
			_, err = j.TurnOn(a, "checkout", "reco", Toggle{Reason: "step 1 of the plan"})
		} else {
			_, err = j.TurnOff(a, "checkout", "reco", Toggle{Reason: "step 2 of the plan"})
		}
		if err != nil {
			return err
		}
		if hold != nil {
			hold()
		}
		st.Step++
		return j.SaveState("test", st)
	})
}

// TestTermFencing: a job's transaction commits only within the database's
// current term: a deposed leader's step fails and writes nothing, its
// audited changes carry the job's actor kind and cause.
func TestTermFencing(t *testing.T) {
	dialects(t, func(t *testing.T, svc *Service) {
		ctx := context.Background()
		if _, _, err := svc.CreateSwitch(ctx, admin, "checkout", SwitchInput{Name: "reco", Level: wire.L3, Reason: "seed"}); err != nil {
			t.Fatal(err)
		}
		old, next := Term{Rev: 5, Holder: "a"}, Term{Rev: 7, Holder: "b"}
		if err := svc.ClaimTerm(ctx, old); err != nil {
			t.Fatal(err)
		}
		if _, err := step(ctx, svc, old, nil); err != nil {
			t.Fatal(err)
		}
		if err := svc.ClaimTerm(ctx, next); err != nil {
			t.Fatal(err)
		}
		events := count(t, svc.DB(), "audit_events")
		if _, err := step(ctx, svc, old, nil); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("deposed leader's step: %v, want ErrNotLeader", err)
		}
		if sw, _ := svc.GetSwitch(ctx, "checkout", "reco"); sw.State != wire.StateOn || count(t, svc.DB(), "audit_events") != events {
			t.Fatalf("a fenced-off step wrote: state %s", sw.State)
		}
		if err := svc.ClaimTerm(ctx, old); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("claiming an older term: %v", err)
		}
		if _, err := step(ctx, svc, next, nil); err != nil {
			t.Fatal(err)
		}
		evs, _, _ := svc.ListAudit(ctx, audit.Filter{Target: "switch/checkout/reco", Limit: 1})
		if e := evs[0]; e.Action != audit.SwitchOff || e.ActorKind != audit.ActorRollout || e.Cause != "rollout/checkout/reco#1" {
			t.Fatalf("job change audited as %+v", e)
		}
		if res, err := svc.VerifyAudit(ctx); err != nil || !res.OK() {
			t.Fatalf("chain with causes: %+v %v", res, err)
		}
	})
}

// TestTermClaimDuringStep: a new leader claims its term while the old
// leader's step is still in its transaction. Whichever commits first, the
// step is applied exactly once: here the claim comes first, the old step
// fails, the new leader redoes it.
func TestTermClaimDuringStep(t *testing.T) {
	db := openDB(t, pgtest.NewDatabase(t))
	svc := NewService(db, nil)
	ctx := context.Background()
	if _, _, err := svc.CreateSwitch(ctx, admin, "checkout", SwitchInput{Name: "reco", Level: wire.L3, Reason: "seed"}); err != nil {
		t.Fatal(err)
	}
	old, next := Term{Rev: 5, Holder: "a"}, Term{Rev: 7, Holder: "b"}
	if err := svc.ClaimTerm(ctx, old); err != nil {
		t.Fatal(err)
	}
	inStep, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := step(ctx, svc, old, func() { close(inStep); <-release })
		done <- err
	}()
	<-inStep
	if err := svc.ClaimTerm(ctx, next); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-done; !errors.Is(err, ErrNotLeader) {
		t.Fatalf("old leader's step: %v", err)
	}
	if _, err := step(ctx, svc, next, nil); err != nil {
		t.Fatal(err)
	}
	evs, _, _ := svc.ListAudit(ctx, audit.Filter{Target: "switch/checkout/reco", Action: audit.SwitchOn})
	if len(evs) != 1 {
		t.Fatalf("step 1 applied %d times", len(evs))
	}
	var st stepState
	err := db.Transaction(func(tx *gorm.DB) error {
		_, err := (&JobTx{s: svc, tx: tx}).LoadState("test", &st)
		return err
	})
	if err != nil || st.Step != 1 {
		t.Fatalf("job state %+v %v", st, err)
	}
}

// TestPersonChangePausesAutomation: the hook runs in the transaction of a
// person's switch change (not a job's), may audit a change of its own
// after the person's, and its error aborts the person's change.
func TestPersonChangePausesAutomation(t *testing.T) {
	dialects(t, func(t *testing.T, svc *Service) {
		ctx := context.Background()
		var calls []PersonChange
		fail := false
		svc.OnPersonChange(func(j *JobTx, c PersonChange) error {
			if fail {
				return errors.New("automation store unavailable")
			}
			calls = append(calls, c)
			return j.Commit(Audited{
				Actor: JobActor(audit.ActorRollout, "rollout/checkout/reco#3"), Action: audit.RolloutPause, App: c.App,
				Reason: c.Actor.Name + " changed the switch", Apply: func(*gorm.DB) (string, any, any, error) {
					return "rollout/checkout/reco#3", nil, nil, nil
				},
			})
		})
		if _, _, err := svc.CreateSwitch(ctx, admin, "checkout", SwitchInput{Name: "reco", Level: wire.L3, Reason: "seed"}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := svc.TurnOn(ctx, admin, "checkout", "reco", Toggle{Reason: "by hand"}); err != nil {
			t.Fatal(err)
		}
		if len(calls) != 2 || calls[1].Action != audit.SwitchOn || calls[1].Name != "reco" {
			t.Fatalf("hook calls %+v", calls)
		}
		evs, _, _ := svc.ListAudit(ctx, audit.Filter{Limit: 2})
		if evs[0].Action != audit.RolloutPause || evs[1].Action != audit.SwitchOn {
			t.Fatalf("audit order %s, %s: want the person's change, then the pause", evs[1].Action, evs[0].Action)
		}
		if _, err := svc.InTerm(ctx, Term{}, func(j *JobTx) error {
			_, err := j.TurnOff(JobActor(audit.ActorTrigger, "trigger/checkout/x"), "checkout", "reco", Toggle{Reason: "recovered"})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if len(calls) != 2 {
			t.Fatal("a job's change was taken for a person's")
		}
		fail = true
		events := count(t, svc.DB(), "audit_events")
		if _, _, err := svc.TurnOn(ctx, admin, "checkout", "reco", Toggle{Reason: "by hand"}); err == nil {
			t.Fatal("the change went through although the hook failed")
		}
		if sw, _ := svc.GetSwitch(ctx, "checkout", "reco"); sw.State != wire.StateOff || count(t, svc.DB(), "audit_events") != events {
			t.Fatal("a change aborted by its hook was written")
		}
	})
}

// TestNoDeadlockBetweenJobAndPerson: a job's step that makes an audited
// change and then writes a row, and a person's audited change of that
// row, run at once. Before audited transactions took the audit chain's
// lock first, each held what the other waited for and Postgres ended one
// with "deadlock detected" (a 503 for the person).
func TestNoDeadlockBetweenJobAndPerson(t *testing.T) {
	svc := NewService(openDB(t, pgtest.NewDatabase(t)), nil)
	ctx := context.Background()
	if _, _, err := svc.CreateSwitch(ctx, admin, "checkout", SwitchInput{Name: "reco", Level: wire.L3, Reason: "seed"}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.InTerm(ctx, Term{}, func(j *JobTx) error { return j.SaveState("plan", stepState{}) }); err != nil {
		t.Fatal(err)
	}
	jobAudited, personHasRow := make(chan struct{}), make(chan struct{})
	job := make(chan error, 1)
	go func() {
		_, err := svc.InTerm(ctx, Term{}, func(j *JobTx) error {
			if _, err := j.TurnOn(JobActor(audit.ActorRollout, "rollout/checkout/reco#1"), "checkout", "reco", Toggle{Reason: "step 1"}); err != nil {
				return err
			}
			close(jobAudited)
			select { // give the person's change the time to lock the row, if it can
			case <-personHasRow:
			case <-time.After(time.Second):
			}
			return j.SaveState("plan", stepState{Step: 1})
		})
		job <- err
	}()
	<-jobAudited
	err := svc.Commit(ctx, Audited{Actor: admin, Action: audit.RolloutPause, App: "checkout", Reason: "hold on",
		Apply: func(tx *gorm.DB) (string, any, any, error) {
			err := tx.Exec("UPDATE leader_jobs SET state = ? WHERE name = ?", `{"Step":0,"Paused":true}`, "plan").Error
			close(personHasRow)
			return "rollout/checkout/reco#1", nil, nil, err
		}})
	if err != nil {
		t.Fatalf("the person's change: %v", err)
	}
	if err := <-job; err != nil {
		t.Fatalf("the job's step: %v", err)
	}
}

// TestStateSavesSkipAuditLock: while a person's change holds the audit
// chain's lock, a job step that saves only its own state commits
// (InTermLazyAudit); a lazy step that makes an audited change runs again
// under the lock once it is free, and commits once.
func TestStateSavesSkipAuditLock(t *testing.T) {
	svc := NewService(openDB(t, pgtest.NewDatabase(t)), nil)
	ctx := context.Background()
	if _, _, err := svc.CreateSwitch(ctx, admin, "checkout", SwitchInput{Name: "reco", Level: wire.L3, Reason: "seed"}); err != nil {
		t.Fatal(err)
	}
	locked, release, holder := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		holder <- svc.DB().Transaction(func(tx *gorm.DB) error {
			if err := audit.Lock(tx); err != nil {
				return err
			}
			close(locked)
			<-release
			return nil
		})
	}()
	<-locked
	if _, err := svc.InTermLazyAudit(ctx, Term{}, func(j *JobTx) error { return j.SaveState("rule", stepState{Step: 1}) }); err != nil {
		close(release)
		t.Fatalf("a state-only save while the audit lock is held: %v", err)
	}
	runs := 0
	done := make(chan error, 1)
	go func() {
		_, err := svc.InTermLazyAudit(ctx, Term{}, func(j *JobTx) error {
			runs++
			if err := j.SaveState("rule", stepState{Step: 2}); err != nil {
				return err
			}
			_, err := j.TurnOn(JobActor(audit.ActorTrigger, "trigger/checkout/x"), "checkout", "reco", Toggle{Reason: "fired"})
			return err
		})
		done <- err
	}()
	close(release)
	if err := <-holder; err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil || runs != 2 {
		t.Fatalf("the lazy step with an audited change: %v after %d runs, want nil after 2", err, runs)
	}
	if sw, _ := svc.GetSwitch(ctx, "checkout", "reco"); sw.State != wire.StateOn || sw.Version != 2 {
		t.Fatalf("switch %s v%d after one turn-on", sw.State, sw.Version)
	}
	if res, err := svc.VerifyAudit(ctx); err != nil || !res.OK() || count(t, svc.DB(), "audit_events") != 2 {
		t.Fatalf("audit chain %+v %v, %d events", res, err, count(t, svc.DB(), "audit_events"))
	}
}

// TestPersonChangeBehaviour: renewals and metadata-only edits tell the
// automation that nothing the SDKs do changed; state, rollout, level and
// fallback changes say it did.
func TestPersonChangeBehaviour(t *testing.T) {
	svc := NewService(openDB(t, ""), nil)
	ctx := context.Background()
	var got []bool
	svc.OnPersonChange(func(_ *JobTx, c PersonChange) error { got = append(got, c.Behaviour); return nil })
	if _, _, err := svc.CreateSwitch(ctx, admin, "checkout", SwitchInput{Name: "reco", Level: wire.L3, Reason: "seed"}); err != nil {
		t.Fatal(err)
	}
	owner, desc, policy, level := "team", "shed the recommender", ExpiryAutoOff, wire.L4
	steps := []struct {
		what string
		do   func() error
		want bool
	}{
		{"turn on", func() error { _, _, err := svc.TurnOn(ctx, admin, "checkout", "reco", Toggle{Reason: "x"}); return err }, true},
		{"renew", func() error {
			_, _, err := svc.RenewSwitch(ctx, admin, "checkout", "reco", Change{Reason: "x"})
			return err
		}, false},
		{"owner, description, expiry policy", func() error {
			_, _, err := svc.PatchSwitch(ctx, admin, "checkout", "reco", SwitchPatch{Reason: "x", Owner: &owner, Description: &desc, ExpiryPolicy: &policy})
			return err
		}, false},
		{"rollout", func() error {
			_, _, err := svc.PatchSwitch(ctx, admin, "checkout", "reco", SwitchPatch{Reason: "x", Rollout: &wire.Rollout{Percent: 50}})
			return err
		}, true},
		{"level", func() error {
			_, _, err := svc.PatchSwitch(ctx, admin, "checkout", "reco", SwitchPatch{Reason: "x", Level: &level})
			return err
		}, true},
		{"turn off", func() error {
			_, _, err := svc.TurnOff(ctx, admin, "checkout", "reco", Toggle{Reason: "x"})
			return err
		}, true},
	}
	for _, s := range steps {
		got = got[:0]
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.what, err)
		}
		if len(got) != 1 || got[0] != s.want {
			t.Fatalf("%s: the hook saw behaviour %v, want [%v]", s.what, got, s.want)
		}
	}
}
