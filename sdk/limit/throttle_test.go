package limit_test

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/sdk/limit"
)

func TestThrottleProbabilityIsTheSREFormula(t *testing.T) {
	clock := limit.NewFakeClock()
	th := limit.NewThrottler(2, 10*time.Second, 10, clock)
	th.SetRand(func() float64 { return 1 }) // never reject: only count
	for i := range 30 {
		p, d := th.Admit()
		if !d.OK {
			t.Fatalf("request %d rejected with rand 1", i)
		}
		p.Finish(i%3 == 0) // 10 accepts
	}
	if req, acc := th.Counts(); req != 30 || acc != 10 {
		t.Fatalf("counts = %d requests, %d accepts; want 30, 10", req, acc)
	}
	want := (30 - 2*10) / 31.0
	if got := th.Probability(); math.Abs(got-want) > 1e-12 {
		t.Fatalf("probability = %v, want (30 − 2·10)/31 = %v", got, want)
	}
	// A healthy backend: every request accepted, nothing throttled.
	clock.Advance(11 * time.Second) // the window forgets
	for range 100 {
		p, _ := th.Admit()
		p.Done(nil)
	}
	if got := th.Probability(); got != 0 {
		t.Fatalf("probability with every request accepted = %v, want 0", got)
	}
}

func TestThrottleBelowMinRequestsNeverRejects(t *testing.T) {
	clock := limit.NewFakeClock()
	th := limit.NewThrottler(2, 10*time.Second, 20, clock)
	th.SetRand(func() float64 { return 0 }) // reject whenever p > 0
	for i := range 20 {
		clock.Advance(10 * ms) // admissions see counts up to window/10000 old
		p, d := th.Admit()
		if !d.OK {
			t.Fatalf("request %d of the first 20 rejected", i)
		}
		p.Finish(false)
	}
	clock.Advance(10 * ms)
	if _, d := th.Admit(); d.OK || d.Reason != limit.ReasonThrottled {
		t.Fatalf("21st request to a backend that refused all = %+v, want throttled", d)
	}
}

// throttleRun offers offered requests per second for seconds to a backend
// that accepts at most capacity of them per second; it returns the
// requests sent to the backend and accepted in each second. A nil throttler
// sends everything.
func throttleRun(clock *limit.FakeClock, th *limit.Throttler, offered int, capacity func(sec int) int, seconds int) (sent, accepted []int) {
	step := time.Second / time.Duration(offered)
	for sec := range seconds {
		s, a := 0, 0
		for range offered {
			clock.Advance(step)
			var p limit.Permit
			if th != nil {
				var d limit.Decision
				if p, d = th.Admit(); !d.OK {
					continue
				}
			}
			s++
			ok := a < capacity(sec)
			if ok {
				a++
			}
			p.Finish(ok)
		}
		sent, accepted = append(sent, s), append(accepted, a)
	}
	return sent, accepted
}

// TestThrottleUnderFailingBackend is the experiment in virtual
// time: clients offer 1,000 requests/s to a backend that accepts 10 % of
// them for 30 s, then heals. With throttling the client sends about
// K × accepts per window; without, it sends everything; after the backend
// heals, full rate returns within two windows.
func TestThrottleUnderFailingBackend(t *testing.T) {
	const (
		offered = 1000
		k       = 2.0
		window  = 10 * time.Second
		failing = 30 // seconds
	)
	capacity := func(sec int) int {
		if sec < failing {
			return offered / 10
		}
		return offered
	}
	clock := limit.NewFakeClock()
	th := limit.NewThrottler(k, window, 10, clock)
	rng := rand.New(rand.NewPCG(1, 2))
	th.SetRand(rng.Float64)
	sent, accepted := throttleRun(clock, th, offered, capacity, failing+25)
	baseSent, _ := throttleRun(limit.NewFakeClock(), nil, offered, capacity, failing)

	// Over the last full window of the outage: sent ≤ K·accepts + a small
	// constant, one ring bucket's worth of offered requests (the window
	// slides by whole buckets).
	var s, a int
	for sec := failing - 10; sec < failing; sec++ {
		s, a = s+sent[sec], a+accepted[sec]
	}
	t.Logf("last window of the outage: sent %d, accepted %d (K·accepts = %.0f); without throttling sent %d", s, a, k*float64(a), sumInts(baseSent[failing-10:failing]))
	if limit := k*float64(a) + offered/10; float64(s) > limit {
		t.Errorf("sent %d in a window with %d accepts, want ≤ K·accepts + %d = %.0f", s, a, offered/10, limit)
	}
	if b := sumInts(baseSent[failing-10 : failing]); b != 10*offered {
		t.Errorf("without throttling sent %d in the window, want all %d", b, 10*offered)
	}
	// Recovery: within two windows of healing every request is sent again.
	recovered := -1
	for sec := failing; sec < len(sent); sec++ {
		if sent[sec] == offered {
			recovered = sec - failing
			break
		}
	}
	t.Logf("full rate again %d s after the backend healed", recovered)
	if recovered < 0 || time.Duration(recovered)*time.Second > 2*window {
		t.Errorf("full rate returned after %d s, want within 2 windows (%v); sent per second after healing: %v", recovered, 2*window, sent[failing:])
	}
}

func TestThrottleShedsSheddableFirst(t *testing.T) {
	clock := limit.NewFakeClock()
	th := limit.NewThrottler(2, 10*time.Second, 10, clock)
	th.SetReserve(0.4)
	th.SetRand(func() float64 { return 0.5 })
	// 100 requests, 60 accepted: p(critical, K=2) = 0, p(sheddable, K=1.2) = (100−72)/101 ≈ 0.28.
	for i := range 100 {
		p, _ := th.Admit()
		p.Finish(i < 60)
	}
	clock.Advance(10 * ms)
	if _, d := th.AdmitAs(limit.Critical); !d.OK {
		t.Fatalf("critical throttled at 60 %% acceptance: %+v", d)
	}
	th.SetRand(func() float64 { return 0.2 })
	if _, d := th.AdmitAs(limit.Sheddable); d.OK {
		t.Fatal("sheddable admitted though its K of 1.2 puts p above 0.2")
	}
	if _, d := th.AdmitAs(limit.Critical); !d.OK {
		t.Fatalf("critical throttled: %+v", d)
	}
}

func sumInts(xs []int) (s int) {
	for _, x := range xs {
		s += x
	}
	return s
}
