package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/internal/oneline"
	"github.com/switchyard-io/switchyard/sdk/wire"
	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/signal"
)

// Job is the leader job that advances the active plans (a lead.Job and
// lead.Waker). Each step, for each plan: observe (the switch, the fleet's
// convergence, the gate's conditions when a measurement is due), decide
// (Next), and carry the decision out in one fenced transaction through
// the audited change path, guarded by the plan's version.
type Job struct{ s *Service }

// Job returns the service's leader job.
func (s *Service) Job() *Job { return &Job{s: s} }

// Name names the job in logs.
func (j *Job) Name() string { return "rollouts" }

// Every is the period between steps.
func (j *Job) Every() time.Duration { return j.s.every }

// Wake fires when a plan was created or acted on here.
func (j *Job) Wake() <-chan struct{} { return j.s.kick }

// Step advances every active plan at now.
func (j *Job) Step(ctx context.Context, t server.Term, now time.Time) error {
	s := j.s
	var rows []row
	if err := s.db.WithContext(ctx).Where("state IN ?", activeStates).Order("id").Find(&rows).Error; err != nil {
		return fmt.Errorf("rollout: list active plans: %w", err)
	}
	var errs []error
	for _, rw := range rows {
		r, err := decode(rw)
		if err == nil {
			err = s.step(ctx, t, r, now)
		}
		if errors.Is(err, server.ErrNotLeader) {
			return err
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", Cause(rw.App, rw.SwitchName, rw.ID), err))
		}
	}
	return errors.Join(errs...)
}

// step advances one plan.
func (s *Service) step(ctx context.Context, t server.Term, r *run, now time.Time) error {
	if r.State == Paused && r.progress.Request == nil {
		return nil
	}
	ob, err := s.observe(ctx, r)
	if err != nil {
		return err
	}
	if MeasureDue(r.plan, r.State, r.progress, now) {
		ob.Verdicts = s.measure(ctx, r, now)
	}
	next, act := Next(r.plan, r.State, r.progress, ob, now)
	if act.Kind == Wait && sameProgress(next, r.progress) && !r.adopted {
		return nil
	}
	orig := r.progress.clone()
	inTerm := s.svc.InTerm
	if act.Kind == Wait {
		inTerm = s.svc.InTermLazyAudit // saves the progress only: no audit lock
	}
	_, err = inTerm(ctx, t, func(j *server.JobTx) error { return s.carryOut(j, r, next, act, now) })
	var ve *server.ValidationError
	switch {
	case errors.Is(err, errStale), errors.Is(err, server.ErrConflict):
		return nil // the plan or the switch changed meanwhile; the next step sees it
	case errors.As(err, &ve) && act.Kind == Apply:
		// The switch refuses the step (it would never take it): stop
		// and say why rather than retry every second.
		why := fmt.Sprintf("step %d could not be applied: %s", act.Step+1, oneline.Clean(ve.Error(), 300))
		r.progress = orig
		_, err = s.svc.InTerm(ctx, t, func(j *server.JobTx) error {
			return s.carryOut(j, r, orig, Action{Kind: Pause, Reason: why}, now)
		})
	}
	return err
}

// observe reads what a decision needs: the switch as stored and the
// current step's convergence in the fleet model.
func (s *Service) observe(ctx context.Context, r *run) (Observation, error) {
	var ob Observation
	sw, err := s.svc.GetSwitch(ctx, r.App, r.SwitchName)
	switch {
	case errors.Is(err, server.ErrNotFound):
		ob.Gone = true
		return ob, nil
	case err != nil:
		return ob, err
	}
	if want := r.expectedVersion(); sw.Version != want {
		if r.holds(sw) {
			// A renewal or a metadata edit: the switch does what the plan
			// set, so the plan takes the new version as its own.
			r.adopt(sw.Version)
		} else {
			ob.Changed = fmt.Sprintf("version %d by %s: %s", sw.Version, sw.UpdatedBy, oneline.Clean(sw.Reason, 200))
		}
	}
	ob.Synced = s.fleet.Synced()
	if l := s.live(r); l != nil {
		ob.Override, ob.Published, ob.Revision, ob.Applied, ob.Targeted = l.Override, l.Published, l.Revision, l.Applied, l.Targeted
		for _, in := range l.Instances {
			ob.Instances = append(ob.Instances, in.ID)
		}
	}
	if cur := r.progress.current(); cur != nil {
		sel := pairs(cur.Rollout.Selector)
		for _, m := range s.members(r.App) {
			if sel.Matches(m.Labels) {
				ob.Selectable++
			}
		}
	}
	return ob, nil
}

// measure asks every condition of the current step's gate at now,
// concurrently and each within the one query timeout of server/signal, so
// a source that does not answer delays the step by one timeout at most.
// No data and errors are outcomes of their own, never a value.
func (s *Service) measure(ctx context.Context, r *run, now time.Time) []Verdict {
	g := r.plan.Steps[r.progress.current().Index].Gate
	qs := make([]signal.Query, len(g.Conditions))
	for i, c := range g.Conditions {
		qs[i] = signal.Query{Source: c.Source, App: r.App, Query: c.Query}
	}
	out := make([]Verdict, len(qs))
	for i, m := range s.sources.MeasureAll(ctx, qs, now) {
		out[i] = g.Conditions[i].Verdict(i, m)
	}
	return out
}

// carryOut does what Next decided, inside the job's transaction j: r is
// the plan as read before deciding, next its new progress.
func (s *Service) carryOut(j *server.JobTx, r *run, next Progress, act Action, now time.Time) error {
	var cur row
	if err := j.DB().Select("version").Where("id = ?", r.ID).Take(&cur).Error; err != nil {
		return err
	}
	if cur.Version != r.Version {
		return errStale
	}
	before := r.summary()
	r.progress = next
	actor := server.JobActor(audit.ActorRollout, r.cause())
	switch act.Kind {
	case Wait:
		return save(j.DB(), r, now)
	case Apply:
		if err := s.apply(j, actor, r, act, now); err != nil {
			return err
		}
		return save(j.DB(), r, now)
	case Pause:
		r.State, r.progress.Note = Paused, act.Reason
		return s.commitPlan(j, actor, r, before, audit.RolloutPause, act.Reason, now)
	case Revert:
		if err := s.revert(j, actor, r, act); err != nil {
			return err
		}
		r.end(Reverted, now)
		r.progress.Note = act.Reason
		return s.commitPlan(j, actor, r, before, audit.RolloutRevert, act.Reason, now)
	case Finish:
		r.end(Done, now)
		r.progress.Note = ""
		why := fmt.Sprintf("staged rollout #%d is done: every step passed its gate", r.ID)
		if act.Reason != "" {
			why = fmt.Sprintf("staged rollout #%d is done (last step %s)", r.ID, act.Reason)
		}
		return s.commitPlan(j, actor, r, before, audit.RolloutDone, why, now)
	default: // Abort
		r.end(Aborted, now)
		r.progress.Note = act.Reason
		return s.commitPlan(j, actor, r, before, audit.RolloutAbort, act.Reason, now)
	}
}

// commitPlan saves r as an audited change of the plan by the rollout
// actor, with its finding and notifications.
func (s *Service) commitPlan(j *server.JobTx, a server.Actor, r *run, before summary, action audit.Action, reason string, now time.Time) error {
	return j.Commit(server.Audited{Actor: a, Action: action, Reason: oneline.Clean(reason, 990), App: r.App,
		Apply: func(tx *gorm.DB) (string, any, any, error) {
			if err := save(tx, r, now); err != nil {
				return "", nil, nil, err
			}
			if err := s.announce(tx, r, before.State, "the plan", now); err != nil {
				return "", nil, nil, err
			}
			return r.cause(), before, r.summary(), nil
		}})
}

// apply applies step act.Step: it computes the step's target from the
// fleet as it is now and turns the switch on (or off) with the version
// the plan expects, so a change made meanwhile fails the step instead of
// being overwritten. A switch already set as the step wants is left as
// it is: no change, no event.
func (s *Service) apply(j *server.JobTx, a server.Actor, r *run, act Action, now time.Time) error {
	sw, err := j.Switch(r.App, r.SwitchName)
	if err != nil {
		return err
	}
	if !act.Requested && sw.Version != r.expectedVersion() {
		return errStale
	}
	k := act.Step
	_, _, prev := previous(r.progress, k, r.before)
	cur := sw.Rollout()
	target, off, raised := Target(r.plan, k, r.App, r.SwitchName, cur, prev, s.members(r.App))
	// A plan's steps widen the percent or the selector; the switch's key
	// lists stay as a person set them.
	target.Include, target.Exclude = cur.Include, cur.Exclude
	raised = oneline.Clean(raised, 300)
	version := sw.Version
	already := (off && sw.State == wire.StateOff) || (!off && sw.State == wire.StateOn && sameRollout(sw.Rollout(), target))
	if !already {
		t := server.Toggle{Reason: stepReason(r, k, target, off, raised, act.Reason), Version: &version}
		var out *server.Switch
		if off {
			out, err = j.TurnOff(a, r.App, r.SwitchName, t)
		} else {
			t.Rollout = &target
			out, err = j.TurnOn(a, r.App, r.SwitchName, t)
		}
		if err != nil {
			return err
		}
		version = out.Version
	}
	r.progress.begin(k, target, off, raised, version, now)
	r.State = Running
	return nil
}

// revert puts the switch back exactly as it was before the plan: state,
// rollout (percent, stickiness, selector — with key stickiness the same
// keys) and, when it was on, its on-since time and expiry.
func (s *Service) revert(j *server.JobTx, a server.Actor, r *run, act Action) error {
	sw, err := j.Switch(r.App, r.SwitchName)
	if errors.Is(err, server.ErrNotFound) {
		return nil // nothing left to put back
	}
	if err != nil {
		return err
	}
	if !act.Requested && sw.Version != r.expectedVersion() {
		return errStale
	}
	if sameState(sw.Saved(), r.before) {
		return nil
	}
	version := sw.Version
	reason := oneline.Clean(fmt.Sprintf("staged rollout #%d reverted: %s", r.ID, act.Reason), 990)
	_, err = j.Restore(a, r.App, r.SwitchName, r.before, reason, &version)
	return err
}

// sameState reports whether two switch states are the same.
func sameState(a, b server.SwitchState) bool {
	eq := func(x, y *time.Time) bool { return (x == nil) == (y == nil) && (x == nil || x.Equal(*y)) }
	return a.State == b.State && sameRollout(a.Rollout, b.Rollout) && eq(a.OnSince, b.OnSince) && eq(a.ExpiresAt, b.ExpiresAt)
}

// sameProgress reports whether two progress records are equal.
func sameProgress(a, b Progress) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}
