package limit_test

import (
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/sdk/limit"
)

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
