package limit

import (
	"context"
	"sync/atomic"
	"time"
)

// Clock is a monotonic time source in nanoseconds since an arbitrary origin.
// Only differences between readings are meaningful.
type Clock interface {
	Nanotime() int64
}

// processStart carries a monotonic reading, so time.Since below uses only the
// runtime's nanotime (one vDSO call) rather than wall plus monotonic time.
var processStart = time.Now()

type systemClock struct{}

func (systemClock) Nanotime() int64 { return int64(time.Since(processStart)) }

// SystemClock is the real monotonic clock, the default when nil is passed.
var SystemClock Clock = systemClock{}

func orSystem(c Clock) Clock {
	if c == nil {
		return SystemClock
	}
	return c
}

// FakeClock is a manual clock for tests: it moves only when told to.
// It is safe for concurrent use.
type FakeClock struct{ ns atomic.Int64 }

// NewFakeClock returns a clock reading zero.
func NewFakeClock() *FakeClock { return &FakeClock{} }

// Nanotime returns the current reading.
func (c *FakeClock) Nanotime() int64 { return c.ns.Load() }

// Advance moves the clock forward by d.
func (c *FakeClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// Now returns the reading as a duration since the origin, for readable tests.
func (c *FakeClock) Now() time.Duration { return time.Duration(c.ns.Load()) }

// Sleep waits d or until ctx ends, whichever comes first; it returns ctx's
// error in the second case and nil at once when d ≤ 0. It is the real-time
// wait behind a GCRA delay or a retry backoff.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
