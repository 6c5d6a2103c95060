package limit

import (
	"context"
	"sync"
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

func (systemClock) AfterFunc(d time.Duration, f func()) (stop func() bool) {
	return time.AfterFunc(d, f).Stop
}

// Timers is a Clock that can also run f once d of its time has passed; stop
// cancels it and reports whether it had not yet run. SystemClock and
// FakeClock implement it; a Clock that does not gets real-time timers.
type Timers interface {
	Clock
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// afterFunc runs f after d on c's timers, or on real time if c has none.
func afterFunc(c Clock, d time.Duration, f func()) (stop func() bool) {
	if t, ok := c.(Timers); ok {
		return t.AfterFunc(d, f)
	}
	return time.AfterFunc(d, f).Stop
}

// SystemClock is the real monotonic clock, the default when nil is passed.
var SystemClock Clock = systemClock{}

func orSystem(c Clock) Clock {
	if c == nil {
		return SystemClock
	}
	return c
}

// FakeClock is a manual clock for tests: it moves only when told to, and
// its timers (AfterFunc) run inside Advance once their time has come.
// It is safe for concurrent use.
type FakeClock struct {
	ns     atomic.Int64
	mu     sync.Mutex
	timers []*fakeTimer
}

type fakeTimer struct {
	at int64
	f  func()
}

// NewFakeClock returns a clock reading zero.
func NewFakeClock() *FakeClock { return &FakeClock{} }

// Nanotime returns the current reading.
func (c *FakeClock) Nanotime() int64 { return c.ns.Load() }

// Advance moves the clock forward by d and runs the timers due by then,
// earliest first, on the calling goroutine.
func (c *FakeClock) Advance(d time.Duration) {
	now := c.ns.Add(int64(d))
	for {
		c.mu.Lock()
		var due *fakeTimer
		at := -1
		for i, t := range c.timers {
			if t.at <= now && (due == nil || t.at < due.at) {
				due, at = t, i
			}
		}
		if due == nil {
			c.mu.Unlock()
			return
		}
		c.timers = append(c.timers[:at], c.timers[at+1:]...)
		c.mu.Unlock()
		due.f()
	}
}

// AfterFunc implements Timers: f runs in the Advance that reaches d from now.
func (c *FakeClock) AfterFunc(d time.Duration, f func()) (stop func() bool) {
	t := &fakeTimer{at: c.ns.Load() + int64(d), f: f}
	c.mu.Lock()
	c.timers = append(c.timers, t)
	c.mu.Unlock()
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for i, x := range c.timers {
			if x == t {
				c.timers = append(c.timers[:i], c.timers[i+1:]...)
				return true
			}
		}
		return false
	}
}

// PendingTimers reports how many timers have not run yet.
func (c *FakeClock) PendingTimers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

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
