package limit

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchyard-io/switchyard/sdk/wire"
)

// gate is a counting semaphore with a changeable size and a queue of
// waiters; Concurrency and Adaptive are built on it. A released slot is
// handed straight to a waiter, so the count never exceeds max. Waiters are
// served highest criticality first and in arrival order within one (newest
// first while a CoDel queue with lifo is overloaded). A request of a lower
// criticality takes or is handed a slot only while fewer than its share of
// max (shareOf) are held.
type gate struct {
	mu       sync.Mutex
	max      int
	inflight int
	reserve  float64
	waiters  []*waiter
	q        *codel // nil: waiters wait until their context ends
	clock    Clock
}

// waiter is one request queued for a slot.
type waiter struct {
	ch   chan struct{} // closed once decided
	ok   bool          // a slot was handed over (set before ch closes)
	at   int64         // clock reading when it started waiting
	c    Criticality
	stop func() bool // cancels the queue timeout
}

// limitFor is how many slots may be held when one goes to c.
func (g *gate) limitFor(c Criticality) int { return shareOf(g.max, c, g.reserve) }

// tryLocked takes a slot if one is free for c; g.mu is held.
func (g *gate) tryLocked(c Criticality) bool {
	if g.inflight < g.limitFor(c) {
		g.inflight++
		if g.q != nil {
			g.q.observe(g.clock.Nanotime(), 0) // no wait: the queue is draining
		}
		return true
	}
	return false
}

// wait queues for a slot; g.mu is held on entry and released. It returns
// nil with the slot held, ErrLimited when a CoDel queue gave up on the
// waiter (too long in the queue), or ctx's error.
func (g *gate) wait(ctx context.Context, c Criticality) error {
	w := &waiter{ch: make(chan struct{}), c: c}
	if g.q != nil {
		w.at = g.clock.Nanotime()
		w.stop = afterFunc(g.clock, g.q.maxWait(), func() { g.expire(w) })
	}
	g.waiters = append(g.waiters, w)
	g.mu.Unlock()
	select {
	case <-w.ch:
		if w.ok {
			return nil
		}
		return ErrLimited
	case <-ctx.Done():
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.removeLocked(w) {
		if w.stop != nil {
			w.stop()
		}
		return ctx.Err()
	}
	if w.ok {
		// The slot was handed over while we gave up: pass it on.
		g.releaseLocked()
	}
	return ctx.Err()
}

// expire drops a waiter whose queue timeout ran out.
func (g *gate) expire(w *waiter) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.waiters) == 0 {
		return
	}
	now := g.clock.Nanotime()
	head := g.waiters[0].at
	if g.removeLocked(w) {
		if g.q != nil { // the queue may have been turned off since
			g.q.observe(now, now-head)
		}
		close(w.ch)
	}
}

func (g *gate) removeLocked(w *waiter) bool {
	for i, x := range g.waiters {
		if x == w {
			g.waiters = slices.Delete(g.waiters, i, i+1)
			return true
		}
	}
	return false
}

// releaseLocked frees a slot or hands it to a waiter; g.mu is held.
func (g *gate) releaseLocked() {
	if !g.handLocked(true) {
		g.inflight--
	}
}

// setMaxLocked resizes the gate, admitting waiters if it grew; g.mu is held.
// A smaller max takes effect as requests finish.
func (g *gate) setMaxLocked(n int) {
	g.max = n
	for g.handLocked(false) {
	}
}

// handLocked gives a slot to the next eligible waiter, dropping those a
// CoDel queue sloughs on the way; held says the slot is a released one
// still counted in inflight. It reports whether a waiter took the slot.
func (g *gate) handLocked(held bool) bool {
	for {
		others := g.inflight // slots held by others once this one is taken
		if held {
			others--
		}
		i := g.nextLocked(others)
		if i < 0 {
			return false
		}
		w := g.waiters[i]
		head := g.waiters[0].at // the oldest waiter: the queue's standing delay
		g.waiters = slices.Delete(g.waiters, i, i+1)
		if w.stop != nil {
			w.stop()
		}
		if g.q != nil {
			now := g.clock.Nanotime()
			g.q.observe(now, now-head)
			if g.q.overloaded && now-w.at > 2*g.q.target {
				close(w.ch) // sat too long in an overloaded queue
				continue
			}
		}
		if !held {
			g.inflight++
		}
		w.ok = true
		close(w.ch)
		return true
	}
}

// nextLocked picks the waiter to serve while others slots are held by
// others: the highest criticality whose share is not used up, the oldest of
// it (the newest under adaptive LIFO); -1 if none.
func (g *gate) nextLocked(others int) int {
	lifo := g.lifoLocked()
	best := -1
	for i, w := range g.waiters {
		if others >= g.limitFor(w.c) {
			continue
		}
		if best < 0 || w.c < g.waiters[best].c || (lifo && w.c == g.waiters[best].c) {
			best = i
		}
	}
	return best
}

// lifoLocked reports whether adaptive LIFO is on: a queue with lifo serves
// the newest waiter first once a queue stands (its oldest waiter has waited
// past the target) or the queue is overloaded. Fresh requests then get the
// slots while they can still make their deadlines, and the old ones time
// out — Facebook's adaptive LIFO.
func (g *gate) lifoLocked() bool {
	q := g.q
	if q == nil || !q.lifo || len(g.waiters) == 0 {
		return false
	}
	return q.overloaded || g.clock.Nanotime()-g.waiters[0].at > q.target
}

// codel is the controlled-delay state of a queue (Nichols and Jacobson's
// CoDel as Facebook applies it to request queues): the queue becomes
// overloaded when the shortest delay seen over an interval exceeded target,
// and stays so until an interval in which it drained; the delay is the age
// of the oldest waiter whenever one leaves the queue.
// While it is, a waiter may queue at most target (otherwise interval), and
// one that already waited over 2 × target when its turn comes is dropped.
// A request admitted without waiting counts as a wait of 0, so a queue that
// drains now and then is never overloaded.
type codel struct {
	target, interval int64
	lifo             bool
	intervalEnd      int64
	minDelay         int64 // shortest wait observed in the interval, -1: none
	overloaded       bool
}

func newCodel(target, interval time.Duration, lifo bool) *codel {
	return &codel{target: int64(target), interval: int64(interval), lifo: lifo, minDelay: -1}
}

// observe records the queue's delay when a waiter leaves it at now: the
// age of the oldest waiter (under LIFO the one served may be fresh while
// others stand), 0 for a request admitted without waiting.
func (q *codel) observe(now, sojourn int64) {
	switch {
	case now >= q.intervalEnd+q.interval:
		// No wait ended for a whole interval: nothing stood in the queue.
		q.overloaded = false
		q.intervalEnd, q.minDelay = now+q.interval, sojourn
	case now >= q.intervalEnd:
		// Enter on a standing delay above target; leave only once the
		// queue drained (a delay of 0) — otherwise waits capped at target
		// would look healthy and the cap would flap back to interval.
		if q.overloaded {
			q.overloaded = q.minDelay > 0
		} else {
			q.overloaded = q.minDelay > q.target
		}
		q.intervalEnd, q.minDelay = now+q.interval, sojourn
	case q.minDelay < 0 || sojourn < q.minDelay:
		q.minDelay = sojourn
	}
}

// maxWait is how long a new waiter may queue.
func (q *codel) maxWait() time.Duration {
	if q.overloaded {
		return time.Duration(q.target)
	}
	return time.Duration(q.interval)
}

// Concurrency bounds the requests in flight. TryAcquire never blocks;
// Acquire waits until a slot frees or ctx ends — with a CoDel queue
// (SetQueue) at most the queue's current bound, after which it fails with
// ErrLimited (reason queue_timeout).
//
// With a warm-up (SetWarmUp), raising max ramps it linearly over the
// warm-up period; lowering applies at once.
type Concurrency struct {
	g      gate
	warm   atomic.Pointer[warmUp]
	period time.Duration // guarded by g.mu
	target int           // the rule's max; guarded by g.mu
}

// NewConcurrency returns a limiter admitting at most max requests at once.
func NewConcurrency(max int) *Concurrency {
	c := &Concurrency{target: max}
	c.g.max = max
	c.g.clock = SystemClock
	return c
}

// NewCoDel returns a concurrency limiter whose waiters queue under CoDel
// (see SetQueue); a nil clock means SystemClock.
func NewCoDel(max int, target, interval time.Duration, lifo bool, clock Clock) *Concurrency {
	c := NewConcurrency(max)
	c.g.clock = orSystem(clock)
	c.SetQueue(target, interval, lifo)
	return c
}

// SetQueue makes waiting a CoDel queue: once the shortest wait over an
// interval stays above target, a waiter queues at most target (otherwise
// interval) and one that waited over 2 × target when a slot frees is
// dropped; lifo serves the newest waiter first while that lasts. A target
// of 0 turns the queue off (waiters wait until their context ends). The
// queue's state restarts when its parameters change.
func (c *Concurrency) SetQueue(target, interval time.Duration, lifo bool) {
	c.g.mu.Lock()
	defer c.g.mu.Unlock()
	if target <= 0 {
		c.g.q = nil
		return
	}
	if q := c.g.q; q != nil && q.target == int64(target) && q.interval == int64(interval) {
		q.lifo = lifo
		return
	}
	c.g.q = newCodel(target, interval, lifo)
}

// SetReserve keeps capacity for higher criticalities (see
// Criticality.Share).
func (c *Concurrency) SetReserve(reserve float64) {
	c.g.mu.Lock()
	c.g.reserve = reserve
	c.g.mu.Unlock()
}

// TryAcquire takes a slot if one is free.
func (c *Concurrency) TryAcquire() (Permit, Decision) { return c.AdmitAs(Critical) }

// AdmitAs takes a slot if one is free for a request of criticality cr.
func (c *Concurrency) AdmitAs(cr Criticality) (Permit, Decision) {
	c.tick()
	c.g.mu.Lock()
	ok := c.g.tryLocked(cr)
	c.g.mu.Unlock()
	if !ok {
		return Permit{}, Decision{Reason: ReasonConcurrency}
	}
	return Permit{r: c}, Decision{OK: true}
}

// Acquire waits for a slot until ctx ends (or the CoDel queue gives up).
func (c *Concurrency) Acquire(ctx context.Context) (Permit, error) {
	return c.AcquireAs(ctx, Critical)
}

// AcquireAs is Acquire for a request of criticality cr: it is served after
// every waiting request of a higher criticality.
func (c *Concurrency) AcquireAs(ctx context.Context, cr Criticality) (Permit, error) {
	c.tick()
	c.g.mu.Lock()
	if c.g.tryLocked(cr) {
		c.g.mu.Unlock()
		return Permit{r: c}, nil
	}
	if err := c.g.wait(ctx, cr); err != nil {
		return Permit{}, err
	}
	return Permit{r: c}, nil
}

// Free reports whether a request of criticality cr would get a slot now.
func (c *Concurrency) Free(cr Criticality) bool {
	c.tick()
	c.g.mu.Lock()
	defer c.g.mu.Unlock()
	return c.g.inflight < c.g.limitFor(cr)
}

// Queued reports the requests waiting for a slot.
func (c *Concurrency) Queued() int {
	c.g.mu.Lock()
	defer c.g.mu.Unlock()
	return len(c.g.waiters)
}

// Overloaded reports whether the CoDel queue is in its overloaded state.
func (c *Concurrency) Overloaded() bool {
	c.g.mu.Lock()
	defer c.g.mu.Unlock()
	return c.g.q != nil && c.g.q.overloaded
}

// InFlight reports the slots taken.
func (c *Concurrency) InFlight() int {
	c.g.mu.Lock()
	defer c.g.mu.Unlock()
	return c.g.inflight
}

// SetMax changes the bound; requests in flight stay counted. A raise with
// a warm-up set ramps from the bound in force now.
func (c *Concurrency) SetMax(n int) {
	c.g.mu.Lock()
	defer c.g.mu.Unlock()
	now := c.g.clock.Nanotime()
	from := float64(c.target)
	if w := c.warm.Load(); w != nil {
		from = w.value(now)[0]
	}
	c.target = n
	if c.period <= 0 || float64(n) <= from {
		c.warm.Store(nil)
		c.g.setMaxLocked(n)
		return
	}
	w := newWarmUp([2]float64{from}, [2]float64{float64(n)}, now, c.period, func(v [2]float64) {
		c.g.mu.Lock()
		c.g.setMaxLocked(max(int(v[0]), 1))
		c.g.mu.Unlock()
	})
	c.g.setMaxLocked(max(int(from), 1))
	c.warm.Store(w)
}

// SetWarmUp sets the period over which a raised max ramps up (0: at once).
func (c *Concurrency) SetWarmUp(d time.Duration) {
	c.g.mu.Lock()
	c.period = d
	c.g.mu.Unlock()
}

// Max reports the bound in force now (below the rule's during a warm-up).
func (c *Concurrency) Max() int {
	c.g.mu.Lock()
	defer c.g.mu.Unlock()
	return c.g.max
}

// tick advances a warm-up in progress: one atomic load when there is none.
func (c *Concurrency) tick() {
	if w := c.warm.Load(); w != nil && w.tick(c.g.clock.Nanotime()) {
		c.warm.CompareAndSwap(w, nil)
	}
}

// Kind implements Limiter.
func (c *Concurrency) Kind() string { return wire.KindConcurrency }

// Admit implements Limiter; it is TryAcquire.
func (c *Concurrency) Admit() (Permit, Decision) { return c.TryAcquire() }

func (c *Concurrency) update(r *wire.LimitRule) {
	c.SetWarmUp(r.WarmUp.D())
	c.SetMax(r.Max)
	c.SetReserve(r.Reserve)
	target, interval, _ := r.Queue()
	c.SetQueue(target, interval, r.LIFO)
}

func (c *Concurrency) release(Permit, bool) {
	c.g.mu.Lock()
	c.g.releaseLocked()
	c.g.mu.Unlock()
}

func (c *Concurrency) isFailure(err error) bool { return err != nil }
