package limit_test

import (
	"math"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/sdk/limit"
	"github.com/switchyard-io/switchyard/sdk/wire"
)

// admittedPerSecond offers offered requests per second to l for seconds
// and counts the admitted ones in each second.
func admittedPerSecond(clock *limit.FakeClock, l limit.Limiter, offered, seconds int) []int {
	out := make([]int, seconds)
	step := time.Second / time.Duration(offered)
	for sec := range seconds {
		for range offered {
			clock.Advance(step)
			if p, d := l.Admit(); d.OK {
				out[sec]++
				p.Done(nil)
			}
		}
	}
	return out
}

// TestWarmUpFollowsTheRamp is the warm-up experiment in virtual
// time: a token bucket raised from 10/s to 1,000/s with a 10 s warm-up
// admits, second by second, the ramp's rate within 10 %; without the
// warm-up the full rate arrives in the first second.
func TestWarmUpFollowsTheRamp(t *testing.T) {
	const offered = 2000
	for _, warm := range []time.Duration{10 * time.Second, 0} {
		clock := limit.NewFakeClock()
		r := rule(wire.KindTokenBucket, func(r *wire.LimitRule) { r.Rate, r.Burst, r.WarmUp = 10, 10, wire.Duration(warm) })
		l, err := limit.New(r, clock)
		if err != nil {
			t.Fatal(err)
		}
		admittedPerSecond(clock, l, offered, 2) // steady at 10/s
		raised := *r
		raised.Rate, raised.Burst = 1000, 1000
		if l, err = limit.Update(l, &raised, clock); err != nil {
			t.Fatal(err)
		}
		got := admittedPerSecond(clock, l, offered, 12)
		t.Logf("warm-up %v: admitted per second after the raise %v", warm, got)
		for sec, n := range got {
			want := 1000.0
			if warm > 0 && sec < 10 {
				want = 10 + 990*(float64(sec)+0.5)/10 // the ramp's mean over the second
			}
			if warm == 0 && sec == 0 {
				continue // the step: burst plus rate in the first second
			}
			if math.Abs(float64(n)-want) > 0.1*want {
				t.Errorf("warm-up %v, second %d: admitted %d, want %.0f ± 10 %%", warm, sec, n, want)
			}
		}
		if warm == 0 && got[0] < 900 {
			t.Errorf("without warm-up the first second admitted %d, want the full rate at once", got[0])
		}
	}
}

func TestWarmUpConcurrencyRampsMax(t *testing.T) {
	clock := limit.NewFakeClock()
	r := rule(wire.KindConcurrency, func(r *wire.LimitRule) { r.Max, r.WarmUp = 10, wire.Duration(10*time.Second) })
	l, err := limit.New(r, clock)
	if err != nil {
		t.Fatal(err)
	}
	c := l.(*limit.Concurrency)
	raised := *r
	raised.Max = 110
	if _, err := limit.Update(l, &raised, clock); err != nil {
		t.Fatal(err)
	}
	for sec := 0; sec <= 10; sec++ {
		p, _ := c.TryAcquire() // admissions advance the ramp
		p.Done(nil)
		if want := 10 + 10*sec; c.Max() != want {
			t.Fatalf("max %d s into the warm-up = %d, want %d", sec, c.Max(), want)
		}
		clock.Advance(time.Second)
	}
	// Lowering applies at once.
	lowered := raised
	lowered.Max = 5
	if _, err := limit.Update(l, &lowered, clock); err != nil {
		t.Fatal(err)
	}
	if c.Max() != 5 {
		t.Fatalf("max after lowering = %d, want 5 at once", c.Max())
	}
}
