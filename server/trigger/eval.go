package trigger

import (
	"fmt"
	"time"

	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/signal"
)

// This file is the evaluator: a pure function from (policy, state, sample,
// now) to (state, decision). It reads no clock, no database and no
// source; the job around it (job.go) loads the state, queries the source,
// acts on the decision and stores the state, and the preview (preview.go)
// runs it over a range of history.

// Op compares a value with a threshold (the operators of server/signal).
type Op = signal.Op

// The operators a rule takes.
const (
	Above   = signal.Above
	AtLeast = signal.AtLeast
	Below   = signal.Below
	AtMost  = signal.AtMost
)

// Ops lists the operators a rule takes.
var Ops = signal.Ordered

// opposite is the strict operator of the other direction: the default
// recover operator of a trigger operator.
func opposite(o Op) Op {
	if o.Upward() {
		return Below
	}
	return Above
}

// Condition is one side of a rule: the value must satisfy Op Threshold for
// at least For before the rule acts.
type Condition struct {
	Op        Op
	Threshold float64
	For       time.Duration
}

func (c Condition) String() string {
	return fmt.Sprintf("%s %s for %s", c.Op, formatNum(c.Threshold), c.For)
}

// What a sample without a value counts as: no data under on_no_data, an
// error under on_error (the treatments of server/signal).
const (
	// MissingHold keeps the current state: such a sample neither advances
	// nor resets a hold, and never flips the switch.
	MissingHold = signal.Hold
	// MissingBreaching counts it as crossing the trigger threshold (and
	// not recovered).
	MissingBreaching = signal.Breaching
	// MissingNotBreaching counts it as healthy: within the trigger
	// threshold and recovered.
	MissingNotBreaching = signal.NotBreaching
)

// Policy is what the evaluator needs of a rule.
type Policy struct {
	Trigger, Recover Condition
	// Cooldown is a quiet period after each flip: no hold starts and no
	// flip happens before it ends.
	Cooldown time.Duration
	// MaxOn, when positive, caps how long the rule holds the switch on:
	// then it hands the switch to a person (locked, switch left on).
	MaxOn time.Duration
	// OnNoData and OnError are what a sample with no data and a sample
	// whose query failed count as (MissingHold, …).
	OnNoData, OnError string
	// ConfirmRecovery makes the rule propose recovery and wait for a
	// person instead of turning the switch off.
	ConfirmRecovery bool
	// More than FlapMax flips within FlapWindow lock the rule.
	FlapMax    int
	FlapWindow time.Duration
	// Interval is the evaluation period; with the hold it bounds how long
	// a gap in the evidence may be before a hold starts over.
	Interval time.Duration
}

// Outcome is what one query gave: a value, no data, or an error. No data
// is not zero and an error is not no data; each follows its own policy
// (on_no_data, on_error) and is counted apart from values.
type Outcome = signal.Outcome

// Outcomes.
const (
	OutcomeValue  = signal.OutcomeValue
	OutcomeNoData = signal.OutcomeNoData
	OutcomeError  = signal.OutcomeError
)

// Sample is one evaluation's input.
type Sample struct {
	Outcome Outcome
	Value   float64 // with OutcomeValue; may be ±Inf
	Err     string  // with OutcomeError: what the source said
}

// Value is a sample with a value.
func Value(v float64) Sample { return Sample{Outcome: OutcomeValue, Value: v} }

// NoData is a sample without a value.
func NoData() Sample { return Sample{Outcome: OutcomeNoData} }

// Failed is a sample of a source that could not answer.
func Failed(err string) Sample { return Sample{Outcome: OutcomeError, Err: err} }

func (s Sample) String() string {
	switch s.Outcome {
	case OutcomeValue:
		return formatNum(s.Value)
	case OutcomeError:
		return "error"
	}
	return "no data"
}

// Phase is where a rule is in its state machine:
//
//	ok → pending_on → on → pending_off → ok
//
// plus cooldown after each flip, awaiting_confirmation (confirm_recovery:
// the rule proposes recovery and a person confirms), and locked (it
// flapped, or it held the switch on for max_on and handed it to a person).
type Phase string

// Phases.
const (
	PhaseOK         Phase = "ok"
	PhasePendingOn  Phase = "pending_on"
	PhaseOn         Phase = "on"
	PhasePendingOff Phase = "pending_off"
	PhaseCooldown   Phase = "cooldown"
	PhaseAwaiting   Phase = "awaiting_confirmation"
	PhaseLocked     Phase = "locked"
)

// Why a rule is locked.
const (
	LockFlapping = "flapping"
	LockMaxOn    = "max_on"
	// LockOverridden: another automation (expiry, a staged rollout)
	// changed the switch against what the rule held; a person decides.
	LockOverridden = "overridden"
)

// Action is what a decision asks the job to do.
type Action string

// Actions. The zero value does nothing.
const (
	ActNone     Action = ""
	ActTurnOn   Action = "turn_on"
	ActTurnOff  Action = "turn_off"
	ActPropose  Action = "propose_recovery"
	ActWithdraw Action = "withdraw_proposal"
	ActLock     Action = "lock"
	ActHandOff  Action = "hand_off"
	// ActOverridden: the switch is not as the rule holds it; the rule
	// takes it as it is and locks (see Reconcile).
	ActOverridden Action = "overridden"
)

// Flips reports whether a changes the switch.
func (a Action) Flips() bool { return a == ActTurnOn || a == ActTurnOff }

// Window is the evidence gathered since a hold began: how many samples had
// values (and which), how many had none and how many failed.
type Window struct {
	From   time.Time `json:"from"`
	Values int       `json:"values"`
	NoData int       `json:"no_data"`
	Errors int       `json:"errors"`
	First  Num       `json:"first"`
	Last   Num       `json:"last"`
	Min    Num       `json:"min"`
	Max    Num       `json:"max"`
}

func (w *Window) add(s Sample) {
	switch s.Outcome {
	case OutcomeValue:
		v := Num(s.Value)
		if w.Values == 0 {
			w.First, w.Min, w.Max = v, v, v
		}
		w.Min, w.Max, w.Last = min(w.Min, v), max(w.Max, v), v
		w.Values++
	case OutcomeError:
		w.Errors++
	default:
		w.NoData++
	}
}

func (w Window) String() string {
	vals := "no values"
	switch {
	case w.Values == 1:
		vals = "1 value " + w.Last.String()
	case w.Values > 1:
		vals = fmt.Sprintf("%d values %s…%s, last %s", w.Values, w.Min, w.Max, w.Last)
	}
	return fmt.Sprintf("since %s: %s, %d no data, %d errors", w.From.UTC().Format("15:04:05"), vals, w.NoData, w.Errors)
}

// State is a rule's durable evaluation state, stored after every
// evaluation so that a new leader resumes a hold where the old one was.
type State struct {
	Phase Phase `json:"phase"`
	// On says whether the rule holds the switch on (through cooldown and
	// locks too).
	On    bool      `json:"on"`
	Since time.Time `json:"since"` // when Phase began
	// OnSince is when the rule turned the switch on (or took it over on).
	OnSince       time.Time `json:"on_since,omitzero"`
	CooldownUntil time.Time `json:"cooldown_until,omitzero"`
	// Transitions are the flips within the flap window, oldest first.
	Transitions []time.Time `json:"transitions,omitempty"`
	// Window is the evidence of the current hold (pending phases).
	Window Window `json:"window"`
	// LastEvidence is the last time a sample counted (a value, or no data
	// under breaching or not_breaching).
	LastEvidence time.Time `json:"last_evidence,omitzero"`
	Lock         string    `json:"lock,omitempty"`
	LockWhy      string    `json:"lock_why,omitempty"`
	// A paused rule does nothing until a person resumes it.
	Paused      bool      `json:"paused,omitempty"`
	PausedBy    string    `json:"paused_by,omitempty"`
	PausedAt    time.Time `json:"paused_at,omitzero"`
	PauseReason string    `json:"pause_reason,omitempty"`
	// HeldBy is the drill run that holds the rule's evaluation (its
	// query reads the drilled app's fleet signals), while it runs.
	HeldBy string `json:"held_by,omitempty"`
	// ConfirmedBy is the person who confirmed a proposed recovery.
	ConfirmedBy string    `json:"confirmed_by,omitempty"`
	ConfirmedAt time.Time `json:"confirmed_at,omitzero"`
}

// Fresh is the state of a rule that starts now on a switch that is on or
// off: it holds the switch as it finds it.
func Fresh(switchOn bool, now time.Time) State {
	st := State{Phase: PhaseOK, Since: now}
	if switchOn {
		st.Phase, st.On, st.OnSince = PhaseOn, true, now
	}
	return st
}

// Reconcile compares what the rule holds with the switch as stored
// (switchOn) before an evaluation: the rule's state is a cache of the
// world, never a memory of its own acts. A rule that agrees, or that is
// paused or locked, only takes the switch as it is (a person or the
// lock's own reason already stopped it). A running rule that disagrees
// means another automation acted on the switch (a person's change would
// have paused it): the rule takes the switch as it is and locks with
// lock "overridden", and by names who acted, so a person decides whether
// the rule should act again. The Decision's action is ActOverridden then,
// ActNone otherwise.
func Reconcile(st State, switchOn bool, by string, now time.Time) (State, Decision) {
	d := Decision{From: st.Phase, To: st.Phase}
	if st.On == switchOn {
		return st, d
	}
	held := onOff(st.On)
	st.On, st.OnSince = switchOn, time.Time{}
	if switchOn {
		st.OnSince = now
	}
	if st.Paused || st.Phase == PhaseLocked {
		return st, d
	}
	d.Window = st.Window
	st.Phase, st.Since, st.Window, st.Lock = PhaseLocked, now, Window{}, LockOverridden
	st.ConfirmedBy, st.ConfirmedAt = "", time.Time{}
	st.LockWhy = fmt.Sprintf("%s turned the switch %s while the rule held it %s; the rule takes it as it is and waits for a person", by, onOff(switchOn), held)
	d.Action, d.Why, d.To = ActOverridden, st.LockWhy, PhaseLocked
	return st, d
}

// Pause stops the rule until Resume.
func (st State) Pause(by, reason string, now time.Time) State {
	st.Paused, st.PausedBy, st.PausedAt, st.PauseReason = true, by, now, reason
	return st
}

// Resume hands the switch back to the rule as it is now: it starts fresh
// from the switch's state, with no flips counted and no lock.
func (st State) Resume(switchOn bool, now time.Time) State { return Fresh(switchOn, now) }

// Reconfigured is the state of a rule whose configuration just changed:
// a running hold or proposal was judged by the old thresholds, so it ends
// (the rule rests where the switch is); a rule that changed mode starts
// fresh from the switch (a dry run's "on" was never real). A lock and a
// pause stay until a person resumes the rule.
func (st State) Reconfigured(modeChanged, switchOn bool, now time.Time) State {
	if st.Phase == PhaseLocked {
		return st
	}
	if modeChanged {
		n := Fresh(switchOn, now)
		n.Paused, n.PausedBy, n.PausedAt, n.PauseReason = st.Paused, st.PausedBy, st.PausedAt, st.PauseReason
		return n
	}
	if pending(st.Phase) || st.Phase == PhaseAwaiting {
		st.Phase, st.Since, st.Window = stable(st), now, Window{}
		st.ConfirmedBy, st.ConfirmedAt = "", time.Time{}
	}
	return st
}

// Status is the phase as people read it: paused overrides the phase.
func (st State) Status() string {
	if st.Paused {
		return "paused"
	}
	return string(st.Phase)
}

// Decision is the outcome of one evaluation: the action to take, the
// phases before and after, why, and the evidence behind it.
type Decision struct {
	Action Action
	From   Phase
	To     Phase
	Why    string
	// Window is the evidence of the hold that ended in this decision.
	Window Window
}

// Evaluate runs one evaluation of a rule with policy p in state st on
// sample s at now, and returns the next state and what to do.
func Evaluate(p Policy, st State, s Sample, now time.Time) (State, Decision) {
	d := Decision{From: st.Phase}
	next, d := evaluate(p, st, s, now, d)
	d.To = next.Phase
	return next, d
}

func evaluate(p Policy, st State, s Sample, now time.Time, d Decision) (State, Decision) {
	switch {
	case st.Paused:
		d.Why = "paused by " + st.PausedBy
		return st, d
	case st.Phase == PhaseLocked:
		d.Why = "locked: " + st.LockWhy
		return st, d
	case st.Phase == PhaseAwaiting && st.ConfirmedBy != "":
		// A person decided: no flap check, the metric is not asked.
		d.Window = st.Window
		return turnOff(p, st, now, d, "recovery confirmed by "+st.ConfirmedBy)
	}
	if st.On && p.MaxOn > 0 && now.Sub(st.OnSince) >= p.MaxOn {
		st.Phase, st.Since, st.Lock = PhaseLocked, now, LockMaxOn
		st.LockWhy = fmt.Sprintf("held the switch on for max_on %s; handed to a person (the switch stays on)", p.MaxOn)
		d.Action, d.Why, d.Window = ActHandOff, st.LockWhy, st.Window
		return st, d
	}
	if st.Phase == PhaseCooldown {
		if now.Before(st.CooldownUntil) {
			d.Why = "cooling down until " + st.CooldownUntil.UTC().Format(time.RFC3339)
			return st, d
		}
		st.Phase, st.Since = stable(st), st.CooldownUntil
	}

	breach, recovered, counts := classify(p, s)
	if !counts {
		if pending(st.Phase) || st.Phase == PhaseAwaiting {
			st.Window.add(s)
		}
		d.Why = s.String() + ": holding (" + policyName(s) + " hold)"
		return st, d
	}
	if pending(st.Phase) && !st.LastEvidence.IsZero() && now.Sub(st.LastEvidence) > tolerance(p, st.Phase) {
		// Evidence this old says nothing about now: start the hold over.
		d.Why = fmt.Sprintf("no evidence for %s; hold starts over; ", now.Sub(st.LastEvidence).Round(time.Millisecond))
		st.Since, st.Window = now, Window{From: now}
	}
	st.LastEvidence = now

	switch st.Phase {
	case PhaseOK:
		if !breach {
			d.Why += s.String() + ": within threshold"
			return st, d
		}
		st.Phase, st.Since, st.Window = PhasePendingOn, now, Window{From: now}
		st.Window.add(s)
		if p.Trigger.For > 0 {
			d.Why += fmt.Sprintf("%s crosses %s %s; fires after %s", s, p.Trigger.Op, formatNum(p.Trigger.Threshold), p.Trigger.For)
			return st, d
		}
		return fire(p, st, now, d)
	case PhasePendingOn:
		if !breach {
			st.Phase, st.Since, st.Window = PhaseOK, now, Window{}
			d.Why += s.String() + ": back within threshold; hold cancelled"
			return st, d
		}
		st.Window.add(s)
		if now.Sub(st.Since) < p.Trigger.For {
			d.Why += fmt.Sprintf("%s: crossing for %s of %s", s, now.Sub(st.Since).Round(time.Millisecond), p.Trigger.For)
			return st, d
		}
		return fire(p, st, now, d)
	case PhaseOn:
		if !recovered {
			d.Why += s.String() + ": not recovered"
			return st, d
		}
		st.Phase, st.Since, st.Window = PhasePendingOff, now, Window{From: now}
		st.Window.add(s)
		if p.Recover.For > 0 {
			d.Why += fmt.Sprintf("%s meets recover %s %s; recovers after %s", s, p.Recover.Op, formatNum(p.Recover.Threshold), p.Recover.For)
			return st, d
		}
		return recoverNow(p, st, now, d)
	case PhasePendingOff:
		if !recovered {
			st.Phase, st.Since, st.Window = PhaseOn, now, Window{}
			d.Why += s.String() + ": not recovered any more; hold cancelled"
			return st, d
		}
		st.Window.add(s)
		if now.Sub(st.Since) < p.Recover.For {
			d.Why += fmt.Sprintf("%s: recovered for %s of %s", s, now.Sub(st.Since).Round(time.Millisecond), p.Recover.For)
			return st, d
		}
		return recoverNow(p, st, now, d)
	case PhaseAwaiting:
		if !recovered {
			d.Window = st.Window
			st.Phase, st.Since, st.Window = PhaseOn, now, Window{}
			d.Action, d.Why = ActWithdraw, d.Why+s.String()+": not recovered any more; proposal withdrawn"
			return st, d
		}
		st.Window.add(s)
		d.Why += s.String() + ": recovered; waiting for a person to confirm"
		return st, d
	}
	d.Why = "unknown phase " + string(st.Phase)
	return st, d
}

// Due is the next moment the rule's state changes with time alone: a
// hold ends, a cooldown ends, max_on is reached. Zero when none is
// pending. The job evaluates then, so a hold fires when it is due rather
// than at the next interval, on whichever console leads.
func Due(p Policy, st State) time.Time {
	if st.Paused || st.Phase == PhaseLocked {
		return time.Time{}
	}
	var due time.Time
	switch st.Phase {
	case PhasePendingOn:
		due = st.Since.Add(p.Trigger.For)
	case PhasePendingOff:
		due = st.Since.Add(p.Recover.For)
	case PhaseCooldown:
		due = st.CooldownUntil
	}
	if st.On && p.MaxOn > 0 {
		if end := st.OnSince.Add(p.MaxOn); due.IsZero() || end.Before(due) {
			due = end
		}
	}
	return due
}

// classify says whether s crosses the trigger threshold, meets the
// recover threshold, and counts as evidence at all (false: hold).
func classify(p Policy, s Sample) (breach, recovered, counts bool) {
	if s.Outcome == OutcomeValue {
		return p.Trigger.Op.Holds(s.Value, p.Trigger.Threshold), p.Recover.Op.Holds(s.Value, p.Recover.Threshold), true
	}
	treat := p.OnNoData
	if s.Outcome == OutcomeError {
		treat = p.OnError
	}
	switch treat {
	case MissingBreaching:
		return true, false, true
	case MissingNotBreaching:
		return false, true, true
	}
	return false, false, false
}

// policyName names the policy a sample without a value follows.
func policyName(s Sample) string {
	if s.Outcome == OutcomeError {
		return "on_error"
	}
	return "on_no_data"
}

func pending(ph Phase) bool { return ph == PhasePendingOn || ph == PhasePendingOff }

// stable is the phase a rule rests in when it is not holding: on or ok.
func stable(st State) Phase {
	if st.On {
		return PhaseOn
	}
	return PhaseOK
}

// tolerance is the longest gap in the evidence a hold survives: its own
// duration, and at least three evaluation intervals (a leader takeover).
func tolerance(p Policy, ph Phase) time.Duration {
	hold := p.Trigger.For
	if ph == PhasePendingOff {
		hold = p.Recover.For
	}
	return max(hold, 3*p.Interval)
}

// flapLimited reports whether another flip now would exceed FlapMax flips
// within FlapWindow; it also forgets flips older than the window.
func flapLimited(p Policy, st *State, now time.Time) bool {
	keep := st.Transitions[:0:0]
	for _, t := range st.Transitions {
		if now.Sub(t) < p.FlapWindow {
			keep = append(keep, t)
		}
	}
	st.Transitions = keep
	return p.FlapMax > 0 && len(keep) >= p.FlapMax
}

func lockFlapping(p Policy, st State, now time.Time, d Decision) (State, Decision) {
	d.Window = st.Window
	st.Phase, st.Since, st.Lock = PhaseLocked, now, LockFlapping
	st.LockWhy = fmt.Sprintf("%d flips within %s (flap.max_transitions %d); the switch stays %s", len(st.Transitions), server.ShortDuration(p.FlapWindow), p.FlapMax, onOff(st.On))
	d.Action, d.Why = ActLock, d.Why+"would flip again: "+st.LockWhy
	return st, d
}

// fire turns the switch on, unless that would be one flip too many.
func fire(p Policy, st State, now time.Time, d Decision) (State, Decision) {
	if flapLimited(p, &st, now) {
		return lockFlapping(p, st, now, d)
	}
	d.Window = st.Window
	d.Action = ActTurnOn
	d.Why += fmt.Sprintf("fired: %s (held %s %s)", p.Trigger, now.Sub(st.Since).Round(time.Millisecond), st.Window)
	st.On, st.OnSince = true, now
	st.Transitions = append(st.Transitions, now)
	return settle(p, st, now), d
}

// recoverNow turns the switch off, or proposes it under confirm_recovery.
func recoverNow(p Policy, st State, now time.Time, d Decision) (State, Decision) {
	if p.ConfirmRecovery {
		d.Window = st.Window
		st.Phase, st.Since = PhaseAwaiting, now
		d.Action = ActPropose
		d.Why += fmt.Sprintf("proposes recovery: %s (held %s %s); a person confirms", p.Recover, now.Sub(st.Since).Round(time.Millisecond), st.Window)
		return st, d
	}
	if flapLimited(p, &st, now) {
		return lockFlapping(p, st, now, d)
	}
	d.Window = st.Window
	why := fmt.Sprintf("recovered: %s (held %s %s)", p.Recover, now.Sub(st.Since).Round(time.Millisecond), st.Window)
	return turnOff(p, st, now, d, why)
}

func turnOff(p Policy, st State, now time.Time, d Decision, why string) (State, Decision) {
	flapLimited(p, &st, now) // forget old flips; a confirmed recovery is never refused
	d.Action, d.Why = ActTurnOff, d.Why+why
	st.On, st.OnSince = false, time.Time{}
	st.ConfirmedBy, st.ConfirmedAt = "", time.Time{}
	st.Transitions = append(st.Transitions, now)
	return settle(p, st, now), d
}

// settle puts a rule that just flipped into cooldown, or at rest.
func settle(p Policy, st State, now time.Time) State {
	st.Since, st.Window = now, Window{}
	st.Phase = stable(st)
	if p.Cooldown > 0 {
		st.Phase, st.CooldownUntil = PhaseCooldown, now.Add(p.Cooldown)
	}
	return st
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

// Num is a number that may be ±Inf, encoded in JSON as "+Inf"/"-Inf".
type Num = signal.Num

func formatNum(f float64) string { return signal.FormatNum(f) }
