package rollout

import (
	"fmt"
	"math"
	"time"

	"github.com/switchyard-io/switchyard/internal/oneline"
	"github.com/switchyard-io/switchyard/sdk/wire"
	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/fleet"
	"github.com/switchyard-io/switchyard/server/signal"
)

// This file is the plan's state machine: pure functions of the plan, its
// progress, what the job observed and the time. The job (job.go) gathers
// the observation, asks Next what to do, and does it in one fenced
// transaction.

// ErrorLimit is how many measurements in a row may fail to ask a source
// (unreachable, timed out) before the plan pauses: an error is neither
// health nor a failure, and a plan must not wait silently forever.
const ErrorLimit = 3

// Observation is what the job saw of one plan's world, just before
// deciding.
type Observation struct {
	// Gone: the switch no longer exists.
	Gone bool
	// Changed says who changed the switch outside the plan ("" when it
	// carries the version the plan set).
	Changed string
	// Synced: the fleet model is in sync with etcd; convergence is
	// unknown while it is not.
	Synced bool
	// Override: a drill's override of the switch is in place, so the
	// fleet applies that, not the plan's value.
	Override bool
	// Published: the fleet model's value of the switch carries the
	// current step's version, written at Revision.
	Published bool
	Revision  int64
	// Applied of the Targeted live instances (the step's target and the
	// previous one's: every instance whose answer the step changes) have
	// applied Revision; Instances lists the targeted.
	Applied, Targeted int
	Instances         []string
	// Selectable counts the live instances the current step's selector
	// admits: when the first step reaches none of them (it was applied
	// before they joined), it is applied again, raised to reach one.
	Selectable int
	// Verdicts is this round's measurement of the gate's conditions; nil
	// when none was due (see MeasureDue).
	Verdicts []Verdict
}

// ActionKind is what the job must do on the switch and the plan.
type ActionKind int

// Actions.
const (
	// Wait changes nothing on the switch; the progress may have changed
	// (a convergence, a measurement, a note).
	Wait ActionKind = iota
	// Apply applies step Action.Step.
	Apply
	// Pause pauses the plan, saying why.
	Pause
	// Revert puts the switch back as it was before the plan, and ends it.
	Revert
	// Finish ends the plan: every step passed.
	Finish
	// Abort ends the plan without touching the switch.
	Abort
)

// Action is a decision.
type Action struct {
	Kind ActionKind
	Step int
	// Reason says why, for the audit log and the page.
	Reason string
	// Requested: a person asked for it, so it takes the switch as it is
	// now rather than insisting on the version the plan last set.
	Requested bool
}

// Next decides what a plan in state does now, given what was observed.
// It returns the new progress (the input is not changed) and the action.
func Next(p Plan, state string, in Progress, ob Observation, now time.Time) (Progress, Action) {
	pr := in.clone()
	now = now.UTC()
	if ob.Gone {
		pr.end(OutcomeStopped, "the switch was deleted", now)
		return pr, Action{Kind: Abort, Reason: "the switch was deleted"}
	}
	if req := pr.Request; req != nil {
		pr.Request = nil
		return request(p, pr, req, now)
	}
	if state != Pending && state != Running {
		return pr, Action{Kind: Wait}
	}
	if ob.Changed != "" {
		return pr, Action{Kind: Pause, Reason: "the switch was changed outside the plan (" + ob.Changed + "); resume to apply the step again"}
	}
	cur := pr.current()
	if cur == nil {
		return pr, Action{Kind: Apply, Step: 0}
	}
	if cur.EndedAt != nil {
		return pr, after(p, pr)
	}
	step := p.Steps[cur.Index]
	if cur.ConvergedAt == nil {
		note, ok := converge(cur, step.Gate, ob, now)
		if !ok && reraise(p, cur, ob) {
			pr.end(OutcomeStopped, "it reached no live instance", now)
			return pr, Action{Kind: Apply, Step: 0, Reason: fmt.Sprintf("the first step reached none of the %d live instances", ob.Selectable)}
		}
		if !ok {
			pr.Note = note
			return pr, Action{Kind: Wait}
		}
	}
	if ob.Verdicts != nil {
		if act, stop := measure(p, &pr, cur, ob.Verdicts, now); stop {
			return pr, act
		}
	}
	holdEnd := *cur.HoldEndsAt(p)
	if now.Before(holdEnd) {
		pr.Note = "holding until " + holdEnd.Format(time.RFC3339)
		return pr, Action{Kind: Wait}
	}
	if len(step.Gate.Conditions) > 0 && (cur.MeasuredAt == nil || cur.MeasuredAt.Before(holdEnd) || !cur.Passed) {
		pr.Note = "the hold is over; waiting for a passing measurement to close it"
		return pr, Action{Kind: Wait}
	}
	pr.Note = ""
	pr.end(OutcomePassed, "", now)
	return pr, after(p, pr)
}

// request carries out a person's request.
func request(p Plan, pr Progress, req *Request, now time.Time) (Progress, Action) {
	by := req.By + ": " + req.Reason
	switch req.Kind {
	case RequestRevert:
		pr.end(OutcomeStopped, "aborted by "+by, now)
		return pr, Action{Kind: Revert, Reason: "aborted by " + by, Requested: true}
	case RequestAdvance:
		if pr.current() == nil {
			return pr, Action{Kind: Apply, Step: 0, Reason: "advanced by " + by, Requested: true}
		}
		pr.end(OutcomeAdvanced, "advanced by "+by, now)
		act := after(p, pr)
		act.Reason, act.Requested = "advanced by "+by, true
		return pr, act
	default: // RequestReapply
		k := max(pr.Step, 0)
		pr.end(OutcomeStopped, "paused; resumed by "+by, now)
		return pr, Action{Kind: Apply, Step: k, Reason: "resumed by " + by, Requested: true}
	}
}

// after is what follows the current step once it ended: the next step,
// or the end of the plan.
func after(p Plan, pr Progress) Action {
	next := pr.current().Index + 1
	if next >= len(p.Steps) {
		return Action{Kind: Finish}
	}
	return Action{Kind: Apply, Step: next}
}

// converge records what the fleet applied of the current step and
// reports whether the step converged; if not, the note says what it
// waits for.
func converge(cur *StepRecord, g Gate, ob Observation, now time.Time) (string, bool) {
	switch {
	case !ob.Synced:
		return "the fleet model is not in sync with etcd: convergence is unknown, waiting", false
	case ob.Override:
		return "a drill's override of the switch is in place: waiting for it to end", false
	case !ob.Published:
		return fmt.Sprintf("waiting for version %d of the switch to reach etcd", cur.Version), false
	}
	cur.Revision, cur.Applied, cur.Targeted = ob.Revision, ob.Applied, ob.Targeted
	cur.Instances = listed(ob.Instances)
	need := Needed(g.MinApplied, ob.Targeted)
	switch {
	case ob.Targeted == 0 && cur.Index == 0:
		return "waiting for a live instance in the target: the first step needs at least one", false
	case ob.Applied < need:
		return fmt.Sprintf("waiting for %d of %d targeted instances to apply revision %d (%d have)", need, ob.Targeted, ob.Revision, ob.Applied), false
	}
	t := now
	cur.ConvergedAt = &t
	return "", true
}

// reraise reports whether the first step of a turn-on, applied when no
// live instance could be raised into it, must be applied again now that
// instances it could reach are live.
func reraise(p Plan, cur *StepRecord, ob Observation) bool {
	return p.Direction == DirectionOn && cur.Index == 0 && ob.Published && ob.Synced && ob.Targeted == 0 &&
		ob.Selectable > 0 && cur.Rollout.Stickiness != wire.StickyKey
}

// Needed is how many of targeted instances must apply a step for a gate
// with min_applied share: at least one when any is targeted.
func Needed(share float64, targeted int) int {
	if targeted == 0 {
		return 0
	}
	return max(1, int(math.Ceil(share*float64(targeted)-1e-9)))
}

// measure records a measurement of the current step; stop says the plan
// stops here with act (a failed gate, no data, a source away too long).
func measure(p Plan, pr *Progress, cur *StepRecord, verdicts []Verdict, now time.Time) (act Action, stop bool) {
	g := p.Steps[cur.Index].Gate
	t := now
	cur.Measurements++
	cur.MeasuredAt, cur.Verdicts = &t, verdicts
	failed, noData, errored := classify(g, verdicts)
	cur.Passed = failed == "" && noData == "" && errored == ""
	if errored == "" {
		pr.Errors = 0
	}
	step := fmt.Sprintf("step %d", cur.Index+1)
	switch {
	case failed != "":
		cur.Failures++
		if cur.Failures <= g.FailureLimit {
			return Action{}, false
		}
		why := fmt.Sprintf("%s failed its gate: %s (%s, %d tolerated)", step, failed, plural(cur.Failures, "failed measurement"), g.FailureLimit)
		pr.end(OutcomeFailed, why, now)
		if p.OnFailure == FailRevert {
			return Action{Kind: Revert, Reason: why}, true
		}
		return Action{Kind: Pause, Reason: why}, true
	case noData != "":
		return Action{Kind: Pause, Reason: fmt.Sprintf("%s: %s had no data, and no data is not health; resume once it reports", step, noData)}, true
	case errored != "":
		pr.Errors++
		if pr.Errors >= ErrorLimit {
			return Action{Kind: Pause, Reason: fmt.Sprintf("%s: %d measurements in a row could not ask the source (%s)", step, pr.Errors, errored)}, true
		}
	}
	return Action{}, false
}

// classify names the first failing condition, the first one without data
// that pauses, and the first one whose source failed ("" when none).
// No data counts as the gate's on_no_data says, an error as its on_error.
func classify(g Gate, verdicts []Verdict) (failed, noData, errored string) {
	onNoData, onError := treatment(g.OnNoData), treatment(g.OnError)
	for _, v := range verdicts {
		if v.Condition < 0 || v.Condition >= len(g.Conditions) {
			continue
		}
		c := g.Conditions[v.Condition]
		name := fmt.Sprintf("condition %d (%s %s %s %s)", v.Condition+1, c.Source, oneline.Clean(c.Query, 120), c.Op, Number(c.Threshold))
		switch {
		case v.Outcome == VerdictFail && failed == "":
			failed = fmt.Sprintf("%s was %s", name, v.Value)
		case v.Outcome == VerdictNoData && onNoData == NoDataFail && failed == "":
			failed = name + " had no data"
		case v.Outcome == VerdictNoData && onNoData == NoDataPause && noData == "":
			noData = name
		case v.Outcome == VerdictError && onError == NoDataFail && failed == "":
			failed = name + " could not be measured: " + oneline.Clean(v.Error, 200)
		case v.Outcome == VerdictError && onError == NoDataPause && errored == "":
			errored = name + ": " + oneline.Clean(v.Error, 200)
		}
	}
	return failed, noData, errored
}

// MeasureDue reports whether the current step's conditions are due for a
// measurement at now: from convergence on, every interval, and once more
// when the hold ends.
func MeasureDue(p Plan, state string, pr Progress, now time.Time) bool {
	cur := pr.current()
	if state != Running || pr.Request != nil || cur == nil || cur.ConvergedAt == nil || cur.EndedAt != nil {
		return false
	}
	g := p.Steps[cur.Index].Gate
	switch {
	case len(g.Conditions) == 0:
		return false
	case cur.MeasuredAt == nil, !now.Before(cur.MeasuredAt.Add(g.Interval.D())):
		return true
	}
	holdEnd := *cur.HoldEndsAt(p)
	return !now.Before(holdEnd) && cur.MeasuredAt.Before(holdEnd)
}

// Verdict returns the verdict of condition i for one query answer.
func (c Condition) Verdict(i int, m signal.Measurement) Verdict {
	switch m.Outcome {
	case signal.OutcomeError:
		return Verdict{Condition: i, Outcome: VerdictError, Error: oneline.Clean(m.Err, 300)}
	case signal.OutcomeNoData:
		return Verdict{Condition: i, Outcome: VerdictNoData}
	}
	n := Number(m.Value)
	if c.holds(m.Value) {
		return Verdict{Condition: i, Outcome: VerdictPass, Value: &n}
	}
	return Verdict{Condition: i, Outcome: VerdictFail, Value: &n}
}

// Target is what step k of p sets on switch app/name: its rollout, with
// the switch's stickiness, and whether it turns the switch off (then the
// switch keeps current, its rollout now). prev is the record of step k-1
// (nil for the first step). A turn-on never narrows: a step below a
// raised predecessor keeps the raise. The first step of a turn-on with
// instance stickiness reaches at least one live instance of members: when
// its percent holds none of them, it is raised to the smallest percent
// that holds the instance with the smallest bucket, and raised says so.
func Target(p Plan, k int, app, name string, current wire.Rollout, prev *StepRecord, members []fleet.Member) (r wire.Rollout, off bool, raised string) {
	s := p.Steps[k]
	if s.Off() {
		return current, true, ""
	}
	r = s.rollout(current.Stickiness)
	if p.Direction == DirectionOn && prev != nil && !prev.Off && prev.Rollout.Percent > r.Percent {
		r.Percent = prev.Rollout.Percent
		return r, false, "kept at " + formatPercent(r.Percent) + ", where step " + fmt.Sprint(prev.Index+1) + " was raised to reach an instance"
	}
	if p.Direction != DirectionOn || k != 0 || r.Stickiness == wire.StickyKey {
		return r, false, ""
	}
	sel := pairs(r.Selector)
	basis, low, who := r.Basis(), -1, ""
	for _, m := range members {
		if !sel.Matches(m.Labels) {
			continue
		}
		b := wire.Bucket(app, name, m.ID)
		if b < basis {
			return r, false, ""
		}
		if low < 0 || b < low || (b == low && m.ID < who) {
			low, who = b, m.ID
		}
	}
	if low < 0 {
		return r, false, ""
	}
	planned := r.Percent
	r.Percent = float64(low+1) / 100
	return r, false, fmt.Sprintf("raised from %s to %s so that %s is in: no live instance has a bucket below %s",
		formatPercent(planned), formatPercent(r.Percent), who, formatPercent(planned))
}

// Includes returns the filter of instances in rollout r of switch
// app/name while it is on (none while off).
func Includes(app, name string, off bool, r wire.Rollout) func(fleet.Member) bool {
	sw := &wire.Switch{App: app, Name: name, State: wire.StateOn, Rollout: r}
	if off {
		sw.State = wire.StateOff
	}
	return func(m fleet.Member) bool { return sw.Includes(m.ID, m.Labels) }
}

// touched is the filter of the instances a step changes or keeps: those
// in its target and those in the previous one. Widening, it is the new
// target; narrowing, the old.
func touched(app, name string, cur StepRecord, prevOff bool, prev wire.Rollout) func(fleet.Member) bool {
	in, was := Includes(app, name, cur.Off, cur.Rollout), Includes(app, name, prevOff, prev)
	return func(m fleet.Member) bool { return in(m) || was(m) }
}

// previous is the switch as it was before step k: the latest record of
// step k-1, or the plan's starting state for the first step.
func previous(pr Progress, k int, before server.SwitchState) (off bool, r wire.Rollout, rec *StepRecord) {
	for i := len(pr.Steps) - 1; i >= 0; i-- {
		if pr.Steps[i].Index == k-1 {
			return pr.Steps[i].Off, pr.Steps[i].Rollout, &pr.Steps[i]
		}
	}
	return before.State != wire.StateOn, before.Rollout, nil
}

// plural writes "1 failed measurement", "2 failed measurements".
func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// listed keeps at most maxListed ids.
func listed(ids []string) []string {
	if len(ids) > maxListed {
		return append(ids[:maxListed:maxListed], fmt.Sprintf("… %d more", len(ids)-maxListed))
	}
	return ids
}
