package fleet

import (
	"fmt"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/sdk/wire"
)

// entries counts what the model holds: apps, interned switch names,
// switch and limit histories, and instances.
func (m *Model) entries() (apps, names, swHist, limHist, instances int) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	for _, a := range m.apps {
		apps++
		names += len(a.names)
		swHist += len(a.swHist)
		limHist += len(a.limHist)
		instances += len(a.instances)
	}
	return
}

// TestModelForgetsDeparted: apps, instances, switches and limit rules come
// and go, each with names never seen before; what the model holds stays
// bounded by what lived within the history's length, and once everything
// that churned is gone for longer than that, only the steady app is left,
// its signals and history intact although its switch was renumbered.
func TestModelForgetsDeparted(t *testing.T) {
	now := t0
	m := New(Config{Namespace: "default", Now: func() time.Time { return now }, HistoryStep: 30 * time.Second, HistoryLength: 5 * time.Minute})
	window := int(5*time.Minute/(30*time.Second)) + 1 // rounds a departed entry's history lasts
	started := t0.Add(-time.Hour)
	steady := func(deg uint64) {
		m.putInstance("checkout", "steady", report(t, "steady", started, 1, &wire.Report{At: now.Unix(),
			Switches: map[string]wire.SwitchSignal{"reco": {Degraded: deg, LastRead: now.Unix()}}}), 1)
	}
	const rounds = 60
	var most [5]int
	for round := range rounds {
		steady(uint64(round) * 300)
		app := fmt.Sprintf("churn-%d", round%7)
		for k := range 3 {
			id := fmt.Sprintf("i-%d-%d", round, k)
			m.putInstance(app, id, report(t, id, started, 1, &wire.Report{At: now.Unix(),
				Switches: map[string]wire.SwitchSignal{fmt.Sprintf("sw-%d-%d", round, k): {Degraded: 5, LastRead: now.Unix()}},
				Limits:   map[string]wire.LimitSignal{fmt.Sprintf("POST /r%d", round): {Allowed: 1}}}), 1)
		}
		publish(m, &wire.Switch{App: app, Name: fmt.Sprintf("pub-%d", round), State: wire.StateOn}, int64(round+1))
		m.Sample(now)
		for k := range 3 {
			m.deleteInstance(app, fmt.Sprintf("i-%d-%d", round, k))
		}
		m.deleteSwitch(wire.KindSwitches, app, fmt.Sprintf("pub-%d", round))
		now = now.Add(30 * time.Second)
		apps, names, sw, lim, ins := m.entries()
		for i, v := range []int{apps, names, sw, lim, ins} {
			most[i] = max(most[i], v)
		}
	}
	// Per round: 3 switch names and 1 published name, 1 limit rule.
	if apps, names, sw, lim, ins := most[0], most[1], most[2], most[3], most[4]; apps > 8 || names > 1+4*(window+1) ||
		sw > 1+4*(window+1) || lim > window+1 || ins > 1 {
		t.Fatalf("over %d rounds of churn the model held up to %d apps, %d names, %d switch and %d limit histories, %d instances", rounds, apps, names, sw, lim, ins)
	}
	for range window + 1 {
		steady(uint64(rounds) * 300)
		m.Sample(now)
		now = now.Add(30 * time.Second)
	}
	if apps, names, sw, lim, ins := m.entries(); apps != 1 || names != 1 || sw != 1 || lim != 0 || ins != 1 {
		t.Fatalf("after the churn ended the model holds %d apps, %d names, %d switch and %d limit histories, %d instances; want only checkout/reco", apps, names, sw, lim, ins)
	}
	if got := m.Switches("checkout"); len(got) != 1 || got[0] != "reco" {
		t.Fatalf("checkout's switches: %v", got)
	}
	steady(uint64(rounds)*300 + 300)
	if v := m.Switch("checkout", "reco"); v.LastRead == nil || v.LastRead.Unix() != now.Unix() || v.DegradedRate != 10 {
		t.Fatalf("the steady switch after renumbering: %+v", v)
	}
	if h := m.History("checkout", "reco", t0); len(h) < window-1 { // the ring holds window-1 samples
		t.Fatalf("the steady switch kept %d history points", len(h))
	}
}
