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

func TestConcurrencyReserve(t *testing.T) {
	c := limit.NewConcurrency(10)
	c.SetReserve(0.2)
	admitted := map[limit.Criticality]int{}
	for _, cr := range []limit.Criticality{limit.Sheddable, limit.Degradable, limit.Critical} {
		for {
			if _, d := c.AdmitAs(cr); !d.OK {
				break
			}
			admitted[cr]++
		}
	}
	if admitted[limit.Sheddable] != 6 || admitted[limit.Degradable] != 2 || admitted[limit.Critical] != 2 {
		t.Fatalf("admitted %v, want sheddable up to 6 in flight, degradable to 8, critical to 10", admitted)
	}
}

func TestTokenBucketReserve(t *testing.T) {
	b := limit.NewTokenBucket(1, 10, limit.NewFakeClock())
	b.SetReserve(0.2)
	admitted := map[limit.Criticality]int{}
	for _, cr := range []limit.Criticality{limit.Sheddable, limit.Degradable, limit.Critical} {
		for {
			if _, d := b.AdmitAs(cr); !d.OK {
				if d.Reason != limit.ReasonRate || d.RetryAfter <= 0 {
					t.Fatalf("rejection %+v, want rate_limited with a Retry-After", d)
				}
				break
			}
			admitted[cr]++
		}
	}
	if admitted[limit.Sheddable] != 6 || admitted[limit.Degradable] != 2 || admitted[limit.Critical] != 2 {
		t.Fatalf("admitted %v, want sheddable 6 of 10 tokens, degradable 2 more, critical the last 2", admitted)
	}
}

// TestPrioritiesAtTwiceCapacity is the priority experiment in
// virtual time: three classes each offer a third of 200 % of a token
// bucket's rate. With a reserve, critical requests all succeed and
// sheddable ones absorb the shedding; without, every class fails alike.
func TestPrioritiesAtTwiceCapacity(t *testing.T) {
	run := func(reserve float64) map[limit.Criticality]float64 {
		clock := limit.NewFakeClock()
		b := limit.NewTokenBucket(300, 30, clock)
		b.SetReserve(reserve)
		ok := map[limit.Criticality]int{}
		const n = 600 * 20 // 600/s for 20 s
		classes := []limit.Criticality{limit.Critical, limit.Degradable, limit.Sheddable}
		for i := range n {
			clock.Advance(time.Second / 600)
			cr := classes[i%3]
			if _, d := b.AdmitAs(cr); d.OK {
				ok[cr]++
			}
		}
		out := map[limit.Criticality]float64{}
		for _, cr := range classes {
			out[cr] = float64(ok[cr]) / (n / 3)
		}
		return out
	}
	with, without := run(0.2), run(0)
	t.Logf("success with reserve 0.2: critical %.3f degradable %.3f sheddable %.3f", with[limit.Critical], with[limit.Degradable], with[limit.Sheddable])
	t.Logf("success without:          critical %.3f degradable %.3f sheddable %.3f", without[limit.Critical], without[limit.Degradable], without[limit.Sheddable])
	if with[limit.Critical] < 0.99 {
		t.Errorf("critical success %.3f with a reserve, want ≥ 0.99", with[limit.Critical])
	}
	if with[limit.Sheddable] >= with[limit.Degradable] || with[limit.Degradable] > with[limit.Critical] {
		t.Errorf("with a reserve, shedding does not fall on the lowest first: %v", with)
	}
	for _, cr := range []limit.Criticality{limit.Degradable, limit.Sheddable} {
		if d := without[cr] - without[limit.Critical]; d > 0.05 || d < -0.05 {
			t.Errorf("without a reserve, %v succeeds %.3f against critical %.3f: want alike", cr, without[cr], without[limit.Critical])
		}
	}
}

func TestSlidingWindowAndGCRAReserve(t *testing.T) {
	clock := limit.NewFakeClock()
	w := limit.NewSlidingWindow(10, time.Second, 0, clock)
	w.SetReserve(0.2)
	admitted := map[limit.Criticality]int{}
	for _, cr := range []limit.Criticality{limit.Sheddable, limit.Degradable, limit.Critical} {
		for {
			if _, d := w.AdmitAs(cr); !d.OK {
				break
			}
			admitted[cr]++
		}
	}
	if admitted[limit.Sheddable] != 6 || admitted[limit.Degradable] != 2 || admitted[limit.Critical] != 2 {
		t.Fatalf("sliding window admitted %v, want sheddable 6 of 10, degradable 2 more, critical the last 2", admitted)
	}

	// GCRA at 10/s with waits up to 1 s: a sheddable request may be told to
	// wait up to 0.6 s, a critical one the whole second.
	g := limit.NewGCRA(10, time.Second, clock)
	g.SetReserve(0.2)
	admitted = map[limit.Criticality]int{}
	for _, cr := range []limit.Criticality{limit.Sheddable, limit.Degradable, limit.Critical} {
		for {
			_, d := g.AdmitAs(cr)
			if !d.OK {
				break
			}
			admitted[cr]++
		}
	}
	if admitted[limit.Sheddable] != 7 || admitted[limit.Degradable] != 2 || admitted[limit.Critical] != 2 {
		t.Fatalf("GCRA admitted %v, want sheddable waits up to 0.6 s (7), degradable to 0.8 s (2 more), critical to 1 s (2 more)", admitted)
	}
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
