package fleet

import (
	"context"
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/sdk/wire"
	"github.com/switchyard-io/switchyard/server/signal"
)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// report builds an instance value as an SDK writes it.
func report(t *testing.T, id string, started time.Time, applied int64, r *wire.Report) []byte {
	t.Helper()
	b, err := json.Marshal(wire.Instance{
		App: "checkout", InstanceID: id, SDKVersion: "test", AppliedRevision: applied,
		StartedAt: started, ReportInterval: wire.Duration(10 * time.Second), Report: r,
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func newTestModel(now *time.Time) *Model {
	m := New(Config{Namespace: "default", Now: func() time.Time { return *now }})
	m.watching.Store(true)
	m.reachable.Store(true)
	return m
}

func publish(m *Model, sw *wire.Switch, rev int64) {
	b, _ := json.Marshal(sw)
	m.putSwitch(wire.KindSwitches, sw.App, sw.Name, b, rev)
}

// TestRatesBetweenReports: rates come from the counters of two reports;
// an entry absent from a complete report did not change (rate 0); with
// Pending it keeps its rate; a restarted counter does not go negative.
func TestRatesBetweenReports(t *testing.T) {
	now := t0
	m := newTestModel(&now)
	started := t0.Add(-time.Hour) // predates the model
	put := func(at time.Time, pending int, sw map[string]wire.SwitchSignal) {
		m.putInstance("checkout", "i1", report(t, "i1", started, 5, &wire.Report{At: at.Unix(), Switches: sw, Pending: pending}), 1)
	}
	put(t0, 0, map[string]wire.SwitchSignal{"reco": {Degraded: 1000, LastRead: t0.Unix()}})
	if v := m.Switch("checkout", "reco"); v.DegradedRate != 0 || v.AnsweringDegraded != 0 {
		t.Fatalf("first report of an old instance has no rate yet: %+v", v)
	}
	put(t0.Add(10*time.Second), 0, map[string]wire.SwitchSignal{"reco": {Degraded: 1500, LastRead: t0.Unix() + 10}})
	v := m.Switch("checkout", "reco")
	if v.DegradedRate != 50 || v.AnsweringDegraded != 1 || v.LastRead.Unix() != t0.Unix()+10 {
		t.Fatalf("rate after 500 answers in 10 s: %+v", v)
	}
	put(t0.Add(20*time.Second), 2, nil) // changes left out: keep the rate
	if v := m.Switch("checkout", "reco"); v.DegradedRate != 50 {
		t.Fatalf("pending report reset the rate: %v", v.DegradedRate)
	}
	put(t0.Add(30*time.Second), 0, nil) // complete and absent: unchanged
	if v := m.Switch("checkout", "reco"); v.DegradedRate != 0 || v.AnsweringDegraded != 0 {
		t.Fatalf("an unchanged switch still answers degraded: %+v", v)
	}
	put(t0.Add(40*time.Second), 0, map[string]wire.SwitchSignal{"reco": {Degraded: 3}}) // restarted counter
	if v := m.Switch("checkout", "reco"); v.DegradedRate != 0 {
		t.Fatalf("a counter that went backwards gave rate %v", v.DegradedRate)
	}
}

// TestNewInstanceRateSinceStart: an instance that started just before its
// first report gets a rate from its start.
func TestNewInstanceRateSinceStart(t *testing.T) {
	now := t0
	m := newTestModel(&now)
	m.putInstance("checkout", "i1", report(t, "i1", t0.Add(-4*time.Second), 5,
		&wire.Report{At: t0.Unix(), Switches: map[string]wire.SwitchSignal{"reco": {Degraded: 40}}}), 1)
	if v := m.Switch("checkout", "reco"); v.DegradedRate != 10 {
		t.Fatalf("rate of a new instance: %v, want 10/s", v.DegradedRate)
	}
}

// TestMalformedAndOldReports: a value that does not parse is counted and
// keeps the instance's last good state; an older SDK's value (no report)
// parses and shows without signals.
func TestMalformedAndOldReports(t *testing.T) {
	now := t0
	m := newTestModel(&now)
	m.putInstance("checkout", "new", report(t, "new", t0, 7, &wire.Report{At: t0.Unix()}), 1)
	m.putInstance("checkout", "new", []byte(`{"app":"checkout","report":{"at":"yesterday"}`), 2)
	m.putInstance("checkout", "old", []byte(`{"app":"checkout","instance_id":"old","sdk_version":"0.1.0","applied_revision":7,"stats":{"fallbacks_served":3}}`), 3)
	if read, bad := m.Reports(); read != 3 || bad != 1 {
		t.Fatalf("reports read %d malformed %d, want 3 and 1", read, bad)
	}
	ins := m.Instances("checkout")
	if len(ins) != 2 {
		t.Fatalf("instances %+v", ins)
	}
	if n := ins[0]; n.ID != "new" || n.Malformed == "" || n.AppliedRevision != 7 || !n.Signals {
		t.Fatalf("malformed value lost the last good state: %+v", n)
	}
	if o := ins[1]; o.ID != "old" || o.Signals || o.AppliedRevision != 7 || o.Malformed != "" {
		t.Fatalf("older SDK: %+v", o)
	}
}

// TestAppliedAndTargeted: applied-by-N/M follows the applied revision;
// targeted follows the published rollout (hash and selector), the same
// function the SDK uses.
func TestAppliedAndTargeted(t *testing.T) {
	now := t0
	m := newTestModel(&now)
	publish(m, &wire.Switch{App: "checkout", Name: "reco", Level: wire.L3, State: wire.StateOn, Version: 2,
		Rollout: wire.Rollout{Percent: 50, Stickiness: wire.StickyInstance}}, 40)
	wantTargeted := 0
	for i := 0; i < 20; i++ {
		id := "inst-" + string(rune('a'+i))
		applied := int64(39)
		if i%2 == 0 {
			applied = 41
		}
		m.putInstance("checkout", id, report(t, id, t0, applied, nil), int64(100+i))
		if wire.Bucket("checkout", "reco", id) < 5000 {
			wantTargeted++
		}
	}
	v := m.Switch("checkout", "reco")
	if v.Live != 20 || v.Applied != 10 || v.Targeted != wantTargeted || v.Revision != 40 {
		t.Fatalf("live %d applied %d targeted %d (want 20, 10, %d) rev %d", v.Live, v.Applied, v.Targeted, wantTargeted, v.Revision)
	}
	if s := m.Summary("checkout", "reco"); s.Instances != nil || s.Applied != v.Applied || s.Targeted != v.Targeted || s.Live != v.Live {
		t.Fatalf("summary %+v differs from the view", s)
	}
	if n, total := m.AppliedBy("checkout", 40, func(mb Member) bool { return mb.ID < "inst-k" }); n != 5 || total != 10 {
		t.Fatalf("applied-by with a filter: %d/%d, want 5/10", n, total)
	}
	m.deleteInstance("checkout", "inst-a")
	if n, total := m.AppliedBy("checkout", 40, nil); n != 9 || total != 19 {
		t.Fatalf("after an instance left: %d/%d", n, total)
	}
}

// TestGlobalSwitchOnInstance: an instance's entry for a switch only
// _global publishes names _global as its app.
func TestGlobalSwitchOnInstance(t *testing.T) {
	now := t0
	m := newTestModel(&now)
	publish(m, &wire.Switch{App: wire.GlobalApp, Name: "maintenance", Level: wire.L4, State: wire.StateOn, Version: 1, Rollout: wire.Rollout{Percent: 100}}, 3)
	publish(m, &wire.Switch{App: "checkout", Name: "reco", Level: wire.L3, State: wire.StateOff, Version: 1}, 4)
	m.putInstance("checkout", "i1", report(t, "i1", t0, 4, &wire.Report{At: t0.Unix(),
		Switches: map[string]wire.SwitchSignal{"maintenance": {LastRead: t0.Unix()}, "reco": {LastRead: t0.Unix()}}}), 5)
	in, ok := m.Instance("checkout", "i1")
	if !ok || len(in.Switches) != 2 {
		t.Fatalf("instance %+v", in)
	}
	apps := map[string]string{}
	for _, s := range in.Switches {
		apps[s.Name] = s.App
	}
	if apps["maintenance"] != wire.GlobalApp || apps["reco"] != "checkout" {
		t.Fatalf("apps of the instance's switches: %v", apps)
	}
	if m.Want("checkout") != 4 {
		t.Fatalf("want %d, the newest of the app's and _global's revisions is 4", m.Want("checkout"))
	}
}

// TestSourceOutcomes: the fleet source answers a value, no data or an
// error, never a zero for "nobody reports".
func TestSourceOutcomes(t *testing.T) {
	now := t0
	m := newTestModel(&now)
	src := m.Source("checkout")
	ctx := context.Background()
	must := func(q string) signal.Sample {
		t.Helper()
		s, err := src.Query(ctx, q, now)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return s
	}
	if s := must(`degraded_rate{switch="reco"}`); s.OK {
		t.Fatalf("no instances: %+v, want no data", s)
	}
	if s := must(`instances`); !s.OK || s.Value != 0 {
		t.Fatalf("instances with none: %+v", s)
	}
	m.putInstance("checkout", "i1", report(t, "i1", t0.Add(-5*time.Second), 1, &wire.Report{At: t0.Unix(),
		Switches: map[string]wire.SwitchSignal{"reco": {Degraded: 50, Latency: []uint64{0, 0, 0, 90, 10}}},
		Limits:   map[string]wire.LimitSignal{"GET /x": {Allowed: 75, Rejected: 25, Breaker: wire.BreakerOpen}}}), 1)
	for q, want := range map[string]float64{
		`degraded_rate{switch="reco"}`:                  10,
		`degraded_share{switch="reco"}`:                 1,
		`degraded_rate{switch="other"}`:                 0, // reporting, not degraded
		`rejected_rate{limit="GET /x"}`:                 5,
		`rejected_share{limit="GET /x"}`:                0.25,
		`breakers_open{limit="GET /x", app="checkout"}`: 1,
		`degraded_p99_seconds{switch="reco"}`:           0.02,
		`instances{}`:                                   1,
	} {
		if s := must(q); !s.OK || math.Abs(s.Value-want) > 1e-9 {
			t.Errorf("%s = %+v, want %v", q, s, want)
		}
	}
	if s := must(`applied_share{switch="reco"}`); s.OK {
		t.Errorf("applied share of an unpublished switch: %+v, want no data", s)
	}
	if s := must(`rejected_rate{limit="GET /nope"}`); s.OK {
		t.Errorf("a rule nobody reports: %+v, want no data", s)
	}
	for _, bad := range []string{`cpu{}`, `degraded_rate`, `degraded_rate{limit="x"}`, `degraded_rate{switch=reco}`, `rejected_rate{limit="a",zone="b"}`, `{}`} {
		if err := src.Check(ctx, bad); err == nil {
			t.Errorf("Check(%s) accepted", bad)
		} else if _, ok := err.(*signal.QueryError); !ok {
			t.Errorf("Check(%s): %T, want *signal.QueryError", bad, err)
		}
	}
	m.reachable.Store(false)
	if _, err := src.Query(ctx, `degraded_rate{switch="reco"}`, now); err == nil {
		t.Error("a model out of sync answered")
	}
}

// TestHistory: sampled points come back in order for the sparkline and
// previews, and a past Query reads them.
func TestHistory(t *testing.T) {
	now := t0
	m := newTestModel(&now)
	publish(m, &wire.Switch{App: "checkout", Name: "reco", Level: wire.L3, State: wire.StateOn, Version: 1, Rollout: wire.Rollout{Percent: 100}}, 2)
	for i := 0; i < 5; i++ {
		at := t0.Add(time.Duration(i) * 30 * time.Second)
		m.putInstance("checkout", "i1", report(t, "i1", t0.Add(-2*time.Second), 2, &wire.Report{At: at.Unix(),
			Switches: map[string]wire.SwitchSignal{"reco": {Degraded: uint64(i) * 300}}}), int64(10+i))
		m.Sample(at)
	}
	pts := m.History("checkout", "reco", t0)
	if len(pts) != 5 || pts[4].Value != 10 || !pts[0].At.Equal(t0) {
		t.Fatalf("history %+v", pts)
	}
	now = t0.Add(time.Hour)
	s, err := m.Source("checkout").Query(context.Background(), `degraded_rate{switch="reco"}`, t0.Add(90*time.Second))
	if err != nil || !s.OK || s.Value != 10 {
		t.Fatalf("past query: %+v %v", s, err)
	}
}

// TestFramesRestore: the frames of a model's history, stored as JSON (no
// data as null) and restored into a new model, give the same series;
// Frames(after) returns only what is newer.
func TestFramesRestore(t *testing.T) {
	now := t0
	m := newTestModel(&now)
	publish(m, &wire.Switch{App: "checkout", Name: "reco", Level: wire.L3, State: wire.StateOn, Version: 1, Rollout: wire.Rollout{Percent: 100}}, 2)
	m.Sample(t0) // no instance yet: no data
	for i := 1; i < 4; i++ {
		at := t0.Add(time.Duration(i) * 30 * time.Second)
		m.putInstance("checkout", "i1", report(t, "i1", t0.Add(-2*time.Second), 2, &wire.Report{At: at.Unix(),
			Switches: map[string]wire.SwitchSignal{"reco": {Degraded: uint64(i) * 300}},
			Limits:   map[string]wire.LimitSignal{"POST /orders": {Allowed: uint64(i) * 30, Rejected: uint64(i) * 3}}}), int64(10+i))
		m.Sample(at)
	}
	frames := m.Frames(0)
	if len(frames) != 4 || len(m.Frames(t0.Add(60*time.Second).Unix())) != 1 {
		t.Fatalf("frames: %d, after 60s: %d", len(frames), len(m.Frames(t0.Add(60*time.Second).Unix())))
	}
	var stored []Frame
	for _, f := range frames {
		b, err := json.Marshal(storedFrame{Switches: f.Switches, Limits: f.Limits})
		if err != nil {
			t.Fatal(err)
		}
		var sf storedFrame
		if err := json.Unmarshal(b, &sf); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		stored = append(stored, Frame{At: f.At, Switches: sf.Switches, Limits: sf.Limits})
	}
	r := newTestModel(&now)
	r.Restore(stored)
	r.Restore(stored) // again: nothing newer, nothing added
	for _, q := range []string{`degraded_rate{switch="reco"}`, `degraded_share{switch="reco"}`, `applied_share{switch="reco"}`, `rejected_rate{limit="POST /orders"}`} {
		want, _ := m.Source("checkout").Range(context.Background(), q, t0, t0.Add(time.Hour), time.Second)
		got, _ := r.Source("checkout").Range(context.Background(), q, t0, t0.Add(time.Hour), time.Second)
		if len(want) == 0 || len(got) != len(want) {
			t.Fatalf("%s: restored %+v, sampled %+v", q, got, want)
		}
		for i := range want {
			if !got[i].At.Equal(want[i].At) || got[i].Value != want[i].Value {
				t.Fatalf("%s point %d: restored %+v, sampled %+v", q, i, got[i], want[i])
			}
		}
	}
}
