package limit

import (
	"math"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"time"
)

// Rolling counts events in a ring of time buckets: up to three counters per
// bucket, and a bucket is reused (zeroed) once the ring comes round to it
// again. It backs the sliding window, the breaker and the retry budget.
//
// Add and Sum take no lock; an Add waits (yielding) only while another
// goroutine recycles its bucket, and no event is lost to a recycle. An Add
// whose goroutine stalled for a whole ring period may land in the next
// round; an event older than the ring is dropped.
type Rolling struct {
	width   int64          // nanoseconds per bucket
	n       int            // buckets in the ring
	stripes int            // counter copies per bucket (a power of two)
	epochs  []atomic.Int64 // per bucket: the index (time / width) its counters belong to
	// cells holds stripes × n counter triples, stripe-major: the stripes of
	// one bucket lie n cells apart, so goroutines adding to different
	// stripes of the current bucket do not share a cache line.
	cells []rollCell
}

type rollCell struct{ n [3]atomic.Int64 }

// NewRolling returns a ring of n buckets of the given width; it remembers
// events from the last (n−1)×width to n×width, depending on where in the
// current bucket now falls.
func NewRolling(width time.Duration, n int) *Rolling { return NewStripedRolling(width, n, 1) }

// NewStripedRolling is NewRolling with each bucket's counters split into
// stripes (rounded up to a power of two): Add picks one at random, Sum adds
// them up. Under parallel Adds the counters then stop ping-ponging one
// cache line between cores, for stripes× the memory.
func NewStripedRolling(width time.Duration, n, stripes int) *Rolling {
	n = max(n, 2)
	s := 1
	for s < stripes {
		s <<= 1
	}
	return &Rolling{
		width: max(int64(width), 1), n: n, stripes: s,
		epochs: make([]atomic.Int64, n), cells: make([]rollCell, n*s),
	}
}

// Span is the longest stretch of time the ring remembers.
func (r *Rolling) Span() time.Duration { return time.Duration(r.width * int64(r.n)) }

// Buckets is the number of buckets in the ring.
func (r *Rolling) Buckets() int { return r.n }

// emptyEpoch marks a bucket that holds no round (after Reset).
const emptyEpoch = math.MinInt64

// slot returns the ring position of time index idx, recycling the bucket
// when it still holds an older round; ok is false when the ring has already
// moved past idx (an event too old to count).
//
// Recycling is claimed with a CAS to ^idx, the stripes are zeroed, and only
// then is idx published: an Add for idx never lands in a cell that is about
// to be zeroed, so no event is lost to a recycle. Adds arriving meanwhile
// yield until the bucket is ready (once per bucket width, briefly).
func (r *Rolling) slot(idx int64) (i int, ok bool) {
	i = int(uint64(idx) % uint64(r.n))
	for {
		e := r.epochs[i].Load()
		switch {
		case e == idx:
			return i, true
		case e == ^idx:
			runtime.Gosched()
		case e != emptyEpoch && (e > idx || (e < 0 && ^e > idx)):
			return i, false
		case r.epochs[i].CompareAndSwap(e, ^idx):
			for s := 0; s < r.stripes; s++ {
				c := &r.cells[s*r.n+i]
				for j := range c.n {
					c.n[j].Store(0)
				}
			}
			r.epochs[i].Store(idx)
			return i, true
		}
	}
}

// cell picks the stripe of bucket slot i that this Add writes to.
func (r *Rolling) cell(i int) *rollCell {
	if r.stripes == 1 {
		return &r.cells[i]
	}
	return &r.cells[int(rand.Uint32()&uint32(r.stripes-1))*r.n+i]
}

// Add adds delta to counter i (0–2) at time now.
func (r *Rolling) Add(now int64, i int, delta int64) {
	if b, ok := r.slot(now / r.width); ok {
		r.cell(b).n[i].Add(delta)
	}
}

// Add3 adds to the three counters at once, skipping zero deltas.
func (r *Rolling) Add3(now int64, d0, d1, d2 int64) {
	b, ok := r.slot(now / r.width)
	if !ok {
		return
	}
	c := r.cell(b)
	if d0 != 0 {
		c.n[0].Add(d0)
	}
	if d1 != 0 {
		c.n[1].Add(d1)
	}
	if d2 != 0 {
		c.n[2].Add(d2)
	}
}

// bucketSum adds up the stripes of bucket slot i.
func (r *Rolling) bucketSum(i int) (s [3]int64) {
	for st := 0; st < r.stripes; st++ {
		c := &r.cells[st*r.n+i]
		for j := range s {
			s[j] += c.n[j].Load()
		}
	}
	return s
}

// Sum returns the three counters summed over the buckets still in the ring
// at time now.
func (r *Rolling) Sum(now int64) (s [3]int64) {
	idx := now / r.width
	k := int64(r.n)
	for i := range r.epochs {
		if e := r.epochs[i].Load(); e > idx-k && e <= idx {
			b := r.bucketSum(i)
			for j := range s {
				s[j] += b[j]
			}
		}
	}
	return s
}

// expiry returns how long from now until counter 0 has dropped by at least
// need, as buckets leave the ring oldest first; -1 if it never will.
func (r *Rolling) expiry(now, need int64) time.Duration {
	idx := now / r.width
	k := int64(r.n)
	var freed int64
	for e := idx - k + 1; e <= idx; e++ {
		i := int(uint64(e) % uint64(k))
		if r.epochs[i].Load() != e {
			continue
		}
		if freed += r.bucketSum(i)[0]; freed >= need {
			return time.Duration((e+k)*r.width - now)
		}
	}
	return -1
}

// Reset forgets every event.
func (r *Rolling) Reset() {
	for i := range r.epochs {
		r.epochs[i].Store(emptyEpoch)
	}
	for i := range r.cells {
		for j := range r.cells[i].n {
			r.cells[i].n[j].Store(0)
		}
	}
}

// eachPast calls fn with the counters of every finished bucket still in the
// ring at time now (the current, still filling bucket is left out), oldest
// first; buckets that saw no event are skipped.
func (r *Rolling) eachPast(now int64, fn func([3]int64)) {
	idx := now / r.width
	k := int64(r.n)
	for e := idx - k + 1; e < idx; e++ {
		i := int(uint64(e) % uint64(k))
		if r.epochs[i].Load() == e {
			fn(r.bucketSum(i))
		}
	}
}
