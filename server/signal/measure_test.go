package signal_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/server/signal"
)

// scripted is a metric source whose answer to each query the test names;
// "hang" waits until the caller gives up.
type scripted map[string]signal.Sample

func (s scripted) Query(ctx context.Context, q string, _ time.Time) (signal.Sample, error) {
	switch q {
	case "hang":
		<-ctx.Done()
		return signal.Sample{}, ctx.Err()
	case "refused":
		return signal.Sample{}, errors.New("connection refused")
	}
	return s[q], nil
}
func (scripted) Range(context.Context, string, time.Time, time.Time, time.Duration) ([]signal.Point, error) {
	return nil, nil
}
func (scripted) Check(context.Context, string) error { return nil }

// TestMeasureAll: every query of a step gets one of three outcomes — a
// value (±Inf included), no data, or an error — and a source that never
// answers is an error once the query timeout passes, not a stuck step.
func TestMeasureAll(t *testing.T) {
	src := scripted{"ok": {Value: 0.5, OK: true}, "inf": {Value: math.Inf(1), OK: true}, "empty": {}}
	srcs := signal.Sources{Prometheus: src}
	qs := []signal.Query{{Source: "prometheus", Query: "ok"}, {Source: "prometheus", Query: "inf"}, {Source: "prometheus", Query: "empty"},
		{Source: "prometheus", Query: "refused"}, {Source: "prometheus", Query: "hang"}, {Source: "fleet", Query: "ok"}}
	got := srcs.MeasureAll(context.Background(), qs, time.Now())
	want := []signal.Outcome{signal.OutcomeValue, signal.OutcomeValue, signal.OutcomeNoData, signal.OutcomeError, signal.OutcomeError, signal.OutcomeError}
	for i, m := range got {
		if m.Outcome != want[i] {
			t.Errorf("%s: %+v, want %s", qs[i].Query, m, want[i])
		}
	}
	if got[0].Value != 0.5 || !math.IsInf(got[1].Value, 1) || got[4].Err == "" {
		t.Errorf("values and errors: %+v", got)
	}
	if got[2].Treatment(signal.Breaching, signal.Hold) != signal.Breaching || got[3].Treatment(signal.Breaching, signal.Hold) != signal.Hold ||
		got[0].Treatment(signal.Breaching, signal.Hold) != "" {
		t.Error("no data and errors do not follow their own treatments")
	}
}

func TestOpsAndNum(t *testing.T) {
	for _, c := range []struct {
		op   signal.Op
		v    float64
		want bool
	}{{signal.Above, 2, true}, {signal.Above, 1, false}, {signal.AtLeast, 1, true}, {signal.Below, 0, true},
		{signal.AtMost, 1, true}, {signal.Equal, 1, true}, {signal.NotEqual, 1, false}, {"~", 1, false}} {
		if got := c.op.Holds(c.v, 1); got != c.want {
			t.Errorf("%v %s 1 = %v", c.v, c.op, got)
		}
	}
	if signal.Equal.Ordered() || !signal.Equal.Valid() || !signal.AtMost.Ordered() || signal.Op("~").Valid() {
		t.Error("Ordered/Valid")
	}
	b, _ := json.Marshal([]signal.Num{signal.Num(math.Inf(-1)), 2.5})
	var back []signal.Num
	if string(b) != `["-Inf",2.5]` || json.Unmarshal(b, &back) != nil || !math.IsInf(float64(back[0]), -1) || back[1] != 2.5 {
		t.Errorf("±Inf in JSON: %s → %v", b, back)
	}
	for _, tr := range signal.Treatments {
		if signal.CheckTreatment(tr) != nil {
			t.Errorf("%s refused", tr)
		}
	}
	if signal.CheckTreatment("pause") == nil {
		t.Error("an unknown treatment passed")
	}
}
