package limit_test

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/sdk/limit"
)

// queueSim drives a concurrency limiter in virtual time: requests arrive
// at a fixed rate for a while, each one that gets a slot holds it for
// service, and the simulation runs until every request is decided. Each
// arrival is a real goroutine blocked in AcquireAs; the clock moves only
// once every goroutine has queued or reported.
type queueSim struct {
	t       *testing.T
	c       *limit.Concurrency
	clock   *limit.FakeClock
	service time.Duration

	arrived  int
	decided  atomic.Int64
	mu       sync.Mutex
	sojourns []time.Duration
	rejected int
	running  []running // admitted, finishing at .at
}

type running struct {
	p  limit.Permit
	at time.Duration
}

func (s *queueSim) arrive() {
	s.arrived++
	go func() {
		start := s.clock.Now()
		p, err := s.c.AcquireAs(context.Background(), limit.Critical)
		now := s.clock.Now()
		s.mu.Lock()
		if err == nil {
			s.sojourns = append(s.sojourns, now-start)
			s.running = append(s.running, running{p, now + s.service})
		} else {
			s.rejected++
		}
		s.mu.Unlock()
		s.decided.Add(1)
	}()
	s.settle()
}

// settle waits until every arrival has queued or been decided.
func (s *queueSim) settle() {
	deadline := time.Now().Add(30 * time.Second)
	for int(s.decided.Load())+s.c.Queued() != s.arrived {
		if time.Now().After(deadline) {
			s.t.Fatal("simulation stuck")
		}
		runtime.Gosched()
	}
}

// finishDue ends the requests whose service time is over.
func (s *queueSim) finishDue() {
	for {
		s.mu.Lock()
		now := s.clock.Now()
		i := slices.IndexFunc(s.running, func(r running) bool { return r.at <= now })
		if i < 0 {
			s.mu.Unlock()
			return
		}
		r := s.running[i]
		s.running = slices.Delete(s.running, i, i+1)
		s.mu.Unlock()
		r.p.Done(nil) // may hand the slot to a waiter
		s.settle()
	}
}

// run offers rate requests per second for burst, then lets the queue
// drain; it returns the sojourns of admitted requests and the rejections.
func (s *queueSim) run(rate int, burst time.Duration) ([]time.Duration, int) {
	step := time.Millisecond
	every := time.Second / time.Duration(rate)
	next := time.Duration(0)
	for s.clock.Now() < burst || s.arrived != int(s.decided.Load()) {
		for s.clock.Now() < burst && next <= s.clock.Now() {
			s.arrive()
			next += every
		}
		s.finishDue()
		s.clock.Advance(step) // fires queue timeouts
		s.settle()
	}
	s.finishDue()
	return s.sojourns, s.rejected
}

// share is the fraction of ds above d.
func share(ds []time.Duration, d time.Duration) float64 {
	n := 0
	for _, x := range ds {
		if x > d {
			n++
		}
	}
	return float64(n) / float64(len(ds))
}

func p99(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[(len(ds)*99)/100]
}

// TestCoDelBurstExperiment is the CoDel experiment in virtual
// time: a burst of 5× capacity for 2 s into a handler limited to 5 in
// flight (10 ms each: 500/s). With the CoDel queue (target 5 ms, interval
// 100 ms) and adaptive LIFO the admitted requests' p99 wait stays within
// 3× the target; a FIFO CoDel queue lets the burst's first intervals wait
// up to an interval; unbounded waiting grows to seconds.
func TestCoDelBurstExperiment(t *testing.T) {
	if testing.Short() {
		t.Skip("simulates 12 s of traffic with goroutines")
	}
	const (
		max      = 5
		service  = 10 * time.Millisecond
		rate     = 5 * max * int(time.Second/service) // 5× capacity
		burst    = 2 * time.Second
		target   = 5 * time.Millisecond
		interval = 100 * time.Millisecond
	)
	for _, lifo := range []bool{true, false} {
		clock := limit.NewFakeClock()
		sim := &queueSim{t: t, c: limit.NewCoDel(max, target, interval, lifo, clock), clock: clock, service: service}
		soj, rej := sim.run(rate, burst)
		got, late := p99(soj), share(soj, 3*target)
		t.Logf("CoDel (lifo=%v): %d admitted, %d rejected, admitted wait p99 %v, %.1f %% waited over 3× target", lifo, len(soj), rej, got, 100*late)
		switch {
		case lifo && got > 3*target:
			t.Errorf("CoDel with adaptive LIFO: admitted wait p99 = %v, want ≤ 3 × target = %v", got, 3*target)
		case !lifo && got > interval:
			// FIFO: until the first interval of standing delay has been
			// seen (about two intervals into the burst), waiters may wait
			// a whole interval; after it, at most 2 × target.
			t.Errorf("CoDel FIFO: admitted wait p99 = %v, want ≤ interval = %v", got, interval)
		case !lifo && late > 0.1:
			t.Errorf("CoDel FIFO: %.1f %% of admitted requests waited over 3 × target, want the transient only (≤ 10 %%)", 100*late)
		}
	}
	clock := limit.NewFakeClock()
	c := limit.NewConcurrency(max)
	base := &queueSim{t: t, c: c, clock: clock, service: service}
	limit.SetClockForTest(c, clock)
	soj, rej := base.run(rate, burst)
	got := p99(soj)
	t.Logf("unbounded wait: %d admitted, %d rejected, admitted wait p99 %v", len(soj), rej, got)
	if got < 100*target {
		t.Errorf("unbounded wait p99 = %v, expected the baseline to exceed the target by orders of magnitude", got)
	}
}
