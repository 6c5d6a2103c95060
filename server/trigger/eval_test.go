package trigger

import (
	"math"
	"strings"
	"testing"
	"time"
)

// t0 is the start of every table: tests inject time, none sleeps.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// cpu is the 80 %/60 % example of the reference articles: on above 80 %
// for 30 s, off below 60 % for 1 m, evaluated every 10 s.
func cpu() Policy {
	return Policy{
		Trigger:  Condition{Op: Above, Threshold: 80, For: 30 * time.Second},
		Recover:  Condition{Op: Below, Threshold: 60, For: time.Minute},
		OnNoData: MissingHold, FlapMax: 4, FlapWindow: time.Hour, Interval: 10 * time.Second,
	}
}

// step is one evaluation of a table: at t0+at, sample s; then the phase
// and action it must give. A step with do set runs it on the state
// instead of evaluating (a person pausing, resuming, confirming).
type step struct {
	at     time.Duration
	s      Sample
	phase  Phase
	action Action
	do     func(State, time.Time) State
}

func v(at time.Duration, x float64, ph Phase, a Action) step {
	return step{at: at, s: Value(x), phase: ph, action: a}
}
func nd(at time.Duration, ph Phase, a Action) step {
	return step{at: at, s: NoData(), phase: ph, action: a}
}
func fail(at time.Duration, ph Phase, a Action) step {
	return step{at: at, s: Failed("connection refused"), phase: ph, action: a}
}
func person(at time.Duration, ph Phase, do func(State, time.Time) State) step {
	return step{at: at, phase: ph, do: do}
}

const s = time.Second

// run plays steps from state st and checks each; it returns the decisions.
func run(t *testing.T, p Policy, st State, steps []step) (State, []Decision) {
	t.Helper()
	var ds []Decision
	for i, sp := range steps {
		now := t0.Add(sp.at)
		if sp.do != nil {
			st = sp.do(st, now)
			if st.Phase != sp.phase {
				t.Fatalf("step %d (+%s, person): phase %s, want %s", i, sp.at, st.Phase, sp.phase)
			}
			continue
		}
		var d Decision
		st, d = Evaluate(p, st, sp.s, now)
		ds = append(ds, d)
		if st.Phase != sp.phase || d.Action != sp.action {
			t.Fatalf("step %d (+%s, %s): phase %s action %q, want %s %q (%s)", i, sp.at, sp.s, st.Phase, d.Action, sp.phase, sp.action, d.Why)
		}
		if d.From == "" || d.To != st.Phase || d.Why == "" {
			t.Fatalf("step %d: decision %+v does not say where from, where to and why", i, d)
		}
	}
	return st, ds
}

// TestEvaluate is the state machine, as tables with injected time.
func TestEvaluate(t *testing.T) {
	ok := Fresh(false, t0)
	on := Fresh(true, t0)
	cooled := func(p Policy, d time.Duration) Policy { p.Cooldown = d; return p }
	missing := func(p Policy, m string) Policy { p.OnNoData = m; return p }
	onError := func(p Policy, m string) Policy { p.OnError = m; return p }
	withMaxOn := func(p Policy, d time.Duration) Policy { p.MaxOn = d; return p }
	confirm := func(p Policy) Policy { p.ConfirmRecovery = true; return p }

	cases := []struct {
		name  string
		p     Policy
		start State
		steps []step
	}{
		{"80/60: on after 30 s above 80, off after 1 m below 60", cpu(), ok, []step{
			v(0, 70, PhaseOK, ActNone),
			v(10*s, 85, PhasePendingOn, ActNone),
			v(20*s, 90, PhasePendingOn, ActNone),
			v(30*s, 95, PhasePendingOn, ActNone),
			v(40*s, 88, PhaseOn, ActTurnOn), // 30 s after the first crossing
			v(50*s, 70, PhaseOn, ActNone),   // below 80 is not recovered: hysteresis
			v(60*s, 62, PhaseOn, ActNone),
			v(70*s, 55, PhasePendingOff, ActNone),
			v(80*s, 50, PhasePendingOff, ActNone),
			v(120*s, 45, PhasePendingOff, ActNone),
			v(130*s, 40, PhaseOK, ActTurnOff), // 1 m after the first sample below 60
		}},
		{"80/60: a dip between the thresholds cancels a hold", cpu(), ok, []step{
			v(0, 85, PhasePendingOn, ActNone),
			v(10*s, 90, PhasePendingOn, ActNone),
			v(20*s, 79, PhaseOK, ActNone),
			v(30*s, 85, PhasePendingOn, ActNone),
			v(50*s, 85, PhasePendingOn, ActNone),
			v(60*s, 85, PhaseOn, ActTurnOn),
			v(70*s, 50, PhasePendingOff, ActNone),
			v(80*s, 65, PhaseOn, ActNone), // back above 60: the recovery hold starts over
		}},
		{"80/60: 65↔85 every sample flips once and stays on", func() Policy { p := cpu(); p.Trigger.For = 0; return p }(), ok, []step{
			v(0, 85, PhaseOn, ActTurnOn),
			v(10*s, 65, PhaseOn, ActNone),
			v(20*s, 85, PhaseOn, ActNone),
			v(30*s, 65, PhaseOn, ActNone),
			v(40*s, 85, PhaseOn, ActNone),
			v(50*s, 65, PhaseOn, ActNone),
		}},
		{"for 0 and recover 0 flip at once", func() Policy { p := cpu(); p.Trigger.For, p.Recover.For = 0, 0; return p }(), ok, []step{
			v(0, 81, PhaseOn, ActTurnOn),
			v(10*s, 59, PhaseOK, ActTurnOff),
		}},
		{">= and <= include the threshold", Policy{Trigger: Condition{Op: AtLeast, Threshold: 80}, Recover: Condition{Op: AtMost, Threshold: 60},
			OnNoData: MissingHold, FlapMax: 4, FlapWindow: time.Hour}, ok, []step{
			v(0, 80, PhaseOn, ActTurnOn),
			v(10*s, 60, PhaseOK, ActTurnOff),
		}},
		{"downward rule: on below 1 request/s, off above 5", Policy{Trigger: Condition{Op: Below, Threshold: 1, For: 10 * s}, Recover: Condition{Op: Above, Threshold: 5, For: 10 * s},
			OnNoData: MissingHold, FlapMax: 4, FlapWindow: time.Hour, Interval: 10 * s}, ok, []step{
			v(0, 3, PhaseOK, ActNone),
			v(10*s, 0, PhasePendingOn, ActNone),
			v(20*s, 0.5, PhaseOn, ActTurnOn),
			v(30*s, 4, PhaseOn, ActNone),
			v(40*s, 6, PhasePendingOff, ActNone),
			v(50*s, 7, PhaseOK, ActTurnOff),
		}},
		{"hold: no data never advances, resets or flips", cpu(), ok, []step{
			v(0, 85, PhasePendingOn, ActNone),
			nd(10*s, PhasePendingOn, ActNone),
			fail(20*s, PhasePendingOn, ActNone),
			v(30*s, 90, PhaseOn, ActTurnOn), // the hold ran on: 30 s since the crossing, short gap
			nd(40*s, PhaseOn, ActNone),
			fail(50*s, PhaseOn, ActNone), // an error is not 0: 0 < 60 would start recovery
			fail(200*s, PhaseOn, ActNone),
		}},
		{"hold: a gap longer than the hold starts it over", cpu(), ok, []step{
			v(0, 85, PhasePendingOn, ActNone),
			nd(10*s, PhasePendingOn, ActNone),
			nd(60*s, PhasePendingOn, ActNone),
			v(70*s, 90, PhasePendingOn, ActNone), // 70 s without evidence > 30 s: start over
			v(90*s, 90, PhasePendingOn, ActNone),
			v(100*s, 90, PhaseOn, ActTurnOn),
		}},
		{"hold: an error never turns a downward rule on", Policy{Trigger: Condition{Op: Below, Threshold: 1}, Recover: Condition{Op: Above, Threshold: 5},
			OnNoData: MissingHold, FlapMax: 4, FlapWindow: time.Hour}, ok, []step{
			v(0, 100, PhaseOK, ActNone),
			fail(10*s, PhaseOK, ActNone),
			nd(20*s, PhaseOK, ActNone),
		}},
		{"breaching: no data crosses", missing(cpu(), MissingBreaching), ok, []step{
			nd(0, PhasePendingOn, ActNone),
			nd(10*s, PhasePendingOn, ActNone),
			nd(20*s, PhasePendingOn, ActNone),
			nd(30*s, PhaseOn, ActTurnOn),
			nd(100*s, PhaseOn, ActNone), // and never recovers
		}},
		{"not_breaching: no data recovers", missing(cpu(), MissingNotBreaching), on, []step{
			nd(0, PhasePendingOff, ActNone),
			nd(30*s, PhasePendingOff, ActNone),
			nd(60*s, PhaseOK, ActTurnOff),
			nd(70*s, PhaseOK, ActNone), // and never fires
		}},
		{"not_breaching: no data cancels a hold to fire", missing(cpu(), MissingNotBreaching), ok, []step{
			v(0, 85, PhasePendingOn, ActNone),
			nd(10*s, PhaseOK, ActNone),
		}},
		{"not_breaching on_error: an error cancels a hold to fire", onError(cpu(), MissingNotBreaching), ok, []step{
			v(0, 85, PhasePendingOn, ActNone),
			fail(10*s, PhaseOK, ActNone),
		}},
		{"an error is not no data: breaching no data, errors hold", missing(cpu(), MissingBreaching), ok, []step{
			fail(0, PhaseOK, ActNone),
			fail(100*s, PhaseOK, ActNone),
			nd(110*s, PhasePendingOn, ActNone),
			fail(200*s, PhasePendingOn, ActNone), // an error neither advances nor resets the hold
		}},
		{"breaching on_error: an outage crosses", onError(cpu(), MissingBreaching), ok, []step{
			fail(0, PhasePendingOn, ActNone),
			fail(30*s, PhaseOn, ActTurnOn),
		}},
		{"cooldown: no hold starts before it ends", cooled(func() Policy { p := cpu(); p.Trigger.For, p.Recover.For = 0, 0; return p }(), time.Minute), ok, []step{
			v(0, 85, PhaseCooldown, ActTurnOn),
			v(10*s, 50, PhaseCooldown, ActNone),
			v(50*s, 50, PhaseCooldown, ActNone),
			v(60*s, 50, PhaseCooldown, ActTurnOff), // cooldown over: the sample is judged at once
			v(70*s, 85, PhaseCooldown, ActNone),
			v(120*s, 85, PhaseCooldown, ActTurnOn),
		}},
		{"max_on hands the switch to a person, left on", withMaxOn(cpu(), 2*time.Minute), ok, []step{
			v(0, 85, PhasePendingOn, ActNone),
			v(30*s, 85, PhaseOn, ActTurnOn),
			v(100*s, 90, PhaseOn, ActNone),
			v(150*s, 90, PhaseLocked, ActHandOff), // on since +30 s: 2 m reached
			v(160*s, 10, PhaseLocked, ActNone),    // the rule does nothing more
			v(300*s, 10, PhaseLocked, ActNone),
		}},
		{"max_on also ends a recovery hold", withMaxOn(cpu(), 90*s), on, []step{
			v(60*s, 50, PhasePendingOff, ActNone),
			v(90*s, 50, PhaseLocked, ActHandOff),
		}},
		{"confirm_recovery: proposes, withdraws, and turns off once confirmed", confirm(cpu()), on, []step{
			v(0, 50, PhasePendingOff, ActNone),
			v(60*s, 50, PhaseAwaiting, ActPropose),
			v(70*s, 50, PhaseAwaiting, ActNone), // never off by itself
			v(80*s, 70, PhaseOn, ActWithdraw),   // not recovered any more
			v(90*s, 50, PhasePendingOff, ActNone),
			v(150*s, 40, PhaseAwaiting, ActPropose),
			person(160*s, PhaseAwaiting, func(st State, now time.Time) State { st.ConfirmedBy, st.ConfirmedAt = "olga", now; return st }),
			fail(170*s, PhaseOK, ActTurnOff), // a person decided: the metric is not asked
		}},
		{"confirm_recovery and max_on: nobody confirms, handed off", withMaxOn(confirm(cpu()), 5*time.Minute), on, []step{
			v(0, 50, PhasePendingOff, ActNone),
			v(60*s, 50, PhaseAwaiting, ActPropose),
			v(299*s, 50, PhaseAwaiting, ActNone),
			v(300*s, 50, PhaseLocked, ActHandOff),
		}},
		{"a person's change pauses the rule until resumed", func() Policy { p := cpu(); p.Recover.For = 0; return p }(), on, []step{
			person(5*s, PhaseOn, func(st State, now time.Time) State { return st.Pause("olga", "olga turned the switch off", now) }),
			v(10*s, 10, PhaseOn, ActNone), // would recover: paused, does nothing
			v(20*s, 95, PhaseOn, ActNone),
			person(30*s, PhaseOK, func(st State, now time.Time) State { return st.Resume(false, now) }), // the switch is off now
			v(40*s, 95, PhasePendingOn, ActNone),
			v(70*s, 95, PhaseOn, ActTurnOn),
		}},
		{"a leader gap shorter than the hold keeps the pending-since", cpu(), ok, []step{
			v(0, 85, PhasePendingOn, ActNone),
			v(10*s, 85, PhasePendingOn, ActNone),
			// the leader dies; a new one evaluates 15 s later
			v(25*s, 85, PhasePendingOn, ActNone),
			v(30*s, 85, PhaseOn, ActTurnOn), // the moment the old leader would have fired
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { run(t, tc.p, tc.start, tc.steps) })
	}
}

// TestOscillationLocks: a value between 65 % and 85 % every sample, with
// the recover threshold at 70 % so each swing crosses both: without a
// cooldown it would flip every sample. It flips at most once per cooldown,
// and more than flap.max_transitions flips in flap.window lock it, the
// switch left as it is.
func TestOscillationLocks(t *testing.T) {
	p := Policy{
		Trigger: Condition{Op: Above, Threshold: 80}, Recover: Condition{Op: Below, Threshold: 70},
		Cooldown: time.Minute, OnNoData: MissingHold, FlapMax: 3, FlapWindow: 10 * time.Minute, Interval: 10 * s,
	}
	st := Fresh(false, t0)
	var flips []time.Time
	var lock Decision
	for i := 0; i < 60; i++ { // ten minutes
		x := 85.0
		if i%2 == 1 {
			x = 65
		}
		now := t0.Add(time.Duration(i) * 10 * s)
		var d Decision
		st, d = Evaluate(p, st, Value(x), now)
		if d.Action.Flips() {
			flips = append(flips, now)
		}
		if d.Action == ActLock {
			lock = d
		}
	}
	if len(flips) != p.FlapMax {
		t.Fatalf("%d flips, want %d (then locked): %v", len(flips), p.FlapMax, flips)
	}
	for i := 1; i < len(flips); i++ {
		if gap := flips[i].Sub(flips[i-1]); gap < p.Cooldown {
			t.Errorf("flips %d and %d only %s apart, cooldown %s", i-1, i, gap, p.Cooldown)
		}
	}
	if st.Phase != PhaseLocked || st.Lock != LockFlapping || lock.Action != ActLock {
		t.Fatalf("after flapping: %+v (lock decision %+v)", st, lock)
	}
	if !st.On {
		t.Error("the lock changed the switch: it was on after the third flip and must stay on")
	}
	if !strings.Contains(lock.Why, "3 flips within 10m") {
		t.Errorf("the lock does not say why: %q", lock.Why)
	}
	t.Logf("65↔85 every 10 s, cooldown 1m: flips at %v, locked at +%s", offsets(flips), lock.Window.From.Sub(t0))
}

func offsets(ts []time.Time) []time.Duration {
	out := make([]time.Duration, len(ts))
	for i, x := range ts {
		out[i] = x.Sub(t0)
	}
	return out
}

// TestWindowIsTheEvidence: the decision that fires carries the values
// that crossed, with no data and errors counted apart.
func TestWindowIsTheEvidence(t *testing.T) {
	p := cpu()
	p.Trigger.For = 40 * s
	st := Fresh(false, t0)
	var d Decision
	for i, smp := range []Sample{Value(85), NoData(), Failed("timeout"), Value(math.Inf(1)), Value(91)} {
		st, d = Evaluate(p, st, smp, t0.Add(time.Duration(i)*10*s))
	}
	if d.Action != ActTurnOn {
		t.Fatalf("did not fire: %+v", d)
	}
	w := d.Window
	if w.Values != 3 || w.NoData != 1 || w.Errors != 1 || w.First != 85 || w.Last != 91 || w.Min != 85 || !math.IsInf(float64(w.Max), 1) || !w.From.Equal(t0) {
		t.Fatalf("window %+v", w)
	}
	if !strings.Contains(d.Why, "3 values 85…+Inf, last 91, 1 no data, 1 errors") {
		t.Errorf("why: %q", d.Why)
	}
}

func TestNumJSON(t *testing.T) {
	for _, n := range []Num{0, 80.5, Num(math.Inf(1)), Num(math.Inf(-1))} {
		b, err := n.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		var back Num
		if err := back.UnmarshalJSON(b); err != nil || back != n {
			t.Fatalf("%v → %s → %v %v", n, b, back, err)
		}
	}
}

// TestDue: the job wakes when a hold, a cooldown or max_on ends.
func TestDue(t *testing.T) {
	p := cpu()
	p.Cooldown, p.MaxOn = time.Minute, time.Hour
	pendingOn, _ := Evaluate(p, Fresh(false, t0), Value(85), t0)
	on := Fresh(true, t0)
	pendingOff, _ := Evaluate(p, on, Value(50), t0.Add(10*s))
	cooling, _ := Evaluate(p, pendingOn, Value(85), t0.Add(30*s))
	for _, tc := range []struct {
		name string
		st   State
		want time.Time
	}{
		{"ok", Fresh(false, t0), time.Time{}},
		{"pending on: the hold ends", pendingOn, t0.Add(30 * s)},
		{"on: max_on", on, t0.Add(time.Hour)},
		{"pending off: the hold ends", pendingOff, t0.Add(70 * s)},
		{"cooldown ends", cooling, t0.Add(90 * s)},
		{"paused", pendingOn.Pause("olga", "r", t0), time.Time{}},
	} {
		if got := Due(p, tc.st); !got.Equal(tc.want) {
			t.Errorf("%s (%s): due %v, want %v", tc.name, tc.st.Phase, got, tc.want)
		}
	}
}
