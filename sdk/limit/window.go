package limit

import (
	"sync"
	"time"

	"github.com/switchyard-io/switchyard/sdk/wire"
)

// DefaultSlices is the number of counters a sliding window keeps.
const DefaultSlices = 10

// SlidingWindow admits at most limit requests in any window of the given
// length, counted in k sliced counters of width window/(k−1) (rounded up to the
// nanosecond).
//
// Accuracy. At every admission the counters cover the last window plus the
// part of the current slice already elapsed, so the span counted is between
// window and window × (1 + 1/(k−1)). Hence:
//
//   - it never admits more than limit in any interval of length window
//     (a fixed window admits up to 2 × limit across a boundary);
//   - in the worst case a request is still counted up to window/(k−1) after
//     it left the true window, so against a true sliding log the limiter can
//     be off by a factor of about 1 + 1/(k−1) — here on the safe side: a
//     steady client may get as little as limit per window × (1 + 1/(k−1)).
//     (The common variant with slices of width window/k errs the other way
//     and can admit up to 2 × limit in a window under bursts.)
//
// With k = 10 the error is about 11 %. Allow takes a short mutex.
type SlidingWindow struct {
	mu     sync.Mutex
	limit  int64
	window time.Duration
	ring   *Rolling
	clock  Clock
	// reserve keeps part of the limit for higher criticalities.
	reserve float64
}

// NewSlidingWindow returns an empty window; slices below 2 mean
// DefaultSlices, a nil clock means SystemClock.
func NewSlidingWindow(limit int, window time.Duration, slices int, clock Clock) *SlidingWindow {
	w := &SlidingWindow{clock: orSystem(clock)}
	w.limit = int64(limit)
	w.setWindow(window, slices)
	return w
}

func (w *SlidingWindow) setWindow(window time.Duration, slices int) {
	if slices < 2 {
		slices = DefaultSlices
	}
	w.window = window
	// Round the slice width up: k−1 truncated slices could span a few
	// nanoseconds less than the window and let a request slip in early.
	k1 := time.Duration(slices - 1)
	w.ring = NewRolling((window+k1-1)/k1, slices)
}

// Allow admits one request.
func (w *SlidingWindow) Allow() Decision { return w.AllowN(1) }

// AllowN admits n requests at once, or none.
func (w *SlidingWindow) AllowN(n int) Decision { return w.allow(n, Critical) }

func (w *SlidingWindow) allow(n int, c Criticality) Decision {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.clock.Nanotime()
	used := w.ring.Sum(now)[0]
	if over := used + int64(n) - int64(shareOf(int(w.limit), c, w.reserve)); over > 0 {
		return Decision{RetryAfter: max(w.ring.expiry(now, over), 0), Reason: ReasonRate}
	}
	w.ring.Add(now, 0, int64(n))
	return Decision{OK: true}
}

// Count reports the admissions the window currently counts.
func (w *SlidingWindow) Count() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ring.Sum(w.clock.Nanotime())[0]
}

// SetLimit changes the limit and window. A new limit keeps the counts; a new
// window length starts counting afresh.
func (w *SlidingWindow) SetLimit(limit int, window time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.limit = int64(limit)
	if window != w.window {
		w.setWindow(window, w.ring.Buckets())
	}
}

// Kind implements Limiter.
func (w *SlidingWindow) Kind() string { return wire.KindSlidingWindow }

// Admit implements Limiter.
func (w *SlidingWindow) Admit() (Permit, Decision) { return Permit{}, w.AllowN(1) }

func (w *SlidingWindow) update(r *wire.LimitRule) {
	w.SetLimit(r.Limit, r.Window.D())
	w.SetReserve(r.Reserve)
}

// SetReserve keeps part of the limit for higher criticalities (see
// Criticality.Share).
func (w *SlidingWindow) SetReserve(reserve float64) {
	w.mu.Lock()
	w.reserve = reserve
	w.mu.Unlock()
}

// AdmitAs implements Limiter: a request below critical may use only its
// share of the limit (see SetReserve).
func (w *SlidingWindow) AdmitAs(c Criticality) (Permit, Decision) { return Permit{}, w.allow(1, c) }
