package limit

import (
	"sync/atomic"
	"time"
)

// Rolling counts events in a ring of time buckets: up to three counters per
// bucket, and a bucket is reused (zeroed) once the ring comes round to it
// again. It backs the sliding window, the breaker and the retry budget.
//
// Add and Sum are lock-free. When goroutines race to recycle the same bucket
// an event or two may be lost (or, for a moment, summed with the bucket's
// previous round); callers that need exact counts (the
// sliding window, the retry budget) hold their own lock around it.
type Rolling struct {
	width   int64 // nanoseconds per bucket
	buckets []rollBucket
}

type rollBucket struct {
	epoch atomic.Int64 // bucket index (time / width) the counters belong to
	n     [3]atomic.Int64
}

// NewRolling returns a ring of n buckets of the given width; it remembers
// events from the last (n−1)×width to n×width, depending on where in the
// current bucket now falls.
func NewRolling(width time.Duration, n int) *Rolling {
	if n < 2 {
		n = 2
	}
	return &Rolling{width: max(int64(width), 1), buckets: make([]rollBucket, n)}
}

// Span is the longest stretch of time the ring remembers.
func (r *Rolling) Span() time.Duration { return time.Duration(r.width * int64(len(r.buckets))) }

func (r *Rolling) bucket(now int64) (*rollBucket, int64) {
	idx := now / r.width
	b := &r.buckets[uint64(idx)%uint64(len(r.buckets))]
	if e := b.epoch.Load(); e != idx && b.epoch.CompareAndSwap(e, idx) {
		for i := range b.n {
			b.n[i].Store(0)
		}
	}
	return b, idx
}

// Add adds delta to counter i (0–2) at time now.
func (r *Rolling) Add(now int64, i int, delta int64) {
	b, _ := r.bucket(now)
	b.n[i].Add(delta)
}

// Add3 adds to the three counters at once, skipping zero deltas.
func (r *Rolling) Add3(now int64, d0, d1, d2 int64) {
	b, _ := r.bucket(now)
	if d0 != 0 {
		b.n[0].Add(d0)
	}
	if d1 != 0 {
		b.n[1].Add(d1)
	}
	if d2 != 0 {
		b.n[2].Add(d2)
	}
}

// Sum returns the three counters summed over the buckets still in the ring
// at time now.
func (r *Rolling) Sum(now int64) (s [3]int64) {
	idx := now / r.width
	k := int64(len(r.buckets))
	for i := range r.buckets {
		b := &r.buckets[i]
		if e := b.epoch.Load(); e > idx-k && e <= idx {
			for j := range s {
				s[j] += b.n[j].Load()
			}
		}
	}
	return s
}

// expiry returns how long from now until counter 0 has dropped by at least
// need, as buckets leave the ring oldest first; -1 if it never will.
func (r *Rolling) expiry(now, need int64) time.Duration {
	idx := now / r.width
	k := int64(len(r.buckets))
	var freed int64
	for e := idx - k + 1; e <= idx; e++ {
		b := &r.buckets[uint64(e)%uint64(k)]
		if b.epoch.Load() != e {
			continue
		}
		if freed += b.n[0].Load(); freed >= need {
			return time.Duration((e+k)*r.width - now)
		}
	}
	return -1
}

// Reset forgets every event.
func (r *Rolling) Reset() {
	for i := range r.buckets {
		b := &r.buckets[i]
		b.epoch.Store(-1 << 62)
		for j := range b.n {
			b.n[j].Store(0)
		}
	}
}
