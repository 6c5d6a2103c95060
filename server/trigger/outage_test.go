package trigger_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/sdk/wire"
	"github.com/switchyard-io/switchyard/server/trigger"
)

// TestPrometheusOutageFlipsNothing: 20 rules that count no data as
// breaching, and Prometheus is killed. An error is not no data: under the
// default on_error (hold) not one switch flips, however long the outage
// lasts, and every evaluation records an error. A rule that opts in with
// on_error breaching does fire.
func TestPrometheusOutageFlipsNothing(t *testing.T) {
	prom, src := startPrometheus(t)
	r := newRig(t, "postgres", prom, src)
	rule := func() trigger.Input {
		return trigger.Input{Trigger: trigger.CondInput{Op: ">", Threshold: f(80), For: "20s"}, Recover: trigger.CondInput{Op: "<", Threshold: f(60)},
			OnNoData: trigger.MissingBreaching}
	}
	var names []string
	for i := range 20 {
		name := fmt.Sprintf("outage-%02d", i)
		r.switchAndRule(name, 50, rule())
		names = append(names, name)
	}
	optIn := rule()
	optIn.OnError = trigger.MissingBreaching
	r.switchAndRule("outage-opt-in", 50, optIn)

	b := time.Now().UTC().Add(time.Second)
	r.step(b)
	prom.Stop()
	for s := 10; s <= 120; s += 10 {
		r.step(at(b, s))
	}
	for _, name := range names {
		if sw := r.switchState(name); sw.State != wire.StateOff {
			t.Fatalf("Prometheus is down and %s turned on", name)
		}
		evs := r.evaluations(name)
		if evs[0].Outcome != trigger.OutcomeError || evs[0].Error == "" {
			t.Fatalf("%s's evaluation during the outage: %+v", name, evs[0])
		}
		if st := r.status(name); st.Phase != trigger.PhaseOK {
			t.Fatalf("%s moved to %s on errors", name, st.Phase)
		}
	}
	if sw := r.switchState("outage-opt-in"); sw.State != wire.StateOn {
		t.Fatal("on_error breaching did not count the outage as crossing")
	}
}
