package limit_test

import (
	"errors"
	"testing"

	"github.com/sony/gobreaker/v2"
	"golang.org/x/time/rate"

	"github.com/switchyard-io/switchyard/sdk/limit"
)

// Both token buckets get the same rate and burst, high enough that every
// call is admitted, and both read the real clock on every call (x/time/rate
// via time.Now, ours via the runtime's monotonic nanotime).
const (
	benchRate  = 1e9
	benchBurst = 1 << 20
)

func BenchmarkTokenBucketAllow(b *testing.B) {
	tb := limit.NewTokenBucket(benchRate, benchBurst, nil)
	b.ReportAllocs()
	for b.Loop() {
		if !tb.Allow().OK {
			b.Fatal("rejected")
		}
	}
}

func BenchmarkXRateAllow(b *testing.B) {
	l := rate.NewLimiter(rate.Limit(benchRate), benchBurst)
	b.ReportAllocs()
	for b.Loop() {
		if !l.Allow() {
			b.Fatal("rejected")
		}
	}
}

func BenchmarkTokenBucketAllowParallel(b *testing.B) {
	tb := limit.NewTokenBucket(benchRate, benchBurst, nil)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if !tb.Allow().OK {
				b.Error("rejected")
				return
			}
		}
	})
}

func BenchmarkXRateAllowParallel(b *testing.B) {
	l := rate.NewLimiter(rate.Limit(benchRate), benchBurst)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if !l.Allow() {
				b.Error("rejected")
				return
			}
		}
	})
}

var errBench = errors.New("bench")

func trivial() error { return nil }

func trivialT() (struct{}, error) { return struct{}{}, nil }

// benchBreaker has both thresholds on, so Do reads the clock twice (start
// and end of the call) to detect slow calls; gobreaker reads it twice too.
func benchBreaker() *limit.Breaker {
	return limit.NewBreaker(limit.BreakerConfig{
		ErrorRate: 0.5, SlowCallRate: 0.5, SlowCallDuration: 1e9, MinRequests: 20,
		Window: 10e9, OpenDuration: 5e9, MaxOpenDuration: 60e9, HalfOpenProbes: 3,
	}, nil)
}

// The baseline is named GoBreaker (capital B) so the required filter
// -bench 'Allow|Breaker', which is case-sensitive, selects it.
func gobreakerCB() *gobreaker.CircuitBreaker[struct{}] {
	return gobreaker.NewCircuitBreaker[struct{}](gobreaker.Settings{
		Name: "bench", MaxRequests: 3, Interval: 10e9, Timeout: 5e9,
		ReadyToTrip: func(c gobreaker.Counts) bool {
			return c.Requests >= 20 && c.TotalFailures*2 >= c.Requests
		},
	})
}

func BenchmarkBreakerDo(b *testing.B) {
	br := benchBreaker()
	b.ReportAllocs()
	for b.Loop() {
		if err := br.Do(trivial); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkGoBreakerExecute(b *testing.B) {
	cb := gobreakerCB()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := cb.Execute(trivialT); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkBreakerDoParallel(b *testing.B) {
	br := benchBreaker()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := br.Do(trivial); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkGoBreakerExecuteParallel(b *testing.B) {
	cb := gobreakerCB()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := cb.Execute(trivialT); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkBreakerAllowOpen is the fast-fail path of an open breaker.
func BenchmarkBreakerAllowOpen(b *testing.B) {
	clock := limit.NewFakeClock()
	br := limit.NewBreaker(limit.BreakerConfig{ErrorRate: 0.5, MinRequests: 1, Window: 10e9, OpenDuration: 5e9, HalfOpenProbes: 1}, clock)
	_ = br.Do(func() error { return errBench })
	b.ReportAllocs()
	for b.Loop() {
		if _, err := br.Allow(); !errors.Is(err, limit.ErrOpen) {
			b.Fatal("breaker not open")
		}
	}
}
