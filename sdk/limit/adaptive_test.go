package limit_test

import (
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/sdk/limit"
)

// simulate drives a closed loop for d of fake time: every tick the client
// fills every free slot, the requests take latency, then finish (ok or not).
func simulate(a *limit.Adaptive, clock *limit.FakeClock, d, latency time.Duration, ok bool) {
	for end := clock.Now() + d; clock.Now() < end; {
		var ps []limit.Permit
		for {
			p, dec := a.TryAcquire()
			if !dec.OK {
				break
			}
			ps = append(ps, p)
		}
		clock.Advance(latency)
		for _, p := range ps {
			p.Finish(ok)
		}
	}
}

func TestAdaptiveColdStartAndBounds(t *testing.T) {
	tests := []struct{ lo, hi, want int }{
		{1, 100, 50},
		{80, 100, 80}, // half of max is below min
		{1, 1, 1},
	}
	for _, tc := range tests {
		a := limit.NewAdaptive(tc.lo, tc.hi, time.Second, limit.NewFakeClock())
		if got := a.Limit(); got != tc.want {
			t.Errorf("cold start of [%d,%d] = %d, want %d", tc.lo, tc.hi, got, tc.want)
		}
	}
}

func TestAdaptiveStepLatency(t *testing.T) {
	clock := limit.NewFakeClock()
	a := limit.NewAdaptive(5, 100, time.Second, clock)

	simulate(a, clock, 60*time.Second, 10*ms, true)
	if got := a.Limit(); got != 100 {
		t.Fatalf("limit after 60 s at a steady 10ms = %d, want max 100", got)
	}
	simulate(a, clock, 20*time.Second, 80*ms, true) // the dependency slows 8×
	if got := a.Limit(); got != 5 {
		t.Fatalf("limit after 20 s at 80ms = %d, want to converge to min 5", got)
	}
	simulate(a, clock, 60*time.Second, 10*ms, true) // and recovers
	if got := a.Limit(); got != 100 {
		t.Fatalf("limit after latency recovered = %d, want back at 100", got)
	}
}

func TestAdaptiveDecreasesGradually(t *testing.T) {
	clock := limit.NewFakeClock()
	a := limit.NewAdaptive(1, 100, time.Second, clock)
	simulate(a, clock, 30*time.Second, 10*ms, true)
	before := a.Limit()
	simulate(a, clock, 1100*ms, 20*ms, true) // one congested window
	after := a.Limit()
	if after >= before || after < before/2 {
		t.Fatalf("one congested window moved the limit %d → %d, want a cut of at most half", before, after)
	}
}

func TestAdaptiveIgnoresFailedLatency(t *testing.T) {
	// Fast failures during a slowdown must not look like recovered latency.
	clock := limit.NewFakeClock()
	a := limit.NewAdaptive(2, 100, time.Second, clock)
	simulate(a, clock, 30*time.Second, 10*ms, true)
	high := a.Limit()
	for range 10 { // each second: slow successes plus a flood of 1ms failures
		simulate(a, clock, 500*ms, 100*ms, true)
		simulate(a, clock, 500*ms, ms, false)
	}
	if got := a.Limit(); got >= high/2 {
		t.Fatalf("limit %d (from %d) did not fall although successful calls took 100ms", got, high)
	}
}

func TestAdaptiveSetBoundsClamps(t *testing.T) {
	clock := limit.NewFakeClock()
	a := limit.NewAdaptive(1, 100, time.Second, clock)
	a.SetBounds(1, 20, time.Second)
	if got := a.Limit(); got != 20 {
		t.Fatalf("limit after max 100→20 = %d, want 20", got)
	}
	a.SetBounds(30, 40, 0) // window below 1s is raised
	if got := a.Limit(); got != 30 {
		t.Fatalf("limit after min raised to 30 = %d, want 30", got)
	}
}
