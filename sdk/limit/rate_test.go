package limit_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/sdk/limit"
)

func TestTokenBucketBurstThenRate(t *testing.T) {
	clock := limit.NewFakeClock()
	tb := limit.NewTokenBucket(10, 5, clock) // 10/s, burst 5

	for i := range 5 {
		if d := tb.Allow(); !d.OK {
			t.Fatalf("burst request %d rejected", i)
		}
	}
	d := tb.Allow()
	if d.OK || d.Reason != limit.ReasonRate || d.RetryAfter != 100*ms {
		t.Fatalf("after burst: got %+v, want rejection with RetryAfter 100ms", d)
	}
	// Over the next 10 s exactly rate/s more are admitted, one per 100 ms.
	admitted := 0
	for range 1000 {
		clock.Advance(10 * ms)
		if tb.Allow().OK {
			admitted++
		}
	}
	if admitted != 100 {
		t.Fatalf("admitted %d in 10 s at 10/s, want 100", admitted)
	}
	// Idle refills to the burst, not beyond.
	clock.Advance(time.Hour)
	if got := tb.Tokens(); got != 5 {
		t.Fatalf("tokens after idle hour = %v, want 5", got)
	}
}

func TestTokenBucketAllowN(t *testing.T) {
	clock := limit.NewFakeClock()
	tb := limit.NewTokenBucket(1, 3, clock)
	if !tb.AllowN(2).OK {
		t.Fatal("AllowN(2) of 3 rejected")
	}
	if d := tb.AllowN(2); d.OK || d.RetryAfter != time.Second {
		t.Fatalf("AllowN(2) with 1 left: %+v, want rejection RetryAfter 1s", d)
	}
	if got := tb.Tokens(); got != 1 {
		t.Fatalf("a rejected AllowN took tokens: %v left", got)
	}
}

func TestTokenBucketSetRateKeepsTokens(t *testing.T) {
	clock := limit.NewFakeClock()
	tb := limit.NewTokenBucket(10, 10, clock)
	for range 7 {
		tb.Allow()
	}
	tb.SetRate(100, 20)
	if got := tb.Tokens(); got != 3 {
		t.Fatalf("tokens after rate change = %v, want 3 kept", got)
	}
	clock.Advance(10 * ms) // one token at the new rate
	if got := tb.Tokens(); got != 4 {
		t.Fatalf("tokens 10ms later = %v, want 4", got)
	}
	tb.SetRate(1, 2) // a smaller burst caps what is held
	if got := tb.Tokens(); got != 2 {
		t.Fatalf("tokens after burst shrink = %v, want 2", got)
	}
}

func TestTokenBucketConcurrentNeverOverAdmits(t *testing.T) {
	clock := limit.NewFakeClock() // time stands still: exactly burst admitted
	tb := limit.NewTokenBucket(1, 100, clock)
	var ok atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for range 50 {
				if tb.Allow().OK {
					ok.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if ok.Load() != 100 {
		t.Fatalf("admitted %d of 3200 with burst 100 and a stopped clock", ok.Load())
	}
}

func TestGCRAWaitTimes(t *testing.T) {
	clock := limit.NewFakeClock()
	g := limit.NewGCRA(10, 250*ms, clock) // one per 100 ms, wait at most 250 ms

	tests := []struct {
		advance    time.Duration
		ok         bool
		wait       time.Duration
		retryAfter time.Duration
	}{
		{0, true, 0, 0},
		{0, true, 100 * ms, 0},
		{0, true, 200 * ms, 0},
		{0, false, 0, 50 * ms}, // would wait 300 ms > 250 ms
		{50 * ms, true, 250 * ms, 0},
		{0, false, 0, 100 * ms},
		{time.Second, true, 0, 0}, // idle: no credit beyond one slot
		{0, true, 100 * ms, 0},
	}
	for i, tc := range tests {
		clock.Advance(tc.advance)
		d := g.Allow()
		if d.OK != tc.ok || d.Wait != tc.wait || d.RetryAfter != tc.retryAfter {
			t.Fatalf("step %d at %v: got %+v, want ok=%v wait=%v retryAfter=%v",
				i, clock.Now(), d, tc.ok, tc.wait, tc.retryAfter)
		}
	}
}

func TestGCRASetRateKeepsQueue(t *testing.T) {
	clock := limit.NewFakeClock()
	g := limit.NewGCRA(10, time.Second, clock)
	g.Allow()
	g.Allow() // queue: next slot at +200 ms
	g.SetRate(5, time.Second)
	if d := g.Allow(); !d.OK || d.Wait != 400*ms {
		t.Fatalf("after slowing to 5/s: %+v, want wait 400ms (two queued × 200ms)", d)
	}
}

// TestTokenBucketExtremeRules: a rate far below one per second, or a burst
// worth centuries of tokens, must neither overflow into "no limit" nor into
// "reject everything".
func TestTokenBucketExtremeRules(t *testing.T) {
	for _, tc := range []struct {
		name  string
		rate  float64
		burst int
		want  int // admitted out of 100 at once
	}{
		{"tiny rate", 1e-12, 1, 1},
		{"huge burst of a slow rate", 1e-3, 9_300_000, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := limit.NewFakeClock()
			clock.Advance(time.Hour)
			tb := limit.NewTokenBucket(tc.rate, tc.burst, clock)
			admitted := 0
			for range 100 {
				if tb.Allow().OK {
					admitted++
				}
			}
			if admitted != tc.want {
				t.Fatalf("admitted %d of 100 at once, want %d", admitted, tc.want)
			}
			clock.Advance(time.Second)
			if tc.burst == 1 && tb.Allow().OK {
				t.Fatalf("a second request within 1 s admitted at rate %v/s", tc.rate)
			}
		})
	}
}
