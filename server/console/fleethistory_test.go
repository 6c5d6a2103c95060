package console_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/servertest"
	"github.com/switchyard-io/switchyard/sdk/wire"
	"github.com/switchyard-io/switchyard/server/console"
	"github.com/switchyard-io/switchyard/server/signal"
	"github.com/switchyard-io/switchyard/server/trigger"
)

// TestFleetHistorySurvivesRestart: the leader keeps the fleet history in
// the database, so a console started after the last one stopped answers
// the history at once (the sparkline's series) and a fleet-source preview
// fires and recovers exactly as it did before the restart, and after a
// leader change; rows older than the history length are deleted.
func TestFleetHistorySurvivesRestart(t *testing.T) {
	const app, name, length = "checkout", "reco", time.Hour
	e := newEnv(t)
	clk := &testClock{}
	history := func(c *console.Config) { c.FleetHistoryStep, c.FleetHistory = time.Second, length }
	a := e.startWith(clk.option(), history)
	waitLeader(t, a)
	mustStatus(t, call(t, a, "POST", "/api/v1/apps/"+app+"/switches", adminToken, `{"name":"reco","level":"L3","reason":"seed"}`), 201)

	// One instance reports every 30 s of the consoles' clock: calm, three
	// minutes at 50 degraded answers a second, calm again. Each report is
	// in the history before the next.
	ctx := context.Background()
	started := clk.now().Add(-time.Hour)
	var degraded uint64
	report := func(perSecond uint64) {
		t.Helper()
		clk.advance(30 * time.Second)
		degraded += perSecond * 30
		at := clk.now()
		v, _ := json.Marshal(wire.Instance{App: app, InstanceID: "i1", SDKVersion: "test", StartedAt: started, ReportInterval: wire.Duration(10 * time.Second),
			Report: &wire.Report{At: at.Unix(), Switches: map[string]wire.SwitchSignal{name: {Degraded: degraded, LastRead: at.Unix()}}}})
		if _, err := e.cli.Put(ctx, wire.InstanceKey("default", app, "i1"), string(v)); err != nil {
			t.Fatal(err)
		}
		servertest.Eventually(t, 15*time.Second, "the report is sampled", func() bool {
			pts := a.Fleet.History(app, name, at)
			return len(pts) > 0 && (pts[len(pts)-1].Value > 0) == (perSecond > 0) // about perSecond: the clock runs on too
		})
	}
	for _, r := range []uint64{0, 0, 0, 0, 50, 50, 50, 50, 50, 50, 0, 0, 0, 0, 0} {
		report(r)
	}
	before := a.Fleet.History(app, name, time.Time{})
	last := before[len(before)-1].At.Unix()
	servertest.Eventually(t, 15*time.Second, "the leader stored the newest frame", func() bool {
		var newest int64
		e.db(t).Raw("SELECT COALESCE(MAX(at), 0) FROM fleet_history").Scan(&newest)
		return newest >= last
	})
	preview := func(c *console.Console) trigger.Preview {
		t.Helper()
		body := `{"rule":{"source":"fleet","query":"degraded_rate{switch=\"reco\"}","trigger":{"op":">","threshold":10,"for":"1m"},` +
			`"recover":{"op":"<","threshold":5,"for":"1m"},"cooldown":"0s"},"range":"30m"}`
		r := mustStatus(t, call(t, c, "POST", "/api/v1/apps/"+app+"/triggers/preview", adminToken, body), 200)
		var p struct{ Preview trigger.Preview }
		if err := json.Unmarshal([]byte(r.Raw), &p); err != nil {
			t.Fatal(err)
		}
		return p.Preview
	}
	pa := preview(a)
	if pa.Fired != 1 || pa.Recovered != 1 || len(pa.Events) != 2 {
		t.Fatalf("preview before the restart: %s, events %+v", pa.String(), pa.Events)
	}
	stop(a)

	b := e.startWith(clk.option(), history)
	upTo := func(pts []signal.Point) []signal.Point { // what a had sampled
		for i, p := range pts {
			if p.At.Unix() > last {
				return pts[:i]
			}
		}
		return pts
	}
	after := upTo(b.Fleet.History(app, name, time.Time{}))
	if len(after) != len(before) {
		t.Fatalf("after the restart the history has %d points of the %d before", len(after), len(before))
	}
	for i := range before {
		if !after[i].At.Equal(before[i].At) || after[i].Value != before[i].Value {
			t.Fatalf("point %d: %+v after the restart, %+v before", i, after[i], before[i])
		}
	}
	waitLeader(t, b)
	pb := preview(b)
	if pb.Fired != pa.Fired || pb.Recovered != pa.Recovered || len(pb.Events) != len(pa.Events) {
		t.Fatalf("preview after the restart: %s; before: %s", pb.String(), pa.String())
	}
	for i, ev := range pa.Events {
		if got := pb.Events[i]; !got.At.Equal(ev.At) || got.Action != ev.Action || *got.Value != *ev.Value {
			t.Fatalf("event %d: %+v after the restart, %+v before", i, got, ev)
		}
	}
	t.Logf("%d points survived the restart; preview before and after: %s (fired %s)", len(before), pb.String(), pb.Events[0].At.Format(time.TimeOnly))

	// A leader change: a second console takes over and goes on storing
	// from the newest stored frame; its preview is the same.
	c := e.startWith(clk.option(), history)
	var handover int64
	e.db(t).Raw("SELECT MAX(at) FROM fleet_history").Scan(&handover)
	stop(b)
	waitLeader(t, c)
	servertest.Eventually(t, 15*time.Second, "the new leader stores frames", func() bool {
		var newest int64
		e.db(t).Raw("SELECT MAX(at) FROM fleet_history").Scan(&newest)
		return newest > handover
	})
	if pc := preview(c); pc.Fired != pa.Fired || pc.Recovered != pa.Recovered || !pc.Events[0].At.Equal(pa.Events[0].At) {
		t.Fatalf("preview after the leader change: %s; before: %s", pc.String(), pa.String())
	}

	// Hours later only the last hour is kept.
	clk.advance(2 * length)
	servertest.Eventually(t, 15*time.Second, "frames older than the history length deleted", func() bool {
		var old, rows int64
		e.db(t).Raw("SELECT COUNT(*) FROM fleet_history WHERE at < ?", clk.now().Add(-length).Unix()).Scan(&old)
		e.db(t).Raw("SELECT COUNT(*) FROM fleet_history").Scan(&rows)
		return old == 0 && rows > 0 && rows <= int64(length/time.Second)+1
	})
}
