package rollout

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/sdk/wire"
	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/fleet"
	"github.com/switchyard-io/switchyard/server/signal"
)

var t0 = time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

func ptr[T any](v T) *T { return &v }

// healthPlan is the default template with one condition on every step:
// degraded p99 below 20 ms, one failure tolerated.
func healthPlan(onFailure, onNoData string) Plan {
	p, err := Template(TemplateDefault, DirectionOn, Gate{
		MinApplied: 1, FailureLimit: 1, OnNoData: onNoData, Interval: wire.Duration(10 * time.Second),
		Conditions: []Condition{{Source: "fleet", Query: `degraded_p99_seconds{switch="reco"}`, Op: "<", Threshold: 0.02}},
	})
	if err != nil {
		panic(err)
	}
	p.OnFailure = onFailure
	return p
}

// applied is the progress of a plan whose step index was applied at
// started with version v, converged at converged (nil: not yet).
func applied(index int, v int64, started time.Time, converged *time.Time) Progress {
	pr := Progress{Step: -1}
	for i := 0; i < index; i++ {
		pr.begin(i, wire.Rollout{Percent: float64(i + 1)}, false, "", v-int64(index-i), started.Add(-time.Hour))
		pr.end(OutcomePassed, "", started)
	}
	pr.begin(index, wire.Rollout{Percent: 1}, false, "", v, started)
	pr.Steps[len(pr.Steps)-1].ConvergedAt = converged
	return pr
}

func measured(pr Progress, when time.Time, passed bool) Progress {
	cur := pr.current()
	cur.MeasuredAt, cur.Passed, cur.Measurements = &when, passed, 1
	return pr
}

func withRequest(pr Progress, kind string) Progress {
	pr.Request = &Request{Kind: kind, By: "olga", Reason: "looks fine", At: t0}
	return pr
}

func pass(v float64) []Verdict {
	return []Verdict{Condition{Op: "<", Threshold: 0.02}.Verdict(0, value(v))}
}

var (
	noData    = []Verdict{{Condition: 0, Outcome: VerdictNoData}}
	unreached = []Verdict{{Condition: 0, Outcome: VerdictError, Error: "signal: source unavailable: connection refused"}}
	converged = Observation{Synced: true, Published: true, Revision: 40, Applied: 1, Targeted: 1}
)

// TestNext is the plan's state machine as a table: (plan, state,
// progress, observation, now) → (action, progress).
func TestNext(t *testing.T) {
	p := healthPlan(FailRevert, NoDataPause)
	plain, _ := Template(TemplateDefault, DirectionOn, Gate{MinApplied: 1, OnNoData: NoDataPause, Interval: wire.Duration(DefaultInterval)})
	half := plain
	half.Steps = append([]Step(nil), plain.Steps...)
	half.Steps[1].Gate.MinApplied = 0.5
	pausing := healthPlan(FailPause, NoDataPause)
	passing := healthPlan(FailRevert, NoDataPass)
	failing := healthPlan(FailRevert, NoDataFail)
	errFails, errPasses := healthPlan(FailRevert, NoDataPause), healthPlan(FailRevert, NoDataPause)
	for i := range errFails.Steps {
		errFails.Steps[i].Gate.OnError, errFails.Steps[i].Gate.FailureLimit = NoDataFail, 0
		errPasses.Steps[i].Gate.OnError = NoDataPass
	}
	conv := ptr(at(time.Minute))
	hold := 5 * time.Minute
	cases := []struct {
		name    string
		plan    Plan
		state   string
		in      Progress
		ob      Observation
		now     time.Time
		want    ActionKind
		step    int
		note    string // substring of the new note
		reason  string // substring of the action's reason
		check   func(t *testing.T, pr Progress)
		request bool
	}{
		{name: "pending applies the first step", plan: p, state: Pending, in: Progress{Step: -1}, now: t0, want: Apply, step: 0},
		{name: "a step not yet in etcd waits", plan: p, state: Running, in: applied(0, 5, t0, nil),
			ob: Observation{Synced: true}, now: at(time.Second), want: Wait, note: "version 5 of the switch to reach etcd"},
		{name: "an unsynced fleet model says so", plan: p, state: Running, in: applied(0, 5, t0, nil),
			ob: Observation{Published: true, Applied: 1, Targeted: 1}, now: at(time.Second), want: Wait, note: "not in sync"},
		{name: "a drill override holds the step", plan: p, state: Running, in: applied(0, 5, t0, nil),
			ob: Observation{Synced: true, Override: true}, now: at(time.Second), want: Wait, note: "override"},
		{name: "a step waits for its targets' acks", plan: p, state: Running, in: applied(0, 5, t0, nil),
			ob: Observation{Synced: true, Published: true, Revision: 40, Applied: 2, Targeted: 3}, now: at(time.Hour), want: Wait,
			note: "waiting for 3 of 3 targeted instances to apply revision 40 (2 have)",
			check: func(t *testing.T, pr Progress) {
				if c := pr.current(); c.ConvergedAt != nil || c.Applied != 2 || c.Targeted != 3 {
					t.Errorf("record %+v", c)
				}
			}},
		{name: "the first step needs an instance", plan: p, state: Running, in: applied(0, 5, t0, nil),
			ob: Observation{Synced: true, Published: true, Revision: 40}, now: at(time.Hour), want: Wait, note: "needs at least one"},
		{name: "a first step applied before the fleet joined is raised again", plan: p, state: Running, in: applied(0, 5, t0, nil),
			ob: Observation{Synced: true, Published: true, Revision: 40, Selectable: 3}, now: at(time.Minute), want: Apply, step: 0,
			reason: "reached none of the 3 live instances",
			check: func(t *testing.T, pr Progress) {
				if c := pr.current(); c.Outcome != OutcomeStopped {
					t.Errorf("record %+v", c)
				}
			}},
		{name: "a later step with no targeted instance converges", plan: plain, state: Running, in: applied(1, 6, t0, nil),
			ob: Observation{Synced: true, Published: true, Revision: 41}, now: at(time.Second), want: Wait, note: "holding until",
			check: func(t *testing.T, pr Progress) {
				if pr.current().ConvergedAt == nil {
					t.Error("not converged")
				}
			}},
		{name: "convergence starts the hold from now, not from the write", plan: p, state: Running, in: applied(0, 5, t0, nil),
			ob: converged, now: at(3 * time.Minute), want: Wait, note: "holding until " + at(8*time.Minute).Format(time.RFC3339),
			check: func(t *testing.T, pr Progress) {
				if c := pr.current(); c.ConvergedAt == nil || !c.ConvergedAt.Equal(at(3*time.Minute)) || c.Revision != 40 {
					t.Errorf("record %+v", c)
				}
			}},
		{name: "min_applied is a share", plan: half, state: Running, in: applied(1, 6, t0, nil),
			ob: Observation{Synced: true, Published: true, Revision: 41, Applied: 4, Targeted: 10}, now: at(time.Second), want: Wait, note: "waiting for 5 of 10"},
		{name: "min_applied met", plan: half, state: Running, in: applied(1, 6, t0, nil),
			ob: Observation{Synced: true, Published: true, Revision: 41, Applied: 5, Targeted: 10}, now: at(time.Second), want: Wait, note: "holding"},
		{name: "a passing measurement during the hold", plan: p, state: Running, in: applied(0, 5, t0, conv),
			ob: Observation{Verdicts: pass(0.004)}, now: at(2 * time.Minute), want: Wait, note: "holding",
			check: func(t *testing.T, pr Progress) {
				if c := pr.current(); c.Measurements != 1 || !c.Passed || *c.Verdicts[0].Value != 0.004 {
					t.Errorf("record %+v", c)
				}
			}},
		{name: "the hold is over but the last measurement is older", plan: p, state: Running, in: measured(applied(0, 5, t0, conv), at(5*time.Minute), true),
			now: at(time.Minute + hold), want: Wait, note: "waiting for a passing measurement"},
		{name: "a passing measurement at the end of the hold advances", plan: p, state: Running, in: applied(0, 5, t0, conv),
			ob: Observation{Verdicts: pass(0.004)}, now: at(time.Minute + hold), want: Apply, step: 1,
			check: func(t *testing.T, pr Progress) {
				if c := pr.current(); c.Outcome != OutcomePassed || c.EndedAt == nil {
					t.Errorf("record %+v", c)
				}
			}},
		{name: "no conditions: the hold alone", plan: plain, state: Running, in: applied(0, 5, t0, conv), now: at(time.Minute + hold), want: Apply, step: 1},
		{name: "no conditions: within the hold", plan: plain, state: Running, in: applied(0, 5, t0, conv), now: at(time.Minute + hold - time.Second), want: Wait},
		{name: "a failure within failure_limit", plan: p, state: Running, in: applied(0, 5, t0, conv),
			ob: Observation{Verdicts: pass(0.5)}, now: at(2 * time.Minute), want: Wait,
			check: func(t *testing.T, pr Progress) {
				if c := pr.current(); c.Failures != 1 || c.Passed || c.EndedAt != nil {
					t.Errorf("record %+v", c)
				}
			}},
		{name: "failures past failure_limit revert", plan: p, state: Running, in: func() Progress {
			pr := applied(0, 5, t0, conv)
			pr.current().Failures = 1
			return pr
		}(), ob: Observation{Verdicts: pass(0.5)}, now: at(2 * time.Minute), want: Revert, reason: "step 1 failed its gate: condition 1 (fleet degraded_p99_seconds{switch=\"reco\"} < 0.02) was 0.5 (2 failed measurements, 1 tolerated)",
			check: func(t *testing.T, pr Progress) {
				if c := pr.current(); c.Outcome != OutcomeFailed {
					t.Errorf("record %+v", c)
				}
			}},
		{name: "on_failure pause", plan: pausing, state: Running, in: func() Progress {
			pr := applied(0, 5, t0, conv)
			pr.current().Failures = 1
			return pr
		}(), ob: Observation{Verdicts: pass(0.5)}, now: at(2 * time.Minute), want: Pause, reason: "failed its gate"},
		{name: "no data pauses: no data is not health", plan: p, state: Running, in: applied(0, 5, t0, conv),
			ob: Observation{Verdicts: noData}, now: at(2 * time.Minute), want: Pause, reason: "had no data, and no data is not health"},
		{name: "no data as a pass, if the plan says so", plan: passing, state: Running, in: applied(0, 5, t0, conv),
			ob: Observation{Verdicts: noData}, now: at(time.Minute + hold), want: Apply, step: 1},
		{name: "no data as a failure, if the plan says so", plan: failing, state: Running, in: applied(0, 5, t0, conv),
			ob: Observation{Verdicts: noData}, now: at(2 * time.Minute), want: Wait,
			check: func(t *testing.T, pr Progress) {
				if pr.current().Failures != 1 {
					t.Errorf("failures %d", pr.current().Failures)
				}
			}},
		{name: "an unreachable source is neither pass nor failure", plan: p, state: Running, in: applied(0, 5, t0, conv),
			ob: Observation{Verdicts: unreached}, now: at(time.Minute + hold), want: Wait, note: "waiting for a passing measurement",
			check: func(t *testing.T, pr Progress) {
				if c := pr.current(); pr.Errors != 1 || c.Failures != 0 || c.Passed {
					t.Errorf("errors %d, record %+v", pr.Errors, c)
				}
			}},
		{name: "an unreachable source for ErrorLimit measurements pauses", plan: p, state: Running, in: func() Progress {
			pr := applied(0, 5, t0, conv)
			pr.Errors = ErrorLimit - 1
			return pr
		}(), ob: Observation{Verdicts: unreached}, now: at(2 * time.Minute), want: Pause, reason: "3 measurements in a row could not ask the source"},
		{name: "an error as a failure, if the plan says so (on_error breaching)", plan: errFails, state: Running, in: applied(0, 5, t0, conv),
			ob: Observation{Verdicts: unreached}, now: at(2 * time.Minute), want: Revert, reason: "could not be measured"},
		{name: "an error as a pass, if the plan says so (on_error not_breaching)", plan: errPasses, state: Running, in: applied(0, 5, t0, conv),
			ob: Observation{Verdicts: unreached}, now: at(time.Minute + hold), want: Apply, step: 1},
		{name: "a change outside the plan pauses it", plan: p, state: Running, in: applied(0, 5, t0, conv),
			ob: Observation{Changed: "version 6 by expiry: expired"}, now: at(2 * time.Minute), want: Pause, reason: "changed outside the plan (version 6 by expiry"},
		{name: "a deleted switch ends the plan", plan: p, state: Running, in: applied(0, 5, t0, conv),
			ob: Observation{Gone: true}, now: at(2 * time.Minute), want: Abort},
		{name: "the last step passing finishes", plan: plain, state: Running, in: applied(2, 7, t0, conv), now: at(time.Minute), want: Finish},
		{name: "a paused plan waits", plan: p, state: Paused, in: applied(0, 5, t0, conv), ob: converged, now: at(time.Hour), want: Wait},
		{name: "advance ends the step and applies the next", plan: p, state: Running, in: withRequest(applied(0, 5, t0, nil), RequestAdvance),
			ob: Observation{Synced: true}, now: at(time.Second), want: Apply, step: 1, reason: "advanced by olga: looks fine", request: true,
			check: func(t *testing.T, pr Progress) {
				if c := pr.current(); c.Outcome != OutcomeAdvanced || pr.Request != nil {
					t.Errorf("record %+v, request %+v", c, pr.Request)
				}
			}},
		{name: "advance on the last step finishes", plan: p, state: Running, in: withRequest(applied(2, 7, t0, nil), RequestAdvance), now: at(time.Second), want: Finish, request: true},
		{name: "abort with revert", plan: p, state: Paused, in: withRequest(applied(1, 6, t0, conv), RequestRevert), now: at(time.Second), want: Revert, reason: "aborted by olga", request: true},
		{name: "resume before the first step applies it, over a person's change", plan: p, state: Running, in: withRequest(Progress{Step: -1}, RequestReapply),
			ob: Observation{Changed: "version 3 by olga: on"}, now: at(time.Second), want: Apply, step: 0, request: true},
		{name: "resume applies the step again, over a person's change", plan: p, state: Running, in: withRequest(applied(1, 6, t0, conv), RequestReapply),
			ob: Observation{Changed: "version 7 by olga: off"}, now: at(time.Second), want: Apply, step: 1, request: true,
			check: func(t *testing.T, pr Progress) {
				if c := pr.current(); c.Outcome != OutcomeStopped {
					t.Errorf("record %+v", c)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := json.Marshal(tc.in)
			pr, act := Next(tc.plan, tc.state, tc.in, tc.ob, tc.now)
			if after, _ := json.Marshal(tc.in); string(after) != string(before) {
				t.Fatal("Next changed its input")
			}
			if act.Kind != tc.want || (act.Kind == Apply && act.Step != tc.step) {
				t.Fatalf("action %+v, want kind %d step %d", act, tc.want, tc.step)
			}
			if act.Requested != tc.request {
				t.Errorf("requested %v", act.Requested)
			}
			if !strings.Contains(pr.Note, tc.note) {
				t.Errorf("note %q, want %q", pr.Note, tc.note)
			}
			if !strings.Contains(act.Reason, tc.reason) {
				t.Errorf("reason %q, want %q", act.Reason, tc.reason)
			}
			if tc.check != nil {
				tc.check(t, pr)
			}
		})
	}
}

func TestMeasureDue(t *testing.T) {
	p := healthPlan(FailRevert, NoDataPause)
	conv := ptr(at(time.Minute))
	cases := []struct {
		name  string
		state string
		pr    Progress
		now   time.Time
		want  bool
	}{
		{"not converged", Running, applied(0, 5, t0, nil), at(time.Hour), false},
		{"converged, never measured", Running, applied(0, 5, t0, conv), at(time.Minute), true},
		{"within the interval", Running, measured(applied(0, 5, t0, conv), at(2*time.Minute), true), at(2*time.Minute + 9*time.Second), false},
		{"an interval later", Running, measured(applied(0, 5, t0, conv), at(2*time.Minute), true), at(2*time.Minute + 10*time.Second), true},
		{"the hold just ended", Running, measured(applied(0, 5, t0, conv), at(5*time.Minute+59*time.Second), true), at(6 * time.Minute), true},
		{"paused", Paused, applied(0, 5, t0, conv), at(time.Hour), false},
		{"a request is pending", Running, withRequest(applied(0, 5, t0, conv), RequestAdvance), at(time.Hour), false},
	}
	for _, tc := range cases {
		if got := MeasureDue(p, tc.state, tc.pr, tc.now); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	plain, _ := Template(TemplateDefault, DirectionOn, Gate{MinApplied: 1})
	if MeasureDue(plain, Running, applied(0, 5, t0, conv), at(time.Hour)) {
		t.Error("a gate without conditions is never measured")
	}
}

func value(v float64) signal.Measurement {
	return signal.Measurement{Outcome: signal.OutcomeValue, Value: v}
}

func TestVerdict(t *testing.T) {
	c := Condition{Op: "<=", Threshold: 1}
	cases := []struct {
		m    signal.Measurement
		want string
	}{
		{value(1), VerdictPass}, {value(1.5), VerdictFail}, {signal.Measurement{Outcome: signal.OutcomeNoData}, VerdictNoData},
		{value(math.Inf(1)), VerdictFail}, {signal.Measurement{Outcome: signal.OutcomeError, Err: "refused\nconnection"}, VerdictError},
	}
	for _, tc := range cases {
		v := c.Verdict(0, tc.m)
		if v.Outcome != tc.want || strings.Contains(v.Error, "\n") {
			t.Errorf("%+v: %+v", tc.m, v)
		}
		if _, err := json.Marshal(v); err != nil {
			t.Errorf("%+v does not encode: %v", v, err)
		}
	}
	var back Verdict
	b, _ := json.Marshal(c.Verdict(0, value(math.Inf(-1))))
	if err := json.Unmarshal(b, &back); err != nil || !math.IsInf(float64(*back.Value), -1) {
		t.Errorf("-Inf round trip: %s → %+v %v", b, back, err)
	}
}

// members are instances whose buckets for checkout/reco the test knows.
func members(t *testing.T, n int, labels func(i int) map[string]string) []fleet.Member {
	t.Helper()
	var out []fleet.Member
	for i := 0; i < n; i++ {
		m := fleet.Member{ID: "inst-" + string(rune('a'+i))}
		if labels != nil {
			m.Labels = labels(i)
		}
		out = append(out, m)
	}
	return out
}

func TestTarget(t *testing.T) {
	const app, name = "checkout", "reco"
	p, _ := Template(TemplateDefault, DirectionOn, Gate{})
	ms := members(t, 5, func(i int) map[string]string {
		if i == 3 {
			return map[string]string{"canary": "true"}
		}
		return nil
	})
	low, who := wire.Buckets, ""
	for _, m := range ms {
		if b := wire.Bucket(app, name, m.ID); b < low {
			low, who = b, m.ID
		}
	}
	if low < 100 {
		t.Fatalf("the test needs five instances none of which is in 1 %%; %s has bucket %d", who, low)
	}
	inst := wire.Rollout{Percent: 100, Stickiness: wire.StickyInstance}

	r, off, raised := Target(p, 0, app, name, inst, nil, ms)
	if off || r.Basis() != low+1 || !strings.Contains(raised, who+" is in") {
		t.Fatalf("first step: %+v %v %q; want basis %d naming %s", r, off, raised, low+1, who)
	}
	if !Includes(app, name, false, r)(fleet.Member{ID: who}) {
		t.Fatalf("%s is not in the raised first step", who)
	}
	in := 0
	for _, m := range ms {
		if Includes(app, name, false, r)(m) {
			in++
		}
	}
	if in != 1 {
		t.Errorf("the raised first step reaches %d instances, want exactly 1", in)
	}
	if _, _, raised := Target(p, 0, app, name, inst, nil, nil); raised != "" {
		t.Errorf("no live instance: raised %q", raised)
	}
	key := wire.Rollout{Percent: 100, Stickiness: wire.StickyKey}
	if r, _, raised := Target(p, 0, app, name, key, nil, ms); r.Percent != 1 || raised != "" || r.Stickiness != wire.StickyKey {
		t.Errorf("key stickiness: %+v %q (1 %% of keys is not rounded to instances)", r, raised)
	}
	// A later step below the raise keeps it: widening only adds members.
	big := &StepRecord{Index: 0, Rollout: wire.Rollout{Percent: 73.5, Stickiness: wire.StickyInstance}}
	if r, _, raised := Target(p, 1, app, name, big.Rollout, big, ms); r.Percent != 73.5 || !strings.Contains(raised, "kept at 73.5 %") {
		t.Errorf("step 2 after a raise to 73.5 %%: %+v %q", r, raised)
	}
	// A selector step is raised among the instances it selects.
	canaries, _ := Template(TemplateCanaries, DirectionOn, Gate{})
	canaries.Steps[0].Percent = 1
	r, _, raised = Target(canaries, 0, app, name, inst, nil, ms)
	if r.Selector != CanarySelector || r.Basis() != wire.Bucket(app, name, "inst-d")+1 || !strings.Contains(raised, "inst-d") {
		t.Errorf("canary step: %+v %q", r, raised)
	}
	// A turn-off's last step keeps the rollout and turns off.
	down, _ := Template(TemplateDefault, DirectionOff, Gate{})
	half := wire.Rollout{Percent: 50, Stickiness: wire.StickyKey}
	if r, off, _ := Target(down, 1, app, name, half, nil, ms); !off || !r.Equal(half) {
		t.Errorf("off step: %+v %v", r, off)
	}
	if r, _, _ := Target(down, 0, app, name, inst, nil, ms); r.Percent != 50 {
		t.Errorf("a turn-off is never raised: %+v", r)
	}
}

func TestNeeded(t *testing.T) {
	for _, tc := range []struct {
		share    float64
		targeted int
		want     int
	}{{1, 20, 20}, {0.5, 20, 10}, {0.5, 3, 2}, {0.01, 20, 1}, {1, 0, 0}, {0.9, 10, 9}} {
		if got := Needed(tc.share, tc.targeted); got != tc.want {
			t.Errorf("Needed(%v, %d) = %d, want %d", tc.share, tc.targeted, got, tc.want)
		}
	}
}

func TestChecksAgainstTheSwitch(t *testing.T) {
	def, _ := Template(TemplateDefault, DirectionOn, Gate{})
	down, _ := Template(TemplateDefault, DirectionOff, Gate{})
	sw := func(state string, pct float64, sel string) *server.Switch {
		return &server.Switch{State: state, RolloutBasis: int(pct * 100), RolloutStickiness: wire.StickyInstance, RolloutSelector: sel}
	}
	cases := []struct {
		name  string
		p     Plan
		sw    *server.Switch
		field string
	}{
		{"turn on an off switch", def, sw(wire.StateOff, 100, ""), ""},
		{"widen a switch on at 0.5 %", def, sw(wire.StateOn, 0.5, ""), ""},
		{"a switch on at 60 % cannot start at 1 %", def, sw(wire.StateOn, 60, ""), "template"},
		{"a switch on where zone=a widens to all", def, sw(wire.StateOn, 0.5, "zone=a"), ""},
		{"turn off a switch on at 100 %", down, sw(wire.StateOn, 100, ""), ""},
		{"turn off an off switch", down, sw(wire.StateOff, 100, ""), "direction"},
		{"turn off a switch on at 20 % through 50 %", down, sw(wire.StateOn, 20, ""), "template"},
	}
	for _, tc := range cases {
		err := tc.p.checkSwitch(tc.sw, true)
		if got := fieldOf(err); got != tc.field {
			t.Errorf("%s: field %q, want %q (%v)", tc.name, got, tc.field, err)
		}
	}
}

func fieldOf(err error) string {
	var ve *server.ValidationError
	if errors.As(err, &ve) {
		return ve.Fields[0].Field
	}
	if err != nil {
		return "not a validation error: " + err.Error()
	}
	return ""
}
