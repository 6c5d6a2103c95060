package limit_test

import (
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/sdk/limit"
)

// fixedWindow is the naive limiter the sliding window replaces: one counter
// reset at every window boundary.
type fixedWindow struct {
	clock  *limit.FakeClock
	limit  int
	window time.Duration
	epoch  int64
	n      int
}

func (f *fixedWindow) allow() bool {
	if e := int64(f.clock.Now() / f.window); e != f.epoch {
		f.epoch, f.n = e, 0
	}
	if f.n >= f.limit {
		return false
	}
	f.n++
	return true
}

// maxInWindow returns the most admissions in any closed interval of length w.
func maxInWindow(ts []time.Duration, w time.Duration) int {
	best, lo := 0, 0
	for hi := range ts {
		for ts[hi]-ts[lo] > w {
			lo++
		}
		best = max(best, hi-lo+1)
	}
	return best
}

func TestSlidingWindowAcrossBoundary(t *testing.T) {
	const limitN = 10
	window := time.Second

	tests := []struct {
		name   string
		bursts []time.Duration // when a burst of 2×limit requests arrives
	}{
		{"just before and at a boundary", []time.Duration{990 * ms, 1000 * ms}},
		{"end of one window, start of next twice", []time.Duration{999 * ms, 1001 * ms, 1999 * ms, 2001 * ms}},
		{"bursts every 300ms", []time.Duration{0, 300 * ms, 600 * ms, 900 * ms, 1200 * ms, 1500 * ms, 1800 * ms, 2100 * ms}},
		{"bursts every 95ms", func() (b []time.Duration) {
			for i := range 40 {
				b = append(b, time.Duration(i)*95*ms)
			}
			return b
		}()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sc, fc := limit.NewFakeClock(), limit.NewFakeClock()
			sw := limit.NewSlidingWindow(limitN, window, 10, sc)
			fw := &fixedWindow{clock: fc, limit: limitN, window: window}
			var slid, fixed []time.Duration
			for _, at := range tc.bursts {
				sc.Advance(at - sc.Now())
				fc.Advance(at - fc.Now())
				for range 2 * limitN {
					if sw.Allow().OK {
						slid = append(slid, at)
					}
					if fw.allow() {
						fixed = append(fixed, at)
					}
				}
			}
			if got := maxInWindow(slid, window); got > limitN {
				t.Errorf("sliding window admitted %d in one window, limit %d (admissions %v)", got, limitN, slid)
			}
			t.Logf("most in any 1s window: sliding %d, fixed %d", maxInWindow(slid, window), maxInWindow(fixed, window))
			if maxInWindow(fixed, window) != 2*limitN {
				t.Errorf("fixed window admitted %d across the boundary, want %d to show the problem", maxInWindow(fixed, window), 2*limitN)
			}
			if len(slid) == 0 {
				t.Error("sliding window admitted nothing")
			}
		})
	}
}

func TestSlidingWindowSteadyRateWithinBound(t *testing.T) {
	// A client asking every millisecond for 10 s gets between
	// limit/(1+1/(k−1)) and limit per window on average.
	const limitN, k = 100, 10
	clock := limit.NewFakeClock()
	sw := limit.NewSlidingWindow(limitN, time.Second, k, clock)
	admitted := 0
	for range 10_000 {
		if sw.Allow().OK {
			admitted++
		}
		clock.Advance(ms)
	}
	lo := int(10 * limitN / (1 + 1.0/(k-1)))
	if admitted < lo || admitted > 10*limitN {
		t.Fatalf("admitted %d in 10 s, want between %d and %d", admitted, lo, 10*limitN)
	}
}

func TestSlidingWindowRetryAfterAndUpdate(t *testing.T) {
	clock := limit.NewFakeClock()
	sw := limit.NewSlidingWindow(3, 900*ms, 10, clock) // slices of 100 ms
	sw.Allow()
	clock.Advance(250 * ms)
	sw.Allow()
	sw.Allow()
	d := sw.Allow()
	// The request at 0 leaves the count when slice 0 leaves the ring (at 1 s).
	if d.OK || d.RetryAfter != 750*ms || d.Reason != limit.ReasonRate {
		t.Fatalf("full window: %+v, want rejection RetryAfter 750ms", d)
	}
	clock.Advance(d.RetryAfter)
	if !sw.Allow().OK {
		t.Fatal("rejected at RetryAfter")
	}
	sw.SetLimit(5, 900*ms) // same window: counts kept
	if got := sw.Count(); got != 3 {
		t.Fatalf("count after limit change = %d, want 3", got)
	}
	sw.SetLimit(5, 2*time.Second) // new window: fresh
	if got := sw.Count(); got != 0 {
		t.Fatalf("count after window change = %d, want 0", got)
	}
}

// TestSlidingWindowSliceWidthRoundsUp: with a window that k−1 does not
// divide, a request exactly one window minus a nanosecond after the last
// admission is still inside the window.
func TestSlidingWindowSliceWidthRoundsUp(t *testing.T) {
	clock := limit.NewFakeClock()
	w := limit.NewSlidingWindow(1, time.Second, 8, clock) // 1 s / 7 slices
	clock.Advance(time.Second/7 - 1)                      // the last nanosecond of the first slice
	if !w.Allow().OK {
		t.Fatal("first request rejected")
	}
	clock.Advance(time.Second - 1)
	if w.Allow().OK {
		t.Fatal("second request admitted 1 s − 1 ns after the first, limit 1 per 1 s")
	}
	clock.Advance(2 * time.Second / 7)
	if !w.Allow().OK {
		t.Fatal("request rejected once the first left the window")
	}
}
