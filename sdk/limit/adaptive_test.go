package limit_test

import (
	"slices"
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

// openLoop offers a limiter a steady stream of requests, the way a
// service sees traffic: every 10ms of fake time 20 requests arrive (2,000/s)
// and take a free slot or are refused; an admitted request ends latency
// later, ok or not, whatever else happens meanwhile.
type openLoop struct {
	a       *limit.Adaptive
	clock   *limit.FakeClock
	pending []pendingRequest
}

type pendingRequest struct {
	p   limit.Permit
	end time.Duration
	ok  bool
}

// windows runs n one-second windows of traffic whose requests take latency
// and end ok or failed, and returns the limit at the end of each window.
func (l *openLoop) windows(n int, latency time.Duration, ok bool) []int {
	out := make([]int, n)
	for i := range out {
		for end := l.clock.Now() + time.Second; l.clock.Now() < end; l.clock.Advance(10 * ms) {
			now := l.clock.Now()
			l.pending = slices.DeleteFunc(l.pending, func(r pendingRequest) bool {
				if r.end > now {
					return false
				}
				r.p.Finish(r.ok)
				return true
			})
			for range 20 {
				if p, d := l.a.TryAcquire(); d.OK {
					l.pending = append(l.pending, pendingRequest{p: p, end: now + latency, ok: ok})
				}
			}
		}
		out[i] = l.a.Limit()
	}
	return out
}

// TestAdaptiveOutage: the downstream goes from 20ms to every request
// timing out. Timeouts end as failures at the caller's deadline and must
// cut the limit to its minimum within a few windows, also when the
// deadline is longer than the window (so some windows see no request end
// at all); after recovery the limit climbs back to its maximum.
func TestAdaptiveOutage(t *testing.T) {
	for _, tc := range []struct {
		name    string
		timeout time.Duration
		within  int // windows from the start of the outage to the minimum
	}{
		{"timeout 250ms", 250 * ms, 7},
		{"timeout 2s, longer than the window", 2 * time.Second, 14},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := limit.NewFakeClock()
			l := &openLoop{a: limit.NewAdaptive(2, 100, time.Second, clock), clock: clock}
			before := l.windows(60, 20*ms, true)
			t.Logf("healthy: limit per window %v", before)
			if got := before[len(before)-1]; got != 100 {
				t.Fatalf("limit after 60 healthy windows = %d, want max 100", got)
			}
			during := l.windows(20, tc.timeout, false)
			t.Logf("outage: limit per window %v", during)
			if i := slices.Index(during, 2); i < 0 || i >= tc.within {
				t.Fatalf("limit per window during the outage %v: want min 2 within %d windows", during, tc.within)
			}
			if slices.Max(during[slices.Index(during, 2):]) != 2 {
				t.Fatalf("limit per window during the outage %v: rose again before recovery", during)
			}
			after := l.windows(90, 20*ms, true)
			t.Logf("recovery: limit per window %v", after)
			if got := after[len(after)-1]; got != 100 {
				t.Fatalf("limit 90 windows after recovery = %d, want back at max 100", got)
			}
		})
	}
}

// TestAdaptiveSparseFailures: occasional failures of a lightly used
// service, whose limit is far from binding, do not ratchet the limit down.
func TestAdaptiveSparseFailures(t *testing.T) {
	clock := limit.NewFakeClock()
	a := limit.NewAdaptive(2, 100, time.Second, clock)
	simulate(a, clock, 60*time.Second, 20*ms, true)
	for range 30 { // one request at a time, 20ms each, every tenth one fails
		for i := range 10 {
			p, d := a.TryAcquire()
			if !d.OK {
				t.Fatal("a lone request was refused")
			}
			clock.Advance(20 * ms)
			p.Finish(i != 0)
			clock.Advance(80 * ms)
		}
	}
	if got := a.Limit(); got != 100 {
		t.Fatalf("limit after 30 windows with one failure in ten lone requests = %d, want 100", got)
	}
}
