package limit

import (
	"context"
	"sync"

	"github.com/switchyard-io/switchyard/sdk/wire"
)

// gate is a counting semaphore with a changeable size and a FIFO queue of
// waiters; Concurrency and Adaptive are built on it. A released slot is
// handed straight to the oldest waiter, so the count never exceeds max.
type gate struct {
	mu       sync.Mutex
	max      int
	inflight int
	waiters  []chan struct{}
}

// tryLocked takes a slot if one is free; g.mu is held.
func (g *gate) tryLocked() bool {
	if g.inflight < g.max {
		g.inflight++
		return true
	}
	return false
}

// wait queues for a slot; on return with nil error the caller holds one.
func (g *gate) wait(ctx context.Context) error {
	ch := make(chan struct{})
	g.waiters = append(g.waiters, ch)
	g.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for i, w := range g.waiters {
		if w == ch {
			g.waiters = append(g.waiters[:i], g.waiters[i+1:]...)
			return ctx.Err()
		}
	}
	// The slot was handed over while we gave up: pass it on.
	g.releaseLocked()
	return ctx.Err()
}

// releaseLocked frees a slot or hands it to the oldest waiter; g.mu is held.
func (g *gate) releaseLocked() {
	if len(g.waiters) > 0 && g.inflight <= g.max {
		close(g.waiters[0])
		g.waiters = g.waiters[1:]
		return
	}
	g.inflight--
}

// setMaxLocked resizes the gate, admitting waiters if it grew; g.mu is held.
// A smaller max takes effect as requests finish.
func (g *gate) setMaxLocked(n int) {
	g.max = n
	for len(g.waiters) > 0 && g.inflight < g.max {
		g.inflight++
		close(g.waiters[0])
		g.waiters = g.waiters[1:]
	}
}

// Concurrency bounds the requests in flight. TryAcquire never blocks;
// Acquire waits in FIFO order until a slot frees or ctx ends.
type Concurrency struct {
	g gate
}

// NewConcurrency returns a limiter admitting at most max requests at once.
func NewConcurrency(max int) *Concurrency {
	c := &Concurrency{}
	c.g.max = max
	return c
}

// TryAcquire takes a slot if one is free.
func (c *Concurrency) TryAcquire() (Permit, Decision) {
	c.g.mu.Lock()
	ok := c.g.tryLocked()
	c.g.mu.Unlock()
	if !ok {
		return Permit{}, Decision{Reason: ReasonConcurrency}
	}
	return Permit{r: c}, Decision{OK: true}
}

// Acquire waits for a slot until ctx ends.
func (c *Concurrency) Acquire(ctx context.Context) (Permit, error) {
	c.g.mu.Lock()
	if c.g.tryLocked() {
		c.g.mu.Unlock()
		return Permit{r: c}, nil
	}
	if err := c.g.wait(ctx); err != nil {
		return Permit{}, err
	}
	return Permit{r: c}, nil
}

// InFlight reports the slots taken.
func (c *Concurrency) InFlight() int {
	c.g.mu.Lock()
	defer c.g.mu.Unlock()
	return c.g.inflight
}

// SetMax changes the bound; requests in flight stay counted.
func (c *Concurrency) SetMax(n int) {
	c.g.mu.Lock()
	c.g.setMaxLocked(n)
	c.g.mu.Unlock()
}

// Kind implements Limiter.
func (c *Concurrency) Kind() string { return wire.KindConcurrency }

// Admit implements Limiter; it is TryAcquire.
func (c *Concurrency) Admit() (Permit, Decision) { return c.TryAcquire() }

func (c *Concurrency) update(r *wire.LimitRule) { c.SetMax(r.Max) }

func (c *Concurrency) release(Permit, bool) {
	c.g.mu.Lock()
	c.g.releaseLocked()
	c.g.mu.Unlock()
}

func (c *Concurrency) isFailure(err error) bool { return err != nil }
