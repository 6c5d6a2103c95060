package trigger

import (
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/server/signal"
)

// TestReplay: a range's points become the samples the job would have
// seen — a gap is no data, never a value — and the evaluator runs over
// them: a fleet-like history every 30 s with a ten-minute hole.
func TestReplay(t *testing.T) {
	var pts []signal.Point
	add := func(from, to time.Duration, v float64) {
		for d := from; d < to; d += 30 * time.Second {
			pts = append(pts, signal.Point{At: t0.Add(d), Value: v})
		}
	}
	add(0, 5*time.Minute, 50)
	add(5*time.Minute, 10*time.Minute, 90)
	// no points from 10 m to 20 m: the fleet had no instance reporting
	add(20*time.Minute, 30*time.Minute, 40)
	end := t0.Add(30 * time.Minute)
	smps, spacing := samples(pts, t0, end, time.Second)
	if spacing != 30*time.Second {
		t.Fatalf("spacing %s, want the points' 30s", spacing)
	}
	gaps := 0
	for _, s := range smps {
		if s.s.Outcome == OutcomeNoData {
			gaps++
			if s.at.Before(t0.Add(10*time.Minute)) || !s.at.Before(t0.Add(20*time.Minute)) {
				t.Fatalf("no data at %s, outside the hole", s.at.Sub(t0))
			}
		}
	}
	if gaps != 20 {
		t.Fatalf("%d no-data samples in a 10 m hole at 30 s spacing, want 20 (10:00 to 19:30)", gaps)
	}
	p := cpu()
	p.Interval = 30 * time.Second
	out := &Preview{Start: t0, End: end}
	replay(p, smps, t0, out)
	if out.Fired != 1 || out.Recovered != 1 || len(out.NoData) != 1 || out.Final != PhaseOK {
		t.Fatalf("replay: %s, no data %+v, final %s, events %+v", out, out.NoData, out.Final, out.Events)
	}
	if on := out.Events[0]; on.Action != ActTurnOn || !on.At.Equal(t0.Add(5*time.Minute+30*time.Second)) {
		t.Fatalf("fired %+v, want 30 s after the crossing at 5 m", on)
	}
	// hold: the hole neither recovers nor resets; recovery needs 1 m of values below 60
	if off := out.Events[1]; off.Action != ActTurnOff || !off.At.Equal(t0.Add(21*time.Minute)) {
		t.Fatalf("recovered %+v, want 1 m after the values came back at 20 m", off)
	}
	if g := out.NoData[0]; !g.From.Equal(t0.Add(10*time.Minute)) || !g.To.Equal(t0.Add(20*time.Minute)) {
		t.Fatalf("no-data span %+v", g)
	}
}

// TestReplaySparseHistory: a hold shorter than the spacing of the history
// (trigger for 20s over the fleet's 30 s points) fires as the job would,
// however fine the preview's step: the evaluator's interval is the
// points' spacing. With the step (3s, a 1h preview's) as interval, every
// point started the hold over and the preview said 0 fired.
func TestReplaySparseHistory(t *testing.T) {
	var pts []signal.Point
	for d := time.Duration(0); d < 20*time.Minute; d += 30 * time.Second {
		v := 50.0
		if d >= 5*time.Minute && d < 10*time.Minute {
			v = 90
		}
		pts = append(pts, signal.Point{At: t0.Add(d), Value: v})
	}
	r := &Rule{TriggerOp: Above, TriggerThreshold: 80, TriggerFor: "20s", RecoverOp: Below, RecoverThreshold: 60, RecoverFor: "20s",
		Cooldown: "0s", MaxOn: "0s", OnNoData: MissingHold, OnError: MissingHold, FlapMaxTransitions: 4, FlapWindow: "1h"}
	out := &Preview{Start: t0, End: t0.Add(20 * time.Minute)}
	replayRange(r, pts, out.Start, out.End, 3*time.Second, out)
	if out.Fired != 1 || out.Recovered != 1 {
		t.Fatalf("preview over 30 s points with 20s holds: %s, events %+v", out, out.Events)
	}
	if on := out.Events[0]; !on.At.Equal(t0.Add(5*time.Minute + 30*time.Second)) {
		t.Fatalf("fired at %s, want at the second point above 80 (5m30s)", on.At.Sub(t0))
	}
}
