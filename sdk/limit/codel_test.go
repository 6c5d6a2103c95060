package limit_test

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/sdk/limit"
)

// queued starts an AcquireAs in the background and waits until it queues;
// the returned channel yields its outcome.
func queued(t *testing.T, c *limit.Concurrency, cr limit.Criticality) <-chan error {
	t.Helper()
	before := c.Queued()
	ch := make(chan error, 1)
	go func() {
		p, err := c.AcquireAs(context.Background(), cr)
		if err == nil {
			p.Done(nil) // the test only wants to know it got the slot
		}
		ch <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for c.Queued() == before {
		if time.Now().After(deadline) {
			t.Fatal("waiter never queued")
		}
		runtime.Gosched()
	}
	return ch
}

func outcome(t *testing.T, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("waiter never decided")
		return nil
	}
}

func TestCoDelShedsWhenSojournStaysAboveTarget(t *testing.T) {
	clock := limit.NewFakeClock()
	c := limit.NewCoDel(1, 5*ms, 100*ms, false, clock)
	hold, d := c.TryAcquire() // t=0: no wait, the interval starts
	if !d.OK {
		t.Fatal("first request rejected")
	}

	// A waiter served after 50 ms: slow, but the interval also saw a wait
	// of 0, so the queue is not overloaded.
	a := queued(t, c, limit.Critical)
	clock.Advance(50 * ms)
	hold.Done(nil)
	if err := outcome(t, a); err != nil {
		t.Fatalf("first waiter: %v", err)
	}
	hold, _ = c.TryAcquire()

	// Through the next interval every wait is long: 70 ms, then a waiter
	// that times out after the healthy-queue bound of one interval.
	b := queued(t, c, limit.Critical)
	clock.Advance(70 * ms)
	hold.Done(nil) // t=120: closes the first interval, min wait 0 → healthy
	if err := outcome(t, b); err != nil {
		t.Fatalf("second waiter: %v", err)
	}
	if c.Overloaded() {
		t.Fatal("overloaded although the first interval had a wait of 0")
	}
	hold, _ = c.TryAcquire() // t=120: a wait of 0 in the new interval
	cw := queued(t, c, limit.Critical)
	clock.Advance(99 * ms)
	select {
	case err := <-cw:
		t.Fatalf("waiter decided before its 100 ms bound: %v", err)
	default:
	}
	clock.Advance(2 * ms) // t=221: its bound ran out, closing the interval
	if err := outcome(t, cw); !errors.Is(err, limit.ErrLimited) {
		t.Fatalf("waiter past the bound = %v, want ErrLimited", err)
	}
	if c.Overloaded() {
		t.Fatal("overloaded although the interval had a wait of 0")
	}

	// An interval whose shortest wait was 100 ms makes the queue
	// overloaded (the next timeout closes it).
	dw := queued(t, c, limit.Critical)
	clock.Advance(101 * ms) // t=322
	if err := outcome(t, dw); !errors.Is(err, limit.ErrLimited) {
		t.Fatalf("waiter = %v, want ErrLimited", err)
	}
	if !c.Overloaded() {
		t.Fatal("not overloaded after an interval whose shortest wait was 100 ms")
	}

	// Overloaded: a new waiter may queue only the target, 5 ms.
	fw := queued(t, c, limit.Critical)
	clock.Advance(6 * ms)
	if err := outcome(t, fw); !errors.Is(err, limit.ErrLimited) {
		t.Fatalf("waiter under overload after 6 ms = %v, want ErrLimited (bound 5 ms)", err)
	}
	// …and one served within it gets the slot.
	gw := queued(t, c, limit.Critical)
	clock.Advance(2 * ms)
	hold.Done(nil)
	if err := outcome(t, gw); err != nil {
		t.Fatalf("waiter served after 2 ms under overload: %v", err)
	}
}

func TestCoDelRecoversWhenTheQueueDrains(t *testing.T) {
	clock := limit.NewFakeClock()
	c := limit.NewCoDel(1, 5*ms, 100*ms, false, clock)
	hold, _ := c.TryAcquire()
	for range 3 { // three intervals of timeouts
		w := queued(t, c, limit.Critical)
		clock.Advance(101 * ms)
		if err := outcome(t, w); !errors.Is(err, limit.ErrLimited) {
			t.Fatalf("waiter = %v", err)
		}
	}
	if !c.Overloaded() {
		t.Fatal("not overloaded after intervals of timeouts")
	}
	hold.Done(nil)
	// Requests admitted at once (waits of 0) for an interval: healthy again.
	for range 3 {
		clock.Advance(60 * ms)
		p, d := c.TryAcquire()
		if !d.OK {
			t.Fatal("free slot refused")
		}
		p.Done(nil)
	}
	if c.Overloaded() {
		t.Fatal("still overloaded after an interval in which the queue drained")
	}
}

func TestCoDelServesCriticalFirstAndNewestUnderOverload(t *testing.T) {
	clock := limit.NewFakeClock()
	c := limit.NewCoDel(1, 5*ms, 100*ms, true, clock)
	hold, _ := c.TryAcquire()
	shed := queued(t, c, limit.Sheddable)
	crit := queued(t, c, limit.Critical)
	clock.Advance(1 * ms)
	hold.Done(nil)
	if err := outcome(t, crit); err != nil {
		t.Fatalf("critical waiter queued second: %v", err)
	}
	// The critical waiter released its slot at once: the sheddable one got it.
	if err := outcome(t, shed); err != nil {
		t.Fatalf("sheddable waiter: %v", err)
	}

	// Make the queue overloaded, then queue two waiters: LIFO serves the
	// newer one first.
	hold, _ = c.TryAcquire()
	for range 2 {
		w := queued(t, c, limit.Critical)
		clock.Advance(101 * ms)
		_ = outcome(t, w)
	}
	if !c.Overloaded() {
		t.Fatal("not overloaded")
	}
	first := make(chan int, 2)
	older := queuedTagged(t, c, first, 1)
	clock.Advance(1 * ms)
	newer := queuedTagged(t, c, first, 2)
	clock.Advance(1 * ms)
	hold.Done(nil)
	_ = outcome(t, newer)
	_ = outcome(t, older)
	if got := <-first; got != 2 {
		t.Fatalf("served waiter %d first, want the newer one (2) under adaptive LIFO", got)
	}
}

// queuedTagged is queued that also reports its tag on order when served,
// before releasing the slot.
func queuedTagged(t *testing.T, c *limit.Concurrency, order chan<- int, tag int) <-chan error {
	t.Helper()
	before := c.Queued()
	ch := make(chan error, 1)
	go func() {
		p, err := c.AcquireAs(context.Background(), limit.Critical)
		if err == nil {
			order <- tag
			p.Done(nil)
		}
		ch <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for c.Queued() == before {
		if time.Now().After(deadline) {
			t.Fatal("waiter never queued")
		}
		runtime.Gosched()
	}
	return ch
}

func TestCoDelTurnedOffWithWaiters(t *testing.T) {
	clock := limit.NewFakeClock()
	c := limit.NewCoDel(1, 5*ms, 100*ms, false, clock)
	hold, _ := c.TryAcquire()
	w := queued(t, c, limit.Critical)
	c.SetQueue(0, 0, false) // the rule dropped its queue_target
	clock.Advance(101 * ms) // the waiter's bound, set when it queued, runs out
	if err := outcome(t, w); !errors.Is(err, limit.ErrLimited) {
		t.Fatalf("waiter = %v, want ErrLimited", err)
	}
	later := queued(t, c, limit.Critical) // no queue now: waits for a slot
	clock.Advance(time.Hour)
	hold.Done(nil)
	if err := outcome(t, later); err != nil {
		t.Fatalf("waiter without a queue: %v", err)
	}
}
