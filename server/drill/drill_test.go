package drill

import (
	"strings"
	"testing"
	"time"
)

func mustPlan(t *testing.T, s Spec) *plan {
	t.Helper()
	if s.Switch == "" {
		s.Switch = "recommend"
	}
	if s.Duration == "" {
		s.Duration = "1m"
	}
	if s.Target.Percent == nil && s.Target.Selector == "" {
		s.Target.Selector = "canary=true"
	}
	if s.Probes == nil {
		s.Probes = []Probe{{URL: "http://svc/x"}}
	}
	p, err := s.compile()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestDueAt: the cron times owed between the last one dealt with and now,
// in the drill's time zone: none yet, one on time, one late within the
// starting deadline, missed ones counted once.
func TestDueAt(t *testing.T) {
	berlin, _ := time.LoadLocation("Europe/Berlin")
	at := func(d, h, m int) time.Time { return time.Date(2030, 3, d, h, m, 0, 0, berlin).UTC() }
	pl := mustPlan(t, Spec{Schedule: "30 3 * * *", Timezone: "Europe/Berlin", StartingDeadline: "5m"})
	for _, tc := range []struct {
		name        string
		last, now   time.Time
		start       time.Time
		missed      int
		missedFirst time.Time
	}{
		{"before the time", at(4, 3, 0), at(4, 3, 29), time.Time{}, 0, time.Time{}},
		{"at the time", at(4, 3, 0), at(4, 3, 30), at(4, 3, 30), 0, time.Time{}},
		{"late within the deadline", at(4, 3, 0), at(4, 3, 35), at(4, 3, 30), 0, time.Time{}},
		{"late beyond the deadline", at(4, 3, 0), at(4, 3, 36), time.Time{}, 1, at(4, 3, 30)},
		{"down for days, due now", at(1, 4, 0), at(4, 3, 31), at(4, 3, 30), 2, at(2, 3, 30)},
		{"down for days, nothing due", at(1, 4, 0), at(4, 12, 0), time.Time{}, 3, at(2, 3, 30)},
	} {
		du := dueAt(pl, tc.last, tc.now)
		if !du.Start.Equal(tc.start) || du.MissedCount != tc.missed || (tc.missed > 0 && !du.Missed[0].Equal(tc.missedFirst)) {
			t.Errorf("%s: %+v", tc.name, du)
		}
	}
	// 03:30 Berlin is 02:30 UTC in winter and 01:30 UTC in summer.
	if next := pl.next(at(30, 4, 0)); !next.Equal(time.Date(2030, 3, 31, 1, 30, 0, 0, time.UTC)) {
		t.Errorf("after the switch to summer time: %v", next)
	}
	off := mustPlan(t, Spec{Schedule: "30 3 * * *", Enabled: new(bool)})
	if du := dueAt(off, at(1, 0, 0), at(9, 0, 0)); !du.Start.IsZero() || du.MissedCount != 0 {
		t.Errorf("disabled drill owes %+v", du)
	}
}

// TestBlackout: fixed and recurring windows, start inclusive, end exclusive.
func TestBlackout(t *testing.T) {
	start, end := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2030, 1, 2, 0, 0, 0, 0, time.UTC)
	pl := mustPlan(t, Spec{Timezone: "UTC", Blackout: []Blackout{{Start: &start, End: &end}, {Cron: "0 9 * * 1-5", Duration: "8h"}}})
	for _, tc := range []struct {
		t    time.Time
		want bool
	}{
		{start, true}, {end.Add(-time.Second), true}, {end, false},
		{time.Date(2030, 1, 7, 9, 0, 0, 0, time.UTC), true},   // Monday 09:00
		{time.Date(2030, 1, 7, 16, 59, 0, 0, time.UTC), true}, // Monday 16:59
		{time.Date(2030, 1, 7, 17, 0, 0, 0, time.UTC), false},
		{time.Date(2030, 1, 5, 12, 0, 0, 0, time.UTC), false}, // Saturday
	} {
		if got := pl.blackoutAt(tc.t) != ""; got != tc.want {
			t.Errorf("%v: in blackout %v, want %v", tc.t, got, tc.want)
		}
	}
}

// TestDecide is the run state machine as a table: what a step does from
// the phase, the evidence and now.
func TestDecide(t *testing.T) {
	pl := mustPlan(t, Spec{Duration: "30s", EffectWithin: "5s", RecoverWithin: "20s"})
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	after := func(d time.Duration) *time.Time { x := t0.Add(d); return &x }
	ms := func(v int64) *int64 { return &v }
	rose := map[string]*InstanceEvidence{"a": {Targeted: true, RoseAfterMS: ms(300)}, "b": {Targeted: false}}
	quiet := map[string]*InstanceEvidence{"a": {Targeted: true, RoseAfterMS: ms(300)}, "c": {Targeted: true}}
	stopped := map[string]*InstanceEvidence{"a": {Targeted: true, StoppedAfterMS: ms(900)}, "c": {Targeted: true, Gone: true}}
	for _, tc := range []struct {
		name  string
		phase string
		p     Progress
		now   time.Duration
		want  action
	}{
		{"pending starts", PhasePending, Progress{}, 0, actStart},
		{"all rose: probe at once", PhaseActive, Progress{AppliedAt: &t0, Instances: rose}, time.Second, actProbe},
		{"one quiet: wait", PhaseActive, Progress{AppliedAt: &t0, Instances: quiet}, 4 * time.Second, actWait},
		{"one quiet at the effect deadline: probe", PhaseActive, Progress{AppliedAt: &t0, Instances: quiet}, 5 * time.Second, actProbe},
		{"nobody in the slice: probe at the deadline", PhaseActive, Progress{AppliedAt: &t0}, 5 * time.Second, actProbe},
		{"checked, holding", PhaseActive, Progress{AppliedAt: &t0, EffectDoneAt: after(time.Second), Instances: rose}, 29 * time.Second, actWait},
		{"duration over: revert", PhaseActive, Progress{AppliedAt: &t0, EffectDoneAt: after(time.Second), Instances: rose}, 30 * time.Second, actRevert},
		{"aborted: revert at once", PhaseActive, Progress{AppliedAt: &t0, AbortReason: "x", Instances: quiet}, time.Second, actRevert},
		{"duration over before the effect check: revert (the override never outlives its duration)", PhaseActive, Progress{AppliedAt: &t0, Instances: quiet}, 30 * time.Second, actRevert},
		{"recovering: wait", PhaseRecovering, Progress{RevertedAt: &t0, Instances: quiet}, 10 * time.Second, actWait},
		{"recovered (one gone): finish", PhaseRecovering, Progress{RevertedAt: &t0, Instances: stopped}, time.Second, actFinish},
		{"recover deadline: finish", PhaseRecovering, Progress{RevertedAt: &t0, Instances: quiet}, 20 * time.Second, actFinish},
	} {
		if got := decide(tc.phase, &tc.p, pl, t0.Add(tc.now)); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestObserve: the evidence of take-up and of recovery from successive
// fleet views.
func TestObserve(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	p := &Progress{OverrideRevision: 10, AppliedAt: &t0}
	p.recordBaseline([]seen{{ID: "a", Degraded: 5, Signals: true}, {ID: "b", Degraded: 0, Signals: true}})
	p.observeEffect([]seen{{ID: "a", Targeted: true, Applied: true, Degraded: 5, Signals: true}, {ID: "b", Targeted: true, Signals: true}}, t0.Add(300*time.Millisecond))
	p.observeEffect([]seen{{ID: "a", Targeted: true, Applied: true, Degraded: 9, Signals: true}, {ID: "b", Targeted: true, Applied: true, Signals: true}}, t0.Add(time.Second))
	a, b := p.Instances["a"], p.Instances["b"]
	if *a.AppliedAfterMS != 300 || *a.RoseAfterMS != 1000 || b.RoseAfterMS != nil || p.allRose() {
		t.Fatalf("effect: a %+v b %+v", a, b)
	}
	pl := mustPlan(t, Spec{})
	if v := judgeEffect(p, pl); v.Result != Fail || !strings.Contains(v.Summary, "b") {
		t.Fatalf("effect verdict: %+v", v)
	}
	rt := t0.Add(time.Minute)
	p.RevertRevision, p.RevertedAt = 20, &rt
	// a: its first report after the revert shows 12 (rose since 9), then 12 again.
	p.observeRecovery([]seen{{ID: "a", AppliedRevision: 20, Degraded: 12, LastReport: 100}, {ID: "b", AppliedRevision: 20, LastReport: 100}}, rt.Add(time.Second))
	if a.StoppedAfterMS != nil || b.StoppedAfterMS == nil || p.allRecovered() {
		t.Fatalf("recovery 1: a %+v b %+v", a, b)
	}
	p.observeRecovery([]seen{{ID: "a", AppliedRevision: 20, Degraded: 12, LastReport: 100}}, rt.Add(1500*time.Millisecond))
	if a.StoppedAfterMS != nil {
		t.Fatal("stopped without a newer report")
	}
	p.observeRecovery([]seen{{ID: "a", AppliedRevision: 20, Degraded: 12, LastReport: 101}}, rt.Add(2*time.Second))
	if a.StoppedAfterMS == nil || *a.StoppedAfterMS != 2000 || b.Gone || !p.allRecovered() {
		t.Fatalf("recovery 2: a %+v b %+v", a, b)
	}
	if v := judgeRecovery(p); v.Result != Fail || !strings.Contains(v.Summary, "probes") {
		t.Fatalf("recovery verdict without after-probes: %+v", v)
	}
	p.After = []ProbeRound{{Requests: 5}}
	if v := judgeRecovery(p); v.Result != Pass {
		t.Fatalf("recovery verdict: %+v", v)
	}
	// An SDK whose ack of the revert carried nothing new writes no further
	// report: a counter unchanged for 1.5 intervals + 1 s has stopped.
	p.Instances["d"] = &InstanceEvidence{Targeted: true, AtRevert: 3}
	quiet := []seen{{ID: "a", AppliedRevision: 20, Degraded: 12, LastReport: 101}, {ID: "d", AppliedRevision: 20, Degraded: 7, LastReport: 100, Interval: time.Second}}
	p.observeRecovery(quiet, rt.Add(4*time.Second))
	p.observeRecovery(quiet, rt.Add(6400*time.Millisecond))
	if p.Instances["d"].StoppedAfterMS != nil {
		t.Fatal("d stopped before it was quiet for 2.5 s")
	}
	p.observeRecovery(quiet, rt.Add(6500*time.Millisecond))
	if got := p.Instances["d"].StoppedAfterMS; got == nil || *got != 6500 {
		t.Fatalf("d quiet for 2.5 s: %v", got)
	}
	// An instance of the slice that leaves before it showed the revert
	// settles the wait but fails the check.
	p.Instances["c"] = &InstanceEvidence{Targeted: true}
	p.observeRecovery([]seen{{ID: "a", AppliedRevision: 20, Degraded: 12, LastReport: 101}}, rt.Add(3*time.Second))
	if !p.Instances["c"].Gone || !p.allRecovered() {
		t.Fatalf("gone: %+v", p.Instances["c"])
	}
	if v := judgeRecovery(p); v.Result != Fail || !strings.Contains(v.Summary, "c") {
		t.Fatalf("recovery verdict with c gone: %+v", v)
	}
}

// TestJudgeCapacity: the load must fall by the minimum drop from the
// baseline to the degraded window; the verdict says both values, and no
// value (or no load before) is inconclusive, not a pass.
func TestJudgeCapacity(t *testing.T) {
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	val := func(v float64) *LoadSample { return &LoadSample{At: at, Value: &v} }
	c := &Capacity{Source: "fleet", Query: `allowed_rate{limit="recs-backend"}`, MinDrop: 0.5}
	for _, tc := range []struct {
		name           string
		before, during *LoadSample
		applied        bool
		want           string
		summary        string
	}{
		{"calls stopped", val(100), val(0), true, Pass, "load 100 → 0: fell by 100 % (at least 50 % required)"},
		{"halved exactly", val(100), val(50), true, Pass, "fell by 50 %"},
		{"fallback still calls", val(100), val(96), true, Fail, "load 100 → 96: fell by 4 % (at least 50 % required); the degraded path still costs what it should spare"},
		{"load rose", val(100), val(120), true, Fail, "rose by 20 %"},
		{"no data degraded", val(100), &LoadSample{At: at, NoData: true}, true, Inconclusive, "before 100, degraded no data"},
		{"error before", &LoadSample{At: at, Error: "prometheus down"}, val(0), true, Inconclusive, "error: prometheus down"},
		{"no load before", val(0), val(0), true, Inconclusive, "no load before the run"},
		{"never applied", nil, nil, false, Skipped, "never applied"},
		{"not measured while on", val(100), nil, true, Skipped, "not measured"},
	} {
		p := &Progress{LoadBefore: tc.before, LoadDegraded: tc.during}
		if tc.applied {
			p.AppliedAt = &at
		}
		v := judgeCapacity(p, c)
		if v.Result != tc.want || !strings.Contains(v.Summary, tc.summary) {
			t.Errorf("%s: %s %q, want %s containing %q", tc.name, v.Result, v.Summary, tc.want, tc.summary)
		}
	}
	pass := Verdict{Result: Pass}
	fail := Verdict{Result: Fail}
	if o := outcome(&Progress{}, Verdicts{TakesEffect: pass, FallbackCorrect: pass, Fast: pass, Recovers: pass, FreesCapacity: &fail}); o != OutcomeFailed {
		t.Errorf("a failed capacity verdict: outcome %s", o)
	}
}

// TestOutcome: any failed verdict fails the run, an abort wins, a skipped
// or inconclusive check makes it inconclusive.
func TestOutcome(t *testing.T) {
	pass := Verdict{Result: Pass}
	all := Verdicts{TakesEffect: pass, FallbackCorrect: pass, Fast: pass, Recovers: pass}
	if o := outcome(&Progress{}, all); o != OutcomePassed {
		t.Error(o)
	}
	one := all
	one.Fast = Verdict{Result: Fail}
	if o := outcome(&Progress{}, one); o != OutcomeFailed {
		t.Error(o)
	}
	inc := all
	inc.TakesEffect = Verdict{Result: Inconclusive}
	if o := outcome(&Progress{}, inc); o != OutcomeInconclusive {
		t.Error(o)
	}
	if o := outcome(&Progress{AbortReason: "x"}, one); o != OutcomeAborted {
		t.Error(o)
	}
}

// TestViewsHideProbeHeaders: readers of a drill or a run never see probe
// header values; the stored spec keeps them.
func TestViewsHideProbeHeaders(t *testing.T) {
	spec := `{"switch":"recommend","target":{"percent":5},"duration":"1m","probes":[{"url":"http://svc/x","headers":{"Authorization":"Bearer s3cret"}}]}`
	d := &Drill{Spec: spec, Enabled: true}
	r := &Run{Spec: spec, State: "{}"}
	for _, v := range []Spec{d.View(time.Now()).Spec, r.View().Spec} {
		if got := v.Probes[0].Headers["Authorization"]; got != "(hidden)" {
			t.Errorf("header shown: %q", got)
		}
	}
	if !strings.Contains(d.Spec, "s3cret") {
		t.Error("the stored spec lost the header")
	}
}

// TestStatusCounts: the Markdown report writes a round's answers as the
// run page does, in order of status, never in Go's map syntax.
func TestStatusCounts(t *testing.T) {
	r := ProbeRound{Statuses: map[string]int{"503": 2, "200": 18, "error": 1}}
	if got := r.statusCounts(); got != "200×18 503×2 error×1" {
		t.Errorf("statusCounts = %q", got)
	}
}
